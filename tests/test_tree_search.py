"""azjax.tree_search builds the same trees as mctx.search and mctx.gumbel_muzero_policy.

A toy environment whose rewards, discounts, values and priors are hashed from the path, so that
trees grow deep and uneven across the batch (the case where mctx's vmapped backward pass and the
batched one differ in how they loop), with games that end (discount 0) and max_depth cut-offs.
"""

import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from azjax import tree_search

B, A, SIMS = 6, 5, 24


def _root(key):
    k1, k2 = jax.random.split(key)
    logits = 3.0 * jax.random.normal(k1, (B, A))  # peaky priors: deep PUCT trees
    return mctx.RootFnOutput(
        prior_logits=logits,
        value=jax.random.uniform(k2, (B,), minval=-1, maxval=1),
        embedding=jnp.arange(B, dtype=jnp.uint32) * 7919,
    )


def _recurrent(params, key, action, embedding):
    del params, key
    state = embedding * jnp.uint32(31) + action.astype(jnp.uint32) + 1  # [B] path hash
    u = jax.random.uniform(jax.random.key(0), (1,))  # a constant, to keep float ops alike
    bits = jax.vmap(
        lambda s: jax.random.uniform(jax.random.fold_in(jax.random.key(1), s), (A + 3,))
    )(state)  # [B, A + 3]
    ended = bits[:, 0] < 0.15
    out = mctx.RecurrentFnOutput(
        reward=jnp.where(ended, jnp.sign(bits[:, 1] - 0.5), 0.0) + 0 * u[0],
        discount=jnp.where(ended, 0.0, -1.0),
        prior_logits=4.0 * bits[:, 3:],
        value=2.0 * bits[:, 2] - 1.0,
    )
    return out, state


@pytest.fixture(scope="module")
def keys():
    return jax.random.split(jax.random.key(42), 3)


def _assert_same_tree(ours, theirs):
    for name in (
        "node_visits",
        "raw_values",
        "node_values",
        "parents",
        "action_from_parent",
        "children_index",
        "children_prior_logits",
        "children_visits",
        "children_rewards",
        "children_discounts",
        "children_values",
        "embeddings",
    ):
        np.testing.assert_array_equal(
            np.asarray(getattr(ours, name)), np.asarray(getattr(theirs, name)), err_msg=name
        )


def _run(fn, *args):
    """`fn(*args)` compiled at XLA:CPU's default optimisation level: the suite compiles at level
    0 (tests/xla_flags.py), where two programs that compute the same sums may round their last
    bit differently, and these tests compare values exactly."""
    compiled = jax.jit(fn).lower(*args).compile({"xla_backend_optimization_level": 2})
    return compiled(*args)


@pytest.mark.parametrize(
    "max_depth,unroll,compact",
    [(None, 1, ()), (3, 1, ()), (None, 3, ()), (None, 1, (4, 2, 1)), (3, 2, (3, 1))],
)
def test_search_builds_the_same_trees_as_mctx(keys, max_depth, unroll, compact):
    select = functools.partial(mctx.muzero_action_selection, pb_c_init=1.25)
    kwargs = dict(
        root=_root(keys[0]),
        recurrent_fn=_recurrent,
        root_action_selection_fn=lambda k, t, i: select(k, t, i, 0),
        interior_action_selection_fn=select,
        num_simulations=SIMS,
        max_depth=max_depth,
        invalid_actions=jnp.zeros((B, A)).at[0, 1].set(1),
    )
    ours = _run(
        lambda k: tree_search.search((), k, unroll=unroll, compact=compact, **kwargs), keys[1]
    )
    theirs = _run(lambda k: mctx.search((), k, **kwargs), keys[1])
    _assert_same_tree(ours, theirs)
    assert int(jnp.max(ours.node_visits[:, 0])) == SIMS + 1
    if max_depth is None:  # the toy trees are deep and uneven: the case the loop must handle
        depth = np.zeros((B, SIMS + 1), int)
        parents = np.asarray(ours.parents)
        for n in range(1, SIMS + 1):
            depth[:, n] = np.where(parents[:, n] >= 0, depth[np.arange(B), parents[:, n]] + 1, 0)
        assert depth.max() >= 4 and depth.max(axis=1).min() < depth.max()


def test_levels_per_turn_default_by_backend_and_the_override_wins(monkeypatch):
    monkeypatch.setattr(tree_search, "UNROLL", None)
    for backend, levels in (("cpu", 1), ("gpu", 4), ("tpu", 4)):
        monkeypatch.setattr(jax, "default_backend", lambda b=backend: b)
        assert tree_search.unroll_levels() == levels
        assert tree_search.unroll_levels(2) == 2
    monkeypatch.setattr(tree_search, "UNROLL", 3)
    assert tree_search.unroll_levels() == 3
    with pytest.raises(ValueError, match="at least 1"):
        tree_search.unroll_levels(0)


