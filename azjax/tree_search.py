"""`mctx.search` and `mctx.gumbel_muzero_policy` with a backward pass that updates B trees in place.

    tree = search(params, key, root=root, recurrent_fn=fn, root_action_selection_fn=select,
                  interior_action_selection_fn=select, num_simulations=32)   # as mctx.search

mctx's tree (`mctx.Tree`), its selection functions and its expansion (`expand`) are used unchanged.
The walk down (`simulate`) is mctx's, written over the batch so that it can take several levels per
loop turn (`unroll`; one on the CPU, exactly mctx's loop, four on an accelerator), so that the
root's selection runs once, for every game's first level, instead of beside the interior one at
every level, and so that on the CPU the few walks that go deep are walked on in a smaller batch
(`compact`) instead of computing every game's selection at every level. The backward pass
differs: mctx's `backward` is a `jax.vmap` of a per-tree `while_loop`, and under `vmap` a loop
whose condition differs between trees runs until the deepest tree is done, and at every level
selects between the old and the updated *whole* tree of every game (every [B, N, A] array and
every node's game state), so a simulation costs a copy of the batch's trees per level of the
deepest new leaf. Here one `while_loop` climbs all B paths together and writes only the B entries
each level changes (`backward`), which computes the same numbers in the same order
(tests/test_tree_search.py compares whole trees with mctx's). Deep trees (PUCT with a peaky prior,
many simulations, large batches on an accelerator) are where it pays.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx
from mctx._src import action_selection, seq_halving
from mctx._src import search as mctx_search
from mctx._src.policies import _mask_invalid_actions

from azjax import tree_reuse

Tree = mctx.Tree
# Levels of the walk down and of the climb back per loop turn (`simulate`, `backward`); None:
# by backend (`unroll_levels`). The same trees for any value; only the speed differs: on the
# 2-core CPU 4 levels a turn were slower (every level computes all B games), on an H100 faster
# where a loop turn's kernel launches and its condition's round trip are the cost (PUCT +23% on
# 11x11 Hex, +30% on 8x8 Othello; docs/benchmarks.md). `python -m benchmarks.selfplay --unroll=N`.
UNROLL: int | None = None
CPU_UNROLL = 1
ACCELERATOR_UNROLL = 4


def unroll_levels(unroll: int | None = None) -> int:
    """`unroll`, else UNROLL, else CPU_UNROLL on the CPU and ACCELERATOR_UNROLL on a GPU or TPU
    (the default backend's, read when the search is traced)."""
    return _by_backend("unroll", unroll, UNROLL, CPU_UNROLL, ACCELERATOR_UNROLL)


def _by_backend(name: str, value: int | None, setting: int | None, cpu: int, accelerator: int):
    """`value`, else the module's `setting`, else `cpu` or `accelerator` by the default backend;
    a ValueError naming `name` where that is below 1."""
    if value is None:
        value = setting
    if value is None:
        value = cpu if jax.default_backend() == "cpu" else accelerator
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


# The walk down gathers the walks still going into a batch this many times smaller once they
# fit in one, again and again (`compaction_sizes`, `simulate`); None: by backend (COMPACT_CPU on
# the CPU, where a loop turn's cost is its arithmetic over every game; COMPACT_ACCELERATOR, none,
# on a GPU or TPU, where it is the turn's launches). The same walks for any value.
COMPACT: int | None = None
COMPACT_CPU = 4
COMPACT_ACCELERATOR = 1
_SMALLEST_COMPACTED = 8  # walks; no smaller batch is made


def compaction_sizes(batch_size: int, factor: int | None = None) -> tuple[int, ...]:
    """The batch sizes `simulate` compacts the walks still going into, largest first: the batch
    divided by `factor` (else COMPACT, else by backend) again and again while at least
    _SMALLEST_COMPACTED; () where `factor` is 1."""
    factor = _by_backend("the compaction factor", factor, COMPACT, COMPACT_CPU, COMPACT_ACCELERATOR)
    sizes = []
    size = batch_size // factor if factor > 1 else 0
    while size >= _SMALLEST_COMPACTED:
        sizes.append(size)
        size //= factor
    return tuple(sizes)


class _Climb(NamedTuple):
    """The backward loop's carry: the trees, each game's value to add and its current node."""

    tree: Tree
    value: chex.Array  # float[B], the value backed up into `index`'s parent
    index: chex.Array  # int32[B], the node whose parent is updated next (ROOT_INDEX: done)


def backward(tree: Tree, leaf_index: chex.Array, *, unroll: int | None = None) -> Tree:
    """mctx's backward pass from `leaf_index` int[B] to each root, over the batch at once.

    Level by level, for every game whose climb has not reached its root: the parent's value
    becomes the running mean with the discounted return from below, its visit count grows by one,
    and the edge from the parent records the child's value and one more visit, as in
    `mctx._src.search.backward`. Games already at their root write their old values back.
    """
    batch = jnp.arange(leaf_index.shape[0])
    root = Tree.ROOT_INDEX

    def unfinished(c: _Climb):
        return jnp.any(c.index != root)

    def level(c: _Climb) -> _Climb:
        t, index = c.tree, c.index
        active = index != root  # [B]
        parent = jnp.where(active, t.parents[batch, index], root)  # the root's parent is -1
        action = jnp.where(active, t.action_from_parent[batch, index], 0)
        count = t.node_visits[batch, parent]
        value = t.children_rewards[batch, parent, action] + (
            t.children_discounts[batch, parent, action] * c.value
        )
        parent_value = (t.node_values[batch, parent] * count + value) / (count + 1.0)
        child_value = t.node_values[batch, index]
        child_visits = t.children_visits[batch, parent, action] + 1

        def put(x, new, *at):  # inactive games keep x[at]
            return x.at[(batch, *at)].set(jnp.where(active, new, x[(batch, *at)]))

        t = t.replace(
            node_values=put(t.node_values, parent_value, parent),
            node_visits=put(t.node_visits, count + 1, parent),
            children_values=put(t.children_values, child_value, parent, action),
            children_visits=put(t.children_visits, child_visits, parent, action),
        )
        return _Climb(t, jnp.where(active, value, c.value), jnp.where(active, parent, root))

    def turn(c: _Climb) -> _Climb:  # `unroll` levels; a game at its root is left as it is
        for _ in range(unroll_levels(unroll)):
            c = level(c)
        return c

    leaf_index = jnp.asarray(leaf_index, dtype=jnp.int32)
    start = _Climb(tree, tree.node_values[batch, leaf_index], leaf_index)
    return jax.lax.while_loop(unfinished, turn, start).tree


class _Walk(NamedTuple):
    """The walk down's carry, per walk (mctx's `_SimulationState` with a batch axis): the B
    games', or the n of a compacted batch (`simulate`)."""

    rng_key: chex.PRNGKey  # [n]
    node_index: chex.Array  # int32[n], the node whose action was selected last
    action: chex.Array  # int32[n], that action
    next_node_index: chex.Array  # int32[n], the child it leads to (UNVISITED: a new leaf)
    depth: chex.Array  # float[n]
    is_continuing: chex.Array  # bool[n]


def fmix32(x):
    """murmur3's 32-bit finaliser (a bijection of uint32 that mixes every bit)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def key_words(key) -> chex.Array:
    """A key's raw words, uint32 (a typed key's data, or a raw key as it is)."""
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return key.astype(jnp.uint32)


def level_key(key, depth) -> chex.Array:
    """uint32[2] (a raw key): walk key `key` hashed with its level `depth` (`simulate`'s
    level_keys="hash"). Distinct levels of a walk get distinct keys, and walks' keys stay as
    independent as the walks' own keys are; no Threefry block is computed."""
    level = (depth.astype(jnp.uint32) + jnp.uint32(1)) * jnp.uint32(0x9E3779B9)
    return fmix32(key_words(key).reshape(-1)[-2:] + level)


