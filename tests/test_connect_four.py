"""Scripted Connect Four games with exact boards, masks and results; checks against OpenSpiel."""

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest
from spiel_reference import compare_with_openspiel, random_games

import games
from games.base import random_action


@pytest.fixture(scope="module")
def c4():
    game = games.make("connect_four")
    return game, jax.jit(game.step)


@pytest.fixture(scope="module")
def small():
    game = games.make("connect_four", rows=4, cols=4, connect=4)
    return game, jax.jit(game.step)


def play(fixture, moves):
    """The state after the moves, given as a string of 1-based column numbers ("4453")."""
    game, step = fixture
    state = game.init()
    for m in moves:
        state = step(state, game.parse_action(m, state))
    return state


def board(*rows):
    return "\n".join([*rows, "1 2 3 4 5 6 7"])


def test_x_wins_vertically(c4):
    game, _ = c4
    s = play(c4, "1212121")
    assert bool(s.terminal) and int(s.num_moves) == 7
    np.testing.assert_array_equal(game.returns(s), [1, -1])
    assert game.render(s) == board(
        ". . . . . . .",
        ". . . . . . .",
        "X . . . . . .",
        "X O . . . . .",
        "X O . . . . .",
        "X O . . . . .",
    )
    assert not game.legal_mask(s).any()


def test_o_wins_horizontally(c4):
    game, _ = c4
    s = play(c4, "12137475")
    np.testing.assert_array_equal(game.returns(s), [-1, 1])
    assert int(game.current_player(s)) == 0
    assert game.render(s).splitlines()[-3:-1] == ["X . . . . . X", "X O O O O . X"]


def test_x_wins_on_the_rising_diagonal(c4):
    game, _ = c4
    s = play(c4, "12233434474")
    np.testing.assert_array_equal(game.returns(s), [1, -1])
    assert game.render(s) == board(
        ". . . . . . .",
        ". . . . . . .",
        ". . . X . . .",
        ". . X X . . .",
        ". X X O . . .",
        "X O O O . . O",
    )


def test_o_wins_on_the_falling_diagonal(c4):
    game, _ = c4
    before = play(c4, "74332212171")
    assert not bool(before.terminal)  # X has three across and three up, O not yet four
    s = play(c4, "743322121711")
    np.testing.assert_array_equal(game.returns(s), [-1, 1])
    np.testing.assert_array_equal(
        game.board(s),
        [
            [0, 0, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0, 0],
            [2, 0, 0, 0, 0, 0, 0],
            [1, 2, 0, 0, 0, 0, 0],
            [1, 2, 2, 0, 0, 0, 2],
            [1, 1, 1, 2, 0, 0, 1],
        ],
    )


def test_full_column_is_masked_and_a_drop_there_changes_nothing(c4):
    game, step = c4
    s = play(c4, "444444")  # alternating discs: no line
    assert not bool(s.terminal)
    np.testing.assert_array_equal(game.legal_mask(s), [1, 1, 1, 0, 1, 1, 1])
    assert game.render(s).splitlines()[0] == ". . . O . . ."
    with pytest.raises(ValueError, match="not legal here"):
        game.parse_action("4", s)
    after = step(s, jnp.int32(3))  # the illegal drop, taken by the jitted core
    jax.tree_util.tree_map(np.testing.assert_array_equal, after, s)


def test_draw_fills_a_small_board(small):
    game, _ = small
    s = play(small, "2234114322434311")  # found by random search, checked in OpenSpiel
    assert bool(game.is_terminal(s)) and int(s.num_moves) == 16
    np.testing.assert_array_equal(game.returns(s), [0, 0])
    assert game.render(s) == "O O O X\nX X O X\nO O O X\nX X X O\n1 2 3 4"
    one_short = play(small, "223411432243431")
    assert not bool(one_short.terminal)
    np.testing.assert_array_equal(game.legal_mask(one_short), [1, 0, 0, 0])


def test_terminal_state_is_absorbing(c4):
    game, step = c4
    s = play(c4, "1212121")
    for a in range(7):
        jax.tree_util.tree_map(np.testing.assert_array_equal, step(s, jnp.int32(a)), s)


def test_observation_is_from_the_mover_with_row_0_on_top(c4):
    game, _ = c4
    s = play(c4, "44")  # X to move
    obs = np.asarray(game.observe(s))
    assert obs.shape == (6, 7, 3)
    assert obs[5, 3, 0] == 1 and obs[4, 3, 1] == 1 and obs[..., :2].sum() == 2 and obs[..., 2].all()
    obs = np.asarray(game.observe(play(c4, "445")))  # O to move: O's discs come first
    assert obs[4, 3, 0] == 1 and obs[5, 3, 1] == 1 and obs[5, 4, 1] == 1 and not obs[..., 2].any()


