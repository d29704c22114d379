"""The training loop: `train_and_evaluate(config, workdir)`.

Each iteration is one jitted self-play chunk (`selfplay_steps` moves of `batch_games` games), its
positions added to the device replay buffer, then `train_steps` optimizer steps on uniform
samples (`azjax.training.make_learner`) once the buffer holds `min_replay` positions with a known
outcome. Python only drives the loop: progress, metrics (`azjax.metrics`), evaluation every
`eval_interval` iterations and checkpoints (`azjax.checkpoint`) every `checkpoint_interval`.

Evaluation plays, batched: the current network against the network of the previous evaluation
(both epsilon-greedy, epsilon = `eval_epsilon`) and against pure MCTS with random rollouts at twice
the simulations. Score = (wins + draws / 2) / games.

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

import functools
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from azjax import parallel, replay, symmetry, training
from azjax.arena import MatchResult, make_match, make_search_agent
from azjax.checkpoint import (
    Checkpointer,
    CheckpointError,
    RunState,
    check_resumable,
    init_run,
    read_config,
)
from azjax.config import Config
from azjax.metrics import Metrics, Progress
from azjax.network import make_apply, make_network, num_parameters
from azjax.search import SearchSpec
from azjax.selfplay import init_states, make_selfplay
from azjax.training import Losses


class NonFiniteLossError(RuntimeError):
    pass


VARIETY_PLIES = (2, 4)  # self-play variety is logged at these plies


class PlayStats(NamedTuple):
    games: jax.Array  # int32[], games finished in the chunk
    ready: jax.Array  # int32[], positions in the buffer with a known outcome
    distinct: jax.Array  # int32[len(VARIETY_PLIES)], distinct positions at each ply in the chunk
    reached: jax.Array  # int32[len(VARIETY_PLIES)], positions at each ply in the chunk


def count_distinct(obs: jax.Array, mask: jax.Array) -> jax.Array:
    """int32[]: distinct observations among obs[N, ...] where mask[N], by a 32-bit hash of
    their 0/1 planes (a collision among n positions has probability about n^2 / 2^33)."""
    bits = obs.reshape(obs.shape[0], -1).astype(jnp.uint32)
    weights = jax.random.bits(jax.random.PRNGKey(0), bits.shape[1:], jnp.uint32) | 1
    hashes = jnp.sum(bits * weights, axis=1, dtype=jnp.uint32)
    hashes = jnp.sort(jnp.where(mask, hashes, jnp.uint32(0xFFFFFFFF)))
    masked_out = jnp.sort(~mask)  # the masked-out entries last, as in the sorted hashes
    new = jnp.concatenate([jnp.ones(1, bool), hashes[1:] != hashes[:-1]])
    return jnp.sum(new & ~masked_out, dtype=jnp.int32)


def _variety(traj) -> tuple[jax.Array, jax.Array]:
    obs = traj.obs.reshape((-1,) + traj.obs.shape[2:])
    ply = traj.ply.reshape(-1)
    distinct = jnp.stack([count_distinct(obs, ply == k) for k in VARIETY_PLIES])
    reached = jnp.stack([jnp.sum(ply == k, dtype=jnp.int32) for k in VARIETY_PLIES])
    return distinct, reached


class Iteration(NamedTuple):
    """The jitted pieces of a run on one mesh. None of them copies anything to the host."""

    init_run: Callable  # () -> RunState, replicated
    init_states: Callable  # () -> B start states, split along B
    init_buffer: Callable  # () -> an empty replay.Buffer, split along B
    play: Callable  # (run, states, buffer) -> (states, buffer, PlayStats); donates states, buffer
    learn: Callable  # (run, buffer) -> (TrainState, mean Losses); donates run.train
    advance: Callable  # (iteration) -> iteration + 1
    eval_key: Callable  # (run) -> the evaluation key of the iteration `run` has completed
    copy: Callable  # (tree) -> a copy that survives the donation of the original
    min_replay: int  # positions with a known outcome before the learner runs


def _iteration_keys(run: RunState, iteration) -> jax.Array:
    """[3] keys (play, train, eval) of `iteration`, folded from the run's base key."""
    return jax.random.split(jax.random.fold_in(run.key, iteration), 3)


