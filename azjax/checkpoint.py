"""Checkpoints: an orbax CheckpointManager, one pytree per save, the config as JSON beside it.

    <workdir>/checkpoints/<iteration>/state   the pytree (network, optimizer, iteration, key)
    <workdir>/checkpoints/<iteration>/config  the run's Config as JSON

No pickle. A checkpoint whose structure does not match the network the config describes, or that
cannot be read, raises a `CheckpointError` that says which and where.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from azjax.config import Config


class CheckpointError(ValueError):
    pass


def _manager(workdir: str, keep: int = 0, create: bool = True) -> ocp.CheckpointManager:
    directory = os.path.join(os.path.abspath(workdir), "checkpoints")
    options = ocp.CheckpointManagerOptions(max_to_keep=keep or None, create=create)
    return ocp.CheckpointManager(directory, options=options, item_names=("state", "config"))


class Checkpointer:
    """Saves and restores the run state of one workdir."""

    def __init__(self, workdir: str, keep: int = 0):
        self.workdir = workdir
        self.manager = _manager(workdir, keep)

    def save(self, iteration: int, state: Any, config: Config) -> None:
        self.manager.save(
            iteration,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state),
                config=ocp.args.JsonSave(json.loads(config.to_json())),
            ),
        )

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def steps(self) -> list[int]:
        return list(self.manager.all_steps())

    def latest(self) -> int | None:
        return self.manager.latest_step()

    def restore(self, template: Any, step: int | None = None) -> tuple[Any, int]:
        """(state, step): the checkpoint `step` (default: the latest) restored like `template`."""
        step = self.latest() if step is None else step
        if step is None:
            raise CheckpointError(f"no checkpoint in {self.manager.directory}")
        if step not in self.steps():
            raise CheckpointError(
                f"no checkpoint {step} in {self.manager.directory}; have {self.steps()}"
            )
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, template)
        try:
            restored = self.manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))
            )
        except Exception as e:  # orbax raises many types for bad or mismatched data
            raise CheckpointError(
                f"checkpoint {step} in {self.manager.directory} does not match this run's "
                f"network and optimizer (or is corrupt): {type(e).__name__}: {str(e)[:300]}"
            ) from e
        return restored["state"], step

    def close(self) -> None:
        self.manager.close()


def read_config(workdir: str, step: int | None = None) -> Config:
    """The Config saved with a checkpoint of `workdir` (default: the latest)."""
    if not os.path.isdir(os.path.join(workdir, "checkpoints")):
        raise CheckpointError(f"{workdir!r} holds no checkpoints (no checkpoints/ folder)")
    manager = _manager(workdir, create=False)
    step = manager.latest_step() if step is None else step
    if step is None or step not in manager.all_steps():
        raise CheckpointError(f"no checkpoint {step if step is not None else ''} in {workdir!r}; "
                              f"have {list(manager.all_steps())}")
    try:
        data = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))
    except Exception as e:
        raise CheckpointError(f"cannot read the config of checkpoint {step} in {workdir!r}: {e}")
    return Config.from_json(json.dumps(data["config"]))
