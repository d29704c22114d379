"""Shared learning against single-game learning at equal budget (seed 004, sections 3.6 and 4.3,
Figure 5): one network trained on Connect Four and Othello at once, against the networks trained
on each game alone.

    python -m experiments.shared                                # CPU scale (docs/experiments.md)
    python -m experiments.shared --games=connect_four,othello:size=6 --iterations=30
    python -m experiments.shared --eval_only                    # re-evaluate finished runs

Runs, in <out>/shared and <out>/<game> for each game: the shared run (`--games`,
azjax/shared.py) and one single-game run per game, each with the settings of that game in the
shared run (`azjax.shared.game_configs`: the CPU recipe, configs/cpu.py, and the flags given)
and the same seed and iterations. An iteration of the shared run plays and learns each game as
the single run of that game does (the same self-play games, the same optimizer steps on its
replay), so each game gets the same data and updates; the shared run's cost is the sum of the
single runs'.

Then, for each game, seed 004's Figure 5: every checkpoint of the shared run (rows) against every
checkpoint of the game's single run (columns), `--pair_games` games a pair with colours
alternating, `--sims` simulations and epsilon-greedy moves (`--eps`) so that the games differ;
each entry is the shared network's score in percent (seed 004 counted its wins of 100). Where the
package has a game's solved positions (Connect Four, 6x6 Othello, ...), the final shared and
single networks' exact error rates on them at `--errors_sims` simulations (evaluate.py errors),
compared position by position.

Writes <out>/results.json and <out>/log.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax

from azjax import cli, flags, load_config
from azjax.config import options_into_the_list
from azjax.eval import parse_agent
from azjax.eval.match import play_games
from azjax.shared import game_configs, parse_games
from configs.cpu import cpu_recipe
from experiments.common import (
    AGAIN,
    Log,
    add_errors_flag,
    checkpoint_steps,
    exact_errors,
    finished_runs,
    phase_seconds,
    read_config,
    refuse_trained,
    remove_earlier_results,
    train_runs,
    write_results,
)

CPU_RUN = dict(iterations=30, checkpoint_interval=5, eval_interval=0)
SHARED = "shared"  # the shared run's folder; the single runs' are named after their games


def make_configs(games: str, overrides: dict) -> dict:
    """{run name: Config}: the shared run of `games` and a single-game run of each, every one
    with the shared run's settings (the CPU recipe, then `overrides`)."""
    first = parse_games(games)[0][0]
    # no ownership target (the CPU recipe's for Hex and Othello): a shared run has no ownership head
    base = {**cpu_recipe(first), **CPU_RUN, "ownership_weight": 0.0}
    # each game's options from its own recipe (Othello's mobility planes) go into the list
    settings = options_into_the_list({**base, **overrides, "games": games}, "cpu")
    shared = load_config(first, settings)
    return {SHARED: shared, **game_configs(shared)}


def table(out: str, name: str, args, log) -> dict:
    """Figure 5 for game `name`: {rows: shared steps, columns: single steps, score: [[%]]}."""
    shared_dir, single_dir = os.path.join(out, SHARED), os.path.join(out, name)
    config = read_config(single_dir)
    game = config.make_game()
    rows, columns = checkpoint_steps(shared_dir), checkpoint_steps(single_dir)
    opts = f"sims={args.sims},eps={args.eps},decisive=0"  # seed 004's search
    singles = {s: parse_agent(f"ckpt:{single_dir}@{s},{opts}", game) for s in columns}
    scores = []
    for i, r in enumerate(rows):
        agent = parse_agent(f"ckpt:{shared_dir}@{r},game={name},{opts}", game)
        line = []
        for j, c in enumerate(columns):
            key = jax.random.fold_in(jax.random.PRNGKey(args.eval_seed), i * len(columns) + j)
            outcome = play_games(game, agent, singles[c], args.pair_games, key)
            line.append(round(100 * outcome.result.score, 1))
        scores.append(line)
        log(
            f"{name}: shared@{r:<4d} vs single@"
            + " ".join(f"{c}:{v:g}" for c, v in zip(columns, line))
        )
    mean = sum(map(sum, scores)) / max(1, len(rows) * len(columns))
    log(f"{name}: the shared network's mean score against the single-game one: {mean:.1f}%")
    return dict(rows=rows, columns=columns, score=scores, mean=mean)


def final_errors(args, name: str, config, log) -> dict | None:
    """The final shared and single networks' exact error rates on game `name`'s solved positions
    (`experiments.common.exact_errors`; <out>/errors-<name>/errors.json), or None."""
    specs = {
        SHARED: f"ckpt:{os.path.join(args.out, SHARED)},game={name}",
        name: f"ckpt:{os.path.join(args.out, name)}",
    }
    folder = os.path.join(args.out, f"errors-{name}")
    return exact_errors(config.make_game(), specs, folder, args.errors_sims, log)


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--games", default="connect_four,othello:size=6", help="the shared run's games"
    )
    parser.add_argument("--out", type=flags.path, default="runs/shared", help="default runs/shared")
    parser.add_argument("--sims", type=int, default=25, help="simulations in the tables (25)")
    parser.add_argument("--pair_games", type=int, default=20, help="games a pair (even)")
    parser.add_argument("--eps", type=float, default=0.05, help="epsilon-greedy moves")
    parser.add_argument("--eval_seed", type=int, default=0, help="of the table's matches")
    parser.add_argument("--eval_only", action="store_true", help="evaluate finished runs")
    parser.add_argument("--no_progress", action="store_true")
    add_errors_flag(parser)
    config_flags = flags.add_config_flags(
        parser.add_argument_group("run settings of every run (default: the CPU recipe)"),
        skip=("game", "games", "init_from", "freeze_trunk"),
        default_text="see above",
    )
    args = parser.parse_args(argv)
    if args.pair_games < 2 or args.pair_games % 2:
        parser.error(f"--pair_games must be even and at least 2, got {args.pair_games}")
    if args.sims < 1:
        parser.error(f"--sims must be at least 1, got {args.sims}")
    if not 0 <= args.eps <= 1:
        parser.error(f"--eps (the share of random moves) must be in [0, 1], got {args.eps}")
    try:
        configs = make_configs(args.games, flags.config_overrides(args, config_flags))
    except ValueError as e:
        parser.error(str(e))
    return args, configs


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, configs = parse(argv)
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "log.txt"))
    t_start = time.time()
    progress = not args.no_progress
    if args.eval_only:  # the runs as they were trained, whatever the flags say now
        configs, summaries = finished_runs(configs, args.out)
        remove_earlier_results(args.out)
    else:
        refuse_trained(args.out, configs, "--out", AGAIN)  # before the earlier results go
        remove_earlier_results(args.out)
        summaries = train_runs(configs, args.out, log, progress=progress)
    t_train = time.time() - t_start
    tables = {name: table(args.out, name, args, log) for name in configs if name != SHARED}
    errors = {name: final_errors(args, name, configs[name], log) for name in tables}
    results = dict(
        command="python -m experiments.shared " + " ".join(argv),
        configs={k: json.loads(c.to_json()) for k, c in configs.items()},
        training=summaries,
        tables=tables,
        errors=errors,
        seconds=phase_seconds(t_start, t_train),
    )
    write_results(args, results, log)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.shared", main))
