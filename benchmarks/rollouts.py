"""What rollouts cost at each rollout probability: searches at rollout_prob p, and the rollouts
alone, the drawn leaves gathered against the whole batch, side by side in one run.

    python -m benchmarks.rollouts                                  # 11x11 Hex, B 256, 32 sims
    python -m benchmarks.rollouts --game=othello --size=8 --rollout=policy --probs=0,0.25,1

Two tables, each line the median of `--repeats` calls after a compiling call, the lines of a
table timed in turns:
- searches: one self-play search (`make_search`: the game's config's search and network, or
  `--network stub` for the plumbing alone; self-play noise) of B positions spread over the first
  half of a game, at each p of `--probs` with `--rollout` rollouts (weight 0.5); the last column
  is the time over that of no rollouts.
- rollouts alone, for each p < 1: `rollout_where` on B leaves of which a Bernoulli(p) draw keeps
  rollouts (it plays out `rollout_capacity(B, p)` of them) against the rollout of all B leaves,
  which is what every p cost before rollouts were gathered.
With `--playout_unroll=1,4,...` a third table: for each number of plies a random playout takes
per loop turn (`games.base.playout_unroll`; the backend's choice otherwise), the search at p = 1
and the rollouts of the whole batch alone, timed in turns.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time

import jax

import games
import games.base
from azjax import cli, flags, xla_flags
from azjax import config as cfg
from azjax.network import init_variables, make_apply, make_network
from azjax.search import (
    SearchSpec,
    make_rollout_per_state,
    make_search,
    rollout_capacity,
    rollout_where,
)
from benchmarks.selfplay import StubNet, azjax_openings


def median_ms(calls, repeats: int) -> list[float]:
    """Median milliseconds of each `fn(*args)` of `calls` [(fn, args)], after one (compiling)
    call each. The calls take turns within each of the `repeats` rounds, so that a load on the
    machine that comes and goes falls on all of them alike."""
    for fn, args in calls:
        jax.block_until_ready(fn(*args))
    times = [[] for _ in calls]
    for _ in range(repeats):
        for (fn, args), timed in zip(calls, times):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            timed.append(time.perf_counter() - start)
    return [1000 * statistics.median(timed) for timed in times]


def run(
    config, *, rollout: str, probs, batch: int, repeats: int, network: str = "resnet", seed: int = 0
):
    """(search rows, rollout rows): [(p, ms)] and [(p, capacity, gathered ms, whole ms)].
    `network`: the config's ResNet, or "stub" (`benchmarks.selfplay.StubNet`: plumbing alone)."""
    game, apply, variables, states, k_search, k_rolled = _setup(config, batch, network, seed)
    base = SearchSpec.from_config(config)
    calls = [(_search(game, base, apply, rollout, p), (variables, k_search, states)) for p in probs]
    searches = list(zip(probs, median_ms(calls, repeats)))
    per_state = make_rollout_per_state(
        game, dataclasses.replace(base, rollout_policy=rollout), apply
    )
    keys = jax.random.split(k_search, batch)
    partial = [(p, rollout_capacity(batch, p)) for p in probs if 0 < p < 1]
    calls = [(jax.jit(per_state), (variables, keys, states))]
    for p, capacity in partial:
        rolled = jax.random.bernoulli(k_rolled, p, (batch,))
        gathered = jax.jit(
            lambda v, k, s, r, c=capacity: rollout_where(per_state, v, k, s, r, capacity=c)
        )
        calls.append((gathered, (variables, keys, states, rolled)))
    whole_ms, *gathered_ms = median_ms(calls, repeats)
    rollouts = [(p, c, ms, whole_ms) for (p, c), ms in zip(partial, gathered_ms)]
    return searches, rollouts


def run_unrolls(
    config, *, unrolls, batch: int, repeats: int, network: str = "resnet", seed: int = 0
):
    """[(plies per turn, search ms at p = 1, rollouts-alone ms)] for random rollouts, one row
    per value of `unrolls`, and the search without rollouts' ms. Each function is compiled with
    `games.base.PLAYOUT_UNROLL` set to its value (it is read when traced), then all are timed in
    turns."""
    game, apply, variables, states, k_search, _ = _setup(config, batch, network, seed)
    base = SearchSpec.from_config(config)
    keys = jax.random.split(k_search, batch)
    rollouts = dataclasses.replace(base, rollout_policy="random")
    calls = [(_search(game, base, apply, "random", 0.0), (variables, k_search, states))]
    saved = games.base.PLAYOUT_UNROLL
    try:
        for unroll in unrolls:
            games.base.PLAYOUT_UNROLL = unroll
            search = _search(game, base, apply, "random", 1.0)
            # a new function each value: jit's cache is keyed by the function, and one jitted
            # again would run the program traced at the first value (the unroll read then)
            alone = jax.jit(make_rollout_per_state(game, rollouts, apply))
            for fn, args in [
                (search, (variables, k_search, states)),
                (alone, (variables, keys, states)),
            ]:
                jax.block_until_ready(fn(*args))  # traced (and compiled) with this unroll
                calls.append((fn, args))
    finally:
        games.base.PLAYOUT_UNROLL = saved
    none_ms, *timed = median_ms(calls, repeats)
    return none_ms, [(u, timed[2 * i], timed[2 * i + 1]) for i, u in enumerate(unrolls)]


