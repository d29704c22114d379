"""Random playouts per second: our games against pgx's, in one run on one machine.

    python -m benchmarks.games                                  # all four games, B = 1 64 1024 4096
    python -m benchmarks.games --games connect_four --batch_sizes 1 64 --min_seconds 0.5
    python -m benchmarks.games --markdown docs/table.md         # also write a markdown table

A cell times one jitted function of a seed that starts B games and plays them all to the end with
uniformly random legal moves, and counts B playouts per call:
- ours: ``jax.vmap(game.random_playout)`` from ``game.init()`` (each game's own playout);
- pgx: ``jax.vmap(env.init)``, then a ``lax.while_loop`` that steps every env with a uniformly
  random legal action (``jax.vmap(env.step)``) until all are terminal.
The first call compiles and is not timed; then calls repeat until `--min-seconds` have passed, and
the best of `--repeats` such measurements is reported (the least disturbed by other processes).
A game whose module is missing or broken is skipped with a note.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp

import games
from azjax import cli, flags

# our name -> (our options, pgx env id); hex and othello at pgx's fixed sizes.
GAMES: dict[str, tuple[dict, str]] = {
    "hex": ({"size": 11}, "hex"),
    "othello": ({"size": 8}, "othello"),
    "connect_four": ({}, "connect_four"),
    "tictactoe": ({}, "tic_tac_toe"),
}
BATCH_SIZES = (1, 64, 1024, 4096)


@dataclasses.dataclass(frozen=True)
class Row:
    game: str
    batch: int
    ours: float  # playouts per second
    pgx: float  # playouts per second

    @property
    def ratio(self) -> float:
        return self.ours / self.pgx


def ours_playouts(game: games.Game, batch: int) -> Callable:
    """Jitted seed -> float32[batch, 2]: `batch` random playouts of our game from the start."""
    playout = jax.vmap(game.random_playout)

    @jax.jit
    def run(seed):
        keys = jax.random.split(jax.random.PRNGKey(seed), batch)
        states = jax.vmap(lambda _: game.init())(jnp.arange(batch))
        return playout(states, keys)

    return run


def pgx_playouts(env, batch: int) -> Callable:
    """Jitted seed -> float32[batch, 2]: `batch` random playouts of a pgx env, all to the end."""
    init, step = jax.vmap(env.init), jax.vmap(env.step)

    def body(carry):
        state, key, total = carry
        key, sub = jax.random.split(key)
        action = jax.random.categorical(sub, jnp.where(state.legal_action_mask, 0.0, -jnp.inf))
        state = step(state, action)
        return state, key, total + state.rewards  # rewards arrive on the final step only

    @jax.jit
    def run(seed):
        init_key, play_key = jax.random.split(jax.random.PRNGKey(seed))
        state = init(jax.random.split(init_key, batch))
        carry = (state, play_key, jnp.zeros((batch, 2), jnp.float32))
        running = lambda c: ~jnp.all(c[0].terminated | c[0].truncated)
        return jax.lax.while_loop(running, body, carry)[2]

    return run


def throughput(run: Callable, batch: int, min_seconds: float, repeats: int) -> float:
    """Playouts per second of `run` (best of `repeats` measurements of at least `min_seconds`)."""
    jax.block_until_ready(run(0))  # compile
    best, seed = 0.0, 1
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while True:
            jax.block_until_ready(run(seed))
            calls, seed = calls + 1, seed + 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        best = max(best, calls * batch / elapsed)
    return best


def machine() -> str:
    """One line naming the CPU, core count, JAX backend and versions, and the load at the start."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import pgx

    load = f" / load {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    return (
        f"{cpu} / {os.cpu_count()} cores{load} / jax {jax.__version__} on "
        f"{jax.default_backend()} ({jax.devices()[0].device_kind}) / pgx {pgx.__version__} / "
        f"python {platform.python_version()}"
    )


def format_table(rows: list[Row]) -> str:
    lines = [f"{'game':<14}{'batch':>7}{'ours/s':>14}{'pgx/s':>14}{'ours/pgx':>10}"]
    for r in rows:
        lines.append(f"{r.game:<14}{r.batch:>7}{r.ours:>14,.0f}{r.pgx:>14,.0f}{r.ratio:>9.2f}x")
    return "\n".join(lines)


def markdown_table(rows: list[Row]) -> str:
    lines = [
        "| game | batch | ours playouts/s | pgx playouts/s | ours / pgx |",
        "|---|--:|--:|--:|--:|",
    ]
    for r in rows:
        lines.append(f"| {r.game} | {r.batch} | {r.ours:,.0f} | {r.pgx:,.0f} | {r.ratio:.2f}x |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = flags.Parser(module=__spec__.name, description=__doc__.split("\n")[0])
    parser.add_argument("--games", nargs="+", choices=list(GAMES), default=list(GAMES))
    # underscores as every other command spells its flags; the dashed spellings still work
    parser.add_argument(
        "--batch_sizes", "--batch-sizes", nargs="+", type=int, default=list(BATCH_SIZES)
    )
    parser.add_argument(
        "--min_seconds",
        "--min-seconds",
        type=float,
        default=1.0,
        help="timed seconds per measurement",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="measurements per cell; the best is kept"
    )
    parser.add_argument(
        "--markdown", metavar="PATH", help="also write the table as markdown ('-': stdout)"
    )
    args = parser.parse_args(argv)
    if min(args.batch_sizes) < 1 or args.repeats < 1 or not 0 < args.min_seconds < float("inf"):
        parser.error(
            f"--batch_sizes and --repeats must be at least 1 and --min_seconds positive, got "
            f"{args.batch_sizes}, {args.repeats}, {args.min_seconds}"
        )
    if args.markdown not in (None, "-"):
        try:  # before the measurement, whose table would be lost
            flags.check_file_out(flags.path(args.markdown), "--markdown")
        except (ValueError, argparse.ArgumentTypeError) as e:
            parser.error(f"{e} (a file, or - for stdout)")
    return args


def main(argv: list[str] | None = None) -> list[Row]:
    args = parse_args(argv)
    import pgx  # imported here so that `--help` works without it

    print(machine())
    print(format_table([]), flush=True)  # the header; rows follow as they are measured
    rows, notes = [], []
    for name in args.games:
        options, pgx_id = GAMES[name]
        try:
            game, env = games.make(name, **options), pgx.make(pgx_id)
            for batch in args.batch_sizes:
                ours = throughput(ours_playouts(game, batch), batch, args.min_seconds, args.repeats)
                theirs = throughput(pgx_playouts(env, batch), batch, args.min_seconds, args.repeats)
                rows.append(Row(name, batch, ours, theirs))
                print(format_table(rows[-1:]).splitlines()[1], flush=True)
        except Exception as e:  # a game being written by someone else must not stop the others
            notes.append(f"skipped {name}: {type(e).__name__}: {e}")
    for note in notes:
        print(note)
    if args.markdown:
        text = markdown_table(rows) + "\n"
        if args.markdown == "-":
            print(text, end="")
        else:
            os.makedirs(os.path.dirname(os.path.abspath(args.markdown)), exist_ok=True)
            with open(args.markdown, "w") as f:
                f.write(text)
    return rows


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.games", main))
