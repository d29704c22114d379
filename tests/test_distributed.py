"""Multi-host training on one machine: two `train.py --distributed` processes on localhost.

Each process owns one CPU device; JAX's CPU backend does the cross-process collectives through
gloo (`jax_cpu_collectives_implementation`, set by `azjax.parallel.initialize`). The two processes
share one workdir, as hosts sharing a file system would: process 0 writes the metrics and the
summary, both take part in the orbax checkpoint.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from xla_flags import with_host_devices

from azjax import checkpoint
from azjax.checkpoint import best_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY = [
    "--game=tictactoe",
    "--batch_games=4",
    "--num_simulations=4",
    "--num_blocks=1",
    "--num_filters=4",
    "--value_hidden=4",
    "--selfplay_steps=9",
    "--replay_games=8",
    "--train_batch_size=4",
    "--train_steps=2",
    "--min_replay=1",
    "--eval_interval=1",
    "--eval_games=2",
    "--eval_ladder=false",  # the ladder placement has its own tests (test_ladder.py)
    "--checkpoint_interval=1",
    "--iterations=1",
    "--no_progress",
]
TIMEOUT = 300  # seconds; two compiles on a shared 2-core machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes(command, code: int = 0) -> list[tuple[str, str]]:
    """(stdout, stderr) of `command(port, process_id)` run as processes 0 and 1 side by side,
    each of which must exit with `code`."""
    port = _free_port()
    env = dict(os.environ, XLA_FLAGS=with_host_devices())  # the suite's, one device each
    env["JAX_PLATFORMS"] = "cpu"
    procs = [
        subprocess.Popen(
            command(port, i),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=TIMEOUT))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"the two processes did not finish in {TIMEOUT} s")
    for i, (p, (_, err)) in enumerate(zip(procs, outputs)):
        assert p.returncode == code, f"process {i} exited {p.returncode}:\n{err[-3000:]}"
    return outputs


def _train(workdir: str, *more: str, code: int = 0, each=lambda i: []) -> list[tuple[str, str]]:
    """Both processes' (stdout, stderr) of a training run; `each(process_id)`: its own flags."""
    return _two_processes(
        lambda port, i: [
            sys.executable,
            "train.py",
            "--distributed",
            f"--coordinator=127.0.0.1:{port}",
            "--num_processes=2",
            f"--process_id={i}",
            f"--workdir={workdir}",
            "--json",
            *TOY,
            *more,
            *each(i),
        ],
        code,
    )


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    """(workdir, the two processes' (stdout, stderr)) of one iteration over two processes."""
    workdir = str(tmp_path_factory.mktemp("distributed") / "run")
    return workdir, _train(workdir)


def test_two_processes_on_localhost_complete_a_training_iteration(two_process_run):
    workdir, outputs = two_process_run

    summary = json.loads(outputs[0][0][outputs[0][0].index("{") :])  # process 0 prints it
    assert summary["processes"] == 2 and summary["devices"] == 2 and summary["iterations"] == 1
    assert '"iterations"' not in outputs[1][0]  # process 1 prints no summary (gloo says hello)
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    assert [r["iteration"] for r in rows] == [1]  # written once, by process 0
    assert "loss/total" in rows[0]
    assert sum(rows[0]["eval/mcts_wdl"]) == 2  # --eval_games=2, played once over both processes
    assert os.path.isdir(os.path.join(workdir, "checkpoints", "1", "state"))
    assert os.path.exists(os.path.join(workdir, "summary.json"))


