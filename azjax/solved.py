"""Solved positions: the exact error rate, a strength measure without opponents or match noise.

    solved = load_set(game)                         # None where no set ships for the game
    states = start_states(game, solved)             # the P positions, a batch of states
    rate = error_rate(solved, actions)              # actions int[P]: one move per position
    rate.rate, rate.ci95, rate.errors               # share of positions where the move errs

A set holds P middle-game positions, each as its moves from the initial position, and the exact
value of every legal move for the player to move (+1 a win, 0 a draw, -1 a loss with perfect play
after it, from a solver: experiments/solved_positions.py). Every position is a decision: its moves
do not all have the same value. A move *errs* where its value is below the position's best, i.e.
it throws a win or a draw away; the error rate is the share of positions where an agent's move
errs. Sessions 22 and 23 (docs/strength.md) found it tells recipes apart where hundreds of games
cannot: it has no opponent whose mistakes decide games, no colour or opening luck, and every
network answers the same positions, so two networks compare position by position (`paired`).

The positions come from games between pure MCTS players of several strengths, so that the set
favours no recipe's own kind of games (a network errs less on positions from games like its own:
docs/strength.md, "Four recipes for 30 minutes"). The sets ship in the package
(azjax/solved/<game>[-<option><value>..].json, named as the Elo ladder's tables). This module is
pure and numeric, so the training loop uses it (`make_error_evaluation`: eval/error_rate at every
evaluation) without the evaluation wing, whose `evaluate.py errors` measures any agent.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from azjax.ladder import Z95, load_game_file, table_name, write_whole
from azjax.search import SearchSpec

SETS = os.path.join(os.path.dirname(__file__), "solved")
ILLEGAL = -2  # the value table's entry for an illegal action


@dataclasses.dataclass(frozen=True)
class SolvedSet:
    """P solved positions of one game and options."""

    game: str
    game_options: dict[str, Any]
    moves: tuple[tuple[int, ...], ...]  # [P] actions from the initial position to each position
    values: np.ndarray  # int8[P, A]: each action's value for the mover (+1, 0, -1; ILLEGAL)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)  # how it was made

    def __len__(self) -> int:
        return len(self.moves)

    @property
    def best(self) -> np.ndarray:
        """int8[P]: each position's value for the player to move."""
        return self.values.max(axis=1)

    def to_json(self, game) -> dict[str, Any]:
        name = game.action_to_str
        return dict(
            game=self.game,
            game_options=self.game_options,
            info=self.info,
            positions=[
                dict(
                    moves=" ".join(name(a) for a in moves),
                    values={name(a): int(v) for a, v in enumerate(row) if v != ILLEGAL},
                )
                for moves, row in zip(self.moves, self.values)
            ],
        )

    @staticmethod
    def from_json(data: dict[str, Any], game) -> SolvedSet:
        """The set as `to_json` wrote it; ValueError for moves the game does not know."""

        action = game.parse_action  # ValueError for a name that is not a move
        moves, rows = [], []
        for p in data["positions"]:
            moves.append(tuple(action(t) for t in p["moves"].split()))
            row = np.full(game.num_actions, ILLEGAL, np.int8)
            for text, v in p["values"].items():
                if v not in (-1, 0, 1):
                    raise ValueError(f"value {v!r} of {text} is not -1, 0 or 1")
                row[action(text)] = v
            rows.append(row)
        return SolvedSet(
            game=data["game"],
            game_options=dict(data["game_options"]),
            moves=tuple(moves),
            values=np.stack(rows) if rows else np.zeros((0, game.num_actions), np.int8),
            info=dict(data.get("info", {})),
        )


def value_table(game, values: Sequence[dict[int, int]]) -> np.ndarray:
    """int8[P, A] from one {action: value} per position (ILLEGAL elsewhere)."""
    table = np.full((len(values), game.num_actions), ILLEGAL, np.int8)
    for row, vals in zip(table, values):
        for a, v in vals.items():
            row[a] = v
    return table


def set_path(game) -> str:
    """Where the package keeps `game`'s set (which may not exist): named as its ladder table,
    'othello-size6.json'."""
    return os.path.join(SETS, table_name(game.name, game.rules))


def shipped() -> list[str]:
    """The names of the package's sets ('othello-size6', ...)."""
    if not os.path.isdir(SETS):
        return []
    return [name[: -len(".json")] for name in sorted(os.listdir(SETS)) if name.endswith(".json")]


def load_set(game, path: str | None = None) -> SolvedSet | None:
    """The solved positions of `game` from `path` (default: the package's set); None where there
    is none; ValueError for a set of another game or options, or one that cannot be read."""
    parse = functools.partial(SolvedSet.from_json, game=game)
    return load_game_file(game, path or set_path(game), "set of solved positions", parse)


def save_set(solved: SolvedSet, path: str, game=None) -> None:
    """Writes the set whole (a temporary file renamed over it), one position a line."""
    import games as registry

    game = game or registry.make(solved.game, **solved.game_options)
    data = solved.to_json(game)
    positions = data.pop("positions")
    head = json.dumps(data, indent=2)[:-2]  # without the closing brace
    lines = ",\n".join("    " + json.dumps(p) for p in positions)
    write_whole(path, f'{head},\n  "positions": [\n{lines}\n  ]\n}}\n')


