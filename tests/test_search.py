"""Search checks on Tic-Tac-Toe positions whose answers are known by hand, and the faster search
against the plain mctx one it replaced."""

import dataclasses
import re

import chex
import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from scipy import stats
from test_noise import dirichlet_failures

import games
from azjax import network, symmetry
from azjax.search import (
    SearchSpec,
    decisive_wins,
    improved_policy,
    make_evaluator,
    make_search,
    raw_values,
    select_action,
)
from azjax.selection import tie_break

GAME = games.make("tictactoe")
# X O X / O X O / O X . : X to move; the only move, c3, wins on the diagonal.
ONE_LEFT = ["a1", "b1", "c1", "a2", "b2", "c2", "b3", "a3"]
# X a1, O b2, X b1, O c3: X wins at once with c1.
WIN_NOW = ["a1", "b2", "b1", "c3"]
# X b2, O a1, X c1: O must block at a3.
MUST_BLOCK = ["b2", "a1", "c1"]


def batch(moves, n):
    state = GAME.init()
    for m in moves:
        state = GAME.step(state, GAME.parse_action(m, state))
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n, *x.shape)), state)


@pytest.fixture(scope="module")
def net():
    model = network.PolicyValueNet(num_actions=9, num_blocks=1, num_filters=8, value_hidden=8)
    return network.make_apply(model), network.init_variables(model, GAME, jax.random.PRNGKey(0))


def root_value(spec, states, apply=None, variables=None, key=0):
    out = jax.jit(make_search(GAME, spec, apply))(variables, jax.random.PRNGKey(key), states)
    return np.asarray(out.search_tree.raw_values[:, 0])


@pytest.mark.parametrize("weight", [0.5, 1.0])
def test_rollout_outcome_is_blended_into_the_leaf_value(weight):
    # uniform evaluator: v = 0; the rollout from ONE_LEFT always ends in a win for the mover.
    spec = SearchSpec.pure_mcts(1, rollout_weight=weight)
    np.testing.assert_allclose(root_value(spec, batch(ONE_LEFT, 4)), weight)


def test_rollout_probability_sets_how_often_leaves_roll_out():
    spec = SearchSpec.pure_mcts(1, rollout_prob=0.3, rollout_weight=0.5)
    values = root_value(spec, batch(ONE_LEFT, 2000))
    assert set(np.unique(values)) == {0.0, 0.5}
    assert abs(np.mean(values == 0.5) - 0.3) < 0.05


def test_policy_rollouts_blend_with_the_network_value(net):
    apply, variables = net
    states = batch(ONE_LEFT, 2)
    spec = SearchSpec(
        num_simulations=1, rollout_policy="policy", rollout_prob=1.0, rollout_weight=0.25
    )
    _, v = apply(variables, jax.vmap(GAME.observe)(states))
    np.testing.assert_allclose(
        root_value(spec, states, apply, variables), 0.75 * v + 0.25, rtol=1e-5
    )


@pytest.mark.parametrize("kind", ["puct", "gumbel", "uct"])
def test_pure_mcts_takes_the_immediate_win(kind):
    spec = SearchSpec.pure_mcts(64, search=kind)
    out = jax.jit(make_search(GAME, spec))(None, jax.random.PRNGKey(1), batch(WIN_NOW, 8))
    best = select_action(jax.random.PRNGKey(0), spec, out, jnp.zeros(8, bool))
    np.testing.assert_array_equal(best, GAME.parse_action("c1"))
    # the win is worth +1 to the mover at the root
    assert np.all(np.asarray(out.search_tree.qvalues(jnp.zeros(8, jnp.int32))[:, 2]) > 0.99)


def test_pure_mcts_blocks_the_opponents_threat():
    # Random rollouts make a single search noisy (about 1 in 5 picks another move at 400
    # simulations), so the check is on 32 independent searches together: the block has the best
    # mean value for O and the most visits; every other move loses on average.
    spec = SearchSpec.pure_mcts(400)
    out = jax.jit(make_search(GAME, spec))(None, jax.random.PRNGKey(2), batch(MUST_BLOCK, 32))
    q = np.asarray(out.search_tree.qvalues(jnp.zeros(32, jnp.int32))).mean(0)
    visits = np.asarray(out.search_tree.summary().visit_counts).mean(0)
    block = GAME.parse_action("a3")
    first = jax.tree_util.tree_map(lambda x: x[0], batch(MUST_BLOCK, 1))
    legal = np.asarray(GAME.legal_mask(first))
    others = [a for a in np.flatnonzero(legal) if a != block]
    assert len(others) == 5
    assert np.argmax(visits) == block
    assert q[block] > max(q[others]) + 0.2
    assert max(q[others]) < -0.4


def stacked(positions):
    return jax.tree_util.tree_map(lambda *x: jnp.concatenate(x), *[batch(m, 1) for m in positions])


def test_decisive_moves_are_the_moves_that_win_at_once():
    wins, value = jax.jit(lambda s: decisive_wins(GAME, s))(
        stacked([WIN_NOW, ONE_LEFT, MUST_BLOCK, ["a1", "b2", "c3", "a3", "c1", "a2"]])
    )
    expected = np.zeros((4, 9), bool)
    expected[0, GAME.parse_action("c1")] = expected[1, GAME.parse_action("c3")] = True
    expected[3, [GAME.parse_action("b1"), GAME.parse_action("c2")]] = True  # X has two
    np.testing.assert_array_equal(wins, expected)
    np.testing.assert_array_equal(value, [1.0, 1.0, 0.0, 1.0])


