"""Minimax (azjax/eval/minimax.py) on hand-worked positions."""

import games
from azjax.eval.minimax import Minimax

TTT = games.make("tictactoe")


def board_state(game, moves: str):
    """The state after the space-separated move names `moves`."""
    state = game.init()
    for name in moves.split():
        state = game.step(state, game.parse_action(name, state))
    return state


def test_minimax_wins_in_one_and_blocks():
    search = Minimax(TTT, depth=9)
    # X (a1 b1) to move with O on a2 b2: both c1 (X wins) and c2 (O's threat) matter; c1 wins now.
    assert search.best_moves(board_state(TTT, "a1 a2 b1 b2")) == [2]
    # O to move must block c1 (X threatens a1-b1-c1), with O in the centre that draws.
    blocked = board_state(TTT, "a1 b2 b1")
    assert search.best_moves(blocked) == [2] and search.value(blocked) == 0.0
    # A corner reply to a corner opening loses for O: X to move wins (a fork within 5 plies).
    assert search.value(board_state(TTT, "a1 c1")) > 0.99
    assert search.value(TTT.init()) == 0.0  # Tic-Tac-Toe is a draw
    shallow = Minimax(TTT, depth=1)
    assert shallow.best_moves(board_state(TTT, "a1 a2 b1 b2")) == [2]


def test_minimax_solves_hex_3():
    game = games.make("hex", size=3)
    search = Minimax(game, depth=9)
    assert search.value(game.init()) > 0.99  # the first player wins
    assert 4 in search.best_moves(game.init())  # b2, the centre, wins
