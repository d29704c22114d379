"""What the Expert Iteration experiments share: greedy-network and expert agents, matches of one
game per legal opening move with each colour (the paper's protocol), Elo differences."""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp

from azjax.eval.agent import Agent
from azjax.eval.match import play_games
from azjax.eval.openings import both_colours, openings
from azjax.eval.stats import score_ci
from azjax.exit import ExpertSpec, make_expert_agent
from azjax.search import make_evaluator


def greedy_agent(name: str, game, apply, variables) -> Agent:
    """The apprentice as the paper tests it: the network's most likely legal move. Agents of one
    game and `apply` share one act function, so their matches compile once."""
    return Agent(name=name, batched=True, act=_greedy_act(game, apply), variables=variables)


def expert_agent(name: str, game, spec: ExpertSpec, apply, variables) -> Agent:
    """The ExIt expert (or vanilla MCTS: `ExpertSpec.vanilla`) playing its most visited move."""
    return Agent(name=name, batched=True, act=_expert_act(game, spec, apply), variables=variables)


@functools.cache
def _greedy_act(game, apply):
    policy = make_evaluator(game, "network", apply)

    def act(variables, key, states):
        del key
        return jnp.argmax(policy(variables, states)[0], axis=-1).astype(jnp.int32)

    return act


@functools.cache
def _expert_act(game, spec: ExpertSpec, apply):
    return make_expert_agent(game, spec, apply)


def opening_match(game, a: Agent, b: Agent, key) -> dict:
    """A against B, one game per legal first move with each colour; A's score with its 95%
    interval, W/D/L and the Elo difference it implies."""
    moves = both_colours(openings(game, "all"))
    outcome = play_games(game, a, b, len(moves), key, openings=moves)
    r = outcome.result
    score, half = score_ci(r.wins, r.draws, r.losses)
    return dict(
        a=a.name,
        b=b.name,
        games=len(moves),
        wdl=[r.wins, r.draws, r.losses],
        score=score,
        ci95=half,
        elo=elo_difference(score),
        elo_ci95=[elo_difference(max(score - half, 0.0)), elo_difference(min(score + half, 1.0))],
        seconds=round(outcome.wall_seconds, 1),
    )


def elo_difference(score: float, games_floor: float = 1e-3) -> float:
    """400 log10(s / (1 - s)), with s clipped to [0.001, 0.999] (a sweep would be infinite)."""
    s = min(max(score, games_floor), 1 - games_floor)
    return 400 * math.log10(s / (1 - s))
