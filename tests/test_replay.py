"""The replay buffer: targets settle when a game ends, only settled positions are sampled."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from azjax import replay


def _traj(done, returns, players, num_actions=3):
    T, B = done.shape
    obs = np.zeros((T, B, 1, 1, 1), np.float32)
    # tag each position by (t, b) in the policy so samples can be traced back
    policy = np.zeros((T, B, num_actions), np.float32)
    policy[..., 0] = np.arange(T)[:, None]
    policy[..., 1] = np.arange(B)[None, :]
    return replay.Trajectory(
        obs=jnp.asarray(obs),
        policy=jnp.asarray(policy),
        player=jnp.asarray(players),
        done=jnp.asarray(done),
        returns=jnp.asarray(returns, jnp.float32),
    )


def test_outcomes_settle_per_game_and_across_chunks():
    # Two slots. Slot 0: a game of 3 moves (t=0..2, player 0 wins), then a game still running.
    # Slot 1: one game of 5 moves spanning two chunks, player 1 wins at t=4.
    done = np.zeros((5, 2), bool)
    done[2, 0] = done[4, 1] = True
    returns = np.zeros((5, 2, 2))
    returns[2, 0] = [1, -1]
    returns[4, 1] = [-1, 1]
    players = np.array([[0, 0], [1, 1], [0, 0], [0, 1], [1, 0]], np.int32)
    buf = replay.init(rows=8, batch_games=2, obs_shape=(1, 1, 1), num_actions=3)
    first = _traj(done[:3], returns[:3], players[:3])
    second = _traj(done[3:], returns[3:], players[3:])
    buf = replay.add(buf, first)
    np.testing.assert_array_equal(buf.ready[:3], [[1, 0], [1, 0], [1, 0]])
    np.testing.assert_array_equal(buf.value[:3, 0], [1, -1, 1])  # mover's view: P0, P1, P0
    buf = replay.add(buf, second)
    np.testing.assert_array_equal(buf.ready[:5], [[1, 1], [1, 1], [1, 1], [0, 1], [0, 1]])
    np.testing.assert_array_equal(buf.value[:5, 1], [-1, 1, -1, 1, -1])
    assert int(replay.num_ready(buf)) == 8


def test_restarted_games_leave_the_saved_games_in_flight_unsettled():
    # A resumed run restores the buffer but starts its games afresh: the positions of the games
    # in flight at the checkpoint must not take the outcome of the new games in their slots.
    done = np.zeros((3, 2), bool)
    done[1, 0] = True  # slot 0's game ends at t=1; slot 1's is in flight at the checkpoint
    players = np.array([[0, 0], [1, 1], [0, 0]], np.int32)
    returns = np.zeros((3, 2, 2))
    returns[1, 0] = [1, -1]
    buf = replay.add(
        replay.init(rows=8, batch_games=2, obs_shape=(1, 1, 1), num_actions=3),
        _traj(done, returns, players),
    )
    buf = replay.restart_games(buf)
    np.testing.assert_array_equal(buf.episode_start, [3, 3])
    # the new games: both end at once (t=3), player 1 winning
    later = _traj(np.ones((1, 2), bool), np.array([[[-1, 1], [-1, 1]]]), np.zeros((1, 2), int))
    buf = replay.add(buf, later)
    np.testing.assert_array_equal(buf.ready[:4], [[1, 0], [1, 0], [0, 0], [1, 1]])
    np.testing.assert_array_equal(buf.value[:2, 0], [1, -1])  # the saved game's, kept
    np.testing.assert_array_equal(buf.value[3], [-1, -1])


def test_ring_wraps_and_keeps_only_the_current_game():
    # 3 rows, 1 slot, one game of 5 moves: the first two positions are overwritten.
    done = np.array([[0], [0], [0], [0], [1]], bool)
    returns = np.zeros((5, 1, 2))
    returns[4, 0] = [0, 0]  # a draw
    players = np.array([[0], [1], [0], [1], [0]], np.int32)
    buf = replay.add(replay.init(3, 1, (1, 1, 1), 3), _traj(done, returns, players))
    assert buf.ready.all()
    np.testing.assert_array_equal(buf.value, 0.0)
    np.testing.assert_array_equal(sorted(np.asarray(buf.policy[:, 0, 0])), [2, 3, 4])


def test_sample_draws_only_settled_positions():
    done = np.zeros((4, 2), bool)
    done[1, 0] = True  # slot 0's game ends at t=1; slot 1 never ends
    returns = np.zeros((4, 2, 2))
    returns[1, 0] = [1, -1]
    players = np.array([[0, 0], [1, 1], [0, 0], [1, 1]], np.int32)
    buf = replay.add(replay.init(4, 2, (1, 1, 1), 3), _traj(done, returns, players))
    batch = jax.jit(replay.sample, static_argnums=2)(buf, jax.random.PRNGKey(0), 256)
    ts, bs = np.asarray(batch.policy[:, 0]), np.asarray(batch.policy[:, 1])
    assert set(zip(ts.tolist(), bs.tolist())) == {(0.0, 0.0), (1.0, 0.0)}
    np.testing.assert_array_equal(batch.value, np.where(ts == 0, 1.0, -1.0))
    assert 0.35 < np.mean(ts == 0) < 0.65


def test_sample_among_a_subset_of_the_settled_positions():
    done = np.zeros((4, 2), bool)
    done[1, 0] = done[3, 1] = True  # slot 0 settles t = 0, 1; slot 1 every t
    returns = np.zeros((4, 2, 2))
    returns[1, 0] = returns[3, 1] = [1, -1]
    players = np.array([[0, 0], [1, 1], [0, 0], [1, 1]], np.int32)
    buf = replay.add(replay.init(4, 2, (1, 1, 1), 3), _traj(done, returns, players))
    among = np.zeros((4, 2), bool)
    among[1, 0] = among[2, 1] = among[2, 0] = True  # (2, 0) is not settled: never drawn
    draw = jax.jit(replay.sample, static_argnums=2)
    batch = draw(buf, jax.random.PRNGKey(1), 256, among=jnp.asarray(among))
    drawn = set(zip(np.asarray(batch.policy[:, 0]).tolist(), np.asarray(batch.policy[:, 1])))
    assert drawn == {(1.0, 0.0), (2.0, 1.0)}


def test_settled_between_counts_new_positions_in_rows_the_ring_reused():
    # 3 rows, 1 slot: a game of 3 moves fills the ring and settles at step 2; the next, of 2
    # moves, overwrites rows 0 and 1 and settles there at step 4: those 2 are new, row 2 is the
    # old game's
    done = np.array([[0], [0], [1]], bool)
    returns = np.zeros((3, 1, 2))
    returns[2, 0] = [1, -1]
    players = np.array([[0], [1], [0]], np.int32)
    first = replay.add(replay.init(3, 1, (1, 1, 1), 3), _traj(done, returns, players))
    np.testing.assert_array_equal(first.settled[:, 0], [2, 2, 2])
    np.testing.assert_array_equal(replay.settled_between(first, 0, 3), 1)
    # a chunk of the last move alone settles the game's earlier positions too
    np.testing.assert_array_equal(replay.settled_between(first, 2, 3), 1)
    np.testing.assert_array_equal(replay.settled_between(first, 0, 2), 0)
    second = replay.add(first, _traj(done[1:], returns[1:], players[1:]))
    assert second.ready.all()
    np.testing.assert_array_equal(second.settled[:, 0], [4, 4, 2])
    np.testing.assert_array_equal(replay.settled_between(second, 3, 5)[:, 0], [1, 1, 0])
    np.testing.assert_array_equal(replay.settled_between(second, 0, 3)[:, 0], [0, 0, 1])
    # a chunk that settles nothing new, and writes over a settled row: not settled until its
    # game ends
    third = replay.add(second, _traj(np.zeros((1, 1), bool), np.zeros((1, 1, 2)), players[:1]))
    np.testing.assert_array_equal(replay.settled_between(third, 5, 6), 0)
    np.testing.assert_array_equal(third.settled[:, 0], [4, 4, -1])
    np.testing.assert_array_equal(replay.settled_between(third, 0, 6)[:, 0], [1, 1, 0])


def _won_in_three(q):
    """Two slots, 3 moves: slot 0 a game player 0 wins at its third move, slot 1 a game that
    goes on; players 0, 1, 0 in both; root values q float32[3, 2]."""
    done = np.zeros((3, 2), bool)
    done[2, 0] = True
    returns = np.zeros((3, 2, 2))
    returns[2, 0] = [1, -1]
    players = np.array([[0, 0], [1, 1], [0, 0]], np.int32)
    return _traj(done, returns, players)._replace(root_value=jnp.asarray(q))


def test_value_targets_mix_the_outcome_with_the_root_values():
    # Slot 0: a game of 3 moves that player 0 wins; slot 1 never ends. Root values q recorded.
    q = np.array([[0.2, 0.5], [-0.6, 0.5], [1.0, 0.5]], np.float32)
    traj = _won_in_three(q)
    buf = replay.add(replay.init(4, 2, (1, 1, 1), 3), traj, value_mix=0.25)
    z = np.array([1.0, -1.0, 1.0])  # the outcome for each mover
    np.testing.assert_allclose(buf.value[:3, 0], 0.75 * z + 0.25 * q[:, 0], rtol=1e-6)
    np.testing.assert_array_equal(buf.ready[:3], [[1, 0], [1, 0], [1, 0]])
    # without the mix the root values are ignored: the outcome alone, bit for bit
    plain = replay.add(replay.init(4, 2, (1, 1, 1), 3), traj)
    np.testing.assert_array_equal(plain.value[:3, 0], z)
    full = replay.add(replay.init(4, 2, (1, 1, 1), 3), traj, value_mix=1.0)
    np.testing.assert_allclose(full.value[:3, 0], q[:, 0])
    with pytest.raises(ValueError, match="needs the positions' root values"):
        replay.add(replay.init(4, 2, (1, 1, 1), 3), traj._replace(root_value=None), value_mix=0.5)
    with pytest.raises(ValueError, match=r"value_mix must be in \[0, 1\]"):
        replay.add(replay.init(4, 2, (1, 1, 1), 3), traj, value_mix=1.5)


def _lambda_return(q, players, z, lam):
    """TD(lambda) targets of one finished game, by the definition: q[s] the root value of
    position s for its mover, z[t] the outcome for position t's mover."""
    last = len(q) - 1
    out = []
    for t in range(last + 1):
        later = sum(
            (1 - lam) * lam ** (k - 1) * (q[t + k] if players[t + k] == players[t] else -q[t + k])
            for k in range(1, last - t + 1)
        )
        out.append(later + lam ** (last - t) * z[t])
    return np.array(out)


