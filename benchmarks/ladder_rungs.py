"""The training loop's ladder matches by rung: what one costs against each rung, and what
`azjax.ladder.placement_seconds` costs it at from the rung below (`RUNG_COST_EXPONENT`), which
`--eval_budget` weighs the next evaluation by.

    python -m benchmarks.ladder_rungs --checkpoint=pretrained/connect_four --rungs=8:13
    python -m benchmarks.ladder_rungs --checkpoint=runs/oth8 --rungs=8:13 --eval_games=64

Loads a network (a run folder, at its latest or `--step` checkpoint, or a shipped
`pretrained/NAME`) and builds the match the loop's placement plays against each rung: its
`ladder_games_per_rung(eval_games)` games, the run's own search, greedy, against pure MCTS with
random rollouts at 2^k simulations (`azjax.arena.make_match`; the loop plays its rungs of up to a
few hundred simulations in one program with larger trees, `shared_capacity`, so its small rungs
cost it more). Each is compiled by a first call, then timed (the best of `--repeats`). A row per
rung: seconds, the ratio to the rung below, and the estimate from the rung below (its seconds
times 2^RUNG_COST_EXPONENT).
"""

from __future__ import annotations

import argparse
import functools
import sys

import jax

from azjax import cli, flags
from azjax.arena import make_match, make_search_agent
from azjax.checkpoint import CheckpointError, load_checkpoint
from azjax.eval.ladder import parse_rungs
from azjax.ladder import ladder_games_per_rung, rung_spec, scaled_seconds
from azjax.network import make_apply, make_network
from azjax.search import SearchSpec
from benchmarks.evaluation import best_seconds


def rung_seconds(config, variables, sims: list[int], *, eval_games: int, repeats: int) -> dict:
    """{simulations: seconds of one compiled loop match against that rung}."""
    game = config.make_game()
    agent = make_search_agent(
        game, SearchSpec.from_config(config), make_apply(make_network(config, game))
    )
    n = ladder_games_per_rung(eval_games)
    out = {}
    for i, s in enumerate(sims):
        match = make_match(game, agent, make_search_agent(game, rung_spec(s), None), n)
        key = jax.random.PRNGKey(i)
        out[s] = best_seconds(functools.partial(match, variables, None, key), repeats)
    return out


def table(seconds: dict[int, float]) -> list[str]:
    """The markdown rows: rung, seconds, ratio to the rung below, estimate from the rung below."""
    rows = ["| rung (simulations) | seconds | x the rung below | estimate from the rung below |"]
    rows.append("|--:|--:|--:|--:|")
    below = None
    for s, t in seconds.items():
        if below is None:
            rows.append(f"| {s} | {t:.2f} | | |")
        else:
            guess = scaled_seconds(seconds[below], below, s)  # the budget's estimate
            rows.append(f"| {s} | {t:.2f} | {t / seconds[below]:.2f} | {guess:.2f} |")
        below = s
    return rows


def main(argv=None) -> int:
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--checkpoint", required=True, help="a run folder or pretrained/NAME")
    parser.add_argument("--step", type=int, default=None, help="the run's checkpoint (latest)")
    parser.add_argument("--rungs", default="8:13", help="LO:HI, the rungs 2^LO..2^HI")
    parser.add_argument(
        "--eval_games",
        type=int,
        default=64,
        help="the in-loop evaluation's games, as a run's eval_games (default 64; not read from "
        "the checkpoint)",
    )
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        sims = parse_rungs(args.rungs, anchored=False)
        if args.eval_games < 2 or args.eval_games % 2:
            raise ValueError(f"--eval_games must be even and >= 2, got {args.eval_games}")
        if args.repeats < 1:
            raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
        config, variables, step = load_checkpoint(args.checkpoint, args.step)
    except (ValueError, CheckpointError) as e:
        parser.error(str(e))
    seconds = rung_seconds(
        config, variables, sims, eval_games=args.eval_games, repeats=args.repeats
    )
    print(
        f"# {args.checkpoint} (step {step}), {config.game} {dict(config.game_options)}: "
        f"{ladder_games_per_rung(args.eval_games)} games a match, {config.search} "
        f"{config.num_simulations} sims; backend {jax.default_backend()}"
    )
    print("\n".join(table(seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.ladder_rungs", main))
