"""Board symmetries for augmentation: legal moves map to legal moves of the mapped position, and
the policy moves with the board (in the network's frame: Hex's board is transposed for white).
The network averaged over every symmetry answers a turned position with the turned policy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_search import linear_net  # a random linear map: it sees each view differently

import games
from azjax import symmetry
from azjax.replay import Batch

GAMES = {
    "hex5": games.make("hex", size=5),
    "hex4swap": games.make("hex", size=4, swap=True),
    "othello6": games.make("othello", size=6),
    "tictactoe": games.make("tictactoe"),
    "connect_four": games.make("connect_four"),
}
COUNTS = {"hex5": 2, "hex4swap": 2, "othello6": 8, "tictactoe": 8, "connect_four": 2}


def positions(game, n=40, seed=0):
    """(canonical observations [n, H, W, C], canonical legal masks [n, A]) of random positions
    reached by random play, white to move among them."""

    def one(key):
        k_plies, k_play = jax.random.split(key)
        plies = jax.random.randint(k_plies, (), 0, game.max_game_length // 2)

        def body(i, s):
            a = jax.random.categorical(
                jax.random.fold_in(k_play, i), jnp.where(game.legal_mask(s), 0.0, -jnp.inf)
            )
            nxt = game.step(s, a.astype(jnp.int32))
            stop = (i >= plies) | game.is_terminal(nxt)
            return jax.tree_util.tree_map(lambda x, y: jnp.where(stop, x, y), s, nxt)

        s = jax.lax.fori_loop(0, game.max_game_length // 2, body, game.init())
        legal = game.actions_to_policy(s, game.legal_mask(s).astype(jnp.float32)) > 0
        return game.observe(s), legal, game.current_player(s)

    obs, legal, player = jax.jit(jax.vmap(one))(jax.random.split(jax.random.PRNGKey(seed), n))
    assert 0 < int(np.sum(player)) < n  # both colours to move among the positions
    return np.asarray(obs), np.asarray(legal)


def othello_legal(obs):
    """bool[n*n + 1] legal moves from the mover's planes (own 0, opponent 1)."""
    own, opp = obs[..., 0] > 0, obs[..., 1] > 0
    n = own.shape[0]
    legal = np.zeros(n * n + 1, bool)
    for r in range(n):
        for c in range(n):
            if own[r, c] or opp[r, c]:
                continue
            for dr, dc in [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1) if (a, b) != (0, 0)]:
                i, j, seen = r + dr, c + dc, 0
                while 0 <= i < n and 0 <= j < n and opp[i, j]:
                    i, j, seen = i + dr, j + dc, seen + 1
                if seen and 0 <= i < n and 0 <= j < n and own[i, j]:
                    legal[r * n + c] = True
    legal[-1] = not legal[:-1].any()
    return legal


def legal_from_obs(name, game, obs):
    empty = (obs[..., 0] == 0) & (obs[..., 1] == 0)
    if name == "othello6":
        return othello_legal(obs)
    if name == "connect_four":
        return empty[0]  # a column is open while its top cell is empty
    cells = empty.ravel()
    if name == "hex4swap":  # swap is legal only as the second ply: it stays where it is
        return None
    return cells


@pytest.mark.parametrize("name", list(GAMES))
def test_symmetries_are_distinct_permutations(name):
    sym = symmetry.symmetries(GAMES[name])
    assert sym.cells.shape[0] == COUNTS[name] == sym.actions.shape[0]
    for table in (sym.cells, sym.actions):
        assert all(sorted(t) == list(range(table.shape[1])) for t in table)
        assert len({tuple(t) for t in table}) == COUNTS[name]
        assert (table[0] == np.arange(table.shape[1])).all()  # the identity first


@pytest.mark.parametrize("name", list(GAMES))
def test_legal_moves_map_to_legal_moves_of_the_mapped_position(name):
    game = GAMES[name]
    sym = symmetry.symmetries(game)
    obs, legal = positions(game)
    checked = 0
    for o, l in zip(obs, legal):
        if legal_from_obs(name, game, o) is not None:  # the rule reads the legal moves off obs
            np.testing.assert_array_equal(legal_from_obs(name, game, o)[: l.shape[0]], l)
        for s in range(sym.cells.shape[0]):
            o2, l2 = symmetry.transform(sym, s, jnp.asarray(o), jnp.asarray(l))
            o2, l2 = np.asarray(o2), np.asarray(l2)
            want = legal_from_obs(name, game, o2)
            if want is None:  # Hex with swap: the empty cells, and swap where it was legal
                want = np.concatenate([((o2[..., 0] == 0) & (o2[..., 1] == 0)).ravel(), l[-1:]])
            np.testing.assert_array_equal(l2, want)
            checked += 1
    assert checked >= 20


