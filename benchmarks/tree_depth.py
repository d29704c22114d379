"""How deep a batched search's walks go: the loop levels that PUCT and Gumbel self-play pay for.

    python -m benchmarks.tree_depth                             # 11x11 Hex, random 3x64 ResNet
    python -m benchmarks.tree_depth --network=pretrained:hex9   # a trained network's trees
    python -m benchmarks.tree_depth --game=othello --size=8 --network=pretrained:othello8

A batch of B trees is walked in lock-step (`azjax.tree_search`): each simulation's walk down and
its climb back take as many levels as that simulation's deepest walk in the batch, and on a GPU a
level costs its kernel launches whatever the batch, so the searches' speeds at equal simulations
differ by their depth (docs/benchmarks.md, "Why PUCT trails Gumbel on a GPU"). For the Gumbel and
the PUCT search of `train.py --game=G --search=S` (the game config's settings, or the pretrained
network's, with self-play noise: what `benchmarks.selfplay` times), PUCT once with mctx's value
term (`puct_values=minmax`) and once with its Q-values not stretched to [0, 1] (`raw`, what
configs/hex.py and configs/othello.py set), one search over B positions
spread over the first half of a game (`benchmarks.selfplay`'s openings); per search:
- mean depth: the mean depth of the simulations' new leaves;
- levels: the sum over simulations of the batch's deepest leaf, the levels each of the walk down
  and the climb back take for one move;
- chains: games whose tree reaches depth num_simulations / 2 (a walk that follows one line);
- root share: the median over games of the most visited root move's share of the simulations.
No timing: the same counts on any machine, for the same network and keys.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import games
from azjax import cli, flags, pretrained
from azjax.config import load as load_config
from azjax.network import PolicyValueNet, make_apply, make_network
from azjax.search import SearchSpec, make_search
from benchmarks.selfplay import azjax_openings


class Depths(NamedTuple):
    """One search's depth figures (see the module's docstring)."""

    mean_depth: float
    levels: int
    chains: int
    root_share: float


def node_depths(parents: np.ndarray) -> np.ndarray:
    """int[B, N] depth of every node of B mctx trees from their `parents` int[B, N] (the root and
    unused nodes have no parent, -1: depth 0 and -1). A child's index is above its parent's, as
    mctx allocates nodes in simulation order."""
    batch, nodes = parents.shape
    depths = np.full((batch, nodes), -1, np.int64)
    depths[:, 0] = 0
    rows = np.arange(batch)
    for n in range(1, nodes):
        parent = parents[:, n]
        depths[:, n] = np.where(parent >= 0, depths[rows, np.maximum(parent, 0)] + 1, -1)
    return depths


def depth_figures(parents: np.ndarray, root_visits: np.ndarray) -> Depths:
    """The figures of B trees of S simulations: `parents` int[B, S + 1] (node s + 1 is simulation
    s's new leaf) and `root_visits` int[B, A], the root's children's visit counts."""
    leaves = node_depths(parents)[:, 1:]  # [B, S]
    simulations = leaves.shape[1]
    used = leaves >= 0
    deepest = np.where(used, leaves, 0).max(axis=0)  # [S], the batch's deepest walk
    share = root_visits.max(axis=1) / np.maximum(root_visits.sum(axis=1), 1)
    return Depths(
        mean_depth=float(leaves[used].mean()) if used.any() else 0.0,
        levels=int(deepest.sum()),
        chains=int((leaves.max(axis=1) >= max(simulations // 2, 1)).sum()),
        root_share=float(np.median(share)),
    )


def _setup(args: argparse.Namespace):
    """(label, game, config, network, variables) for the command line's network."""
    if args.network.startswith("pretrained:"):
        config, variables = pretrained.load(args.network.split(":", 1)[1])
        game = config.make_game()
        return args.network, game, config, make_network(config, game), variables
    overrides = {} if args.size is None else {"size": args.size}
    config = load_config(args.game, overrides)
    game = config.make_game()
    net = PolicyValueNet(
        num_actions=game.num_actions, num_blocks=args.blocks, num_filters=args.filters
    )
    variables = net.init(jax.random.key(args.seed), jnp.zeros((1, *game.observation_shape)))
    return f"random ResNet {args.blocks}x{args.filters}", game, config, net, variables


# (row, search, puct_values): Gumbel, and PUCT with each value term whatever the config sets
SEARCHES = (("gumbel", "gumbel", None), ("puct", "puct", "minmax"), ("puct raw", "puct", "raw"))


def run(args: argparse.Namespace, log=print) -> dict[str, Depths]:
    label, game, config, net, variables = _setup(args)
    key = jax.random.key(args.seed)
    states = azjax_openings(game, args.batch, jax.random.fold_in(key, 1))
    log(
        f"{game.name}, {label}: {args.batch} positions, {args.simulations} simulations, "
        "self-play noise"
    )
    figures = {}
    for name, search, values in SEARCHES:
        spec = SearchSpec.from_config(
            config,
            search=search,
            num_simulations=args.simulations,
            explore=True,
            **({"puct_values": values} if values else {}),
        )
        out = jax.jit(make_search(game, spec, make_apply(net)))(
            variables, jax.random.fold_in(key, 2), states
        )
        tree = out.search_tree
        figures[name] = depth_figures(
            np.asarray(tree.parents), np.asarray(tree.children_visits[:, 0])
        )
    return figures


def table(figures: dict[str, Depths]) -> str:
    lines = [
        "| search | mean depth | levels | chains | root share |",
        "|---|--:|--:|--:|--:|",
    ]
    for search, f in figures.items():
        lines.append(
            f"| {search} | {f.mean_depth:.2f} | {f.levels} | {f.chains} | {f.root_share:.2f} |"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = flags.Parser(
        module=__spec__.name,
        description="How deep the Gumbel and PUCT self-play searches' walks go in a batch.",
    )
    p.add_argument("--game", default=None, help=f"one of {', '.join(games.names())} (hex)")
    p.add_argument(
        "--size", type=int, help="board size (default 11 for Hex, else its config's: Othello 6)"
    )
    p.add_argument("--batch", type=int, default=1024, help="positions searched at once")
    p.add_argument("--simulations", type=int, default=32)
    p.add_argument(
        "--network",
        default="resnet",
        help="resnet (untrained, --blocks x --filters) or pretrained:NAME, a shipped network "
        "(its game, size and search settings)",
    )
    p.add_argument("--blocks", type=int, default=None, help="the resnet's (3)")
    p.add_argument("--filters", type=int, default=None, help="the resnet's (64)")
    p.add_argument("--seed", type=flags.seed, default=0)
    args = p.parse_args(argv)
    if args.network.startswith("pretrained:"):  # its own game, size and network
        names = ("game", "size", "blocks", "filters")
        given = [f"--{n}" for n in names if getattr(args, n) is not None]
        if given:
            p.error(f"{', '.join(given)}: {args.network} brings its own; leave them out")
    for name, default in (("game", "hex"), ("blocks", 3), ("filters", 64)):
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.game not in games.names():
        p.error(f"unknown game {args.game!r}; one of {', '.join(games.names())}")
    if args.network.startswith("pretrained:"):
        name = args.network.split(":", 1)[1]
        if name not in pretrained.names():
            p.error(f"no shipped network {name!r}; one of {', '.join(pretrained.names())}")
    elif args.network != "resnet":
        p.error(f"--network takes resnet or pretrained:NAME, got {args.network!r}")
    if args.size is not None and "size" not in games.option_names(args.game):
        p.error(flags.not_an_option("size", args.game))  # it listed every config field
    if args.size is None and args.game == "hex":
        args.size = 11
    for name in ("batch", "simulations", "blocks", "filters"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Depths]:
    args = parse_args(argv)
    try:
        figures = run(args)
    except ValueError as e:  # a size the game does not take
        raise SystemExit(cli.fail(f"python -m {__spec__.name}", e)) from None
    print(table(figures))
    return figures


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.tree_depth", main))
