"""Helpers the experiments share: restoring a checkpoint's network, the game of a run, logging,
list flags and confidence intervals."""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import games
from azjax import cli, flags
from azjax.checkpoint import (
    check_resumable,
    initial_variables,  # noqa: F401  (re-exported)
    read_config,
    steps_on_disk,
)
from azjax.checkpoint import load_checkpoint as restore_variables  # noqa: F401
from azjax.checkpoint import steps as checkpoint_steps
from azjax.eval.records import remove_earlier
from azjax.interrupt import Interrupted


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (95% for z = 1.96) of a proportion successes / n."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def default_workdir(game: str, full: bool) -> str:
    """Experiment 1's run folder for `game`: runs/exp1_<game>[_full]."""
    return os.path.join("runs", f"exp1_{game}{'_full' if full else ''}")


def latest_config(workdir: str):
    """(config, step) of a run folder's latest checkpoint; CheckpointError (a ValueError) when it
    has none."""
    if not os.path.isdir(workdir):
        raise FileNotFoundError(
            f"no run folder {workdir!r}: run experiments.experiment1 first or give --workdir"
        )
    return read_config(workdir), checkpoint_steps(workdir)[-1]


def parse_floats(flag: str, text: str, low: float, high: float) -> list[float]:
    """A comma-separated list of distinct numbers in [low, high], e.g. "0,0.2,0.4"."""
    try:
        values = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"{flag}: expected comma-separated numbers, got {text!r}") from None
    bad = [v for v in values if not low <= v <= high]
    if not values or bad:
        raise ValueError(f"{flag}: every value must be in [{low:g}, {high:g}], got {text!r}")
    return _distinct(flag, text, values)


def parse_ints(
    flag: str, text: str, low: int, *, empty_ok: bool = False, distinct: bool = True
) -> list[int]:
    """A comma-separated list of integers, each at least `low`, e.g. "100,1000" ('' an empty
    list where `empty_ok`), each given once unless not `distinct` (counts that go with another
    list's values)."""
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"{flag}: expected comma-separated integers, got {text!r}") from None
    if not values and not empty_ok:
        raise ValueError(f"{flag}: give one or more comma-separated integers (each >= {low})")
    if any(v < low for v in values):
        raise ValueError(f"{flag}: every value must be at least {low}, got {text!r}")
    return _distinct(flag, text, values) if distinct else values


def _distinct(flag: str, text: str, values: list) -> list:
    """`values`, refused where one is given twice: the experiments name and merge results by
    value (two agents `p_r=0`, one run per seed)."""
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise ValueError(
            f"{flag}: {', '.join(f'{v:g}' for v in twice)} given twice in {text!r}; give each "
            "value once"
        )
    return values


