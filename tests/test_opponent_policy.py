"""The auxiliary opponent policy target (`--opponent_policy_weight`, KataGo's): the replay's
reply targets (the next position's search policy, in the mover's frame), augmentation, what the
learner fits the third policy output to, and the option's bad values."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
from azjax import config as cfg
from azjax import network, replay, symmetry, training
from azjax.replay import Batch, Trajectory

A = 9  # Tic-Tac-Toe's actions, the toy trajectory's


def _trajectory():
    """A hand-made chunk of T = 6 moves of B = 3 games on 3 x 3 boards, and its players.

    Column 0: a game of 3 positions, then one of 3. Column 1: one game of 6 positions, whose
    fourth is played by the same player as its third (a pass that is not a ply). Column 2: a game
    of 4 positions, then one of 2 whose last position's policy is empty (a fast search's).
    Position (t, b) is told apart by obs[0, 0, 0] = 10 t + b + 1, and its policy is all on action
    (t + 2 b) % 9."""
    t_, b_ = 6, 3
    done = np.zeros((t_, b_), bool)
    done[[2, 5], 0] = True
    done[5, 1] = True
    done[[3, 5], 2] = True
    player = np.array([[0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 0, 1], [1, 1, 0], [0, 0, 1]], np.int32)
    obs = np.zeros((t_, b_, 3, 3, 3), np.float32)
    policy = np.zeros((t_, b_, A), np.float32)
    for t in range(t_):
        for b in range(b_):
            obs[t, b, 0, 0, 0] = 10 * t + b + 1
            policy[t, b, (t + 2 * b) % A] = 1.0
    policy[5, 2] = 0.0
    returns = np.zeros((t_, b_, 2), np.float32)
    return Trajectory(*(jnp.asarray(x) for x in (obs, policy, player, done, returns)))


# a frame table that is not the identity, so that the mapping shows: p's row rolls by p + 1
FRAMES = np.stack([np.roll(np.arange(A), 1), np.roll(np.arange(A), 2)]).astype(np.int32)


def _expected(traj):
    """{position id: its opponent policy target} by hand (see `_trajectory`)."""
    obs, policy, player, done = (np.asarray(x) for x in traj[:4])
    out = {}
    for t in range(done.shape[0]):
        for b in range(done.shape[1]):
            want = np.zeros(A, np.float32)
            replied = t + 1 < done.shape[0] and not done[t, b]
            if replied and player[t + 1, b] != player[t, b]:
                want = policy[t + 1, b][FRAMES[player[t, b]]]
            out[int(obs[t, b, 0, 0, 0])] = want
    return out


@pytest.fixture(scope="module")
def drawn():
    traj = _trajectory()
    buffer = replay.init(8, 3, (3, 3, 3), A, opponent=True)
    buffer = replay.add(buffer, traj)
    draw = functools.partial(replay.sample, batch_size=400, opponent_frames=FRAMES)
    batch = jax.jit(draw)(buffer, jax.random.PRNGKey(0))
    return traj, buffer, batch


def test_each_position_gets_its_opponents_next_policy_in_its_own_frame(drawn):
    traj, _, batch = drawn
    expected = _expected(traj)
    ids = np.asarray(batch.obs[:, 0, 0, 0]).astype(int)
    assert set(ids) == set(expected)  # every settled position drawn at least once
    for i, got in zip(ids, np.asarray(batch.opponent_policy)):
        np.testing.assert_array_equal(got, expected[i], err_msg=f"position {i}")
    # Which positions have a target: not a game's last, not the one before the same player's
    # move, not the one before an empty (fast search's) policy; all the others do.
    with_reply = sorted(i for i, x in expected.items() if x.sum() > 0)
    assert with_reply == [1, 2, 3, 11, 12, 13, 23, 31, 32, 41, 42]


def test_the_reply_is_found_across_the_ring_s_wrap():
    """A position in the buffer's last row has its reply in row 0: without the wrap the row
    after it was clamped to itself (the same mover), and its target silently dropped; the test
    above never wrapped the ring (6 moves in 8 rows)."""
    traj = _trajectory()
    buffer = replay.init(8, 3, (3, 3, 3), A, opponent=True)
    buffer = replay.add(replay.add(buffer, traj), traj)  # the second copy: rows 6, 7, 0, ..., 3
    batch = jax.jit(functools.partial(replay.sample, batch_size=400, opponent_frames=FRAMES))(
        buffer, jax.random.PRNGKey(3)
    )
    expected = _expected(traj)
    ids = np.asarray(batch.obs[:, 0, 0, 0]).astype(int)
    assert {11, 12, 13} <= set(ids)  # the second copy's t = 1, in row 7
    for i, got in zip(ids, np.asarray(batch.opponent_policy)):
        np.testing.assert_array_equal(got, expected[i], err_msg=f"position {i}")


def test_the_target_is_none_without_the_frames_and_refused_from_a_plain_buffer(drawn):
    _, buffer, _ = drawn
    assert replay.sample(buffer, jax.random.PRNGKey(1), 4).opponent_policy is None
    plain = replay.add(replay.init(8, 3, (3, 3, 3), A), _trajectory())
    assert plain.last is None
    with pytest.raises(ValueError, match="opponent_frames needs a buffer made with opponent=True"):
        replay.sample(plain, jax.random.PRNGKey(1), 4, opponent_frames=FRAMES)


@pytest.mark.parametrize("name", ["hex", "othello"])
def test_augmentation_turns_the_reply_with_the_board(name):
    game = games.make(name, size=4)
    sym = symmetry.symmetries(game)
    policy = jax.random.uniform(jax.random.PRNGKey(2), (32, game.num_actions))
    reply = jax.random.uniform(jax.random.PRNGKey(3), (32, game.num_actions))
    obs = jnp.zeros((32, *game.observation_shape))
    batch = Batch(obs, policy, jnp.zeros(32), opponent_policy=reply)
    # the reply goes through each position's symmetry: the same one as its policy
    paired = Batch(obs, policy, jnp.zeros(32), opponent_policy=policy)
    key = jax.random.PRNGKey(4)
    turned, turned_pair = symmetry.augment(sym, key, batch), symmetry.augment(sym, key, paired)
    np.testing.assert_array_equal(turned_pair.opponent_policy, turned_pair.policy)
    assert not np.array_equal(turned.opponent_policy, reply)  # some positions were turned
    np.testing.assert_allclose(
        np.sort(np.asarray(turned.opponent_policy), axis=1), np.sort(np.asarray(reply), axis=1)
    )


def _fit(weight):
    """(network, train state, first Losses, last Losses) after 600 Adam steps on one position
    whose policy target puts everything on move 0 and whose reply target is REPLY, with half
    the batch's reply targets empty (positions without a reply)."""
    config = cfg.load(
        "tictactoe",
        {
            "optimizer": "adam",
            "learning_rate": 0.01,
            "weight_decay": 0.0,
            "opponent_policy_weight": weight,
        },
    )
    game = config.make_game()
    net = network.make_network(config, game)
    variables = network.init_variables(net, game, jax.random.PRNGKey(0))
    opt = training.make_optimizer(config)
    state = training.init_train_state(variables, opt)
    policy = jnp.zeros((16, A)).at[:, 0].set(1.0)
    reply = jnp.asarray(np.stack([REPLY] * 8 + [np.zeros(A, np.float32)] * 8))
    batch = Batch(jnp.zeros((16, 3, 3, 3)), policy, jnp.zeros(16), opponent_policy=reply)
    step = jax.jit(training.make_train_step(net, opt, 0.0, opponent_policy_weight=weight))
    state, first = step(state, batch)
    for _ in range(600):
        state, losses = step(state, batch)
    return net, state, first, losses


