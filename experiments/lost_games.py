"""Where a match's games were lost: every move of a recorded match valued exactly by the game's
solver, from a ply on.

    python evaluate.py match ckpt:runs/othello6,sims=50 mcts:sims=10000 --game=othello --size=6
    python -m experiments.lost_games runs/eval/match-<time>/match.json --from_ply=8
    python -m experiments.lost_games runs/eval/m10k-s*/match.json --out=runs/eval/m10k.json

Several matches of the same game and agents (one a seed of the opponent, say) are judged in
turn with one solver, each written beside its match, and then summed: printed, and written to
`--out` where given.

The solver is experiments/solved_positions.py's (Othello up to 8x8, Connect Four of four in a row
up to 7x7, C compiled with the system's compiler; Hex up to 6x6 without the swap rule and
Tic-Tac-Toe through the package's perfect player); it values every legal move of every position
from `--from_ply` on (+1 a win, 0 a draw, -1 a loss for the player to move). A move *throws value
away* where it is worth less than the position's best move (a won position to a draw or a loss, a
drawn one to a loss). Printed, and written to lost_games.json beside the match:

- per agent and colour, the games by the exact value of the position at `--from_ply` for that
  agent and how they ended, and the games over before `--from_ply` on a row of their own
  ("ended sooner": on 8x8 Othello from ply 38 these were wipeouts, session 73);
- per agent and colour, the games in which it held a won position at some ply from
  `--from_ply` on (there, or after a move of its opponent's that threw the game to it) and how
  they ended: their draws and losses are what its own lines, played perfectly from their first
  won position on, would have turned into wins;
- per agent, its score in the match and what it would have scored converting every won or drawn
  position it held from `--from_ply` on (the cap of docs/strength.md, "The Othello target's cap
  on the latest hours");
- per agent, its moves from `--from_ply` on, the *decision positions* among them (at least one
  legal move throws value away) and the moves that threw value away, and the ply of each game at
  which it first did.

Each game is checked: an agent's final result is the value at `--from_ply` plus what its opponent
threw away minus what it threw away (each throw counted by how far it fell), and the solver's
legal moves and discs are the game's at every ply (ValueError where not); a resigned game's
moves are judged, its result is not checked. Moves before
`--from_ply` are not judged, and it must be at least the match's opening plies (those moves were
drawn, not chosen). On 6x6 Othello a position with 22 - 26 empty squares (ply 6 - 10) takes
about 4 s on one core of a 2-core CPU, some over a minute, and the solver's table stays warm
along a game and from match to match (in session 109, 20 games of a network against
MCTS-10,000 judged from ply 8 took about a minute a match alone, 20 - 23 s a match in a command
of eight); on 8x8 a game judged from ply 38 (22 empty squares) takes about 3 s, from ply 36
about 20 s. The Hex solver is in Python: on
6x6 a position with 28 empty cells (ply 8) takes seconds, some half a minute; judge from ply 10
or later there.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections import Counter
from typing import NamedTuple

import games
from azjax import cli, flags
from azjax.eval import openings as openings_lib
from azjax.eval.agent import batch_functions
from experiments.solved_positions import (
    KINDS,
    PERFECT,
    PerfectSolver,
    Solver,
    compile_solver,
    positions_of,
)

PROG = "python -m experiments.lost_games"  # as its errors are named (cli.fail)

COLOURS = ("black", "white")  # the first and the second player, as match records name them
VALUES = {1: "won", 0: "drawn", -1: "lost"}
ENDED_SOONER = "ended sooner"  # the row of the games over before --from_ply


class Move(NamedTuple):
    """One judged move: who made it, where, the best value there and the value of the move."""

    ply: int
    colour: str
    best: int  # the position's value for the mover
    chosen: int  # the chosen move's value for the mover
    decision: bool  # some legal move is worth less than the best


def judge_moves(moves: list[int], valued) -> list[Move]:
    """Every judged move of one game: `valued` yields (ply, {action: value for the mover}) of each
    position from the first judged ply on (ValueError where the game's move is not legal there)."""
    judged = []
    for ply, values in valued:
        if moves[ply] not in values:
            raise ValueError(f"move {moves[ply]} at ply {ply} is not legal: {moves}")
        best = max(values.values())
        decision = min(values.values()) < best
        judged.append(Move(ply, COLOURS[ply % 2], best, values[moves[ply]], decision))
    return judged


def judge_game(game, moves: list[int], from_ply: int, solver: Solver, fns) -> list[Move]:
    """Every move of one game from `from_ply` on, valued by the C `solver` (its rules checked
    against the game's at every ply, `positions_of`)."""
    positions = positions_of(game, moves, solver, fns)
    return judge_moves(
        moves, ((ply, solver.solve(own, opp)) for ply, own, opp, _ in positions if ply >= from_ply)
    )


def start_for(judged: list[Move], colour: str) -> int:
    """The exact value of a game's first judged position for `colour`."""
    first = judged[0]
    return first.best if first.colour == colour else -first.best


def outcome_for(result: str, colour: str) -> int:
    """+1, 0 or -1 for `colour` of a game that `result` ('black', 'white' or 'draw') won."""
    return 0 if result == "draw" else (1 if result == colour else -1)


def check_game(judged: list[Move], result: str) -> None:
    """The final result is the value at the first judged ply moved by what each side threw away
    (ValueError where not: the record and the solver disagree)."""
    value = start_for(judged, "black")
    for m in judged:
        fall = m.best - m.chosen
        value += -fall if m.colour == "black" else fall
    if value != outcome_for(result, "black"):
        raise ValueError(
            f"the solver's values do not add up to the game's result ({result}): the record is "
            "not a game of these rules"
        )


def judge_all(moves: list[list[int]], records: list[dict], resigned: list[bool], judge):
    """`judge(moves)` of every game, each checked against its recorded result unless resigned
    (ValueError naming the game where the values and the record disagree)."""
    judged_games = []
    for i, (game_moves, record) in enumerate(zip(moves, records)):
        try:
            judged = judge(game_moves)
            if judged and not resigned[i]:
                check_game(judged, record["result"])
        except ValueError as e:
            raise ValueError(f"game {i + 1}: {e}") from None
        judged_games.append(judged)
    return judged_games


def best_held(judged: list[Move], colour: str) -> int:
    """The best exact value `colour` held at some judged ply (+1 won, 0 drawn, -1 lost): at the
    first, at one of its own moves, or after one of its opponent's (a throw that hands it more)."""
    return max(
        start_for(judged, colour),
        *((m.best if m.colour == colour else -m.chosen) for m in judged),
    )


def points(value: int) -> float:
    """A game's points for a value or an outcome: 1 a win, 0.5 a draw, 0 a loss."""
    return (value + 1) / 2


def summarise(records: list[dict], judged_games: list[list[Move]], agents: list[str]) -> dict:
    """The tables of the module's docstring, as a JSON-ready dict, keyed by the agents' names
    ("NAME (A)" and "NAME (B)" where a match played an agent against itself)."""
    out = {}
    if len(set(agents)) < len(agents):
        agents = [f"{name} ({side})" for name, side in zip(agents, "AB")]
    for index, name in enumerate(agents):
        by_value: dict[str, Counter] = {}
        held: dict[str, Counter] = {}
        moves = decisions = throws = 0
        scored = converted = 0.0
        first_throws = []
        for record, judged in zip(records, judged_games):
            a_colour = record["a_played"]
            colour = a_colour if index == 0 else COLOURS[1 - COLOURS.index(a_colour)]
            end = outcome_for(record["result"], colour)
            start = VALUES[start_for(judged, colour)] if judged else ENDED_SOONER
            row = by_value.setdefault(f"{colour}, {start}", Counter())
            row["games"] += 1
            row[VALUES[end]] += 1
            scored += points(end)
            if not judged:  # over before the first judged ply: no moves to count
                converted += points(end)
                continue
            best = best_held(judged, colour)
            converted += points(max(best, end))  # an opponent may resign a game it held won
            if best == 1:  # it held a won position
                held_row = held.setdefault(colour, Counter())
                held_row["games"] += 1
                held_row[VALUES[end]] += 1
            own = [m for m in judged if m.colour == colour]
            moves += len(own)
            decisions += sum(m.decision for m in own)
            thrown = [m.ply for m in own if m.chosen < m.best]
            throws += len(thrown)
            first_throws.append(thrown[0] if thrown else None)
        out[name] = dict(
            by_value={k: dict(v) for k, v in sorted(by_value.items())},
            held_won={k: dict(v) for k, v in sorted(held.items())},
            score=scored / len(records) if records else 0.0,
            converted_score=converted / len(records) if records else 0.0,
            moves=moves,
            decisions=decisions,
            throws=throws,
            first_throw_plies=first_throws,
        )
    return out


def report(summary: dict, from_ply: int) -> list[str]:
    """The summary as printed lines."""
    lines = []
    for name, s in summary.items():
        lines.append(f"{name}")
        lines.append(f"  {'colour, value at ply ' + str(from_ply):28s} games  won drawn lost")
        for key, row in s["by_value"].items():
            lines.append(
                f"  {key:28s} {row['games']:5d} {row.get('won', 0):4d} {row.get('drawn', 0):5d} "
                f"{row.get('lost', 0):4d}"
            )
        for colour in COLOURS:
            games = sum(row["games"] for k, row in s["by_value"].items() if k.startswith(colour))
            row = s["held_won"].get(colour, {})
            if games:
                lines.append(
                    f"  {colour}: held a won position at some ply from {from_ply} in "
                    f"{row.get('games', 0)} of {games} games: won {row.get('won', 0)}, drawn "
                    f"{row.get('drawn', 0)}, lost {row.get('lost', 0)}"
                )
        lines.append(
            f"  score {s['score']:.3f}; converting every won or drawn position it held from ply "
            f"{from_ply} on: {s['converted_score']:.3f}"
        )
        rate = s["throws"] / s["decisions"] if s["decisions"] else 0.0
        firsts = Counter(p for p in s["first_throw_plies"] if p is not None)
        lines.append(
            f"  threw value away in {s['throws']} of {s['moves']} moves, {s['decisions']} of them "
            f"decisions ({rate:.3f} of the decisions); first throw at ply (games): "
            + (", ".join(f"{p} ({n})" for p, n in sorted(firsts.items())) or "none")
        )
    return lines


class Match(NamedTuple):
    """One match.json as `main` judges it: its records and their moves parsed."""

    path: str
    game: games.Game
    agents: list[str]
    records: list[dict]
    moves: list[list[int]]
    resigned: list[bool]


def load_match(path: str, from_ply: int) -> Match:
    """A match.json's games, checked (ValueError naming what is wrong: not a match of
    `evaluate.py match`, a game without a solver, or `from_ply` inside its drawn openings)."""
    try:
        with open(path) as f:
            match = json.load(f)
        name, options, agents = match["game"], match["game_options"], match["agents"]
        records = match["game_records"]
        if not (isinstance(name, str) and isinstance(options, dict)):
            raise TypeError("game must be a name, game_options an object")
        for r in records:  # what judge_all and summarise read of each game
            if not isinstance(r, dict) or not isinstance(r.get("moves"), list):
                raise TypeError("each game record must be an object with a list of moves")
            missing = [k for k in ("a_played", "result") if k not in r]
            if missing:
                raise KeyError(missing[0])
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a match.json of evaluate.py match ({e!r})") from None
    if name not in KINDS and name not in PERFECT:
        solvers = ", ".join(sorted({*KINDS, *PERFECT}))
        raise ValueError(f"no solver for {name}: one of {solvers}")
    game = games.make(name, **options)
    kind, _, plies = openings_lib.parse(match.get("openings", "none"))
    drawn = {"none": 0, "all": 1}.get(kind, plies)
    if from_ply < drawn:
        raise ValueError(
            f"--from_ply must be at least the match's {drawn} opening plies, not {from_ply}"
        )
    resigned = [r["moves"][-1:] == ["resign"] for r in records]  # its last "move"
    moves = []
    for record, gave_up in zip(records, resigned):
        names = record["moves"][:-1] if gave_up else record["moves"]
        moves.append([game.parse_action(m) for m in names])
    return Match(path, game, agents, records, moves, resigned)


def write(out: str, match, from_ply: int, summary: dict, judged_games) -> None:
    """A lost_games.json: the match (a path, or the list of them summed), the summary and, for
    one match, every judged move of its games."""
    record = dict(match=match, from_ply=from_ply, summary=summary)
    if judged_games is not None:
        record["games"] = [[m._asdict() for m in judged] for judged in judged_games]
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
    print(f"wrote {out}")


def main(argv=None) -> int:
    p = flags.Parser(module=__spec__.name, description=__doc__.split("\n\n")[0])
    p.add_argument(
        "match",
        nargs="+",
        help="a match.json written by `evaluate.py match`; several (the same game and agents, "
        "e.g. one per seed of the opponent) are judged in turn and summed",
    )
    p.add_argument("--from_ply", type=int, default=8, help="the first ply judged (default 8)")
    p.add_argument(
        "--out",
        type=flags.path,
        default=None,
        help="one match: its lost_games.json (default: beside the match); several: each goes "
        "beside its match, and --out (default none) gets their sum's summary",
    )
    args = p.parse_args(argv)
    if args.from_ply < 0:
        p.error(f"--from_ply must be >= 0, got {args.from_ply}")
    try:
        if args.out:
            flags.check_file_out(args.out, "--out")  # before the solver's work, not after it
        folders = [os.path.dirname(os.path.abspath(path)) for path in args.match]
        if len(set(folders)) < len(folders):
            raise ValueError(
                "two of the matches are in one folder, where each would write its "
                "lost_games.json: give each match a folder of its own (evaluate.py match --out)"
            )
        matches = [load_match(path, args.from_ply) for path in args.match]
        first = matches[0]
        for m in matches[1:]:
            if (m.game.name, m.game.options, m.agents) != (
                first.game.name,
                first.game.options,
                first.agents,
            ):
                raise ValueError(
                    f"{m.path}: its game or agents differ from {first.path}'s; several matches "
                    "are summed only where they are the same"
                )
        game = first.game
        perfect = PerfectSolver(game) if game.name in PERFECT else None  # e.g. 7x7 Hex
        if perfect is None:
            KINDS[game.name].check(game)
    except ValueError as e:
        return cli.fail(PROG, e)
    judged = []
    try:
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            if perfect is None:
                try:
                    exe = compile_solver(tmp, game.name)
                except (RuntimeError, OSError) as e:  # no compiler, or it failed
                    raise ValueError(f"the solver: {e}") from None
                solver = stack.enter_context(Solver(exe, game))  # one, warm, for every match
                fns = batch_functions(game)

                def judge(moves):
                    return judge_game(game, moves, args.from_ply, solver, fns)
            else:

                def judge(moves):
                    return judge_moves(moves, perfect.along(moves, args.from_ply))

            for m in matches:
                try:
                    judged.append(judge_all(m.moves, m.records, m.resigned, judge))
                except ValueError as e:
                    raise ValueError(f"{m.path}: {e}") from None
    except ValueError as e:
        return cli.fail(PROG, e)
    for m, judged_games in zip(matches, judged):
        summary = summarise(m.records, judged_games, m.agents)
        if len(matches) > 1:
            print(m.path)
        for line in report(summary, args.from_ply):
            print(line)
        beside = os.path.join(os.path.dirname(os.path.abspath(m.path)), "lost_games.json")
        out = args.out if args.out and len(matches) == 1 else beside
        write(out, m.path, args.from_ply, summary, judged_games)
    if len(matches) > 1:
        records = [r for m in matches for r in m.records]
        summary = summarise(records, [g for j in judged for g in j], first.agents)
        print(f"all {len(matches)} matches, {len(records)} games")
        for line in report(summary, args.from_ply):
            print(line)
        if args.out:
            write(args.out, args.match, args.from_ply, summary, None)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.lost_games", main))
