"""The game interface every game implements, and the helpers they share.

A game is a frozen dataclass whose fields are its options (board size, rules). Sizes are static
Python values held by the game object; everything that changes during play lives in the state,
an immutable pytree (``flax.struct.dataclass``). All state functions are pure, written for one
unbatched state, and run under ``jax.jit`` and ``jax.vmap``; callers vmap them over a batch.

Conventions shared by every game:
- players are 0 (moves first; "black" / "X") and 1;
- actions are integers in ``[0, num_actions)``; ``legal_mask`` is True where legal;
- a terminal state is absorbing: ``step`` returns it unchanged;
- ``returns`` is float32[2], +1 win / -1 loss / 0 draw per player, zeros until terminal;
- ``observe`` gives float32[H, W, C] planes seen from the player to move: the mover's stones,
  the opponent's stones, and a constant plane that is 1 when the mover is player 0;
- the network's policy lives in a *canonical frame* that may differ from the action order
  (Hex transposes the board for player 1). ``policy_to_actions`` maps a vector from the network
  frame to action order, ``actions_to_policy`` the other way; both are identities by default.

The jitted core assumes the actions it is given are legal (``parse_action`` checks moves typed by
people); what an illegal action does is described by each game.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

Array = jax.Array

# Plies a random playout takes per loop turn (`playout_unroll`). Under `vmap` a playout's
# `while_loop` runs until the batch's longest playout ends, one turn per ply; on a GPU or TPU each
# turn costs a round of small kernels and a test of the loop's condition, whatever the work, so
# taking several plies a turn is cheaper there; on the CPU a turn costs little and the plies after
# a playout ends are wasted. The same results for any value (tests/test_games_api.py).
# `python -m benchmarks.rollouts --playout_unroll=1,4` compares them (docs/benchmarks.md). Keep the
# CPU at 1: XLA:CPU ran Othello's flat playouts (games/othello_flat.py) 10 - 100x slower at 4
# plies a turn (on an H200, 4 was 2.3x faster than 1). A game may pass its own accelerator choice
# to `playout_unroll` (Othello's flat playouts take 16: games/othello_flat.py).
CPU_PLAYOUT_UNROLL = 1
ACCELERATOR_PLAYOUT_UNROLL = 4
PLAYOUT_UNROLL: int | None = None  # set to override the backend's choice; read when traced


def playout_unroll(accelerator: int = ACCELERATOR_PLAYOUT_UNROLL) -> int:
    """PLAYOUT_UNROLL if set, else CPU_PLAYOUT_UNROLL on the CPU and `accelerator` (a game's own
    choice, else ACCELERATOR_PLAYOUT_UNROLL) on a GPU or TPU: the plies a random playout takes
    per loop turn."""
    unroll = PLAYOUT_UNROLL
    if unroll is None:
        unroll = CPU_PLAYOUT_UNROLL if jax.default_backend() == "cpu" else accelerator
    if unroll < 1:
        raise ValueError(f"playout unroll must be at least 1, got {unroll}")
    return unroll


def while_unrolled(cond, body, init, unroll: int | None = None):
    """`jax.lax.while_loop(cond, body, init)` taking `unroll` (default `playout_unroll()`) steps a
    loop turn: each step after a turn's first is kept only where `cond` still holds, so the result
    is the loop's for any `unroll`. For one unbatched carry (`cond` a scalar); vmap it."""
    unroll = playout_unroll() if unroll is None else unroll

    def step_if_going(carry):
        going = cond(carry)
        keep = lambda new, old: jnp.where(going, new, old)  # noqa: E731
        return jax.tree_util.tree_map(keep, body(carry), carry)

    def turn(carry):
        carry = body(carry)
        for _ in range(unroll - 1):
            carry = step_if_going(carry)
        return carry

    return jax.lax.while_loop(cond, turn, init)


@struct.dataclass
class GameState:
    """Fields every game state carries; games subclass it and add their board.

    Subclasses must list these fields too (flax struct dataclasses inherit fields).
    """

    player: Array  # int32[], the player to move (0 or 1)
    terminal: Array  # bool[]
    rewards: Array  # float32[2], +1/-1/0 per player once terminal, else zeros
    num_moves: Array  # int32[], plies played so far


def base_fields() -> dict[str, Array]:
    """Initial values of the `GameState` fields (player 0 to move, nothing played)."""
    return dict(
        player=jnp.int32(0),
        terminal=jnp.bool_(False),
        rewards=jnp.zeros(2, jnp.float32),
        num_moves=jnp.int32(0),
    )


