"""benchmarks.tree_depth: node depths and the levels a batch of trees takes (hand-made trees),
and the command on a toy search."""

import numpy as np
import pytest

from benchmarks import tree_depth


def test_node_depths_follow_the_parents():
    parents = np.array(
        [
            [-1, 0, 1, 2, -1],  # a chain of three, one node unused
            [-1, 0, 0, 1, 3],
        ]
    )
    np.testing.assert_array_equal(
        tree_depth.node_depths(parents), [[0, 1, 2, 3, -1], [0, 1, 1, 2, 3]]
    )


def test_levels_are_the_batch_s_deepest_walk_simulation_by_simulation():
    parents = np.array([[-1, 0, 1, 2, 3], [-1, 0, 0, 0, 0]])  # a chain of 4; a bush
    root_visits = np.array([[4, 0, 0], [3, 1, 0]])
    f = tree_depth.depth_figures(parents, root_visits)
    assert f.levels == 1 + 2 + 3 + 4  # the chain is the deepest at every simulation
    assert f.mean_depth == pytest.approx((1 + 2 + 3 + 4 + 1 + 1 + 1 + 1) / 8)
    assert f.chains == 1  # only the first reaches depth 4 / 2
    assert f.root_share == pytest.approx((1.0 + 0.75) / 2)


def test_the_command_prints_every_search(capsys, monkeypatch):
    specs = []
    real = tree_depth.make_search
    monkeypatch.setattr(
        tree_depth, "make_search", lambda game, spec, *a: specs.append(spec) or real(game, spec, *a)
    )
    figures = tree_depth.main(
        ["--game=hex", "--size=3", "--batch=4", "--simulations=4", "--blocks=1", "--filters=4"]
    )
    assert set(figures) == {"gumbel", "puct", "puct raw"}
    # each PUCT row names its value term, whatever the game's config sets
    assert [(x.search, x.puct_values) for x in specs[1:]] == [("puct", "minmax"), ("puct", "raw")]
    out = capsys.readouterr().out
    assert "| gumbel |" in out and "| puct |" in out and "| puct raw |" in out
    for f in figures.values():
        assert 1 <= f.mean_depth <= 4 and 4 <= f.levels <= 1 + 2 + 3 + 4


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--network=pretrained:nope"], "no shipped network 'nope'"),
        (["--network=big"], "--network takes resnet or pretrained:NAME"),
        (["--game=chess"], "unknown game 'chess'"),
        (["--simulations=0"], "at least 1"),
        (["--game=hex", "--size=1"], "size must be"),
        (
            ["--game=tictactoe", "--size=5"],
            "--size is not an option of tictactoe; its options: none",
        ),
        (["--blocks=0"], "--blocks must be at least 1, got 0"),
        (["--network=pretrained:hex6", "--game=othello"], "--game: pretrained:hex6 brings its own"),
    ],
)
def test_bad_input_is_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        tree_depth.main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err
