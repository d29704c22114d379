"""Every-opening and random-opening match protocols, and scoring against perfect play."""

import jax
import numpy as np
import pytest

import games
from azjax.commands import evaluate
from azjax.eval import openings as op
from azjax.eval.match import play_games
from azjax.eval.specs import parse_agent

TTT = games.make("tictactoe")


@pytest.mark.parametrize(
    "game, n",
    [
        (TTT, 9),
        (games.make("hex", size=5), 25),
        (games.make("othello", size=6), 4),
        (games.make("connect_four"), 7),
        (games.make("hex", size=3, swap=True), 9),
    ],
)
def test_every_legal_first_move_is_one_opening(game, n):
    moves = op.openings(game, "all")
    assert len(moves) == n and len(set(moves)) == n and all(len(m) == 1 for m in moves)


def test_random_openings_are_distinct_positions_of_the_given_length():
    moves = op.openings(TTT, "random:20:3", jax.random.PRNGKey(0))
    assert len(moves) == 20 and len(set(moves)) == 20
    assert all(len(m) == 3 and len(set(m)) == 3 for m in moves)  # three different cells
    assert op.openings(TTT, "random:20:3", jax.random.PRNGKey(0)) == moves  # seeded
    assert op.parse("random:5") == ("random", 5, 2)  # two plies where none is given, as said
    # two orders of the same moves are one position: X a1 c1 with O b2 either way round
    many = op.openings(TTT, "random:100:3", jax.random.PRNGKey(0))
    boards = {(frozenset(m[0::2]), frozenset(m[1::2])) for m in many}
    assert len(many) == 100 and len(boards) == 100  # 5 positions twice when sequences counted


@pytest.mark.parametrize(
    "text", ["every", "random", "random:0", "random:x", "all:3", "random:2:3:4"]
)
def test_bad_opening_specs_name_the_forms(text):
    with pytest.raises(ValueError, match="none | all | random:N"):
        op.parse(text)


def test_too_many_random_openings_are_refused():
    with pytest.raises(ValueError, match="only 9 distinct positions"):
        op.openings(TTT, "random:10:1", jax.random.PRNGKey(0))
    # more plies than any game lasts: refused by name, not numpy's "a cannot be empty"
    with pytest.raises(ValueError, match="only 0 distinct positions of 9 plies"):
        op.openings(TTT, "random:2:9", jax.random.PRNGKey(0))
    # far more than the game has: refused once the draws stop finding new ones, not after
    # 50 x 100,000 of them (which took minutes)
    draws = []
    counted = op.batch_functions(TTT)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(op, "batch_functions", lambda game: _Counting(counted, draws))
        with pytest.raises(ValueError, match="only 9 distinct positions of 1 plies"):
            op.openings(TTT, "random:100000:1", jax.random.PRNGKey(0))
    assert len(draws) <= op.MISSES + 200


class _Counting:
    """batch_functions whose `init` counts the draws."""

    def __init__(self, fns, draws):
        self.fns, self.draws = fns, draws

    def __getattr__(self, name):
        return getattr(self.fns, name)

    def init(self, n):
        self.draws.append(n)
        return self.fns.init(n)


def test_both_colours_and_won_sides():
    moves = [(0,), (1,), (2,)]
    assert op.both_colours(moves) == moves + moves
    # opening 0 is won for black, 1 for white, 2 a draw; A won as black in 0, lost as white in 1
    returns = np.array([1, 1, 0, -1, -1, -1])  # A black in 0..2, then A white in 0..2
    score = op.won_sides([1, -1, 0], returns)
    assert score == dict(
        won_sides=1, decisive_openings=2, drawn_openings=1, losses_in_drawn_openings=1, score=0.5
    )


