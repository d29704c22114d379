"""Matches between any two agents: `play_games`, and `run_match` (evaluate.py match).

    outcome = play_games(game, parse_agent("minimax", game), parse_agent("random", game), 16, key)
    outcome.result.wins, outcome.stats[0].seconds

Two batched agents without `seconds` play in one jitted scan (`azjax.arena.make_match`);
otherwise a Python loop over plies calls batched agents once per ply on the games where they are
to move and Python agents game by game. `play_games` reports each agent's simulations, expected
rollouts (p_r x (simulations + 1): the root and each new leaf roll out with probability p_r) and
measured seconds per move, and the moves of every game (`MatchOutcome.moves`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from azjax import parallel
from azjax.arena import MatchResult, make_match
from azjax.eval.agent import RESIGN, Agent, batch_functions
from azjax.eval.calibration import calibrate
from azjax.eval.game_records import FORMATS, clear_records, write_records
from azjax.eval.records import (
    check_games,
    checkpoints_record,
    game_record,
    outcome_record,
    result_record,
    write_json,
)
from azjax.eval.specs import parse_agents
from games.base import Game


@functools.cache
def _match_fn(
    game: Game, act_a: Callable, act_b: Callable, num_games: int, mesh: Mesh | None
) -> Callable:
    return make_match(game, act_a, act_b, num_games, record=True, mesh=mesh)


def _split_mesh(num_games: int) -> Mesh | None:
    """The devices a jitted match of `num_games` splits its games over: this process's, where
    it has several (`evaluate.py --cpu_devices`) and the games split into halves over them."""
    mesh = parallel.local_mesh()
    if mesh is None or num_games % (2 * parallel.num_devices(mesh)):
        return None
    return mesh


@dataclasses.dataclass(frozen=True)
class MoveStats:
    """What one agent spent per move in a match (None where it does not apply)."""

    simulations: int | None  # search simulations per move
    rollouts: float | None  # expected rollouts per move
    seconds: float | None  # measured wall seconds per move per game (Python-loop matches)
    budget: float | None  # the `seconds` asked for


@dataclasses.dataclass(frozen=True)
class MatchOutcome:
    result: MatchResult  # from agent A's side
    stats: tuple[MoveStats, MoveStats]  # A, B
    wall_seconds: float  # the whole match, compilation included
    returns: np.ndarray  # float32[N], A's return in each game
    a_first: np.ndarray  # bool[N], A played player 0 (black): the first half of the games
    # each game's actions from the initial position, its opening included; where a side
    # resigned, RESIGN (-1) stands last, in the place of the move it did not make
    moves: list[list[int]]
    devices: int = 1  # the devices its games were split over, each with its own key


def play_games(
    game: Game,
    a: Agent,
    b: Agent,
    num_games: int,
    key,
    *,
    openings: list[tuple[int, ...]] | None = None,
    on_games: Callable[[np.ndarray, np.ndarray, list], None] | None = None,
) -> MatchOutcome:
    """`num_games` games of A against B; A plays player 0 (black, the first mover from the
    initial position) in the first half of them and player 1 in the second.

    `openings`: the moves each game starts with (`num_games` sequences, all of one length), e.g.
    from `azjax.eval.openings`; default none, the initial position. Two batched agents
    without `seconds` play in one jitted scan (`azjax.arena.make_match`; its games split over
    the process's devices where it has several and N splits into halves over them, each device
    with its own key: `evaluate.py --cpu_devices`); otherwise a Python loop over plies calls
    batched agents once per ply on the games where they are to move and Python agents game by
    game. Stateful agents (gtp, human) play one game at a time. `seconds`
    agents are calibrated first (batch: half the games at once).

    The outcome holds each game's moves (`MatchOutcome.moves`). `on_games(idx, returns, moves)`
    is told A's returns float32[k] and the moves (as `MatchOutcome.moves`) of the games int[k]
    `idx` as they end, so that a caller can keep
    finished games if the match is stopped: in a Python-loop match after each ply in which some
    ended; in a jitted match (all games in one call) once, at the end.
    """
    if isinstance(num_games, bool) or not isinstance(num_games, (int, np.integer)) or num_games < 1:
        raise ValueError(f"play_games: num_games must be an int >= 1, got {num_games!r}")
    for agent in (a, b):
        agent.check_game(game)
    t0 = time.perf_counter()
    k_cal, k_play = jax.random.split(key)
    lockstep = not (a.stateful or b.stateful)
    batch = (num_games + 1) // 2 if lockstep else 1
    a, b = (calibrate(x, game, batch, k_cal) for x in (a, b))
    timed = any(x.search is not None and x.search.seconds is not None for x in (a, b))
    openings = openings or [()] * num_games
    if len(openings) != num_games or len({len(o) for o in openings}) != 1:
        raise ValueError(f"give {num_games} openings of one length, got {len(openings)}")
    starts = start_states(game, openings)
    mesh = None
    if a.batched and b.batched and not timed:
        mesh = _split_mesh(num_games)
        match = _match_fn(game, a.act, b.act, num_games, mesh)
        va, vb = a.variables, b.variables
        if mesh is not None:  # the variables join the devices the games are split over
            va, vb = jax.device_put((va, vb), parallel.replicated(mesh))
        returns, a_first, actions = jax.device_get(match(va, vb, k_play, starts))
        moves = [list(o) + [int(x) for x in row if x >= 0] for o, row in zip(openings, actions)]
        seconds = (None, None)
        if on_games is not None:
            on_games(np.arange(num_games), np.asarray(returns), moves)
    else:
        returns, a_first, seconds, moves = _play_loop(
            game, (a, b), starts, openings, k_play, lockstep, on_games or (lambda *told: None)
        )
    stats = tuple(_move_stats(x, s) for x, s in zip((a, b), seconds))
    return MatchOutcome(
        MatchResult.from_returns(returns, a_first),
        stats,
        time.perf_counter() - t0,
        np.asarray(returns),
        np.asarray(a_first),
        moves,
        1 if mesh is None else parallel.num_devices(mesh),
    )


def _move_stats(agent: Agent, seconds: float | None) -> MoveStats:
    setup = agent.search
    if setup is None:
        return MoveStats(None, None, seconds, None)
    return MoveStats(setup.spec.num_simulations, setup.rollouts_per_move, seconds, setup.seconds)


class _Side:
    """One side of a Python-loop match: calls the agent and times it."""

    def __init__(self, agent: Agent, pad: int, key):
        self.agent, self.pad, self.key = agent, pad, key
        self.act = jax.jit(agent.act) if agent.batched else None
        self.seconds, self.moves, self.calls = 0.0, 0, 0

    def warm_up(self, states) -> None:
        if self.act is not None:  # compile outside the timing, the key's fold_in included
            sub = jax.tree_util.tree_map(lambda x: x[np.zeros(self.pad, int)], states)
            key = jax.random.fold_in(self.key, 0)  # as `_batched` makes them
            jax.block_until_ready(self.act(self.agent.variables, key, sub))

    def moves_for(self, states, idx: np.ndarray) -> np.ndarray:
        """int actions for the games `idx` of the numpy batch `states`."""
        t0 = time.perf_counter()
        if self.act is None:
            out = np.array([self.agent.choose(_take(states, i)) for i in idx], np.int64)
        else:
            out = np.concatenate(
                [self._batched(states, idx[i : i + self.pad]) for i in range(0, len(idx), self.pad)]
            )
        self.seconds += time.perf_counter() - t0
        self.moves += len(idx)
        return out

    def _batched(self, states, idx: np.ndarray) -> np.ndarray:
        padded = np.concatenate([idx, np.full(self.pad - len(idx), idx[0])])
        sub = jax.tree_util.tree_map(lambda x: x[padded], states)
        self.calls += 1
        key = jax.random.fold_in(self.key, self.calls)
        return np.asarray(self.act(self.agent.variables, key, sub))[: len(idx)]

    @property
    def seconds_per_move(self) -> float | None:
        return self.seconds / self.moves if self.moves else None


def _take(states, i: int):
    return jax.tree_util.tree_map(lambda x: x[i], states)


def start_states(game: Game, openings: list[tuple[int, ...]]):
    """The numpy batch of states after each opening's moves from the initial position."""
    fns = batch_functions(game)
    states = fns.init(len(openings))
    for ply in range(len(openings[0])):
        states = fns.step(states, jnp.asarray([o[ply] for o in openings], jnp.int32))
    return jax.device_get(states)


