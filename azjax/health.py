"""Whether a training run is sane (docs/reliability.md): every loss finite and the total below
LOSS_FACTOR x the run's first loss, the parameters finite and their norm within NORM_FACTOR of
the session's start (`Health`); where not, the loop saves nothing of that iteration and stops
with a `DivergenceError` naming the last checkpoint known healthy (`divergence`)."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax import parallel
from azjax.checkpoint import Checkpointer
from azjax.metrics import Metrics

LOSS_FACTOR = 10.0  # a loss above LOSS_FACTOR x the run's first loss is divergence
NORM_FACTOR = 1000.0  # parameters whose norm grew this much over the session's start: divergence


class DivergenceError(RuntimeError):
    """The losses or the parameters stopped being sane; nothing of them was saved."""


@jax.jit
def square_norm(variables) -> jax.Array:
    """float32[]: the parameters' squared norm (inf or NaN where one is not finite)."""
    return sum(jnp.sum(jnp.square(p)) for p in jax.tree_util.tree_leaves(variables["params"]))


class Health:
    """Whether a run is sane: every loss finite and the total below LOSS_FACTOR x the run's
    first loss (`reference`, from metrics.jsonl where the run has one, else the first of this
    session), the parameters finite and their norm within NORM_FACTOR of the session's start."""

    def __init__(self, variables, reference: float | None):
        self.reference = reference
        self.norm0 = math.sqrt(float(parallel.fetch(square_norm(variables))))

    def losses(self, values: dict[str, Any]) -> str | None:
        """What is wrong with an iteration's losses, or None."""
        bad = [k for k, v in values.items() if k.startswith("loss/") and not math.isfinite(v)]
        if bad:
            return f"non-finite {', '.join(bad)}"
        if "loss/total" not in values:
            return None
        if self.reference is None:
            self.reference = values["loss/total"]
        bound = LOSS_FACTOR * max(self.reference, 1e-3)
        if values["loss/total"] > bound:
            l2 = values.get("loss/l2", 0.0)
            most = f", loss/l2 {l2:.3g} the most of it" if l2 > values["loss/total"] / 2 else ""
            return (
                f"loss/total {values['loss/total']:.3g} above {bound:.3g} ({LOSS_FACTOR:g} x "
                f"the run's first loss, {self.reference:.3g}{most})"
            )
        return None

    def parameters(self, variables) -> str | None:
        square = float(parallel.fetch(square_norm(variables)))
        if not math.isfinite(square):  # NaN too: max(0.0, nan) is 0.0, a norm that passes
            return "non-finite parameters"
        norm = math.sqrt(max(0.0, square))
        if norm > NORM_FACTOR * max(self.norm0, 1e-3):
            return (
                f"the parameters' norm {norm:.3g} is over {NORM_FACTOR:g} x the "
                f"{self.norm0:.3g} they started this session with"
            )
        return None


def reference_loss(metrics: Metrics | None) -> float | None:
    """The run's first loss/total, from process 0's metrics, the same on every process."""
    first = None
    if metrics is not None:
        first = next((r["loss/total"] for r in metrics.rows if "loss/total" in r), None)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        value = multihost_utils.broadcast_one_to_all(np.float64(-1 if first is None else first))
        first = None if value < 0 else float(value)
    return first


def divergence(
    it: int, reason: str, checkpointer: Checkpointer, workdir: str, healthy_upto: int
) -> DivergenceError:
    """The report: the last checkpoint whose parameters were checked sane (those up to
    `healthy_upto`; a loss judges the parameters of the iteration before it)."""
    healthy = [s for s in checkpointer.steps() if s <= healthy_upto]
    suspect = [s for s in checkpointer.steps() if s > healthy_upto]
    lower = "--weight_decay" if "loss/l2" in reason else "--learning_rate"  # the L2 term's c
    if healthy:
        where = (
            f"the last healthy checkpoint is {healthy[-1]}: continue from it with --resume "
            f"--resume_step={healthy[-1]} and a lower {lower}"
        )
    else:
        where = f"no checkpoint is known healthy: start again with a lower {lower}"
    if suspect:
        where += f" (checkpoint {suspect[-1]} led to this iteration)"
    return DivergenceError(
        f"iteration {it}: the run diverged ({reason}); not saved. In {workdir}, {where}"
    )
