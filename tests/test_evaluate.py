"""evaluate.py and azjax/stats.py: confidence intervals and Elo on hand-computed cases, and the
match / tournament / curve commands at toy scale, bad input included."""

import json
import math
import os

import numpy as np
import pytest

import evaluate
from azjax import agents, stats
from test_agents import tiny_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny_run(tmp_path_factory)


# ---- statistics ----------------------------------------------------------------------------------
def test_confidence_intervals_on_known_numbers():
    p, half = stats.proportion_ci(50, 100)  # 1.96 * sqrt(0.25 / 100)
    assert p == 0.5 and half == pytest.approx(0.098, abs=1e-3)
    p, half = stats.proportion_ci(28, 100)  # seed 000 Table A.1's form: p ± 1.96 sqrt(p(1-p)/n)
    assert half == pytest.approx(1.959964 * math.sqrt(0.28 * 0.72 / 100))
    assert stats.proportion_ci(0, 20) == (0.0, 0.0)
    # points 1, 1, 0.5, 0: mean 0.625, variance (2 + 0.25) / 4 - 0.625^2 = 0.171875
    score, half = stats.score_ci(2, 1, 1)
    assert score == 0.625 and half == pytest.approx(1.959964 * math.sqrt(0.171875 / 4))


def test_elo_of_a_three_one_record():
    r = stats.elo(np.array([[0.0, 3.0], [1.0, 0.0]]), np.array([[0.0, 4.0], [4.0, 0.0]]))
    assert r.elo[0] - r.elo[1] == pytest.approx(400 * math.log10(3))
    assert r.elo.sum() == pytest.approx(0.0, abs=1e-9)
    # information about the difference: 4 games * p (1 - p) with p = 3/4; each of the two
    # mean-anchored ratings carries half the difference's standard error
    se_diff = stats.ELO_PER_NAT / math.sqrt(4 * 0.75 * 0.25)
    assert r.stderr == pytest.approx([se_diff / 2, se_diff / 2])


def test_elo_counts_draws_as_half_points_and_is_transitive():
    # 2 wins + 2 draws of 4 = 3 points: the same as a 3-1 record
    r = stats.elo(np.array([[0.0, 3.0], [1.0, 0.0]]), np.array([[0.0, 4.0], [4.0, 0.0]]))
    # three players, each pair scoring 3 of 4 in a chain and 1:1 elsewhere balance out
    points = np.array([[0, 2, 2], [2, 0, 2], [2, 2, 0]], float)
    games = np.full((3, 3), 4.0) - 4 * np.eye(3)
    assert stats.elo(points, games).elo == pytest.approx([0, 0, 0], abs=1e-9)
    # A beats B 3-1 and B beats C 3-1, A-C never met: A - C = 2 * 400 log10(3)
    points = np.array([[0, 3, 0], [1, 0, 3], [0, 1, 0]], float)
    games = np.array([[0, 4, 0], [4, 0, 4], [0, 4, 0]], float)
    r3 = stats.elo(points, games)
    assert r3.elo[0] - r3.elo[2] == pytest.approx(2 * (r.elo[0] - r.elo[1]))


def test_elo_refuses_infinite_ratings_unless_given_a_prior():
    points, games = np.array([[0.0, 4.0], [0.0, 0.0]]), np.array([[0.0, 4.0], [4.0, 0.0]])
    assert not stats.is_connected(points, games)
    with pytest.raises(ValueError, match="infinite"):
        stats.elo(points, games)
    r = stats.elo(points, games, prior_draws=1.0)  # 4.5 of 5 points: 400 log10(9)
    assert r.elo[0] - r.elo[1] == pytest.approx(400 * math.log10(9))


# ---- commands ------------------------------------------------------------------------------------
def _json(folder, name):
    with open(os.path.join(folder, name)) as f:
        return json.load(f)


def test_match_of_a_checkpoint_takes_the_game_from_it(run, tmp_path, capsys):
    out = str(tmp_path / "m")
    assert evaluate.main(["match", f"ckpt:{run},sims=2", "minimax:depth=1", "--games=4",
                          f"--out={out}"]) == 0
    record = _json(out, "match.json")
    assert record["game"] == "tictactoe" and record["games"] == 4
    res = record["result"]
    assert res["first"]["games"] == res["second"]["games"] == 2
    overall = res["overall"]
    assert overall["wins"] + overall["draws"] + overall["losses"] == 4
    for k in ("wins", "draws", "losses"):
        assert overall[k] == res["first"][k] + res["second"][k]
    assert record["per_move"]["A"]["simulations"] == 2
    text = capsys.readouterr().out
    assert "A moved" in text and "overall" in text and "±" in text


