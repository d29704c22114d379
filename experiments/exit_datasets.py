"""Seed 002, Figure 2: batch ExIt against online ExIt (buffer, growing dataset) and AlphaZero
self-play, Elo against network evaluations, several seeds.

Each method trains from scratch (`train_and_evaluate`, a checkpoint every iteration; batch ExIt
plays 4x the games per iteration for a quarter of the iterations, as the paper's batch mode made
10x larger datasets, and trains a fresh apprentice on each, as the paper's restarts imitation
learning from scratch); then every checkpoint's apprentice, playing greedily (its most
likely move), meets a fixed set of anchors (random play and vanilla MCTS at a few simulation
counts), one game per legal opening with each colour, and maximum-likelihood Elo ratings are
fitted to all those games at once (`azjax.eval.stats.elo`; random play rated 0). The x-axis is
the network evaluations spent (ExIt logs `exit/network_evaluations`; AlphaZero spends
num_simulations + 1 per self-play position). The paper warm-starts every method from an
imitation-learned network and compares to REINFORCE; here all start from scratch and the
comparison is AlphaZero.

    python -m experiments.exit_datasets                       # CPU scale: 5x5 Hex
    python -m experiments.exit_datasets --full                # accelerator scale
    python -m experiments.exit_datasets --size=3 --iterations=2 --seeds=1 --out=/tmp/d  # smoke

Writes <out>/results.json, <out>/elo.png and <out>/log.txt (default runs/exit_datasets); the
runs are in <out>/<method>_s<seed>.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import numpy as np

import azjax
from azjax import cli, flags
from azjax.checkpoint import load_checkpoint, steps
from azjax.eval.agent import network_apply, random_agent
from azjax.eval.stats import elo
from azjax.exit import ExpertSpec
from experiments.common import (
    Log,
    add_scale_flags,
    parse_ints,
    remove_earlier_results,
    set_scale,
    write_results,
)
from experiments.exit_common import expert_agent, greedy_agent, opening_match

METHODS = {  # name: config overrides (on top of the scale's)
    # the paper's batch ExIt restarts imitation learning from scratch each iteration
    "batch": dict(
        algorithm="exit", dataset="batch", retrain_from_scratch=True, batch_games_factor=4
    ),
    # ... and trains it as the paper does: early stopping on held-out games, no L2
    "batch_paper": dict(
        algorithm="exit",
        dataset="batch",
        retrain_from_scratch=True,
        batch_games_factor=4,
        early_stopping=3,
        weight_decay=0.0,
    ),
    "online_buffer": dict(algorithm="exit", dataset="online_buffer"),
    "online_grow": dict(algorithm="exit", dataset="online_grow"),
    "alphazero": dict(algorithm="alphazero", search="gumbel", replay_games=2000),
}
SCALES = {
    False: dict(
        size=5,
        iterations=8,
        batch_games=32,
        num_simulations=64,
        train_steps=20,
        train_batch_size=128,
        num_blocks=2,
        num_filters=32,
        dataset_size=128,  # 4 iterations' positions: the buffer turns over within the run
        anchors="4,16,64",
    ),
    True: dict(
        size=9,
        iterations=200,
        batch_games=1024,
        num_simulations=2000,
        train_steps=200,
        train_batch_size=256,
        num_blocks=6,
        num_filters=64,
        dataset_size=10_240,  # 10 iterations' positions, the paper's 243,000 over 24,300
        anchors="100,1000,10000",
    ),
}


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scale_flags(parser, SCALES, "accelerator scale")
    parser.add_argument("--methods", default=",".join(METHODS), help=", ".join(METHODS))
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--out", type=flags.path, default=os.path.join("runs", "exit_datasets"))
    args = parser.parse_args(argv)
    set_scale(args, SCALES)
    args.methods = [m for m in args.methods.split(",") if m]
    if not args.methods or any(m not in METHODS for m in args.methods):
        parser.error(f"--methods: accepted {', '.join(METHODS)}; got {args.methods}")
    try:
        args.anchors = parse_ints("--anchors", args.anchors, 1)
    except ValueError as e:
        parser.error(str(e))
    for name in ("seeds", "iterations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.size < 2:
        parser.error(f"--size must be at least 2, got {args.size}")
    try:
        for method in args.methods:  # every run's config checked before the first trains
            config_for(method, 0, args)
        flags.check_out(args.out)
    except ValueError as e:
        parser.error(str(e))
    return args


def config_for(method: str, seed: int, args):
    extra = dict(METHODS[method])
    factor = extra.pop("batch_games_factor", 1)  # batch ExIt: 4x the games, 1/4 the iterations
    expert = {}  # Expert Iteration's own settings (an AlphaZero run refuses them)
    if extra["algorithm"] == "exit":
        expert["exit_prior_weight"] = args.num_simulations / args.size**2
    if extra.get("dataset", "batch") != "batch":
        expert["dataset_size"] = args.dataset_size
    settings = dict(
        size=args.size,
        swap=False,
        num_blocks=args.num_blocks,
        num_filters=args.num_filters,
        value_hidden=args.num_filters,
        batch_games=args.batch_games * factor,
        num_simulations=args.num_simulations,
        train_steps=args.train_steps,
        train_batch_size=args.train_batch_size,
        optimizer="adam",
        learning_rate=1e-3,
        weight_decay=1e-4,
        iterations=max(1, args.iterations // factor),
        checkpoint_interval=1,
        eval_interval=0,
        seed=seed,
    )
    return azjax.load_config("hex", {**settings, **extra, **expert})


def evaluations(workdir: str, config) -> dict[int, float]:
    """Cumulative network evaluations at each iteration of a run."""
    total, out = 0.0, {}
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if config.algorithm == "exit":
                total += row["exit/network_evaluations"]
            else:
                total += row["positions"] * (config.num_simulations + 1)
            out[row["iteration"]] = total
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    log = Log(os.path.join(args.out, "log.txt"))
    remove_earlier_results(args.out, "elo.png")
    t0 = time.time()
    log(
        f"{args.size}x{args.size} Hex, methods {args.methods}, {args.seeds} seed(s), "
        f"{args.iterations} iterations per run (batch: a quarter, with 4x the games)"
    )
    log(f"uptime: {os.getloadavg()}")
    points: dict[str, dict] = {}
    for method in args.methods:
        for seed in range(args.seeds):
            config = config_for(method, seed, args)
            workdir = os.path.join(args.out, f"{method}_s{seed}")
            if not os.path.exists(os.path.join(workdir, "summary.json")):
                summary = azjax.train_and_evaluate(config, workdir, progress=False)
                log(
                    f"{method} seed {seed}: {summary['iterations']} iterations, "
                    f"{summary['wall_seconds']} s"
                )
            evals = evaluations(workdir, config)
            for step in [s for s in steps(workdir) if s in evals]:
                points[f"{method}_s{seed}@{step}"] = dict(
                    method=method, seed=seed, step=step, evaluations=evals[step], workdir=workdir
                )
    game = config.make_game()
    apply = network_apply(config)
    anchors = [random_agent("random", game)] + [
        expert_agent(f"mcts{n}", game, ExpertSpec.vanilla(n), None, None) for n in args.anchors
    ]
    names = [a.name for a in anchors] + list(points)
    index = {n: i for i, n in enumerate(names)}
    won = np.zeros((len(names), len(names)))
    played = np.zeros_like(won)
    key = jax.random.PRNGKey(0)
    for name, p in points.items():
        _, variables, _ = load_checkpoint(p["workdir"], p["step"])
        agent = greedy_agent(name, game, apply, variables)
        for anchor in anchors:
            k = jax.random.fold_in(jax.random.fold_in(key, index[name]), index[anchor.name])
            m = opening_match(game, agent, anchor, k)
            i, j = index[name], index[anchor.name]
            w, d, lost = m["wdl"]
            won[i, j] += w + d / 2
            won[j, i] += lost + d / 2
            played[i, j] += m["games"]
            played[j, i] += m["games"]
        log(f"{name}: {p['evaluations']:.3g} evaluations")
    ratings = elo(won, played, prior_draws=1.0)
    base = ratings.elo[index["random"]]
    for name in names:
        rating = float(ratings.elo[index[name]] - base)
        if name in points:
            points[name]["elo"] = rating
            points[name]["stderr"] = float(ratings.stderr[index[name]])
    anchor_elo = {a.name: float(ratings.elo[index[a.name]] - base) for a in anchors}
    log(f"anchors: {anchor_elo}")
    table = summarise(points, args.methods)
    for method, rows in table.items():
        log(
            f"{method}: "
            + "; ".join(
                f"it {r['step']}: {r['evaluations']:.3g} evals, Elo "
                f"{r['elo']:.0f} +- {r['spread']:.0f}"
                for r in rows
            )
        )
    plot(table, os.path.join(args.out, "elo.png"), anchor_elo)
    results = dict(
        command="python -m experiments.exit_datasets " + " ".join(argv),
        args=vars(args),
        anchors=anchor_elo,
        checkpoints=points,
        table=table,
        seconds=round(time.time() - t0, 1),
    )
    write_results(args, results, log)
    return 0


def summarise(points: dict, methods) -> dict[str, list]:
    """Per method and iteration: mean evaluations and Elo over seeds, and the Elo spread
    (1.96 standard errors of the mean over seeds; with one seed, the rating's own)."""
    table = {}
    for method in methods:
        by_step: dict[int, list] = {}
        for p in points.values():
            if p["method"] == method:
                by_step.setdefault(p["step"], []).append(p)
        rows = []
        for step, ps in sorted(by_step.items()):
            e = np.array([p["elo"] for p in ps])
            spread = (
                1.96 * e.std(ddof=1) / np.sqrt(len(e)) if len(e) > 1 else 1.96 * ps[0]["stderr"]
            )
            rows.append(
                dict(
                    step=step,
                    seeds=len(ps),
                    elo=float(e.mean()),
                    spread=float(spread),
                    evaluations=float(np.mean([p["evaluations"] for p in ps])),
                )
            )
        table[method] = rows
    return table


def plot(table: dict, path: str, anchors: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method, rows in table.items():
        x = [r["evaluations"] for r in rows]
        y = np.array([r["elo"] for r in rows])
        s = np.array([r["spread"] for r in rows])
        ax.plot(x, y, marker="o", label=method)
        ax.fill_between(x, y - s, y + s, alpha=0.2)
    for name, rating in anchors.items():
        ax.axhline(rating, color="grey", lw=0.6, ls="--")
        ax.text(ax.get_xlim()[0], rating, name, fontsize=7, va="bottom")
    ax.set_xscale("log")
    ax.set_xlabel("network evaluations")
    ax.set_ylabel("Elo (random play = 0)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(cli.script("experiments.exit_datasets", main))
