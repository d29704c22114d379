"""Early stopping (seed 002's apprentice training): the stopping rule on known validation losses,
the state kept, the split of the dataset's game slots, and the samplers that keep to it."""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from azjax import early_stopping as es
from azjax import exit as ex
from azjax import replay
from azjax.loop import make_sampler


class Toy(NamedTuple):
    total: jax.Array


def scripted(losses):
    """(epoch, validate, copy) over a state that is the epoch's number: validate reads the
    script's loss for it, epoch's training losses are Toy(epoch), copy tags the copy."""

    def epoch(state, e):
        assert e == state + 1  # epochs are numbered from 1, each after the one before
        return e, Toy(jnp.float32(e))

    return epoch, lambda state: losses[state], lambda state: state


@pytest.mark.parametrize(
    "losses, patience, max_epochs, epochs, best",
    [
        ([5, 4, 3, 2, 1, 0], 3, 5, 5, 5),  # never rises: max_epochs ends it, the last kept
        ([5, 4, 3, 3.5, 3.6, 3.7, 1], 3, 9, 5, 2),  # three rises after epoch 2: stops at 5
        ([5, 4, 3, 3.5, 2.9, 3, 3.1, 3.2, 0], 3, 9, 7, 4),  # a fall resets the count
        ([5, 4, 4, 4.1, 4.2], 2, 9, 4, 1),  # equal is not a rise: 4 -> 4 -> 4.1 -> 4.2
        ([1, 2, 3, 4], 1, 9, 1, 0),  # only worse than the start: the start is kept
    ],
)
def test_the_stopping_rule_and_the_state_kept(losses, patience, max_epochs, epochs, best):
    state, report = es.train(*scripted(losses), 0, patience=patience, max_epochs=max_epochs)
    assert (report.epochs, report.best_epoch, state) == (epochs, best, best)
    assert report.validation == losses[best]
    assert report.history == tuple(float(x) for x in losses[: epochs + 1])
    assert float(report.losses.total) == pytest.approx(sum(range(1, epochs + 1)) / epochs)


def test_a_non_finite_validation_loss_stops_and_is_reported():
    state, report = es.train(*scripted([3, 2, math.nan, 1]), 0, patience=3, max_epochs=10)
    assert (report.epochs, report.best_epoch, state) == (2, 1, 1)
    assert math.isnan(report.validation)  # what the loop's health check stops the run on
    assert math.isnan(report.metrics()["loss/validation"])


def test_rises_and_bad_arguments():
    assert [es.rises(h) for h in ([], [1], [1, 2, 3, 4], [1, 2, 1, 2, 3], [3, 2], [1, 1])] == [
        0,
        0,
        3,
        2,
        0,
        0,
    ]
    with pytest.raises(ValueError, match="patience and max_epochs must be >= 1"):
        es.train(*scripted([1, 2]), 0, patience=0, max_epochs=3)


@pytest.mark.parametrize(
    "b, fraction, held", [(2, 0.1, 1), (16, 0.1, 2), (64, 0.1, 6), (4, 0.5, 2)]
)
def test_validation_columns(b, fraction, held):
    mask = ex.validation_columns(b, fraction)
    assert mask.shape == (b,) and mask.dtype == bool
    assert mask.sum() == held  # round(f B), at least one, at most B - 1
    if held > 1:  # spread out: over the halves of the slots (two devices' blocks) alike
        assert abs(int(mask[: b // 2].sum()) - int(mask[b // 2 :].sum())) <= 1
    with pytest.raises(ValueError, match="needs batch_games >= 2"):
        ex.validation_columns(1, 0.5)


def test_the_samplers_draw_from_their_own_columns_alone():
    """Training and validation draw from disjoint game slots, every ready position of their own
    slots reachable (split over devices: tests/test_parallel.py)."""
    rows, b = 3, 8
    buffer = replay.init(rows, b, (1, 1, 1), 2)
    slot = jnp.broadcast_to(jnp.arange(b, dtype=jnp.float32), (rows, b))  # value: the slot
    buffer = buffer.replace(value=slot, settled=jnp.zeros((rows, b), jnp.int32))
    held = ex.validation_columns(b, 0.25)  # 2 of 8
    for cols in (~held, held):
        draw = jax.jit(make_sampler(64, columns=cols))
        values = np.asarray(draw(buffer, jax.random.key(0)).value)
        assert set(values.astype(int)) == set(np.flatnonzero(cols))
