"""Seed 000's Experiment 3: a slow, smart rollout policy against a fast, random one, at equal time.

Both agents use Experiment 1's final network for their priors and roll out from every new leaf
(p_r = 1); one rolls out by always playing the policy network's best move, the other by random
moves. Each gets `--seconds` per move (per game of the batch: `azjax.eval.calibrate` sets the
simulations from timed searches), so the policy agent, whose every rollout step costs a network
call, searches far fewer simulations.

    python -m experiments.experiment3 --workdir=runs/exp1_hex_gumbel    # CPU scale, ~15 min
    python -m experiments.experiment3 --game=othello                    # runs/exp1_othello
    python -m experiments.experiment3 --game=hex --full                 # Table 5.3: 1 s, 240 games

Configurations (`--configs`, default all three):
- `evaluator`: the network is also the state evaluator: leaf value = (1 - lambda) v + lambda z
  with lambda = 0.5 (seed 000 Tables 5.5a/b, 5.6a/b);
- `rollouts_only`: the network gives priors only, the leaf value is the rollout's outcome z
  (lambda = 1; Tables 5.5c/d, 5.6c/d);
- `no_rollouts`: the thesis's proposed follow-up at the same equal time: the network alone
  (no rollouts, so many more simulations) against the random-rollout agent of `evaluator`.

Moves are the search's best (no epsilon: the random rollouts make the games differ). Prints and
writes (<out>, default <workdir>/experiment3/results.json) win / draw / loss ratios of the first
agent with 95% intervals overall and by who moved first (Table 5.5, Appendix A), and the
simulations, rollouts and measured seconds per move of each (Table 5.6).
"""

from __future__ import annotations

import argparse
import sys
import time

import jax

from azjax import cli, flags
from azjax.eval import format_match, outcome_record, parse_agent, play_games
from experiments.common import (
    add_run_flags,
    check_run_flags,
    open_run,
    remove_earlier_results,
    write_results,
)

CONFIGS = {  # name: (description, first agent's options, second agent's options)
    "evaluator": (
        "policy-network rollouts vs random rollouts, network as state evaluator",
        "rollout=policy,p_r=1,lambda=0.5",
        "rollout=random,p_r=1,lambda=0.5",
    ),
    "rollouts_only": (
        "policy-network rollouts vs random rollouts, no state evaluator",
        "rollout=policy,p_r=1,lambda=1",
        "rollout=random,p_r=1,lambda=1",
    ),
    "no_rollouts": (
        "no rollouts (network only) vs random rollouts, network as state evaluator",
        "rollout=none,p_r=0",
        "rollout=random,p_r=1,lambda=0.5",
    ),
}
SCALES = {False: dict(seconds=0.05, games=100), True: dict(seconds=1.0, games=240)}


def table_row(name: str, record: dict) -> str:
    r = record["result"]["overall"]
    a, b = record["per_move"]["A"], record["per_move"]["B"]
    cells = "  ".join(f"{k} {r[k][0]:.2f}±{r[k][1]:.2f}" for k in ("win", "draw", "loss"))
    return (
        f"{name:<14} {cells}  sims {a['simulations']} vs {b['simulations']}, rollouts "
        f"{a['rollouts']:.0f} vs {b['rollouts']:.0f}"
    )


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_flags(parser, "experiment3")
    parser.add_argument(
        "--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="seconds per move per game (CPU scale 0.05; --full 1)",
    )
    parser.add_argument(
        "--games",
        type=int,
        default=None,
        help="games per configuration (CPU scale 100; --full 240)",
    )
    args = parser.parse_args(argv)
    scale = SCALES[args.full]
    args.seconds = scale["seconds"] if args.seconds is None else args.seconds
    args.games = scale["games"] if args.games is None else args.games
    args.configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in args.configs if c not in CONFIGS]
    if unknown or not args.configs:
        parser.error(f"--configs: unknown {unknown}; accepted: {', '.join(CONFIGS)}")
    twice = sorted({c for c in args.configs if args.configs.count(c) > 1})
    if twice:  # the results are kept by name: a second match would replace the first
        parser.error(f"--configs: {', '.join(twice)} given twice; give each configuration once")
    if not 0 < args.seconds < float("inf"):
        parser.error(f"--seconds must be positive and finite, got {args.seconds}")
    check_run_flags(parser, args, "experiment3")
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    run = open_run(args, __spec__.name)
    if run is None:
        return 2
    remove_earlier_results(args.out)
    _, game, step, log = run
    t_start = time.time()
    log(
        f"experiment 3 on {args.workdir} (checkpoint {step}, {game.name} {game.options}): "
        f"{args.seconds} s per move, {args.games} games per configuration"
    )
    base = f"ckpt:{args.workdir},seconds={args.seconds},decisive=0"  # the thesis's search
    if args.search:
        base += f",search={args.search}"
    key = jax.random.PRNGKey(args.seed)
    rows = {}
    for i, name in enumerate(args.configs):
        description, opts_a, opts_b = CONFIGS[name]
        specs = [f"{base},{opts_a}", f"{base},{opts_b}"]
        log(f"{name}: {description}")
        agents = [parse_agent(s, game) for s in specs]
        outcome = play_games(game, *agents, args.games, jax.random.fold_in(key, i))
        record = dict(description=description, **outcome_record(specs, outcome))
        log(format_match(record))
        log(f"[{outcome.wall_seconds:.0f} s]")
        rows[name] = record
    log("summary (first agent's ratios, 95% CI; simulations and rollouts per move):")
    for name, record in rows.items():
        log(table_row(name, record))
    results = dict(
        command="python -m experiments.experiment3 " + " ".join(argv),
        workdir=args.workdir,
        checkpoint=step,
        game=game.name,
        game_options=game.options,
        seconds_per_move=args.seconds,
        games=args.games,
        search=args.search,
        seed=args.seed,
        configs=rows,
        seconds=round(time.time() - t_start, 1),
    )
    write_results(args, results, log)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.experiment3", main))
