"""A machine's first training run to its first evaluation, with the evaluation's programs compiled
ahead (`--eval_compile_ahead`) and without, in turns, the compilation cache off.

    python -m benchmarks.first_evaluation                       # the README's Tic-Tac-Toe run
    python -m benchmarks.first_evaluation --game=hex --size=9   # 9x9 Hex (on a GPU: the check)
    python -m benchmarks.first_evaluation --rounds=2 -- --batch_games=256   # more train.py flags

Each run is `azjax-train --iterations=N --eval_interval=N` (one evaluation, at its last iteration)
in a process of its own with `JAX_COMPILATION_CACHE_DIR=` (nothing from an earlier run's cache),
the modes one after the other, `--rounds` times. One row per run: wall seconds, self-play,
learning, the evaluation and its share of the wall time, the games and the ladder placement. The
runs share a seed, so on one machine they play the same games and the rows compare; another
machine may play others (GPU kernels are chosen by timing them). The first evaluation is the one
whose programs are all compiled in it, on a machine's first run: see docs/benchmarks.md,
"Compiling the evaluation ahead".
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time

MODES = ("auto", "on", "off")


def run_once(flags: list[str], workdir: str) -> dict:
    """One `azjax-train` run with `flags` into `workdir`: {"wall", "selfplay", "learning", "eval",
    "games", "elo"} from its metrics.jsonl; RuntimeError with the end of its output if it fails."""
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR="", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "azjax.commands.train", *flags, f"--workdir={workdir}"]
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return dict(wall=wall, **summarize(os.path.join(workdir, "metrics.jsonl")))


def summarize(path: str) -> dict:
    """{"selfplay", "learning", "eval" (seconds), "games", "elo" (the last placement, or None)}
    of the run whose metrics.jsonl is `path`."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    elo = [r["eval/elo"] for r in rows if "eval/elo" in r]
    return dict(
        selfplay=sum(r.get("selfplay_seconds", 0.0) for r in rows),
        learning=sum(r.get("train_seconds", 0.0) for r in rows),
        eval=sum(r.get("eval_seconds", 0.0) for r in rows),
        games=sum(r.get("games", 0) for r in rows),
        elo=elo[-1] if elo else None,
    )


def table_row(mode: str, r: dict) -> str:
    elo = "-" if r["elo"] is None else f"{r['elo']:+.1f}"
    return (
        f"| {mode} | {r['wall']:.1f} | {r['selfplay']:.1f} | {r['learning']:.1f} | "
        f"{r['eval']:.1f} | {100 * r['eval'] / r['wall']:.0f}% | {r['games']:,} | {elo} |"
    )


def main(argv: list[str] | None = None) -> int:
    from azjax.flags import Parser, names

    parser = Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--game", default="tictactoe")
    parser.add_argument("--size", type=int, default=None, help="board size (games that have one)")
    parser.add_argument("--iterations", type=int, default=10, help="the evaluation's iteration")
    parser.add_argument("--modes", default="off,auto", help=f"of {', '.join(MODES)}, in turns")
    parser.add_argument("--rounds", type=int, default=1, help="times each mode runs")
    parser.add_argument("train_flags", nargs="*", help="more azjax-train flags, after --")
    args = parser.parse_args(argv)
    try:
        modes = names(args.modes, "--modes", MODES)
    except ValueError as e:
        parser.error(str(e))
    if args.iterations < 1 or args.rounds < 1:
        parser.error(
            f"--iterations and --rounds must be >= 1, got {args.iterations} and {args.rounds}"
        )
    flags = [f"--game={args.game}", f"--iterations={args.iterations}"]
    flags += [f"--size={args.size}"] if args.size is not None else []
    flags += [f"--eval_interval={args.iterations}", "--no_progress", *args.train_flags]
    from azjax.commands import train  # its flags checked here, in one line, before any run

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            train.parse([*flags, "--eval_compile_ahead=auto"])
    except SystemExit:
        parser.error(f"azjax-train {said.getvalue().strip().partition(' error: ')[2]}")
    print(f"# azjax-train {' '.join(flags)}, the compilation cache off")
    print(
        "| --eval_compile_ahead | wall s | self-play s | learning s | evaluation s | share "
        "| games | Elo |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    with tempfile.TemporaryDirectory(prefix="azjax-first-evaluation-") as tmp:
        for round_ in range(args.rounds):
            for mode in modes:
                workdir = os.path.join(tmp, f"{mode}-{round_}")
                try:
                    r = run_once([*flags, f"--eval_compile_ahead={mode}"], workdir)
                except RuntimeError as e:
                    print(f"benchmarks.first_evaluation: {e}", file=sys.stderr)
                    return 1
                print(table_row(mode, r), flush=True)
    return 0


if __name__ == "__main__":
    from azjax import cli  # here: the module starts JAX itself, after its own settings

    sys.exit(cli.script("benchmarks.first_evaluation", main))
