"""Tree policies for `mctx.search`: UCT, and ExIt's UCT with the apprentice's prior as a bonus.

The tree is mctx's; these are its action selection functions (seed 002, section 5.1 and
Appendix C):

    UCT(s, a)    = q(s, a) + c_b sqrt(ln n(s) / n(s, a))
    UCT_NN(s, a) = UCT(s, a) + w_a pi(a | s, tau) / (n(s, a) + 1)

with q(s, a) = (Q(s, a) + 1) / 2, the mean backed-up value in [0, 1] as the paper's win rates
(mctx's Q is in [-1, 1] from the point of view of the player to move at s), n(s) = sum_a n(s, a)
and pi(a | s, tau) = softmax(prior_logits / tau). A child never tried has UCT = infinity: every
legal child is tried once before any is tried twice, in order of w_a pi (randomly where w_a = 0),
then the formula decides. With w_a = 0 it is plain UCT (`uct_action_selection`).

The paper's value-network term w_v Q_hat(s, a) is not a separate statistic here: mctx backs up
one value per node, so the leaf value is the blend (1 - lambda) v_net + lambda z_rollout made in
the recurrent function (azjax/exit.py), i.e. w_v = (1 - lambda) / lambda up to a scale. RAVE is
left out: it needs all-moves-as-first statistics that mctx's tree does not keep. The expansion
threshold is mctx's, 0 (a leaf is added and evaluated on its first visit).

Ties (untried children, equal scores) are broken at random by `tie_break`, numbers hashed from the
walk's key and the node's level (`tree_search.level_key`): no Threefry draw per node or level.

Illegal children: a child whose prior logit is at most `ILLEGAL_LOGIT` is never selected (the
evaluators of azjax/search.py give illegal moves -1e9), and at the root also the ones in
`tree.root_invalid_actions`.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import mctx

from azjax import tree_search

ILLEGAL_LOGIT = -1e8


def exit_action_selection(
    rng_key: chex.PRNGKey,
    tree: mctx.Tree,
    node_index: chex.Numeric,
    depth: chex.Numeric,
    *,
    c_uct: float,
    prior_weight: float,
    temperature: float = 1.0,
) -> chex.Array:
    """The action UCT_NN picks at `node_index` of an unbatched tree (module doc). int32[]."""
    visits = tree.children_visits[node_index]  # [A]
    logits = tree.children_prior_logits[node_index]  # [A]
    legal = logits > ILLEGAL_LOGIT
    legal = legal & ~((depth == 0) & tree.root_invalid_actions.astype(bool))
    q = (tree.qvalues(node_index) + 1.0) / 2.0  # [A], in [0, 1]
    n_s = jnp.sum(visits).astype(jnp.float32)
    n_sa = jnp.maximum(visits, 1).astype(jnp.float32)
    score = q + c_uct * jnp.sqrt(jnp.log(jnp.maximum(n_s, 1.0)) / n_sa)
    noise = 1e-7 * tie_break(rng_key, visits.shape[0])  # random tie-break
    first = noise
    if prior_weight != 0:  # plain UCT (a Python 0) needs no softmax: the bonus adds exactly 0
        prior = jax.nn.softmax(jnp.where(legal, logits / temperature, -jnp.inf))
        bonus = prior_weight * jnp.where(legal, prior, 0.0)
        score = score + bonus / (visits + 1.0)
        first = bonus + noise
    untried = legal & (visits == 0)
    first = jnp.where(untried, first, -jnp.inf)
    best = jnp.where(legal, score + noise, -jnp.inf)
    # No legal child (a finished game, in the tree or at the root): the walk must still go on,
    # and its value no longer counts (the edge into a finished game has discount 0). Taking the
    # least-visited child fans the visits out; argmax over all -inf would take child 0 every time
    # and grow a chain one node deeper per visit, each walk longer than the last.
    stuck = jnp.argmin(visits + noise)
    chosen = jnp.where(jnp.any(legal), jnp.argmax(best), stuck)
    return jnp.where(jnp.any(untried), jnp.argmax(first), chosen).astype(jnp.int32)


def uct_action_selection(
    rng_key: chex.PRNGKey,
    tree: mctx.Tree,
    node_index: chex.Numeric,
    depth: chex.Numeric,
    *,
    c_uct: float,
) -> chex.Array:
    """Plain UCT: every legal child once (in random order), then q + c_b sqrt(ln n(s) / n(s, a))."""
    return exit_action_selection(rng_key, tree, node_index, depth, c_uct=c_uct, prior_weight=0.0)


def uct_policy(
    params,
    rng_key: chex.PRNGKey,
    root: mctx.RootFnOutput,
    recurrent_fn: mctx.RecurrentFn,
    num_simulations: int,
    *,
    invalid_actions: chex.Array | None = None,
    c_uct: float,
    prior_weight: float = 0.0,
    temperature: float = 1.0,
    max_depth: int | None = None,
    capacity: int | None = None,
) -> mctx.PolicyOutput:
    """`mctx.search` with UCT_NN at every node (plain UCT where `prior_weight` = 0). `capacity`:
    `tree_search.search`'s (`num_simulations` may then be traced).

    Returns mctx.PolicyOutput over the B roots: `action` the most visited move (ties: the first),
    `action_weights` [B, A] the root visit distribution n(s, a) / n(s), `search_tree` the tree.
    """
    select = functools.partial(
        exit_action_selection, c_uct=c_uct, prior_weight=prior_weight, temperature=temperature
    )
    if invalid_actions is not None:
        root = root.replace(prior_logits=jnp.where(invalid_actions, -1e9, root.prior_logits))
    tree = tree_search.search(
        params,
        rng_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=lambda k, t, i: select(k, t, i, 0),
        interior_action_selection_fn=select,
        num_simulations=num_simulations,
        max_depth=max_depth,
        invalid_actions=invalid_actions,
        capacity=capacity,
        level_keys="hash",
    )
    visits = tree.summary().visit_counts  # [B, A]
    weights = visits / jnp.maximum(jnp.sum(visits, axis=-1, keepdims=True), 1)
    return mctx.PolicyOutput(
        action=jnp.argmax(visits, axis=-1).astype(jnp.int32),
        action_weights=weights,
        search_tree=tree,
    )


def tie_break(key, num_actions: int):
    """float32[A] in [0, 1): one pseudo-random number per action, from the key's own bits; the
    tie-break of every tree policy here and of PUCT (`azjax.search`).

    mctx draws `jax.random.uniform(key, [A])` for it: A/2 Threefry blocks per node and simulation,
    a third of a PUCT search's time on a CPU (and, before UCT used this, 3 - 17% of a batched
    pure-MCTS search's, docs/benchmarks.md). A tie-break needs only numbers that order the
    actions at random, and a split or hashed key's words are already random: one round of murmur3's
    finaliser (a bijection of uint32) over the actions' Weyl sequence XOR a key word costs a few
    integer operations per action and gives A distinct values (before the 24-bit rounding), any
    tied few of which win equally often (tests/test_search.py). Two rounds (the earlier form)
    cost 4 - 13% more of a PUCT search with the stub network.
    """
    words = tree_search.key_words(key).reshape(-1)
    x = tree_search.fmix32(
        jnp.arange(num_actions, dtype=jnp.uint32) * jnp.uint32(0x9E3779B9) ^ words[-1]
    )
    return (x >> 8).astype(jnp.float32) * (1.0 / (1 << 24))