@pytest.mark.parametrize("name, size", [("othello", 4), ("connect_four", None)])
def test_decisive_moves_agree_with_playing_each_move(name, size):
    # random positions; each legal move played on its own and its result read
    game = games.make(name, **({"size": size} if size else {}))
    states, found = [], 0
    rng = np.random.default_rng(0)
    step = jax.jit(game.step)
    for _ in range(30):
        s = game.init()
        while not bool(game.is_terminal(s)):
            states.append(s)
            s = step(s, int(rng.choice(np.flatnonzero(np.asarray(game.legal_mask(s))))))
    together = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *states)
    wins, value = jax.jit(lambda s: decisive_wins(game, s))(together)
    for i, s in enumerate(states):
        mover, legal = int(game.current_player(s)), np.asarray(game.legal_mask(s))
        for a in range(game.num_actions):
            nxt = step(s, a)
            won = legal[a] and bool(game.is_terminal(nxt)) and game.returns(nxt)[mover] > 0
            assert bool(wins[i, a]) == won
        found += int(np.any(wins[i]))
        assert value[i] == float(np.any(wins[i]))
    assert found >= 5  # the positions hold decisive moves to find


@pytest.mark.parametrize("kind", ["puct", "gumbel"])
def test_decisive_moves_see_the_threat_a_value_of_0_does_not(kind):
    # uniform priors and value 0: one visit of each of O's six moves shows which let X win at
    # once; without decisive moves every move is worth 0 after them
    spec = SearchSpec(search=kind, num_simulations=12, evaluator="uniform", decisive_moves=True)
    out = jax.jit(make_search(GAME, spec))(None, jax.random.PRNGKey(3), batch(MUST_BLOCK, 8))
    best = select_action(jax.random.PRNGKey(0), spec, out, jnp.zeros(8, bool))
    np.testing.assert_array_equal(best, GAME.parse_action("a3"))
    q = np.asarray(out.search_tree.qvalues(jnp.zeros(8, jnp.int32)))
    visited = np.asarray(out.search_tree.summary().visit_counts) > 0
    others = visited & (np.arange(9) != GAME.parse_action("a3"))
    assert others.any() and np.all(q[others] == -1.0)
    # a root with a winning move is won and searched through it alone
    won = jax.jit(make_search(GAME, spec))(None, jax.random.PRNGKey(3), batch(WIN_NOW, 2))
    np.testing.assert_array_equal(won.search_tree.raw_values[:, 0], 1.0)
    np.testing.assert_array_equal(won.action, GAME.parse_action("c1"))
    # with self-play's root noise too: the noise goes over the winning moves alone, so the
    # policy target holds nothing else (PUCT mixed it over every legal move)
    noisy = dataclasses.replace(spec, explore=True, num_simulations=32)
    states = batch(WIN_NOW, 16)
    out = jax.jit(make_search(GAME, noisy))(None, jax.random.PRNGKey(4), states)
    wins = np.asarray(jax.jit(lambda s: decisive_wins(GAME, s))(states)[0])
    assert np.asarray(out.action_weights)[~wins].sum() == 0.0


def test_root_noise_only_when_exploring(net):
    apply, variables = net
    states = batch(["b2"], 1)
    weights = {}
    for explore in (False, True):
        search = jax.jit(make_search(GAME, SearchSpec(num_simulations=16, explore=explore), apply))
        weights[explore] = [
            np.asarray(search(variables, jax.random.PRNGKey(k), states).action_weights)
            for k in range(3)
        ]
    np.testing.assert_array_equal(weights[False][0], weights[False][1])
    assert not np.array_equal(weights[True][0], weights[True][1])
    legal = np.asarray(GAME.legal_mask(jax.tree_util.tree_map(lambda x: x[0], states)))
    for w in weights[True] + weights[False]:
        assert np.all(w[0, ~legal] == 0)  # no search weight on occupied cells


def test_select_action_samples_early_and_is_greedy_late():
    import mctx

    weights = jnp.array([[0.1, 0.6, 0.3]] * 4000)
    out = mctx.PolicyOutput(
        action=jnp.zeros(4000, jnp.int32), action_weights=weights, search_tree=None
    )
    spec = SearchSpec()
    greedy = select_action(jax.random.PRNGKey(0), spec, out, jnp.zeros(4000, bool))
    np.testing.assert_array_equal(greedy, 1)
    sampled = np.asarray(select_action(jax.random.PRNGKey(0), spec, out, jnp.ones(4000, bool)))
    np.testing.assert_allclose(np.bincount(sampled, minlength=3) / 4000, [0.1, 0.6, 0.3], atol=0.03)


# ---- the search against the plain mctx one ---------------------------------------------------


def reference_search(game, spec, apply):
    """The search as it was before its PUCT was made cheaper (commit 3ac3209, no rollouts):
    `mctx.muzero_policy` with its own Dirichlet noise and tie-breaks, or
    `mctx.gumbel_muzero_policy`, calling back the plain root and recurrent functions."""

    def evaluate(variables, states):
        logits, value = apply(variables, jax.vmap(game.observe)(states))
        logits = jax.vmap(game.policy_to_actions)(states, logits)
        return jnp.where(jax.vmap(game.legal_mask)(states), logits, -1e9), value

    def recurrent_fn(variables, key, action, states):
        del key
        actor = jax.vmap(game.current_player)(states)
        legal = jax.vmap(game.legal_mask)(states)
        was_legal = jnp.take_along_axis(legal, action[:, None], axis=1)[:, 0]
        nxt = jax.vmap(game.step)(states, action)
        reward = jnp.take_along_axis(jax.vmap(game.returns)(nxt), actor[:, None], axis=1)[:, 0]
        reward = jnp.where(was_legal, reward, -1.0)
        done = jax.vmap(game.is_terminal)(nxt) | ~was_legal
        logits, value = evaluate(variables, nxt)
        out = mctx.RecurrentFnOutput(
            reward=reward,
            discount=jnp.where(done, 0.0, -1.0),
            prior_logits=logits,
            value=jnp.where(done, 0.0, value),
        )
        return out, nxt

    def search(variables, key, states):
        _, k_search = jax.random.split(key)
        logits, value = evaluate(variables, states)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=states)
        invalid = ~jax.vmap(game.legal_mask)(states)
        if spec.search == "puct":
            return mctx.muzero_policy(
                variables,
                k_search,
                root,
                recurrent_fn,
                spec.num_simulations,
                invalid_actions=invalid,
                dirichlet_fraction=spec.dirichlet_fraction if spec.explore else 0.0,
                dirichlet_alpha=spec.dirichlet_alpha,
                pb_c_init=spec.c_puct,
            )
        return mctx.gumbel_muzero_policy(
            variables,
            k_search,
            root,
            recurrent_fn,
            spec.num_simulations,
            invalid_actions=invalid,
            max_num_considered_actions=spec.max_considered_actions,
            gumbel_scale=spec.gumbel_scale if spec.explore else 0.0,
        )

    return search


