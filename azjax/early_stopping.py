"""Early stopping (seed 002's apprentice, Anthony et al. 2017, "Training details"): train in
epochs over a training set, measure the loss on a held-out validation set after each, stop at
"the first epoch after which the validation errors increase 3 times consecutively", and keep
the network of the epoch where that loss was lowest.

    state, report = train(epoch, validate, copy, state, patience=3, max_epochs=100)

`epoch(state, e)` trains epoch e (1, 2, ...) and returns (state, its mean training losses),
`validate(state)` the validation loss (a host float), `copy(state)` a copy that later epochs
do not overwrite (the learner donates its state). The state it starts from is epoch 0: it is
measured first, and kept where no epoch does better (a continued apprentice that training only
makes worse). A non-finite validation loss ends the training at once and is reported as the
`Report`'s `validation` (the loop's health check then stops the run, naming it).

Expert Iteration's split of its dataset into the two sets and its epochs are azjax/exit.py's
(`validation_columns`, `--early_stopping`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class Report(NamedTuple):
    """How an early-stopped training went."""

    losses: Any  # the mean training losses over the epochs trained (the learner's Losses)
    validation: float  # the validation loss of the state kept (non-finite: where it stopped)
    epochs: int  # epochs trained
    best_epoch: int  # the epoch kept; 0: the state the training started from
    history: tuple[float, ...]  # the validation loss of epochs 0 (the start), 1, ..., `epochs`

    def metrics(self) -> dict[str, float]:
        """The loop's loss/... of the training, loss/validation and train/epochs,
        train/best_epoch."""
        out = {f"loss/{k}": float(v) for k, v in self.losses._asdict().items()}
        out["loss/validation"] = float(self.validation)
        out["train/epochs"] = int(self.epochs)
        out["train/best_epoch"] = int(self.best_epoch)
        return out


def rises(history: Sequence[float]) -> int:
    """How many times in a row the loss rose at the end of `history` (0 where its last value is
    no higher than the one before)."""
    count = 0
    for before, after in zip(history[-2::-1], history[::-1]):
        if not after > before:
            break
        count += 1
    return count


def train(
    epoch: Callable[[Any, int], tuple[Any, Any]],
    validate: Callable[[Any], float],
    copy: Callable[[Any], Any],
    state: Any,
    *,
    patience: int,
    max_epochs: int,
) -> tuple[Any, Report]:
    """(the state of the epoch with the lowest validation loss, the `Report`) after epochs until
    the loss rose `patience` times in a row, a non-finite loss, or `max_epochs` (module doc)."""
    if patience < 1 or max_epochs < 1:
        raise ValueError(f"patience and max_epochs must be >= 1, got {patience}, {max_epochs}")
    history = [float(validate(state))]
    best, best_epoch = copy(state), 0
    total, trained = None, 0
    while trained < max_epochs:
        state, losses = epoch(state, trained + 1)
        trained += 1
        total = losses if total is None else jax.tree_util.tree_map(jnp.add, total, losses)
        loss = float(validate(state))
        history.append(loss)
        if not math.isfinite(loss):
            break
        if loss < history[best_epoch]:
            best, best_epoch = copy(state), trained
        if rises(history) >= patience:
            break
    validation = history[-1] if not math.isfinite(history[-1]) else history[best_epoch]
    mean = jax.tree_util.tree_map(lambda x: x / trained, total)
    return best, Report(mean, validation, trained, best_epoch, tuple(history))
