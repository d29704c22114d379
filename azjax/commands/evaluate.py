"""Evaluate agents: matches, round-robin tournaments with Elo ratings, a run's learning curve.

    python evaluate.py match ckpt:runs/hex6@latest,sims=50 mcts:sims=100 --games=100
    python evaluate.py match ckpt:runs/hex6,seconds=1 mcts:seconds=1 --games=40    # equal time
    python evaluate.py match ckpt:runs/hex5 perfect --openings=all     # every opening, both sides
    python evaluate.py tournament random mcts:sims=50 minimax:depth=4 --game=tictactoe --games=20
    python evaluate.py curve runs/hex6 --games=64
    python evaluate.py errors ckpt:runs/othello6,sims=50 mcts:sims=1000   # exact error rates
    python evaluate.py ladder --game=hex --size=5 --rungs=2:9 --games=20    # rate the rungs
    python evaluate.py ladder --game=hex --size=5 --rungs=2:11 --extend     # two rungs more
    python evaluate.py place ckpt:runs/hex5@latest --games=16               # Elo on the ladder
    python evaluate.py export runs/hex6@40 --name=hex6 --card elo=1450      # ship a network
    python evaluate.py match ckpt:pretrained/hex6 mcts:sims=100             # a shipped network

Agents are specs (azjax/eval/specs.py): `ckpt:PATH[@STEP|@latest|@best[:M]][,sims=..,
search=puct|gumbel,rollout=none|random|policy,p_r=..,lambda=..,eps=..,seconds=..]` (@best[:M]: the
step its in-loop evaluation scored best, by the run's --best_by or by M), `mcts[:sims=..,search=..]`
(pure MCTS with random rollouts: UCT with c_uct = 1.4 as OpenSpiel's bot by default;
`mcts:search=puct` is seed 000's PUCT baseline), `spiel[:sims=..]`, `random`, `minimax[:depth=D]`,
`reversi[:depth=D]` (8x8 Othello's alpha-beta engine), `perfect`, `human`, `gtp:"COMMAND"`. The
game comes from --game (with --size, --swap, --rows, --cols, --connect) or else from the first
ckpt agent's checkpoint; a checkpoint of another game or size is refused. Each agent moves first
in half of the games: the first agent in the first half.

- match: wins / draws / losses of the first agent with 95% confidence intervals (normal
  approximation, seed 000 Appendix A), overall and split by who moved first; simulations,
  expected rollouts and seconds per move of each agent (seed 000 Table 5.6).
- tournament: every pair plays --games games; the win-ratio matrix (wins + draws/2) as a heatmap
  (seed 000 Figure 5.3) and maximum-likelihood Elo ratings (mean 0) with standard errors.
- curve: every checkpoint of a run against the previous one (the first against the network the run
  started from, untrained or its --init_from; both epsilon-greedy) and against pure MCTS with twice
  the simulations, as in the training loop's evaluation; plotted like seed 000 Figures 5.1 and 5.2.
  Where the run's metrics.jsonl has `eval/elo` (the in-loop ladder placement) it also draws Elo over
  time and over self-play positions (curve_elo.png). Where the package has solved positions for the
  game (errors, below), each checkpoint's exact error rate too (curve_errors.png); --errors_only
  measures that alone, without the matches. --measures=ladder (or matches,errors,ladder) places
  every checkpoint on the game's Elo ladder as place does, each from the rating of the one before
  (--ladder_games, --rounds, --table as place's) on the rungs the run's loop plays
  (--ladder_max_sims): an Elo curve however few placements the run's evaluation budget let its loop
  play, drawn in curve_elo.png beside the loop's. --every=K measures every K-th checkpoint, counted
  back from the last.
- errors: each agent's exact error rate on the game's solved positions (azjax/solved.py: the share
  of middle-game positions where its move throws a win or a draw away, by a solver's values;
  Tic-Tac-Toe, Connect Four, 5x5 and 6x6 Hex, 6x6 Othello and 8x8 Othello's endgame ship a set),
  with 95% intervals, and each later agent against the first position by position; writes
  errors.json. No opponent, no match noise: the finest measure of strength here, and it does not
  saturate short of perfect play.
- ladder: rates the rungs of the Elo ladder, pure MCTS (UCT, random rollouts) at 2^k simulations
  (--rungs=LO:HI), by a round robin of the pairs at most --span rungs apart; ML Elo with the
  16-simulation rung at 0; writes the table (default: azjax/ladders/ in a source checkout, else
  ./ladders/). With --extend it keeps the table's games and plays only the pairs of the rungs it
  adds.
- place: an agent's Elo on the game's ladder: rounds of --games games against the two rungs
  bracketing its current estimate; --rounds=auto (the default) plays 4, then more while a next
  round would meet a rung it has not played (from the anchor a strong agent climbs about a rung
  a round), --rounds=N exactly N; prints and writes place.json. Several agents are placed in
  turn, each as it would be alone, then ranked best first with each one's Elo below the best and
  that difference's 95% interval (place.json: placements, ranking).
- export: a run's checkpoint as a network folder (config.json, variables.msgpack: params and
  batch statistics, float16 by default; card.json: source, precision, the --card fields) in
  --to (default: the package's azjax/pretrained/ in a source checkout, to be shipped with it,
  else ./pretrained/ where the package is installed); refuses an
  existing NAME without --force. `ckpt:pretrained/NAME` (and train.py --init_from=pretrained/NAME)
  then loads it; a local folder pretrained/NAME is used before the package's.

Every game's moves are kept: match.json, and each match of tournament.json, hold `game_records`,
one {moves, result, a_played} per game (the move names from the initial position, an opening
included, "resign" last where a side resigned; the winning colour or "draw"; the first agent's
colour). A match also writes one record file per game into --out/games/ (azjax/eval/
game_records.py): game-0001.sgf for Hex (SGF as HexGui reads it, FF[4] GM[11] SZ[n],
;B[c3];W[swap-pieces]..), game-0001.txt for the others: Othello `f5d6c3..` (passes left out),
Connect Four `4453..` (columns from 1), Tic-Tac-Toe `b2 a1 ..`.

Writes JSON and PNGs to --out (default runs/eval/<command>-<time>), checked before any game is
played. Exit code 2 for bad input (unknown agents or options, missing checkpoints, a checkpoint of
another game, an --out that cannot be written), one line each (`--debug` shows tracebacks); 1 for
a GTP engine that fails. Ctrl-C or SIGTERM stops at once (130 or 143) and keeps what is finished,
marked `"complete": false`: curve.json the checkpoints played, tournament.json the matches,
match.json the games (their `game_records` numbered by `game`, from 1, and their record files in
games/; a match of two batched agents ends all its games in one compiled call, so
only a Python-loop match, against minimax, perfect, gtp, spiel, reversi, human or a `seconds`
budget, has finished games before its end).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time

import games
from azjax import cli, flags, solved
from azjax.commands import describe, split_cpu
from azjax.commands import prog as prog_name

OUT_LOCK = ".lock"  # held in --out while a command writes there (checkpoint.WorkdirLock)
GAMES = {"match": 100, "tournament": 20}  # --games without --openings (with them: twice theirs)
# curve's options whose default is set after checking that its measures use them (`check_args`)
CURVE_DEFAULTS = {"games": 64, "ladder_games": 16, "rounds": "auto"}
# curve's options by the measure that uses them: given without it, they would change nothing
CURVE_OPTIONS = {
    "matches": ("games", "mcts_sims", "epsilon"),
    "ladder": ("ladder_games", "rounds", "ladder_max_sims", "table"),
}


def build_parser(*, prog: str | None = None) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser, and the names of its game option flags (every option of every game);
    `prog`: the name in its usage (default: as run)."""
    prog = prog or prog_name("evaluate.py")
    parser = flags.Parser(
        prog=prog,
        description=describe(__doc__, prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    common = flags.Parser(add_help=False)
    common.add_argument(
        "--seed",
        type=flags.seed,
        default=0,
        help="random seed (default 0): the openings, the searches' keys and the minimax, "
        "perfect and spiel agents whose spec has no seed= (a match's or tournament's i-th agent "
        "takes seed + i)",
    )
    common.add_argument(
        "--debug", action="store_true", help="show tracebacks of errors instead of one line"
    )
    common.add_argument(
        "--cpu_devices",
        default=None,
        metavar="N|auto",
        help="on a CPU, split the games of each match of two batched agents (ckpt, mcts, random; "
        "no seconds=) and errors' positions over N devices, one per core, as train.py "
        "--cpu_devices does (docs/scaling.md); a match whose games do not split into halves "
        "over them plays on one. Not the default: each device plays with its own key, so the "
        "games depend on the count. auto: one per CPU this process may use",
    )
    common.add_argument(
        "--out",
        type=flags.path,
        default=None,
        help="output folder (default: a new runs/eval/<command>-<time>; not for ladder, which "
        "writes its --table)",
    )
    game = common.add_argument_group("game (default: from the first ckpt agent; curve: the run's)")
    game.add_argument("--game", default=None, help=f"one of {', '.join(games.names())}")
    option_flags = flags.add_game_flags(game, None)

    match = commands.add_parser("match", parents=[common], help="two agents, N games")
    match.add_argument("agents", nargs=2, metavar="AGENT")
    match.add_argument("--games", type=int, default=None, help=f"games (default {GAMES['match']})")
    match.add_argument(
        "--openings",
        default="none",
        help="none | all (every legal first move) | random:N[:PLIES] (N random "
        "positions after PLIES plies, default 2): each opening is played with both colours, "
        "and --games is then twice their number (the default; no other is taken). Against a "
        "perfect player (Hex up to 5x5, Tic-Tac-Toe) the record counts the won sides won",
    )
    tour = commands.add_parser("tournament", parents=[common], help="round robin, Elo")
    tour.add_argument("agents", nargs="+", metavar="AGENT")
    tour.add_argument(
        "--games", type=int, default=None, help=f"games per pair (default {GAMES['tournament']})"
    )
    tour.add_argument(
        "--openings",
        default="none",
        help="none | all | random:N[:PLIES]: every pair plays each opening once with each "
        "colour (--games is then twice their number), as match's --openings",
    )
    curve = commands.add_parser("curve", parents=[common], help="a run's checkpoints")
    curve.add_argument("run", metavar="RUN_DIR")
    curve.add_argument(
        "--games",
        type=int,
        default=None,
        help=f"games per match (default {CURVE_DEFAULTS['games']})",
    )
    curve.add_argument(
        "--sims", type=int, default=None, help="the network's simulations (default: the run's)"
    )
    curve.add_argument(
        "--mcts_sims",
        type=int,
        default=None,
        help="pure MCTS simulations (default: twice the network's)",
    )
    curve.add_argument(
        "--errors_only",
        action="store_true",
        help="no matches: each checkpoint's exact error rate on the game's solved positions "
        "alone (seconds a checkpoint; the package's sets: " + ", ".join(solved.shipped()) + ")",
    )
    curve.add_argument(
        "--every",
        type=int,
        default=1,
        help="measure every K-th checkpoint, counted back from the last (always measured; "
        "default 1: all of them)",
    )
    curve.add_argument(
        "--measures",
        default=None,
        help="what each checkpoint gets, comma-separated: matches (against the previous "
        "checkpoint and pure MCTS), errors (the exact error rate), ladder (a placement on the "
        "Elo ladder); default matches,errors (errors where the package has solved positions)",
    )
    curve.add_argument(
        "--ladder_games",
        type=int,
        default=None,
        help="with --measures=ladder: games per rung and round (default 16, as place's --games)",
    )
    curve.add_argument(
        "--rounds",
        default=None,
        help="with --measures=ladder: each placement's rounds, as place's (default auto)",
    )
    curve.add_argument(
        "--ladder_max_sims",
        type=int,
        default=None,
        help="with --measures=ladder: play the rungs of at most this many simulations "
        "(default: the run's eval_ladder_max_sims, the loop's own; 0: every rung, as place)",
    )
    curve.add_argument(
        "--table",
        type=flags.path,
        default=None,
        help="with --measures=ladder: the ladder table (default: ./ladders/'s where it holds the "
        "game's, else the package's)",
    )
    curve.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="epsilon-greedy against the previous checkpoint (default: the run's eval_epsilon)",
    )
    errors = commands.add_parser(
        "errors", parents=[common], help="exact error rates on solved positions"
    )
    errors.add_argument("agents", nargs="+", metavar="AGENT")
    errors.add_argument(
        "--positions",
        type=flags.path,
        default=None,
        help="a set of solved positions (default: the package's for the game, azjax/solved/)",
    )
    ladder = commands.add_parser("ladder", parents=[common], help="rate the Elo ladder's rungs")
    ladder.add_argument(
        "--rungs", default="2:9", help="LO:HI, rungs of 2^LO..2^HI simulations (default 2:9)"
    )
    ladder.add_argument("--games", type=int, default=20, help="games per pair (default 20)")
    ladder.add_argument(
        "--span", type=int, default=2, help="pairs at most this many rungs apart play (default 2)"
    )
    ladder.add_argument(
        "--table",
        type=flags.path,
        default=None,
        help="the table's path (default: azjax/ladders/ in a source checkout, else ./ladders/)",
    )
    ladder.add_argument(
        "--extend",
        action="store_true",
        help="keep the games of the table's rated pairs and play only the pairs --rungs adds "
        "(a longer ladder without replaying the rated one); --rungs must hold its rungs",
    )
    place = commands.add_parser(
        "place", parents=[common], help="agents' Elo on the ladder (several: ranked)"
    )
    place.add_argument("agents", nargs="+", metavar="AGENT")
    place.add_argument(
        "--rounds",
        default="auto",
        help="rounds: auto (default: 4, then more while a next round would meet a rung it has "
        "not played, at most one a rung) or a whole number (exactly that many)",
    )
    place.add_argument(
        "--games", type=int, default=16, help="games per rung and round (default 16)"
    )
    place.add_argument(
        "--table",
        type=flags.path,
        default=None,
        help="the ladder table (default: ./ladders/'s where it holds the game's, else the "
        "package's)",
    )
    export = commands.add_parser(
        "export", help="a run's network as a small folder (azjax/pretrained), e.g. to ship"
    )
    export.add_argument(
        "run",
        metavar="RUN[@STEP|@best[:MEASURE]]",
        help="a run folder (default: latest step; @best: its best-evaluated, by the run's "
        "--best_by or by MEASURE: opponent, elo, error_rate or auto)",
    )
    export.add_argument("--name", required=True, help="the network's name (pretrained/NAME)")
    export.add_argument(
        "--to",
        type=flags.path,
        default=None,
        help="the folder to export into (default: the package's store in a source checkout, "
        "else ./pretrained, which pretrained/NAME finds first)",
    )
    export.add_argument(
        "--card",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a field of card.json (repeat; VALUE is read as JSON where it parses, else text): "
        "command, iterations, wall_time, machine, elo, results, ...",
    )
    export.add_argument(
        "--dtype", default="float16", help="float16 (default: half the size) or float32"
    )
    export.add_argument(
        "--compute_dtype",
        default=None,
        help="the dtype the exported config.json computes in, float32 or bfloat16 (default: the "
        "run's; float32 plays faster on a CPU than a bfloat16-trained network)",
    )
    export.add_argument("--force", action="store_true", help="replace an existing NAME")
    export.add_argument(
        "--debug", action="store_true", help="show tracebacks of errors instead of one line"
    )
    return parser, option_flags


def resolve_game(args, option_flags: list[str]) -> games.Game:
    """The game from --game and its options, or else from the first ckpt agent's checkpoint."""
    from azjax.eval import game_for

    options = flags.game_options(args, args.game, option_flags)
    return game_for(getattr(args, "agents", []), args.game, options)


def out_folder(args) -> str:
    """--out (made when the first file is written), or else the name of a new folder
    runs/eval/<command>-<time> (`reserve` makes it)."""
    return args.out or os.path.join(
        "runs", "eval", f"{args.command}-{time.strftime('%Y%m%d-%H%M%S')}"
    )


def reserve(folder: str) -> str:
    """`folder`, or `folder`-2, -3, ... where that exists, made now: two evaluations started in
    the same second write into folders of their own instead of over each other's files."""
    path, k = folder, 1
    while True:
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            k += 1
            path = f"{folder}-{k}"


def default_games(args) -> None:
    """match's and tournament's --games where neither it nor --openings was given."""
    if args.command in GAMES and args.games is None and args.openings == "none":
        args.games = GAMES[args.command]


def check_curve_run(run: str) -> None:
    """ValueError when curve's RUN_DIR names one checkpoint (`RUN@STEP`, `RUN/checkpoints/STEP`,
    an exported network) rather than a run folder, whose every checkpoint curve evaluates."""
    from azjax import pretrained
    from azjax.checkpoint import resolve_run

    if os.path.isdir(os.path.join(run, "checkpoints")):
        return  # a run folder, whatever its name holds
    head, tail = os.path.split(os.path.normpath(run))
    one = "@" in run or (tail.isdigit() and os.path.basename(head) == "checkpoints")
    if one or ("@" not in run and pretrained.is_exported(resolve_run(run))):
        what = "an exported network, one checkpoint" if not one else "one checkpoint"
        raise ValueError(
            f"curve takes a run folder and evaluates each of its checkpoints, got {run!r} "
            f"({what}): give a run's folder, and --every to thin them (one checkpoint: match, "
            f"place or errors with ckpt:{run})"
        )


def check_args(args, folder: str) -> None:
    """What can be checked before any game: the curve's options, the output `folder` (the agents'
    numbers are checked against their bounds when the specs are parsed, also before any game)."""
    from azjax.eval.curve import check_curve_options, parse_measures
    from azjax.ladder import parse_rounds

    if args.command == "curve":
        check_curve_run(args.run)
        check_curve_options(
            sims=args.sims,
            mcts_sims=args.mcts_sims,
            epsilon=args.epsilon,
            ladder_games=args.ladder_games,
            ladder_max_sims=args.ladder_max_sims,
            every=args.every,
        )
        measures = parse_measures(args.measures, errors_only=args.errors_only)
        measured = ("matches", "errors") if measures is None else measures  # None: the default
        for measure, names in CURVE_OPTIONS.items():
            given = [f"--{n}" for n in names if getattr(args, n) is not None]
            if given and measure not in measured:
                raise ValueError(
                    f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for {measure}: give "
                    f"{'it' if len(given) == 1 else 'them'} with --measures=...,{measure} (this "
                    f"curve measures {','.join(measured)})"
                )
        for name, value in CURVE_DEFAULTS.items():
            if getattr(args, name) is None:
                setattr(args, name, value)
        parse_rounds(args.rounds)
    if args.command == "ladder" and args.out is not None:  # the table is all it writes
        raise ValueError(
            "ladder writes its table, not into --out: give the table's file with --table=PATH"
        )
    flags.check_out(folder)


def _say(text: str) -> None:
    """A progress line, printed at once (the commands' `log`)."""
    print(text, flush=True)


def run(args, option_flags: list[str]) -> None:
    if args.command == "export":
        run_export(args)
        return
    name = out_folder(args)
    default_games(args)
    check_args(args, name)
    if args.command == "curve" and args.game is None:
        if any(getattr(args, name) is not None for name in option_flags):
            from azjax.checkpoint import read_config

            args.game = read_config(args.run).game  # the options given are checked against it
    no_game = args.command == "curve" and args.game is None  # the run's game
    game = None if no_game else resolve_game(args, option_flags)
    parents = [p for p in (os.path.dirname(name), os.path.dirname(os.path.dirname(name))) if p]
    made = [p for p in parents if not os.path.isdir(p)]  # runs/eval, runs: made by reserve
    folder = args.out or reserve(name)

    new = []  # the folders making --out's (for its lock) would make: a refusal leaves none
    at = os.path.abspath(folder)
    while not os.path.isdir(at):
        new.append(at)
        at = os.path.dirname(at)

    def tidy() -> None:
        """Removes a reserved folder, or an --out this call made, that nothing was written into
        but its lock (the ladder writes its table) and the parents this call made for it: what a
        refusal or a signal leaves."""
        mine = not args.out or os.path.abspath(folder) in new
        if mine and os.path.isdir(folder) and set(os.listdir(folder)) <= {OUT_LOCK}:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, OUT_LOCK))
            os.rmdir(folder)
            for parent in [*new[1:], *made]:
                with contextlib.suppress(OSError):
                    os.rmdir(parent)

    from azjax.checkpoint import WorkdirLock

    try:
        with cli.tidied_on_stop(tidy):
            os.makedirs(folder, exist_ok=True)
            # one command an --out at a time: two interleaved their game files and temporaries
            with WorkdirLock(
                folder, name=OUT_LOCK, holder="another evaluate.py", flag="--out", remove=True
            ):
                evaluate(args, game, folder)
    finally:
        tidy()