def make_sampler(batch_size: int, mesh: Mesh | None = None, *,
                 augment: symmetry.Symmetries | None = None) -> Callable:
    """sample(buffer, key) -> a training Batch; with `mesh` the buffer is split along B over its
    devices and the batch along its N positions (see `replay.sample`). With `augment` each
    position goes through one of those symmetries at random (`azjax.symmetry`)."""
    sample = functools.partial(replay.sample, batch_size=batch_size)
    if mesh is not None:
        sample = jax.shard_map(
            functools.partial(sample, axis_name=parallel.AXIS), mesh=mesh,
            in_specs=(replay.partition_specs(parallel.AXIS), P()), out_specs=P(parallel.AXIS),
        )
    if augment is None:
        return sample

    def augmented(buffer, key):
        k_sample, k_sym = jax.random.split(key)
        return symmetry.augment(augment, k_sym, sample(buffer, k_sample))

    return augmented


def make_iteration(config: Config, mesh: Mesh, *, steps_per_call: int | None = None) -> Iteration:
    """The jitted self-play, replay and training of `config` on `mesh` (see the module doc).

    `batch_games` and `train_batch_size` are global: each must divide over the mesh's devices.
    `steps_per_call` overrides the learner's rule (`training.steps_per_call`).
    """
    parallel.check_divisible(mesh, batch_games=config.batch_games,
                             train_batch_size=config.train_batch_size)
    game = config.make_game()
    net = make_network(config, game)
    steps = config.selfplay_steps or game.max_game_length
    optimizer = training.make_optimizer(config, config.iterations * config.train_steps)
    rows = math.ceil(config.replay_games * game.max_game_length / config.batch_games)

    rep = parallel.replicated(mesh)
    games_sh = parallel.sharding(mesh, P(parallel.AXIS))
    buffer_sh = parallel.shardings(mesh, replay.partition_specs(parallel.AXIS))

    selfplay = make_selfplay(game, SearchSpec.from_config(config, explore=True), make_apply(net),
                             steps, config.sample_moves, mesh,
                             opening_plies=config.opening_plies)

    def play(run, states, buffer):
        k_play = _iteration_keys(run, run.iteration + 1)[0]
        states, traj = selfplay(run.train.variables, k_play, states)
        buffer = replay.add(buffer, traj)
        return states, buffer, PlayStats(jnp.sum(traj.done, dtype=jnp.int32),
                                         replay.num_ready(buffer), *_variety(traj))

    learner = training.make_learner(
        training.make_train_step(net, optimizer, config.weight_decay),
        make_sampler(config.train_batch_size, mesh,
                     augment=symmetry.symmetries(game) if config.augment else None),
        max(config.train_steps, 1),
        per_call=steps_per_call)

    chunk = jax.jit(learner.chunk, in_shardings=(rep, buffer_sh, rep), out_shardings=(rep, rep),
                    donate_argnums=0)
    train_key = jax.jit(lambda run: _iteration_keys(run, run.iteration + 1)[1], out_shardings=rep)

    def learn(run, buffer):
        return training.learn(learner, chunk, run.train, buffer, train_key(run))

    return Iteration(
        init_run=jax.jit(lambda: init_run(config), out_shardings=rep),
        init_states=jax.jit(functools.partial(init_states, game, config.batch_games),
                            out_shardings=games_sh),
        init_buffer=jax.jit(functools.partial(replay.init, rows, config.batch_games,
                                              game.observation_shape, game.num_actions),
                            out_shardings=buffer_sh),
        play=jax.jit(play, in_shardings=(rep, games_sh, buffer_sh),
                     out_shardings=(games_sh, buffer_sh, rep), donate_argnums=(1, 2)),
        learn=learn,
        advance=jax.jit(lambda iteration: iteration + 1, out_shardings=rep),
        eval_key=jax.jit(lambda run: _iteration_keys(run, run.iteration)[2], out_shardings=rep),
        copy=jax.jit(lambda tree: jax.tree_util.tree_map(jnp.copy, tree), out_shardings=rep),
        min_replay=config.min_replay or config.train_batch_size,
    )


