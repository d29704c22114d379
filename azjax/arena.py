"""Batched matches between two agents.

An agent is a pure function `act(variables, key, states[B]) -> int32[B]` giving a legal move for
every (non-terminal) state. `make_search_agent` builds one from a search spec; a match plays N
games at once in one jitted scan, agent A moving first in the first half of the games and second
in the second half (game i and game i + N / 2 share a start).

    act_a = make_search_agent(game, spec_a, apply, epsilon=0.05)
    match = make_match(game, act_a, act_b, num_games=64)
    result = MatchResult.from_returns(*match(variables_a, variables_b, key))

`make_match(..., record=True)` also returns the actions each game played (`MatchGames`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from azjax import parallel
from azjax.parallel import AXIS
from azjax.search import SearchSpec, make_search, select_action
from azjax.selfplay import init_states
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


class MatchGames(NamedTuple):
    """What `make_match(..., record=True)` returns: the results and the moves of N games."""

    returns_a: jax.Array  # float32[N], A's return in each game
    a_first: jax.Array  # bool[N], A played player 0 (black)
    actions: jax.Array  # int32[N, max_game_length], the actions from the start states, -1 after


def make_match(
    game: Game,
    act_a: Act,
    act_b: Act,
    num_games: int,
    *,
    split: bool | None = None,
    record: bool = False,
    mesh: Mesh | None = None,
) -> Callable:
    """match(variables_a, variables_b, key, starts=None) -> (returns_a float32[N], a_first
    bool[N]), jitted; with `record`, a `MatchGames` that also holds each game's actions.

    A plays player 0 (black) in the first half of the games (`a_first`) and player 1 in the
    second. `starts`: N start states (default: the initial position), all with the same player
    to move. Where the players alternate (`game.alternating`) and N is even, each ply every agent
    searches only the half of the games where it is to move; otherwise both search every game
    and the moves of the side to move are kept (`split` forces either way).

    With a `mesh` of D devices (`azjax.parallel`) of one process and N a multiple of 2D, the
    games are split over the devices as self-play's are (`sharded_match`): each plays N / D of
    them, half with each colour, with the key `fold_in(key, device index)`; the results come
    back as host (numpy) arrays in the same order, so game i and game i + N / 2 are still the
    same start with the colours swapped.
    """
    if (
        mesh is not None
        and parallel.num_devices(mesh) > 1
        and num_games % (2 * parallel.num_devices(mesh)) == 0
        and jax.process_count() == 1  # multi-host: not tested yet, so replicated as before
    ):
        return sharded_match(game, act_a, act_b, num_games, mesh, split=split, record=record)
    return jax.jit(_match_fn(game, act_a, act_b, num_games, split=split, record=record))


def _match_fn(game: Game, act_a: Act, act_b: Act, num_games: int, *, split, record) -> Callable:
    """make_match's match, not jitted: N games on one device."""
    a_first = jnp.arange(num_games) < (num_games + 1) // 2
    half = num_games // 2

    def both(states, va, vb, k_a, k_b, to_move):
        del to_move
        mover = jax.vmap(game.current_player)(states)
        a_to_move = (mover == 0) == a_first
        return jnp.where(a_to_move, act_a(va, k_a, states), act_b(vb, k_b, states))

    def halves(states, va, vb, k_a, k_b, to_move):
        # every live game has player `to_move` to move: A's games are the first half when that
        # is player 0, the second half when it is player 1
        a_half = to_move

        def part(h):
            return jax.tree_util.tree_map(
                lambda x: jax.lax.dynamic_slice_in_dim(x, h * half, half), states
            )

        moves_a = act_a(va, k_a, part(a_half))
        moves_b = act_b(vb, k_b, part(1 - a_half))
        return jnp.where(
            a_half == 0, jnp.concatenate([moves_a, moves_b]), jnp.concatenate([moves_b, moves_a])
        )

    if split is None:
        split = game.alternating and num_games % 2 == 0
    moves = halves if split else both

    def ply(carry, xs):
        states, first_mover, va, vb = carry
        key, t = xs
        k_a, k_b = jax.random.split(key)
        action = moves(states, va, vb, k_a, k_b, (first_mover + t) % 2)
        played = jnp.where(jax.vmap(game.is_terminal)(states), -1, action) if record else None
        return (jax.vmap(game.step)(states, action), first_mover, va, vb), played

    def match(variables_a, variables_b, key, starts=None):
        if starts is None:
            starts = init_states(game, num_games)
        keys = jax.random.split(key, game.max_game_length)
        plies = jnp.arange(game.max_game_length)
        # the mover of the first unfinished start (a finished one's "mover" may be the other
        # player): every live game has had as many plies, so `halves` splits them by it
        first = jnp.argmax(~jax.vmap(game.is_terminal)(starts))
        first_mover = game.current_player(jax.tree_util.tree_map(lambda x: x[first], starts))
        (final, _, _, _), played = jax.lax.scan(
            ply, (starts, first_mover, variables_a, variables_b), (keys, plies)
        )  # played: int32[max_game_length, N] with record, else None
        returns = jax.vmap(game.returns)(final)
        returns_a = jnp.where(a_first, returns[:, 0], returns[:, 1])
        if record:
            return MatchGames(returns_a, a_first, played.T.astype(jnp.int32))
        return returns_a, a_first

    return match


