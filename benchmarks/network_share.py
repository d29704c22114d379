"""The network's share of self-play: where a recipe's self-play time goes.

    python -m benchmarks.network_share                      # the CPU recipe, 6x6 Hex
    python -m benchmarks.network_share --game=othello --size=6
    python -m benchmarks.network_share --config=hex --size=11 --steps=8   # the GPU default

One self-play chunk of a config (`azjax.loop.config_selfplay`, as the training loop builds it:
its search, simulations, games in lock-step, openings, ownership) is timed with the config's
network and with a stand-in that only reads the observation (`benchmarks.selfplay.StubNet`), in
turns, each after a compiling call; then the network's forward pass alone at the search's batch
(`batch_games` positions a call), with XLA's count of its floating-point operations. Printed:
positions/s of both, the network's share of self-play (1 - stub time / network time), and the
forward pass's milliseconds, evaluations/s and GFLOP/s, and its time with the batch norms apart
from the convolutions against folded into them, as the searches apply it (`make_apply`; on a GPU
the folded convolutions end in cuDNN's fused bias and ReLU), and whether the compiled chunk
computes the fold once (its `rsqrt`s outside the program's while loops: self-play folds before
its loops, `azjax.network.prepare_variables`) or inside them. Where the
share is near 1, self-play is the network's arithmetic: only a smaller network, fewer simulations
or faster hardware make it faster, and the search's plumbing is not where the time goes
(docs/benchmarks.md, "Where the CPU recipe's self-play time goes").
"""

from __future__ import annotations

import argparse
import math
import platform
import re
import statistics
import sys
import time

import jax
import jax.numpy as jnp

import games
from azjax import cli, flags
from azjax import config as cfg
from azjax.loop import config_selfplay
from azjax.network import init_variables, make_apply, make_network
from azjax.selfplay import init_states
from benchmarks.selfplay import StubNet


def selfplay_chunk(config: cfg.Config, game, net, variables, steps: int):
    """chunk(key, states) -> states after `steps` moves of `config`'s self-play with `net`,
    jitted, its trajectory waited for; `chunk.hlo(key, states)` is the optimised HLO text of the
    program it runs (XLA's in-memory cache hands back the one compiled by the first call)."""
    play = jax.jit(config_selfplay(config, game, make_apply(net), steps))

    def chunk(key, states):
        states, traj = play(variables, key, states)
        jax.block_until_ready(traj)
        return states

    chunk.hlo = lambda key, states: play.lower(variables, key, states).compile().as_text()
    return chunk


# an instruction's called computations: `calls=%f`, `body=%b`, `branch_computations={%x, %y}`
_CALLS = re.compile(r"\b(calls|body|condition|to_apply|branch_computations)=(\{[^}]*\}|%?[\w.\-]+)")


def ops_in_loops(hlo: str, op: str) -> tuple[int, int]:
    """(inside, total): how many `op` instructions of an HLO module's text (optimised:
    `compile().as_text()`, or as lowered: `lower(...).as_text(dialect="hlo")`) run in a while
    loop (in a loop's body or condition, or in a computation they call, at any depth), and how
    many there are in all. Self-play and the searches fold the batch norms once, outside their
    loops (`azjax.network.prepare_variables`): a fold's `rsqrt` inside a loop would be computed
    once a move or a simulation rather than once a chunk."""
    calls: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    roots: set[str] = set()
    name = None
    for line in hlo.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith("{"):
            words = line.split()
            name = (words[1] if words[0] == "ENTRY" else words[0]).lstrip("%")
            calls.setdefault(name, set())
        elif name is not None:
            counts[name] = counts.get(name, 0) + len(re.findall(rf"\s{op}\(", line))
            for kind, targets in _CALLS.findall(line):
                targets = re.findall(r"[\w.\-]+", targets)
                calls[name].update(targets)
                if kind in ("body", "condition"):
                    roots.update(targets)
    inside, stack = set(), list(roots)
    while stack:
        c = stack.pop()
        if c not in inside:
            inside.add(c)
            stack.extend(calls.get(c, ()))
    return sum(counts.get(c, 0) for c in inside), sum(counts.values())


def time_selfplay(
    config: cfg.Config, steps: int, repeats: int
) -> tuple[dict[str, tuple[float, float]], str]:
    """({"network": (compile+first s, median s), "stub": (...)}, the network's program as
    optimised HLO text): a chunk of `steps` moves of `batch_games` games with each, the two in
    turns for `repeats` rounds."""
    game = config.make_game()
    key = jax.random.PRNGKey(0)
    net = make_network(config, game)
    stub = StubNet(game.num_actions)
    obs = jnp.zeros((1, *game.observation_shape), jnp.float32)
    chunks = {
        "network": selfplay_chunk(config, game, net, init_variables(net, game, key), steps),
        "stub": selfplay_chunk(config, game, stub, stub.init(key, obs), steps),
    }
    states = {name: init_states(game, config.batch_games) for name in chunks}
    first, times = {}, {name: [] for name in chunks}
    for name, chunk in chunks.items():
        t0 = time.perf_counter()
        states[name] = chunk(key, states[name])
        first[name] = time.perf_counter() - t0
    for i in range(repeats):
        for name, chunk in chunks.items():
            t0 = time.perf_counter()
            states[name] = chunk(jax.random.fold_in(key, i + 1), states[name])
            times[name].append(time.perf_counter() - t0)
    hlo = chunks["network"].hlo(key, states["network"])
    return {name: (first[name], statistics.median(times[name])) for name in chunks}, hlo