def evaluate(args, game, folder: str) -> None:
    """The command's games, their results written into `folder`."""
    from azjax import eval as ev

    # the commands that play their agents and print what they wrote: run, format, files
    played = {
        "match": (ev.run_match, ev.format_match, "match.json"),
        "tournament": (ev.run_tournament, ev.format_tournament, "tournament.json"),
        "errors": (ev.run_errors, ev.format_errors, "errors.json"),
    }
    if args.command in played:
        run, format_record, wrote = played[args.command]
        if args.command == "errors":
            given = {"path": args.positions}
        else:
            given = {"games": args.games, "openings": args.openings}
        record = run(game, args.agents, folder, seed=args.seed, log=_say, **given)
        print(format_record(record))
        also = " and win_ratio.png" if args.command == "tournament" else ""
        print(f"wrote {os.path.join(folder, wrote)}{also}")
    elif args.command == "ladder":
        run_ladder(args, game)
    elif args.command == "place":
        run_place(args, game, folder)
    else:
        from azjax.eval.curve import PLOTS, parse_measures
        from azjax.ladder import parse_rounds

        ev.run_curve(
            args.run,
            folder,
            games=args.games,
            seed=args.seed,
            sims=args.sims,
            mcts_sims=args.mcts_sims,
            epsilon=args.epsilon,
            game=game,
            errors_only=args.errors_only,
            measures=parse_measures(args.measures),  # checked with --errors_only above
            ladder_games=args.ladder_games,
            rounds=parse_rounds(args.rounds),
            table=args.table,
            ladder_max_sims=args.ladder_max_sims,
            every=args.every,
            log=_say,
        )
        plots = [
            name
            for name in PLOTS  # run_curve removed an earlier curve's first
            if os.path.exists(os.path.join(folder, name))
        ]
        print(f"wrote {os.path.join(folder, 'curve.json')}, " + ", ".join(plots))


