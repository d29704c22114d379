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


def _with_learned_statistics(variables, seed: int = 3):
    """`variables` with batch statistics and norm parameters away from their initial values
    (mean 0, var 1, scale 1, bias 0), so that folding them is tested for real."""
    leaves, tree = jax.tree_util.tree_flatten_with_path(variables)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))

    def moved(path, leaf, key):
        name = jax.tree_util.keystr(path)
        if "BatchNorm" not in name:
            return leaf
        if name.endswith("['var']"):
            return leaf * jax.random.uniform(key, leaf.shape, minval=0.2, maxval=3.0)
        return leaf + 0.5 * jax.random.normal(key, leaf.shape)

    return jax.tree_util.tree_unflatten(tree, [moved(p, x, k) for (p, x), k in zip(leaves, keys)])


@pytest.mark.parametrize(
    "overrides",
    [{}, {"ownership_weight": 0.5}, {"policy_head_kernel": 1, "value_head": "wdl"}],
    ids=["plain", "ownership", "1x1-policy-wdl"],
)
def test_searches_apply_the_network_with_its_batch_norms_folded_into_the_convolutions(overrides):
    net, variables = _net(**overrides)
    variables = _with_learned_statistics(variables)
    obs = jax.random.bernoulli(jax.random.PRNGKey(4), 0.4, (16, *HEX.observation_shape))
    obs = obs.astype(jnp.float32)
    with_ownership = "ownership_weight" in overrides
    apart = net.apply(variables, obs, train=False, with_ownership=with_ownership)
    folded = network.make_apply(net)(variables, obs, with_ownership=with_ownership)
    assert len(folded) == len(apart) == 2 + with_ownership
    for a, b in zip(folded, apart):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(jnp.abs(b).max()))
    assert float(jnp.abs(apart[0]).std()) > 0.1  # the logits are not flat: a real comparison
    # the folded variables: a bias in each convolution that had a norm, no norm left
    params = network.fold_batchnorm(variables)["params"]
    names = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)}
    assert not any("BatchNorm" in n for n in names)
    assert "['ConvBlock_0']['Conv_0']['bias']" in names
    assert "['ResidualBlock_0']['Conv_0']['bias']" in names
    # unfolded on request: exactly the module's own inference
    exact = network.make_apply(net, fold=False)(variables, obs, with_ownership=with_ownership)
    for a, b in zip(exact, apart):
        np.testing.assert_array_equal(a, b)


def test_a_folded_network_is_for_inference_and_global_pooling_is_applied_unfolded():
    net, variables = _net()
    obs = jnp.zeros((2, *HEX.observation_shape), jnp.float32)
    with pytest.raises(ValueError, match="inference"):
        net.clone(folded=True).apply(network.fold_batchnorm(variables), obs, train=True)
    pooled, pooled_variables = _net(global_pool=True)
    pooled_variables = _with_learned_statistics(pooled_variables)
    for a, b in zip(
        network.make_apply(pooled)(pooled_variables, obs),
        pooled.apply(pooled_variables, obs, train=False),
    ):
        np.testing.assert_array_equal(a, b)


def test_self_play_and_the_search_fold_once_outside_their_loops(float32_net):
    """The fold (a per-channel rsqrt a convolution) stands before self-play's and the search's
    while loops in the program as lowered, whatever XLA then hoists (XLA:GPU did not hoist it
    out of mctx's loop), and a search on variables folded beforehand plays as on the raw ones."""
    from azjax.search import SearchSpec, make_search
    from azjax.selfplay import init_states, make_selfplay
    from benchmarks.network_share import ops_in_loops

    net, variables = float32_net
    variables = _with_learned_statistics(variables)
    apply = network.make_apply(net)
    folded = network.prepare_variables(apply, variables)
    assert set(folded) == {"params"} and network.prepare_variables(apply, folded) is folded
    assert network.prepare_variables(network.make_apply(net, fold=False), variables) is variables
    spec = SearchSpec(search="gumbel", num_simulations=4)
    states, key = init_states(HEX, 2), jax.random.PRNGKey(5)
    search = jax.jit(make_search(HEX, spec, apply))
    a, b = search(variables, key, states), search(folded, key, states)
    np.testing.assert_array_equal(a.action, b.action)
    np.testing.assert_allclose(a.action_weights, b.action_weights, atol=1e-5)
    for fn in (make_search(HEX, spec, apply), make_selfplay(HEX, spec, apply, 2, 0)):
        hlo = jax.jit(fn).lower(variables, key, states).as_text(dialect="hlo")
        inside, total = ops_in_loops(hlo, "rsqrt")
        assert total >= 3 and inside == 0  # one rsqrt a folded convolution (2 blocks + 3)


def test_bfloat16_variables_are_cast_once_outside_the_loops_to_the_same_outputs():
    """A bfloat16 network's layers cast their float32 parameters at every call: the prepared
    variables are cast once (the same outputs, bit for bit), and the search's loops then hold
    one cast fewer a parameter than with an `apply` that cannot prepare them."""
    from azjax.search import SearchSpec, make_search
    from azjax.selfplay import init_states
    from benchmarks.network_share import ops_in_loops

    net, variables = _net(dtype="bfloat16")
    variables = _with_learned_statistics(variables)
    apply = network.make_apply(net)
    prepared = network.prepare_variables(apply, variables)
    leaves = jax.tree_util.tree_leaves(prepared)
    assert {x.dtype for x in leaves} == {jnp.dtype("bfloat16")}
    obs = jax.random.bernoulli(jax.random.PRNGKey(6), 0.4, (8, *HEX.observation_shape))
    for a, b in zip(apply(variables, obs.astype(jnp.float32)), apply(prepared, obs)):
        np.testing.assert_array_equal(a, b)
    bare = lambda v, o, **kw: apply(v, o, **kw)  # noqa: E731  (no `prepare`: folds at each call)
    spec, states = SearchSpec(search="gumbel", num_simulations=4), init_states(HEX, 2)
    casts = [
        ops_in_loops(
            jax.jit(make_search(HEX, spec, fn))
            .lower(variables, jax.random.PRNGKey(0), states)
            .as_text(dialect="hlo"),
            "convert",
        )[0]
        for fn in (bare, apply)
    ]
    assert casts[0] - casts[1] == len(leaves)
