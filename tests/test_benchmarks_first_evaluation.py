"""benchmarks.first_evaluation: training runs to their first evaluation, compiled ahead and not,
side by side (toy sizes)."""

import json

import pytest

from benchmarks import first_evaluation

TOY = [
    "--batch_games=8",
    "--num_simulations=2",
    "--num_blocks=1",
    "--num_filters=4",
    "--value_hidden=4",
    "--train_steps=1",
    "--train_batch_size=16",
    "--eval_games=4",
    "--eval_ladder=false",
]


def test_prints_a_row_per_run_the_same_games_in_each(capsys):
    argv = ["--game=tictactoe", "--iterations=2", "--modes=off,on", "--", *TOY]
    assert first_evaluation.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# azjax-train --game=tictactoe --iterations=2 --eval_interval=2")
    rows = [line.strip("|").split("|") for line in lines[3:]]
    assert [r[0].strip() for r in rows] == ["off", "on"]
    for r in rows:
        wall, selfplay, learning, evaluation = (float(x) for x in r[1:5])
        assert wall > selfplay + learning + evaluation > 0 and evaluation > 0
        assert r[5].strip().endswith("%") and r[7].strip() == "-"  # no ladder: no Elo
    assert rows[0][6] == rows[1][6]  # one seed, one machine: the same games


def test_summarizes_a_runs_metrics(tmp_path):
    rows = [
        {"iteration": 1, "games": 10, "selfplay_seconds": 2.0, "train_seconds": 1.0},
        {"iteration": 2, "games": 12, "selfplay_seconds": 1.5, "eval_seconds": 4.0, "eval/elo": 7},
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = first_evaluation.summarize(str(path))
    assert s == dict(selfplay=3.5, learning=1.0, eval=4.0, games=22, elo=7)
    assert first_evaluation.table_row("off", dict(s, wall=10.0)) == (
        "| off | 10.0 | 3.5 | 1.0 | 4.0 | 40% | 22 | +7.0 |"
    )


@pytest.mark.parametrize("bad", ["--modes=sometimes", "--modes=", "--iterations=0", "--rounds=0"])
def test_rejects_bad_flags_in_one_line(bad, capsys):
    with pytest.raises(SystemExit) as e:
        first_evaluation.main([bad])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "benchmarks.first_evaluation: error:" in err[0]


def test_train_flags_are_checked_before_any_run(capsys):
    with pytest.raises(SystemExit) as e:
        first_evaluation.main(["--game=tictactoe", "--size=9", "--modes=off"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "python -m benchmarks.first_evaluation: error: azjax-train unrecognized arguments: --size=9"
    )


def test_a_failed_run_is_reported(tmp_path):
    with pytest.raises(RuntimeError, match="exited 2"):
        first_evaluation.run_once(["--game=tictactoe", "--size=9"], str(tmp_path))
