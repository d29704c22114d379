"""Seed 002, section 5.1: the expert (N-MCTS guided by the trained apprentice) against the
vanilla MCTS it started from, at equal simulations (paper: 97% wins) and against vanilla MCTS
with twice the simulations (for scale, the paper's vanilla MCTS at 2x won 56% against 1x).

The expert is an ExIt run's checkpoint searched with the run's tree policy and leaf values
(`ExpertSpec.from_config`; --sims, --prior_weight override), vanilla MCTS is plain UCT with
random rollouts (c_b = 0.25). Matches play one game per legal opening with each colour.

    python -m experiments.exit_expert --workdir=runs/exit_datasets/online_grow_s0   # CPU scale
    python -m experiments.exit_expert --workdir=RUN --sims=10000 --full_rounds=4    # the paper's

Writes <out>/results.json and <out>/log.txt (default <workdir>/exit_expert).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax

from azjax import cli, flags
from azjax.checkpoint import load_checkpoint
from azjax.eval.agent import network_apply
from azjax.exit import ExpertSpec
from experiments.common import Log, remove_earlier_results
from experiments.exit_common import expert_agent, opening_match


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workdir", type=flags.path, required=True, help="an ExIt run folder")
    parser.add_argument("--step", type=int, default=None, help="checkpoint (default latest)")
    parser.add_argument(
        "--sims",
        type=int,
        default=None,
        help="simulations of both (default the run's num_simulations)",
    )
    parser.add_argument(
        "--prior_weight",
        type=float,
        default=None,
        help="w_a of the expert (default the run's exit_prior_weight, scaled by --sims over the "
        "run's simulations: w_a goes with the simulations a move gets)",
    )
    parser.add_argument(
        "--full_rounds", type=int, default=1, help="repeat every match this many times (new keys)"
    )
    parser.add_argument("--seed", type=flags.seed, default=0)
    parser.add_argument("--out", type=flags.path, default=None)
    args = parser.parse_args(argv)
    if args.sims is not None and args.sims < 1:
        parser.error(f"--sims must be at least 1, got {args.sims}")
    if args.prior_weight is not None and not 0 <= args.prior_weight < float("inf"):
        parser.error(f"--prior_weight must be >= 0 (0: plain UCT), got {args.prior_weight}")
    if args.full_rounds < 1:
        parser.error(f"--full_rounds must be at least 1, got {args.full_rounds}")
    args.out = args.out or os.path.join(args.workdir, "exit_expert")
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    try:
        config, variables, step = load_checkpoint(args.workdir, args.step)
    except (ValueError, FileNotFoundError) as e:
        return cli.fail(f"python -m {__spec__.name}", e)
    log = Log(os.path.join(args.out, "log.txt"))
    remove_earlier_results(args.out)
    t0 = time.time()
    game = config.make_game()
    sims = args.sims or config.num_simulations
    overrides = dict(num_simulations=sims)
    overrides["prior_weight"] = (
        args.prior_weight
        if args.prior_weight is not None
        else config.exit_prior_weight * sims / config.num_simulations
    )
    spec = ExpertSpec.from_config(config, **overrides)
    expert = expert_agent(f"expert{sims}", game, spec, network_apply(config), variables)
    log(f"expert of {args.workdir}@{step} ({spec}) against vanilla MCTS; load {os.getloadavg()}")
    rows = []
    for factor in (1, 2):
        vanilla = expert_agent(
            f"mcts{factor * sims}", game, ExpertSpec.vanilla(factor * sims), None, None
        )
        for r in range(args.full_rounds):
            key = jax.random.fold_in(jax.random.PRNGKey(args.seed), 2 * r + factor)
            m = opening_match(game, expert, vanilla, key)
            rows.append(dict(factor=factor, round=r, **m))
            log(
                f"{expert.name} vs {vanilla.name}: W/D/L {m['wdl']}, score {m['score']:.3f} +- "
                f"{m['ci95']:.3f} ({m['games']} games, {m['seconds']} s)"
            )
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(
            dict(
                command="python -m experiments.exit_expert " + " ".join(argv),
                checkpoint=step,
                spec=str(spec),
                matches=rows,
                seconds=round(time.time() - t0, 1),
            ),
            f,
            indent=2,
        )
    log(f"wall time {time.time() - t0:.0f} s; results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.exit_expert", main))
