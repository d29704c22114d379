"""Differential checks against OpenSpiel, an independent implementation of the same rules.

Random games are played on our side as one jitted, vmapped scan; each is then replayed move by move
in OpenSpiel, comparing the legal moves, the player to move, the end ply and the result.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np


def random_games(game, num_games: int, seed: int) -> dict[str, np.ndarray]:
    """Record `num_games` uniformly random games: per ply the state, mask, mover, action and
    terminal flag."""
    steps = game.max_game_length + 1

    @jax.jit
    def play(key):
        states = jax.vmap(lambda _: game.init())(jnp.arange(num_games))

        def body(s, k):
            legal = jax.vmap(game.legal_mask)(s)
            act = jax.random.categorical(k, jnp.where(legal, 0.0, -jnp.inf)).astype(jnp.int32)
            act = jnp.where(legal.any(-1), act, 0)
            rec = dict(
                state=s,
                legal=legal,
                player=jax.vmap(game.current_player)(s),
                terminal=jax.vmap(game.is_terminal)(s),
                action=act,
            )
            return jax.vmap(game.step)(s, act), rec

        final, traj = jax.lax.scan(body, states, jax.random.split(key, steps))
        traj["returns"] = jax.vmap(game.returns)(final)
        return traj

    return jax.device_get(play(jax.random.PRNGKey(seed)))


def compare_with_openspiel(
    game,
    spiel_game,
    to_spiel: Callable[[int], int],
    num_games: int = 1000,
    seed: int = 0,
) -> dict[str, float]:
    """Replay random games of `game` in `spiel_game` (a pyspiel game); AssertionError on any
    mismatch.

    `to_spiel` maps our action number to OpenSpiel's. Returns summary figures (mean length,
    first-player score) so a caller can also check the games were not trivial.
    """
    traj = random_games(game, num_games, seed)
    lengths = []
    for b in range(num_games):
        state = spiel_game.new_initial_state()
        for t in range(traj["action"].shape[0]):
            where = f"game {b}, ply {t}"
            if traj["terminal"][t, b]:
                assert state.is_terminal(), f"{where}: we ended, OpenSpiel did not\n{state}"
                lengths.append(t)
                break
            assert not state.is_terminal(), f"{where}: OpenSpiel ended, we did not\n{state}"
            ours = sorted(to_spiel(int(a)) for a in np.flatnonzero(traj["legal"][t, b]))
            theirs = sorted(state.legal_actions())
            assert ours == theirs, (
                f"{where}: legal moves differ\nours   {ours}\ntheirs {theirs}\n{state}"
            )
            assert state.current_player() == traj["player"][t, b], f"{where}: mover differs"
            state.apply_action(to_spiel(int(traj["action"][t, b])))
        else:
            raise AssertionError(f"game {b} did not end within max_game_length")
        np.testing.assert_allclose(
            traj["returns"][b], state.returns(), err_msg=f"game {b}: results differ\n{state}"
        )
    return {
        "mean_length": float(np.mean(lengths)),
        "first_player_score": float(np.mean(traj["returns"][:, 0])),
    }
