"""The m,n,k-game: two players take turns placing stones on an n-row, m-column board; the first to
get k in a row (horizontally, vertically or diagonally) wins, a full board without one is a draw.
Tic-Tac-Toe is the 3,3,3-game, free-style Gomoku the 15,15,5-game. The worked example of
docs/adding_a_game.md; OpenSpiel's `mnk` game plays the same rules with the same action numbers.

Board indices for m=4, n=3 (action = row * m + col), row 1 at the top as printed:

    0  1  2  3        a1 b1 c1 d1
    4  5  6  7   ->   a2 b2 c2 d2
    8  9 10 11        a3 b3 c3 d3

Player 0 is X and moves first. `board` holds 0 empty, 1 for X, 2 for O. Playing on an occupied
cell (illegal) overwrites it; the jitted core does not check.

    import games
    games.register("mnk", "examples.mnk_game:MNKGame")
    game = games.make("mnk", m=5, n=5, k=4)
"""

from __future__ import annotations

import dataclasses
import functools

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
    stone_planes,
    win_rewards,
)

MAX_SIDE = 19  # move names use one column letter; 19 is the largest Go / Gomoku board


@functools.cache
def lines(m: int, n: int, k: int) -> np.ndarray:
    """int32[L, k]: the cells of every k-in-a-row line of an n x m board (rows, then columns,
    then the two diagonals); L is 0 where k fits no direction."""
    cells = np.arange(n * m).reshape(n, m)
    out = []
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(n):
            for c in range(m):
                end_r, end_c = r + dr * (k - 1), c + dc * (k - 1)
                if 0 <= end_r < n and 0 <= end_c < m:
                    out.append([cells[r + dr * i, c + dc * i] for i in range(k)])
    table = np.array(out, np.int32).reshape(-1, k)
    table.flags.writeable = False  # cached and shared by every game of these sizes
    return table


@struct.dataclass
class MNKState(GameState):
    board: jnp.ndarray  # int8[n * m]: 0 empty, 1 X (player 0), 2 O (player 1)


@dataclasses.dataclass(frozen=True)
class MNKGame(Game):
    """k in a row on an n-row, m-column board; the options are static Python ints."""

    name = "mnk"

    m: int = 5  # columns
    n: int = 5  # rows
    k: int = 4  # stones in a row to win

    def __post_init__(self):
        check_range(self.name, "m", self.m, 1, MAX_SIDE)
        check_range(self.name, "n", self.n, 1, MAX_SIDE)
        check_range(self.name, "k", self.k, 1, max(self.m, self.n))

    # ---- static sizes -------------------------------------------------------------------------
    @property
    def num_actions(self) -> int:
        return self.m * self.n

    @property
    def board_shape(self) -> tuple[int, int]:
        return (self.n, self.m)

    @property
    def max_game_length(self) -> int:
        return self.m * self.n

    # ---- pure state functions -----------------------------------------------------------------
    def init(self) -> MNKState:
        return MNKState(board=jnp.zeros(self.num_actions, jnp.int8), **base_fields())

    def step(self, state: MNKState, action) -> MNKState:
        stone = (state.player + 1).astype(jnp.int8)
        board = state.board.at[action].set(stone)  # int8[A]
        # every line, not only those through `action`: no earlier line was complete (the game
        # would have ended), and one gather over a constant table is cheap at these sizes
        won = jnp.any(jnp.all(board[lines(self.m, self.n, self.k)] == stone, axis=1))
        full = jnp.all(board != 0)
        new = MNKState(
            board=board,
            player=1 - state.player,
            terminal=won | full,
            rewards=jnp.where(won, win_rewards(state.player), jnp.zeros(2, jnp.float32)),
            num_moves=state.num_moves + 1,
        )
        return absorbing(state, new)

    def legal_mask(self, state: MNKState):
        return (state.board == 0) & ~state.terminal  # bool[A]

    def observe(self, state: MNKState):
        own = (state.board == state.player + 1).reshape(self.board_shape)
        opp = (state.board == 2 - state.player).reshape(self.board_shape)
        return stone_planes(own, opp, state.player)  # float32[n, m, 3]

    # ---- human / protocol side ----------------------------------------------------------------
    def action_to_str(self, action: int) -> str:
        row, col = divmod(self.checked_action(action), self.m)  # (a ValueError out of range)
        return f"{column_letters(self.m)[col]}{row + 1}"

    def _parse_move(self, text: str):
        letters = column_letters(self.m)
        if len(text) >= 2 and text[0] in letters and text[1:].isdigit():
            row = int(text[1:]) - 1
            if 0 <= row < self.n:
                return row * self.m + letters.index(text[0])
        return None

    def render(self, state: MNKState) -> str:
        marks = np.array([".", "X", "O"])[np.asarray(state.board)].reshape(self.board_shape)
        rows = ["   " + " ".join(column_letters(self.m))]
        rows += [f"{r + 1:>2} " + " ".join(marks[r]) for r in range(self.n)]
        return "\n".join(rows)
