"""What real runs meet (issue 12, docs/reliability.md): signals, a second process, bad paths and
sizes, divergence, poisoned checkpoints, torn metrics, odd bytes over GTP, implicit passes.

Training runs in subprocesses (signals need a process of their own) at Tic-Tac-Toe toy size,
sharing one persistent compilation cache so that only the first one compiles.
"""

import dataclasses
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings

import jax
import numpy as np
import pytest
from xla_flags import with_host_devices

import games
from azjax import checkpoint
from azjax import config as cfg
from azjax.checkpoint import CheckpointError, WorkdirLock
from azjax.commands import evaluate, train
from azjax.eval.curve import training_games
from azjax.eval.gtp import GTPEngine
from azjax.health import Health
from azjax.metrics import Metrics, read_rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY = [
    "--game=tictactoe",
    "--batch_games=16",
    "--num_simulations=4",
    "--num_blocks=1",
    "--num_filters=4",
    "--value_hidden=4",
    "--train_steps=3",
    "--train_batch_size=32",
    "--eval_interval=0",
    "--checkpoint_interval=1",
    "--no_progress",
]
TIMEOUT = 240


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cache = str(tmp_path_factory.getbasetemp() / "reliability_jax_cache")
    return dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=cache,
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
        PYTHONUNBUFFERED="1",
    )