def run_ladder(args, game) -> None:
    import jax

    from azjax.eval.ladder import parse_rungs, rate_rungs
    from azjax.ladder import load_ladder, new_table_path, save_ladder, table_path

    rungs = parse_rungs(args.rungs)
    path = args.table or new_table_path(game)
    flags.check_file_out(path, "--table")  # before the games
    known = load_ladder(game, args.table or table_path(game)) if args.extend else None
    if args.extend and known is None:
        raise ValueError(f"--extend: no table at {path} to extend; rate it without --extend")
    ladder = rate_rungs(
        game,
        rungs,
        games_per_pair=args.games,
        span=args.span,
        key=jax.random.PRNGKey(args.seed),
        known=known,
        log=_say,
    )
    ladder.info["seed"] = args.seed  # the pairs' keys come from it
    save_ladder(ladder, path)
    for s, e, d in zip(ladder.sims, ladder.elo, ladder.stderr):
        print(f"{s:>6} sims  {e:+7.0f} ± {1.96 * d:.0f}")
    print(f"wrote {path} ({ladder.info['seconds']:.0f} s)")


def run_place(args, game, folder: str) -> None:
    """Each agent placed on the ladder in turn (every spec parsed before any game); with
    several, the placements best first, each against the best, place.json rewritten after each
    (`"complete": false` until the last), so that a stop keeps those finished."""
    from azjax.eval import parse_agent
    from azjax.eval.ladder import require_ladder
    from azjax.eval.records import remove_earlier, write_json
    from azjax.eval.tournament import unique_names
    from azjax.ladder import parse_rounds

    rounds = parse_rounds(args.rounds)
    if args.games < 1:
        raise ValueError(f"--games must be >= 1, got {args.games}")
    # each with --seed, as its record says (placements never meet: no shared stream to part)
    agents = [parse_agent(spec, game, seed=args.seed) for spec in args.agents]  # another
    records = []  # game's ckpt: named before the table (which that game may not have)
    try:
        ladder = require_ladder(game, args.table)
        remove_earlier(folder, "place.json")
        for name, agent in zip(unique_names(args.agents), agents):  # a repeat: `NAME #2`
            records.append(_place_one(args, game, ladder, name, agent, rounds))
            if len(agents) > 1:
                complete = len(records) == len(agents)
                record = dict(placements=records, ranking=_ranking(records, say=complete))
                write_json(folder, "place.json", dict(record, complete=complete))
    finally:
        for agent in agents:
            agent.close()
    if len(records) == 1:
        write_json(folder, "place.json", records[0])
    print(f"wrote {folder}/place.json")


