"""End to end at toy scale: train.py trains Tic-Tac-Toe, checkpoints, resumes; bad input named;
the learner."""

import dataclasses
import glob
import json
import math
import os
import shutil
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import readme_metrics

from azjax import checkpoint, loop, loop_eval, network, parallel, training
from azjax import config as cfg
from azjax.checkpoint import Checkpointer
from azjax.commands import train
from azjax.replay import Batch

TOY = [
    "--game=tictactoe",
    "--batch_games=16",
    "--num_simulations=4",
    "--num_blocks=1",
    "--num_filters=4",
    "--value_hidden=4",
    "--train_steps=3",
    "--train_batch_size=32",
    "--eval_interval=2",
    "--eval_games=4",
    "--eval_ladder=false",  # the ladder placement has its own tests (test_ladder.py)
    "--checkpoint_interval=2",
    "--no_progress",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ttt"))
    assert train.main(TOY + [f"--workdir={workdir}", "--iterations=2"]) == 0
    return workdir


def _metrics(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_a_run_writes_metrics_checkpoints_and_summary(run):
    rows = _metrics(run)
    assert [r["iteration"] for r in rows] == [1, 2]
    assert not readme_metrics.undocumented(rows)
    assert all(np.isfinite(r["loss/total"]) for r in rows)
    for r in rows:  # shares of the iteration's finished games
        first, draws = r["selfplay/first_player_wins"], r["selfplay/draws"]
        assert 0 <= first <= 1 and 0 <= draws <= 1 and first + draws <= 1
    for r in rows:  # the learner's losses on the positions settled in the chunk, held out
        assert r["heldout/positions"] > 0
        assert np.isfinite([r["heldout/value"], r["heldout/policy"]]).all()
    assert np.isfinite([rows[-1]["heldout/seen_value"], rows[-1]["heldout/seen_policy"]]).all()
    # and on those the chunk before settled: none before the second iteration
    assert rows[0]["heldout/prev_positions"] == 0 and "heldout/prev_value" not in rows[0]
    assert rows[-1]["heldout/prev_positions"] > 0
    assert np.isfinite([rows[-1]["heldout/prev_value"], rows[-1]["heldout/prev_policy"]]).all()
    config = cfg.Config.from_json(open(os.path.join(run, "config.json")).read())
    assert all(r["train/learning_rate"] == pytest.approx(config.learning_rate) for r in rows)
    for name in ("mcts", "previous"):  # the score is what the W/D/L of its 4 games make
        w, d, l = rows[-1][f"eval/{name}_wdl"]
        assert w + d + l == 4
        assert rows[-1][f"eval/{name}_score"] == pytest.approx((w + d / 2) / 4)
    assert Checkpointer(run).steps() == [2]
    summary = json.load(open(os.path.join(run, "summary.json")))
    assert summary["iterations"] == 2 and summary["games"] > 0
    best = summary["best"]  # no ladder and no --eval_opponent: the exact error rate ranks them
    assert (best["step"], best["metric"]) == (2, "eval/error_rate") and 0 <= best["value"] <= 1
    trend = summary["trends"]["eval/error_rate"]  # every evaluation of the run, first to last
    assert trend["evaluations"] == sum("eval/error_rate" in r for r in rows)
    assert trend["last"] == [rows[-1]["iteration"], rows[-1]["eval/error_rate"]]
    assert os.listdir(os.path.join(run, "tb"))
    assert cfg.Config.from_json(open(os.path.join(run, "config.json")).read()).num_filters == 4


def test_resume_continues_from_the_latest_checkpoint(run, tmp_path, capsys):
    workdir = str(tmp_path / "copy")
    shutil.copytree(run, workdir)
    # the saved config is the base: no --game needed, only what changes (here the schedule, and
    # the value target: TD(lambda) returns, the restarts: branched, and self-play resigning, so
    # those paths run end to end)
    argv = [f"--workdir={workdir}", "--resume", "--iterations=4", "--lr_schedule=cosine"]
    more = ["--value_lambda=0.8", "--branch_prob=0.5", "--resign_threshold=0.5", "--no_progress"]
    assert train.main(argv + more) == 0
    changed = capsys.readouterr().err.splitlines()[0]  # each setting the flags change, named
    assert changed.startswith("resuming with settings changed since checkpoint 2: "), changed
    for part in (
        "iterations 2 -> 4",
        "lr_schedule 'constant' -> 'cosine'",
        "branch_prob 0.0 -> 0.5",
    ):
        assert part in changed, changed
    rows = _metrics(workdir)
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    assert not readme_metrics.undocumented(rows)  # with resignation's
    assert all(np.isfinite(r["loss/value"]) for r in rows)
    saved = cfg.Config.from_json(open(os.path.join(workdir, "config.json")).read())
    assert (saved.value_lambda, saved.branch_prob, saved.resign_threshold) == (0.8, 0.5, 0.5)
    # the share of the games that ended by a resignation, logged by the runs that resign
    assert not any("selfplay/resigned" in r for r in rows[:2])
    assert all(0 <= r["selfplay/resigned"] <= 1 for r in rows[2:])
    # and how often a resignation would have been wrong in the played-out games
    assert all(0 <= r["selfplay/resign_wrong"] <= r["selfplay/resign_checked"] for r in rows[2:])
    assert Checkpointer(workdir).steps() == [2, 4]
    peak = cfg.Config.from_json(open(os.path.join(run, "config.json")).read()).learning_rate
    for row, progress in zip(rows[2:], (2.5 / 4, 3.5 / 4)):  # the middle of iterations 3, 4
        want = peak * 0.5 * (1 + np.cos(np.pi * progress))
        assert row["train/learning_rate"] == pytest.approx(want)


def _replays(workdir):
    folder = os.path.join(workdir, "checkpoints")
    return sorted(int(s) for s in os.listdir(folder) if os.path.isdir(f"{folder}/{s}/replay"))


def test_resume_restores_the_replay_and_only_the_newest_checkpoint_keeps_one(run, tmp_path, capsys):
    workdir = str(tmp_path / "copy")
    shutil.copytree(run, workdir)
    assert _replays(workdir) == [2]
    assert train.main([f"--workdir={workdir}", "--resume", "--iterations=4", "--no_progress"]) == 0
    err = capsys.readouterr().err
    assert "replay buffer starts empty" not in err
    assert "settings changed since checkpoint 2: iterations 2 -> 4\n" in err  # nothing else
    rows = _metrics(workdir)
    # the first resumed iteration adds its settled positions to the saved ones (a fresh buffer
    # would hold about one iteration's, as iteration 1's)
    assert rows[2]["replay_ready"] > rows[1]["replay_ready"] > rows[0]["replay_ready"]
    assert _replays(workdir) == [4]  # checkpoint 4's replaced checkpoint 2's
    # checkpoint 2 keeps its state, config and rows
    checkpointer = Checkpointer(workdir)
    try:
        assert checkpointer.steps() == [2, 4]
        config = checkpoint.read_config(workdir, 2)
        state, step = checkpointer.restore(checkpoint.run_template(config), 2)
        assert step == 2 and int(state.iteration) == 2
        assert [r["iteration"] for r in checkpointer.saved_rows(2)] == [1, 2]
    finally:
        checkpointer.close()
    assert checkpoint.load_checkpoint(workdir, 2)[2] == 2


def test_a_saved_replay_is_the_buffer_of_its_iteration_though_donated_after(tmp_path):
    """The save is asynchronous and the next iteration's `play` donates the buffer: what is on
    disk is the buffer as it was when the save started, restored with the loop's placement."""
    config = cfg.load("tictactoe", dict(batch_games=16, num_blocks=1, num_filters=4))
    config = dataclasses.replace(config, value_hidden=4, replay_games=40)
    fns = loop.make_iteration(config, parallel.make_mesh())
    bump = jax.jit(
        lambda b, n: b.replace(step=b.step + n, value=b.value + n, settled=b.settled + 1),
        donate_argnums=0,
    )
    buffer = bump(fns.init_buffer(), 5)
    checkpointer = Checkpointer(str(tmp_path))
    try:
        checkpointer.save(1, fns.init_run(), config, [], buffer)
        buffer = bump(buffer, 100)  # overwrites the saved arrays in place where it can
        checkpointer.wait()
        saved, why = checkpointer.restore_replay(loop.replay_template(fns.init_buffer), 1)
    finally:
        checkpointer.close()
    assert why == "" and int(saved.step) == 5
    assert np.all(np.asarray(saved.value) == 5) and np.all(np.asarray(saved.settled) == 0)
    empty = fns.init_buffer()
    assert jax.tree_util.tree_map(lambda a: a.sharding, saved) == jax.tree_util.tree_map(
        lambda a: a.sharding, empty
    )


@pytest.mark.parametrize("saved_with, resumed_with", [(0.0, 0.5), (0.5, 0.0)])
def test_turning_policy_surprise_on_or_off_at_a_resume_keeps_the_replay(
    tmp_path, capsys, saved_with, resumed_with
):
    """Not structural, but the buffer keeps surprises only with it: the saved one was refused
    as 'other sizes' (naming --replay_games, --batch_games or dataset) and the run restarted
    with an empty replay."""
    base = cfg.load("tictactoe", dict(batch_games=16, num_blocks=1, num_filters=4))
    base = dataclasses.replace(base, value_hidden=4, replay_games=40)
    mesh = parallel.make_mesh()
    before = loop.make_iteration(dataclasses.replace(base, policy_surprise=saved_with), mesh)
    after = loop.make_iteration(dataclasses.replace(base, policy_surprise=resumed_with), mesh)
    buffer = jax.jit(lambda b: b.replace(step=b.step + 5, value=b.value + 1))(before.init_buffer())
    checkpointer = Checkpointer(str(tmp_path))
    try:
        checkpointer.save(1, before.init_run(), base, [], buffer)
        checkpointer.wait()
        restored = loop._open_replay(after, checkpointer, 1)
    finally:
        checkpointer.close()
    assert int(restored.step) == 5 and np.all(np.asarray(restored.value) == 1)
    if resumed_with:  # the saved positions count as unsurprising
        assert np.all(np.asarray(restored.surprise) == 0)
    else:
        assert restored.surprise is None
    assert restored.surprise is None or restored.surprise.sharding == restored.value.sharding
    err = capsys.readouterr().err
    assert "starts empty" not in err
    assert f"policy surprise weighting turned {'on' if resumed_with else 'off'}" in err


@pytest.mark.parametrize("how", ["deleted", "resized"])
def test_a_checkpoint_without_a_fitting_replay_resumes_with_an_empty_one(
    run, tmp_path, capsys, how
):
    workdir = str(tmp_path / "copy")
    shutil.copytree(run, workdir)
    argv = [f"--workdir={workdir}", "--resume", "--iterations=3", "--no_progress"]
    if how == "deleted":  # as checkpoints made before they kept the replay
        shutil.rmtree(os.path.join(workdir, "checkpoints", "2", "replay"))
        why = " holds no replay buffer"
    else:  # a resumed run may change the replay's size
        argv += ["--replay_games=40"]
        why = "'s replay buffer has other sizes"
    assert train.main(argv) == 0
    err = capsys.readouterr().err
    assert f"the replay buffer starts empty: checkpoint 2{why}" in err
    rows = _metrics(workdir)
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    assert rows[2]["replay_ready"] < rows[1]["replay_ready"]
    assert _replays(workdir) == [3]


def test_resume_without_workdir_keeps_the_default_folders_settings(run, tmp_path, monkeypatch):
    saved = cfg.Config.from_json(open(os.path.join(run, "config.json")).read())
    shutil.copytree(run, tmp_path / "runs" / saved.game)
    monkeypatch.chdir(tmp_path)  # train.py resumes runs/<game>: its config.json is the base
    config, _ = train.parse([f"--game={saved.game}", "--resume", "--iterations=9"])
    assert config == dataclasses.replace(saved, iterations=9)
    config, _ = train.parse([f"--game={saved.game}", "--resume_step=2"])
    assert config == saved


def test_the_start_line_says_what_trains_and_names_the_cpu_recipe_for_a_gpu_batch():
    config = cfg.load("hex", {"batch_games": 1024, "time_budget": 30})
    line = loop.start_line(config, "runs/h", 2, "cpu", resume=False)
    first, note = line.split("\n")
    assert first == (
        "training hex size=6 swap=False in runs/h: 100 iterations or 30 minutes, 1024 games in "
        "lock-step at 64 simulations (puct), on 2 cpu devices"
    )
    assert note.startswith("note: 1024 games in lock-step is a GPU's size; on a CPU --config=cpu")
    assert "(128 games at 32 simulations, a 2x32 network)" in note  # configs/cpu.py's, for Hex
    assert "\n" not in loop.start_line(config, "runs/h", 1, "gpu", resume=False)
    small = cfg.load("othello", {"batch_games": 128, "iterations": 40, "algorithm": "exit"})
    line = loop.start_line(small, "runs/o", 1, "cpu", resume=True)
    assert line.startswith("continuing othello size=6 in runs/o: to iteration 40, Expert Iteration")
    assert "128 apprentice games an iteration, the expert at 64 simulations (UCT, c=" in line
    assert "(puct)" not in line  # ExIt's expert ignores --search
    first, note = line.split("\n")  # a CPU-sized batch: no CPU note, but the prior weight's
    assert note == (
        "note: --exit_prior_weight=100 is over twice the 1.73 simulations a move gets (64 / 37): "
        "the apprentice's prior picks the expert's moves (the paper's 100 is for 10,000 "
        "simulations on 81 moves); about 1.7 lets the search disagree with it"
    )
    fitting = dataclasses.replace(small, exit_prior_weight=2.0)
    assert "\n" not in loop.start_line(fitting, "runs/o", 1, "cpu", resume=True)


def test_the_start_line_says_how_the_search_values_its_leaves():
    """The thesis's rollouts and the uniform evaluator: config.json had them, the line did not."""

    def played(**options):
        return loop.start_line(cfg.load("tictactoe", options), "r", 1, "cpu", resume=False)

    assert "simulations (gumbel), on" in played()
    assert ": 1 iteration, 256 games" in played(iterations=1)  # "1 iterations" before
    rolled = played(rollout_policy="random", rollout_prob=0.5, rollout_weight=0.25)
    assert "(gumbel, random rollouts from 0.5 of the leaves, blended at lambda=0.25)" in rolled
    pure = played(evaluator="uniform", rollout_policy="random", rollout_prob=1, rollout_weight=1)
    assert "no network at the leaves: uniform priors, value 0, random rollouts from 1" in pure
    exit_ = played(algorithm="exit", rollout_policy="policy", rollout_prob=1, rollout_sample=True)
    assert "w_a=100, sampled policy rollouts from 1 of the leaves, blended at lambda=0.5)" in exit_


def test_the_start_line_says_what_the_in_loop_evaluation_skips():
    """A game with no ladder table or solved positions: eval/elo and eval/error_rate were
    dropped without a word, even when asked for by name."""
    line = loop.start_line(cfg.load("hex", {"size": 3}), "runs/h", 1, "gpu", resume=False)
    assert line.split("\n")[1] == (
        "note: hex {'size': 3, 'swap': False} has no ladder table (eval/elo; `evaluate.py "
        "ladder` rates one) and no solved positions (eval/error_rate): the in-loop evaluation "
        "skips them"
    )
    nine = loop.start_line(cfg.load("hex", {"size": 9}), "runs/h", 1, "gpu", resume=False)
    assert nine.endswith(
        "\nnote: hex {'size': 9, 'swap': False} has no solved positions "
        "(eval/error_rate): the in-loop evaluation skips them"
    )
    quiet = cfg.load("hex", {"size": 3, "eval_ladder": False, "eval_errors": False})
    assert "\n" not in loop.start_line(quiet, "runs/h", 1, "gpu", resume=False)
    unevaluated = cfg.load("hex", {"size": 3, "eval_interval": 0})
    assert "\n" not in loop.start_line(unevaluated, "runs/h", 1, "gpu", resume=False)


def test_a_resumed_run_keeps_its_clock(run, tmp_path, capsys):
    """The time budget and the rate's schedule count the earlier sessions' time (the last row's
    run_seconds), so a run killed and resumed trains what it would have without the kill."""
    workdir = str(tmp_path / "clock")
    shutil.copytree(run, workdir)
    rows = _metrics(workdir)
    assert 0 < rows[0]["run_seconds"] <= rows[1]["run_seconds"]
    rows[-1]["run_seconds"] = 55.0  # as if the first session had taken 55 s
    with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    # --time_budget without --iterations: the minutes alone end the run (iterations=0, no limit)
    argv = [f"--workdir={workdir}", "--resume", "--time_budget=1"]
    argv += ["--lr_schedule=cosine", "--no_progress"]
    assert train.main(argv) == 0
    err = capsys.readouterr().err
    assert "after 0.9 minutes of training of its time_budget of 1" in err
    assert f"continuing tictactoe in {workdir}: 1 minute, 16 games in lock-step at 4 " in err
    rows = _metrics(workdir)
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    assert summary["stopped_by"] == "time_budget" and summary["run_seconds"] >= 60
    assert json.load(open(os.path.join(workdir, "config.json")))["iterations"] == 0
    assert 3 <= len(rows) < 1000 and rows[2]["run_seconds"] > 55
    assert "eval/error_rate" in rows[-1]  # the session's last iteration, odd or even (eval_final)
    peak = cfg.Config.from_json(open(os.path.join(run, "config.json")).read()).learning_rate
    assert rows[2]["train/learning_rate"] < 0.02 * peak  # 55 s of 60: the schedule's tail
    # and with the budget spent, a resume says so and stops at once, also where the session's
    # last row was written under the budget and its checkpoint and evaluation took it past
    # (summary.json keeps the clock at its end)
    rows[-1]["run_seconds"] = 50.0
    with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    assert train.main(argv) == 0
    assert "its time_budget of 1 minutes is spent: a larger" in capsys.readouterr().err
    assert len(_metrics(workdir)) == len(rows)


def test_run_seconds_from_rows_with_and_without_the_loops_clock():
    from azjax.metrics import run_seconds

    old = [dict(selfplay_seconds=10.0, train_seconds=2.0), dict(selfplay_seconds=5.0)]
    assert run_seconds(old) == [12.0, 17.0]  # rows from before run_seconds: what they log
    new = [*old, dict(selfplay_seconds=5.0, run_seconds=40.0), dict(eval_seconds=3.0)]
    assert run_seconds(new) == [12.0, 17.0, 40.0, 43.0]
    assert run_seconds([]) == []


def test_learning_rate_schedules_over_the_run():
    f = training.lr_fraction
    assert [f("constant", p) for p in (0, 0.5, 1)] == [1.0, 1.0, 1.0]
    assert [f("cosine", p) for p in (0, 0.5, 1)] == pytest.approx([1.0, 0.5, 0.0])
    w = training.WARMUP
    assert [f("warmup_cosine", p) for p in (0, w / 2, w, 1)] == pytest.approx([0, 0.5, 1, 0])
    assert f("cosine", -1) == 1.0 and f("cosine", 2) == pytest.approx(0.0)  # clipped
    with pytest.raises(ValueError, match="unknown lr_schedule 'step'"):
        f("step", 0.5)
    # the middle of each iteration, or the time spent of a budget, whichever is further
    progress = training.run_progress
    assert progress(1, 10) == pytest.approx(0.05)
    assert progress(10, 10) == pytest.approx(0.95)
    assert progress(1, 100000, elapsed_seconds=30, time_budget=1.0) == pytest.approx(0.5)
    assert progress(8, 10, elapsed_seconds=30, time_budget=10.0) == pytest.approx(0.75)
    assert progress(1, 10, elapsed_seconds=900, time_budget=10.0) == 1.0
    assert progress(500, math.inf, elapsed_seconds=30, time_budget=1.0) == pytest.approx(0.5)


def test_a_time_budget_alone_ends_the_run():
    """train.py --time_budget=M without --iterations trains M minutes (iterations=0: no limit),
    where the README's commands stopped at the default 100 iterations; --iterations with it keeps
    "whichever comes first"; iterations=0 without a time budget would never end."""
    config, _ = train.parse(["--game=hex", "--size=5", "--config=cpu", "--time_budget=15"])
    assert (config.iterations, config.time_budget) == (0, 15.0)
    config, _ = train.parse(["--game=tictactoe", "--time_budget=2", "--iterations=7"])
    assert (config.iterations, config.time_budget) == (7, 2.0)
    assert train.parse(["--game=tictactoe"])[0].iterations == 40  # its config's count
    with pytest.raises(ValueError, match="iterations=0 .no limit. needs a time_budget"):
        train.parse(["--game=tictactoe", "--iterations=0"])


def test_evaluations_over_the_budget_are_put_off(run, tmp_path):
    """--eval_budget: a session's first evaluation runs; one that falls due when, with it (as
    long as the last), the evaluations would take more than that share of the session's time
    waits for a later interval."""
    workdir = str(tmp_path / "budget")
    shutil.copytree(run, workdir)
    argv = [f"--workdir={workdir}", "--resume", "--iterations=6", "--eval_budget=0.001"]
    argv += ["--eval_final=false"]  # 6 is the session's last: its evaluation would run in full
    assert train.main(argv + ["--no_progress"]) == 0
    rows = _metrics(workdir)
    assert "eval/mcts_score" in rows[3] and rows[3]["eval_seconds"] > 0  # iteration 4: the first
    assert rows[5]["eval_postponed"] == 1 and "eval/mcts_score" not in rows[5]
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    # the session's evaluations: the full one at 4 and the put-off one's exact error rate at 6,
    # whose seconds count too (azjax/loop_eval.py); the summary rounds to 0.1 s
    session = rows[3]["eval_seconds"] + rows[5].get("eval_seconds", 0.0)
    assert summary["eval_seconds"] == pytest.approx(session, abs=0.051)
    assert summary["eval_postponed"] == sum(r.get("eval_postponed", 0) for r in rows) >= 1
    assert "in-loop evaluation:" in train.closing_message(summary, workdir)
    config = cfg.load("tictactoe", {"eval_budget": 0.1})
    assert loop_eval.evaluation_affordable(config, 10.0, 100.0)
    assert not loop_eval.evaluation_affordable(config, 10.1, 100.0)
    assert loop_eval.evaluation_affordable(config, 10.0, 190.0, expected=10.0)  # 20 of 200 s
    assert not loop_eval.evaluation_affordable(config, 10.0, 180.0, expected=10.0)  # 20 of 190 s
    assert loop_eval.evaluation_affordable(cfg.load("tictactoe", {"eval_budget": 0.0}), 99.0, 100.0)


def test_the_sessions_evaluations_fall_due_run_or_wait_and_count_their_seconds():
    """`loop_eval.Evaluations`, the loop's schedule, with a stand-in evaluation: due every
    eval_interval and at a session's last iteration (eval_final); the full evaluation and the
    caller's own beside it (a key of its own) where the budget affords it, else the error rate
    alone, put off; the seconds counted, the compiling apart."""
    config = cfg.load("tictactoe", {"eval_budget": 0.1, "eval_interval": 10})
    calls = []

    def evaluate(variables, previous, key, full=True, compile_only=False):
        calls.append((full, compile_only))
        return {"eval/mcts_score": 0.5} if full else {"eval/error_rate": 0.25}

    keys = []
    extra = lambda variables, key: keys.append(key) or {"eval/opponent_score": 1.0}  # noqa: E731
    evaluations = loop_eval.Evaluations(config, evaluate, limit=100, extra=extra)
    assert evaluations.due(10, lambda: False) and not evaluations.due(11, lambda: False)
    assert evaluations.due(11, lambda: True)  # the session's last
    assert not loop_eval.Evaluations(config, None, limit=100).due(10, lambda: True)
    key = jax.random.PRNGKey(0)
    values, full = evaluations.run("v", "p", key, session_seconds=100.0)
    assert full and values["eval/mcts_score"] == 0.5 and values["eval/opponent_score"] == 1.0
    assert not np.array_equal(keys[0], key)  # the caller's stream, not the loop's key
    # nor a key the loop's evaluation draws from (split(key, 3) is fold_in(key, 0 .. 2) in JAX;
    # at stream 1 the --eval_opponent match drew the keys of the match against pure MCTS)
    for taken in [*jax.random.split(key, 3), jax.random.fold_in(key, 3)]:
        assert not np.array_equal(keys[0], taken)
    assert evaluations.seconds == values["eval_seconds"] and "eval_postponed" not in values
    assert evaluations.next == pytest.approx(
        values["eval_seconds"] - values["eval_compile_seconds"]
    )
    evaluations.next = 50.0  # the next expected to take 50 s, 100 s into the session: over 10%
    values, full = evaluations.run("v", "p", key, session_seconds=100.0)
    assert not full and values["eval_postponed"] == 1 and values["eval/error_rate"] == 0.25
    assert "eval/mcts_score" not in values and calls == [(True, False), (False, False)]
    # the session's last iteration: no later interval to wait for, so in full over the budget
    values, full = evaluations.run("v", "p", key, session_seconds=100.0, final=True)
    assert full and values["eval/mcts_score"] == 0.5 and "eval_postponed" not in values
    evaluations.close()


@pytest.mark.parametrize("final", [True, False])
def test_a_sessions_last_iteration_is_evaluated(run, tmp_path, final):
    """--eval_final (on by default): a session that ends between intervals evaluates its last
    iteration too, so its last checkpoint is measured and can be the run's @best."""
    workdir = str(tmp_path / "final")
    shutil.copytree(run, workdir)
    argv = [f"--workdir={workdir}", "--resume", "--iterations=3", "--eval_budget=0"]
    assert train.main(argv + [f"--eval_final={str(final).lower()}", "--no_progress"]) == 0
    rows = _metrics(workdir)
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    assert "eval/mcts_score" in rows[1]  # the interval's
    assert ("eval/mcts_score" in rows[2]) == final and ("eval/error_rate" in rows[2]) == final
    best = checkpoint.best_checkpoint(workdir, by="error_rate")
    assert best.step in ((2, 3) if final else (2,))
    config = cfg.load("tictactoe", {"eval_interval": 4, "iterations": 6})
    assert not loop._session_ends(config, 3, spent=True)  # before the first interval
    assert loop._session_ends(config, 6, spent=False)  # --iterations'
    assert not loop._session_ends(config, 5, spent=False)
    assert loop._session_ends(config, 5, spent=True)  # the time budget's
    budget = cfg.load("tictactoe", {"eval_interval": 4, "time_budget": 1.0})
    assert loop._budget_spent(budget, time.time() - 61)
    assert not loop._budget_spent(budget, time.time() - 59) and not loop._budget_spent(config, 0)
    stop = loop.StopSignals()  # none received: the stop follows the verdict it is given
    assert loop._should_stop(budget, time.time(), stop, spent=True) == "time_budget"
    assert loop._should_stop(budget, time.time() - 61, stop, spent=False) == ""
    assert loop._should_stop(budget, time.time() - 61, stop) == "time_budget"  # judged now


def test_the_exact_error_rate_is_measured_when_the_matches_are_put_off(run, tmp_path, monkeypatch):
    """Where the game has solved positions, an evaluation put off by --eval_budget still
    measures the exact error rate (seconds), counted in eval_seconds; the matches wait."""
    calls, ahead = [], []

    def fake_errors(config, mesh=None):  # stands in for azjax.solved's measure of a real set
        def measure(variables, key, compile_only=False):
            if compile_only:  # the loop's background compilation: nothing to compile here
                ahead.append(key)
                return {}
            calls.append(key)
            return {"eval/error_rate": 0.25, "eval/error_ci95": 0.05}

        return measure

    monkeypatch.setattr(loop_eval, "make_error_evaluation", fake_errors)
    workdir = str(tmp_path / "errors")
    shutil.copytree(run, workdir)
    rows = _metrics(workdir)  # as if the run had been placed on a ladder at its last evaluation
    rows[-1]["eval/elo"] = 123.0
    with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    made, make_evaluation = [], loop.make_evaluation
    monkeypatch.setattr(
        loop,
        "make_evaluation",
        lambda config, mesh=None, **kw: made.append(kw) or make_evaluation(config, mesh, **kw),
    )
    argv = [f"--workdir={workdir}", "--resume", "--iterations=6", "--eval_budget=0.001"]
    argv += ["--eval_final=false"]  # 6 is the session's last: its evaluation would run in full
    # and the next evaluation is compiled ahead on a thread: at the start for iteration 4, then
    # after it for iteration 6 (the real matches, played on the loop's thread)
    assert train.main(argv + ["--eval_compile_ahead=on", "--no_progress"]) == 0
    assert len(ahead) == 2
    assert made == [dict(ratings={"tictactoe": 123.0})]  # the placement would start there
    rows = _metrics(workdir)
    assert "eval/mcts_score" in rows[3] and rows[3]["eval/error_rate"] == 0.25  # the full one
    assert rows[5]["eval_postponed"] == 1 and "eval/mcts_score" not in rows[5]
    assert rows[5]["eval/error_rate"] == 0.25 and rows[5]["eval_seconds"] >= 0.0
    assert len(calls) == 2  # iterations 4 and 6
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    assert summary["eval_seconds"] == pytest.approx(
        rows[3]["eval_seconds"] + rows[5]["eval_seconds"], abs=0.1
    )


def test_restart_without_resume_is_refused(run, capsys):
    assert train.main(TOY + [f"--workdir={run}", "--iterations=3"]) == 2
    assert "--resume" in capsys.readouterr().err


def test_resume_with_another_network_is_refused(run, capsys):
    assert train.main([f"--workdir={run}", "--resume", "--num_filters=8", "--no_progress"]) == 2
    assert "num_filters: saved 4 vs now 8" in capsys.readouterr().err
    # a loss weight may change, but not give the network a head it was saved without
    argv = [f"--workdir={run}", "--resume", "--soft_policy_weight=2", "--no_progress"]
    assert train.main(argv) == 2
    assert "soft_policy_weight: saved 0.0 vs now 2.0" in capsys.readouterr().err
    # nor with another seed: its keys are the checkpoint's
    assert train.main([f"--workdir={run}", "--resume", "--seed=5", "--no_progress"]) == 2
    assert "seed: saved 0 vs now 5" in capsys.readouterr().err
    # nor another optimizer, whose state the checkpoint's is not
    assert train.main([f"--workdir={run}", "--resume", "--optimizer=sgd", "--no_progress"]) == 2
    assert "optimizer: saved 'adam' vs now 'sgd'" in capsys.readouterr().err


def test_corrupt_checkpoint_is_named(run, tmp_path, capsys):
    workdir = str(tmp_path / "corrupt")
    shutil.copytree(run, workdir)
    state_dir = os.path.join(workdir, "checkpoints", "2", "state")
    for root, _, files in os.walk(state_dir):
        for name in files:
            with open(os.path.join(root, name), "wb") as f:
                f.write(b"garbage")
    assert train.main([f"--workdir={workdir}", "--resume", "--iterations=3", "--no_progress"]) == 2
    assert "checkpoint 2" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--game=chess"], "known games: connect_four, hex, othello, tictactoe"),
        (["--game=hex", "--size=1"], "size must be an integer in 2..19"),
        (["--game=othello", "--size=7"], "even integer"),
        (["--game=hex", "--search=alphabeta"], "search must be one of puct, gumbel"),
        (["--game=hex", "--rollout_prob=1.5"], "rollout_prob must be <= 1.0"),
        (["--game=hex", "--num_simulations=many"], "--num_simulations: expected int"),
        (["--game=hex", "--evaluator=uniform"], "needs rollouts"),
        (["--game=hex", "--eval_games=3"], "eval_games must be even"),
    ],
)
def test_bad_flags_get_a_clear_error(flags, message, capsys):
    assert train.main(flags) == 2
    assert message in capsys.readouterr().err


