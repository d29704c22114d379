"""Connect Four, on boards from 4x4 to 12x12, with lines of 3 up to the board's smaller side.

Board as printed (default 6 rows x 7 columns), row 0 on top; discs fall to the bottom:

    . . . . . . .      row 0     height 5
    . . . . . . .                       4
    . . . . . . .                       3
    . . . . . . .                       2
    . . . O . . .                       1
    . . X X . . .      row 5     height 0
    1 2 3 4 5 6 7   <- the move names: the column, 1-based (action = column - 1)

The action is the column to drop into (0 .. cols-1), legal while the column is not full. Player 0
is X and moves first. A player who makes a line of `connect` discs (across, up, or along either
diagonal) wins; a full board without one is a draw. Dropping into a full column (illegal) returns
the state unchanged.

The state keeps one bitmask per column for each side, relative to the player to move: bit h of
`own[c]` is set when the mover has the disc at height h (counted from the bottom) of column c.
A column's discs fill its low bits, so ``(own | opp)[c] + 1`` is the bit of the next disc dropped
there. Lines are found with shifts: a vertical line is ``m & m >> 1 & m >> 2 & m >> 3`` within a
column, the others AND ``connect`` neighbouring columns shifted by 0 (across), 1 step per column
(up-right) or -1 (down-right). Boards up to 12 rows fit an int32 per column.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from games.base import (
    Game,
    GameState,
    base_fields,
    check_range,
    random_action,
    stone_planes,
    while_unrolled,
    win_rewards,
)


@struct.dataclass
class ConnectFourState(GameState):
    own: jnp.ndarray  # int32[cols]: the mover's discs, bit h = height h of each column
    opp: jnp.ndarray  # int32[cols]: the opponent's discs, likewise


@dataclasses.dataclass(frozen=True)
class ConnectFour(Game):
    name = "connect_four"

    rows: int = 6
    cols: int = 7
    connect: int = 4

    def __post_init__(self):
        check_range(self.name, "rows", self.rows, 4, 12)
        check_range(self.name, "cols", self.cols, 4, 12)
        check_range(self.name, "connect", self.connect, 3, min(self.rows, self.cols))

    @property
    def num_actions(self) -> int:
        return self.cols

    @property
    def board_shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def max_game_length(self) -> int:
        return self.rows * self.cols

    # ---- rules on column bitmasks -------------------------------------------------------------
    def _open_columns(self, own, opp):
        """bool[cols]: columns whose top cell is empty."""
        return (own | opp) >> (self.rows - 1) == 0

    def _drop(self, own, opp, action):
        """The mover's discs after dropping into column `action` (assumed open)."""
        return own | jnp.where(jnp.arange(self.cols) == action, (own | opp) + 1, 0)

    def _has_line(self, discs):
        """Whether the column bitmasks `discs` hold `connect` in a row in any direction."""
        k, n = self.connect, self.cols - self.connect + 1
        vertical = discs
        for j in range(1, k):
            vertical = vertical & (discs >> j)
        found = jnp.any(vertical != 0)
        for slope in (0, 1, -1):  # across, up-right, down-right
            line = discs[:n]
            for j in range(1, k):
                shifted = discs[j : j + n]
                shifted = shifted >> (j * slope) if slope >= 0 else shifted << j
                line = line & shifted
            found = found | jnp.any(line != 0)
        return found

    # ---- the Game interface --------------------------------------------------------------------
    def init(self) -> ConnectFourState:
        empty = jnp.zeros(self.cols, jnp.int32)
        return ConnectFourState(own=empty, opp=empty, **base_fields())

    def step(self, state: ConnectFourState, action) -> ConnectFourState:
        mine = self._drop(state.own, state.opp, action)
        won = self._has_line(mine)
        full = state.num_moves + 1 == self.rows * self.cols
        new = ConnectFourState(
            own=state.opp,
            opp=mine,
            player=1 - state.player,
            terminal=won | full,
            rewards=jnp.where(won, win_rewards(state.player), jnp.zeros(2, jnp.float32)),
            num_moves=state.num_moves + 1,
        )
        # Terminal states are absorbing, and a drop into a full column changes nothing.
        keep = state.terminal | ~self._open_columns(state.own, state.opp)[action]
        return jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), state, new)

    def legal_mask(self, state: ConnectFourState):
        return self._open_columns(state.own, state.opp) & ~state.terminal

    def board(self, state: ConnectFourState):
        """int8[rows, cols]: 0 empty, 1 X (player 0), 2 O (player 1); row 0 is the top."""
        heights = jnp.arange(self.rows - 1, -1, -1)[:, None]
        own = (state.own[None, :] >> heights) & 1
        opp = (state.opp[None, :] >> heights) & 1
        x, o = jnp.where(state.player == 0, own, opp), jnp.where(state.player == 0, opp, own)
        return (x + 2 * o).astype(jnp.int8)

    def observe(self, state: ConnectFourState):
        heights = jnp.arange(self.rows - 1, -1, -1)[:, None]
        own = (state.own[None, :] >> heights) & 1 == 1
        opp = (state.opp[None, :] >> heights) & 1 == 1
        return stone_planes(own, opp, state.player)

    def random_playout(self, state: ConnectFourState, key):
        """The move-by-move playout on bare bitmasks: one draw of uniforms, no absorbing step.

        Ply i from `state` plays ``random_action(u[i], legal)`` with ``u = uniform(key, [A*])``,
        ``A* = max_game_length``, exactly as stepping `step` with those actions would.
        """
        u = jax.random.uniform(key, (self.max_game_length,))
        start = state.num_moves

        def body(carry):
            own, opp, plies, _ = carry
            action = random_action(u[plies - start], self._open_columns(own, opp))
            mine = self._drop(own, opp, action)
            won = self._has_line(mine)
            return opp, mine, plies + 1, won

        carry = (state.own, state.opp, state.num_moves, jnp.bool_(False))
        _, _, plies, won = while_unrolled(
            lambda c: ~c[3] & (c[2] < self.max_game_length) & ~state.terminal, body, carry
        )
        last_mover = (state.player + plies - start + 1) % 2  # the player who moved last
        return jnp.where(
            state.terminal, state.rewards, jnp.where(won, win_rewards(last_mover), 0.0)
        ).astype(jnp.float32)

    def action_to_str(self, action: int) -> str:
        return str(self.checked_action(action) + 1)

    def _parse_move(self, text: str):
        if text.isascii() and text.isdigit() and 1 <= int(text) <= self.cols:
            return int(text) - 1
        return None

    def render(self, state: ConnectFourState) -> str:
        width = len(str(self.cols))
        marks = np.array([".", "X", "O"])[np.asarray(self.board(state))]
        lines = [" ".join(m.rjust(width) for m in row) for row in marks]
        lines.append(" ".join(str(c + 1).rjust(width) for c in range(self.cols)))
        return "\n".join(lines)
