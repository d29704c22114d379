"""Game records (azjax/eval/game_records.py): each game's format written exactly as expected,
read back, and replayed through the rules to the same end."""

import os
import re

import numpy as np
import pytest

import games
from azjax.eval.agent import RESIGN
from azjax.eval.game_records import (
    read_record,
    record_filename,
    replay,
    winner,
    write_record,
    write_records,
)

HEX = games.make("hex", size=3, swap=True)
OTHELLO = games.make("othello", size=4)
C4 = games.make("connect_four")
C4_WIDE = games.make("connect_four", rows=4, cols=10, connect=3)
C4_NINE = games.make("connect_four", rows=4, cols=9, connect=3)  # the widest written unspaced
TTT = games.make("tictactoe")

# game, actions of a whole game, its record text, the winner
CASES = [
    (  # b1, swap (white takes it: a white stone on a2), b2 a1 b1 c1 b3: black joins top and bottom
        HEX,
        [1, 9, 4, 0, 1, 2, 7],
        "(;FF[4]GM[11]SZ[3]AP[azjax]PB[A]PW[B]RE[B+]"
        ";B[b1];W[swap-pieces];B[b2];W[a1];B[b1];W[c1];B[b3])",
        "black",
    ),
    (  # a random 4x4 game with two passes (16), which the move list leaves out
        OTHELLO,
        [1, 2, 3, 8, 13, 0, 4, 16, 12, 16, 15],
        "b1c1d1a3b4a1a2a4d4",
        None,
    ),
    (C4, [3, 4, 3, 4, 3, 4, 3], "4545454", "black"),  # four up column 4
    (C4_WIDE, [9, 0, 9, 0, 9], "10 1 10 1 10", "black"),  # more than 9 columns: spaced
    (C4_NINE, [8, 0, 8, 0, 8], "91919", "black"),
    (TTT, [0, 3, 1, 4, 2], "a1 a2 b1 b2 c1", "black"),  # X across the top row
]


@pytest.mark.parametrize(
    "game, actions, text, result",
    CASES,
    ids=[
        "hex3-swap",
        "othello4-passes",
        "connect_four",
        "connect_four-10-columns",
        "connect_four-9-columns",
        "tictactoe",
    ],
)
def test_records_are_written_read_and_replay_to_the_same_end(game, actions, text, result):
    final, played = replay(game, actions)
    assert bool(final.terminal) and played == actions
    returns = [float(r) for r in game.returns(final)]
    result = result or winner(returns[0], True)
    assert winner(returns[0], True) == result
    written = write_record(game, actions, black="A", white="B", result=result)
    assert written == text
    again, replayed = replay(game, read_record(game, written))
    assert replayed == actions  # Othello's passes put back where the position forces them
    assert np.array_equal(np.asarray(again.rewards), np.asarray(final.rewards))


def test_a_resignation_is_kept_in_sgf_and_files_are_named_per_game(tmp_path):
    text = write_record(HEX, [4, RESIGN], black="A", white="B", result="black")
    assert text == "(;FF[4]GM[11]SZ[3]AP[azjax]PB[A]PW[B]RE[B+R];B[b2];W[resign])"
    assert read_record(HEX, text) == [4, RESIGN]
    assert write_record(TTT, [4, RESIGN]) == "b2"  # a move list has no mark for it
    paths = write_records(
        str(tmp_path / "games"),
        TTT,
        [dict(actions=[0, 3, 1, 4, 2], black="A", white="B", result="black")] * 2,
    )
    assert [os.path.basename(p) for p in paths] == ["game-0001.txt", "game-0002.txt"]
    assert record_filename(HEX, 11) == "game-0012.sgf"
    with open(paths[1]) as f:
        assert read_record(TTT, f.read()) == [0, 3, 1, 4, 2]


@pytest.mark.parametrize(
    "game, text, message",
    [
        (HEX, "(;FF[4]GM[1]SZ[3];B[a1])", "not Hex"),
        (HEX, "(;FF[4]GM[11]SZ[5];B[a1])", "SZ[3]"),
        (HEX, "(;FF[4]GM[11]SZ[3];W[a1])", "expected B to move"),
        (HEX, "(;FF[4]GM[11]SZ[3];B[a1];W[swap-sides])", "swap-pieces"),
        (HEX, "b1 b2", "not an SGF"),
        (OTHELLO, "b1-c1", "not an Othello move list"),
        (OTHELLO, "b1x9", "'x9' is not a move"),
        (C4, "4485", "not a move"),
    ],
)
def test_bad_records_are_refused_by_name(game, text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        read_record(game, text)


HEX5 = games.make("hex", size=5, swap=True)


@pytest.mark.parametrize(
    "text, moves",
    [  # valid SGF (FF[4]) as other programs may write it: the main line's moves, in order
        ("(;FF[4]GM[11]SZ[5];B[c3];W[d2];C[last move]B[b2])", "c3 d2 b2"),  # any order
        ("(;FF[4]GM[11]SZ[5];C[opening]B[c3];WL[30]W[d2])", "c3 d2"),
        ("(;FF[4]GM[11]SZ[5];B[c3](;W[swap-pieces];B[d2])(;W[b2]))", "c3 swap d2"),  # 1st line
        ("(;FF[4]GM[11]SZ[5]PW[x;W[e5\\]];B[c3];C[a \\] ;W[e5\\]]W[d2])", "c3 d2"),  # escapes
        ("\ufeff(;FF[4]GM[11]SZ[5]\n;B [c3]\n;W[d2])", "c3 d2"),  # a byte-order mark, spaces
    ],
)
def test_sgf_is_read_down_its_main_line_wherever_a_node_holds_its_move(text, moves):
    assert read_record(HEX5, text) == [HEX5.parse_action(m) for m in moves.split()]


def test_an_sgf_without_a_size_is_11x11():  # red-bean.com/sgf/hex.html's default
    hex11 = games.make("hex", size=11)
    assert read_record(hex11, "(;FF[4]GM[11];B[f6];W[e5])") == [60, 48]


@pytest.mark.parametrize(
    "text, message",
    [
        ("(;FF[4]GM[11]SZ[5];B[c3])(;FF[4]GM[11]SZ[5];B[a1])", "more than one game"),
        ("(;FF[4]GM[11]SZ[5];B[c3]", "no closing )"),
        ("(;FF[4]GM[11]SZ[5];B[c3", "no closing ]"),
        ("(;FF[4]GM[11]SZ[5]AB[a1];W[c3])", "sets up the board (AB)"),
        ("(;FF[4]GM[11]SZ[5]PL[W];W[c3])", "sets up the board (PL)"),
        ("(;FF[4]GM[11]SZ[5];B[c3]W[d2])", "holds 2 moves"),
        ("(;FF[4]GM[11]SZ[5];B[c3]) and more", "text after the game"),
    ],
)
def test_sgf_that_cannot_be_read_as_one_game_is_refused_in_one_line(text, message):
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        read_record(HEX5, text)
    assert "\n" not in str(e.value)


def test_replay_refuses_an_illegal_move():
    with pytest.raises(ValueError, match=r"move 2 \(a1\) is not legal"):
        replay(TTT, [0, 0])
