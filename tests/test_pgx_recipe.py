"""experiments/pgx_recipe.py: pgx's AlphaZero example trained, then judged on solved positions."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.selfplay import RecipeOutput
from experiments import pgx_recipe


def test_value_targets_are_outcomes_summed_back_and_cut_games_are_masked():
    # two games over three moves: game 0 ends at move 1, won by its mover, then restarts; game 1
    # never ends within the iteration
    data = RecipeOutput(
        obs=jnp.zeros((3, 2, 1, 1, 1)),
        reward=jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]),
        terminated=jnp.array([[False, False], [True, False], [False, False]]),
        action_weights=jnp.full((3, 2, 2), 0.5),
        discount=jnp.array([[-1.0, -1.0], [0.0, -1.0], [-1.0, -1.0]]),
    )
    samples = pgx_recipe.samples_of(data)  # flattened move by move: [t0g0, t0g1, t1g0, ...]
    assert samples.obs.shape == (6, 1, 1, 1) and samples.policy.shape == (6, 2)
    np.testing.assert_array_equal(samples.mask, [True, False, True, False, False, False])
    # the winner's move is worth +1 to it, the loser's move before it -1
    np.testing.assert_allclose(np.asarray(samples.value)[[0, 2]], [-1.0, 1.0])


def test_train_then_errors_on_tictactoes_solved_positions(tmp_path, capsys):
    out = str(tmp_path / "run")
    small = ["--batch=8", "--sims=4", "--steps=10", "--train_batch=16", "--blocks=1"]
    argv = ["train", "--game=tictactoe", "--minutes=0.001", f"--out={out}", *small]
    assert pgx_recipe.main([*argv, "--filters=8"]) == 0
    record = json.loads(open(f"{out}/run.json").read())
    assert record["iterations"] == 1 and record["positions"] == 80
    capsys.readouterr()
    assert pgx_recipe.main(["errors", out, "--sims=4"]) == 0
    line = capsys.readouterr().out.strip()
    assert "of 573 solved positions" in line  # the legal moves agreed with azjax's at all of them
    # the network against azjax's random player through azjax's search: each opening twice
    assert pgx_recipe.main(["match", out, "random", "--sims=4", "--openings=random:3:2"]) == 0
    line = capsys.readouterr().out.strip()
    assert "against random:" in line and "of 6, score" in line


@pytest.mark.parametrize(
    "argv, message",
    [
        (["errors", "no/such/run"], "No such file"),
        (["train", "--out=x", "--batch=2", "--steps=3", "--train_batch=16"], "--train_batch"),
        (["train", "--out=x", "--sims=0"], "--sims must be positive"),
        (["match", "no/such/run", "random"], "No such file"),
        (["match", "no/such/run", "random", "--openings=none"], "--openings"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(argv, message, capsys):
    try:
        code = pgx_recipe.main(argv)
    except SystemExit as e:  # the parser's own errors
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err
