"""Smoke test of the rollouts benchmark: its real main function on Tic-Tac-Toe, tiny sizes."""

import re

import pytest

from benchmarks import rollouts as bench


@pytest.mark.parametrize("network", [[], ["--network", "stub"]])
def test_benchmark_prints_searches_and_gathered_rollouts(network, capsys):
    assert (
        bench.main(
            [
                *network,
                "--game",
                "tictactoe",
                "--batch",
                "64",
                "--sims",
                "2",
                "--repeats",
                "1",
                "--probs",
                "0.25,1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    searches = re.findall(r"^\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x$", out, re.M)
    assert [float(p) for p, *_ in searches] == [0.0, 0.25, 1.0]
    assert float(searches[0][2]) == 1.0 and all(float(ms) > 0 for _, ms, _ in searches)
    gathered = re.findall(r"^\s+0\.25\s+(\d+)/64\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x$", out, re.M)
    assert len(gathered) == 1 and int(gathered[0][0]) < 64


def test_bad_probabilities_are_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exit:
        bench.main(["--game", "tictactoe", "--probs", "0.5,2"])
    assert exit.value.code == 2
    assert "--probs='0.5,2'" in capsys.readouterr().err


def test_benchmark_compares_plies_per_loop_turn(capsys):
    argv = ["--game", "tictactoe", "--batch", "8", "--sims", "2", "--repeats", "1"]
    assert bench.main([*argv, "--probs", "0", "--playout_unroll", "1,3"]) == 0
    out = capsys.readouterr().out
    assert "random playouts by plies per loop turn" in out
    rows = re.findall(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)x\s+([\d.]+)$", out, re.M)
    assert [int(u) for u, *_ in rows] == [1, 3]


def test_bad_playout_unroll_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exit:
        bench.main(["--game", "tictactoe", "--playout_unroll", "0"])
    assert exit.value.code == 2
    assert "--playout_unroll='0'" in capsys.readouterr().err
