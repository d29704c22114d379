"""Tree reuse: the played move's subtree, renumbered, continues the next search."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
from azjax import tree_reuse
from azjax.search import SearchSpec, make_search
from azjax.selfplay import REUSE_KEEP, init_states, make_selfplay

HEX = games.make("hex", size=4)
SIMS = 24
KEEP = REUSE_KEEP * SIMS
B = 6
STEP = jax.jit(HEX.step)


def _at(tree, i):
    """Entry i of every leaf of `tree`."""
    return jax.tree.map(lambda x: x[i], tree)


def _check_tree(tree, used: int):
    """mctx's invariants on one unbatched tree's first `used` nodes and emptiness past them."""
    visits = np.asarray(tree.node_visits)
    children = np.asarray(tree.children_index)
    parents = np.asarray(tree.parents)
    assert parents[0] == -1 and tree.action_from_parent[0] == -1
    for j in range(1, used):
        p, a = parents[j], int(tree.action_from_parent[j])
        assert 0 <= p < j  # a parent is numbered before its children
        assert children[p, a] == j
        assert tree.children_visits[p, a] == visits[j]
        parent_state = _at(tree.embeddings, p)
        moved = STEP(parent_state, jnp.int32(a))
        for x, y in zip(jax.tree.leaves(moved), jax.tree.leaves(tree.embeddings)):
            np.testing.assert_array_equal(x, y[j])
    for j in range(used):  # a node's visits: its own first one and its children's
        assert visits[j] == 1 + np.asarray(tree.children_visits[j]).sum()
        assert ((children[j] == -1) | ((children[j] > j) & (children[j] < used))).all()
    assert (visits[used:] == 0).all() and (children[used:] == -1).all()


@pytest.fixture(scope="module")
def searched():
    """A PUCT search (uniform priors, rollouts) of B 4x4 Hex positions with room to keep
    KEEP nodes, its most visited moves' subtrees kept, and a search continuing them."""
    spec = SearchSpec.pure_mcts(SIMS, explore=True)
    search = jax.jit(make_search(HEX, spec, keep_nodes=KEEP))
    states = init_states(HEX, B)
    start = tree_reuse.empty_start(states, HEX.num_actions, keep_nodes=KEEP, num_simulations=SIMS)
    out = search(None, jax.random.PRNGKey(0), states, start)
    action = jnp.argmax(out.action_weights, axis=-1).astype(jnp.int32)
    kept = jax.jit(lambda t, a: tree_reuse.reroot(t, a, limit=KEEP))(out.search_tree, action)
    nxt = jax.vmap(HEX.step)(states, action)
    again = search(None, jax.random.PRNGKey(1), nxt, kept)
    afresh = search(None, jax.random.PRNGKey(1), nxt, start)
    return jax.device_get((out, action, kept, nxt, again, afresh))


def test_a_search_from_nothing_kept_fills_sims_plus_one_nodes(searched):
    out = searched[0]
    assert out.search_tree.node_visits.shape == (B, KEEP + SIMS)
    assert (out.search_tree.node_visits[:, 0] == SIMS + 1).all()
    for b in range(B):
        _check_tree(_at(out.search_tree, b), SIMS + 1)


def test_reroot_keeps_the_played_childs_subtree_renumbered(searched):
    out, action, kept, *_ = searched
    tree = out.search_tree
    for b in range(B):
        child = tree.children_index[b, 0, action[b]]
        assert kept.nodes[b] == tree.node_visits[b, child]  # one node a visit
        one = _at(kept.tree, b)
        _check_tree(one, int(kept.nodes[b]))
        assert one.node_visits[0] == tree.node_visits[b, child]
        assert one.node_values[0] == pytest.approx(float(tree.node_values[b, child]))
        np.testing.assert_array_equal(one.children_visits[0], tree.children_visits[b, child])


def test_a_continued_search_adds_its_simulations_to_the_kept_visits(searched):
    _, _, kept, nxt, again, afresh = searched
    tree = again.search_tree
    np.testing.assert_array_equal(tree.node_visits[:, 0], kept.nodes + SIMS)
    # the kept root searches with the new root's prior and noise (the same key's as afresh)
    np.testing.assert_array_equal(
        tree.children_prior_logits[:, 0], afresh.search_tree.children_prior_logits[:, 0]
    )
    assert not np.array_equal(tree.children_visits[:, 0], afresh.search_tree.children_visits[:, 0])
    for b in range(B):
        one = _at(tree, b)
        _check_tree(one, int(kept.nodes[b]) + SIMS)
        root = _at(nxt, b)
        np.testing.assert_array_equal(one.root_invalid_actions, ~HEX.legal_mask(root))
    np.testing.assert_allclose(again.action_weights.sum(-1), 1.0, atol=1e-6)


def test_reroot_keeps_nothing_over_the_limit_or_below_an_unvisited_move(searched):
    out, action, kept, *_ = searched
    small = tree_reuse.reroot(out.search_tree, action, limit=int(kept.nodes.min()) - 1)
    assert (np.asarray(small.nodes)[kept.nodes == kept.nodes.min()] == 0).all()
    exact = tree_reuse.reroot(out.search_tree, action, limit=int(kept.nodes.min()))  # fits
    np.testing.assert_array_equal(
        np.asarray(exact.nodes)[kept.nodes == kept.nodes.min()], int(kept.nodes.min())
    )
    unvisited = jnp.argmax(out.search_tree.children_index[:, 0] == -1, axis=-1)
    has = (out.search_tree.children_index[:, 0] == -1).any(-1)
    none = tree_reuse.reroot(out.search_tree, unvisited.astype(jnp.int32), limit=KEEP)
    assert (np.asarray(none.nodes)[np.asarray(has)] == 0).all()


def test_tree_reuse_is_puct_with_every_move_searched_in_full():
    with pytest.raises(ValueError, match="PUCT"):
        make_search(HEX, SearchSpec.pure_mcts(4, search="uct"), keep_nodes=8)
    spec = SearchSpec.pure_mcts(4, explore=True)
    with pytest.raises(ValueError, match="full_search_prob=1"):
        make_selfplay(
            HEX, spec, None, 4, 2, tree_reuse=True, full_search_prob=0.5, fast_simulations=2
        )


def test_selfplay_with_tree_reuse_plays_legal_games_to_their_ends():
    spec = SearchSpec.pure_mcts(8, explore=True)
    play = jax.jit(make_selfplay(HEX, spec, None, 20, 2, tree_reuse=True))
    states, traj = jax.device_get(play(None, jax.random.PRNGKey(2), init_states(HEX, 4)))
    np.testing.assert_allclose(traj.policy.sum(-1), 1.0, atol=1e-5)
    assert traj.done.any()
    for t in range(1, 20):  # a ply counts up by one, or restarts at 0 after a finished game
        expected = np.where(traj.done[t - 1], 0, traj.ply[t - 1] + 1)
        assert (traj.ply[t] == expected).all()
