"""KataGo's global pooling (`--global_pool`): the blocks' pooled bias and the pooled value head,
their parameters, what they read, and a run that trains, resumes and plays with them."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from toy import train_resume_and_play

import games
from azjax import config as cfg
from azjax import network
from azjax.commands import train

F = 8  # filters
H = 6  # value hidden units


def _net(size: int, pooled: bool, blocks: int = 2):
    game = games.make("hex", size=size)
    config = cfg.load(
        "hex",
        {
            "size": size,
            "num_blocks": blocks,
            "num_filters": F,
            "value_hidden": H,
            "global_pool": pooled,
        },
    )
    net = network.make_network(config, game)
    return net, network.init_variables(net, game, jax.random.PRNGKey(0)), game


@pytest.fixture(scope="module")
def pooled5():
    return _net(5, True)


def test_the_parameters_are_the_architectures(pooled5):
    _, pooled, _ = pooled5
    _, plain, _ = _net(5, False)
    g = network.pool_channels(F)
    assert g == 2
    # per block: g more output channels in the first 3x3 convolution, their batch norm (scale,
    # bias), and a dense layer from their means and maxima to a bias per filter
    block = 3 * 3 * F * g + 2 * g + (2 * g * F + F)
    # the value head: a 1x1 convolution to F channels (and its batch norm) instead of one, then
    # the dense hidden layer from 2F pooled features instead of the 25 cells
    head = (F * F + 2 * F) - (F * 1 + 2 * 1) + (2 * F - 25) * H
    assert network.num_parameters(pooled) - network.num_parameters(plain) == 2 * block + head
    params = pooled["params"]["ResidualBlock_0"]
    assert params["Conv_0"]["kernel"].shape == (3, 3, F, F + g)
    assert params["Dense_0"]["kernel"].shape == (2 * g, F)


def test_the_value_head_does_not_depend_on_the_board_size(pooled5):
    _, five, _ = pooled5
    _, seven, _ = _net(7, True)
    _, plain_seven, _ = _net(7, False)

    def value_shapes(variables):
        return {
            k: jax.tree_util.tree_map(jnp.shape, variables["params"][k])
            for k in ("ConvBlock_2", "Dense_1", "Dense_2")
        }

    assert value_shapes(five) == value_shapes(seven)
    assert value_shapes(plain_seven) != value_shapes(seven)


def test_the_board_maximum_and_its_gradient():
    flat = jnp.asarray([[[1.0, 0.0], [3.0, 0.0], [3.0, -1.0], [2.0, -2.0]]])  # [1, 4 cells, 2]
    np.testing.assert_array_equal(network.board_max(flat), [[3.0, 0.0]])
    grad = jax.grad(lambda f: (network.board_max(f) * jnp.asarray([2.0, 1.0])).sum())(flat)
    # the two cells at the maximum share its gradient; every other cell gets none
    np.testing.assert_allclose(grad[0], [[0, 0.5], [1, 0.5], [1, 0], [0, 0]])
    x = jax.random.normal(jax.random.PRNGKey(3), (3, 5, 4))  # no ties: the reduction's gradient
    ours = jax.grad(lambda f: network.board_max(f).sum())(x)
    np.testing.assert_array_equal(ours, jax.grad(lambda f: f.max(axis=1).sum())(x))


def _stone(game, row, col):
    """float32[1, H, W, C]: an empty board's planes with a 1 at (row, col) of the first plane."""
    return jnp.zeros((1, *game.observation_shape)).at[0, row, col, 0].set(1.0)


def test_outputs_stay_in_range(pooled5):
    net, variables, game = pooled5
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (6, *game.observation_shape))
    logits, value = network.make_apply(net)(variables, obs.astype(jnp.float32))
    assert logits.shape == (6, game.num_actions) and value.shape == (6,)
    assert np.all(np.abs(np.asarray(value)) <= 1.0)


@pytest.fixture(scope="module")
def wide():
    """One-block networks on 15x15 Hex, with and without pooling: a cell's convolutions see 3
    cells each way, so a stone 7 cells from every edge moves no edge cell's features."""
    return _net(15, True, blocks=1), _net(15, False, blocks=1)


def test_a_pooled_block_passes_the_whole_board_to_every_cell(wide):
    def block_output(net, variables, obs):
        _, state = net.apply(variables, obs, capture_intermediates=True, mutable=["intermediates"])
        return np.asarray(state["intermediates"]["ResidualBlock_0"]["__call__"][0])

    for (net, variables, game), pooled in zip(wide, (True, False)):
        empty = block_output(net, variables, _stone(game, 7, 7) * 0)
        stone = block_output(net, variables, _stone(game, 7, 7))
        corner_moved = not np.allclose(empty[0, 0, 0], stone[0, 0, 0])
        assert corner_moved == pooled  # only the pooled bias carries the stone to the corner
        assert not np.allclose(empty[0, 7, 7], stone[0, 7, 7])


def test_the_pooled_value_does_not_see_where_a_pattern_lies(wide):
    # away from the edges the trunk is translation-equivariant and the pooled value head reads
    # means and maxima, so a stone moved one cell leaves the value alone; the flattened head
    # weighs each cell by its own parameters
    for (net, variables, game), pooled in zip(wide, (True, False)):
        here = net.apply(variables, _stone(game, 7, 7))[1]
        there = net.apply(variables, _stone(game, 7, 8))[1]
        assert np.allclose(here, there, atol=1e-6) == pooled


def test_a_run_trains_resumes_and_plays_with_global_pooling(tmp_path, capsys):
    workdir, rows = train_resume_and_play(tmp_path, "--global_pool=true")
    assert all(np.isfinite(r["loss/value"]) for r in rows)
    with open(os.path.join(workdir, "config.json")) as f:
        assert json.load(f)["global_pool"] is True
    capsys.readouterr()
    # resuming without the pooling is refused in one line
    assert train.main([f"--workdir={workdir}", "--resume", "--global_pool=false"]) == 2
    assert "global_pool: saved True vs now False" in capsys.readouterr().err


def test_global_pool_is_each_channel_s_mean_then_its_maximum():
    """The pooled features by hand (a reviewer's mutation that put a second mean where the
    maximum goes passed: the tests above see that the board reaches every cell, not how)."""
    x = np.random.default_rng(0).normal(size=(2, 3, 4, 5)).astype(np.float32)
    flat = x.reshape(2, 12, 5)
    want = np.concatenate([flat.mean(axis=1), flat.max(axis=1)], axis=-1)
    np.testing.assert_allclose(np.asarray(network.global_pool(jnp.asarray(x))), want, rtol=1e-6)
