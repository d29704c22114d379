"""Board symmetries: to train on several views of each sampled position (augmentation), and to
average the network's answers over several views of each searched position.

    sym = symmetries(game)                  # Symmetries(cells int32[S, H*W], actions int32[S, A])
    batch = augment(sym, key, batch)        # each position through one of the S at random
    apply = averaged(apply, sym, 8)         # the network averaged over the first 8 views

A symmetry is a permutation of the board's cells that maps the game onto itself, applied in the
network's frame (the observation and the replay buffer's policy, both canonical: Hex's board is
transposed for white so that the player to move always joins top and bottom):
- Hex: the identity and the 180-degree rotation, which keeps each player's pair of edges; the swap
  action stays where it is;
- Othello and Tic-Tac-Toe: the 8 symmetries of the square (Othello's pass stays where it is).
  Othello's rules are symmetric under all 8, its opening is not: the 90-degree rotations and the
  two axis flips turn the initial position into the one with its colours swapped, so half of the
  augmented views are of positions no game from the standard start reaches (their targets are
  still exact: each is a position of the same rules, with the same value and mapped moves);
- Connect Four: the identity and the left-right mirror (its actions are columns).
Applied by gathering: the new board's cell p holds what cell `cells[s, p]` held, and its policy's
action a the probability of action `actions[s, a]`, so a legal move maps to a legal move of the
mapped position and the policy moves with the board (as does an ownership target, a value per
cell).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from azjax.replay import Batch
from games.base import Game


class Symmetries(NamedTuple):
    cells: np.ndarray  # int32[S, H*W], source cell of each cell
    actions: np.ndarray  # int32[S, A], source action of each action


def _square(n: int) -> list[np.ndarray]:
    """The 8 symmetries of an n x n board as source-cell tables (identity first)."""
    grid = np.arange(n * n).reshape(n, n)
    out = []
    for k in range(4):
        rotated = np.rot90(grid, k)
        out += [rotated.ravel(), rotated.T.ravel()]
    return out


def symmetries(game: Game) -> Symmetries:
    """The symmetries of `game` (module doc); ValueError for a game without a table here."""
    h, w = game.board_shape
    cells_n = h * w
    if game.name == "hex":
        cell_maps = [np.arange(cells_n), np.arange(cells_n)[::-1]]
    elif game.name in ("othello", "tictactoe"):
        cell_maps = _square(h)
    elif game.name == "connect_four":
        cell_maps = [np.arange(cells_n), np.arange(cells_n).reshape(h, w)[:, ::-1].ravel()]
    else:
        raise ValueError(
            f"no symmetries known for {game.name}: leave --augment (and sym=) off, or add its "
            "cell permutations to azjax/symmetry.py's symmetries (docs/adding_a_game.md)"
        )
    actions = []
    for cells in cell_maps:
        if game.num_actions == w and game.name == "connect_four":  # actions are columns
            actions.append(cells.reshape(h, w)[0] % w)
        else:  # cell actions, then extra ones (pass, swap) that stay put
            extra = np.arange(cells_n, game.num_actions)
            actions.append(np.concatenate([cells, extra]))
    return Symmetries(np.stack(cell_maps).astype(np.int32), np.stack(actions).astype(np.int32))


def check_count(game: Game, count: int, name: str) -> None:
    """ValueError naming `name` and the accepted range unless `count` of `game`'s symmetries
    can be averaged over (`averaged`). One, the board as it is, needs no symmetry table: a game
    added without one (docs/adding_a_game.md) plays `ckpt:` agents."""
    if count == 1:
        return
    have = len(symmetries(game).cells)
    if not 1 <= count <= have:
        raise ValueError(
            f"{name} must be in 1..{have} for {game.name} (its board symmetries), got {count}"
        )


def transform(sym: Symmetries, s, obs: jax.Array, policy: jax.Array):
    """(obs[H, W, C], policy[A]) through symmetry `s` (an int32 index)."""
    h, w, c = obs.shape
    flat = obs.reshape(h * w, c)[jnp.asarray(sym.cells)[s]]
    return flat.reshape(h, w, c), policy[jnp.asarray(sym.actions)[s]]


def augment(sym: Symmetries, key, batch: Batch) -> Batch:
    """Each of the N positions of `batch` through a uniformly drawn symmetry (its ownership and
    opponent policy targets too, where the batch has them)."""
    s = jax.random.randint(key, (batch.obs.shape[0],), 0, sym.cells.shape[0])
    obs, policy = jax.vmap(lambda i, o, p: transform(sym, i, o, p))(s, batch.obs, batch.policy)
    batch = batch._replace(obs=obs, policy=policy)
    if batch.ownership is not None:
        cells = jnp.asarray(sym.cells)[s]
        batch = batch._replace(ownership=jnp.take_along_axis(batch.ownership, cells, axis=1))
    if batch.opponent_policy is not None:
        actions = jnp.asarray(sym.actions)[s]
        reply = jnp.take_along_axis(batch.opponent_policy, actions, axis=1)
        batch = batch._replace(opponent_policy=reply)
    return batch


def averaged(apply: Callable, sym: Symmetries, count: int) -> Callable:
    """apply(variables, obs[B, H, W, C]) -> (logits[B, A], value[B]) answered as the mean over
    the first `count` of `sym` (identity first): each position goes through each symmetry, the
    network sees the `count` * B views in one batch, each view's policy is mapped back to the
    position's frame, and the logits returned are the log of the mean probabilities, the value
    the mean value (an ensemble of views, as engines average their networks over symmetries).
    With every symmetry of the game the answer is equivariant whatever the network: a turned
    position gets the turned policy and the same value. `count` 1: `apply` itself."""
    if not 1 <= count <= len(sym.cells):
        raise ValueError(f"count must be in 1..{len(sym.cells)} (the symmetries), got {count}")
    if count == 1:
        return apply
    cells = np.asarray(sym.cells)[:count]  # [S, H*W]
    back = np.argsort(np.asarray(sym.actions)[:count], axis=1)  # [S, A]: a view's action of each

    def apply_averaged(variables, obs):
        b, h, w, c = obs.shape
        views = obs.reshape(b, h * w, c)[:, cells]  # [B, S, H*W, C]
        views = jnp.swapaxes(views, 0, 1).reshape(count * b, h, w, c)
        logits, value = apply(variables, views)
        logits = logits.astype(jnp.float32).reshape(count, b, -1)
        logits = jnp.take_along_axis(logits, jnp.asarray(back)[:, None, :], axis=2)
        probs = jnp.mean(jax.nn.softmax(logits, axis=-1), axis=0)  # [B, A]
        mean_value = jnp.mean(value.astype(jnp.float32).reshape(count, b), axis=0)
        return jnp.log(jnp.maximum(probs, jnp.finfo(jnp.float32).tiny)), mean_value

    return apply_averaged
