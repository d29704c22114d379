"""Self-play: lock-step games, restarts, random openings, the trajectory it records."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
from azjax import loop, play_stats
from azjax.replay import UNKNOWN_OWNER, Trajectory
from azjax.search import SearchSpec, make_search
from azjax.selfplay import (
    branched,
    check_resignations,
    init_states,
    make_selfplay,
    playout_slots,
    random_moves,
    random_opening,
    root_value,
)

TTT = games.make("tictactoe")
HEX = games.make("hex", size=4)


@pytest.fixture(scope="module")
def openings():
    """200 random openings of 4x4 Hex with up to 3 plies."""
    fn = jax.jit(jax.vmap(lambda k: random_opening(HEX, k, 3)))
    return jax.device_get(fn(jax.random.split(jax.random.PRNGKey(0), 200)))


def test_random_openings_have_0_to_n_legal_plies(openings):
    plies = np.asarray(openings.num_moves)
    assert set(plies.tolist()) == {0, 1, 2, 3}  # each count drawn, none beyond
    stones = np.count_nonzero(np.asarray(openings.board), axis=1)
    assert (stones == plies).all()  # every move went to an empty cell
    black = np.sum(np.asarray(openings.board) == 1, axis=1)
    assert (black == (plies + 1) // 2).all()  # black, white, black: colours alternate


def test_random_openings_cover_the_first_moves(openings):
    first = {
        tuple(np.flatnonzero(b == 1)) for b, n in zip(openings.board, openings.num_moves) if n == 1
    }
    assert len(first) >= 10  # about 50 one-ply openings over 16 cells


@pytest.fixture(scope="module")
def chunk():
    """A self-play chunk of 8 Tic-Tac-Toe games, 12 moves, pure MCTS, with and without
    random openings of up to 2 plies, and ("branch") with every restart branched."""
    spec = SearchSpec.pure_mcts(8, explore=True)
    out = {}
    for n, options in ((0, {}), (2, {"opening_plies": 2}), ("branch", {"branch_prob": 1.0})):
        play = jax.jit(make_selfplay(TTT, spec, None, 12, 2, **options))
        out[n] = jax.device_get(play(None, jax.random.PRNGKey(1), init_states(TTT, 8)))
    return out


def test_selfplay_records_positions_and_restarts_finished_games(chunk):
    states, traj = chunk[0]
    assert traj.obs.shape == (12, 8) + TTT.observation_shape
    assert traj.ply[0].tolist() == [0] * 8
    for t in range(1, 12):  # a ply counts up by one, or restarts at 0 after a finished game
        expected = np.where(traj.done[t - 1], 0, traj.ply[t - 1] + 1)
        assert (traj.ply[t] == expected).all()
    assert traj.done.any()  # Tic-Tac-Toe ends within 9 plies: some game ended in 12 moves
    np.testing.assert_allclose(traj.policy.sum(-1), 1.0, atol=1e-5)


def test_each_position_records_its_searched_root_value(chunk):
    _, traj = chunk[0]
    assert traj.root_value.shape == (12, 8)
    assert (np.abs(traj.root_value) <= 1 + 1e-6).all()
    # the first move's values are those of the search self-play ran, with the key it used,
    # compiled as self-play's is: op by op, XLA:CPU rounds this PUCT search's logs, square roots
    # and exponentials (its exploration term, the root noise's sampler) in other last bits, and
    # a near tie can then go the other way
    spec = SearchSpec.pure_mcts(8, explore=True)
    k_search = jax.random.split(jax.random.split(jax.random.PRNGKey(1), 12)[0], 3)[0]
    out = jax.jit(make_search(TTT, spec))(None, k_search, init_states(TTT, 8))
    np.testing.assert_allclose(traj.root_value[0], root_value(out), rtol=1e-6)


def test_a_gumbel_search_s_root_value_is_its_improved_policy_s():
    """sum_a pi'(a) q(a): the Q-values of the visited moves, the mixed value for the rest. Its
    backed-up root value counts the visits sequential halving spends on moves it rules out: at
    X's win in one (pure MCTS, 32 simulations) it stays far below the win the policy plays."""
    win_now = TTT.init()
    for m in ["a1", "b2", "b1", "c3"]:  # X wins at once with c1
        win_now = TTT.step(win_now, TTT.parse_action(m, win_now))
    states = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (64, *x.shape)), win_now)
    spec = SearchSpec.pure_mcts(32, search="gumbel")
    out = jax.jit(make_search(TTT, spec))(None, jax.random.PRNGKey(0), states)
    value = np.asarray(root_value(out, gumbel=True))
    tree = jax.device_get(out.search_tree)
    for b in range(3):  # mctx's mixed value, from its definition (Danihelka et al., Appendix D)
        visits = tree.children_visits[b, 0]
        q = (
            tree.children_rewards[b, 0]
            + tree.children_discounts[b, 0] * tree.node_values[b, tree.children_index[b, 0]]
        )
        prior = np.asarray(jax.nn.softmax(tree.children_prior_logits[b, 0]))
        seen = visits > 0
        weighted = np.sum(prior[seen] * q[seen]) / np.sum(prior[seen])
        mixed = (tree.raw_values[b, 0] + visits.sum() * weighted) / (1 + visits.sum())
        completed = np.where(seen, q, mixed)
        want = np.sum(np.asarray(out.action_weights[b]) * completed)
        np.testing.assert_allclose(value[b], want, rtol=1e-5, atol=1e-6)
    backed_up = np.asarray(root_value(out))
    assert value.mean() > 0.85 and backed_up.mean() < 0.7  # 0.93 and 0.63


