"""Expert Iteration (seed 002, Anthony et al. 2017): the apprentice plays, the expert labels.

Each round (`make_round`):
1. the apprentice (the network's policy, no search, sampling at temperature 1) plays B games
   from the start in lock-step, `game.max_game_length` plies (finished games stay put);
2. from each game `positions_per_game` positions are drawn uniformly (without replacement) among
   those before its end, so the positions of a round are uncorrelated (a game shorter than
   that gives its first draw again for the rest: `draw_positions`);
3. the expert searches all drawn positions at once: `mctx.search` with ExIt's tree policy
   (`azjax.selection`: UCT plus w_a pi(a|s,tau) / (n(s,a) + 1)), leaf values from the evaluator
   (the network, or value 0 with `evaluator=uniform`) blended with rollouts as in search.py:
   v_leaf = (1 - lambda) v_net + lambda z_rollout where a rollout happened (p = rollout_prob).
   Three settings of that blend are the paper's warm start: vanilla MCTS (`evaluator=uniform
   exit_prior_weight=0 rollout_policy=random rollout_prob=1 rollout_weight=1`), policy-guided
   N-MCTS (`evaluator=network rollout_weight=1`) and policy-and-value N-MCTS (lambda < 1);
4. targets: policy TPT (the root visit distribution) or CAT (one-hot of the most visited move);
   value the apprentice game's outcome for the position's mover (`rollout`, a one-sample Monte
   Carlo estimate of V^apprentice) or the expert's root value (`search`).

`make_iteration(config, mesh)` builds the loop's `Iteration` (azjax/loop.py) from rounds: `play`
writes the round's positions into the replay buffer as one-position games that end at once
(done, returns set so the settled value is the target), so sampling and the learner are the
AlphaZero ones. Datasets (`config.dataset`):
- batch: the buffer holds exactly one round; each iteration trains on its own positions;
- online_buffer: the latest `dataset_size` positions (FIFO);
- online_grow: every position so far; each iteration plays max(1, round(dataset_growth * size /
  round_size)) rounds (the paper's dataset grown by 10% each iteration), FIFO only once
  `dataset_size` positions are held.
The apprentice keeps its weights across iterations unless `retrain_from_scratch`.

Network evaluations per iteration are logged (`exit/network_evaluations`, the paper's x-axis):
apprentice moves played plus (num_simulations + 1) per expert position with the network
evaluator; steps of policy rollouts are not counted.

B is `batch_games`, K `positions_per_game`, A the game's number of actions.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from azjax import early_stopping, parallel, replay, symmetry, training
from azjax.checkpoint import RunState, init_run
from azjax.config import Config
from azjax.loop import Iteration, make_sampler
from azjax.network import init_variables, make_apply, make_network
from azjax.play_stats import VARIETY_PLIES, observation_hashes, variety
from azjax.search import make_evaluator, make_model, within_budget
from azjax.selection import uct_policy
from azjax.selfplay import init_states
from games.base import Game


@dataclasses.dataclass(frozen=True)
class ExpertSpec:
    """How the expert searches (module doc, step 3)."""

    num_simulations: int = 100
    c_uct: float = 0.05
    prior_weight: float = 100.0
    temperature: float = 0.1
    evaluator: str = "network"  # "network" | "uniform"
    rollout_policy: str = "none"  # "none" | "random" | "policy"
    rollout_prob: float = 0.0
    rollout_weight: float = 0.5
    rollout_sample: bool = False

    @staticmethod
    def from_config(config: Config, **overrides) -> ExpertSpec:
        values = dict(
            num_simulations=config.num_simulations,
            c_uct=config.exit_c_uct,
            prior_weight=config.exit_prior_weight,
            temperature=config.exit_prior_temperature,
            evaluator=config.evaluator,
            rollout_policy=config.rollout_policy,
            rollout_prob=config.rollout_prob,
            rollout_weight=config.rollout_weight,
            rollout_sample=config.rollout_sample,
        )
        return ExpertSpec(**{**values, **overrides})

    @staticmethod
    def vanilla(num_simulations: int, c_uct: float = 0.25) -> ExpertSpec:
        """Vanilla MCTS: plain UCT, uniform priors, a random rollout from every new leaf."""
        return ExpertSpec(
            num_simulations=num_simulations,
            c_uct=c_uct,
            prior_weight=0.0,
            evaluator="uniform",
            rollout_policy="random",
            rollout_prob=1.0,
            rollout_weight=1.0,
        )

    @property
    def network_evaluations(self) -> int:
        """Evaluator calls per searched position (root + one per simulation), 0 without it."""
        return self.num_simulations + 1 if self.evaluator == "network" else 0


def make_expert(game: Game, spec: ExpertSpec, apply: Callable | None) -> Callable:
    """expert(variables, key, states[N]) -> mctx.PolicyOutput (action_weights: n(s,a)/n(s)).

    Follows search.py's conventions: values from the player to move, discount -1 between plies
    and 0 after the end (an illegal move, which the tree policy never picks, ends as a loss).
    N positions whose trees would take more than `search.tree_bytes()` are searched in chunks,
    as `make_search` does (`search.within_budget`): a round's B x K positions
    at hundreds of simulations were one search of tens of GiB.
    """
    model = make_model(game, spec, apply)

    def expert(variables, key, states):
        k_root, k_search = jax.random.split(key)
        root = model.root_fn(variables, k_root, states)
        return uct_policy(
            variables,
            k_search,
            root,
            model.recurrent_fn,
            spec.num_simulations,
            invalid_actions=~jax.vmap(game.legal_mask)(states),
            c_uct=spec.c_uct,
            prior_weight=spec.prior_weight,
            temperature=spec.temperature,
        )

    return within_budget(game, expert, spec.num_simulations)


def make_expert_agent(game: Game, spec: ExpertSpec, apply: Callable | None) -> Callable:
    """An arena agent (azjax/arena.py): act(variables, key, states[B]) -> the expert's most
    visited move, int32[B]."""
    expert = make_expert(game, spec, apply)

    def act(variables, key, states):
        return expert(variables, key, states).action

    return act


class Apprentice(NamedTuple):
    """B games of the apprentice, T = max_game_length plies (positions before each move)."""

    states: object  # game states [T, B]
    alive: jax.Array  # bool[T, B], the position is before its game's end
    returns: jax.Array  # float32[B, 2], final returns


def make_apprentice_play(game: Game, apply: Callable, num_games: int) -> Callable:
    """play(variables, key) -> Apprentice: B games from the start, each move sampled from the
    network's policy over legal moves."""
    policy = make_evaluator(game, "network", apply)

    def play(variables, key):
        def body(states, k):
            logits, _ = policy(variables, states)
            action = jax.random.categorical(k, logits).astype(jnp.int32)
            alive = ~jax.vmap(game.is_terminal)(states)
            return jax.vmap(game.step)(states, action), (states, alive)  # terminal: absorbing

        keys = jax.random.split(key, game.max_game_length)
        final, (states, alive) = jax.lax.scan(body, init_states(game, num_games), keys)
        return Apprentice(states, alive, jax.vmap(game.returns)(final))

    return play


