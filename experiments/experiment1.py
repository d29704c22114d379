"""Seed 000's Experiment 1 (6x6 Hex or Othello), at CPU scale or with Table 5.1's settings.

    python -m experiments.experiment1 --game=hex                 # CPU scale, ~25 min on 2 cores
    python -m experiments.experiment1 --game=othello --minutes=12
    python -m experiments.experiment1 --game=hex --full          # configs/hex_thesis.py (Table 5.1)
    python -m experiments.experiment1 --game=hex --eval_only     # re-evaluate a finished run
    python -m experiments.experiment1 --game=hex --num_filters=48   # any Config field
    python -m experiments.experiment1 --game=hex --size=5 --swap    # any game option

Three stages, timed separately:
1. train (azjax.train_and_evaluate, in-loop evaluation off) until `--minutes` or the config's
   `iterations`, a checkpoint every `checkpoint_interval` iterations;
2. evaluate every checkpoint, like seed 000 Figures 5.1 and 5.2: the network's search (the
   config's simulations, no noise) against pure MCTS with random rollouts at twice the
   simulations, and, both epsilon-greedy (epsilon = `eval_epsilon`), against the previous
   checkpoint (the first against the untrained network);
3. play the final network with `--final_simulations` against pure MCTS at each of
   `--mcts_simulations`, `--final_games` games each, colours alternating.

Writes <out>/results.json and <out>/learning_curve.png (out defaults to <workdir>/results).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import jax
import numpy as np

from azjax import (
    MatchResult,
    SearchSpec,
    cli,
    flags,
    load_config,
    make_apply,
    make_match,
    make_network,
    make_search_agent,
    train_and_evaluate,
)
from azjax.checkpoint import read_config
from azjax.config import config_names, named_defaults
from azjax.eval import training_games
from azjax.loop_eval import evaluation_matches, match_args
from configs.cpu import cpu_recipe
from experiments.common import (
    Log,
    add_resume_flag,
    check_resume,
    checkpoint_steps,
    default_workdir,
    initial_variables,
    parse_ints,
    remove_earlier_results,
    restore_variables,
    wilson,
    write_results,
)

# CPU scale: configs/cpu.py's recipe, run by the time budget (--minutes); self-play and the
# curve use its 32 simulations, the final matches 50 (--final_simulations).
CPU_RUN = dict(iterations=1000, checkpoint_interval=5)
CPU_MINUTES = 22.0  # --minutes at CPU scale; --full runs Table 5.1's iterations, however long


def make_config(game: str, full: bool, minutes: float, overrides: dict):
    if full:  # Table 5.1 as configs/<game>_thesis.py has it
        base = named_defaults(f"{game}_thesis", game)[1]
    else:
        base = {**cpu_recipe(game), **CPU_RUN}
    base.update(eval_interval=0)  # this script evaluates the checkpoints afterwards
    if minutes:
        base["time_budget"] = minutes
    return load_config(game, {**base, **overrides})


def _record(result: MatchResult) -> dict:
    low, high = wilson(result.wins + 0.5 * result.draws, result.games)
    return dict(
        games=result.games,
        wins=result.wins,
        draws=result.draws,
        losses=result.losses,
        score=result.score,
        score_ci95=[low, high],
        first=dict(zip("wdl", result.first)),
        second=dict(zip("wdl", result.second)),
    )


def evaluate_checkpoints(workdir: str, games: int, seed: int = 0, log=print) -> list[dict]:
    """Every checkpoint against pure MCTS (2x simulations) and against the one before it."""
    steps = checkpoint_steps(workdir)
    config, _, _ = restore_variables(workdir, steps[-1])
    vs_previous, vs_mcts = evaluation_matches(config, games)  # as the training loop plays them
    game = config.make_game()
    played = training_games(workdir)

    rows = []
    previous = initial_variables(config)
    key = jax.random.PRNGKey(seed)
    for step in steps:
        _, variables, _ = restore_variables(workdir, step)
        key, k_mcts, k_prev = jax.random.split(key, 3)
        t0 = time.time()
        m = MatchResult.from_returns(
            *vs_mcts(*match_args(config, game, games, variables, None, k_mcts))
        )
        p = MatchResult.from_returns(
            *vs_previous(*match_args(config, game, games, variables, previous, k_prev))
        )
        rows.append(
            dict(
                iteration=step,
                training_games=played.get(step),
                vs_mcts=_record(m),
                vs_previous=_record(p),
            )
        )
        log(
            f"checkpoint {step:4d} ({played.get(step)} games): vs MCTS-{2 * config.num_simulations}"
            f" {m.score:.2f} (W{m.wins} D{m.draws} L{m.losses}), vs previous {p.score:.2f} "
            f"[{time.time() - t0:.0f}s]"
        )
        previous = variables
    return rows


def final_matches(
    workdir: str,
    simulations: int,
    mcts_simulations: list[int],
    games: list[int],
    seed: int = 1,
    log=print,
) -> list[dict]:
    """The latest network with `simulations` against pure MCTS at each of `mcts_simulations`,
    `games[i]` games against the i-th."""
    config, variables, step = restore_variables(workdir)
    game = config.make_game()
    apply = make_apply(make_network(config, game))
    agent = make_search_agent(
        game,
        dataclasses.replace(SearchSpec.from_config(config), num_simulations=simulations),
        apply,
    )
    out = []
    for i, n in enumerate(mcts_simulations):
        t0 = time.time()
        mcts = make_search_agent(game, SearchSpec.pure_mcts(n, search="puct"), None)  # seed 000's
        match = make_match(game, agent, mcts, games[i])
        res = MatchResult.from_returns(*match(variables, None, jax.random.PRNGKey(seed + i)))
        rec = dict(
            checkpoint=step,
            simulations=simulations,
            mcts_simulations=n,
            seconds=round(time.time() - t0, 1),
            **_record(res),
        )
        lo, hi = rec["score_ci95"]
        log(
            f"final (checkpoint {step}, {simulations} sims) vs MCTS-{n}: W{res.wins} D{res.draws} "
            f"L{res.losses} of {res.games}, score {res.score:.3f} (95% CI {lo:.3f}-{hi:.3f}) "
            f"[{rec['seconds']:.0f}s]"
        )
        out.append(rec)
    return out


def plot(rows: list[dict], title: str, mcts_label: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["training_games"] or 0 for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, name, label in (
        (axes[0], "vs_mcts", f"vs {mcts_label}"),
        (axes[1], "vs_previous", "vs previous checkpoint (eps 0.05)"),
    ):
        score = np.array([r[name]["score"] for r in rows])
        ci = np.array([r[name]["score_ci95"] for r in rows])
        ax.plot(x, score, "o-", ms=3)
        ax.fill_between(x, ci[:, 0], ci[:, 1], alpha=0.2)
        ax.axhline(0.5, color="grey", lw=0.6, ls="--")
        ax.set_ylim(0, 1)
        ax.set_xlabel("self-play games")
        ax.set_ylabel("score")
        ax.set_title(label, fontsize=10)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--game", default="hex")
    parser.add_argument(
        "--workdir", type=flags.path, default=None, help="default runs/exp1_<game>[_full]"
    )
    parser.add_argument("--out", type=flags.path, default=None, help="default <workdir>/results")
    parser.add_argument("--full", action="store_true", help="configs/<game>_thesis.py (Table 5.1)")
    parser.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="training time budget (0: none; default 22 at CPU scale, none with --full: Table "
        "5.1's iterations end the run)",
    )
    parser.add_argument("--eval_only", action="store_true", help="skip training")
    add_resume_flag(parser)
    parser.add_argument(
        "--eval_games",
        type=int,
        default=None,
        help="games per checkpoint match (default 64; 40 with --full, Table 5.1's after training)",
    )
    parser.add_argument(
        "--final_games",
        default="200,200",
        help="games against each --mcts_simulations opponent (one number: all)",
    )
    parser.add_argument("--final_simulations", type=int, default=50)
    parser.add_argument("--mcts_simulations", default="100,1000")
    parser.add_argument("--no_progress", action="store_true")
    config_flags = flags.add_config_flags(
        parser.add_argument_group(
            "run settings (default: CPU scale, or configs/<game>_thesis.py with --full)"
        ),
        skip=("game", "eval_games"),
        default_text="see above",
    )
    option_flags = flags.add_game_flags(parser.add_argument_group("game options"), None)
    args = parser.parse_args(argv)
    if args.minutes is None:
        args.minutes = 0.0 if args.full else CPU_MINUTES
    if args.eval_games is None:
        args.eval_games = 40 if args.full else 64
    if not 0 <= args.minutes < float("inf"):
        parser.error(f"--minutes must be >= 0 (0: no limit), got {args.minutes}")
    try:
        overrides = {
            **flags.config_overrides(args, config_flags),
            **flags.game_options(args, args.game, option_flags),
        }
        args.mcts_simulations = parse_ints("--mcts_simulations", args.mcts_simulations, 1)
        args.final_games = parse_ints("--final_games", args.final_games, 2, distinct=False)
    except ValueError as e:
        parser.error(str(e))
    opponents, games = args.mcts_simulations, args.final_games
    if len(games) == 1:
        args.final_games = games = games * len(opponents)
    if len(games) != len(opponents) or any(n % 2 for n in games):
        parser.error("--final_games: one even number, or one per --mcts_simulations entry")
    if args.final_simulations < 1 or args.eval_games < 2 or args.eval_games % 2:
        parser.error("--final_simulations must be at least 1, --eval_games even and at least 2")
    args.workdir = args.workdir or default_workdir(args.game, args.full)
    args.out = args.out or os.path.join(args.workdir, "results")
    args.config = None
    if args.eval_only:
        if args.resume:
            parser.error("--resume trains on and --eval_only skips training: give one of them")
        if overrides:
            parser.error(
                "--eval_only plays the checkpoints with the run's own settings: drop "
                + ", ".join(f"--{name}" for name in overrides)
            )
        try:
            read_config(args.workdir)  # a run with checkpoints, before any folder is made in it
        except ValueError as e:
            parser.error(f"--eval_only: {e}")
    else:
        thesis = sorted(n[: -len("_thesis")] for n in config_names() if n.endswith("_thesis"))
        if args.full and args.game not in thesis:
            parser.error(
                f"--full: no thesis settings for {args.game} (configs/{args.game}_thesis.py); "
                f"games that have them: {', '.join(thesis)}"
            )
        try:  # before any folder is made
            args.config = make_config(args.game, args.full, args.minutes, overrides)
            check_resume(args.workdir, args.resume, "--eval_only evaluates it", args.config)
        except ValueError as e:
            parser.error(str(e))
    for folder, flag in ((args.workdir, "--workdir"), (args.out, "--out")):
        try:
            flags.check_out(folder, flag)  # before the training, not after it
        except ValueError as e:
            parser.error(str(e))
    return args, overrides


def main(argv=None) -> int:
    args, _ = parse(sys.argv[1:] if argv is None else argv)
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "log.txt"))
    remove_earlier_results(args.out, "learning_curve.png")
    t_start = time.time()
    summary = None
    if not args.eval_only:
        config = args.config
        log(f"training {args.game} in {args.workdir}: {config.to_json()}")
        summary = train_and_evaluate(
            config, args.workdir, resume=args.resume, progress=not args.no_progress
        )
        log(
            f"trained: {summary['iterations']} iterations, {summary['games']} games, "
            f"{summary['wall_seconds']} s"
        )
    t_train = time.time() - t_start
    rows = evaluate_checkpoints(args.workdir, args.eval_games, log=log)
    t_curve = time.time() - t_start - t_train
    final = final_matches(
        args.workdir, args.final_simulations, args.mcts_simulations, args.final_games, log=log
    )
    t_final = time.time() - t_start - t_train - t_curve
    config, _, _ = restore_variables(args.workdir)
    title = (
        f"{config.game} {dict(config.game_options)}: {config.num_blocks}x{config.num_filters} "
        f"net, {config.num_simulations} sims"
    )
    plot(
        rows,
        title,
        f"pure MCTS-{2 * config.num_simulations}",
        os.path.join(args.out, "learning_curve.png"),
    )
    results = dict(
        command="python -m experiments.experiment1 "
        + " ".join(sys.argv[1:] if argv is None else argv),
        config=json.loads(config.to_json()),
        training=summary,
        seconds=dict(
            train=round(t_train, 1),
            checkpoint_evals=round(t_curve, 1),
            final_matches=round(t_final, 1),
            total=round(time.time() - t_start, 1),
        ),
        curve=rows,
        final=final,
    )
    write_results(args, results, log)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.experiment1", main))
