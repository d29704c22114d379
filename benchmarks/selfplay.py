"""Self-play throughput: azjax against the pgx + mctx AlphaZero recipe, side by side.

    python -m benchmarks.selfplay                      # hex and othello, batch 256, 32 simulations
    python -m benchmarks.selfplay --quick --markdown   # a fast run, as a markdown table
    python -m benchmarks.selfplay --devices=all        # the batch split over every device

For each game the same policy-value ResNet (`azjax.network.PolicyValueNet`, float32) drives
- azjax: `make_selfplay` on `games.make(...)` with a Gumbel (as in the recipe) or a PUCT search
  (the game config's search settings, `SearchSpec.from_config`, as `train.py --search=puct`
  plays: Dirichlet alpha 0.33 on Hex, 1 on Othello), and once more with random rollouts from
  every leaf (rollout_prob 1, rollout_weight 0.5);
- the recipe: pgx's AlphaZero example (pgx `examples/alphazero/train.py`) written here in Flax:
  a `pgx.make(env_id)` environment whose states carry their observation, `mctx.gumbel_muzero_policy`
  with a `recurrent_fn` that steps the pgx environment (reward = the mover's `state.rewards`,
  discount -1, 0 once terminated), finished games reset by `pgx.experimental.auto_reset`, and
  `jax.lax.scan` over moves recording what the example records.
Only the game and search plumbing differ, and how the network is applied: azjax folds each batch
norm into its convolution at search time (`azjax.network.make_apply`), the recipe applies it as
pgx's example does, batch norms apart (`make_apply(net, fold=False)`). Same network shape (the
observation planes and action count are each game's own: pgx's Hex has 4 planes and a swap
action, 122 actions, azjax's `games.make("hex", size=11)` 3 planes and 121; pgx's Othello 2
planes, azjax's 3), same batch, simulations and number of considered actions.
`--network stub` swaps the ResNet for a stand-in that only reads the observation, which times the
plumbing alone (what an accelerator, where the network is cheap, would mostly see).

Start positions: each of the B games first plays a uniformly random number of random moves, in
[0, max_game_length / 2), so that the batch holds positions from all stages of a game, as it does
in steady-state self-play, rather than B openings (random rollouts from an opening are the longest).

Timing: every variant is compiled ahead of time and run once (warm-up), then the variants take
turns, one chunk of `--steps` moves each, for `--repeats` rounds (taking turns spreads a shared
machine's load over all of them alike); each chunk ends with `jax.block_until_ready`. A chunk
plays `batch * steps` positions; positions/s is all timed positions over all timed seconds. The
PUCT / Gumbel line also gives that ratio round by round (median and range), whose chunks ran
next to each other: on a shared machine it shows how much of the total is one slow spell.

Devices: `--devices=N` (or `all`) splits the batch over N devices along a one-axis mesh, as
training does (`azjax.parallel`): azjax runs `make_selfplay(..., mesh=mesh)`, and the recipe the
same way under `shard_map` (pgx's example splits its batch over devices with `pmap`); each device
plays batch / N games with its own key. The table then also gives positions/s per device.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mctx

import games
import games.base
from azjax import cli, flags, parallel, tree_search, xla_flags
from azjax.config import Config
from azjax.config import load as load_config
from azjax.network import PolicyValueNet, make_apply
from azjax.search import PUCT_VALUES, SearchSpec
from azjax.selfplay import init_states, make_selfplay
from games.base import sample_legal

# benchmark name -> (azjax game name, its options, pgx env id)
GAMES = {
    "hex": ("hex", {"size": 11}, "hex"),
    "othello": ("othello", {"size": 8}, "othello"),
}


@dataclasses.dataclass(frozen=True)
class Setting:
    """One benchmark run's sizes."""

    batch: int  # B, games played in lock-step
    simulations: int
    blocks: int
    filters: int
    steps: int  # moves per timed chunk
    repeats: int  # timed chunks per variant
    network: str = "resnet"  # "resnet" | "stub" (reads the observation only: plumbing alone)
    max_considered_actions: int = 16  # mctx's default, which the recipe uses
    devices: int = 1  # D, devices the batch is split over (jax.devices()[:D])
    dtype: str = "float32"  # the ResNet's compute dtype (parameters stay float32), both impls
    puct_values: str | None = None  # PUCT's value term (SearchSpec.puct_values); None: config's