HEX = games.make("hex", size=5)


def spread(game, n, plies, seed):
    """n positions of `game` after 0 .. plies - 1 random moves each."""

    def play(key, count):
        def body(s, k):
            legal = game.legal_mask(s)
            nxt = game.step(s, jax.random.categorical(k, jnp.where(legal, 0.0, -jnp.inf)))
            return nxt, s  # carry the next position, keep this one

        keys = jax.random.split(key, plies)
        _, path = jax.lax.scan(body, game.init(), keys)
        return jax.tree_util.tree_map(lambda x: x[count], path)

    keys = jax.random.split(jax.random.PRNGKey(seed), n)
    return jax.jit(jax.vmap(play))(keys, jnp.arange(n) % plies)


def root_summary(out):
    """What a search returns about its root: the move, its weights, visits and values."""
    tree = out.search_tree
    root = jnp.zeros(tree.node_values.shape[0], jnp.int32)
    return dict(
        action=out.action,
        weights=out.action_weights,
        visits=tree.summary().visit_counts,
        value=tree.node_values[:, 0],
        qvalues=tree.qvalues(root),
    )


def tree_summary(out):
    """The root summary and every node's visits and values."""
    tree = out.search_tree
    return dict(
        **root_summary(out),
        node_visits=tree.node_visits,
        node_values=tree.node_values,
        children_values=tree.children_values,
    )


def linear_net(game, seed):
    """(apply, variables) of a stand-in network: random linear maps of the observation to logits
    and to a tanh value. Its priors differ from move to move, and it compiles fast."""
    size = int(np.prod(game.observation_shape))
    k_policy, k_value = jax.random.split(jax.random.PRNGKey(seed))
    variables = {
        "policy": jax.random.normal(k_policy, (size, game.num_actions)),
        "value": 0.3 * jax.random.normal(k_value, (size,)),
    }

    def apply(variables, obs):
        x = obs.reshape(obs.shape[0], -1)
        return x @ variables["policy"], jnp.tanh(x @ variables["value"])

    return apply, variables


def root_q(t):
    """float[B, A]: the root children's Q-values of numpy trees `t`, for the root's mover."""
    return t.children_rewards[:, 0] + t.children_discounts[:, 0] * t.children_values[:, 0]


