"""The training loop: `train_and_evaluate(config, workdir)`.

Each iteration is one jitted self-play chunk (`selfplay_steps` moves of `batch_games` games), its
positions added to the device replay buffer, then `train_steps` optimizer steps on uniform
samples, or ones weighted by policy surprise (`policy_surprise`, `azjax.replay`), once the buffer
holds `min_replay` positions with a known outcome (`azjax.training.make_learner`). Python only
drives the loop: progress, metrics (`azjax.metrics`), evaluation every `eval_interval` iterations
and checkpoints (`azjax.checkpoint`) every `checkpoint_interval`.

Evaluation (`azjax.loop_eval`) plays, batched: the current network against the network of the
previous evaluation (both epsilon-greedy, epsilon = `eval_epsilon`) and against pure MCTS with
random rollouts at twice the simulations (seed 000's PUCT baseline). Score = (wins + draws / 2) /
games. With `eval_opening_plies` = n both matches start their game pairs from positions after n
random plies, each position once with each colour (`loop_eval.paired_openings`). Where the
package has an Elo ladder for the game (`azjax.ladder`, `eval_ladder`), the network is also
placed on it: `eval/elo` and `eval/elo_ci95`, on a scale that keeps its meaning across runs;
where it has solved positions for the game (`azjax.solved`, `eval_errors`), the network's exact
error rate on them: `eval/error_rate` and `eval/error_ci95`, which no opponent's strength caps.
The caller may add an evaluation of its own (`extra_evaluation`: train.py plays
`--eval_opponent`, any agent spec, with the evaluation wing, `azjax.eval.TrainingOpponent`); its
values join the iteration's metrics. Evaluation is held to `eval_budget` of the session's wall
time (`loop_eval.evaluation_affordable`): one that falls due when, with it (as long as the last
less its compiling, its ladder placement as long as the rungs it will play took:
`loop_eval.next_evaluation_seconds`), the evaluations would take more (their compiling left out:
it is paid once, and not at all where the compilation cache holds it) is put off to the next
interval (`eval_postponed`), all but the exact error rate, which takes seconds and is measured
at every interval. A session that ends between intervals (its time budget or `iterations`, past
the first interval) evaluates its last iteration too (`eval_final`).

Before the first iteration the run's memory is checked against the device's (`azjax.memory`);
after each, its losses and parameters (`azjax.health`: a diverging run stops unsaved). What
self-play played is counted on the device (`azjax.play_stats`) and logged as selfplay/...; the
learner's value and policy losses on the positions the chunk settled, which it has never drawn,
on those the chunk before settled and on all it could draw (`HeldOut`, `make_heldout`), as
heldout/....

Gating (`--gating`, `azjax.gating`): self-play is played by the best network kept in the run
state; every `gating_interval` iterations the learner's network plays it (`gating_games` games)
and replaces it when it scores above the threshold (metrics gate/score, gate/accepted,
gate/accepted_total, gate/best_iteration).

Shared learning (`--games`, `azjax.shared`): one network over several games; the iteration is
`shared.make_iteration`'s, which runs each game's own `make_iteration` on that game's view of the
network (self-play of every game, then each game's learner in a random order). Losses, gate,
evaluation, self-play and held-out metrics are also logged per game (loss/<game>/total,
gate/<game>/score, eval/<game>/mcts_score, selfplay/<game>/draws, heldout/<game>/value, ...),
and loss/total is the games' mean; the first player's wins and the draws are per game only.

Devices: the iteration runs on a mesh over every device (`azjax.parallel`; one device is the
one-device mesh): games, trajectories, the replay buffer and training batches are split along B,
the network and optimizer state are replicated. `make_iteration` builds the jitted pieces of an
iteration: `play` (self-play chunk + replay add, donating the games and the buffer), the
learner's `chunk` (donating the train state) and `advance` (iteration += 1); none copies anything
to the host. The loop fetches the iteration's few scalars once after self-play (whether the
buffer is ready decides on the host whether to train) and the losses once after learning. In a
multi-host run every process runs this loop on its share; only process 0 writes metrics,
TensorBoard events, config and summary, and all processes take part in orbax's checkpoint saves.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from azjax import gating, parallel, replay, symmetry, training
from azjax.checkpoint import (
    Checkpointer,
    CheckpointError,
    RunState,
    WorkdirLock,
    best_checkpoint,
    changed_settings,
    check_resumable,
    check_workdir,
    init_run,
    measure_trends,
    missing_step_hint,
    read_config,
    steps_on_disk,
)
from azjax.config import Config, validate
from azjax.health import Health, divergence, reference_loss
from azjax.interrupt import Interrupted, StopSignals, exiting_at_once, run_interruptibly
from azjax.loop_eval import Evaluations, last_matches, last_ratings, make_evaluation
from azjax.memory import check_memory
from azjax.metrics import Metrics, MoveTicker, Progress, run_seconds
from azjax.network import make_apply, make_network, num_parameters
from azjax.play_stats import (
    VARIETY_PLIES,
    HeldOut,
    PlayStats,
    PlaySummary,
    play_stats,
    summarise,
)
from azjax.search import SearchSpec
from azjax.selfplay import RESIGN_WRONG_LIMIT, check_resignations, init_states, make_selfplay
from azjax.training import Losses


def config_selfplay(
    config: Config,
    game,
    apply: Callable,
    steps: int,
    mesh: Mesh | None = None,
    *,
    on_move: Callable | None = None,
) -> Callable:
    """`make_selfplay` as `config` plays it (its search with root noise, sampled plies, openings,
    branches, policy target, playout caps, ownership, policy surprise, resignation and tree
    reuse), `steps` moves a call with the network's `apply`: the training loop's self-play, and
    `benchmarks.network_share`'s."""
    return make_selfplay(
        game,
        SearchSpec.from_config(config, explore=True),
        apply,
        steps,
        config.sample_moves,
        mesh,
        opening_plies=config.opening_plies,
        branch_prob=config.branch_prob,
        policy_target=config.policy_target,
        full_search_prob=config.full_search_prob,
        fast_simulations=config.fast_simulations,
        ownership=config.ownership_weight > 0,
        surprise=config.policy_surprise > 0,
        resign_threshold=config.resign_threshold,
        resign_playout=config.resign_playout,
        tree_reuse=config.tree_reuse,
        on_move=on_move,
    )


class Playing(NamedTuple):
    """What self-play carries from one iteration to the next (`Iteration.play`'s states); a
    session starts it afresh (`init_playing`)."""

    games: Any  # the B games in play, each a game state (leading axis B)
    # bool[B, 2]: in the game of each played-out slot, the players whose root value has fallen
    # below the resignation threshold (`azjax.selfplay.check_resignations`; False without it)
    resign_low: jax.Array


