"""Hex: scripted games with exact boards, masks and results; the policy frame; move names; the
fill-trick playout against move-by-move playouts; differential games against OpenSpiel.

Board cells are named column letter + row number, row 1 at the top; black (X, player 0) joins
top and bottom, white (O, player 1) left and right. Neighbours of (r, c): (r-1, c), (r-1, c+1),
(r, c-1), (r, c+1), (r+1, c-1), (r+1, c), so b1-a2 touch (the short diagonal) and a1-b2 do not.

Most of the runtime is XLA compiling; every jitted function is built once per configuration by the
module fixture, and scripted moves are checked with the jitted mask rather than
`parse_action(m, state)`, whose eager nonzero recompiles for every new count of legal moves.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest
from spiel_reference import compare_with_openspiel

import games

SAMPLES = 40_000  # playouts per rate; 4 standard errors of a difference of rates near 1/2: 0.014


class Jitted(NamedTuple):
    """A game and its jitted functions (jax.jit compiles on first call)."""

    game: games.Game
    step: Callable  # (state, action) -> state
    legal: Callable  # state -> bool[A]
    observe: Callable  # state -> float32[n, n, 3]
    rates: Callable  # (state, key) -> black's win rate by [fill-trick, move-by-move] playouts


def _win_rates(game):
    def rates(state, key):
        states = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (SAMPLES, *x.shape)), state)
        fill_key, move_key = jax.random.split(key)
        out = []
        for playout, k in [(game.random_playout, fill_key), (game.move_by_move_playout, move_key)]:
            returns = jax.vmap(playout)(states, jax.random.split(k, SAMPLES))
            valid = jnp.all((jnp.abs(returns[:, 0]) == 1) & (returns.sum(-1) == 0))
            out.append(jnp.where(valid, jnp.mean(returns[:, 0] == 1), jnp.nan))
        return jnp.stack(out)

    return rates


@pytest.fixture(scope="module")
def hexes():
    """A getter for the `Jitted` functions of hex(size, swap), made once per configuration."""
    cache = {}

    def get(size, swap=False):
        if (size, swap) not in cache:
            game = games.make("hex", size=size, swap=swap)
            cache[size, swap] = Jitted(
                game,
                jax.jit(game.step),
                jax.jit(game.legal_mask),
                jax.jit(game.observe),
                jax.jit(_win_rates(game)),
            )
        return cache[size, swap]

    return get


def play(hexes, size, moves, swap=False):
    """(Jitted, state) after the named moves, each checked for legality on the way."""
    h = hexes(size, swap)
    state = h.game.init()
    for m in moves:
        action = h.game.parse_action(m)
        assert h.legal(state)[action], f"{m} is illegal after {moves}"
        state = h.step(state, action)
    return h, state


def board(rows):
    """The `board` array for rows of '.', 'X', 'O'."""
    return np.array([".XO".index(ch) for row in rows for ch in row.split()], np.int8)


# ---- scripted games -----------------------------------------------------------------------------


SNAKE = "b1 a3 b2 b3 c2 c3 d2 d1 a5 e1 a4 d5 b4 e5 c4 e4".split()


def test_black_wins_with_a_snaking_chain_joined_by_the_last_stone(hexes):
    # Black's chain runs right along row 2 and back left along row 4; d3 joins the two halves.
    h, before = play(hexes, 5, SNAKE)
    assert not bool(before.terminal) and int(before.player) == 0
    _, s = play(hexes, 5, SNAKE + ["d3"])
    expected = board([". X . O O", ". X X X .", "O O O X .", "X X X . O", "X . . O O"])
    np.testing.assert_array_equal(s.board, expected)
    assert bool(s.terminal) and int(s.num_moves) == 17
    np.testing.assert_array_equal(h.game.returns(s), [1, -1])
    assert not h.legal(s).any()
    chain = [h.game.parse_action(m) for m in ["b1", "b2", "c2", "d2", "d3", "c4", "b4", "a4", "a5"]]
    assert set(np.asarray(s.group)[chain].tolist()) == {h.game.parse_action("d3") + 1}  # one group
    assert h.game.render(s).splitlines() == [
        "X (black, player 0) joins top and bottom; O (white, player 1) joins left and right",
        "    a b c d e",
        " 1  . X . O O",
        " 2   . X X X .",
        " 3    O O O X .",
        " 4     X X X . O",
        " 5      X . . O O",
    ]


def test_terminal_state_is_absorbing(hexes):
    h, s = play(hexes, 5, SNAKE + ["d3"])
    for action in [0, 11, 24]:  # empty, empty, occupied
        after = h.step(s, action)
        for a, b in zip(jax.tree_util.tree_leaves(s), jax.tree_util.tree_leaves(after)):
            np.testing.assert_array_equal(a, b)


WHITE_WIN = ["a1", "a3", "b1", "c2", "c3", "d1", "d4", "b2"]


def test_white_wins_left_to_right(hexes):
    # White's b2 joins a3 (left edge) to c2-d1 (right edge); black's stones never connect.
    h, s = play(hexes, 4, WHITE_WIN[:-1])
    assert not bool(s.terminal)
    expected = board(["X X . O", ". . O .", "O . X .", ". . . X"])
    np.testing.assert_array_equal(h.legal(s), expected == 0)
    _, s = play(hexes, 4, WHITE_WIN)
    np.testing.assert_array_equal(s.board, board(["X X . O", ". O O .", "O . X .", ". . . X"]))
    assert bool(s.terminal) and int(s.num_moves) == 8
    np.testing.assert_array_equal(h.game.returns(s), [-1, 1])


def test_win_by_the_last_stone_on_a_full_board(hexes):
    # Both players' halves meet only at b2; black takes it with the ninth and last stone.
    moves = ["a1", "b1", "c1", "a2", "a3", "c2", "c3", "b3"]
    h, s = play(hexes, 3, moves)
    assert not bool(s.terminal)
    np.testing.assert_array_equal(h.legal(s), np.arange(9) == 4)
    _, s = play(hexes, 3, moves + ["b2"])
    np.testing.assert_array_equal(s.board, board(["X O X", "O X O", "X O X"]))
    np.testing.assert_array_equal(h.game.returns(s), [1, -1])
    assert bool(s.terminal) and int(s.num_moves) == h.game.max_game_length == 9


def test_2x2_short_diagonal_connects_and_long_one_does_not(hexes):
    h, s = play(hexes, 2, ["b1", "a1", "a2"])  # b1-a2 touch: black wins at ply 3
    np.testing.assert_array_equal(h.game.returns(s), [1, -1])
    assert bool(s.terminal)
    _, s = play(hexes, 2, ["a1", "a2", "b2"])  # a1-b2 do not touch
    assert not bool(s.terminal)
    np.testing.assert_array_equal(h.legal(s), [False, True, False, False])
    _, s = play(hexes, 2, ["a1", "a2", "b2", "b1"])  # white a2-b1 touch: white wins
    np.testing.assert_array_equal(s.board, board(["X O", "O X"]))
    np.testing.assert_array_equal(h.game.returns(s), [-1, 1])


def test_3x3_diagonals(hexes):
    h, s = play(hexes, 3, ["a1", "c1", "b2", "a3", "c3"])  # long diagonal: no connection
    assert not bool(s.terminal)
    np.testing.assert_array_equal(h.game.returns(s), [0, 0])
    assert int(h.game.current_player(s)) == 1
    _, s = play(hexes, 3, ["c1", "a1", "b2", "c3", "a3"])  # short diagonal: black wins
    np.testing.assert_array_equal(s.board, board(["O . X", ". X .", "X . O"]))
    np.testing.assert_array_equal(h.game.returns(s), [1, -1])


# ---- swap ---------------------------------------------------------------------------------------


def test_swap_is_legal_exactly_at_ply_one(hexes):
    h, s = play(hexes, 4, [], swap=True)
    assert h.game.num_actions == 17 and h.game.max_game_length == 17
    assert not bool(h.legal(s)[16])
    _, s = play(hexes, 4, ["b1"], swap=True)
    np.testing.assert_array_equal(h.legal(s), np.arange(17) != 1)
    _, s = play(hexes, 4, ["b1", "c3"], swap=True)
    assert not bool(h.legal(s)[16])
    with pytest.raises(ValueError, match="not legal here"):
        h.game.parse_action("swap", s)


def test_swap_mirrors_the_stone_and_black_moves_again(hexes):
    h, s = play(hexes, 4, ["b1", "swap"], swap=True)  # black b1 = (0, 1) -> white a2 = (1, 0)
    np.testing.assert_array_equal(s.board, board([". . . .", "O . . .", ". . . .", ". . . ."]))
    assert int(s.group[4]) == 5 and int(np.count_nonzero(s.group)) == 1
    assert int(h.game.current_player(s)) == 0 and int(s.num_moves) == 2 and not bool(s.terminal)
    np.testing.assert_array_equal(h.legal(s), (np.arange(17) != 4) & (np.arange(17) != 16))
    _, s = play(hexes, 4, ["b2", "swap"], swap=True)  # a stone on the diagonal stays put
    np.testing.assert_array_equal(np.flatnonzero(s.board), [5])
    assert int(s.board[5]) == 2


def test_swapped_stone_plays_for_white(hexes):
    # 2x2: white takes over a1 and joins it to b1 along the top row.
    h, s = play(hexes, 2, ["a1", "swap", "b2", "b1"], swap=True)
    np.testing.assert_array_equal(s.board, board(["O O", ". X"]))
    np.testing.assert_array_equal(h.game.returns(s), [-1, 1])


def test_swap_is_not_an_action_without_the_option(hexes):
    h, s = play(hexes, 4, ["b1"])
    assert h.game.num_actions == 16 and h.legal(s).shape == (16,)
    with pytest.raises(ValueError, match="not a move"):
        h.game.parse_action("swap", s)


# ---- observation and policy frame ---------------------------------------------------------------


def test_observation_is_transposed_for_white(hexes):
    h, s = play(hexes, 4, ["b1", "d2", "a1"])  # white to move
    obs = np.asarray(h.observe(s))
    # mover (white) d2 = (1, 3) appears at (3, 1); black b1 = (0, 1) at (1, 0), a1 at (0, 0)
    np.testing.assert_array_equal(np.argwhere(obs[..., 0]), [[3, 1]])
    np.testing.assert_array_equal(np.argwhere(obs[..., 1]), [[0, 0], [1, 0]])
    assert not obs[..., 2].any()
    _, s = play(hexes, 4, ["b1", "d2"])  # black to move: untransposed
    obs = np.asarray(h.observe(s))
    np.testing.assert_array_equal(np.argwhere(obs[..., 0]), [[0, 1]])
    np.testing.assert_array_equal(np.argwhere(obs[..., 1]), [[1, 3]])
    assert obs[..., 2].all()


def test_policy_frame_concrete_and_consistent_with_the_observation(hexes):
    h, white = play(hexes, 4, ["b1"], swap=True)
    _, black = play(hexes, 4, ["b1", "c3"], swap=True)
    game = h.game
    states = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), white, black)
    xs = jnp.stack([jnp.arange(17.0)] * 2)

    @jax.jit
    def frames(states, xs):
        to_actions = jax.vmap(game.policy_to_actions)(states, xs)
        back = jax.vmap(game.actions_to_policy)(states, to_actions)
        legal = jax.vmap(game.actions_to_policy)(states, jax.vmap(game.legal_mask)(states))
        return to_actions, back, legal, jax.vmap(game.observe)(states)

    to_actions, back, legal, obs = frames(states, xs)
    # white: the canonical entry 4 = (1, 0) is the real cell (0, 1) = action 1; swap stays last
    assert to_actions[0, 1] == 4 and to_actions[0, 4] == 1 and to_actions[0, 16] == 16
    np.testing.assert_array_equal(to_actions[1], xs[1])  # black: identity
    np.testing.assert_array_equal(back, xs)
    # in both colours, the legal cells in the canonical frame are the observation's empty cells
    empty = (obs[..., 0] + obs[..., 1] == 0).reshape(2, 16)
    np.testing.assert_array_equal(legal[:, :16], empty)
    np.testing.assert_array_equal(legal[:, 16], [True, False])


# ---- move names and options ---------------------------------------------------------------------


def test_move_names():
    game = games.make("hex", size=5, swap=True)
    assert game.parse_action("a1") == 0 and game.action_to_str(0) == "a1"
    assert game.parse_action(" C2 ") == 5 + 2 and game.action_to_str(5 + 2) == "c2"
    assert game.parse_action("e5") == 24 and game.parse_action("swap") == 25
    assert game.action_to_str(25) == "swap"
    assert games.make("hex", size=19).parse_action("s19") == 360
    for bad in ["", "a", "1a", "a0", "a01", "a6", "f1", "z1", "a99", "swap2", "a1b", "a\u00b2"]:
        with pytest.raises(ValueError, match="not a move"):
            game.parse_action(bad)


def test_occupied_cell_is_rejected_with_the_legal_moves(hexes):
    h, s = play(hexes, 3, ["a1"])
    legal = "b1, c1, a2, b2, c2, a3, b3, c3"
    with pytest.raises(ValueError, match=f"not legal here; legal moves: {legal}$"):
        h.game.parse_action("a1", s)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"size": 1}, r"size must be an integer in 2\.\.19, got 1"),
        ({"size": 20}, r"size must be an integer in 2\.\.19, got 20"),
        ({"size": "7"}, r"size must be an integer in 2\.\.19, got '7'"),
        ({"size": True}, r"size must be an integer"),
        ({"swap": "yes"}, r"swap must be True or False, got 'yes'"),
        ({"swap": 1}, r"swap must be True or False, got 1"),
    ],
)
def test_options_are_validated(options, message):
    with pytest.raises(ValueError, match="hex: " + message):
        games.make("hex", **options)


# ---- fill-trick playouts ------------------------------------------------------------------------


def _close(p, q, samples=SAMPLES):
    """Within four standard errors of the difference of two independent rates."""
    pooled = (p + q) / 2
    return abs(p - q) <= 4 * np.sqrt(pooled * (1 - pooled) * 2 / samples) + 1e-9


@pytest.mark.parametrize(
    "size, swap, moves, exact",
    [
        (2, True, ["a1"], 5 / 12),  # white b1 1/2, a2 0, b2 1/2, swap 2/3 for black; 1/3 unswapped
        (3, False, [], None),
        (3, False, ["b2"], None),  # white to move, even number of empty cells
        (4, False, [], None),
        (4, False, ["b2", "c3", "c2"], None),  # white to move, gets 7 of the 13 empty cells
        (3, True, [], None),  # ignoring the swap ply would give about 0.666 instead of 0.629
        (3, True, ["c1"], None),
    ],
)
def test_fill_playout_matches_move_by_move(hexes, size, swap, moves, exact):
    h, state = play(hexes, size, moves, swap=swap)
    fill, by_move = np.asarray(h.rates(state, jax.random.PRNGKey(size)))
    assert _close(fill, by_move), (fill, by_move)
    if exact is not None:  # one rate against an exact value: half the variance
        assert _close(fill, exact, 2 * SAMPLES), fill
        assert _close(by_move, exact, 2 * SAMPLES), by_move


def test_playout_from_a_terminal_state_returns_its_result(hexes):
    h, s = play(hexes, 4, WHITE_WIN)
    np.testing.assert_array_equal(h.rates(s, jax.random.PRNGKey(0)), [0.0, 0.0])


# ---- differential check against OpenSpiel -------------------------------------------------------

# OpenSpiel's hex numbers cells row * n + col like ours, its player 0 ('x') also joins top and
# bottom (north-south) and moves first, and with swap=True its action n * n is the same "swap
# pieces" move (the stone mirrored to (c, r) and turned white, player 0 to move), so the action
# mapping is the identity. 1650 games without swap and 500 with.


@pytest.mark.parametrize(
    "size, swap, num_games",
    [(3, False, 300), (5, False, 1200), (11, False, 150), (4, True, 500)],
)
def test_hex_matches_openspiel(size, swap, num_games):
    game = games.make("hex", size=size, swap=swap)
    spiel = pyspiel.load_game(f"hex(board_size={size},swap={swap})")
    stats = compare_with_openspiel(game, spiel, lambda a: a, num_games=num_games, seed=size)
    assert 2 * size - 1 <= stats["mean_length"] <= size * size  # no trivially short games
    assert -0.5 < stats["first_player_score"] < 0.8
