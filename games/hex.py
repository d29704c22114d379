"""Hex on a size x size rhombus, with an optional swap (pie) rule.

Board indices (action = row * size + col, row 1 at the top as printed), shown for size 4; each row
is shifted half a cell right of the one above, so a cell touches six others:

     0  1  2  3          a1 b1 c1 d1
       4  5  6  7          a2 b2 c2 d2
         8  9 10 11   ->     a3 b3 c3 d3
          12 13 14 15          a4 b4 c4 d4

Neighbours of (r, c): (r-1, c), (r-1, c+1), (r, c-1), (r, c+1), (r+1, c-1), (r+1, c).

Player 0 is black (X), moves first and connects the top and bottom rows; player 1 is white (O) and
connects the left and right columns. A full board always has exactly one winner, so there are no
draws. `board` holds 0 empty, 1 black, 2 white; `group` gives each stone the id of its connected
group (1 + the index of one of its cells) so that `step` finds a win with a few vectorised
compares: the new stone takes a fresh id, every cell sharing an id with a same-coloured neighbour
is relabelled to it, and the mover has won when that group touches both of their edges.

Swap (``swap=True``): one extra action, ``size * size``, named "swap" and legal only as the second
ply (``num_moves == 1``). It is the "swap pieces" convention of HexGui and MoHex, also OpenSpiel's:
black's single stone at (r, c) is removed, a white stone is put on the mirrored cell (c, r), and
black is to move again; players keep their colours (player 0 is always black). Seen from the
board, white has taken over black's opening move.

Policy frame: `observe` transposes the board for white so that the player to move always connects
top and bottom; `policy_to_actions` / `actions_to_policy` transpose the size*size part of a policy
vector the same way for white (the swap entry stays last).

Illegal actions are not checked by the jitted core: playing on an occupied cell overwrites it
(and leaves the groups of the overwritten colour stale); "swap" at any other ply empties the board
but for a white stone mirroring the lowest-indexed stone. `parse_action` rejects such moves.

Against OpenSpiel (``hex(board_size=n)``, also with ``swap=True``) the action numbers are the same:
its player 0 ('x') also connects top and bottom, its cells are ``row * n + col`` and its swap action
is ``n * n`` with the same swap-pieces effect.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from games.base import (
    Game,
    GameState,
    absorbing,
    base_fields,
    check_range,
    column_letters,
    playout_unroll,
    sample_legal,
    stone_planes,
    win_rewards,
)


class _Tables(NamedTuple):
    """Constant tables for one board size; N = size * size."""

    neighbours: np.ndarray  # int32[N, 6], a cell's neighbours; off-board ones are the cell itself
    transpose: np.ndarray  # int32[N], index of (c, r) for the cell (r, c)
    edges: np.ndarray  # bool[2, 2, N], [player, edge, cell]: black top/bottom, white left/right


@functools.cache
def _tables(size: int) -> _Tables:
    r, c = np.divmod(np.arange(size * size), size)
    steps = [(-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0)]
    nr = r[:, None] + np.array([s[0] for s in steps])
    nc = c[:, None] + np.array([s[1] for s in steps])
    on_board = (nr >= 0) & (nr < size) & (nc >= 0) & (nc < size)
    self_index = np.broadcast_to(np.arange(size * size)[:, None], nr.shape)
    neighbours = np.where(on_board, nr * size + nc, self_index).astype(np.int32)
    edges = np.stack([np.stack([r == 0, r == size - 1]), np.stack([c == 0, c == size - 1])])
    return _Tables(neighbours, (c * size + r).astype(np.int32), edges)


@struct.dataclass
class HexState(GameState):
    board: jnp.ndarray  # int8[N]: 0 empty, 1 black (player 0), 2 white (player 1)
    group: jnp.ndarray  # int32[N]: 0 where empty, else the id of the stone's connected group


@dataclasses.dataclass(frozen=True)
class Hex(Game):
    """Options: ``size`` (2..19, default 11) and ``swap`` (the pie rule, default off)."""

    name = "hex"

    size: int = 11
    swap: bool = False

    @property
    def alternating(self) -> bool:
        return not self.swap  # after a swap black moves again

    def __post_init__(self):
        check_range(self.name, "size", self.size, 2, 19)
        if not isinstance(self.swap, bool):
            raise ValueError(f"{self.name}: swap must be True or False, got {self.swap!r}")

    # ---- static sizes -------------------------------------------------------------------------
    @property
    def num_cells(self) -> int:
        return self.size * self.size

    @property
    def num_actions(self) -> int:
        return self.num_cells + int(self.swap)

    @property
    def board_shape(self) -> tuple[int, int]:
        return (self.size, self.size)

    @property
    def max_game_length(self) -> int:
        return self.num_cells + int(self.swap)  # after a swap the board holds one stone at ply 2

    # ---- pure state functions -----------------------------------------------------------------
    def init(self) -> HexState:
        return HexState(
            board=jnp.zeros(self.num_cells, jnp.int8),
            group=jnp.zeros(self.num_cells, jnp.int32),
            **base_fields(),
        )

    def step(self, state: HexState, action) -> HexState:
        new = self._place(state, jnp.minimum(action, self.num_cells - 1))
        if self.swap:
            swapped = self._swap(state)
            new = jax.tree_util.tree_map(
                lambda a, b: jnp.where(action == self.num_cells, a, b), swapped, new
            )
        return absorbing(state, new)

    def _place(self, state: HexState, cell) -> HexState:
        """The mover's stone on `cell`: merge the groups it touches, check for a win."""
        tables = _tables(self.size)
        stone = (state.player + 1).astype(jnp.int8)
        neighbours = jnp.asarray(tables.neighbours)[cell]  # [6]; off-board: `cell`, still empty
        touching = jnp.where(state.board[neighbours] == stone, state.group[neighbours], -1)  # [6]
        new_id = cell + 1
        merged = jnp.any(state.group[:, None] == touching[None, :], axis=1) | (
            jnp.arange(self.num_cells) == cell
        )
        group = jnp.where(merged, new_id, state.group)
        edges = jnp.asarray(tables.edges)[state.player]  # [2, N]
        won = jnp.all(jnp.any(merged[None, :] & edges, axis=1))
        return HexState(
            board=state.board.at[cell].set(stone),
            group=group,
            player=1 - state.player,
            terminal=won,
            rewards=jnp.where(won, win_rewards(state.player), jnp.zeros(2, jnp.float32)),
            num_moves=state.num_moves + 1,
        )

    def _swap(self, state: HexState) -> HexState:
        """Swap pieces: black's lone stone becomes a white stone on the mirrored cell."""
        mirrored = jnp.asarray(_tables(self.size).transpose)[jnp.argmax(state.board != 0)]
        return HexState(
            board=jnp.zeros_like(state.board).at[mirrored].set(2),
            group=jnp.zeros_like(state.group).at[mirrored].set(mirrored + 1),
            player=1 - state.player,  # swap is white's move: black (player 0) moves next
            terminal=jnp.bool_(False),
            rewards=jnp.zeros(2, jnp.float32),
            num_moves=state.num_moves + 1,
        )

    def legal_mask(self, state: HexState):
        cells = (state.board == 0) & ~state.terminal
        if self.swap:
            return jnp.append(cells, (state.num_moves == 1) & ~state.terminal)
        return cells

    def _stones(self, state: HexState, player):
        """(own, opp): bool[size, size], the stones of `player` and of the opponent in `player`'s
        frame (transposed for white: white's left/right become top/bottom)."""
        shape = self.board_shape
        own = (state.board == player + 1).reshape(shape)
        opp = (state.board == 2 - player).reshape(shape)
        white = player == 1
        return jnp.where(white, own.T, own), jnp.where(white, opp.T, opp)

    def observe(self, state: HexState):
        return stone_planes(*self._stones(state, state.player), state.player)

    def _transposed(self) -> np.ndarray:
        """int32[A]: the board transpose as a gather of actions (the swap entry stays last)."""
        transposed = np.arange(self.num_actions, dtype=np.int32)
        transposed[: self.num_cells] = _tables(self.size).transpose
        return transposed

    def _frame_permutation(self, state: HexState):
        """int32[A]: the identity for black, the board transpose for white (an involution)."""
        identity = np.arange(self.num_actions, dtype=np.int32)
        return jnp.asarray(np.stack([identity, self._transposed()]))[state.player]

    @property
    def opponent_frames(self) -> np.ndarray:
        """Each player's frame is the other's transposed (`Game.opponent_frames`)."""
        return np.stack([self._transposed()] * 2)

    def ownership(self, state: HexState, player):
        """float32[size, size]: +1 `player`'s stones, -1 the opponent's, 0 empty, in `player`'s
        frame (transposed for white, as `observe`)."""
        own, opp = self._stones(state, player)
        return own.astype(jnp.float32) - opp.astype(jnp.float32)

    def policy_to_actions(self, state: HexState, x):
        return x[self._frame_permutation(state)]

    def actions_to_policy(self, state: HexState, x):
        return x[self._frame_permutation(state)]

    def random_playout(self, state: HexState, key):
        """Returns of a uniformly random playout, found by filling the board in one go.

        The empty cells get a uniformly random split of the stones still to play (the mover gets
        ceil(empty / 2) of them), then one flood fill tells whether black joins top and bottom. A
        full Hex board has exactly one winner whatever the order the stones went down in, so this
        has the distribution of a move-by-move random playout. With swap on, a state that can still
        reach the swap ply first plays black's opening (at ply 0) and then swaps with the
        probability a uniform pick of the swap action has, so the swap rule is followed exactly.
        """
        if self.swap:
            key, opening_key, swap_key = jax.random.split(key, 3)
            state = self._resolve_swap(state, opening_key, swap_key)
        empty = state.board == 0
        to_mover = empty & _random_subset(key, empty, (jnp.sum(empty) + 1) // 2)
        black = (state.board == 1) | (empty & (to_mover == (state.player == 0)))
        winner = jnp.where(_black_connects(black.reshape(self.board_shape)), 0, 1)
        return jnp.where(state.terminal, state.rewards, win_rewards(winner))

    def _resolve_swap(self, state: HexState, opening_key, swap_key) -> HexState:
        """Play the random moves up to and including the swap ply, if that ply is still ahead."""
        cells = (state.board == 0) & ~state.terminal
        opened = self._place(state, sample_legal(opening_key, cells))
        state = jax.tree_util.tree_map(
            lambda a, b: jnp.where(state.num_moves == 0, a, b), opened, state
        )
        legal_count = jnp.sum(self.legal_mask(state))
        swaps = (state.num_moves == 1) & (jax.random.uniform(swap_key) * legal_count < 1.0)
        swapped = self._swap(state)
        return jax.tree_util.tree_map(lambda a, b: jnp.where(swaps, a, b), swapped, state)

    # ---- human / protocol side ----------------------------------------------------------------
    def action_to_str(self, action: int) -> str:
        action = self.checked_action(action)
        if action == self.num_cells:
            return "swap"
        row, col = divmod(action, self.size)
        return f"{column_letters(self.size)[col]}{row + 1}"

    def _parse_move(self, text: str):
        if text == "swap":
            return self.num_cells if self.swap else None
        letters, digits = text[:1], text[1:]
        if not (letters and letters in column_letters(self.size) and digits.isdigit()):
            return None
        row = int(digits)  # a01 parses here; parse_action refuses it (action_to_str says a1)
        if not 1 <= row <= self.size:
            return None
        return (row - 1) * self.size + column_letters(self.size).index(letters)

    def render(self, state: HexState) -> str:
        marks = np.array([".", "X", "O"])[np.asarray(state.board)].reshape(self.board_shape)
        lines = [
            "X (black, player 0) joins top and bottom; O (white, player 1) joins left and right",
            "    " + " ".join(column_letters(self.size)),
        ]
        for r in range(self.size):
            lines.append(f"{r + 1:>2}  " + " " * r + " ".join(marks[r]))
        return "\n".join(lines)


def _random_subset(key, candidates, count):
    """bool[N]: `count` of the True cells of `candidates`, every such subset equally likely.

    Candidates get random 31-bit keys (the others sort after them) and the `count` smallest are
    taken: one sort finds the threshold key. Keys tie about N^2 / 2^32 of the time; a tie at the
    threshold is broken by index, so exactly `count` cells come back.
    """
    bits = jax.random.bits(key, candidates.shape, jnp.uint32)
    keys = jnp.where(candidates, bits >> 1, jnp.uint32(2**32 - 1))
    threshold = jnp.sort(keys)[jnp.maximum(count - 1, 0)]
    below, tied = keys < threshold, keys == threshold
    return candidates & (below | (tied & (jnp.cumsum(tied) <= count - jnp.sum(below))))


def _black_connects(black):
    """Whether the black stones of a bool[n, n] board join the top row to the bottom row.

    Rows are bit masks (bit c = column c); the stones reachable from the top row grow by their
    six neighbours, restricted to black stones, until nothing changes. Each loop iteration grows
    2 x `playout_unroll()` times: twice on the CPU, which on random 11x11 boards measured fastest
    there (about 6 iterations, 15 at most in 1024), eight times on a GPU or TPU (growing changes
    nothing once the reach is whole, so the result is the same).
    """
    n = black.shape[0]
    rows = jnp.sum(black.astype(jnp.uint32) << jnp.arange(n, dtype=jnp.uint32), axis=1)  # [n]
    none = jnp.zeros(1, jnp.uint32)

    def grow(reach):
        above = jnp.concatenate([none, reach[:-1]])  # row r-1 seen from row r: columns c, c+1
        below = jnp.concatenate([reach[1:], none])  # row r+1 seen from row r: columns c-1, c
        near = reach | (reach << 1) | (reach >> 1) | above | (above >> 1) | below | (below << 1)
        return near & rows

    grows = 2 * playout_unroll()

    def body(carry):
        _, reach = carry
        for _ in range(grows - 1):
            reach = grow(reach)
        return reach, grow(reach)

    start = rows.at[1:].set(0)
    _, reach = jax.lax.while_loop(lambda c: jnp.any(c[0] != c[1]), body, (start, grow(start)))
    return reach[-1] != 0
