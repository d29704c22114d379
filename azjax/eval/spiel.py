"""OpenSpiel's MCTS bot as an opponent: an engine this project did not write.

    agent = parse_agent("spiel:sims=1000", game)       # UCT, c = 1.4, one random rollout a leaf

`pyspiel.MCTSBot` (C++) with `pyspiel.RandomRolloutEvaluator`: standard MCTS, the baseline of
the field (Anthony et al. 2017 and the OpenSpiel paper use it). The agent keeps its own OpenSpiel
state: it is told every move (`observe_move`) and plays its own through `bot.step`, so games are
played one at a time. Action numbers are the same in both libraries for all four games (each
game module says so; tests/test_*.py replay thousands of random games in both). open-spiel is a
test extra: `pip install -e '.[test]'`.
"""

from __future__ import annotations

import numpy as np

from azjax.eval.agent import Agent
from games.base import Game


def spiel_game_string(game: Game) -> str:
    """OpenSpiel's name for `game` with its options; ValueError where OpenSpiel has no match."""
    opts = game.options
    if game.name == "hex":
        return f"hex(board_size={opts['size']},swap={str(opts['swap']).lower()})"
    if game.name == "othello" and opts["size"] == 8:
        return "othello"
    if game.name == "connect_four" and (opts["rows"], opts["cols"], opts["connect"]) == (6, 7, 4):
        return "connect_four"
    if game.name == "tictactoe":
        return "tic_tac_toe"
    raise ValueError(
        f"spiel: OpenSpiel has no {game.name} {opts} (it has Hex of any size, "
        "8x8 Othello, 6x7 Connect Four and Tic-Tac-Toe)"
    )


def spiel_mcts_agent(
    game: Game, name: str, *, sims: int, c: float = 1.4, seed: int = 0, rollouts: int = 1
) -> Agent:
    """A stateful agent playing OpenSpiel's MCTSBot with `sims` simulations per move."""
    try:
        import pyspiel
    except ImportError:
        raise ValueError("spiel: needs open-spiel (pip install -e '.[test]')") from None
    spiel_game = pyspiel.load_game(spiel_game_string(game))
    rng = np.random.default_rng(seed)
    box = {}

    def reset():
        evaluator = pyspiel.RandomRolloutEvaluator(rollouts, int(rng.integers(2**31)))
        box["bot"] = pyspiel.MCTSBot(
            spiel_game, evaluator, c, sims, 1000, False, int(rng.integers(2**31)), False
        )
        box["state"] = spiel_game.new_initial_state()

    def observe_move(state, action):
        del state
        box["state"].apply_action(int(action))

    def choose(state):
        del state
        action = box["bot"].step(box["state"])
        box["state"].apply_action(action)
        return int(action)

    return Agent(
        name=name,
        batched=False,
        choose=choose,
        reset=reset,
        observe_move=observe_move,
        stateful=True,
    )
