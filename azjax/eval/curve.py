"""A run's learning curve: every checkpoint against the one before it and against pure MCTS.

    record = run_curve("runs/hex6", folder, games=64)       # evaluate.py curve

As the training loop's evaluation and seed 000 Figures 5.1 and 5.2: the first checkpoint plays
the untrained network, both epsilon-greedy; pure MCTS gets twice the network's simulations.
curve.json is rewritten after every checkpoint (`"complete": false` until the last), so an
interrupted curve keeps the checkpoints it played. Where the run logged ladder ratings
(`eval/elo`, `azjax.ladder`), curve.json also holds them (`elo`: one row per evaluation, with
cumulative self-play positions and hours) and curve_elo.png draws them. Where the package has
solved positions for the game (`azjax.solved`), every checkpoint's exact error rate on them (the
network as in the matches against MCTS) joins its row (`errors`) and curve_errors.png draws it;
`errors_only` measures that alone, without the matches: seconds a checkpoint instead of minutes.
"""

from __future__ import annotations

import dataclasses
import os

import jax

from azjax.checkpoint import initial_variables, load_checkpoint, read_config, steps
from azjax.eval.agent import SearchSetup, network_apply, search_agent
from azjax.eval.errors import choose_moves, rate_record
from azjax.eval.match import play_games
from azjax.eval.records import (
    check_games,
    plot_curve,
    plot_elo,
    plot_errors,
    result_record,
    write_json,
)
from azjax.metrics import read_rows, run_seconds
from azjax.search import SearchSpec
from azjax.solved import error_rate, load_set, shipped, start_states
from games.base import Game


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
    log=print,
) -> dict:
    """Plays every checkpoint of `run_dir` (`games` games a match); writes curve.json and
    curve.png into `folder` and returns the record. `sims` (default the run's), `mcts_sims`
    (default twice that) and `epsilon` (default the run's eval_epsilon) override; `game`, when
    given, must be the run's. `errors_only`: no matches, each checkpoint's exact error rate alone
    (ValueError where the package has no solved positions for the game)."""
    check_games(games)
    check_curve_options(sims=sims, mcts_sims=mcts_sims, epsilon=epsilon)
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
    solved = load_set(game)  # None where the package has no solved positions for the game
    if errors_only and solved is None:
        raise ValueError(
            f"--errors_only: no solved positions for {game.name} {dict(game.rules)} "
            f"(the package has: {', '.join(shipped()) or 'none'})"
        )
    solved_states = start_states(game, solved) if solved is not None else None
    trained = training_games(run_dir)
    previous = initial_variables(config)
    key = jax.random.PRNGKey(seed)
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
        complete=False,
        curve=rows,
    )
    for step in steps(run_dir):
        _, variables, _ = load_checkpoint(run_dir, step)
        row = dict(step=step, training_games=trained.get(step))
        matches = ""
        if not errors_only:
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
                game, dataclasses.replace(net, variables=variables), solved, solved_states, key
            )
            row["errors"] = r = rate_record(error_rate(solved, moves))
            sep = ", " if matches else ": "
            errors = f"{sep}exact error rate {r['rate']:.3f} ± {r['ci95']:.3f}"
        rows.append(row)
        write_json(folder, "curve.json", record)  # kept if the curve is interrupted
        log(f"checkpoint {step}{matches}{errors}")
        previous = variables
    record["complete"] = True
    record["elo"] = elo_rows(run_dir)
    if not errors_only:
        plot_curve(record, os.path.join(folder, "curve.png"))
    if record["elo"]:
        plot_elo(record, os.path.join(folder, "curve_elo.png"))
    if solved is not None:
        record["error_positions"] = len(solved)
        plot_errors(record, os.path.join(folder, "curve_errors.png"))
    write_json(folder, "curve.json", record)
    return record


def check_curve_options(*, sims: int | None, mcts_sims: int | None, epsilon: float | None) -> None:
    """ValueError for --sims or --mcts_sims below 1, or --epsilon outside [0, 1]."""
    for name, value in (("--sims", sims), ("--mcts_sims", mcts_sims)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if epsilon is not None and not 0 <= epsilon <= 1:
        raise ValueError(f"--epsilon is a probability, in [0, 1]; got {epsilon}")


def training_games(run_dir: str) -> dict[int, int]:
    """Cumulative self-play games by iteration, from metrics.jsonl ({} if it is missing).

    `azjax.metrics.read_rows` reads it: a torn last line is dropped, and where an older version
    wrote an iteration twice (a crash, then a resume) the later row counts, once."""
    total, out = 0, {}
    for row in read_rows(os.path.join(run_dir, "metrics.jsonl")):
        total += row.get("games", 0)
        out[row["iteration"]] = total
    return out


def elo_rows(run_dir: str) -> list[dict]:
    """The in-loop ladder ratings of a run, from metrics.jsonl ([] without any): one row per
    evaluation with its iteration, elo, ci95, moving (`azjax.ladder.moving`: +1 still climbing
    when its rounds ran out, -1 falling, 0 settled; 0 in runs that predate it), and the cumulative
    self-play positions and hours of training (`metrics.run_seconds`) up to it."""
    rows = read_rows(os.path.join(run_dir, "metrics.jsonl"))
    positions, out = 0, []
    for row, seconds in zip(rows, run_seconds(rows)):
        positions += row.get("positions", 0)
        if "eval/elo" in row:
            out.append(
                dict(
                    iteration=row["iteration"],
                    elo=row["eval/elo"],
                    ci95=row.get("eval/elo_ci95"),
                    moving=row.get("eval/elo_moving", 0),  # +1/-1: not settled (climbing/falling)
                    positions=positions,
                    hours=seconds / 3600.0,
                )
            )
    return out
