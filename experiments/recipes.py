"""Recipes side by side: each trained for the same wall time with several seeds, then rated.

    python -m experiments.recipes --game=hex --size=6 --minutes=6 --seeds=0,1 \\
        --recipe=base: --recipe=augment:augment=true \\
        --recipe=pcr:full_search_prob=0.25,fast_simulations=8 --recipe=puct:search=puct
    python -m experiments.recipes --game=othello --size=6 --at_once=1 ...   # one run at a time
    python -m experiments.recipes ... --rate_only                             # rate finished runs

Every recipe is `--config` (default `cpu`, configs/cpu.py) for `--game` with the recipe's overrides
(`NAME:field=value,field=value`; `NAME:` is the config as is) and `--set`'s, which all recipes
share. Each (recipe, seed) trains into <out>/<recipe>-s<seed> with `--time_budget` set to
`--minutes`, no in-loop evaluation and a checkpoint every 5 iterations, as its own `train.py`
process. `--at_once=K` runs K of them at a time, each pinned to its own share of this machine's
cores (`os.sched_setaffinity`; default: one run per two cores on a CPU, one run at a time on a GPU
or TPU, which the runs would otherwise share), so every run gets the same compute:
their wall times are equal and so is the hardware under them. The runs go seed by seed (every
recipe of the first seed, then of the next), so the runs trained at a time are different recipes,
and a load that comes or goes on the machine falls on the recipes alike.

Then every final network (its search as trained, `--sims` simulations, no noise) and the
`--anchors` (agent specs, each spec's options staying with it, checked before any run trains;
default: pure MCTS with random rollouts, `mcts:sims=512`) play a round robin of
`--games` games per pair (`evaluate.py tournament`), from `--games` / 2 random openings of
`--opening_plies` plies each played with both colours (networks that search without noise would
otherwise play one game per colour, twenty times over), and maximum-likelihood Elo rates them all
on one scale, shifted so that the anchors' mean is 0 (without anchors, the mean of all). A recipe's
Elo is the mean of its seeds' networks; its interval, 1.96 x the standard deviation over seeds /
sqrt(seeds) together with the networks' own rating error. Where two recipes differ by less than
that, this experiment does not tell them apart.

Where the package has solved positions for the game (`azjax.solved`: 6x6 and 8x8 Othello, Connect
Four, 5x5 and 6x6 Hex, Tic-Tac-Toe), every run's last `--error_checkpoints` checkpoints (default
6; none from the first half of the run's iterations, so that a recipe with fewer iterations in the
time is not measured earlier in its run) are also measured by the exact error rate, the share of the
set's positions where the network's move throws a win or a draw away, and each recipe is compared
with the first position by position (the mean difference of the per-position error shares, over
the recipe's runs and checkpoints, and its z over the positions). It separates recipes that a
round robin of hundreds of games does not (docs/strength.md, sessions 22 - 23), though its z counts
the positions, not the seeds: read it beside each seed's rate.

With `--ladder_games=N` every run's final network (as rated above) is also placed on the game's
Elo ladder of pure MCTS (`azjax/ladders/`, as `evaluate.py place ckpt:RUN,sims=S --games=N` places
it: rounds until it has settled), a scale that keeps its meaning from one experiment to the next
where the round robin's is this experiment's own; each recipe's ladder Elo is the mean of its seeds'
with an interval as above, a lower bound where a network won every game against the top rung.

Writes <out>/results.json (the recipes, each run's training summary, the tournament, the table),
<out>/tournament/ (tournament.json, win_ratio.png) and <out>/log.txt; prints the table.
A run that trained to its end (its summary.json says so) is not trained again (`--rate_only`: none
is); one stopped before it (a signal, a kill) goes on from its latest checkpoint (train.py's
--resume). A signal stops the runs in training too, each saving a checkpoint: the same command
then goes on with them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np

import games
from azjax import cli, compile_cache, flags
from azjax import config as cfg
from azjax.checkpoint import load_checkpoint
from azjax.config import FIELDS
from azjax.eval.errors import choose_moves
from azjax.eval.ladder import place_agent, require_ladder
from azjax.eval.openings import random_sequences
from azjax.eval.specs import parse_agent, split_specs
from azjax.eval.tournament import run_tournament
from azjax.interrupt import Interrupted
from azjax.ladder import AUTO_ROUNDS, off_scale
from azjax.solved import errs, load_set, start_states
from experiments.common import (
    Log,
    checkpoint_steps,
    holds_checkpoints,
    parse_ints,
    remove_earlier_results,
    write_results,
)

RUN = dict(iterations=100000, checkpoint_interval=5, eval_interval=0)


def parse_recipe(text: str) -> tuple[str, dict[str, str]]:
    """`NAME:field=value,field=value` -> (NAME, {field: value}); ValueError naming the problem."""
    name, sep, rest = text.partition(":")
    if not sep or not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(
            f"--recipe: expected NAME:field=value,... (NAME of letters, digits, - or _; "
            f"'NAME:' for the config as is), got {text!r}"
        )
    return name, parse_settings(rest, "--recipe " + name)


def parse_settings(text: str, flag: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag}: expected field=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def typed_settings(settings: dict[str, str], game: str, where: str) -> dict:
    """`settings` {name: text} as Config fields and `game`'s options, converted and checked as
    train.py's flags are (`flags.config_overrides`, `flags.game_options`); ValueError naming
    `where` and the problem."""
    options = flags.option_fields(game)
    unknown = sorted(set(settings) - set(FIELDS) - set(options))
    if unknown:
        raise ValueError(
            f"{where}: unknown setting(s) {', '.join(unknown)} (train.py --help lists the fields)"
        )
    given = argparse.Namespace(**settings)
    try:
        return {
            **flags.config_overrides(given, [n for n in settings if n in FIELDS]),
            **flags.game_options(given, game, [n for n in settings if n in options]),
        }
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def build_configs(args) -> dict[str, cfg.Config]:
    """{run name: Config} for every recipe and seed, validated (ValueError naming the problem)."""
    game_name, base = cfg.named_defaults(args.config, args.game)
    if game_name not in (None, args.game):
        raise ValueError(f"--config={args.config} is for {game_name}, not --game={args.game}")
    shared = typed_settings(args.set, args.game, "--set")
    typed = {
        name: {**shared, **typed_settings(recipe, args.game, f"--recipe {name}")}
        for name, recipe in args.recipes.items()
    }
    configs = {}
    # seed by seed, so that the runs trained at a time are different recipes of one seed: a load
    # on the machine that comes or goes during the experiment falls on the recipes alike
    for seed in args.seeds:
        for name in args.recipes:
            values = {**base, **RUN, **typed[name], "seed": seed, "time_budget": args.minutes}
            try:
                configs[f"{name}-s{seed}"] = config = cfg.load(args.game, values)
            except ValueError as e:
                raise ValueError(f"recipe {name}: {e}") from None
            unused = cfg.ignored(config, typed[name])  # a recipe that would change nothing
            if unused:
                raise ValueError(f"recipe {name}: {'; '.join(unused)}")
    # the runs meet in matches and on one ladder: one game for all, found before any trains
    played = {recipe_of(run): config.make_game() for run, config in configs.items()}
    first, game = next(iter(played.items()))
    for name, other in played.items():
        if not other.same_rules(game):
            raise ValueError(
                f"--recipe {name} plays {other.name} {other.rules}, recipe {first} "
                f"{game.name} {game.rules}: the recipes are rated against each other, so give "
                "game options to all (as flags or --set), not in one --recipe"
            )
    return configs


def core_list() -> list[int]:
    """The cores this process may run on (none known: [])."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def default_at_once() -> int:
    """One run per two cores on a CPU; one at a time on an accelerator, where runs sharing a GPU
    time-slice it and each one's many small kernels wait for the others' (docs/benchmarks.md, "One
    training run at a time on a GPU")."""
    if jax.default_backend() != "cpu":
        return 1
    return max(1, len(core_list()) // 2)


def core_shares(at_once: int) -> list[set[int]]:
    """`at_once` disjoint sets of this process's cores, as equal as they divide."""
    cores = core_list()
    if not cores:
        return [set() for _ in range(at_once)]
    each = max(1, len(cores) // at_once)
    return [set(cores[i * each : (i + 1) * each]) or {cores[-1]} for i in range(at_once)]


def pinned(command: list[str], cores: set[int]) -> list[str]:
    """`command` (a Python one, `command[0]` the interpreter) run on `cores` only: a fresh
    interpreter sets its affinity and replaces itself with the command, which inherits it. (Not
    `Popen(preexec_fn=...)`: this process runs JAX's threads, and code between fork and exec in a
    threaded process can deadlock, as JAX warns.)"""
    if not cores:
        return command
    pin = (
        f"import os, sys; os.sched_setaffinity(0, {sorted(cores)}); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [command[0], "-c", pin, *command]


def leave_accelerator_to_runs() -> dict[str, str]:
    """Keeps this process from taking JAX's default 75% of an accelerator's memory when it first
    uses one (read when its backend starts: call before anything touches JAX). The runs train as
    child processes on the same device, and this one only needs it afterwards to rate them; on an
    H200 it took that memory while validating the configs and held it, so every run logged a
    screen of failed allocations and trained in what was left. Returns the environment for the
    runs: the user's, without the compilation cache."""
    user = dict(os.environ)
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    # and every run compiles its own programs: from the commands' shared compilation cache a run
    # trained after another of the same programs would skip their compilation, tens of seconds
    # of its minutes (azjax.compile_cache)
    user[compile_cache.ENV] = ""
    return user


def check_finished(configs: dict, out: str) -> None:
    """A ValueError where a run in `out`, finished or stopped with checkpoints (which
    `train_all` keeps, or resumes, rather than trains afresh), was trained with other settings
    than `configs` gives it now: its results would be reported under the recipe's new
    settings."""
    for name, config in configs.items():
        folder = os.path.join(out, name)
        trained = os.path.exists(os.path.join(folder, "summary.json")) or holds_checkpoints(folder)
        if not trained or not os.path.exists(os.path.join(folder, "config.json")):
            continue
        with open(os.path.join(folder, "config.json")) as f:
            saved = json.load(f)
        wanted = json.loads(config.to_json())
        other = [f"{k} {saved.get(k)!r}, not {v!r}" for k, v in wanted.items() if saved.get(k) != v]
        if other:
            raise ValueError(
                f"--out {out!r} holds a run {name} trained with other settings "
                f"({'; '.join(other)}): choose another --out, or another recipe name"
            )


STOP_WAIT = 300.0  # seconds a stopped recipes run waits for its runs in training to save
FINISHED = ("iterations", "time_budget")  # a summary.json's stopped_by for a run at its end


def finished(out: str, name: str) -> bool:
    """Whether <out>/<name> trained to its end (its summary.json's `stopped_by` its iterations or
    its time budget; a signal's stop writes one too)."""
    try:
        with open(os.path.join(out, name, "summary.json")) as f:
            return json.load(f).get("stopped_by") in FINISHED
    except (OSError, ValueError):
        return False


def train_all(
    configs: dict, out: str, at_once: int, log, env: dict[str, str] | None = None
) -> dict:
    """Trains the runs of `configs` not yet finished, `at_once` at a time on their own cores, each
    a process with environment `env` (default: this one's); a run stopped before its end (it
    holds checkpoints) goes on from its latest with train.py's --resume, to its own budget.
    Returns {run: summary} of every finished run in `out`, which must have been trained as
    `configs` says (`check_finished`). A run that fails is reported with its log's last lines
    and left out. Stopped by a signal, it stops the runs in training (each saves a checkpoint)
    before it ends."""
    check_finished(configs, out)
    todo = [n for n in configs if not finished(out, n)]
    shares = core_shares(at_once)
    running: dict[str, tuple[subprocess.Popen, int]] = {}
    free = list(range(at_once))
    try:
        while todo or running:
            while todo and free:
                name, slot = todo.pop(0), free.pop(0)
                running[name] = (_start(configs[name], out, name, shares[slot], log, env), slot)
            time.sleep(1.0)
            for name, (process, slot) in list(running.items()):
                if process.poll() is None:
                    continue
                del running[name]
                free.append(slot)
                if process.returncode:
                    with open(os.path.join(out, f"{name}.log")) as f:
                        tail = f.read().splitlines()[-5:]
                    log(f"{name}: train.py exited with {process.returncode}: " + " | ".join(tail))
                else:
                    log(f"{name}: done")
    except KeyboardInterrupt as e:
        _stop(running, log)
        if isinstance(e, Interrupted):
            left = ", ".join(running) or "none"
            raise Interrupted(
                e.signum,
                f"stopped; the runs in training ({left}) saved a checkpoint each: the same command "
                "goes on with them",
            ) from None
        raise
    summaries = {}
    for name in sorted(os.listdir(out)):
        path = os.path.join(out, name, "summary.json")
        if finished(out, name):
            with open(path) as f:
                summaries[name] = json.load(f)
        elif name in configs and os.path.exists(path):
            log(f"{name}: not at its end (summary.json: stopped by a signal), left out")
    return summaries


def _start(config, out: str, name: str, cores, log, env) -> subprocess.Popen:
    """train.py training run `name` into <out>/<name> in a process of its own (its own session:
    a Ctrl-C reaches it from this process alone, once), resuming it where it holds checkpoints."""
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    recipe = os.path.join(out, f"{name}.json")
    if holds_checkpoints(folder):  # stopped before its end: on from its latest checkpoint
        settings = ["--resume"]
    else:
        with open(recipe, "w") as f:
            f.write(config.to_json())
        settings = [f"--config={recipe}"]
    command = [
        sys.executable,
        "-m",
        "azjax.commands.train",
        *settings,
        f"--workdir={folder}",
        "--no_progress",
    ]
    log(f"{name}: training on cores {sorted(cores) or 'all'}: {' '.join(command[1:])}")
    with open(os.path.join(out, f"{name}.log"), "a" if settings == ["--resume"] else "w") as f:
        return subprocess.Popen(
            pinned(command, cores),
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(running: dict, log, wait: float = STOP_WAIT) -> None:
    """Asks each run in training to stop (SIGINT: it finishes its iteration and saves a
    checkpoint), waits for them up to `wait` seconds in all, then kills what is left."""
    if not running:
        return
    log(f"stopping the runs in training ({', '.join(running)}): each saves a checkpoint")
    for process, _ in running.values():
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
    deadline = time.monotonic() + wait
    for name, (process, _) in running.items():
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            log(f"{name}: killed after {wait:.0f} s (its last checkpoint stands)")


def recipe_of(run: str) -> str:
    """The recipe of a run named <recipe>-s<seed>."""
    return run.rsplit("-s", 1)[0]


def anchored(elo: dict, anchors: list[str]) -> dict:
    """The tournament's ratings (their mean at 0) shifted so that the anchors' mean is 0."""
    rated = [elo[a]["elo"] for a in anchors if elo.get(a)]
    shift = float(np.mean(rated)) if rated else 0.0
    return {k: None if v is None else {**v, "elo": v["elo"] - shift} for k, v in elo.items()}


def recipe_table(recipes: list[str], runs: list[str], elo: dict) -> list[dict]:
    """Per recipe: its runs' Elo, their mean and a 95% interval (between-seed spread and the
    ratings' own errors, added in quadrature)."""
    table = []
    for recipe in recipes:
        mine = [r for r in runs if recipe_of(r) == recipe and elo.get(r)]
        if not mine:
            continue
        values = np.array([elo[r]["elo"] for r in mine])
        errors = np.array([elo[r]["stderr"] for r in mine])
        spread = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        stderr = math.sqrt(spread**2 + float(np.mean(errors**2)) / len(values))
        table.append(
            dict(
                recipe=recipe,
                runs=len(mine),
                elo=float(values.mean()),
                ci95=1.96 * stderr,
                each=[round(float(v), 1) for v in values],
                names=mine,  # the runs of `each`, in its order (--seeds')
            )
        )
    return table


def ladder_ratings(game, out: str, runs: list[str], *, sims: int, games: int, seed: int, log):
    """{run: {"elo", "stderr", "ci95", "games", "rounds", "off_scale"}}: each run's final network
    (`sims` simulations, no noise) placed on the game's ladder as `evaluate.py place ckpt:RUN,
    sims=S --games=N --seed=SEED` places it (rounds until settled); {} where `games` is 0."""
    if games == 0:
        return {}
    ladder = require_ladder(game)
    ratings = {}
    for run in runs:
        agent = parse_agent(f"ckpt:{os.path.join(out, run)},sims={sims}", game)
        try:
            p = place_agent(
                game,
                agent,
                ladder,
                rounds=AUTO_ROUNDS,
                settle=True,
                games_per_rung=games,
                key=jax.random.PRNGKey(seed),
                log=lambda text, run=run: log(f"{run}: {text}"),  # its games, rung by rung
            )
        finally:
            agent.close()
        ratings[run] = dict(
            elo=p.elo,
            stderr=p.ci95 / 1.96,
            ci95=p.ci95,
            games=p.games,
            rounds=p.rounds,
            off_scale=off_scale(p),  # +1: won every game against the top rung, a lower bound
        )
        log(f"{run}: ladder {p.said()}")
    return ratings


def format_ladder(table: list[dict], ratings: dict) -> str:
    """The recipes' ladder Elo (`recipe_table` over `ladder_ratings`); ">" marks a seed above the
    ladder's top (a lower bound)."""
    lines = ["| recipe | ladder Elo (mean) | ± 95% | each seed |", "|---|--:|--:|---|"]
    for row in table:
        runs = row["names"]  # --seeds' order, as `format_table`'s (sorted names put s10 first)
        each = ", ".join(
            f"{'>' if ratings[r]['off_scale'] > 0 else ''}{ratings[r]['elo']:+.0f}" for r in runs
        )
        lines.append(f"| {row['recipe']} | {row['elo']:+.0f} | {row['ci95']:.0f} | {each} |")
    return "\n".join(lines)


def error_rates(game, out: str, runs: list[str], *, sims: int, last: int, seed: int, log) -> dict:
    """{run: float[P]} the share of each run's last `last` checkpoints that err in each of the
    game's solved positions (`azjax.solved`; each network as rated: `sims` simulations, no
    noise); {} where the package has no set for the game or `last` is 0."""
    solved = load_set(game)
    if solved is None or last == 0:
        return {}
    states = start_states(game, solved)
    key = jax.random.PRNGKey(seed)
    rates = {}
    for run in runs:
        folder = os.path.join(out, run)
        steps = error_steps(checkpoint_steps(folder), last)
        # one agent a run, its search compiled once; each checkpoint's variables swapped in
        agent = parse_agent(f"ckpt:{folder}@{steps[-1]},sims={sims}", game)
        wrong = []
        for step in steps:
            variables = load_checkpoint(folder, step)[1]
            net = dataclasses.replace(agent, variables=variables)
            wrong.append(errs(solved, choose_moves(game, net, solved, states, key)))
        rates[run] = np.mean(wrong, axis=0)
        log(
            f"{run}: exact error rate {rates[run].mean():.3f} (last {len(wrong)} checkpoints, "
            f"iterations {steps[0]} - {steps[-1]})"
        )
    return rates


def error_steps(steps: list[int], last: int) -> list[int]:
    """The last `last` of a run's checkpoint steps (ascending), none from the first half of its
    iterations: a recipe that trains fewer iterations in the time (a wider network, a larger
    batch) has its checkpoints closer together in time, and its last six would reach back to the
    first minutes of its run where the others' stay in their second half."""
    return [step for step in steps if 2 * step >= steps[-1]][-last:]


def error_table(recipes: list[str], rates: dict) -> list[dict]:
    """Per recipe: the mean exact error rate of its runs, each run's, and against the first
    recipe position by position: the mean difference of the per-position error shares (over
    the recipe's runs and checkpoints) and its z over the positions."""
    pooled = {}
    for recipe in recipes:
        mine = [r for r in rates if recipe_of(r) == recipe]
        if mine:
            pooled[recipe] = (np.mean([rates[r] for r in mine], axis=0), mine)
    table, first = [], next(iter(pooled.values()), (None, None))[0]
    for recipe, (share, mine) in pooled.items():
        d = share - first
        sd = d.std(ddof=1) if len(d) > 1 else 0.0
        table.append(
            dict(
                recipe=recipe,
                rate=float(share.mean()),
                each=[float(rates[r].mean()) for r in mine],  # rounded once, when printed
                difference=float(d.mean()),
                z=float(d.mean() / (sd / math.sqrt(len(d)))) if sd > 0 else 0.0,
                positions=len(d),
            )
        )
    return table


def format_errors(table: list[dict]) -> str:
    first = table[0]["recipe"] if table else ""
    lines = [
        f"| recipe | exact error rate | each seed | against {first} | z |",
        "|---|--:|---|--:|--:|",
    ]
    for row in table:
        lines.append(
            f"| {row['recipe']} | {row['rate']:.3f} | {', '.join(f'{v:.3f}' for v in row['each'])}"
            f" | {row['difference']:+.3f} | {row['z']:+.1f} |"
        )
    return "\n".join(lines)


def format_table(table: list[dict], summaries: dict) -> str:
    lines = [
        "| recipe | runs | Elo (mean) | ± 95% | each seed | iterations | self-play games |",
        "|---|--:|--:|--:|---|---|---|",
    ]
    for row in table:
        runs = row["names"]  # in the order of `each`: --seeds', not the names' (s10 before s2)
        its = ", ".join(str(summaries[r].get("iterations", "?")) for r in runs)
        games = ", ".join(str(summaries[r].get("games", "?")) for r in runs)
        lines.append(
            f"| {row['recipe']} | {row['runs']} | {row['elo']:+.0f} | {row['ci95']:.0f} | "
            f"{', '.join(f'{v:+.0f}' for v in row['each'])} | {its} | {games} |"
        )
    return "\n".join(lines)


def parse(argv: list[str]):
    pre = flags.Parser(module=__spec__.name, add_help=False)
    pre.add_argument("--game", default="hex")
    game = pre.parse_known_args(argv)[0].game
    p = flags.Parser(
        module=__spec__.name,
        description="Recipes trained side by side for the same wall time, then rated together.",
    )
    p.add_argument("--game", default="hex", help=f"one of {', '.join(games.names())}")
    if game not in games.names():
        p.error(f"--game: unknown game {game!r}; choose from {', '.join(games.names())}")
    option_names = flags.add_game_flags(p, game, defaults=cfg.game_defaults(game))
    p.add_argument("--config", default="cpu", help="the recipes' base config (default cpu)")
    p.add_argument(
        "--recipe",
        action="append",
        default=None,
        help="NAME:field=value,... (repeat; default: base: and augment:augment=true)",
    )
    p.add_argument("--set", default="", help="field=value,... for every recipe")
    p.add_argument("--seeds", default="0,1", help="comma-separated run seeds (default 0,1)")
    p.add_argument("--minutes", type=float, default=6.0, help="training time of each run")
    p.add_argument(
        "--at_once",
        type=int,
        default=0,
        help="runs trained at a time (default: cores / 2 on a CPU, 1 on a GPU or TPU)",
    )
    p.add_argument("--games", type=int, default=20, help="games per pair in the rating (even)")
    p.add_argument("--sims", type=int, default=50, help="the networks' simulations when rated")
    p.add_argument(
        "--opening_plies",
        type=int,
        default=2,
        help="each pair's games start from --games / 2 random positions this many plies in, "
        "each once with each colour (0: from the empty board; default 2)",
    )
    p.add_argument(
        "--anchors",
        default="mcts:sims=512",
        help="comma-separated agent specs rated with the networks, options staying with their "
        "spec (e.g. ckpt:pretrained/othello6,sims=50,mcts:sims=512; '' for none)",
    )
    p.add_argument(
        "--error_checkpoints",
        type=int,
        default=6,
        help="also measure the exact error rate of each run's last N checkpoints (none from the "
        "first half of its iterations) where the package has solved positions for the game "
        "(azjax/solved.py; default 6, 0: not)",
    )
    p.add_argument(
        "--ladder_games",
        type=int,
        default=0,
        help="also place each run's final network on the game's Elo ladder (azjax/ladders/) with "
        "this many games a rung and round, rounds until it settles (0: not, the default; 16 as "
        "evaluate.py place)",
    )
    p.add_argument("--out", type=flags.path, default=None, help="default runs/recipes_<game>")
    p.add_argument("--rate_only", action="store_true", help="rate the finished runs only")
    p.add_argument("--seed", type=flags.seed, default=0, help="the rating tournament's seed")
    args = p.parse_args(argv)
    try:
        recipes = [parse_recipe(r) for r in (args.recipe or ["base:", "augment:augment=true"])]
        options = {k: getattr(args, k) for k in option_names if getattr(args, k) is not None}
        args.set = {**options, **parse_settings(args.set, "--set")}
        args.seeds = parse_ints("--seeds", args.seeds, 0)
    except ValueError as e:
        p.error(str(e))
    names = [n for n, _ in recipes]
    if len(set(names)) != len(names):
        p.error(f"--recipe: names must differ, got {', '.join(names)}")
    args.recipes = dict(recipes)
    if args.minutes <= 0:
        p.error(f"--minutes must be > 0, got {args.minutes}")
    if args.games < 2 or args.games % 2:
        p.error(f"--games must be even and at least 2 (colours alternate), got {args.games}")
    if args.sims < 1:
        p.error(f"--sims must be >= 1, got {args.sims}")
    if args.opening_plies < 0:
        p.error(f"--opening_plies must be >= 0, got {args.opening_plies}")
    if args.error_checkpoints < 0:
        p.error(f"--error_checkpoints must be >= 0, got {args.error_checkpoints}")
    if args.ladder_games < 0:
        p.error(f"--ladder_games must be >= 0, got {args.ladder_games}")
    if args.at_once < 0:
        p.error(f"--at_once must be >= 1 (0: the default), got {args.at_once}")
    args.at_once = args.at_once or default_at_once()
    cores = core_list()
    if cores and args.at_once > len(cores):  # core_shares would pin two runs to one core
        p.error(
            f"--at_once={args.at_once} is more than this process's {len(cores)} cores: runs would "
            f"share a core and train on less of it than the others; give at most {len(cores)}"
        )
    args.anchors = split_specs(args.anchors)
    args.out = args.out or os.path.join("runs", f"recipes_{args.game}")
    try:
        flags.check_out(args.out)  # before the training, not after it
        configs = build_configs(args)
    except ValueError as e:
        p.error(str(e))
    if len(configs) + len(args.anchors) < 2:
        p.error("nothing to rate: give two runs or more, or an anchor")
    game = next(iter(configs.values())).make_game()
    if args.ladder_games:  # before training: the placement needs the game's table
        try:
            require_ladder(game)
        except ValueError as e:
            p.error(f"--ladder_games: {e}")
    for spec in args.anchors:  # before training, not after it
        try:
            parse_agent(spec, game).close()
        except ValueError as e:
            p.error(f"--anchors: {e}")
    if args.opening_plies:  # before training: the rating needs that many distinct openings
        try:
            random_sequences(game, args.games // 2, args.opening_plies, None)
        except ValueError as e:
            p.error(f"{e}: give fewer --games or more --opening_plies")
    return args, configs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    user_env = leave_accelerator_to_runs()
    args, configs = parse(argv)
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "log.txt"))
    if not args.rate_only:
        check_finished(configs, args.out)  # a refusal keeps the earlier results
    remove_earlier_results(args.out)
    t_start = time.time()
    summaries = train_all(
        {} if args.rate_only else configs, args.out, args.at_once, log, env=user_env
    )
    summaries = {n: summaries[n] for n in configs if n in summaries}  # this experiment's runs
    t_train = time.time() - t_start
    runs = [n for n in configs if n in summaries]
    if not runs or len(runs) + len(args.anchors) < 2:
        return cli.fail(
            f"python -m {__spec__.name}",
            f"too few finished runs to rate in {args.out}: {', '.join(runs) or 'none'}",
        )
    game = configs[runs[0]].make_game()
    specs = [f"ckpt:{os.path.join(args.out, r)},sims={args.sims}" for r in runs] + args.anchors
    names = runs + args.anchors
    log(f"rating {len(specs)} agents, {args.games} games per pair")
    openings = f"random:{args.games // 2}:{args.opening_plies}" if args.opening_plies else "none"
    record = run_tournament(
        game,
        specs,
        os.path.join(args.out, "tournament"),
        games=args.games,
        seed=args.seed,
        openings=openings,
        log=log,
    )
    elo = anchored({name: record["elo"][spec] for name, spec in zip(names, specs)}, args.anchors)
    table = recipe_table(list(args.recipes), runs, elo)
    text = format_table(table, summaries)
    for name in args.anchors:
        rating = elo.get(name)
        if rating:
            text += f"\nanchor {name}: {rating['elo']:+.0f} ± {rating['ci95']:.0f}"
    rates = error_rates(
        game,
        args.out,
        runs,
        sims=args.sims,
        last=args.error_checkpoints,
        seed=args.seed,
        log=log,
    )
    errors = error_table(list(args.recipes), rates)
    if errors:
        text += "\n\n" + format_errors(errors)
    on_ladder = ladder_ratings(
        game, args.out, runs, sims=args.sims, games=args.ladder_games, seed=args.seed, log=log
    )
    ladder_table = recipe_table(list(args.recipes), runs, on_ladder)
    if ladder_table:
        text += "\n\n" + format_ladder(ladder_table, on_ladder)
    log(text)
    results = dict(
        command="python -m experiments.recipes " + " ".join(argv),
        recipes={n: r for n, r in args.recipes.items()},
        shared=args.set,
        seeds=args.seeds,
        minutes=args.minutes,
        at_once=args.at_once,
        cores=[sorted(s) for s in core_shares(args.at_once)],
        configs={k: json.loads(c.to_json()) for k, c in configs.items()},
        training=summaries,
        elo=elo,
        table=table,
        errors=errors,
        ladder=on_ladder,  # each run's final network on the game's ladder (--ladder_games)
        ladder_table=ladder_table,
        seconds=dict(
            train=round(t_train, 1),
            rate=round(time.time() - t_start - t_train, 1),
            total=round(time.time() - t_start, 1),
        ),
    )
    write_results(args, results, log)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.recipes", main))
