"""The reversi: agent (azjax/eval/reversi.py): rust-reversi's alpha-beta engine on our 8x8 Othello.

The engine keeps its own rules, so these tests also check ours against a second implementation:
its legal moves and passes agree with `legal_mask` along random games, its one-ply choice is the
weighted-squares best computed here from our boards, and it beats random play.
"""

import jax
import numpy as np
import pytest
from spiel_reference import random_games

import games
from azjax.eval.match import play_games
from azjax.eval.reversi import SQUARE_WEIGHTS, engine_board
from azjax.eval.specs import parse_agent

rust_reversi = pytest.importorskip("rust_reversi")  # a test extra; CI installs it

OTHELLO = games.make("othello", size=8)
WEIGHTS = np.array(SQUARE_WEIGHTS)


@pytest.fixture(scope="module")
def random_positions():
    """12 uniformly random 8x8 games (`spiel_reference.random_games`: per ply the states and
    legal masks, leading axes [ply, game])."""
    return random_games(OTHELLO, 12, seed=0)


def positions(traj):
    """(state, legal mask) at each unfinished ply of the games, one at a time."""
    plies, num_games = traj["terminal"].shape
    for t in range(plies):
        for g in range(num_games):
            if not traj["terminal"][t, g]:
                state = jax.tree_util.tree_map(lambda x, t=t, g=g: x[t, g], traj["state"])
                yield state, traj["legal"][t, g]


def test_the_engine_sees_our_legal_moves_and_passes(random_positions):
    passes = 0
    for state, legal in positions(random_positions):
        board = engine_board(OTHELLO, state, rust_reversi)
        assert board.get_legal_moves_tf() == list(legal[:64])
        assert board.is_pass() == bool(legal[64])
        assert not board.is_game_over()
        passes += board.is_pass()
    assert passes > 0  # random games pass now and then: the case is covered


def test_one_ply_takes_the_best_weighted_squares(random_positions):
    agent = parse_agent("reversi:depth=1", OTHELLO)
    step = jax.jit(OTHELLO.step)
    checked = 0
    for state, mask in positions(random_positions):
        legal = np.flatnonzero(mask)
        if len(legal) < 2:
            continue
        mover = int(state.player) + 1  # 1 black, 2 white in `board`
        values = {}
        for a in legal:
            board = np.asarray(OTHELLO.board(step(state, a)))
            values[int(a)] = int((WEIGHTS * ((board == mover) * 1 - (board == 3 - mover))).sum())
        assert values[agent.choose(state)] == max(values.values())
        checked += 1
        if checked == 40:
            break
    assert checked == 40


def test_the_engine_beats_random_play():
    outcome = play_games(
        OTHELLO,
        parse_agent("reversi:depth=5", OTHELLO),
        parse_agent("random", OTHELLO),
        4,
        jax.random.PRNGKey(0),
    )
    assert outcome.result.wins == 4


@pytest.mark.parametrize(
    "text, game, message",
    [
        ("reversi", games.make("othello", size=6), "rust-reversi plays 8x8 Othello only"),
        ("reversi", games.make("hex", size=5), "rust-reversi plays 8x8 Othello only, not hex"),
        ("reversi:eval=corners", OTHELLO, "eval must be one of matrix, piece, mobility"),
        ("reversi:depth=0", OTHELLO, "depth (plies searched) must be in [1, 10000]"),
        ("reversi:sims=5", OTHELLO, "reversi: unknown option 'sims'; options: depth, eval"),
    ],
)
def test_bad_reversi_specs_say_what_is_accepted(text, game, message):
    with pytest.raises(ValueError) as e:
        parse_agent(text, game)
    assert message in str(e.value)


def test_each_evaluator_plays_a_legal_move():
    state = OTHELLO.init()
    for name in ("matrix", "piece", "mobility"):
        move = parse_agent(f"reversi:depth=2,eval={name}", OTHELLO).choose(state)
        assert OTHELLO.legal_mask(state)[move]
