"""The win/draw/loss value head (`--value_head=wdl`, Leela Chess Zero's): its target, what the
network reads off it, what the learner fits, and a run that trains, resumes and plays with it."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from toy import train_resume_and_play

from azjax import config as cfg
from azjax import network, training
from azjax.commands import train
from azjax.replay import Batch


def test_the_target_splits_a_value_into_win_draw_and_loss():
    values = jnp.asarray([1.0, 0.0, -1.0, 0.5, -0.25, 1.5])
    target = np.asarray(training.wdl_target(values))
    np.testing.assert_allclose(
        target,
        [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.5, 0.5, 0], [0, 0.75, 0.25], [1, 0, 0]],
    )
    assert np.all(target >= 0)
    np.testing.assert_allclose(target.sum(-1), 1.0)
    # its expectation is the value (clipped to [-1, 1])
    np.testing.assert_allclose(target[:, 0] - target[:, 2], np.clip(values, -1, 1))


@pytest.fixture(scope="module")
def fitted():
    """A Tic-Tac-Toe WDL network after 300 Adam steps on four positions whose value targets
    are a win, a draw, a loss and a half-won mix; (net, state, first Losses, last Losses, batch)."""
    config = cfg.load(
        "tictactoe",
        {"optimizer": "adam", "learning_rate": 0.01, "weight_decay": 0.0, "value_head": "wdl"},
    )
    game = config.make_game()
    net = network.make_network(config, game)
    assert net.value_head == "wdl"
    state = training.init_train_state(
        network.init_variables(net, game, jax.random.PRNGKey(0)), training.make_optimizer(config)
    )
    obs = (jax.random.uniform(jax.random.PRNGKey(1), (4, 3, 3, 3)) < 0.4).astype(jnp.float32)
    batch = Batch(
        obs=jnp.tile(obs, (4, 1, 1, 1)),
        policy=jnp.full((16, 9), 1 / 9),
        value=jnp.tile(jnp.asarray([1.0, 0.0, -1.0, 0.5]), 4),
    )
    step = jax.jit(training.make_train_step(net, training.make_optimizer(config), 0.0))
    state, first = step(state, batch)
    for _ in range(300):
        state, losses = step(state, batch)
    return net, state, first, losses, batch


def test_the_value_is_the_win_probability_less_the_loss_probability(fitted):
    net, state, _, _, batch = fitted
    logits, value, wdl = net.apply(state.variables, batch.obs[:4], with_value_logits=True)
    assert wdl.shape == (4, 3) and wdl.dtype == jnp.float32
    probs = jax.nn.softmax(wdl, axis=-1)
    np.testing.assert_allclose(value, probs[:, 0] - probs[:, 2], atol=1e-6)
    # what the searches call gives the same value and policy
    plain_logits, plain_value = network.make_apply(net)(state.variables, batch.obs[:4])
    np.testing.assert_allclose(plain_value, value, atol=1e-6)
    np.testing.assert_allclose(plain_logits, logits, atol=1e-6)


def test_the_learner_fits_each_outcome_and_the_loss_is_the_cross_entropy(fitted):
    net, state, first, losses, batch = fitted
    probs = jax.nn.softmax(net.apply(state.variables, batch.obs[:4], with_value_logits=True)[2])
    # the win, the draw and the loss are learnt as such, the mix as half a win, half a draw
    np.testing.assert_allclose(probs, [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.5, 0.5, 0]], atol=0.05)
    assert float(first.value) > float(losses.value)
    # the mixed target's entropy, a quarter of the batch, is the floor of the mean cross-entropy
    floor = np.log(2) / 4
    assert floor < float(losses.value) < floor + 0.05
    # the first step's loss is the cross-entropy of the initial network's outputs (train mode)
    fresh = network.init_variables(net, _game(), jax.random.PRNGKey(0))
    (_, _, wdl), _ = net.apply(
        fresh, batch.obs, train=True, with_value_logits=True, mutable=["batch_stats"]
    )
    expected = -jnp.mean(jnp.sum(training.wdl_target(batch.value) * jax.nn.log_softmax(wdl), -1))
    assert float(first.value) == pytest.approx(float(expected), rel=1e-5)


def _game():
    return cfg.load("tictactoe").make_game()


def test_a_tanh_network_has_no_value_logits():
    config = cfg.load("tictactoe", {"num_blocks": 1, "num_filters": 4, "value_hidden": 4})
    net = network.make_network(config, config.make_game())
    variables = network.init_variables(net, config.make_game(), jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match='needs a network with value_head="wdl"'):
        net.apply(variables, jnp.zeros((1, 3, 3, 3)), with_value_logits=True)
    assert variables["params"]["Dense_2"]["kernel"].shape == (4, 1)
    wdl = network.make_network(dataclasses.replace(config, value_head="wdl"), config.make_game())
    params = network.init_variables(wdl, config.make_game(), jax.random.PRNGKey(0))["params"]
    assert params["Dense_2"]["kernel"].shape == (4, 3)


def test_a_run_trains_resumes_and_plays_with_the_wdl_head(tmp_path, capsys):
    workdir, rows = train_resume_and_play(tmp_path, "--value_head=wdl")
    assert all(np.isfinite(r["loss/value"]) and r["loss/value"] > 0 for r in rows)
    capsys.readouterr()
    # resuming with the other head is refused in one line
    assert train.main([f"--workdir={workdir}", "--resume", "--value_head=tanh"]) == 2
    assert "value_head: saved 'wdl' vs now 'tanh'" in capsys.readouterr().err


def test_the_option_refuses_other_heads():
    with pytest.raises(ValueError, match="value_head must be one of tanh, wdl"):
        cfg.load("othello", {"value_head": "categorical"})