def test_resume_without_a_checkpoint_is_named(tmp_path, capsys):
    assert train.main(TOY + [f"--workdir={tmp_path}", "--resume"]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_train_step_fits_a_fixed_batch():
    config = cfg.load(
        "tictactoe", {"optimizer": "adam", "learning_rate": 0.01, "weight_decay": 0.0}
    )
    game = config.make_game()
    net = network.make_network(config, game)
    variables = network.init_variables(net, game, jax.random.PRNGKey(0))
    opt = training.make_optimizer(config)
    state = training.init_train_state(variables, opt)
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    obs = (jax.random.uniform(k1, (16, 3, 3, 3)) < 0.3).astype(jnp.float32)
    policy = jax.nn.one_hot(jax.random.randint(k2, (16,), 0, 9), 9)
    batch = Batch(obs=obs, policy=policy, value=jnp.where(jnp.arange(16) % 2 == 0, 1.0, -1.0))
    step = jax.jit(training.make_train_step(net, opt, 0.0))
    state, first = step(state, batch)
    for _ in range(60):
        state, losses = step(state, batch)
    assert float(losses.total) < 0.5 * float(first.total)
    assert int(state.step) == 61
    # lr_scale multiplies the step's updates: none at 0, half of them at 0.5 (Adam's step does
    # not depend on the gradient's size)
    params = state.variables["params"]
    moved = {}
    for scale in (0.0, 0.5, 1.0):
        after, _ = step(state, batch, scale)
        moved[scale] = jax.tree_util.tree_map(jnp.subtract, after.variables["params"], params)
    assert all(float(jnp.max(jnp.abs(d))) == 0 for d in jax.tree_util.tree_leaves(moved[0.0]))
    for half, full in zip(*map(jax.tree_util.tree_leaves, (moved[0.5], moved[1.0]))):
        np.testing.assert_allclose(half, full / 2, rtol=1e-3, atol=1e-7)


def _tictactoe_learner(overrides: dict):
    """(net, variables, optimizer, train state) of a Tic-Tac-Toe config with `overrides`."""
    config = cfg.load("tictactoe", overrides)
    game = config.make_game()
    net = network.make_network(config, game)
    variables = network.init_variables(net, game, jax.random.PRNGKey(0))
    opt = training.make_optimizer(config)
    return net, variables, opt, training.init_train_state(variables, opt)


def test_heldout_losses_judge_the_network_on_settled_previous_and_seen_positions_apart():
    from azjax import replay

    net, variables, _, _ = _tictactoe_learner({})
    obs = (jax.random.uniform(jax.random.PRNGKey(2), (3, 3, 3, 3)) < 0.4).astype(jnp.float32)
    winner = jnp.array([1.0, -1.0, 1.0])  # player 0's return in each one-move game

    def chunk(t):  # one move, which ends its game: settled by the chunk that played it
        returns = jnp.stack([winner[t], -winner[t]]).reshape(1, 1, 2)
        return replay.Trajectory(
            obs=obs[t][None, None],
            policy=jax.nn.one_hot(jnp.array([[t]]), 9),
            player=jnp.zeros((1, 1), jnp.int32),
            done=jnp.ones((1, 1), bool),
            returns=returns,
        )

    buffer = replay.init(4, 1, (3, 3, 3), 9)
    for t in range(3):  # the last chunk's position is held out; the one before: chunk 1
        buffer = replay.add(buffer, chunk(t))
    heldout = jax.jit(loop.make_heldout(net, 8, chunk_steps=1))
    held = heldout(variables, buffer, jax.random.PRNGKey(3))
    counts = (held.positions, held.seen_positions, held.prev_positions)
    assert tuple(map(int, counts)) == (1, 2, 1)

    def one(t):  # position t alone, with its targets
        return Batch(obs[t][None], jax.nn.one_hot(jnp.array([t]), 9), winner[t][None])

    for t, value, policy in ((2, held.value, held.policy), (1, held.prev_value, held.prev_policy)):
        *expected, rows = training.inference_losses(net, variables, one(t))
        np.testing.assert_allclose([float(value), float(policy)], expected, rtol=1e-5)
        assert int(rows) == 1
        # by hand: the squared error of the inference value, the policy's cross-entropy
        logits, v = network.make_apply(net, fold=False)(variables, obs[t][None])
        np.testing.assert_allclose(float(value), (float(winner[t]) - float(v[0])) ** 2, 1e-5)
        ce = -jax.nn.log_softmax(logits[0])[t]
        np.testing.assert_allclose(float(policy), float(ce), rtol=1e-5)
    # the seen sample draws among chunks 0 and 1: each loss lies between theirs
    apart = np.array([training.inference_losses(net, variables, one(t))[:2] for t in (0, 1)])
    seen = np.array([float(held.seen_value), float(held.seen_policy)])
    assert (apart.min(0) - 1e-5 <= seen).all() and (seen <= apart.max(0) + 1e-5).all()
    rows = (held.policy_rows, held.seen_policy_rows, held.prev_policy_rows)
    assert tuple(map(int, rows)) == (8, 8, 8)  # each sample's positions with a policy target


def test_a_heldout_sample_of_fast_searches_only_logs_no_policy_term():
    """Every sampled position from a fast search (playout cap randomisation): no policy target,
    so no policy term, where 0.0 was logged as if the network fitted them perfectly."""
    from azjax.play_stats import HeldOut, PlayStats

    def held(rows):
        counts = dict(positions=21, seen_positions=40, prev_positions=30)
        losses = dict(value=0.5, policy=0.0, seen_value=0.4, seen_policy=2.0)
        rows = dict(policy_rows=rows, seen_policy_rows=8, prev_policy_rows=0)
        return HeldOut(**counts, **losses, prev_value=0.6, prev_policy=0.0, **rows)

    played = PlayStats(jnp.int32(4), jnp.int32(9), jnp.array([1, 1]), jnp.array([1, 1]))
    logged = loop._game_play_values(played._replace(heldout=held(0)), False)
    assert "heldout/policy" not in logged and "heldout/prev_policy" not in logged
    assert logged["heldout/value"] == 0.5 and logged["heldout/seen_policy"] == 2.0
    assert loop._game_play_values(played._replace(heldout=held(5)), False)["heldout/policy"] == 0


def test_positions_without_a_policy_target_add_nothing_to_the_policy_loss():
    net, _, opt, state = _tictactoe_learner({"weight_decay": 0.0})
    two = (jax.random.uniform(jax.random.PRNGKey(1), (2, 3, 3, 3)) < 0.3).astype(jnp.float32)
    obs = jnp.concatenate([two, two])  # the same two positions twice: the same BatchNorm stats
    policy = jax.nn.one_hot(jnp.array([0, 4, 0, 4]), 9)
    step = jax.jit(training.make_train_step(net, opt, 0.0, partial_policy=True))
    _, all_targets = step(state, Batch(obs, policy, jnp.zeros(4)))
    capped = policy.at[2:].set(0.0)  # the second copies came from fast searches
    _, mixed = step(state, Batch(obs, capped, jnp.zeros(4)))
    np.testing.assert_allclose(float(mixed.policy), float(all_targets.policy), rtol=1e-5)
    _, none = step(state, Batch(obs, jnp.zeros_like(policy), jnp.zeros(4)))
    assert float(none.policy) == 0.0


def test_value_weight_scales_the_value_term_and_its_gradient():
    plain_sgd = {"weight_decay": 0.0, "optimizer": "sgd", "momentum": 0.0}
    net, variables, opt, state = _tictactoe_learner(plain_sgd)
    obs = (jax.random.uniform(jax.random.PRNGKey(1), (4, 3, 3, 3)) < 0.3).astype(jnp.float32)
    batch = Batch(obs, jax.nn.one_hot(jnp.array([0, 4, 2, 8]), 9), jnp.array([1.0, -1, 1, 0]))
    moved, losses = {}, {}
    for w in (0.0, 1.0, 2.0):
        step = jax.jit(training.make_train_step(net, opt, 0.0, value_weight=w))
        after, losses[w] = step(state, batch)
        moved[w] = jax.tree_util.tree_map(
            jnp.subtract, after.variables["params"], variables["params"]
        )
    # the value term itself is logged unweighted; the total counts it w times
    for w in (0.0, 2.0):
        np.testing.assert_allclose(float(losses[w].value), float(losses[1.0].value), rtol=1e-6)
        expected = float(losses[1.0].policy) + w * float(losses[1.0].value)
        np.testing.assert_allclose(float(losses[w].total), expected, rtol=1e-5)
    # plain SGD: the step is linear in the loss's terms, so w = 2's step is 2 x w = 1's less w = 0's
    for none, one, two in zip(
        *map(jax.tree_util.tree_leaves, (moved[0.0], moved[1.0], moved[2.0]))
    ):
        np.testing.assert_allclose(two, 2 * one - none, rtol=1e-3, atol=1e-6)
    # without the value term the value head's last layer gets no gradient at all
    value_out = [k for k in moved[0.0] if k.startswith("Dense_")][-1]
    assert float(jnp.max(jnp.abs(moved[0.0][value_out]["kernel"]))) == 0.0
    assert float(jnp.max(jnp.abs(moved[1.0][value_out]["kernel"]))) > 0.0


def test_weight_decay_adds_its_l2_term_and_shrinks_the_weights():
    """The L2 term is weight decay's only form (the optimizer has none of its own): a mutation
    that left it out of the total passed every test, each of which set weight_decay=0."""
    plain_sgd = {"optimizer": "sgd", "momentum": 0.0, "learning_rate": 0.1}
    net, variables, opt, state = _tictactoe_learner(plain_sgd)
    obs = (jax.random.uniform(jax.random.PRNGKey(1), (4, 3, 3, 3)) < 0.3).astype(jnp.float32)
    batch = Batch(obs, jax.nn.one_hot(jnp.array([0, 4, 2, 8]), 9), jnp.array([1.0, -1, 1, 0]))
    params = variables["params"]
    after, losses = {}, {}
    for w in (0.0, 0.01):
        step = jax.jit(training.make_train_step(net, opt, w))
        trained, losses[w] = step(state, batch)
        after[w] = trained.variables["params"]
    squares = sum(float(jnp.sum(p**2)) for p in jax.tree_util.tree_leaves(params))
    np.testing.assert_allclose(float(losses[0.01].l2), 0.01 * squares, rtol=1e-5)
    np.testing.assert_allclose(
        float(losses[0.01].total), float(losses[0.0].total) + 0.01 * squares, rtol=1e-5
    )
    # plain SGD at rate 0.1: the decayed step is the other's less 0.1 x 2 x 0.01 x the weights
    for decayed, plain, p in zip(
        *map(jax.tree_util.tree_leaves, (after[0.01], after[0.0], params))
    ):
        np.testing.assert_allclose(decayed - plain, -0.002 * p, rtol=1e-3, atol=1e-7)


@pytest.fixture(scope="module")
def learner_setup():
    """A tiny Tic-Tac-Toe network, its optimizer state, train step and replay sampler."""
    from azjax import loop

    config = cfg.load(
        "tictactoe",
        {
            "num_blocks": 1,
            "num_filters": 4,
            "value_hidden": 4,
            "optimizer": "adam",
            "learning_rate": 0.01,
        },
    )
    game = config.make_game()
    net = network.make_network(config, game)
    opt = training.make_optimizer(config)
    state = training.init_train_state(network.init_variables(net, game, jax.random.PRNGKey(0)), opt)
    step = training.make_train_step(net, opt, config.weight_decay)
    return dict(step=step, state=state, sample=loop.make_sampler(8), game=game)


def _old_learner(step, sample, num_steps):
    """The learner before issue 17: one rolled scan over every step (the reference)."""

    def train(state, buffer, key):
        def body(s, k):
            return step(s, sample(buffer, k))

        state, losses = jax.lax.scan(body, state, jax.random.split(key, num_steps))
        return state, jax.tree_util.tree_map(jnp.mean, losses)

    return jax.jit(train)


@pytest.mark.parametrize("per_call", [1, 3, 12])  # traced one by one, and scanned
def test_the_learner_computes_what_one_rolled_scan_computes(learner_setup, per_call):
    import chex

    from azjax import replay

    s = learner_setup
    game = s["game"]
    buffer = replay.init(12, 4, game.observation_shape, game.num_actions)
    obs = jax.random.uniform(jax.random.PRNGKey(5), (4,) + game.observation_shape) < 0.3
    for t in range(9):  # nine plies of four games, finished at the last
        buffer = replay.add_step(
            buffer,
            obs.astype(jnp.float32),
            jnp.full((4, game.num_actions), 1 / 9),
            jnp.full((4,), t % 2),
            jnp.full((4,), t == 8),
            jnp.tile(jnp.array([1.0, -1.0]), (4, 1)),
        )
    assert int(replay.num_ready(buffer)) == 36
    key = jax.random.PRNGKey(11)
    want_state, want_losses = _old_learner(s["step"], s["sample"], 12)(s["state"], buffer, key)
    learner = training.make_learner(s["step"], s["sample"], 12, per_call=per_call)
    state = jax.tree_util.tree_map(jnp.copy, s["state"])  # the chunk donates it
    got_state, got_losses = training.learn(
        learner, jax.jit(learner.chunk, donate_argnums=0), state, buffer, key
    )
    # the same samples and steps; XLA may fuse (and so round) the two programs differently: 12
    # Adam steps at rate 0.01 have left parameters 4e-5 apart (relative) under one such fusion
    chex.assert_trees_all_close(got_state, want_state, rtol=1e-4, atol=1e-6)
    chex.assert_trees_all_close(got_losses, want_losses, rtol=1e-4, atol=1e-6)
    assert int(got_state.step) == 12


def test_the_learner_takes_one_step_per_call_on_the_cpu():
    assert training.steps_per_call(30, "cpu") == 1
    assert training.steps_per_call(30, "gpu") == 30
    with pytest.raises(ValueError, match="must divide train_steps 30"):
        training.make_learner(lambda s, b: (s, None), lambda b, k: None, 30, per_call=4)


def test_training_waits_for_min_replay(tmp_path):
    """Nothing is learned until the buffer holds min_replay positions with known outcomes (with
    augmentation, random openings, the weighted value target, the ownership target, the score
    utility, the soft policy target, policy surprise weighting and the opponent policy target on,
    so their paths run end to end too; the root value in the value target, which the score
    utility refuses, runs in test_resume_continues_from_the_latest_checkpoint's TD(lambda)
    target)."""
    workdir = str(tmp_path / "wait")
    flags = [f for f in TOY if not f.startswith(("--eval_interval", "--eval_games"))]
    # 16 games x 9 plies = 144 positions a chunk at most: 200 needs two iterations
    assert (
        train.main(
            flags
            + [
                f"--workdir={workdir}",
                "--iterations=3",
                "--eval_interval=0",
                "--min_replay=200",
                "--selfplay_steps=9",
                "--augment",
                "--opening_plies=2",
                "--value_weight=0.5",
                "--ownership_weight=0.5",
                "--score_utility=0.3",
                "--soft_policy_weight=2",
                "--policy_surprise=0.5",
                "--opponent_policy_weight=0.15",
            ]
        )
        == 0
    )
    rows = _metrics(workdir)
    trained = ["loss/total" in r for r in rows]
    ready = [r["replay_ready"] for r in rows]
    assert trained == [r >= 200 for r in ready] and not trained[0] and trained[-1], (ready, trained)
    assert all(r["loss/ownership"] > 0 for r in rows if "loss/total" in r)
    assert all(r["loss/soft_policy"] > 0 for r in rows if "loss/total" in r)
    assert all(r["loss/opponent_policy"] > 0 for r in rows if "loss/total" in r)
    # the replay's mean policy surprise is logged once positions are settled
    assert all(r["replay/policy_surprise"] > 0 for r in rows if r["replay_ready"] > 0)


def test_a_new_run_without_a_workdir_never_lands_on_an_old_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert train.default_workdir("hex", resume=False) == os.path.join("runs", "hex")
    os.makedirs(tmp_path / "runs" / "hex" / "tb")  # a run stopped before its first checkpoint
    assert train.default_workdir("hex", resume=False) == os.path.join("runs", "hex")  # reused
    for name in ("hex", "hex-2"):
        os.makedirs(tmp_path / "runs" / name / "checkpoints" / "10")
    assert train.default_workdir("hex", resume=False) == os.path.join("runs", "hex-3")
    assert "--workdir=runs/hex --resume" in capsys.readouterr().err
    assert train.default_workdir("hex", resume=True) == os.path.join("runs", "hex")


def test_the_ownership_term_leaves_out_the_positions_of_resigned_games():
    from azjax.replay import UNKNOWN_OWNER

    target = jnp.array([[1.0, -1.0, 0.0], [UNKNOWN_OWNER] * 3, [0.0, 1.0, 1.0]])
    predicted = jnp.array([[0.5, -0.5, 0.0], [0.9, 0.9, 0.9], [0.0, 0.0, 1.0]])
    known = jnp.array([0, 2])  # the middle position's game was resigned: its final board is unknown
    want = jnp.mean((target[known] - predicted[known]) ** 2)
    assert float(training._ownership_loss(target, predicted)) == pytest.approx(float(want))
    # with every owner known, the plain mean over the cells, to the bit
    assert training._ownership_loss(target[known], predicted[known]) == want
    assert float(training._ownership_loss(target[1:2], predicted[1:2])) == 0.0  # none known


def test_a_session_ended_by_its_time_budget_evaluates_its_last_iteration(
    run, tmp_path, monkeypatch
):
    """The time budget was judged twice an iteration: where it ran out between the evaluation's
    check (not the last) and the loop's (stop), the last iteration went unevaluated. Here the
    budget runs out as iteration 4 saves its checkpoint, after its evaluation was decided."""
    import types

    from azjax.checkpoint import Checkpointer

    late = [0.0]  # seconds the loop's clock is ahead of the real one
    clock = types.SimpleNamespace(time=lambda: time.time() + late[0], sleep=time.sleep)
    monkeypatch.setattr(loop, "time", clock)
    save = Checkpointer.save

    def slow_save(self, iteration, *args, **kwargs):
        save(self, iteration, *args, **kwargs)
        late[0] += 600.0 * (iteration == 4)  # the budget runs out now

    monkeypatch.setattr(Checkpointer, "save", slow_save)
    workdir = str(tmp_path / "budget")
    shutil.copytree(run, workdir)
    argv = [f"--workdir={workdir}", "--resume", "--iterations=0", "--time_budget=5"]
    flags = ["--eval_interval=3", "--checkpoint_interval=1", "--eval_budget=0", "--no_progress"]
    assert train.main(argv + flags) == 0
    rows = _metrics(workdir)
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]  # 5 judged the budget spent
    assert [("eval/mcts_score" in r) for r in rows] == [False, True, True, False, True]