class Row(NamedTuple):
    game: str
    variant: str  # "azjax" | "recipe"
    search: str
    rollouts: str
    positions_per_s: float
    ms_per_move: float  # one move of all B games
    compile_s: float
    vs_recipe: float  # positions_per_s / the recipe's, on the same game
    devices: int = 1  # positions_per_s is the total over this many devices
    round_seconds: tuple[float, ...] = ()  # each timed chunk's seconds, round by round


class _Variant(NamedTuple):
    name: str  # "azjax" | "recipe"
    search: str
    rollouts: str
    fn: Callable  # one chunk: (variables, key, states[B]) -> (states[B], trajectory [steps, B])
    variables: dict
    states: object  # B start positions


# ---- the pgx + mctx recipe -------------------------------------------------------------------


class RecipeOutput(NamedTuple):
    """What the example's `step_fn` records, one move of B games: [T, B] after the scan."""

    obs: jax.Array  # [T, B, *obs_shape]
    reward: jax.Array  # float32[T, B], the mover's reward
    terminated: jax.Array  # bool[T, B]
    action_weights: jax.Array  # float32[T, B, A]
    discount: jax.Array  # float32[T, B]


def make_recipe_selfplay(
    env, apply: Callable, num_simulations: int, num_steps: int, max_considered_actions: int = 16
) -> Callable:
    """selfplay(variables, key, states[B]) -> (states[B], RecipeOutput [num_steps, B]).

    pgx's AlphaZero example, its Haiku network swapped for `apply(variables, obs)`; the states
    are carried between calls so that chunks can be timed one after another.
    """
    from pgx.experimental import auto_reset

    step_reset = jax.vmap(auto_reset(env.step, env.init))

    def recurrent_fn(variables, rng_key, action, state):
        del rng_key
        current_player = state.current_player
        state = jax.vmap(env.step)(state, action)
        logits, value = apply(variables, state.observation)
        # mask invalid actions
        logits = logits - jnp.max(logits, axis=-1, keepdims=True)
        logits = jnp.where(state.legal_action_mask, logits, jnp.finfo(logits.dtype).min)
        reward = state.rewards[jnp.arange(state.rewards.shape[0]), current_player]
        value = jnp.where(state.terminated, 0.0, value)
        discount = jnp.where(state.terminated, 0.0, -1.0 * jnp.ones_like(value))
        out = mctx.RecurrentFnOutput(
            reward=reward, discount=discount, prior_logits=logits, value=value
        )
        return out, state

    def step_fn(variables, state, key):
        key1, key2 = jax.random.split(key)
        observation = state.observation
        logits, value = apply(variables, state.observation)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state)
        policy_output = mctx.gumbel_muzero_policy(
            params=variables,
            rng_key=key1,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=num_simulations,
            invalid_actions=~state.legal_action_mask,
            qtransform=mctx.qtransform_completed_by_mix_value,
            gumbel_scale=1.0,
            max_num_considered_actions=max_considered_actions,
        )
        actor = state.current_player
        keys = jax.random.split(key2, observation.shape[0])
        state = step_reset(state, policy_output.action, keys)
        discount = jnp.where(state.terminated, 0.0, -1.0 * jnp.ones_like(value))
        return state, RecipeOutput(
            obs=observation,
            reward=state.rewards[jnp.arange(state.rewards.shape[0]), actor],
            terminated=state.terminated,
            action_weights=policy_output.action_weights,
            discount=discount,
        )

    def selfplay(variables, key, states):
        def body(s, k):
            return step_fn(variables, s, k)

        return jax.lax.scan(body, states, jax.random.split(key, num_steps))

    return selfplay


# ---- building and timing the variants ----------------------------------------------------