def test_restarted_games_begin_from_random_openings(chunk):
    _, traj = chunk[2]
    after_done = traj.ply[1:][traj.done[:-1]]
    assert len(after_done) and set(after_done.tolist()) <= {0, 1, 2}
    _, plain = chunk[0]
    assert set(plain.ply[1:][plain.done[:-1]].tolist()) == {0}


def test_branched_restarts_begin_one_legal_move_after_a_game_that_goes_on():
    # six Tic-Tac-Toe positions of 0..5 random plies; slots 1 and 4 are the games that go on
    keys = jax.random.split(jax.random.PRNGKey(4), 6)
    states = jax.vmap(lambda k, n: random_moves(TTT, k, n, 5))(keys, jnp.arange(6))
    done = jnp.array([True, False, True, True, False, True])
    fresh = init_states(TTT, 6)
    fn = jax.jit(branched, static_argnums=(0, 5))
    out = jax.device_get(fn(TTT, jax.random.PRNGKey(5), states, done, fresh, 1.0))
    held = jax.device_get(states)
    sources = set()
    for i in range(6):
        board, ply = np.asarray(out.board[i]), int(out.num_moves[i])
        (source,) = [  # the live game it branched from: one stone more, on an empty cell
            j
            for j in (1, 4)
            if ply == int(held.num_moves[j]) + 1
            and np.count_nonzero(board != held.board[j]) == 1
            and (held.board[j][board != held.board[j]] == 0).all()
        ]
        sources.add(source)
    assert sources == {1, 4}  # each slot's source drawn among the live games
    # with no game going on, or with probability 0, the fresh starts stay
    for done_, prob in ((jnp.ones(6, bool), 1.0), (done, 0.0)):
        kept = jax.device_get(fn(TTT, jax.random.PRNGKey(5), states, done_, fresh, prob))
        np.testing.assert_array_equal(kept.board, np.asarray(fresh.board))


def test_selfplay_branches_restarted_games_from_the_batch(chunk):
    _, traj = chunk["branch"]
    started = traj.ply[1:][traj.done[:-1]]  # the first ply of each restarted game
    # from the empty board only where the random move ended the game (the fresh start stays)
    assert len(started) and np.mean(started >= 1) > 0.8
    for t in range(1, 12):  # elsewhere a ply counts up by one
        live = ~traj.done[t - 1]
        assert (traj.ply[t][live] == traj.ply[t - 1][live] + 1).all()
    with pytest.raises(ValueError, match="branch_prob must be in"):
        make_selfplay(TTT, SearchSpec.pure_mcts(8), None, 5, 2, branch_prob=1.5)


