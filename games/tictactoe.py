"""Tic-Tac-Toe.

Board indices (action = row * 3 + col), row 1 at the top as printed:

    0 1 2        a1 b1 c1
    3 4 5   ->   a2 b2 c2
    6 7 8        a3 b3 c3

Player 0 is X and moves first. `board` holds 0 empty, 1 for X, 2 for O. Playing on an occupied
cell (illegal) overwrites it; the jitted core does not check.
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
    absorbing,
    base_fields,
    column_letters,
    random_action,
    stone_planes,
    while_unrolled,
    win_rewards,
)

_LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]],
    np.int32,
)
_LINE_MASKS = (1 << _LINES).sum(axis=1).astype(np.int32)  # int32[8], a line as 9-bit cell mask
_BITS = (1 << np.arange(9)).astype(np.int32)  # int32[9], a cell's bit


@struct.dataclass
class TicTacToeState(GameState):
    board: jnp.ndarray  # int8[9]: 0 empty, 1 X (player 0), 2 O (player 1)


@dataclasses.dataclass(frozen=True)
class TicTacToe(Game):
    name = "tictactoe"

    num_actions = 9
    board_shape = (3, 3)
    max_game_length = 9

    def init(self) -> TicTacToeState:
        return TicTacToeState(board=jnp.zeros(9, jnp.int8), **base_fields())

    def step(self, state: TicTacToeState, action) -> TicTacToeState:
        stone = (state.player + 1).astype(jnp.int8)
        board = state.board.at[action].set(stone)
        won = jnp.any(jnp.all(board[_LINES] == stone, axis=1))
        full = jnp.all(board != 0)
        new = TicTacToeState(
            board=board,
            player=1 - state.player,
            terminal=won | full,
            rewards=jnp.where(won, win_rewards(state.player), jnp.zeros(2, jnp.float32)),
            num_moves=state.num_moves + 1,
        )
        return absorbing(state, new)

    def legal_mask(self, state: TicTacToeState):
        return (state.board == 0) & ~state.terminal

    def random_playout(self, state: TicTacToeState, key):
        """A move-by-move random playout on two 9-bit masks (the mover's and the other's cells)."""
        u = jax.random.uniform(key, (9,))
        own = jnp.sum(jnp.where(state.board == state.player + 1, _BITS, 0))
        opp = jnp.sum(jnp.where(state.board == 2 - state.player, _BITS, 0))
        start = state.num_moves

        def body(carry):
            own, opp, plies, _ = carry
            action = random_action(u[plies - start], ((own | opp) & _BITS) == 0)
            mine = own | (1 << action)
            return opp, mine, plies + 1, jnp.any((mine & _LINE_MASKS) == _LINE_MASKS)

        def running(carry):
            return ~carry[3] & (carry[2] < 9) & ~state.terminal

        _, _, plies, won = while_unrolled(running, body, (own, opp, start, jnp.bool_(False)))
        last_mover = (state.player + plies - start + 1) % 2
        result = jnp.where(won, win_rewards(last_mover), jnp.zeros(2, jnp.float32))
        return jnp.where(state.terminal, state.rewards, result)

    def observe(self, state: TicTacToeState):
        own = state.board == state.player + 1
        opp = state.board == 2 - state.player
        return stone_planes(own.reshape(3, 3), opp.reshape(3, 3), state.player)

    def action_to_str(self, action: int) -> str:
        action = self.checked_action(action)
        return f"{column_letters(3)[action % 3]}{action // 3 + 1}"

    def _parse_move(self, text: str):
        if len(text) == 2 and text[0] in column_letters(3) and text[1] in "123":
            return (int(text[1]) - 1) * 3 + column_letters(3).index(text[0])
        return None

    def render(self, state: TicTacToeState) -> str:
        marks = np.array([".", "X", "O"])[np.asarray(state.board)].reshape(3, 3)
        rows = ["  a b c"] + [f"{r + 1} " + " ".join(marks[r]) for r in range(3)]
        return "\n".join(rows)