def _play_loop(game: Game, agents, starts, openings, key, lockstep: bool, on_games: Callable):
    """(A's returns[N], a_first[N], (A's, B's seconds per move), each game's moves) of a
    Python-loop match."""
    num_games = jax.tree_util.tree_leaves(starts)[0].shape[0]
    a_first = np.arange(num_games) < (num_games + 1) // 2
    waves = [np.arange(num_games)] if lockstep else [np.array([i]) for i in range(num_games)]
    pad = (len(waves[0]) + 1) // 2
    players = [_Side(x, pad, k) for x, k in zip(agents, jax.random.split(key))]
    for p in players:
        p.warm_up(starts)
    returns_a = np.zeros(num_games, np.float32)
    moves: list[list[int]] = [[] for _ in range(num_games)]
    for wave in waves:
        wave_starts = jax.tree_util.tree_map(lambda x, w=wave: x[w], starts)
        returns_a[wave], wave_moves = _play_wave(
            game,
            players,
            a_first[wave],
            wave_starts,
            [openings[i] for i in wave],
            lambda idx, r, m, w=wave: on_games(w[idx], r, m),
        )
        for i, m in zip(wave, wave_moves):
            moves[i] = m
    return returns_a, a_first, tuple(p.seconds_per_move for p in players), moves


