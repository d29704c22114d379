"""The in-loop evaluation's cost benchmark runs end to end on a toy setting."""

import pytest

from benchmarks import evaluation


def test_prints_the_evaluations_share_both_ways(capsys):
    argv = ["--game=tictactoe", "--eval_games=2", "--eval_interval=10", "--repeats=1"]
    assert evaluation.main(argv) == 0  # a game without a size: the recipe's size=6 left out
    out = capsys.readouterr().out
    assert out.startswith("# tictactoe {}")
    for name in ("every game, both agents", "half the games per agent"):
        row = next(line for line in out.splitlines() if line.startswith(f"| {name} |"))
        seconds, share = row.split("|")[2:4]
        assert float(seconds) > 0 and 0 < float(share.strip().rstrip("%")) < 100


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--game=chess"], "unknown game 'chess'"),
        (["--game=tictactoe", "--size=5"], "size"),
        (["--game=tictactoe", "--repeats=0"], "--repeats must be at least 1, got 0"),
        (["--game=tictactoe", "--eval_interval=0"], "--eval_interval must be at least 1"),
    ],
)
def test_bad_input_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        evaluation.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
