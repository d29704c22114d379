"""The training loop: `train_and_evaluate(config, workdir)`.

Each iteration is one jitted self-play chunk (`selfplay_steps` moves of `batch_games` games), its
positions added to the device replay buffer, then `train_steps` jitted optimizer steps on uniform
samples. Python only drives the loop: progress, metrics (JSON lines and TensorBoard events in the
workdir), evaluation every `eval_interval` iterations and checkpoints every `checkpoint_interval`.

Evaluation plays, batched: the current network against the network of the previous evaluation
(both epsilon-greedy, epsilon = `eval_epsilon`) and against pure MCTS with random rollouts at twice
the simulations. Score = (wins + draws / 2) / games.

Devices: the iteration runs on a mesh over every device (`azjax.parallel`; one device is the
one-device mesh): games, trajectories, the replay buffer and training batches are split along B,
the network and optimizer state are replicated. `make_iteration` builds the two jitted halves of an
iteration, `play` (self-play chunk + replay add, donating the games and the buffer) and `learn`
(`train_steps` optimizer steps, donating the run state); neither copies anything to the host. The
loop fetches the iteration's few scalars once, after both. In a multi-host run every process runs
this loop on its share; only process 0 writes metrics, TensorBoard events, config and summary, and
all processes take part in orbax's checkpoint saves.
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.sharding import Mesh, PartitionSpec as P

from azjax import parallel, replay
from azjax.arena import MatchResult, make_match, make_search_agent
from azjax.checkpoint import Checkpointer, CheckpointError, read_config
from azjax.config import Config
from azjax.network import init_variables, make_apply, make_network, num_parameters
from azjax.search import SearchSpec
from azjax.selfplay import init_states, make_selfplay
from azjax.training import Losses, TrainState, init_train_state, make_optimizer, make_train_step

# Fields that must agree between a run and the checkpoint it resumes.
_STRUCTURAL = ("game", "game_options", "num_blocks", "num_filters", "value_hidden", "optimizer")


@struct.dataclass
class RunState:
    """Everything a checkpoint holds besides the config."""

    train: TrainState
    iteration: jax.Array  # int32[], iterations completed
    key: jax.Array  # the run's base PRNG key; iteration keys are folded from it


class NonFiniteLossError(RuntimeError):
    pass


class PlayStats(NamedTuple):
    games: jax.Array  # int32[], games finished in the chunk
    ready: jax.Array  # int32[], positions in the buffer with a known outcome


class LearnStats(NamedTuple):
    trained: jax.Array  # bool[], whether the buffer was ready and the steps were taken
    losses: Losses  # float32[] each, means over the steps (zeros when not trained)


class Iteration(NamedTuple):
    """The jitted pieces of a run on one mesh. None of them copies anything to the host."""

    init_run: Callable  # () -> RunState, replicated
    init_states: Callable  # () -> B start states, split along B
    init_buffer: Callable  # () -> an empty replay.Buffer, split along B
    play: Callable  # (run, states, buffer) -> (states, buffer, PlayStats); donates states, buffer
    learn: Callable  # (run, buffer) -> (run, LearnStats); donates run; iteration += 1
    eval_key: Callable  # (run) -> the evaluation key of the iteration `run` has completed
    copy: Callable  # (tree) -> a copy that survives the donation of the original


def _iteration_keys(run: RunState, iteration) -> jax.Array:
    """[3] keys (play, train, eval) of `iteration`, folded from the run's base key."""
    return jax.random.split(jax.random.fold_in(run.key, iteration), 3)


def make_train_iteration(train_step, batch_size: int, num_steps: int, mesh: Mesh | None = None):
    """train(state, buffer, key) -> (state, mean Losses) over `num_steps` sampled batches.

    With `mesh` the buffer is split along B over its devices and each batch along its N positions
    (see `replay.sample`); the state is replicated and `jit` averages the gradients.
    """
    sample = functools.partial(replay.sample, batch_size=batch_size)
    if mesh is not None:
        sample = jax.shard_map(
            functools.partial(sample, axis_name=parallel.AXIS), mesh=mesh,
            in_specs=(replay.partition_specs(parallel.AXIS), P()), out_specs=P(parallel.AXIS),
        )

    def train(state, buffer, key):
        def body(s, k):
            return train_step(s, sample(buffer, k))

        state, losses = jax.lax.scan(body, state, jax.random.split(key, num_steps))
        return state, jax.tree_util.tree_map(jnp.mean, losses)

    return train


