"""The policy-value ResNet of seed 000 (section 4.2, Figure 4.1), in Flax.

    conv block -> num_blocks residual blocks -> policy head | value head

- conv block: 3x3 convolution, batch norm, ReLU;
- residual block: conv block, 3x3 convolution, batch norm, + input, ReLU;
- policy head: 3x3 conv block, dense to one logit per action (the game's canonical frame);
- value head: 1x1 conv block with one filter, dense hidden layer, ReLU, dense to 1, tanh;
  with `value_head="wdl"` dense to 3 logits instead, the probabilities of a win, a draw and a
  loss for the mover, and the value is P(win) - P(loss) (Leela Chess Zero's WDL head; the
  learner reads the logits, `with_value_logits=True`, and the searches the value, as before);
- with `global_pool` (KataGo's global pooling, Wu 2019; off by default): each
  residual block's first convolution makes `pool_channels` more channels, whose mean and
  maximum over the board (after batch norm and ReLU) a dense layer turns into a bias added to
  every one of the block's channels before its first batch norm (the global pooling bias
  structure), and the value head's 1x1 conv block has `num_filters` filters whose mean and
  maximum over the board feed its dense hidden layer (KataGo's value head: its parameters do
  not depend on the board's size);
- ownership head (`ownership_head`, KataGo's auxiliary target; off by default): a 1x1
  convolution to one plane, tanh: who will hold each cell at the end of the game, +1 the mover,
  -1 the opponent. The learner reads it (`with_ownership=True`), and searches with a score
  utility (`azjax.search.scored`); other searches never call it.
- soft policy head (`soft_policy_head`, KataGo's auxiliary soft policy target; off by default):
  a second dense layer on the policy head's features, one logit per action, trained towards the
  search policy raised to 1/T (`azjax.training`); only the learner reads it
  (`with_soft_policy=True`), the searches play from the first.
- opponent policy head (`opponent_policy_head`, KataGo's auxiliary opponent policy target; off by
  default): another dense layer on the policy head's features, one logit per action, trained
  towards the search policy of the opponent's reply (`azjax.training`); only the learner reads it
  (`with_opponent_policy=True`).

The trunk (conv block and residual blocks) is convolutions only (and, with `global_pool`, dense
layers over pooled channels), so its parameters fit any board size; the heads' dense layers are
sized by the board and the actions (the pooled value head's by neither). `is_trunk` names the
trunk's modules, for transfer between games (`azjax.transfer`). With `freeze_trunk` the trunk runs
in inference mode even when training (its batch statistics are used, not updated) and no gradient
flows into it: only the heads learn (seed 004's second transfer setting).

Searches apply the network with each batch norm folded into the convolution before it
(`make_apply`, `fold_batchnorm`): in inference mode a batch norm is a per-channel scale and shift,
so `conv(x, w) * s + b` is `conv(x, w * s) + b`, the same function in one operation fewer a layer.
The convolution then ends in a bias, the residual's addition and the ReLU, which XLA on a GPU
fuses into cuDNN's convolution (`conv-bias-activation`) instead of running a separate pass over
the activations after each one. The learner trains the unfolded network (batch statistics).

Parameters and batch statistics are one pytree ("variables") passed into pure functions.
Computation runs in `dtype` (bfloat16 on accelerators); parameters are kept in float32 and the
outputs are returned in float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

OWNERSHIP_HEAD = "ownership"  # the ownership head's module name in the variables
SOFT_POLICY_HEAD = "soft_policy"  # the soft policy head's
OPPONENT_POLICY_HEAD = "opponent_policy"  # the opponent policy head's
# the heads a run's options add or leave out
AUX_HEADS = (OWNERSHIP_HEAD, SOFT_POLICY_HEAD, OPPONENT_POLICY_HEAD)
# Each head's top-level modules as Flax names them (PolicyValueNet makes them in this order after
# the trunk's): the policy head's conv block and dense layer, the value head's conv block and two
# dense layers; an auxiliary head is one module of its own name.
HEAD_MODULES = {
    "policy": ("ConvBlock_1", "Dense_0"),
    "value": ("ConvBlock_2", "Dense_1", "Dense_2"),
    **{name: (name,) for name in AUX_HEADS},
}
BN_EPSILON = 1e-5  # every batch norm's (Flax's default), which `fold_batchnorm` divides by
VALUE_HEADS = ("tanh", "wdl")  # a value in [-1, 1] by tanh, or by win/draw/loss probabilities


def batch_norm(x, train: bool, dtype):
    return nn.BatchNorm(
        use_running_average=not train, momentum=0.9, epsilon=BN_EPSILON, dtype=dtype
    )(x)


def conv_norm(x, filters: int, kernel: int, train: bool, dtype, folded: bool):
    """A convolution then its batch norm, or (`folded`, inference only) the convolution with a
    bias that `fold_batchnorm` made of the batch norm: the same parameter scope `Conv_0`."""
    x = nn.Conv(filters, (kernel, kernel), padding="SAME", use_bias=folded, dtype=dtype)(x)
    return x if folded else batch_norm(x, train, dtype)


class ConvBlock(nn.Module):
    filters: int
    kernel: int = 3
    dtype: Any = jnp.float32
    folded: bool = False  # the batch norm folded into the convolution (`fold_batchnorm`)

    @nn.compact
    def __call__(self, x, train: bool):
        return nn.relu(conv_norm(x, self.filters, self.kernel, train, self.dtype, self.folded))


def pool_channels(filters: int) -> int:
    """The channels a block with global pooling pools: a quarter of its filters (KataGo pools 32 -
    64 of 128 - 256), at least one."""
    return max(1, filters // 4)


@jax.custom_vjp
def board_max(flat):
    """flat[B, N, C] -> [B, C]: each channel's maximum over the N cells. Its gradient goes in
    equal shares to the cells equal to the maximum, as a max reduction's does, but it divides by
    at least 1: with XLA's own gradient of the reduction the training loss of a run came out NaN
    under the tests' XLA:CPU flags (no optimisation). (An argmax instead was 15 times slower on
    XLA:CPU.)"""
    return flat.max(axis=1)


def _board_max_fwd(flat):
    top = flat.max(axis=1)
    return top, (flat, top)


def _board_max_bwd(saved, grad):
    flat, top = saved
    at = (flat == top[:, None, :]).astype(flat.dtype)
    return (grad[:, None, :] * at / jnp.maximum(at.sum(axis=1, keepdims=True), 1),)


board_max.defvjp(_board_max_fwd, _board_max_bwd)


def global_pool(x):
    """x[B, H, W, C] -> [B, 2C]: each channel's mean and maximum over the board."""
    flat = x.reshape(x.shape[0], -1, x.shape[-1])  # [B, H * W, C]
    return jnp.concatenate([flat.mean(axis=1), board_max(flat)], axis=-1)