def test_equal_time_match_reports_simulations_per_move(tmp_path, capsys, monkeypatch):
    # Tiny probes and a budget below one simulation: the calibration settles on 1 simulation,
    # whose search it has compiled already (two compiles in all, not three).
    monkeypatch.setattr(agents, "PROBE_SIMULATIONS", (1, 3))
    out = str(tmp_path / "t")
    assert evaluate.main(["match", "mcts:seconds=0.000001", "random", "--game=tictactoe",
                          "--games=2", f"--out={out}"]) == 0
    a = _json(out, "match.json")["per_move"]["A"]
    assert a["budget"] == 0.000001 and a["simulations"] == 1 and a["seconds"] > 0
    assert a["rollouts"] == a["simulations"] + 1  # pure MCTS rolls out every leaf
    assert "sims" in capsys.readouterr().out


def test_tournament_writes_matrix_heatmap_and_elo(tmp_path, capsys):
    out = str(tmp_path / "r")
    specs = ["random", "minimax:depth=1", "minimax:depth=9"]
    assert evaluate.main(["tournament", *specs, "--game=tictactoe", "--games=4",
                          f"--out={out}"]) == 0
    record = _json(out, "tournament.json")
    ratio = np.array([[np.nan if v is None else v for v in row] for row in record["win_ratio"]])
    assert np.isnan(np.diag(ratio)).all()
    off = ~np.eye(3, dtype=bool)
    assert np.allclose((ratio + ratio.T)[off], 1.0)
    assert len(record["matches"]) == 3 and set(record["elo"]) == set(specs)
    assert ratio[2, 0] >= 0.5  # perfect play does not lose to random play
    elo = [record["elo"][s]["elo"] for s in specs]
    assert sum(elo) == pytest.approx(0.0, abs=1e-6)
    assert os.path.getsize(os.path.join(out, "win_ratio.png")) > 1000
    assert "Elo" in capsys.readouterr().out


def test_curve_plots_every_checkpoint(run, tmp_path):
    out = str(tmp_path / "c")
    assert evaluate.main(["curve", run, "--games=2", "--sims=2", "--mcts_sims=2",
                          f"--out={out}"]) == 0
    record = _json(out, "curve.json")
    assert [row["step"] for row in record["curve"]] == [1, 2]
    assert all(row["training_games"] > 0 for row in record["curve"])
    assert record["curve"][0]["vs_mcts"]["overall"]["games"] == 2
    assert os.path.getsize(os.path.join(out, "curve.png")) > 1000


@pytest.mark.parametrize("argv, message", [
    (["match", "ckpt:{tmp}/missing", "random"], "no run folder"),
    (["match", "alphabeta", "random", "--game=tictactoe"], "unknown agent 'alphabeta'"),
    (["match", "ckpt:{run}", "random", "--game=hex", "--size=3"], "is for tictactoe"),
    (["match", "random", "random"], "give --game=NAME"),
    (["match", "random", "random", "--game=chess"], "unknown game 'chess'"),
    (["match", "random", "random", "--game=hex", "--size=1"], "size must be an integer in 2..19"),
    (["match", "random", "random", "--game=tictactoe", "--games=0"], "--games must be at least 1"),
    (["curve", "{tmp}/missing"], "holds no checkpoints"),
    (["curve", "{run}", "--game=hex"], "is a tictactoe {} run, not hex"),
])
def test_bad_input_exits_with_code_2(argv, message, run, tmp_path, capsys):
    argv = [a.format(tmp=tmp_path, run=run) for a in argv] + [f"--out={tmp_path / 'o'}"]
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("evaluate.py: error:") and message in err
    assert not os.path.exists(tmp_path / "o")  # nothing written


def test_usage_errors_exit_with_code_2():
    with pytest.raises(SystemExit) as e:
        evaluate.main(["match", "random"])
    assert e.value.code == 2