def win_rewards(winner: Array) -> Array:
    """float32[2] rewards for a winner in {0, 1}; -1 (or anything else) means a draw."""
    sign = jnp.where(winner == 0, 1.0, jnp.where(winner == 1, -1.0, 0.0))
    return jnp.array([sign, -sign], jnp.float32)


def absorbing(old: GameState, new: GameState) -> GameState:
    """``new``, unless ``old`` is terminal: terminal states are absorbing whatever the action."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(old.terminal, a, b), old, new)


def sample_legal(key: Array, legal: Array) -> Array:
    """A uniformly random legal action (int32) from a bool[A] mask with at least one True."""
    return jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf)).astype(jnp.int32)


def random_action(u: Array, legal: Array) -> Array:
    """The legal action that a uniform number u in [0, 1) picks: the floor(u * #legal)-th one.

    Uniform over the legal actions when u is. Playouts draw all their u at once, which is much
    cheaper per ply than a categorical sample.
    """
    count = legal.sum()
    rank = jnp.minimum(jnp.floor(u * count).astype(jnp.int32), count - 1)
    return jnp.argmax(jnp.cumsum(legal) > rank).astype(jnp.int32)


def stone_planes(own: Array, opp: Array, player: Array) -> Array:
    """float32[H, W, 3] observation: mover's stones, opponent's stones, mover-is-player-0 plane."""
    colour = jnp.full(own.shape, player == 0, jnp.float32)
    return jnp.stack([own.astype(jnp.float32), opp.astype(jnp.float32), colour], axis=-1)


def column_letters(n: int) -> str:
    """Column letters as board GUIs print them; 'i' is kept (Hex and Othello tools keep it)."""
    return "abcdefghijklmnopqrstuvwxyz"[:n]


@dataclasses.dataclass(frozen=True)
class Game:
    """Base class of all games. Subclasses are frozen dataclasses whose fields are options.

    Subclasses set ``name`` and implement ``num_actions``, ``board_shape``, ``max_game_length``,
    ``init``, ``step``, ``legal_mask``, ``observe``, ``action_to_str``, ``_parse_move`` and
    ``render``; the rest has working defaults here.
    """

    name: ClassVar[str] = ""
    # options that change only what `observe` shows a network (Othello's `mobility`), not the
    # game: two games that differ in them alone have the same `rules` and play each other
    observation_options: ClassVar[tuple[str, ...]] = ()

    # ---- static sizes -------------------------------------------------------------------------
    @property
    def num_actions(self) -> int:
        raise NotImplementedError

    @property
    def board_shape(self) -> tuple[int, int]:
        raise NotImplementedError

    @property
    def observation_shape(self) -> tuple[int, int, int]:
        return (*self.board_shape, 3)

    @property
    def max_game_length(self) -> int:
        """An upper bound on the number of plies of any game (sizes scans and buffers)."""
        raise NotImplementedError

    @property
    def options(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def rules(self) -> dict[str, Any]:
        """The options that make the game: `options` less the observation options. Ladder tables
        and solved positions are kept per game name and rules, and networks whose games share
        both meet in matches (`same_rules`)."""
        return {k: v for k, v in self.options.items() if k not in self.observation_options}

    def same_rules(self, other: Game) -> bool:
        """Whether `other` is this game, whatever either shows its networks."""
        return self.name == other.name and self.rules == other.rules

    @property
    def alternating(self) -> bool:
        """Whether the players always alternate (a pass is a ply), so that the player to move
        follows from the number of plies; Hex's swap rule breaks it."""
        return True

    # ---- pure state functions (one unbatched state) -------------------------------------------
    def init(self) -> GameState:
        raise NotImplementedError

    def step(self, state: GameState, action: Array) -> GameState:
        raise NotImplementedError

    def legal_mask(self, state: GameState) -> Array:
        raise NotImplementedError

    def observe(self, state: GameState) -> Array:
        raise NotImplementedError

    def current_player(self, state: GameState) -> Array:
        return state.player

    def is_terminal(self, state: GameState) -> Array:
        return state.terminal

    def returns(self, state: GameState) -> Array:
        return state.rewards

    def policy_to_actions(self, state: GameState, x: Array) -> Array:
        """Map a [A] vector from the network's canonical frame to action order."""
        del state
        return x

    def actions_to_policy(self, state: GameState, x: Array) -> Array:
        """Map a [A] vector from action order to the network's canonical frame."""
        del state
        return x

    @property
    def opponent_frames(self) -> np.ndarray:
        """int32[2, A]: row p maps a policy in the frame of p's opponent to p's frame, as a
        gather (``x[opponent_frames[p]]``): ``actions_to_policy(s, policy_to_actions(t, x))``
        for a state ``s`` with p to move and a state ``t`` with the opponent to move. The
        identity by default; Hex's is the board transpose for both. The learner's opponent
        policy target (``--opponent_policy_weight``) reads it."""
        return np.tile(np.arange(self.num_actions, dtype=np.int32), (2, 1))

    def ownership(self, state: GameState, player: Array) -> Array:
        """float32[H, W]: who holds each cell of ``state``'s board, seen by ``player`` in that
        player's network frame (as ``observe`` shows it when ``player`` is to move): +1 a stone
        of ``player``, -1 one of the opponent, 0 empty. Of a finished game, it is the ownership
        target (``--ownership_weight``). This default reads ``observe``'s two stone planes,
        which holds for games whose frame is the board itself; Hex overrides it."""
        obs = self.observe(state)
        sign = jnp.where(player == self.current_player(state), 1.0, -1.0)
        return sign * (obs[..., 0] - obs[..., 1])

    def random_playout(self, state: GameState, key: Array) -> Array:
        """float32[2] returns of one uniformly random playout from ``state`` to the end."""
        return self.move_by_move_playout(state, key)

    def move_by_move_playout(self, state: GameState, key: Array) -> Array:
        """The plain playout: pick a uniformly random legal move, step, until terminal (or,
        in a game that breaks its `max_game_length`, until that many plies: no endless loop)."""
        u = jax.random.uniform(key, (self.max_game_length,))

        def body(carry):
            s, i = carry
            return self.step(s, random_action(u[i], self.legal_mask(s))), i + 1

        def going_on(carry):
            return ~self.is_terminal(carry[0]) & (carry[1] < self.max_game_length)

        final, _ = while_unrolled(going_on, body, (state, 0))
        return self.returns(final)

    # ---- human / protocol side (Python, not jitted) -------------------------------------------
    def action_to_str(self, action: int) -> str:
        raise NotImplementedError

    def checked_action(self, action) -> int:
        """`action` as an int, a ValueError where it is not one of the game's actions (an
        `action_to_str` names it only then: -1 was "c0" in Tic-Tac-Toe, 100 "b34")."""
        if not 0 <= int(action) < self.num_actions:
            raise ValueError(
                f"{self.name}: action {int(action)} is not in 0..{self.num_actions - 1}"
            )
        return int(action)

    def _parse_move(self, text: str) -> int | None:
        """The action a move name denotes, or None when the text is not a move name."""
        raise NotImplementedError

    def parse_action(self, text: str, state: GameState | None = None) -> int:
        """The action for a move name (`action_to_str`'s, case and surrounding spaces aside);
        ValueError for malformed, out-of-range or illegal moves.

        With ``state`` given, the move must also be legal there.
        """
        name = str(text).strip().lower()
        # action_to_str's names are ASCII: int() would read other digits (a٣, or fail on a²)
        action = self._parse_move(name) if name.isascii() else None
        if action is not None and 0 <= action < self.num_actions:
            if self.action_to_str(action).lower() != name:  # one name a move: not a01 or 04
                action = None
        if action is None or not 0 <= action < self.num_actions:
            raise ValueError(
                f"{self.name}: {text!r} is not a move; moves look like "
                f"{self.action_to_str(0)!r} .. {self.action_to_str(self.num_actions - 1)!r}"
            )
        if state is not None:
            # numpy, not jnp: an eager jnp.flatnonzero recompiles for every count of legal moves
            legal = [int(a) for a in np.flatnonzero(np.asarray(self.legal_mask(state)))]
            if action not in legal:
                names = ", ".join(self.action_to_str(a) for a in legal) or "none (game over)"
                raise ValueError(f"{self.name}: {text!r} is not legal here; legal moves: {names}")
        return action

    def render(self, state: GameState) -> str:
        raise NotImplementedError


def check_range(game: str, option: str, value: Any, low: int, high: int, even: bool = False):
    """Raise a ValueError naming the option and its accepted values unless low <= value <= high."""
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if ok and even:
        ok = value % 2 == 0
    if not ok:
        kind = "an even integer" if even else "an integer"
        raise ValueError(f"{game}: {option} must be {kind} in {low}..{high}, got {value!r}")
