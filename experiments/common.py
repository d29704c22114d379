"""Helpers the experiments share: restoring a checkpoint's network, and confidence intervals."""

from __future__ import annotations

import math

from azjax import Checkpointer
from azjax.agents import load_checkpoint
from azjax.loop import initial_variables  # noqa: F401  (re-exported for the experiments)


restore_variables = load_checkpoint  # (config, network variables, step) of a run's checkpoint


def checkpoint_steps(workdir: str) -> list[int]:
    checkpointer = Checkpointer(workdir)
    try:
        return sorted(checkpointer.steps())
    finally:
        checkpointer.close()


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (95% for z = 1.96) of a proportion successes / n."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))
