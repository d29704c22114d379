"""experiments.recipes: recipes trained side by side at equal wall time, then rated together."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import games
from experiments import recipes

TOY = (
    "num_blocks=1,num_filters=4,value_hidden=4,num_simulations=4,batch_games=8,"
    "replay_games=16,train_batch_size=8,train_steps=2,min_replay=1,selfplay_steps=4"
)


def test_two_recipes_train_side_by_side_and_are_rated_on_one_scale(tmp_path, capsys, monkeypatch):
    from azjax import solved

    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)  # main() sets it

    # A made-up Tic-Tac-Toe set (the plumbing, not the values): from the empty board every move
    # draws but a1; after b2 every move draws but c3. The package has none for Tic-Tac-Toe.
    values = np.zeros((2, 9), np.int8)
    values[0, 0] = values[1, 8] = -1
    values[1, 4] = solved.ILLEGAL
    monkeypatch.setattr(solved, "SETS", str(tmp_path / "sets"))
    ttt = games.make("tictactoe")
    solved.save_set(solved.SolvedSet("tictactoe", {}, ((), (4,)), values), solved.set_path(ttt))
    out = str(tmp_path / "rec")
    argv = [
        "--game=tictactoe",
        "--minutes=0.3",
        "--seeds=0",
        "--recipe=base:",
        "--recipe=aug:augment=true",
        f"--set={TOY}",
        "--games=2",
        "--sims=2",
        "--anchors=random",
        "--at_once=2",  # one core each where there are two
        "--ladder_games=2",
        f"--out={out}",
    ]
    assert recipes.main(argv) == 0
    results = json.load(open(os.path.join(out, "results.json")))
    assert results["configs"]["aug-s0"]["augment"] and not results["configs"]["base-s0"]["augment"]
    for run in ("base-s0", "aug-s0"):
        config = results["configs"][run]
        assert config["time_budget"] == 0.3 and config["eval_interval"] == 0
        assert config["num_filters"] == 4 and config["search"] == "gumbel"  # --config=cpu, --set
        assert results["training"][run]["stopped_by"] == "time_budget"
    assert abs(results["elo"]["random"]["elo"]) < 1e-9  # the anchor is the scale's 0
    assert [row["recipe"] for row in results["table"]] == ["base", "aug"]
    assert os.path.exists(os.path.join(out, "tournament", "tournament.json"))
    text = capsys.readouterr().out
    assert "| base | 1 |" in text and "anchor random: +0" in text
    # each run's last checkpoints measured on the set, each recipe against the first
    assert [row["recipe"] for row in results["errors"]] == ["base", "aug"]
    for row in results["errors"]:
        assert row["positions"] == 2 and 0 <= row["rate"] <= 1 and len(row["each"]) == 1
    assert results["errors"][0]["difference"] == 0.0
    assert "| recipe | exact error rate |" in text and "exact error rate" in text
    # each run's network placed on the package's Tic-Tac-Toe ladder, until settled
    assert set(results["ladder"]) == {"base-s0", "aug-s0"}
    for rating in results["ladder"].values():
        assert np.isfinite(rating["elo"]) and rating["rounds"] >= 4 and rating["games"] >= 16
    assert [row["recipe"] for row in results["ladder_table"]] == ["base", "aug"]
    assert "| recipe | ladder Elo (mean) | ± 95% | each seed |" in text
    # a finished run is not trained again
    said = []
    again = recipes.train_all(recipes.parse(argv)[1], out, 1, said.append)
    assert set(again) == {"base-s0", "aug-s0"} and said == []
    # nor is one that the recipe now gives other settings reported under them
    other = [a.replace("aug:augment=true", "aug:augment=true,num_simulations=3") for a in argv]
    with pytest.raises(ValueError, match="run aug-s0 trained with other settings"):
        recipes.train_all(recipes.parse(other)[1], out, 1, said.append)


def test_the_runs_train_with_the_users_environment_and_the_driver_leaves_the_device(
    tmp_path, monkeypatch
):
    # the driver must not take 75% of an accelerator's memory while its runs train there; the
    # runs themselves keep whatever the user set, but for the compilation cache
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    user = recipes.leave_accelerator_to_runs()
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert user["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
    assert user["JAX_COMPILATION_CACHE_DIR"] == ""  # each run compiles its own programs
    given = []

    class Finished:
        returncode = 0

        def poll(self):
            return 0

    def popen(command, stdout, stderr, env, **kwargs):
        given.append(env)
        return Finished()

    monkeypatch.setattr(recipes.subprocess, "Popen", popen)
    configs = recipes.parse(["--game=tictactoe", "--seeds=0,1", f"--out={tmp_path}"])[1]
    recipes.train_all(configs, str(tmp_path), 2, lambda text: None, env=user)
    assert len(given) == 4 and all(env is user for env in given)  # base and augment, 2 seeds


def test_a_run_stopped_before_its_end_goes_on_and_a_stop_stops_the_runs_in_training(
    tmp_path, monkeypatch
):
    """A run whose summary.json says a signal stopped it was rated as finished; it goes on from
    its checkpoints (train.py --resume). And a stopped recipes command left its train.py
    processes training on, orphaned: it now asks each to stop (it saves a checkpoint)."""
    from azjax.interrupt import Interrupted

    out = str(tmp_path)
    configs = recipes.parse(["--game=tictactoe", "--seeds=0", f"--out={out}"])[1]
    stopped, done = sorted(configs)  # augment-s0, base-s0
    for name, by in ((stopped, "SIGINT"), (done, "time_budget")):
        os.makedirs(os.path.join(out, name, "checkpoints", "4"))
        with open(os.path.join(out, name, "config.json"), "w") as f:
            f.write(configs[name].to_json())
        with open(os.path.join(out, name, "summary.json"), "w") as f:
            json.dump({"stopped_by": by}, f)
    started, signalled = [], []

    class Training:
        returncode = None

        def poll(self):
            return None

        def send_signal(self, signum):
            signalled.append(signum)

        def wait(self, timeout):
            self.returncode = 130

    def popen(command, stdout, stderr, env, start_new_session):
        started.append(command)
        assert start_new_session  # a Ctrl-C reaches it from the driver alone, once
        return Training()

    def interrupted(seconds):
        raise Interrupted(15, at_once=True)

    monkeypatch.setattr(recipes.subprocess, "Popen", popen)
    monkeypatch.setattr(recipes.time, "sleep", interrupted)
    said = []
    with pytest.raises(Interrupted, match=f"the runs in training \\({stopped}\\) saved"):
        recipes.train_all(configs, out, 2, said.append)
    assert len(started) == 1 and "--resume" in started[0]  # the finished run is not started
    assert f"--workdir={os.path.join(out, stopped)}" in started[0]
    assert not any(a.startswith("--config") for a in started[0])  # its own saved settings
    assert signalled == [signal.SIGINT] and "stopping the runs in training" in said[-1]


def test_one_run_at_a_time_on_an_accelerator_one_per_two_cores_on_a_cpu(monkeypatch):
    cores = len(recipes.core_list())
    assert recipes.parse(["--game=tictactoe"])[0].at_once == max(1, cores // 2)
    monkeypatch.setattr(recipes.jax, "default_backend", lambda: "gpu")
    assert recipes.parse(["--game=tictactoe"])[0].at_once == 1
    monkeypatch.setattr(recipes, "core_list", lambda: [0, 1, 2, 3])
    assert recipes.parse(["--game=tictactoe", "--at_once=3"])[0].at_once == 3
    monkeypatch.setattr(recipes, "core_list", lambda: [0, 1])  # two runs would share a core
    with pytest.raises(SystemExit):
        recipes.parse(["--game=tictactoe", "--at_once=3"])


def test_runs_go_seed_by_seed_so_those_trained_at_a_time_are_different_recipes():
    configs = recipes.parse(["--game=tictactoe", "--seeds=0,1", "--recipe=a:", "--recipe=b:"])[1]
    assert list(configs) == ["a-s0", "b-s0", "a-s1", "b-s1"]


def test_a_pinned_command_runs_on_its_cores_only():
    show = [
        sys.executable,
        "-c",
        "import os, sys; print(sorted(os.sched_getaffinity(0)), sys.argv[1:])",
    ]
    one = sorted(os.sched_getaffinity(0))[-1:]
    done = subprocess.run([*recipes.pinned(show, set(one)), "x"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"{one} ['x']", done.stderr
    assert recipes.pinned(show, set()) == show  # no cores to pin to: the command as it is


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--recipe=base"], "expected NAME:field=value"),
        (["--recipe=a:nope=1"], "unknown setting(s) nope"),
        (["--recipe=a:num_simulations=lots"], "--num_simulations: expected int"),
        (["--recipe=a:", "--recipe=a:augment=true"], "names must differ"),
        (["--games=3"], "--games must be even"),
        (["--game=chess"], "unknown game 'chess'"),
        (["--seeds="], "--seeds: give one or more comma-separated integers"),
        (["--game=othello", "--size=6", "--games=60"], "only 12 distinct positions of 2 plies"),
        (["--anchors=mcts:sims=8,c_uct=x,random"], "--anchors: mcts: c_uct (UCT"),
        (["--anchors=alphago"], "--anchors: unknown agent 'alphago'"),
        (["--ladder_games=-1"], "--ladder_games must be >= 0"),
        (["--game=hex", "--size=3", "--ladder_games=2"], "--ladder_games: no ladder table for hex"),
        (["--game=hex", "--recipe=a:size=3", "--recipe=b:size=4"], "--recipe b plays hex"),
        # a recipe whose setting the rest turns off would have measured nothing
        (["--recipe=a:dirichlet_alpha=0.1"], "recipe a: --dirichlet_alpha changes nothing with"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        recipes.parse(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_recipe_table_means_seeds_and_widens_by_their_spread():
    elo = {
        "a-s0": dict(elo=100.0, stderr=10.0),
        "a-s1": dict(elo=140.0, stderr=10.0),
        "b-s0": dict(elo=0.0, stderr=10.0),
        "mcts": dict(elo=-50.0, stderr=5.0),
    }
    table = recipes.recipe_table(["a", "b"], ["a-s0", "a-s1", "b-s0"], elo)
    a, b = table
    assert a["elo"] == 120.0 and a["each"] == [100.0, 140.0]
    assert a["ci95"] == pytest.approx(1.96 * (400 + 50) ** 0.5)  # spread 20, errors 10/sqrt(2)
    assert b["elo"] == 0.0 and b["ci95"] == pytest.approx(1.96 * 10)
    shifted = recipes.anchored(elo, ["mcts"])
    assert shifted["mcts"]["elo"] == 0.0 and shifted["a-s0"]["elo"] == 150.0
    # the printed table's columns per seed in one order, --seeds', not the names' (s10 < s2)
    ratings = {"a-s2": dict(elo=100.0, stderr=1.0), "a-s10": dict(elo=-100.0, stderr=1.0)}
    summaries = {"a-s2": dict(iterations=1010, games=5), "a-s10": dict(iterations=222, games=6)}
    table = recipes.recipe_table(["a"], ["a-s2", "a-s10"], ratings)
    assert "| +100, -100 | 1010, 222 | 5, 6 |" in recipes.format_table(table, summaries)


def test_the_ladder_table_marks_a_seed_above_the_top():
    ratings = {
        "a-s0": dict(elo=900.0, stderr=50.0, off_scale=1),
        "a-s1": dict(elo=700.0, stderr=50.0, off_scale=0),
    }
    table = recipes.recipe_table(["a"], list(ratings), ratings)
    assert "| a | +800 | " in recipes.format_ladder(table, ratings)
    assert "| >+900, +700 |" in recipes.format_ladder(table, ratings)
    # each seed in --seeds' order, as the Elo table's (sorted names listed s10 before s2), and
    # the interval the ratings' errors give: one run, 1.96 x its standard error
    ratings = {
        "a-s2": dict(elo=100.0, stderr=10.0, off_scale=0),
        "a-s10": dict(elo=-100.0, stderr=10.0, off_scale=0),
    }
    table = recipes.recipe_table(["a"], ["a-s2", "a-s10"], ratings)
    assert "| +100, -100 |" in recipes.format_ladder(table, ratings)
    one = recipes.recipe_table(["a"], ["a-s2"], ratings)
    assert f"| a | +100 | {1.96 * 10:.0f} | +100 |" in recipes.format_ladder(one, ratings)


def test_the_error_table_pools_each_recipes_runs_and_compares_position_by_position():
    rates = {  # per position: the share of a run's checkpoints that err there
        "a-s0": np.array([0.0, 1.0, 0.5, 0.0]),
        "a-s1": np.array([0.0, 1.0, 0.5, 1.0]),
        "b-s0": np.array([1.0, 1.0, 0.5, 0.5]),
    }
    a, b = recipes.error_table(["a", "b", "c"], rates)  # c has no runs measured
    assert a["rate"] == pytest.approx(0.5) and a["each"] == [0.375, 0.625]
    assert a["difference"] == 0.0 and a["z"] == 0.0 and a["positions"] == 4
    d = np.array([1.0, 0.0, 0.0, 0.0])  # b's shares minus a's pooled [0, 1, 0.5, 0.5]
    assert b["rate"] == pytest.approx(0.75) and b["difference"] == pytest.approx(0.25)
    assert b["z"] == pytest.approx(d.mean() / (d.std(ddof=1) / 2))
    assert "| b | 0.750 | 0.750 | +0.250 | +1.0 |" in recipes.format_errors([a, b])
    # a seed's rate is rounded once: 0.09548 printed as the pooled rate is, not 0.0955 then 0.096
    share = np.zeros(100)
    share[:9], share[9] = 1.0, 0.548  # a mean of 0.09548
    (one,) = recipes.error_table(["a"], {"a-s0": share})
    assert "| a | 0.095 | 0.095 |" in recipes.format_errors([one])


def test_the_error_rate_never_reaches_into_the_first_half_of_a_run():
    # a run of 51 iterations, checkpoints every 5: its last six, all from its second half
    long = [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 51]
    assert recipes.error_steps(long, 6) == [30, 35, 40, 45, 50, 51]
    # a wider network's 24 iterations in the same time: three, not the last six back to its 5th
    assert recipes.error_steps([5, 10, 15, 20, 24], 6) == [15, 20, 24]
    assert recipes.error_steps([5, 10, 15, 20, 24], 2) == [20, 24]
    assert recipes.error_steps([1], 6) == [1] and recipes.error_steps([3, 5], 6) == [3, 5]
