"""What tree reuse keeps, and what it costs: a trained PUCT network's self-play with and without.

    python -m benchmarks.tree_reuse                              # pretrained/othello6
    python -m benchmarks.tree_reuse pretrained/connect_four --batch=64

The network at RUN (a run folder, RUN@STEP or pretrained/NAME) plays `--batch` games from the
start with its own search (`SearchSpec.from_config`, root noise on), the most visited move each
ply for `--plies` plies, keeping each searched tree's played subtree (`azjax.tree_reuse`, as
`--tree_reuse` does, at most `selfplay.REUSE_KEEP` times the simulations in nodes). Printed:
the kept nodes per move of the games still going (mean, median, the share that keeps nothing,
and the mean by ply), which is how many simulations a search starts with for free. Then one
self-play chunk of `--steps` moves of the run's own config (`loop.config_selfplay`) is timed with
and without `tree_reuse`, in turns after a compiling call each: the ratio is what reuse costs
(docs/strength.md, "Tree reuse on 6×6 Othello and Connect Four").
"""

from __future__ import annotations

import dataclasses
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from azjax import cli, flags, tree_reuse
from azjax.checkpoint import CheckpointError, load_checkpoint, parse_location
from azjax.loop import config_selfplay
from azjax.network import make_apply, make_network
from azjax.search import SearchSpec, make_search
from azjax.selfplay import REUSE_KEEP, init_states


def kept_nodes(config, game, apply, variables, *, batch: int, plies: int, seed: int):
    """[(ply, int[n] kept nodes of the n games still going after it)], the most visited move
    played at each of `plies` plies of `batch` games from the start."""
    spec = SearchSpec.from_config(config, explore=True)
    keep = REUSE_KEEP * spec.num_simulations
    search = jax.jit(make_search(game, spec, apply, keep_nodes=keep))

    @jax.jit
    def move(states, out):
        action = jnp.argmax(out.action_weights, axis=-1).astype(jnp.int32)
        kept = tree_reuse.reroot(out.search_tree, action, limit=keep)
        states = jax.vmap(game.step)(states, action)
        return states, kept, jax.vmap(game.is_terminal)(states)

    states = init_states(game, batch)
    start = tree_reuse.empty_start(
        states, game.num_actions, keep_nodes=keep, num_simulations=spec.num_simulations
    )
    key, rows = jax.random.PRNGKey(seed), []
    for ply in range(plies):
        out = search(variables, jax.random.fold_in(key, ply), states, start)
        states, start, done = move(states, out)
        nodes, done = jax.device_get((start.nodes, done))
        if done.all():
            break
        rows.append((ply, nodes[~done]))
    return rows


def time_chunks(config, game, apply, variables, *, batch: int, steps: int, repeats: int):
    """{"without": median s, "with": median s}: a chunk of `steps` moves of `batch` games of
    `config`'s self-play without and with tree reuse, in turns after a compiling call each."""
    chunks = {
        name: jax.jit(
            config_selfplay(dataclasses.replace(config, tree_reuse=reuse), game, apply, steps)
        )
        for name, reuse in (("without", False), ("with", True))
    }
    states = init_states(game, batch)
    key = jax.random.PRNGKey(0)
    for chunk in chunks.values():
        jax.block_until_ready(chunk(variables, key, states))
    times = {name: [] for name in chunks}
    for i in range(repeats):
        for name, chunk in chunks.items():
            t0 = time.perf_counter()
            jax.block_until_ready(chunk(variables, jax.random.fold_in(key, i + 1), states))
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None) -> int:
    p = flags.Parser(module=__spec__.name, description=__doc__.split("\n\n")[0])
    p.add_argument(
        "run",
        nargs="?",
        default="pretrained/othello6",
        help="a run folder, RUN@STEP or pretrained/NAME (pretrained/othello6)",
    )
    p.add_argument("--batch", type=int, default=128, help="games at once (128)")
    p.add_argument("--plies", type=int, default=28, help="plies played to count kept nodes (28)")
    p.add_argument("--steps", type=int, default=40, help="moves of the timed chunk (40)")
    p.add_argument("--repeats", type=int, default=2, help="timed chunks of each (2)")
    p.add_argument("--seed", type=flags.seed, default=0, help="the searches' key (0)")
    args = p.parse_args(argv)
    for flag in ("batch", "plies", "steps", "repeats"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    try:
        config, variables, _ = load_checkpoint(*parse_location(args.run))
    except (ValueError, CheckpointError) as e:
        print(f"tree_reuse: {e}", file=sys.stderr)
        return 2
    if config.search != "puct":
        print(
            f"tree_reuse: {args.run} searches with {config.search}; tree reuse is PUCT's "
            "(a run of search=puct)",
            file=sys.stderr,
        )
        return 2
    # every move searched in full and played out, as tree reuse plays
    config = dataclasses.replace(config, resign_threshold=0.0, full_search_prob=1.0)
    game = config.make_game()
    apply = make_apply(make_network(config, game))
    print(
        f"# {args.run}: {config.game} {dict(config.game_options)}, puct at "
        f"{config.num_simulations} simulations, trees of at most "
        f"{REUSE_KEEP * config.num_simulations} kept nodes; {args.batch} games; "
        f"{platform.processor() or platform.machine()}, jax {jax.__version__} on "
        f"{jax.devices()[0].device_kind}"
    )
    rows = kept_nodes(
        config, game, apply, variables, batch=args.batch, plies=args.plies, seed=args.seed
    )
    if not rows:
        print("tree_reuse: every game ended at its first ply", file=sys.stderr)
        return 2
    nodes = np.concatenate([n for _, n in rows])
    print(
        f"kept nodes a move: mean {nodes.mean():.1f}, median {np.median(nodes):g}, "
        f"none kept in {np.mean(nodes == 0):.3f} of {nodes.size} moves (a subtree over the "
        f"limit, or a move never visited)"
    )
    print("by ply: " + ", ".join(f"{ply}: {n.mean():.1f}" for ply, n in rows))
    times = time_chunks(
        config, game, apply, variables, batch=args.batch, steps=args.steps, repeats=args.repeats
    )
    print(
        f"a {args.steps}-move chunk of {args.batch} games: {times['without']:.2f} s without, "
        f"{times['with']:.2f} s with tree reuse; with / without = "
        f"{times['with'] / times['without']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.tree_reuse", main))
