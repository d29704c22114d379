"""UCT and ExIt's tree policy on hand-built mctx trees whose answers were computed by hand."""

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from azjax.selection import exit_action_selection, uct_action_selection, uct_policy

KEY = jax.random.PRNGKey(0)


def root_tree(visits, q, prior, invalid=(0, 0, 0)):
    """An unbatched tree of one expanded root with 3 children: visits n(s, a), values Q(s, a)
    in [-1, 1] (reward 0, discount 1, so Q = the child's value) and prior probabilities."""
    a = len(visits)
    n = 8
    f32 = jnp.float32
    logits = jnp.where(
        jnp.asarray(prior) > 0, jnp.log(jnp.maximum(jnp.asarray(prior, f32), 1e-30)), -1e9
    )
    return mctx.Tree(
        node_visits=jnp.zeros(n, jnp.int32).at[0].set(1 + sum(visits)),
        raw_values=jnp.zeros(n, f32),
        node_values=jnp.zeros(n, f32),
        parents=jnp.full(n, -1, jnp.int32),
        action_from_parent=jnp.full(n, -1, jnp.int32),
        children_index=jnp.full((n, a), -1, jnp.int32),
        children_prior_logits=jnp.zeros((n, a), f32).at[0].set(logits),
        children_visits=jnp.zeros((n, a), jnp.int32).at[0].set(jnp.asarray(visits)),
        children_rewards=jnp.zeros((n, a), f32),
        children_discounts=jnp.ones((n, a), f32),
        children_values=jnp.zeros((n, a), f32).at[0].set(jnp.asarray(q, f32)),
        embeddings=jnp.zeros(n),
        root_invalid_actions=jnp.asarray(invalid, f32),
        extra_data=None,
    )


# n = (2, 1, 1), n(s) = 4; q = (Q + 1) / 2 = (0.5, 0.8, 0.4); c_b = 1:
#   UCT = q + sqrt(ln 4 / n) = (0.5 + 0.8326, 0.8 + 1.1774, 0.4 + 1.1774) = (1.333, 1.977, 1.577)
# prior (0.7, 0.1, 0.2); bonus w_a p / (n + 1):
#   w_a = 3: (0.700, 0.150, 0.300) -> (2.033, 2.127, 1.877): action 1
#   w_a = 4: (0.933, 0.200, 0.400) -> (2.266, 2.177, 1.977): action 0
#   w_a = 3, tau = 0.5: p = (0.49, 0.01, 0.04) / 0.54 = (0.907, 0.019, 0.074)
#     bonus (0.907, 0.028, 0.111) -> (2.240, 2.005, 1.689): action 0
TREE = dict(visits=(2, 1, 1), q=(0.0, 0.6, -0.2), prior=(0.7, 0.1, 0.2))


@pytest.mark.parametrize(
    "weight, temperature, expected", [(0.0, 1.0, 1), (3.0, 1.0, 1), (4.0, 1.0, 0), (3.0, 0.5, 0)]
)
def test_exit_selection_by_hand(weight, temperature, expected):
    tree = root_tree(**TREE)
    got = exit_action_selection(
        KEY, tree, 0, 1, c_uct=1.0, prior_weight=weight, temperature=temperature
    )
    assert int(got) == expected


def test_uct_is_the_zero_weight_case_and_c_matters():
    tree = root_tree(**TREE)
    assert int(uct_action_selection(KEY, tree, 0, 1, c_uct=1.0)) == 1
    # c_b = 0: greedy on q = (0.5, 0.8, 0.4) -> 1; q of action 1 lowered below action 0 -> 0
    lowered = root_tree(visits=(2, 1, 1), q=(0.0, -0.1, -0.2), prior=(0.7, 0.1, 0.2))
    assert int(uct_action_selection(KEY, lowered, 0, 1, c_uct=0.0)) == 0
    # c_b = 1 on the same: (0.5 + 0.833, 0.45 + 1.177, 0.4 + 1.177): the less visited 1
    assert int(uct_action_selection(KEY, lowered, 0, 1, c_uct=1.0)) == 1


