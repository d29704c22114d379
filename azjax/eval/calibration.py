"""Equal time: the simulations a `seconds=T` search agent gets, from timed searches.

`calibrate` times batched searches from the initial position (after compiling) at a few
simulation counts, interpolating towards the count whose batch takes T x (games in the batch).
"""

from __future__ import annotations

import dataclasses
import math
import time

import jax
import numpy as np

from azjax.eval.agent import Agent, batch_functions, with_simulations
from games.base import Game

PROBE_SIMULATIONS = (16, 64)


def calibrate(
    agent: Agent,
    game: Game,
    batch: int,
    key,
    *,
    probes=None,
    tolerance: float = 0.2,
    refinements: int = 3,
) -> Agent:
    """`agent` (with `seconds`) given the simulations whose search of `batch` games at once takes
    about seconds x batch.

    Times one search of `batch` initial states (after compiling) at each probe count (default
    `PROBE_SIMULATIONS`), then at the count a line through the two timings closest to the budget
    predicts, until one is within `tolerance` of it or `refinements` are spent (the cost of a
    simulation grows with the tree, so a first straight line can be far off). Each count costs a
    compile, which the match then reuses. Agents without `seconds`, or already calibrated, are
    returned as they are.
    """
    setup = agent.search
    if setup is None or setup.seconds is None or setup.calibrated:
        return agent
    budget = setup.seconds * batch
    states = jax.device_get(batch_functions(game).init(batch))  # host arrays, as `play_games` has
    times = {
        n: _time_search(with_simulations(agent, n), states, key)
        for n in probes or PROBE_SIMULATIONS
    }
    sims = _predict(times, budget)
    for _ in range(refinements):
        if sims in times:
            break
        times[sims] = _time_search(with_simulations(agent, sims), states, key)
        if abs(times[sims] - budget) <= tolerance * budget:
            break
        sims = _predict(times, budget)
    calibrated = with_simulations(agent, sims)
    return dataclasses.replace(
        calibrated, search=dataclasses.replace(calibrated.search, calibrated=True)
    )


def _predict(times: dict[int, float], budget: float) -> int:
    """Simulations taking `budget` seconds, on the line through the nearest timings either side
    of it (or the two nearest, when all lie on one side)."""
    below = [kv for kv in times.items() if kv[1] <= budget]
    above = [kv for kv in times.items() if kv[1] > budget]
    if below and above:
        pair = [max(below, key=lambda kv: kv[1]), min(above, key=lambda kv: kv[1])]
    else:
        pair = sorted(times.items(), key=lambda kv: abs(kv[1] - budget))[:2]
    (n0, t0), (n1, t1) = sorted(pair)
    slope = (t1 - t0) / (n1 - n0)
    if slope <= 0:  # timing noise: assume time proportional to simulations
        return int(np.clip(round(n1 * budget / max(t1, 1e-9)), 1, 100_000))
    return int(np.clip(round(n0 + (budget - t0) / slope), 1, 100_000))


def _time_search(agent: Agent, states, key, repeats: int = 2) -> float:
    """The fastest of `repeats` timed searches of the batch `states`, after compiling."""
    act = jax.jit(agent.act)
    jax.block_until_ready(act(agent.variables, key, states))  # compile
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(act(agent.variables, key, states))
        best = min(best, time.perf_counter() - t0)
    return best