def tell_moves(game: Game, agent: Agent, moves) -> None:
    """Tells an agent that keeps its own game (GTP) the moves from the initial position, each
    with the state it is played in (`observe_move`)."""
    fns = batch_functions(game)
    state = jax.device_get(fns.init(1))
    for action in moves:
        agent.observe_move(_take(state, 0), action)
        state = jax.device_get(fns.step(state, jnp.asarray([action], jnp.int32)))


def _play_wave(
    game: Game, players, a_first: np.ndarray, states, openings, on_games: Callable
) -> tuple[np.ndarray, list[list[int]]]:
    """A's returns float32[n] and the moves (`MatchOutcome.moves`) of n games played in
    lock-step from `states`, reached by the moves `openings` (A is player 0 where a_first);
    `on_games(idx, returns, moves)` hears of each game as it ends."""
    fns = batch_functions(game)
    step, status = fns.step, fns.status
    n = len(a_first)
    for p in players:
        p.agent.reset()
        if p.agent.stateful:  # an agent that keeps its own game (GTP) is told the opening
            for moves in openings:
                tell_moves(game, p.agent, moves)
    resigned = np.full(n, -1)  # the side (0: A, 1: B) that resigned, else -1
    moves = [list(o) for o in openings]
    reported = np.zeros(n, bool)
    for _ in range(game.max_game_length + 1):
        terminal, mover, returns = jax.device_get(status(states))
        live = ~terminal & (resigned < 0)
        ended = ~live & ~reported
        if ended.any():
            idx = np.flatnonzero(ended)
            on_games(idx, _returns_a(returns, a_first, resigned)[idx], [moves[i] for i in idx])
            reported |= ended
        if not live.any():
            break
        side = np.where((mover == 0) == a_first, 0, 1)
        actions = np.zeros(n, np.int64)
        for s, p in enumerate(players):
            idx = np.flatnonzero(live & (side == s))
            if len(idx):
                actions[idx] = p.moves_for(states, idx)
        resigned = np.where(live & (actions == RESIGN), side, resigned)
        for i in np.flatnonzero(live):
            moves[i].append(int(actions[i]))  # RESIGN ends a game's moves
        played = live & (actions != RESIGN)
        for s, p in enumerate(players):
            if not p.agent.batched:
                for i in np.flatnonzero(played & (side != s)):
                    p.agent.observe_move(_take(states, i), int(actions[i]))
        actions = np.where(played, actions, 0)  # finished games: any action, it is absorbed
        states = jax.device_get(step(states, jnp.asarray(actions, jnp.int32)))
    terminal, mover, returns = jax.device_get(status(states))
    out = _returns_a(returns, a_first, resigned)
    if not reported.all():
        idx = np.flatnonzero(~reported)
        on_games(idx, out[idx], [moves[i] for i in idx])
    return out, moves


def _returns_a(returns: np.ndarray, a_first: np.ndarray, resigned: np.ndarray) -> np.ndarray:
    """A's returns float32[n] from the players' returns float32[n, 2] and resignations."""
    ret_a = np.where(a_first, returns[:, 0], returns[:, 1])
    return np.where(resigned == 0, -1.0, np.where(resigned == 1, 1.0, ret_a)).astype(np.float32)


