"""experiments/decided.py: the games cut out of a trajectory, what resigning would have done in
them, and the command."""

import numpy as np
import pytest

from experiments import decided


def test_finished_games_split_each_slot_at_its_ends():
    # slot 0: a game of 2 moves, then one of 1, then an unfinished one; slot 1: one of 4 moves
    done = np.array([[0, 0], [1, 0], [1, 0], [0, 1]], bool)
    value = np.arange(8, dtype=float).reshape(4, 2)
    player = np.array([[0, 0], [1, 1], [0, 0], [1, 1]])
    returns = np.zeros((4, 2, 2))
    returns[1, 0], returns[2, 0], returns[3, 1] = [1, -1], [-1, 1], [0, 0]
    games = decided.finished_games(value, player, done, returns)
    assert [g.value.tolist() for g in games] == [[0, 2], [4], [1, 3, 5, 7]]
    assert [g.returns.tolist() for g in games] == [[1, -1], [-1, 1], [0, 0]]
    assert games[2].player.tolist() == [0, 1, 0, 1]


def test_resignation_counts_the_moves_after_the_first_value_below_the_threshold():
    games = [
        # player 1 is below -0.9 at move 1 and loses: right, 2 moves saved
        decided.Game(
            np.array([0.5, -0.95, 0.97, -0.99]), np.array([0, 1, 0, 1]), np.array([1, -1])
        ),
        # player 0 is below -0.9 at move 2 and wins: wrong, 1 move saved; at 0.96 never
        decided.Game(np.array([0.0, 0.0, -0.95, 0.1]), np.array([0, 1, 0, 1]), np.array([1, -1])),
        # never below -0.8; a draw
        decided.Game(np.array([-0.5, -0.7]), np.array([0, 1]), np.array([0, 0])),
    ]
    r = decided.resignation(games, 0.9)
    assert (r.games, r.resigned, r.wrong, r.moves, r.saved) == (3, 2, 1, 10, 3)
    assert r.median_move == 1.5
    strict = decided.resignation(games, 0.96)  # only -0.99 of the first game's player 1, move 3
    assert (strict.resigned, strict.wrong, strict.saved, strict.median_move) == (1, 0, 0, 3.0)
    none = decided.resignation(games, 0.999)
    assert (none.resigned, none.saved) == (0, 0) and np.isnan(none.median_move)
    # a drawn game counts as a wrong resignation: the resigning player did not lose
    drawn = decided.Game(np.array([-0.95]), np.array([1]), np.array([0, 0]))
    assert decided.resignation([drawn], 0.9).wrong == 1


def test_alphazeros_rule_takes_the_lowest_threshold_with_under_5_percent_wrong():
    def row(threshold, resigned, wrong):
        return decided.Resignation(threshold, 100, resigned, wrong, 1000, 10, 1.0)

    rows = [row(0.95, 40, 1), row(0.8, 80, 8), row(0.9, 60, 2), row(0.99, 0, 0)]
    assert decided.accepted(rows).threshold == 0.9  # 2 of 60 wrong; 0.8's 8 of 80 is 10%
    assert decided.accepted([row(0.8, 20, 1)]) is None  # exactly 5% is not under it
    assert decided.accepted([row(0.8, 20, 1), row(0.99, 0, 0)]).threshold == 0.99
    assert decided.accepted([]) is None


def test_decided_plays_a_shipped_network_and_prints_a_row_per_threshold(capsys):
    assert (
        decided.main(["pretrained/tictactoe", "--batch=8", "--rounds=2", "--thresholds=0.5,0.9"])
        == 0
    )
    out = capsys.readouterr().out
    assert "pretrained/tictactoe: tictactoe" in out and "games of 8 slots ended in 18 moves" in out
    rows = [line for line in out.splitlines() if line.startswith("| 0.")]
    assert [row.split(" | ")[0] for row in rows] == ["| 0.5", "| 0.9"]
    # the rule's line names the lowest threshold whose printed share wrong is under 5%
    wrong = {row.split(" | ")[0][2:]: float(row.split(" | ")[2].split()[0]) for row in rows}
    ok = [t for t, share in wrong.items() if share < 0.05]
    want = f"takes t = {min(ok, key=float)}:" if ok else "no threshold given has under 5%"
    assert want in out.splitlines()[-1]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["pretrained/nope"], "no pretrained network 'nope'"),
        (["pretrained/tictactoe@x"], "the step after @ must be a number"),
        (["pretrained/tictactoe", "--thresholds=2"], "--thresholds: every value must be in [0, 1]"),
    ],
)
def test_decided_refuses_bad_input_in_one_line(argv, message, capsys):
    assert decided.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_run_that_resigned_is_played_out(monkeypatch):
    import dataclasses

    load, make = decided.load_checkpoint, decided.config_selfplay

    def resigning(*args):  # the shipped network as if trained with resignation
        config, variables, meta = load(*args)
        return dataclasses.replace(config, resign_threshold=0.5), variables, meta

    played = []

    def selfplay(config, *args, **kwargs):
        played.append(config.resign_threshold)
        return make(config, *args, **kwargs)

    monkeypatch.setattr(decided, "load_checkpoint", resigning)
    monkeypatch.setattr(decided, "config_selfplay", selfplay)
    decided.play("pretrained/tictactoe", batch=4, rounds=1, seed=0)
    assert played == [0.0]  # what resigning would cut is measured on games played out