def test_options_are_validated():
    game = games.make("connect_four")
    assert (game.rows, game.cols, game.connect) == (6, 7, 4)
    assert (game.num_actions, game.max_game_length, game.observation_shape) == (7, 42, (6, 7, 3))
    assert games.make("connect_four", rows=12, cols=12, connect=12).num_actions == 12
    with pytest.raises(ValueError, match=r"rows must be an integer in 4\.\.12, got 3"):
        games.make("connect_four", rows=3)
    with pytest.raises(ValueError, match=r"cols must be an integer in 4\.\.12, got 13"):
        games.make("connect_four", cols=13)
    with pytest.raises(ValueError, match=r"connect must be an integer in 3\.\.4, got 5"):
        games.make("connect_four", rows=4, connect=5)
    with pytest.raises(ValueError, match=r"connect must be an integer in 3\.\.6, got 2"):
        games.make("connect_four", connect=2)
    with pytest.raises(ValueError, match="rows must be an integer"):
        games.make("connect_four", rows="6")


def test_move_names_are_1_based_columns():
    game = games.make("connect_four")
    assert [game.action_to_str(a) for a in range(7)] == ["1", "2", "3", "4", "5", "6", "7"]
    assert game.parse_action(" 7 ") == 6
    for bad in ["0", "8", "a", "-1", "1.5", "", "٣", "04", "+4"]:
        with pytest.raises(ValueError, match="not a move"):
            game.parse_action(bad)
    wide = games.make("connect_four", rows=4, cols=12)
    assert wide.parse_action("12") == 11
    assert wide.render(wide.init()).splitlines()[-1] == " 1  2  3  4  5  6  7  8  9 10 11 12"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_playout_is_the_step_by_step_game(c4, seed):
    # random_playout draws u = uniform(key, [42]) once and plays random_action(u[i]) at ply i.
    game, step = c4
    start = play(c4, "4" * seed)  # from the start, and from mid-game states
    key = jax.random.PRNGKey(seed)
    u = jax.random.uniform(key, (game.max_game_length,))
    s, i = start, 0
    while not bool(s.terminal):
        s = step(s, random_action(u[i], game.legal_mask(s)))
        i += 1
    np.testing.assert_array_equal(game.random_playout(start, key), game.returns(s))
    np.testing.assert_array_equal(game.random_playout(s, key), game.returns(s))  # terminal start


def test_random_action_is_uniform_over_the_legal_ones():
    legal = jnp.array([True, False, True, True, False])
    picks = jax.vmap(random_action, (0, None))(jnp.linspace(0, 1, 300, endpoint=False), legal)
    np.testing.assert_array_equal(
        np.bincount(np.asarray(picks), minlength=5), [100, 0, 100, 100, 0]
    )
    assert int(random_action(jnp.float32(1 - 2**-24), legal)) == 3  # rounding cannot overshoot


# OpenSpiel's action is the column, 0-based, as ours; its player 0 ("x") moves first, as ours.
SPIEL_SIZES = [
    ({}, {}, 1000),
    ({"rows": 4, "cols": 5, "connect": 3}, {"rows": 4, "columns": 5, "x_in_row": 3}, 500),
    ({"rows": 5, "cols": 9, "connect": 5}, {"rows": 5, "columns": 9, "x_in_row": 5}, 300),
]


@pytest.mark.parametrize("ours,theirs,num_games", SPIEL_SIZES, ids=["6x7", "4x5-3", "5x9-5"])
def test_connect_four_matches_openspiel(ours, theirs, num_games):
    game = games.make("connect_four", **ours)
    stats = compare_with_openspiel(
        game, pyspiel.load_game("connect_four", theirs), lambda a: a, num_games=num_games
    )
    assert game.connect * 2 - 1 <= stats["mean_length"] <= game.max_game_length
    if not ours:  # 6x7: the first player wins about 55%, loses about 44% at random
        assert 0.02 < stats["first_player_score"] < 0.25


def test_boards_match_openspiel(c4):
    # OpenSpiel prints the board top row first with x / o / .; so do we, with X / O / . and spaces.
    game, step = c4
    traj = random_games(game, 50, seed=3)
    spiel_game = pyspiel.load_game("connect_four")
    for b in range(50):
        s, ss = game.init(), spiel_game.new_initial_state()
        for t in range(traj["action"].shape[0]):
            if traj["terminal"][t, b]:
                break
            s, _ = step(s, traj["action"][t, b]), ss.apply_action(int(traj["action"][t, b]))
        ours = game.render(s).lower().replace(" ", "").splitlines()[:-1]
        assert ours == str(ss).split(), f"game {b}"
