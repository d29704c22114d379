"""Batched matches: colours, start positions, and the half-split search of alternating games."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
from azjax.arena import MatchResult, make_match, make_random_agent

TTT = games.make("tictactoe")
OTHELLO = games.make("othello", size=4)


def first_legal(game):
    """A deterministic agent: the lowest-numbered legal move."""

    def act(variables, key, states):
        del variables, key
        return jnp.argmax(jax.vmap(game.legal_mask)(states), axis=-1).astype(jnp.int32)

    return act


def last_legal(game):
    def act(variables, key, states):
        del variables, key
        legal = jax.vmap(game.legal_mask)(states)
        return (game.num_actions - 1 - jnp.argmax(legal[:, ::-1], axis=-1)).astype(jnp.int32)

    return act


@pytest.mark.parametrize("game", [TTT, OTHELLO], ids=["tictactoe", "othello4"])
def test_split_and_unsplit_matches_play_the_same_games(game):
    a, b = first_legal(game), last_legal(game)
    key = jax.random.PRNGKey(0)
    split = make_match(game, a, b, 6, split=True)(None, None, key)
    both = make_match(game, a, b, 6, split=False)(None, None, key)
    np.testing.assert_array_equal(split[0], both[0])
    np.testing.assert_array_equal(split[1], [True] * 3 + [False] * 3)  # A black, then white


def test_colours_follow_a_first():
    # first-legal against last-legal in Tic-Tac-Toe, by hand: with X taking the lowest free cell
    # and O the highest, X completes the top row (0, 1, 2) at its third move; the other way round
    # X (highest) completes the bottom row (8, 7, 6).
    returns, a_first = make_match(TTT, first_legal(TTT), last_legal(TTT), 2)(
        None, None, jax.random.PRNGKey(0)
    )
    assert a_first.tolist() == [True, False]
    assert returns.tolist() == [1.0, -1.0]  # the first mover wins both games


def test_matches_start_from_given_positions():
    step = jax.jit(jax.vmap(TTT.step))
    starts = jax.vmap(lambda _: TTT.init())(jnp.arange(4))
    starts = step(starts, jnp.array([4, 4, 0, 0], jnp.int32))  # X in the centre or a corner
    returns, _ = make_match(TTT, first_legal(TTT), last_legal(TTT), 4)(
        None, None, jax.random.PRNGKey(0), starts
    )
    unsplit, _ = make_match(TTT, first_legal(TTT), last_legal(TTT), 4, split=False)(
        None, None, jax.random.PRNGKey(0), starts
    )
    np.testing.assert_array_equal(returns, unsplit)
    plain, _ = make_match(TTT, first_legal(TTT), last_legal(TTT), 4)(
        None, None, jax.random.PRNGKey(0)
    )
    assert not np.array_equal(returns, plain)  # the openings changed the games


def test_a_finished_first_start_does_not_swap_the_agents():
    # A start that is over (game 0: X completed the top row at ply 5) has O "to move", the live
    # starts (6 plies) X: the halves split took start 0's mover for every game's, and so played
    # A's moves with B in all the others.
    openings = [[0, 3, 1, 4, 2], [4, 0, 8, 2, 1, 7], [0, 4, 8, 2, 6, 3], [1, 0, 2, 5, 3, 7]]
    played = []
    for moves in openings:
        state = TTT.init()
        for move in moves:
            state = TTT.step(state, jnp.int32(move))
        played.append(state)
    starts = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *played)
    assert np.asarray(jax.vmap(TTT.is_terminal)(starts)).tolist() == [True, False, False, False]
    a, b = first_legal(TTT), last_legal(TTT)
    key = jax.random.PRNGKey(0)
    split = make_match(TTT, a, b, 4, split=True)(None, None, key, starts)
    both = make_match(TTT, a, b, 4, split=False)(None, None, key, starts)
    np.testing.assert_array_equal(split[0], both[0])


def test_random_agents_play_legal_complete_games():
    match = make_match(OTHELLO, make_random_agent(OTHELLO), make_random_agent(OTHELLO), 8)
    result = MatchResult.from_returns(*match(None, None, jax.random.PRNGKey(3)))
    assert result.games == 8 and result.first[0] + result.first[1] + result.first[2] == 4
    assert result.score == pytest.approx((result.wins + result.draws / 2) / 8)


def test_paired_openings_give_each_position_to_both_colours():
    """The in-loop evaluation's `eval_opening_plies`: N/2 random positions, each twice, at i and
    i + N/2 (where make_match swaps the colours), every one `plies` moves in."""
    from azjax.loop_eval import paired_openings

    ttt = games.make("tictactoe")
    starts = paired_openings(ttt, jax.random.PRNGKey(3), 16, 3)
    legal = np.asarray(jax.vmap(ttt.legal_mask)(starts)).sum(-1)
    assert (legal == 9 - 3).all()  # three stones on every board
    first, second = (
        jax.tree_util.tree_map(lambda x, h=h: x[h * 8 : (h + 1) * 8], starts) for h in (0, 1)
    )
    for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    leaves = jax.tree_util.tree_leaves(first)
    boards = np.concatenate([np.asarray(x).reshape(8, -1).astype(np.int64) for x in leaves], 1)
    assert len({b.tobytes() for b in boards}) > 1  # random, not one opening
    movers = np.asarray(jax.vmap(ttt.current_player)(starts))
    assert (movers == movers[0]).all()  # make_match needs one player to move in every start


def test_paired_openings_that_end_the_game_are_drawn_again():
    # At 6 random plies about a tenth of Tic-Tac-Toe's openings are already won.
    from azjax import config as cfg
    from azjax.loop_eval import paired_openings
    from azjax.selfplay import random_moves

    keys = jax.random.split(jax.random.PRNGKey(5), 32)
    once = jax.vmap(lambda k: random_moves(TTT, k, 6, 6))(keys)
    assert np.asarray(jax.vmap(TTT.is_terminal)(once)).any()  # what a single draw gives
    starts = paired_openings(TTT, jax.random.PRNGKey(5), 64, 6)
    assert not np.asarray(jax.vmap(TTT.is_terminal)(starts)).any()
    assert (np.asarray(jax.vmap(TTT.legal_mask)(starts)).sum(-1) == 3).all()
    same = ~np.asarray(jax.vmap(TTT.is_terminal)(once))
    kept = jax.tree_util.tree_map(lambda x: np.asarray(x)[:32][same], starts)
    for x, y in zip(jax.tree_util.tree_leaves(kept), jax.tree_util.tree_leaves(once)):
        np.testing.assert_array_equal(x, np.asarray(y)[same])  # an unfinished first draw stays
    with pytest.raises(ValueError, match="eval_opening_plies must be under the game's longest"):
        cfg.load("tictactoe", {"eval_opening_plies": 9})


def test_the_loops_evaluation_plays_from_paired_openings(lowerings):
    from azjax import config as cfg
    from azjax.ahead import Ahead
    from azjax.checkpoint import initial_variables
    from azjax.loop_eval import make_evaluation

    config = cfg.load(
        "tictactoe",
        dict(
            num_blocks=1,
            num_filters=4,
            value_hidden=4,
            num_simulations=2,
            eval_games=4,
            eval_opening_plies=2,
            eval_ladder=False,
        ),
    )
    variables = initial_variables(config)
    evaluate = make_evaluation(config)
    # the loop compiles the next evaluation's matches on a thread while it plays
    ahead, done = Ahead(), []
    ahead.start(
        lambda: done.append(
            evaluate(variables, variables, jax.random.PRNGKey(1), compile_only=True)
        )
    )
    ahead.wait()
    assert ahead.error is None and done == [{}] and not ahead.busy()
    with lowerings() as lowered:
        values = evaluate(variables, variables, jax.random.PRNGKey(0))
    assert lowered == []  # both matches (from openings) were compiled ahead
    for name in ("previous", "mcts"):
        assert sum(values[f"eval/{name}_wdl"]) == 4 and 0 <= values[f"eval/{name}_score"] <= 1
    with pytest.raises(ValueError, match="eval_opening_plies needs a game whose players alternate"):
        cfg.load("hex", dict(size=3, swap=True, eval_opening_plies=2))


def test_a_failure_compiling_ahead_is_kept_for_the_evaluation_to_meet():
    from azjax.ahead import Ahead

    ahead, order = Ahead(), []
    ahead.start(lambda: order.append(1) or 1 / 0)
    ahead.start(lambda: order.append(2))  # after the first has finished
    ahead.wait()
    ahead.wait()  # nothing in flight: returns at once
    assert order == [1, 2] and isinstance(ahead.error, ZeroDivisionError) and not ahead.busy()
