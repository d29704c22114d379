"""The training loop: `train_and_evaluate(config, workdir)`.

Each iteration is one jitted self-play chunk (`selfplay_steps` moves of `batch_games` games), its
positions added to the device replay buffer, then `train_steps` optimizer steps on uniform
samples, or ones weighted by policy surprise (`policy_surprise`, `azjax.replay`), once the buffer
holds `min_replay` positions with a known outcome (`azjax.training.make_learner`). Python only
drives the loop: progress, metrics (`azjax.metrics`), evaluation every `eval_interval` iterations
and checkpoints (`azjax.checkpoint`) every `checkpoint_interval`.

Evaluation plays, batched: the current network against the network of the previous evaluation
(both epsilon-greedy, epsilon = `eval_epsilon`) and against pure MCTS with random rollouts at twice
the simulations (seed 000's PUCT baseline). Score = (wins + draws / 2) / games. With
`eval_opening_plies` = n both matches start their game pairs from positions after n random plies,
each position once with each colour (`paired_openings`). Where the package
has an Elo ladder for the game (`azjax.ladder`, `eval_ladder`), the network is also placed on it:
`eval/elo` and `eval/elo_ci95`, on a scale that keeps its meaning across runs; where it has solved
positions for the game (`azjax.solved`, `eval_errors`), the network's exact error rate on them:
`eval/error_rate` and `eval/error_ci95`, which no opponent's strength caps. The caller may add
an evaluation of its own (`extra_evaluation`: train.py plays `--eval_opponent`, any agent spec, with
the evaluation wing, `azjax.eval.TrainingOpponent`); its values join the iteration's metrics.
Evaluation is held to `eval_budget` of the session's wall time (`evaluation_affordable`): one that
falls due when, with it (as long as the last less its compiling, its ladder placement as long
as the rungs it will play took: `next_evaluation_seconds`), the evaluations would take more (their
compiling left out: it is paid once, and not at all where the compilation cache holds it) is
put off to the
next interval (`eval_postponed`), all but the exact error rate, which takes seconds and is
measured at every interval. A session that ends between intervals (its time budget or
`iterations`, past the first interval) evaluates its last iteration too (`eval_final`).

Gating (`--gating`, `azjax.gating`): self-play is played by the best network kept in the run
state; every `gating_interval` iterations the learner's network plays it (`gating_games` games)
and replaces it when it scores above the threshold (metrics gate/score, gate/accepted,
gate/accepted_total, gate/best_iteration).

Shared learning (`--games`, `azjax.shared`): one network over several games; the iteration is
`shared.make_iteration`'s, which runs each game's own `make_iteration` on that game's view of the
network (self-play of every game, then each game's learner in a random order). Losses, gate and
evaluation metrics are also logged per game (loss/<game>/total, gate/<game>/score,
eval/<game>/mcts_score, ...), and loss/total is the games' mean.

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
from azjax.ahead import Ahead, compile_clock, compile_for
from azjax.ahead import wanted as ahead_wanted
from azjax.arena import MatchResult, make_match, make_search_agent
from azjax.checkpoint import (
    Checkpointer,
    CheckpointError,
    RunState,
    WorkdirLock,
    best_checkpoint,
    check_resumable,
    check_workdir,
    init_run,
    measure_trends,
    read_config,
    steps_on_disk,
)
from azjax.config import Config
from azjax.interrupt import Interrupted, StopSignals
from azjax.ladder import make_ladder_evaluation
from azjax.metrics import Metrics, MoveTicker, Progress, run_seconds
from azjax.network import make_apply, make_network, num_parameters
from azjax.search import SearchSpec
from azjax.selfplay import init_states, make_selfplay, random_moves
from azjax.solved import make_error_evaluation
from azjax.training import Losses

VARIETY_PLIES = (2, 4)  # self-play variety is logged at these plies
EXTRA_EVALUATION_STREAM = 1  # the caller's evaluation key: fold_in(the evaluation key, this)


class PlayStats(NamedTuple):
    games: jax.Array  # int32[], games finished in the chunk
    ready: jax.Array  # int32[], positions in the buffer with a known outcome
    distinct: jax.Array  # int32[len(VARIETY_PLIES)], distinct positions at each ply in the chunk
    reached: jax.Array  # int32[len(VARIETY_PLIES)], positions at each ply in the chunk
    # float32[]: the mean policy surprise of the replay's positions with a known outcome, in a
    # run with policy surprise weighting (`replay.mean_surprise`); None in one without
    surprise: jax.Array | None = None
    # int32[3]: the games finished in the chunk won by the player who moved first (player 0),
    # drawn, and won by the second; None where self-play does not count them (ExIt)
    outcomes: jax.Array | None = None


def observation_hashes(obs: jax.Array, batch_dims: int = 1) -> jax.Array:
    """uint32[*batch]: a 32-bit hash of each observation's 0/1 planes (obs[*batch, ...])."""
    bits = obs.reshape(obs.shape[:batch_dims] + (-1,)).astype(jnp.uint32)
    weights = jax.random.bits(jax.random.PRNGKey(0), bits.shape[-1:], jnp.uint32) | 1
    return jnp.sum(bits * weights, axis=-1, dtype=jnp.uint32)