class ResidualBlock(nn.Module):
    filters: int
    dtype: Any = jnp.float32
    pooled: bool = False  # KataGo's global pooling bias structure in the first convolution
    folded: bool = False  # the batch norms folded into the convolutions (not with `pooled`)

    @nn.compact
    def __call__(self, x, train: bool):
        if self.pooled:
            extra = pool_channels(self.filters)
            y = nn.Conv(
                self.filters + extra, (3, 3), padding="SAME", use_bias=False, dtype=self.dtype
            )(x)
            y, g = y[..., : self.filters], y[..., self.filters :]
            g = nn.relu(batch_norm(g, train, self.dtype))
            bias = nn.Dense(self.filters, dtype=self.dtype)(global_pool(g))
            y = y + bias[:, None, None, :]
            y = nn.relu(batch_norm(y, train, self.dtype))
        else:
            y = ConvBlock(self.filters, dtype=self.dtype, folded=self.folded)(x, train)
        y = conv_norm(y, self.filters, 3, train, self.dtype, self.folded)
        return nn.relu(x + y)


class PolicyValueNet(nn.Module):
    """obs float32[B, H, W, C] -> (logits float32[B, num_actions], value float32[B] in [-1, 1]);
    with `with_ownership=True` (a network with `ownership_head`) also the ownership prediction,
    float32[B, H * W] in [-1, 1], then with `with_soft_policy=True` (a network with
    `soft_policy_head`) the soft policy's logits, float32[B, num_actions], and then with
    `with_opponent_policy=True` (a network with `opponent_policy_head`) the opponent policy's
    logits, float32[B, num_actions], and last with `with_value_logits=True` (a network with
    `value_head="wdl"`) the value's win, draw and loss logits, float32[B, 3]."""

    num_actions: int
    num_blocks: int = 3
    num_filters: int = 128
    value_hidden: int = 128
    dtype: Any = jnp.float32
    freeze_trunk: bool = False
    ownership_head: bool = False
    soft_policy_head: bool = False
    opponent_policy_head: bool = False
    value_head: str = "tanh"  # VALUE_HEADS
    global_pool: bool = False  # KataGo's global pooling in the blocks and the value head
    policy_head_kernel: int = 3  # the policy head's convolution, 3x3 or 1x1
    # Inference only: each batch norm folded into its convolution, the variables from
    # `fold_batchnorm` (`make_apply` does both); not with `global_pool`.
    folded: bool = False

    @nn.compact
    def __call__(
        self,
        obs,
        train: bool = False,
        with_ownership: bool = False,
        with_soft_policy: bool = False,
        with_opponent_policy: bool = False,
        with_value_logits: bool = False,
    ):
        if self.value_head not in VALUE_HEADS:
            raise ValueError(f"value_head must be one of {', '.join(VALUE_HEADS)}")
        if with_value_logits and self.value_head != "wdl":
            raise ValueError('with_value_logits=True needs a network with value_head="wdl"')
        if with_ownership and not self.ownership_head:
            raise ValueError("with_ownership=True needs a network with ownership_head")
        if with_soft_policy and not self.soft_policy_head:
            raise ValueError("with_soft_policy=True needs a network with soft_policy_head")
        if with_opponent_policy and not self.opponent_policy_head:
            raise ValueError("with_opponent_policy=True needs a network with opponent_policy_head")
        if self.folded and (train or self.global_pool):
            raise ValueError("a folded network is for inference, and not with global_pool")
        trunk_train = train and not self.freeze_trunk
        dtype, folded = self.dtype, self.folded
        x = ConvBlock(self.num_filters, dtype=dtype, folded=folded)(obs.astype(dtype), trunk_train)
        for _ in range(self.num_blocks):
            x = ResidualBlock(
                self.num_filters, dtype=dtype, pooled=self.global_pool, folded=folded
            )(x, trunk_train)
        if self.freeze_trunk:
            x = jax.lax.stop_gradient(x)

        p = ConvBlock(self.num_filters, self.policy_head_kernel, dtype, folded)(x, train)
        p = p.reshape(p.shape[0], -1)
        logits = nn.Dense(self.num_actions, dtype=self.dtype)(p)

        if self.global_pool:  # KataGo's value head: channels pooled over the board
            v = global_pool(ConvBlock(self.num_filters, kernel=1, dtype=self.dtype)(x, train))
        else:
            v = ConvBlock(1, 1, dtype, folded)(x, train).reshape(x.shape[0], -1)
        v = nn.relu(nn.Dense(self.value_hidden, dtype=self.dtype)(v))
        if self.value_head == "wdl":  # win, draw, loss for the mover
            wdl = nn.Dense(3, dtype=self.dtype)(v).astype(jnp.float32)
            probs = jax.nn.softmax(wdl, axis=-1)
            v = probs[:, 0] - probs[:, 2]
        else:
            v = jnp.tanh(nn.Dense(1, dtype=self.dtype)(v))[:, 0]
        out = [logits.astype(jnp.float32), v.astype(jnp.float32)]
        if self.ownership_head:  # the heads are made at init whatever is asked for
            o = nn.Conv(1, (1, 1), dtype=self.dtype, name=OWNERSHIP_HEAD)(x)
            if with_ownership:
                out.append(jnp.tanh(o.reshape(o.shape[0], -1)).astype(jnp.float32))
        if self.soft_policy_head:
            soft = nn.Dense(self.num_actions, dtype=self.dtype, name=SOFT_POLICY_HEAD)(p)
            if with_soft_policy:
                out.append(soft.astype(jnp.float32))
        if self.opponent_policy_head:
            reply = nn.Dense(self.num_actions, dtype=self.dtype, name=OPPONENT_POLICY_HEAD)(p)
            if with_opponent_policy:
                out.append(reply.astype(jnp.float32))
        if with_value_logits:
            out.append(wdl)
        return tuple(out)


