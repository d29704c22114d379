"""What a training run shows and records: metrics.jsonl, TensorBoard events and a progress bar.

    metrics = Metrics(workdir, resume_from=None)   # <workdir>/metrics.jsonl and <workdir>/tb/
    metrics.add(iteration, values)                  # held until its checkpoint is on disk
    metrics.commit(upto=12)                         # checkpoint 12 is saved: write its rows
    bar = Progress(enabled, start, total)
    bar.update(values)

metrics.jsonl agrees with the checkpoints: a row is written only once the checkpoint of its
iteration (or a later one) is on disk, so a crash never leaves rows the run will play again. A new
run (`resume_from=None`) starts a new file; a resumed one cuts the file back to the iteration it
resumes (dropping a torn last line), and tb/ is written afresh from the rows kept, so that every
reader of TensorBoard's events sees what metrics.jsonl holds (TensorBoard's `purge_step` hid a
resumed run's later events from its Python loader only, not from its Rust data server or
`summary_iterator`, and rows filled in from the checkpoint were logged twice).

Progress bar fields: games/s and pos/s of self-play; `v` and `p` the value and policy losses;
`vs_mcts` and `vs_prev` the scores of the last evaluation against pure MCTS and the previous
network; `vs_opp` the score against `--eval_opponent` (`azjax.eval.opponent`); with
`--gating`, `plays` the iteration whose network plays self-play (0: the untrained one) and `gate`
the gates passed out of those held (`azjax.gating`).
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

FILE = "metrics.jsonl"


# what a row logs of the time its iteration took (rows from before `run_seconds` was logged)
ROW_SECONDS = ("selfplay_seconds", "train_seconds", "eval_seconds", "gate_seconds")


def run_seconds(rows: list[dict[str, Any]]) -> list[float]:
    """The run's seconds of training up to each row, every session's: the row's `run_seconds`
    (the loop's clock), or for rows logged before it was, the seconds the rows log so far (a
    little under the wall time: the compilation outside the first iteration and waits for
    checkpoints are left out)."""
    total, out = 0.0, []
    for row in rows:
        total += sum(float(row.get(k, 0.0)) for k in ROW_SECONDS)
        total = float(row.get("run_seconds", total))
        out.append(total)
    return out


def read_rows(path: str) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl ([] if it is missing). A torn last line (a crash while it was
    written) is dropped; any other line that is not a JSON object is a ValueError naming the file
    and line. Where a crashed run wrote an iteration twice, the later row is kept."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    rows: dict[int, dict] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row.get("iteration"), int):
                raise ValueError("not a row")
        except ValueError:
            if number == len(lines):  # no newline after it: a torn last line
                continue
            raise ValueError(f"{path}, line {number}: not a metrics row: {line[:60]!r}") from None
        if row["iteration"] in rows or (rows and row["iteration"] < max(rows)):
            rows = {k: v for k, v in rows.items() if k < row["iteration"]}  # a resumed session
        rows[row["iteration"]] = row
    return [rows[k] for k in sorted(rows)]


class Metrics:
    """JSON lines and TensorBoard events in the workdir (TensorBoard if tensorboardX is present).

    `resume_from`: None for a new run (an old metrics.jsonl and tb/ are replaced), else the
    iteration the run resumes from (later rows are cut off, and `saved_rows`, those its
    checkpoint holds, fill in what the file lacks). `rows` are the rows kept."""

    def __init__(
        self, workdir: str, resume_from: int | None = None, saved_rows: list[dict] | None = None
    ):
        self.path = os.path.join(workdir, FILE)
        tb_dir = os.path.join(workdir, "tb")
        if resume_from is None:
            self.rows = []
        else:
            self.rows = [r for r in read_rows(self.path) if r["iteration"] <= resume_from]
            have = {r["iteration"] for r in self.rows}
            filled = [
                r
                for r in saved_rows or []
                if r["iteration"] not in have and r["iteration"] <= resume_from
            ]
            self.rows = sorted(self.rows + filled, key=lambda r: r["iteration"])
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in self.rows)
        os.replace(tmp, self.path)
        self.file = open(self.path, "a", encoding="utf-8")
        self.pending: list[tuple[int, dict[str, Any]]] = []
        try:
            import tensorboardX  # noqa: F401 (a dependency; without it tb/ is left as it is)
        except ImportError:  # pragma: no cover
            self.tb = None
        else:
            shutil.rmtree(tb_dir, ignore_errors=True)  # a new run's, or the rows kept (module doc)
            self.tb = _synchronous_writer(tb_dir)
        for row in self.rows:
            self._scalars(row["iteration"], row)
        if self.tb is not None and self.rows:
            self.tb.flush()

    def text(self, name: str, text: str) -> None:
        """A text on TensorBoard's Text tab (the run's settings); nothing without TensorBoard."""
        if self.tb is not None:
            self.tb.add_text(name, f"```\n{text}\n```", 0)

    def add(self, iteration: int, values: dict[str, Any]) -> None:
        """Hold a row until `commit`."""
        self.pending.append((iteration, values))

    def commit(self, upto: int | None) -> None:
        """Write the rows held up to iteration `upto`: its checkpoint is on disk."""
        if upto is None:
            return
        rows = [(i, v) for i, v in self.pending if i <= upto]
        self.pending = [(i, v) for i, v in self.pending if i > upto]
        if not rows:
            return
        for iteration, values in rows:  # TensorBoard's first (a resume writes tb/ afresh)
            self._scalars(iteration, values)
        if self.tb is not None:
            self.tb.flush()
        for iteration, values in rows:
            row = {"iteration": iteration, **values}
            self.file.write(json.dumps(row) + "\n")
            self.rows.append(row)
        self.file.flush()
        os.fsync(self.file.fileno())

    def _scalars(self, iteration: int, values: dict[str, Any]) -> None:
        if self.tb is not None:
            for k, v in values.items():
                if k != "iteration" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.tb.add_scalar(k, v, iteration)

    def held(self) -> list[dict]:
        """The rows held, as they will be written."""
        return [{"iteration": i, **v} for i, v in self.pending]

    def total(self, name: str) -> int:
        """The sum of `name` over the rows written (all sessions of the run)."""
        return sum(r.get(name, 0) for r in self.rows)

    def close(self) -> None:
        """Close the files; rows still held (no checkpoint holds them) are dropped."""
        self.pending.clear()
        self.file.close()
        if self.tb is not None:
            self.tb.close()


def _synchronous_writer(tb_dir: str):
    """A tensorboardX SummaryWriter whose events are written when added, so that its `flush`
    puts every one on disk: tensorboardX queues them for a thread, and its flush writes only what
    that thread has taken (a kill could lose the rest of a row metrics.jsonl then holds)."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(tb_dir)
    files = writer._get_file_writer()
    events = files.event_writer  # EventFileWriter: its queue, and the EventsWriter under it
    events.add_event = events._ev_writer.write_event  # under a lock; the thread gets nothing
    return writer


