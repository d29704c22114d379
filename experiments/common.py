"""Helpers the experiments share: restoring a checkpoint's network, and confidence intervals."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from azjax import Checkpointer, RunState, init_variables, make_network, read_config
from azjax.training import init_train_state, make_optimizer


def run_template(config) -> RunState:
    """A RunState shaped like the ones `train_and_evaluate(config, ...)` saves."""
    game = config.make_game()
    net = make_network(config, game)
    optimizer = make_optimizer(config, config.iterations * config.train_steps)
    return RunState(
        train=init_train_state(init_variables(net, game, jax.random.PRNGKey(0)), optimizer),
        iteration=jnp.int32(0),
        key=jax.random.PRNGKey(0),
    )


def initial_variables(config):
    """The network a run of `config` starts from (the same key `train_and_evaluate` uses)."""
    game = config.make_game()
    init_key, _ = jax.random.split(jax.random.PRNGKey(config.seed))
    return init_variables(make_network(config, game), game, init_key)


def restore_variables(workdir: str, step: int | None = None):
    """(config, network variables, step) of a checkpoint of `workdir` (default: the latest)."""
    config = read_config(workdir, step)
    checkpointer = Checkpointer(workdir)
    try:
        run, step = checkpointer.restore(run_template(config), step)
    finally:
        checkpointer.close()
    return config, run.train.variables, step


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
