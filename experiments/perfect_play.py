"""An exact Tic-Tac-Toe solver and a perfect-play arena agent built from it.

The solver is plain Python negamax with memoisation over every reachable board, written from the
rules and independent of `games.tictactoe` except for two conventions: move = row * 3 + col, and
a board is nine cells holding 0 empty, 1 X (moves first), 2 O. A board is encoded as the base-3
integer sum(cell[i] * 3**i), so `table[code]` lists the optimal moves of the side to move.

    values, best = solve()                  # dict code -> value for the mover, optimal moves
    act = make_perfect_agent()              # act(variables, key, states[B]) -> int32[B]
    match = azjax.make_match(game, agent, act, 400)

The agent picks uniformly among all optimal moves, so a match explores many different lines.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
NUM_CODES = 3**9
POWERS = 3 ** np.arange(9)


def winner(board: tuple[int, ...]) -> int:
    """1 or 2 if that stone has three in a row, else 0."""
    for a, b, c in LINES:
        if board[a] != 0 and board[a] == board[b] == board[c]:
            return board[a]
    return 0


def to_move(board: tuple[int, ...]) -> int:
    """The stone of the side to move: X (1) when the counts are equal, else O (2)."""
    return 1 if board.count(1) == board.count(2) else 2


def encode(board) -> int:
    return int(np.dot(np.asarray(board, np.int64), POWERS))


@functools.cache
def negamax(board: tuple[int, ...]) -> int:
    """Game value for the side to move under perfect play: +1 win, 0 draw, -1 loss."""
    if winner(board):
        return -1  # the previous mover just completed a line
    if 0 not in board:
        return 0
    stone = to_move(board)
    return max(-negamax(board[:i] + (stone,) + board[i + 1 :]) for i in range(9) if board[i] == 0)


def optimal_moves(board: tuple[int, ...]) -> list[int]:
    """All moves that keep the mover's game value (empty for finished boards)."""
    if winner(board) or 0 not in board:
        return []
    stone = to_move(board)
    scores = {i: -negamax(board[:i] + (stone,) + board[i + 1 :]) for i in range(9) if board[i] == 0}
    best = max(scores.values())
    return [i for i, s in scores.items() if s == best]


def reachable_boards() -> list[tuple[int, ...]]:
    """Every board reachable from the empty one by legal play (5,478 of them)."""
    seen = {(0,) * 9}
    frontier = [(0,) * 9]
    while frontier:
        board = frontier.pop()
        if winner(board) or 0 not in board:
            continue
        stone = to_move(board)
        for i in range(9):
            if board[i] == 0:
                child = board[:i] + (stone,) + board[i + 1 :]
                if child not in seen:
                    seen.add(child)
                    frontier.append(child)
    return sorted(seen)


@functools.cache
def optimal_table() -> np.ndarray:
    """bool[3**9, 9]: table[code, move] is True where `move` is optimal on board `code`.

    Unreachable or finished boards have no True entry.
    """
    table = np.zeros((NUM_CODES, 9), bool)
    for board in reachable_boards():
        for move in optimal_moves(board):
            table[encode(board), move] = True
    return table


def make_perfect_agent():
    """An arena agent for `games.tictactoe` states: a uniformly random optimal move.

    On a board the table does not cover (finished games, where the arena ignores the move) it
    falls back to any empty cell.
    """
    table = jnp.asarray(optimal_table())
    powers = jnp.asarray(POWERS, jnp.int32)

    def act(variables, key, states):
        del variables
        codes = jnp.sum(states.board.astype(jnp.int32) * powers, axis=-1)  # [B]
        best = table[codes]  # [B, 9]
        allowed = jnp.where(jnp.any(best, axis=-1, keepdims=True), best, states.board == 0)
        logits = jnp.where(allowed, 0.0, -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    return act


def main(argv) -> int:
    """`python -m experiments.perfect_play`: nothing to run (one line, exit code 2)."""
    raise ValueError(
        "a library (the Tic-Tac-Toe solver and perfect player python -m experiments.tictactoe "
        "plays against), not a command"
    )


if __name__ == "__main__":
    import sys

    from azjax import cli

    sys.exit(cli.script("experiments.perfect_play", main))
