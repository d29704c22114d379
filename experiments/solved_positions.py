"""Build a set of solved positions (`azjax.solved`): middle-game positions from games between pure
MCTS players, every legal move valued exactly by a solver.

    python -m experiments.solved_positions --game=othello --size=6   # -> azjax/solved/
    python -m experiments.solved_positions --game=connect_four --empties=14:20
    python -m experiments.solved_positions --game=hex --size=5 --opening_plies=2 \\
        --pairs=mcts:sims=64/mcts:sims=512,mcts:sims=1024/mcts:sims=1024
    python -m experiments.solved_positions --game=tictactoe --games=120 --opening_plies=2

Games: `--pairs` of pure MCTS players (`mcts:sims=N`, UCT with random rollouts, as the Elo
ladder's rungs: no network, so the set favours no recipe; `--pair A B`, repeated, names any
agents, networks included, whose specs hold commas or slashes) play `--games` games each from random
openings of `--opening_plies` plies, each opening with both colours. From every game `--per_game`
positions are drawn at random among those with `--empties` empty squares (LO:HI) and a move to
choose (not a forced pass). The game's solver (experiments/othello_solver.c for Othello up to
8x8, experiments/connect_four_solver.c for Connect Four of four in a row up to 7x7; each compiled
with the system's C compiler: a win / draw / loss negamax with a transposition table) values every
legal move; a position is kept when its moves do not all have the same value (the mover can throw
a win or a draw away), once (repeats are dropped). Hex up to 6x6 (no swap; on 6x6 keep
`--empties` at most about 26, azjax/eval/hex_solver.py) and Tic-Tac-Toe are
valued in Python by the package's perfect player instead (`azjax.eval.perfect`: the exact Hex
solver, full-depth alpha-beta), each move by the value of the position after it; there
`--empties` counts empty cells. The set stores each position as its moves from
the initial position and each legal move's value for the mover (+1 win, 0 draw, -1 loss).

Before solving, the solver's rules are checked against the game's module on every position of
every game: the same legal moves at each ply and the same discs after each move (the game modules
are themselves checked against OpenSpiel, tests/test_othello.py and tests/test_connect_four.py).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

import games
from azjax import cli, flags, solved
from azjax.eval.agent import batch_functions
from azjax.eval.match import play_games
from azjax.eval.openings import both_colours, random_sequences
from azjax.eval.specs import parse_agent
from experiments.common import Log

PROG = "python -m experiments.solved_positions"  # as its errors are named (cli.fail)

HERE = os.path.dirname(os.path.abspath(__file__))
LOGS = os.path.join("runs", "solved_positions")  # the log of a set written into the package
PERFECT = ("hex", "tictactoe")  # valued by PerfectSolver, in Python: no C solver
EMPTIES = {"othello": "16:20", "connect_four": "16:20", "hex": "6:20", "tictactoe": "2:8"}
PAIRS = "mcts:sims=100/mcts:sims=1000,mcts:sims=300/mcts:sims=3000,mcts:sims=1000/mcts:sims=1000"


def othello_boards(game, states) -> tuple[list[int], list[int]]:
    """(own, opp) per state of a batch of Othello states, as the solver reads them: bit
    r * size + c is square (r, c), as the game's actions number them."""
    n = game.size
    own, opp = (np.asarray(jax.device_get(x)).astype(np.uint64) for x in (states.own, states.opp))
    shifts = (np.arange(n, dtype=np.uint64) * np.uint64(n))[None, :]
    pack = lambda rows: [int(x) for x in np.bitwise_or.reduce(rows << shifts, axis=1)]
    return pack(own), pack(opp)


def connect_four_boards(game, states) -> tuple[list[int], list[int]]:
    """(own, opp) per state of a batch of Connect Four states, as the solver reads them: bit
    c * (rows + 1) + h is height h of column c."""
    own, opp = (np.asarray(jax.device_get(x)).astype(np.uint64) for x in (states.own, states.opp))
    shifts = (np.arange(game.cols, dtype=np.uint64) * np.uint64(game.rows + 1))[None, :]
    pack = lambda cols: [int(x) for x in np.bitwise_or.reduce(cols << shifts, axis=1)]
    return pack(own), pack(opp)


@dataclasses.dataclass(frozen=True)
class Kind:
    """How one game's solver is built and spoken to."""

    source: str  # the C file, in experiments/
    board: Callable  # (game, states[B]) -> (own, opp): the solver's boards
    size: Callable  # (game) -> the board's size as the solver's commands start with it
    legal: Callable  # (game, solver's move mask) -> the game's legal actions, in order
    check: Callable  # (game) -> ValueError where the solver cannot take the game's options


def _othello_legal(game, mask: int) -> list[int]:
    squares = [a for a in range(game.size * game.size) if mask >> a & 1]
    return squares or [game.pass_action]


