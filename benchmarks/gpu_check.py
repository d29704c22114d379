"""The GPU figures docs/benchmarks.md still lacks, as one prepared run for a short GPU lease.

    python -m benchmarks.gpu_check                                  # every part in turn
    python -m benchmarks.gpu_check --parts=selfplay --out=runs/gpu  # one part
    python -m benchmarks.gpu_check --quick                          # toy sizes: a CPU smoke run

Each part runs one of the project's own commands, each in its own process (so one that fails or
runs out of memory leaves the next its device); what it prints goes to the terminal and to
OUT/PART.txt:
- `selfplay`: `python -m benchmarks.selfplay --batch 1024 --steps 4 --repeats 4 --markdown`,
  Hex 11x11 and Othello 8x8. On a GPU Othello's rollout variant takes 16 plies a loop turn (its
  default there since session 38), so its "rollouts / no rollouts" line is issue 13's rollout
  figure (>= 0.8x asked; 0.69x at 4 plies, 0.81x at 16 on an H200 in session 97), beside
  PUCT / Gumbel and both against the pgx + mctx recipe.
- `network`: `python -m benchmarks.network_share --config=hex --size=11 --batch_games=1024`,
  the README's main command's settings (its 6x6 config) on 11x11 Hex with its network and with
  a stub, the network's share of a move, and its forward pass with the batch norms folded into the
  convolutions (as the searches apply it since session 98) against apart (as the recipe does):
  0.80x the time apart on an H200 in session 100, and whether the compiled self-play computes
  the fold outside its while loops (0 of its rsqrts inside since session 100).
- `bf16`: the same as `selfplay` with `--dtype=bfloat16`, beside its float32 run.
- `plumbing`: `selfplay` on 11x11 Hex with `--network stub`: azjax's game and search against
  the recipe's alone (1.84x on an H200 in session 100, where Hex with the network was 1.33x).
- `batch256`: `selfplay` at batch 256, the issue's other batch size.
- `train`: the README's main command for 4 minutes (`train.py --game=hex --batch_games=1024
  --time_budget=4`, in OUT/train-TIME): its closing message gives the in-loop evaluation's
  seconds, the compiling among them and their share of the session (issue 13: at most 10% at
  the default settings).
The parts run in the order given (by default the order above, most wanted first). On the H200 of
session 97 `selfplay` took about 4 minutes with a cold compilation cache (Othello's rollout
variant compiles for 137 s) and `train` 5: a 10-minute command fits `selfplay,network` and one
more, and a second call the rest.

`--quick` runs the same parts at toy sizes (the self-play benchmark's `--quick`, a 5x5 Hex
run of two iterations): a smoke run on a CPU. The exit status is 1 when a part failed
(the closing line names it), 2 for bad flags.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence

from azjax import cli, flags

SELFPLAY = "-m benchmarks.selfplay --batch 1024 --steps 4 --repeats 4".split()
TRAIN = (
    "-m azjax.commands.train --game=hex --batch_games=1024 --time_budget=4 --no_progress"
).split()
NETWORK = (
    "-m benchmarks.network_share --config=hex --size=11 --batch_games=1024 --steps=8 --repeats=3"
).split()
QUICK_SELFPLAY = "-m benchmarks.selfplay --quick".split()
QUICK_NETWORK = (
    "-m benchmarks.network_share --config=cpu --size=5 --batch_games=4 --steps=2 --repeats=1"
).split()
QUICK_TRAIN = (
    "-m azjax.commands.train --game=hex --size=5 --config=cpu --iterations=2 --batch_games=4 "
    "--num_simulations=4 --train_steps=2 --eval_interval=1 --eval_games=2 --no_progress"
).split()
PARTS = ("selfplay", "network", "bf16", "plumbing", "batch256", "train")


def command(part: str, out: str, quick: bool = False) -> list[str]:
    """The command (its argument list after the Python interpreter) that `part` runs."""
    selfplay = [*(QUICK_SELFPLAY if quick else SELFPLAY), "--markdown"]
    if part == "selfplay":
        return selfplay
    if part == "network":
        return QUICK_NETWORK if quick else NETWORK
    if part == "bf16":
        return [*selfplay, "--dtype=bfloat16"]
    if part == "plumbing":
        return [*selfplay, "--games=hex", "--network=stub"]
    if part == "batch256":
        return selfplay if quick else [*selfplay, "--batch=256"]
    if part == "train":
        workdir = os.path.join(out, time.strftime("train-%Y%m%d-%H%M%S"))  # a new run each time
        return [*(QUICK_TRAIN if quick else TRAIN), f"--workdir={workdir}"]
    raise ValueError(f"unknown part {part!r}; choose from {', '.join(PARTS)}")


def run_part(part: str, out: str, quick: bool) -> bool:
    """Runs `part`'s command, teeing its output to OUT/PART.txt; True when it exits 0."""
    argv = command(part, out, quick)
    with open(os.path.join(out, f"{part}.txt"), "w") as log:
        line = f"$ python {' '.join(argv)}"
        print(line, flush=True)
        log.write(line + "\n")
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        for text in proc.stdout:
            sys.stdout.write(text)
            log.write(text)
        status = proc.wait()
        line = f"# exit {status} after {time.perf_counter() - start:.0f} s"
        print(line, flush=True)
        log.write(line + "\n")
    return status == 0


def main(argv: Sequence[str] | None = None) -> int:
    p = flags.Parser(module=__spec__.name, description=__doc__.splitlines()[0])
    p.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"comma-separated, run in this order: {', '.join(PARTS)} (default all)",
    )
    p.add_argument("--out", default="runs/gpu_check", help="folder for each part's output")
    p.add_argument("--quick", action="store_true", help="toy sizes (a smoke run on a CPU)")
    args = p.parse_args(argv)
    try:
        parts = flags.names(args.parts, "--parts", PARTS)
        flags.check_out(args.out)
    except ValueError as e:
        p.error(str(e))
    os.makedirs(args.out, exist_ok=True)
    failed = [part for part in parts if not run_part(part, args.out, args.quick)]
    print(f"# parts failed: {', '.join(failed)}" if failed else "# every part ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.gpu_check", main))