def test_two_processes_resume_and_go_back_to_a_checkpoint(two_process_run):
    # Only process 0 read the metrics saved with the checkpoint, and orbax's restore waits for
    # every process: the resume hung. Going back, only process 0 set the later checkpoints
    # aside; process 1's manager still listed them and skipped saving them again, and process 0
    # waited for it at the save.
    workdir, _ = two_process_run
    # the replay buffer, split over both processes' devices, is saved and restored as a whole:
    # checkpoint 1's (the newest), then none once checkpoint 2's replaced it
    resumed = _train(workdir, "--resume", "--iterations=2")
    assert not any("replay buffer starts empty" in err for _, err in resumed)
    assert not os.path.isdir(os.path.join(workdir, "checkpoints", "1", "replay"))
    back = _train(workdir, "--resume_step=1", "--iterations=2")
    assert "the replay buffer starts empty: checkpoint 1 holds no replay buffer" in back[0][1]
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["1", "2"]
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        assert [json.loads(line)["iteration"] for line in f] == [1, 2]
    # --keep_checkpoints: process 0 names the steps to remove (the newest and @best kept), both
    # remove them (orbax's delete waits for every process)
    # (the error rate's @best among 1 - 3 as 4 was saved: 4's row was not yet written)
    _train(workdir, "--resume", "--iterations=4", "--keep_checkpoints=1")
    kept = checkpoint.steps_on_disk(workdir)
    assert len(kept) == 2 and kept[1] == 4 and best_checkpoint(workdir).step in kept


def test_processes_started_differently_both_stop_with_one_line(tmp_path):
    """Another batch size crashed in gloo (a collective of another size); a process resuming
    beside one that did not printed its error and hung, the other waiting for it forever."""
    outputs = _train(
        str(tmp_path / "run"),
        code=2,
        each=lambda i: ["--batch_games=8", "--resume"] if i else [],
    )
    for _, err in outputs:
        said = [line for line in err.splitlines() if "error:" in line]
        assert said == [
            "train.py: error: --distributed: the processes differ in --batch_games, --resume; "
            "start every process with the same flags"
        ], err[-2000:]


FETCH = """
import sys
from azjax import parallel
parallel.initialize(sys.argv[1], 2, int(sys.argv[2]))
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P
mesh = parallel.make_mesh()
split = jax.jit(lambda: jnp.arange(6.0), out_shardings=parallel.sharding(mesh, P(parallel.AXIS)))
whole = jax.jit(lambda: jnp.arange(3), out_shardings=parallel.replicated(mesh))
got = parallel.fetch({"split": split(), "whole": whole()})
print({k: v.tolist() for k, v in got.items()}, jax.config.jax_enable_compilation_cache)
"""


def test_fetch_gathers_an_array_split_over_two_processes_on_each():
    # and `initialize` turned the persistent compilation cache off: with jax 0.12 a program with
    # collectives hangs in every process once loaded from it (the resume test above then hung)
    outputs = _two_processes(
        lambda port, i: [sys.executable, "-c", FETCH, f"127.0.0.1:{port}", str(i)]
    )
    for out, _ in outputs:
        assert (
            out.strip().splitlines()[-1]
            == str({"split": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], "whole": [0, 1, 2]}) + " False"
        )


def test_process_flags_without_distributed_are_refused(capsys):
    sys.path.insert(0, ROOT)
    from azjax.commands import train

    for bad in ("localhost", "localhost:abc", ":8476", "host:0"):  # before JAX starts
        argv = ["--game=tictactoe", "--distributed", f"--coordinator={bad}", "--num_processes=2"]
        assert train.main([*argv, "--process_id=0"]) == 2
        assert f"--coordinator must be HOST:PORT (port 1-65535), got {bad!r}" in (
            capsys.readouterr().err
        )

    assert train.main(["--game=tictactoe", "--num_processes=2"]) == 2
    assert "--num_processes only makes sense with --distributed" in capsys.readouterr().err
    for flag, message in [
        ("--num_processes=0", "--num_processes must be >= 1, got 0"),
        ("--process_id=-1", "--process_id must be in [0, --num_processes - 1] (0-based), got -1"),
    ]:
        assert train.main(["--game=tictactoe", "--distributed", flag]) == 2
        assert message in capsys.readouterr().err
    assert train.main(["--game=tictactoe", "--distributed", "--num_processes=2", "--process_id=2"])
    assert "got 2" in capsys.readouterr().err  # 0-based: 2 processes are 0 and 1
