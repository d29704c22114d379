"""Train an AlphaZero agent by self-play.

    python train.py --game=hex --batch_games=1024
    python train.py --config=connect_four_thesis            # configs/connect_four_thesis.py
    python train.py --config=hex_thesis                     # seed 000's Table 5.1 settings
    python train.py --game=tictactoe --workdir=runs/ttt --iterations=40
    python train.py --workdir=runs/hex6 --resume            # continue a run
    python train.py --workdir=runs/hex6 --resume_step=40    # continue from an earlier checkpoint
    python train.py --game=othello --size=6 --init_from=runs/c4   # start from another run's trunk
    python train.py --games=connect_four,othello:size=6     # one shared trunk, both games
    python train.py --game=othello --help                   # every field, its default and meaning
    python train.py --game=hex --distributed                # one process per host (docs/scaling.md)
    python train.py --game=hex --size=5 --eval_opponent=spiel:sims=200   # also play an engine

`--eval_opponent=SPEC` plays any agent `evaluate.py match` accepts (gtp:"COMMAND", spiel:, mcts:,
minimax:, ckpt:, ...) at each evaluation (azjax/eval/opponent.py): eval/opponent_score, _ci95,
_wdl and _seconds in metrics.jsonl and TensorBoard.

Defaults come from configs/<game>.py, and from configs/NAME.py over them with --config=NAME (a
variant such as hex_thesis, seed 000's Table 5.1, or connect_four_thesis, seed 001's Table 5.4;
cpu, the CPU recipe); every field can be overridden as --name=value, game options (--size,
--swap, --rows, ...) included.

Ctrl-C or SIGTERM finishes the iteration, saves a checkpoint and exits with 130 or 143; a second
one stops at once. One run at a time per workdir. Errors are one line and exit code 2 (`--debug`
shows their tracebacks); docs/reliability.md lists what is handled and how.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys

import games
from azjax import config as cfg
from azjax import flags
from azjax.commands import describe, spell, split_cpu
from azjax.commands import prog as prog_name


def _defaults_of(config_name: str | None, game: str) -> str:
    """Where the run settings' defaults come from, for --help: configs/NAME.py, or a .json file
    over the game's."""
    if config_name and config_name.endswith(".json"):
        return f"configs/{game}.py, then {config_name}"
    return f"configs/{config_name or game}.py"