def draw_positions(key, alive: jax.Array, k: int) -> jax.Array:
    """int32[K, B] plies: K distinct plies of each game drawn uniformly among its `alive` ones
    (alive bool[T, B]); a game with fewer than K live plies repeats its first draw."""
    u = jnp.where(alive, jax.random.uniform(key, alive.shape), -1.0)  # [T, B]
    _, plies = jax.lax.top_k(u.T, k)  # [B, K]
    ok = jnp.take_along_axis(alive.T, plies, axis=1)
    plies = jnp.where(ok, plies, plies[:, :1])
    return plies.T.astype(jnp.int32)


class Labelled(NamedTuple):
    """A round's expert-labelled positions, N = K * B (row-major over [K, B])."""

    obs: jax.Array  # float32[N, H, W, C]
    tpt: jax.Array  # float32[N, A], root visit distribution, network frame
    cat: jax.Array  # float32[N, A], one-hot of the most visited move, network frame
    outcome: jax.Array  # float32[N], the apprentice game's outcome for the mover
    search_value: jax.Array  # float32[N], the expert's root value for the mover
    player: jax.Array  # int32[N], the mover
    ply: jax.Array  # int32[N], plies played before the position
    legal: jax.Array  # bool[N, A], legal moves, network frame
    apprentice_moves: jax.Array  # int32[], moves the apprentice played (network evaluations)