def count_distinct_hashes(hashes: jax.Array, mask: jax.Array) -> jax.Array:
    """int32[]: distinct values among hashes[N] where mask[N]: with `observation_hashes`, the
    distinct positions (a collision among n positions has probability about n^2 / 2^33)."""
    hashes = jnp.sort(jnp.where(mask, hashes, jnp.uint32(0xFFFFFFFF)))
    masked_out = jnp.sort(~mask)  # the masked-out entries last, as in the sorted hashes
    new = jnp.concatenate([jnp.ones(1, bool), hashes[1:] != hashes[:-1]])
    return jnp.sum(new & ~masked_out, dtype=jnp.int32)


class PlaySummary(NamedTuple):
    """What `PlayStats` is counted from, per game: split along B as the games are, so that the
    self-play program ends without a collective (`azjax.parallel`'s module doc)."""

    finished: jax.Array  # int32[B], games this column finished in the chunk
    ply: jax.Array  # int32[T, B], the ply of each position played
    hashes: jax.Array  # uint32[T, B], `observation_hashes` of each position played
    outcomes: jax.Array  # int32[3, B]: finished games won by the first player, drawn, lost


def summarise(traj) -> PlaySummary:
    first = traj.returns[..., 0]  # [T, B], player 0's final return where done
    ended = [traj.done & (first > 0), traj.done & (first == 0), traj.done & (first < 0)]
    return PlaySummary(
        jnp.sum(traj.done, axis=0, dtype=jnp.int32),
        traj.ply,
        observation_hashes(traj.obs, 2),
        jnp.stack([jnp.sum(e, axis=0, dtype=jnp.int32) for e in ended]),
    )