def init_playing(game, batch_games: int) -> Playing:
    """B start positions, no player yet below the resignation threshold."""
    return Playing(init_states(game, batch_games), jnp.zeros((batch_games, 2), bool))


class Iteration(NamedTuple):
    """The jitted pieces of a run on one mesh. None of them copies anything to the host."""

    init_run: Callable  # () -> RunState, replicated
    init_states: Callable  # () -> `Playing`: B start states, split along B
    init_buffer: Callable  # () -> an empty replay.Buffer, split along B
    play: Callable  # (run, states, buffer) -> (states, buffer, PlayStats); donates states, buffer
    learn: Callable  # (run, buffer, lr_scale=1.0) -> (TrainState, mean Losses); donates run.train
    advance: Callable  # (iteration) -> iteration + 1
    eval_key: Callable  # (run) -> the evaluation key of the iteration `run` has completed
    copy: Callable  # (tree) -> a copy that survives the donation of the original
    min_replay: int  # positions with a known outcome before the learner runs


def _iteration_keys(run: RunState, iteration) -> jax.Array:
    """[4] keys (play, train, eval, held-out sample) of `iteration`, folded from the run's base
    key (the first three as when there were three: JAX's partitionable split)."""
    return jax.random.split(jax.random.fold_in(run.key, iteration), 4)


def make_sampler(
    batch_size: int,
    mesh: Mesh | None = None,
    *,
    augment: symmetry.Symmetries | None = None,
    surprise_fraction: float = 0.0,
    opponent_frames=None,
    columns: np.ndarray | None = None,
) -> Callable:
    """sample(buffer, key) -> a training Batch; with `mesh` the buffer is split along B over its
    devices and the batch along its N positions (see `replay.sample`, which `surprise_fraction`
    and `opponent_frames` are passed to). With `augment` each position goes through one of those
    symmetries at random (`azjax.symmetry`). With `columns` (bool[B], the buffer's game slots)
    it draws from the positions of the slots marked True alone (Expert Iteration's training and
    validation sets, `azjax.exit.validation_columns`)."""

    def sample(buffer, key, axis_name=None):
        among = None
        if columns is not None:
            mine = jnp.asarray(columns)
            if axis_name is not None:  # this device's block of B / D columns
                width = buffer.ready.shape[1]
                start = jax.lax.axis_index(axis_name) * width
                mine = jax.lax.dynamic_slice_in_dim(mine, start, width)
            among = jnp.broadcast_to(mine, buffer.ready.shape)
        return replay.sample(
            buffer,
            key,
            batch_size,
            axis_name,
            surprise_fraction=surprise_fraction,
            opponent_frames=opponent_frames,
            among=among,
        )

    if mesh is not None:
        sample = jax.shard_map(
            functools.partial(sample, axis_name=parallel.AXIS),
            mesh=mesh,
            in_specs=(replay.partition_specs(parallel.AXIS), P()),
            out_specs=P(parallel.AXIS),
        )
    if augment is None:
        return sample

    def augmented(buffer, key):
        k_sample, k_sym = jax.random.split(key)
        return symmetry.augment(augment, k_sym, sample(buffer, k_sample))

    return augmented


# each iteration's held-out losses are measured on this many positions drawn from those the
# chunk settled, as many from those the chunk before settled and as many from the others: a
# squared error's mean to about +-0.02 (its SD over positions about 0.5), for three inference
# passes (about 1.5% of a CPU recipe's iteration)
HELDOUT_POSITIONS = 1024


def make_heldout(net, batch_size: int, mesh: Mesh | None = None, *, chunk_steps: int) -> Callable:
    """heldout(variables, buffer, key) -> `HeldOut`: the network's inference losses on
    `batch_size` positions drawn among those the last self-play chunk (`chunk_steps` moves)
    settled, as many among those the chunk before settled and as many among the buffer's other
    settled positions (the seen ones); with `mesh` the buffer split along B as the learner's
    sampler takes it."""

    def draw(buffer, key, among, axis_name=None):
        return replay.sample(buffer, key, batch_size, axis_name, among=among)

    if mesh is not None:
        draw = jax.shard_map(
            functools.partial(draw, axis_name=parallel.AXIS),
            mesh=mesh,
            in_specs=(replay.partition_specs(parallel.AXIS), P(), P(None, parallel.AXIS)),
            out_specs=P(parallel.AXIS),
        )

    def heldout(variables, buffer, key):
        k_fresh, k_seen, k_prev = jax.random.split(key, 3)
        last = buffer.step - chunk_steps  # the last chunk's first step
        fresh = replay.settled_between(buffer, last, buffer.step)
        prev = replay.settled_between(buffer, last - chunk_steps, last)
        seen = buffer.ready & ~fresh

        def losses(k, among):
            return training.inference_losses(net, variables, draw(buffer, k, among))

        value, policy, rows = losses(k_fresh, fresh)
        seen_value, seen_policy, seen_rows = losses(k_seen, seen)
        prev_value, prev_policy, prev_rows = losses(k_prev, prev)
        return HeldOut(
            positions=jnp.sum(fresh, dtype=jnp.int32),
            seen_positions=jnp.sum(seen, dtype=jnp.int32),
            value=value,
            policy=policy,
            seen_value=seen_value,
            seen_policy=seen_policy,
            prev_positions=jnp.sum(prev, dtype=jnp.int32),
            prev_value=prev_value,
            prev_policy=prev_policy,
            policy_rows=rows,
            seen_policy_rows=seen_rows,
            prev_policy_rows=prev_rows,
        )

    return heldout


def _then_stats(play: Callable, stats: Callable, mesh: Mesh) -> Callable:
    """Iteration.play: the self-play program, then its statistics in a program of their own,
    started once self-play has ended on every device (`parallel.settle`; the two jitted programs
    are its attributes `play` and `stats`)."""

    def play_then_count(run, states, buffer):
        states, buffer, summary = parallel.settle(play(run, states, buffer), mesh)
        return states, buffer, stats(summary, buffer, run)

    play_then_count.play, play_then_count.stats = play, stats
    return play_then_count