REPLY = np.array([0.0, 0.5, 0.2, 0.1, 0.1, 0.05, 0.05, 0.0, 0.0], np.float32)


@pytest.fixture(scope="module")
def fitted():
    return _fit(0.5)


def test_the_opponent_head_learns_the_reply_and_the_first_the_policy(fitted):
    net, state, first, losses = fitted
    assert net.opponent_policy_head and "opponent_policy" in state.variables["params"]
    obs = jnp.zeros((1, 3, 3, 3))
    logits, _ = network.make_apply(net)(state.variables, obs)  # what the searches see
    _, _, reply = net.apply(state.variables, obs, with_opponent_policy=True)
    np.testing.assert_allclose(jax.nn.softmax(reply[0]), REPLY, atol=0.03)
    assert float(jax.nn.softmax(logits[0])[0]) > 0.9
    assert float(first.opponent_policy) > float(losses.opponent_policy) > 0
    parts = losses.value + losses.policy + losses.l2 + losses.ownership + losses.soft_policy
    assert float(losses.total) == pytest.approx(float(parts + losses.opponent_policy), rel=1e-5)
    # averaged over the positions with a reply: its floor is 0.5 x the reply's entropy
    entropy = -np.sum(REPLY[REPLY > 0] * np.log(REPLY[REPLY > 0]))
    assert float(losses.opponent_policy) == pytest.approx(0.5 * entropy, rel=0.02)


def test_without_the_weight_there_is_no_head_and_the_step_refuses_it():
    plain = cfg.load("tictactoe", {})
    net = network.make_network(plain, plain.make_game())
    assert not net.opponent_policy_head
    with pytest.raises(ValueError, match="needs a network with opponent_policy_head"):
        training.make_train_step(
            net, training.make_optimizer(plain), 0.0, opponent_policy_weight=0.15
        )
    variables = network.init_variables(net, plain.make_game(), jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="with_opponent_policy=True needs a network"):
        net.apply(variables, jnp.zeros((1, 3, 3, 3)), with_opponent_policy=True)


def test_the_option_refuses_bad_values():
    assert cfg.load("othello", {"opponent_policy_weight": 0.15}).opponent_policy_weight == 0.15
    with pytest.raises(ValueError, match="opponent_policy_weight must be >= 0"):
        cfg.load("othello", {"opponent_policy_weight": -1.0})
    with pytest.raises(ValueError, match="opponent_policy_weight needs algorithm=alphazero"):
        cfg.load("othello", {"opponent_policy_weight": 0.15, "algorithm": "exit"})
