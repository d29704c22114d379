"""Batched matches between two agents.

An agent is a pure function `act(variables, key, states[B]) -> int32[B]` giving a legal move for
every (non-terminal) state. `make_search_agent` builds one from a search spec; a match plays N
games at once in one jitted scan, agent A moving first in the even-numbered games and second in
the odd ones.

    act_a = make_search_agent(game, spec_a, apply, epsilon=0.05)
    match = make_match(game, act_a, act_b, num_games=64)
    result = MatchResult.from_returns(*match(variables_a, variables_b, key))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from azjax.search import SearchSpec, make_search, select_action
from games.base import Game, sample_legal

Act = Callable  # (variables, key, states[B]) -> int32[B]


def make_search_agent(
    game: Game, spec: SearchSpec, apply: Callable | None, epsilon: float = 0.0
) -> Act:
    """Search, then play the best move; with probability `epsilon` a uniformly random legal one."""
    search = make_search(game, spec, apply)
    random_act = make_random_agent(game)

    def act(variables, key, states):
        k_search, k_select, k_eps, k_rand = jax.random.split(key, 4)
        out = search(variables, k_search, states)
        best = select_action(k_select, spec, out, jnp.zeros(out.action.shape, bool))
        if epsilon <= 0:
            return best
        rand = random_act(None, k_rand, states)
        explore = jax.random.bernoulli(k_eps, epsilon, best.shape)
        return jnp.where(explore, rand, best)

    return act


def make_random_agent(game: Game) -> Act:
    def act(variables, key, states):
        del variables
        legal = jax.vmap(game.legal_mask)(states)
        return jax.vmap(sample_legal)(jax.random.split(key, legal.shape[0]), legal)

    return act


def make_match(game: Game, act_a: Act, act_b: Act, num_games: int) -> Callable:
    """match(variables_a, variables_b, key) -> (returns_a float32[N], a_first bool[N]), jitted."""
    a_first = jnp.arange(num_games) % 2 == 0

    def ply(carry, key):
        states, va, vb = carry
        k_a, k_b = jax.random.split(key)
        mover = jax.vmap(game.current_player)(states)
        a_to_move = (mover == 0) == a_first
        action = jnp.where(a_to_move, act_a(va, k_a, states), act_b(vb, k_b, states))
        return (jax.vmap(game.step)(states, action), va, vb), None

    @jax.jit
    def match(variables_a, variables_b, key):
        states = jax.vmap(lambda _: game.init())(jnp.arange(num_games))
        keys = jax.random.split(key, game.max_game_length)
        (final, _, _), _ = jax.lax.scan(ply, (states, variables_a, variables_b), keys)
        returns = jax.vmap(game.returns)(final)
        return jnp.where(a_first, returns[:, 0], returns[:, 1]), a_first

    return match


@dataclasses.dataclass(frozen=True)
class MatchResult:
    """Wins, draws and losses of agent A, overall and split by who moved first."""

    wins: int
    draws: int
    losses: int
    first: tuple[int, int, int]  # (w, d, l) in the games A moved first
    second: tuple[int, int, int]  # (w, d, l) in the games A moved second

    @staticmethod
    def from_returns(returns_a, a_first) -> MatchResult:
        r, f = np.asarray(returns_a), np.asarray(a_first)

        def wdl(mask):
            return (int(np.sum(r[mask] > 0)), int(np.sum(r[mask] == 0)), int(np.sum(r[mask] < 0)))

        w, d, l = wdl(np.ones_like(f))
        return MatchResult(w, d, l, wdl(f), wdl(~f))

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """(wins + draws / 2) / games, as seed 000 reports it."""
        return (self.wins + 0.5 * self.draws) / max(self.games, 1)