def make_iteration(
    config: Config,
    mesh: Mesh,
    *,
    steps_per_call: int | None = None,
    on_move: Callable | None = None,
) -> Iteration:
    """The jitted self-play, replay and training of `config` on `mesh` (see the module doc).

    `batch_games` and `train_batch_size` are global: each must divide over the mesh's devices.
    `steps_per_call` overrides the learner's rule (`training.steps_per_call`); `on_move(t)` hears
    of each self-play move (`azjax.selfplay.make_selfplay`).
    """
    parallel.check_divisible(
        mesh, batch_games=config.batch_games, train_batch_size=config.train_batch_size
    )
    game = config.make_game()
    net = make_network(config, game)
    steps = config.selfplay_steps or game.max_game_length
    optimizer = training.make_optimizer(config)
    rows = math.ceil(config.replay_games * game.max_game_length / config.batch_games)

    rep = parallel.replicated(mesh)
    games_sh = parallel.sharding(mesh, P(parallel.AXIS))
    buffer_sh = parallel.shardings(mesh, replay.partition_specs(parallel.AXIS))
    summary_sh = parallel.shardings(
        mesh,
        PlaySummary(P(parallel.AXIS), *[P(None, parallel.AXIS)] * 3, *[P(parallel.AXIS)] * 3),
    )

    selfplay = config_selfplay(config, game, make_apply(net), steps, mesh, on_move=on_move)

    def play(run, states: Playing, buffer):
        k_play = _iteration_keys(run, run.iteration + 1)[0]
        games, traj = selfplay(gating.selfplay_variables(run), k_play, states.games)
        buffer = replay.add(
            buffer, traj, value_mix=config.value_target_mix, value_lambda=config.value_lambda
        )
        if not config.resign_threshold:
            return Playing(games, states.resign_low), buffer, summarise(traj)
        low, checked, wrong = check_resignations(
            states.resign_low,
            traj,
            config.resign_threshold,
            config.resign_playout,
        )
        return Playing(games, low), buffer, summarise(traj, checked, wrong)

    devices = parallel.num_devices(mesh)  # each draws its share of the sample
    heldout = make_heldout(
        net, math.ceil(HELDOUT_POSITIONS / devices) * devices, mesh, chunk_steps=steps
    )

    def stats(summary, buffer, run):
        key = _iteration_keys(run, run.iteration + 1)[3]
        measured = heldout(run.train.variables, buffer, key)
        return play_stats(summary, buffer, measured)

    learner = training.make_learner(
        training.make_train_step(
            net,
            optimizer,
            config.weight_decay,
            partial_policy=config.full_search_prob < 1,
            value_weight=config.value_weight,
            ownership_weight=config.ownership_weight,
            soft_policy_weight=config.soft_policy_weight,
            soft_policy_temperature=config.soft_policy_temperature,
            opponent_policy_weight=config.opponent_policy_weight,
        ),
        make_sampler(
            config.train_batch_size,
            mesh,
            augment=symmetry.symmetries(game) if config.augment else None,
            surprise_fraction=config.policy_surprise,
            opponent_frames=game.opponent_frames if config.opponent_policy_weight > 0 else None,
        ),
        max(config.train_steps, 1),
        per_call=steps_per_call,
    )

    chunk = jax.jit(
        learner.chunk,
        in_shardings=(rep, buffer_sh, rep, rep),
        out_shardings=(rep, rep),
        donate_argnums=0,
    )
    train_key = jax.jit(lambda run: _iteration_keys(run, run.iteration + 1)[1], out_shardings=rep)

    def learn(run, buffer, lr_scale=1.0):
        """(TrainState, mean Losses) after the iteration's steps, their updates scaled by
        `lr_scale` (the learning rate's fraction of its peak, `training.lr_fraction`)."""
        scale = parallel.put_scalar(lr_scale, mesh)
        return training.learn(
            learner,
            chunk,
            run.train,
            buffer,
            train_key(run),
            lr_scale=scale,
            settle=functools.partial(parallel.settle, mesh=mesh),
        )

    return Iteration(
        init_run=jax.jit(lambda: init_run(config), out_shardings=rep),
        init_states=jax.jit(
            functools.partial(init_playing, game, config.batch_games), out_shardings=games_sh
        ),
        init_buffer=jax.jit(
            functools.partial(
                replay.init,
                rows,
                config.batch_games,
                game.observation_shape,
                game.num_actions,
                ownership=config.ownership_weight > 0,
                surprise=config.policy_surprise > 0,
                opponent=config.opponent_policy_weight > 0,
            ),
            out_shardings=buffer_sh,
        ),
        play=_then_stats(
            jax.jit(
                play,
                in_shardings=(rep, games_sh, buffer_sh),
                out_shardings=(games_sh, buffer_sh, summary_sh),
                donate_argnums=(1, 2),
            ),
            jax.jit(stats, out_shardings=rep),
            mesh,
        ),
        learn=learn,
        advance=jax.jit(lambda iteration: iteration + 1, out_shardings=rep),
        eval_key=jax.jit(lambda run: _iteration_keys(run, run.iteration)[2], out_shardings=rep),
        copy=jax.jit(lambda tree: jax.tree_util.tree_map(jnp.copy, tree), out_shardings=rep),
        min_replay=config.min_replay or config.train_batch_size,
    )


def _open_run(
    config: Config,
    workdir: str,
    fns: Iteration,
    checkpointer: Checkpointer,
    resume: bool,
    resume_step: int | None,
) -> RunState:
    """The run to continue: the latest checkpoint (or `resume_step`) with `resume`, else a new
    one (refused where checkpoints already exist), with `init_from`'s network where the config names
    one. Resuming an earlier step sets the later checkpoints aside (`Checkpointer.set_aside`)."""
    run = fns.init_run()
    if resume:
        if checkpointer.latest() is None:
            raise CheckpointError(f"--resume: no checkpoint in {workdir!r} to resume from")
        if resume_step is not None and resume_step not in checkpointer.steps():
            raise CheckpointError(
                f"--resume_step={resume_step}: no such checkpoint in "
                f"{workdir!r}; have {checkpointer.steps()}{missing_step_hint(workdir, resume_step)}"
            )
        saved = read_config(workdir, resume_step)
        check_resumable(saved, config)
        run, step = checkpointer.restore(
            gating.restore_template(run, bool(saved.gating)), resume_step
        )
        run = gating.adapt(run, bool(config.gating), fns.copy)
        changed = changed_settings(saved, config)
        if changed and parallel.is_primary():
            print(
                f"resuming with settings changed since checkpoint {step}: " + ", ".join(changed),
                file=sys.stderr,
            )
        folder = checkpointer.set_aside(after=step) if parallel.is_primary() else None
        if jax.process_count() > 1:  # every process's manager must stop listing the moved steps,
            from jax.experimental import multihost_utils  # or it would skip saving them again

            multihost_utils.sync_global_devices("checkpoints set aside")
            checkpointer.manager.reload()
        if folder is not None:
            print(
                f"resuming from checkpoint {step}: the later checkpoints were moved to {folder}",
                file=sys.stderr,
            )
    elif checkpointer.latest() is not None:
        raise CheckpointError(
            f"{workdir!r} already holds checkpoints {checkpointer.steps()}; pass --resume to "
            "continue that run or choose another --workdir"
        )
    elif config.init_from:  # a new run from another run's network (azjax/transfer.py)
        from azjax import transfer

        variables, note = transfer.transferred_variables(config, run.train.variables)
        run = run.replace(train=run.train.replace(variables=variables))
        if run.gate is not None:  # self-play's best starts as the transferred network too
            run = run.replace(gate=run.gate.replace(best=fns.copy(variables)))
        if parallel.is_primary():
            print(note, file=sys.stderr)
    return run


