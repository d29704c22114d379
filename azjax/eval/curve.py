"""A run's learning curve: every checkpoint against the one before it and against pure MCTS.

    record = run_curve("runs/hex6", folder, games=64)       # evaluate.py curve

As the training loop's evaluation and seed 000 Figures 5.1 and 5.2: the first checkpoint plays
the network the run started from (untrained, or its `--init_from` network while that source can
still be read), both epsilon-greedy; pure MCTS gets twice the network's simulations.
curve.json is rewritten after every checkpoint (`"complete": false` until the last), so an
interrupted curve keeps the checkpoints it played. Where the run logged ladder ratings
(`eval/elo`, `azjax.ladder`), curve.json also holds them (`elo`: one row per evaluation, with
cumulative self-play positions and hours) and curve_elo.png draws them. Where the package has
solved positions for the game (`azjax.solved`), every checkpoint's exact error rate on them (the
network as in the matches against MCTS) joins its row (`errors`) and curve_errors.png draws it.

`measures` chooses what each checkpoint gets (`MEASURES`; default matches and, where the package
has solved positions, errors): "ladder" places every checkpoint on the game's Elo ladder
(`place_agent`, rounds until settled, each starting at the checkpoint before's rating) whatever
the run logged in its loop, where the evaluation budget may have put most placements off; the
rows get `ladder`, curve.json `placed` (as `elo`'s rows) and curve_elo.png draws both.
`errors_only` is `measures=("errors",)`: seconds a checkpoint instead of minutes.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax

from azjax import flags
from azjax.checkpoint import (
    CheckpointError,
    initial_variables,
    load_checkpoint,
    read_config,
    run_rows,
    steps,
    steps_on_disk,
)
from azjax.eval.agent import SearchSetup, network_apply, search_agent
from azjax.eval.errors import choose_moves, rate_record
from azjax.eval.ladder import place_agent, require_ladder
from azjax.eval.match import play_games
from azjax.eval.records import (
    check_games,
    plot_curve,
    plot_elo,
    plot_errors,
    result_record,
    write_json,
)
from azjax.ladder import AUTO_ROUNDS, Rounds, moving, off_scale
from azjax.metrics import run_seconds
from azjax.parallel import local_devices_used
from azjax.search import SearchSpec
from azjax.solved import error_rate, load_set, shipped, start_states
from games.base import Game

# What `run_curve` can measure at each checkpoint (evaluate.py curve --measures)
MEASURES = ("matches", "errors", "ladder")
AUTO = Rounds(AUTO_ROUNDS, True)  # placements' rounds: AUTO_ROUNDS, then on until settled


def parse_measures(text: str | None, *, errors_only: bool = False) -> tuple[str, ...] | None:
    """`--measures` ("matches,ladder", ...) as a tuple of MEASURES names in their order; None for
    the default (None and not `errors_only`); `errors_only` is ("errors",). ValueError for an
    unknown or missing name, or both flags given."""
    if errors_only:
        if text is not None:
            raise ValueError("give --errors_only or --measures, not both")
        return ("errors",)
    if text is None:
        return None
    names = flags.names(text, "--measures", MEASURES)
    return tuple(m for m in MEASURES if m in names)


def start_network(config, log=print) -> tuple[Any, str]:
    """(variables, what they are): the network a run of `config` started from, as its loop's first
    evaluation played it: the untrained one, or with `init_from` the transferred one ("untrained"
    where that source can no longer be read, said in `log`)."""
    fresh = initial_variables(config)
    if not config.init_from:
        return fresh, "untrained"
    from azjax.transfer import transferred_variables

    try:
        return transferred_variables(config, fresh)[0], f"init_from {config.init_from}"
    except ValueError as e:  # the source moved or deleted since: the untrained network instead
        log(f"the first checkpoint plays the untrained network: {e}")
        return fresh, "untrained"


PLOTS = ("curve.png", "curve_elo.png", "curve_errors.png")  # what `run_curve` may draw
ERRORS_STREAM = 2**32 - 1  # fold_in(the curve's key, this): a checkpoint's step is never this


def run_curve(
    run_dir: str,
    folder: str,
    *,
    games: int,
    seed: int = 0,
    sims: int | None = None,
    mcts_sims: int | None = None,
    epsilon: float | None = None,
    game: Game | None = None,
    errors_only: bool = False,
    measures: tuple[str, ...] | None = None,
    ladder_games: int = 16,
    rounds: Rounds = AUTO,
    table: str | None = None,
    ladder_max_sims: int | None = None,
    every: int = 1,
    log=print,
) -> dict:
    """Plays every checkpoint of `run_dir` (`games` games a match); writes curve.json and
    curve.png into `folder` and returns the record. `sims` (default the run's), `mcts_sims`
    (default twice that) and `epsilon` (default the run's eval_epsilon) override; `game`, when
    given, must be the run's. `measures` (MEASURES names; None: matches, and errors where the
    package has solved positions); `errors_only`: ("errors",). "errors" asked for a game without
    solved positions, or "ladder" for one without a ladder table (`table`: another), is a
    ValueError. The ladder placements play `ladder_games` games a rung and round, `rounds` as
    `evaluate.py place`'s, on the rungs of at most `ladder_max_sims` simulations (None: the run's
    own loop's, its `eval_ladder_max_sims`, so that the two curves share a scale; 0: every rung).
    `every` > 1 measures every `every`-th checkpoint, counted back from the last (which is always
    measured); the matches' "previous" is then the last one measured (the network the run
    started from first: `first_previous` in the record)."""
    check_games(games)
    asked = ("errors",) if errors_only else measures
    wanted = set(asked or ("matches", "errors"))
    check_curve_options(
        sims=sims,
        mcts_sims=mcts_sims,
        epsilon=epsilon,
        ladder_games=ladder_games,
        ladder_max_sims=ladder_max_sims,
        every=every,
    )
    config = read_config(run_dir)  # the latest; raises for a folder without checkpoints
    if config.games:  # azjax/shared.py: no per-game curve yet
        raise ValueError(
            f"{run_dir!r} is a shared run of {config.games}: its learning curve is not drawn yet; "
            f"play its checkpoints as ckpt:{run_dir}@STEP,game=NAME (its metrics.jsonl has "
            "each game's in-loop evaluation)"
        )
    own = config.make_game()
    if game is not None and not own.same_rules(game):
        raise ValueError(
            f"{run_dir!r} is a {own.name} {own.rules} run, not {game.name} {game.rules}"
        )
    game = own
    apply = network_apply(config)
    spec = SearchSpec.from_config(config, num_simulations=sims or config.num_simulations)
    mcts_sims = mcts_sims or 2 * spec.num_simulations
    epsilon = config.eval_epsilon if epsilon is None else epsilon
    # one agent of each kind: their searches compile once for all checkpoints
    net = search_agent("network", SearchSetup(game, spec, apply))
    greedy = search_agent("network", SearchSetup(game, spec, apply, epsilon))
    baseline = SearchSpec.pure_mcts(mcts_sims, search="puct")  # seed 000's, as the loop's
    mcts = search_agent("mcts", SearchSetup(game, baseline, None))
    solved = load_set(game) if "errors" in wanted else None  # None: no set for the game
    if asked and "errors" in asked and solved is None:
        raise ValueError(
            f"{'--errors_only' if errors_only else '--measures=errors'}: no solved positions for "
            f"{game.name} {dict(game.rules)} (the package has: {', '.join(shipped()) or 'none'})"
        )
    if solved is None:
        wanted.discard("errors")
    ladder = require_ladder(game, table) if "ladder" in wanted else None
    if ladder is not None:
        cap = config.eval_ladder_max_sims if ladder_max_sims is None else ladder_max_sims
        ladder = ladder.up_to(ladder.loop_cap(cap))
    for name in PLOTS:  # an earlier curve's plots in `folder` would pass for this one's
        if os.path.exists(os.path.join(folder, name)):
            os.remove(os.path.join(folder, name))
    rating = 0.0  # where the next placement starts: the checkpoint before's rating
    # the checkpoints listed before the rows are read: a run still training saves newer ones,
    # whose rows would be missing from rows read first
    saved = steps(run_dir)
    run_so_far = run_rows(run_dir)  # once: each read opens the checkpoints for their rows
    progress = run_progress(run_dir, run_so_far)
    solved_states = start_states(game, solved) if solved is not None else None
    trained = training_games(run_dir, run_so_far)
    previous, first_previous = start_network(config, log)
    key = jax.random.PRNGKey(seed)
    # the error rate's key, the same at every checkpoint (their rates differ by the networks, not
    # the draws) and apart from the checkpoints' match keys: it was `key` itself, whose split is
    # fold_in(key, 0 or 1), checkpoint 1's matches' base
    k_errors = jax.random.fold_in(key, ERRORS_STREAM)
    rows: list[dict] = []
    record = dict(
        run=os.path.abspath(run_dir),
        game=config.game,
        game_options=dict(config.game_options),
        games=games,
        seed=seed,
        simulations=spec.num_simulations,
        mcts_simulations=mcts_sims,
        epsilon=epsilon,
        every=every,
        first_previous=first_previous,
        measures=sorted(wanted, key=MEASURES.index),
        complete=False,
        curve=rows,
        devices=local_devices_used(),  # the games split over them: another count, other games
        **(
            dict(
                placed=[],
                ladder_top=ladder.sims[-1],
                ladder_games=ladder_games,
                ladder_rounds="auto" if rounds.settle else rounds.count,
                ladder_table=table,  # None: the package's
            )
            if ladder is not None
            else {}
        ),
    )
    # an earlier curve's record in `folder` would pass for this one's until its first checkpoint
    write_json(folder, "curve.json", record)
    for step in saved[::-1][::every][::-1]:  # every `every`-th, counted back from the last
        try:
            _, variables, _ = load_checkpoint(run_dir, step)
        except CheckpointError:
            if step in steps_on_disk(run_dir):
                raise
            # a run still training with --keep_checkpoints removed it since the curve began
            log(f"checkpoint {step}: removed by the run since the curve began; skipped")
            record.setdefault("removed", []).append(step)
            continue
        row = dict(step=step, training_games=trained.get(step))
        matches = ""
        if "matches" in wanted:
            k_mcts, k_prev = jax.random.split(jax.random.fold_in(key, step))
            m = play_games(
                game, dataclasses.replace(net, variables=variables), mcts, games, k_mcts
            ).result
            p = play_games(
                game,
                dataclasses.replace(greedy, variables=variables),
                dataclasses.replace(greedy, variables=previous),
                games,
                k_prev,
            ).result
            row.update(vs_mcts=result_record(m), vs_previous=result_record(p))
            matches = (
                f": vs MCTS-{mcts_sims} {m.score:.2f} (W{m.wins} D{m.draws} L{m.losses}), vs "
                f"previous {p.score:.2f} (W{p.wins} D{p.draws} L{p.losses})"
            )
        errors = ""
        if solved is not None:
            moves = choose_moves(
                game,
                dataclasses.replace(net, variables=variables),
                solved,
                solved_states,
                k_errors,
            )
            row["errors"] = r = rate_record(error_rate(solved, moves))
            sep = ", " if matches else ": "
            errors = f"{sep}exact error rate {r['rate']:.3f} ± {r['ci95']:.3f}"
        if ladder is not None:
            k_ladder = jax.random.fold_in(jax.random.fold_in(key, step), 2)
            p = place_agent(
                game,
                dataclasses.replace(net, variables=variables),
                ladder,
                rounds=rounds.count,
                settle=rounds.settle,
                games_per_rung=ladder_games,
                key=k_ladder,
                start=rating,
            )
            rating = p.elo
            way = moving(p, ladder.elo)
            row["ladder"] = dict(
                elo=p.elo,
                ci95=p.ci95,
                games=p.games,
                rounds=p.rounds,
                moving=way,
                off_scale=off_scale(p),
            )
            record["placed"].append(
                dict(iteration=step, elo=p.elo, ci95=p.ci95, moving=way, **progress(step))
            )
            sep = ", " if matches or errors else ": "
            errors += f"{sep}ladder {p.said()}"
        rows.append(row)
        write_json(folder, "curve.json", record)  # kept if the curve is interrupted
        log(f"checkpoint {step}{matches}{errors}")
        previous = variables
    record["complete"] = True
    record["elo"] = elo_rows(run_dir)
    if "matches" in wanted:
        plot_curve(record, os.path.join(folder, "curve.png"))
    if record["elo"] or record.get("placed"):
        plot_elo(record, os.path.join(folder, "curve_elo.png"))
    if solved is not None:
        record["error_positions"] = len(solved)
        plot_errors(record, os.path.join(folder, "curve_errors.png"))
    write_json(folder, "curve.json", record)
    return record


def check_curve_options(
    *,
    sims: int | None,
    mcts_sims: int | None,
    epsilon: float | None,
    ladder_games: int = 16,
    ladder_max_sims: int | None = None,
    every: int = 1,
) -> None:
    """ValueError for --sims, --mcts_sims, --ladder_games or --every below 1, --epsilon outside
    [0, 1], or --ladder_max_sims below -1."""
    if ladder_max_sims is not None and ladder_max_sims < -1:
        raise ValueError(
            "--ladder_max_sims must be -1 (the table's own cap), 0 (every rung) or a number of "
            f"simulations; got {ladder_max_sims}"
        )
    for name, value in (
        ("--sims", sims),
        ("--mcts_sims", mcts_sims),
        ("--ladder_games", ladder_games),
        ("--every", every),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if epsilon is not None and not 0 <= epsilon <= 1:
        raise ValueError(f"--epsilon is a probability, in [0, 1]; got {epsilon}")


def training_games(run_dir: str, rows: list[dict] | None = None) -> dict[int, int]:
    """Cumulative self-play games by iteration, from metrics.jsonl and the rows the latest
    checkpoint holds beyond it (`azjax.checkpoint.run_rows`: a run still training, or killed;
    {} without any).

    `azjax.metrics.read_rows` reads the file: a torn last line is dropped, and where an older
    version wrote an iteration twice (a crash, then a resume) the later row counts, once.
    `rows`: those rows, read already."""
    total, out = 0, {}
    for row in run_rows(run_dir) if rows is None else rows:
        total += row.get("games", 0)
        out[row["iteration"]] = total
    return out


def elo_rows(run_dir: str) -> list[dict]:
    """The in-loop ladder ratings of a run, from metrics.jsonl ([] without any): one row per
    evaluation with its iteration, elo, ci95, moving (`azjax.ladder.moving`: +1 still climbing
    when its rounds ran out, -1 falling, 0 settled; 0 in runs that predate it), and the cumulative
    self-play positions and hours of training (`metrics.run_seconds`) up to it."""
    out = []
    for row, done in _progress_rows(run_dir):
        if "eval/elo" in row:
            out.append(
                dict(
                    iteration=row["iteration"],
                    elo=row["eval/elo"],
                    ci95=row.get("eval/elo_ci95"),
                    moving=row.get("eval/elo_moving", 0),  # +1/-1: not settled (climbing/falling)
                    **done,
                )
            )
    return out


def run_progress(run_dir: str, rows: list[dict] | None = None):
    """progress(iteration) -> {"positions", "hours"}: the run's cumulative self-play positions
    and hours of training up to that iteration, from metrics.jsonl (by its latest row at or before
    the iteration where it does not log that one; zeros before any, as for a run without one)."""
    done = sorted((row["iteration"], d) for row, d in _progress_rows(run_dir, rows))

    def progress(iteration: int) -> dict:
        before = [d for i, d in done if i <= iteration]
        return before[-1] if before else dict(positions=0, hours=0.0)

    return progress


def _progress_rows(run_dir: str, rows: list[dict] | None = None):
    """(row, {"positions", "hours"} up to it) for each row of the run (`run_rows`, or `rows`
    where read already)."""
    rows = run_rows(run_dir) if rows is None else rows
    positions = 0
    for row, seconds in zip(rows, run_seconds(rows)):
        positions += row.get("positions", 0)
        yield row, dict(positions=positions, hours=seconds / 3600.0)