class StubNet(NamedTuple):
    """A stand-in for the network that only reads the observation: times the plumbing alone."""

    num_actions: int

    def init(self, key, obs):
        del key, obs
        return {"params": {"scale": jnp.float32(1.0)}}

    def apply(self, variables, obs, train: bool = False, with_ownership: bool = False):
        """(logits[B, A], value[B]), as `azjax.network.make_apply`'s; with_ownership (a search
        valuing positions by their margin) adds an ownership[B, H * W] of zeros."""
        del train
        mean = obs.reshape(obs.shape[0], -1).astype(jnp.float32).mean(-1)  # [B]
        scale = variables["params"]["scale"]
        logits = (
            jnp.zeros((obs.shape[0], self.num_actions), jnp.float32) + 1e-3 * scale * mean[:, None]
        )
        if with_ownership:
            ownership = jnp.zeros((obs.shape[0], obs.shape[1] * obs.shape[2]), jnp.float32)
            return logits, jnp.tanh(scale * mean), ownership
        return logits, jnp.tanh(scale * mean)


def _network(setting: Setting, num_actions: int):
    if setting.network == "stub":
        return StubNet(num_actions)
    return PolicyValueNet(
        num_actions=num_actions,
        num_blocks=setting.blocks,
        num_filters=setting.filters,
        dtype=jnp.dtype(setting.dtype),
    )


def spread_openings(key, states, start, *, step, legal, terminal, max_plies: int):
    """Each of the B games in `states` plays a random number in [0, max_plies) of random moves.

    `step(states, actions)`, `legal(states) -> bool[B, A]`, `terminal(states) -> bool[B]` work on
    a batch; a game that ends is replaced by `start[b]`, so no slot is left finished.
    """
    k_plies, k_moves = jax.random.split(key)
    batch = jax.tree_util.tree_leaves(states)[0].shape[0]
    plies = jax.random.randint(k_plies, (batch,), 0, max(max_plies, 1))

    def body(s, x):
        t, k = x
        nxt = step(s, jax.vmap(sample_legal)(jax.random.split(k, batch), legal(s)))
        nxt = _where(terminal(nxt), start, nxt)
        return _where(t < plies, nxt, s), None

    xs = (jnp.arange(max_plies), jax.random.split(k_moves, max_plies))
    return jax.lax.scan(body, states, xs)[0]


def _where(mask, a, b):
    """Per game of a batch: a[b] where mask[b] (bool[B]), else b[b]."""
    expand = lambda x: mask.reshape(mask.shape + (1,) * (x.ndim - 1))
    return jax.tree_util.tree_map(lambda x, y: jnp.where(expand(x), x, y), a, b)


def azjax_openings(game, batch: int, key):
    """B azjax games spread over their first max_game_length / 2 plies."""
    start = init_states(game, batch)
    spread = functools.partial(
        spread_openings,
        step=jax.vmap(game.step),
        legal=jax.vmap(game.legal_mask),
        terminal=jax.vmap(game.is_terminal),
        max_plies=game.max_game_length // 2,
    )
    return jax.jit(spread)(key, start, start)


def recipe_openings(env, batch: int, max_plies: int, key):
    """B pgx games spread over their first `max_plies` plies."""
    k_init, k_open = jax.random.split(key)
    start = jax.vmap(env.init)(jax.random.split(k_init, batch))
    spread = functools.partial(
        spread_openings,
        step=jax.vmap(env.step),
        legal=lambda s: s.legal_action_mask,
        terminal=lambda s: s.terminated,
        max_plies=max_plies,
    )
    return jax.jit(spread)(k_open, start, start)


def _mesh(setting: Setting):
    """The mesh over the first `setting.devices` devices, or None for one device."""
    return parallel.make_mesh(jax.devices()[: setting.devices]) if setting.devices > 1 else None