def replay_template(init_buffer: Callable) -> Any:
    """The abstract replay buffer (shapes, dtypes, shardings) `init_buffer` makes, traced
    without allocating it: `jax.eval_shape` of the jitted maker, or a dict of them where the
    maker says its `parts` (a shared run's buffer per game, azjax/shared.py)."""
    parts = getattr(init_buffer, "parts", None)
    if parts is not None:
        return {name: replay_template(part) for name, part in parts.items()}
    return jax.eval_shape(init_buffer)


def _open_replay(fns: Iteration, checkpointer: Checkpointer, step: int) -> Any:
    """The replay buffer saved with checkpoint `step`, placed as `fns.init_buffer()` places an
    empty one, its games in flight dropped (the resumed run starts its games afresh:
    `replay.restart_games`); None, with a line on stderr saying why, where the checkpoint has
    none that fits (the run then starts with an empty replay, as before checkpoints kept it)."""
    try:
        template = replay_template(fns.init_buffer)
    except Exception as e:  # never fail a resume for the replay's sake
        buffer, why = None, f"its shapes cannot be traced ({type(e).__name__}: {e})"
    else:
        buffer, why = checkpointer.restore_replay(template, step)
        if buffer is None:  # saved with the other --policy_surprise? (not structural)
            buffer = _with_other_surprise(checkpointer, template, step)
    if buffer is None:
        if parallel.is_primary():
            print(f"the replay buffer starts empty: {why}", file=sys.stderr)
        return None
    restart = jax.jit(
        lambda tree: jax.tree_util.tree_map(
            replay.restart_games, tree, is_leaf=lambda x: isinstance(x, replay.Buffer)
        ),
        out_shardings=jax.tree_util.tree_map(lambda a: a.sharding, buffer),
        donate_argnums=0,
    )
    return restart(buffer)


def _played(fns: Iteration, run: RunState, states, buffer):
    """`fns.play` and the iteration's one host copy of what it played, before learning."""
    states, buffer, played = fns.play(run, states, buffer)
    return states, buffer, parallel.fetch(played)


def _learnt(fns: Iteration, run: RunState, buffer, lr_scale: float):
    """`fns.learn` and a host copy of its losses."""
    train, losses = fns.learn(run, buffer, lr_scale)
    return train, parallel.fetch(losses)


def waited(fn: Callable[[], Any]) -> Any:
    """fn() in a worker thread, waited for here (`interrupt.run_interruptibly`): a signal's
    handler runs at once, each its own call. Where a stop at once ends the process by os._exit
    (azjax.cli) the wait ends with the signal; else (a Python caller) the call finishes first."""
    return run_interruptibly(fn, finish=not exiting_at_once())


def _with_other_surprise(checkpointer: Checkpointer, template: Any, step: int) -> Any:
    """Checkpoint `step`'s buffer where it differs from `template` only by keeping policy
    surprises where the run now keeps none or the other way round (`--policy_surprise` turned off
    or on at a resume), made to fit: its surprises dropped, or zeros for the positions it saved
    (they count as unsurprising, weight 1 - f, until the window turns over); else None."""

    def is_buffer(x):
        return isinstance(x, replay.Buffer)

    def toggled(b):
        v = b.value
        other = jax.ShapeDtypeStruct(v.shape, jnp.float32, sharding=v.sharding)
        return b.replace(surprise=None if b.surprise is not None else other)

    saved, _ = checkpointer.restore_replay(
        jax.tree_util.tree_map(toggled, template, is_leaf=is_buffer), step
    )
    if saved is None:
        return None

    def fit(b, want):
        return b.replace(surprise=None if want.surprise is None else jnp.zeros_like(b.value))

    buffers = jax.tree_util.tree_leaves(template, is_leaf=is_buffer)
    if parallel.is_primary():
        said = (
            "on: the replay buffer is restored, its positions counted as unsurprising until the "
            "window turns over"
            if buffers[0].surprise is not None
            else "off: the replay buffer is restored"
        )
        print(f"note: policy surprise weighting turned {said}", file=sys.stderr)
    shardings = jax.tree_util.tree_map(lambda a: a.sharding, template)
    return jax.jit(
        lambda tree: jax.tree_util.tree_map(fit, tree, template, is_leaf=is_buffer),
        out_shardings=shardings,
        donate_argnums=0,
    )(saved)


def _previous_network(
    config: Config, fns: Iteration, checkpointer: Checkpointer, step: int, it: int, current
):
    """The network a run resumed at iteration `it` plays its next "vs previous" match against:
    that of its last evaluation with matches (`step`, from its checkpoint; 0: the run's first
    network), where it can be had; else `current` (the resumed one), with a note saying so."""
    if step == it:
        return current
    if step == 0 and not config.init_from:  # none played yet: the first network, from the seed
        return fns.copy(fns.init_run().train.variables)
    what = f"checkpoint {step} is gone" if step else "it started from --init_from's network"
    if step in checkpointer.steps():
        template = gating.restore_template(fns.init_run(), bool(config.gating))
        try:
            return fns.copy(checkpointer.restore(template, step)[0].train.variables)
        except CheckpointError:  # the run itself resumes from a later one: train on
            what = f"checkpoint {step} cannot be read"
    if parallel.is_primary():
        print(
            f"note: the next match against the previous evaluation's network plays checkpoint "
            f"{it}, the one resumed ({what})",
            file=sys.stderr,
        )
    return current


def _losses(losses: Losses | dict[str, Losses]) -> dict[str, float]:
    """loss/total, loss/value, ...; for a shared run ({game: Losses}) their means over the
    games, and each game's as loss/<game>/total, ..."""
    if hasattr(losses, "metrics"):  # Expert Iteration's early-stopped training's report
        return losses.metrics()
    if not isinstance(losses, dict):
        return {f"loss/{k}": float(v) for k, v in losses._asdict().items()}
    out = {}
    for name, game_losses in losses.items():
        out.update({f"loss/{name}/{k}": float(v) for k, v in game_losses._asdict().items()})
    for k in Losses._fields:
        out[f"loss/{k}"] = float(np.mean([float(getattr(v, k)) for v in losses.values()]))
    return out