def _open_run(config: Config, workdir: str, fns: Iteration, checkpointer: Checkpointer,
              resume: bool) -> RunState:
    """The run to continue: the latest checkpoint with `resume`, else a new one (refused where
    checkpoints already exist)."""
    run = fns.init_run()
    if resume:
        if checkpointer.latest() is None:
            raise CheckpointError(f"--resume: no checkpoint in {workdir!r} to resume from")
        check_resumable(read_config(workdir), config)
        run, _ = checkpointer.restore(run)
    elif checkpointer.latest() is not None:
        raise CheckpointError(
            f"{workdir!r} already holds checkpoints {checkpointer.steps()}; pass --resume to "
            "continue that run or choose another --workdir"
        )
    return run


def make_evaluation(config: Config) -> Callable:
    """evaluate(variables, previous, key) -> {"eval/...": ...}: the in-loop matches (module doc)."""
    game = config.make_game()
    apply = make_apply(make_network(config, game))
    spec = SearchSpec.from_config(config)
    agent = make_search_agent(game, spec, apply)
    agent_eps = make_search_agent(game, spec, apply, epsilon=config.eval_epsilon)
    mcts = make_search_agent(game, SearchSpec.pure_mcts(2 * config.num_simulations), None)
    vs_previous = make_match(game, agent_eps, agent_eps, config.eval_games)
    vs_mcts = make_match(game, agent, mcts, config.eval_games)

    def evaluate(variables, previous, key) -> dict[str, Any]:
        k_prev, k_mcts = jax.random.split(key)
        out = {}
        for name, match, opponent, k in (
            ("previous", vs_previous, previous, k_prev),
            ("mcts", vs_mcts, None, k_mcts),
        ):
            res = MatchResult.from_returns(*parallel.fetch(match(variables, opponent, k)))
            out[f"eval/{name}_score"] = res.score
            out[f"eval/{name}_wdl"] = [res.wins, res.draws, res.losses]
        return out

    return evaluate


def _losses(it: int, losses: Losses, workdir: str) -> dict[str, float]:
    """The losses as metrics; NonFiniteLossError when one is not finite."""
    values = {f"loss/{k}": float(v) for k, v in losses._asdict().items()}
    if not all(math.isfinite(v) for v in values.values()):
        raise NonFiniteLossError(
            f"iteration {it}: non-finite loss {values}; the last checkpoint in "
            f"{workdir} is intact (try a lower learning_rate)"
        )
    return values


