"""benchmarks.ladder_rungs: the loop's ladder match timed against each rung (toy sizes)."""

import pytest

from azjax.ladder import RUNG_COST_EXPONENT
from benchmarks import ladder_rungs


def test_prints_a_row_per_rung(tiny_run, capsys):
    argv = [f"--checkpoint={tiny_run}", "--rungs=1:3", "--eval_games=4"]
    assert ladder_rungs.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"# {tiny_run} (step 2), tictactoe")
    assert "2 games a match" in lines[0]
    rows = [line.strip("|").split("|") for line in lines[3:]]
    assert [int(r[0]) for r in rows] == [2, 4, 8]
    assert all(float(r[1]) >= 0 for r in rows)  # toy matches: milliseconds
    assert rows[0][2].strip() == rows[0][3].strip() == "" and all(r[3].strip() for r in rows[1:])


def test_the_estimate_column_is_the_budgets():
    rows = ladder_rungs.table({512: 2.0, 1024: 5.0})
    assert rows[2] == "| 512 | 2.00 | | |"
    assert rows[3] == f"| 1024 | 5.00 | 2.50 | {2.0 * 2**RUNG_COST_EXPONENT:.2f} |"


@pytest.mark.parametrize(
    "bad", ["--rungs=8", "--rungs=9:3", "--eval_games=1", "--repeats=0", "--step=x"]
)
def test_rejects_bad_flags_in_one_line(bad, tiny_run, capsys):
    with pytest.raises(SystemExit) as e:
        ladder_rungs.main([f"--checkpoint={tiny_run}", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error:" in err[-1]


def test_a_missing_run_is_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        ladder_rungs.main([f"--checkpoint={tmp_path / 'none'}"])
    assert e.value.code == 2
    assert "python -m benchmarks.ladder_rungs: error: no run folder" in capsys.readouterr().err
