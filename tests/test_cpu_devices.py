"""`train.py --cpu_devices` and `evaluate.py --cpu_devices`: a CPU split into one JAX device per
core (`parallel.split_cpu`).

The device count must be set before JAX starts, so the runs are subprocesses (Tic-Tac-Toe, toy
sizes); in the pytest process JAX has started, which the in-process checks rely on.
"""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from toy import TTT_RUN
from xla_flags import with_host_devices

import games
from azjax import parallel
from azjax.commands import evaluate, train
from azjax.solved import ILLEGAL, load_set

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY = [*TTT_RUN, "--json"]


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


def _run(*argv):
    """A script of the repository root as a process whose CPU devices are its flags' to set."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=with_host_devices())  # no forced count
    env.pop("JAX_NUM_CPU_DEVICES", None)
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _train(workdir, *args):
    out = _run("train.py", *TOY, f"--workdir={workdir}", *args)
    return json.loads(out[out.index("{") :])


def test_training_splits_the_cpu_and_resumes_on_another_count(tmp_path):
    # from the empty board (no random openings), each of the 8 games finishes once an iteration
    first = _train(tmp_path, "--iterations=1", "--cpu_devices=auto", "--opening_plies=0")
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
        ("100000", "--cpu_devices=100000: at most"),  # XLA would make them all, and hang
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


def test_evaluate_refuses_a_bad_count_in_one_line(tmp_path, capsys):
    argv = ["match", "random", "random", "--game=tictactoe", "--games=4", f"--out={tmp_path}"]
    assert evaluate.main(argv + ["--cpu_devices=0"]) == 2
    err = capsys.readouterr().err
    assert "--cpu_devices must be auto or a whole number >= 1, got '0'" in err
    assert "Traceback" not in err and not os.listdir(tmp_path)  # nothing played or written


def test_evaluation_splits_its_games_and_positions_over_the_devices(tmp_path):
    # three devices: six games split into halves over them, two each (one with each colour)
    out = _run(
        "evaluate.py", "match", "random", "mcts:sims=4", "--game=tictactoe", "--games=6",
        "--cpu_devices=3", f"--out={tmp_path / 'match'}",
    )  # fmt: skip
    assert "games split over 3 devices" in out
    with open(tmp_path / "match" / "match.json") as f:
        record = json.load(f)
    assert record["devices"] == 3 and record["result"]["overall"]["games"] == 6
    assert [g["a_played"] for g in record["game_records"]] == ["black"] * 3 + ["white"] * 3
    # Connect Four's 1,010 positions: the last device's share filled up with a copy, dropped
    _run(
        "evaluate.py", "errors", "random", "--game=connect_four", "--cpu_devices=3",
        f"--out={tmp_path / 'errors'}",
    )  # fmt: skip
    with open(tmp_path / "errors" / "errors.json") as f:
        record = json.load(f)
    solved = load_set(games.make("connect_four"))
    moves = np.asarray(record["agents"][0]["moves"])
    assert record["devices"] == 3 and moves.shape == (len(solved),)
    # each random move is legal in its own position: the positions came back in their order
    assert (solved.values[np.arange(len(solved)), moves] != ILLEGAL).all()


PLAYOUT = """
from azjax import parallel
parallel.split_cpu(2)
import jax, numpy as np, games
from azjax.search import SearchSpec
from azjax.selfplay import init_states, make_selfplay
hex4 = games.make("hex", size=4)
options = dict(resign_threshold=0.3, resign_playout=0.25, mesh=parallel.make_mesh())
play = jax.jit(make_selfplay(hex4, SearchSpec.pure_mcts(16, explore=True), None, 16, 2, **options))
_, traj = jax.device_get(play(None, jax.random.PRNGKey(5), init_states(hex4, 8)))
print(traj.resigned.sum(0).tolist())
print(((traj.root_value < -0.3) & ~traj.done).sum(0).tolist())
"""


def test_the_played_out_share_is_of_the_whole_batch_over_devices():
    """The play-out slots were the first ceil(share * b) of each device's b games: 2 of 8 over one
    device, 2 over two (slots 0 and 4), and with one game a device none resigned at all."""
    resigned, low = (json.loads(line) for line in _run("-c", PLAYOUT).strip().splitlines()[-2:])
    # slots 0 and 1, a quarter of the 8, play out (their movers were low, and went on); the others
    # resign, device 1's first slot (4) among them: it no longer plays out
    assert resigned[:2] == [0, 0] and low[0] + low[1] > 0 and resigned[4] > 0