def _python(script, args, env, **kw):
    return subprocess.run(
        [sys.executable, script, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=TIMEOUT,
        **kw,
    )


def _start(args, env):
    return subprocess.Popen(
        [sys.executable, "train.py", *TOY, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path, proc):
    deadline = time.time() + TIMEOUT
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.time() < deadline, f"no {path} within {TIMEOUT} s"
        time.sleep(0.2)


def _steps(workdir):
    return sorted(int(n) for n in os.listdir(os.path.join(workdir, "checkpoints")) if n.isdigit())


def _iterations(workdir):
    return [r["iteration"] for r in read_rows(os.path.join(workdir, "metrics.jsonl"))]


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, env):
    """A run stopped by SIGTERM, and what happened: (workdir, its stderr, its exit code, the
    answer to a second run started into the same workdir meanwhile)."""
    workdir = str(tmp_path_factory.mktemp("sigterm") / "run")
    proc = _start([f"--workdir={workdir}", "--iterations=100000"], env)
    try:
        _wait_for(os.path.join(workdir, "checkpoints", "2"), proc)
        second = _python(
            "train.py", TOY + [f"--workdir={workdir}", "--iterations=3"], env, text=True
        )
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    return workdir, err, proc.returncode, second, proc.pid


def test_sigterm_saves_a_checkpoint_and_exits_143(stopped_run):
    workdir, err, code, _, _ = stopped_run
    assert code == 143
    match = re.search(r"SIGTERM: checkpoint (\d+) saved; continue with --resume", err)
    assert match, err
    assert "Traceback" not in err
    step = int(match.group(1))
    assert _steps(workdir)[-1] == step
    assert not [n for n in os.listdir(os.path.join(workdir, "checkpoints")) if "tmp" in n]
    assert _iterations(workdir) == list(range(1, step + 1))  # the rows agree with the checkpoint
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    assert summary["stopped_by"] == "SIGTERM" and summary["iterations"] == step


def test_a_second_run_into_a_busy_workdir_is_refused(stopped_run):
    *_, second, pid = stopped_run
    assert second.returncode == 2
    assert f"is in use by process {pid}" in second.stderr
    assert "Traceback" not in second.stderr


def test_resume_counts_every_session(stopped_run, tmp_path, env):
    workdir = str(tmp_path / "run")
    shutil.copytree(stopped_run[0], workdir)
    step = _steps(workdir)[-1]
    with open(os.path.join(workdir, "metrics.jsonl"), "a") as f:
        f.write('{"iteration": 99, "games": 10')  # a torn last line
    done = _python(
        "train.py",
        [f"--workdir={workdir}", "--resume", f"--iterations={step + 1}", "--no_progress"],
        env,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    rows = read_rows(os.path.join(workdir, "metrics.jsonl"))
    assert [r["iteration"] for r in rows] == list(range(1, step + 2))
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    assert summary["games"] == sum(r["games"] for r in rows) > summary["session_games"]
    assert training_games(workdir)[step + 1] == summary["games"]


def test_kill_9_then_sigint_keep_metrics_and_checkpoints_in_step(tmp_path, env):
    workdir = str(tmp_path / "run")
    proc = _start([f"--workdir={workdir}", "--iterations=100000"], env)
    try:
        _wait_for(os.path.join(workdir, "checkpoints", "3"), proc)
    finally:
        proc.kill()  # kill -9, at any moment
        proc.communicate()
    assert _iterations(workdir)[-1] <= _steps(workdir)[-1]  # no row beyond the last checkpoint
    proc = _start([f"--workdir={workdir}", "--resume", "--iterations=100000"], env)
    try:
        _wait_for(os.path.join(workdir, "checkpoints", str(_steps(workdir)[-1] + 2)), proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "SIGINT: checkpoint" in err and "Traceback" not in err
    # no iteration twice, none missing (the checkpoints hold rows the killed run had not written)
    assert _iterations(workdir) == list(range(1, _steps(workdir)[-1] + 1))


def _two_sigints(proc, ready) -> str:
    """`proc`'s stderr after two SIGINTs half a second apart, sent once `ready()` returns."""
    try:
        ready()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=TIMEOUT)[1]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_second_sigint_while_compiling_stops_at_once_without_a_crash(tmp_path, env):
    """Two Ctrl-Cs while the first iteration compiles (a fresh compilation cache): the second
    one's `Interrupted` was raised inside XLA's compile, and the interpreter's shutdown after it
    crashed (a segmentation fault, exit -11, in 5 of 5 tries of a review)."""
    env = dict(env, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("XLA_FLAGS", None)  # the suite's fast compiling ends before the signals
    proc = _start([f"--workdir={tmp_path / 'run'}", "--iterations=100000"], env)

    def started():
        while "training tictactoe" not in proc.stderr.readline():
            assert proc.poll() is None
        time.sleep(1.5)

    err = _two_sigints(proc, started)
    assert proc.returncode == 130, err
    assert "SIGINT: stopped at once" in err
    assert "Fatal Python error" not in err and "Traceback" not in err and "ignored" not in err


def test_two_signals_inside_one_self_play_call_are_two(tmp_path, env):
    """With the progress bar (host callbacks a move), self-play ran with the main thread inside
    XLA: the two signals that arrived in one call were merged into one handler's call, and the
    second Ctrl-C was lost (a newcomer's walk: the run finished its iteration and saved)."""
    args = ["--batch_games=256", "--num_simulations=150", "--iterations=100000"]
    proc = subprocess.Popen(
        [sys.executable, "train.py", *[a for a in TOY if a != "--no_progress"], *args]
        + [f"--workdir={tmp_path / 'run'}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def saved():
        _wait_for(os.path.join(tmp_path, "run", "checkpoints", "1"), proc)
        time.sleep(0.5)  # into iteration 2's self-play, seconds long

    err = _two_sigints(proc, saved)
    assert proc.returncode == 130
    assert "SIGINT: stopped at once; checkpoint 1 (the last saved) is intact" in err, err[-500:]


def test_a_second_signal_lost_in_a_callback_stops_at_the_next_check(capsys):
    """A handler that runs inside a callback from native code (XLA's, while it compiles: seen in
    CI) raises into code that only reports it, "Exception ignored in" with a traceback, and the
    run went on to the first signal's stop: `check` raises it again, and nothing is printed."""
    from azjax.interrupt import Interrupted, StopSignals

    class Callback:
        def __del__(self):  # Python reports what a __del__ raises and goes on, as there
            os.kill(os.getpid(), signal.SIGINT)

    with StopSignals("finishing") as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested
        stop.check()  # one signal: nothing to raise
        Callback()
        with pytest.raises(Interrupted) as stopped:
            stop.check()
    assert stopped.value.at_once and stopped.value.signum == signal.SIGINT
    assert "ignored" not in capsys.readouterr().err


def test_a_signal_lost_in_a_callback_still_stops_a_threaded_command(monkeypatch):
    """evaluate.py and play.py wait for their worker in `run_interruptibly`: a Ctrl-C whose
    handler ran inside a callback from native code (XLA's garbage-collection callback, seen in a
    CI run) raised into code that only reported it, and the command went on until its work ended
    (30 s in that run's stopped-tournament test). The wait raises it, and Python's report of it
    ("Exception ignored in ... Interrupted", printed above the command's own line until session
    119) is left out; other exceptions there are still reported."""
    import time

    from azjax.interrupt import Interrupted, raise_on_signals, run_interruptibly

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(type(u.exc_value)))

    class Failing:
        def __del__(self):
            raise ValueError("not a signal")

    class Callback:
        def __del__(self):  # Python reports what a __del__ raises and goes on, as XLA's does
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes, here
                pass

    t0 = time.monotonic()
    with raise_on_signals():
        Callback()
        with pytest.raises(Interrupted) as stopped:
            run_interruptibly(lambda: time.sleep(5))
    assert stopped.value.at_once and stopped.value.signum == signal.SIGINT
    assert time.monotonic() - t0 < 2
    assert reported == []
    with raise_on_signals():  # and nothing is left for the next wait
        assert run_interruptibly(lambda: 7) == 7
        Failing()
    assert reported == [ValueError]


def test_a_second_signal_during_a_save_waits_for_it_and_a_third_stops_at_once(capsys):
    """`shield` (the loop's checkpoint saves): a second signal within it is held until the save
    is done, then stops; a third stops at once (a reviewer's mutation that turned the shield off
    passed every test)."""
    from azjax.interrupt import Interrupted, StopSignals

    with StopSignals("finishing") as stop:
        os.kill(os.getpid(), signal.SIGINT)  # the first: finish, then stop
        saved = []
        with pytest.raises(Interrupted) as stopped:
            with stop.shield():
                os.kill(os.getpid(), signal.SIGINT)  # the second: held
                saved.append(True)  # the save goes on to its end
        assert saved == [True] and stopped.value.at_once
        assert "finishing the checkpoint being written" in capsys.readouterr().err
    with StopSignals("finishing") as stop:
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(Interrupted) as stopped:
            with stop.shield():
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)  # the third: at once, inside the block
                saved.append(False)
        assert saved == [True]


def test_a_stopping_run_compiles_no_evaluation_it_will_not_play(tmp_path, monkeypatch):
    """A SIGTERM in the first iteration: the loop went on to compile the next evaluation's
    programs in the background and waited for them before it exited (11 s against 0.6 s in a
    review), summary.json written only after: time a batch system's kill may not give."""
    from azjax import loop, loop_eval
    from azjax.interrupt import Interrupted

    compiled = []
    monkeypatch.setattr(loop_eval.Evaluations, "compile_ahead", lambda *a: compiled.append(a))

    calls = []

    def spent(config, t_run):  # judged before the first iteration, then after each learns:
        calls.append(t_run)  # the signal arrives after the first one's
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return False

    monkeypatch.setattr(loop, "_budget_spent", spent)
    toy = dict(num_blocks=1, num_filters=4, value_hidden=4, train_steps=3, train_batch_size=32)
    config = cfg.load(
        "tictactoe",
        dict(
            toy,
            batch_games=16,
            num_simulations=4,
            eval_interval=3,
            eval_compile_ahead="on",
            iterations=5,
        ),
    )
    with pytest.raises(Interrupted, match="checkpoint 1 saved"):
        loop.train_and_evaluate(config, str(tmp_path / "run"), progress=False)
    assert compiled == []
    assert json.load(open(tmp_path / "run" / "summary.json"))["stopped_by"] == "SIGTERM"


def test_a_signal_during_an_evaluation_says_it_finishes_the_evaluation(
    tmp_path, monkeypatch, capsys
):
    """A first signal waits for an evaluation under way (its programs compiling, on a first
    one: a reviewer's 25 s on 2 cores); the line said only 'finishing iteration 2'."""
    from azjax import loop, loop_eval
    from azjax.interrupt import Interrupted

    run = loop_eval.Evaluations.run

    def signalled(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(loop_eval.Evaluations, "run", signalled)
    toy = dict(num_blocks=1, num_filters=4, value_hidden=4, train_steps=2, train_batch_size=16)
    config = cfg.load(
        "tictactoe",
        dict(toy, batch_games=8, num_simulations=2, eval_interval=2, eval_games=2, iterations=4),
    )
    with pytest.raises(Interrupted, match="checkpoint 2 saved"):
        loop.train_and_evaluate(config, str(tmp_path / "run"), progress=False)
    said = capsys.readouterr().err
    assert "SIGTERM: finishing iteration 2 and its evaluation, under way, then saving" in said


def test_a_python_caller_stopped_at_once_still_waits_for_a_compilation(tmp_path, monkeypatch):
    """From Python (no azjax.cli, no os._exit), two signals: the loop must still end the
    evaluation's compile threads, or the interpreter's shutdown meets one inside XLA (a review's
    script aborted with exit 134)."""
    from azjax import loop, loop_eval
    from azjax.interrupt import Interrupted

    closed = []
    close = loop_eval.Evaluations.close
    monkeypatch.setattr(loop_eval.Evaluations, "close", lambda self: closed.append(close(self)))

    def twice(it, values):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)

    config = cfg.load(
        "tictactoe",
        dict(num_blocks=1, num_filters=4, value_hidden=4, train_steps=3, train_batch_size=32)
        | dict(batch_games=16, num_simulations=4, eval_interval=2, eval_compile_ahead="on"),
    )
    with pytest.raises(Interrupted, match="stopped at once") as stopped:
        loop.train_and_evaluate(config, str(tmp_path / "run"), progress=False, on_iteration=twice)
    assert stopped.value.at_once and closed == [None]


def test_divergence_is_not_saved_and_names_the_last_healthy_checkpoint(stopped_run, tmp_path, env):
    workdir = str(tmp_path / "run")
    shutil.copytree(stopped_run[0], workdir)
    last = _steps(workdir)[-1]
    done = _python(
        "train.py",
        [
            f"--workdir={workdir}",
            "--resume",
            "--learning_rate=1e6",
            f"--iterations={last + 20}",
            "--no_progress",
        ],
        env,
        text=True,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "diverged" in done.stderr and "--resume_step=" in done.stderr
    healthy = int(re.search(r"--resume_step=(\d+)", done.stderr).group(1))
    assert _steps(workdir)[-1] == last  # the diverged iterations saved nothing
    for step in (healthy, last):
        _, variables, _ = checkpoint.load_checkpoint(workdir, step)
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(variables)]
        assert all(np.isfinite(x).all() and np.abs(x).max() < 1e3 for x in leaves)
    again = _python(
        "train.py",
        [
            f"--workdir={workdir}",
            f"--resume_step={healthy}",
            "--learning_rate=0.01",
            f"--iterations={healthy + 1}",
            "--no_progress",
        ],
        env,
        text=True,
    )
    assert again.returncode == 0, again.stderr
    assert _steps(workdir)[-1] == healthy + 1  # the later checkpoints were set aside
    assert _iterations(workdir) == list(range(1, healthy + 2))


def test_adam_sized_divergence_is_caught():
    """With Adam at --learning_rate=1e6 the loss grew to 2e13 and the run ended with exit 0:
    a loss far above the run's first, or parameters that grew a thousandfold, are divergence."""
    variables = {"params": {"w": np.ones(100, np.float32)}}
    health = Health(variables, reference=3.3)
    assert health.losses({"loss/total": 3.0, "loss/value": 1.0}) is None
    assert "above" in health.losses({"loss/total": 2e13, "loss/value": 1.0})
    assert "non-finite loss/value" in health.losses({"loss/total": 3.0, "loss/value": np.nan})
    assert health.parameters(variables) is None
    assert "norm" in health.parameters({"params": {"w": np.full(100, 1e4, np.float32)}})
    assert "non-finite" in health.parameters({"params": {"w": np.full(100, 1e30, np.float32)}})
    nan = np.ones(100, np.float32)
    nan[7] = np.nan  # Adam's inf / inf: NaN parameters once passed as a norm of 0
    assert "non-finite" in health.parameters({"params": {"w": nan}})


def test_divergence_names_the_setting_to_lower():
    """A run whose L2 term blew up (--weight_decay=1e38) was told to lower --learning_rate."""
    from azjax.health import divergence

    class Saved:
        def steps(self):
            return [1, 2]

    health = Health({"params": {"w": np.ones(4, np.float32)}}, reference=3.0)
    grown = health.losses({"loss/total": 100.0, "loss/value": 1.0, "loss/l2": 90.0})
    assert "loss/l2 90 the most of it" in grown
    for reason, lower in (
        ("non-finite loss/total, loss/l2", "--weight_decay"),
        (grown, "--weight_decay"),
        ("non-finite loss/value", "--learning_rate"),
        (
            health.losses({"loss/total": 100.0, "loss/value": 90.0, "loss/l2": 1.0}),
            "--learning_rate",
        ),
    ):
        said = str(divergence(3, reason, Saved(), "run", healthy_upto=1))
        assert said.endswith(
            f"--resume_step=1 and a lower {lower} (checkpoint 2 led to this iteration)"
        )


def test_the_echoes_of_a_failed_restore_are_dropped_and_nothing_else():
    """A failed restore leaves tensorstore's reads to be collected later: asyncio logs each as
    "Task ..." or, as CI once saw, "Future exception was never retrieved" (16 lines of stderr
    under the one-line error). The filter drops both and lets other asyncio records through."""
    import logging

    def record(msg):
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, None, None)

    for kind in ("Task", "Future"):
        assert not checkpoint._drop_abandoned_tasks(record(f"{kind} exception was never retrieved"))
    assert checkpoint._drop_abandoned_tasks(record("Unclosed client session"))


def test_echoes_stay_dropped_after_a_failed_restore_and_a_good_one(monkeypatch):
    """CI once saw a traceback under the one-line error: the failed restore's abandoned reads were
    collected after the search for an older checkpoint had restored one, and that success had
    taken the filter away. After a failure, the filter and the hook stay for good."""
    import logging

    monkeypatch.setattr(checkpoint, "_quiet_for_good", False)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    shown = []  # the warnings printed
    monkeypatch.setattr(warnings, "showwarning", lambda m, c, *a, **k: shown.append(str(m)))
    asyncio_log = logging.getLogger("asyncio")
    with checkpoint._quiet_closed_loops():  # a restore that succeeds leaves nothing behind
        assert checkpoint._drop_abandoned_tasks in asyncio_log.filters
    assert checkpoint._drop_abandoned_tasks not in asyncio_log.filters
    try:
        with pytest.raises(ValueError):
            with checkpoint._quiet_closed_loops():
                raise ValueError("a corrupt checkpoint")
        with checkpoint._quiet_closed_loops():
            pass  # the older checkpoint restores
        assert checkpoint._drop_abandoned_tasks in asyncio_log.filters
        # A read the closed loop never started: collected as a coroutine never awaited (CI saw
        # its RuntimeWarning under the error), dropped; other warnings still show.
        for text in ("coroutine 'TensorStore._get_array_metadatas' was never awaited", "other"):
            warnings.showwarning(text, RuntimeWarning, "x.py", 1)
        assert shown == ["other"]
    finally:
        asyncio_log.removeFilter(checkpoint._drop_abandoned_tasks)


def test_a_poisoned_checkpoint_names_the_readable_one(stopped_run, tmp_path, env):
    workdir = str(tmp_path / "run")
    shutil.copytree(stopped_run[0], workdir)
    steps = _steps(workdir)
    for root, _, files in os.walk(os.path.join(workdir, "checkpoints", str(steps[-1]), "state")):
        for name in files:  # cut the arrays' data short: orbax's reads fail half-way
            if os.path.basename(root) == "d":
                os.truncate(os.path.join(root, name), 10)
    done = _python(
        "train.py", [f"--workdir={workdir}", "--resume", "--no_progress"], env, text=True
    )
    assert done.returncode == 2
    assert f"checkpoint {steps[-1]} " in done.stderr
    assert f"--resume_step={steps[-2]}" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


# ---- in-process: locks, metrics files, bad paths, sizes and values -------------------------------
def test_the_lock_refuses_a_second_holder_and_takes_over_a_dead_ones(tmp_path):
    with open(tmp_path / "lock", "w") as f:
        f.write("999999999\n")  # a process that is gone left its lock file
    with WorkdirLock(str(tmp_path)):
        assert open(tmp_path / "lock").read().strip() == str(os.getpid())
        with pytest.raises(CheckpointError, match=f"in use by process {os.getpid()}"):
            WorkdirLock(str(tmp_path)).__enter__()
    with WorkdirLock(str(tmp_path)):  # released
        pass


def test_a_failed_save_is_one_line_and_does_not_hang(tmp_path, monkeypatch):
    from azjax import cli
    from azjax.checkpoint import Checkpointer

    saver = Checkpointer(str(tmp_path))
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "checkpoints"))
    monkeypatch.setattr(saver.manager, "save", lambda *a, **k: (_ for _ in ()).throw(full))
    with pytest.raises(CheckpointError, match="checkpoint 3 could not be written.*disk is full"):
        saver.save(3, {"x": np.zeros(2)}, cfg.load("tictactoe"))
    assert saver.last_saved is None  # metrics.jsonl takes no row of checkpoint 3 (loop._abandon)
    t0 = time.time()
    saver.close()
    assert time.time() - t0 < Checkpointer.CLOSE_TIMEOUT
    assert "disk is full" in cli.user_message(full)