def make_network(config, game) -> PolicyValueNet:
    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[config.dtype]
    return PolicyValueNet(
        num_actions=game.num_actions,
        num_blocks=config.num_blocks,
        num_filters=config.num_filters,
        value_hidden=config.value_hidden,
        dtype=dtype,
        freeze_trunk=config.freeze_trunk,
        ownership_head=config.ownership_weight > 0,
        soft_policy_head=config.soft_policy_weight > 0,
        opponent_policy_head=config.opponent_policy_weight > 0,
        value_head=config.value_head,
        global_pool=config.global_pool,
        policy_head_kernel=config.policy_head_kernel,
    )


def init_variables(net: PolicyValueNet, game, key) -> dict:
    """{'params': ..., 'batch_stats': ...} for a network over `game`'s observations."""
    dummy = jnp.zeros((1, *game.observation_shape), jnp.float32)
    return net.init(key, dummy, train=False)


def fold_batchnorm(variables: dict) -> dict:
    """{'params': ...} of the folded network (`PolicyValueNet(folded=True)`) that computes what
    `variables` ({'params', 'batch_stats'}) compute in inference mode: in every scope that holds a
    convolution `Conv_0` and its batch norm `BatchNorm_0`, the norm's per-channel multiplier
    m = scale / sqrt(var + eps) goes into the kernel (kernel * m) and the rest into a bias
    (bias - mean * m). Pure and cheap (a few multiplies per kernel weight): `make_apply` folds at
    every call, so it works on whatever variables it is given."""

    def fold(params: dict, stats: dict) -> dict:
        out = {}
        for name, sub in params.items():
            if name == "BatchNorm_0" and "Conv_0" in params:
                continue
            if name == "Conv_0" and "BatchNorm_0" in params:
                norm, moments = params["BatchNorm_0"], stats["BatchNorm_0"]
                m = norm["scale"] * jax.lax.rsqrt(moments["var"] + BN_EPSILON)
                out[name] = {
                    "kernel": sub["kernel"] * m,
                    "bias": norm["bias"] - moments["mean"] * m,
                }
            elif name in stats:  # a module with batch norms inside
                out[name] = fold(sub, stats[name])
            else:
                out[name] = sub
        return out

    return {"params": fold(variables["params"], variables["batch_stats"])}


