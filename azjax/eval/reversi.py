"""rust-reversi's alpha-beta engine as an 8x8 Othello opponent: a searcher that is not MCTS and
that this project did not write.

    agent = parse_agent("reversi:depth=6,eval=matrix", game)    # 8x8 Othello only

`rust_reversi.AlphaBetaSearch` (Rust, bitboards; the package `rust-reversi` on PyPI, a test
extra) searches `depth` plies (a forced pass is not counted: it adds a ply) and values the
positions at the limit with one of its evaluators:

    matrix    weighted squares: the sum of `SQUARE_WEIGHTS` over the mover's discs minus the
              opponent's (corners good, the squares next to them bad; Norvig's table, PAIP 18)
    piece     the disc difference
    mobility  the mover's number of legal moves

A finished game inside the tree is worth +-`WIN_SCORE`, beyond any evaluation. The engine is
deterministic (the first of equal moves), so the games of a match differ by their openings
(`--openings`). A move costs about 3 ms at depth 6, 12 ms at depth 7 and 0.15 s at depth 9 on
one CPU core.

Squares are numbered as here (row * 8 + column, a1 = 0, the start has white on d4 and e5); the
agent rebuilds the engine's board from `game.board(state)` each move, so it needs no history.
"""

from __future__ import annotations

import numpy as np

from azjax.eval.agent import Agent
from games.base import Game

EVALUATORS = ("matrix", "piece", "mobility")
SQUARE_WEIGHTS = (  # Norvig, Paradigms of AI Programming (1992), ch. 18: `*weights*`
    (120, -20, 20, 5, 5, 20, -20, 120),
    (-20, -40, -5, -5, -5, -5, -40, -20),
    (20, -5, 15, 3, 3, 15, -5, 20),
    (5, -5, 3, 3, 3, 3, -5, 5),
    (5, -5, 3, 3, 3, 3, -5, 5),
    (20, -5, 15, 3, 3, 15, -5, 20),
    (-20, -40, -5, -5, -5, -5, -40, -20),
    (120, -20, 20, 5, 5, 20, -20, 120),
)
WIN_SCORE = 1 << 20  # a won game in the tree: above any evaluation (|matrix| <= 1,176 = sum |w|)
_MARKS = np.array(list("-XO"))  # empty, black (player 0), white (player 1): the engine's letters


def check_board(game: Game) -> None:
    """ValueError unless `game` is 8x8 Othello, the only board the engine plays."""
    if game.name != "othello" or game.options.get("size") != 8:
        raise ValueError(
            f"reversi: rust-reversi plays 8x8 Othello only, not {game.name} {game.options} "
            "(--game=othello --size=8)"
        )


def engine_board(game: Game, state, rust_reversi):
    """The engine's `Board` of `state` (not terminal), with its player to move."""
    board = rust_reversi.Board()
    line = "".join(_MARKS[np.asarray(game.board(state)).reshape(-1)])
    turn = rust_reversi.Turn.BLACK if int(state.player) == 0 else rust_reversi.Turn.WHITE
    board.set_board_str(line, turn)
    return board


def reversi_agent(game: Game, name: str, *, depth: int, evaluator: str = "matrix") -> Agent:
    """An agent playing rust-reversi's alpha-beta search to `depth` plies with `evaluator`."""
    check_board(game)
    if evaluator not in EVALUATORS:
        raise ValueError(
            f"reversi: unknown eval {evaluator!r}; evaluators: {', '.join(EVALUATORS)}"
        )
    try:
        import rust_reversi
    except ImportError:
        raise ValueError(
            "reversi: needs rust-reversi (pip install rust-reversi, or pip install -e '.[test]')"
        ) from None
    evaluators = {
        "matrix": lambda: rust_reversi.MatrixEvaluator([list(row) for row in SQUARE_WEIGHTS]),
        "piece": rust_reversi.PieceEvaluator,
        "mobility": rust_reversi.LegalNumEvaluator,
    }
    # the engine's max_depth counts the plies after the move it tries at the root
    search = rust_reversi.AlphaBetaSearch(evaluators[evaluator](), depth - 1, WIN_SCORE)

    def choose(state) -> int:
        board = engine_board(game, state, rust_reversi)
        if board.is_pass():
            return game.pass_action
        return int(search.get_move(board))

    return Agent(name=name, batched=False, choose=choose)