def test_a_full_standard_output_is_named_not_the_workdir(monkeypatch, capsys):
    """Session 116's list: `train.py > /dev/full` ended in "No space left on device (the disk is
    full: free space, or choose another --workdir)", the run saved: the write error had no file
    name to tell it from the workdir's."""
    import io

    from azjax import cli

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sys, "stdout", Full())
    assert cli.run("train.py", lambda argv: print("summary") or 0, []) == 2
    said = capsys.readouterr().err
    assert "train.py: error: standard output: No space left on device" in said
    assert "--workdir" not in said
    assert isinstance(sys.stdout, Full)  # put back after the command
    ok = io.StringIO()
    monkeypatch.setattr(sys, "stdout", ok)
    assert cli.run("train.py", lambda argv: print("summary") or 0, []) == 0
    assert ok.getvalue() == "summary\n"


def test_a_save_that_fails_in_the_background_keeps_its_rows_out(tmp_path, monkeypatch):
    """A save that failed while being written (a full disk, tensorstore's error) had its rows
    written to metrics.jsonl when the loop, stopping, waited once more: orbax reports an error
    once. The rows go up to the last checkpoint on disk."""
    from azjax import cli
    from azjax.checkpoint import Checkpointer

    saver = Checkpointer(str(tmp_path))
    config = cfg.load("tictactoe")
    saver.save(1, {"x": np.zeros(2)}, config)
    saver.wait()
    saver.save(2, {"x": np.zeros(2)}, config)
    saver.manager.wait_until_finished()
    told = [  # tensorstore's words for a full disk
        ValueError(
            'RESOURCE_EXHAUSTED: Error writing local file "ckpt/_sharding": Failed to write 11871 '
            "bytes to file 9: No space left on device [os_error_code='28']"
        )
    ]

    def check_once():
        if told:
            raise told.pop()

    monkeypatch.setattr(saver.manager, "check_for_errors", check_once)
    with pytest.raises(CheckpointError, match="checkpoint 2 could not be written") as error:
        saver.wait()
    # a full disk, not XLA's out of memory, which RESOURCE_EXHAUSTED otherwise means
    said = cli.user_message(error.value)
    assert "No space left on device (the disk is full" in said and "memory" not in said
    saver.wait()  # the loop's _abandon waits again: no error the second time
    assert saver.last_saved == 1
    saver.close()


def test_metrics_resume_cuts_back_and_a_new_run_starts_afresh(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [{"iteration": i, "games": 10} for i in range(1, 6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"iteration": 6, "ga')
    metrics = Metrics(str(tmp_path), resume_from=3, saved_rows=[{"iteration": 3, "games": 7}])
    metrics.add(4, {"games": 1})
    metrics.add(5, {"games": 2})
    metrics.commit(upto=4)  # checkpoint 4 is on disk; 5 waits for its own
    metrics.close()
    assert [(r["iteration"], r["games"]) for r in read_rows(str(path))] == [
        (1, 10),
        (2, 10),
        (3, 10),
        (4, 1),
    ]
    Metrics(str(tmp_path)).close()  # a new run
    assert path.read_text() == ""


def test_rows_only_a_checkpoint_held_reach_tensorboard_on_resume(tmp_path, monkeypatch):
    # killed after checkpoint 3 was written but before its row was: the resume fills the row in
    # from the checkpoint, into metrics.jsonl and TensorBoard alike
    from azjax import metrics as metrics_module

    logged = []

    class Writer:
        def __init__(self, *args, **kwargs):
            pass

        def add_scalar(self, name, value, step):
            logged.append((name, value, step))

        def flush(self):
            logged.append(("flushed", len(path.read_text().splitlines())))

        def close(self):
            pass

    monkeypatch.setattr(metrics_module, "_synchronous_writer", lambda *args: Writer())
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"iteration": i, "games": 10}) + "\n" for i in (1, 2)))
    metrics = Metrics(str(tmp_path), resume_from=3, saved_rows=[{"iteration": 3, "games": 7}])
    assert [r["iteration"] for r in metrics.rows] == [1, 2, 3]
    # tb/ written afresh from the rows kept, the one filled in from the checkpoint too
    assert logged == [("games", 10, 1), ("games", 10, 2), ("games", 7, 3), ("flushed", 3)]
    # a row reaches metrics.jsonl only once TensorBoard has it on disk: a SIGKILL lost the
    # scalars tensorboardX still queued (it writes every 120 s)
    logged.clear()
    metrics.add(4, {"games": 5})
    metrics.commit(upto=4)
    assert logged == [("games", 5, 4), ("flushed", 3)]
    assert len(path.read_text().splitlines()) == 4
    metrics.close()


