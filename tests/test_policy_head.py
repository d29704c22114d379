"""The policy head's convolution (`--policy_head_kernel`): its parameters and arithmetic, what
the flag accepts, and a run that trains, resumes and plays with a 1x1 head."""

import json
import os

import jax
import numpy as np
import pytest
from toy import train_resume_and_play

import games
from azjax import config as cfg
from azjax import network
from azjax.commands import train

F = 8  # filters


def _net(kernel: int):
    game = games.make("hex", size=5)
    config = cfg.load(
        "hex", {"size": 5, "num_blocks": 1, "num_filters": F, "policy_head_kernel": kernel}
    )
    net = network.make_network(config, game)
    return net, network.init_variables(net, game, jax.random.PRNGKey(0)), game


def test_a_1x1_head_has_the_3x3_heads_shapes_but_a_ninth_of_its_convolution():
    (net3, three, game), (net1, one, _) = _net(3), _net(1)
    head3, head1 = three["params"]["ConvBlock_1"], one["params"]["ConvBlock_1"]
    assert head3["Conv_0"]["kernel"].shape == (3, 3, F, F)
    assert head1["Conv_0"]["kernel"].shape == (1, 1, F, F)
    assert network.num_parameters(three) - network.num_parameters(one) == 8 * F * F
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (4, *game.observation_shape))
    obs = obs.astype(np.float32)
    for net, variables in ((net3, three), (net1, one)):
        logits, value = network.make_apply(net)(variables, obs)
        assert logits.shape == (4, game.num_actions) and value.shape == (4,)

    def flops(net, variables):
        cost = jax.jit(network.make_apply(net)).lower(variables, obs).compile().cost_analysis()
        return (cost[0] if isinstance(cost, (list, tuple)) else cost)["flops"]

    assert flops(net1, one) < flops(net3, three)


def test_the_flag_takes_1_or_3():
    assert cfg.load("hex", {"policy_head_kernel": 1}).policy_head_kernel == 1
    assert cfg.load("hex").policy_head_kernel == 3  # seed 000's head, and every shipped network's
    with pytest.raises(ValueError, match="policy_head_kernel must be one of 1, 3; got 2"):
        cfg.load("hex", {"policy_head_kernel": 2})


def test_a_run_trains_resumes_and_plays_with_a_1x1_policy_head(tmp_path, capsys):
    workdir, rows = train_resume_and_play(tmp_path, "--policy_head_kernel=1")
    assert all(np.isfinite(r["loss/policy"]) for r in rows)
    with open(os.path.join(workdir, "config.json")) as f:
        assert json.load(f)["policy_head_kernel"] == 1
    capsys.readouterr()
    # resuming with the other head is refused in one line
    assert train.main([f"--workdir={workdir}", "--resume", "--policy_head_kernel=3"]) == 2
    assert "policy_head_kernel: saved 1 vs now 3" in capsys.readouterr().err
    assert train.main([f"--workdir={workdir}", "--resume", "--policy_head_kernel=2"]) == 2
    assert "--policy_head_kernel must be one of 1, 3; got '2'" in capsys.readouterr().err