def time_forward(config: cfg.Config, repeats: int, fold: bool = True) -> tuple[float, float | None]:
    """(best seconds of one forward pass of `batch_games` positions, its floating-point
    operations by XLA's cost analysis, or None where the backend does not count them); with
    `fold=False` the batch norms apart from the convolutions (`azjax.network.make_apply`)."""
    game = config.make_game()
    net = make_network(config, game)
    variables = init_variables(net, game, jax.random.PRNGKey(0))
    shape = (config.batch_games, *game.observation_shape)
    obs = (jax.random.uniform(jax.random.PRNGKey(1), shape) < 0.3).astype(jnp.float32)
    forward = jax.jit(make_apply(net, fold=fold))
    compiled = forward.lower(variables, obs).compile()
    flops = None
    try:
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        flops = float(cost["flops"]) if cost and cost.get("flops", 0) > 0 else None
    except Exception:  # some backends count nothing
        flops = None
    jax.block_until_ready(compiled(variables, obs))
    calls = max(1, repeats * 10)
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = compiled(variables, obs)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best, flops


def main(argv=None) -> int:
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--game", default=None, help="default: the config's game, else hex")
    parser.add_argument(
        "--size", type=int, default=None, help="board size (default: the config's, else 6)"
    )
    parser.add_argument(
        "--config", default="cpu", help="a named config (configs/), over the game's defaults"
    )
    parser.add_argument("--batch_games", type=int, default=None, help="default: the config's")
    parser.add_argument("--steps", type=int, default=None, help="moves a chunk (default: a game)")
    parser.add_argument("--repeats", type=int, default=3, help="timed chunks of each")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    try:
        config_game, overrides = cfg.named_defaults(args.config, args.game)
        if args.game not in (None, config_game) and config_game is not None:
            raise ValueError(f"--game={args.game} but --config={args.config} is {config_game}")
        game_name = config_game or args.game or "hex"
        if game_name in games.names() and "size" in games.option_names(game_name):
            if args.size is not None or "size" not in overrides:
                overrides["size"] = 6 if args.size is None else args.size
        elif args.size is not None:
            raise ValueError(flags.not_an_option("size", game_name))
        if args.batch_games is not None:
            overrides["batch_games"] = args.batch_games
        config = cfg.load(game_name, overrides)
    except ValueError as e:
        parser.error(str(e))
    game = config.make_game()
    steps = args.steps or game.max_game_length
    positions = steps * config.batch_games
    print(
        f"# {config.game} {dict(config.game_options)}, --config={args.config}: "
        f"{config.search} {config.num_simulations} simulations, {config.batch_games} games, "
        f"{config.num_blocks}x{config.num_filters} ResNet ({config.dtype}); {steps} moves a "
        f"chunk; backend {jax.default_backend()} ({platform.processor() or platform.machine()})"
    )
    played, hlo = time_selfplay(config, steps, args.repeats)
    print("| self-play with | first call s (compile) | s a chunk (median) | positions/s |")
    print("|---|--:|--:|--:|")
    for name, (first, seconds) in played.items():
        print(f"| {name} | {first:.1f} | {seconds:.3f} | {positions / seconds:,.0f} |")
    share = 1.0 - played["stub"][1] / played["network"][1]
    print(f"the network's share of self-play: {share:.0%}")  # as measured (noise can make it < 0)
    seconds, flops = time_forward(config, args.repeats)
    rate = ""
    if flops:
        rate = f", {flops / seconds / 1e9:.1f} GFLOP/s ({flops / 1e6:.2f} MFLOP a call)"
    print(
        f"forward pass alone, {config.batch_games} positions: {seconds * 1e3:.2f} ms, "
        f"{config.batch_games / seconds:,.0f} evaluations/s{rate}"
    )
    if not config.global_pool:  # the searches' folded batch norms against the learner's form
        apart, _ = time_forward(config, args.repeats, fold=False)
        print(
            f"the same with the batch norms apart (not folded into the convolutions): "
            f"{apart * 1e3:.2f} ms; folded / apart = {seconds / apart:.2f}x"
        )
        inside, total = ops_in_loops(hlo, "rsqrt")
        print(
            f"the fold's rsqrt in self-play's program: {inside} of {total} inside its while loops"
            + (" (hoisted: folded once a chunk)" if total and not inside else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.network_share", main))
