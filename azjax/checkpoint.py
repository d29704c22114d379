"""A run on disk: its state, where it lives, how it is saved, listed, resumed and loaded.

    <workdir>/config.json                     the run's Config (written at start)
    <workdir>/checkpoints/<iteration>/state   the RunState pytree (network, optimizer, step, key)
    <workdir>/checkpoints/<iteration>/config  the run's Config as JSON

An orbax CheckpointManager, one pytree per save, no pickle. Training (`azjax.loop`), evaluation,
the experiments and the notebooks all load runs through this module:

    config, variables, step = load_checkpoint("runs/hex6")          # the latest checkpoint
    path, step = parse_location("runs/hex6@40")                     # PATH[@STEP|@latest]

A checkpoint whose structure does not match the network the config describes, or that cannot be
read, raises a `CheckpointError` (a ValueError) that says which and where.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from flax import struct

from azjax.config import Config
from azjax.network import init_variables, make_network
from azjax.training import TrainState, init_train_state, make_optimizer

# Fields that must agree between a run and the checkpoint it resumes.
STRUCTURAL = ("game", "game_options", "num_blocks", "num_filters", "value_hidden", "optimizer")


class CheckpointError(ValueError):
    pass


@struct.dataclass
class RunState:
    """Everything a checkpoint holds besides the config."""

    train: TrainState
    iteration: jax.Array  # int32[], iterations completed
    key: jax.Array  # the run's base PRNG key; iteration keys are folded from it


# ---- the state of a new run ----------------------------------------------------------------------
def run_keys(config: Config) -> tuple[jax.Array, jax.Array]:
    """(init_key, run_key): the network's initialisation key and the run's base key."""
    init_key, run_key = jax.random.split(jax.random.PRNGKey(config.seed))
    return init_key, run_key


def init_run(config: Config) -> RunState:
    """The state a run of `config` starts from (pure: jit it, or trace it with eval_shape)."""
    game = config.make_game()
    optimizer = make_optimizer(config, config.iterations * config.train_steps)
    init_key, run_key = run_keys(config)
    variables = init_variables(make_network(config, game), game, init_key)
    return RunState(train=init_train_state(variables, optimizer), iteration=jnp.int32(0),
                    key=run_key)


def initial_variables(config: Config):
    """The untrained network a run of `config` starts from."""
    return jax.jit(lambda: init_run(config).train.variables)()


def run_template(config: Config) -> RunState:
    """The shapes and dtypes (on the default device) of the RunState a run of `config` saves;
    `jax.eval_shape` traces it without initialising anything (seconds saved)."""
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    return jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=device),
                                  jax.eval_shape(lambda: init_run(config)))


# ---- saving and restoring ------------------------------------------------------------------------
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


def check_resumable(saved: Config, config: Config) -> None:
    """CheckpointError unless `config` may continue a run saved with `saved`."""
    diffs = [f for f in STRUCTURAL if getattr(saved, f) != getattr(config, f)]
    if diffs:
        detail = ", ".join(f"{f}: saved {getattr(saved, f)!r} vs now {getattr(config, f)!r}"
                           for f in diffs)
        raise CheckpointError(
            f"cannot resume: the checkpoint was made with other settings ({detail})")


# ---- runs named on the command line --------------------------------------------------------------
def parse_location(text: str) -> tuple[str, int | None]:
    """'PATH[@STEP|@latest]' (or PATH/checkpoints/STEP) -> (run folder, step or None: latest)."""
    path, at, step_text = text.rpartition("@") if "@" in text else (text, "", "")
    path = path.strip()
    if not path:
        raise ValueError("give a run folder: PATH[@STEP|@latest]")
    step = None
    if at and step_text != "latest":
        if not step_text.isdigit():
            raise ValueError(f"{text!r}: the step after @ must be a number or 'latest', "
                             f"got {step_text!r}")
        step = int(step_text)
    head, tail = os.path.split(os.path.normpath(path))
    if tail.isdigit() and os.path.basename(head) == "checkpoints":
        if step is not None and step != int(tail):
            raise ValueError(f"{path!r} is checkpoint {tail}, not @{step}")
        path, step = os.path.dirname(head), int(tail)
    return path, step


def check_run_folder(path: str) -> None:
    if not os.path.isdir(path):
        raise CheckpointError(f"no run folder {path!r}")


def steps(workdir: str) -> list[int]:
    """The checkpoint steps of a run folder, ascending."""
    check_run_folder(workdir)
    checkpointer = Checkpointer(workdir)
    try:
        return sorted(checkpointer.steps())
    finally:
        checkpointer.close()


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
        raise CheckpointError(
            f"cannot read the config of checkpoint {step} in {workdir!r}: {e}") from None
    return Config.from_json(json.dumps(data["config"]))


def load_checkpoint(path: str, step: int | None = None) -> tuple[Config, Any, int]:
    """(config, network variables, step) of checkpoint `step` (None: the latest) of run `path`."""
    check_run_folder(path)
    config = read_config(path, step)
    checkpointer = Checkpointer(path)
    try:
        run, step = checkpointer.restore(run_template(config), step)
    finally:
        checkpointer.close()
    return config, run.train.variables, step