def _tensorboard_events(folder) -> list[tuple[str, int, float]]:
    """(tag, step, value) of every scalar event in `folder`'s event files (TFRecords of Events),
    in order, as a reader that ignores TensorBoard's purge events sees them."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    found = []
    for name in sorted(os.listdir(folder)):
        data = open(os.path.join(folder, name), "rb").read()
        at = 0
        while at + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            event = Event.FromString(data[at + 12 : at + 12 + length])
            at += 12 + length + 4
            found += [(v.tag, event.step, v.simple_value) for v in event.summary.value]
    return found


def _tensorboard_scalars(folder) -> dict[tuple[str, int], float]:
    """{(tag, step): value} of the scalars in `folder`'s event files, the last of each."""
    return {(tag, step): value for tag, step, value in _tensorboard_events(folder)}


def test_tensorboard_holds_what_metrics_jsonl_keeps_after_a_resume(tmp_path):
    """A resume to an earlier checkpoint only wrote a purge event: TensorBoard's Rust data server
    and summary_iterator, which ignore it, showed the set-aside iterations' points beside the
    resumed run's, and a row filled in from the checkpoint was logged twice."""
    metrics = Metrics(str(tmp_path))
    for i in range(1, 6):
        metrics.add(i, {"a": float(i), "b": float(i)})
    metrics.commit(upto=5)
    metrics.close()
    resumed = Metrics(str(tmp_path), resume_from=2)  # 3..5 set aside
    resumed.add(3, {"a": 30.0})
    resumed.commit(upto=3)
    resumed.close()
    rows = read_rows(str(tmp_path / "metrics.jsonl"))
    kept = sorted((k, r["iteration"], v) for r in rows for k, v in r.items() if k != "iteration")
    assert kept == [("a", 1, 1.0), ("a", 2, 2.0), ("a", 3, 30.0), ("b", 1, 1.0), ("b", 2, 2.0)]
    assert sorted(_tensorboard_events(tmp_path / "tb")) == kept


def test_a_committed_row_is_on_tensorboards_disk_whole(tmp_path):
    """tensorboardX queues events for a thread and its flush writes only what that thread took:
    a kill after the commit lost the row's last scalars, and a resume never logs them again."""
    metrics = Metrics(str(tmp_path))
    metrics.add(1, {f"m{i}": float(i) for i in range(30)})  # more than tensorboardX's queue of 10
    metrics.commit(upto=1)
    scalars = _tensorboard_scalars(tmp_path / "tb")  # the files as a kill now would leave them
    assert {tag for tag, _ in scalars} == {f"m{i}" for i in range(30)}
    metrics.close()
    resumed = Metrics(str(tmp_path), resume_from=1)  # the purge step, before any later scalar
    resumed.add(2, {"m0": 7.0})
    resumed.commit(upto=2)
    assert _tensorboard_scalars(tmp_path / "tb")[("m0", 2)] == 7.0
    resumed.close()


def test_without_tensorboardx_a_resume_leaves_tb_as_it_is(tmp_path, monkeypatch):
    """The rebuild removed tb/ before it knew it could write it again."""
    (tmp_path / "tb").mkdir()
    (tmp_path / "tb" / "events.out.tfevents.1").write_bytes(b"kept")
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "games": 3}) + "\n")
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import fails
    metrics = Metrics(str(tmp_path), resume_from=1)
    metrics.add(2, {"games": 4})
    metrics.commit(upto=2)
    metrics.close()
    assert (tmp_path / "tb" / "events.out.tfevents.1").read_bytes() == b"kept"
    assert [r["iteration"] for r in read_rows(str(tmp_path / "metrics.jsonl"))] == [1, 2]


def test_old_metrics_files_count_each_iteration_once(tmp_path):
    rows = [1, 2, 3, 2, 3, 4]  # a crash after 3, a resume from 1
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps({"iteration": i, "games": 10}) + "\n" for i in rows)
    )
    assert training_games(str(tmp_path)) == {1: 10, 2: 20, 3: 30, 4: 40}
    (tmp_path / "metrics.jsonl").write_text('{"iteration": 1}\nnot json\n{"iteration": 2}\n')
    with pytest.raises(ValueError, match="metrics.jsonl, line 2"):
        training_games(str(tmp_path))


