"""Policy surprise weighting (KataGo): self-play measures KL(search policy || network prior) and
the replay draws positions in proportion to (1 - f) + f * surprise / mean surprise."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from azjax import config as cfg
from azjax import replay
from azjax.network import init_variables, make_apply, make_network
from azjax.search import SearchSpec
from azjax.selfplay import init_states, make_selfplay, policy_surprise


def test_policy_surprise_is_the_kl_divergence_from_the_prior():
    logits = jnp.log(jnp.array([[0.5, 0.25, 0.25], [0.5, 0.25, 0.25], [0.2, 0.3, 0.5]]))
    policy = jnp.array([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    got = np.asarray(policy_surprise(policy, logits))
    np.testing.assert_allclose(got, [0.0, np.log(2.0), 0.0], atol=1e-6)
    # an illegal move's masked logit does not count: the prior is over the legal moves
    masked = jnp.array([[0.0, 0.0, -1e9]])
    np.testing.assert_allclose(policy_surprise(jnp.array([[0.5, 0.5, 0.0]]), masked), 0, atol=1e-6)


def _buffer(surprise, ready):
    """A one-slot buffer whose R positions have these surprises and readiness; position r's
    policy is tagged with r so that draws can be counted."""
    rows = len(surprise)
    buf = replay.init(rows, 1, (1, 1, 1), 2, surprise=True)
    tag = np.zeros((rows, 1, 2), np.float32)
    tag[:, 0, 0] = np.arange(rows)
    return buf.replace(
        policy=jnp.asarray(tag),
        surprise=jnp.asarray(surprise, jnp.float32)[:, None],
        settled=jnp.where(jnp.asarray(ready), 0, -1).astype(jnp.int32)[:, None],
    )


@functools.partial(jax.jit, static_argnames=("fraction",))
def _draw(buf, key, fraction):
    return replay.sample(buf, key, 40_000, surprise_fraction=fraction).policy[:, 0]


@pytest.mark.parametrize("fraction", [0.5, 1.0])
def test_sampling_follows_the_surprise_weights(fraction):
    surprise = np.array([0.0, 1.0, 3.0, 0.0, 9.0])  # the last one is not ready
    ready = np.array([True, True, True, True, False])
    drawn = _draw(_buffer(surprise, ready), jax.random.key(0), fraction)
    got = np.bincount(np.asarray(drawn).astype(int), minlength=5)
    mean = surprise[ready].mean()  # 1.0
    weight = np.where(ready, (1 - fraction) + fraction * surprise / mean, 0.0)
    want = weight / weight.sum()
    np.testing.assert_allclose(got / got.sum(), want, atol=0.01)
    assert got[4] == 0


def test_the_replays_mean_surprise_counts_the_ready_positions_only():
    ready = np.array([True, True, True, True, False])
    buf = _buffer(np.array([0.0, 1.0, 3.0, 0.0, 9.0]), ready)
    assert float(replay.mean_surprise(buf)) == pytest.approx(1.0)
    assert float(replay.mean_surprise(buf.replace(settled=jnp.full_like(buf.settled, -1)))) == 0.0


def test_sampling_is_uniform_without_surprise_or_weighting():
    ready = np.array([True, True, False, True])
    flat = _buffer(np.zeros(4), ready)  # no ready position has any surprise: uniform
    got = np.bincount(np.asarray(_draw(flat, jax.random.key(1), 0.5)).astype(int), minlength=4)
    np.testing.assert_allclose(got / got.sum(), [1 / 3, 1 / 3, 0, 1 / 3], atol=0.01)
    # f = 0 ignores the surprises: exactly the uniform draw
    skewed = _buffer(np.array([5.0, 0.0, 0.0, 1.0]), ready)
    key = jax.random.key(2)
    uniform = replay.sample(skewed.replace(surprise=None), key, 64)
    np.testing.assert_array_equal(replay.sample(skewed, key, 64).policy, uniform.policy)


def test_a_buffer_too_large_to_count_in_int32_tickets_is_refused():
    rows = replay.MAX_SURPRISE_POSITIONS // 1000 + 1
    with pytest.raises(ValueError, match="lower replay_games"):
        jax.eval_shape(lambda: replay.init(rows, 1000, (1, 1, 1), 2, surprise=True))
    jax.eval_shape(lambda: replay.init(rows, 1000, (1, 1, 1), 2))  # uniform draws: any size


def test_sampling_refuses_a_bad_fraction_or_a_buffer_without_surprises():
    buf = replay.init(2, 1, (1, 1, 1), 2)
    with pytest.raises(ValueError, match="surprise=True"):
        replay.sample(buf, jax.random.key(0), 4, surprise_fraction=0.5)
    with pytest.raises(ValueError, match="surprise_fraction must be in"):
        replay.sample(_buffer([0.0, 1.0], [True, True]), jax.random.key(0), 4, surprise_fraction=2)


@pytest.fixture(scope="module")
def played():
    """Two chunks of tiny Tic-Tac-Toe self-play with surprises: every move searched, and with
    playout cap randomisation."""
    config = cfg.load("tictactoe", dict(num_blocks=1, num_filters=4, value_hidden=4))
    game = config.make_game()
    net = make_network(config, game)
    variables = init_variables(net, game, jax.random.key(0))
    spec = SearchSpec.from_config(dataclasses.replace(config, num_simulations=8), explore=True)
    apply = make_apply(net)
    full = make_selfplay(game, spec, apply, 6, 2, surprise=True)
    capped = make_selfplay(
        game, spec, apply, 6, 2, surprise=True, full_search_prob=0.5, fast_simulations=2
    )
    key = jax.random.key(3)
    return (
        jax.jit(full)(variables, key, init_states(game, 4))[1],
        jax.jit(capped)(variables, key, init_states(game, 4))[1],
    )


def test_selfplay_records_each_positions_surprise(played):
    full, capped = played
    assert full.surprise.shape == (6, 4)
    assert np.all(np.asarray(full.surprise) >= -1e-6) and np.asarray(full.surprise).max() > 0
    # a fast search records no policy and no surprise; a full one records both
    searched = np.asarray(capped.policy).sum(axis=-1) > 0  # [T, B]
    assert not searched.all() and searched.any()
    np.testing.assert_array_equal(np.asarray(capped.surprise)[~searched], 0.0)
    assert np.asarray(capped.surprise)[searched].max() > 0
    # the buffer keeps them beside the positions
    buf = replay.add(replay.init(8, 4, (3, 3, 3), 9, surprise=True), full)
    np.testing.assert_array_equal(buf.surprise[:6], full.surprise)
    with pytest.raises(ValueError, match="policy surprises"):
        replay.add(buf, full._replace(surprise=None))


def test_selfplay_needs_a_network_for_surprises():
    game = cfg.load("tictactoe", {}).make_game()
    spec = SearchSpec(num_simulations=4)
    with pytest.raises(ValueError, match="network's prior"):
        make_selfplay(game, spec, None, 2, 1, surprise=True)


def test_config_takes_a_fraction_for_alphazero_only():
    assert cfg.load("tictactoe", {"policy_surprise": 0.5}).policy_surprise == 0.5
    with pytest.raises(ValueError, match="policy_surprise must be <= 1"):
        cfg.load("tictactoe", {"policy_surprise": 1.5})
    with pytest.raises(ValueError, match="policy_surprise needs algorithm=alphazero"):
        cfg.load("tictactoe", {"policy_surprise": 0.5, "algorithm": "exit"})