def make_apply(net: PolicyValueNet, fold: bool = True) -> Callable:
    """apply(variables, obs[B, H, W, C]) -> (logits[B, A], value[B]) in inference mode;
    `with_ownership=True` (a network with `ownership_head`) adds the ownership[B, H * W].
    It applies the network with its batch norms folded into the convolutions (the module
    docstring), unless `fold=False` or the network has `global_pool` (whose pooled blocks are not
    folded): the same function up to rounding."""
    if not (fold and isinstance(net, PolicyValueNet) and not net.global_pool):

        def apply(variables, obs, with_ownership: bool = False):
            return net.apply(variables, obs, train=False, with_ownership=with_ownership)

        return apply
    module, compute = net.clone(folded=True), jnp.dtype(net.dtype)

    def prepare(variables):  # folded variables have no batch stats: folding twice is a no-op
        if "batch_stats" not in variables:
            return variables
        folded = fold_batchnorm(variables)
        if compute == jnp.float32:
            return folded
        # every layer computes in `compute` and casts its float32 parameters to it at each call:
        # cast once (the same values; a cast of an already cast parameter is none)
        return jax.tree_util.tree_map(lambda x: x.astype(compute), folded)

    def apply(variables, obs, with_ownership: bool = False):
        return module.apply(prepare(variables), obs, train=False, with_ownership=with_ownership)

    apply.prepare = prepare
    return apply


def prepare_variables(apply: Callable | None, variables):
    """`variables` as `apply` (of `make_apply`) takes them ready for many calls: folded, where it
    folds the batch norms into the convolutions (and cast to the network's compute dtype where
    that is not float32), and unchanged otherwise (or without `apply`).
    Searches and self-play call it once, outside their loops, so that the fold is computed once a
    program rather than at each simulation's forward pass (XLA:GPU did not hoist it out of mctx's
    while loop; XLA:CPU did). `apply` takes what it returns as it takes `variables`."""
    prepare = getattr(apply, "prepare", None)
    return variables if prepare is None or variables is None else prepare(variables)


def num_parameters(variables) -> int:
    return sum(x.size for x in jax.tree_util.tree_leaves(variables["params"]))


# ---- the trunk, shared between games (azjax.transfer) --------------------------------------------
def is_trunk(name: str) -> bool:
    """Whether the top-level module `name` of a PolicyValueNet's variables is in the trunk.

    Flax names a compact module's children by class and order: the input block is `ConvBlock_0`,
    the residual blocks `ResidualBlock_0..`; `ConvBlock_1`, `ConvBlock_2` and the `Dense_*` layers
    are the heads."""
    return name == "ConvBlock_0" or name.startswith("ResidualBlock_")


def with_trunk(collection: dict, trunk_from: dict) -> dict:
    """`collection` (params or batch_stats, keyed by module) with its trunk taken from
    `trunk_from`, which must hold the same trunk modules."""
    return {k: trunk_from[k] if is_trunk(k) else v for k, v in collection.items()}


def trunk_labels(params: dict) -> dict:
    """The params tree with every leaf labelled "trunk" or "heads" (for optax.multi_transform)."""
    return {
        k: jax.tree_util.tree_map(lambda _, k=k: "trunk" if is_trunk(k) else "heads", v)
        for k, v in params.items()
    }