class Log:
    """Prints a line and appends it to a file (whose folder it makes)."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path

    def __call__(self, text: str) -> None:
        print(text, flush=True)
        with open(self.path, "a") as f:
            f.write(text + "\n")


# ---- what experiments 2 and 3 share: a finished Experiment 1 run to play with --------------------
def add_scale_flags(parser, scales: dict[bool, dict], full_help: str) -> None:
    """--full (`full_help`) and a flag for each setting of `scales` ({False: this machine's
    scale, True: --full's}), of its value's type, left None for `set_scale` to fill."""
    parser.add_argument("--full", action="store_true", help=full_help)
    for name, value in scales[False].items():
        parser.add_argument(
            f"--{name}",
            type=type(value),
            default=None,
            help=f"default {value} (--full: {scales[True][name]})",
        )


def set_scale(args, scales: dict[bool, dict]) -> None:
    """The settings of the scale chosen (--full or not) that no flag gave."""
    for name, value in scales[args.full].items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def add_run_flags(parser, name: str) -> None:
    """--game, --full, --workdir, --out, --search, --seed of an experiment on Experiment 1's run."""
    parser.add_argument("--game", default="hex", help="for the default --workdir (default hex)")
    parser.add_argument(
        "--full",
        action="store_true",
        help="full scale, on Experiment 1's --full run (runs/exp1_<game>_full)",
    )
    parser.add_argument(
        "--workdir",
        type=flags.path,
        default=None,
        help="Experiment 1's run folder (default runs/exp1_<game>[_full])",
    )
    parser.add_argument("--out", type=flags.path, default=None, help=f"default <workdir>/{name}")
    flags.add_config_flags(parser, names=("search",), default_text="the checkpoint's")
    parser.add_argument("--seed", type=flags.seed, default=0)


def check_run_flags(parser, args, name: str) -> None:
    """--search's value; even --games (colours alternate); the default --workdir and --out."""
    try:
        args.search = flags.config_overrides(args, ("search",)).get("search")
    except ValueError as e:
        parser.error(str(e))
    if args.games < 2 or args.games % 2:
        parser.error(f"--games must be even and at least 2 (colours alternate), got {args.games}")
    if args.workdir is None and args.game not in games.names():  # names the default workdir
        parser.error(f"--game: unknown game {args.game!r}; known games: {', '.join(games.names())}")
    args.workdir = args.workdir or default_workdir(args.game, args.full)
    args.out = args.out or os.path.join(args.workdir, name)


def open_run(args, module: str):
    """(config, game, checkpoint step, Log into <out>/log.txt) of args.workdir's latest
    checkpoint, or None after printing why there is none (as `python -m MODULE`, its
    `__spec__.name`)."""
    try:
        config, step = latest_config(args.workdir)
    except (ValueError, FileNotFoundError) as e:
        cli.fail(f"python -m {module}", e)
        return None
    return config, config.make_game(), step, Log(os.path.join(args.out, "log.txt"))


def remove_earlier_results(out: str, *more: str) -> None:
    """Removes what an earlier invocation wrote at its end into `out` (results.json and the
    `more` names, glob patterns), before this one starts: a stop before its own results are
    written must not leave those looking like this run's. log.txt goes on, runs stay."""
    remove_earlier(out, "results.json", *more)


def write_results(args, results: dict, log) -> None:
    """<out>/results.json, and a closing log line; `results["seconds"]` is the wall time, or
    its parts with their `total`."""
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    seconds = results["seconds"]
    total = seconds["total"] if isinstance(seconds, dict) else seconds
    log(f"wall time {total:.0f} s; results in {args.out}")


AGAIN = "--eval_only evaluates them again, or choose another --out"  # an --out holding the runs


def train_runs(configs: dict, out: str, log, *, progress: bool) -> dict:
    """Trains each of `configs` ({run name: Config}) into <out>/<name>, one after the other,
    logging its settings and how far it got; returns {name: summary}. A ValueError before any
    training where <out> holds one of the runs already (`--eval_only` evaluates them)."""
    refuse_trained(out, configs, "--out", AGAIN)
    summaries = {}
    for name, config in configs.items():
        log(f"training the {name} run: {json.dumps(json.loads(config.to_json()))}")
        s = summaries[name] = trained_afresh(
            config, os.path.join(out, name), name, "--out", progress
        )
        log(f"{name}: {s['iterations']} iterations, {s['games']} games, {s['wall_seconds']} s")
    return summaries


def trained_afresh(config, workdir: str, name: str, flag: str, progress: bool) -> dict:
    """`train_and_evaluate`'s summary of a run an experiment trains from its start (and never
    resumes); a stop's line says to run the experiment again with another `flag`, not the
    loop's --resume, which these experiments do not take."""
    from azjax import train_and_evaluate

    try:
        return train_and_evaluate(config, workdir, progress=progress)
    except Interrupted as e:
        if e.at_once:
            raise
        raise Interrupted(
            e.signum,
            f"{name} stopped ({e.message.split(';')[0]}); run again with another {flag} (the "
            "experiment trains its runs afresh)",
        ) from None


def holds_checkpoints(workdir: str) -> bool:
    """Whether `workdir` holds a run's finished checkpoints (an earlier invocation's training;
    orbax's temporary folder of a save that never finished is none)."""
    return bool(steps_on_disk(workdir))


def add_resume_flag(parser) -> None:
    """--resume, for an experiment that trains its run with `train_and_evaluate`."""
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the training run in --workdir from its latest checkpoint (a stopped "
        "run; its time budget counts every session's minutes), then evaluate",
    )


def check_resume(workdir: str, resume: bool, others: str, config) -> None:
    """A ValueError, before any training or any earlier result is removed, where --workdir holds
    a run and --resume was not given, naming what else to do (`others`), or where --resume would
    continue it with another network (`config`: the settings it would train on with);
    train_and_evaluate's own errors would come after the experiment's first steps."""
    if not holds_checkpoints(workdir):
        return
    if not resume:
        raise ValueError(
            f"--workdir {workdir!r} holds a trained run already: --resume continues its "
            f"training, {others}, or choose another --workdir"
        )
    check_resumable(read_config(workdir), config)


def refuse_trained(out: str, names, flag: str, advice: str) -> None:
    """A ValueError where one of the runs <out>/<name> an experiment is about to train holds
    checkpoints already (an earlier invocation's), saying what to do (`advice`), before any
    training: train.py's own error would tell the user to pass --resume, which the experiments
    do not take."""
    for name in names:  # as train.py: an unfinished save alone is no run (orbax removes it)
        if holds_checkpoints(os.path.join(out, name)):
            raise ValueError(
                f"{flag} {out!r} holds this experiment's runs already "
                f"({os.path.join(out, name)}): {advice}"
            )


def finished_runs(names, out: str) -> tuple[dict, dict]:
    """({name: Config}, {name: training summary}) of the runs <out>/<name> trained earlier, as
    they were trained (`--eval_only`: not as this command's flags would train them); a run
    without a summary.json (stopped before its end) is left out of the summaries."""
    configs, summaries = {}, {}
    for name in names:
        configs[name] = read_config(os.path.join(out, name))
        path = os.path.join(out, name, "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                summaries[name] = json.load(f)
    return configs, summaries


def phase_seconds(t_start: float, t_train: float) -> dict:
    """{train, evaluate, total}: wall seconds of an experiment that trained for `t_train` seconds
    from `t_start` and evaluated until now (`write_results` reads the total)."""
    now = time.time()
    return dict(
        train=round(t_train, 1),
        evaluate=round(now - t_start - t_train, 1),
        total=round(now - t_start, 1),
    )


def _simulations_or_none(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"expected 0..100000 simulations (0: none), got {text!r}")
    return value


def add_errors_flag(parser) -> None:
    """--errors_sims: the simulations of the final networks' exact error rate (0: none)."""
    parser.add_argument(
        "--errors_sims",
        type=_simulations_or_none,
        default=50,
        help="the final networks' exact error rate on the game's solved positions, where the "
        "package has them (evaluate.py errors), at this many simulations (default 50; 0: none)",
    )


def exact_errors(game, specs: dict, folder: str, sims: int, log) -> dict | None:
    """{agents: {name: {rate, ci95, errors, positions, against_first}}}: the exact error rate of
    each agent of `specs` ({name: 'ckpt:RUN,...'}, searching at `sims` simulations) on `game`'s
    shipped solved positions (azjax.eval.errors: the later ones compared with the first,
    McNemar's z), errors.json in `folder`; None where `sims` is 0 or the game has no set."""
    from azjax import solved
    from azjax.eval.errors import format_errors, run_errors

    if not sims or not os.path.exists(solved.set_path(game)):  # run_errors reads the set
        return None
    full = [f"{spec},sims={sims}" for spec in specs.values()]
    record = run_errors(game, full, folder, log=lambda line: None)
    log(format_errors(record))
    keep = ("rate", "ci95", "errors", "positions", "against_first")
    rows = zip(specs, record["agents"])
    return dict(agents={name: {k: r[k] for k in keep if k in r} for name, r in rows})