def make_round(
    game: Game, spec: ExpertSpec, apply: Callable, num_games: int, positions_per_game: int
) -> Callable:
    """label(variables, key) -> Labelled: steps 1-4 of the module doc for B = `num_games`."""
    play = make_apprentice_play(game, apply, num_games)
    expert = make_expert(game, spec, apply)
    k = positions_per_game

    def label(variables, key):
        k_play, k_draw, k_expert = jax.random.split(key, 3)
        games = play(variables, k_play)
        plies = draw_positions(k_draw, games.alive, k)  # [K, B]
        cols = jnp.arange(num_games)[None, :]
        states = jax.tree_util.tree_map(
            lambda x: x[plies, cols].reshape((k * num_games,) + x.shape[2:]), games.states
        )
        out = expert(variables, k_expert, states)
        to_net = jax.vmap(game.actions_to_policy)
        player = jax.vmap(game.current_player)(states)
        returns = jnp.tile(games.returns, (k, 1))  # [N, 2], row-major over [K, B]
        onehot = jax.nn.one_hot(out.action, game.num_actions)
        root_value = out.search_tree.summary().value
        return Labelled(
            obs=jax.vmap(game.observe)(states),
            tpt=to_net(states, out.action_weights),
            cat=to_net(states, onehot),
            outcome=jnp.take_along_axis(returns, player[:, None], axis=1)[:, 0],
            search_value=root_value,
            player=player,
            ply=states.num_moves,
            legal=to_net(states, jax.vmap(game.legal_mask)(states).astype(jnp.float32)) > 0,
            apprentice_moves=jnp.sum(games.alive, dtype=jnp.int32),
        )

    return label


def as_trajectory(
    data: Labelled, *, policy_target: str, value_target: str, num_games: int
) -> replay.Trajectory:
    """The positions as K rows of B one-position games that end at once, their returns set so
    that the buffer settles each position's value to the chosen target."""
    policy = {"tpt": data.tpt, "cat": data.cat}[policy_target]
    value = {"rollout": data.outcome, "search": data.search_value}[value_target]
    returns = jnp.where(
        data.player[:, None] == jnp.arange(2)[None, :], value[:, None], -value[:, None]
    )  # [N, 2]

    def rows(x):
        return x.reshape((-1, num_games) + x.shape[1:])

    return replay.Trajectory(
        obs=rows(data.obs),
        policy=rows(policy),
        player=rows(data.player),
        done=rows(jnp.ones_like(value, bool)),
        returns=rows(returns),
    )


class ExItStats(NamedTuple):
    """What `play` reports: the loop's PlayStats fields, then ExIt's."""

    games: jax.Array  # int32[], apprentice games played
    ready: jax.Array  # int32[], positions in the dataset
    distinct: jax.Array  # int32[len(VARIETY_PLIES)], distinct positions at each ply
    reached: jax.Array  # int32[len(VARIETY_PLIES)], positions at each ply
    positions: jax.Array  # int32[], expert-labelled positions added
    apprentice_moves: jax.Array  # int32[], moves the apprentice played (a network call each)
    rounds: jax.Array  # int32[], rounds played
    # the expert's network evaluations, counted on the host (a Python int: in float32 a round of
    # 4096 x 4 positions at 1,600 simulations, 26.2M, was no longer exact)
    expert_evaluations: int = 0
    surprise: None = None  # the loop's PlayStats field: an ExIt run keeps no policy surprises
    outcomes: None = None  # the loop's PlayStats field: ExIt's rounds are not counted by result
    heldout: None = None  # the loop's PlayStats field: ExIt's datasets are not split by it
    resigned: None = None  # the loop's PlayStats field: ExIt's apprentice games never resign
    resign_checked: None = None
    resign_wrong: None = None
    by_game: None = None  # the loop's PlayStats field: ExIt trains on one game

    def metrics(self) -> dict[str, float]:
        """The ExIt metrics the loop logs beside its own."""
        return {
            "exit/positions": int(self.positions),
            "exit/network_evaluations": int(self.apprentice_moves) + int(self.expert_evaluations),
            "exit/rounds": int(self.rounds),
        }