def _fails(capsys, main, argv, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def test_unwritable_workdirs_are_one_line(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    _fails(capsys, train.main, TOY + [f"--workdir={afile}"], "is a file")
    _fails(capsys, train.main, TOY + [f"--workdir={afile}/run"], "cannot be written")
    missing = tmp_path / "missing"  # --resume of a folder that is not there leaves none behind
    _fails(capsys, train.main, TOY + [f"--workdir={missing}", "--resume"], "no run folder")
    assert not missing.exists()
    if os.geteuid() != 0:  # root writes through permissions
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        _fails(capsys, train.main, TOY + [f"--workdir={ro}/run"], "Permission denied")


@pytest.mark.parametrize(
    "flag, part",
    [
        ("--batch_games=100000000", "self-play trajectories"),  # its trees searched in chunks
        ("--batch_games=100000 --num_simulations=10000 --tree_reuse --search=puct", "search trees"),
        ("--replay_games=100000000", "replay buffer"),
        ("--train_batch_size=100000000", "training activations"),
        ("--selfplay_steps=100000000", "self-play trajectories"),
        ("--num_filters=1024", "network and optimizer"),
    ],
)
def test_sizes_beyond_memory_are_refused_before_work(tmp_path, capsys, monkeypatch, flag, part):
    from azjax import memory

    monkeypatch.setattr(memory, "memory_limit", lambda: (2**30, "host memory"))
    flags = flag.split() + (["--num_blocks=8"] if "filters" in flag else [])
    _fails(capsys, train.main, TOY + [f"--workdir={tmp_path}"] + flags, part, "GiB")
    assert not os.path.exists(tmp_path / "checkpoints")


def test_a_refusal_s_suggested_value_fits(monkeypatch):
    """The refusal gave no value that would fit; where the largest part grows in proportion to
    its first flag it names the largest that does, and a run with it is not refused."""
    from azjax import loop, memory, parallel

    monkeypatch.setattr(memory, "memory_limit", lambda: (2**30, "host memory"))
    mesh = parallel.make_mesh()

    def check(**sizes):
        config = cfg.load("tictactoe", dict(num_filters=4, num_blocks=1, **sizes))
        memory.check_memory(config, loop.make_iteration(config, mesh), 1)

    for flag, big in (("replay_games", 20_000_000), ("train_batch_size", 50_000_000)):
        with pytest.raises(ValueError) as refused:
            check(**{flag: big})
        value = int(re.search(rf"about --{flag}=(\d+) would fit", str(refused.value)).group(1))
        check(**{flag: value})  # not refused
        with pytest.raises(ValueError):  # and about the largest that does
            check(**{flag: int(value * 1.05) + 2})


def test_the_memory_estimate_s_parts_are_what_each_algorithm_holds():
    """Session 116's reviewer: Expert Iteration was sized by AlphaZero's formulas (and its
    refusal named --replay_games), the in-loop evaluation was not sized, self-play's trajectories
    were counted with the buffer's uint8 observations, and every part was summed though self-play,
    learning and evaluation never hold theirs at once."""
    from azjax import exit as expert_iteration
    from azjax import loop, memory, parallel
    from azjax.search import bytes_per_tree

    mesh = parallel.make_mesh()
    sizes = dict(num_filters=4, num_blocks=1, batch_games=64, num_simulations=16)
    config = cfg.load("tictactoe", dict(sizes, eval_interval=0))
    parts = memory.memory_estimate(config, loop.make_iteration(config, mesh), 1)
    assert "evaluation matches" not in parts
    game = config.make_game()
    float_obs = 4 * int(np.prod(game.observation_shape))
    assert parts["self-play trajectories"].nbytes >= game.max_game_length * 64 * float_obs
    by_phase = [
        parts["self-play trajectories"].nbytes + parts["search trees"].nbytes,
        parts["training activations"].nbytes,
    ]
    held = parts["replay buffer"].nbytes + parts["network and optimizer"].nbytes
    assert memory.needed(parts) == held + max(by_phase)

    evaluated = cfg.load("tictactoe", dict(sizes, eval_interval=5, eval_games=32))
    parts = memory.memory_estimate(evaluated, loop.make_iteration(evaluated, mesh), 1)
    # pure MCTS at twice the simulations, each agent searching the 16 games where it moves
    assert parts["evaluation matches"].nbytes >= 16 * bytes_per_tree(game, 32)

    exit_config = cfg.load(
        "tictactoe", dict(sizes, algorithm="exit", positions_per_game=4, dataset_size=5000)
    )
    fns = expert_iteration.make_iteration(exit_config, mesh)
    parts = memory.memory_estimate(exit_config, fns, 1)
    assert parts["replay buffer"].flags == "--dataset_size"
    assert "--positions_per_game" in parts["search trees"].flags
    # the expert searches the round's 64 x 4 positions at once
    assert parts["search trees"].nbytes >= 256 * bytes_per_tree(game, 16)
    assert parts["self-play trajectories"].flags == "--batch_games"


@pytest.mark.parametrize(
    "files, limit",
    [
        (
            {"proc/self/cgroup": "0::/job\n", "sys/fs/cgroup/job/memory.max": "8589934592\n"},
            8 << 30,
        ),
        ({"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"}, None),
        (
            {
                "proc/self/cgroup": "4:memory:/job\n1:cpu:/\n",
                "sys/fs/cgroup/memory/job/memory.limit_in_bytes": "4294967296",
                "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712",
            },
            4 << 30,
        ),
        ({}, None),
    ],
)
def test_a_cgroup_s_memory_limit_is_read(tmp_path, monkeypatch, files, limit):
    """The host limit was the physical memory alone: a container given less was sized by the
    machine's."""
    from azjax import memory

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert memory._cgroup_limit(str(tmp_path)) == limit
    if limit:
        monkeypatch.setattr(memory, "_cgroup_limit", lambda: limit)
        devices = jax.local_device_count()
        assert memory.memory_limit() == (limit // devices, "the cgroup's memory limit")


def test_a_run_that_fits_is_not_refused_for_its_trees():
    """The trees' estimate counted the network's activations once per node: 8x8 Othello at 256
    games, 400 simulations and 128 filters read 1.9 GiB of trees where the compiled self-play
    needs 121 MiB, and a run at 512 filters was refused on 24 GiB; the network part counted the
    optimizer's moments three times over."""
    from azjax import loop, memory, parallel

    config = cfg.load(
        "othello",
        dict(size=8, batch_games=256, num_simulations=400, num_filters=128, num_blocks=1),
    )
    fns = loop.make_iteration(config, parallel.make_mesh())
    parts = {k: b for k, (b, *_) in memory.memory_estimate(config, fns, 1).items()}
    assert 100 * 2**20 < parts["search trees"] < 200 * 2**20  # 256 x 401 nodes, one leaf batch
    run = jax.eval_shape(fns.init_run)
    weights = memory._nbytes(run.train.variables)
    assert parts["network and optimizer"] == memory._nbytes(run) + 2 * weights


@pytest.mark.parametrize(
    "flags, said",
    [
        (
            ["--search=puct", "--gumbel_scale=0.5"],
            "--gumbel_scale changes nothing with search=puct",
        ),
        (["--search=gumbel", "--dirichlet_alpha=0.1"], "--dirichlet_alpha changes nothing with"),
        (["--fast_simulations=2"], "--fast_simulations changes nothing with full_search_prob=1.0"),
        (["--gating_games=10"], "--gating_games changes nothing with gating=0.0 (it needs gating"),
        (["--resign_playout=0.2"], "--resign_playout changes nothing with resign_threshold=0.0"),
        (  # Expert Iteration's apprentice does not search: no root noise
            ["--algorithm=exit", "--search=puct", "--dirichlet_fraction=0.1"],
            "--dirichlet_fraction changes nothing with search=puct, algorithm=exit",
        ),
        # session 117's list: more of them
        (["--soft_policy_temperature=2"], "changes nothing with soft_policy_weight=0.0"),
        (["--optimizer=adam", "--momentum=0.5"], "--momentum changes nothing with optimizer=adam"),
        (["--gating_interval=2"], "--gating_interval changes nothing with gating=0.0"),
        (["--eval_opponent_sims=8"], "--eval_opponent_sims changes nothing with eval_opponent=''"),
        (["--eval_opponent_games=8"], "--eval_opponent_games changes nothing with eval_opponent="),
        (["--eval_opponent_decisive=false"], "--eval_opponent_decisive changes nothing with"),
        # no in-loop evaluation (TOY's eval_interval=0): its settings, a final one (session 120)
        (["--eval_final"], "--eval_final changes nothing with eval_interval=0"),
        (["--eval_games=8"], "--eval_games changes nothing with eval_interval"),
    ],
)
def test_a_flag_that_would_change_nothing_is_refused(tmp_path, capsys, flags, said):
    """Session 115's list: a setting given where another turns it off was accepted and ignored
    (the user believed the run used it)."""
    _fails(capsys, train.main, TOY + [f"--workdir={tmp_path}/run", *flags], said, "leave it out")
    assert not (tmp_path / "run").exists()


def test_every_conditional_flag_is_taken_with_what_it_needs():
    """The refusal above is for a flag given where it acts on nothing: with the settings it
    needs, each flag of `CONDITIONAL` is taken."""
    needs = dict(
        full_search_prob=0.5,
        fast_simulations=2,
        resign_threshold=0.9,
        gating=0.55,
        search="puct",
        rollout_policy="policy",
        rollout_prob=0.5,
        soft_policy_weight=1.0,
        optimizer="sgd",
        eval_opponent="minimax",
    )
    configs = [
        cfg.load("tictactoe", needs),
        cfg.load("tictactoe", {**needs, "search": "gumbel"}),
        cfg.load("tictactoe", dict(algorithm="exit", exit_prior_weight=10.0)),
        cfg.load("tictactoe", dict(algorithm="exit", early_stopping=3)),
    ]
    for name, *_ in cfg.CONDITIONAL:
        assert any(not cfg.ignored(config, [name]) for config in configs), name
    # the search's own settings are a run's for later: `ckpt:RUN,search=puct` plays a Gumbel
    # run with its c_puct (they were refused as changing nothing for a session)
    gumbel = configs[1]
    kept = ["c_puct", "puct_values", "max_considered_actions", "rollout_weight", "rollout_sample"]
    assert cfg.ignored(cfg.load("tictactoe", dict(search="puct")), kept) == []
    assert cfg.ignored(gumbel, kept + ["exit_prior_temperature"]) == []
    # without in-loop evaluations a switch turned off is taken, and what `evaluate.py curve`
    # reads of the run's config (its epsilon, its ladder's cap)
    off = dict(eval_interval=0, eval_final=False, eval_ladder=False, eval_errors=False)
    curve = ["eval_epsilon", "eval_ladder_max_sims"]
    assert cfg.ignored(cfg.load("tictactoe", off), [*off, *curve]) == []


def test_bad_values_are_one_line(tmp_path, capsys):
    _fails(
        capsys,
        train.main,
        TOY + [f"--workdir={tmp_path}", "--seed=18446744073709551616"],
        "--seed must be <=",
    )
    _fails(capsys, train.main, TOY + [f"--workdir={tmp_path}", "--resume_step=-1"], "--resume_step")


@pytest.mark.parametrize("content", ["[1, 2]", "null", "{not json", "DIR"])
def test_a_bad_config_json_is_named(stopped_run, tmp_path, capsys, content):
    workdir = tmp_path / "run"
    shutil.copytree(stopped_run[0], workdir, ignore=shutil.ignore_patterns("checkpoints"))
    config = workdir / "config.json"
    config.unlink()
    if content == "DIR":
        config.mkdir()
    else:
        config.write_text(content)
    _fails(capsys, train.main, [f"--workdir={workdir}", "--resume"], str(config))


def test_a_run_of_an_unregistered_game_says_to_register_it(tmp_path, capsys):
    """Deleting config.json would not help (the checkpoint's config names the game too)."""
    from azjax.checkpoint import CheckpointError, read_config_file

    config = tmp_path / "config.json"
    config.write_text(json.dumps({**json.loads(cfg.load("tictactoe").to_json()), "game": "mnk"}))
    with pytest.raises(CheckpointError) as error:
        read_config_file(str(config))
    message = str(error.value)
    assert "got 'mnk' (a game of your own: register it" in message and "adding_a_game" in message
    assert "delete" not in message


def test_a_deleted_config_json_resumes_with_the_checkpoints(stopped_run, tmp_path):
    workdir = tmp_path / "run"
    shutil.copytree(stopped_run[0], workdir)
    (workdir / "config.json").unlink()
    config, _ = train.parse([f"--workdir={workdir}", "--resume"])
    assert config.game == "tictactoe" and config.num_filters == 4


def test_a_batch_that_does_not_divide_over_the_devices(tmp_path, env):
    two = dict(env, XLA_FLAGS=with_host_devices(2, env))
    done = _python("train.py", TOY + [f"--workdir={tmp_path}", "--batch_games=15"], two, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--batch_games=15 does not divide over the 2 devices" in done.stderr


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["match", "mcts:seconds=inf", "random", "--game=tictactoe"], "must be in [1e-06, 3600.0]"),
        (["match", "random", "random", "--game=tictactoe", "--out={file}"], "is a file"),
        (["match", "random", "random", "--game=tictactoe", "--out={file}/x"], "is a file"),
        (["curve", "{file}", "--sims=0"], "--sims must be at least 1"),
        (["curve", "{file}", "--epsilon=5"], "--epsilon is a probability"),
        (["ladder", "--game=tictactoe", "--rungs=2:4", "--table={file}/t.json"], "--table"),
        (["ladder", "--game=tictactoe", "--rungs=2:4", "--table={dir}"], "--table"),
    ],
)
def test_evaluate_checks_before_playing(tmp_path, capsys, argv, needle):
    (tmp_path / "f").write_text("x")
    argv = [a.replace("{file}", str(tmp_path / "f")).replace("{dir}", str(tmp_path)) for a in argv]
    _fails(capsys, evaluate.main, argv, needle)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["match", "random", "random", "--game=tictactoe", "--out="], "--out: an empty path"),
        (["export", "pretrained/hex6", "--name=x", "--to="], "--to: an empty path"),
        (["ladder", "--game=tictactoe", "--table="], "--table: an empty path"),
        (["place", "random", "--game=tictactoe", "--table="], "--table: an empty path"),
        (["errors", "random", "--game=tictactoe", "--positions="], "--positions: an empty path"),
        (["train", "--game=tictactoe", "--workdir="], "--workdir: an empty path"),
    ],
)
def test_an_empty_path_is_not_the_default_folder(capsys, argv, needle):
    """`--out=` wrote into runs/eval/, `--to=` into the package's store, `--table=` over the
    package's ladder table and train.py's `--workdir=` into runs/<game>, as if left out."""
    from azjax.commands import train

    with pytest.raises(SystemExit) as exit_info:
        train.main(argv[1:]) if argv[0] == "train" else evaluate.main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_an_interrupted_curve_keeps_what_it_played(stopped_run, tmp_path, monkeypatch):
    from types import SimpleNamespace

    from azjax.arena import MatchResult
    from azjax.eval import curve

    one_win = MatchResult.from_returns(np.array([1.0, 0.0]), np.array([True, False]))
    monkeypatch.setattr(curve, "play_games", lambda *a: SimpleNamespace(result=one_win))

    def log(text):
        raise KeyboardInterrupt  # Ctrl-C right after the first checkpoint

    with pytest.raises(KeyboardInterrupt):
        curve.run_curve(stopped_run[0], str(tmp_path), games=2, log=log)
    record = json.load(open(tmp_path / "curve.json"))
    assert [r["step"] for r in record["curve"]] == [1] and record["complete"] is False


