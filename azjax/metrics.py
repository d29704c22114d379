"""What a training run shows and records: metrics.jsonl, TensorBoard events and a progress bar.

    metrics = Metrics(workdir)           # <workdir>/metrics.jsonl and <workdir>/tb/
    metrics.write(iteration, values)     # one JSON line; scalars to TensorBoard
    bar = Progress(enabled, start, total)
    bar.update(values)

Progress bar fields: games/s and pos/s of self-play; `v` and `p` the value and policy losses;
`vs_mcts` and `vs_prev` the scores of the last evaluation against pure MCTS and the previous
network.
"""

from __future__ import annotations

import json
import os
from typing import Any


class Metrics:
    """JSON lines and TensorBoard events in the workdir (TensorBoard if tensorboardX is present)."""

    def __init__(self, workdir: str):
        self.file = open(os.path.join(workdir, "metrics.jsonl"), "a")
        try:
            from tensorboardX import SummaryWriter

            self.tb = SummaryWriter(os.path.join(workdir, "tb"))
        except ImportError:  # pragma: no cover - tensorboardX is a dependency
            self.tb = None

    def write(self, iteration: int, values: dict[str, Any]) -> None:
        self.file.write(json.dumps({"iteration": iteration, **values}) + "\n")
        self.file.flush()
        if self.tb is not None:
            for k, v in values.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.tb.add_scalar(k, v, iteration)

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()


class Progress:
    """A tqdm bar with games/s, positions/s and losses (or nothing when disabled)."""

    def __init__(self, enabled: bool, start: int, total: int):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, unit="it", dynamic_ncols=True)

    def update(self, values: dict[str, Any]) -> None:
        if self.bar is None:
            return
        post = {"games/s": f"{values['games_per_second']:.1f}",
                "pos/s": f"{values['positions_per_second']:.0f}"}
        if "loss/total" in values:
            post.update(v=f"{values['loss/value']:.3f}", p=f"{values['loss/policy']:.3f}")
        if "eval/mcts_score" in values:
            post.update(vs_mcts=f"{values['eval/mcts_score']:.2f}",
                        vs_prev=f"{values['eval/previous_score']:.2f}")
        self.bar.set_postfix(post)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
