"""Gating: a new network replaces the best only when it beats it (`--gating=0.55`).

Seed 004 (section 3.6, after AlphaGo Zero) evaluates each new network against the current best
before using it for data generation, and promotes it only when it wins by a margin (> 55%). Here:

- the learner trains the *candidate* (`RunState.train`) without interruption, as in AlphaGo Zero;
  a rejected candidate keeps training (alpha-zero-general instead throws it away and reloads the
  previous weights, which loses the learner's progress at every rejection);
- self-play is played by the *best* network, `RunState.gate.best`, saved in every checkpoint;
- every `gating_interval` iterations the candidate plays `gating_games` games against the best:
  the config's search and simulations, no root noise, the best move of the search. Searches
  without rollouts are deterministic, so two fixed networks would replay one game per colour; each
  game therefore starts after `OPENING_PLIES` uniformly random moves, game i and game i + N/2
  from the same opening with the colours swapped (the candidate moves first in the first half);
- the candidate replaces the best when its score (wins + draws / 2) / games is strictly above
  `gating` (draws count half, where alpha-zero-general leaves them out of the ratio);
- a shared run (`--games`, azjax/shared.py) plays `gating_games` games of each game, and the
  candidate must also score above `GAME_FLOOR` (48%) in every game, as seed 004 asked "to avoid
  the network become good at one game but bad at another".

    gate = make_gate(config)                 # jitted once; `match=` takes a stub in tests
    run, values = gate(run, iteration)       # values: gate/score, gate/accepted, ...

Resuming: a run saved without gating resumes with it (the best starts as the current network),
and a gated run resumes without it (the best is dropped): `restore_template` and `adapt`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from azjax import parallel
from azjax.arena import MatchResult, make_match, make_search_agent
from azjax.network import make_apply, make_network
from azjax.search import SearchSpec
from azjax.selfplay import random_moves
from games.base import Game

OPENING_PLIES = 2  # random moves before each gate game (even: the first player is to move)
GAME_FLOOR = 0.48  # a shared run's candidate must score above this in each game (seed 004)
KEY_STREAM = 0x67617465  # "gate": the gate's keys are folded from fold_in(run.key, KEY_STREAM)


@struct.dataclass
class GateState:
    """The best network and the gate's counters (in `RunState.gate`, None when gating is off)."""

    best: Any  # the best network's variables: self-play plays them
    best_iteration: jax.Array  # int32[], the iteration whose candidate became the best (0: init)
    accepted: jax.Array  # int32[], gates the candidate passed over the run
    gates: jax.Array  # int32[], gates held over the run


def init_gate(variables) -> GateState:
    """The gate of a new run: the best is the untrained network (a copy, not an alias)."""
    return GateState(
        best=jax.tree_util.tree_map(jnp.copy, variables),
        best_iteration=jnp.int32(0),
        accepted=jnp.int32(0),
        gates=jnp.int32(0),
    )


def selfplay_variables(run) -> Any:
    """The network that plays self-play: the best under gating, else the learner's."""
    return run.train.variables if run.gate is None else run.gate.best


def accepts(score: float, threshold: float, game_scores=()) -> bool:
    """Whether a candidate with `score` replaces the best: strictly above the threshold, and
    strictly above `GAME_FLOOR` in each of `game_scores` (a shared run's scores by game)."""
    return score > threshold and all(s > GAME_FLOOR for s in game_scores)


def fixed_opening(game: Game, key, plies: int):
    """The position after exactly `plies` uniformly random legal moves (unbatched; a game that
    ends sooner stays at its end)."""
    return random_moves(game, key, plies, plies)


def make_gate_match(config) -> Callable:
    """match(candidate, best, key) -> (returns of the candidate float32[N], candidate_first
    bool[N]), jitted: N = `gating_games` games from paired random openings (module doc). For a
    shared run, {game: (returns, candidate_first)}: one such match per game."""
    if config.games:
        from azjax import shared

        return shared.per_game(config, make_gate_match)
    game = config.make_game()
    num_games = config.gating_games
    agent = make_search_agent(
        game, SearchSpec.from_config(config), make_apply(make_network(config, game))
    )
    match = make_match(game, agent, agent, num_games)

    @jax.jit
    def gate_match(candidate, best, key):
        k_open, k_play = jax.random.split(key)
        keys = jax.random.split(k_open, num_games // 2)
        openings = jax.vmap(lambda k: fixed_opening(game, k, OPENING_PLIES))(keys)
        starts = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, x]), openings)
        return match(candidate, best, k_play, starts)

    return gate_match