def test_a_curve_stopped_before_its_first_checkpoint_leaves_no_earlier_record(
    stopped_run, tmp_path, monkeypatch
):
    """A curve run again into the same folder and stopped during its first checkpoint: the
    earlier curve's complete record passed for this one's."""
    from azjax.eval import curve

    earlier = dict(run="another run", complete=True, curve=[{"step": 9}])
    (tmp_path / "curve.json").write_text(json.dumps(earlier))

    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(curve, "play_games", stopped)
    with pytest.raises(KeyboardInterrupt):
        curve.run_curve(stopped_run[0], str(tmp_path), games=2, log=lambda text: None)
    record = json.load(open(tmp_path / "curve.json"))
    assert record["run"] == os.path.abspath(stopped_run[0])
    assert record["curve"] == [] and record["complete"] is False


def test_an_interrupted_match_keeps_its_finished_games(tmp_path, monkeypatch):
    from azjax.eval import match

    game = games.make("tictactoe")
    # Ctrl-C right after the first games ended and were written
    monkeypatch.setattr(match, "write_json", _stopping_after_first(match.write_json))
    with pytest.raises(KeyboardInterrupt):
        match.run_match(game, ["minimax", "random"], str(tmp_path), games=6)
    record = json.load(open(tmp_path / "match.json"))
    played = record["result"]["overall"]
    assert record["complete"] is False and record["agents"] == ["minimax", "random"]
    assert 1 <= played["games"] < 6 and played["losses"] == 0  # minimax never loses
    # the finished games' moves are kept too, in match.json and as record files
    kept = record["game_records"]
    assert len(kept) == played["games"]
    files = sorted(os.listdir(tmp_path / "games"))
    assert files == [f"game-{g['game']:04d}.txt" for g in kept]
    for g in kept:
        with open(tmp_path / "games" / f"game-{g['game']:04d}.txt") as f:
            assert f.read().split() == g["moves"]
        assert g["a_played"] == ("black" if g["game"] <= 3 else "white")


def test_a_match_into_an_earlier_matchs_folder_keeps_only_its_own_records(tmp_path):
    from azjax.eval import match

    game = games.make("tictactoe")
    match.run_match(game, ["random", "random"], str(tmp_path), games=4)
    (tmp_path / "games" / "notes.txt").write_text("mine")  # not a record: left alone
    match.run_match(game, ["random", "random"], str(tmp_path), games=2)
    left = sorted(os.listdir(tmp_path / "games"))
    assert left == ["game-0001.txt", "game-0002.txt", "notes.txt"]


def test_a_match_stopped_before_its_first_game_leaves_no_earlier_result(tmp_path, monkeypatch):
    """The folder held the earlier match's match.json (complete, another game) until the new
    match's first game ended: a match stopped before then looked finished."""
    from azjax.eval import match

    match.run_match(games.make("tictactoe"), ["random", "random"], str(tmp_path), games=2)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(match, "play_games", stopped)
    with pytest.raises(KeyboardInterrupt):
        match.run_match(games.make("hex", size=3), ["random", "random"], str(tmp_path), games=2)
    assert not os.path.exists(tmp_path / "match.json")
    assert os.listdir(tmp_path / "games") == []


def test_an_interrupted_tournament_keeps_its_matches(tmp_path):
    from azjax.eval.tournament import run_tournament

    def log(text):
        raise KeyboardInterrupt  # Ctrl-C right after the first match

    with pytest.raises(KeyboardInterrupt):
        run_tournament(
            games.make("tictactoe"),
            ["random", "minimax", "random"],
            str(tmp_path),
            games=2,
            log=log,
        )
    record = json.load(open(tmp_path / "tournament.json"))
    assert record["complete"] is False and len(record["matches"]) == 1
    assert record["win_ratio"][0][2] is None  # not played yet


def test_a_tournament_stopped_after_its_last_match_keeps_it(tmp_path, monkeypatch):
    """The last match was kept only by the complete record, written after the plot: a one-pair
    tournament stopped there kept nothing."""
    from azjax.eval import tournament

    def log(text):
        raise KeyboardInterrupt  # after the only match

    with pytest.raises(KeyboardInterrupt):
        tournament.run_tournament(
            games.make("tictactoe"), ["random", "minimax"], str(tmp_path), games=2, log=log
        )
    record = json.load(open(tmp_path / "tournament.json"))
    assert record["complete"] is False and len(record["matches"]) == 1
    assert record["openings"] == "none"

    def plot(*args):
        raise KeyboardInterrupt  # while the heatmap is drawn

    monkeypatch.setattr(tournament, "plot_heatmap", plot)
    with pytest.raises(KeyboardInterrupt):
        tournament.run_tournament(
            games.make("tictactoe"), ["random", "minimax"], str(tmp_path), games=2, log=None
        )
    assert json.load(open(tmp_path / "tournament.json"))["complete"] is True