def _earlier_seconds(metrics: Metrics | None, workdir: str, iteration: int) -> float:
    """The seconds a resumed run trained before this session, up to the checkpoint it resumes
    (`metrics.run_seconds` of its last row, or the run_seconds of summary.json where the session
    that wrote it ended at that checkpoint: the row is written before the iteration's checkpoint
    and evaluation, so a session stopped by its time budget can end past the budget with a last
    row under it); 0 for a new run. The same on every process."""
    rows = metrics.rows if metrics is not None else []
    seconds = run_seconds(rows)[-1] if rows else 0.0
    if rows:
        try:
            with open(os.path.join(workdir, "summary.json")) as f:
                summary = json.load(f)
            if summary.get("iterations") == iteration:
                seconds = max(seconds, float(summary.get("run_seconds", 0.0)))
        except (OSError, ValueError, TypeError, AttributeError):
            pass  # no summary (a killed session) or an unreadable one: the rows' clock
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        seconds = float(multihost_utils.broadcast_one_to_all(np.float64(seconds)))
    return seconds


def _leaf_values(config: Config) -> str:
    """How the search values its leaves where it is not the network alone, for the start line:
    the rollouts blended in (the thesis's question) and the uniform evaluator."""
    said = []
    if config.evaluator == "uniform":
        said.append("no network at the leaves: uniform priors, value 0")
    if config.rollout_policy != "none" and config.rollout_prob > 0:
        sampled = "sampled " if config.rollout_policy == "policy" and config.rollout_sample else ""
        said.append(
            f"{sampled}{config.rollout_policy} rollouts from {config.rollout_prob:g} of the "
            f"leaves, blended at lambda={config.rollout_weight:g}"
        )
    return "".join(f", {s}" for s in said)


def start_line(config: Config, workdir: str, devices: int, backend: str, *, resume: bool) -> str:
    """The line a session starts with: what it trains, where, for how long, on what; on a CPU
    with a GPU-sized batch (512 games or more an iteration), a second naming the CPU recipe; for
    Expert Iteration whose prior weight is over twice the simulations a root move gets, one
    saying that the apprentice's prior then picks the expert's moves; where the in-loop
    evaluation would place the network on a ladder or measure its exact error rate and the game
    has no table or solved positions, one saying it skips them."""
    from azjax.shared import game_configs  # azjax/shared.py imports this module

    if config.games:
        what = f"{'+'.join(game_configs(config))} (one shared network)"
    else:
        options = " ".join(f"{k}={v}" for k, v in config.game_options.items())
        what = f"{config.game} {options}".strip()  # as the closing message names it
    ends = []
    if config.iterations:
        count = f"{config.iterations} iteration{'s' * (config.iterations != 1)}"
        ends += [f"to iteration {config.iterations}" if resume else count]
    if config.time_budget:
        ends += [f"{config.time_budget:g} minute{'s' * (config.time_budget != 1)}"]
    if config.algorithm == "exit":  # its expert searches by UCT, whatever config.search says
        played = (
            f"Expert Iteration, {config.batch_games} apprentice games an iteration, the expert "
            f"at {config.num_simulations} simulations (UCT, c={config.exit_c_uct:g}, the "
            f"apprentice's prior at w_a={config.exit_prior_weight:g}{_leaf_values(config)})"
        )
    else:
        played = (
            f"{config.batch_games} games in lock-step at {config.num_simulations} simulations "
            f"({config.search}{_leaf_values(config)})"
        )
    line = (
        f"{'continuing' if resume else 'training'} {what} in {workdir}: {' or '.join(ends)}, "
        f"{played}, on {devices} {backend} device{'s' * (devices != 1)}"
    )
    if backend == "cpu" and config.batch_games >= 512:
        from azjax.config import load, named_defaults

        cpu = load(config.game, named_defaults("cpu", config.game)[1])
        line += (
            f"\nnote: {config.batch_games} games in lock-step is a GPU's size; on a CPU "
            f"--config=cpu ({cpu.batch_games} games at {cpu.num_simulations} simulations, a "
            f"{cpu.num_blocks}x{cpu.num_filters} network) learns faster per minute "
            '(docs/strength.md, "Time to strength on the CPU")'
        )
    if config.eval_interval:
        from azjax.ladder import table_path
        from azjax.solved import set_path

        for each in game_configs(config).values():
            game = each.make_game()
            lacks = []
            if each.eval_ladder and not os.path.exists(table_path(game)):
                lacks.append("no ladder table (eval/elo; `evaluate.py ladder` rates one)")
            if each.eval_errors and not os.path.exists(set_path(game)):
                lacks.append("no solved positions (eval/error_rate)")
            if lacks:
                line += (
                    f"\nnote: {game.name} {dict(game.rules)} has {' and '.join(lacks)}: the "
                    "in-loop evaluation skips them"
                )
    moves = config.make_game().num_actions
    per_move = config.num_simulations / moves
    if config.algorithm == "exit" and config.exit_prior_weight > 2 * per_move:
        line += (
            f"\nnote: --exit_prior_weight={config.exit_prior_weight:g} is over twice the "
            f"{per_move:.3g} simulations a move gets ({config.num_simulations} / {moves}): the "
            "apprentice's prior picks the expert's moves (the paper's 100 is for 10,000 "
            f"simulations on 81 moves); about {per_move:.2g} lets the search disagree with it"
        )
    return line


def _announce_clock(config: Config, iteration: int, earlier: float) -> None:
    """On resuming: how long the run has trained, against its time budget."""
    note = f"resuming at iteration {iteration} after {earlier / 60:.1f} minutes of training"
    if config.time_budget:
        note += f" of its time_budget of {config.time_budget:g}"
    print(note, file=sys.stderr)


