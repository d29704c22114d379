"""The exact error rate of any agent on a game's solved positions (`evaluate.py errors`).

    record = run_errors(game, ["ckpt:runs/othello6,sims=50", "mcts:sims=1000"], folder)

Every agent chooses one move in each of the set's positions (`azjax.solved`: middle-game
positions whose legal moves a solver valued exactly); a move errs where it throws a win or a draw
away. Batched agents (ckpt, mcts, random) answer all positions in one search (split over
the devices where the process has several: `evaluate.py --cpu_devices`); the others
(spiel, minimax, gtp, ...) one position at a time, a GTP engine told each position's moves first.
Each agent gets its error rate with a 95% interval, and the rates over won and over drawn
positions; each agent after the first is compared with the first position by position
(`azjax.solved.paired`: the positions where one errs and the other does not, and McNemar's z,
which is about +-2 where a difference would arise by chance once in twenty).
"""

from __future__ import annotations

import jax
import numpy as np

from azjax import parallel
from azjax import solved as sv
from azjax.eval.agent import Agent
from azjax.eval.calibration import calibrate
from azjax.eval.match import tell_moves
from azjax.eval.records import checkpoints_record, remove_earlier, write_json
from azjax.eval.specs import parse_agent
from games.base import Game


def require_set(game: Game, path: str | None = None) -> sv.SolvedSet:
    """The game's solved positions (`path`: another set); ValueError naming the games that have
    a set where there is none."""
    solved = sv.load_set(game, path)
    if solved is None and path is not None:
        raise ValueError(f"--positions {path!r}: no such file (leave it out for the package's set)")
    if path is not None:
        check_positions(game, solved, f"--positions {path!r}")
    if solved is None:
        have = ", ".join(sorted(sv.shipped())) or "none"
        raise ValueError(
            f"no solved positions for {game.name} {dict(game.rules)} (the package has: "
            f"{have}); build a set with python -m experiments.solved_positions (in a "
            "checkout), or give --positions=PATH"
        )
    return solved


def check_positions(game: Game, solved: sv.SolvedSet, where: str) -> None:
    """ValueError (naming `where` and the position) unless the set holds positions, each reached
    by legal moves, unfinished, with a value for each legal move and no other (a set made
    elsewhere: the package's are checked by the tests)."""
    from azjax.eval.game_records import replay

    if not len(solved):
        raise ValueError(f"{where}: holds no positions")
    for i, (moves, values) in enumerate(zip(solved.moves, solved.values)):
        try:
            state, _ = replay(game, list(moves))
        except ValueError as e:
            raise ValueError(f"{where}: position {i + 1}: {e}") from None
        legal = np.asarray(game.legal_mask(state)) & (not bool(game.is_terminal(state)))
        if not legal.any() or ((values != sv.ILLEGAL) != legal).any():
            raise ValueError(
                f"{where}: position {i + 1} is finished, or not valued at exactly its legal moves"
            )


def choose_moves(game: Game, agent: Agent, solved: sv.SolvedSet, states, key) -> np.ndarray:
    """int[P]: the move `agent` chooses in each of the set's positions (`states`, their batch;
    RESIGN stays -1 and errs)."""
    k_cal, k_act = jax.random.split(key)
    agent = calibrate(agent, game, len(solved), k_cal)
    if agent.batched:
        mesh = parallel.local_mesh()  # several devices (evaluate.py --cpu_devices): split
        if mesh is None:
            return np.asarray(jax.jit(agent.act)(agent.variables, k_act, states))
        variables = jax.device_put(agent.variables, parallel.replicated(mesh))
        moves = parallel.split_call(agent.act, mesh)(
            variables, k_act, parallel.split_states(states, mesh)
        )
        return np.asarray(parallel.fetch(moves))[: len(solved)]
    host = jax.device_get(states)
    out = []
    for i, moves in enumerate(solved.moves):
        agent.reset()
        if agent.stateful:  # an engine that keeps its own game is told how the position arose
            tell_moves(game, agent, moves)
        out.append(int(agent.choose(jax.tree.map(lambda x, i=i: x[i], host))))
    return np.asarray(out, np.int64)


def rate_record(rate: sv.ErrorRate) -> dict:
    return dict(rate._asdict())


def run_errors(
    game: Game,
    specs: list[str],
    folder: str,
    *,
    seed: int = 0,
    path: str | None = None,
    log=print,
) -> dict:
    """Each agent's error rate on the game's solved positions (`path`: another set), the later
    agents compared with the first; writes errors.json into `folder` and returns its record."""
    solved = require_set(game, path)
    # minimax, perfect, spiel: --seed each (they never meet: a spec errs alike wherever it stands)
    agents = [parse_agent(s, game, seed=seed) for s in specs]
    remove_earlier(folder, "errors.json")
    states = sv.start_states(game, solved)
    key = jax.random.PRNGKey(seed)
    rows, wrong = [], []
    try:
        for i, (spec, agent) in enumerate(zip(specs, agents)):
            moves = choose_moves(game, agent, solved, states, jax.random.fold_in(key, i))
            wrong.append(sv.errs(solved, moves))
            rate = sv.error_rate(solved, moves)
            rows.append(dict(agent=spec, **rate_record(rate), moves=[int(a) for a in moves]))
            log(format_row(rows[-1]))
    finally:
        for agent in agents:
            agent.close()
    for row, w in zip(rows[1:], wrong[1:]):
        row["against_first"] = paired_record(sv.paired(w, wrong[0]))
    best = solved.best
    record = dict(
        game=game.name,
        game_options=game.options,
        seed=seed,
        positions=len(solved),
        won_positions=int((best == 1).sum()),
        drawn_positions=int((best == 0).sum()),
        set_info=solved.info,
        devices=parallel.local_devices_used(),  # the batched agents' positions split
        agents=rows,
        checkpoints=checkpoints_record(specs, agents),
    )
    write_json(folder, "errors.json", record)
    return record


def paired_record(p: sv.Paired) -> dict:
    return dict(only_this=p.only_a, only_first=p.only_b, difference=p.difference, z=p.z)


def format_row(row: dict) -> str:
    parts = [
        f"{name} positions {row[name]:.3f}" for name in ("won", "drawn") if row[name] is not None
    ]
    return (
        f"{row['agent']}: {row['rate']:.3f} ± {row['ci95']:.3f} ({row['errors']} of "
        f"{row['positions']} positions; " + ", ".join(parts) + ")"
    )


def format_errors(record: dict) -> str:
    """The record as text: one line an agent, then each later agent against the first."""
    lines = [
        f"{record['game']} {record['game_options']}: exact error rate on {record['positions']} "
        f"solved positions ({record['won_positions']} won, {record['drawn_positions']} drawn for "
        "the mover)"
    ]
    lines += [format_row(row) for row in record["agents"]]
    first = record["agents"][0]["agent"] if record["agents"] else ""
    for row in record["agents"][1:]:
        p = row["against_first"]
        lines.append(
            f"{row['agent']} against {first}: {p['difference']:+.3f} (errs alone in "
            f"{p['only_this']} positions, {first} alone in {p['only_first']}; z = {p['z']:+.1f})"
        )
    return "\n".join(lines)