@pytest.mark.parametrize("game", [GAME, HEX], ids=["tictactoe", "hex5"])
@pytest.mark.parametrize("kind", ["gumbel", "puct"])
def test_search_equals_the_plain_mctx_search(game, kind):
    # Gumbel (with its noise): the same maths, so the same trees, node by node. PUCT without
    # noise: the same root. Its tie-breaks use other random numbers than mctx's, which changes
    # which of exactly tied actions wins: that happens below terminal states (every action is
    # illegal there, with equal priors) and moves nothing above them; a network's priors tie
    # nowhere else here. The uniform-prior case is the next test.
    apply, variables = linear_net(game, seed=5)
    states = spread(game, 16, 6, seed=6)
    spec = SearchSpec(
        search=kind, num_simulations=24, explore=kind == "gumbel", max_considered_actions=4
    )
    key = jax.random.PRNGKey(7)
    new = jax.jit(make_search(game, spec, apply))(variables, key, states)
    old = jax.jit(reference_search(game, spec, apply))(variables, key, states)
    summary = tree_summary if kind == "gumbel" else root_summary
    chex.assert_trees_all_close(summary(new), summary(old), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def owned_net():
    model = network.PolicyValueNet(
        num_actions=9, num_blocks=1, num_filters=8, value_hidden=8, ownership_head=True
    )
    return network.make_apply(model), network.init_variables(model, GAME, jax.random.PRNGKey(1))


def test_score_utility_mixes_the_value_with_the_predicted_margin(owned_net):
    apply, variables = owned_net
    weight = 0.25
    states = batch(WIN_NOW, 2)
    _, v, owned = apply(variables, jax.vmap(GAME.observe)(states), with_ownership=True)
    want = (1 - weight) * v + weight * jnp.mean(owned, axis=-1)
    spec = SearchSpec(num_simulations=1, score_utility=weight)
    np.testing.assert_allclose(root_value(spec, states, apply, variables), want, rtol=1e-5)
    plain = root_value(SearchSpec(num_simulations=1), states, apply, variables)
    np.testing.assert_allclose(plain, v, rtol=1e-5)  # 0: the value alone


def test_score_utility_scores_a_finished_game_by_its_final_margin(owned_net):
    # ONE_LEFT: X's only move c3 wins with five stones to O's four: margin 1/9 of the board.
    apply, variables = owned_net
    weight = 0.5
    spec = SearchSpec(num_simulations=2, score_utility=weight)
    out = jax.jit(make_search(GAME, spec, apply))(
        variables, jax.random.PRNGKey(0), batch(ONE_LEFT, 2)
    )
    c3 = GAME.parse_action("c3", GAME.init())
    reward = np.asarray(out.search_tree.children_rewards[:, 0, c3])
    np.testing.assert_allclose(reward, (1 - weight) * 1.0 + weight / 9, rtol=1e-6)


def test_score_utility_needs_the_networks_ownership_head(net):
    spec = SearchSpec.pure_mcts(4, score_utility=0.5)
    with pytest.raises(ValueError, match="score_utility needs the network evaluator"):
        make_search(GAME, spec)
    apply, variables = net  # no ownership head
    with pytest.raises(ValueError, match="with_ownership=True needs a network with ownership_head"):
        make_search(GAME, SearchSpec(num_simulations=2, score_utility=0.5), apply)(
            variables, jax.random.PRNGKey(0), batch(WIN_NOW, 2)
        )


@pytest.mark.parametrize("kind, count", [("gumbel", 8), ("puct", 2)])  # 2: the fewest averaged
def test_net_symmetries_search_with_the_network_averaged_over_them(kind, count):
    game = games.make("othello", size=4)
    apply, variables = linear_net(game, seed=3)
    states = spread(game, 8, 5, seed=4)
    spec = SearchSpec(search=kind, num_simulations=12, max_considered_actions=4)
    key = jax.random.PRNGKey(5)
    averaged = symmetry.averaged(apply, symmetry.symmetries(game), count)
    want = jax.jit(make_search(game, spec, averaged))(variables, key, states)
    spec_n = dataclasses.replace(spec, net_symmetries=count)
    got = jax.jit(make_search(game, spec_n, apply))(variables, key, states)
    chex.assert_trees_all_close(tree_summary(got), tree_summary(want), rtol=1e-5, atol=1e-6)
    plain = jax.jit(make_search(game, spec, apply))(variables, key, states)
    assert not np.allclose(plain.action_weights, got.action_weights, atol=1e-3)


def test_puct_trees_hold_the_prior_probabilities_mctx_computes():
    # `_puct_policy` stores each node's softmax once, at expansion, instead of mctx's logits
    # (whose softmax its selection takes at every visit): the same numbers, node by node.
    apply, variables = linear_net(HEX, seed=5)
    states = spread(HEX, 8, 6, seed=6)
    spec = SearchSpec(search="puct", num_simulations=12)
    key = jax.random.PRNGKey(7)
    new = jax.jit(make_search(HEX, spec, apply))(variables, key, states).search_tree
    old = jax.jit(reference_search(HEX, spec, apply))(variables, key, states).search_tree
    expanded = np.asarray(new.node_visits) > 0  # [B, N]
    np.testing.assert_array_equal(expanded, np.asarray(old.node_visits) > 0)
    probs = np.asarray(new.children_prior_logits)[expanded]
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    want = np.asarray(jax.nn.softmax(old.children_prior_logits))[expanded]
    np.testing.assert_allclose(probs, want, rtol=1e-5, atol=1e-7)


def test_raw_puct_values_are_q_unstretched_and_spread_the_root_visits():
    # puct_values="raw": the children's Q-values in [-1, 1] (the unvisited at the node's value),
    # not stretched min-max to [0, 1], so the first child above its parent no longer takes
    # every later simulation (benchmarks.tree_depth).
    apply, variables = linear_net(HEX, seed=5)
    states = spread(HEX, 32, 6, seed=6)
    key = jax.random.PRNGKey(7)
    outs = {}
    for values in ("minmax", "raw"):
        spec = SearchSpec(search="puct", num_simulations=16, puct_values=values)
        outs[values] = jax.jit(make_search(HEX, spec, apply))(variables, key, states)
    tree = outs["raw"].search_tree
    got = np.asarray(jax.vmap(raw_values, in_axes=(0, None))(tree, 0))  # the roots' rows [B, A]
    t = jax.tree.map(np.asarray, tree)
    q = root_q(t)
    want = np.where(t.children_visits[:, 0] > 0, q, t.node_values[:, :1])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert np.all(np.abs(got) <= 1.0 + 1e-6)
    share = {
        v: np.median(np.asarray(o.search_tree.children_visits[:, 0]).max(1)) / 16
        for v, o in outs.items()
    }
    assert share["raw"] < share["minmax"], share
    for o in outs.values():  # every simulation visits a legal root move
        visits = np.asarray(o.search_tree.children_visits[:, 0])
        assert np.all(visits.sum(1) == 16)
        assert not np.any(visits[~np.asarray(jax.vmap(HEX.legal_mask)(states))])
    with pytest.raises(ValueError, match="puct_values must be one of minmax, raw"):
        make_search(HEX, SearchSpec(search="puct", puct_values="max"), apply)(
            variables, key, states
        )


@pytest.mark.parametrize("values", ["minmax", "raw"])
def test_puct_expands_no_illegal_move_below_the_root(values):
    # A network whose every position is worth 0.9 to its mover contradicts itself: each child
    # then looks worse than its parent. Raw values scored the unvisited illegal children (prior
    # 0) at the parent's value, above every legal child, and the search expanded them.
    def apply(variables, obs):
        return jnp.zeros((obs.shape[0], GAME.num_actions)), jnp.full(obs.shape[0], 0.9)

    spec = SearchSpec(search="puct", num_simulations=100, puct_values=values)
    states = batch([], 4)
    tree = jax.jit(make_search(GAME, spec, apply))(None, jax.random.PRNGKey(0), states).search_tree
    flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), tree.embeddings)
    legal = np.asarray(jax.vmap(GAME.legal_mask)(flat)).reshape(tree.children_index.shape)
    expanded = np.asarray(tree.children_index) >= 0  # [B, N, A]: the edges the search took
    visited = (np.asarray(tree.node_visits) > 0)[..., None]
    assert expanded.any() and not np.any(expanded & visited & legal.any(-1, keepdims=True) & ~legal)