def _othello_check(game) -> None:
    if game.size > 8:
        raise ValueError(f"the Othello solver takes boards up to 8x8, not {game.size}x{game.size}")


def _connect_four_check(game) -> None:
    if game.connect != 4 or game.rows > 7 or game.cols > 7:
        raise ValueError(
            "the Connect Four solver takes four in a row on boards up to 7x7, not "
            f"{game.connect} on {game.rows}x{game.cols}"
        )


KINDS = {
    "othello": Kind(
        "othello_solver.c", othello_boards, lambda g: f"{g.size}", _othello_legal, _othello_check
    ),
    "connect_four": Kind(
        "connect_four_solver.c",
        connect_four_boards,
        lambda g: f"{g.rows} {g.cols}",
        lambda g, mask: [c for c in range(g.cols) if mask >> c & 1],
        _connect_four_check,
    ),
}


def compile_solver(folder: str, game_name: str = "othello", defines: Sequence[str] = ()) -> str:
    """The game's solver executable, built into `folder` with the C compiler `cc` (or $CC),
    with `defines` (e.g. "LAST_EMPTIES=64") as -D options; RuntimeError naming what failed."""
    source = os.path.join(HERE, KINDS[game_name].source)
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler found (cc, gcc or $CC): the solver is C")
    name = "-".join([os.path.splitext(os.path.basename(source))[0], *defines]).replace("=", "")
    exe = os.path.join(folder, name)
    options = [f"-D{d}" for d in defines]
    done = subprocess.run(
        [compiler, "-O2", *options, "-o", exe, source], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"compiling {source} failed:\n{done.stderr}")
    return exe


class Solver:
    """A compiled solver as a subprocess, one command a line (the C files' heads)."""

    def __init__(self, exe: str, game):
        self.game, self.kind = game, KINDS[game.name]
        self.size = self.kind.size(game)
        self.proc = subprocess.Popen(
            [exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def _ask(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer.startswith("error") or self.proc.poll() is not None:
            raise RuntimeError(f"solver: {answer or 'no answer'} (for {line!r})")
        return answer

    def solve(self, own: int, opp: int) -> dict[int, int]:
        """{action: value for the player to move} over the legal actions (a pass included)."""
        answer = self._ask(f"solve {self.size} {own} {opp}")
        return {int(a): int(v) for a, v in (item.split(":") for item in answer.split())}

    def legal(self, own: int, opp: int) -> list[int]:
        """The legal actions of the player to move, by the solver's rules."""
        return self.kind.legal(self.game, int(self._ask(f"moves {self.size} {own} {opp}")))

    def step(self, own: int, opp: int, action: int) -> tuple[int, int]:
        """(own, opp) after `action`, `own` the new mover's discs."""
        a, b = self._ask(f"step {self.size} {own} {opp} {action}").split()
        return int(a), int(b)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _keys(seed: int, i: int):
    """(openings key, games key) of the i-th pair."""
    return jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), i))