def test_perfect_tictactoe_draws_every_opening_and_beats_random():
    values = op.perfect_values(TTT, op.openings(TTT, "all"))
    assert values == [0] * 9  # Tic-Tac-Toe: every first move draws with perfect play
    moves = op.both_colours(op.openings(TTT, "all"))
    outcome = play_games(
        TTT,
        parse_agent("perfect", TTT),
        parse_agent("random", TTT),
        len(moves),
        jax.random.PRNGKey(0),
        openings=moves,
    )
    assert outcome.result.losses == 0 and outcome.result.wins > 0
    assert outcome.a_first.tolist() == [True] * 9 + [False] * 9


def test_no_perfect_player_for_big_games():
    assert op.perfect_values(games.make("hex", size=7), [(0,)]) is None
    with pytest.raises(ValueError, match="no perfect player"):
        parse_agent("perfect", games.make("othello", size=8))


def test_evaluate_match_every_opening(tmp_path, capsys):
    out = tmp_path / "m"
    assert (
        evaluate.main(
            [
                "match",
                "perfect",
                "minimax:depth=2",
                "--game=tictactoe",
                "--openings=all",
                f"--out={out}",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "openings: all, 9 of them" in text and "A won 0 of the 0" in text
    import json

    record = json.loads((out / "match.json").read_text())
    assert record["games"] == 18 and len(record["by_opening"]) == 9
    assert record["vs_perfect_play"]["losses_in_drawn_openings"] == 0  # perfect never loses
    assert record["by_opening"][4]["opening"] == TTT.action_to_str(4)


def test_games_beside_openings_are_twice_their_number_or_refused(tmp_path, capsys):
    moves = op.openings(TTT, "random:3:2", jax.random.PRNGKey(0))
    assert op.games_played("random:3:2", moves, None) == 6 == op.games_played("random:3", moves, 6)
    assert op.games_played("none", [()], 10) == 10
    with pytest.raises(ValueError, match="--games=10 with --openings=random:3:2: each of its 3"):
        op.games_played("random:3:2", moves, 10)  # was overridden silently
    argv = ["match", "random", "random", "--game=tictactoe", "--openings=all", "--games=5"]
    assert evaluate.main([*argv, f"--out={tmp_path / 'm'}"]) == 2
    assert "give --games=18 or leave --games out" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()  # refused before any game


def test_hex_openings_are_scored_against_the_solver():
    hex3 = games.make("hex", size=3)
    moves = op.openings(hex3, "all")
    values = op.perfect_values(hex3, moves)
    # the solver's (and a plain negamax's, tests/test_hex_solver.py) winning first moves on 3x3
    assert [m[0] for m, v in zip(moves, values) if v > 0] == [2, 3, 4, 5, 6]
    both = op.both_colours(moves)
    perfect = play_games(
        hex3,
        parse_agent("perfect", hex3),
        parse_agent("perfect:seed=1", hex3),
        len(both),
        jax.random.PRNGKey(0),
        openings=both,
    )
    score = op.won_sides(values, perfect.returns)
    assert score["won_sides"] == 9 and score["score"] == 1.0  # perfect wins every won side
    weak = play_games(
        hex3,
        parse_agent("random", hex3),
        parse_agent("perfect", hex3),
        len(both),
        jax.random.PRNGKey(0),
        openings=both,
    )
    assert op.won_sides(values, weak.returns)["won_sides"] < 9  # random throws some away


def test_openspiel_mcts_plays_every_opening_of_tictactoe(tmp_path):
    """spiel: OpenSpiel's C++ MCTS bot keeps its own state in step with the games, openings
    included; against perfect play it never wins, and perfect play never loses."""
    moves = op.both_colours(op.openings(TTT, "all"))
    outcome = play_games(
        TTT,
        parse_agent("spiel:sims=200", TTT),
        parse_agent("perfect", TTT),
        len(moves),
        jax.random.PRNGKey(0),
        openings=moves,
    )
    assert outcome.result.wins == 0 and outcome.result.games == 18
    with pytest.raises(ValueError, match="OpenSpiel has no othello"):
        parse_agent("spiel", games.make("othello", size=6))