def test_first_play_urgency_values_the_unvisited_below_the_parent_and_deepens_the_trees():
    # fpu_reduction r: an unvisited child at the node's value less r * sqrt(the prior mass of the
    # visited children); the searches then go deeper into the moves tried (Leela Zero, KataGo).
    apply, variables = linear_net(HEX, seed=5)
    states = spread(HEX, 32, 6, seed=6)
    key = jax.random.PRNGKey(7)
    trees = {}
    for r in (0.0, 0.5):
        spec = SearchSpec(search="puct", num_simulations=16, puct_values="raw", fpu_reduction=r)
        trees[r] = jax.jit(make_search(HEX, spec, apply))(variables, key, states).search_tree
    t = jax.tree.map(np.asarray, trees[0.5])
    got = np.asarray(jax.vmap(raw_values, in_axes=(0, None, None))(trees[0.5], 0, 0.5))
    q = root_q(t)
    visited = t.children_visits[:, 0] > 0
    seen = np.where(visited, t.children_prior_logits[:, 0], 0.0).sum(1, keepdims=True)
    want = np.where(visited, q, t.node_values[:, :1] - 0.5 * np.sqrt(seen))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.all(seen > 0) and np.any(~visited & np.asarray(jax.vmap(HEX.legal_mask)(states)))
    plain = np.asarray(jax.vmap(raw_values, in_axes=(0, None, None))(trees[0.5], 0, 0.0))
    np.testing.assert_array_equal(plain, np.where(visited, q, t.node_values[:, :1]))
    tried = {
        r: np.mean((np.asarray(tr.children_visits[:, 0]) > 0).sum(1)) for r, tr in trees.items()
    }
    assert tried[0.5] < tried[0.0], tried  # fewer root moves tried, the rest deeper
    with pytest.raises(ValueError, match="fpu_reduction .0.5. needs puct_values=raw"):
        spec = SearchSpec(search="puct", puct_values="minmax", fpu_reduction=0.5)
        make_search(HEX, spec, apply)(variables, key, states)


def test_puct_breaks_exact_ties_as_mctx_does():
    # Uniform priors and no values: the first simulation's 9 root children tie exactly. mctx
    # adds 1e-7 * U(0, 1) to scores near 0.14, whose float32 spacing is 1.5e-8, so only a few
    # levels survive and the lowest index wins what is still tied: a1 gets about 18% of the
    # first visits and c3 6%. `tie_break` must reproduce that distribution, not fix it.
    n = 9000
    spec = SearchSpec.pure_mcts(1, rollout_prob=0.0)
    uniform = lambda variables, obs: (jnp.zeros((obs.shape[0], 9)), jnp.zeros(obs.shape[0]))
    counts = []
    for search in (make_search(GAME, spec), reference_search(GAME, spec, uniform)):
        out = jax.jit(search)(None, jax.random.PRNGKey(8), batch([], n))
        counts.append(np.bincount(np.argmax(np.asarray(out.action_weights), 1), minlength=9))
    assert stats.chi2_contingency(np.array(counts)).pvalue > 1e-3, counts
    assert np.all(counts[0][:3] > counts[0][-3:])  # the low-index preference is there too


def test_tie_break_numbers_are_distinct_and_uniform():
    keys = jax.random.split(jax.random.PRNGKey(9), 4000)
    u = np.asarray(jax.jit(jax.vmap(lambda k: tie_break(k, 121)))(keys))  # [4000, 121]
    assert u.min() >= 0 and u.max() < 1
    assert all(len(np.unique(row)) == 121 for row in u[:100])
    # uniform: each decile holds a tenth; the winning action is uniform over the 121
    deciles = np.bincount((u * 10).astype(int).ravel(), minlength=10) / u.size
    np.testing.assert_allclose(deciles, 0.1, atol=0.003)
    wins = np.bincount(np.argmax(u, axis=1), minlength=121)
    assert wins.max() < 4000 / 121 + 5 * np.sqrt(4000 / 121)


def test_tie_break_picks_uniformly_among_any_tied_actions():
    # exact ties among a few actions (the case it is for): each wins as often as the others
    keys = jax.random.split(jax.random.PRNGKey(10), 40_000)
    u = np.asarray(jax.jit(jax.vmap(lambda k: tie_break(k, 65)))(keys))  # [40000, 65]
    for tied in [(0, 1), (0, 1, 2), (3, 7, 11, 40), (0, 32, 64), tuple(range(10, 17))]:
        wins = np.bincount(np.argmax(u[:, tied], axis=1), minlength=len(tied))
        assert stats.chisquare(wins).pvalue > 1e-3, (tied, wins)


@pytest.mark.parametrize("alpha", [0.03, 1.0])
def test_puct_root_noise_is_dirichlet_over_the_legal_moves(alpha):
    # The root prior is (1 - f) p + f * noise over the legal moves; the noise recovered from the
    # search tree must be Dir(alpha) over the 8 legal moves, with nothing on the occupied cell.
    apply, variables = linear_net(GAME, seed=11)
    n, fraction = 4000, 0.25
    states = batch(["b2"], n)
    spec = SearchSpec(
        num_simulations=1, explore=True, dirichlet_alpha=alpha, dirichlet_fraction=fraction
    )
    out = jax.jit(make_search(GAME, spec, apply))(variables, jax.random.PRNGKey(10), states)
    noisy = np.asarray(out.search_tree.children_prior_logits[:, 0], np.float64)  # PUCT: probs
    logits, _ = apply(variables, jax.vmap(GAME.observe)(states))
    legal = np.asarray(jax.vmap(GAME.legal_mask)(states))
    prior = np.asarray(jax.nn.softmax(jnp.where(legal, logits, -jnp.inf)), np.float64)
    noise = np.where(legal, (noisy - (1 - fraction) * prior) / fraction, 0.0)
    assert np.all(noisy[~legal] == 0)
    assert noise.min() > -1e-5
    # recovered to about 1e-7: the KS statistic looks at values above 1e-4 only
    assert dirichlet_failures(np.clip(noise, 0, 1), legal, alpha, resolution=1e-4) == []