@pytest.mark.parametrize(
    "args, settings, said",
    [
        ((5, 2), dict(full_search_prob=float("nan")), "full_search_prob must be in [0, 1], got"),
        ((5, 2), dict(full_search_prob=-1.0), "full_search_prob must be in [0, 1]"),
        ((-1, 2), {}, "num_steps must be >= 1, got -1"),
        ((5, -1), {}, "sample_moves must be >= 0, got -1"),
        ((5, 2), dict(opening_plies=-3), "opening_plies must be >= 0, got -3"),
    ],
)
def test_make_selfplay_names_a_bad_argument(args, settings, said):
    """Accepted silently (a NaN or negative full search share, negative sample_moves or
    opening plies), or an MLIR error for a negative num_steps."""
    with pytest.raises(ValueError, match=re.escape(said)):
        make_selfplay(TTT, SearchSpec.pure_mcts(8), None, *args, **settings)


def test_no_states_is_named():
    """init_states(game, -1) gave an empty batch and 2.5 three states; searching no states
    ended in a ZeroDivisionError."""
    for bad, said in ((-1, "batch_games must be >= 1, got -1"), (2.5, "must be an int")):
        with pytest.raises(ValueError, match=re.escape(said)):
            init_states(TTT, bad)
    empty = jax.tree_util.tree_map(lambda x: x[:0], init_states(TTT, 2))
    search = make_search(TTT, SearchSpec.pure_mcts(4))
    with pytest.raises(ValueError, match="no games to search: a batch of 0 states"):
        search(None, jax.random.PRNGKey(0), empty)


def test_count_distinct_counts_masked_positions():
    obs = jnp.array([[0, 1], [0, 1], [1, 1], [1, 0], [1, 0]], jnp.float32)
    hashes = play_stats.observation_hashes(obs)

    def distinct(mask):
        return int(play_stats.count_distinct_hashes(hashes, jnp.array(mask)))

    assert distinct([True] * 5) == 3
    assert distinct([True, True, False, False, False]) == 1
    assert distinct([False] * 5) == 0
    # variety: per ply of VARIETY_PLIES, the distinct positions and how many were played there
    first, second = play_stats.VARIETY_PLIES[:2]
    ply = jnp.array([first, first, first, second, second])
    distinct_at, reached_at = play_stats.variety(ply, hashes)
    assert (int(distinct_at[0]), int(reached_at[0])) == (2, 3)
    assert (int(distinct_at[1]), int(reached_at[1])) == (1, 2)


def test_chosen_action_targets_are_the_moves_played():
    spec = SearchSpec.pure_mcts(8, explore=True)
    play = jax.jit(make_selfplay(TTT, spec, None, 5, 2, policy_target="cat"))
    _, traj = jax.device_get(play(None, jax.random.PRNGKey(2), init_states(TTT, 4)))
    assert set(np.unique(traj.policy).tolist()) == {0.0, 1.0}
    np.testing.assert_array_equal(traj.policy.sum(-1), 1.0)
    # the one-hot cell is the stone that appears in the next position (Tic-Tac-Toe's frame is
    # the board itself; the mover's stones are plane 0 before the move, plane 1 after it)
    played = traj.policy[:-1].argmax(-1)
    before = traj.obs[:-1, ..., 0].reshape(4, 4, 9)
    after = traj.obs[1:, ..., 1].reshape(4, 4, 9)
    new = (after - before).argmax(-1)
    live = ~traj.done[:-1]
    np.testing.assert_array_equal(played[live], new[live])
    with pytest.raises(ValueError, match="policy_target must be one of tpt, cat, improved"):
        make_selfplay(TTT, spec, None, 5, 2, policy_target="best")


