"""Gated against ungated training at the same budget (seed 004, section 3.6; `--gating`).

    python -m experiments.gating --game=connect_four --minutes=15     # ~35 min on 2 cores
    python -m experiments.gating --game=hex --size=5 --minutes=15
    python -m experiments.gating --game=hex --size=5 --eval_only      # re-evaluate both runs
    python -m experiments.gating --game=tictactoe --threshold=0.6 --gating_games=20

Two runs of the CPU recipe (configs/cpu.py, a checkpoint every 5 iterations, no in-loop
evaluation), the same seed and time budget (`--minutes`), in <out>/ungated and <out>/gated; the
gated one adds `--gating=--threshold` (seed 004: 0.55), so its gate matches are paid from the same
budget. Then every checkpoint of both plays one fixed opponent, pure MCTS with random rollouts at
twice the run's simulations (the in-loop evaluation's opponent; the network searches with the
run's simulations, no noise), `--games` games with colours alternating and the same key for the
same checkpoint of both runs. Of the gated run both networks play: the learner's candidate and
the best (the one self-play used).

Where the package has the game's solved positions (Connect Four, 5x5 Hex, ...), the final
networks' exact error rates on them at `--errors_sims` simulations (evaluate.py errors): the
ungated run's, the gated run's learner and its best (`ckpt:RUN,net=best`), paired with the ungated.

Writes <out>/results.json (per checkpoint: iteration, self-play games, seconds of training so far,
scores with 95% Wilson intervals; the gate's record; the error rates) and <out>/log.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax

from azjax import MatchResult, cli, flags, load_config
from azjax.checkpoint import Checkpointer, run_template
from azjax.loop_eval import evaluation_matches, match_args
from azjax.metrics import read_rows
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
    wilson,
    write_results,
)

CPU_RUN = dict(iterations=1000, checkpoint_interval=5, eval_interval=0)
RUNS = ("ungated", "gated")


def make_configs(game: str, minutes: float, threshold: float, overrides: dict) -> dict:
    """{run name: Config}: the CPU recipe for `game`, with and without gating."""
    base = {**cpu_recipe(game), **CPU_RUN, "time_budget": minutes, **overrides}
    return {
        "ungated": load_config(game, {**base, "gating": 0.0}),
        "gated": load_config(game, {**base, "gating": threshold}),
    }


def _record(result: MatchResult) -> dict:
    low, high = wilson(result.wins + 0.5 * result.draws, result.games)
    wdl = [result.wins, result.draws, result.losses]
    return dict(score=result.score, wdl=wdl, ci95=[low, high])


def _progress(workdir: str) -> dict[int, tuple[int, float]]:
    """{iteration: (self-play games, seconds of self-play, learning and gates)} up to it."""
    games, seconds, out = 0, 0.0, {}
    for row in read_rows(os.path.join(workdir, "metrics.jsonl")):
        games += row.get("games", 0)
        seconds += sum(row.get(k, 0.0) for k in ("selfplay_seconds", "train_seconds"))
        seconds += row.get("gate_seconds", 0.0)
        out[row["iteration"]] = (games, seconds)
    return out


def evaluate_run(workdir: str, games: int, seed: int, log) -> list[dict]:
    """Every checkpoint of `workdir` (and, where it has one, its best network) against pure
    MCTS at twice the run's simulations."""
    config = read_config(workdir)
    _, vs_mcts = evaluation_matches(config, games)  # as the training loop plays it
    game = config.make_game()
    progress = _progress(workdir)
    checkpointer = Checkpointer(workdir)
    rows = []
    try:
        for step in checkpoint_steps(workdir):
            run, _ = checkpointer.restore(run_template(read_config(workdir, step)), step)
            key = jax.random.fold_in(jax.random.PRNGKey(seed), step)  # the same for both runs
            played, seconds = progress.get(step, (None, None))
            row = dict(iteration=step, training_games=played, training_seconds=seconds)
            row["network"] = _record(
                MatchResult.from_returns(
                    *vs_mcts(*match_args(config, game, games, run.train.variables, None, key))
                )
            )
            text = f"{row['network']['score']:.2f}"
            if run.gate is not None:
                best = match_args(config, game, games, run.gate.best, None, key)
                row["best"] = _record(MatchResult.from_returns(*vs_mcts(*best)))
                row["best_iteration"] = int(run.gate.best_iteration)
                row["gates_passed"] = [int(run.gate.accepted), int(run.gate.gates)]
                text += (
                    f", best (iteration {row['best_iteration']}) {row['best']['score']:.2f}, "
                    f"gates passed {row['gates_passed'][0]}/{row['gates_passed'][1]}"
                )
            log(
                f"{os.path.basename(workdir)} checkpoint {step:4d} ({played} games, "
                f"{seconds or 0:.0f} s): vs MCTS-{2 * config.num_simulations} {text}"
            )
            rows.append(row)
    finally:
        checkpointer.close()
    return rows


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--out", type=flags.path, default=None, help="default runs/gating_<game>")
    parser.add_argument("--minutes", type=float, default=15.0, help="training budget of each run")
    parser.add_argument("--threshold", type=float, default=0.55, help="the gated run's --gating")
    parser.add_argument("--games", type=int, default=40, help="games per checkpoint vs MCTS")
    parser.add_argument("--eval_seed", type=flags.seed, default=0, help="of the evaluation matches")
    parser.add_argument("--eval_only", action="store_true", help="evaluate finished runs")
    parser.add_argument("--no_progress", action="store_true")
    add_errors_flag(parser)
    config_flags = flags.add_config_flags(
        parser.add_argument_group("run settings of both runs (default: the CPU recipe)"),
        skip=("game", "games", "gating", "time_budget"),  # --games: its own
        default_text="see above",
    )
    option_flags = flags.add_game_flags(parser.add_argument_group("game options"), None)
    args = parser.parse_args(argv)
    if not 0 < args.threshold < 1:
        parser.error(f"--threshold must be in (0, 1), got {args.threshold}")
    if args.games < 2 or args.games % 2:
        parser.error(f"--games must be even and at least 2 (colours alternate), got {args.games}")
    if not 0 <= args.minutes < float("inf"):
        parser.error(f"--minutes must be >= 0 (0: no limit), got {args.minutes}")
    try:
        overrides = {
            **flags.config_overrides(args, config_flags),
            **flags.game_options(args, args.game, option_flags),
        }
        configs = make_configs(args.game, args.minutes, args.threshold, overrides)
    except ValueError as e:
        parser.error(str(e))
    args.out = args.out or os.path.join("runs", f"gating_{args.game}")
    try:
        flags.check_out(args.out)  # before the training, not after it
    except ValueError as e:
        parser.error(str(e))
    return args, configs


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, configs = parse(argv)
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "log.txt"))
    t_start = time.time()
    if args.eval_only:  # the runs as they were trained, whatever the flags say now
        configs, summaries = finished_runs(RUNS, args.out)
        remove_earlier_results(args.out)
    else:
        runs = {name: configs[name] for name in RUNS}
        refuse_trained(args.out, runs, "--out", AGAIN)  # before the earlier results go
        remove_earlier_results(args.out)
        summaries = train_runs(runs, args.out, log, progress=not args.no_progress)
    t_train = time.time() - t_start
    curves = {
        name: evaluate_run(os.path.join(args.out, name), args.games, args.eval_seed, log)
        for name in RUNS
    }
    specs = {name: f"ckpt:{os.path.join(args.out, name)}" for name in RUNS}
    specs["gated best"] = f"{specs['gated']},net=best"  # the network its self-play used
    game = configs["ungated"].make_game()
    errors = exact_errors(game, specs, args.out, args.errors_sims, log)
    results = dict(
        command="python -m experiments.gating " + " ".join(argv),
        configs={k: json.loads(c.to_json()) for k, c in configs.items()},
        training=summaries,
        curves=curves,
        errors=errors,
        seconds=phase_seconds(t_start, t_train),
    )
    write_results(args, results, log)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.gating", main))