def _place_one(args, game, ladder, spec: str, agent, rounds) -> dict:
    """One agent's placement, printed (with what it means where it is off the ladder or had not
    settled) and returned as its place.json record."""
    import jax

    from azjax.eval.ladder import place_agent
    from azjax.ladder import moving, off_scale, unmet
    from azjax.parallel import local_devices_used

    p = place_agent(
        game,
        agent,
        ladder,
        rounds=rounds.count,
        settle=rounds.settle,
        games_per_rung=args.games,
        key=jax.random.PRNGKey(args.seed),
        log=_say,
    )
    side = off_scale(p)
    bound = None if not side else float(ladder.elo[-1] if side > 0 else ladder.elo[0])
    if side:  # the fit's number only reflects its virtual draws: the end rung is the bound
        rounds_said = p.said().rpartition(" (")[2]
        print(f"{spec}: Elo {'>' if side > 0 else '<'} {bound:+.0f} ({rounds_said}")
    else:
        print(f"{spec}: {p.said()}")
    if side:
        end, rung = ("above", ladder.sims[-1]) if side > 0 else ("below", ladder.sims[0])
        kind = "a lower" if side > 0 else "an upper"
        lo, hi = (int(math.log2(s)) for s in (ladder.sims[0], ladder.sims[-1]))
        lo, hi = (lo, min(hi + 2, 16)) if side > 0 else (max(lo - 2, 0), hi)
        table = f" --table={args.table}" if args.table else ""
        print(
            f"  {end} the ladder: it {'won' if side > 0 else 'lost'} every game against the "
            f"rung of {rung} simulations, so the Elo is only {kind} bound (rungs more: "
            f"evaluate.py ladder --rungs={lo}:{hi} --extend{table} and the "
            "game's flags)"
        )
    ahead = [int(ladder.sims[i]) for i in unmet(p, ladder.elo)]
    way = moving(p, ladder.elo)  # +1 still climbing, -1 falling, 0 settled
    if ahead:
        said = f"rung{'s' if len(ahead) > 1 else ''} of {' and '.join(map(str, ahead))}"
        print(
            f"  not settled: a next round would play the {said} simulations, which it has not "
            f"met, so the rating was still {'climbing' if way > 0 else 'falling'}"
            f" when the rounds ran out (more rounds: --rounds={p.rounds + 2}, or --rounds=auto)"
        )
    return dict(
        agent=spec,
        checkpoint=agent.checkpoint,  # a ckpt agent's RUN@STEP, its step resolved
        game=game.name,
        game_options=dict(game.options),
        elo=p.elo,
        ci95=p.ci95,
        games=p.games,
        rounds=p.rounds,
        rounds_asked=args.rounds,  # "auto": 4, then more until settled (at most one a rung)
        off_scale=side,  # +1: above the top rung (a lower bound), -1: below the bottom one
        elo_bound=bound,  # off the scale: that end rung's Elo, the bound (elo: the fit's number)
        unmet_rungs=ahead,  # the rungs a next round would play that it never met: not settled
        moving=way,
        rungs=[
            dict(sims=s, elo=e, points=float(pt), games=int(n))
            for s, e, pt, n in zip(ladder.sims, ladder.elo, p.points, p.played)
            if n > 0
        ],
        seed=args.seed,
        devices=local_devices_used(),  # the games split over them: another count, other games
    )


