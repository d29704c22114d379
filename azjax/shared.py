"""Shared learning (seed 004, section 3.6, Figure 4): one trunk trained on several games at once.

    config = azjax.config.load("connect_four", {"games": "connect_four,othello:size=6"})
    per_game = game_configs(config)            # {"connect_four": Config, "othello": Config}
    fns = make_iteration(config, mesh)         # the loop's Iteration, over both games

The network is one variables tree (one optimizer trains it; one checkpoint holds it):

    {"params" | "batch_stats": {"trunk": {ResidualBlock_0.., }, "<game>": {ConvBlock_0, ..}, ..}}

`trunk` holds the residual blocks, shared by every game; each game keeps its own input block
(`ConvBlock_0`: the games' input planes may differ) and its own policy and value heads. A game's
*view*, `view(variables, name)`, is `{**tree[name], **tree["trunk"]}`: exactly the variables of
the single-game `PolicyValueNet` of that game, so self-play, search, training, gating and
evaluation run the existing single-game code unchanged on it, and `merge` puts what training
returns back into the shared tree.

Training: each iteration plays every game's self-play (each game its own states and replay
buffer), then learns from one game's replay after the other in a random order (seed 004:
"updated using ... one game and then ... another game. The order of update is randomized"),
`train_steps` steps each. Each game keeps its own optimizer state over its view, as seed 004's
two networks sharing layers each had theirs: a step on one game's batch moves the trunk and
that game's input block and heads, and nothing of the other games'.

Hyperparameters are the run's for every game (the first game's configs/ defaults, then flags);
each game's options come from the `games` list, NAME[:OPT=VALUE,...] separated by commas, a
config's options for each game under them (`with_default_options`, `train.py --config`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

import games
from azjax import flags, loop, parallel
from azjax.checkpoint import RunState, run_keys
from azjax.config import Config
from azjax.gating import GateState, init_gate
from azjax.network import init_variables, make_network
from azjax.play_stats import HeldOut, PlayStats
from azjax.training import TrainState, make_optimizer

TRUNK = "trunk"  # the key of the shared residual blocks in each collection
COLLECTIONS = ("params", "batch_stats")


# ---- the list of games ---------------------------------------------------------------------------
def parse_games(text: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """'connect_four,othello:size=6' -> (("connect_four", {}), ("othello", {"size": 6})).

    A game is NAME[:OPT=VALUE,...]; an item without '=' before its ':' starts the next game, so
    options may hold commas too ('connect_four:rows=5,cols=6,othello'). ValueError (one line)
    for an unknown game, an unknown option or bad value, a game given twice, or fewer than two."""
    if not isinstance(text, str):  # a config file's "games": a JSON list, say
        raise ValueError(f"games must be a str like 'connect_four,othello:size=6', got {text!r}")
    out: list[tuple[str, dict[str, Any]]] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        head, colon, rest = item.partition(":")
        if "=" in head:  # another option of the game before
            if not out:
                raise ValueError(f"games: {text!r} must start with a game name, got {item!r}")
            _add_option(out[-1], head, text)
            continue
        if head not in games.names():
            raise ValueError(
                f"games: unknown game {head!r} in {text!r}; known games: {', '.join(games.names())}"
            )
        if head in (name for name, _ in out):
            raise ValueError(f"games: {head} is given twice in {text!r}; give each game once")
        out.append((head, {}))
        if colon:
            _add_option(out[-1], rest, text)
    if len(out) < 2:
        raise ValueError(f"games: give two games or more (e.g. connect_four,othello), got {text!r}")
    for name, options in out:
        games.make(name, **options)  # the game names a bad value itself
    return tuple(out)


def _add_option(game: tuple[str, dict[str, Any]], item: str, text: str) -> None:
    name, options = game
    option, _, value = (s.strip() for s in item.partition("="))
    fields = flags.option_fields(name)
    if option not in fields:
        raise ValueError(
            f"games: {option!r} is not an option of {name} (in {text!r}); its options: "
            f"{', '.join(fields) or 'none'}"
        )
    options[option] = flags.parse_value(
        f"games {name}:{option}", value, type(fields[option].default)
    )


def with_default_options(text: str, defaults: dict[str, dict[str, Any]]) -> str:
    """The list `text` with each game's options from `defaults` ({game: {option: value}}) under
    the ones the list gives: 'othello:size=6,connect_four' with {"othello": {"mobility": True}}
    -> 'othello:mobility=true,size=6,connect_four' (a config's game options in a shared run)."""
    items = []
    for name, options in parse_games(text):
        merged = {**defaults.get(name, {}), **options}
        written = ",".join(f"{k}={flags.value_text(v)}" for k, v in merged.items())
        items.append(f"{name}:{written}" if written else name)
    return ",".join(items)


def game_configs(config: Config) -> dict[str, Config]:
    """{game name: its single-game Config}: every setting of `config` with the game and options
    of each entry of `games`; {config.game: config} for a single-game run."""
    if not config.games:
        return {config.game: config}
    return {
        name: dataclasses.replace(config, game=name, game_options=options, games="")
        for name, options in parse_games(config.games)
    }


def check_game(config: Config, name: str | None, where: str) -> Config:
    """The single-game config of game `name` in the run of `config` (None: its only game); a
    ValueError naming the games it has where it did not train `name`."""
    configs = game_configs(config)
    if name is None:
        if len(configs) > 1:
            raise ValueError(f"{where}: give game=NAME: the run trained {', '.join(configs)}")
        return config
    if name not in configs:
        raise ValueError(f"{where}: the run did not train {name}; it has {', '.join(configs)}")
    return configs[name]


# ---- the variables tree and a game's view of it -------------------------------------------------
def in_trunk(module: str) -> bool:
    """Whether a top-level module of a PolicyValueNet is shared: the residual blocks."""
    return module.startswith("ResidualBlock_")


def view(variables: Any, name: str) -> dict:
    """Game `name`'s network variables, shaped like a single-game PolicyValueNet's."""
    return {c: {**variables[c][name], **variables[c][TRUNK]} for c in COLLECTIONS}


def merge(variables: Any, name: str, game_variables: Any) -> dict:
    """`variables` with the trunk and game `name`'s own modules taken from `game_variables`
    (a view, e.g. after a training step)."""
    out = {}
    for c in COLLECTIONS:
        mine = game_variables[c]
        out[c] = {
            **variables[c],
            TRUNK: {k: v for k, v in mine.items() if in_trunk(k)},
            name: {k: v for k, v in mine.items() if not in_trunk(k)},
        }
    return out


def init_shared_variables(config: Config, key) -> dict:
    """A fresh shared network: each game's PolicyValueNet initialised with its own key, the
    trunk taken from the first game's."""
    configs = game_configs(config)
    keys = jax.random.split(key, len(configs))
    nets = {
        name: init_variables(make_network(c, c.make_game()), c.make_game(), k)
        for (name, c), k in zip(configs.items(), keys)
    }
    first = next(iter(nets.values()))
    return {
        c: {
            TRUNK: {k: v for k, v in first[c].items() if in_trunk(k)},
            **{n: {k: v for k, v in net[c].items() if not in_trunk(k)} for n, net in nets.items()},
        }
        for c in COLLECTIONS
    }


def init_run(config: Config) -> RunState:
    """The state a shared run starts from (pure): the shared network, one optimizer state per
    game over its view, and the gate's best network under gating."""
    init_key, run_key = run_keys(config)
    variables = init_shared_variables(config, init_key)
    opt_state = {
        name: make_optimizer(c).init(view(variables, name)["params"])
        for name, c in game_configs(config).items()
    }
    return RunState(
        train=TrainState(variables=variables, opt_state=opt_state, step=jnp.int32(0)),
        iteration=jnp.int32(0),
        key=run_key,
        gate=init_gate(variables) if config.gating else None,
    )


# the run key's stream of the games' keys: an iteration (int32) is never this. Game i's key was
# fold_in(run key, i), the base of the run's own iteration i, so that game 1's iteration-2 keys
# were the shared in-loop evaluation's keys after iteration 1 (JAX's split is fold_in)
GAMES_STREAM = 2**32 - 1


def view_run(run: RunState, name: str, index: int) -> RunState:
    """Game `name`'s single-game RunState: its view of the network (and of the gate's best),
    its optimizer state, and a key of its own (folded with its `index` in the list, from the
    run key's `GAMES_STREAM`)."""
    gate = run.gate
    if gate is not None:
        gate = GateState(view(gate.best, name), gate.best_iteration, gate.accepted, gate.gates)
    train = run.train
    return RunState(
        train=TrainState(view(train.variables, name), train.opt_state[name], train.step),
        iteration=run.iteration,
        key=jax.random.fold_in(jax.random.fold_in(run.key, GAMES_STREAM), index),
        gate=gate,
    )


def merge_train(train: TrainState, name: str, trained: TrainState) -> TrainState:
    """The shared TrainState after game `name`'s learner returned `trained` (its view's)."""
    return TrainState(
        variables=merge(train.variables, name, trained.variables),
        opt_state={**train.opt_state, name: trained.opt_state},
        step=trained.step,
    )


# ---- functions of (network, other network, key), run per game ---------------------------------
def per_game(config: Config, make: Callable[[Config], Callable]) -> Callable:
    """fn(variables, other, key, **options) -> {game: f(view(variables), view(other), key_game,
    **options)}, where f = make(game config) takes two single-game networks (an evaluation, a
    gate match); `other` may be None."""
    fns = {name: make(c) for name, c in game_configs(config).items()}

    def run(variables, other, key, **options) -> dict[str, Any]:
        return {
            name: f(
                view(variables, name),
                None if other is None else view(other, name),
                jax.random.fold_in(key, i),
                **options,
            )
            for i, (name, f) in enumerate(fns.items())
        }

    return run


# ---- one iteration over every game ---------------------------------------------------------------
def update_order(seed: int, iteration: int, num_games: int) -> list[int]:
    """The games' order of updates in `iteration`: a permutation drawn from the run's seed and
    the iteration on the host (the same on every process, and again on resume)."""
    return [int(i) for i in np.random.default_rng([seed, iteration]).permutation(num_games)]


def _combine(stats: list[PlayStats]) -> PlayStats:
    """One iteration's PlayStats over the games: games and variety summed, `ready` the least
    (the learner waits for every game's replay), the policy surprise the games' mean, the
    resignations summed, the held-out losses the games' means (as loss/... are) over counts
    summed. No outcomes: a first player's win share or a draw share over games as unlike as
    Tic-Tac-Toe and Hex means nothing, so a shared run logs them per game only (`play` keeps
    each game's PlayStats in `by_game`)."""
    surprises = [s.surprise for s in stats if s.surprise is not None]
    held = [s.heldout for s in stats if s.heldout is not None]
    resigned = [s for s in stats if s.resigned is not None]
    return PlayStats(
        games=sum(s.games for s in stats),
        ready=jnp.min(jnp.stack([s.ready for s in stats])),
        distinct=sum(s.distinct for s in stats),
        reached=sum(s.reached for s in stats),
        surprise=jnp.mean(jnp.stack(surprises)) if surprises else None,
        heldout=_combine_heldout(held) if held else None,
        resigned=sum(s.resigned for s in resigned) if resigned else None,
        resign_checked=sum(s.resign_checked for s in resigned) if resigned else None,
        resign_wrong=sum(s.resign_wrong for s in resigned) if resigned else None,
    )


def _combine_heldout(held: list[HeldOut]) -> HeldOut:
    """The games' held-out losses: each the mean over the games that had such positions (a
    game's sample of none means nothing; for a policy term, none with a policy target), the
    counts summed."""

    def mean(losses, counts):
        has = jnp.stack(counts) > 0
        return jnp.sum(jnp.where(has, jnp.stack(losses), 0.0)) / jnp.maximum(jnp.sum(has), 1)

    new, seen = [h.positions for h in held], [h.seen_positions for h in held]
    prev = [h.prev_positions for h in held]
    rows, seen_rows = [h.policy_rows for h in held], [h.seen_policy_rows for h in held]
    prev_rows = [h.prev_policy_rows for h in held]
    return HeldOut(
        positions=sum(new),
        seen_positions=sum(seen),
        value=mean([h.value for h in held], new),
        policy=mean([h.policy for h in held], rows),
        seen_value=mean([h.seen_value for h in held], seen),
        seen_policy=mean([h.seen_policy for h in held], seen_rows),
        prev_positions=sum(prev),
        prev_value=mean([h.prev_value for h in held], prev),
        prev_policy=mean([h.prev_policy for h in held], prev_rows),
        policy_rows=sum(rows),
        seen_policy_rows=sum(seen_rows),
        prev_policy_rows=sum(prev_rows),
    )


def make_iteration(config: Config, mesh: Mesh) -> loop.Iteration:
    """The loop's Iteration for a shared run: each game's own (`loop.make_iteration` of its
    config) run on its view; states and buffers are dicts by game."""
    parts = {name: loop.make_iteration(c, mesh) for name, c in game_configs(config).items()}
    names = list(parts)
    first = parts[names[0]]

    def play(run, states, buffers):
        """(states, buffers, PlayStats): every game's self-play, one after the other; the
        PlayStats combine the games' (`_combine`) and keep each one's in `by_game`."""
        out_states, out_buffers, stats = {}, {}, {}
        for i, name in enumerate(names):
            s, b, played = parts[name].play(view_run(run, name, i), states[name], buffers[name])
            out_states[name], out_buffers[name], stats[name] = s, b, played
        return out_states, out_buffers, _combine(list(stats.values()))._replace(by_game=stats)

    def learn(run, buffers, lr_scale=1.0):
        """(TrainState, {game: mean Losses}): each game's learner in a random order, every
        update scaled by `lr_scale` (`training.lr_fraction`)."""
        iteration = int(parallel.fetch(run.iteration)) + 1
        train, losses = run.train, {}
        for i in update_order(config.seed, iteration, len(names)):
            name = names[i]
            trained, losses[name] = parts[name].learn(
                view_run(run.replace(train=train), name, i), buffers[name], lr_scale
            )
            train = merge_train(train, name, trained)
        return train, {name: losses[name] for name in names}

    def init_buffer():
        return {name: f.init_buffer() for name, f in parts.items()}

    init_buffer.parts = {name: f.init_buffer for name, f in parts.items()}  # loop.replay_template
    rep = parallel.replicated(mesh)
    return first._replace(
        init_run=jax.jit(lambda: init_run(config), out_shardings=rep),
        init_states=lambda: {name: f.init_states() for name, f in parts.items()},
        init_buffer=init_buffer,
        play=play,
        learn=learn,
    )
