"""The training loop: `train_and_evaluate(config, workdir)`.

Each iteration is one jitted self-play chunk (`selfplay_steps` moves of `batch_games` games), its
positions added to the device replay buffer, then `train_steps` jitted optimizer steps on uniform
samples. Python only drives the loop: progress, metrics (JSON lines and TensorBoard events in the
workdir), evaluation every `eval_interval` iterations and checkpoints every `checkpoint_interval`.

Evaluation plays, batched: the current network against the network of the previous evaluation
(both epsilon-greedy, epsilon = `eval_epsilon`) and against pure MCTS with random rollouts at twice
the simulations. Score = (wins + draws / 2) / games.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from azjax import replay
from azjax.arena import MatchResult, make_match, make_search_agent
from azjax.checkpoint import Checkpointer, CheckpointError, read_config
from azjax.config import Config
from azjax.network import init_variables, make_apply, make_network, num_parameters
from azjax.search import SearchSpec
from azjax.selfplay import init_states, make_selfplay
from azjax.training import TrainState, init_train_state, make_optimizer, make_train_step

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


def make_train_iteration(train_step, batch_size: int, num_steps: int):
    """train(state, buffer, key) -> (state, mean Losses) over `num_steps` sampled batches."""

    def train(state, buffer, key):
        def body(s, k):
            return train_step(s, replay.sample(buffer, k, batch_size))

        state, losses = jax.lax.scan(body, state, jax.random.split(key, num_steps))
        return state, jax.tree_util.tree_map(jnp.mean, losses)

    return train


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
                       progress: bool = True) -> dict[str, Any]:
    """Train `config` in `workdir` until `iterations` or `time_budget`; returns a summary dict."""
    t_start = time.time()
    os.makedirs(workdir, exist_ok=True)
    game = config.make_game()
    net = make_network(config, game)
    apply = make_apply(net)
    steps = config.selfplay_steps or game.max_game_length
    optimizer = make_optimizer(config, config.iterations * config.train_steps)

    checkpointer = Checkpointer(workdir, config.keep_checkpoints)
    init_key, run_key = jax.random.split(jax.random.PRNGKey(config.seed))
    run = RunState(
        train=init_train_state(init_variables(net, game, init_key), optimizer),
        iteration=jnp.int32(0),
        key=run_key,
    )
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
    with open(os.path.join(workdir, "config.json"), "w") as f:
        f.write(config.to_json())

    # ---- jitted pieces ---------------------------------------------------------------------
    selfplay_spec = SearchSpec.from_config(config, explore=True)
    selfplay = jax.jit(make_selfplay(game, selfplay_spec, apply, steps, config.sample_moves))
    add = jax.jit(replay.add, donate_argnums=0)
    train = jax.jit(make_train_iteration(
        make_train_step(net, optimizer, config.weight_decay),
        config.train_batch_size,
        config.train_steps,
    ))
    eval_spec = SearchSpec.from_config(config)
    agent = make_search_agent(game, eval_spec, apply)
    agent_eps = make_search_agent(game, eval_spec, apply, epsilon=config.eval_epsilon)
    mcts = make_search_agent(game, SearchSpec.pure_mcts(2 * config.num_simulations), None)
    vs_previous = make_match(game, agent_eps, agent_eps, config.eval_games)
    vs_mcts = make_match(game, agent, mcts, config.eval_games)

    rows = math.ceil(config.replay_games * game.max_game_length / config.batch_games)
    buffer = replay.init(rows, config.batch_games, game.observation_shape, game.num_actions)
    states = init_states(game, config.batch_games)
    min_replay = config.min_replay or config.train_batch_size
    previous = run.train.variables

    metrics = _Metrics(workdir)
    bar = _progress(progress, int(run.iteration), config.iterations)
    totals = dict(games=0, positions=0)
    last: dict[str, Any] = {}
    stop_reason = "iterations"
    try:
        while int(run.iteration) < config.iterations:
            if config.time_budget and time.time() - t_start > 60 * config.time_budget:
                stop_reason = "time_budget"
                break
            it = int(run.iteration) + 1
            k_play, k_train, k_eval = jax.random.split(jax.random.fold_in(run.key, it), 3)
            t0 = time.time()
            states, traj = selfplay(run.train.variables, k_play, states)
            buffer = add(buffer, traj)
            ready = int(replay.num_ready(buffer))
            games_done = int(traj.done.sum())
            t1 = time.time()
            values: dict[str, Any] = dict(
                games=games_done,
                positions=steps * config.batch_games,
                replay_ready=ready,
                selfplay_seconds=t1 - t0,
                games_per_second=games_done / (t1 - t0),
                positions_per_second=steps * config.batch_games / (t1 - t0),
            )
            train_state = run.train
            if ready >= min_replay and config.train_steps > 0:
                train_state, losses = train(run.train, buffer, k_train)
                losses = {f"loss/{k}": float(v) for k, v in losses._asdict().items()}
                if not all(math.isfinite(v) for v in losses.values()):
                    raise NonFiniteLossError(
                        f"iteration {it}: non-finite loss {losses}; the last checkpoint in "
                        f"{workdir} is intact (try a lower learning_rate)"
                    )
                values.update(losses)
                values["train_seconds"] = time.time() - t1
            run = run.replace(train=train_state, iteration=jnp.int32(it))
            totals["games"] += games_done
            totals["positions"] += values["positions"]

            if config.eval_interval and it % config.eval_interval == 0:
                values.update(_evaluate(run.train.variables, previous, k_eval, vs_previous, vs_mcts))
                previous = run.train.variables
            if it % config.checkpoint_interval == 0:
                checkpointer.save(it, run, config)
            metrics.write(it, values)
            last = values
            bar.update(values)
        final = int(run.iteration)
        if final not in checkpointer.steps():
            checkpointer.save(final, run, config)
        checkpointer.wait()
    finally:
        bar.close()
        metrics.close()
        checkpointer.close()
    summary = dict(
        game=config.game,
        game_options=dict(config.game_options),
        iterations=int(run.iteration),
        stopped_by=stop_reason,
        games=totals["games"],
        positions=totals["positions"],
        wall_seconds=round(time.time() - t_start, 1),
        parameters=num_parameters(run.train.variables),
        workdir=os.path.abspath(workdir),
        last=last,
    )
    with open(os.path.join(workdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def _evaluate(variables, previous, key, vs_previous, vs_mcts) -> dict[str, Any]:
    k_prev, k_mcts = jax.random.split(key)
    out = {}
    for name, match, opponent, k in (
        ("previous", vs_previous, previous, k_prev),
        ("mcts", vs_mcts, None, k_mcts),
    ):
        res = MatchResult.from_returns(*match(variables, opponent, k))
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