@pytest.mark.parametrize("lam", [0.0, 0.6, 0.95])
def test_td_lambda_targets_bootstrap_from_the_later_root_values(lam):
    # Slot 0: a 4-position game with a pass (player 1 moves twice) that player 0 wins, then a
    # second game that never ends. Slot 1: a 6-position game over both chunks, player 1 wins.
    done = np.zeros((6, 2), bool)
    done[3, 0] = done[5, 1] = True
    returns = np.zeros((6, 2, 2))
    returns[3, 0] = [1, -1]
    returns[5, 1] = [-1, 1]
    players = np.array([[0, 0], [1, 1], [1, 0], [0, 1], [0, 0], [1, 1]], np.int32)
    q = np.array(
        [[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6], [0.9, -0.7], [0.2, 0.8], [-0.1, 0.5]], np.float32
    )
    traj = _traj(done, returns, players)._replace(root_value=jnp.asarray(q))
    buf = replay.init(8, 2, (1, 1, 1), 3)
    buf = replay.add(buf, jax.tree_util.tree_map(lambda x: x[:3], traj), value_lambda=lam)
    assert not buf.ready.any()  # no game over yet
    buf = replay.add(buf, jax.tree_util.tree_map(lambda x: x[3:], traj), value_lambda=lam)
    np.testing.assert_array_equal(buf.ready[:6], [[1, 1]] * 4 + [[0, 1]] * 2)
    z0 = np.where(players[:4, 0] == 0, 1.0, -1.0)
    want0 = _lambda_return(q[:4, 0], players[:4, 0], z0, lam)
    np.testing.assert_allclose(buf.value[:4, 0], want0, rtol=1e-5, atol=1e-6)
    z1 = np.where(players[:, 1] == 1, 1.0, -1.0)
    want1 = _lambda_return(q[:, 1], players[:, 1], z1, lam)
    np.testing.assert_allclose(buf.value[:6, 1], want1, rtol=1e-5, atol=1e-6)
    if lam == 0.0:  # the next position's root value, for the mover; the last: the outcome
        np.testing.assert_allclose(buf.value[:3, 0], [-0.3, -0.5, -0.9], rtol=1e-6)


def test_td_lambda_one_is_the_outcome_and_bad_lambdas_are_refused():
    traj = _won_in_three(np.full((3, 2), 0.3, np.float32))
    plain = replay.add(replay.init(4, 2, (1, 1, 1), 3), traj)
    one = replay.add(replay.init(4, 2, (1, 1, 1), 3), traj, value_lambda=1.0)
    np.testing.assert_array_equal(one.value, plain.value)
    with pytest.raises(ValueError, match=r"value_lambda must be in \[0, 1\]"):
        replay.add(replay.init(4, 2, (1, 1, 1), 3), traj, value_lambda=1.2)
    with pytest.raises(ValueError, match="set one"):
        replay.add(replay.init(4, 2, (1, 1, 1), 3), traj, value_lambda=0.9, value_mix=0.5)
    with pytest.raises(ValueError, match="needs the positions' root values"):
        bare = traj._replace(root_value=None)
        replay.add(replay.init(4, 2, (1, 1, 1), 3), bare, value_lambda=0.9)
