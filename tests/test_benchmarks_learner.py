"""benchmarks.learner's loop mode: the training loop's learner with a game's CPU recipe on two CPU
devices (in a process of its own: the devices are made before JAX starts), and its bad input."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*flags, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.learner", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_times_the_loops_learner_on_two_cpu_devices():
    out = _run(
        "--game=hex",
        "--size=3",
        "--train_steps=2",
        "--train_batch_size=16",
        "--repeats=1",
        "--loop_devices=2",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    head, line = out.stdout.strip().splitlines()[-2:]
    assert "the CPU recipe's learner" in head and "on 2 CPU device(s)" in head
    assert int(head.split(", ")[-1].split()[0]) >= 16  # positions ready before learning
    assert line.startswith("loop's learner: first call") and "ms a step" in line


def test_refuses_a_batch_the_devices_do_not_divide_and_a_bad_count():
    out = _run("--game=hex", "--size=3", "--train_batch_size=18", "--loop_devices=4", timeout=120)
    assert out.returncode == 2 and "--train_batch_size=18 does not divide" in out.stderr, (
        out.stderr[-2000:]
    )
    out = _run("--loop_devices=-1", timeout=120)
    assert out.returncode == 2 and "--loop_devices must be 0 or more" in out.stderr
    out = _run("--train_steps=0", timeout=120)  # it divided by zero
    assert out.returncode == 2 and "--train_steps must be at least 1" in out.stderr


def test_names_what_is_wrong_with_the_game_its_size_and_the_recipes_games():
    out = _run("--game=tictactoe", "--size=5", timeout=120)  # listed every config field
    assert out.returncode == 2
    prefix, message = out.stderr.strip().split(": error: ")
    assert prefix == "python -m benchmarks.learner"
    assert message == "--size is not an option of tictactoe; its options: none"
    out = _run("--loop_devices=3", timeout=120)  # named --batch_games, no flag here
    assert out.returncode == 2, out.stderr[-2000:]
    assert "--loop_devices=3: the CPU recipe's 128 games an iteration do not divide" in out.stderr
