"""The shared API check every game passes: run it on a new game before anything else.

    from games.check import check_game
    check_game(games.make("mnk", m=4, n=4, k=3))    # AssertionError naming the broken invariant

It plays a batch of uniformly random games to the end (and two plies past it) in one jitted,
vmapped scan and checks the recorded trajectory: shapes and dtypes, a legal move always exists
before the end and none after it, returns are zero until the end and sum to zero after it, terminal
states are absorbing, every game ends within `max_game_length` plies, the observation planes are
0/1 with planes 0 and 1 apart and plane 2 the colour (whether plane 0 holds the mover's stones,
or who won, it cannot tell: scripted tests can, docs/adding_a_game.md, section 7). Then the
random playout under jit and vmap, the policy frame's round trip, move names and the rejection of
illegal moves. tests/test_games_api.py runs each part on every built-in game.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from games.base import Game, GameState, random_action


class Trajectory(NamedTuple):
    """One ply of a batch of random games; stacked by the scan to [T, B, ...] with T plies."""

    legal: jax.Array  # bool[T, B, A]
    terminal: jax.Array  # bool[T, B]
    returns: jax.Array  # float32[T, B, 2]
    player: jax.Array  # int32[T, B]
    obs: jax.Array  # float32[T, B, H, W, C]
    same: jax.Array  # bool[T, B], the step left the whole state unchanged


def _expect(ok, message: str) -> None:
    if not bool(ok):
        raise AssertionError(message)


def play_random(game: Game, *, batch: int = 16, seed: int = 0) -> tuple[Trajectory, GameState]:
    """`batch` uniformly random games played `max_game_length + 2` plies (two past the longest
    game: the absorbing check), as a numpy Trajectory [T, B, ...] and the final states [B]."""
    steps = game.max_game_length + 2

    @jax.jit
    def play(key):
        states = jax.vmap(lambda _: game.init())(jnp.arange(batch))

        def body(s, k):
            legal = jax.vmap(game.legal_mask)(s)
            logits = jnp.where(legal, 0.0, -jnp.inf)
            acts = jax.random.categorical(k, logits).astype(jnp.int32)
            acts = jnp.where(legal.any(-1), acts, 0)  # terminal: any action must be a no-op
            nxt = jax.vmap(game.step)(s, acts)
            unchanged = jax.tree_util.tree_map(
                lambda a, b: jnp.all((a == b).reshape(batch, -1), axis=1), s, nxt
            )
            rec = Trajectory(
                legal=legal,
                terminal=jax.vmap(game.is_terminal)(s),
                returns=jax.vmap(game.returns)(s),
                player=jax.vmap(game.current_player)(s),
                obs=jax.vmap(game.observe)(s),
                same=jax.tree_util.tree_reduce(jnp.logical_and, unchanged),
            )
            return nxt, rec

        return jax.lax.scan(body, states, jax.random.split(key, steps))

    final, traj = play(jax.random.PRNGKey(seed))
    return jax.device_get(traj), final


def check_shapes(game: Game, traj: Trajectory) -> None:
    """Shapes and dtypes of masks, flags, returns, players and observations."""
    steps, batch = traj.terminal.shape
    _expect(steps == game.max_game_length + 2, f"{steps} plies recorded")
    _expect(
        traj.legal.shape == (steps, batch, game.num_actions) and traj.legal.dtype == np.bool_,
        f"legal_mask must be bool[{game.num_actions}], "
        f"got {traj.legal.dtype}{list(traj.legal.shape[2:])}",
    )
    _expect(traj.terminal.dtype == np.bool_, f"is_terminal must be bool, got {traj.terminal.dtype}")
    _expect(
        traj.returns.shape == (steps, batch, 2) and traj.returns.dtype == np.float32,
        f"returns must be float32[2], got {traj.returns.dtype}{traj.returns.shape[2:]}",
    )
    _expect(traj.player.dtype == np.int32, f"current_player must be int32, got {traj.player.dtype}")
    _expect(
        traj.obs.shape == (steps, batch, *game.observation_shape) and traj.obs.dtype == np.float32,
        f"observe must be float32{list(game.observation_shape)}, "
        f"got {traj.obs.dtype}{list(traj.obs.shape[2:])}",
    )
    _expect(
        game.observation_shape[:2] == game.board_shape,
        f"observation_shape {game.observation_shape} must start with board_shape "
        f"{game.board_shape}",
    )


def check_invariants(game: Game, traj: Trajectory, final: GameState) -> None:
    """Masks, returns, absorbing terminal states and observation planes along the games."""
    term, legal, ret = traj.terminal, traj.legal, traj.returns
    _expect(not term[0].any(), "the start position must not be terminal")
    _expect(legal[~term].any(-1).all(), "a state before the end has no legal move")
    _expect(not legal[term].any(), "a terminal state has a legal move")
    _expect((ret[~term] == 0).all(), "returns must be zero until the end")
    _expect(np.allclose(ret.sum(-1), 0.0), "returns must sum to zero (a zero-sum game)")
    _expect(set(np.unique(ret[term])) <= {-1.0, 0.0, 1.0}, "returns must be +1, -1 or 0")
    _expect(np.isin(traj.player, [0, 1]).all(), "current_player must be 0 or 1")
    _expect((np.diff(term.astype(int), axis=0) >= 0).all(), "a game left its terminal state")
    _expect(
        term[game.max_game_length].all(),
        f"a game lasted longer than max_game_length={game.max_game_length} plies",
    )
    _expect(traj.same[term].all(), "a step from a terminal state changed it (must be absorbing)")
    _expect(not traj.same[~term].any(), "a legal move before the end left the state unchanged")
    obs = traj.obs
    _expect(set(np.unique(obs)) <= {0.0, 1.0}, "observation planes must be 0/1")
    _expect(not (obs[..., 0] * obs[..., 1]).any(), "planes 0 and 1 (mover, opponent) overlap")
    colour = (traj.player == 0).astype(np.float32)
    _expect(
        (obs[..., 2] == colour[..., None, None]).all(),
        "plane 2 must be all 1 when player 0 is to move and all 0 otherwise",
    )
    first = jax.tree_util.tree_map(lambda x: x[0], final)
    _expect(np.asarray(game.is_terminal(first)), "a game had not ended after the scan")


def check_random_playout(game: Game, *, batch: int = 32, seed: int = 1) -> None:
    """`random_playout` runs under jit and vmap and returns float32[2] results, and the plain
    playout's `batch` random games all end within `max_game_length` plies."""
    keys = jax.random.split(jax.random.PRNGKey(seed), batch)
    states = jax.vmap(lambda _: game.init())(jnp.arange(batch))

    def ends(state, key):  # the plain playout's games, `max_game_length` plies at the most
        u = jax.random.uniform(key, (game.max_game_length,))
        play = lambda i, s: game.step(s, random_action(u[i], game.legal_mask(s)))  # noqa: E731
        return game.is_terminal(jax.lax.fori_loop(0, game.max_game_length, play, state))

    over = np.asarray(jax.jit(jax.vmap(ends))(states, keys))
    _expect(
        over.all(),
        f"{int((~over).sum())} of {batch} random games lasted longer than max_game_length "
        f"({game.max_game_length})",
    )
    out = jax.jit(jax.vmap(game.random_playout))(states, keys)
    _expect(
        out.shape == (batch, 2) and out.dtype == jnp.float32,
        f"random_playout must return float32[2], got {out.dtype}{list(out.shape[1:])}",
    )
    out = np.asarray(out)
    _expect(np.allclose(out.sum(-1), 0.0), "random_playout returns must sum to zero")
    _expect(set(np.unique(out)) <= {-1.0, 0.0, 1.0}, "random_playout returns must be +1, -1, 0")


