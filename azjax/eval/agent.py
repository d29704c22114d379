"""What an agent is: the `Agent` record, its search settings, its constructors and jit caches.

An `Agent` is either batched, with a jittable `act(variables, key, states[B]) -> int32[B]` (B
games at once, `variables` passed in: an `azjax.arena.Act`), or a Python agent with
`choose(state) -> action` for one unbatched state plus hooks: `reset()` before each game and
`observe_move(state, action)` for each move the opponent plays (a GTP engine must be told them).
A Python agent may return `RESIGN`.

Agents with the same settings share one act function (the lru caches below), so jax.jit compiles
each search once per process however often it is built (a tournament, a curve over many
checkpoints, calibration).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from azjax.arena import make_random_agent, make_search_agent
from azjax.config import Config
from azjax.network import make_apply, make_network
from azjax.search import SearchSpec
from games.base import Game

RESIGN = -1  # what a Python agent's `choose` (or a `Player`) returns to resign


class Colour(NamedTuple):
    """How one player is named: player 0 moves first."""

    letter: str  # GTP's short name
    name: str  # GTP's long name
    stone: str  # the mark the boards draw

    @property
    def label(self) -> str:
        return f"{self.stone} ({self.name})"


COLOURS = (Colour("b", "black", "X"), Colour("w", "white", "O"))  # player 0, player 1


def _nothing(*args) -> None:
    del args


@dataclasses.dataclass(frozen=True)
class SearchSetup:
    """How a search agent searches; kept so `seconds` can re-make it with other simulations."""

    game: Game
    spec: SearchSpec
    apply: Callable | None  # the network's apply, None for pure MCTS
    epsilon: float = 0.0  # probability of a uniformly random legal move instead of the best
    seconds: float | None = None  # time per move per game; simulations set by `calibrate`
    calibrated: bool = False

    def make_act(self) -> Callable:
        return _search_act(self.game, self.spec, self.apply, self.epsilon)

    @property
    def rollouts_per_move(self) -> float:
        """Expected rollouts per move: the root and every new leaf roll out with p = p_r."""
        if self.spec.rollout_policy == "none":
            return 0.0
        return self.spec.rollout_prob * (self.spec.num_simulations + 1)


@dataclasses.dataclass(frozen=True)
class Agent:
    """A player: batched (`act`, `variables`) or Python (`choose`, `reset`, `observe_move`)."""

    name: str
    batched: bool
    act: Callable | None = None  # (variables, key, states[B]) -> int32[B], jittable
    variables: Any = None  # the network's variables for `act` (None without a network)
    choose: Callable | None = None  # (state) -> action, or RESIGN
    reset: Callable = _nothing  # () -> None, before each game
    observe_move: Callable = _nothing  # (state, action) -> None, after each opponent move
    close: Callable = _nothing  # () -> None, when done (ends a GTP engine)
    stateful: bool = False  # holds one game at a time: its games are played one by one
    search: SearchSetup | None = None  # search agents (ckpt, mcts)
    checkpoint: str | None = None  # a ckpt agent's network: "RUN@STEP", the step resolved
    game: Game | None = None  # the game it was made for (None: its search's, or not recorded)

    def check_game(self, game: Game) -> None:
        """ValueError where the agent was made for another game than `game` (a different game or
        rules: a 5x5 Hex agent would otherwise pick 5x5 moves on a 6x6 board). Observation
        options may differ (`Game.same_rules`)."""
        made_for = self.game
        if made_for is None and self.search is not None:
            made_for = self.search.game
        if made_for is not None and not made_for.same_rules(game):
            raise ValueError(
                f"agent {self.name!r} was made for {made_for.name} {made_for.rules}, "
                f"not {game.name} {game.rules}: build it for the game it plays"
            )


def search_agent(
    name: str, setup: SearchSetup, variables=None, checkpoint: str | None = None
) -> Agent:
    return Agent(
        name=name,
        batched=True,
        act=setup.make_act(),
        variables=variables,
        search=setup,
        checkpoint=checkpoint,
    )


def with_simulations(agent: Agent, simulations: int) -> Agent:
    """The same search agent with another number of simulations per move."""
    setup = dataclasses.replace(
        agent.search, spec=dataclasses.replace(agent.search.spec, num_simulations=simulations)
    )
    return dataclasses.replace(agent, search=setup, act=setup.make_act())


def random_agent(name: str, game: Game) -> Agent:
    """A uniformly random legal move."""
    return Agent(name=name, batched=True, act=_random_act(game), game=game)


def network_apply(config: Config) -> Callable:
    """The network's apply for a run's config; one function per architecture and game, so the
    checkpoints of one run share their compiled searches."""
    return _apply_for(
        config.make_game(),
        config.num_blocks,
        config.num_filters,
        config.value_hidden,
        config.dtype,
        config.ownership_weight > 0,
        config.value_head,
        config.global_pool,
        config.policy_head_kernel,
    )


# ---- jit caches ----------------------------------------------------------------------------------
@functools.cache
def _search_act(game: Game, spec: SearchSpec, apply: Callable | None, epsilon: float) -> Callable:
    return make_search_agent(game, spec, apply, epsilon)


@functools.cache
def _apply_for(
    game: Game,
    num_blocks: int,
    num_filters: int,
    value_hidden: int,
    dtype: str,
    owned: bool,
    value_head: str,
    pooled: bool,
    policy_kernel: int,
):
    config = Config(
        num_blocks=num_blocks,
        num_filters=num_filters,
        value_hidden=value_hidden,
        dtype=dtype,
        ownership_weight=1.0 if owned else 0.0,  # the ownership head (the score utility reads it)
        value_head=value_head,
        global_pool=pooled,
        policy_head_kernel=policy_kernel,
    )
    return make_apply(make_network(config, game))


@functools.cache
def _random_act(game: Game) -> Callable:
    return make_random_agent(game)


class BatchFunctions(NamedTuple):
    """A game's jitted batched helpers, shared by calibration and the Python-loop matches."""

    init: Callable  # (n) -> states[n]
    step: Callable  # (states[n], int32[n]) -> states[n]
    status: Callable  # (states[n]) -> (terminal bool[n], mover int32[n], returns float32[n, 2])
    legal: Callable  # (states[n]) -> bool[n, A]


@functools.cache
def batch_functions(game: Game) -> BatchFunctions:
    init = jax.jit(lambda n: jax.vmap(lambda _: game.init())(jnp.arange(n)), static_argnums=0)

    @jax.jit
    def status(states):
        return (
            jax.vmap(game.is_terminal)(states),
            jax.vmap(game.current_player)(states),
            jax.vmap(game.returns)(states),
        )

    return BatchFunctions(
        init, jax.jit(jax.vmap(game.step)), status, jax.jit(jax.vmap(game.legal_mask))
    )