def variety(ply: jax.Array, hashes: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(distinct, reached) int32[len(VARIETY_PLIES)]: the distinct positions among those played
    at each of VARIETY_PLIES, and how many were played there (ply, hashes: any one shape)."""
    ply, hashes = ply.reshape(-1), hashes.reshape(-1)
    distinct = jnp.stack([count_distinct_hashes(hashes, ply == k) for k in VARIETY_PLIES])
    reached = jnp.stack([jnp.sum(ply == k, dtype=jnp.int32) for k in VARIETY_PLIES])
    return distinct, reached


def play_stats(summary: PlaySummary, buffer: replay.Buffer) -> PlayStats:
    return PlayStats(
        jnp.sum(summary.finished, dtype=jnp.int32),
        replay.num_ready(buffer),
        *variety(summary.ply, summary.hashes),
        surprise=None if buffer.surprise is None else replay.mean_surprise(buffer),
        outcomes=jnp.sum(summary.outcomes, axis=1, dtype=jnp.int32),
    )


class Iteration(NamedTuple):
    """The jitted pieces of a run on one mesh. None of them copies anything to the host."""

    init_run: Callable  # () -> RunState, replicated
    init_states: Callable  # () -> B start states, split along B
    init_buffer: Callable  # () -> an empty replay.Buffer, split along B
    play: Callable  # (run, states, buffer) -> (states, buffer, PlayStats); donates states, buffer
    learn: Callable  # (run, buffer, lr_scale=1.0) -> (TrainState, mean Losses); donates run.train
    advance: Callable  # (iteration) -> iteration + 1
    eval_key: Callable  # (run) -> the evaluation key of the iteration `run` has completed
    copy: Callable  # (tree) -> a copy that survives the donation of the original
    min_replay: int  # positions with a known outcome before the learner runs


def _iteration_keys(run: RunState, iteration) -> jax.Array:
    """[3] keys (play, train, eval) of `iteration`, folded from the run's base key."""
    return jax.random.split(jax.random.fold_in(run.key, iteration), 3)


def make_sampler(
    batch_size: int,
    mesh: Mesh | None = None,
    *,
    augment: symmetry.Symmetries | None = None,
    surprise_fraction: float = 0.0,
    opponent_frames=None,
) -> Callable:
    """sample(buffer, key) -> a training Batch; with `mesh` the buffer is split along B over its
    devices and the batch along its N positions (see `replay.sample`, which `surprise_fraction`
    and `opponent_frames` are passed to). With `augment` each position goes through one of those
    symmetries at random (`azjax.symmetry`)."""
    sample = functools.partial(
        replay.sample,
        batch_size=batch_size,
        surprise_fraction=surprise_fraction,
        opponent_frames=opponent_frames,
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


def _then_stats(play: Callable, stats: Callable, mesh: Mesh) -> Callable:
    """Iteration.play: the self-play program, then its statistics in a program of their own,
    started once self-play has ended on every device (`parallel.settle`; the two jitted programs
    are its attributes `play` and `stats`)."""

    def play_then_count(run, states, buffer):
        states, buffer, summary = parallel.settle(play(run, states, buffer), mesh)
        return states, buffer, stats(summary, buffer)

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
        mesh, PlaySummary(P(parallel.AXIS), *[P(None, parallel.AXIS)] * 3)
    )

    selfplay = make_selfplay(
        game,
        SearchSpec.from_config(config, explore=True),
        make_apply(net),
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
        on_move=on_move,
    )

    def play(run, states, buffer):
        k_play = _iteration_keys(run, run.iteration + 1)[0]
        states, traj = selfplay(gating.selfplay_variables(run), k_play, states)
        buffer = replay.add(
            buffer, traj, value_mix=config.value_target_mix, value_lambda=config.value_lambda
        )
        return states, buffer, summarise(traj)

    learner = training.make_learner(
        training.make_train_step(
            net,
            optimizer,
            config.weight_decay,
            partial_policy=config.full_search_prob < 1,
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
            functools.partial(init_states, game, config.batch_games), out_shardings=games_sh
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
            jax.jit(play_stats, out_shardings=rep),
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
                f"{workdir!r}; have {checkpointer.steps()}"
            )
        saved = read_config(workdir, resume_step)
        check_resumable(saved, config)
        run, step = checkpointer.restore(
            gating.restore_template(run, bool(saved.gating)), resume_step
        )
        run = gating.adapt(run, bool(config.gating), fns.copy)
        if parallel.is_primary():
            folder = checkpointer.set_aside(after=step)
            if folder is not None:
                print(
                    f"resuming from checkpoint {step}: the later checkpoints were moved to "
                    f"{folder}",
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
        if parallel.is_primary():
            print(note, file=sys.stderr)
    return run


# ---- what a run needs in memory, checked before it starts ----------------------------------------
def _nbytes(tree) -> int:
    return sum(
        math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(tree)
    )


def memory_estimate(config: Config, fns: Iteration, devices: int) -> dict[str, tuple[int, str]]:
    """{part: (bytes on each device, the flags that size it)}: a lower bound on what the run
    allocates (XLA's temporaries come on top), from shapes alone (nothing is allocated)."""
    game = config.make_game()
    steps = config.selfplay_steps or game.max_game_length
    games = -(-config.batch_games // devices)
    batch = -(-config.train_batch_size // devices)
    buffer = _nbytes(jax.eval_shape(fns.init_buffer))
    position = buffer / max(
        1,
        config.batch_games
        * math.ceil(config.replay_games * game.max_game_length / config.batch_games),
    )
    state = _nbytes(jax.eval_shape(game.init))
    cells = math.prod(game.board_shape)
    nodes = config.num_simulations + 1
    f = config.num_filters
    return {
        "replay buffer": (buffer // devices, "--replay_games"),
        "network and optimizer": (
            3 * _nbytes(jax.eval_shape(fns.init_run)),
            "--num_blocks, --num_filters, --value_hidden",
        ),
        "self-play trajectories": (
            int(steps * games * position),
            "--selfplay_steps, --batch_games",
        ),
        "search trees": (
            games * nodes * (6 * 4 * game.num_actions + state + 4 * f * cells),
            "--batch_games, --num_simulations",
        ),
        "training activations": (
            batch * cells * f * 4 * (2 * config.num_blocks + 2) * 3,
            "--train_batch_size, --num_filters, --num_blocks",
        ),
    }


def memory_limit() -> tuple[int | None, str]:
    """(bytes each device can hold, what that is): the accelerator's own limit where JAX tells
    it, else the host's physical memory shared by its devices; (None, ...) when unknown."""
    device = jax.local_devices()[0]
    try:
        stats = device.memory_stats() or {}
    except Exception:  # some backends do not implement it
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{device.platform} device memory"
    try:
        host = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None, "unknown"
    return host // jax.local_device_count(), "host memory"


def check_memory(config: Config, fns: Iteration, devices: int) -> None:
    """A ValueError naming the largest part and its flags when the run cannot fit in memory."""
    limit, what = memory_limit()
    if limit is None:
        return
    parts = memory_estimate(config, fns, devices)
    need = sum(b for b, _ in parts.values())
    if need <= limit:
        return
    name, (largest, flags) = max(parts.items(), key=lambda kv: kv[1][0])
    raise ValueError(
        f"the run needs at least {need / 2**30:.1f} GiB on each device but has "
        f"{limit / 2**30:.1f} GiB ({what}); the largest part is the {name} "
        f"({largest / 2**30:.1f} GiB): lower {flags}"
    )


def evaluation_matches(
    config: Config, num_games: int, mesh: Mesh | None = None
) -> tuple[Callable, Callable]:
    """(vs_previous, vs_mcts): the in-loop evaluation's two jitted matches of `num_games` games
    (`azjax.arena.make_match`, its games split over `mesh`'s devices where they divide; module
    doc)."""
    game = config.make_game()
    apply = make_apply(make_network(config, game))
    spec = SearchSpec.from_config(config)
    agent = make_search_agent(game, spec, apply)
    agent_eps = make_search_agent(game, spec, apply, epsilon=config.eval_epsilon)
    baseline = SearchSpec.pure_mcts(2 * config.num_simulations, search="puct")  # seed 000's
    mcts = make_search_agent(game, baseline, None)
    return (
        make_match(game, agent_eps, agent_eps, num_games, mesh=mesh),
        make_match(game, agent, mcts, num_games, mesh=mesh),
    )


def make_evaluation(
    config: Config, mesh: Mesh | None = None, *, ratings: dict[str, float] | None = None
) -> Callable:
    """evaluate(variables, previous, key, full=True) -> {"eval/...": ...}: the in-loop matches
    (module doc), split over `mesh`'s devices where the games divide, and the exact error rate;
    with `full=False` the error rate alone (a few seconds: the loop measures it also when the
    budget puts the matches off; {} where the game has no solved positions). For a shared run
    each game's, as eval/<game>/.... With `compile_only=True` it compiles the programs such a
    call would run (the ladder's: those its placement most likely plays) and returns {}: the loop
    has them compiled on background threads while it plays (`azjax.ahead`). `ratings`: {game:
    the ladder Elo its placement starts from} (a resumed run's last, `last_ratings`; else 0)."""
    if config.games:
        from azjax import shared

        each = shared.per_game(config, lambda c: make_evaluation(c, mesh, ratings=ratings))
        return lambda variables, previous, key, **options: {
            k.replace("eval/", f"eval/{name}/", 1): v
            for name, values in each(variables, previous, key, **options).items()
            for k, v in values.items()
        }
    vs_previous, vs_mcts = evaluation_matches(config, config.eval_games, mesh)
    start = (ratings or {}).get(config.game, 0.0)
    on_ladder = make_ladder_evaluation(config, mesh=mesh, start=start)  # None without a table
    on_solved = make_error_evaluation(config, mesh=mesh)  # None without solved positions
    game = config.make_game()

    def evaluate(variables, previous, key, full=True, compile_only=False) -> dict[str, Any]:
        k_prev, k_mcts, k_ladder = jax.random.split(key, 3)
        k_solved = jax.random.fold_in(key, 3)  # the matches' keys as before
        out = {}
        if on_solved is not None:
            out.update(on_solved(variables, k_solved, compile_only=compile_only))
        if not full:
            return out
        for name, match, opponent, k in (
            ("previous", vs_previous, previous, k_prev),
            ("mcts", vs_mcts, None, k_mcts),
        ):
            args = (variables, opponent, k)  # from the empty board: the keys as before
            if config.eval_opening_plies:
                k_match, k_open = jax.random.split(k)
                starts = paired_openings(game, k_open, config.eval_games, config.eval_opening_plies)
                args = (variables, opponent, k_match, starts)
            if compile_only:
                compile_for(match, *args)
                continue
            res = MatchResult.from_returns(*parallel.fetch(match(*args)))
            out[f"eval/{name}_score"] = res.score
            out[f"eval/{name}_wdl"] = [res.wins, res.draws, res.losses]
        if on_ladder is not None:
            out.update(on_ladder(variables, k_ladder, compile_only=compile_only))
        return out

    return evaluate


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def paired_openings(game, key, num_games: int, plies: int):
    """num_games start states (even): num_games / 2 positions after `plies` uniformly random legal
    moves, each twice, at i and i + num_games / 2, where `azjax.arena.make_match` gives the first
    agent the other colour: every opening is played once with each colour."""
    keys = jax.random.split(key, num_games // 2)
    half = jax.vmap(lambda k: random_moves(game, k, plies, plies))(keys)
    return jax.tree_util.tree_map(lambda x: jnp.concatenate([x, x]), half)


# ---- divergence ----------------------------------------------------------------------------------
LOSS_FACTOR = 10.0  # a loss above LOSS_FACTOR x the run's first loss is divergence
NORM_FACTOR = 1000.0  # parameters whose norm grew this much over the session's start: divergence


class DivergenceError(RuntimeError):
    """The losses or the parameters stopped being sane; nothing of them was saved."""


NonFiniteLossError = DivergenceError  # the name before divergence covered more than NaNs


def _losses(losses: Losses | dict[str, Losses]) -> dict[str, float]:
    """loss/total, loss/value, ...; for a shared run ({game: Losses}) their means over the
    games, and each game's as loss/<game>/total, ..."""
    if not isinstance(losses, dict):
        return {f"loss/{k}": float(v) for k, v in losses._asdict().items()}
    out = {}
    for name, game_losses in losses.items():
        out.update({f"loss/{name}/{k}": float(v) for k, v in game_losses._asdict().items()})
    for k in Losses._fields:
        out[f"loss/{k}"] = float(np.mean([float(getattr(v, k)) for v in losses.values()]))
    return out


@jax.jit
def _square_norm(variables) -> jax.Array:
    """float32[]: the parameters' squared norm (inf or NaN where one is not finite)."""
    return sum(jnp.sum(jnp.square(p)) for p in jax.tree_util.tree_leaves(variables["params"]))


class Health:
    """Whether a run is sane: every loss finite and the total below LOSS_FACTOR x the run's
    first loss (`reference`, from metrics.jsonl where the run has one, else the first of this
    session), the parameters finite and their norm within NORM_FACTOR of the session's start."""

    def __init__(self, variables, reference: float | None):
        self.reference = reference
        self.norm0 = math.sqrt(float(parallel.fetch(_square_norm(variables))))

    def losses(self, values: dict[str, Any]) -> str | None:
        """What is wrong with an iteration's losses, or None."""
        bad = [k for k, v in values.items() if k.startswith("loss/") and not math.isfinite(v)]
        if bad:
            return f"non-finite {', '.join(bad)}"
        if "loss/total" not in values:
            return None
        if self.reference is None:
            self.reference = values["loss/total"]
        bound = LOSS_FACTOR * max(self.reference, 1e-3)
        if values["loss/total"] > bound:
            return (
                f"loss/total {values['loss/total']:.3g} above {bound:.3g} ({LOSS_FACTOR:g} x "
                f"the run's first loss, {self.reference:.3g})"
            )
        return None

    def parameters(self, variables) -> str | None:
        norm = math.sqrt(max(0.0, float(parallel.fetch(_square_norm(variables)))))
        if not math.isfinite(norm):
            return "non-finite parameters"
        if norm > NORM_FACTOR * max(self.norm0, 1e-3):
            return (
                f"the parameters' norm {norm:.3g} is over {NORM_FACTOR:g} x the "
                f"{self.norm0:.3g} they started this session with"
            )
        return None


def last_ratings(config: Config, metrics: Metrics | None) -> dict[str, float]:
    """{game: its last logged ladder Elo} from process 0's metrics (a resumed run's: the
    placement starts there instead of at 0), the same on every process; games never placed are
    left out."""
    from azjax import shared

    names = list(shared.game_configs(config))
    keys = [f"eval/{name}/elo" if config.games else "eval/elo" for name in names]
    rows = metrics.rows if metrics is not None else []
    last = np.array([next((r[k] for r in reversed(rows) if k in r), np.nan) for k in keys])
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        last = np.asarray(multihost_utils.broadcast_one_to_all(last.astype(np.float64)))
    return {name: float(v) for name, v in zip(names, last) if np.isfinite(v)}


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


def _announce_clock(config: Config, iteration: int, earlier: float) -> None:
    """On resuming: how long the run has trained, against its time budget."""
    note = f"resuming at iteration {iteration} after {earlier / 60:.1f} minutes of training"
    if config.time_budget:
        note += f" of its time_budget of {config.time_budget:g}"
    print(note, file=sys.stderr)


def _reference_loss(metrics: Metrics | None) -> float | None:
    """The run's first loss/total, from process 0's metrics, the same on every process."""
    first = None
    if metrics is not None:
        first = next((r["loss/total"] for r in metrics.rows if "loss/total" in r), None)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        value = multihost_utils.broadcast_one_to_all(np.float64(-1 if first is None else first))
        first = None if value < 0 else float(value)
    return first


def _divergence(
    it: int, reason: str, checkpointer: Checkpointer, workdir: str, healthy_upto: int
) -> DivergenceError:
    """The report: the last checkpoint whose parameters were checked sane (those up to
    `healthy_upto`; a loss judges the parameters of the iteration before it)."""
    healthy = [s for s in checkpointer.steps() if s <= healthy_upto]
    suspect = [s for s in checkpointer.steps() if s > healthy_upto]
    if healthy:
        where = (
            f"the last healthy checkpoint is {healthy[-1]}: continue from it with --resume "
            f"--resume_step={healthy[-1]} and a lower --learning_rate"
        )
    else:
        where = "no checkpoint is known healthy: start again with a lower --learning_rate"
    if suspect:
        where += f" (checkpoint {suspect[-1]} led to this iteration)"
    return DivergenceError(
        f"iteration {it}: the run diverged ({reason}); not saved. In {workdir}, {where}"
    )


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
    process 0 after each iteration (e.g. to redraw a plot in a notebook). `resume_step` resumes
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
    if config.eval_opponent and extra_evaluation is None:
        raise ValueError(
            f"eval_opponent={config.eval_opponent!r} is played by train.py: pass "
            "extra_evaluation=azjax.eval.TrainingOpponent(config) to train_and_evaluate"
        )
    primary = parallel.is_primary()
    if primary:
        check_workdir(workdir)
    else:
        os.makedirs(workdir, exist_ok=True)
    with WorkdirLock(workdir) if primary else contextlib.nullcontext():
        return _train(
            config,
            workdir,
            resume or resume_step is not None,
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
    if config.init_from and not resume:  # a resumed run keeps the source its config records
        from azjax import transfer

        config = transfer.resolve(config)
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

    checkpointer = Checkpointer(workdir, config.keep_checkpoints)
    metrics = bar = None
    it = 0
    ahead = Ahead()  # the next evaluation's programs, compiled while the loop plays
    try:
        run = _open_run(config, workdir, fns, checkpointer, resume, resume_step)
        it = int(parallel.fetch(run.iteration))
        if primary:
            _write_text(os.path.join(workdir, "config.json"), config.to_json())
            metrics = Metrics(
                workdir, it if resume else None, checkpointer.saved_rows(it) if resume else None
            )
            metrics.text("config", config.to_json())  # the run's settings, on TensorBoard too
        health = Health(run.train.variables, _reference_loss(metrics))
        # the run's clock: its earlier sessions' time counts, so that a resumed run keeps its
        # time budget and its rate schedule where the checkpoint left them
        t_run = t_start - _earlier_seconds(metrics, workdir, it)
        if resume and primary:
            _announce_clock(config, it, t_start - t_run)
        evaluate = None
        if config.eval_interval:  # a resumed run's placement starts at its last rating
            evaluate = make_evaluation(config, mesh, ratings=last_ratings(config, metrics))
        gate = gating.make_gate(config) if config.gating else None
        buffer = fns.init_buffer()
        states = fns.init_states()
        previous = fns.copy(run.train.variables)  # `learn` donates the run's own buffers

        compiling_for = [0]  # the evaluation whose programs `ahead` was last given

        limit = config.iterations or math.inf  # 0: no limit, the time budget ends the run

        def compile_next_evaluation() -> None:  # where one falls due in this session
            upcoming = config.eval_interval * (it // config.eval_interval + 1) if evaluate else 0
            if upcoming == compiling_for[0] or not ahead_wanted(config.eval_compile_ahead):
                return
            if 0 < upcoming <= limit:
                compiling_for[0] = upcoming
                args = (previous, previous, fns.eval_key(run))  # as the evaluation's own
                ahead.start(functools.partial(evaluate, *args, compile_only=True))

        first = it + 1  # the session's first iteration compiles the loop's own programs
        bar = Progress(progress and primary, it, config.iterations or None)
        if moves is not None:
            moves.progress = bar
        session = dict(games=0, positions=0)
        # seconds of in-loop evaluation this session: all of it, what the budget counts (less
        # the compiling, paid once), and what the next is expected to take
        spent = dict(eval=0.0, budgeted=0.0, next=0.0)
        t_loop = time.time()
        last: dict[str, Any] = {}
        stop_reason = "iterations"
        with StopSignals(lambda: f"finishing iteration {it}, then saving a checkpoint") as stop:
            while it < limit:
                stop_reason = _should_stop(config, t_run, stop)
                if stop_reason:
                    break
                it += 1
                t0 = time.time()
                states, buffer, played = fns.play(run, states, buffer)
                played = parallel.fetch(played)  # the iteration's one copy before learning
                t1 = time.time()
                values = _play_values(played, steps * config.batch_games, t1 - t0, devices)
                if hasattr(played, "metrics"):  # ExIt's own (azjax/exit.py)
                    values.update(played.metrics())
                train = run.train
                if config.train_steps and played.ready >= fns.min_replay:
                    progress = training.run_progress(it, limit, t1 - t_run, config.time_budget)
                    lr_scale = training.lr_fraction(config.lr_schedule, progress)
                    train, losses = fns.learn(run, buffer, lr_scale)
                    values.update(_losses(parallel.fetch(losses)))
                    values["train_seconds"] = time.time() - t1
                    values["train/learning_rate"] = config.learning_rate * lr_scale
                run = run.replace(train=train, iteration=fns.advance(run.iteration))
                loss_problem = health.losses(values)
                problem = loss_problem or health.parameters(run.train.variables)
                if problem:  # the losses judge the parameters before the iteration's updates
                    _finish_saves(checkpointer, metrics)
                    raise _divergence(
                        it,
                        problem,
                        checkpointer,
                        workdir,
                        healthy_upto=it - 2 if loss_problem else it - 1,
                    )
                session["games"] += values["games"]
                session["positions"] += values["positions"]

                if gate is not None and it % config.gating_interval == 0:
                    t_gate = time.time()
                    run, gate_values = gate(run, it)
                    values.update(gate_values, gate_seconds=time.time() - t_gate)
                values.update(gating.gate_values(run))

                due = evaluate is not None and it % config.eval_interval == 0
                if evaluate is not None and not due and config.eval_final:
                    due = _session_ends(config, it, t_run, stop)
                session_seconds = time.time() - t_loop
                if due and not evaluation_affordable(
                    config, spent["budgeted"], session_seconds, spent["next"]
                ):
                    values["eval_postponed"] = 1  # over eval_budget: the next interval
                    t_eval = time.time()  # but the exact error rate, seconds, is measured
                    errors = evaluate(run.train.variables, previous, fns.eval_key(run), full=False)
                    if errors:  # its time counts, but is not what the next evaluation will take
                        values.update(errors, eval_seconds=time.time() - t_eval)
                        spent["eval"] += values["eval_seconds"]
                        spent["budgeted"] += values["eval_seconds"]
                elif due:
                    t_eval = time.time()
                    with compile_clock() as compiling:  # what the next one will not pay again
                        ahead.wait(drop_pending=True)  # what it has not compiled, it compiles
                        key = fns.eval_key(run)
                        values.update(evaluate(run.train.variables, previous, key))
                        if extra_evaluation is not None:  # a key of its own, the loop's unchanged
                            extra_key = jax.random.fold_in(key, EXTRA_EVALUATION_STREAM)
                            values.update(extra_evaluation(run.train.variables, extra_key))
                    previous = fns.copy(run.train.variables)
                    values["eval_seconds"] = time.time() - t_eval
                    values["eval_compile_seconds"] = min(compiling(), values["eval_seconds"])
                    spent["eval"] += values["eval_seconds"]
                    spent["budgeted"] += values["eval_seconds"] - values["eval_compile_seconds"]
                    spent["next"] = next_evaluation_seconds(values)
                    compile_next_evaluation()  # the ladder's next rungs, if new
                if it == first:  # not alongside them: both lower on Python's one lock
                    compile_next_evaluation()
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
                        checkpointer.save(it, run, config, metrics and metrics.held())
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
                    checkpointer.save(it, run, config, metrics and metrics.held())
                _finish_saves(checkpointer, metrics)
    except Interrupted as e:  # a second signal: stop at once, keep what is on disk
        _abandon(bar, checkpointer, metrics)
        if e.message:
            raise
        saved = steps_on_disk(workdir)
        kept = (
            f"checkpoint {saved[-1]} (the last saved) is intact; continue with --resume"
            if saved
            else "no checkpoint was saved"
        )
        raise Interrupted(e.signum, f"stopped at once; {kept}") from None
    except BaseException:
        _abandon(bar, checkpointer, metrics)
        raise
    finally:
        ahead.close()  # a compilation in flight ends before the process may
    bar.close()
    summary = _summary(
        config, it, stop_reason, session, metrics, t_start, run, devices, workdir, last
    )
    summary["eval_seconds"] = round(spent["eval"], 1)  # this session's in-loop evaluation
    summary["eval_compile_seconds"] = round(spent["eval"] - spent["budgeted"], 1)  # of it
    if metrics is not None:  # every session's evaluations
        summary["trends"] = measure_trends(metrics.rows)
        summary["eval_postponed"] = sum(int(r.get("eval_postponed", 0)) for r in metrics.rows)
    summary["run_seconds"] = round(time.time() - t_run, 1)  # every session's
    _close(checkpointer, metrics)
    if primary:
        summary["best"] = _best(workdir)
        _write_text(os.path.join(workdir, "summary.json"), json.dumps(summary, indent=2))
    if stop.signum is not None:
        raise Interrupted(stop.signum, f"checkpoint {it} saved; continue with --resume")
    return summary


def _best(workdir: str) -> dict | None:
    """The summary's `best`: the saved checkpoint its in-loop evaluations scored highest
    (`checkpoint.best_checkpoint`: step, metric, value), None where none was evaluated."""
    try:
        return best_checkpoint(workdir)._asdict()
    except CheckpointError:
        return None


def next_evaluation_seconds(values: dict[str, Any]) -> float:
    """What the next full evaluation is expected to take, from the last one's `values`: as long
    as it (`eval_seconds`) less what it spent compiling (`eval_compile_seconds`: its programs are
    in jit's cache now), its ladder placements' part (`eval/elo_seconds` less
    `eval/elo_compile_seconds`, each game's in a shared run) replaced by what the next placements'
    rungs are expected to take (`eval/elo_next_seconds`, `azjax.ladder.placement_seconds`)."""
    seconds = values["eval_seconds"] - values.get("eval_compile_seconds", 0.0)
    for k, v in values.items():
        if k.startswith("eval/") and k.endswith("/elo_next_seconds"):
            placed = values[k.replace("/elo_next_seconds", "/elo_seconds")]
            placed -= values.get(k.replace("/elo_next_seconds", "/elo_compile_seconds"), 0.0)
            seconds += v - placed
    return max(seconds, 0.0)


def evaluation_affordable(
    config: Config, eval_seconds: float, session_seconds: float, expected: float = 0.0
) -> bool:
    """Whether an evaluation that falls due may run: with it, taking `expected` seconds (as
    long as the last one, its ladder part as its next rungs: `next_evaluation_seconds`), the
    evaluations of this session (`eval_seconds` so far) would take at most `config.eval_budget`
    of its time (`session_seconds` so far); always with eval_budget 0. In a multi-host run
    process 0's clock decides for all, which must agree."""
    budget = config.eval_budget
    ok = not budget or eval_seconds + expected <= budget * (session_seconds + expected)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        ok = bool(multihost_utils.broadcast_one_to_all(np.bool_(ok)))
    return ok


def _play_values(played: PlayStats, positions: int, seconds: float, devices: int) -> dict[str, Any]:
    values: dict[str, Any] = dict(
        games=int(played.games),
        positions=positions,
        replay_ready=int(played.ready),
        selfplay_seconds=seconds,
        games_per_second=int(played.games) / seconds,
        positions_per_second=positions / seconds,
        positions_per_second_per_device=positions / seconds / devices,
    )
    for k, distinct, reached in zip(VARIETY_PLIES, played.distinct, played.reached):
        values[f"selfplay/distinct_ply{k}"] = int(distinct)
        values[f"selfplay/positions_ply{k}"] = int(reached)
    if played.surprise is not None:
        values["replay/policy_surprise"] = float(played.surprise)
    if played.outcomes is not None and int(played.games) > 0:
        first_wins, draws, _ = (int(n) for n in played.outcomes)
        values["selfplay/first_player_wins"] = first_wins / int(played.games)
        values["selfplay/draws"] = draws / int(played.games)
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


def _session_ends(config: Config, it: int, t_run: float, stop: StopSignals) -> bool:
    """Whether iteration `it`, past the run's first evaluation interval, is the session's last by
    --iterations or its time budget (`eval_final`); a signal's stop does not wait for one."""
    if it < config.eval_interval:
        return False
    return it == config.iterations or _should_stop(config, t_run, stop) == "time_budget"


def _should_stop(config: Config, t_run: float, stop: StopSignals) -> str:
    """'' to go on, else why to stop: 'time_budget' (counted from `t_run`, the run's start with
    its earlier sessions' time) or the signal's name. In a multi-host run process 0's clock
    decides the time budget, and a signal to any process stops all."""
    out = bool(config.time_budget) and time.time() - t_run > 60 * config.time_budget
    signalled = stop.requested
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        out = bool(multihost_utils.broadcast_one_to_all(np.bool_(out)))
        flags = multihost_utils.process_allgather(np.bool_(signalled))
        signalled = bool(np.any(flags))
        if signalled and stop.signum is None:
            stop.signum = signal.SIGTERM  # another process was signalled
    if out:
        return "time_budget"
    return signal.Signals(stop.signum).name if signalled else ""