def test_compaction_sizes_by_backend_and_factor(monkeypatch):
    monkeypatch.setattr(tree_search, "COMPACT", None)
    for backend, sizes in (("cpu", (64, 16)), ("gpu", ()), ("tpu", ())):
        monkeypatch.setattr(jax, "default_backend", lambda b=backend: b)
        assert tree_search.compaction_sizes(256) == sizes
    assert tree_search.compaction_sizes(1024, 4) == (256, 64, 16)
    assert tree_search.compaction_sizes(256, 2) == (128, 64, 32, 16, 8)
    assert tree_search.compaction_sizes(256, 1) == ()
    assert tree_search.compaction_sizes(16, 4) == ()  # no batch of fewer than 8 walks
    monkeypatch.setattr(tree_search, "COMPACT", 8)
    assert tree_search.compaction_sizes(1024) == (128, 16)
    with pytest.raises(ValueError, match="at least 1"):
        tree_search.compaction_sizes(256, 0)


@pytest.mark.parametrize("factor,level_keys", [(1, "split"), (2, "split"), (1, "hash")])
def test_gumbel_policy_is_mctx_gumbel_muzero_policy(keys, factor, level_keys, monkeypatch):
    monkeypatch.setattr(tree_search, "COMPACT", factor)  # 2: the walks compacted into 3, then 1
    monkeypatch.setattr(tree_search, "_SMALLEST_COMPACTED", 1)
    invalid = jnp.zeros((B, A), bool).at[2, :2].set(True)
    kwargs = dict(
        root=_root(keys[0]),
        recurrent_fn=_recurrent,
        num_simulations=SIMS,
        invalid_actions=invalid,
        max_num_considered_actions=4,
        gumbel_scale=1.0,
    )
    # Gumbel's interior selection reads no key: hashed level keys build mctx's trees too.
    policy = functools.partial(tree_search.gumbel_muzero_policy, level_keys=level_keys)
    ours = _run(lambda k: policy((), k, **kwargs), keys[2])
    theirs = _run(lambda k: mctx.gumbel_muzero_policy((), k, **kwargs), keys[2])
    np.testing.assert_array_equal(np.asarray(ours.action), np.asarray(theirs.action))
    np.testing.assert_array_equal(
        np.asarray(ours.action_weights), np.asarray(theirs.action_weights)
    )
    _assert_same_tree(ours.search_tree, theirs.search_tree)


def test_hashed_level_keys_select_at_random_and_independently_level_to_level():
    """level_keys="hash": the key a selection gets at level d of a walk is `level_key(walk key,
    d)`. Ties broken with it (`tie_break`, as PUCT's and UCT's selections do) must still pick
    each tied action equally often at every level, and a walk's picks at successive levels must
    be independent; all levels of one walk get distinct keys."""
    from azjax.selection import tie_break

    n, actions, levels = 6000, 5, 6
    walks = jax.random.split(jax.random.key(7), n)

    @jax.jit
    def picks(walks):
        def walk(key):
            return jnp.stack(
                [
                    jnp.argmax(tie_break(tree_search.level_key(key, jnp.float32(d)), actions))
                    for d in range(levels)
                ]
            )

        return jax.vmap(walk)(walks)

    chosen = np.asarray(picks(walks))  # [n, levels]
    chi2_df4_999 = 18.47  # P(chi2 with 4 degrees of freedom > 18.47) = 0.001
    chi2_df24_999 = 51.18  # ... with 24
    for d in range(levels):
        counts = np.bincount(chosen[:, d], minlength=actions)
        expected = n / actions
        assert ((counts - expected) ** 2 / expected).sum() < chi2_df4_999, (d, counts)
    for d in range(levels - 1):
        pairs = np.bincount(chosen[:, d] * actions + chosen[:, d + 1], minlength=actions**2)
        expected = n / actions**2
        assert ((pairs - expected) ** 2 / expected).sum() < chi2_df24_999, d
    one = np.asarray(jax.vmap(lambda d: tree_search.level_key(walks[0], d))(jnp.arange(512.0)))
    assert len({tuple(k) for k in one}) == 512


def test_hashed_level_keys_search_with_a_key_drawing_selection():
    """mctx's own PUCT selection draws its tie-break from the key: with hashed level keys the
    search still runs it (raw keys, no splits), and where no scores tie exactly (these float
    priors) the 1e-7 draw decides nothing: the same trees as with mctx's split keys."""
    select = functools.partial(mctx.muzero_action_selection, pb_c_init=1.25)
    kwargs = dict(
        root=_root(jax.random.key(3)),
        recurrent_fn=_recurrent,
        root_action_selection_fn=lambda k, t, i: select(k, t, i, 0),
        interior_action_selection_fn=select,
        num_simulations=SIMS,
    )
    hashed = _run(
        lambda k: tree_search.search((), k, level_keys="hash", **kwargs), jax.random.key(5)
    )
    split = _run(lambda k: tree_search.search((), k, **kwargs), jax.random.key(5))
    assert np.all(np.asarray(hashed.node_visits[:, 0]) == SIMS + 1)
    _assert_same_tree(hashed, split)
    with pytest.raises(ValueError, match="level_keys must be"):
        tree_search.search((), jax.random.key(5), level_keys="fold", **kwargs)
