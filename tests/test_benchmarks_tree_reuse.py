"""benchmarks.tree_reuse at a toy size: the kept nodes counted, both chunks timed, and bad input
refused in one line with exit code 2."""

import pytest

from benchmarks import tree_reuse


def test_counts_kept_nodes_and_times_self_play_with_and_without(capsys):
    argv = ["pretrained/connect_four", "--batch=4", "--plies=3", "--steps=2", "--repeats=1"]
    assert tree_reuse.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# pretrained/connect_four: connect_four") and "puct at " in out[0]
    kept = out[1]
    assert kept.startswith("kept nodes a move: mean ") and "of 12 moves" in kept  # 4 games x 3
    mean = float(kept.split("mean ")[1].split(",")[0])
    assert 1 <= mean <= 3 * 32  # a kept subtree holds the child at least, the limit at most
    assert out[2].startswith("by ply: 0: ") and out[2].count(":") == 4
    assert out[3].startswith("a 2-move chunk of 4 games: ") and "with / without = " in out[3]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["pretrained/hex6"], "searches with gumbel; tree reuse is PUCT's"),
        (["runs/no-such-run"], "no-such-run"),
        (["--batch=0"], "--batch must be at least 1"),
        (["--plies=0"], "--plies must be at least 1"),
    ],
)
def test_refuses_bad_input_in_one_line(capsys, argv, message):
    code = None
    try:
        code = tree_reuse.main(argv)
    except SystemExit as e:
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]