def test_the_first_sample_moves_plies_are_sampled_and_the_rest_greedy():
    """Self-play's cut-off itself (`select_action` is tested with a given mask): a mutation that
    sampled one ply too many was caught only by a statistical threshold of another test."""
    spec = SearchSpec.pure_mcts(8, explore=True)  # PUCT: its best move is the most visited
    play = jax.jit(make_selfplay(TTT, spec, None, 9, 2))
    _, traj = jax.device_get(play(None, jax.random.PRNGKey(5), init_states(TTT, 32)))
    steps, batch = traj.done.shape
    before = traj.obs[:-1, ..., 0].reshape(steps - 1, batch, 9)
    after = traj.obs[1:, ..., 1].reshape(steps - 1, batch, 9)
    played = (after - before).argmax(-1)  # the mover's new stone (see the test above)
    best = traj.policy[:-1].argmax(-1)  # the visits' most visited move, first of ties
    live, ply = ~traj.done[:-1], traj.ply[:-1]
    greedy = live & (ply >= 2)
    assert greedy.sum() > 50
    np.testing.assert_array_equal(played[greedy], best[greedy])
    for sampled in (0, 1):  # each of the first two plies sampled, not the best alone
        at = live & (ply == sampled)
        assert np.mean(played[at] != best[at]) > 0.1


def test_improved_policy_targets_are_recorded_while_the_visits_choose_the_moves():
    from test_search import linear_net

    apply, variables = linear_net(HEX, seed=3)
    spec = SearchSpec(search="puct", num_simulations=8, puct_values="raw", explore=True)
    key, states = jax.random.PRNGKey(4), init_states(HEX, 4)
    trajs = {}
    for target in ("tpt", "improved"):
        play = jax.jit(make_selfplay(HEX, spec, apply, 6, 3, policy_target=target))
        trajs[target] = jax.device_get(play(variables, key, states))[1]
    visits, improved = trajs["tpt"], trajs["improved"]
    np.testing.assert_array_equal(visits.obs, improved.obs)  # the same moves, the same keys
    np.testing.assert_allclose(improved.policy.sum(-1), 1.0, rtol=1e-5)
    cells = improved.obs.reshape(*improved.obs.shape[:2], -1, improved.obs.shape[-1])
    empty = cells[..., :2].sum(-1) == 0  # Hex's stone planes: the empty cells are the legal moves
    assert np.all(improved.policy[~empty] < 1e-6)
    assert np.abs(improved.policy - visits.policy).max() > 0.05  # a target of its own
    with pytest.raises(ValueError, match="policy_target=improved is PUCT's"):
        make_selfplay(HEX, SearchSpec(search="gumbel"), apply, 5, 2, policy_target="improved")
    with pytest.raises(ValueError, match="needs each move's tree"):
        make_selfplay(
            HEX,
            spec,
            apply,
            5,
            2,
            policy_target="improved",
            full_search_prob=0.5,
            fast_simulations=2,
        )


def test_playout_cap_randomisation_keeps_policy_targets_of_full_searches_only():
    spec = SearchSpec.pure_mcts(8, explore=True)
    play = jax.jit(make_selfplay(TTT, spec, None, 40, 2, full_search_prob=0.25, fast_simulations=2))
    _, traj = jax.device_get(play(None, jax.random.PRNGKey(3), init_states(TTT, 4)))
    total = traj.policy.sum(-1)  # [T, B]: 1 for a full search, 0 for a fast one
    full = total[:, 0] > 0.5
    assert set(np.round(total, 5).ravel().tolist()) == {0.0, 1.0}
    assert (total == total[:, :1]).all()  # one coin per move for the whole batch
    assert 0 < full.sum() < 20  # about a quarter of 40 moves
    assert (np.abs(traj.root_value) <= 1 + 1e-6).all() and traj.root_value.std() > 0
    with pytest.raises(ValueError, match="fast_simulations must be in"):
        make_selfplay(TTT, spec, None, 5, 2, full_search_prob=0.5, fast_simulations=8)