def test_chunks_of_one_search_each_game_alone_and_skip_finished_games():
    from azjax.search import in_chunks
    from azjax.selfplay import random_opening

    game = games.make("tictactoe")
    search = make_search(game, SearchSpec.pure_mcts(6), None)
    key = jax.random.PRNGKey(3)
    states = jax.vmap(lambda k: random_opening(game, k, 3))(jax.random.split(key, 3))
    won = game.init()
    for a in (0, 3, 1, 4, 2):  # the first player's top row: over
        won = game.step(won, a)
    states = jax.tree_util.tree_map(lambda x, y: jnp.concatenate([x, y[None]]), states, won)
    together = jax.jit(in_chunks(game, search, 1))(None, key, states)
    single = jax.jit(search)  # compiled once for the three games
    for i, k in enumerate(jax.random.split(key, 4)[:3]):
        alone = single(None, k, jax.tree_util.tree_map(lambda x, i=i: x[i : i + 1], states))
        np.testing.assert_allclose(together.action_weights[i], alone.action_weights[0], atol=1e-6)
        assert int(together.action[i]) == int(alone.action[0])
    assert bool(game.is_terminal(won))  # the finished game is not searched: zeros
    assert not np.any(np.asarray(together.action_weights[3]))
    assert not np.any(np.asarray(together.search_tree.node_visits[3]))


def test_chunks_of_several_games_are_each_chunk_searched_alone():
    from azjax.search import in_chunks
    from azjax.selfplay import random_opening

    game = games.make("tictactoe")
    search = make_search(game, SearchSpec.pure_mcts(6), None)
    key = jax.random.PRNGKey(4)
    states = jax.vmap(lambda k: random_opening(game, k, 2))(jax.random.split(key, 5))
    chunked = jax.jit(in_chunks(game, search, 2))(None, key, states)  # 2 + 2 + 1 (and a filler)
    assert chunked.action_weights.shape == (5, game.num_actions)
    for c, k in enumerate(jax.random.split(key, 3)):
        part = jax.tree_util.tree_map(lambda x, c=c: x[2 * c : 2 * c + 2], states)
        if c == 2:  # the last chunk: its game and a copy of the first game
            part = jax.tree_util.tree_map(lambda x, y: jnp.concatenate([x, y[:1]]), part, states)
        alone = jax.jit(search)(None, k, part)
        n = 1 if c == 2 else 2
        np.testing.assert_allclose(
            chunked.action_weights[2 * c : 2 * c + n], alone.action_weights[:n], atol=1e-6
        )