def _ranking(records: list[dict], *, say: bool = True) -> list[dict]:
    """The placements best first, each with its Elo below the best and that difference's 95%
    interval (the two placements' games independent, the rungs' ratings taken as exact), printed
    where `say`.
    Where one of the two is off the ladder the gap is a lower bound (`gap`: "at least", from the
    end rung's rating, with the other's interval alone, 0 at least), where
    both are off it at the same end, unknown."""
    best, *_ = ordered = sorted(records, key=lambda r: -r["elo"])
    width = max(len(r["agent"]) for r in records)
    ends = {1: " (a lower bound: above the ladder)", -1: " (an upper bound: below it)"}
    if say:
        print("best first:")
    out = []
    for r in ordered:
        below = best["elo"] - r["elo"]
        half = math.hypot(best["ci95"], r["ci95"]) if r is not best else 0.0
        if r is best:
            kind, said = "best", ""
        elif r["off_scale"] == best["off_scale"] != 0:
            kind, said = "unknown", "  not told apart: both off the ladder at the same end"
        else:
            kind = "at least" if best["off_scale"] > 0 or r["off_scale"] < 0 else "estimate"
            if kind == "at least":  # from the bounds (the rungs', taken as exact), not the fit's
                ends_here = [best["off_scale"] > 0, r["off_scale"] < 0]  # numbers with draws in
                top = best["elo_bound"] if ends_here[0] else best["elo"]
                below = max(top - (r["elo_bound"] if ends_here[1] else r["elo"]), 0.0)
                half = math.hypot(*(x["ci95"] for x, e in zip((best, r), ends_here) if not e))
            said = f"  {'at least ' * (kind == 'at least')}{below:.0f} ± {half:.0f} below the best"
        rating = (
            f"Elo {'>' if r['off_scale'] > 0 else '<'} {r['elo_bound']:+.0f}"
            if r["off_scale"]
            else f"Elo {r['elo']:+6.0f} ± {r['ci95']:.0f}"
        )
        if say:
            print(f"  {r['agent']:<{width}}  {rating}{said}{ends.get(r['off_scale'], '')}")
        out.append(
            dict(agent=r["agent"], elo=r["elo"], below_best=below, below_best_ci95=half, gap=kind)
        )
    return out