def train_and_evaluate(config: Config, workdir: str, resume: bool = False,
                       progress: bool = True,
                       on_iteration: Callable[[int, dict[str, Any]], None] | None = None,
                       ) -> dict[str, Any]:
    """Train `config` in `workdir` until `iterations` or `time_budget`; returns a summary dict.

    Runs on every device (`jax.devices()`). `on_iteration(iteration, metrics)` is called on
    process 0 after each iteration's metrics are written (e.g. to redraw a plot in a notebook).
    """
    t_start = time.time()
    primary = parallel.is_primary()
    os.makedirs(workdir, exist_ok=True)
    game = config.make_game()
    mesh = parallel.make_mesh()
    if config.algorithm == "exit":  # Expert Iteration; azjax/exit.py imports this module
        from azjax import exit as expert_iteration

        fns = expert_iteration.make_iteration(config, mesh)
    else:
        fns = make_iteration(config, mesh)
    steps = config.selfplay_steps or game.max_game_length
    devices = parallel.num_devices(mesh)

    checkpointer = Checkpointer(workdir, config.keep_checkpoints)
    run = _open_run(config, workdir, fns, checkpointer, resume)
    if primary:
        with open(os.path.join(workdir, "config.json"), "w") as f:
            f.write(config.to_json())
    evaluate = make_evaluation(config) if config.eval_interval else None
    buffer = fns.init_buffer()
    states = fns.init_states()
    previous = fns.copy(run.train.variables)  # `learn` donates the run's own buffers

    metrics = Metrics(workdir) if primary else None
    it = int(parallel.fetch(run.iteration))
    bar = Progress(progress and primary, it, config.iterations)
    totals = dict(games=0, positions=0)
    last: dict[str, Any] = {}
    stop_reason = "iterations"
    try:
        while it < config.iterations:
            if _out_of_time(config, t_start):
                stop_reason = "time_budget"
                break
            it += 1
            t0 = time.time()
            states, buffer, played = fns.play(run, states, buffer)
            played = parallel.fetch(played)  # the iteration's one copy before learning
            t1 = time.time()
            positions = steps * config.batch_games
            values: dict[str, Any] = dict(
                games=int(played.games),
                positions=positions,
                replay_ready=int(played.ready),
                selfplay_seconds=t1 - t0,
                games_per_second=int(played.games) / (t1 - t0),
                positions_per_second=positions / (t1 - t0),
                positions_per_second_per_device=positions / (t1 - t0) / devices,
            )
            for k, distinct, reached in zip(VARIETY_PLIES, played.distinct, played.reached):
                values[f"selfplay/distinct_ply{k}"] = int(distinct)
                values[f"selfplay/positions_ply{k}"] = int(reached)
            if hasattr(played, "metrics"):  # ExIt's own (azjax/exit.py)
                values.update(played.metrics())
            train = run.train
            if config.train_steps and played.ready >= fns.min_replay:
                train, losses = fns.learn(run, buffer)
                values.update(_losses(it, parallel.fetch(losses), workdir))
                values["train_seconds"] = time.time() - t1
            run = run.replace(train=train, iteration=fns.advance(run.iteration))
            totals["games"] += values["games"]
            totals["positions"] += positions

            if evaluate is not None and it % config.eval_interval == 0:
                t_eval = time.time()
                values.update(evaluate(run.train.variables, previous, fns.eval_key(run)))
                previous = fns.copy(run.train.variables)
                values["eval_seconds"] = time.time() - t_eval
            if it % config.checkpoint_interval == 0:
                checkpointer.save(it, run, config)
            if primary:
                metrics.write(it, values)
                if on_iteration is not None:
                    on_iteration(it, values)
            last = values
            bar.update(values)
        if it not in checkpointer.steps():
            checkpointer.save(it, run, config)
        checkpointer.wait()
    finally:
        bar.close()
        if metrics is not None:
            metrics.close()
        checkpointer.close()
    summary = dict(
        game=config.game,
        game_options=dict(config.game_options),
        iterations=it,
        stopped_by=stop_reason,
        games=totals["games"],
        positions=totals["positions"],
        wall_seconds=round(time.time() - t_start, 1),
        parameters=num_parameters(run.train.variables),
        devices=devices,
        processes=jax.process_count(),
        workdir=os.path.abspath(workdir),
        last=last,
    )
    if primary:
        with open(os.path.join(workdir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
    return summary


def _out_of_time(config: Config, t_start: float) -> bool:
    """Whether the time budget is spent; in a multi-host run, process 0's clock decides for all."""
    if not config.time_budget:
        return False
    out = time.time() - t_start > 60 * config.time_budget
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        out = bool(multihost_utils.broadcast_one_to_all(np.bool_(out)))
    return out
