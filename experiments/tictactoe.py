"""Tic-Tac-Toe: train with configs/tictactoe.py, then play the network-guided search against
perfect play with both colours. Success is zero losses.

    python -m experiments.tictactoe                          # train in runs/exp_tictactoe, evaluate
    python -m experiments.tictactoe --workdir=runs/ttt --eval_only --games=400
    python -m experiments.tictactoe --iterations=60 --learning_rate=0.001   # config overrides

The trained agent searches with the config's simulations and no noise (argmax of visits); the
perfect player picks uniformly among optimal moves (experiments.perfect_play), so the games cover
many lines. `--games` games are played with each colour.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax

from azjax import (
    MatchResult,
    SearchSpec,
    flags,
    load_config,
    make_apply,
    make_match,
    make_network,
    make_search_agent,
    train_and_evaluate,
)
from azjax.config import game_defaults
from experiments.common import restore_variables
from experiments.perfect_play import make_perfect_agent


def play_perfect(config, variables, games_per_colour: int, seed: int = 1) -> MatchResult:
    """The trained search (config's simulations, no noise) against the perfect player."""
    game = config.make_game()
    apply = make_apply(make_network(config, game))
    agent = make_search_agent(game, SearchSpec.from_config(config), apply)
    match = make_match(game, agent, make_perfect_agent(), 2 * games_per_colour)
    return MatchResult.from_returns(*match(variables, None, jax.random.PRNGKey(seed)))


def parse(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", default="runs/exp_tictactoe")
    parser.add_argument(
        "--eval_only",
        action="store_true",
        help="skip training; evaluate the latest checkpoint in --workdir",
    )
    parser.add_argument("--games", type=int, default=400, help="games with each colour")
    parser.add_argument("--no_progress", action="store_true")
    config_flags = flags.add_config_flags(
        parser.add_argument_group("run settings"),
        skip=("game",),
        defaults=game_defaults("tictactoe"),
    )
    args = parser.parse_args(argv)
    try:
        overrides = flags.config_overrides(args, config_flags)
    except ValueError as e:
        parser.error(str(e))
    return args, overrides


def main(argv=None) -> int:
    args, overrides = parse(sys.argv[1:] if argv is None else argv)
    t0 = time.time()
    summary = None
    if not args.eval_only:
        config = load_config("tictactoe", overrides)
        summary = train_and_evaluate(config, args.workdir, progress=not args.no_progress)
    t_train = time.time() - t0
    config, variables, step = restore_variables(args.workdir)
    t1 = time.time()
    result = play_perfect(config, variables, args.games)
    t_eval = time.time() - t1
    report = dict(
        workdir=os.path.abspath(args.workdir),
        checkpoint=step,
        simulations=config.num_simulations,
        train_seconds=round(t_train, 1),
        eval_seconds=round(t_eval, 1),
        training_games=summary["games"] if summary else None,
        as_x=dict(zip("wdl", result.first)),
        as_o=dict(zip("wdl", result.second)),
        losses=result.losses,
        success=result.losses == 0,
    )
    print(
        f"vs perfect play, {args.games} games per colour, checkpoint {step}, "
        f"{config.num_simulations} simulations:"
    )
    print(f"  as X (first):  W {result.first[0]}  D {result.first[1]}  L {result.first[2]}")
    print(f"  as O (second): W {result.second[0]}  D {result.second[1]}  L {result.second[2]}")
    print(json.dumps(report, indent=2))
    with open(os.path.join(args.workdir, "vs_perfect.json"), "w") as f:
        json.dump(report, f, indent=2)
    return 0 if result.losses == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