def test_a_resumed_run_plays_the_previous_evaluations_network(run, tmp_path, monkeypatch, capsys):
    """The "vs previous" match plays the previous evaluation's network: a run resumed between
    evaluations played the network it resumed from instead (a checkpoint never evaluated)."""

    def same(a, b):
        pairs = zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
        return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in pairs)

    seen = []
    play = loop_eval.Evaluations.run

    def watched(self, variables, previous, *args, **kwargs):
        seen.append(jax.device_get(previous))
        return play(self, variables, previous, *args, **kwargs)

    workdir = str(tmp_path / "resumed")
    shutil.copytree(run, workdir)  # evaluated at 2
    on = [f"--workdir={workdir}", "--resume", "--eval_budget=0", "--no_progress"]
    argv = on + ["--iterations=3", "--eval_final=false", "--checkpoint_interval=1"]
    assert train.main(argv) == 0  # checkpoint 3, not evaluated
    monkeypatch.setattr(loop_eval.Evaluations, "run", watched)
    assert train.main(on + ["--iterations=4"]) == 0  # evaluates 4 against 2
    _, second, _ = checkpoint.load_checkpoint(workdir, 2)
    _, third, _ = checkpoint.load_checkpoint(workdir, 3)
    assert len(seen) == 1 and same(seen[0], second) and not same(seen[0], third)
    # where that checkpoint cannot be read, the run trains on from its own, and says so
    shutil.rmtree(os.path.join(workdir, "checkpoints", "2", "state"))
    shutil.rmtree(os.path.join(workdir, "checkpoints", "4"))
    capsys.readouterr()
    assert train.main(on + ["--iterations=4", "--resume_step=3"]) == 0
    assert "plays checkpoint 3, the one resumed (checkpoint 2 cannot be read)" in (
        capsys.readouterr().err
    )
    assert len(seen) == 2 and same(seen[1], third)
    # resumed before any evaluation: the run's first network, as an unbroken run plays
    fresh = str(tmp_path / "fresh")
    argv = [a for a in TOY if not a.startswith("--checkpoint")] + [f"--workdir={fresh}"]
    assert train.main(argv + ["--iterations=1", "--checkpoint_interval=1"]) == 0
    assert train.main(argv + ["--iterations=2", "--resume", "--eval_budget=0"]) == 0
    first = checkpoint.initial_variables(checkpoint.read_config(fresh))
    assert len(seen) == 3 and same(seen[2], first)


