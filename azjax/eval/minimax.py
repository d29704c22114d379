"""Alpha-beta negamax in Python over a game's jitted functions: the `minimax` agent, and seed
001's Connect-N heuristic for its depth limit.

search = Minimax(game, depth=9)
search = Minimax(game, depth=5, heuristic="lines2")   # Connect Four, seed 001's Minimax(5)
search.best_moves(state), search.value(state), search.choose(state)
lines_heuristic(game, state, n=2)                      # jittable, float32 for the mover
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from games.base import Game

FULL_DEPTH_LIMIT = 16  # `minimax` without depth= searches whole games only this long, and:
FULL_DEPTH_HEX = 3  # Hex only to 3x3: 4x4's 16 plies outgrew 20 GB of memoised positions in 8
# minutes without an answer, where Connect Four's 4x4 (16 plies) solves in 1.4 s
LINE_GAMES = ("connect_four", "tictactoe")  # k-in-a-row games: the lines heuristic applies
_GAMMA = 0.999  # per-ply discount: quicker wins and slower losses score higher
_EXACT, _LOWER, _UPPER = 0, 1, 2


def solvable_whole(game: Game) -> bool:
    """Whether `minimax` without a depth (and `perfect` where no solver takes the game) can search
    `game` to its end in Python."""
    if game.name == "hex" and game.options.get("size", 0) > FULL_DEPTH_HEX:
        return False
    return game.max_game_length <= FULL_DEPTH_LIMIT


# ---- seed 001's Connect-N heuristic (section 4.2) ------------------------------------------------
_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))  # (row, column) steps: across, down, two diagonals


def count_windows(shape: tuple[int, int], n: int) -> int:
    """The number of lines of n cells (across, down, both diagonals) on a board of `shape`."""
    rows, cols = shape
    return sum(
        max(rows - (n - 1) * dr, 0) * max(cols - (n - 1) * abs(dc), 0) for dr, dc in _DIRECTIONS
    )


def open_lines(mine, theirs, n: int):
    """int32: the lines of exactly n cells (across, down, or along a diagonal) that hold n of
    `mine`'s stones and are not blocked at both ends, where an end (the cell just before or just
    after the n) is blocked when it is off the board or holds one of `theirs`.

    mine, theirs: bool[H, W]. A run of three holds two lines of two, each open at the end where
    the third stone is. Pure and jittable.
    """
    rows, cols = mine.shape
    own = jnp.pad(mine, n, constant_values=False)  # [H + 2n, W + 2n]
    blocked = jnp.pad(theirs, n, constant_values=True)
    total = jnp.int32(0)
    for dr, dc in _DIRECTIONS:

        def cells(x, k, dr=dr, dc=dc):  # [H, W]: x at k steps along (dr, dc) from each origin
            r, c = n + k * dr, n + k * dc
            return x[r : r + rows, c : c + cols]

        line = cells(own, 0)
        for k in range(1, n):
            line = line & cells(own, k)
        closed = cells(blocked, -1) & cells(blocked, n)
        total = total + jnp.sum(line & ~closed, dtype=jnp.int32)
    return total


def lines_heuristic(game: Game, state, *, n: int):
    """float32 in (-1, 1): seed 001's Connect-N heuristic for the player to move in `state`.

    Open lines of n stones (`open_lines`) of the mover minus the opponent's, divided by one more
    than the number of lines of n cells on the board (so that no count difference reaches a won
    game's 1). Reads the mover's and opponent's stone planes of `game.observe`, so it applies to
    any k-in-a-row game on a grid (Connect Four, Tic-Tac-Toe). Pure and jittable.
    """
    planes = game.observe(state) > 0.5  # bool[H, W, 3]: mover's, opponent's, colour plane
    mine, theirs = planes[..., 0], planes[..., 1]
    diff = open_lines(mine, theirs, n) - open_lines(theirs, mine, n)
    return (diff / (count_windows(game.board_shape, n) + 1)).astype(jnp.float32)


HEURISTICS: dict[str, int | None] = {"none": None, "lines2": 2, "lines3": 3}  # name -> n


def check_heuristic(game: Game, heuristic: str) -> None:
    """ValueError naming the accepted heuristics, or the games a lines heuristic applies to."""
    if heuristic not in HEURISTICS:
        raise ValueError(
            f"minimax: unknown heuristic {heuristic!r}; heuristics: {', '.join(HEURISTICS)}"
        )
    if heuristic != "none" and game.name not in LINE_GAMES:
        raise ValueError(
            f"minimax: heuristic={heuristic} counts lines of stones, for {' and '.join(LINE_GAMES)}"
            f" only, not {game.name} (heuristic=none there)"
        )


@functools.cache
def _expander(game: Game, heuristic: str = "none") -> Callable:
    """expand(state) -> (children[A], legal bool[A], terminal bool[A], reward float32[A],
    leaf float32[A]).

    reward[a] is the return, to the player who moves, of the state after action a; leaf[a] is the
    heuristic value of that state for the same player (0 with heuristic "none"). Jitted once per
    game and heuristic.
    """
    actions = jnp.arange(game.num_actions, dtype=jnp.int32)
    n = HEURISTICS[heuristic]

    @jax.jit
    def expand(state):
        children = jax.vmap(game.step, in_axes=(None, 0))(state, actions)
        reward = jax.vmap(game.returns)(children)[:, game.current_player(state)]
        if n is None:
            leaf = jnp.zeros(game.num_actions, jnp.float32)
        else:  # a child's mover is the opponent
            leaf = -jax.vmap(functools.partial(lines_heuristic, game, n=n))(children)
        terminal = jax.vmap(game.is_terminal)(children)
        return children, game.legal_mask(state), terminal, reward, leaf

    return expand


def _state_key(state) -> bytes:
    return b"".join(np.ascontiguousarray(x).tobytes() for x in jax.tree_util.tree_leaves(state))


@dataclasses.dataclass(frozen=True)
class _Node:
    children: Any  # numpy pytree of the A child states
    moves: tuple[int, ...]  # legal actions, immediate wins first
    terminal: np.ndarray  # bool[A]
    reward: np.ndarray  # float32[A], to the mover
    leaf: np.ndarray  # float32[A], the heuristic value to the mover at the depth limit

    def child(self, action: int):
        return jax.tree_util.tree_map(lambda x: x[action], self.children)


class Minimax:
    """Alpha-beta negamax to `depth` plies in Python over the game's jitted functions.

    A state's value for its mover is +1 win / -1 loss / 0 draw, discounted by 0.999 a ply (so
    quicker wins are preferred), and at the depth limit 0 (`heuristic="none"`) or seed 001's
    Connect-N heuristic (`"lines2"`, `"lines3"`: `lines_heuristic` with n = 2, 3). Expanded
    positions and search bounds are memoised by the state's bytes for the agent's lifetime. The
    root's moves are searched with a window that keeps ties exact, and one of the best is picked
    at random (`seed`). Each new position costs one jitted call, so this suits Tic-Tac-Toe,
    Connect Four and small Hex/Othello boards at modest depths; big games are slow.
    """

    def __init__(self, game: Game, *, depth: int, seed: int = 0, heuristic: str = "none"):
        check_heuristic(game, heuristic)
        self.game, self.depth = game, depth
        self.rng = np.random.default_rng(seed)
        self.expand = _expander(game, heuristic)
        self.nodes: dict[bytes, _Node] = {}
        self.table: dict[bytes, tuple[int, float, int]] = {}  # key -> (depth, value, flag)

    def choose(self, state) -> int:
        return int(self.rng.choice(self.best_moves(state)))

    def best_moves(self, state) -> list[int]:
        """The root moves of maximal value (state not terminal)."""
        node = self._node(_state_key(state), state)
        values, best = {}, -math.inf
        for a in node.moves:
            values[a] = self._child_value(node, a, self.depth, best - 1e-9, math.inf)
            best = max(best, values[a])
        return [a for a in node.moves if values[a] > best - 1e-9]

    def value(self, state) -> float:
        """The search value of `state` for its mover (state not terminal)."""
        return self._search(_state_key(state), state, self.depth, -math.inf, math.inf)

    def _node(self, key: bytes, state) -> _Node:
        node = self.nodes.get(key)
        if node is None:
            children, legal, terminal, reward, leaf = jax.device_get(self.expand(state))
            moves = [int(a) for a in np.flatnonzero(legal)]
            moves.sort(key=lambda a: -int(terminal[a] and reward[a] > 0))
            node = self.nodes[key] = _Node(children, tuple(moves), terminal, reward, leaf)
        return node

    def _child_value(self, node: _Node, action: int, depth: int, alpha: float, beta: float):
        if node.terminal[action]:
            return float(node.reward[action])
        if depth <= 1:
            return float(node.leaf[action])
        child = node.child(action)
        return -_GAMMA * self._search(
            _state_key(child), child, depth - 1, -beta / _GAMMA, -alpha / _GAMMA
        )

    def _search(self, key: bytes, state, depth: int, alpha: float, beta: float) -> float:
        entry = self.table.get(key)
        if entry is not None and entry[0] >= depth:
            _, v, flag = entry
            if flag == _EXACT or (flag == _LOWER and v >= beta) or (flag == _UPPER and v <= alpha):
                return v
        node = self._node(key, state)
        alpha0, best = alpha, -math.inf
        for a in node.moves:
            best = max(best, self._child_value(node, a, depth, alpha, beta))
            alpha = max(alpha, best)
            if alpha >= beta:
                break
        flag = _UPPER if best <= alpha0 else _LOWER if best >= beta else _EXACT
        self.table[key] = (depth, best, flag)
        return best