def test_a_batch_is_searched_at_once_unless_its_trees_outgrow_the_budget(monkeypatch):
    from azjax import search as search_module

    game = games.make("hex", size=6)
    assert search_module.chunk_games(game, 10_000, 64) == 64  # 64 trees of 10,001 nodes: fits
    monkeypatch.setattr(search_module, "TREE_BYTES", 64 << 20)
    chunk = search_module.chunk_games(game, 10_000, 64)
    assert 1 <= chunk < 64
    state = sum(x.nbytes for x in jax.tree_util.tree_leaves(game.init()))
    per_tree = 10_001 * (6 * 4 * 36 + 20 + state)
    fit = (64 << 20) // per_tree
    count = -(-64 // fit)
    assert chunk * count >= 64 and chunk <= fit and (chunk - 1) * count < 64  # even chunks
    assert search_module.chunk_games(game, 10**9, 64) == 1  # at least one game
    with pytest.raises(ValueError, match="at least 1 game"):
        make_search(game, SearchSpec.pure_mcts(8), chunk=0)


def test_the_trees_memory_budget_by_backend(monkeypatch):
    from azjax import search as search_module

    monkeypatch.setattr(search_module, "TREE_BYTES", None)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert search_module.tree_bytes() == search_module.CPU_TREE_BYTES

    class Device:
        def __init__(self, stats):
            self.stats = stats

        def memory_stats(self):
            return self.stats

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(jax, "devices", lambda: [Device({"bytes_limit": 80 << 30})])
    assert search_module.tree_bytes() == 20 << 30  # a quarter of the device's memory
    monkeypatch.setattr(jax, "devices", lambda: [Device(None)])  # a device that does not say
    assert search_module.tree_bytes() == search_module.ACCELERATOR_TREE_BYTES
    monkeypatch.setattr(search_module, "TREE_BYTES", 123)
    assert search_module.tree_bytes() == 123


# ---- rollouts at rollout_prob < 1: only the drawn leaves are played out ----------------------


@pytest.mark.parametrize("policy", ["random", "policy"])
def test_rollout_where_gives_the_whole_batchs_outcomes(policy):
    # The leaves drawn for a rollout, gathered and played out alone, get the outcomes a rollout
    # of the whole batch gives them; with more drawn than the capacity, the whole batch is
    # played out. (Sampled policy rollouts too: each state plays with its own keys.)
    from azjax.search import make_rollout_per_state, rollout_capacity, rollout_where

    apply, variables = linear_net(HEX, seed=12)
    spec = SearchSpec(rollout_policy=policy, rollout_prob=0.3, rollout_sample=True)
    rollout = make_rollout_per_state(HEX, spec, apply)
    n = 64
    states = spread(HEX, n, 12, seed=13)
    keys = jax.random.split(jax.random.PRNGKey(14), n)
    capacity = rollout_capacity(n, 0.3)
    assert capacity < n

    @jax.jit
    def both(rolled):
        where = rollout_where(rollout, variables, keys, states, rolled, capacity=capacity)
        return where, rollout(variables, keys, states)

    few = np.asarray(jax.random.bernoulli(jax.random.PRNGKey(15), 0.3, (n,)))
    for rolled in (few, np.ones(n, bool)):  # gathered, then whole
        where, whole = map(np.asarray, both(rolled))
        np.testing.assert_array_equal(where[rolled], whole[rolled])
    assert set(np.unique(whole)) <= {-1.0, 1.0}
    assert 0 < few.sum() <= capacity


def test_rollout_where_plays_out_only_the_capacity():
    # A stand-in rollout that returns the size of the batch it was given.
    from azjax.search import rollout_where

    size = lambda variables, keys, states: jnp.full(keys.shape[0], keys.shape[0], jnp.float32)
    n, capacity = 20, 8
    states, keys = jnp.zeros(n), jax.random.split(jax.random.PRNGKey(0), n)
    run = jax.jit(lambda rolled: rollout_where(size, None, keys, states, rolled, capacity=capacity))
    rolled = np.arange(n) % 3 == 0  # 7 of 20
    np.testing.assert_array_equal(np.asarray(run(rolled))[rolled], capacity)
    rolled = np.arange(n) % 2 == 0  # 10 of 20: more than the capacity
    np.testing.assert_array_equal(np.asarray(run(rolled))[rolled], n)
    all_of_them = rollout_where(size, None, keys, states, rolled, capacity=n)
    np.testing.assert_array_equal(np.asarray(all_of_them), n)


@pytest.mark.parametrize("n", [16, 256, 1024, 4096])
@pytest.mark.parametrize("prob", [0.05, 0.3, 0.5, 0.9])
def test_rollout_capacity_is_rarely_exceeded(n, prob):
    from azjax.search import rollout_capacity

    capacity = rollout_capacity(n, prob)
    assert n * prob < capacity <= n
    assert stats.binom.sf(capacity, n, prob) < 1e-4  # P(more drawn than the capacity)
    if n >= 256 and prob <= 0.5:
        assert capacity < 0.75 * n  # and the saving is real
    assert rollout_capacity(n, 1.0) == n


def test_a_budget_runs_any_count_up_to_the_spec_in_one_program(lowerings):
    from azjax.ladder import rung_spec
    from azjax.search import Budget, in_chunks
    from azjax.selfplay import random_opening

    key = jax.random.PRNGKey(4)
    states = jax.vmap(lambda k: random_opening(GAME, k, 2))(jax.random.split(key, 3))
    shared = jax.jit(make_search(GAME, rung_spec(16)))  # trees of 17 nodes, any count up to 16
    chunked = jax.jit(in_chunks(GAME, make_search(GAME, rung_spec(16)), 2))
    for sims in (3, 9, 16):
        alone = jax.jit(make_search(GAME, rung_spec(sims)))(None, key, states)
        with lowerings() as lowered:
            out = shared(Budget(np.int32(sims)), key, states)
        assert len(lowered) == (1 if sims == 3 else 0)  # one program for every count
        np.testing.assert_array_equal(out.action, alone.action)  # the same search
        np.testing.assert_array_equal(
            out.search_tree.summary().visit_counts, alone.search_tree.summary().visit_counts
        )
        assert int(np.asarray(out.search_tree.node_visits[:, sims + 1 :]).sum()) == 0
        by_chunk = chunked(Budget(np.int32(sims)), key, states)  # a Budget through the chunks
        assert np.asarray(by_chunk.search_tree.summary().visit_counts).sum() == 3 * sims
    with pytest.raises(ValueError, match="a Budget is the variables of a UCT search"):
        make_search(GAME, SearchSpec.pure_mcts(8))(Budget(np.int32(4)), key, states)


def pruned_by_hand(visits, prior, value, explore, k):
    """KataGo's policy target pruning as the paper words it, by a fine scan: from each child but
    the most visited, take back up to sqrt(k P N) visits while its PUCT score stays below the
    best's; drop what is left with a visit or none."""
    best = int(np.argmax(visits))
    best_score = value[best] + explore[best] / (visits[best] + 1)
    forced = np.sqrt(k * prior * visits.sum())
    kept = visits.astype(np.float64).copy()
    for c in np.flatnonzero(visits):
        if c != best:
            take = np.linspace(0.0, min(forced[c], visits[c]), 20001)
            below = value[c] + explore[c] / (visits[c] - take + 1) < best_score
            kept[c] = visits[c] - take[below].max(initial=0.0)
    return np.where((kept > 1) | (np.arange(len(visits)) == best), kept, 0.0)


def test_forced_playouts_force_the_noised_root_moves_and_are_pruned_from_the_policy():
    # KataGo's forced playouts (k = 2): while a root child has had some visits but fewer than
    # sqrt(k P N), the root selects it; the policy then gives back the forced visits that leave a
    # child below the best one's PUCT score, and drops children left with a visit or none.
    from azjax.search import _puct_scores, _puct_select

    apply, variables = linear_net(HEX, seed=5)
    states = spread(HEX, 32, 6, seed=6)
    key = jax.random.PRNGKey(7)
    out = {}
    for k in (0.0, 2.0):
        spec = SearchSpec(
            search="puct", num_simulations=32, puct_values="raw", explore=True, forced_playouts=k
        )
        out[k] = jax.jit(make_search(HEX, spec, apply))(variables, key, states)
    tree = out[2.0].search_tree
    terms = dict(pb_c_init=1.25, values="raw", fpu_reduction=0.0)
    value, explore = jax.vmap(lambda t: _puct_scores(t, 0, **terms))(tree)
    visits = np.asarray(tree.children_visits[:, 0])
    prior = np.asarray(tree.children_prior_logits[:, 0])
    value, explore = np.asarray(value, np.float64), np.asarray(explore, np.float64)
    weights = np.asarray(out[2.0].action_weights)
    legal = np.asarray(jax.vmap(HEX.legal_mask)(states))
    for b in range(len(visits)):
        want = pruned_by_hand(visits[b], prior[b], value[b], explore[b], 2.0)
        np.testing.assert_allclose(weights[b], want / want.sum(), rtol=1e-3, atol=1e-4)
    assert np.all(weights[~legal] == 0) and np.allclose(weights.sum(-1), 1)
    assert np.array_equal(weights.argmax(-1), visits.argmax(-1))
    pruned = (weights > 0).sum(-1) < (visits > 0).sum(-1)
    assert pruned.mean() > 0.5, pruned.mean()  # most roots had visits to give back

    # The root's selection: an owed child first; with none owed, PUCT as without forcing.
    def picks(forced):
        return np.asarray(
            jax.vmap(lambda t: _puct_select(key, t, 0, 0, forced=forced, **terms))(tree)
        )

    def lagging(tree, by):  # bool[B, A]: tried root moves more than `by` short of sqrt(k P N)
        n, p = np.asarray(tree.children_visits[:, 0]), np.asarray(tree.children_prior_logits[:, 0])
        return (n > 0) & (n + by < np.sqrt(2.0 * p * n.sum(-1, keepdims=True)))

    owed = lagging(tree, 0)
    forced, plain = picks(2.0), picks(0.0)
    for b in range(len(visits)):
        assert owed[b, forced[b]] if owed[b].any() else forced[b] == plain[b]
    assert owed.any(-1).mean() > 0.2  # the check above saw owed children

    # Without forcing, more tried root moves end more than a visit short of sqrt(k P N) (6 of the
    # batch's against none).
    short = {k: lagging(o.search_tree, 1).sum() for k, o in out.items()}
    assert short[2.0] < short[0.0], short
    # Off (k = 0) or not exploring (evaluation), the search is PUCT's as it was.
    quiet = SearchSpec(search="puct", num_simulations=32, puct_values="raw", forced_playouts=2.0)
    chex.assert_trees_all_equal(
        jax.jit(make_search(HEX, quiet, apply))(variables, key, states).action_weights,
        jax.jit(make_search(HEX, dataclasses.replace(quiet, forced_playouts=0.0), apply))(
            variables, key, states
        ).action_weights,
    )


def improved_by_hand(tree, logits):
    """float[B, A]: Danihelka et al.'s (2022) improved policy at the roots, from their Appendix D
    in numpy: softmax(logits + (50 + max n) * 0.1 * completed Q stretched to [0, 1])."""
    t = jax.tree.map(np.asarray, tree)
    logits = np.asarray(logits, np.float64)
    n = t.children_visits[:, 0].astype(np.float64)  # [B, A]
    q = root_q(t)
    prior = np.exp(logits - logits.max(-1, keepdims=True))
    prior /= prior.sum(-1, keepdims=True)
    seen = n > 0
    weighted = (prior * q * seen).sum(-1) / (prior * seen).sum(-1)
    mixed = (t.raw_values[:, 0] + n.sum(-1) * weighted) / (n.sum(-1) + 1)
    completed = np.where(seen, q, mixed[:, None])
    low, high = completed.min(-1, keepdims=True), completed.max(-1, keepdims=True)
    sigma = (50 + n.max(-1, keepdims=True)) * 0.1 * (completed - low) / np.maximum(high - low, 1e-8)
    z = np.where(t.root_invalid_actions, -np.inf, logits + sigma)
    p = np.exp(z - z.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def test_the_improved_policy_moves_the_clean_prior_by_the_completed_q_values():
    # PUCT's trees keep the network's root logits from before the noise; the improved policy is
    # computed from them and the root's Q-values, as Gumbel MuZero's target is.
    apply, variables = linear_net(HEX, seed=5)
    states = spread(HEX, 16, 6, seed=6)
    spec = SearchSpec(search="puct", num_simulations=24, puct_values="raw", explore=True)
    key = jax.random.PRNGKey(7)
    tree = jax.jit(make_search(HEX, spec, apply))(variables, key, states).search_tree
    logits, _ = jax.jit(make_evaluator(HEX, "network", apply))(variables, states)
    np.testing.assert_allclose(np.asarray(tree.extra_data), np.asarray(logits), rtol=1e-6)
    noised = np.asarray(tree.children_prior_logits[:, 0])  # the root's probabilities, noised
    assert np.abs(noised - np.asarray(jax.nn.softmax(logits))).max() > 0.01
    got = np.asarray(jax.jit(improved_policy)(tree))
    np.testing.assert_allclose(got, improved_by_hand(tree, logits), rtol=1e-4, atol=1e-6)
    legal = np.asarray(jax.vmap(HEX.legal_mask)(states))
    np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-5)
    assert np.all(got[~legal] == 0.0)
    # It moves mass towards the visited move with the best Q, away from the worst.
    t = jax.tree.map(np.asarray, tree)
    q = root_q(t)
    seen = t.children_visits[:, 0] > 0
    prior = np.asarray(jax.nn.softmax(logits))
    rows = np.flatnonzero(seen.sum(-1) >= 2)
    best = np.where(seen, q, -np.inf).argmax(-1)[rows]
    worst = np.where(seen, q, np.inf).argmin(-1)[rows]
    assert np.all(got[rows, best] > prior[rows, best])
    assert np.all(got[rows, worst] < prior[rows, worst])


@pytest.mark.parametrize(
    "settings, said",
    [
        (dict(num_simulations=0), "num_simulations must be an int >= 1, got 0"),
        (dict(num_simulations=2.5), "num_simulations must be an int >= 1"),
        (dict(search="mcts"), "search must be one of puct, gumbel, uct"),
        (dict(c_puct=float("nan")), "c_puct must be a number >= 0"),
        (dict(rollout_prob=2.0), "rollout_prob must be a number in [0, 1]"),
        (dict(rollout_weight=float("nan")), "rollout_weight must be a number in [0, 1]"),
        (dict(max_considered_actions=0), "max_considered_actions must be an int >= 1"),
        (dict(score_utility=-1.0), "score_utility must be a number in [0, 1]"),
    ],
)
def test_a_search_spec_out_of_range_is_refused(settings, said):
    """SearchSpec took any value: 0 simulations of UCT played an illegal move, a NaN rollout
    weight gave NaN root values, with no error."""
    with pytest.raises(ValueError, match=re.escape(f"SearchSpec: {said}")):
        SearchSpec(**settings)
    SearchSpec.pure_mcts(1, search="uct")  # the smallest search is one simulation
