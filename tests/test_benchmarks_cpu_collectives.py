"""benchmarks.cpu_collectives: two CPU devices' calls with collectives, each waited for (a few
seconds, in a process of its own: the devices are made before JAX starts)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_calls_waited_for_one_by_one_all_return():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.cpu_collectives", "--mode=wait", "--seconds=2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("wait: ") and "calls with collectives on two CPU devices in 2 s" in line
    assert int(line.split()[1]) >= 200


@pytest.mark.parametrize("seconds", ["0", "nan"])
def test_rejects_a_bad_duration(seconds):
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.cpu_collectives", f"--seconds={seconds}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "python -m benchmarks.cpu_collectives: error: --seconds must be positive and finite, "
        f"got {float(seconds)}"
    ]  # one line, no usage block