def test_a_match_stopped_while_its_openings_are_solved_keeps_its_games(tmp_path, monkeypatch):
    """All games ended inside the match's program and the record waited for the solver's values
    of the openings: a signal then lost every game."""
    from azjax.eval import match, openings

    def solving(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(openings, "perfect_values", solving)
    with pytest.raises(KeyboardInterrupt):
        match.run_match(
            games.make("tictactoe"),
            ["random", "random"],
            str(tmp_path),
            games=None,
            openings="all",
        )
    record = json.load(open(tmp_path / "match.json"))
    assert record["result"]["overall"]["games"] == 18 and len(record["game_records"]) == 18
    assert len(os.listdir(tmp_path / "games")) == 18


def _stopping_after_first(write):
    def stop(*args):
        write(*args)
        raise KeyboardInterrupt

    return stop


# ---- input: bytes, lengths, GTP ---------------------------------------------------------------
def test_gtp_survives_invalid_bytes_and_long_lines(env):
    strict = dict(env, LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8:strict")
    stdin = (
        b"1 name\n2 play b \xff\xfe\n3 play b " + b"z" * 1_000_000 + b"\n"
        b"4 boardsize \xc2\xb2\n5 play b a1\nquit\n"
    )
    done = _python("play.py", ["--gtp", "--game=tictactoe", "--agent=random"], strict, input=stdin)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, err
    assert "=1 azjax" in out and "?2 invalid vertex" in out and "?4 syntax error" in out
    assert "=5" in out and len(out) < 2000 and "Traceback" not in err


def test_human_mode_survives_invalid_bytes(env):
    strict = dict(env, LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8:strict")
    done = _python(
        "play.py",
        ["--game=tictactoe", "--agent=random"],
        strict,
        input=b"\xff\xfe\n" + b"q" * 100_000 + b"\nquit\n",
    )
    err = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in err, err
    assert len(done.stdout) < 5000


def test_ctrl_c_stops_a_long_search_at_once(env):
    proc = subprocess.Popen(
        [
            sys.executable,
            "play.py",
            "--game=tictactoe",
            "--agent=mcts:sims=100000",
            "--human_color=second",
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "you are" in proc.stdout.readline()  # the agent, first to move, starts its search
        time.sleep(1.0)
        t0 = time.time()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert time.time() - t0 < 10
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "SIGINT" in err and "Traceback" not in err


def _othello_must_pass():
    """An Othello 4x4 engine after 11 moves, where white has nothing but a pass."""
    engine = GTPEngine(games.make("othello", size=4), lambda g: lambda s: -1)
    for colour, move in zip("bwbwbwbwbwb", "c4 b4 a1 d2 d4 d3 a2 c1 a4 a3 b1".split()):
        assert engine.handle(f"play {colour} {move}").startswith("="), (colour, move)
    return engine


def test_gtp_leaves_a_forced_pass_implicit():
    engine = _othello_must_pass()
    assert engine.handle("play w d1").startswith("? illegal")  # white's only move is the pass
    assert len(engine.actions) == 11  # and the refusal took nothing back or forward
    assert engine.handle("play b d1") == "= \n\n"  # white passed implicitly
    assert [engine.move_name(a) for a in engine.actions[-2:]] == ["pass", "d1"]


@pytest.mark.parametrize("move, answer", [(-1, "= resign"), (0, "? the agent chose an illegal")])
def test_gtp_takes_the_forced_pass_back_where_genmove_plays_nothing(move, answer):
    engine = _othello_must_pass()
    engine._agents[engine.game] = lambda state: move  # a1, taken: illegal
    assert engine.handle("genmove b").startswith(answer)
    assert len(engine.actions) == 11  # white's pass is not left behind


def test_gtp_still_refuses_moves_out_of_turn():
    engine = GTPEngine(games.make("othello", size=4), lambda g: lambda s: -1)
    assert engine.handle("play w a1").startswith("? it is black's turn")
    assert engine.actions == []


SCRIPT_MODULES = sorted(
    f"{folder}.{name[:-3]}"
    for folder in ("experiments", "benchmarks")
    for name in os.listdir(os.path.join(ROOT, folder))
    if name.endswith(".py")
    and 'if __name__ == "__main__":' in open(os.path.join(ROOT, folder, name)).read()
)


@pytest.mark.parametrize("module", SCRIPT_MODULES)
def test_every_experiment_and_benchmark_ends_through_cli_script(module):
    """`python -m MODULE` handles errors and signals as the commands do (azjax.cli.script)."""
    source = open(os.path.join(ROOT, *module.split(".")) + ".py").read()
    guard = source.split('if __name__ == "__main__":', 1)[1]
    assert f'sys.exit(cli.script("{module}", main))' in guard


def test_ordinary_environments_end_the_commands_quietly(tmp_path):
    """Output piped into `head` ended as 'error: Broken pipe', exit 2; play.py with standard
    input closed died in a traceback; an ASCII-only locale failed on a '±' after the games."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    evaluate = f"{sys.executable} {ROOT}/evaluate.py"
    match = "match random minimax:depth=1 --game=tictactoe --games=2"
    script = (
        f"{evaluate} tournament random random minimax:depth=1 --game=tictactoe --games=8 "
        f"--out={tmp_path}/t | head -c 1 >/dev/null; echo piped ${{PIPESTATUS[0]}}\n"
        f"{sys.executable} {ROOT}/play.py --game=tictactoe --agent=random <&- >/dev/null; "
        "echo closed $?\n"
        f"LC_ALL=C PYTHONUTF8=0 PYTHONCOERCECLOCALE=0 {evaluate} {match} --out={tmp_path}/m "
        ">/dev/null; echo ascii $?\n"
    )
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.split() == ["piped", "141", "closed", "0", "ascii", "0"], done
    assert "Traceback" not in done.stderr and "error" not in done.stderr, done.stderr


def test_a_broken_pipe_of_the_commands_own_is_an_error_line(capsys):
    """Only a closed standard output ends quietly: another pipe (a GTP engine's) gone is an
    error, one line and exit 2, as before."""
    from azjax import cli

    def engine_gone(argv):
        raise BrokenPipeError(32, "Broken pipe")

    assert cli.run("x", engine_gone, [], setup=False) == 2
    assert capsys.readouterr().err == "x: error: Broken pipe\n"


def test_cli_script_is_one_line_and_exit_2_for_a_user_error(monkeypatch, capsys):
    from azjax import cli

    def bad(argv):
        assert argv == ["--size=30"]
        raise ValueError("hex: size must be an integer in 2..19, got 30")

    monkeypatch.setattr(sys, "argv", ["x.py", "--size=30"])
    assert cli.script("experiments.x", bad) == 2
    err = capsys.readouterr().err
    assert err == "python -m experiments.x: error: hex: size must be an integer in 2..19, got 30\n"
    assert cli.script("benchmarks.x", lambda argv: [1, 2]) == 0  # results, not a code
    assert cli.script("benchmarks.x", lambda argv: 3) == 3
    with pytest.raises(RuntimeError):  # a bug keeps its traceback
        cli.script("benchmarks.x", lambda argv: (_ for _ in ()).throw(RuntimeError("bug")))
    # --debug, as README says of the experiments and benchmarks: the traceback, and the module's
    # own parser never sees the flag
    monkeypatch.setattr(sys, "argv", ["x.py", "--size=30", "--debug"])
    with pytest.raises(ValueError, match="size must be"):
        cli.script("experiments.x", bad)


def test_an_experiment_refuses_a_missing_run_in_one_line(tmp_path, env):
    argv = ["experiments.tictactoe", f"--workdir={tmp_path}/none", "--eval_only"]
    out = _python("-m", argv, env, text=True)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"python -m experiments.tictactoe: error: no run folder '{tmp_path}/none'"
    ]


def test_out_of_memory_names_what_to_lower_for_each_command(capsys):
    from azjax import cli

    oom = RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9 bytes.\nmore")

    def body(argv):
        raise oom

    assert "lower --batch_games" in cli.user_message(MemoryError())  # training's by default
    assert cli.run("evaluate.py", body, [], setup=False, memory_hint="lower --games") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "evaluate.py: error: out of memory (RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate 9 bytes.); lower --games"
    ]


def test_a_missing_optional_package_is_named_with_its_install_command():
    from azjax import cli

    said = cli.user_message(ModuleNotFoundError("No module named 'pyspiel'", name="pyspiel"))
    assert said.startswith("this needs open-spiel, which is not installed (pip install open-spiel")
    assert (
        cli.user_message(ModuleNotFoundError("No module named 'azjax.x'", name="azjax.x")) is None
    )


def test_a_second_signal_while_a_stop_is_reported_is_ignored(monkeypatch, capsys):
    """`timeout` signals a command and its process group: two signals at once. The second one,
    arriving while the first's line was printed (the handlers already put back), ended in a
    KeyboardInterrupt traceback and an abort instead of exit 130."""
    import signal

    from azjax import cli

    class Stderr:  # the second Ctrl-C arrives as the line is written
        def write(self, text):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes, in this thread
                pass
            return len(text)

        def flush(self):
            pass

    def body(argv):
        monkeypatch.setattr(cli.sys, "stderr", Stderr())
        raise KeyboardInterrupt

    assert cli.run("x", body, [], setup=False) == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back after


def test_a_stuck_save_thread_ends_the_process_with_the_errors_code(monkeypatch):
    """orbax's threads override join(timeout) to raise TimeoutError (or their own error): after
    the one-line error of a failed save, the wait for them ended in a traceback and exit 1."""
    import threading

    from azjax import cli

    class OrbaxLike(threading.Thread):
        def join(self, timeout=None):
            raise TimeoutError(f"Thread {self.name} did not complete within {timeout} seconds")

    release = threading.Event()
    stuck = OrbaxLike(target=release.wait)
    stuck.start()
    left = []
    monkeypatch.setattr(cli.sys, "argv", ["train.py"])
    monkeypatch.setattr(cli.os, "_exit", left.append)
    try:
        cli._leave_if_stuck("train.py", 2, wait=0.1)
    finally:
        release.set()
        threading.Thread.join(stuck)
    assert left == [2]


def test_a_checkpoints_unreadable_rows_are_named_with_what_to_do(stopped_run, tmp_path, capsys):
    """orbax reads each checkpoint's metrics/metrics (the rows saved with it) as its own metrics
    as it opens the folder: one corrupt file made the whole run unopenable with 'Expecting value:
    line 1 column 1 (char 0)'."""
    from azjax.commands import train

    workdir = str(tmp_path / "run")
    shutil.copytree(stopped_run[0], workdir)
    bad = os.path.join(workdir, "checkpoints", "1", "metrics", "metrics")
    with open(bad, "w") as f:
        f.write("garbage")
    _fails(capsys, train.main, [f"--workdir={workdir}", "--resume"], f"({bad}): remove that file")
    _fails(capsys, evaluate.main, ["curve", workdir], "metrics.jsonl holds the rows too")
    os.remove(bad)  # as told: the run opens again, its steps all there
    assert checkpoint.steps(workdir)[0] == 1


@pytest.mark.parametrize("interval", [1, 3])
def test_a_kill_loses_one_checkpoint_interval_at_most(tmp_path, monkeypatch, interval):
    """A save runs while the next iterations play: a kill while checkpoint k was still being
    written lost the iterations since k and k's own interval (a reviewer's kill -9s: 2 at
    --checkpoint_interval=1, 5 - 6 at 3). Each iteration is done only once the save before it
    is on disk. Here every save stays 'being written' until the loop waits for it."""
    from azjax import loop
    from azjax.checkpoint import Checkpointer

    writing = []  # the saves the loop has not waited for: on disk, but not known to be
    saves = []  # every save the loop made
    save, wait = Checkpointer.save, Checkpointer.wait

    def slow_save(self, iteration, *args, **kwargs):
        save(self, iteration, *args, **kwargs)
        saves.append(iteration)
        writing.append(iteration)

    def waited(self):
        wait(self)
        writing.clear()

    monkeypatch.setattr(Checkpointer, "save", slow_save)
    monkeypatch.setattr(Checkpointer, "wait", waited)
    monkeypatch.setattr(Checkpointer, "committed", lambda self: not writing)
    behind = []

    def done(it, values):  # what a kill now would lose: the iterations since the last save
        saved = [s for s in saves if s not in writing]  # the saves made, not those due
        behind.append(it - max(saved, default=0))

    argv = [a for a in TOY if not a.startswith("--checkpoint")] + ["--iterations=7"]
    config, _ = train.parse(argv + [f"--checkpoint_interval={interval}"])
    loop.train_and_evaluate(config, str(tmp_path / "run"), progress=False, on_iteration=done)
    assert behind and max(behind) <= interval
    assert saves == [*range(interval, 7, interval), 7]  # every interval, and the last


def test_a_checkpoint_without_its_config_names_an_older_one(stopped_run, tmp_path, capsys):
    """An empty step folder, or one that lost its config, said only 'cannot read the config of
    checkpoint N': other corrupt checkpoints name the newest older one that can be read."""
    workdir = str(tmp_path / "run")
    shutil.copytree(stopped_run[0], workdir)
    *_, before, last = checkpoint.steps(workdir)
    shutil.rmtree(os.path.join(workdir, "checkpoints", str(last), "config"))
    hint = f"checkpoint {before}'s can: --resume_step={before} continues from it"
    _fails(capsys, train.main, [f"--workdir={workdir}", "--resume"], hint, f"{workdir}@{before}")


def test_keep_checkpoints_keeps_the_newest_and_steps_sort_as_numbers(tmp_path):
    """--keep_checkpoints=2 keeps the newest two (no test saved with it: pruning was untested),
    and the steps are numbers, 2 before 10 (every fixture had steps 1 and 2, which sort alike as
    text); a missing step between two kept ones is not 'older than its oldest'."""
    from azjax.checkpoint import Checkpointer

    workdir = str(tmp_path / "run")
    saver = Checkpointer(workdir, keep=2)
    config = cfg.load("tictactoe")
    for step in (2, 4, 10):
        saver.save(step, {"x": np.zeros(2)}, config)
        saver.wait()
    saver.close()
    assert checkpoint.steps_on_disk(workdir) == [4, 10]
    assert checkpoint.missing_step_hint(workdir, 2).startswith(" (older than its oldest, 4")
    assert checkpoint.missing_step_hint(workdir, 7) == ""  # the config's interval is 10: unsaved


def test_a_step_pruned_between_two_kept_ones_is_named_removed(tmp_path):
    """A step --keep_checkpoints removed between the protected @best and the newest got no hint
    (only steps older than the oldest kept did): one saved by the run's interval now reads
    'removed'; one off the interval, which the run never saved, still gets none."""
    from azjax.checkpoint import Checkpointer

    workdir = str(tmp_path / "run")
    config = dataclasses.replace(cfg.load("tictactoe"), checkpoint_interval=2, keep_checkpoints=1)
    saver = Checkpointer(workdir, keep=1, protect=lambda: [2])
    for step in (2, 4, 6):
        saver.save(step, {"x": np.zeros(2)}, config)
        saver.wait()
    saver.close()
    assert checkpoint.steps_on_disk(workdir) == [2, 6]
    hint = checkpoint.missing_step_hint(workdir, 4)
    assert hint == " (removed: the run keeps only its newest 1 checkpoints and its @best, " + (
        "--keep_checkpoints)"
    )
    assert checkpoint.missing_step_hint(workdir, 5) == ""
    with pytest.raises(checkpoint.CheckpointError, match=r"no checkpoint 4 .*\(removed: the run"):
        checkpoint.load_checkpoint(workdir, 4)


def test_keep_checkpoints_keeps_the_best_however_old(tmp_path):
    """--keep_checkpoints=2 keeps the newest two and the step `@best` names: a run whose best
    network came early, its later ones worse, kept it (before session 119 it was removed like
    any other, and @best named the best of the newest)."""
    from azjax import loop
    from azjax.checkpoint import Checkpointer, best_checkpoint

    workdir = str(tmp_path / "run")
    config = dataclasses.replace(cfg.load("tictactoe"), eval_interval=2, keep_checkpoints=2)
    os.makedirs(workdir)
    with open(os.path.join(workdir, "config.json"), "w") as f:
        f.write(config.to_json())
    saver = Checkpointer(workdir, keep=2, protect=lambda: loop._best_steps(workdir, config))
    errors = {2: 0.3, 4: 0.1, 6: 0.25, 8: 0.3, 10: 0.35}
    for step, error in errors.items():
        saver.save(step, {"x": np.zeros(2)}, config)
        saver.wait()  # the loop writes a step's row once its checkpoint is on disk
        with open(os.path.join(workdir, "metrics.jsonl"), "a") as f:
            f.write(json.dumps({"iteration": step, "eval/error_rate": error}) + "\n")
    saver.close()
    assert checkpoint.steps_on_disk(workdir) == [4, 8, 10]
    assert best_checkpoint(workdir).step == 4
    kept = Checkpointer(workdir, keep=1, protect=lambda: {8})  # a later session keeps fewer
    kept.save(12, {"x": np.zeros(2)}, config)
    kept.wait()
    kept.close()
    assert checkpoint.steps_on_disk(workdir) == [8, 12]