@pytest.mark.parametrize(
    "options",
    [dict(augment=True, value_target_mix=0.3), dict(value_lambda=0.8)],
)
def test_the_run_s_options_reach_the_replay_and_the_sampler(monkeypatch, options):
    """From the config to where each acts (a reviewer's mutations that dropped --augment, the
    value target's mix or lambda on the way passed: their own tests call replay and the sampler
    directly, and the runs that set them check no more than that they train)."""
    from azjax import loop, parallel, replay

    seen = {}
    add, make_sampler = replay.add, loop.make_sampler

    def adding(*args, **kwargs):
        seen["add"] = kwargs
        return add(*args, **kwargs)

    def sampler(*args, **kwargs):
        seen["sampler"] = kwargs
        return make_sampler(*args, **kwargs)

    monkeypatch.setattr(replay, "add", adding)
    monkeypatch.setattr(loop, "make_sampler", sampler)
    toy = dict(num_blocks=1, num_filters=4, value_hidden=4, batch_games=4, num_simulations=2)
    config = cfg.load("tictactoe", {**toy, "train_batch_size": 8, **options})
    fns = loop.make_iteration(config, parallel.make_mesh())
    jax.eval_shape(fns.play, fns.init_run(), fns.init_states(), fns.init_buffer())  # traced
    assert seen["add"]["value_mix"] == config.value_target_mix
    assert seen["add"]["value_lambda"] == config.value_lambda
    assert (seen["sampler"]["augment"] is not None) == config.augment
    assert fns.min_replay == 8  # min_replay=0: one training batch ready before the learner runs