# ---- evaluate.py match ---------------------------------------------------------------------------
def _keep_finished(folder: str, head: dict, specs: list[str], games: int, game: Game) -> Callable:
    """An `on_games` that keeps match.json up to date with the games finished so far
    (`"complete": false`; their `game_records`, each with its number `game` from 1) and writes
    their record files, so that a match stopped by Ctrl-C or SIGTERM keeps them."""
    returns = np.full(games, np.nan, np.float32)
    a_first = np.arange(games) < (games + 1) // 2
    played: dict[int, list[int]] = {}

    def on_games(idx: np.ndarray, returns_a: np.ndarray, moves: list) -> None:
        returns[idx] = returns_a
        played.update((int(i), list(m)) for i, m in zip(idx, moves))
        done = ~np.isnan(returns)  # all of them too: a signal may come before the record
        records = {
            i: game_record(game, played[i], returns[i], a_first[i])
            for i in map(int, np.flatnonzero(done))
        }
        _write_game_files(folder, game, specs, {i: (played[i], records[i]) for i in map(int, idx)})
        result = MatchResult.from_returns(returns[done], a_first[done])
        write_json(
            folder,
            "match.json",
            dict(
                head,
                complete=False,
                agents=list(specs),
                result=result_record(result),
                game_records=[dict(game=i + 1, **g) for i, g in records.items()],
            ),
        )

    return on_games


def _write_game_files(folder: str, game: Game, specs: list[str], games: dict) -> None:
    """The record files (`folder`/games/) of `games`, {number from 0: (its actions, its
    `game_record`)}; none for a game added without a record format (match.json alone)."""
    if game.name not in FORMATS:
        return
    files = []
    for actions, g in games.values():
        black, white = specs if g["a_played"] == "black" else specs[::-1]
        files.append(dict(actions=actions, black=black, white=white, result=g["result"]))
    write_records(os.path.join(folder, "games"), game, files, list(games))


def run_match(
    game: Game,
    specs: list[str],
    folder: str,
    *,
    games: int | None,
    seed: int = 0,
    openings: str = "none",
    log: Callable[[str], None] | None = None,
) -> dict:
    """The two agents `specs` name play `games` games; writes match.json (with every game's
    moves) and one record file per game (`folder`/games/game-0001.sgf or .txt,
    `azjax.eval.game_records`) into `folder` and returns the record
    (`azjax.eval.records.format_match` prints it).

    `openings` (`azjax.eval.openings`): "all" or "random:N[:PLIES]" play each opening once with
    each colour instead (`games` then None, or twice their number: any other is refused); the
    record then holds every opening's two results and, where a perfect player is at hand, the
    won sides A won.
    `log` (if given) gets one line once both agents are made, before their searches compile:
    who plays how many games.
    """
    from azjax.eval import openings as op

    if isinstance(specs, str) or len(specs) != 2:
        raise ValueError(f"match: give two agents' specs, got {specs!r}")
    k_open, k_play = jax.random.split(jax.random.PRNGKey(seed))
    moves = op.openings(game, openings, k_open)
    games = op.games_played(openings, moves, games)
    check_games(games)
    head = dict(
        game=game.name, game_options=game.options, games=games, seed=seed, openings=openings
    )
    agents = parse_agents(specs, game, seed=seed)
    head["checkpoints"] = checkpoints_record(specs, agents)
    clear_records(os.path.join(folder, "games"))  # games/ holds this match's games alone
    with contextlib.suppress(FileNotFoundError):  # nor an earlier match's, until a game ends
        os.remove(os.path.join(folder, "match.json"))
    if log is not None:  # after the specs are checked: a bad one is the only line printed
        searches = any(agent.search is not None for agent in agents)
        wait = " after compiling the agents' searches" if searches else ""
        log(f"{game.name}: {' vs '.join(specs)}, {games} games{wait}")
    try:
        outcome = play_games(
            game,
            *agents,
            games,
            k_play,
            openings=op.both_colours(moves) if openings != "none" else None,
            on_games=_keep_finished(folder, head, specs, games, game),
        )
    finally:
        for agent in agents:
            agent.close()
    record = dict(head, complete=True, **outcome_record(specs, outcome, game))
    if openings != "none":
        record["by_opening"] = op.opening_records(game, moves, outcome.returns)
    write_json(folder, "match.json", record)  # before the solver: a signal there keeps them
    _write_game_files(
        folder, game, specs, dict(enumerate(zip(outcome.moves, record["game_records"])))
    )
    values = op.perfect_values(game, moves) if openings != "none" else None
    if values is not None:
        for row, v in zip(record["by_opening"], values):
            row["perfect_value_for_black"] = v
        record["vs_perfect_play"] = op.won_sides(values, outcome.returns)
        write_json(folder, "match.json", record)
    return record
