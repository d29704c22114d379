"""The learner: loss, optimizer and a pure, jitted training step.

    loss = (z - v)^2 - pi . log p + c * ||theta||^2        (seed 000, section 4.4)

averaged over the batch; pi is the search policy, z the game's outcome for the position's mover.
`value_weight` w scales the value term (w (z - v)^2; 1 by default, AlphaZero's).
With `ownership_weight` w > 0 the network also predicts who holds each cell at the end of the
game (KataGo's ownership target, Wu 2019 section 4.1) and the loss adds
w * mean over cells of (o - o_hat)^2, o in {-1, 0, +1} from the mover's view (`replay`); the
positions of a resigned game, whose final board was never reached, are left out of that mean.
With `soft_policy_weight` s > 0 a second policy output learns the search policy softened to
pi^(1/T) (normalised; T = `soft_policy_temperature`) and the loss adds s * (-pi_soft . log p_soft):
KataGo's auxiliary soft policy target (KataGoMethods.md; T = 4, s = 8 there), a target that tells
apart the moves the sharp one gives almost nothing; the searches never read that output.
With `opponent_policy_weight` w > 0 a third policy output learns the search policy of the
opponent's reply, the next position of the game (`azjax.replay`), and the loss adds
w * (-pi_next . log p_opp), averaged over the positions that have a reply: KataGo's auxiliary
opponent policy target (Wu 2019 section 4.1, w = 0.15 there), a regulariser that makes the trunk
represent what the opponent will do; the searches never read that output either.
With a win/draw/loss value head (`value_head="wdl"`, Leela Chess Zero's) the value term is a
cross-entropy instead: the target z in [-1, 1] is split into the distribution
(max(z, 0), 1 - |z|, max(-z, 0)) over win, draw and loss (`wdl_target`: a game's outcome is one of
the three, a mixed target such as `value_target_mix`'s keeps its expectation), and the loss is
-sum of target . log softmax(the head's three logits); the value the searches read is
P(win) - P(loss).
Under playout cap randomisation (`partial_policy`) the policy terms are averaged over the positions
that have a policy target (the fast searches are recorded with an all-zero pi).

With `freeze_trunk` (a run transferred from another, `azjax.transfer`) only the heads train: the
optimizer is an `optax.multi_transform` whose trunk part is `set_to_zero` (no optimizer state is
built for the trunk), and the training step hands back the trunk's parameters and batch
statistics as it got them, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax
from flax import struct

from azjax import replay
from azjax.network import trunk_labels, with_trunk
from azjax.replay import Batch


@struct.dataclass
class TrainState:
    variables: Any  # {'params': ..., 'batch_stats': ...}
    opt_state: Any
    step: jax.Array  # int32[], optimizer steps taken


class Losses(NamedTuple):
    total: jax.Array
    value: jax.Array  # the value term unweighted (`value_weight` scales it in `total`)
    policy: jax.Array
    l2: jax.Array
    ownership: jax.Array  # the weighted ownership term; 0 without it
    soft_policy: jax.Array  # the weighted soft policy term; 0 without it
    opponent_policy: jax.Array  # the weighted opponent policy term; 0 without it


LR_SCHEDULES = ("constant", "cosine", "warmup_cosine")  # `lr_fraction`'s
WARMUP = 0.05  # warmup_cosine: the share of the run over which the rate rises from 0


def lr_fraction(schedule: str, progress: float) -> float:
    """The learning rate as a fraction of its peak under `schedule` ('constant', 'cosine' or
    'warmup_cosine') at `progress` through the run (0 its start, 1 its end; clipped to [0, 1]):
    cosine decays from 1 to 0, warmup_cosine first rises linearly over `WARMUP` of the run."""
    p = min(max(float(progress), 0.0), 1.0)
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * p))
    if schedule == "warmup_cosine":
        if p < WARMUP:
            return p / WARMUP
        return 0.5 * (1.0 + math.cos(math.pi * (p - WARMUP) / (1.0 - WARMUP)))
    raise ValueError(f"unknown lr_schedule {schedule!r}")


def run_progress(
    iteration: int, iterations: float, elapsed_seconds: float = 0.0, time_budget: float = 0.0
) -> float:
    """How far a run is at the middle of its `iteration`-th (1-based) of `iterations` (math.inf:
    no limit), or `elapsed_seconds` into a `time_budget` of minutes (0: none), whichever is
    further: the schedule ends with whichever limit stops the run."""
    progress = (iteration - 0.5) / max(iterations, 1)
    if time_budget:
        progress = max(progress, elapsed_seconds / (60.0 * time_budget))
    return min(max(progress, 0.0), 1.0)


def make_optimizer(config) -> optax.GradientTransformation:
    """SGD with momentum or Adam at `config.learning_rate` (the peak: the loop scales each
    iteration's updates by `lr_fraction`, see `make_train_step`); with `config.freeze_trunk` for
    the heads only (the trunk's updates are zero, its state empty)."""
    lr = config.learning_rate
    if config.lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"unknown lr_schedule {config.lr_schedule!r}")
    schedule = optax.constant_schedule(lr)  # a schedule keeps checkpoints' optimizer state
    if config.optimizer == "sgd":
        optimizer = optax.sgd(schedule, momentum=config.momentum)
    elif config.optimizer == "adam":
        optimizer = optax.adam(schedule)
    else:
        raise ValueError(f"unknown optimizer {config.optimizer!r}")
    if config.freeze_trunk:
        return optax.multi_transform(
            {"heads": optimizer, "trunk": optax.set_to_zero()}, trunk_labels
        )
    return optimizer


def init_train_state(variables, optimizer) -> TrainState:
    return TrainState(
        variables=variables, opt_state=optimizer.init(variables["params"]), step=jnp.int32(0)
    )


def soft_policy_target(policy: jax.Array, temperature: float) -> jax.Array:
    """policy float32[..., A] raised to 1/temperature and normalised: KataGo's soft policy
    target. A move the search gave nothing still gets nothing, and an all-zero row (a fast
    search's, no target) stays all zero."""
    soft = policy ** (1.0 / temperature)
    return soft / jnp.maximum(jnp.sum(soft, axis=-1, keepdims=True), 1e-12)


def wdl_target(value: jax.Array) -> jax.Array:
    """float32[...] values in [-1, 1] -> float32[..., 3]: the win, draw and loss probabilities
    (max(v, 0), 1 - |v|, max(-v, 0)), the distribution on the three outcomes with the most draw
    whose expectation P(win) - P(loss) is v."""
    v = jnp.clip(value, -1.0, 1.0)
    return jnp.stack([jnp.maximum(v, 0.0), 1.0 - jnp.abs(v), jnp.maximum(-v, 0.0)], axis=-1)


def _value_loss(value: jax.Array, wdl_logits: jax.Array | None, target: jax.Array) -> jax.Array:
    """float32[]: the value term over a batch: the squared error of the value [N], or with a
    win/draw/loss head the cross-entropy of its logits [N, 3] against `wdl_target`."""
    if wdl_logits is not None:
        return jnp.mean(optax.softmax_cross_entropy(wdl_logits, wdl_target(target)))
    return jnp.mean((target - value) ** 2)


def _policy_loss(logits: jax.Array, policy: jax.Array) -> jax.Array:
    """float32[]: the policy cross-entropy averaged over the positions with a policy target (an
    all-zero target, a fast search's, adds nothing and is not counted)."""
    has_target = jnp.sum(policy, axis=-1) > 0
    ce = optax.softmax_cross_entropy(logits, policy)
    return jnp.sum(ce) / jnp.maximum(jnp.sum(has_target), 1)


def inference_losses(net, variables, batch: Batch) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(value, policy, policy_rows): the value and policy terms of the loss (`make_train_step`'s,
    unweighted) of the network `variables` in inference mode (batch norms from their statistics)
    on `batch`; the policy term over the positions with a policy target, `policy_rows` int32[]
    of them (none, only fast searches' positions: the term is 0 and means nothing). The
    learner's `Losses.value` and `.policy` are the same terms in training mode on the batches it
    steps on; the loop reads these on positions the learner has never drawn
    (`azjax.play_stats.HeldOut`).
    """
    wdl = net.value_head == "wdl"
    logits, value, *extra = net.apply(variables, batch.obs, train=False, with_value_logits=wdl)
    rows = jnp.sum(jnp.sum(batch.policy, axis=-1) > 0, dtype=jnp.int32)
    value_loss = _value_loss(value, extra[0] if wdl else None, batch.value)
    return value_loss, _policy_loss(logits, batch.policy), rows


def _ownership_loss(target: jax.Array, predicted: jax.Array) -> jax.Array:
    """float32[]: the mean squared error over the cells whose owner is known (`target`
    float32[N, H*W]; a resigned game's positions are `replay.UNKNOWN_OWNER` throughout and add
    nothing), the mean of every cell's where all are known."""
    known = target > replay.UNKNOWN_OWNER / 2
    scale = known.size / jnp.maximum(jnp.sum(known), 1)
    return jnp.mean(jnp.where(known, (target - predicted) ** 2, 0.0)) * scale


def make_train_step(
    net,
    optimizer,
    weight_decay: float,
    *,
    partial_policy: bool = False,
    value_weight: float = 1.0,
    ownership_weight: float = 0.0,
    soft_policy_weight: float = 0.0,
    soft_policy_temperature: float = 4.0,
    opponent_policy_weight: float = 0.0,
):
    """train_step(state, batch, lr_scale=1.0) -> (state, Losses); pure, meant for jax.jit.
    The optimizer's updates are multiplied by `lr_scale` (a float32 scalar: the learning
    rate's fraction of its peak, `lr_fraction`; for SGD and Adam the same as scaling the
    rate, since both apply it last). With
    `net.freeze_trunk` the trunk's parameters and batch statistics come back unchanged. With
    `partial_policy` (playout cap randomisation) some positions have no policy target (an
    all-zero one): the policy loss is the mean over the positions that have one. The value term
    counts `value_weight` times (Losses.value is the term unweighted). With
    `ownership_weight` > 0 (a network with `ownership_head`, batches with `ownership`) the loss
    adds the weighted ownership term, and with `soft_policy_weight` > 0 (a network with
    `soft_policy_head`) the weighted soft policy term at `soft_policy_temperature`, and with
    `opponent_policy_weight` > 0 (a network with `opponent_policy_head`, batches with
    `opponent_policy`) the weighted opponent policy term; a network with `value_head="wdl"` learns
    its value by cross-entropy (module doc)."""
    owned = ownership_weight > 0
    wdl = net.value_head == "wdl"
    softened = soft_policy_weight > 0
    replied = opponent_policy_weight > 0
    if owned and not net.ownership_head:
        raise ValueError("ownership_weight > 0 needs a network with ownership_head")
    if softened and not net.soft_policy_head:
        raise ValueError("soft_policy_weight > 0 needs a network with soft_policy_head")
    if softened and soft_policy_temperature < 1:
        raise ValueError(f"soft_policy_temperature must be >= 1, got {soft_policy_temperature}")
    if replied and not net.opponent_policy_head:
        raise ValueError("opponent_policy_weight > 0 needs a network with opponent_policy_head")

    def loss_fn(params, batch_stats, batch: Batch):
        outputs, updates = net.apply(
            {"params": params, "batch_stats": batch_stats},
            batch.obs,
            train=True,
            with_ownership=owned,
            with_soft_policy=softened,
            with_opponent_policy=replied,
            with_value_logits=wdl,
            mutable=["batch_stats"],
        )
        logits, value, *extra = outputs
        ownership_loss = soft_loss = opponent_loss = jnp.float32(0.0)
        if owned:
            ownership_loss = ownership_weight * _ownership_loss(batch.ownership, extra.pop(0))
        # a position without a policy target (all zero) adds nothing; average over the rest
        policy_scale = 1.0
        if partial_policy:
            has_target = jnp.sum(batch.policy, axis=-1) > 0
            policy_scale = has_target.shape[0] / jnp.maximum(jnp.sum(has_target), 1)
        if softened:
            soft = soft_policy_target(batch.policy, soft_policy_temperature)
            soft_ce = optax.softmax_cross_entropy(extra.pop(0), soft)
            soft_loss = soft_policy_weight * jnp.mean(soft_ce) * policy_scale
        if replied:  # averaged over the positions with a reply that has a policy target
            has_reply = jnp.sum(batch.opponent_policy, axis=-1) > 0
            reply_ce = optax.softmax_cross_entropy(extra.pop(0), batch.opponent_policy)
            replies = jnp.maximum(jnp.sum(has_reply), 1)
            opponent_loss = opponent_policy_weight * jnp.sum(reply_ce * has_reply) / replies
        value_loss = _value_loss(value, extra.pop(0) if wdl else None, batch.value)
        policy_loss = jnp.mean(optax.softmax_cross_entropy(logits, batch.policy)) * policy_scale
        l2 = weight_decay * sum(jnp.sum(p**2) for p in jax.tree_util.tree_leaves(params))
        total = (
            value_weight * value_loss
            + policy_loss
            + l2
            + ownership_loss
            + soft_loss
            + opponent_loss
        )
        losses = Losses(
            total, value_loss, policy_loss, l2, ownership_loss, soft_loss, opponent_loss
        )
        return total, (losses, updates["batch_stats"])

    def train_step(state: TrainState, batch: Batch, lr_scale=1.0):
        n = batch.obs.shape[0]
        chex.assert_rank(batch.obs, 4)  # [N, H, W, C]
        chex.assert_shape(batch.policy, (n, net.num_actions))
        chex.assert_shape(batch.value, (n,))
        chex.assert_type([batch.policy, batch.value], float)
        if owned:
            chex.assert_shape(batch.ownership, (n, batch.obs.shape[1] * batch.obs.shape[2]))
        if replied:
            chex.assert_shape(batch.opponent_policy, (n, net.num_actions))
        params = state.variables["params"]
        grads, (losses, batch_stats) = jax.grad(loss_fn, has_aux=True)(
            params, state.variables["batch_stats"], batch
        )
        updates, opt_state = optimizer.update(grads, state.opt_state, params)
        updates = jax.tree_util.tree_map(lambda u: u * jnp.asarray(lr_scale, u.dtype), updates)
        new_params = optax.apply_updates(params, updates)
        if net.freeze_trunk:  # x + 0 turns -0.0 into 0.0: hand the trunk back as it came
            new_params = with_trunk(new_params, params)
            batch_stats = with_trunk(batch_stats, state.variables["batch_stats"])
        params = new_params
        new = TrainState(
            variables={"params": params, "batch_stats": batch_stats},
            opt_state=opt_state,
            step=state.step + 1,
        )
        return new, losses

    return train_step


class Learner(NamedTuple):
    """`train_steps` optimizer steps on replay samples, in `calls` jitted calls.

    `chunk(state, buffer, keys[steps_per_call], lr_scale=1.0) -> (state, losses)` takes one step
    per key (each with its updates scaled by `lr_scale`, see `make_train_step`) and
    returns its losses summed and divided by `train_steps` (so the calls' results add up to the
    mean); it is meant to be jitted with `state` donated. `split(key)` gives the keys of each
    call: `jax.random.split(key, train_steps)`, as one `lax.scan` over all steps would use them,
    cut into consecutive slices (a tuple of arrays, made on the device). `learn` (below) calls
    `chunk` once per slice. `steps_per_call` is the measured rule: on XLA:CPU a training step
    nested in a rolled loop or a conditional runs about 13x slower than the same step at the top
    level (docs/benchmarks.md, "Learner"), so there each call is one step with no control flow
    around it; on accelerators one call scans over every step.
    """

    chunk: Callable
    split: Callable  # (key) -> tuple of `train_steps // steps_per_call` key arrays, jitted
    train_steps: int
    steps_per_call: int


_MAX_TRACED_STEPS = 8  # more steps per call are scanned over, fewer traced one by one


def steps_per_call(train_steps: int, backend: str | None = None) -> int:
    """Optimizer steps per jitted learner call: 1 on the CPU, all of them elsewhere."""
    backend = backend or jax.default_backend()
    return 1 if backend == "cpu" else max(train_steps, 1)


def make_learner(
    train_step: Callable, sample: Callable, train_steps: int, *, per_call: int | None = None
) -> Learner:
    """The learner of `train_step` over batches `sample(buffer, key)`; see `Learner`.

    `per_call` defaults to `steps_per_call(train_steps)` and must divide `train_steps`.
    """
    per_call = steps_per_call(train_steps) if per_call is None else per_call
    if per_call < 1 or train_steps % per_call:
        raise ValueError(f"steps per call {per_call} must divide train_steps {train_steps}")

    def chunk(state, buffer, keys, lr_scale=1.0):
        def body(s, k):
            return train_step(s, sample(buffer, k), lr_scale)

        if per_call <= _MAX_TRACED_STEPS:  # traced one after another: no loop around the steps
            steps = []
            for i in range(per_call):
                state, losses = body(state, keys[i])
                steps.append(losses)
            losses = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *steps)
        else:  # even `lax.scan(unroll=True)` keeps a one-trip while loop around its body
            state, losses = jax.lax.scan(body, state, keys)
        return state, jax.tree_util.tree_map(lambda x: jnp.sum(x) / train_steps, losses)

    @jax.jit
    def split(key):
        return tuple(jnp.split(jax.random.split(key, train_steps), train_steps // per_call))

    return Learner(chunk=chunk, split=split, train_steps=train_steps, steps_per_call=per_call)


def learn(
    learner: Learner,
    chunk: Callable,
    state,
    buffer,
    key,
    *,
    lr_scale=None,
    settle: Callable = lambda tree: tree,
):
    """(state, mean Losses) after `learner.train_steps` steps, calling `chunk` (`learner.chunk`
    jitted by the caller, with its shardings and donation) once per slice of keys, with
    `lr_scale` when one is given (a device scalar). Nothing is copied to or from the host: the
    losses stay on the device. Each call's results go through `settle` before the next call
    (`azjax.parallel.settle`: on several CPU devices the host waits for them, so that one
    program with collectives runs at a time)."""
    return run_calls(chunk, state, buffer, learner.split(key), lr_scale=lr_scale, settle=settle)


def run_calls(
    chunk: Callable,
    state,
    buffer,
    slices: Iterable,
    *,
    lr_scale=None,
    settle: Callable = lambda tree: tree,
):
    """(state, the calls' losses summed) after one `chunk` call per key slice of `slices`, as
    `learn` makes them; for a learner whose number of calls is not its static `train_steps`
    (Expert Iteration's epochs, azjax/exit.py, whose length follows the dataset)."""
    total = None
    scale = () if lr_scale is None else (lr_scale,)
    for keys in slices:
        state, losses = settle(chunk(state, buffer, keys, *scale))
        total = losses if total is None else jax.tree_util.tree_map(jnp.add, total, losses)
    return state, total