def test_resume_step_continues_from_that_checkpoint(tmp_path, capsys):
    """--resume_step=1 with checkpoint 2 on disk restores checkpoint 1's state, sets 2 aside and
    plays iteration 2 again (a reviewer's mutation that restored the latest checkpoint, whatever
    the step, passed: each test resumed from the latest)."""
    workdir = str(tmp_path / "run")
    toy = [a for a in TOY if not a.startswith(("--checkpoint", "--eval_interval", "--eval_games"))]
    argv = toy + [f"--workdir={workdir}", "--checkpoint_interval=1", "--eval_interval=0"]
    assert train.main(argv + ["--iterations=2"]) == 0
    _, before, _ = checkpoint.load_checkpoint(workdir, 2)
    capsys.readouterr()
    assert train.main(argv + ["--iterations=2", "--resume", "--resume_step=1"]) == 0
    assert "resuming from checkpoint 1: the later checkpoints were moved to" in (
        capsys.readouterr().err
    )
    assert len(glob.glob(os.path.join(workdir, "set_aside-*", "2"))) == 1
    assert checkpoint.steps(workdir) == [1, 2]
    rows = _metrics(workdir)
    assert [r["iteration"] for r in rows] == [1, 2]
    summary = json.load(open(os.path.join(workdir, "summary.json")))  # both sessions', and its
    for what in ("games", "positions"):
        assert summary[f"session_{what}"] == rows[1][what]
        assert summary[what] == rows[0][what] + rows[1][what] > summary[f"session_{what}"]
    _, after, _ = checkpoint.load_checkpoint(workdir, 2)  # played again: another network
    same = jax.tree_util.tree_map(np.array_equal, before, after)
    assert not all(jax.tree_util.tree_leaves(same))