def gate_key(run_key, iteration) -> jax.Array:
    """The key of the gate held after `iteration`, apart from the play/train/eval keys."""
    return jax.random.fold_in(jax.random.fold_in(run_key, KEY_STREAM), iteration)


@jax.jit
def _promote(gate: GateState, candidate, accepted, iteration) -> GateState:
    """The gate after one match: the candidate copied in as the best where `accepted`."""
    return GateState(
        best=jax.tree_util.tree_map(lambda c, b: jnp.where(accepted, c, b), candidate, gate.best),
        best_iteration=jnp.where(accepted, jnp.int32(iteration), gate.best_iteration),
        accepted=gate.accepted + accepted.astype(jnp.int32),
        gates=gate.gates + 1,
    )


def make_gate(config, *, match: Callable | None = None) -> Callable:
    """gate(run, iteration) -> (run, values): the candidate `run.train.variables` plays the best
    (`match`, default `make_gate_match(config)`), and replaces it when its score is strictly above
    `config.gating` (and above `GAME_FLOOR` in each game of a shared run, whose `match` returns
    {game: (returns, candidate_first)}). `values` holds gate/score, gate/wdl, gate/accepted
    (0/1), gate/accepted_total and gate/best_iteration for metrics.jsonl, and a shared run's
    gate/<game>/score and gate/<game>/wdl."""
    match = match or make_gate_match(config)

    def gate(run, iteration: int):
        key = gate_key(run.key, iteration)
        played = parallel.fetch(match(run.train.variables, run.gate.best, key))
        by_game = played if isinstance(played, dict) else {}
        if by_game:
            played = [np.concatenate(parts) for parts in zip(*by_game.values())]
        result = MatchResult.from_returns(*played)
        games = {name: MatchResult.from_returns(*r) for name, r in by_game.items()}
        accepted = accepts(result.score, config.gating, [r.score for r in games.values()])
        new = _promote(run.gate, run.train.variables, jnp.bool_(accepted), iteration)
        run = run.replace(gate=new)
        return run, {
            "gate/score": result.score,
            "gate/wdl": [result.wins, result.draws, result.losses],
            "gate/accepted": int(accepted),
            **{f"gate/{name}/score": r.score for name, r in games.items()},
            **{f"gate/{name}/wdl": [r.wins, r.draws, r.losses] for name, r in games.items()},
            **gate_values(run),
        }

    return gate


def gate_values(run) -> dict[str, int]:
    """gate/accepted_total, gate/gates and gate/best_iteration of a gated run ({} without)."""
    if run.gate is None:
        return {}
    counts = parallel.fetch((run.gate.accepted, run.gate.gates, run.gate.best_iteration))
    return {
        "gate/accepted_total": int(counts[0]),
        "gate/gates": int(counts[1]),
        "gate/best_iteration": int(counts[2]),
    }


# ---- resuming across a change of --gating --------------------------------------------------------
def restore_template(run, saved_gated: bool):
    """`run` (a new run's state) shaped like a checkpoint saved with or without a gate."""
    if saved_gated == (run.gate is not None):
        return run
    return run.replace(gate=init_gate(run.train.variables) if saved_gated else None)


def adapt(run, gating: bool, copy: Callable):
    """A restored run made fit for this session: a gate added (the best = the restored network,
    copied with `copy`, best_iteration = the restored iteration) or dropped."""
    if gating and run.gate is None:
        variables = copy(run.train.variables)
        return run.replace(
            gate=GateState(
                best=variables,
                best_iteration=run.iteration,
                accepted=jnp.zeros_like(run.iteration),
                gates=jnp.zeros_like(run.iteration),
            )
        )
    if not gating and run.gate is not None:
        return run.replace(gate=None)
    return run