def test_a_mover_below_the_threshold_resigns_and_loses_outside_the_playout_slots():
    # 4x4 Hex, 16 moves of 8 games, pure MCTS: rollouts give lost positions root values near -1
    spec = SearchSpec.pure_mcts(16, explore=True)
    options = dict(ownership=True, resign_threshold=0.3, resign_playout=0.25)
    play = jax.jit(make_selfplay(HEX, spec, None, 16, 2, **options))
    _, traj = jax.device_get(play(None, jax.random.PRNGKey(5), init_states(HEX, 8)))
    resigned, low = traj.resigned, traj.root_value < -0.3
    assert resigned.any() and not resigned[:, :2].any()  # slots 0 and 1 (a quarter) play out
    assert low[:, :2].any()  # where their movers would have resigned
    assert (resigned <= low).all() and traj.done[resigned].all()
    # elsewhere every mover below the threshold resigned, unless its move ended the game
    assert (resigned | traj.done)[:, 2:][low[:, 2:]].all()
    mover = traj.player[resigned]
    returns = traj.returns[resigned]  # [n, 2]: the mover lost, the other player won
    np.testing.assert_array_equal(returns[np.arange(len(mover)), mover], -1.0)
    np.testing.assert_array_equal(returns[np.arange(len(mover)), 1 - mover], 1.0)
    assert (traj.ply[1:][resigned[:-1]] == 0).all()  # the slot starts a new game
    # the final board was never reached: the resigned game's ownership target is unknown
    assert (traj.ownership[resigned] == UNKNOWN_OWNER).all()
    assert (np.abs(traj.ownership[~resigned]) <= 1).all()
    counted = play_stats.summarise(traj)
    np.testing.assert_array_equal(counted.resigned, resigned.sum(0))
    for bad in (1.0, -0.1):
        with pytest.raises(ValueError, match="resign_threshold must be in"):
            make_selfplay(HEX, spec, None, 4, 2, resign_threshold=bad)
    with pytest.raises(ValueError, match="resign_playout must be in"):
        make_selfplay(HEX, spec, None, 4, 2, resign_threshold=0.5, resign_playout=1.5)


