"""Which move a PUCT search should play: the most visited, or the best valued among the well
visited (Leela Chess Zero's and KataGo's lower confidence bound), on a game's solved positions.

    python -m experiments.final_move ckpt:pretrained/othello6,sims=50

A PUCT agent plays its most visited root move. The other rule tried here plays, among the moves
with at least `share` of the most visited one's visits, the one with the highest
Q - width / sqrt(visits) (Q the move's mean value for the mover; width 0: the best valued).
The network searches every position of the game's shipped set of solved positions (`azjax.solved`)
once; each rule then picks a move from the same search, so the rules differ only where their
moves do. Printed per rule: the share of positions where it differs from the most visited move,
its errors (moves that throw a win or a draw away), and McNemar's z against the most visited
(positive: the rule errs less).
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

from azjax import cli, flags
from azjax import solved as sv
from azjax.eval import game_for
from azjax.eval.errors import require_set
from azjax.eval.specs import parse_agent
from azjax.search import make_search
from experiments.common import parse_floats

PROG = "python -m experiments.final_move"  # as its errors are named (cli.fail)


def root_choices(agent, solved: sv.SolvedSet, key) -> tuple[np.ndarray, np.ndarray]:
    """(visits float[P, A], Q float[P, A]) of the agent's search at each of the set's positions;
    Q for the player to move, -inf where a move was not visited."""
    setup = agent.search
    states = sv.start_states(setup.game, solved)
    search = jax.jit(make_search(setup.game, setup.spec, setup.apply))
    tree = search(agent.variables, key, states).search_tree
    root = jnp.zeros(len(solved), jnp.int32)
    visits = np.asarray(tree.children_visits[:, 0], np.float64)
    q = np.asarray(tree.qvalues(root), np.float64)
    return visits, np.where(visits > 0, q, -np.inf)


def lcb_moves(visits: np.ndarray, q: np.ndarray, *, share: float, width: float) -> np.ndarray:
    """int[P]: per position, the move with the highest Q - width / sqrt(visits) among those with
    at least `share` of the most visited move's visits (the most visited is always among them)."""
    enough = (visits > 0) & (visits >= share * visits.max(axis=-1, keepdims=True))
    bound = q - width / np.sqrt(np.maximum(visits, 1.0))
    return np.where(enough, bound, -np.inf).argmax(axis=-1)


def main(argv=None) -> int:
    p = flags.Parser(module=__spec__.name, description=__doc__.split("\n\n")[0])
    p.add_argument("agent", help="a ckpt: agent that searches with PUCT, e.g. ckpt:RUN,sims=50")
    p.add_argument("--shares", default="0.2,0.35,0.5", help="visit shares (0.2,0.35,0.5)")
    p.add_argument("--widths", default="0,0.5,1", help="widths of the bound (0,0.5,1)")
    p.add_argument("--seed", type=flags.seed, default=0, help="the search's key (0)")
    args = p.parse_args(argv)
    try:
        shares = parse_floats("--shares", args.shares, 0.0, 1.0)
        widths = parse_floats("--widths", args.widths, 0.0, 100.0)
        if not args.agent.startswith("ckpt:"):
            raise ValueError(f"expected a ckpt: agent, got {args.agent!r}")
        game = game_for([args.agent], None, {})
        agent = parse_agent(args.agent, game)
        if agent.search.spec.search != "puct":
            raise ValueError(
                f"{args.agent} searches with {agent.search.spec.search}; the rules compared "
                "here are PUCT's (add search=puct to the spec)"
            )
        solved = require_set(game)
    except ValueError as e:
        return cli.fail(PROG, e)
    visits, q = root_choices(agent, solved, jax.random.PRNGKey(args.seed))
    visited = visits.argmax(axis=-1)
    base = sv.error_rate(solved, visited)
    print(f"{args.agent} on {len(solved)} solved positions of {game.name} {dict(game.rules)}")
    print("| rule | differs | errors | rate | only most visited errs | only rule errs | z |")
    print("| --- | --: | --: | --: | --: | --: | --: |")
    print(f"| most visited | | {base.errors} | {base.rate:.4f} | | | |")
    errs = sv.errs(solved, visited)
    for share in shares:
        for width in widths:
            moves = lcb_moves(visits, q, share=share, width=width)
            rate = sv.error_rate(solved, moves)
            pair = sv.paired(errs, sv.errs(solved, moves))
            print(
                f"| share {share:g}, width {width:g} | {np.mean(moves != visited):.3f} | "
                f"{rate.errors} | {rate.rate:.4f} | {pair.only_a} | {pair.only_b} | {pair.z:+.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.final_move", main))