def parse_card(items: list[str]) -> dict:
    """--card KEY=VALUE ... -> {KEY: VALUE}, VALUE as JSON where it parses (numbers, objects),
    else as text."""
    import json

    card = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"--card {item!r}: give KEY=VALUE")
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        try:
            json.dumps(parsed, allow_nan=False)  # NaN or Infinity, anywhere in the value
        except ValueError:
            raise ValueError(
                f"--card {item!r}: give a finite number (card.json is strict JSON)"
            ) from None
        card[key.strip()] = parsed
    return card


def run_export(args) -> None:
    from azjax import pretrained
    from azjax.checkpoint import parse_location

    path, step = parse_location(args.run)
    card = parse_card(args.card)
    pretrained.check_name(args.name)  # before the checkpoint is read
    folder = pretrained.export(
        path,
        step,
        args.name,
        to=args.to,
        card=card,
        dtype=args.dtype,
        compute_dtype=args.compute_dtype,
        force=args.force,
    )
    written = pretrained.read_card(folder)
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in pretrained.FILES)
    p = written["precision"]
    print(
        f"exported {path}@{written['source']['step']} as {args.name}: {folder} ({size / 1024:.0f} "
        f"KiB, {args.dtype}; max logit error {p['max_logit_error']:.2g}, value "
        f"{p['max_value_error']:.2g}, argmax kept {100 * p['argmax_agreement']:.1f}%)"
    )