def test_untried_children_first_in_prior_order_illegal_never():
    # action 1 is far ahead on q and bonus, but 0 and 2 were never tried: one of them comes first
    tree = root_tree(visits=(0, 3, 0), q=(0.0, 1.0, 0.0), prior=(0.2, 0.5, 0.3))
    picks = {  # in prior order whatever the key (one key passed a random order half the time)
        int(exit_action_selection(k, tree, 0, 1, c_uct=0.05, prior_weight=1.0))
        for k in jax.random.split(KEY, 20)
    }
    assert picks == {2}
    picks = {
        int(uct_action_selection(k, tree, 0, 1, c_uct=0.05)) for k in jax.random.split(KEY, 20)
    }
    assert picks == {0, 2}  # w_a = 0: a random untried one
    illegal = root_tree(visits=(0, 3, 0), q=(0.0, 1.0, 0.0), prior=(0.0, 0.5, 0.5))
    picks = {
        int(uct_action_selection(k, illegal, 0, 1, c_uct=0.05)) for k in jax.random.split(KEY, 20)
    }
    assert picks == {2}  # logit -1e9: illegal, never tried


def test_root_invalid_actions_masked_at_the_root_only():
    tree = root_tree(visits=(1, 1, 1), q=(0.9, 0.0, 0.0), prior=(1 / 3,) * 3, invalid=(1, 0, 0))
    assert int(uct_action_selection(KEY, tree, 0, 0, c_uct=0.0)) != 0
    assert int(uct_action_selection(KEY, tree, 0, 1, c_uct=0.0)) == 0


def test_uct_policy_visit_distribution_on_a_bandit():
    """A root with 3 moves that end the game: +1, -1, -1 for the mover. Greedy UCT (c_b = 0)
    tries each once, then always the winner: 10 simulations give visits (8, 1, 1)."""
    rewards = jnp.array([1.0, -1.0, -1.0])

    def recurrent_fn(params, key, action, embedding):
        del params, key
        reward = rewards[action]
        out = mctx.RecurrentFnOutput(
            reward=reward,
            discount=jnp.zeros_like(reward),
            prior_logits=jnp.zeros((action.shape[0], 3)),
            value=jnp.zeros(action.shape[0]),
        )
        return out, embedding

    root = mctx.RootFnOutput(
        prior_logits=jnp.zeros((2, 3)), value=jnp.zeros(2), embedding=jnp.zeros(2)
    )
    out = uct_policy(None, KEY, root, recurrent_fn, 10, c_uct=0.0)
    np.testing.assert_allclose(out.action_weights, [[0.8, 0.1, 0.1]] * 2)
    np.testing.assert_array_equal(out.action, [0, 0])
    # invalid_actions keeps the search off move 0 entirely
    out = uct_policy(
        None,
        KEY,
        root,
        recurrent_fn,
        10,
        c_uct=0.0,
        invalid_actions=jnp.array([[1, 0, 0]] * 2, bool),
    )
    assert float(out.action_weights[0, 0]) == 0.0


def test_a_node_without_legal_children_fans_out_instead_of_growing_a_chain():
    # Every child illegal (a finished game): the least-visited one, so that repeated visits
    # spread over the children instead of adding one node below the last each time.
    tree = root_tree(visits=(2, 1, 2), q=(0.0, 0.0, 0.0), prior=(0.0, 0.0, 0.0))
    assert int(uct_action_selection(KEY, tree, 0, 1, c_uct=1.4)) == 1
    assert int(exit_action_selection(KEY, tree, 0, 1, c_uct=1.4, prior_weight=2.0)) == 1


def test_uct_search_of_a_finished_game_stays_shallow():
    import games
    from azjax.search import SearchSpec, make_search

    game = games.make("tictactoe")
    won = game.init()
    for a in (0, 3, 1, 4, 2):  # the first player's top row: over
        won = game.step(won, a)
    states = jax.tree_util.tree_map(lambda x: x[None], won)
    spec = SearchSpec.pure_mcts(60, search="uct")
    tree = make_search(game, spec, None)(None, KEY, states).search_tree
    parents = np.asarray(tree.parents[0])
    depth = np.zeros(len(parents), int)
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1
    assert depth.max() <= 2  # 60 visits over 9 children and their 9: not a chain 60 deep