def run_keys(config: Config) -> tuple[jax.Array, jax.Array]:
    """(init_key, run_key): the network's initialisation key and the run's base key."""
    init_key, run_key = jax.random.split(jax.random.PRNGKey(config.seed))
    return init_key, run_key


def initial_variables(config: Config):
    """The untrained network a run of `config` starts from."""
    game = config.make_game()
    net = make_network(config, game)
    return jax.jit(lambda k: init_variables(net, game, k))(run_keys(config)[0])


def make_iteration(config: Config, mesh: Mesh) -> Iteration:
    """The jitted self-play, replay and training of `config` on `mesh` (see the module doc).

    `batch_games` and `train_batch_size` are global: each must divide over the mesh's devices.
    """
    parallel.check_divisible(mesh, batch_games=config.batch_games,
                             train_batch_size=config.train_batch_size)
    game = config.make_game()
    net = make_network(config, game)
    steps = config.selfplay_steps or game.max_game_length
    optimizer = make_optimizer(config, config.iterations * config.train_steps)
    rows = math.ceil(config.replay_games * game.max_game_length / config.batch_games)
    min_replay = config.min_replay or config.train_batch_size

    rep = parallel.replicated(mesh)
    games_sh = parallel.sharding(mesh, P(parallel.AXIS))
    buffer_sh = parallel.shardings(mesh, replay.partition_specs(parallel.AXIS))

    def init_run():
        init_key, run_key = run_keys(config)
        return RunState(train=init_train_state(init_variables(net, game, init_key), optimizer),
                        iteration=jnp.int32(0), key=run_key)

    selfplay = make_selfplay(game, SearchSpec.from_config(config, explore=True), make_apply(net),
                             steps, config.sample_moves, mesh)

    def play(run, states, buffer):
        k_play = _iteration_keys(run, run.iteration + 1)[0]
        states, traj = selfplay(run.train.variables, k_play, states)
        buffer = replay.add(buffer, traj)
        return states, buffer, PlayStats(jnp.sum(traj.done, dtype=jnp.int32),
                                         replay.num_ready(buffer))

    train = make_train_iteration(make_train_step(net, optimizer, config.weight_decay),
                                 config.train_batch_size, config.train_steps, mesh)

    def learn(run, buffer):
        k_train = _iteration_keys(run, run.iteration + 1)[1]
        zeros = Losses(*(jnp.float32(0),) * len(Losses._fields))
        if config.train_steps == 0:
            state, trained, losses = run.train, jnp.bool_(False), zeros
        else:
            trained = replay.num_ready(buffer) >= min_replay
            state, losses = jax.lax.cond(trained, lambda s: train(s, buffer, k_train),
                                         lambda s: (s, zeros), run.train)
        return run.replace(train=state, iteration=run.iteration + 1), LearnStats(trained, losses)

    return Iteration(
        init_run=jax.jit(init_run, out_shardings=rep),
        init_states=jax.jit(functools.partial(init_states, game, config.batch_games),
                            out_shardings=games_sh),
        init_buffer=jax.jit(functools.partial(replay.init, rows, config.batch_games,
                                              game.observation_shape, game.num_actions),
                            out_shardings=buffer_sh),
        play=jax.jit(play, in_shardings=(rep, games_sh, buffer_sh),
                     out_shardings=(games_sh, buffer_sh, rep), donate_argnums=(1, 2)),
        learn=jax.jit(learn, in_shardings=(rep, buffer_sh), out_shardings=(rep, rep),
                      donate_argnums=0),
        eval_key=jax.jit(lambda run: _iteration_keys(run, run.iteration)[2], out_shardings=rep),
        copy=jax.jit(lambda tree: jax.tree_util.tree_map(jnp.copy, tree), out_shardings=rep),
    )


class _Metrics:
    """JSON lines and TensorBoard events in the workdir (TensorBoard if tensorboardX is present)."""

    def __init__(self, workdir: str):
        self.file = open(os.path.join(workdir, "metrics.jsonl"), "a")
        try:
            from tensorboardX import SummaryWriter

            self.tb = SummaryWriter(os.path.join(workdir, "tb"))
        except ImportError:  # pragma: no cover - tensorboardX is a dependency
            self.tb = None

    def write(self, iteration: int, values: dict[str, Any]) -> None:
        self.file.write(json.dumps({"iteration": iteration, **values}) + "\n")
        self.file.flush()
        if self.tb is not None:
            for k, v in values.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.tb.add_scalar(k, v, iteration)

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()