def check_policy_frame(game: Game) -> None:
    """`policy_to_actions` is a permutation that `actions_to_policy` inverts, for player 1, and
    `opponent_frames` maps a policy in one player's frame to the other's."""
    first = game.init()
    state = game.step(first, jnp.flatnonzero(game.legal_mask(first))[0])  # player 1 to move
    x = jnp.arange(game.num_actions, dtype=jnp.float32)
    back = np.asarray(game.actions_to_policy(state, game.policy_to_actions(state, x)))
    _expect((back == np.asarray(x)).all(), "actions_to_policy does not undo policy_to_actions")
    mapped = sorted(np.asarray(game.policy_to_actions(state, x)).tolist())
    _expect(mapped == list(range(game.num_actions)), "policy_to_actions is not a permutation")
    frames = np.asarray(game.opponent_frames)
    _expect(frames.shape == (2, game.num_actions), f"opponent_frames has shape {frames.shape}")
    for mover, opponent in ((first, state), (state, first)):
        want = np.asarray(game.actions_to_policy(mover, game.policy_to_actions(opponent, x)))
        got = np.asarray(x)[frames[int(game.current_player(mover))]]
        _expect((got == want).all(), "opponent_frames does not map the opponent's frame")


def check_move_names(game: Game) -> None:
    """Every action's name parses back to it, a non-move is a ValueError, the first board shows
    every empty cell as '.' (or '*' for a legal move)."""
    for a in range(game.num_actions):
        name = game.action_to_str(a)
        _expect(game.parse_action(name) == a, f"{name!r} (action {a}) parses to another action")
    try:
        game.parse_action("zz99")
    except ValueError as e:
        _expect("not a move" in str(e), f"'zz99' raised {e!r}, not 'not a move'")
    else:
        raise AssertionError("parse_action('zz99') did not raise a ValueError")
    state = game.init()
    obs = np.asarray(game.observe(state))
    empty = int(obs.shape[0] * obs.shape[1] - obs[..., :2].sum())  # cells without a stone
    text = game.render(state)
    _expect(
        text.count(".") + text.count("*") == empty,
        f"render of the first board shows {text.count('.') + text.count('*')} empty cells, "
        f"the observation {empty}:\n{text}",
    )


def check_illegal_move(game: Game) -> bool:
    """An illegal move at the start is a ValueError listing the legal moves; False when every
    action is legal there (nothing to check)."""
    state = game.init()
    illegal = np.flatnonzero(~np.asarray(game.legal_mask(state)))
    if len(illegal) == 0:
        return False
    name = game.action_to_str(int(illegal[0]))
    try:
        game.parse_action(name, state)
    except ValueError as e:
        _expect("legal moves" in str(e), f"illegal {name!r} raised {e!r} without the legal moves")
        return True
    raise AssertionError(f"parse_action({name!r}, start) accepted an illegal move")


def check_game(game: Game, *, batch: int = 16, seed: int = 0) -> None:
    """Every part of the check on `game`; an AssertionError naming the first broken invariant."""
    traj, final = play_random(game, batch=batch, seed=seed)
    check_shapes(game, traj)
    check_invariants(game, traj, final)
    check_random_playout(game, seed=seed + 1)
    check_policy_frame(game)
    check_move_names(game)
    check_illegal_move(game)