# ---- the loop ------------------------------------------------------------------------------------
def train_and_evaluate(
    config: Config,
    workdir: str,
    resume: bool = False,
    progress: bool = True,
    on_iteration: Callable[[int, dict[str, Any]], None] | None = None,
    *,
    resume_step: int | None = None,
    extra_evaluation: Callable[[Any, jax.Array], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Train `config` in `workdir` until `iterations` or `time_budget`; returns a summary dict.

    Runs on every device (`jax.devices()`). `on_iteration(iteration, metrics)` is called on
    process 0 after each iteration with the row metrics.jsonl gets once that iteration's
    checkpoint is on disk (e.g. to redraw a plot in a notebook; the file lags behind it up to a
    checkpoint interval). `resume_step` resumes
    from that checkpoint instead of the latest (and implies `resume`). `extra_evaluation(variables,
    key) -> {"eval/...": value}` runs after the loop's own evaluation, every `eval_interval`
    iterations, on the current network's variables; its values join that iteration's metrics
    (and its `eval_seconds`). `config.eval_opponent` needs one (train.py builds it).

    Reliability (docs/reliability.md): the workdir is locked for the run; SIGINT and SIGTERM
    finish the iteration, save a checkpoint and raise `Interrupted` (a KeyboardInterrupt); a
    diverging run raises `DivergenceError` without saving; metrics rows are written once their
    checkpoint is on disk. Bad settings and unusable workdirs raise ValueError (CheckpointError)
    before any work starts.
    """
    t_start = time.time()
    if not isinstance(config, Config):
        raise TypeError(
            f"config must be an azjax.config.Config (azjax.config.load(game, overrides)), got "
            f"{type(config).__name__}"
        )
    # a Config made by dataclasses.replace or by hand was never checked: a bad value crashed
    # deep in the run (num_simulations=-1 a ZeroDivisionError) or trained on (learning_rate=nan)
    config = validate(config)
    if config.eval_opponent and extra_evaluation is None:
        raise ValueError(
            f"eval_opponent={config.eval_opponent!r} is played by train.py: pass "
            "extra_evaluation=azjax.eval.TrainingOpponent(config) to train_and_evaluate"
        )
    primary = parallel.is_primary()
    resume = resume or resume_step is not None
    if config.init_from and not resume:  # a resumed run keeps the source its config records
        from azjax import transfer

        config = transfer.resolve(config)  # a bad source: refused before the workdir is made
    if resume and not os.path.isdir(workdir):  # made by nothing
        raise CheckpointError(
            f"--resume: no run folder {workdir!r}; leave --resume out to start one"
        )
    if primary:
        check_workdir(workdir)
    else:
        os.makedirs(workdir, exist_ok=True)
    with WorkdirLock(workdir) if primary else contextlib.nullcontext():
        return _train(
            config,
            workdir,
            resume,
            resume_step,
            progress,
            on_iteration,
            t_start,
            extra_evaluation,
        )


def _train(
    config: Config,
    workdir: str,
    resume: bool,
    resume_step: int | None,
    progress: bool,
    on_iteration: Callable | None,
    t_start: float,
    extra_evaluation: Callable | None = None,
) -> dict[str, Any]:
    primary = parallel.is_primary()
    game = config.make_game()
    mesh = parallel.make_mesh()
    devices = parallel.num_devices(mesh)
    steps = config.selfplay_steps or game.max_game_length
    moves = MoveTicker(steps) if progress and primary else None  # the bar's moves within it
    if config.algorithm == "exit":  # Expert Iteration; azjax/exit.py imports this module
        from azjax import exit as expert_iteration

        fns = expert_iteration.make_iteration(config, mesh)
    elif config.games:  # one network over several games; azjax/shared.py imports this module
        from azjax import shared

        fns = shared.make_iteration(config, mesh)
        configs = shared.game_configs(config).values()
        moves = None  # positions below: every game's
        steps = sum(c.selfplay_steps or c.make_game().max_game_length for c in configs)
    else:
        fns = make_iteration(config, mesh, on_move=moves)
    check_memory(config, fns, devices)

    checkpointer = Checkpointer(
        workdir, config.keep_checkpoints, protect=functools.partial(_best_steps, workdir, config)
    )
    metrics = bar = None
    it = 0
    evaluations = None
    try:
        run = _open_run(config, workdir, fns, checkpointer, resume, resume_step)
        it = int(parallel.fetch(run.iteration))
        # every process reads them: orbax's restore waits for all of a run's processes
        saved_rows = checkpointer.saved_rows(it) if resume else None
        if primary:
            _write_text(os.path.join(workdir, "config.json"), config.to_json())
            metrics = Metrics(workdir, it if resume else None, saved_rows)
            metrics.text("config", config.to_json())  # the run's settings, on TensorBoard too
        health = Health(run.train.variables, reference_loss(metrics))
        # the run's clock: its earlier sessions' time counts, so that a resumed run keeps its
        # time budget and its rate schedule where the checkpoint left them
        t_run = t_start - _earlier_seconds(metrics, workdir, it)
        if primary:
            line = start_line(config, workdir, devices, jax.default_backend(), resume=resume)
            print(line, file=sys.stderr)
            if resume:
                _announce_clock(config, it, t_start - t_run)
        limit = config.iterations or math.inf  # 0: no limit, the time budget ends the run
        evaluate = None
        if config.eval_interval:  # a resumed run's placement starts at its last rating
            evaluate = make_evaluation(config, mesh, ratings=last_ratings(config, metrics))
        evaluations = Evaluations(config, evaluate, limit=limit, extra=extra_evaluation)
        gate = gating.make_gate(config) if config.gating else None
        buffer = _open_replay(fns, checkpointer, it) if resume else None
        buffer = fns.init_buffer() if buffer is None else buffer
        states = fns.init_states()
        previous = fns.copy(run.train.variables)  # `learn` donates the run's own buffers
        if resume and evaluate is not None:  # the network of the run's last matches, as before
            previous = _previous_network(
                config, fns, checkpointer, last_matches(metrics, it), it, previous
            )

        def compile_next_evaluation(session_ends: bool) -> None:  # where one falls due in it
            if not (stop.requested or session_ends):  # else the stop would wait for it
                evaluations.compile_ahead(it, previous, fns.eval_key(run))

        first = it + 1  # the session's first iteration compiles the loop's own programs
        bar = Progress(progress and primary, it, config.iterations or None)
        if moves is not None:
            moves.progress = bar
        session = dict(games=0, positions=0)
        # resignations checked in the session's played-out games, and whether it has warned
        resigns, resigns_warned = dict(checked=0, wrong=0), False
        t_loop = time.time()
        last: dict[str, Any] = {}
        stop_reason = "iterations"
        # whether the time budget is spent, as the last iteration judged it where it chose to
        # evaluate as the session's last or not (None before the session's first iteration)
        spent: bool | None = None
        evaluating = False  # an in-loop evaluation under way: a first signal waits for it too
        with StopSignals(
            lambda: (
                f"finishing iteration {it}"
                + (" and its evaluation, under way" if evaluating else "")
                + ", then saving a checkpoint"
            )
        ) as stop:
            while it < limit:
                stop.check()  # a second signal whose handler's stop was lost (`check`)
                stop_reason = _should_stop(config, t_run, stop, spent=spent)
                if stop_reason:
                    break
                it += 1
                t0 = time.time()
                # in a worker thread (the first iteration compiles in it): here each signal's
                # handler runs at once (its note, a second one's stop), not after the call
                states, buffer, played = waited(
                    functools.partial(_played, fns, run, states, buffer)
                )
                stop.check()
                t1 = time.time()
                values = _play_values(
                    played,
                    # the positions searched: ExIt's expert-labelled ones, over all its rounds
                    int(getattr(played, "positions", steps * config.batch_games)),
                    t1 - t0,
                    devices,
                    resigning=config.resign_threshold > 0,
                )
                if hasattr(played, "metrics"):  # ExIt's own (azjax/exit.py)
                    values.update(played.metrics())
                train = run.train
                if config.train_steps and played.ready >= fns.min_replay:
                    progress = training.run_progress(it, limit, t1 - t_run, config.time_budget)
                    lr_scale = training.lr_fraction(config.lr_schedule, progress)
                    train, losses = waited(functools.partial(_learnt, fns, run, buffer, lr_scale))
                    stop.check()
                    values.update(_losses(losses))
                    values["train_seconds"] = time.time() - t1
                    values["train/learning_rate"] = config.learning_rate * lr_scale
                run = run.replace(train=train, iteration=fns.advance(run.iteration))
                if not checkpointer.committed():  # an earlier iteration's save, on disk before
                    with stop.shield():  # this one is done: a kill loses one interval at most
                        _finish_saves(checkpointer, metrics)
                loss_problem = health.losses(values)
                problem = loss_problem or health.parameters(run.train.variables)
                if problem:  # the losses judge the parameters before the iteration's updates
                    _finish_saves(checkpointer, metrics)
                    raise divergence(
                        it,
                        problem,
                        checkpointer,
                        workdir,
                        healthy_upto=it - 2 if loss_problem else it - 1,
                    )
                session["games"] += values["games"]
                session["positions"] += values["positions"]
                if "selfplay/resign_checked" in values:
                    resigns["checked"] += values["selfplay/resign_checked"]
                    resigns["wrong"] += values["selfplay/resign_wrong"]
                    warning = resign_warning(**resigns)
                    if warning and not resigns_warned and primary:
                        print(warning, file=sys.stderr)
                    resigns_warned = resigns_warned or bool(warning)

                if gate is not None and it % config.gating_interval == 0:
                    t_gate = time.time()
                    run, gate_values = gate(run, it)
                    values.update(gate_values, gate_seconds=time.time() - t_gate)
                values.update(gating.gate_values(run))

                # judged once (on several hosts a collective): due, final and the stop agree
                spent = _budget_spent(config, t_run)
                ends = functools.partial(_session_ends, config, it, spent)
                if evaluations.due(it, ends):
                    evaluating = True
                    evaluated, full = evaluations.run(
                        run.train.variables,
                        previous,
                        fns.eval_key(run),
                        time.time() - t_loop,
                        final=ends(),
                    )
                    evaluating = False
                    values.update(evaluated)
                    if full:
                        previous = fns.copy(run.train.variables)
                        compile_next_evaluation(ends())  # the ladder's next rungs, if new
                if it == first:  # not alongside them: both lower on Python's one lock
                    compile_next_evaluation(ends())
                values["run_seconds"] = round(time.time() - t_run, 1)  # every session's
                if primary:
                    metrics.add(it, values)
                    if on_iteration is not None:
                        on_iteration(it, values)
                if metrics is not None and checkpointer.committed():
                    metrics.commit(upto=checkpointer.last_saved)  # that checkpoint is on disk
                if it % config.checkpoint_interval == 0:
                    with stop.shield():
                        _finish_saves(checkpointer, metrics)  # one save at a time
                        checkpointer.save(it, run, config, metrics and metrics.held(), buffer)
                last = values
                bar.update(values)
            stop_reason = stop_reason or "iterations"
            if stop_reason == "time_budget" and it < first and primary:  # not one iteration
                print(
                    f"its time_budget of {config.time_budget:g} minutes is spent: a larger "
                    "--time_budget trains on",
                    file=sys.stderr,
                )
            with stop.shield():
                if it not in checkpointer.steps():
                    _finish_saves(checkpointer, metrics)
                    checkpointer.save(it, run, config, metrics and metrics.held(), buffer)
                _finish_saves(checkpointer, metrics)
    except Interrupted as e:  # a second signal: stop at once, keep what is on disk
        _abandon(bar, checkpointer, metrics)
        # a compilation in flight ends before the process may, unless the process ends at once
        # without the interpreter's shutdown (azjax.cli's os._exit)
        if evaluations is not None and not (e.at_once and exiting_at_once()):
            evaluations.close()
        if e.message:
            raise
        saved = steps_on_disk(workdir)
        kept = (
            f"checkpoint {saved[-1]} (the last saved) is intact; continue with --resume"
            if saved
            else "no checkpoint was saved"
        )
        raise Interrupted(e.signum, f"stopped at once; {kept}", at_once=e.at_once) from None
    except BaseException:
        _abandon(bar, checkpointer, metrics)
        if evaluations is not None:
            evaluations.close()  # a compilation in flight ends before the process may
        raise
    bar.close()
    try:  # the summary first: a compilation in flight is not what a stop should wait for
        summary = _summary(
            config, it, stop_reason, session, metrics, t_start, run, devices, workdir, last
        )
        summary["eval_seconds"] = round(evaluations.seconds, 1)  # this session's evaluation
        summary["eval_compile_seconds"] = round(evaluations.seconds - evaluations.budgeted, 1)
        if metrics is not None:  # every session's evaluations
            summary["trends"] = _trends(config, metrics.rows)
            summary["eval_postponed"] = sum(int(r.get("eval_postponed", 0)) for r in metrics.rows)
        summary["run_seconds"] = round(time.time() - t_run, 1)  # every session's
        _close(checkpointer, metrics)
        if primary:
            summary["best"] = _best(workdir, config)
            _write_text(os.path.join(workdir, "summary.json"), json.dumps(summary, indent=2))
    finally:
        evaluations.close()
    if stop.signum is not None:
        raise Interrupted(stop.signum, f"checkpoint {it} saved; continue with --resume")
    return summary


def _trends(config: Config, rows: list[dict]) -> dict:
    """The summary's `trends` (`checkpoint.measure_trends`); a shared run's per game,
    {game: {metric: ...}}."""
    if not config.games:
        return measure_trends(rows)
    from azjax import shared

    return {name: measure_trends(rows, name) for name in shared.game_configs(config)}


def _best(workdir: str, config: Config) -> dict | None:
    """The summary's `best`: the saved checkpoint its in-loop evaluations scored highest
    (`checkpoint.best_checkpoint`: step, metric, value), None where none was evaluated; a shared
    run's per game, {game: that or None}."""
    if config.games:
        from azjax import shared

        return {name: _best_of(workdir, name) for name in shared.game_configs(config)}
    return _best_of(workdir)


def _best_steps(workdir: str, config: Config) -> set[int]:
    """The steps `@best` names now (a shared run's, one a game): --keep_checkpoints keeps them
    however old."""
    best = _best(workdir, config)
    return {b["step"] for b in (best.values() if config.games else [best]) if b is not None}


def _best_of(workdir: str, game: str | None = None) -> dict | None:
    try:
        return best_checkpoint(workdir, game=game)._asdict()
    except CheckpointError:
        return None


# resignations checked in the played-out games before their wrong share is judged
RESIGN_WARN_AFTER = 100


def resign_warning(checked: int, wrong: int) -> str | None:
    """The line a resigning run prints (once a session) when more than RESIGN_WRONG_LIMIT of the
    resignations checked in its played-out games so far were wrong (after RESIGN_WARN_AFTER)."""
    if checked < RESIGN_WARN_AFTER or wrong <= RESIGN_WRONG_LIMIT * checked:
        return None
    return (
        f"warning: {wrong} of the {checked} resignations checked in played-out games were wrong "
        f"({wrong / checked:.1%}), above AlphaZero's {RESIGN_WRONG_LIMIT:.0%}: raise "
        f"--resign_threshold (python -m experiments.decided RUN, in a checkout, measures each "
        "threshold's share)"
    )


def _play_values(
    played: PlayStats, positions: int, seconds: float, devices: int, *, resigning: bool = False
) -> dict[str, Any]:
    """The iteration's counts and speed, and what its self-play played (`_game_play_values`):
    in a shared run the games' combined, and each game's as selfplay/<game>/...,
    replay/<game>/..., heldout/<game>/... (as loss/<game>/... and eval/<game>/... are)."""
    values: dict[str, Any] = dict(
        games=int(played.games),
        positions=positions,
        replay_ready=int(played.ready),
        selfplay_seconds=seconds,
        games_per_second=int(played.games) / seconds,
        positions_per_second=positions / seconds,
        positions_per_second_per_device=positions / seconds / devices,
    )
    values.update(_game_play_values(played, resigning))
    for name, game in (getattr(played, "by_game", None) or {}).items():
        for key, value in _game_play_values(game, resigning).items():
            group, _, rest = key.partition("/")
            values[f"{group}/{name}/{rest}"] = value
    return values


def _game_play_values(played: PlayStats, resigning: bool) -> dict[str, Any]:
    """selfplay/..., replay/policy_surprise and heldout/... of `played`."""
    values: dict[str, Any] = {}
    for k, distinct, reached in zip(VARIETY_PLIES, played.distinct, played.reached):
        values[f"selfplay/distinct_ply{k}"] = int(distinct)
        values[f"selfplay/positions_ply{k}"] = int(reached)
    if played.surprise is not None:
        values["replay/policy_surprise"] = float(played.surprise)
    if played.outcomes is not None and int(played.games) > 0:
        first_wins, draws, _ = (int(n) for n in played.outcomes)
        values["selfplay/first_player_wins"] = first_wins / int(played.games)
        values["selfplay/draws"] = draws / int(played.games)
    if resigning and played.resigned is not None:
        if int(played.games) > 0:
            values["selfplay/resigned"] = int(played.resigned) / int(played.games)
        values["selfplay/resign_checked"] = int(played.resign_checked)
        values["selfplay/resign_wrong"] = int(played.resign_wrong)
    held = played.heldout
    if held is not None:
        values["heldout/positions"] = int(held.positions)
        values["heldout/prev_positions"] = int(held.prev_positions)
        for name, positions, rows in (  # a sample of none, or none with a policy target (only
            ("", held.positions, held.policy_rows),  # fast searches'), means nothing
            ("seen_", held.seen_positions, held.seen_policy_rows),
            ("prev_", held.prev_positions, held.prev_policy_rows),
        ):
            if int(positions) > 0:
                values[f"heldout/{name}value"] = float(getattr(held, f"{name}value"))
                if int(rows) > 0:
                    values[f"heldout/{name}policy"] = float(getattr(held, f"{name}policy"))
    return values


def _finish_saves(checkpointer: Checkpointer, metrics: Metrics | None) -> None:
    """Wait for the save in flight, then write the rows it holds."""
    checkpointer.wait()
    if metrics is not None:
        metrics.commit(upto=checkpointer.last_saved)


def _abandon(bar: Progress | None, checkpointer: Checkpointer, metrics: Metrics | None) -> None:
    """After an error or a second signal: keep the rows of a checkpoint that made it to disk,
    drop the rest, and close everything (without hanging on a failed save)."""
    if bar is not None:
        bar.close()
    with contextlib.suppress(Exception):
        _finish_saves(checkpointer, metrics)
    _close(checkpointer, metrics)


def _close(checkpointer: Checkpointer, metrics: Metrics | None) -> None:
    if metrics is not None:
        metrics.close()  # rows that no checkpoint holds are dropped
    checkpointer.close()


def _summary(
    config: Config,
    it: int,
    stop_reason: str,
    session: dict,
    metrics: Metrics | None,
    t_start: float,
    run: RunState,
    devices: int,
    workdir: str,
    last: dict,
) -> dict:
    """The run's summary: games and positions of all its sessions (from metrics.jsonl on process
    0), this session's too."""
    total = {k: metrics.total(k) if metrics is not None else v for k, v in session.items()}
    return dict(
        game=config.game,
        game_options=dict(config.game_options),
        shared_games=config.games,  # a shared run's list of games (azjax/shared.py), else ""
        algorithm=config.algorithm,
        iterations=it,
        stopped_by=stop_reason,
        games=total["games"],
        positions=total["positions"],
        session_games=session["games"],
        session_positions=session["positions"],
        wall_seconds=round(time.time() - t_start, 1),
        parameters=num_parameters(run.train.variables),
        devices=devices,
        processes=jax.process_count(),
        workdir=os.path.abspath(workdir),
        last=last,
    )


def _write_text(path: str, text: str) -> None:
    """Write a whole file at once (a temporary file, then renamed over the old one)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _session_ends(config: Config, it: int, spent: bool) -> bool:
    """Whether iteration `it`, past the run's first evaluation interval, is the session's last by
    --iterations or its time budget (`spent`: `_budget_spent`'s verdict, which the loop then
    stops on, so that the last iteration is the one evaluated; `eval_final`); a signal's stop
    does not wait for one."""
    if it < config.eval_interval:
        return False
    return it == config.iterations or spent


def _budget_spent(config: Config, t_run: float) -> bool:
    """Whether the time budget (counted from `t_run`, the run's start with its earlier sessions'
    time) is spent; in a multi-host run process 0's clock decides."""
    if not config.time_budget:
        return False
    out = time.time() - t_run > 60 * config.time_budget
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        out = bool(multihost_utils.broadcast_one_to_all(np.bool_(out)))
    return out


def _should_stop(
    config: Config, t_run: float, stop: StopSignals, *, spent: bool | None = None
) -> str:
    """'' to go on, else why to stop: 'time_budget' (`spent`, the verdict the last iteration
    acted on; None: `_budget_spent` now) or the signal's name. A signal to any process of a
    multi-host run stops all."""
    out = _budget_spent(config, t_run) if spent is None else spent
    signalled = stop.requested
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        flags = multihost_utils.process_allgather(np.bool_(signalled))
        signalled = bool(np.any(flags))
        if signalled and stop.signum is None:
            stop.signum = signal.SIGTERM  # another process was signalled
    if out:
        return "time_budget"
    return signal.Signals(stop.signum).name if signalled else ""