def build_parser(
    game: str, config_name: str | None = None, *, prog: str | None = None
) -> tuple[argparse.ArgumentParser, list[str], list[str]]:
    """The parser, and the names of its Config flags and of its game options; defaults from
    configs/<config_name or game>.py. `prog`: the name in its usage (default: as run)."""
    prog = prog or prog_name("train.py")
    defaults = cfg.game_defaults(game)
    if config_name:  # what cfg.load makes of it: the game's defaults, then the config's
        defaults = {**defaults, **cfg.named_defaults(config_name, game)[1]}
    parser = flags.Parser(
        prog=prog,
        description=describe(__doc__, prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--workdir",
        type=flags.path,
        default=None,
        help="folder for checkpoints, metrics and TensorBoard events (default: runs/<game>, or "
        "runs/<game>-N for a new run when that holds one)",
    )
    parser.add_argument(
        "--config",
        default=None,
        metavar="NAME|FILE",
        help=f"defaults from configs/NAME.py over configs/<game>.py "
        f"({', '.join(cfg.config_names())}), or from a .json file (a run's config.json, or "
        '{"name": value, ...}) or a .py file (OVERRIDES = {...}, GAME = ...)',
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --workdir from its latest checkpoint",
    )
    parser.add_argument(
        "--resume_step",
        type=int,
        default=None,
        metavar="N",
        help="continue from checkpoint N instead (later ones are set aside); implies --resume",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks of errors instead of one line"
    )
    parser.add_argument("--no_progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--json",
        action="store_true",
        help="at the end, print the run's summary (summary.json) as JSON instead of a message",
    )
    parser.add_argument(
        "--cpu_devices",
        default=None,
        metavar="N|auto",
        help="on a CPU, split the games over N devices, one per core, as over GPUs "
        "(docs/scaling.md): XLA:CPU runs a small network on one core per device, and on 2 cores "
        "this trained 1.8 times as fast. Not the default: each device plays with its own key, so "
        "the games depend on the count. auto: "
        "one per CPU this process may use, as many as batch_games and train_batch_size divide "
        "over. Unset: JAX's own (one device, or what XLA_FLAGS or JAX_NUM_CPU_DEVICES set). "
        "Not with --distributed (one device a process)",
    )
    multi = parser.add_argument_group(
        "multi-host (docs/scaling.md); unset values come from the environment: Cloud TPU pod "
        "slices, SLURM, Open MPI, or JAX_COORDINATOR_ADDRESS"
    )
    multi.add_argument(
        "--distributed",
        action="store_true",
        help="call jax.distributed.initialize(): one process per host, all devices "
        "of all hosts train together",
    )
    multi.add_argument(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="address of process 0, where the coordination service listens",
    )
    multi.add_argument("--num_processes", type=int, default=None, help="number of processes")
    multi.add_argument("--process_id", type=int, default=None, help="this process, 0-based")
    config_flags = flags.add_config_flags(
        parser.add_argument_group(f"run settings (defaults of {_defaults_of(config_name, game)})"),
        defaults={"game": game, **defaults},
    )
    option_flags = flags.add_game_flags(
        parser.add_argument_group(f"{game} options"), game, defaults=defaults
    )
    parser.hints.update(flags.game_option_hints(game))  # --size on connect_four: say why
    return parser, config_flags, option_flags


def parse(argv: list[str]) -> tuple[cfg.Config, argparse.Namespace]:
    """The run's Config and the parsed flags. With --resume the saved config is the base: the
    workdir's config.json, else (deleted) the one saved in the checkpoint."""
    from azjax.shared import parse_games, with_default_options

    pre = flags.Parser(add_help=False)
    pre.add_argument("--game", default=None)
    pre.add_argument("--games", default=None)
    pre.add_argument("--config", default=None)
    pre.add_argument("--workdir", type=flags.path, default=None)
    pre.add_argument("--resume", action="store_true")
    pre.add_argument("--resume_step", default=None)
    known, _ = pre.parse_known_args(argv)
    shared = None
    if known.games is not None:  # a shared run: the first game of the list is `game`
        if known.game is not None:
            raise ValueError(
                "--games trains one network on several games and --game one: give one of them "
                "(game options go in the list: --games=connect_four,othello:size=6)"
            )
        shared = [name for name, _ in parse_games(known.games)]
        known.game = shared[0]
    base: dict = {}
    if known.config is not None:
        config_game, base = cfg.named_defaults(known.config, known.game)
        if config_game is not None and config_game not in games.names():  # a file's "game"
            raise ValueError(
                f"--config={known.config}: unknown game {config_game!r}; known games: "
                f"{', '.join(games.names())}"
            )
        if known.game not in (None, config_game) and config_game is not None:
            given = f"--games lists {known.game} first" if shared else f"--game={known.game}"
            raise ValueError(f"{given} but --config={known.config} is {config_game}")
        known.game = config_game or known.game
    resuming = known.resume or known.resume_step is not None
    if resuming and known.workdir is None:  # _main resumes runs/<game>: its settings too
        known.workdir = default_workdir("+".join(shared or [known.game or "hex"]), resume=True)
    saved = _saved_config(known.workdir) if resuming else None
    if saved is not None and known.config is not None:
        raise ValueError(
            f"--config with --resume: {known.workdir} continues with its own settings (its "
            "config.json); give the settings to change as flags"
        )
    if saved is not None:
        base = {n: getattr(saved, n) for n in cfg.FIELDS if n != "game"}
        base.update(saved.game_options)  # a resumed run keeps its own settings over --config's
        if shared and known.games is not None:
            if [name for name, _ in parse_games(saved.games or saved.game)] != shared:
                raise ValueError(
                    f"--games={known.games} but {known.workdir} holds a run of "
                    f"{saved.games or saved.game} (a list resumes in its own order)"
                )
        elif known.game not in (None, saved.game):
            raise ValueError(f"--game={known.game} but {known.workdir} holds a {saved.game} run")
        known.game = saved.game
    game = known.game or "hex"
    if game not in games.names():
        raise ValueError(f"--game: unknown game {game!r}; known games: {', '.join(games.names())}")
    parser, config_flags, option_flags = build_parser(game, known.config)
    if shared:  # any game's option: each goes in the list
        parser.hints.update(
            (
                f"--{o}",
                f"--{o} with --games: give each game's options in the list, e.g. "
                "--games=connect_four,othello:size=6",
            )
            for o in flags.option_fields(None)
        )
    args = parser.parse_args(argv)
    if args.init_from is not None and (args.resume or args.resume_step is not None):
        raise ValueError(
            "--init_from starts a new run and --resume continues one: give one of them (a "
            "resumed run keeps the init_from its config.json records)"
        )
    if args.resume_step is not None and args.resume_step < 0:
        raise ValueError(f"--resume_step must be a checkpoint step (>= 0), got {args.resume_step}")
    given = flags.config_overrides(args, config_flags)
    if saved is not None and saved.games and given.get("games"):
        # the run's list names each game's options (a config's too): the list given again,
        # however written, continues it, and what it gives anew wins
        given["games"] = with_default_options(given["games"], dict(parse_games(saved.games)))
    if given.get("time_budget") and "iterations" not in given:
        given["iterations"] = 0  # minutes asked for alone: they end the run, not a count
    elif saved is None and base.get("time_budget") and "iterations" not in {**base, **given}:
        given["iterations"] = 0  # and so where --config's file gives them alone
    overrides = {**base, **given, **flags.game_options(args, game, option_flags)}
    overrides.pop("game", None)
    if overrides.get("games"):
        beside = [f"--{k}" for k in flags.game_options(args, game, option_flags)]
        if beside:
            raise ValueError(
                f"{', '.join(beside)} with --games: give each game's options in the list, "
                "e.g. --games=connect_four,othello:size=6"
            )
        overrides = cfg.options_into_the_list(overrides, None if saved else known.config)
    try:
        config = cfg.load(game, overrides)
    except ValueError as e:  # "<field> must ...": name the file that gave the field
        field = str(e).split(" ", 1)[0]
        from_file = saved is None and known.config is not None and cfg.is_file(known.config)
        if from_file and field in base and field not in given:
            raise ValueError(f"--config={known.config}: {e}") from None
        raise
    unused = cfg.ignored(config, given)  # a flag the user gave that would change nothing
    if unused:
        them, need = ("them", "they need") if len(unused) > 1 else ("it", "it needs")
        raise ValueError(f"{'; '.join(unused)}: leave {them} out, or give what {need}")
    return config, args


def default_workdir(game: str, *, resume: bool) -> str:
    """runs/<game>; for a new run where that holds one already, the first free runs/<game>-N
    (said on stderr), so that running a command again starts a new run instead of failing."""
    base = os.path.join("runs", game)
    if resume or not _holds_run(base):
        return base
    n = 2
    while _holds_run(f"{base}-{n}"):
        n += 1
    print(
        f"{prog_name('train.py')}: {base} holds a run (continue it with --workdir={base} "
        f"--resume); this one trains in {base}-{n}",
        file=sys.stderr,
    )
    return f"{base}-{n}"


def _holds_run(workdir: str) -> bool:
    from azjax.checkpoint import steps_on_disk

    return bool(steps_on_disk(workdir))


def _saved_config(workdir: str | None) -> cfg.Config | None:
    """The config a resumed run continues: <workdir>/config.json (a CheckpointError naming it
    when it cannot be read), else the latest checkpoint's; None when neither exists."""
    if not workdir:
        return None
    from azjax.checkpoint import CheckpointError, read_config, read_config_file

    path = os.path.join(workdir, "config.json")
    if os.path.lexists(path):
        return read_config_file(path)
    try:
        return read_config(workdir)
    except CheckpointError:
        return None  # no checkpoint either: train_and_evaluate says so


def main(argv: list[str] | None = None) -> int:
    """`azjax-train` and `python train.py`: the exit code (0, 2 for an error, 130 or 143 when
    stopped by a signal)."""
    from azjax import cli

    return cli.run(prog_name("train.py"), _main, sys.argv[1:] if argv is None else argv)


def _main(argv: list[str]) -> int:
    config, args = parse(argv)
    resume = args.resume or args.resume_step is not None
    name = config.game if not config.games else "+".join(shared_names(config))
    workdir = args.workdir or default_workdir(name, resume=resume)
    multi = {
        "--coordinator": args.coordinator,
        "--num_processes": args.num_processes,
        "--process_id": args.process_id,
    }
    if not args.distributed and any(v is not None for v in multi.values()):
        given = ", ".join(k for k, v in multi.items() if v is not None)
        verb = "makes" if given.count(",") == 0 else "make"
        raise ValueError(f"{given} only {verb} sense with --distributed")
    if args.num_processes is not None and args.num_processes < 1:
        raise ValueError(f"--num_processes must be >= 1, got {args.num_processes}")
    if args.process_id is not None and not 0 <= args.process_id < (args.num_processes or 2**31):
        raise ValueError(
            f"--process_id must be in [0, --num_processes - 1] (0-based), got {args.process_id}"
        )
    if args.distributed and args.cpu_devices is not None:
        raise ValueError("--cpu_devices: with --distributed each process is one device")
    if args.distributed and config.eval_opponent:
        raise ValueError("--eval_opponent is played by one process: not with --distributed")
    from azjax import parallel

    if args.distributed:  # before anything else touches JAX
        parallel.initialize(args.coordinator, args.num_processes, args.process_id)
        agreed = {f"--{k}": v for k, v in json.loads(config.to_json()).items()}
        agreed.update({"--workdir": workdir, "--resume": resume, "--resume_step": args.resume_step})
        for path in ("--workdir", "--init_from"):  # hosts may mount the shared folder elsewhere
            agreed[path] = os.path.basename(os.path.normpath(agreed[path] or ""))
        parallel.check_same_everywhere(agreed)
    elif args.cpu_devices is not None:
        split_cpu(args.cpu_devices, config.batch_games, config.train_batch_size)

    import jax

    from azjax.loop import train_and_evaluate

    opponent = _opponent(config)
    with opponent or contextlib.nullcontext():
        summary = train_and_evaluate(
            config,
            workdir,
            resume=args.resume,
            progress=not args.no_progress,
            resume_step=args.resume_step,
            extra_evaluation=opponent,
        )
    if jax.process_index() == 0:
        print(json.dumps(summary, indent=2) if args.json else closing_message(summary, workdir))
    return 0


def shared_names(config: cfg.Config) -> list[str]:
    """The games of a shared run (`--games`), in order."""
    from azjax.shared import game_configs

    return list(game_configs(config))


def _opponent(config: cfg.Config):
    """The run's `--eval_opponent` (`azjax.eval.TrainingOpponent`), checked before anything
    compiles; None without one."""
    if not config.eval_opponent:
        return None
    from azjax.eval import TrainingOpponent

    try:
        return TrainingOpponent(config, prog=prog_name("train.py"))
    except ValueError as e:
        raise ValueError(f"--eval_opponent: {e}") from None


def _measure(metric: str, value: float) -> str:
    """An in-loop measure's value as the closing message shows it: Elo signed and whole."""
    return f"{value:+.0f}" if metric.endswith("/elo") else f"{value:.3f}"  # eval/<game>/elo too


def _trend(metric: str, t: dict) -> str:
    """One measure's move over a run (`checkpoint.measure_trends`'s `t`): first -> last, and its
    best where that is not the last."""
    extreme = "lowest" if metric.endswith("/error_rate") else "highest"
    best = (
        f"{extreme} {_measure(metric, t['best'][1])} at {t['best'][0]}"
        if t["best"] != t["last"]
        else f"its {extreme}"
    )
    first, last = t["first"], t["last"]
    return (
        f"{metric} {_measure(metric, first[1])} at {first[0]} -> "
        f"{_measure(metric, last[1])} at {last[0]} ({best})"
    )


def closing_message(summary: dict, workdir: str, prog: str | None = None) -> str:
    """What a run that ended did, where it is, and what to run next (spelled for `prog`, the
    command that ran: default as run)."""
    prog = prog or prog_name("train.py")
    last = summary.get("last", {})
    minutes = summary["wall_seconds"] / 60
    in_all = summary.get("run_seconds", summary["wall_seconds"]) / 60
    what = f"{summary['game']} {_options(summary['game_options'])}"
    agent = f"ckpt:{workdir}"
    if summary.get("shared_games"):  # one network over several games
        what = f"{summary['shared_games']} (one shared network) "
        agent += f",game={summary['game']}"
    played = "self-play games, {:,} positions"
    if summary.get("algorithm") == "exit":  # the apprentice plays; the expert searches
        played = "apprentice games, {:,} positions labelled by the expert"
    lines = [
        f"trained {what}for {summary['iterations']} iteration{'s' * (summary['iterations'] != 1)}: "
        f"{summary['games']:,} "
        + played.format(summary["positions"])
        + f" ({minutes:.1f} min this session"
        + (f", {in_all:.1f} in all" if in_all > minutes + 0.05 else "")
        + f"; stopped by {summary['stopped_by']})"
    ]
    if summary.get("eval_seconds"):
        share = summary["eval_seconds"] / max(summary["wall_seconds"], 1e-9)
        postponed = summary.get("eval_postponed", 0)
        compiling = summary.get("eval_compile_seconds", 0.0)
        lines.append(
            f"in-loop evaluation: {summary['eval_seconds']:.0f} s, {share:.0%} of the session"
            + (f", {compiling:.0f} s of it compiling" if compiling >= 0.5 else "")
            + " (--eval_budget"
            + (" counts the rest" if compiling >= 0.5 else "")
            + (f"; {postponed} evaluations put off to keep within it" if postponed else "")
            + ")"
        )
    if "loss/total" in last:
        lines.append(
            f"last iteration: loss {last['loss/total']:.3f} (value {last['loss/value']:.3f}, "
            f"policy {last['loss/policy']:.3f})"
        )
        if "heldout/value" in last and "heldout/seen_value" in last:  # README, Held-out losses

            def terms(kind: str) -> str:  # a policy term of fast searches' positions only is
                value = f"value {last[f'heldout/{kind}value']:.3f}"  # left out of the row
                policy = last.get(f"heldout/{kind}policy")
                return value + ("" if policy is None else f", policy {policy:.3f}")

            lines[-1] += (
                f"; on positions it never trained on {terms('')}, on those it could "
                f"{terms('seen_')}"
            )
    shared = bool(summary.get("shared_games"))
    trends = summary.get("trends", {})  # a shared run's per game: {game: {metric: ...}}
    moved = [
        _trend(metric, t)
        for each in (trends.values() if shared else [trends])
        for metric, t in each.items()
        if t["evaluations"] > 1
    ]
    if moved:
        lines.append("in-loop measures over the run: " + "; ".join(moved))
    best = summary.get("best")
    named = [("@best", best)]
    if shared:  # per game: {game: its best or None}
        named = [(f"@best,game={g}", b) for g, b in (best or {}).items()]
    for at, best in named:
        if not best or best["step"] == summary["iterations"]:
            continue
        value = _measure(best["metric"], best["value"])
        if best.get("top_step", best["step"]) not in (-1, best["step"]):  # level with the top
            top = _measure(best["metric"], best["top_value"])
            value += f"; level with {top} at {best['top_step']} within the intervals"
        lines.append(
            f"its best checkpoint by the in-loop {best['metric']} ({value}) is {best['step']}, "
            f"not the last: ckpt:{workdir}{at} names it"
        )
    lines.append(f"saved in {workdir}: checkpoints/, metrics.jsonl, tb/, config.json, summary.json")
    lines.append("next:")
    play, evaluate, train = (
        spell(script, prog) for script in ("play.py", "evaluate.py", "train.py")
    )
    agent, workdir = shlex.quote(agent), shlex.quote(workdir)  # to paste: a folder with spaces
    placed = trends.get("eval/elo", {}).get("evaluations", 0)
    # the budget put ladder placements off, and no exact error rate (which it never puts off)
    # shows the progress: every checkpoint placed after the run
    curve = (
        (
            f"{evaluate} curve {workdir} --measures=ladder",
            f"every checkpoint's Elo (the loop placed {placed})",
        )
        if placed and summary.get("eval_postponed") and "eval/error_rate" not in trends
        else (f"{evaluate} curve {workdir}", "its learning curve, checkpoint by checkpoint")
    )
    commands = [
        (f"{play} --agent={agent}", "play against it"),
        curve,
        (f"{train} --workdir={workdir} --resume --iterations=N", "train on, to N")
        if summary["stopped_by"] != "time_budget"
        else (f"{train} --workdir={workdir} --resume --time_budget=M", "train on, to M min in all"),
        (f"tensorboard --logdir {workdir}", "its metrics (pip install tensorboard)"),
    ]
    if summary.get("shared_games"):  # evaluate.py curve does not draw shared runs yet
        del commands[1]
    for command, why in commands:
        lines.append(f"  {command:<60}  # {why}")
    return "\n".join(lines)


def _options(options: dict) -> str:
    return "".join(f"{k}={v} " for k, v in options.items())


if __name__ == "__main__":
    sys.exit(main())