def start_states(game, solved: SolvedSet):
    """The set's P positions as a batch of states (each replayed from the initial position)."""
    return replay(game, solved.moves)


def replay(game, lines: Sequence[Sequence[int]]):
    """The positions after each line of moves from the initial position, a batch of P states
    (lines of any lengths)."""
    length = max((len(m) for m in lines), default=0)
    actions = np.zeros((len(lines), max(length, 1)), np.int32)
    for row, moves in zip(actions, lines):
        row[: len(moves)] = moves
    plies = np.array([len(m) for m in lines], np.int32)
    return _replay(game, length)(jnp.asarray(actions), jnp.asarray(plies))


@functools.cache
def _replay(game, length: int) -> Callable:
    def one(actions, plies):  # actions int32[L], of which the first `plies` are played
        def body(i, state):
            moved = game.step(state, actions[i])
            return jax.tree.map(lambda old, new: jnp.where(i < plies, new, old), state, moved)

        return jax.lax.fori_loop(0, length, body, game.init())

    return jax.jit(jax.vmap(one))


class ErrorRate(NamedTuple):
    """An agent's errors over a set's positions."""

    errors: int  # positions where the move chosen throws value away
    positions: int  # P
    rate: float  # errors / positions
    ci95: float  # half-width of the normal-approximation 95% interval of `rate`
    won: float | None  # the rate over the positions won for the mover (None: there are none)
    drawn: float | None  # the rate over the positions whose best move draws (None: none)


def errs(solved: SolvedSet, actions) -> np.ndarray:
    """bool[P]: whether the move chosen in each position (int[P]) is worse than its best; an
    illegal move, or none (a resignation, -1), errs."""
    actions = np.asarray(actions, np.int64)
    inside = (actions >= 0) & (actions < solved.values.shape[1])  # RESIGN (-1) errs
    chosen = solved.values[np.arange(len(solved)), np.where(inside, actions, 0)]
    return ~inside | (chosen == ILLEGAL) | (chosen < solved.best)


def error_rate(solved: SolvedSet, actions) -> ErrorRate:
    """The error rate of one move per position (int[P]) on the set."""
    wrong = errs(solved, actions)
    n = len(wrong)
    rate = float(wrong.mean()) if n else 0.0
    best = solved.best

    def share(mask):
        return float(wrong[mask].mean()) if mask.any() else None

    return ErrorRate(
        errors=int(wrong.sum()),
        positions=n,
        rate=rate,
        ci95=Z95 * math.sqrt(rate * (1.0 - rate) / n) if n else 0.0,
        won=share(best == 1),
        drawn=share(best == 0),
    )


class Paired(NamedTuple):
    """Two agents' errors on the same positions, position by position."""

    only_a: int  # positions where A errs and B does not
    only_b: int  # positions where B errs and A does not
    difference: float  # A's error rate minus B's
    z: float  # McNemar's statistic (only_a - only_b) / sqrt(only_a + only_b); 0 when both are 0


def paired(errs_a: np.ndarray, errs_b: np.ndarray) -> Paired:
    """Compares two agents' `errs` on one set: the positions where they disagree decide."""
    a, b = np.asarray(errs_a, bool), np.asarray(errs_b, bool)
    only_a, only_b = int((a & ~b).sum()), int((b & ~a).sum())
    disagree = only_a + only_b
    return Paired(
        only_a=only_a,
        only_b=only_b,
        difference=float(a.mean() - b.mean()) if len(a) else 0.0,
        z=(only_a - only_b) / math.sqrt(disagree) if disagree else 0.0,
    )


def make_error_evaluation(config, path: str | None = None, *, mesh=None) -> Callable | None:
    """evaluate(variables, key) -> {"eval/error_rate", "eval/error_ci95", "eval/error_won",
    "eval/error_drawn"}: the network (the run's search, greedy) chooses a move in every position
    of the game's solved set, all in one batched search. None where `config.eval_errors` is off
    or the package has no set for the game and options (`path`: another set). With `mesh` the
    positions are split over its devices (the last device's share filled up with copies).
    `evaluate(variables, key, compile_only=True)` compiles the search and returns {}
    (`azjax.ahead`)."""
    from azjax import parallel
    from azjax.ahead import compile_for
    from azjax.arena import make_search_agent
    from azjax.network import make_apply, make_network

    if not config.eval_errors:
        return None
    game = config.make_game()
    solved = load_set(game, path)
    if solved is None:
        return None
    agent = make_search_agent(
        game, SearchSpec.from_config(config), make_apply(make_network(config, game))
    )
    states = start_states(game, solved)
    act = jax.jit(agent)
    if mesh is not None:  # the positions split over the devices, as a match's games are
        states = parallel.split_states(states, mesh)
        act = parallel.split_call(agent, mesh)

    def evaluate(variables, key, compile_only: bool = False) -> dict[str, Any]:
        if compile_only:
            compile_for(act, variables, key, states)
            return {}
        actions = np.asarray(parallel.fetch(act(variables, key, states)))[: len(solved)]
        r = error_rate(solved, actions)
        out = {"eval/error_rate": r.rate, "eval/error_ci95": r.ci95}
        for name, value in (("won", r.won), ("drawn", r.drawn)):
            if value is not None:  # a set without drawn (or won) positions has no rate there
                out[f"eval/error_{name}"] = value
        return out

    return evaluate