class MoveTicker:
    """Self-play's moves within an iteration on the progress bar: called from inside the jitted
    scan (`jax.debug.callback`) with the move's index; shows nothing until `progress` is set."""

    def __init__(self, total: int):
        self.total = total
        self.progress: Progress | None = None

    def __call__(self, t) -> None:
        if self.progress is not None:
            self.progress.moved(int(t) + 1, self.total)


def elo_shown(values: dict[str, Any]) -> str:
    """The ladder rating on the progress bar: ">TOP" above the ladder (every game won against
    its top rung), the rating with an arrow where it had not settled (still climbing or falling:
    `azjax.ladder.moving`), else the rating."""
    top = values.get("eval/elo_top")
    if values.get("eval/elo_off_scale", 0) > 0 and top is not None:
        return f">{top:.0f}"
    arrow = {1: "↑", -1: "↓"}.get(values.get("eval/elo_moving", 0), "")
    return f"{values['eval/elo']:.0f}{arrow}"


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
        post = {
            "games/s": f"{values['games_per_second']:.1f}",
            "pos/s": f"{values['positions_per_second']:.0f}",
        }
        if "loss/total" in values:
            post.update(
                value_loss=f"{values['loss/value']:.3f}",
                policy_loss=f"{values['loss/policy']:.3f}",
            )
        if "eval/mcts_score" in values:
            post.update(
                vs_mcts=f"{values['eval/mcts_score']:.2f}",
                vs_prev=f"{values['eval/previous_score']:.2f}",
            )
        if "eval/opponent_score" in values:
            post.update(vs_opp=f"{values['eval/opponent_score']:.2f}")
        if "eval/elo" in values:
            post.update(elo=elo_shown(values))
        if "eval/error_rate" in values:
            post.update(errors=f"{values['eval/error_rate']:.3f}")
        if "gate/best_iteration" in values:
            post.update(
                plays=f"it{values['gate/best_iteration']}",
                gate=f"{values['gate/accepted_total']}/{values['gate/gates']}",
            )
        self.bar.set_description_str("", refresh=False)
        self.bar.set_postfix(post)
        self.bar.update(1)

    def moved(self, done: int, total: int) -> None:
        """Show `done` of the iteration's `total` self-play moves."""
        if self.bar is not None:
            self.bar.set_description_str(f"move {done}/{total}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