def _lift(mask: chex.Array, x: chex.Array) -> chex.Array:
    """`mask` [B] with trailing axes of length 1, to broadcast against `x` [B, ...]."""
    return mask.reshape(mask.shape + (1,) * (x.ndim - 1))


def _keep_finished(going: chex.Array, new: _Walk, old: _Walk) -> _Walk:
    """`new` for the walks still `going` bool[B], `old` for the others (as vmap's loop selects)."""
    return jax.tree.map(
        lambda n, o: jax.lax.select(jnp.broadcast_to(_lift(going, n), n.shape), n, o), new, old
    )


def simulate(
    keys,
    tree: Tree,
    select_root,
    select_interior,
    max_depth: int,
    *,
    unroll: int | None = None,
    compact: tuple[int, ...] | None = None,
    level_keys: str = "split",
):
    """mctx's `simulate` over the batch: the same walk, keys and result, `unroll` steps a loop turn.

    `select_root(key, tree, node)` and `select_interior(key, tree, node, depth)` are mctx's
    selection functions for one tree; the interior one may read only `node`'s row of the tree
    (its children's statistics, the node's own values; mctx's, PUCT's, UCT's and ExIt's do).
    `jax.vmap` of mctx's per-tree `while_loop` turns the loop over the batch and runs one level
    per turn until the deepest walk stops, and its `switching_action_selection_wrapper` (a
    `lax.cond` on the depth) then computes both selections for every game at every level. Here
    every walk's first level, at its root, is taken before the loop with the root's selection
    alone, and the loop selects with the interior one alone (on the 2-core CPU, stub network,
    B = 256, a 32-simulation PUCT search took 22 - 24% less; docs/benchmarks.md, "The root's
    selection out of the loop"). The loop takes `unroll` levels a turn, each applied only to the
    walks still going (a finished walk keeps its state and key, as under vmap), so the same walks
    end in a fraction of the turns: a loop turn costs a round trip and kernel launches on an
    accelerator, which is what deep PUCT trees pay for.

    `compact` (`compaction_sizes`): once no more than compact[0] walks are still going, those
    are gathered (with as many finished ones) into a batch of compact[0] and walked on there,
    then into compact[1], and so on; the results are scattered back. Most walks end at their
    first levels, and a turn over the whole batch computes every game's selection, so on a CPU
    the deep tail of a search is walked at a fraction of its cost. The walks, keys and results
    are the same for any sizes.

    `level_keys`: how each level's selection key is made from the walk's key. "split" (mctx's):
    every level splits the walk's key, a Threefry call per walk and level in the loop's chain.
    "hash": level d selects with `level_key(walk key, d)`, a few integer operations, and the walk's
    key is not split. The selection keys differ from mctx's, so selections that draw from their
    key (mctx's PUCT tie-break) build other trees for the same key; selections that ignore it
    (Gumbel's interior one) build the same.
    """
    if level_keys not in ("split", "hash"):
        raise ValueError(f"level_keys must be 'split' or 'hash', got {level_keys!r}")
    hashed = level_keys == "hash"
    batch_size = keys.shape[0]
    if compact is None:
        compact = compaction_sizes(batch_size)

    def root_step(state: _Walk, t: Tree) -> _Walk:  # mctx's body_fun for one tree, at its root
        node_index = state.next_node_index
        if hashed:
            rng_key, selection_key = state.rng_key, level_key(state.rng_key, state.depth)
        else:
            rng_key, selection_key = jax.random.split(state.rng_key)
        action = select_root(selection_key, t, node_index)
        next_node_index = t.children_index[node_index, action]
        is_continuing = jnp.logical_and(next_node_index != Tree.UNVISITED, 1 < max_depth)
        return _Walk(rng_key, node_index, action, next_node_index, state.depth + 1, is_continuing)

    def step(state: _Walk, games) -> _Walk:  # one interior level of the walks of `games` int[n]
        node_index = state.next_node_index
        rows = _rows(tree, games, node_index)

        def select(key, row, depth):
            if hashed:
                return key, select_interior(level_key(key, depth), row, 0, depth)
            key, selection_key = jax.random.split(key)
            return key, select_interior(selection_key, row, 0, depth)

        rng_key, action = jax.vmap(select)(state.rng_key, rows, state.depth)
        next_node_index = tree.children_index[games, node_index, action]
        depth = state.depth + 1
        is_continuing = jnp.logical_and(next_node_index != Tree.UNVISITED, depth < max_depth)
        return _Walk(rng_key, node_index, action, next_node_index, depth, is_continuing)

    def turn(state: _Walk, games) -> _Walk:
        for _ in range(unroll_levels(unroll)):
            state = _keep_finished(state.is_continuing, step(state, games), state)
        return state

    def walk(state: _Walk, games, sizes):  # -> (node_index, action) of `games`' walks
        bound = sizes[0] if sizes else 0  # walk here while more than `bound` are going
        state = jax.lax.while_loop(
            lambda s: jnp.sum(s.is_continuing) > bound, lambda s: turn(s, games), state
        )
        if not sizes:
            return state.node_index, state.action

        def compacted():
            going_first = jnp.argsort(~state.is_continuing, stable=True)[:bound]  # distinct
            node_index, action = walk(
                jax.tree.map(lambda x: x[going_first], state), games[going_first], sizes[1:]
            )
            return (
                state.node_index.at[going_first].set(node_index),
                state.action.at[going_first].set(action),
            )

        return jax.lax.cond(
            jnp.any(state.is_continuing), compacted, lambda: (state.node_index, state.action)
        )

    start = _Walk(
        rng_key=keys,
        node_index=jnp.full((batch_size,), Tree.NO_PARENT, jnp.int32),
        action=jnp.full((batch_size,), Tree.NO_PARENT, jnp.int32),
        next_node_index=jnp.full((batch_size,), Tree.ROOT_INDEX, jnp.int32),
        depth=jnp.zeros((batch_size,), tree.children_prior_logits.dtype),
        is_continuing=jnp.ones((batch_size,), bool),
    )
    # Every walk starts at its root (depth 0, still going), so the first level is every game's.
    first = jax.vmap(root_step)(start, tree)
    sizes = tuple(n for n in compact if 0 < n < batch_size)
    return walk(first, jnp.arange(batch_size), sizes)