def main(argv: list[str] | None = None) -> int:
    """`azjax-evaluate` and `python evaluate.py`: the exit code (0; 2 for bad input, 1 for a
    failing GTP engine; 130 or 143 when stopped by a signal)."""
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)  # the subcommand's, first
    return cli.run(
        prog_name("evaluate.py"),
        _main,
        argv,
        threaded=True,
        stopped=STOPPED.get(command, "stopped"),
        memory_hint="lower --games (a match plays its games side by side) or the agents' sims=",
        folder="folder (--out; export: --to)",
    )


# what a signal's line says each command kept
STOPPED = {
    "match": 'stopped (match.json keeps the games finished so far, marked "complete": false)',
    "tournament": "stopped (tournament.json keeps the matches finished so far, marked "
    '"complete": false)',
    "curve": 'stopped (curve.json keeps the checkpoints finished so far, marked "complete": false)',
    "errors": "stopped (errors.json is written at the end: none written)",
    "place": "stopped (place.json keeps the placements finished so far of several agents, marked "
    '"complete": false; of one, none is written)',
    "ladder": "stopped (the table is written at the end: unchanged)",
    "export": "stopped (the network's folder is written whole: none written)",
}


def _main(argv: list[str]) -> int:
    parser, option_flags = build_parser()
    args = parser.parse_args(argv)
    cpu_devices = getattr(args, "cpu_devices", None)  # export plays nothing: no such flag
    if cpu_devices is not None:  # before anything starts JAX
        split_cpu(cpu_devices)
    from azjax.eval.player import tolerant_stdin

    tolerant_stdin()  # the human agent reads moves there
    try:
        run(args, option_flags)
    except Exception as e:  # a GTP engine that fails during a match
        from azjax.eval import GTPError

        if not isinstance(e, GTPError) or args.debug:
            raise
        return cli.fail(prog_name("evaluate.py"), f"GTP engine: {e}", code=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