def _split(mesh, fn: Callable) -> Callable:
    """A chunk function over B games -> the same over B games split along `mesh` (shard_map):
    each device runs `fn` on its B / D games with the key folded with its index."""
    if mesh is None:
        return fn
    P = jax.sharding.PartitionSpec

    def shard(variables, key, states):
        return fn(variables, jax.random.fold_in(key, jax.lax.axis_index(parallel.AXIS)), states)

    return jax.shard_map(
        shard,
        mesh=mesh,
        in_specs=(P(), P(), P(parallel.AXIS)),
        out_specs=(P(parallel.AXIS), P(None, parallel.AXIS)),
        check_vma=False,
    )


def _place(mesh, variables, states):
    """Variables replicated and states split along B over `mesh` (unchanged without one)."""
    if mesh is None:
        return variables, states
    P = jax.sharding.PartitionSpec
    return (
        jax.device_put(variables, parallel.replicated(mesh)),
        jax.device_put(states, parallel.sharding(mesh, P(parallel.AXIS))),
    )


def _azjax_variant(
    game, setting: Setting, search: str, rollouts: str, states, key, config: Config
) -> _Variant:
    net = _network(setting, game.num_actions)
    variables = net.init(key, jnp.zeros((1, *game.observation_shape), jnp.float32))
    spec = SearchSpec.from_config(  # the game config's c_puct and noise, as train.py plays
        config,
        search=search,
        num_simulations=setting.simulations,
        explore=True,  # self-play: Gumbel noise (scale 1, as in the recipe) or Dirichlet noise
        max_considered_actions=setting.max_considered_actions,
        rollout_policy=rollouts,
        rollout_prob=1.0 if rollouts != "none" else 0.0,
        rollout_weight=0.5,
        **({"puct_values": setting.puct_values} if setting.puct_values else {}),
    )
    mesh = _mesh(setting)
    fn = make_selfplay(game, spec, make_apply(net), setting.steps, Config().sample_moves, mesh)
    return _Variant("azjax", search, rollouts, fn, *_place(mesh, variables, states))


def _recipe_variant(env, setting: Setting, states, key) -> _Variant:
    net = _network(setting, env.num_actions)
    variables = net.init(key, jnp.zeros((1, *env.observation_shape), jnp.float32))
    fn = make_recipe_selfplay(  # the example's network: batch norms not folded
        env,
        make_apply(net, fold=False),
        setting.simulations,
        setting.steps,
        setting.max_considered_actions,
    )
    mesh = _mesh(setting)
    return _Variant("recipe", "gumbel", "none", _split(mesh, fn), *_place(mesh, variables, states))


def _compile(variant: _Variant, key):
    """(compiled chunk, seconds to trace and compile it)."""
    start = time.perf_counter()
    compiled = jax.jit(variant.fn).lower(variant.variables, key, variant.states).compile()
    return compiled, time.perf_counter() - start


