"""experiments/pgx_recipe.py: pgx's AlphaZero example trained, then judged on solved positions."""

import json
import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
from azjax import solved as sv
from azjax.interrupt import Interrupted
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


def test_a_stopped_training_keeps_what_it_trained_not_an_earlier_runs(tmp_path, monkeypatch):
    """A stop ended the loop without writing anything, and an --out given again kept the
    earlier run's network and run.json, as if this run's."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"seed": 99}))
    counted = pgx_recipe.samples_of

    def stopped_in_the_first_iteration(data):
        os.kill(os.getpid(), signal.SIGINT)
        return counted(data)

    monkeypatch.setattr(pgx_recipe, "samples_of", stopped_in_the_first_iteration)
    small = ["--batch=8", "--sims=4", "--steps=10", "--train_batch=16", "--blocks=1"]
    argv = ["train", "--game=tictactoe", "--minutes=10", f"--out={out}", *small, "--filters=8"]
    with pytest.raises(Interrupted, match="keeps the 1 iterations trained"):
        pgx_recipe.main(argv)
    record = json.loads((out / "run.json").read_text())
    assert record["stopped"] is True and record["iterations"] == 1 and record["seed"] == 0
    assert (out / "variables.pkl").stat().st_size > 0


def test_pgx_hex_at_five_plays_azjax_hex_rules_observations_and_frame():
    pair = pgx_recipe.pairing("hex", 5)
    game, env = pair.game, pair.env
    assert env.num_actions == 26  # 25 cells and pgx's swap, never legal here

    def play(key):
        """A random game through both: (mapped planes and legal moves agreed at every move, the
        ends agreed, azjax's returns, pgx's rewards by player)."""

        def body(carry, k):
            ours, theirs, done = carry
            legal = game.legal_mask(ours)
            seen = (pair.to_pgx(game.observe(ours)) == theirs.observation).all()
            seen &= (legal == theirs.legal_action_mask[:-1]).all() & ~theirs.legal_action_mask[-1]
            action = jax.random.categorical(k, jnp.where(legal, 0.0, -jnp.inf))
            ours2, theirs2 = game.step(ours, action), env.step(theirs, action)
            ended = game.is_terminal(ours2) == theirs2.terminated
            keep = jax.tree.map(
                lambda x, y: jnp.where(done, x, y), (ours, theirs), (ours2, theirs2)
            )
            return (*keep, done | theirs2.terminated), (seen | done, ended | done)

        start = (game.init(), env.init(jax.random.PRNGKey(0)), jnp.bool_(False))
        (ours, theirs, _), (seen, ended) = jax.lax.scan(body, start, jax.random.split(key, 26))
        return seen.all(), ended.all(), game.returns(ours), theirs.rewards[theirs._player_order]

    seen, ended, returns, rewards = jax.jit(jax.vmap(play))(jax.random.split(jax.random.key(1), 8))
    assert np.asarray(seen).all() and np.asarray(ended).all()
    np.testing.assert_array_equal(returns, rewards)  # pgx's rewards by colour are azjax's
    assert set(np.asarray(returns)[:, 0].tolist()) == {-1.0, 1.0}  # both colours won some

    # white's frame: pgx's logits (absolute cells) become azjax's policy frame, the swap dropped
    white = game.step(game.init(), 7)
    obs = game.observe(white)
    logits = jnp.zeros(26).at[12 + 1].set(1.0).at[25].set(5.0)
    frame = pgx_recipe.hex_to_azjax(logits, obs)
    assert frame.shape == (25,)
    np.testing.assert_array_equal(game.policy_to_actions(white, frame), jnp.zeros(25).at[13].set(1))


def test_pgx_othello_plays_azjax_othello_to_the_same_ends_and_planes():
    pair = pgx_recipe.pairing("othello")
    game, env = pair.game, pair.env
    assert game.size == 8 and env.num_actions == game.num_actions == 65

    def play(key):
        """A random game through both, pgx passing after azjax's end until its own: (planes and
        legal moves agreed while azjax's game went on, pgx never ended first, azjax's returns,
        pgx's rewards by player, pgx's end)."""

        def body(carry, k):
            ours, theirs = carry
            over = game.is_terminal(ours)
            legal = game.legal_mask(ours)
            seen = (pair.to_pgx(game.observe(ours)) == theirs.observation).all()
            seen &= (legal == theirs.legal_action_mask).all()
            action = jax.random.categorical(k, jnp.where(legal, 0.0, -jnp.inf))
            moved = env.step(theirs, jnp.where(over, game.pass_action, action))
            theirs2 = jax.tree.map(lambda x, y: jnp.where(theirs.terminated, x, y), theirs, moved)
            ours2 = game.step(ours, action)
            early = theirs2.terminated & ~game.is_terminal(ours2) & ~over
            return (ours2, theirs2), (seen | over, ~early)

        start = (game.init(), env.init(jax.random.PRNGKey(0)))
        black = start[1].current_player  # pgx draws which player id moves first
        steps = jax.random.split(key, game.max_game_length + 3)
        (ours, theirs), (seen, in_step) = jax.lax.scan(body, start, steps)
        rewards = theirs.rewards[jnp.stack([black, 1 - black])]
        return seen.all(), in_step.all(), game.returns(ours), rewards, theirs.terminated

    seen, in_step, returns, rewards, ended = jax.jit(jax.vmap(play))(
        jax.random.split(jax.random.key(2), 16)
    )
    assert np.asarray(seen).all() and np.asarray(in_step).all() and np.asarray(ended).all()
    np.testing.assert_array_equal(returns, rewards)  # pgx's rewards by colour are azjax's
    assert set(np.asarray(returns)[:, 0].tolist()) >= {-1.0, 1.0}  # both colours won some


def test_train_then_errors_on_5x5_hexs_solved_positions(tmp_path, capsys):
    out = str(tmp_path / "run")
    small = ["--batch=8", "--sims=4", "--steps=10", "--train_batch=16", "--blocks=1"]
    argv = ["train", "--game=hex", "--size=5", "--minutes=0.001", f"--out={out}", *small]
    assert pgx_recipe.main([*argv, "--filters=8"]) == 0
    assert json.loads(open(f"{out}/run.json").read())["size"] == 5
    capsys.readouterr()
    assert pgx_recipe.main(["errors", out, "--sims=4"]) == 0
    # pgx's planes and legal moves, mapped, agreed with azjax's at every position of the set
    assert "of 1807 solved positions" in capsys.readouterr().out


def test_train_then_place_and_judge_8x8_othello(tmp_path, capsys):
    out = str(tmp_path / "run")
    small = ["--batch=8", "--sims=4", "--steps=10", "--train_batch=16", "--blocks=1"]
    argv = ["train", "--game=othello", "--minutes=0.001", f"--out={out}", *small, "--filters=8"]
    assert pgx_recipe.main(argv) == 0
    capsys.readouterr()
    # planes and legal moves agreed at every position of 8 x 8's solved set
    assert pgx_recipe.main(["place", out, "--sims=4", "--rounds=1", "--games=2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("vs rung 16 sims (+0): ") and "Elo" in lines[-1]
    assert "(4 games, 1 round)" in lines[-1]
    assert pgx_recipe.main(["errors", out, "--sims=4"]) == 0
    assert f"of {len(sv.load_set(games.make('othello', size=8)))} solved positions" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["errors", "no/such/run"], "No such file"),
        (["train", "--out=x", "--batch=2", "--steps=3", "--train_batch=16"], "--train_batch"),
        (["train", "--out=x", "--sims=0"], "--sims must be positive"),
        (["train", "--out=x", "--size=6"], "only hex has a size"),
        (["train", "--out=x", "--game=hex", "--size=1"], "size must be an integer in 2..19"),
        (["match", "no/such/run", "random"], "No such file"),
        (["match", "no/such/run", "random", "--openings=none"], "--openings"),
        (["place", "no/such/run", "--rounds=0"], "--rounds must be auto or a whole number >= 1"),
        (["place", "no/such/run", "--games=0"], "--games must be >= 1"),
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
