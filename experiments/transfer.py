"""Seed 004's transfer experiment (sections 3.5 and 4.2): does a network trained on one game give
another game a head start? Othello from scratch against Othello started from a Connect Four
network's trunk, trainable and frozen, with equal training budgets, then an internal round robin.

    python -m experiments.transfer                          # CPU scale (docs/experiments.md)
    python -m experiments.transfer --source=runs/c4 --iterations=40   # an existing source
    python -m experiments.transfer --game=othello --size=6 --minutes=10

Stages:
1. the source: `--source=RUN[@STEP]`, or (by default) a run of `--source_game` (its configs/
   defaults under the CPU recipe, game options included) trained for `--source_iterations`
   iterations or `--source_minutes` minutes into <workdir>/source;
2. three runs of `--game` (with its options; the CPU recipe's observation options that would
   give it other input planes than the source's stay off unless given, as seed 004 transferred
   between games with the same planes: Othello without its mobility planes from Connect Four),
   each for the config's `iterations` or `--minutes` (the same budget for each): `scratch` (a
   fresh network), `transfer` (`init_from` the source: its trunk, fresh heads, everything trains)
   and `frozen` (the same, `freeze_trunk`: only the heads train, seed 004's second setting), in
   <workdir>/<name>;
3. for each of `--sims` (seed 004: 3 and 25) a round robin of the three final networks
   (`azjax.eval.tournament.round_robin`, `--games` games per pair, colours alternating,
   epsilon-greedy moves `--eps` so that the games differ), and each agent's points over all of
   them (seed 004's Table 2: scratch 174, transferred 26 over 200 games);
4. where the package has the game's solved positions (6x6 Othello, Connect Four, ...), each final
   network's exact error rate on them at `--errors_sims` simulations (evaluate.py errors), the
   transferred ones compared with scratch position by position.

Every Config field is a flag and applies to the source (when trained here) and the three runs;
the network's trunk (num_blocks, num_filters) must be the source's. Writes <out>/results.json
(default <workdir>/results) and a log.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import jax

from azjax import cli, flags, load_config, transfer
from azjax.checkpoint import parse_location
from azjax.config import Config
from azjax.eval import format_tournament, parse_agent, round_robin
from configs.cpu import cpu_recipe
from experiments.common import (
    Log,
    add_errors_flag,
    exact_errors,
    parse_ints,
    refuse_trained,
    remove_earlier_results,
    trained_afresh,
    write_results,
)
from experiments.experiment2 import pooled_scores

RUNS = ("scratch", "transfer", "frozen")
FROZEN = {"transfer": False, "frozen": True}  # the runs started from the source
# CPU scale: configs/cpu.py's recipe, a checkpoint every 5 iterations, no in-loop evaluation.
CPU_RUN = dict(iterations=30, checkpoint_interval=5, eval_interval=0)


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--game", default="othello", help="the target game (default othello)")
    parser.add_argument(
        "--source", default=None, help="an existing source run, PATH[@STEP] (default: train one)"
    )
    parser.add_argument(
        "--source_game", default="connect_four", help="the source game when trained here"
    )
    parser.add_argument(
        "--source_iterations", type=int, default=30, help="source run's iterations (default 30)"
    )
    parser.add_argument(
        "--source_minutes", type=float, default=0.0, help="source run's time budget (0: none)"
    )
    parser.add_argument(
        "--minutes", type=float, default=0.0, help="each target run's time budget (0: none)"
    )
    parser.add_argument(
        "--workdir", type=flags.path, default="runs/transfer", help="default runs/transfer"
    )
    parser.add_argument("--out", type=flags.path, default=None, help="default <workdir>/results")
    parser.add_argument("--sims", default="3,25", help="simulations, one round robin each")
    parser.add_argument("--games", type=int, default=100, help="games per pair (even)")
    parser.add_argument("--eps", type=float, default=0.05, help="epsilon-greedy moves")
    parser.add_argument("--no_progress", action="store_true")
    add_errors_flag(parser)
    config_flags = flags.add_config_flags(
        parser.add_argument_group("run settings (default: configs/cpu.py's recipe)"),
        skip=("game", "games", "init_from", "freeze_trunk"),  # --games: its own
        default_text="see above",
    )
    option_flags = flags.add_game_flags(parser.add_argument_group("--game's options"), None)
    args = parser.parse_args(argv)
    try:
        args.overrides = flags.config_overrides(args, config_flags)
        args.options = flags.game_options(args, args.game, option_flags)
        args.sims = parse_ints("--sims", args.sims, 1)
    except ValueError as e:
        parser.error(str(e))
    if args.games < 2 or args.games % 2:
        parser.error(f"--games must be even and at least 2 (colours alternate), got {args.games}")
    if not 0.0 <= args.eps <= 1.0:
        parser.error(f"--eps must be in [0, 1], got {args.eps}")
    if args.source_iterations < 1:
        parser.error(f"--source_iterations must be at least 1, got {args.source_iterations}")
    args.out = args.out or os.path.join(args.workdir, "results")
    return args


def make_config(game: str, overrides: dict, minutes: float):
    base = {**cpu_recipe(game), **CPU_RUN}
    if minutes:
        base["time_budget"] = minutes
    return load_config(game, {**base, **overrides})


def plan(args, log) -> tuple[Config, Config]:
    """(the source's config, the target runs' config), checked to fit before anything trains: the
    source is `--source`'s run or `--source_game` under the CPU recipe; the targets take
    `--game`'s recipe, except observation options of the recipe's (Othello's mobility planes)
    that give them other input planes than the source's and that the command line did not give:
    those stay off, as seed 004 transferred between games with the same planes. A ValueError
    (one line, `azjax.transfer`'s) where the trunk still does not fit."""
    target = make_config(args.game, {**args.overrides, **args.options}, args.minutes)
    if args.source:
        _, source = transfer.locate(dataclasses.replace(target, init_from=args.source))
    else:
        budget = {"iterations": args.source_iterations}
        source = make_config(args.source_game, {**args.overrides, **budget}, args.source_minutes)
    plain = transfer.matching_planes(source, target)
    if plain and not set(plain) & set(args.options):
        target = make_config(args.game, {**args.overrides, **args.options, **plain}, args.minutes)
        changed = ", ".join(f"{k}={flags.value_text(v)}" for k, v in plain.items())
        log(
            f"{target.game}: {changed}, the input planes of the source's "
            f"{transfer.describe(source)} (seed 004 transferred between games with the same planes)"
        )
    where = args.source or os.path.join(args.workdir, "source")
    transfer.check_compatible(source, dataclasses.replace(target, init_from=where))
    return source, target


def train_source(args, config: Config, log) -> tuple[str, dict | None]:
    """The source run's location, and its summary when trained here."""
    if args.source:
        return args.source, None
    workdir = os.path.join(args.workdir, "source")
    log(f"source: {transfer.describe(config)} in {workdir}")
    summary = trained_afresh(config, workdir, "source", "--workdir", not args.no_progress)
    log(f"source: {summary['iterations']} iterations, {summary['games']} games")
    return workdir, summary


def train_targets(args, base: Config, source: str, log) -> dict[str, dict]:
    """The three target runs of `base`: {name: {workdir, config, summary}}."""
    runs = {}
    for name in RUNS:
        config = base
        if name != "scratch":
            config = dataclasses.replace(base, init_from=source, freeze_trunk=FROZEN[name])
        workdir = os.path.join(args.workdir, name)
        t0 = time.time()
        summary = trained_afresh(config, workdir, name, "--workdir", not args.no_progress)
        with open(os.path.join(workdir, "config.json")) as f:
            saved = json.load(f)
        runs[name] = dict(workdir=workdir, init_from=saved["init_from"], summary=summary)
        origin = f", from {saved['init_from']}" if saved["init_from"] else ""
        log(
            f"{name}: {summary['iterations']} iterations, {summary['games']} games, "
            f"{time.time() - t0:.0f} s{origin}"
        )
    return runs


def tournaments(args, config: Config, runs: dict, log) -> list[dict]:
    game = config.make_game()
    out = []
    for i, sims in enumerate(args.sims):
        t0 = time.time()
        specs = [f"ckpt:{runs[n]['workdir']},sims={sims},eps={args.eps},decisive=0" for n in RUNS]
        agents = [parse_agent(s, game) for s in specs]
        log(f"round robin at {sims} simulations:")
        try:
            record = round_robin(
                game, list(RUNS), agents, args.games, jax.random.PRNGKey(1000 + i), log=log
            )
        finally:
            for agent in agents:
                agent.close()
        record.update(sims=sims, specs=specs, seconds=round(time.time() - t0, 1))
        record["pooled"] = pooled_scores(record)
        log(format_tournament(record))
        out.append(record)
    return out


def points(rounds: list[dict]) -> dict[str, float]:
    """Each agent's points (wins + draws / 2) over every round robin."""
    total = dict.fromkeys(RUNS, 0.0)
    for r in rounds:
        for p in r["pooled"]:
            total[p["agent"]] += p["wins"] + 0.5 * p["draws"]
    return total


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "log.txt"))
    t_start = time.time()
    try:
        if args.source:
            parse_location(args.source)
        trained_here = [*RUNS, *([] if args.source else ["source"])]
        refuse_trained(args.workdir, trained_here, "--workdir", "choose another --workdir")
        source_config, target_config = plan(args, log)
        remove_earlier_results(args.out)  # once nothing refuses the run
        source, source_summary = train_source(args, source_config, log)
        t_source = time.time() - t_start
        runs = train_targets(args, target_config, source, log)
    except ValueError as e:  # a source that does not fit: one line, as train.py says it
        return cli.fail(f"python -m {__spec__.name}", e)
    t_train = time.time() - t_start - t_source
    rounds = tournaments(args, target_config, runs, log)
    total = points(rounds)
    log("points over all round robins: " + ", ".join(f"{n} {p:g}" for n, p in total.items()))
    specs = {name: f"ckpt:{runs[name]['workdir']}" for name in RUNS}
    errors = exact_errors(target_config.make_game(), specs, args.out, args.errors_sims, log)
    results = dict(
        command="python -m experiments.transfer " + " ".join(argv),
        source=dict(location=runs["transfer"]["init_from"], summary=source_summary),
        runs=runs,
        tournaments=rounds,
        points=total,
        errors=errors,
        seconds=round(time.time() - t_start, 1),
        phase_seconds=dict(
            source=round(t_source, 1),
            targets=round(t_train, 1),
            tournaments=round(time.time() - t_start - t_source - t_train, 1),
        ),
    )
    write_results(args, results, log)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.transfer", main))