class RoundSummary(NamedTuple):
    """What a round's `ExItStats` are counted from, split over the devices as its games are, so
    that the round's program ends without a collective (`azjax.parallel`'s module doc)."""

    ply: jax.Array  # int32[K, B], plies played before each labelled position
    hashes: jax.Array  # uint32[K, B], `observation_hashes` of each
    apprentice_moves: jax.Array  # int32[D], moves the apprentice played on each device


# the validation loss of an early-stopped apprentice (`config.early_stopping`) is measured on
# this many draws (rounded up to a multiple of the devices) from the held-out game slots'
# positions, the same draws after every epoch of an iteration, so that the epochs are compared
# on the same positions
VALIDATION_POSITIONS = 1024


def validation_columns(batch_games: int, fraction: float) -> np.ndarray:
    """bool[B]: the game slots (the buffer's columns) whose positions early stopping holds out
    for its validation loss: round(fraction * B) of them, at least one and at most B - 1,
    spread evenly over the B (so over the devices' blocks of them). A slot holds out every
    position written to it, all of a game's together, for the whole run."""
    if batch_games < 2:
        raise ValueError(f"a validation split needs batch_games >= 2, got {batch_games}")
    n = min(batch_games - 1, max(1, round(fraction * batch_games)))
    mask = np.zeros(batch_games, bool)
    mask[((np.arange(n) + 0.5) * batch_games / n).astype(int)] = True
    return mask


def _iteration_keys(run: RunState, iteration) -> jax.Array:
    """[3] keys (play, train, eval) of `iteration`, as azjax/loop.py derives them."""
    return jax.random.split(jax.random.fold_in(run.key, iteration), 3)


def buffer_rows(config: Config) -> int:
    """Rows of B positions the dataset holds."""
    k = config.positions_per_game
    if config.dataset == "batch":
        return k
    return max(k, math.ceil(config.dataset_size / config.batch_games))


