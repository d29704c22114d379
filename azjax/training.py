"""The learner: loss, optimizer and a pure, jitted training step.

    loss = (z - v)^2 - pi . log p + c * ||theta||^2        (seed 000, section 4.4)

averaged over the batch; pi is the search policy, z the game's outcome for the position's mover.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from azjax.replay import Batch


@struct.dataclass
class TrainState:
    variables: Any  # {'params': ..., 'batch_stats': ...}
    opt_state: Any
    step: jax.Array  # int32[], optimizer steps taken


class Losses(NamedTuple):
    total: jax.Array
    value: jax.Array
    policy: jax.Array
    l2: jax.Array


def make_optimizer(config, total_steps: int) -> optax.GradientTransformation:
    """SGD with momentum or Adam, with the configured learning-rate schedule."""
    lr = config.learning_rate
    total_steps = max(total_steps, 1)
    if config.lr_schedule == "constant":
        schedule = optax.constant_schedule(lr)
    elif config.lr_schedule == "cosine":
        schedule = optax.cosine_decay_schedule(lr, total_steps)
    elif config.lr_schedule == "warmup_cosine":
        warmup = max(1, total_steps // 20)
        schedule = optax.warmup_cosine_decay_schedule(0.0, lr, warmup, total_steps)
    else:
        raise ValueError(f"unknown lr_schedule {config.lr_schedule!r}")
    if config.optimizer == "sgd":
        return optax.sgd(schedule, momentum=config.momentum)
    if config.optimizer == "adam":
        return optax.adam(schedule)
    raise ValueError(f"unknown optimizer {config.optimizer!r}")


def init_train_state(variables, optimizer) -> TrainState:
    return TrainState(
        variables=variables, opt_state=optimizer.init(variables["params"]), step=jnp.int32(0)
    )


def make_train_step(net, optimizer, weight_decay: float):
    """train_step(state, batch) -> (state, Losses); pure, meant for jax.jit."""

    def loss_fn(params, batch_stats, batch: Batch):
        (logits, value), updates = net.apply(
            {"params": params, "batch_stats": batch_stats},
            batch.obs,
            train=True,
            mutable=["batch_stats"],
        )
        value_loss = jnp.mean((batch.value - value) ** 2)
        policy_loss = jnp.mean(optax.softmax_cross_entropy(logits, batch.policy))
        l2 = weight_decay * sum(jnp.sum(p**2) for p in jax.tree_util.tree_leaves(params))
        total = value_loss + policy_loss + l2
        return total, (Losses(total, value_loss, policy_loss, l2), updates["batch_stats"])

    def train_step(state: TrainState, batch: Batch):
        params = state.variables["params"]
        grads, (losses, batch_stats) = jax.grad(loss_fn, has_aux=True)(
            params, state.variables["batch_stats"], batch
        )
        updates, opt_state = optimizer.update(grads, state.opt_state, params)
        params = optax.apply_updates(params, updates)
        new = TrainState(
            variables={"params": params, "batch_stats": batch_stats},
            opt_state=opt_state,
            step=state.step + 1,
        )
        return new, losses

    return train_step
