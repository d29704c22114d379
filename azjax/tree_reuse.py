"""Search-tree reuse: the played move's subtree kept as the next search's tree.

    start = empty_start(states, num_actions, keep_nodes=K, num_simulations=N)   # none kept yet
    out = search(..., start=start)                            # `tree_search.search`
    start = reroot(out.search_tree, action, limit=K)          # after `action` is played

A search of N simulations spends most of them below the move it then plays (on the shipped
6x6 Othello network's self-play about two thirds of them). Leela Zero and KataGo keep that
subtree: the next search starts from it, so those simulations are not run again. mctx builds a
fresh tree at every search; here `reroot` cuts each game's tree at the played child and
renumbers its nodes from 0 (in their order, so a parent's index stays below its children's, as
mctx's numbering has it), and `tree_search.search(start=...)` fills its new nodes after the kept
ones. The kept root's statistics (its visits, value and children's) are the subtree's; its prior
is the new root evaluation's, with the root noise of the new search mixed in (KataGo's practice:
the kept visits were spent without that noise).

Trees have a fixed number of nodes: a subtree of more than `limit` nodes is not kept (the next
search starts afresh), so that `limit` kept nodes plus the new simulations fit.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx
from mctx._src import search as mctx_search

Tree = mctx.Tree


class Start(NamedTuple):
    """The trees a search continues: per game, `tree`'s first `nodes` nodes (0: none; the search
    starts that game afresh from its root evaluation)."""

    tree: Tree  # [B, capacity + 1, ...]
    nodes: chex.Array  # int32[B]


def capacity(keep_nodes: int, num_simulations: int) -> int:
    """`tree_search.search`'s capacity (trees of capacity + 1 nodes) for a search of
    `num_simulations` that continues up to `keep_nodes` kept nodes: its last new node's index."""
    return keep_nodes - 1 + num_simulations


def empty_start(states, num_actions: int, *, keep_nodes: int, num_simulations: int) -> Start:
    """A `Start` that keeps nothing for the B `states`, its trees the shapes a search of
    `num_simulations` keeping up to `keep_nodes` nodes builds (`capacity`)."""
    batch = jax.tree_util.tree_leaves(states)[0].shape[0]
    root = mctx.RootFnOutput(
        prior_logits=jnp.zeros((batch, num_actions), jnp.float32),
        value=jnp.zeros((batch,), jnp.float32),
        embedding=states,
    )
    invalid = jnp.zeros((batch, num_actions), bool)
    tree = mctx_search.instantiate_tree_from_root(
        root,
        capacity(keep_nodes, num_simulations),
        root_invalid_actions=invalid,
        extra_data=root.prior_logits,
    )
    return Start(tree, jnp.zeros((batch,), jnp.int32))


def subtree_nodes(tree: Tree, action: chex.Array) -> chex.Array:
    """bool[B, N]: the nodes of each tree below its root's child `action` (int[B]), that child
    included (none where the child was never visited)."""

    def one(parents, child):
        n = parents.shape[0]
        index = jnp.arange(n)
        # Each node's ancestor one level below the root, by pointer jumping: a node whose parent
        # is not the root points at its parent; the root's children, the root and unused nodes
        # (parent -1) point at themselves. log2(N) squarings reach every node's.
        up = jnp.where(parents > Tree.ROOT_INDEX, parents, index)
        for _ in range(max(1, math.ceil(math.log2(n)))):
            up = up[up]
        return (up == child) & (child != Tree.UNVISITED)

    children = jnp.take_along_axis(
        tree.children_index[:, Tree.ROOT_INDEX], action[:, None].astype(jnp.int32), axis=1
    )[:, 0]
    return jax.vmap(one)(tree.parents, children)


def reroot(tree: Tree, action: chex.Array, *, limit: int) -> Start:
    """The subtree below each root's child `action` (int[B]) as a `Start`: its nodes renumbered
    0, 1, ... in their order (the child becomes the root), the rest of the tree emptied; `nodes`
    is 0 where the child was never visited or the subtree has more than `limit` nodes. The
    root's `root_invalid_actions`, `extra_data` and prior are left for the next search to set."""
    inside = subtree_nodes(tree, action)  # [B, N]
    count = jnp.sum(inside, axis=1, dtype=jnp.int32)

    def one(t: Tree, inside, count):
        n = inside.shape[0]
        order = jnp.argsort(~inside, stable=True)  # the kept nodes first, in their order
        renumber = jnp.cumsum(inside) - 1  # old index -> new, where inside
        used = jnp.arange(n) < count
        node = lambda x, empty: jnp.where(used, x[order], empty)
        edge = lambda x, empty: jnp.where(used[:, None], x[order], empty)
        link = lambda x: jnp.where(x >= 0, renumber[jnp.maximum(x, 0)], x)
        root = jnp.arange(n) == Tree.ROOT_INDEX
        return t.replace(
            node_visits=node(t.node_visits, 0),
            raw_values=node(t.raw_values, 0),
            node_values=node(t.node_values, 0),
            parents=jnp.where(root, Tree.NO_PARENT, node(link(t.parents), Tree.NO_PARENT)),
            action_from_parent=jnp.where(
                root, Tree.NO_PARENT, node(t.action_from_parent, Tree.NO_PARENT)
            ),
            children_index=edge(link(t.children_index), Tree.UNVISITED),
            children_prior_logits=edge(t.children_prior_logits, 0),
            children_values=edge(t.children_values, 0),
            children_visits=edge(t.children_visits, 0),
            children_rewards=edge(t.children_rewards, 0),
            children_discounts=edge(t.children_discounts, 0),
            embeddings=jax.tree.map(lambda e: e[order], t.embeddings),
        )

    rooted = jax.vmap(one)(tree, inside, count)
    return Start(rooted, jnp.where(count <= limit, count, 0))


def continued(fresh: Tree, start: Start) -> Tree:
    """`fresh` (trees just instantiated from the new roots) where `start` keeps nothing, else
    `start`'s kept tree with its root's prior, raw value, invalid actions, extra data and game
    state taken from `fresh` (the kept root's visits, value and children's statistics stay)."""
    kept = start.nodes > 0

    def pick(s, f):
        return jnp.where(kept.reshape(kept.shape + (1,) * (f.ndim - 1)), s, f)

    root = Tree.ROOT_INDEX
    tree = start.tree.replace(
        children_prior_logits=start.tree.children_prior_logits.at[:, root].set(
            fresh.children_prior_logits[:, root]
        ),
        raw_values=start.tree.raw_values.at[:, root].set(fresh.raw_values[:, root]),
        root_invalid_actions=fresh.root_invalid_actions,
        extra_data=fresh.extra_data,
        embeddings=jax.tree.map(
            lambda e, f: e.at[:, root].set(f[:, root]), start.tree.embeddings, fresh.embeddings
        ),
    )
    return jax.tree.map(pick, tree, fresh)


def first_new_node(start: Start | None, batch: int) -> chex.Array:
    """int32[B]: the index of each tree's first new node in a search continuing `start` (1 where
    nothing is kept: the root is node 0)."""
    if start is None:
        return jnp.ones((batch,), jnp.int32)
    return jnp.maximum(start.nodes, 1)
