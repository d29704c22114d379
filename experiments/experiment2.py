"""Seed 000's Experiment 2: how often to roll out. Agents that share Experiment 1's final network
as state evaluator and differ only in the probability p_r that a new leaf also plays a random
rollout (blended into its value with weight lambda) play every other agent.

    python -m experiments.experiment2 --workdir=runs/exp1_hex_gumbel    # CPU scale, ~15 min
    python -m experiments.experiment2 --game=othello --lambdas=0.5      # runs/exp1_othello
    python -m experiments.experiment2 --game=hex --full                 # runs/exp1_hex_full

For each lambda in `--lambdas` (the thesis used 0.5, an unweighted average; its proposed
follow-up is other weights), a round robin of the agents p_r = `--probs` (0, 0.2, ..., 1), each
pair playing `--games` games with colours alternating, every agent with `--sims` simulations and
epsilon-greedy moves (`--eps`; the thesis's network-against-network games were epsilon-greedy so
that they differ). The p_r = 0 agent ignores lambda and is the same in every round robin.

The settings are Table 5.2's (50 simulations, 40 games per pair) at both scales: Experiment 2's
scale is the network's, so `--full` only points at the `--full` run of Experiment 1.

Writes to <out> (default <workdir>/experiment2): results.json, win_ratio_lambda<L>.png per lambda
(seed 000 Figure 5.3: the row agent's (wins + draws/2) / games against the column agent) and
rollout_probability.png (each agent's score against all the others of its round robin, with
95% intervals, one line per lambda).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

from azjax import cli, flags
from azjax.eval import format_tournament, parse_agent, plot_heatmap, round_robin
from azjax.eval.records import pyplot
from azjax.eval.stats import score_ci
from experiments.common import (
    add_run_flags,
    check_run_flags,
    open_run,
    parse_floats,
    remove_earlier_results,
    write_results,
)


def agent_spec(
    workdir: str, p_r: float, lam: float, sims: int, eps: float, search: str | None
) -> str:
    spec = f"ckpt:{workdir},sims={sims},eps={eps},decisive=0"  # the thesis's search
    if search:
        spec += f",search={search}"
    if p_r > 0:
        return spec + f",rollout=random,p_r={p_r},lambda={lam}"
    return spec + ",rollout=none,p_r=0"  # whatever the checkpoint was trained with


def pooled_scores(record: dict) -> list[dict]:
    """Each agent's wins, draws and losses over all its matches, and its score with a 95% CI."""
    names = record["agents"]
    wdl = {n: np.zeros(3, int) for n in names}
    for m in record["matches"]:
        a, b = m["agents"]
        r = m["result"]["overall"]
        wdl[a] += (r["wins"], r["draws"], r["losses"])
        wdl[b] += (r["losses"], r["draws"], r["wins"])
    out = []
    for n in names:
        wins, draws, losses = (int(x) for x in wdl[n])
        score, half = score_ci(wins, draws, losses)
        out.append(
            dict(
                agent=n,
                wins=wins,
                draws=draws,
                losses=losses,
                score=score,
                ci95=half,
                elo=record["elo"][n]["elo"],
                elo_ci95=record["elo"][n]["ci95"],
            )
        )
    return out


def plot_scores(rounds: list[dict], probs: list[float], path: str, title: str) -> None:
    plt = pyplot(path)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for i, r in enumerate(rounds):
        score = np.array([s["score"] for s in r["pooled"]])
        half = np.array([s["ci95"] for s in r["pooled"]])
        x = np.array(probs) + (i - (len(rounds) - 1) / 2) * 0.01  # keep the error bars apart
        ax.errorbar(x, score, yerr=half, fmt="o-", ms=4, capsize=3, label=f"λ = {r['lambda']}")
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("rollout probability p_r")
    ax.set_ylabel("score against the other agents")
    ax.set_xticks(probs)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_flags(parser, "experiment2")
    parser.add_argument("--probs", default="0,0.2,0.4,0.6,0.8,1", help="rollout probabilities")
    parser.add_argument(
        "--lambdas",
        default="0.5,0.25,0.75",
        help="rollout weights, one round robin each (the thesis: 0.5)",
    )
    parser.add_argument("--games", type=int, default=40, help="games per pair (Table 5.2: 40)")
    parser.add_argument("--sims", type=int, default=50, help="simulations (Table 5.2: 50)")
    parser.add_argument("--eps", type=float, default=0.05, help="epsilon-greedy moves (0.05)")
    args = parser.parse_args(argv)
    try:
        args.probs = parse_floats("--probs", args.probs, 0.0, 1.0)
        args.lambdas = parse_floats("--lambdas", args.lambdas, 0.0, 1.0)
    except ValueError as e:
        parser.error(str(e))
    if len(args.probs) < 2:
        parser.error("--probs: give at least two rollout probabilities")
    if args.sims < 1:
        parser.error(f"--sims must be at least 1, got {args.sims}")
    if not 0.0 <= args.eps <= 1.0:
        parser.error(f"--eps must be in [0, 1], got {args.eps}")
    check_run_flags(parser, args, "experiment2")
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    run = open_run(args, __spec__.name)
    if run is None:
        return 2
    remove_earlier_results(args.out, "rollout_probability.png", "win_ratio_lambda*.png")
    config, game, step, log = run
    t_start = time.time()
    log(
        f"experiment 2 on {args.workdir} (checkpoint {step}, {game.name} {game.options}): "
        f"p_r {args.probs}, lambda {args.lambdas}, {args.sims} sims, {args.games} games per pair"
    )
    names = [f"p_r={p:g}" for p in args.probs]
    key = jax.random.PRNGKey(args.seed)
    rounds = []
    for i, lam in enumerate(args.lambdas):
        t0 = time.time()
        specs = [
            agent_spec(args.workdir, p, lam, args.sims, args.eps, args.search) for p in args.probs
        ]
        agents = [parse_agent(s, game) for s in specs]
        log(f"lambda = {lam}:")
        record = round_robin(game, names, agents, args.games, jax.random.fold_in(key, i), log=log)
        record.update(specs=specs, seconds=round(time.time() - t0, 1))
        record["pooled"] = pooled_scores(record)
        label = f"{lam:g}"
        log(format_tournament(record))
        plot_heatmap(
            record,
            os.path.join(args.out, f"win_ratio_lambda{label}.png"),
            title=f"{game.name} {game.options}, λ = {label}\nrow agent against column agent, "
            f"{args.games} games per pair",
        )
        rounds.append(dict(record, **{"lambda": lam}))
        log(f"lambda = {lam}: {record['seconds']:.0f} s")
    search = args.search or config.search
    plot_scores(
        rounds,
        args.probs,
        os.path.join(args.out, "rollout_probability.png"),
        f"{game.name} {game.options}, checkpoint {step}\n{args.sims} sims ({search}), "
        f"{args.games} games per pair, pooled over each agent's matches",
    )
    results = dict(
        command="python -m experiments.experiment2 " + " ".join(argv),
        workdir=args.workdir,
        checkpoint=step,
        game=game.name,
        game_options=game.options,
        probs=args.probs,
        lambdas=args.lambdas,
        sims=args.sims,
        search=args.search,
        eps=args.eps,
        games_per_pair=args.games,
        seed=args.seed,
        rounds=rounds,
        seconds=round(time.time() - t_start, 1),
    )
    for r in rounds:
        log(
            f"lambda = {r['lambda']}: score against the others "
            + ", ".join(f"{s['agent']} {s['score']:.3f}±{s['ci95']:.3f}" for s in r["pooled"])
        )
    write_results(args, results, log)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.experiment2", main))