def _rows(tree: Tree, games, nodes) -> Tree:
    """n one-node trees ([n, 1, ...] arrays): node `nodes[i]` of game `games[i]`'s tree, with
    that game's root data; what an interior selection reads (`simulate`), gathered once."""
    take = lambda x: x[games, nodes][:, None]
    return tree.replace(
        node_visits=take(tree.node_visits),
        raw_values=take(tree.raw_values),
        node_values=take(tree.node_values),
        parents=take(tree.parents),
        action_from_parent=take(tree.action_from_parent),
        children_index=take(tree.children_index),
        children_prior_logits=take(tree.children_prior_logits),
        children_visits=take(tree.children_visits),
        children_rewards=take(tree.children_rewards),
        children_discounts=take(tree.children_discounts),
        children_values=take(tree.children_values),
        embeddings=jnp.zeros((games.shape[0], 1), jnp.int8),  # never read by a selection
        root_invalid_actions=tree.root_invalid_actions[games],
        extra_data=jax.tree.map(lambda x: x[games], tree.extra_data),
    )


def search(
    params,
    rng_key: chex.PRNGKey,
    *,
    root: mctx.RootFnOutput,
    recurrent_fn: mctx.RecurrentFn,
    root_action_selection_fn,
    interior_action_selection_fn,
    num_simulations: int,
    max_depth: int | None = None,
    invalid_actions: chex.Array | None = None,
    extra_data: Any = None,
    unroll: int | None = None,
    compact: tuple[int, ...] | None = None,
    capacity: int | None = None,
    level_keys: str = "split",
    start: tree_reuse.Start | None = None,
) -> Tree:
    """`mctx.search` (same arguments, keys split the same way, the same tree) with `backward`.

    `capacity`: trees of capacity + 1 nodes (default num_simulations + 1); `num_simulations` may
    then be a traced int32 up to it, so that one program runs every count (the nodes past the
    count stay empty, and the tree's search is the same as in a tree of its own size).
    `level_keys`: `simulate`'s (mctx's keys and trees with "split", the default).
    `start` (`azjax.tree_reuse`): trees of capacity + 1 nodes to continue, each game's kept
    nodes first; the new simulations' nodes follow them (`tree_reuse.continued`: the kept root
    takes the new root's prior). Capacity must hold the kept nodes and the simulations."""
    batch_size = root.value.shape[0]
    batch = jnp.arange(batch_size)
    capacity = num_simulations if capacity is None else capacity
    max_depth = capacity if max_depth is None else max_depth
    if invalid_actions is None:
        invalid_actions = jnp.zeros_like(root.prior_logits)

    def simulation(sim, carry):
        key, tree = carry
        key, simulate_key, expand_key = jax.random.split(key, 3)
        keys = jax.random.split(simulate_key, batch_size)
        parent, action = simulate(
            keys,
            tree,
            root_action_selection_fn,
            interior_action_selection_fn,
            max_depth,
            unroll=unroll,
            compact=compact,
            level_keys=level_keys,
        )
        child = tree.children_index[batch, parent, action]
        child = jnp.where(child == Tree.UNVISITED, first + sim, child)
        tree = mctx_search.expand(params, expand_key, tree, recurrent_fn, parent, action, child)
        return key, backward(tree, child, unroll=unroll)

    tree = mctx_search.instantiate_tree_from_root(
        root, capacity, root_invalid_actions=invalid_actions, extra_data=extra_data
    )
    first = tree_reuse.first_new_node(start, batch_size)  # int32[B]
    if start is not None:
        tree = tree_reuse.continued(tree, start)
    return jax.lax.fori_loop(0, num_simulations, simulation, (rng_key, tree))[1]


