"""The auxiliary soft policy target (`--soft_policy_weight`, KataGo's): the network's second
policy output, what the learner fits it to, and the options' bad values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from azjax import config as cfg
from azjax import network, training
from azjax.replay import Batch

# a search policy over every move, so that a network can fit it and its softened form exactly
SHARP = np.array([0.9, 0.06, 0.02, 0.01, 0.005, 0.002, 0.001, 0.001, 0.001], np.float32)
SHARP /= SHARP.sum()


def _fit(config):
    """(network, train state, first Losses, last Losses) after 600 Adam steps of `config`'s
    learner on one position whose policy target is SHARP, with half the batch's targets zero
    (fast searches)."""
    game = config.make_game()
    net = network.make_network(config, game)
    variables = network.init_variables(net, game, jax.random.PRNGKey(0))
    opt = training.make_optimizer(config)
    state = training.init_train_state(variables, opt)
    policy = jnp.asarray(np.stack([SHARP] * 8 + [np.zeros(9, np.float32)] * 8))
    batch = Batch(jnp.zeros((16, 3, 3, 3)), policy, jnp.zeros(16))
    soft = dict(
        soft_policy_weight=config.soft_policy_weight,
        soft_policy_temperature=config.soft_policy_temperature,
    )
    step = jax.jit(training.make_train_step(net, opt, 0.0, partial_policy=True, **soft))
    state, first = step(state, batch)
    for _ in range(600):
        state, losses = step(state, batch)
    return net, state, first, losses


@pytest.fixture(scope="module")
def fitted():
    config = cfg.load(
        "tictactoe",
        {
            "optimizer": "adam",
            "learning_rate": 0.01,
            "weight_decay": 0.0,
            "soft_policy_weight": 2.0,
        },
    )
    return config, *_fit(config)


def test_the_soft_head_learns_the_softened_policy_and_the_first_the_sharp_one(fitted):
    config, net, state, first, losses = fitted
    assert net.soft_policy_head and "soft_policy" in state.variables["params"]
    obs = jnp.zeros((1, 3, 3, 3))
    logits, value = network.make_apply(net)(state.variables, obs)  # what the searches see
    assert logits.shape == (1, 9) and value.shape == (1,)
    _, _, soft = net.apply(state.variables, obs, with_soft_policy=True)
    softened = SHARP**0.25 / np.sum(SHARP**0.25)  # 0.27 for the first move, 0.05 the last
    np.testing.assert_allclose(jax.nn.softmax(soft[0]), softened, atol=0.03)
    np.testing.assert_allclose(jax.nn.softmax(logits[0]), SHARP, atol=0.03)
    assert float(first.soft_policy) > float(losses.soft_policy) > 0
    assert float(losses.total) == pytest.approx(
        float(losses.value + losses.policy + losses.l2 + losses.ownership + losses.soft_policy),
        rel=1e-5,
    )
    # Averaged over the positions with a target, as the policy term: 2 x the entropy of the
    # softened target is its floor, reached here to within the fit.
    entropy = -np.sum(softened * np.log(softened))
    assert float(losses.soft_policy) == pytest.approx(2.0 * entropy, rel=0.02)


def test_the_soft_target_keeps_zeros_and_empty_rows():
    policy = jnp.asarray([[0.81, 0.16, 0.03, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    soft = np.asarray(training.soft_policy_target(policy, 4.0))
    root = np.array([0.81, 0.16, 0.03, 0.0]) ** 0.25
    np.testing.assert_allclose(soft[0], root / root.sum(), rtol=1e-5)
    np.testing.assert_array_equal(soft[1:], [[0, 0, 0, 0], [1, 0, 0, 0]])
    np.testing.assert_allclose(training.soft_policy_target(policy, 1.0), policy, atol=1e-7)


def test_without_the_weight_the_loss_and_network_are_as_before(fitted):
    config = fitted[0]
    plain = cfg.load("tictactoe", {"optimizer": "adam", "learning_rate": 0.01})
    net = network.make_network(plain, plain.make_game())
    assert not net.soft_policy_head
    opt = training.make_optimizer(config)
    with pytest.raises(ValueError, match="needs a network with soft_policy_head"):
        training.make_train_step(net, opt, 0.0, soft_policy_weight=1.0)
    variables = network.init_variables(net, plain.make_game(), jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="with_soft_policy=True needs a network"):
        net.apply(variables, jnp.zeros((1, 3, 3, 3)), with_soft_policy=True)
    soft_net = network.make_network(config, config.make_game())
    with pytest.raises(ValueError, match="soft_policy_temperature must be >= 1"):
        training.make_train_step(
            soft_net, opt, 0.0, soft_policy_weight=1.0, soft_policy_temperature=0.5
        )


def test_the_options_refuse_bad_values():
    assert cfg.load("othello", {"soft_policy_weight": 8.0}).soft_policy_temperature == 4.0
    with pytest.raises(ValueError, match="soft_policy_weight must be >= 0"):
        cfg.load("othello", {"soft_policy_weight": -1.0})
    with pytest.raises(ValueError, match="soft_policy_temperature must be >= 1"):
        cfg.load("othello", {"soft_policy_weight": 8.0, "soft_policy_temperature": 0.5})
    with pytest.raises(ValueError, match="soft_policy_weight needs algorithm=alphazero"):
        cfg.load("othello", {"soft_policy_weight": 8.0, "algorithm": "exit"})
