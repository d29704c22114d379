"""The toy run the tests train: Tic-Tac-Toe with a 1-block, 4-filter network, 8 games an
iteration, 4 simulations a move and 2 learner steps, no evaluation; a few seconds an iteration."""

import json
import os

from azjax.commands import evaluate, train

TTT_RUN = [
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
]


def train_resume_and_play(tmp_path, *flags: str) -> tuple[str, list[dict]]:
    """A toy run with `flags` for one iteration, resumed for a second, whose checkpoint then
    plays a match against random: (its folder, its metrics rows). Each step must succeed."""
    workdir = str(tmp_path / "run")
    argv = [*TTT_RUN, *flags, "--checkpoint_interval=1", f"--workdir={workdir}"]
    assert train.main([*argv, "--iterations=1"]) == 0
    assert train.main([f"--workdir={workdir}", "--resume", "--iterations=2", "--no_progress"]) == 0
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    assert [r["iteration"] for r in rows] == [1, 2]
    match = ["match", f"ckpt:{workdir},sims=2", "random", "--games=2", f"--out={tmp_path / 'm'}"]
    assert evaluate.main(match) == 0
    return workdir, rows
