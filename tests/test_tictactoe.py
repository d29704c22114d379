"""Scripted Tic-Tac-Toe games with exact boards, masks and results."""

import jax
import numpy as np
import pyspiel
import pytest
from spiel_reference import compare_with_openspiel

import games


@pytest.fixture(scope="module")
def ttt():
    game = games.make("tictactoe")
    return game, jax.jit(game.step)


def play(ttt, moves):
    game, step = ttt
    state = game.init()
    for m in moves:
        state = step(state, game.parse_action(m, state))
    return state


def test_x_wins_on_a_diagonal(ttt):
    game, _ = ttt
    s = play(ttt, ["a1", "b1", "b2", "c1", "c3"])
    assert bool(s.terminal)
    np.testing.assert_array_equal(game.returns(s), [1, -1])
    np.testing.assert_array_equal(s.board, [1, 2, 2, 0, 1, 0, 0, 0, 1])
    assert not game.legal_mask(s).any()


def test_o_wins_a_column(ttt):
    game, _ = ttt
    s = play(ttt, ["a1", "b1", "c1", "b2", "a2", "b3"])
    np.testing.assert_array_equal(game.returns(s), [-1, 1])
    assert int(game.current_player(s)) == 0


def test_draw_fills_the_board(ttt):
    game, _ = ttt
    s = play(ttt, ["a1", "b2", "c1", "b1", "b3", "a2", "c2", "c3", "a3"])
    assert bool(game.is_terminal(s))
    np.testing.assert_array_equal(game.returns(s), [0, 0])
    assert int(s.num_moves) == 9


def test_mask_and_observation_mid_game(ttt):
    game, _ = ttt
    s = play(ttt, ["b2", "a1"])
    np.testing.assert_array_equal(game.legal_mask(s), [0, 1, 1, 1, 0, 1, 1, 1, 1])
    obs = np.asarray(game.observe(s))  # X to move: plane 0 = X, plane 1 = O
    assert obs[1, 1, 0] == 1 and obs[0, 0, 1] == 1 and obs[..., 2].all()
    assert game.render(s).splitlines()[1] == "1 O . ."
    s = play(ttt, ["b2", "a1", "c3"])  # O to move: plane 0 = O (the mover's), plane 1 = X
    obs = np.asarray(game.observe(s))
    assert obs[0, 0, 0] == 1 and obs[1, 1, 1] == obs[2, 2, 1] == 1 and not obs[..., 2].any()
    assert obs[..., 0].sum() == 1 and obs[..., 1].sum() == 2


def test_occupied_cell_is_rejected(ttt):
    game, _ = ttt
    s = play(ttt, ["b2"])
    with pytest.raises(ValueError, match="not legal here"):
        game.parse_action("b2", s)


def test_tictactoe_matches_openspiel():
    # Same action numbering: row * 3 + col, X (player 0) first.
    stats = compare_with_openspiel(
        games.make("tictactoe"), pyspiel.load_game("tic_tac_toe"), lambda a: a, num_games=2000
    )
    assert 5 <= stats["mean_length"] <= 9
    assert 0.1 < stats["first_player_score"] < 0.5  # X wins ~58%, O ~29% at random


def test_random_playout_matches_move_by_move_in_distribution():
    game = games.make("tictactoe")
    keys = jax.random.split(jax.random.PRNGKey(3), 20000)
    start = jax.vmap(lambda _: game.init())(np.arange(20000))
    fast = np.asarray(jax.jit(jax.vmap(game.random_playout))(start, keys))
    slow = np.asarray(jax.jit(jax.vmap(game.move_by_move_playout))(start, keys))
    for out in (fast, slow):  # random play: X wins 58.5%, O 28.8%, draws 12.7%
        np.testing.assert_allclose(
            [np.mean(out[:, 0] > 0), np.mean(out[:, 0] < 0)], [0.585, 0.288], atol=0.015
        )
    # and from a mid-game position (X: a1 b2, O: c3 a3; X to move)
    mid = game.init()
    for m in ["a1", "c3", "b2", "a3"]:
        mid = game.step(mid, game.parse_action(m, mid))
    mids = jax.tree_util.tree_map(lambda x: np.broadcast_to(x, (20000, *x.shape)), mid)
    fast = np.asarray(jax.jit(jax.vmap(game.random_playout))(mids, keys))
    slow = np.asarray(jax.jit(jax.vmap(game.move_by_move_playout))(mids, keys))
    np.testing.assert_allclose(np.mean(fast, 0), np.mean(slow, 0), atol=0.03)