def gumbel_muzero_policy(
    params,
    rng_key: chex.PRNGKey,
    root: mctx.RootFnOutput,
    recurrent_fn: mctx.RecurrentFn,
    num_simulations: int,
    *,
    invalid_actions: chex.Array | None = None,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
    qtransform=mctx.qtransform_completed_by_mix_value,
    level_keys: str = "split",
) -> mctx.PolicyOutput:
    """`mctx.gumbel_muzero_policy` (same arguments and result for the same key) over `search`;
    `level_keys` is `simulate`'s (the same result either way: Gumbel's interior selection does not
    read its key)."""
    root = root.replace(prior_logits=_mask_invalid_actions(root.prior_logits, invalid_actions))
    rng_key, gumbel_key = jax.random.split(rng_key)
    gumbel = gumbel_scale * jax.random.gumbel(
        gumbel_key, shape=root.prior_logits.shape, dtype=root.prior_logits.dtype
    )
    tree = search(
        params,
        rng_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=functools.partial(
            mctx.gumbel_muzero_root_action_selection,
            num_simulations=num_simulations,
            max_num_considered_actions=max_num_considered_actions,
            qtransform=qtransform,
        ),
        interior_action_selection_fn=functools.partial(
            mctx.gumbel_muzero_interior_action_selection, qtransform=qtransform
        ),
        num_simulations=num_simulations,
        invalid_actions=invalid_actions,
        extra_data=mctx.GumbelMuZeroExtraData(root_gumbel=gumbel),
        level_keys=level_keys,
    )
    summary = tree.summary()
    considered_visit = jnp.max(summary.visit_counts, axis=-1, keepdims=True)
    completed_q = jax.vmap(qtransform, in_axes=[0, None])(tree, Tree.ROOT_INDEX)  # [B, A]
    to_argmax = seq_halving.score_considered(
        considered_visit, gumbel, root.prior_logits, completed_q, summary.visit_counts
    )
    action = action_selection.masked_argmax(to_argmax, invalid_actions)
    weights = jax.nn.softmax(
        _mask_invalid_actions(root.prior_logits + completed_q, invalid_actions)
    )
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=tree)
