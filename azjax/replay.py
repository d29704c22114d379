"""A FIFO replay buffer of positions that lives on the device.

Self-play writes one row of B positions (one per game slot) per move. A position's value target,
the outcome from its mover's view, is known only when its game ends, possibly several iterations
later; until then the position is stored but not sampled. The buffer is laid out as
[R rows, B slots] so that one game's positions sit in one slot column: when slot b's game ends at
global step t, every entry of column b written at a step in [episode_start[b], t] belongs to that
game and gets its target — an elementwise update, with no scatter and no per-game bookkeeping.

    buffer = replay.init(capacity_rows, batch_games, obs_shape, num_actions)
    buffer = replay.add(buffer, trajectory)        # a self-play chunk, [T, B] leading axes
    batch = replay.sample(buffer, key, batch_size)  # uniform over positions with a known outcome

A value target that mixes in the search's root value (`value_mix` = m > 0):
z' = (1 - m) z + m q, with q the root value self-play recorded for the position (Z+Q averaging;
KataGo mixes search values into its targets too). Until its game ends an entry's `value` holds
q, and settling mixes the outcome into it: no further array and no change to the checkpointed
layout. (A run resumed with the mix turned on after training without it mixes, for the games in
flight at its checkpoint only, the outcome with what their entries held before: old targets.)

A TD(lambda) value target (`value_lambda` = l < 1; Sutton 1988, with the search's root values of
the later positions as the bootstrap values): for position t of a game whose last position is T,

    G_t = (1 - l) * sum_{k=1..T-t} l^(k-1) q'_{t+k} + l^(T-t) z_t,

q'_s the root value of position s from the view of position t's mover (negated where the other
player moves; a pass that leaves the same player to move keeps its sign). l = 1 is the outcome
alone, l = 0 the next position's root value. Later blunders of self-play then move an early
position's target by the root values they change, not by the whole outcome. Computed forward:
an entry's `value` accumulates the first sum as its game goes on (each new position adds its
term to the earlier entries of its column) and settling adds l^(T-t) z_t; no further array.

Observations are stored as uint8 (the planes are 0/1), policies as float32. Each position keeps
the global step whose move settled its target (`settled`, -1 until then): the positions of the
games a given chunk ended are `settled_between` its first step and the next chunk's.

Ownership targets (`init(..., ownership=True)`, KataGo's auxiliary target): who holds each cell
at the end of the position's game, +1 the mover, -1 the opponent, 0 empty, in the mover's network
frame (`Game.ownership`). They are settled like the value targets: when a game ends, the
trajectory's `ownership` of its final position (one board per player) goes to every entry of the
game, the mover's board to each. int8; `None` in a buffer made without them. A game that self-play
resigned never reached its final board: its positions get `UNKNOWN_OWNER` in every cell, which
the learner's ownership term leaves out (`azjax.training`).

Policy surprise weighting (`init(..., surprise=True)`, KataGo's, Wu 2020 "Other Methods"): each
position also keeps how much its search changed the network's mind, KL(search policy || network
prior), as self-play measured it, and `sample` with `surprise_fraction` = f > 0 draws a position
with probability proportional to (1 - f) + f * s / mean(s), the mean over the positions with a
known outcome: a share f of the draws in proportion to the surprise, the rest uniform. The
weights are counted as whole tickets (`SURPRISE_TICKETS` for a weight of 1) so that the draw is
exact integer arithmetic, as the uniform draw is. float32; `None` in a buffer made without it.

Opponent policy targets (`init(..., opponent=True)`, KataGo's auxiliary target, Wu 2019 section
4.1): a position's opponent policy target is the search policy of the next position of its game,
where the opponent moves, mapped into the position's own network frame (`Game.opponent_frames`);
`sample` with `opponent_frames` reads it from the next row of the same column. The buffer keeps
only which positions ended their game (`last`), so that the first position of the slot's next
game is not taken for a reply. A position without one (its game's last, or one followed by the
same player's move) gets an all-zero target, as a fast search's policy is. bool; `None` in a
buffer made without it.

Over several devices the buffer is split along B (`partition_specs`): each device holds the
columns of its own games, and `add` needs no communication. `sample` with an `axis_name` draws
from all devices' positions at once, exactly as one device would from the whole buffer.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import PartitionSpec as P


@struct.dataclass
class Buffer:
    obs: jax.Array  # uint8[R, B, H, W, C]
    policy: jax.Array  # float32[R, B, A], search policy in the network's frame
    player: jax.Array  # int8[R, B], mover of the position
    value: jax.Array  # float32[R, B], value target for the mover once known (see module doc)
    row_step: jax.Array  # int32[R], global step that last wrote the row (-1: never)
    settled: jax.Array  # int32[R, B], global step whose move settled the target (-1: not yet)
    episode_start: jax.Array  # int32[B], global step of the current game's first position
    step: jax.Array  # int32[], global steps written so far
    ownership: jax.Array | None = None  # int8[R, B, H*W] once known (module doc), or None
    surprise: jax.Array | None = None  # float32[R, B], KL(policy || prior) (module doc), or None
    last: jax.Array | None = None  # bool[R, B], the position's move ended its game, or None

    @property
    def ready(self) -> jax.Array:
        """bool[R, B]: the outcome is known (the position can be sampled)."""
        return self.settled >= 0


# the ownership target of a resigned game's positions (their final board was never reached): every
# cell, outside int8's -1, 0, +1, so that the learner can leave it out
UNKNOWN_OWNER = -128

# tickets for a sampling weight of 1 under surprise weighting: a weight is drawn to within 1/32
SURPRISE_TICKETS = 32
# the weights average 1, so the tickets of N positions add up to at most (32 + 1/2) N: int32 holds
# them for this many positions
MAX_SURPRISE_POSITIONS = (2**31 - 1) // (SURPRISE_TICKETS + 1)


class Trajectory(NamedTuple):
    """One self-play chunk; T moves of B games. Positions are those *before* each move."""

    obs: jax.Array  # float32[T, B, H, W, C]
    policy: jax.Array  # float32[T, B, A]
    player: jax.Array  # int32[T, B]
    done: jax.Array  # bool[T, B], the move ended the game (the slot restarts)
    returns: jax.Array  # float32[T, B, 2], the final returns where done
    ply: jax.Array | None = None  # int32[T, B], plies played before the position
    root_value: jax.Array | None = None  # float32[T, B], the search's root value for the mover
    # int8[T, B, 2, H*W]: the position after the move, `Game.ownership` for players 0 and 1
    # (read where done: the final board's); None when self-play does not record it
    ownership: jax.Array | None = None
    # float32[T, B]: KL(recorded policy || network prior) of the position; 0 where the policy is
    # empty (a fast search's). None when self-play does not record it
    surprise: jax.Array | None = None
    # bool[T, B]: the mover resigned instead of moving (`done` too; `returns` its loss). None when
    # self-play does not resign
    resigned: jax.Array | None = None


class Batch(NamedTuple):
    obs: jax.Array  # float32[N, H, W, C]
    policy: jax.Array  # float32[N, A]
    value: jax.Array  # float32[N]
    # float32[N, H*W], from a buffer that keeps ownership (UNKNOWN_OWNER in every cell of a
    # resigned game's position)
    ownership: jax.Array | None = None
    # float32[N, A]: the opponent's next search policy in the position's frame (all zero where
    # there is none), when `sample` is given `opponent_frames`
    opponent_policy: jax.Array | None = None


def init(
    rows: int,
    batch_games: int,
    obs_shape,
    num_actions: int,
    *,
    ownership: bool = False,
    surprise: bool = False,
    opponent: bool = False,
) -> Buffer:
    """An empty buffer of `rows * batch_games` positions (with room for ownership targets with
    `ownership`, for policy surprises with `surprise`, for opponent policy targets with
    `opponent`)."""
    if surprise and rows * batch_games > MAX_SURPRISE_POSITIONS:
        raise ValueError(
            f"policy surprise weighting counts its draws in int32 tickets: a replay of "
            f"{rows * batch_games} positions is more than {MAX_SURPRISE_POSITIONS} (lower "
            f"replay_games)"
        )
    cells = obs_shape[0] * obs_shape[1]
    return Buffer(
        obs=jnp.zeros((rows, batch_games, *obs_shape), jnp.uint8),
        policy=jnp.zeros((rows, batch_games, num_actions), jnp.float32),
        player=jnp.zeros((rows, batch_games), jnp.int8),
        value=jnp.zeros((rows, batch_games), jnp.float32),
        row_step=jnp.full((rows,), -1, jnp.int32),
        settled=jnp.full((rows, batch_games), -1, jnp.int32),
        episode_start=jnp.zeros((batch_games,), jnp.int32),
        step=jnp.int32(0),
        ownership=jnp.zeros((rows, batch_games, cells), jnp.int8) if ownership else None,
        surprise=jnp.zeros((rows, batch_games), jnp.float32) if surprise else None,
        last=jnp.zeros((rows, batch_games), bool) if opponent else None,
    )


def partition_specs(axis: str) -> Buffer:
    """How a buffer is split over the mesh axis `axis`: along B, row bookkeeping replicated."""
    column = P(None, axis)
    return Buffer(
        obs=column,
        policy=column,
        player=column,
        value=column,
        row_step=P(),
        settled=column,
        episode_start=P(axis),
        step=P(),
        ownership=column,  # matches nothing in a buffer without it
        surprise=column,
        last=column,
    )


def add_step(
    buffer: Buffer,
    obs,
    policy,
    player,
    done,
    returns,
    root_value=None,
    ownership=None,
    surprise=None,
    *,
    value_mix: float = 0.0,
    value_lambda: float = 1.0,
) -> Buffer:
    """Write one row (B positions) and settle the targets of the games that just ended: the
    outcome, or with `value_mix` = m > 0 (1 - m) * outcome + m * `root_value` (float32[B]), or
    with `value_lambda` < 1 the TD(lambda) return over the later positions' root values (module
    doc); in a buffer with ownership targets also `ownership` (int8[B, 2, H*W], the final
    board's for each player, module doc), which it then needs, and in one with surprises the
    positions' `surprise` (float32[B])."""
    mixed = _check_mix(value_mix, root_value)
    bootstrapped = _check_lambda(value_lambda, value_mix, root_value)
    rows = buffer.settled.shape[0]
    r = buffer.step % rows
    row_step = buffer.row_step.at[r].set(buffer.step)
    obs8 = obs.astype(jnp.uint8)
    if mixed:  # held in `value` until the game ends
        buffer = buffer.replace(
            value=jax.lax.dynamic_update_index_in_dim(buffer.value, root_value, r, 0)
        )
    if bootstrapped:  # the new entry's sum of later root values starts empty
        zero = jnp.zeros_like(root_value, jnp.float32)
        buffer = buffer.replace(value=jax.lax.dynamic_update_index_in_dim(buffer.value, zero, r, 0))
    buffer = buffer.replace(
        obs=jax.lax.dynamic_update_index_in_dim(buffer.obs, obs8, r, 0),
        policy=jax.lax.dynamic_update_index_in_dim(buffer.policy, policy, r, 0),
        player=jax.lax.dynamic_update_index_in_dim(buffer.player, player.astype(jnp.int8), r, 0),
        settled=jax.lax.dynamic_update_index_in_dim(
            buffer.settled, jnp.full(done.shape, -1, jnp.int32), r, 0
        ),
        row_step=row_step,
    )
    if buffer.surprise is not None:
        if surprise is None:
            raise ValueError("this buffer keeps policy surprises: add_step needs `surprise`")
        buffer = buffer.replace(
            surprise=jax.lax.dynamic_update_index_in_dim(
                buffer.surprise, surprise.astype(jnp.float32), r, 0
            )
        )
    if buffer.last is not None:
        buffer = buffer.replace(last=jax.lax.dynamic_update_index_in_dim(buffer.last, done, r, 0))
    # Entries of the games that ended with this move: column b, written since its game began.
    in_game = (row_step[:, None] >= buffer.episode_start[None, :]) & (row_step[:, None] >= 0)
    if bootstrapped:
        # plies from each entry to the new position: 0 for the new entry itself
        age = (buffer.step - row_step)[:, None].astype(jnp.float32)  # [R, 1]
        same = buffer.player == player.astype(jnp.int8)[None, :]  # [R, B]
        q = jnp.where(same, root_value[None, :], -root_value[None, :]).astype(jnp.float32)
        term = (1.0 - value_lambda) * value_lambda ** jnp.maximum(age - 1.0, 0.0) * q
        buffer = buffer.replace(
            value=jnp.where(in_game & (age > 0), buffer.value + term, buffer.value)
        )
    settle = done[None, :] & in_game  # [R, B]
    outcome = jnp.where(buffer.player == 0, returns[None, :, 0], returns[None, :, 1])
    if mixed:
        outcome = (1.0 - value_mix) * outcome + value_mix * buffer.value
    if bootstrapped:
        outcome = buffer.value + value_lambda**age * outcome
    if buffer.ownership is not None:
        if ownership is None:
            raise ValueError("this buffer keeps ownership targets: add_step needs `ownership`")
        final = ownership.astype(jnp.int8)  # [B, 2, H*W]
        held = jnp.where((buffer.player == 0)[..., None], final[None, :, 0], final[None, :, 1])
        buffer = buffer.replace(ownership=jnp.where(settle[..., None], held, buffer.ownership))
    return buffer.replace(
        value=jnp.where(settle, outcome, buffer.value),
        settled=jnp.where(settle, buffer.step, buffer.settled),
        episode_start=jnp.where(done, buffer.step + 1, buffer.episode_start),
        step=buffer.step + 1,
    )


def _check_mix(value_mix: float, root_value) -> bool:
    """Whether the targets mix in root values; `value_mix` must be in [0, 1] and, above 0, come
    with them."""
    if not 0.0 <= value_mix <= 1.0:
        raise ValueError(f"value_mix must be in [0, 1], got {value_mix!r}")
    if value_mix > 0 and root_value is None:
        raise ValueError("value_mix > 0 needs the positions' root values (root_value)")
    return value_mix > 0


def _check_lambda(value_lambda: float, value_mix: float, root_value) -> bool:
    """Whether the targets are TD(lambda) returns; `value_lambda` must be in [0, 1] and, below 1,
    come with root values and without `value_mix` (two uses of the same values)."""
    if not 0.0 <= value_lambda <= 1.0:
        raise ValueError(f"value_lambda must be in [0, 1], got {value_lambda!r}")
    if value_lambda < 1 and value_mix > 0:
        raise ValueError("value_lambda < 1 and value_mix > 0 both use the root values: set one")
    if value_lambda < 1 and root_value is None:
        raise ValueError("value_lambda < 1 needs the positions' root values (root_value)")
    return value_lambda < 1


def add(
    buffer: Buffer, traj: Trajectory, *, value_mix: float = 0.0, value_lambda: float = 1.0
) -> Buffer:
    """Write a whole self-play chunk, move by move; value targets mixed with the trajectory's
    root values by `value_mix`, or TD(lambda) returns over them with `value_lambda` < 1 (module
    doc)."""
    mixed = _check_mix(value_mix, traj.root_value)
    bootstrapped = _check_lambda(value_lambda, value_mix, traj.root_value)
    t, b = traj.done.shape
    chex.assert_shape(traj.obs, (t, b, *buffer.obs.shape[2:]))
    chex.assert_shape(traj.policy, (t, b, buffer.policy.shape[-1]))
    chex.assert_shape([traj.player, traj.done], (t, b))
    chex.assert_shape(traj.returns, (t, b, 2))

    def body(buf, x):
        return add_step(buf, *x, value_mix=value_mix, value_lambda=value_lambda), None

    if buffer.ownership is not None:
        if traj.ownership is None:
            raise ValueError("this buffer keeps ownership targets: the trajectory has none")
        chex.assert_shape(traj.ownership, (t, b, 2, buffer.ownership.shape[-1]))
    if mixed or bootstrapped:
        chex.assert_shape(traj.root_value, (t, b))
    if buffer.surprise is not None:
        if traj.surprise is None:
            raise ValueError("this buffer keeps policy surprises: the trajectory has none")
        chex.assert_shape(traj.surprise, (t, b))
    root_value = traj.root_value.astype(jnp.float32) if mixed or bootstrapped else None
    ownership = traj.ownership if buffer.ownership is not None else None
    surprise = traj.surprise if buffer.surprise is not None else None
    xs = (
        traj.obs,
        traj.policy,
        traj.player,
        traj.done,
        traj.returns,
        root_value,
        ownership,
        surprise,
    )
    buffer, _ = jax.lax.scan(body, buffer, xs)
    return buffer


def settled_between(buffer: Buffer, start, stop) -> jax.Array:
    """bool[R, B]: the positions whose outcome became known at a global step in [start, stop):
    with start and stop a chunk's first step and the next chunk's, the positions of the games
    that ended in that chunk, wherever their first moves were written."""
    return (buffer.settled >= jnp.maximum(start, 0)) & (buffer.settled < stop)


def restart_games(buffer: Buffer) -> Buffer:
    """`buffer` for games that start afresh at its next step (a resumed run's: the games in
    flight at its checkpoint are not saved). Their stored positions stay unsettled, never
    sampled, until overwritten; settled positions are kept as they were."""
    return buffer.replace(episode_start=jnp.full_like(buffer.episode_start, buffer.step))


def num_ready(buffer: Buffer) -> jax.Array:
    return jnp.sum(buffer.ready, dtype=jnp.int32)


def sample(
    buffer: Buffer,
    key,
    batch_size: int,
    axis_name: str | None = None,
    *,
    surprise_fraction: float = 0.0,
    opponent_frames=None,
    among: jax.Array | None = None,
) -> Batch:
    """`batch_size` positions drawn (with replacement) among those with a known outcome (or
    among those of `among`, bool[R, B], a subset of them, such as the positions the last `add`
    settled): uniformly, or with `surprise_fraction` = f > 0 (a buffer with surprises) a share
    f of the weight in proportion to each position's policy surprise (module doc). With
    `opponent_frames` (the game's `Game.opponent_frames`, int32[2, A]; a buffer made with
    `opponent=True`) the batch has each position's opponent policy target (module doc).

    Positions are numbered column by column (slot b's rows together), each ready one holding
    one ticket (or its weight's count of them under surprise weighting), the tickets counted in
    that order, and `batch_size` tickets drawn uniformly. The buffer must hold at least one ready
    position; callers check `num_ready` first.

    With `axis_name` this runs inside `shard_map` on one device's block of columns: the devices
    exchange their counts of tickets (and, under surprise weighting, their sums of surprise),
    all draw the same global tickets, each gathers the ones it holds, and a reduce-scatter leaves
    `batch_size / devices` positions on each device. Blocks of columns are contiguous in the
    column-by-column numbering, so the positions drawn are the ones a single device holding the
    whole buffer would draw.
    """
    if not 0.0 <= surprise_fraction <= 1.0:
        raise ValueError(f"surprise_fraction must be in [0, 1], got {surprise_fraction!r}")
    if surprise_fraction > 0 and buffer.surprise is None:
        raise ValueError("surprise_fraction > 0 needs a buffer made with surprise=True")
    if opponent_frames is not None and buffer.last is None:
        raise ValueError("opponent_frames needs a buffer made with opponent=True")
    rows = buffer.ready.shape[0]
    tickets = (buffer.ready if among is None else among & buffer.ready).astype(jnp.int32)
    if surprise_fraction > 0:
        tickets = tickets * _surprise_tickets(buffer, surprise_fraction, axis_name)
    cdf = jnp.cumsum(tickets.T.reshape(-1), dtype=jnp.int32)  # column-major over [R, B]
    held = cdf[-1]
    if axis_name is None:
        offset, total = jnp.int32(0), held
    else:
        counts = jax.lax.all_gather(held, axis_name)  # [devices]
        me = jax.lax.axis_index(axis_name)
        offset = jnp.sum(jnp.where(jnp.arange(counts.shape[0]) < me, counts, 0))
        total = jnp.sum(counts)
    u = jax.random.randint(key, (batch_size,), 0, jnp.maximum(total, 1)) - offset
    mine = (u >= 0) & (u < held)
    idx = jnp.clip(jnp.searchsorted(cdf, u, side="right"), 0, cdf.shape[0] - 1)
    row, col = idx % rows, idx // rows

    def take_picked(picked):  # [N, ...], gathered at (row, col): the ones this device holds
        picked = jnp.where(mine.reshape(mine.shape + (1,) * (picked.ndim - 1)), picked, 0)
        if axis_name is not None:  # each position is held by one device: the sum is a gather
            picked = jax.lax.psum_scatter(picked, axis_name, scatter_dimension=0, tiled=True)
        return picked

    def take(x):
        return take_picked(x[row, col])

    opponent_policy = None
    if opponent_frames is not None:
        # A ready position's game has ended, so unless the position was its last, the next row
        # holds the game's next position: written one step later, and not yet overwritten.
        nxt = (row + 1) % rows
        mover = buffer.player[row, col].astype(jnp.int32)
        follows = ~buffer.last[row, col] & (buffer.player[nxt, col].astype(jnp.int32) != mover)
        frames = jnp.asarray(opponent_frames, jnp.int32)[mover]  # [N, A]
        reply = jnp.take_along_axis(buffer.policy[nxt, col], frames, axis=1)
        opponent_policy = take_picked(jnp.where(follows[:, None], reply, 0.0))

    return Batch(
        obs=take(buffer.obs).astype(jnp.float32),
        policy=take(buffer.policy),
        value=take(buffer.value),
        ownership=None if buffer.ownership is None else take(buffer.ownership).astype(jnp.float32),
        opponent_policy=opponent_policy,
    )


def mean_surprise(buffer: Buffer, axis_name: str | None = None) -> jax.Array:
    """float32[]: the mean policy surprise of the positions with a known outcome (of all
    devices' with `axis_name`); 0 when there are none. A buffer made with `surprise=True`."""
    surprise = jnp.where(buffer.ready, buffer.surprise, 0.0)  # a stale entry's counts nothing
    total, count = jnp.sum(surprise), num_ready(buffer)
    if axis_name is not None:
        total, count = jax.lax.psum((total, count), axis_name)
    return total / jnp.maximum(count, 1).astype(jnp.float32)


def _surprise_tickets(buffer: Buffer, fraction: float, axis_name: str | None) -> jax.Array:
    """int32[R, B]: each position's tickets under surprise weighting, SURPRISE_TICKETS times
    (1 - f) + f * s / mean(s) rounded, the mean over the ready positions of all devices (every
    position one weight's tickets where no ready position has any surprise)."""
    surprise = jnp.where(buffer.ready, buffer.surprise, 0.0)  # a stale entry's weighs nothing
    mean = mean_surprise(buffer, axis_name)
    ratio = jnp.where(mean > 0, surprise / jnp.where(mean > 0, mean, 1.0), 1.0)
    weight = (1.0 - fraction) + fraction * ratio
    return jnp.round(SURPRISE_TICKETS * weight).astype(jnp.int32)
