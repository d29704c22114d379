"""A perfect player where one is at hand: the exact Hex solver (`hex_solver`, boards up to 5x5
without the swap rule) and full-depth alpha-beta (`Minimax`) for short games such as
Tic-Tac-Toe. The agent spec `perfect[:seed=S]` names it; `openings.perfect_values` scores an
agent against it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from azjax.eval.agent import Agent
from azjax.eval.minimax import Minimax, solvable_whole
from games.base import Game

SUPPORTED = (
    "Hex up to 5x5 without swap (3x3 with it), or another game of at most 16 plies (Tic-Tac-Toe)"
)
POSITIONS_SUPPORTED = (  # black_value_fn(positions=True)
    "Hex up to 6x6 without swap (6x6 positions well into a game), or a game of at most 16 plies"
)


def _hex_solver(game: Game, positions: bool = False):
    if game.name != "hex":
        return None
    from azjax.eval import hex_solver

    limit = hex_solver.MAX_SIZE if positions else hex_solver.PERFECT_MAX_SIZE
    try:
        return hex_solver.for_game(game, max_size=limit)
    except ValueError:
        return None


def _minimax(game: Game, seed: int = 0) -> Minimax | None:
    if not solvable_whole(game):
        return None
    return Minimax(game, depth=game.max_game_length, seed=seed)


def black_value_fn(game: Game, *, positions: bool = False) -> Callable | None:
    """value(state) -> +1 / 0 / -1, the outcome for black (player 0) with perfect play from the
    unbatched `state`; None where no perfect player is at hand. `positions=True` values positions
    well into a game, where the Hex solver also takes 6x6 (solved sets; not the empty board)."""
    solver = _hex_solver(game, positions)
    if solver is not None:
        from azjax.eval.hex_solver import board_of

        def hex_value(state) -> int:
            if bool(np.asarray(game.is_terminal(state))):
                return int(np.sign(np.asarray(game.returns(state))[0]))
            v = solver.value(board_of(state))
            return v if int(game.current_player(state)) == 0 else -v

        return hex_value
    search = _minimax(game)
    if search is None:
        return None

    def minimax_value(state) -> int:
        if bool(np.asarray(game.is_terminal(state))):
            return int(np.sign(np.asarray(game.returns(state))[0]))
        v = int(np.sign(round(search.value(state), 6)))
        return v if int(game.current_player(state)) == 0 else -v

    return minimax_value


def perfect_agent(game: Game, name: str = "perfect", seed: int = 0) -> Agent:
    """A Python agent that plays a winning move when it has one (at random among them), else the
    solver's choice; ValueError where no perfect player is at hand."""
    solver = _hex_solver(game)
    rng = np.random.default_rng(seed)
    if solver is not None:
        from azjax.eval.hex_solver import board_of

        return Agent(
            name=name, batched=False, choose=lambda state: solver.choose(board_of(state), rng)
        )
    search = _minimax(game, seed)
    if search is None:
        raise ValueError(
            f"perfect: no perfect player for {game.name} {game.options}; supported: {SUPPORTED}"
        )
    return Agent(name=name, batched=False, choose=search.choose)
