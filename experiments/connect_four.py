"""Seed 001's Connect Four evaluation (section 5.2, Table 5.5): the trained network searching with
800 simulations against Minimax(5) and Minimax(6) with the Connect-N heuristic (open lines of
two, `minimax:heuristic=lines2`) and against pure MCTS with 400, 800 and 1200 simulations, 50
games with each colour, printed beside seed 001's results.

    python -m experiments.connect_four --minutes=60          # train (configs/connect_four.py)
    python -m experiments.connect_four --config=connect_four_thesis   # Table 5.4's run (long)
    python -m experiments.connect_four --run=runs/c4         # play a trained run's latest network
    python -m experiments.connect_four --run=runs/c4 --games=10 --mcts_sims=400 --minimax_depths=5

Without `--run` it trains into `--workdir` with `configs/<--config>.py` under the flags (any
Config field or game option) for `--minutes` or the config's iterations, then plays the final
network. The agent is `ckpt:RUN,sims=N` (argmax of visits, no noise); the opponents are the specs
below (OPPONENTS), so `mcts:` follows that agent's search (pure MCTS with random rollouts; seed
001's MCTS opponent is plain UCT). Seed 001's text names MCTS(200), (400) and (600), its Table 5.5
400, 800 and 1200; the defaults follow the table. Writes <out>/results.json and <out>/log.txt.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax

import games
from azjax import cli, flags, load_config, train_and_evaluate
from azjax.config import named_defaults
from azjax.eval.match import play_games
from azjax.eval.minimax import HEURISTICS
from azjax.eval.specs import parse_agent
from experiments.common import (
    Log,
    add_resume_flag,
    check_resume,
    latest_config,
    parse_ints,
    remove_earlier_results,
    write_results,
)

# The players, as agent specs (azjax/eval/specs.py), in one place.
AGENT = "ckpt:{run},sims={sims},decisive=0"  # seed 001's search, no decisive moves
OPPONENTS = {
    "minimax": "minimax:depth={depth},heuristic={heuristic},seed={seed}",
    "mcts": "mcts:sims={sims}",
}

# Seed 001's Table 5.5 from AlphaZero's side: opponent -> ((wins, losses) as white, the first
# player; (wins, losses) as black), 50 games each; the rest were drawn.
THESIS = {
    ("minimax", 5): ((45, 5), (35, 14)),
    ("minimax", 6): ((46, 2), (38, 10)),
    ("mcts", 400): ((30, 19), (22, 23)),
    ("mcts", 800): ((31, 19), (29, 17)),
    ("mcts", 1200): ((25, 25), (19, 29)),
}


def opponents(depths: list[int], mcts_sims: list[int], heuristic: str, seed: int) -> list:
    """[(kind, size, spec)]: Minimax at each depth, then pure MCTS at each simulation count."""
    out = [
        ("minimax", d, OPPONENTS["minimax"].format(depth=d, heuristic=heuristic, seed=seed))
        for d in depths
    ]
    return out + [("mcts", s, OPPONENTS["mcts"].format(sims=s)) for s in mcts_sims]


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run", default=None, help="play this run's latest network; no training")
    parser.add_argument(
        "--workdir", type=flags.path, default="runs/exp_connect_four", help="training run folder"
    )
    parser.add_argument(
        "--config",
        default="connect_four",
        metavar="NAME",
        help="training defaults from configs/NAME.py (connect_four, connect_four_thesis)",
    )
    parser.add_argument("--minutes", type=float, default=0.0, help="training time (0: no limit)")
    add_resume_flag(parser)
    parser.add_argument("--sims", type=int, default=800, help="the network's simulations a move")
    parser.add_argument("--games", type=int, default=50, help="games with each colour")
    parser.add_argument("--minimax_depths", default="5,6", help="Minimax(d) opponents ('' none)")
    parser.add_argument("--mcts_sims", default="400,800,1200", help="MCTS(k) opponents ('' none)")
    parser.add_argument(
        "--heuristic", default="lines2", choices=tuple(HEURISTICS), help="Minimax's heuristic"
    )
    parser.add_argument("--out", type=flags.path, default=None, help="default <run>/connect_four")
    parser.add_argument("--no_progress", action="store_true")
    config_flags = flags.add_config_flags(
        parser.add_argument_group("training settings (over configs/<--config>.py)"),
        skip=("game", "games"),  # --games is this script's own (games a match)
        default_text="--config's",
    )
    option_flags = flags.add_game_flags(parser.add_argument_group("game options"), "connect_four")
    args = parser.parse_args(argv)
    try:
        overrides = {
            **flags.config_overrides(args, config_flags),
            **flags.game_options(args, "connect_four", option_flags),
        }
        args.seed = overrides.get("seed", 0)  # training's, the matches' and Minimax's ties
        args.depths = parse_ints("--minimax_depths", args.minimax_depths, 1, empty_ok=True)
        args.mcts = parse_ints("--mcts_sims", args.mcts_sims, 1, empty_ok=True)
        for flag, value, low in (("--sims", args.sims, 1), ("--games", args.games, 1)):
            if value < low:
                raise ValueError(f"{flag} must be at least {low}, got {value}")
        if not 0 <= args.minutes < float("inf"):
            raise ValueError(f"--minutes must be at least 0 (0: no limit), got {args.minutes}")
        if args.run is None:
            game, args.defaults = named_defaults(args.config, "connect_four")  # cpu: its recipe
            if game not in (None, "connect_four"):  # None: a recipe, or a file naming no game
                raise ValueError(f"--config={args.config} is a {game} config, not Connect 4")
            args.game = "connect_four"
            config = training_config(args, overrides)
            check_resume(args.workdir, args.resume, f"--run={args.workdir} plays it", config)
        elif args.resume:
            raise ValueError("--resume trains on and --run plays a run without training: give one")
        # before the training, not after it
        flags.check_out(args.out or os.path.join(args.run or args.workdir, "connect_four"))
    except ValueError as e:
        parser.error(str(e))
    return args, overrides


def training_config(args, overrides):
    """The Config of the training run: configs/<--config>.py, --minutes, then the flags."""
    base = {**args.defaults, **({"time_budget": args.minutes} if args.minutes else {})}
    return load_config(args.game, {**base, **overrides})


def train(args, overrides) -> tuple[str, float, int]:
    """Train into args.workdir; (run folder, seconds, games played)."""
    config = training_config(args, overrides)
    t0 = time.time()
    summary = train_and_evaluate(
        config, args.workdir, resume=args.resume, progress=not args.no_progress
    )
    return args.workdir, time.time() - t0, summary["games"]


def _wl(wdl) -> str:
    return f"{wdl[0]}-{wdl[2]}" + (f" ({wdl[1]} d)" if wdl[1] else "")


def main(argv=None) -> int:
    args, overrides = parse(sys.argv[1:] if argv is None else argv)
    t0 = time.time()
    training = None
    if args.run is None:
        run, seconds, played = train(args, overrides)
        training = dict(workdir=os.path.abspath(run), seconds=round(seconds, 1), games=played)
    else:
        run = args.run
    try:
        config, step = latest_config(run)
        if config.game != "connect_four":
            raise ValueError(f"--run={run} holds a {config.game} run; Table 5.5 is Connect Four's")
        game = config.make_game()
        agent = parse_agent(AGENT.format(run=run, sims=args.sims), game)
        rivals = opponents(args.depths, args.mcts, args.heuristic, args.seed)
        for _, _, spec in rivals:
            parse_agent(spec, game).close()  # a bad spec or game is refused before any game
    except (ValueError, FileNotFoundError) as e:
        return cli.fail(f"python -m {__spec__.name}", e)
    args.out = args.out or os.path.join(run, "connect_four")
    log = Log(os.path.join(args.out, "log.txt"))
    remove_earlier_results(args.out)
    log(
        f"{agent.name} (checkpoint {step}, {config.game} {dict(config.game_options)}), "
        f"{args.games} games with each colour; seed 001 (Table 5.5) in brackets, W-L of 50"
    )
    log(f"{'opponent':<44}{'as first (white)':<22}{'as second (black)':<22}seconds")
    rows = []
    standard = game == games.make("connect_four")  # seed 001's numbers are for 6x7
    key = jax.random.PRNGKey(args.seed)
    for kind, size, spec in rivals:
        key, k = jax.random.split(key)
        outcome = play_games(game, agent, parse_agent(spec, game), 2 * args.games, k)
        r = outcome.result
        thesis = THESIS.get((kind, size)) if standard else None
        first, second = _wl(r.first), _wl(r.second)
        if thesis:
            first += f" [{thesis[0][0]}-{thesis[0][1]}]"
            second += f" [{thesis[1][0]}-{thesis[1][1]}]"
        log(f"{spec:<44}{first:<22}{second:<22}{outcome.wall_seconds:.0f}")
        rows.append(
            dict(
                opponent=spec,
                kind=kind,
                size=size,
                first=dict(zip("wdl", r.first)),
                second=dict(zip("wdl", r.second)),
                score=r.score,
                seconds=round(outcome.wall_seconds, 1),
                thesis=dict(zip(("first", "second"), thesis)) if thesis else None,
            )
        )
    results = dict(
        agent=agent.name,
        checkpoint=step,
        game=config.game,
        game_options=dict(config.game_options),
        games_per_colour=args.games,
        training=training,
        matches=rows,
        seconds=time.time() - t0,
    )
    write_results(args, results, log)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.connect_four", main))