def rounds_for(config: Config, ready: int) -> int:
    """Rounds to play this iteration when the dataset holds `ready` positions."""
    if config.dataset != "online_grow":
        return 1
    per_round = config.batch_games * config.positions_per_game
    fit = max(1, buffer_rows(config) // config.positions_per_game)
    return min(fit, max(1, round(config.dataset_growth * ready / per_round)))


def make_iteration(config: Config, mesh: Mesh) -> Iteration:
    """The jitted ExIt pieces of `config` on `mesh`, with the loop's `Iteration` interface.

    `states` are carried but unused (every round starts its games afresh). With D devices each
    plays and labels B / D of a round's games under `shard_map` with the key `fold_in(key,
    device index)`, as self-play does (`azjax.selfplay`), and the buffer is split along B.
    """
    parallel.check_divisible(
        mesh, batch_games=config.batch_games, train_batch_size=config.train_batch_size
    )
    game = config.make_game()
    net = make_network(config, game)
    apply = make_apply(net)
    spec = ExpertSpec.from_config(config)
    b, k = config.batch_games, config.positions_per_game
    d = parallel.num_devices(mesh)
    optimizer = training.make_optimizer(config)
    label = make_round(game, spec, apply, b // d, k)  # one device's share of the games

    rep = parallel.replicated(mesh)
    buffer_sh = parallel.shardings(mesh, replay.partition_specs(parallel.AXIS))
    column = P(None, parallel.AXIS)
    summary_specs = RoundSummary(column, column, P(parallel.AXIS))

    def device_round(variables, key):
        """Steps 1-4 for this device's B / D games, with its own key."""
        data = label(variables, jax.random.fold_in(key, jax.lax.axis_index(parallel.AXIS)))
        traj = as_trajectory(
            data,
            policy_target=config.policy_target,
            value_target=config.value_target,
            num_games=b // d,
        )  # [K, B / D, ...]
        summary = RoundSummary(
            data.ply.reshape(k, b // d),
            observation_hashes(data.obs).reshape(k, b // d),
            data.apprentice_moves[None],
        )
        return traj, summary

    # Each device plays and labels its games under shard_map and talks to no other; the
    # positions and the summary stay split (check_vma=False: mctx's loops mix per-device and
    # replicated values in one carry).
    split_round = jax.shard_map(
        device_round,
        mesh=mesh,
        in_specs=(P(), P()),
        out_specs=(column, summary_specs),
        check_vma=False,
    )

    def one_round(run, buffer, index):
        key = jax.random.fold_in(_iteration_keys(run, run.iteration + 1)[0], index)
        traj, summary = split_round(run.train.variables, key)
        return replay.add(buffer, traj), summary

    round_fn = jax.jit(
        one_round,
        in_shardings=(rep, buffer_sh, rep),
        out_shardings=(buffer_sh, parallel.shardings(mesh, summary_specs)),
        donate_argnums=1,
    )

    def round_stats(summary: RoundSummary, buffer) -> ExItStats:
        """A round's statistics: a short program of its own, after the round's."""
        distinct, reached = variety(summary.ply, summary.hashes)
        return ExItStats(
            games=jnp.int32(b),
            ready=replay.num_ready(buffer),
            distinct=distinct,
            reached=reached,
            positions=jnp.int32(k * b),
            apprentice_moves=jnp.sum(summary.apprentice_moves),
            rounds=jnp.int32(1),
        )

    stats_fn = jax.jit(round_stats, out_shardings=rep)
    ready_fn = jax.jit(replay.num_ready, out_shardings=rep)

    def play(run, states, buffer):
        total, played = None, []
        rounds = rounds_for(config, int(parallel.fetch(ready_fn(buffer))))
        for index in range(rounds):
            buffer, summary = parallel.settle(round_fn(run, buffer, jnp.int32(index)), mesh)
            stats = stats_fn(summary, buffer)
            if total is None:
                total = stats
            else:
                summed = jax.tree_util.tree_map(jnp.add, total, stats)
                total = summed._replace(ready=stats.ready)
            if rounds > 1:  # fetched after the rounds: an accelerator queues them meanwhile
                played.append((summary.ply, summary.hashes))
        if played:  # a position drawn in two rounds is one position: count over all of them
            played = parallel.fetch(played)
            ply, hashes = (np.concatenate([p[i].reshape(-1) for p in played]) for i in (0, 1))
            distinct = [len(np.unique(hashes[ply == k])) for k in VARIETY_PLIES]
            total = total._replace(distinct=jnp.asarray(distinct, jnp.int32))
        total = total._replace(expert_evaluations=rounds * spec.network_evaluations * k * b)
        return states, buffer, total

    play.round, play.stats = round_fn, stats_fn  # the two jitted programs of a round
    augment = symmetry.symmetries(game) if config.augment else None
    held_out = validation_columns(b, config.validation_fraction) if config.early_stopping else None
    train_step = training.make_train_step(
        net, optimizer, config.weight_decay, value_weight=config.value_weight
    )
    if held_out is None:
        learner = training.make_learner(
            train_step,
            make_sampler(config.train_batch_size, mesh, augment=augment),
            max(config.train_steps, 1),
        )
    else:  # one step a call: an epoch is as many steps as its training set asks
        learner = training.make_learner(
            train_step,
            make_sampler(config.train_batch_size, mesh, augment=augment, columns=~held_out),
            1,
            per_call=1,
        )
    chunk = jax.jit(
        learner.chunk,
        in_shardings=(rep, buffer_sh, rep, rep),
        out_shardings=(rep, rep),
        donate_argnums=0,
    )

    def start_of(run):
        """(the learner's key, the train state it starts from) of the iteration after `run`."""
        k_learn, k_init = jax.random.split(_iteration_keys(run, run.iteration + 1)[1])
        if not config.retrain_from_scratch:
            return k_learn, run.train
        return k_learn, training.init_train_state(init_variables(net, game, k_init), optimizer)

    start_fn = jax.jit(start_of, out_shardings=rep)

    settle = functools.partial(parallel.settle, mesh=mesh)
    copy = jax.jit(lambda tree: jax.tree_util.tree_map(jnp.copy, tree), out_shardings=rep)

    def learn(run, buffer, lr_scale=1.0):
        k_learn, start = start_fn(run)
        scale = parallel.put_scalar(lr_scale, mesh)
        if held_out is None:
            return training.learn(
                learner, chunk, start, buffer, k_learn, lr_scale=scale, settle=settle
            )
        return early_stopped(start, buffer, k_learn, scale)

    if held_out is not None:
        draws = -(-VALIDATION_POSITIONS // d) * d  # a whole number on each device
        validation_sample = make_sampler(draws, mesh, columns=held_out)

        def validation_loss(variables, buffer, key):
            value, policy, _ = training.inference_losses(
                net, variables, validation_sample(buffer, key)
            )
            return config.value_weight * value + policy

        validate_fn = jax.jit(validation_loss, in_shardings=(rep, buffer_sh, rep))
        training_ready = jax.jit(
            lambda buffer: jnp.sum(buffer.ready & jnp.asarray(~held_out), dtype=jnp.int32),
            in_shardings=(buffer_sh,),
            out_shardings=rep,
        )
        call_keys = jax.jit(
            lambda key, e, i: learner.split(jax.random.fold_in(jax.random.fold_in(key, e), i))
        )

    def early_stopped(start, buffer, key, scale):
        """`early_stopping.train` over epochs of the training columns' positions, each of
        ceil(positions / train_batch_size) steps; the validation loss on the same
        VALIDATION_POSITIONS draws of the held-out columns after each epoch."""
        k_val, k_train = jax.random.split(key)
        positions = int(parallel.fetch(training_ready(buffer)))
        steps = max(1, math.ceil(positions / config.train_batch_size))

        def epoch(state, e):
            slices = (call_keys(k_train, e, i)[0] for i in range(steps))
            state, total = training.run_calls(
                chunk, state, buffer, slices, lr_scale=scale, settle=settle
            )
            return state, jax.tree_util.tree_map(lambda x: x / steps, total)

        def validate(state):
            return parallel.fetch(settle(validate_fn(state.variables, buffer, k_val)))

        return early_stopping.train(
            epoch,
            validate,
            copy,
            start,
            patience=config.early_stopping,
            max_epochs=config.max_epochs,
        )

    return Iteration(
        init_run=jax.jit(lambda: init_run(config), out_shardings=rep),
        init_states=jax.jit(
            functools.partial(init_states, game, b),
            out_shardings=parallel.sharding(mesh, P(parallel.AXIS)),
        ),
        init_buffer=jax.jit(
            functools.partial(
                replay.init, buffer_rows(config), b, game.observation_shape, game.num_actions
            ),
            out_shardings=buffer_sh,
        ),
        play=play,
        learn=learn,
        advance=jax.jit(lambda iteration: iteration + 1, out_shardings=rep),
        eval_key=jax.jit(lambda run: _iteration_keys(run, run.iteration)[2], out_shardings=rep),
        copy=copy,
        min_replay=config.min_replay or 1,
    )
