"""`train.py --cpu_devices`: a CPU split into one JAX device per core (`parallel.split_cpu`).

The device count must be set before JAX starts, so the runs are subprocesses (Tic-Tac-Toe, toy
sizes); in the pytest process JAX has started, which the in-process checks rely on.
"""

import json
import os
import subprocess
import sys

import jax
import pytest
from xla_flags import with_host_devices

from azjax import parallel
from azjax.commands import train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY = [
    "--game=tictactoe",
    "--batch_games=8",
    "--num_simulations=4",
    "--num_blocks=1",
    "--num_filters=4",
    "--value_hidden=4",
    "--train_steps=2",
    "--train_batch_size=16",
    "--eval_interval=0",
    "--no_progress",
    "--json",
]


@pytest.mark.parametrize(
    "sizes, cpus, expected",
    [
        ((128, 256), 2, 2),  # the CPU recipe on this project's 2-core machines
        ((128, 256), 6, 4),  # 6 and 5 do not divide 128
        ((128, 256), 1, 1),
        ((15, 256), 2, 1),  # an odd batch stays on one device
        ((96, 48), 16, 16),
        ((96, 48), 64, 48),
    ],
)
def test_the_most_devices_that_every_size_divides_over(sizes, cpus, expected):
    assert parallel.cpu_device_count(*sizes, cpus=cpus) == expected


def test_at_most_one_device_per_usable_cpu():
    assert parallel.cpu_device_count(1 << 20) == min(parallel.usable_cpus(), 1 << 20)
    assert 1 <= parallel.usable_cpus() <= (os.cpu_count() or 1)


def _train(workdir, *args):
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=with_host_devices())  # no forced count
    env.pop("JAX_NUM_CPU_DEVICES", None)
    done = subprocess.run(
        [sys.executable, "train.py", *TOY, f"--workdir={workdir}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout[done.stdout.index("{") :])


def test_training_splits_the_cpu_and_resumes_on_another_count(tmp_path):
    first = _train(tmp_path, "--iterations=1", "--cpu_devices=auto")
    auto = parallel.cpu_device_count(8, 16)  # the most usable CPUs that 8 and 16 games divide over
    assert (first["devices"], first["iterations"], first["games"]) == (auto, 1, 8)
    # the checkpoint restores onto another count of devices, and training goes on
    other = 1 if auto > 1 else 2
    second = _train(tmp_path, "--resume", "--iterations=2", f"--cpu_devices={other}")
    assert (second["devices"], second["iterations"]) == (other, 2)
    third = _train(tmp_path, "--resume", "--iterations=3")  # unset: JAX's own, one device
    assert (third["devices"], third["iterations"]) == (1, 3)


@pytest.mark.parametrize(
    "value, needle",
    [
        ("0", "--cpu_devices must be auto or a whole number >= 1, got '0'"),
        ("two", "--cpu_devices must be auto or a whole number >= 1, got 'two'"),
        (None, "JAX has already started in this process with"),  # another count than it has
    ],
)
def test_a_bad_or_late_count_is_one_line(tmp_path, capsys, value, needle):
    # JAX has started in this process (jax.devices below, if not before): its devices are fixed
    value = str(len(jax.devices("cpu")) * 2) if value is None else value
    argv = TOY + [f"--workdir={tmp_path}", "--iterations=1", f"--cpu_devices={value}"]
    assert train.main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