def compile_workers(variants: int) -> int:
    """How many variants compile at once: 2 on a 2-core machine, up to one per 4 host cores (an
    accelerator's 16-core host compiles all four of a game together)."""
    return max(1, min(variants, max(2, (os.cpu_count() or 2) // 4)))


def benchmark_game(name: str, setting: Setting, key, log=print) -> list[Row]:
    """Rows for one game: the recipe, azjax gumbel, azjax puct, azjax gumbel + random rollouts."""
    import pgx

    game_name, options, env_id = GAMES[name]
    game = games.make(game_name, **options)
    env = pgx.make(env_id)
    keys = jax.random.split(key, 7)
    ours = azjax_openings(game, setting.batch, keys[5])
    theirs = recipe_openings(env, setting.batch, game.max_game_length // 2, keys[6])
    config = load_config(game_name)
    variants = [
        _recipe_variant(env, setting, theirs, keys[0]),
        _azjax_variant(game, setting, "gumbel", "none", ours, keys[1], config),
        _azjax_variant(game, setting, "puct", "none", ours, keys[2], config),
        _azjax_variant(game, setting, "gumbel", "random", ours, keys[3], config),
    ]
    workers = compile_workers(len(variants))
    with ThreadPoolExecutor(max_workers=workers) as pool:  # XLA compiles outside the GIL
        compiled = list(pool.map(lambda v: _compile(v, keys[4]), variants))
    runs = [c for c, _ in compiled]
    log(
        f"{name}: compiled in {', '.join(f'{s:.0f}s' for _, s in compiled)} "
        f"({workers} at a time); warming up"
    )
    states = []
    for v, run in zip(variants, runs):  # warm-up: one untimed chunk each
        s, out = run(v.variables, keys[4], v.states)
        jax.block_until_ready((s, out))
        states.append(s)
    seconds = [0.0] * len(variants)
    rounds: list[list[float]] = [[] for _ in variants]
    for r in range(setting.repeats):
        k = jax.random.fold_in(keys[4], r + 1)
        for i, (v, run) in enumerate(zip(variants, runs)):
            start = time.perf_counter()
            states[i], out = run(v.variables, k, states[i])
            jax.block_until_ready((states[i], out))
            rounds[i].append(time.perf_counter() - start)
            seconds[i] += rounds[i][-1]
        log(
            f"{name}: round {r + 1}/{setting.repeats}, seconds so far "
            + ", ".join(f"{s:.1f}" for s in seconds)
        )
    positions = setting.batch * setting.steps * setting.repeats
    moves = setting.steps * setting.repeats
    recipe_rate = positions / seconds[0]
    return [
        Row(
            name,
            v.name,
            v.search,
            v.rollouts,
            positions / s,
            1000 * s / moves,
            c_s,
            positions / s / recipe_rate,
            setting.devices,
            tuple(rounds_of_v),
        )
        for v, s, (_, c_s), rounds_of_v in zip(variants, seconds, compiled, rounds)
    ]


# ---- report ------------------------------------------------------------------------------

HEADER = ("game", "impl", "search", "rollouts", "positions/s", "ms/move", "compile s", "vs recipe")


def _cells(row: Row, per_device: bool) -> tuple[str, ...]:
    rate = (f"{row.positions_per_s:.1f}",)
    if per_device:
        rate += (f"{row.positions_per_s / row.devices:.1f}",)
    return (
        row.game,
        row.variant,
        row.search,
        row.rollouts,
        *rate,
        f"{row.ms_per_move:.1f}",
        f"{row.compile_s:.0f}",
        f"{row.vs_recipe:.2f}x",
    )


def format_table(rows: Sequence[Row], markdown: bool) -> str:
    """The table; with more than one device, positions/s is the total and a column per device
    follows it."""
    per_device = any(r.devices > 1 for r in rows)
    header = HEADER[:5] + ("per device",) * per_device + HEADER[5:]
    lines = [header, *(_cells(r, per_device) for r in rows)]
    if markdown:
        out = [
            "| " + " | ".join(header) + " |",
            "|" + "|".join("---" if i < 4 else "---:" for i in range(len(header))) + "|",
        ]
        out += ["| " + " | ".join(c) + " |" for c in lines[1:]]
        return "\n".join(out)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) if i < 4 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
        for line in lines
    )


def summary(rows: Sequence[Row], target: float, puct_target: float = 0.9) -> list[str]:
    """Per game: the azjax/recipe ratios against `target`, PUCT's positions/s over Gumbel's (same
    simulations, both with their self-play noise) against `puct_target`, and the cost of
    rollouts."""
    lines = []
    for name in dict.fromkeys(r.game for r in rows):
        of = {(r.variant, r.search, r.rollouts): r for r in rows if r.game == name}
        gumbel, puct = of[("azjax", "gumbel", "none")], of[("azjax", "puct", "none")]
        rolled = of[("azjax", "gumbel", "random")]
        for r in (gumbel, puct):
            verdict = "met" if r.vs_recipe >= target else "NOT met"
            lines.append(
                f"{name}: azjax {r.search} / recipe = {r.vs_recipe:.3f}x "
                f"(target >= {target}x: {verdict})"
            )
        ratio = puct.positions_per_s / gumbel.positions_per_s
        verdict = "met" if ratio >= puct_target else "NOT met"
        lines.append(
            f"{name}: azjax puct / azjax gumbel = {ratio:.3f}x "
            f"({puct.positions_per_s:.1f} "
            f"against {gumbel.positions_per_s:.1f} positions/s; "
            f"target >= {puct_target}x: {verdict}){round_spread(gumbel, puct)}"
        )
        lines.append(
            f"{name}: random rollouts (p=1, weight 0.5) run at "
            f"{rolled.positions_per_s / gumbel.positions_per_s:.2f}x the positions/s of "
            f"no rollouts ({rolled.ms_per_move - gumbel.ms_per_move:+.1f} ms per move)"
        )
    return lines


def round_spread(base: Row, other: Row) -> str:
    """`other`'s speed over `base`'s round by round (chunks timed next to each other, so a
    shared machine's slow spell falls on both): "; by round: median R (lo - hi)", or "" with
    fewer than two rounds."""
    pairs = [b / o for b, o in zip(base.round_seconds, other.round_seconds)]
    if len(pairs) < 2:
        return ""
    median, low, high = statistics.median(pairs), min(pairs), max(pairs)
    return f"; by round: median {median:.2f}x ({low:.2f} - {high:.2f}x)"


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import pgx

    device = jax.devices()[0]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (
        f"machine: {os.cpu_count()} CPUs ({model}); jax {jax.__version__}, backend "
        f"{jax.default_backend()}, device {device.device_kind} x{jax.device_count()}; "
        f"pgx {pgx.__version__}, mctx {getattr(mctx, '__version__', '?')}; "
        f"load average {load}; XLA_FLAGS {os.environ.get(xla_flags.ENV) or '(none)'}"
    )


# ---- command line ------------------------------------------------------------------------

# A default run (both games, four variants, compile and warm-up included) took 18 minutes on a
# 2-core CPU shared with other jobs (it got 40% of it: 445 s of CPU time); 16 moves per chunk
# would take well over an hour there. --quick is the fast run.
DEFAULTS = dict(batch=256, simulations=32, blocks=3, filters=64, steps=2, repeats=3)
QUICK = dict(batch=64, simulations=8, blocks=3, filters=64, steps=4, repeats=2)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = flags.Parser(
        module=__spec__.name,
        description="Self-play positions per second: azjax vs the pgx + mctx AlphaZero recipe.",
    )
    p.add_argument("--games", default="hex,othello", help="comma-separated: hex, othello")
    p.add_argument("--batch", type=int, help=f"games in lock-step (default {DEFAULTS['batch']})")
    p.add_argument(
        "--simulations",
        type=int,
        help=f"search simulations per move (default {DEFAULTS['simulations']})",
    )
    p.add_argument("--blocks", type=int, help=f"residual blocks (default {DEFAULTS['blocks']})")
    p.add_argument("--filters", type=int, help=f"filters per block (default {DEFAULTS['filters']})")
    p.add_argument("--steps", type=int, help=f"moves per timed chunk (default {DEFAULTS['steps']})")
    p.add_argument(
        "--repeats", type=int, help=f"timed chunks per variant (default {DEFAULTS['repeats']})"
    )
    p.add_argument(
        "--devices",
        default="1",
        help="devices to split the batch over: a number, or all (default 1)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="unset sizes from " + ", ".join(f"{k}={v}" for k, v in QUICK.items()),
    )
    p.add_argument(
        "--network",
        default="resnet",
        choices=("resnet", "stub"),
        help="resnet; or stub, a stand-in reading the observation (plumbing alone)",
    )
    p.add_argument("--markdown", action="store_true", help="print the table as markdown")
    p.add_argument("--target", type=float, default=1.2, help="azjax/recipe ratio to reach")
    p.add_argument(
        "--puct-target",
        type=float,
        default=0.9,
        help="azjax PUCT / azjax Gumbel positions/s ratio to reach (default 0.9)",
    )
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="the ResNet's compute dtype, for azjax and the recipe alike (default float32)",
    )
    p.add_argument(
        "--unroll",
        type=int,
        help="tree levels per loop turn in azjax's walk down and back up (azjax.tree_search; "
        "default: 1 on the CPU, 4 on a GPU or TPU; the same trees for any value)",
    )
    p.add_argument(
        "--playout_unroll",
        type=int,
        help="plies a random playout takes per loop turn in the rollout variant "
        "(games.base.PLAYOUT_UNROLL; default: 1 on the CPU, on a GPU or TPU the game's own "
        "choice: 16 on Othello, 4 on Hex; the same games for any value)",
    )
    p.add_argument(
        "--compact",
        type=int,
        help="compaction factor of azjax's walk down: the walks still going are gathered into a "
        "batch this many times smaller once they fit (azjax.tree_search; default: 4 on the CPU, "
        "1 (never) on a GPU or TPU; the same trees for any value)",
    )
    p.add_argument(
        "--puct-values",
        choices=PUCT_VALUES,
        help="PUCT's value term (the config field puct_values; default: the game config's, raw "
        "for Hex and Othello): raw builds shallower trees (python -m benchmarks.tree_depth)",
    )
    p.add_argument("--seed", type=flags.seed, default=0)
    args = p.parse_args(argv)
    for name in ("unroll", "compact", "playout_unroll"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")

    try:
        args.games = flags.names(args.games, "--games", GAMES)
    except ValueError as e:
        p.error(str(e))
    try:
        args.device_count = resolve_devices(args.devices)
    except ValueError as e:
        p.error(f"--devices: {e}")
    base = QUICK if args.quick else DEFAULTS
    for name, value in base.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.batch % args.device_count:
        p.error(f"--batch {args.batch} does not divide over {args.device_count} devices")
    return args


def resolve_devices(text: str) -> int:
    """`all` -> jax.device_count(); a number from 1 to that -> itself; else ValueError."""
    available = jax.device_count()
    if text == "all":
        return available
    if not text.isdigit() or not 1 <= int(text) <= available:
        raise ValueError(
            f"expected all or a number from 1 to {available} (the devices here), got {text!r}"
        )
    return int(text)


def _describe_compaction(batch: int) -> str:
    sizes = tree_search.compaction_sizes(batch)
    return ", ".join(map(str, sizes)) + " walks" if sizes else "no smaller batch"


def _describe_network(setting: Setting) -> str:
    if setting.network == "stub":
        return "stub network (plumbing only)"
    return f"ResNet {setting.blocks} blocks x {setting.filters} filters ({setting.dtype})"


def main(argv: Sequence[str] | None = None) -> list[Row]:
    xla_flags.enable()  # as the commands do, before parse_args starts the backend
    args = parse_args(argv)
    setting = Setting(
        batch=args.batch,
        simulations=args.simulations,
        blocks=args.blocks,
        filters=args.filters,
        steps=args.steps,
        repeats=args.repeats,
        network=args.network,
        devices=args.device_count,
        dtype=args.dtype,
        puct_values=args.puct_values,
    )
    log = lambda text: print(text, file=sys.stderr, flush=True)
    tree_search.UNROLL = args.unroll  # both read when the searches are traced
    tree_search.COMPACT = args.compact
    games.base.PLAYOUT_UNROLL = args.playout_unroll  # read when the rollout variant is traced
    start = time.perf_counter()
    print(machine())
    print(
        f"setting: batch {setting.batch}, {setting.simulations} simulations, "
        f"{_describe_network(setting)}, {setting.steps} moves per chunk, "
        f"{setting.repeats} timed chunks per variant, "
        f"{setting.devices} device(s) ({jax.devices()[0].platform}), "
        f"tree levels per loop turn {tree_search.unroll_levels()}, "
        f"walks compacted into {_describe_compaction(setting.batch // setting.devices)}"
        + (f", PUCT values {setting.puct_values}" if setting.puct_values else "")
        + (f", playout plies per loop turn {args.playout_unroll}" if args.playout_unroll else "")
    )
    rows = []
    key = jax.random.PRNGKey(args.seed)
    for i, name in enumerate(args.games):
        rows += benchmark_game(name, setting, jax.random.fold_in(key, i), log)
    print(format_table(rows, args.markdown))
    for line in summary(rows, args.target, args.puct_target):
        print(line)
    print(f"total time: {time.perf_counter() - start:.0f} s")
    return rows


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.selfplay", main))
