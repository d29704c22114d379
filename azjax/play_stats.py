"""What a self-play chunk played, counted on the device: games finished, positions ready in the
replay buffer, the variety of the openings (distinct positions at VARIETY_PLIES, by a hash of
their observations), the first player's wins, draws and losses, the games resigned and how often
a resignation would have been wrong, the replay's mean policy surprise, and the learner's losses
on positions it has never drawn (`HeldOut`). Self-play
returns a `PlaySummary` per game, split over the devices as the games are; `play_stats` reduces
it to the iteration's `PlayStats` (azjax/loop.py logs them as selfplay/..., heldout/...).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from azjax import replay

VARIETY_PLIES = (2, 4)  # self-play variety is logged at these plies


class PlayStats(NamedTuple):
    games: jax.Array  # int32[], games finished in the chunk
    ready: jax.Array  # int32[], positions in the buffer with a known outcome
    distinct: jax.Array  # int32[len(VARIETY_PLIES)], distinct positions at each ply in the chunk
    reached: jax.Array  # int32[len(VARIETY_PLIES)], positions at each ply in the chunk
    # float32[]: the mean policy surprise of the replay's positions with a known outcome, in a
    # run with policy surprise weighting (`replay.mean_surprise`); None in one without
    surprise: jax.Array | None = None
    # int32[3]: the games finished in the chunk won by the player who moved first (player 0),
    # drawn, and won by the second; None where self-play does not count them (ExIt)
    outcomes: jax.Array | None = None
    # the learner's losses on positions it has never drawn; None where not measured
    heldout: HeldOut | None = None
    # int32[]: the games finished in the chunk that ended by a resignation (`azjax.selfplay`);
    # None where self-play does not count them (ExIt)
    resigned: jax.Array | None = None
    # int32[]: in the played-out games the chunk finished, the players whose root value fell
    # below the resignation threshold, and those of them that did not lose
    # (`azjax.selfplay.check_resignations`); None as `resigned`
    resign_checked: jax.Array | None = None
    resign_wrong: jax.Array | None = None
    # {game: its own PlayStats} in a shared run (`azjax.shared`), whose other fields combine the
    # games'; the loop logs each as selfplay/<game>/..., replay/<game>/..., heldout/<game>/...;
    # None in a single-game run
    by_game: dict[str, PlayStats] | None = None


class HeldOut(NamedTuple):
    """The learner's network, as the iteration's training is about to start, judged in inference
    mode (`azjax.training.inference_losses`) on a sample of the positions the chunk settled
    (their games ended in it, so the learner could never draw them: held out) and on a sample of
    those it could draw before (seen): the same network, the same loss, unseen against seen
    positions. A held-out loss well above the seen one is a network fitting its replay window
    rather than the game, or play that has moved on from the games it learnt from (KataGo logs
    a validation loss for the same reason). A sample's losses where there are no such positions
    mean nothing: `positions` and `seen_positions` say how many there were.

    The positions the chunk before settled (`prev_...`, among the seen ones) help tell the two
    apart: the learner has had them for one iteration's training, in which it draws a position
    `train_steps * train_batch_size / positions in the window` times on average (7,680 / 35,000,
    about 0.2, on 6x6 Hex's CPU recipe), so most were never drawn. A gap they have closed is the
    network catching up with new play; one they keep is the network fitting what it drew."""

    positions: jax.Array  # int32[], positions the chunk settled
    seen_positions: jax.Array  # int32[], positions with a known outcome before the chunk
    value: jax.Array  # float32[], the value term on a sample of the settled positions
    policy: jax.Array  # float32[], the policy term on the same sample
    seen_value: jax.Array  # float32[], the value term on a sample of the seen positions
    seen_policy: jax.Array  # float32[], the policy term on that sample
    prev_positions: jax.Array  # int32[], positions the chunk before settled
    prev_value: jax.Array  # float32[], the value term on a sample of those
    prev_policy: jax.Array  # float32[], the policy term on the same sample
    # int32[], the positions of each sample with a policy target (a fast search's have none: a
    # sample of only those has a policy term of 0 that means nothing)
    policy_rows: jax.Array | None = None
    seen_policy_rows: jax.Array | None = None
    prev_policy_rows: jax.Array | None = None


def observation_hashes(obs: jax.Array, batch_dims: int = 1) -> jax.Array:
    """uint32[*batch]: a 32-bit hash of each observation's 0/1 planes (obs[*batch, ...])."""
    bits = obs.reshape(obs.shape[:batch_dims] + (-1,)).astype(jnp.uint32)
    weights = jax.random.bits(jax.random.PRNGKey(0), bits.shape[-1:], jnp.uint32) | 1
    return jnp.sum(bits * weights, axis=-1, dtype=jnp.uint32)


def count_distinct_hashes(hashes: jax.Array, mask: jax.Array) -> jax.Array:
    """int32[]: distinct values among hashes[N] where mask[N]: with `observation_hashes`, the
    distinct positions (a collision among n positions has probability about n^2 / 2^33)."""
    hashes = jnp.sort(jnp.where(mask, hashes, jnp.uint32(0xFFFFFFFF)))
    masked_out = jnp.sort(~mask)  # the masked-out entries last, as in the sorted hashes
    new = jnp.concatenate([jnp.ones(1, bool), hashes[1:] != hashes[:-1]])
    return jnp.sum(new & ~masked_out, dtype=jnp.int32)


class PlaySummary(NamedTuple):
    """What `PlayStats` is counted from, per game: split along B as the games are, so that the
    self-play program ends without a collective (`azjax.parallel`'s module doc)."""

    finished: jax.Array  # int32[B], games this column finished in the chunk
    ply: jax.Array  # int32[T, B], the ply of each position played
    hashes: jax.Array  # uint32[T, B], `observation_hashes` of each position played
    outcomes: jax.Array  # int32[3, B]: finished games won by the first player, drawn, lost
    resigned: jax.Array  # int32[B], finished games that ended by a resignation
    resign_checked: jax.Array  # int32[B], `check_resignations`'s counts (0 without resigning)
    resign_wrong: jax.Array  # int32[B]


def summarise(traj, checked: jax.Array | None = None, wrong: jax.Array | None = None):
    """The chunk `traj`'s `PlaySummary`, with `azjax.selfplay.check_resignations`'s counts
    (int32[B]) where self-play resigns."""
    first = traj.returns[..., 0]  # [T, B], player 0's final return where done
    ended = [traj.done & (first > 0), traj.done & (first == 0), traj.done & (first < 0)]
    resigned = jnp.zeros_like(traj.done) if traj.resigned is None else traj.resigned
    none = jnp.zeros(traj.done.shape[1], jnp.int32)
    return PlaySummary(
        jnp.sum(traj.done, axis=0, dtype=jnp.int32),
        traj.ply,
        observation_hashes(traj.obs, 2),
        jnp.stack([jnp.sum(e, axis=0, dtype=jnp.int32) for e in ended]),
        jnp.sum(resigned, axis=0, dtype=jnp.int32),
        none if checked is None else checked,
        none if wrong is None else wrong,
    )


def variety(ply: jax.Array, hashes: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(distinct, reached) int32[len(VARIETY_PLIES)]: the distinct positions among those played
    at each of VARIETY_PLIES, and how many were played there (ply, hashes: any one shape)."""
    ply, hashes = ply.reshape(-1), hashes.reshape(-1)
    distinct = jnp.stack([count_distinct_hashes(hashes, ply == k) for k in VARIETY_PLIES])
    reached = jnp.stack([jnp.sum(ply == k, dtype=jnp.int32) for k in VARIETY_PLIES])
    return distinct, reached


def play_stats(
    summary: PlaySummary, buffer: replay.Buffer, heldout: HeldOut | None = None
) -> PlayStats:
    return PlayStats(
        jnp.sum(summary.finished, dtype=jnp.int32),
        replay.num_ready(buffer),
        *variety(summary.ply, summary.hashes),
        surprise=None if buffer.surprise is None else replay.mean_surprise(buffer),
        outcomes=jnp.sum(summary.outcomes, axis=1, dtype=jnp.int32),
        heldout=heldout,
        resigned=jnp.sum(summary.resigned, dtype=jnp.int32),
        resign_checked=jnp.sum(summary.resign_checked, dtype=jnp.int32),
        resign_wrong=jnp.sum(summary.resign_wrong, dtype=jnp.int32),
    )