def _check_resumable(saved: Config, config: Config) -> None:
    diffs = [f for f in _STRUCTURAL if getattr(saved, f) != getattr(config, f)]
    if diffs:
        detail = ", ".join(f"{f}: saved {getattr(saved, f)!r} vs now {getattr(config, f)!r}"
                           for f in diffs)
        raise CheckpointError(f"cannot resume: the checkpoint was made with other settings ({detail})")


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
    fns = make_iteration(config, mesh)
    steps = config.selfplay_steps or game.max_game_length

    checkpointer = Checkpointer(workdir, config.keep_checkpoints)
    run = fns.init_run()
    if resume:
        if checkpointer.latest() is None:
            raise CheckpointError(f"--resume: no checkpoint in {workdir!r} to resume from")
        _check_resumable(read_config(workdir), config)
        run, _ = checkpointer.restore(run)
    elif checkpointer.latest() is not None:
        raise CheckpointError(
            f"{workdir!r} already holds checkpoints {checkpointer.steps()}; pass --resume to "
            "continue that run or choose another --workdir"
        )
    if primary:
        with open(os.path.join(workdir, "config.json"), "w") as f:
            f.write(config.to_json())

    net = make_network(config, game)
    apply = make_apply(net)
    eval_spec = SearchSpec.from_config(config)
    agent = make_search_agent(game, eval_spec, apply)
    agent_eps = make_search_agent(game, eval_spec, apply, epsilon=config.eval_epsilon)
    mcts = make_search_agent(game, SearchSpec.pure_mcts(2 * config.num_simulations), None)
    vs_previous = make_match(game, agent_eps, agent_eps, config.eval_games)
    vs_mcts = make_match(game, agent, mcts, config.eval_games)

    buffer = fns.init_buffer()
    states = fns.init_states()
    previous = fns.copy(run.train.variables)  # `learn` donates the run's own buffers

    metrics = _Metrics(workdir) if primary else None
    bar = _progress(progress and primary, int(parallel.fetch(run.iteration)), config.iterations)
    totals = dict(games=0, positions=0)
    last: dict[str, Any] = {}
    stop_reason = "iterations"
    it = int(parallel.fetch(run.iteration))
    devices = parallel.num_devices(mesh)
    try:
        while it < config.iterations:
            if _out_of_time(config, t_start):
                stop_reason = "time_budget"
                break
            it += 1
            t0 = time.time()
            states, buffer, played = fns.play(run, states, buffer)
            jax.block_until_ready(buffer)  # a wait for the timing, not a copy to the host
            t1 = time.time()
            run, learned = fns.learn(run, buffer)
            played, learned = parallel.fetch((played, learned))  # the iteration's one copy
            t2 = time.time()
            games_done = int(played.games)
            positions = steps * config.batch_games
            values: dict[str, Any] = dict(
                games=games_done,
                positions=positions,
                replay_ready=int(played.ready),
                selfplay_seconds=t1 - t0,
                games_per_second=games_done / (t1 - t0),
                positions_per_second=positions / (t1 - t0),
                positions_per_second_per_device=positions / (t1 - t0) / devices,
            )
            if learned.trained:
                losses = {f"loss/{k}": float(v) for k, v in learned.losses._asdict().items()}
                if not all(math.isfinite(v) for v in losses.values()):
                    raise NonFiniteLossError(
                        f"iteration {it}: non-finite loss {losses}; the last checkpoint in "
                        f"{workdir} is intact (try a lower learning_rate)"
                    )
                values.update(losses)
                values["train_seconds"] = t2 - t1
            totals["games"] += games_done
            totals["positions"] += positions

            if config.eval_interval and it % config.eval_interval == 0:
                values.update(_evaluate(run.train.variables, previous, fns.eval_key(run),
                                        vs_previous, vs_mcts))
                previous = fns.copy(run.train.variables)
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


def _evaluate(variables, previous, key, vs_previous, vs_mcts) -> dict[str, Any]:
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


class _progress:
    """A tqdm bar with games/s, positions/s and losses (or nothing when disabled)."""

    def __init__(self, enabled: bool, start: int, total: int):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, unit="it", dynamic_ncols=True)

    def update(self, values: dict[str, Any]) -> None:
        if self.bar is None:
            return
        post = {"games/s": f"{values['games_per_second']:.1f}",
                "pos/s": f"{values['positions_per_second']:.0f}"}
        if "loss/total" in values:
            post.update(v=f"{values['loss/value']:.3f}", p=f"{values['loss/policy']:.3f}")
        if "eval/mcts_score" in values:
            post.update(vs_mcts=f"{values['eval/mcts_score']:.2f}",
                        vs_prev=f"{values['eval/previous_score']:.2f}")
        self.bar.set_postfix(post)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