def device_order(num_games: int, num_devices: int) -> np.ndarray:
    """int[N]: the games in the order the devices hold them. Device d plays the `N / 2D` games
    from d * N / 2D on in which A moves first, then the same number from N / 2 + d * N / 2D on,
    in which B does, so that each device's first half has A first, as a one-device match."""
    h = num_games // (2 * num_devices)
    return np.concatenate(
        [
            np.concatenate(
                [np.arange(d * h, (d + 1) * h), num_games // 2 + np.arange(d * h, (d + 1) * h)]
            )
            for d in range(num_devices)
        ]
    )


def sharded_match(
    game: Game, act_a: Act, act_b: Act, num_games: int, mesh: Mesh, *, split=None, record=False
) -> Callable:
    """make_match's match with its N games split over the D devices of `mesh` (N % 2D == 0)."""
    d = parallel.num_devices(mesh)
    if num_games % (2 * d):
        raise ValueError(f"{num_games} games do not split into halves over {d} devices")
    local = _match_fn(game, act_a, act_b, num_games // d, split=split, record=record)
    order = device_order(num_games, d)
    back = np.argsort(order)

    def shard(variables_a, variables_b, key, starts):
        return local(
            variables_a, variables_b, jax.random.fold_in(key, jax.lax.axis_index(AXIS)), starts
        )

    # check_vma=False: mctx's loops mix per-device and replicated values in one carry.
    played = jax.shard_map(
        shard, mesh=mesh, in_specs=(P(), P(), P(), P(AXIS)), out_specs=P(AXIS), check_vma=False
    )

    # The results stay split, in device order, and are put back in game order on the host:
    # reordering them in the program would end its long loops with a collective, which waits in
    # XLA:CPU's thread pools (`azjax.parallel`'s module doc).
    @jax.jit
    def run(variables_a, variables_b, key, starts):
        starts = jax.tree_util.tree_map(lambda x: x[order], starts)
        return played(variables_a, variables_b, key, starts)

    everywhere = parallel.replicated(mesh)  # the starts join the mesh the variables are on
    initial = jax.device_put(init_states(game, num_games), everywhere)

    def arguments(variables_a, variables_b, key, starts=None):
        starts = initial if starts is None else jax.device_put(starts, everywhere)
        return variables_a, variables_b, key, starts

    def match(*args, **kwargs):  # numpy results, in game order
        out = parallel.fetch(run(*arguments(*args, **kwargs)))
        return jax.tree_util.tree_map(lambda x: x[back], out)

    match.lower = lambda *args, **kwargs: run.lower(*arguments(*args, **kwargs))  # compile_for
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
