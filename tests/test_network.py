"""The policy-value ResNet: shapes, ranges, dtypes, batch norm in training and inference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
from azjax import config as cfg
from azjax import network

HEX = games.make("hex", size=5)


def _net(**overrides):
    config = cfg.load(
        "hex", {"size": 5, "num_blocks": 2, "num_filters": 8, "value_hidden": 8, **overrides}
    )
    net = network.make_network(config, HEX)
    return net, network.init_variables(net, HEX, jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def float32_net():
    return _net()


def test_outputs_have_one_logit_per_action_and_a_value_in_range(float32_net):
    net, variables = float32_net
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (6, *HEX.observation_shape))
    logits, value = network.make_apply(net)(variables, obs.astype(jnp.float32))
    assert logits.shape == (6, HEX.num_actions) and value.shape == (6,)
    assert logits.dtype == jnp.float32 and value.dtype == jnp.float32
    assert np.all(np.abs(np.asarray(value)) <= 1.0)
    # different boards give different outputs: the network reads its input
    assert not np.allclose(logits[0], logits[1])


def test_parameter_count_follows_the_architecture(float32_net):
    _, variables = float32_net
    n = network.num_parameters(variables)
    bigger = network.num_parameters(_net(num_filters=16)[1])
    deeper = network.num_parameters(_net(num_blocks=3)[1])
    # a residual block adds two 3x3x8x8 convolutions and two batch norms (scale, bias)
    assert deeper - n == 2 * (3 * 3 * 8 * 8) + 2 * (2 * 8)
    assert bigger > n
    assert set(variables) == {"params", "batch_stats"}


def test_training_mode_updates_batch_statistics_inference_does_not(float32_net):
    net, variables = float32_net
    obs = jax.random.bernoulli(jax.random.PRNGKey(2), 0.5, (8, *HEX.observation_shape))
    _, updates = net.apply(variables, obs.astype(jnp.float32), train=True, mutable=["batch_stats"])
    before = jax.tree_util.tree_leaves(variables["batch_stats"])
    after = jax.tree_util.tree_leaves(updates["batch_stats"])
    assert any(not np.allclose(a, b) for a, b in zip(before, after))


def test_bfloat16_computes_in_bfloat16_and_keeps_float32_parameters():
    net, variables = _net(dtype="bfloat16")
    dtypes = {x.dtype for x in jax.tree_util.tree_leaves(variables["params"])}
    assert dtypes == {jnp.dtype("float32")}
    obs = jnp.zeros((2, *HEX.observation_shape), jnp.float32)
    logits, value = network.make_apply(net)(variables, obs)
    assert logits.dtype == jnp.float32 and value.dtype == jnp.float32  # outputs cast back
    jaxpr = str(jax.make_jaxpr(network.make_apply(net))(variables, obs))
    assert "bf16" in jaxpr