def test_hex_rotation_keeps_each_players_edges():
    game = GAMES["hex5"]
    sym = symmetry.symmetries(game)
    board = np.zeros((5, 5, 3), np.float32)
    board[0, 1, 0] = board[1, 1, 0] = 1  # the mover's stones near the top edge
    o2, _ = symmetry.transform(sym, 1, jnp.asarray(board), jnp.zeros(25))
    assert np.asarray(o2)[4, 3, 0] == 1 and np.asarray(o2)[3, 3, 0] == 1  # now by the bottom


def test_augment_keeps_each_position_with_its_own_policy():
    game = GAMES["tictactoe"]
    sym = symmetry.symmetries(game)
    obs = np.zeros((64, 3, 3, 3), np.float32)
    obs[:, 0, 0, 0] = 1  # the mover's stone in the corner a1
    policy = np.zeros((64, 9), np.float32)
    policy[:, 0] = 1  # ...and the policy on that same corner
    batch = symmetry.augment(
        sym, jax.random.PRNGKey(0), Batch(jnp.asarray(obs), jnp.asarray(policy), jnp.zeros(64))
    )
    stone = np.asarray(batch.obs)[..., 0].reshape(64, 9).argmax(-1)
    target = np.asarray(batch.policy).argmax(-1)
    np.testing.assert_array_equal(stone, target)  # the policy followed the stone
    assert set(stone.tolist()) == {0, 2, 6, 8}  # to every corner


@pytest.mark.parametrize("name", list(GAMES))
def test_the_network_over_every_symmetry_turns_with_the_board(name):
    game = GAMES[name]
    sym = symmetry.symmetries(game)
    apply, variables = linear_net(game, seed=0)
    averaged = jax.jit(symmetry.averaged(apply, sym, COUNTS[name]))
    obs, _ = positions(game, n=12)
    logits, value = averaged(variables, jnp.asarray(obs))
    probs = jax.nn.softmax(logits)
    np.testing.assert_allclose(np.sum(probs, -1), 1.0, rtol=1e-5)
    _, raw_value = apply(variables, jnp.asarray(obs))
    assert not np.allclose(raw_value, value)  # the views disagree: averaging changed the answer
    for s in range(1, COUNTS[name]):
        turned, want = jax.vmap(symmetry.transform, (None, None, 0, 0))(sym, s, obs, probs)
        got_logits, got_value = averaged(variables, turned)
        np.testing.assert_allclose(jax.nn.softmax(got_logits), want, atol=1e-5)
        np.testing.assert_allclose(got_value, value, atol=1e-5)


def test_the_network_over_some_symmetries_is_the_mean_of_their_views():
    game = GAMES["othello6"]
    sym = symmetry.symmetries(game)
    apply, variables = linear_net(game, seed=1)
    assert symmetry.averaged(apply, sym, 1) is apply
    obs, _ = positions(game, n=6)
    logits, value = symmetry.averaged(apply, sym, 3)(variables, jnp.asarray(obs))
    views, back = [], []
    for s in range(3):  # each view's answer, its policy mapped back to the position's frame
        turned, _ = jax.vmap(symmetry.transform, (None, None, 0, None))(sym, s, obs, jnp.zeros(37))
        view_logits, view_value = apply(variables, turned)
        inverse = np.argsort(sym.actions[s])
        back.append(jax.nn.softmax(view_logits)[:, inverse])
        views.append(view_value)
    np.testing.assert_allclose(jax.nn.softmax(logits), np.mean(back, 0), atol=1e-6)
    np.testing.assert_allclose(value, np.mean(views, 0), atol=1e-6)
    with pytest.raises(ValueError, match=r"count must be in 1\.\.8"):
        symmetry.averaged(apply, sym, 9)
