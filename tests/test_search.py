"""Search checks on Tic-Tac-Toe positions whose answers are known by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
from azjax import network
from azjax.search import SearchSpec, make_search, select_action

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
    spec = SearchSpec(num_simulations=1, rollout_policy="policy", rollout_prob=1.0, rollout_weight=0.25)
    _, v = apply(variables, jax.vmap(GAME.observe)(states))
    np.testing.assert_allclose(root_value(spec, states, apply, variables), 0.75 * v + 0.25, rtol=1e-5)


@pytest.mark.parametrize("kind", ["puct", "gumbel"])
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
    legal = np.asarray(GAME.legal_mask(jax.tree_util.tree_map(lambda x: x[0], batch(MUST_BLOCK, 1))))
    others = [a for a in np.flatnonzero(legal) if a != block]
    assert len(others) == 5
    assert np.argmax(visits) == block
    assert q[block] > max(q[others]) + 0.2
    assert max(q[others]) < -0.4


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
    out = mctx.PolicyOutput(action=jnp.zeros(4000, jnp.int32), action_weights=weights, search_tree=None)
    spec = SearchSpec()
    greedy = select_action(jax.random.PRNGKey(0), spec, out, jnp.zeros(4000, bool))
    np.testing.assert_array_equal(greedy, 1)
    sampled = np.asarray(select_action(jax.random.PRNGKey(0), spec, out, jnp.ones(4000, bool)))
    np.testing.assert_allclose(np.bincount(sampled, minlength=3) / 4000, [0.1, 0.6, 0.3], atol=0.03)
