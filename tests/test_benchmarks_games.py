"""Smoke test of the games benchmark: its real main function, on Tic-Tac-Toe, with tiny timings."""

import re

from benchmarks import games as bench


def test_benchmark_prints_a_table_with_the_ratio(capsys):
    rows = bench.main(
        [
            "--games",
            "tictactoe",
            "--batch-sizes",
            "1",
            "4",
            "--min-seconds",
            "0.01",
            "--repeats",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert "cores" in out.splitlines()[0] and "jax" in out.splitlines()[0]  # the machine line
    assert re.search(r"game\s+batch\s+ours/s\s+pgx/s\s+ours/pgx", out)
    printed = re.findall(r"^tictactoe\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)x$", out, re.M)
    assert [int(b) for b, *_ in printed] == [1, 4]
    for _, ours, theirs, ratio in printed:
        assert float(ours.replace(",", "")) > 0 and float(theirs.replace(",", "")) > 0
        assert float(ratio) > 0
    assert [(r.game, r.batch) for r in rows] == [("tictactoe", 1), ("tictactoe", 4)]
    assert all(r.ours > 0 and r.pgx > 0 for r in rows)
    for row, (_, _, _, ratio) in zip(rows, printed):  # ours over pgx's (an inverted one passed)
        assert row.ratio == row.ours / row.pgx and abs(float(ratio) - row.ratio) < 0.01


def test_bad_sizes_are_refused_before_measuring(capsys, tmp_path):
    import pytest

    for argv, needle in (
        (["--batch_sizes", "0"], "--batch_sizes and --repeats must be at least 1"),
        (["--repeats", "0"], "--batch_sizes and --repeats must be at least 1"),
        ([f"--markdown={tmp_path}"], "is a folder; choose a file as --markdown"),
        (["--markdown=/etc/passwd/x.md"], "'/etc/passwd' is a file"),
        (["--markdown="], "an empty path"),
        (["--min_seconds=inf"], "--min_seconds positive, got [1, 64, 1024, 4096], 3, inf"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            bench.parse_args(["--games", "tictactoe", *argv])
        assert exit_info.value.code == 2 and needle in capsys.readouterr().err
