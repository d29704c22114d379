"""Alpha-beta negamax in Python over a game's jitted functions: the `minimax` agent.

search = Minimax(game, depth=9)
search.best_moves(state), search.value(state), search.choose(state)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from games.base import Game

FULL_DEPTH_LIMIT = 16  # `minimax` without depth= searches whole games only this long
_GAMMA = 0.999  # per-ply discount: quicker wins and slower losses score higher
_EXACT, _LOWER, _UPPER = 0, 1, 2


@functools.cache
def _expander(game: Game) -> Callable:
    """expand(state) -> (children[A], legal bool[A], terminal bool[A], reward float32[A]).

    reward[a] is the return, to the player who moves, of the state after action a. Jitted once
    per game.
    """
    actions = jnp.arange(game.num_actions, dtype=jnp.int32)

    @jax.jit
    def expand(state):
        children = jax.vmap(game.step, in_axes=(None, 0))(state, actions)
        reward = jax.vmap(game.returns)(children)[:, game.current_player(state)]
        return children, game.legal_mask(state), jax.vmap(game.is_terminal)(children), reward

    return expand


def _state_key(state) -> bytes:
    return b"".join(np.ascontiguousarray(x).tobytes() for x in jax.tree_util.tree_leaves(state))


@dataclasses.dataclass(frozen=True)
class _Node:
    children: Any  # numpy pytree of the A child states
    moves: tuple[int, ...]  # legal actions, immediate wins first
    terminal: np.ndarray  # bool[A]
    reward: np.ndarray  # float32[A], to the mover

    def child(self, action: int):
        return jax.tree_util.tree_map(lambda x: x[action], self.children)


class Minimax:
    """Alpha-beta negamax to `depth` plies in Python over the game's jitted functions.

    A state's value for its mover is +1 win / -1 loss / 0 draw, discounted by 0.999 a ply (so
    quicker wins are preferred), and 0 (the heuristic) at the depth limit. Expanded positions and
    search bounds are memoised by the state's bytes for the agent's lifetime. The root's moves
    are searched with a window that keeps ties exact, and one of the best is picked at random
    (`seed`). Each new position costs one jitted call, so this suits Tic-Tac-Toe, Connect Four
    and small Hex/Othello boards at modest depths; big games are slow.
    """

    def __init__(self, game: Game, *, depth: int, seed: int = 0):
        self.game, self.depth = game, depth
        self.rng = np.random.default_rng(seed)
        self.expand = _expander(game)
        self.nodes: dict[bytes, _Node] = {}
        self.table: dict[bytes, tuple[int, float, int]] = {}  # key -> (depth, value, flag)

    def choose(self, state) -> int:
        return int(self.rng.choice(self.best_moves(state)))

    def best_moves(self, state) -> list[int]:
        """The root moves of maximal value (state not terminal)."""
        node = self._node(_state_key(state), state)
        values, best = {}, -math.inf
        for a in node.moves:
            values[a] = self._child_value(node, a, self.depth, best - 1e-9, math.inf)
            best = max(best, values[a])
        return [a for a in node.moves if values[a] > best - 1e-9]

    def value(self, state) -> float:
        """The search value of `state` for its mover (state not terminal)."""
        return self._search(_state_key(state), state, self.depth, -math.inf, math.inf)

    def _node(self, key: bytes, state) -> _Node:
        node = self.nodes.get(key)
        if node is None:
            children, legal, terminal, reward = jax.device_get(self.expand(state))
            moves = [int(a) for a in np.flatnonzero(legal)]
            moves.sort(key=lambda a: -int(terminal[a] and reward[a] > 0))
            node = self.nodes[key] = _Node(children, tuple(moves), terminal, reward)
        return node

    def _child_value(self, node: _Node, action: int, depth: int, alpha: float, beta: float):
        if node.terminal[action]:
            return float(node.reward[action])
        if depth <= 1:
            return 0.0
        child = node.child(action)
        return -_GAMMA * self._search(
            _state_key(child), child, depth - 1, -beta / _GAMMA, -alpha / _GAMMA
        )

    def _search(self, key: bytes, state, depth: int, alpha: float, beta: float) -> float:
        entry = self.table.get(key)
        if entry is not None and entry[0] >= depth:
            _, v, flag = entry
            if flag == _EXACT or (flag == _LOWER and v >= beta) or (flag == _UPPER and v <= alpha):
                return v
        node = self._node(key, state)
        alpha0, best = alpha, -math.inf
        for a in node.moves:
            best = max(best, self._child_value(node, a, depth, alpha, beta))
            alpha = max(alpha, best)
            if alpha >= beta:
                break
        flag = _UPPER if best <= alpha0 else _LOWER if best >= beta else _EXACT
        self.table[key] = (depth, best, flag)
        return best
