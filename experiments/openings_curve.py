"""Every-opening strength over a run: each checkpoint against one fixed opponent, from every
opening with both colours, and the last one from the empty board too (issue 17's curve).

    python -m experiments.openings_curve --workdir=runs/hex6 --opponent=ckpt:runs/hex6,sims=200
    python -m experiments.openings_curve --workdir=runs/hex5 --opponent=perfect --every=2

The agent is each checkpoint with `--sims` simulations (default 50). For each checkpoint: the
score over `--openings` (default all: one game per legal first move with each colour) and, with a
perfect opponent, the won sides won. The last checkpoint also plays `--empty_games` games from
the empty board, half with each colour, so the two protocols stand side by side. Writes
results.json, curve.png and log.txt into --out (default <workdir>/openings_curve).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

from azjax import checkpoint, cli, flags
from azjax.eval import openings as op
from azjax.eval.curve import training_games
from azjax.eval.match import play_games
from azjax.eval.records import pyplot, write_json
from azjax.eval.specs import parse_agent
from experiments.common import Log, remove_earlier_results, wilson


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workdir", type=flags.path, required=True, help="the run folder")
    parser.add_argument("--opponent", required=True, help="an agent spec (evaluate.py's)")
    parser.add_argument("--sims", type=int, default=50, help="the checkpoints' simulations")
    parser.add_argument("--openings", default="all", help=f"{op.KINDS} (default all)")
    parser.add_argument("--every", type=int, default=1, help="every k-th checkpoint (and the last)")
    parser.add_argument(
        "--empty_games",
        type=int,
        default=20,
        help="games from the empty board for the last checkpoint (even)",
    )
    parser.add_argument(
        "--out", type=flags.path, default=None, help="default <workdir>/openings_curve"
    )
    parser.add_argument("--seed", type=flags.seed, default=0)
    args = parser.parse_args(argv)
    for flag, value in (("--sims", args.sims), ("--every", args.every)):
        if value < 1:
            parser.error(f"{flag} must be >= 1, got {value}")
    if args.empty_games < 0 or args.empty_games % 2:
        parser.error(f"--empty_games must be even and >= 0, got {args.empty_games}")
    op.parse(args.openings)  # ValueError naming the forms
    args.out = args.out or os.path.join(args.workdir, "openings_curve")
    try:
        flags.check_out(args.out)  # before the games, not after them
    except ValueError as e:
        parser.error(str(e))
    return args


def main(argv=None) -> int:
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        steps = checkpoint.steps(args.workdir)
        if not steps:
            raise ValueError(f"{args.workdir!r} holds no checkpoints")
        game = checkpoint.read_config(args.workdir).make_game()
        opponent = parse_agent(args.opponent, game)
    except (ValueError, FileNotFoundError) as e:
        return cli.fail(f"python -m {__spec__.name}", e)
    chosen = steps[:: args.every] + ([steps[-1]] if (len(steps) - 1) % args.every else [])
    log = Log(os.path.join(args.out, "log.txt"))
    remove_earlier_results(args.out, "curve.png")
    key = jax.random.PRNGKey(args.seed)
    moves = op.openings(game, args.openings, key)
    both = op.both_colours(moves)
    values = op.perfect_values(game, moves) if args.opponent.startswith("perfect") else None
    trained = training_games(args.workdir)
    t0, rows = time.time(), []
    log(
        f"{game.name} {game.options}: {len(chosen)} checkpoints x {len(both)} games against "
        f"{args.opponent} ({args.openings} openings)"
    )
    for step in chosen:
        agent = parse_agent(f"ckpt:{args.workdir}@{step},sims={args.sims}", game)
        out = play_games(
            game, agent, opponent, len(both), jax.random.fold_in(key, step), openings=both
        )
        r = out.result
        row = dict(
            step=step,
            training_games=trained.get(step),
            wins=r.wins,
            draws=r.draws,
            losses=r.losses,
            score=r.score,
            score_ci95=wilson(r.wins + 0.5 * r.draws, r.games),
        )
        if values is not None:
            row["won_sides"] = op.won_sides(values, out.returns)
        rows.append(row)
        extra = (
            f", won sides {row['won_sides']['won_sides']}/{row['won_sides']['decisive_openings']}"
            if values is not None
            else ""
        )
        log(
            f"checkpoint {step}: {r.wins}-{r.draws}-{r.losses} of {r.games}, score "
            f"{r.score:.3f}{extra}"
        )
    empty = None
    if args.empty_games:
        agent = parse_agent(f"ckpt:{args.workdir}@{chosen[-1]},sims={args.sims}", game)
        k_empty = jax.random.fold_in(key, 2**31 - 1)
        r = play_games(game, agent, opponent, args.empty_games, k_empty).result
        empty = dict(
            step=chosen[-1],
            wins=r.wins,
            draws=r.draws,
            losses=r.losses,
            score=r.score,
            score_ci95=wilson(r.wins + 0.5 * r.draws, r.games),
        )
        log(
            f"checkpoint {chosen[-1]} from the empty board: {r.wins}-{r.draws}-{r.losses}, "
            f"score {r.score:.3f}"
        )
    results = dict(
        workdir=os.path.abspath(args.workdir),
        game=game.name,
        game_options=game.options,
        opponent=args.opponent,
        sims=args.sims,
        openings=args.openings,
        games_per_checkpoint=len(both),
        curve=rows,
        empty_board=empty,
        seconds=time.time() - t0,
    )
    write_json(args.out, "results.json", results)
    plot(results, os.path.join(args.out, "curve.png"))
    log(f"wall time {results['seconds']:.0f} s; results in {args.out}")
    return 0


def plot(results: dict, path: str) -> None:
    plt = pyplot(path)
    rows = results["curve"]
    use_games = all(r["training_games"] is not None for r in rows)
    x = np.array([r["training_games"] if use_games else r["step"] for r in rows])
    score = np.array([r["score"] for r in rows])
    low, high = (np.array([r["score_ci95"][i] for r in rows]) for i in (0, 1))
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.plot(x, score, "o-", ms=3, label=f"every opening ({results['games_per_checkpoint']} games)")
    ax.fill_between(x, low, high, alpha=0.15)
    if results["empty_board"] is not None:
        ax.plot(
            [x[-1]],
            [results["empty_board"]["score"]],
            "s",
            color="tab:red",
            label="last checkpoint, from the empty board",
        )
    ax.set_ylim(0, 1)
    ax.set_xlabel("self-play games" if use_games else "iteration")
    ax.set_ylabel("score (wins + draws/2)")
    ax.set_title(
        f"{results['game']} {results['game_options']}: {results['sims']} sims against "
        f"{results['opponent']}",
        fontsize=8,
    )
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(cli.script("experiments.openings_curve", main))
