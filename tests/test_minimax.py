"""Minimax (azjax/eval/minimax.py) and seed 001's Connect-N heuristic on hand-worked positions."""

import jax
import numpy as np
import pytest

import games
from azjax.eval import minimax
from azjax.eval.match import play_games
from azjax.eval.minimax import Minimax, count_windows, lines_heuristic
from azjax.eval.specs import parse_agent

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


# ---- seed 001's Connect-N heuristic (section 4.2), on boards worked by hand ----------------------
C4 = games.make("connect_four")
C4_LINES2 = 36 + 35 + 30 + 30  # lines of 2 cells on 6x7: across 6*6, down 5*7, diagonals 5*6 each


def test_line_counts_on_hand_made_boards():
    assert count_windows((3, 3), 2) == 20 and count_windows((6, 7), 2) == C4_LINES2
    assert count_windows((3, 3), 3) == 8  # Tic-Tac-Toe's 8 lines
    h = jax.jit(lines_heuristic, static_argnums=0, static_argnames="n")
    # X a1 b1, O b2, O to move: X's a1-b1 is open at c1 (the edge closes a1's side); O has none.
    assert float(h(TTT, board_state(TTT, "a1 b2 b1"), n=2)) == pytest.approx(-1 / 21)
    # O c1 closes it at both ends; O's c1-b2 diagonal is open at a3. X to move.
    assert float(h(TTT, board_state(TTT, "a1 b2 b1 c1"), n=2)) == pytest.approx(-1 / 21)
    # X's won top row holds two open pairs (each open towards the third stone) but no open line
    # of 3 (both ends off the board); O's a2-b2 is open at c2. O to move.
    won = board_state(TTT, "a1 a2 b1 b2 c1")
    assert float(h(TTT, won, n=2)) == pytest.approx((1 - 2) / 21)
    assert float(h(TTT, won, n=3)) == 0.0
    # Connect Four (columns 1-based; O to move):  . . . . . . .   row 3: O on column 3
    #                                             . . X . . . .   row 4
    #                                             O . X X . . .   row 5 (bottom)
    # X's vertical pair on column 3 is closed by the floor and O: not counted (as in seed 001's
    # Figure 4.2). Open: across 3-4 (row 5), diagonal (row 4, col 3)-(row 5, col 4). O: none.
    state = board_state(C4, "3 1 3 3 4")
    assert float(h(C4, state, n=2)) == pytest.approx(-2 / (C4_LINES2 + 1))
    # Both of X's pairs counted from X's side (the same board with X to move: O drops on col 7,
    # far away), and lines of 3: none for either.
    state = board_state(C4, "3 1 3 3 4 7")
    assert float(h(C4, state, n=2)) == pytest.approx(2 / (C4_LINES2 + 1))
    assert float(h(C4, state, n=3)) == 0.0


def test_minimax_with_the_lines_heuristic_makes_open_pairs():
    # X a1, O c3, X to move, one ply: b1 and a2 make open pairs; b2 would make a1-b2, closed by
    # the edge and O's c3, so it scores 0 like every other move.
    state = board_state(TTT, "a1 c3")
    search = Minimax(TTT, depth=1, heuristic="lines2")
    assert search.best_moves(state) == [1, 3]
    assert search.value(state) == pytest.approx(1 / 21)
    assert Minimax(TTT, depth=1).best_moves(state) == [1, 2, 3, 4, 5, 6, 7]  # all 0 without it
    # A won game still outweighs any heuristic value: X wins in one rather than making pairs.
    assert Minimax(TTT, depth=3, heuristic="lines2").best_moves(
        board_state(TTT, "a1 a2 b1 b2")
    ) == [2]


def test_minimax_heuristic_is_checked():
    with pytest.raises(ValueError, match="minimax: heuristic must be one of none, lines2, lines3"):
        parse_agent("minimax:depth=2,heuristic=lines9", C4)
    with pytest.raises(ValueError, match="for connect_four and tictactoe only, not hex"):
        parse_agent("minimax:depth=2,heuristic=lines2", games.make("hex", size=3))


def test_minimax_lines2_beats_random_at_connect_four():
    agent = parse_agent("minimax:depth=2,heuristic=lines2", C4)
    outcome = play_games(C4, agent, parse_agent("random", C4), 6, jax.random.PRNGKey(0))
    assert outcome.result.wins == 6, outcome.result


def _moves_and_values(mm: Minimax, state, depth: int) -> dict[int, float]:
    """{legal move: its value at `depth` plies} by plain negamax, no alpha-beta and no table (the
    reference for the agent's search, from the same expanded nodes)."""
    node = mm._node(minimax._state_key(state), state)
    values = {}
    for a in node.moves:
        if node.terminal[a]:
            values[a] = float(node.reward[a])
        elif depth <= 1:
            values[a] = float(node.leaf[a])
        else:
            below = _moves_and_values(mm, node.child(a), depth - 1).values()
            values[a] = -minimax._GAMMA * max(below)
    return values


def test_the_search_and_its_table_agree_with_plain_negamax():
    """Alpha-beta's bounds stored in the table and read back at other positions (the agent keeps
    it for its lifetime): a mutation that read an upper bound as a lower one passed every test,
    offering a worse move as tied best in one of 12 Connect Four positions at depth 4."""
    mm = Minimax(C4, depth=4, heuristic="lines2")
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(12):
        state = C4.init()
        for _ in range(int(rng.integers(2, 12))):
            state = C4.step(state, int(rng.choice(np.flatnonzero(C4.legal_mask(state)))))
            if bool(state.terminal):
                break
        if bool(state.terminal):
            continue
        values = _moves_and_values(mm, state, 4)
        best = max(values.values())
        assert set(mm.best_moves(state)) == {a for a, v in values.items() if v > best - 1e-9}
        assert mm.value(state) == pytest.approx(best, abs=1e-6)
        checked += 1
    assert checked >= 8


def test_a_quicker_win_is_worth_more():
    """Wins are discounted a ply at a time, so that the search prefers the quicker one: X wins
    at once with c1, or three plies later after other moves."""
    state = board_state(TTT, "a1 b2 b1 c3")  # X to move: c1 wins now
    mm = Minimax(TTT, depth=9)
    assert mm.best_moves(state) == [TTT.parse_action("c1", state)]
    values = sorted(_moves_and_values(mm, state, 9).values())
    assert values[-1] == 1.0 and 0.99 < values[-2] < 1.0  # a slower win: worth less than 1