def test_wrong_resignations_are_counted_in_the_played_out_games():
    # 3 moves of 4 games, slots 0 and 1 played out (half of 4); players alternate 0, 1, 0
    value = np.array([[-0.95, 0.1, -0.99, -0.95], [0.2, -0.95, -0.99, 0.0], [0.1, 0.0, 0.0, 0.0]])
    done = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]], bool)
    first = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]], np.float32)  # player 0 won
    traj = Trajectory(
        obs=jnp.zeros((3, 4, 1, 1, 1)),
        policy=jnp.zeros((3, 4, 1)),
        player=jnp.asarray(np.array([[0], [1], [0]]).repeat(4, 1), jnp.int32),
        done=jnp.asarray(done),
        returns=jnp.stack([jnp.asarray(first), -jnp.asarray(first)], axis=-1),
        root_value=jnp.asarray(value, jnp.float32),
    )
    low = jnp.zeros((4, 2), bool).at[3, 1].set(True)  # carried from the chunk before
    low, checked, wrong = jax.device_get(check_resignations(low, traj, 0.9, 0.5))
    # slot 0: player 0 fell below -0.9 and won (wrong); slot 1: player 1 did and lost (right);
    # slot 2 resigns, so is not checked; slot 3 (not played out either) keeps what it carried
    np.testing.assert_array_equal(checked, [1, 1, 0, 0])
    np.testing.assert_array_equal(wrong, [1, 0, 0, 0])
    np.testing.assert_array_equal(low, [[0, 0], [0, 0], [0, 0], [0, 1]])  # ended games start over
    # into the chunk's summary, each count in its own slot (a mutation swapping them passed)
    ply = jnp.zeros((3, 4), jnp.int32)
    summary = jax.device_get(play_stats.summarise(traj._replace(ply=ply), checked, wrong))
    np.testing.assert_array_equal(summary.resign_checked, [1, 1, 0, 0])
    np.testing.assert_array_equal(summary.resign_wrong, [1, 0, 0, 0])
    np.testing.assert_array_equal(summary.outcomes, [[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    # a quarter of 8 games, however split over devices: device 0's block holds both slots
    assert np.flatnonzero(playout_slots(8, 0.25)).tolist() == [0, 1]
    assert np.flatnonzero(playout_slots(4, 0.25, first=0, total=8)).tolist() == [0, 1]
    assert not playout_slots(4, 0.25, first=4, total=8).any()
    assert np.flatnonzero(playout_slots(8, 0.1)).tolist() == [0]  # ceil(0.8)


def test_a_final_move_below_the_threshold_is_not_a_checked_resignation():
    # self-play does not resign on the move that ends the game (`resigns(...) & ~done`), so
    # the check does not count it: player 1 is below -0.9 only as its move wins the game
    traj = Trajectory(
        obs=jnp.zeros((2, 2, 1, 1, 1)),
        policy=jnp.zeros((2, 2, 1)),
        player=jnp.asarray([[0, 0], [1, 1]], jnp.int32),
        done=jnp.asarray([[0, 0], [1, 1]], bool),
        returns=jnp.asarray([[[0, 0]] * 2, [[-1, 1]] * 2], jnp.float32),
        root_value=jnp.asarray([[0.0, 0.0], [-0.95, -0.95]], jnp.float32),
    )
    low, checked, wrong = jax.device_get(
        check_resignations(jnp.zeros((2, 2), bool), traj, 0.9, 1.0)
    )
    np.testing.assert_array_equal(checked, [0, 0])
    np.testing.assert_array_equal(wrong, [0, 0])


def test_a_run_warns_when_its_checked_resignations_are_wrong_too_often():
    assert loop.resign_warning(checked=99, wrong=50) is None  # too few checked to judge
    assert loop.resign_warning(checked=200, wrong=10) is None  # 5%: AlphaZero's limit, not above
    line = loop.resign_warning(checked=200, wrong=11)
    assert "11 of the 200 resignations" in line and "(5.5%)" in line
    assert "raise --resign_threshold" in line and "\n" not in line


def test_each_move_is_told_to_the_host():
    seen = []
    play = jax.jit(
        make_selfplay(TTT, SearchSpec.pure_mcts(2), None, 3, 2, on_move=lambda t: seen.append(t))
    )
    jax.block_until_ready(play(None, jax.random.PRNGKey(0), init_states(TTT, 2)))
    jax.effects_barrier()
    assert sorted(int(t) for t in seen) == [0, 1, 2]


def test_the_summary_counts_finished_games_by_result():
    # 3 moves of 4 games: game 0 ends at move 0 won by the first player and at move 2 lost by
    # it, game 1 ends drawn at move 1, game 2 ends won by the second player, game 3 goes on
    done = np.array([[1, 0, 0, 0], [0, 1, 1, 0], [1, 0, 0, 0]], bool)
    first = np.array([[1, 0, 0, 0], [0, 0, -1, 0], [-1, 0, 0, 0]], np.float32)
    traj = Trajectory(
        obs=jnp.zeros((3, 4, 1, 1, 1)),
        policy=jnp.zeros((3, 4, 1)),
        player=jnp.zeros((3, 4), jnp.int32),
        done=jnp.asarray(done),
        returns=jnp.stack([jnp.asarray(first), -jnp.asarray(first)], axis=-1),
        ply=jnp.zeros((3, 4), jnp.int32),
    )
    summary = play_stats.summarise(traj)
    np.testing.assert_array_equal(summary.finished, [2, 1, 1, 0])
    np.testing.assert_array_equal(summary.outcomes, [[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 1, 0]])
    stats = play_stats.PlayStats(
        jnp.int32(4), jnp.int32(0), jnp.zeros(2), jnp.zeros(2), None, summary.outcomes.sum(1)
    )
    values = loop._play_values(stats, positions=12, seconds=1.0, devices=1)
    assert values["selfplay/first_player_wins"] == 0.25 and values["selfplay/draws"] == 0.25
    assert "selfplay/resigned" not in values  # logged by a run that resigns
    stats = stats._replace(
        resigned=jnp.int32(1), resign_checked=jnp.int32(3), resign_wrong=jnp.int32(1)
    )
    values = loop._play_values(stats, positions=12, seconds=1.0, devices=1, resigning=True)
    assert values["selfplay/resigned"] == 0.25
    assert (values["selfplay/resign_checked"], values["selfplay/resign_wrong"]) == (3, 1)