def _setup(config, batch: int, network: str, seed: int):
    """(game, apply, variables, states[batch], search key, coin key) for the benchmark."""
    game = config.make_game()
    k_vars, k_states, k_search, k_rolled = jax.random.split(jax.random.PRNGKey(seed), 4)
    if network == "stub":
        net = StubNet(game.num_actions)
        variables = net.init(k_vars, None)
    else:
        net = make_network(config, game)
        variables = init_variables(net, game, k_vars)
    states = azjax_openings(game, batch, k_states)
    return game, make_apply(net), variables, states, k_search, k_rolled


def _search(game, base: SearchSpec, apply, rollout: str, p: float):
    """The jitted self-play search at rollout probability p (weight 0.5)."""
    spec = dataclasses.replace(
        base,
        explore=True,
        rollout_policy=rollout if p > 0 else "none",
        rollout_prob=p,
        rollout_weight=0.5,
    )
    return jax.jit(make_search(game, spec, apply))


def parse_unrolls(text: str) -> list[int]:
    try:
        unrolls = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        unrolls = []
    if not unrolls or any(u < 1 for u in unrolls):
        raise ValueError(f"--playout_unroll={text!r}: give comma-separated integers >= 1")
    return unrolls


def parse_probs(text: str) -> list[float]:
    try:
        probs = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        probs = []
    if not probs or any(not 0.0 <= p <= 1.0 for p in probs):
        raise ValueError(f"--probs={text!r}: give comma-separated probabilities in [0, 1]")
    return sorted(set(probs) | {0.0})


def main(argv=None) -> int:
    xla_flags.enable()  # as the commands do, before the backend starts
    pre = flags.Parser(module=__spec__.name, add_help=False)
    pre.add_argument("--game", default="hex", choices=games.names())
    known, _ = pre.parse_known_args(argv)
    parser = flags.Parser(module=__spec__.name, description=__doc__, parents=[pre])
    parser.add_argument("--rollout", default="random", choices=["random", "policy"])
    parser.add_argument("--probs", default="0,0.1,0.3,0.5,1", help="rollout probabilities")
    parser.add_argument("--batch", type=int, default=256, help="positions searched at once")
    parser.add_argument("--sims", type=int, default=32, help="simulations per search")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per line")
    parser.add_argument(
        "--playout_unroll",
        default=None,
        help="plies per loop turn of a random playout to compare, e.g. 1,4 (a third table)",
    )
    parser.add_argument(
        "--network",
        default="resnet",
        choices=["resnet", "stub"],
        help="the config's ResNet, or a stand-in that only reads the observation",
    )
    defaults = {"size": 11} if known.game == "hex" else {}
    option_flags = flags.add_game_flags(  # help: what runs, configs/<game>.py's size elsewhere
        parser.add_argument_group(f"{known.game} options"),
        known.game,
        defaults={**cfg.game_defaults(known.game), **defaults},
    )
    args = parser.parse_args(argv)
    try:
        probs = parse_probs(args.probs)
        unrolls = None if args.playout_unroll is None else parse_unrolls(args.playout_unroll)
    except ValueError as e:
        parser.error(str(e))
    if args.batch < 1 or args.sims < 1 or args.repeats < 1:
        parser.error("--batch, --sims and --repeats must be at least 1")
    options = {**defaults, **flags.game_options(args, known.game, option_flags)}
    config = cfg.load(known.game, {**options, "num_simulations": args.sims})
    searches, rollouts = run(
        config,
        rollout=args.rollout,
        probs=probs,
        batch=args.batch,
        repeats=args.repeats,
        network=args.network,
    )
    print(
        f"{known.game} {options}, batch {args.batch}, {args.sims} simulations "
        f"({config.search}, "
        + (
            f"{config.num_blocks}x{config.num_filters} ResNet"
            if args.network == "resnet"
            else "stub"
        )
        + "), "
        f"{args.rollout} rollouts, {jax.devices()[0].device_kind}; "
        f"XLA_FLAGS {os.environ.get(xla_flags.ENV) or '(none)'}"
    )
    none = searches[0][1]
    print(f"{'rollout_prob':>12}{'search ms':>12}{'/ no rollouts':>15}")
    for p, ms in searches:
        print(f"{p:>12.2f}{ms:>12.1f}{ms / none:>14.2f}x")
    if rollouts:
        print(
            f"{'rollout_prob':>12}{'played out':>12}{'gathered ms':>13}{'whole ms':>10}{'ratio':>8}"
        )
        for p, capacity, ms, whole_ms in rollouts:
            played = f"{capacity}/{args.batch}"
            print(f"{p:>12.2f}{played:>12}{ms:>13.1f}{whole_ms:>10.1f}{ms / whole_ms:>7.2f}x")
    if unrolls:
        none_ms, rows = run_unrolls(
            config, unrolls=unrolls, batch=args.batch, repeats=args.repeats, network=args.network
        )
        print(f"random playouts by plies per loop turn (no rollouts: {none_ms:.1f} ms a search)")
        print(
            f"{'plies/turn':>10}{'search ms p=1':>15}{'/ no rollouts':>15}{'rollouts alone ms':>19}"
        )
        for unroll, search_ms, alone_ms in rows:
            print(f"{unroll:>10}{search_ms:>15.1f}{search_ms / none_ms:>14.2f}x{alone_ms:>19.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.rollouts", main))