def draw_openings(game, n_pairs: int, per_pair: int, opening_plies: int, seed: int) -> list:
    """Each pair's `per_pair // 2` distinct random openings; ValueError naming the flags where
    the game has fewer."""
    out = []
    for i in range(n_pairs):
        try:
            out.append(random_sequences(game, per_pair // 2, opening_plies, _keys(seed, i)[0]))
        except ValueError as e:
            raise ValueError(
                f"--games={per_pair} needs {per_pair // 2} distinct openings of "
                f"--opening_plies={opening_plies}: {str(e).split(': ', 1)[-1]}; lower --games "
                "or raise --opening_plies"
            ) from None
    return out


def play(game, pairs: list[tuple[str, str]], openings: list, seed: int, log):
    """Every game's moves from the initial position: each pair's games from its `openings`
    (`draw_openings`), each opening with both colours."""
    all_moves = []
    for i, ((a, b), pair_openings) in enumerate(zip(pairs, openings)):
        t0 = time.time()
        outcome = play_games(
            game,
            parse_agent(a, game),
            parse_agent(b, game),
            2 * len(pair_openings),
            _keys(seed, i)[1],
            openings=both_colours(pair_openings),
        )
        r = outcome.result
        log(f"{a} against {b}: {r.wins}-{r.draws}-{r.losses} in {time.time() - t0:.0f} s")
        all_moves += [list(m) for m in outcome.moves]
    return all_moves


def positions_of(game, moves: list[int], solver: Solver, fns) -> list[tuple[int, int, int, bool]]:
    """[(ply, own, opp, forced)] of every position of one game before each of its moves
    (`forced`: one legal action, a pass), checked ply by ply against the solver's rules
    (ValueError where they disagree)."""
    board = KINDS[game.name].board
    state = fns.init(1)
    out, expected = [], None
    for ply, action in enumerate(moves):
        own, opp = (x[0] for x in board(game, state))
        if expected is not None and (own, opp) != expected:
            raise ValueError(f"the solver's discs differ from the game's at ply {ply}: {moves}")
        legal = [int(a) for a in np.flatnonzero(np.asarray(jax.device_get(fns.legal(state)))[0])]
        theirs = solver.legal(own, opp)
        if legal != theirs:
            raise ValueError(f"legal moves differ at ply {ply}: game {legal}, solver {theirs}")
        out.append((ply, own, opp, legal == [getattr(game, "pass_action", -1)]))
        expected = solver.step(own, opp, action)
        state = fns.step(state, np.asarray([action], np.int32))
    return out


class PerfectSolver:
    """Every legal move's exact value from the package's perfect player (`azjax.eval.perfect`):
    for placement games whose states hold a `board` with 0 on empty cells (Hex up to 6x6 without
    swap, Tic-Tac-Toe). ValueError for a game it cannot value."""

    def __init__(self, game):
        from azjax.eval.perfect import POSITIONS_SUPPORTED, black_value_fn

        self.game, self.black_value = game, black_value_fn(game, positions=True)
        if self.black_value is None or game.name not in PERFECT:
            raise ValueError(
                f"no solver for {game.name} {game.options}; Python: {POSITIONS_SUPPORTED}"
            )
        self._step, self._legal = jax.jit(game.step), jax.jit(game.legal_mask)

    def legal(self, state) -> list[int]:
        return [int(a) for a in np.flatnonzero(np.asarray(self._legal(state)))]

    def states(self, moves: list[int], *, check: bool = False):
        """(ply, state) of each position of one game before each of its moves; with `check`,
        ValueError at a move that is not legal there (or comes after the game ended)."""
        state = self.game.init()
        for ply, action in enumerate(moves):
            if check and action not in self.legal(state):
                raise ValueError(f"move {action} at ply {ply} is not legal: {moves}")
            yield ply, state
            state = self._step(state, action)

    def positions(self, moves: list[int], lo: int, hi: int) -> list[tuple[int, bytes, Any]]:
        """[(ply, key, state)] of the positions before each move of one game with LO..HI empty
        cells and more than one move to choose; `key` tells repeated positions apart."""
        out = []
        for ply, state in self.states(moves):
            board = np.asarray(state.board)
            if lo <= int((board == 0).sum()) <= hi and len(self.legal(state)) > 1:
                out.append((ply, board.tobytes(), state))
        return out

    def along(self, moves: list[int], from_ply: int):
        """(ply, `solve`) of each position of one game before its moves from `from_ply` on, every
        move checked (the earlier ones too: `lost_games` judges a record of a game)."""
        states = self.states(moves, check=True)
        return ((ply, self.solve(state)) for ply, state in states if ply >= from_ply)

    def solve(self, state) -> dict[int, int]:
        """{action: value for the player to move} over the legal actions."""
        sign = 1 if int(self.game.current_player(state)) == 0 else -1
        return {a: sign * self.black_value(self._step(state, a)) for a in self.legal(state)}


def draw_and_solve(all_moves, positions: Callable, solve: Callable, per_game: int, rng, log):
    """(drawn, kept): `per_game` positions drawn at random from each game's candidates
    (`positions(moves)` -> [(ply, key, payload)]), once each; of those, [(moves, values)] where
    `solve(payload)` ({action: value}) does not give every move the same value."""
    drawn, seen = [], set()
    for moves in all_moves:
        candidates = positions(moves)
        for i in rng.permutation(len(candidates))[:per_game]:
            ply, key, payload = candidates[i]
            if key not in seen:
                seen.add(key)
                drawn.append((moves[:ply], payload))
    log(f"{len(drawn)} positions drawn from {len(all_moves)} games; solving")
    kept, t0 = [], time.time()
    for i, (moves, payload) in enumerate(drawn):
        values = solve(payload)
        if len(set(values.values())) > 1:
            kept.append((moves, values))
        if (i + 1) % 100 == 0:
            log(f"  {i + 1} solved, {len(kept)} kept, {time.time() - t0:.0f} s")
    return len(drawn), kept


def _options(args) -> dict:
    if args.game in ("othello", "hex"):
        return dict(size=args.size)
    return dict(rows=args.rows, cols=args.cols) if args.game == "connect_four" else {}


def main(argv=None) -> int:
    p = flags.Parser(module=__spec__.name, description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="othello", choices=sorted({*KINDS, *PERFECT}))
    p.add_argument("--size", type=int, default=6, help="Othello's or Hex's board (default 6)")
    p.add_argument("--rows", type=int, default=6, help="Connect Four's rows (default 6)")
    p.add_argument("--cols", type=int, default=7, help="Connect Four's columns (default 7)")
    p.add_argument("--pairs", default=PAIRS, help="A/B agent pairs, comma-separated")
    p.add_argument(
        "--pair",
        nargs=2,
        action="append",
        metavar=("A", "B"),
        help="one pair of agents (repeat; instead of --pairs): for specs that hold commas or "
        "slashes, e.g. --pair ckpt:runs/hour,sims=50 mcts:sims=3000",
    )
    p.add_argument("--games", type=int, default=240, help="games per pair (even)")
    p.add_argument("--opening_plies", type=int, default=4)
    p.add_argument(
        "--empties",
        default=None,
        help="LO:HI empty squares of a drawn position (default: "
        + ", ".join(f"{g} {e}" for g, e in EMPTIES.items())
        + ")",
    )
    p.add_argument("--per_game", type=int, default=2, help="positions drawn from each game")
    p.add_argument("--seed", type=flags.seed, default=0)
    p.add_argument(
        "--out", type=flags.path, default=None, help="default: the package's set for the game"
    )
    args = p.parse_args(argv)
    try:
        game = games.make(args.game, **_options(args))
        if game.name in KINDS:
            KINDS[game.name].check(game)
            perfect = None
        else:
            perfect = PerfectSolver(game)
        args.empties = args.empties or EMPTIES[game.name]
        try:
            lo, hi = (int(x) for x in args.empties.split(":"))
        except ValueError:
            raise ValueError(f"--empties: LO:HI, two integers, got {args.empties}") from None
        if args.pair:
            pairs = [tuple(pair) for pair in args.pair]
        else:
            pairs = [tuple(pair.split("/")) for pair in args.pairs.split(",")]
        if any(len(pair) != 2 for pair in pairs) or args.games < 2 or args.games % 2:
            raise ValueError("--pairs: A/B,A/B,... (or --pair A B, repeated); --games: even")
        if args.per_game < 1 or args.opening_plies < 0:
            raise ValueError(
                f"--per_game must be >= 1 and --opening_plies >= 0, got {args.per_game} and "
                f"{args.opening_plies}"
            )
        if args.out:
            flags.check_file_out(args.out, "--out")  # before the games, not after them
        for spec in dict.fromkeys(spec for pair in pairs for spec in pair):  # in order, once
            parse_agent(spec, game)  # a bad spec is one line here, not a traceback mid-run
        cells = int(np.prod(game.board_shape))
        if not 0 <= lo <= hi or lo > cells:
            raise ValueError(
                f"--empties: LO:HI with 0 <= LO <= HI and LO at most the board's {cells} cells, "
                f"got {args.empties}"
            )
        openings = draw_openings(game, len(pairs), args.games, args.opening_plies, args.seed)
    except ValueError as e:
        return cli.fail(PROG, e)
    out = args.out or solved.set_path(game)
    name = os.path.splitext(os.path.basename(out))[0] + ".log"  # beside --out, not in the package
    log = Log(os.path.join(os.path.dirname(out), name) if args.out else os.path.join(LOGS, name))
    log(f"{game.name} {game.options}: {args}")
    t_start = time.time()
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        try:  # before the games: a missing compiler is found in a second, not after them
            exe = None if perfect else compile_solver(tmp, game.name)
        except (RuntimeError, OSError) as e:
            return cli.fail(PROG, f"the solver: {e}")
        all_moves = play(game, pairs, openings, args.seed, log)
        if perfect is not None:
            drawn, kept = draw_and_solve(
                all_moves,
                lambda moves: perfect.positions(moves, lo, hi),
                perfect.solve,
                args.per_game,
                rng,
                log,
            )
        else:
            fns = batch_functions(game)

            def positions(moves):
                return [
                    (ply, (own, opp), (own, opp))
                    for ply, own, opp, forced in positions_of(game, moves, solver, fns)
                    if lo <= cells - bin(own | opp).count("1") <= hi and not forced
                ]

            with Solver(exe, game) as solver:
                drawn, kept = draw_and_solve(
                    all_moves, positions, lambda p: solver.solve(*p), args.per_game, rng, log
                )
    table = solved.SolvedSet(
        game=game.name,
        game_options=game.rules,
        moves=tuple(tuple(m) for m, _ in kept),
        values=solved.value_table(game, [v for _, v in kept]),
        info=dict(
            command="python -m experiments.solved_positions " + " ".join(argv or sys.argv[1:]),
            players=[list(pair) for pair in pairs],
            games=len(all_moves),
            drawn=drawn,
            empties=[lo, hi],
            seconds=round(time.time() - t_start),
        ),
    )
    solved.save_set(table, out)
    best = table.values.max(axis=1)
    log(
        f"{len(kept)} of {drawn} positions kept (won {int((best == 1).sum())}, drawn "
        f"{int((best == 0).sum())} for the mover); wrote {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.solved_positions", main))
