"""The shared API check (games/check.py), run on every game at several sizes.

Each configuration plays a batch of random games to the end in one jitted, vmapped scan and the
invariants are checked on the recorded trajectory: shapes and dtypes, a legal move always exists
before the end, returns are zero until the end and sum to zero after it, terminal states are
absorbing, every game ends within `max_game_length` plies. A new game's own test runs
`games.check.check_game` on it (tests/test_adding_a_game.py).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
import games.base
from games import check

CONFIGS = [
    ("tictactoe", {}),
    ("connect_four", {}),
    ("connect_four", {"rows": 4, "cols": 5, "connect": 3}),
    ("hex", {"size": 2}),
    ("hex", {"size": 5}),
    ("hex", {"size": 11}),
    ("hex", {"size": 4, "swap": True}),
    ("othello", {"size": 4}),
    ("othello", {"size": 8}),
    ("othello", {"size": 6, "mobility": True}),
]
BATCH = 16


def _ids(cfg):
    name, opts = cfg
    return name + "".join(f"-{k}={v}" for k, v in opts.items())


@pytest.fixture(scope="module", params=CONFIGS, ids=_ids)
def played(request):
    """(game, trajectory, final states) of one batch of random games played past their end."""
    name, opts = request.param
    game = games.make(name, **opts)
    traj, final = check.play_random(game, batch=BATCH)
    return game, traj, final


def test_shapes_and_dtypes(played):
    game, traj, _ = played
    assert traj.legal.shape[:2] == (game.max_game_length + 2, BATCH)
    check.check_shapes(game, traj)


def test_invariants(played):
    check.check_invariants(*played)


def test_random_playout_jits_and_vmaps(played):
    check.check_random_playout(played[0])


def test_policy_frame_round_trip(played):
    check.check_policy_frame(played[0])


def test_move_names_round_trip(played):
    check.check_move_names(played[0])


def test_an_action_out_of_range_has_no_name(played):
    """action_to_str named any integer: -1 was "c0" in Tic-Tac-Toe, 100 "b34"."""
    game = played[0]
    for action in (-1, game.num_actions, game.num_actions + 91):
        with pytest.raises(
            ValueError, match=f"action {action} is not in 0..{game.num_actions - 1}"
        ):
            game.action_to_str(action)


def test_illegal_move_is_rejected_with_the_legal_list(played):
    if not check.check_illegal_move(played[0]):
        pytest.skip("every action is legal at the start")


@pytest.mark.parametrize("name", games.names())
def test_registry_rejects_unknown_options(name):
    with pytest.raises(ValueError, match="valid options"):
        games.make(name, bogus=1)


def test_registry_rejects_unknown_game():
    with pytest.raises(ValueError, match="known games: connect_four, hex, othello, tictactoe"):
        games.make("chess")


def _playouts_with_unroll(game, unroll, playout=None):
    """Returns of one batch of random playouts from the start, traced with `unroll` plies a loop
    turn (`games.base.PLAYOUT_UNROLL`, read when traced)."""
    keys = jax.random.split(jax.random.PRNGKey(3), BATCH)
    states = jax.vmap(lambda _: game.init())(jnp.arange(BATCH))
    saved = games.base.PLAYOUT_UNROLL
    games.base.PLAYOUT_UNROLL = unroll
    try:
        return np.asarray(jax.jit(jax.vmap(playout or game.random_playout))(states, keys))
    finally:
        games.base.PLAYOUT_UNROLL = saved


def test_random_playout_same_for_any_unroll(played):
    """Several plies a loop turn (the accelerators' choice) give the playouts of one a turn."""
    game = played[0]
    one = _playouts_with_unroll(game, 1)
    np.testing.assert_array_equal(_playouts_with_unroll(game, 3), one)


def test_move_by_move_playout_same_for_any_unroll():
    game = games.make("hex", size=3)
    playout = game.move_by_move_playout
    one = _playouts_with_unroll(game, 1, playout)
    np.testing.assert_array_equal(_playouts_with_unroll(game, 4, playout), one)


def test_while_unrolled_is_the_while_loop():
    """Steps after a turn's first are kept only while the condition holds, under vmap too."""

    def cond(c):
        return c[0] < c[1]

    def body(c):
        return c[0] + 1, c[1], c[2] * 2

    start = (jnp.arange(6), jnp.array([0, 1, 2, 5, 7, 11]), jnp.ones(6, jnp.int32))
    expected = jax.vmap(lambda c: jax.lax.while_loop(cond, body, c))(start)
    for unroll in (1, 2, 3, 5):
        got = jax.vmap(lambda c, u=unroll: games.base.while_unrolled(cond, body, c, u))(start)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
    with pytest.raises(ValueError, match="at least 1"):
        games.base.PLAYOUT_UNROLL = 0
        try:
            games.base.playout_unroll()
        finally:
            games.base.PLAYOUT_UNROLL = None


def test_playout_unroll_is_the_override_else_the_backends_choice():
    """A game's accelerator choice (Othello's 16) is only its default: the CPU keeps
    CPU_PLAYOUT_UNROLL and PLAYOUT_UNROLL (the benchmarks' --playout_unroll) wins everywhere."""
    assert jax.default_backend() == "cpu"
    assert games.base.playout_unroll(accelerator=16) == games.base.CPU_PLAYOUT_UNROLL
    games.base.PLAYOUT_UNROLL = 5
    try:
        assert games.base.playout_unroll(accelerator=16) == 5
    finally:
        games.base.PLAYOUT_UNROLL = None
