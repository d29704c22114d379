"""The ownership target (`--ownership_weight`): what each game reports, how the replay buffer
settles it, that augmentation moves it with the board, and that the learner fits it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import games
from azjax import config as cfg
from azjax import network, replay, symmetry, training
from azjax.replay import Batch
from azjax.selfplay import owners, random_moves

GAMES = {
    "hex": games.make("hex", size=5),
    "othello": games.make("othello", size=6),
    "connect_four": games.make("connect_four"),
    "tictactoe": games.make("tictactoe"),
}


@pytest.mark.parametrize("name", sorted(GAMES))
def test_ownership_is_the_movers_view_of_the_board(name):
    """For the player to move it is observe's own minus opponent planes; for the other player it
    is the same board from the other side (Hex: in white's transposed frame)."""
    game = GAMES[name]

    @jax.jit
    def positions(keys, plies):
        states = jax.vmap(lambda k, n: random_moves(game, k, n, game.max_game_length))(keys, plies)
        mover = jax.vmap(game.current_player)(states)
        return (
            jax.vmap(game.observe)(states),
            jax.vmap(game.ownership)(states, mover),
            jax.vmap(game.ownership)(states, 1 - mover),
            jax.vmap(lambda s: owners(game, s))(states),
            mover,
        )

    keys = jax.random.split(jax.random.PRNGKey(3), 24)
    plies = jnp.arange(24) % (game.max_game_length + 1)
    obs, mine, theirs, both, mover = map(np.asarray, positions(keys, plies))
    np.testing.assert_array_equal(mine, obs[..., 0] - obs[..., 1])
    other_side = -mine.transpose(0, 2, 1) if name == "hex" else -mine
    np.testing.assert_array_equal(theirs, other_side)
    for i, p in enumerate(mover):  # owners: player 0's view, then player 1's, flattened
        np.testing.assert_array_equal(both[i, p], mine[i].ravel())
        np.testing.assert_array_equal(both[i, 1 - p], theirs[i].ravel())
    assert np.abs(mine).sum() > 0


def test_the_buffer_gives_each_position_its_games_final_board_for_its_mover():
    # Two slots of a 1x2 board. Slot 0: a game of 3 plies (t = 0..2) ending with player 0
    # holding cell 0 and player 1 cell 1, then a game still running. Slot 1: one game of 4 plies
    # ending with both cells player 1's.
    T, B = 4, 2
    done = np.zeros((T, B), bool)
    done[2, 0] = done[3, 1] = True
    players = np.array([[0, 0], [1, 1], [0, 0], [0, 1]], np.int32)
    final = np.zeros((T, B, 2, 2), np.int8)  # [T, B, player, cell], read where done
    final[2, 0] = [[1, -1], [-1, 1]]
    final[3, 1] = [[-1, -1], [1, 1]]
    final[0, 1] = [[1, 1], [1, 1]]  # not done there: never read
    traj = replay.Trajectory(
        obs=jnp.zeros((T, B, 1, 2, 1)),
        policy=jnp.zeros((T, B, 3)),
        player=jnp.asarray(players),
        done=jnp.asarray(done),
        returns=jnp.zeros((T, B, 2)),
        ownership=jnp.asarray(final),
    )
    buf = replay.add(replay.init(6, B, (1, 2, 1), 3, ownership=True), traj)
    got = np.asarray(buf.ownership)
    for t in range(3):  # slot 0's first game: each position gets its mover's view
        np.testing.assert_array_equal(got[t, 0], final[2, 0, players[t, 0]])
    np.testing.assert_array_equal(got[3, 0], [0, 0])  # the next game has not ended
    for t in range(4):
        np.testing.assert_array_equal(got[t, 1], final[3, 1, players[t, 1]])
    batch = replay.sample(buf, jax.random.PRNGKey(0), 32)
    assert batch.ownership.shape == (32, 2) and batch.ownership.dtype == jnp.float32
    assert set(np.unique(np.asarray(batch.ownership))) <= {-1.0, 1.0}
    with pytest.raises(ValueError, match="ownership"):
        replay.add(replay.init(6, B, (1, 2, 1), 3, ownership=True), traj._replace(ownership=None))
    assert replay.init(6, B, (1, 2, 1), 3).ownership is None  # off: no array at all


def test_augmentation_moves_the_ownership_target_with_the_board():
    game = GAMES["othello"]
    sym = symmetry.symmetries(game)
    obs = (jax.random.uniform(jax.random.PRNGKey(1), (64, 6, 6, 3)) < 0.4).astype(jnp.float32)
    held = (obs[..., 0] - obs[..., 1]).reshape(64, 36)  # a target read off the board itself
    batch = Batch(obs, jnp.zeros((64, game.num_actions)), jnp.zeros(64), ownership=held)
    out = symmetry.augment(sym, jax.random.PRNGKey(2), batch)
    np.testing.assert_array_equal(
        np.asarray(out.ownership), np.asarray(out.obs[..., 0] - out.obs[..., 1]).reshape(64, 36)
    )
    assert not np.array_equal(np.asarray(out.ownership), np.asarray(held))  # it did move


def test_the_learner_fits_the_ownership_target():
    config = cfg.load(
        "tictactoe",
        {"optimizer": "adam", "learning_rate": 0.01, "weight_decay": 0.0, "ownership_weight": 1.0},
    )
    game = config.make_game()
    net = network.make_network(config, game)
    assert net.ownership_head
    variables = network.init_variables(net, game, jax.random.PRNGKey(0))
    assert "ownership" in variables["params"]
    logits, value = network.make_apply(net)(variables, jnp.zeros((2, 3, 3, 3)))  # searches' view
    assert logits.shape == (2, 9) and value.shape == (2,)
    opt = training.make_optimizer(config)
    state = training.init_train_state(variables, opt)
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    obs = (jax.random.uniform(k1, (16, 3, 3, 3)) < 0.3).astype(jnp.float32)
    held = jax.random.randint(k2, (16, 9), -1, 2).astype(jnp.float32)
    batch = Batch(obs, jnp.full((16, 9), 1 / 9), jnp.zeros(16), ownership=held)
    step = jax.jit(training.make_train_step(net, opt, 0.0, ownership_weight=1.0))
    state, first = step(state, batch)
    for _ in range(60):
        state, losses = step(state, batch)
    assert float(first.ownership) > 0
    assert float(losses.ownership) < 0.5 * float(first.ownership)
    assert float(losses.total) == pytest.approx(
        float(losses.value + losses.policy + losses.l2 + losses.ownership), rel=1e-5
    )
    plain = network.make_network(cfg.load("tictactoe", {}), game)
    with pytest.raises(ValueError, match="ownership_head"):
        training.make_train_step(plain, opt, 0.0, ownership_weight=1.0)


def test_ownership_weight_is_refused_where_it_has_no_meaning():
    with pytest.raises(ValueError, match="ownership_weight must be >= 0"):
        cfg.load("othello", {"ownership_weight": -1.0})
    with pytest.raises(ValueError, match="needs algorithm=alphazero.*--ownership_weight=0"):
        cfg.load("othello", {"ownership_weight": 1.0, "algorithm": "exit"})
    with pytest.raises(ValueError, match="not shared learning"):
        cfg.load("connect_four", {"ownership_weight": 1.0, "games": "connect_four,tictactoe"})


def test_score_utility_needs_the_ownership_head():
    assert cfg.load("othello", {"ownership_weight": 1.0, "score_utility": 0.3}).score_utility == 0.3
    with pytest.raises(ValueError, match="score_utility reads the ownership head"):
        cfg.load("othello", {"score_utility": 0.3})
    with pytest.raises(ValueError, match="score_utility must be <= 1"):
        cfg.load("othello", {"ownership_weight": 1.0, "score_utility": 1.5})
    with pytest.raises(ValueError, match="score_utility with rollouts: a rollout's result is"):
        cfg.load(
            "othello",
            {
                "ownership_weight": 1.0,
                "score_utility": 0.3,
                "rollout_policy": "random",
                "rollout_prob": 0.5,
            },
        )
