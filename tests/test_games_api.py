"""The shared API check, run on every game at several sizes.

Each configuration plays a batch of random games to the end in one jitted, vmapped scan and the
invariants are checked on the recorded trajectory: shapes and dtypes, a legal move always exists
before the end, returns are zero until the end and sum to zero after it, terminal states are
absorbing, every game ends within `max_game_length` plies.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games

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
]
BATCH = 16


def _ids(cfg):
    name, opts = cfg
    return name + "".join(f"-{k}={v}" for k, v in opts.items())


@pytest.fixture(scope="module", params=CONFIGS, ids=_ids)
def played(request):
    """(game, trajectory dict) for one batch of random games played past their end."""
    name, opts = request.param
    game = games.make(name, **opts)
    steps = game.max_game_length + 2  # two plies past the longest game: absorbing check

    @jax.jit
    def play(key):
        states = jax.vmap(lambda _: game.init())(jnp.arange(BATCH))

        def body(s, k):
            legal = jax.vmap(game.legal_mask)(s)
            logits = jnp.where(legal, 0.0, -jnp.inf)
            acts = jax.random.categorical(k, logits).astype(jnp.int32)
            acts = jnp.where(legal.any(-1), acts, 0)  # terminal: any action must be a no-op
            nxt = jax.vmap(game.step)(s, acts)
            rec = dict(
                legal=legal,
                terminal=jax.vmap(game.is_terminal)(s),
                returns=jax.vmap(game.returns)(s),
                player=jax.vmap(game.current_player)(s),
                obs=jax.vmap(game.observe)(s),
                same=jax.tree_util.tree_reduce(
                    jnp.logical_and,
                    jax.tree_util.tree_map(
                        lambda a, b: jnp.all((a == b).reshape(BATCH, -1), axis=1), s, nxt
                    ),
                ),
            )
            return nxt, rec

        final, traj = jax.lax.scan(body, states, jax.random.split(key, steps))
        return final, traj

    final, traj = play(jax.random.PRNGKey(0))
    return game, jax.device_get(traj), final


def test_shapes_and_dtypes(played):
    game, traj, _ = played
    steps = game.max_game_length + 2
    assert traj["legal"].shape == (steps, BATCH, game.num_actions)
    assert traj["legal"].dtype == np.bool_
    assert traj["terminal"].dtype == np.bool_
    assert traj["returns"].shape == (steps, BATCH, 2) and traj["returns"].dtype == np.float32
    assert traj["player"].dtype == np.int32
    assert traj["obs"].shape == (steps, BATCH, *game.observation_shape)
    assert traj["obs"].dtype == np.float32
    assert game.observation_shape[:2] == game.board_shape


def test_invariants(played):
    game, traj, final = played
    term, legal, ret = traj["terminal"], traj["legal"], traj["returns"]
    assert not term[0].any(), "the start position is not terminal"
    np.testing.assert_array_equal(legal[~term].any(-1), True)  # never an empty mask before the end
    np.testing.assert_array_equal(legal[term].any(-1), False)  # and no legal move after it
    np.testing.assert_array_equal(ret[~term], 0.0)
    np.testing.assert_allclose(ret.sum(-1), 0.0)
    assert set(np.unique(ret[term])) <= {-1.0, 0.0, 1.0}
    assert np.isin(traj["player"], [0, 1]).all()
    # terminal is monotone and every game ends within max_game_length plies
    assert (np.diff(term.astype(int), axis=0) >= 0).all()
    assert term[game.max_game_length].all()
    # absorbing: a step from a terminal state changes nothing
    assert traj["same"][term].all()
    assert not traj["same"][~term].any()
    # observation planes: 0/1 stones, mover and opponent disjoint, constant colour plane
    obs = traj["obs"]
    assert set(np.unique(obs)) <= {0.0, 1.0}
    assert not (obs[..., 0] * obs[..., 1]).any()
    colour = (traj["player"] == 0).astype(np.float32)
    np.testing.assert_array_equal(
        obs[..., 2], np.broadcast_to(colour[..., None, None], obs[..., 2].shape)
    )
    assert bool(np.asarray(game.is_terminal(jax.tree_util.tree_map(lambda x: x[0], final))))


def test_random_playout_jits_and_vmaps(played):
    game, _, _ = played
    keys = jax.random.split(jax.random.PRNGKey(1), 32)
    states = jax.vmap(lambda _: game.init())(jnp.arange(32))
    out = jax.jit(jax.vmap(game.random_playout))(states, keys)
    assert out.shape == (32, 2) and out.dtype == jnp.float32
    np.testing.assert_allclose(out.sum(-1), 0.0)
    assert set(np.unique(np.asarray(out))) <= {-1.0, 0.0, 1.0}


def test_policy_frame_round_trip(played):
    game, _, _ = played
    state = game.init()
    state = game.step(state, jnp.flatnonzero(game.legal_mask(state))[0])  # player 1 to move
    x = jnp.arange(game.num_actions, dtype=jnp.float32)
    back = game.actions_to_policy(state, game.policy_to_actions(state, x))
    np.testing.assert_array_equal(back, x)
    mapped = sorted(np.asarray(game.policy_to_actions(state, x)).tolist())
    assert mapped == list(range(game.num_actions))


def test_move_names_round_trip(played):
    game, _, _ = played
    for a in range(game.num_actions):
        assert game.parse_action(game.action_to_str(a)) == a
    with pytest.raises(ValueError, match="not a move"):
        game.parse_action("zz99")
    # the first board draws every empty cell ("." or Othello's "*" on a legal move): all of them
    # but Othello's four starting discs
    text = game.render(game.init())
    rows, cols = game.board_shape
    assert text.count(".") + text.count("*") == rows * cols - (4 if game.name == "othello" else 0)


def test_illegal_move_is_rejected_with_the_legal_list(played):
    game, _, _ = played
    state = game.init()
    illegal = np.flatnonzero(~np.asarray(game.legal_mask(state)))
    if len(illegal) == 0:
        pytest.skip("every action is legal at the start")
    with pytest.raises(ValueError, match="legal moves"):
        game.parse_action(game.action_to_str(int(illegal[0])), state)


@pytest.mark.parametrize("name", games.names())
def test_registry_rejects_unknown_options(name):
    with pytest.raises(ValueError, match="valid options"):
        games.make(name, bogus=1)


def test_registry_rejects_unknown_game():
    with pytest.raises(ValueError, match="known games: connect_four, hex, othello, tictactoe"):
        games.make("chess")
