"""A run on disk: its state, where it lives, how it is saved, listed, resumed and loaded.

    <workdir>/config.json                     the run's Config (written at start)
    <workdir>/checkpoints/<iteration>/state   the RunState pytree (network, optimizer, step,
                                              key; with --gating the best network)
    <workdir>/checkpoints/<iteration>/config  the run's Config as JSON
    <workdir>/checkpoints/<iteration>/metrics the metrics rows since the checkpoint before
    <workdir>/checkpoints/<iteration>/replay  the replay buffer (the newest checkpoint's only:
                                              `Checkpointer.save`), restored on --resume

An orbax CheckpointManager, one pytree per save, no pickle. Training (`azjax.loop`), evaluation,
the experiments and the notebooks all load runs through this module:

    config, variables, step = load_checkpoint("runs/hex6")          # the latest checkpoint
    path, step = parse_location("runs/hex6@40")                     # PATH[@STEP|@latest|@best]
    config, variables, step = load_checkpoint("pretrained/hex6")     # a shipped network

Where a run is named, a network exported by `azjax.pretrained.export` (a folder with
config.json, variables.msgpack and card.json: one step, no optimizer) is read as a run with one
checkpoint, and `pretrained/NAME` names the package's network NAME unless a local folder of that
name exists (`resolve_run`).

A checkpoint whose structure does not match the network the config describes, or that cannot be
read, raises a `CheckpointError` (a ValueError) that says which, where, and which older
checkpoint can be read instead. The workdir is held by one run at a time (`WorkdirLock`), and
`check_workdir` refuses a folder that cannot be written before any work starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import logging
import math
import os
import re
import shutil
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from flax import struct

from azjax import pretrained
from azjax.config import Config
from azjax.gating import init_gate
from azjax.metrics import FILE as METRICS_FILE
from azjax.metrics import read_rows
from azjax.network import init_variables, make_network
from azjax.training import TrainState, init_train_state, make_optimizer

# Fields that must agree between a run and the checkpoint it resumes.
STRUCTURAL = (
    "game",
    "game_options",
    "num_blocks",
    "num_filters",
    "value_hidden",
    "value_head",
    "global_pool",
    "policy_head_kernel",
    "optimizer",
    "freeze_trunk",
    "games",
    # the run's keys are drawn from it once and kept in the checkpoint, and its first network
    # (the in-loop evaluation's first "previous") is rebuilt from it: a resume with another seed
    # announced the change and ran on with the old keys
    "seed",
)
# Weights whose being above 0 gives the network a head of its own (`make_network`): a resume may
# change them, not turn them on or off.
HEAD_WEIGHTS = ("ownership_weight", "soft_policy_weight", "opponent_policy_weight")


class CheckpointError(ValueError):
    pass


# The checkpoint item that holds the replay buffer. Only the newest committed checkpoint keeps it
# (a buffer is tens to hundreds of MiB): `Checkpointer.wait` removes the older steps' once a newer
# one is on disk; their state, config and metrics stay readable.
REPLAY = "replay"


def describe_os_error(e: OSError, folder: str = "--workdir") -> str:
    """'PATH: reason' of an OSError, with a hint for the usual causes (`folder`: what to choose
    another of, the flag that names the folder written)."""
    where = f"{e.filename}: " if e.filename else ""
    reason = e.strerror or str(e)
    hint = {
        errno.ENOSPC: f" (the disk is full: free space, or choose another {folder})",
        errno.EDQUOT: f" (over the disk quota: free space, or choose another {folder})",
        errno.EROFS: f" (a read-only file system: choose another {folder})",
        errno.EACCES: f" (no permission: choose another {folder})",
        errno.EPERM: f" (no permission: choose another {folder})",
    }.get(e.errno, "")
    return f"{where}{reason}{hint}"


@struct.dataclass
class RunState:
    """Everything a checkpoint holds besides the config."""

    train: TrainState
    iteration: jax.Array  # int32[], iterations completed
    key: jax.Array  # the run's base PRNG key; iteration keys are folded from it
    # the best network and its counters with --gating (azjax/gating.py); None (no leaves, so
    # checkpoints of ungated runs keep their old structure) without
    gate: Any = None


# ---- the state of a new run ----------------------------------------------------------------------
def run_keys(config: Config) -> tuple[jax.Array, jax.Array]:
    """(init_key, run_key): the network's initialisation key and the run's base key."""
    init_key, run_key = jax.random.split(jax.random.PRNGKey(config.seed))
    return init_key, run_key


def init_run(config: Config) -> RunState:
    """The state a run of `config` starts from (pure: jit it, or trace it with eval_shape)."""
    if config.games:  # one network over several games
        from azjax import shared

        return shared.init_run(config)
    game = config.make_game()
    optimizer = make_optimizer(config)
    init_key, run_key = run_keys(config)
    variables = init_variables(make_network(config, game), game, init_key)
    return RunState(
        train=init_train_state(variables, optimizer),
        iteration=jnp.int32(0),
        key=run_key,
        gate=init_gate(variables) if config.gating else None,
    )


def initial_variables(config: Config):
    """The untrained network a run of `config` starts from."""
    return jax.jit(lambda: init_run(config).train.variables)()


def run_template(config: Config) -> RunState:
    """The shapes and dtypes (on the default device) of the RunState a run of `config` saves;
    `jax.eval_shape` traces it without initialising anything (seconds saved)."""
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    return jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=device),
        jax.eval_shape(lambda: init_run(config)),
    )


# ---- saving and restoring ------------------------------------------------------------------------
def _manager(workdir: str, create: bool = True) -> ocp.CheckpointManager:
    directory = os.path.join(os.path.abspath(workdir), "checkpoints")
    options = ocp.CheckpointManagerOptions(create=create)  # keeps all: Checkpointer prunes
    try:
        return ocp.CheckpointManager(
            directory, options=options, item_names=("state", "config", "metrics", REPLAY)
        )
    except ValueError as e:  # orbax reads each step's metrics/metrics (the rows) as it opens
        raise CheckpointError(_unreadable_rows(directory) or _first_line(e)) from None


def _unreadable_rows(directory: str) -> str:
    """What to do about the checkpoints whose saved metrics rows are not JSON ('' if none):
    orbax reads them as its own metrics when it opens the folder, and fails on all of it."""
    bad = []
    names = os.listdir(directory) if os.path.isdir(directory) else []
    for name in sorted(names, key=lambda n: (len(n), n)):
        path = os.path.join(directory, name, "metrics", "metrics")
        try:
            with open(path) as f:
                json.load(f)
        except (OSError, ValueError) as e:
            if not isinstance(e, FileNotFoundError) and name.isdigit():
                bad.append(path)
    if not bad:
        return ""
    return (
        f"the metrics rows saved with a checkpoint cannot be read ({', '.join(bad)}): remove "
        f"{'that file' if len(bad) == 1 else 'those files'} (metrics.jsonl holds the rows too; "
        "the networks are intact) and run again"
    )


class Checkpointer:
    """Saves and restores the run state of one workdir.

    Saves are asynchronous: `committed()` tells whether the last one is on disk. A save that
    fails (a full disk) raises a CheckpointError at the next `save`, `committed` or `wait`, and
    `close` then gives up on orbax's threads after `CLOSE_TIMEOUT` seconds instead of hanging.
    `keep` > 0: once a save is on disk, the checkpoints older than the newest `keep` are removed,
    except the steps `protect()` names (the run's `@best`, which --keep_checkpoints keeps however
    old).
    """

    CLOSE_TIMEOUT = 60.0

    def __init__(
        self, workdir: str, keep: int = 0, protect: Callable[[], Iterable[int]] | None = None
    ):
        self.workdir = workdir
        self.keep = keep
        self.protect = protect
        self.failed = False
        for attempt in range(3):  # a step removed while orbax lists them (a run still training)
            try:
                self.manager = _manager(workdir)
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise removed_error(workdir, None) from None
            except OSError as e:
                raise CheckpointError(
                    f"cannot open the checkpoints of {workdir!r}: {describe_os_error(e)}"
                ) from None
        self._saving: int | None = None  # the step of a save not known to be committed
        self.last_saved: int | None = None  # the step of the last save started without error
        self._on_disk: int | None = None  # the step of this session's last save committed

    def _failed(self, e: Exception) -> CheckpointError:
        self.failed = True
        self.last_saved = self._on_disk  # the failed save's rows stay out of metrics.jsonl
        # tensorstore's write errors (RESOURCE_EXHAUSTED for a full disk) carry the OS's code
        code = re.search(r"os_error_code='(\d+)'", str(e))
        if code and not isinstance(e, OSError):
            e = OSError(int(code.group(1)), os.strerror(int(code.group(1))))
        reason = describe_os_error(e) if isinstance(e, OSError) else _first_line(e)
        return CheckpointError(
            f"checkpoint {self._saving} could not be written in {self.manager.directory}: {reason}"
        )

    def save(
        self,
        iteration: int,
        state: Any,
        config: Config,
        rows: list[dict] | None = None,
        replay: Any = None,
    ) -> None:
        """Start saving checkpoint `iteration`; `rows` are the metrics rows metrics.jsonl does not
        hold yet, kept with it so that a resumed run has them whatever happened to the file;
        `replay` the replay buffer (a pytree of arrays; None: none saved). Orbax copies the
        arrays to the host before this returns (its synchronous device-to-host transfer), so
        the buffer may be donated and overwritten once it does. Once this save is on disk the
        older checkpoints' replay items are removed (`wait`)."""
        self.wait()
        self._saving = iteration
        items = dict(
            state=ocp.args.StandardSave(state),
            config=ocp.args.JsonSave(json.loads(config.to_json())),
            metrics=ocp.args.JsonSave({"rows": list(rows or [])}),
        )
        if replay is not None:
            items[REPLAY] = ocp.args.StandardSave(replay)
        try:
            self.manager.save(iteration, args=ocp.args.Composite(**items))
        except Exception as e:
            raise self._failed(e) from e
        self.last_saved = iteration  # not before: metrics.jsonl takes rows up to it once written

    def committed(self) -> bool:
        """Whether the last save is on disk (False while it is being written)."""
        if self._saving is None:
            return True
        if self.manager.is_saving_in_progress():
            return False
        self.wait()
        return True

    def wait(self) -> None:
        """Wait for the last save; a CheckpointError if it failed."""
        try:
            self.manager.wait_until_finished()
            self.manager.check_for_errors()
        except Exception as e:
            raise self._failed(e) from e
        on_disk = self._saving is not None and not self.failed  # orbax reports a failure once
        if on_disk:
            self._on_disk = self._saving
            self.drop_older_replays(self._saving)
        self._saving = None
        if on_disk:
            self._prune()

    def _prune(self) -> None:
        """Remove the checkpoints older than the newest `keep`, but those `protect` names.
        Process 0 decides; every process deletes the same steps (orbax's delete is collective)."""
        steps = self.steps()
        if not self.keep or len(steps) <= self.keep:
            return
        kept = set(steps[-self.keep :])
        if self.protect is not None and jax.process_index() == 0:
            kept |= set(self.protect())
        drop = np.array([step not in kept for step in steps])
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            drop = np.asarray(multihost_utils.broadcast_one_to_all(drop))
        for step, gone in zip(steps, drop):
            if gone:
                self.manager.delete(step)

    def replay_path(self, step: int) -> str:
        return os.path.join(str(self.manager.directory), str(step), REPLAY)

    def drop_older_replays(self, newest: int) -> None:
        """Remove the replay items of the checkpoints before `newest`, when `newest` holds one
        (only the newest checkpoint keeps its replay buffer; the rest of each stays). One
        process of a distributed run does it (the checkpoints are one shared folder)."""
        if jax.process_index() != 0 or not os.path.isdir(self.replay_path(newest)):
            return
        for step in steps_on_disk(os.path.dirname(str(self.manager.directory))):
            if step < newest and os.path.isdir(self.replay_path(step)):
                shutil.rmtree(self.replay_path(step), ignore_errors=True)

    def restore_replay(self, template: Any, step: int) -> tuple[Any, str]:
        """(buffer, '') of checkpoint `step`'s replay item restored like `template` (abstract
        arrays with their shardings: `jax.eval_shape` of the run's `init_buffer`), or (None,
        why not): a checkpoint made before replays were saved, one whose replay a newer
        checkpoint's replaced, or a buffer of other sizes (another --replay_games,
        --batch_games, game) or that cannot be read. Never raises for the replay's sake."""
        if not os.path.isdir(self.replay_path(step)):
            return None, (
                f"checkpoint {step} holds no replay buffer (saved before checkpoints kept one, "
                "or a later checkpoint's replaced it)"
            )
        try:
            saved = ocp.StandardCheckpointHandler().metadata(epath.Path(self.replay_path(step)))
            saved_shapes = _shapes(getattr(saved, "tree", saved))
            want_shapes = _shapes(template)
            if saved_shapes != want_shapes:
                differ = sorted(
                    k
                    for k in set(saved_shapes) | set(want_shapes)
                    if saved_shapes.get(k) != want_shapes.get(k)
                )
                detail = ", ".join(
                    f"{k}: saved {saved_shapes.get(k)} vs now {want_shapes.get(k)}"
                    for k in differ[:3]
                )
                return None, (
                    f"checkpoint {step}'s replay buffer has other sizes ({detail}; another "
                    "--replay_games, --batch_games or dataset)"
                )
            abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, template)
            with _quiet_closed_loops():
                restored = self.manager.restore(
                    step, args=ocp.args.Composite(**{REPLAY: ocp.args.StandardRestore(abstract)})
                )
            return restored[REPLAY], ""
        except Exception as e:  # orbax raises many types for bad or mismatched data
            return None, f"checkpoint {step}'s replay buffer cannot be read ({_first_line(e)})"

    def steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def latest(self) -> int | None:
        return self.manager.latest_step()

    def restore(self, template: Any, step: int | None = None) -> tuple[Any, int]:
        """(state, step): the checkpoint `step` (default: the latest) restored like `template`.

        A checkpoint that cannot be restored raises a CheckpointError that names the newest older
        checkpoint that can (`--resume_step`)."""
        step = self.latest() if step is None else step
        if step is None:
            raise CheckpointError(f"no checkpoint in {self.manager.directory}")
        if step not in self.steps():
            raise CheckpointError(
                f"no checkpoint {step} in {self.manager.directory}; have {self.steps()}"
                f"{missing_step_hint(self.workdir, step)}"
            )
        try:
            return self._restore(template, step), step
        except Exception as e:  # orbax raises many types for bad or mismatched data
            reason = _first_line(e)
        if removed(self.workdir, step):  # not corrupt: gone
            raise removed_error(self.workdir, step)
        older = self._readable(template, below=step)
        hint = (
            f"checkpoint {older} can be read: continue from it with --resume_step={older}"
            if older is not None
            else "no older checkpoint can be read"
        )
        raise CheckpointError(
            f"checkpoint {step} in {self.manager.directory} cannot be read (corrupt, or made "
            f"for another network or optimizer: {reason}); {hint}"
        )

    def saved_rows(self, step: int) -> list[dict]:
        """The metrics rows saved with checkpoint `step` ([] for checkpoints made before they
        were, or when they cannot be read)."""
        try:
            data = self.manager.restore(
                step, args=ocp.args.Composite(metrics=ocp.args.JsonRestore())
            )
            rows = data["metrics"]["rows"]
        except Exception:
            return []
        return [r for r in rows if isinstance(r, dict) and isinstance(r.get("iteration"), int)]

    def _restore(self, template: Any, step: int) -> Any:
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, template)
        with _quiet_closed_loops():
            restored = self.manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))
            )
        return restored["state"]

    def _readable(self, template: Any, below: int) -> int | None:
        """The newest checkpoint before `below` that restores, or None."""
        for step in reversed([s for s in self.steps() if s < below]):
            try:
                self._restore(template, step)
                return step
            except Exception:
                continue
        return None

    def set_aside(self, after: int) -> str | None:
        """Move the checkpoints after step `after` out of the run (into
        <workdir>/set_aside-<time>/), so that it continues from `after`; the folder, or None."""
        later = [s for s in self.steps() if s > after]
        if not later:
            return None
        folder = os.path.join(self.workdir, f"set_aside-{time.strftime('%Y%m%d-%H%M%S')}")
        os.makedirs(folder, exist_ok=True)
        for step in later:
            shutil.move(
                os.path.join(str(self.manager.directory), str(step)),
                os.path.join(folder, str(step)),
            )
        self.manager.reload()
        return folder

    def close(self) -> None:
        """Close the manager; after a failed save, give up on it after CLOSE_TIMEOUT seconds
        (orbax's threads may never finish) rather than hang the program's exit."""
        if not self.failed:
            self.manager.close()
            return
        thread = threading.Thread(target=self._close_quietly, daemon=True)
        thread.start()
        thread.join(self.CLOSE_TIMEOUT)

    def _close_quietly(self) -> None:
        try:
            self.manager.close()
        except Exception:
            pass


@contextlib.contextmanager
def _quiet_closed_loops():
    """Within it, and for the rest of the process once a restore failed, the echoes of a failed
    restore are not printed. When orbax fails to restore a corrupt checkpoint, tensorstore's reads
    still in flight call back into the event loop orbax has closed ("RuntimeError: Event loop is
    closed" through sys.unraisablehook) and asyncio logs each abandoned read's error as its task or
    future is collected ("Task exception was never retrieved" or "Future exception was never
    retrieved", with a traceback), while the restore still runs or as the process exits; a read
    the closed loop never started is collected as a coroutine never awaited (a RuntimeWarning,
    "coroutine '...' was never awaited"). The failure itself is raised, and reported as a
    CheckpointError."""
    global _quiet_for_good
    if _quiet_for_good:  # a restore failed before: its echoes are dropped already
        yield
        return
    previous = sys.unraisablehook

    def hook(unraisable):
        value = unraisable.exc_value
        if not (isinstance(value, RuntimeError) and str(value) == "Event loop is closed"):
            previous(unraisable)

    sys.unraisablehook = hook
    previous_show = warnings.showwarning

    def show(message, category, *args, **kwargs):
        if not (issubclass(category, RuntimeWarning) and NEVER_AWAITED.search(str(message))):
            previous_show(message, category, *args, **kwargs)

    warnings.showwarning = show
    # a read that fails half-way can be abandoned, and collected, while the restore still runs
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addFilter(_drop_abandoned_tasks)
    try:
        yield
    except BaseException:
        # the hooks and the filter stay, also through later restores that succeed (the search for
        # an older readable checkpoint): this one's abandoned reads report later
        _quiet_for_good = True
        raise
    asyncio_log.removeFilter(_drop_abandoned_tasks)
    warnings.showwarning = previous_show
    sys.unraisablehook = previous


_quiet_for_good = False  # set by the first failed restore, for the rest of the process


ABANDONED = ("Task exception was never retrieved", "Future exception was never retrieved")
NEVER_AWAITED = re.compile(r"^coroutine '.*' was never awaited")


def _drop_abandoned_tasks(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(ABANDONED)


def _shapes(tree: Any) -> dict[str, tuple]:
    """{path: shape} of a pytree of arrays, abstract arrays or orbax's array metadata (whose
    trees hold a saved dataclass as a dict: the paths are compared by their names)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: hasattr(x, "shape"))[0]
    return {
        "/".join(str(getattr(k, "name", getattr(k, "key", getattr(k, "idx", k)))) for k in path): (
            tuple(leaf.shape)
        )
        for path, leaf in leaves
        if hasattr(leaf, "shape")
    }


def _first_line(e: BaseException, limit: int = 200) -> str:
    """`Type: first line of the message`, cut to `limit` characters (orbax's are long)."""
    text = (str(e).strip().splitlines() or [""])[0]
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


# ---- the workdir ---------------------------------------------------------------------------------
def check_workdir(workdir: str) -> None:
    """Make `workdir` and check that files can be written in it; a CheckpointError saying why
    not (a file in the way, no permission, a read-only or full disk)."""
    if os.path.exists(workdir) and not os.path.isdir(workdir):
        raise CheckpointError(
            f"--workdir {workdir!r} is a file, not a folder; choose another --workdir"
        )
    try:
        os.makedirs(workdir, exist_ok=True)
        probe = os.path.join(workdir, f".write_test.{os.getpid()}")
        with open(probe, "w") as f:
            f.write("azjax")
        os.remove(probe)
    except OSError as e:
        raise CheckpointError(
            f"--workdir {workdir!r} cannot be written: {describe_os_error(e)}"
        ) from None


class WorkdirLock:
    """`<workdir>/lock`, held by one run at a time (an flock, released by the system when its
    process dies, so a crashed run's lock is taken over); the file holds the process id.

        with WorkdirLock(workdir):       # CheckpointError: "in use by process N"
            ...
    """

    def __init__(
        self,
        workdir: str,
        *,
        name: str = "lock",
        holder: str = "another training run",
        flag: str = "--workdir",
        remove: bool = False,
    ):
        self.path = os.path.join(workdir, name)
        self.holder, self.flag = holder, flag  # who else holds such a lock, what to choose
        self.remove = remove  # the file too, on release (an output folder's: left clean)
        self.fd: int | None = None

    def __enter__(self) -> WorkdirLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise CheckpointError(
                f"cannot lock {os.path.dirname(self.path)!r}: {describe_os_error(e)}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise CheckpointError(f"cannot lock {self.path}: {describe_os_error(e)}") from None
            raise CheckpointError(
                f"{os.path.dirname(self.path)!r} is in use by process {holder} ({self.holder}); "
                f"wait for it to end, stop it, or choose another {self.flag}"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            if self.remove:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            os.close(self.fd)  # releases the flock; a workdir's file stays, harmless
            self.fd = None


def read_config_file(path: str) -> Config:
    """The Config in a config.json; a CheckpointError naming the file when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        reason = describe_os_error(e) if isinstance(e, OSError) else _first_line(e)
        raise CheckpointError(
            f"cannot read {path}: {reason}; delete it and --resume uses the "
            "config saved in the checkpoint"
        ) from None
    if not isinstance(data, dict):
        raise CheckpointError(
            f"{path} holds {type(data).__name__} {text.strip()[:40]!r}, not a "
            "config; delete it and --resume uses the config saved in the "
            "checkpoint"
        )
    try:
        return Config.from_json(text)
    except (TypeError, ValueError) as e:
        if str(e).startswith("game must be one of"):  # the checkpoint's names it too: register it
            raise CheckpointError(f"{path}: {e}") from None
        raise CheckpointError(
            f"{path}: {e}; fix or delete it (--resume then uses the config saved in the checkpoint)"
        ) from None


def check_resumable(saved: Config, config: Config) -> None:
    """CheckpointError unless `config` may continue a run saved with `saved`."""
    diffs = [f for f in STRUCTURAL if getattr(saved, f) != getattr(config, f)]
    diffs += [f for f in HEAD_WEIGHTS if (getattr(saved, f) > 0) != (getattr(config, f) > 0)]
    if diffs:
        detail = ", ".join(
            f"{f}: saved {getattr(saved, f)!r} vs now {getattr(config, f)!r}" for f in diffs
        )
        raise CheckpointError(
            f"cannot resume: the checkpoint was made with other settings ({detail})"
        )


def changed_settings(saved: Config, config: Config) -> list[str]:
    """'FIELD SAVED -> NOW' for each setting a resume changes (flags given beside --resume), in
    the config's field order: what the resume banner lists."""
    return [
        f"{f.name} {getattr(saved, f.name)!r} -> {getattr(config, f.name)!r}"
        for f in dataclasses.fields(config)
        if getattr(saved, f.name) != getattr(config, f.name)
    ]


# ---- runs named on the command line --------------------------------------------------------------
def parse_location(text: str, game: str | None = None) -> tuple[str, int | None]:
    """'PATH[@STEP|@latest|@best[:MEASURE]]' (or PATH/checkpoints/STEP) -> (run folder, step or
    None: latest). `@best` is read from the run: the step `best_checkpoint` names, by the run's
    `best_by` or by MEASURE (auto, opponent, elo, error_rate); in a shared run by game `game`'s
    evaluations (a ckpt: spec's game=NAME)."""
    whole = os.path.isdir(os.path.join(text, "checkpoints")) or pretrained.is_exported(text)
    at_in_name = "@" in text and not whole  # a run folder named with an @ is that folder
    path, at, step_text = text.rpartition("@") if at_in_name else (text, "", "")
    path = path.strip()
    if not path:
        raise ValueError("give a run folder: PATH[@STEP|@latest|@best[:MEASURE]]")
    best, _, measure = step_text.partition(":")
    best = bool(at) and best == "best"
    step = None
    if at and step_text != "latest" and not best:
        if not step_text.isdigit():
            raise ValueError(
                f"{text!r}: the step after @ must be a number, 'latest', 'best' or 'best:MEASURE', "
                f"got {step_text!r}"
            )
        step = int(step_text)
    head, tail = os.path.split(os.path.normpath(path))
    if tail.isdigit() and os.path.basename(head) == "checkpoints":
        if (step is not None and step != int(tail)) or best:
            raise ValueError(f"{path!r} is checkpoint {tail}, not @{step_text}")
        path, step = os.path.dirname(head), int(tail)
    if best:
        step = best_checkpoint(path, measure or None, game).step
    return path, step


class Best(NamedTuple):
    """The checkpoint `@best` names: its step and the in-loop measure it scored best on (the
    latest of those level with the highest score: `best_checkpoint`)."""

    step: int
    metric: str  # the in-loop metric of one of BEST_MEASURES
    value: float  # the measure at `step`
    top_step: int = -1  # the step of the highest score (the lowest error rate), as logged
    top_value: float = math.nan


# What `@best` ranks a run's saved checkpoints by (the run's --best_by, or `@best:MEASURE`): each
# measure's in-loop metric and whether higher is better; `auto` takes the first of BEST_AUTO
# logged at a saved step (the score against --eval_opponent, an engine the user chose; else the
# ladder Elo; else the exact error rate, all that an evaluation put off by --eval_budget logs),
# where a measure last logged in the first half of the run, which ranks only the checkpoints
# before the evaluations that put it off, gives way to one logged in its second half
# (`current_first`: a put-off final evaluation alone does not demote a measure). Of the steps
# whose measure is level with the highest score (the lowest error rate) within their 95%
# intervals (`level`), the latest: the highest of many noisy scores is likely a lucky one, and
# where two are not told apart the later network has learned from more games.
BEST_MEASURES = {
    "opponent": ("eval/opponent_score", True),
    "elo": ("eval/elo", True),
    "error_rate": ("eval/error_rate", False),
}
BEST_CI95 = {  # the half-width of each measure's 95% interval, as the evaluations log it
    "eval/opponent_score": "eval/opponent_ci95",
    "eval/elo": "eval/elo_ci95",
    "eval/error_rate": "eval/error_ci95",
}

BEST_AUTO = ("opponent", "elo", "error_rate")


def level(a: float, a_ci95: float, b: float, b_ci95: float) -> bool:
    """Whether two independent estimates with these 95% half-widths are not told apart at the 5%
    level: their difference within the half-widths combined in quadrature."""
    return abs(a - b) <= math.hypot(a_ci95, b_ci95)


def _logged(row: dict, metric: str) -> bool:
    """Whether metrics.jsonl's `row` holds a finite value of `metric`."""
    return isinstance(row.get(metric), (int, float)) and math.isfinite(row[metric])


def game_metric(metric: str, game: str | None) -> str:
    """A metric's name in metrics.jsonl: `metric` itself, or in a shared run game `game`'s
    (eval/elo -> eval/<game>/elo: `loop_eval.make_evaluation`)."""
    return metric if game is None else metric.replace("eval/", f"eval/{game}/", 1)


def measure_trends(rows: list[dict], game: str | None = None) -> dict[str, dict]:
    """How each in-loop measure of BEST_MEASURES moved over a run (`rows`: metrics.jsonl's):
    {metric: {"evaluations": n, "first": [iteration, value], "last": [...], "best": [...]}}
    for those it logged (best: the highest, the lowest error rate; a tie to the later). What a
    run's closing message shows of whether it was still improving. `game`: a shared run's game,
    whose measures (eval/<game>/elo, ...) it reads."""
    trends = {}
    for metric, higher in BEST_MEASURES.values():
        metric = game_metric(metric, game)
        points = [(r["iteration"], float(r[metric])) for r in rows if _logged(r, metric)]
        if points:
            best = max(points, key=lambda p: ((p[1] if higher else -p[1]), p[0]))
            trends[metric] = dict(
                evaluations=len(points),
                first=list(points[0]),
                last=list(points[-1]),
                best=list(best),
            )
    return trends


def current_first(rows: list[dict], metrics: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """`metrics` (BEST_MEASURES' values) in their order, those whose latest value in `rows` comes
    from the first half of the evaluated run (by iteration: it ranks only the checkpoints before
    the evaluations that put it off, `--eval_budget`) moved after the others."""
    latest = {
        m: max((r["iteration"] for r in rows if _logged(r, m)), default=-1) for m, _ in metrics
    }
    end = max(latest.values(), default=-1)
    return sorted(metrics, key=lambda m: not 2 * latest[m[0]] > end)  # stable: the order kept


def best_checkpoint(path: str, by: str | None = None, game: str | None = None) -> Best:
    """The saved checkpoint of run `path` whose in-loop evaluation scored best by measure `by`
    (a key of BEST_MEASURES, or "auto"; None: the run's `best_by`), from the run's
    metrics.jsonl; a CheckpointError where no saved step was evaluated so. In a shared run
    (`--games`) by game `game`'s evaluations (eval/<game>/...), which it must name; `game` is
    not read for a single-game run. Reads no orbax manager (`steps_on_disk`), so one process of
    a distributed run may call it alone."""
    check_run_folder(path)
    folder = resolve_run(path)
    if pretrained.is_exported(folder):
        raise CheckpointError(
            f"{path!r} is an exported network (one step, no evaluations): drop the @best"
        )
    config_file = os.path.join(folder, "config.json")  # the run's latest session's
    config = None
    if os.path.exists(config_file):
        try:
            config = read_config_file(config_file)
        except CheckpointError:
            if by is None:  # its best_by is needed; a measure given ranks without it
                raise
    if by is None:
        by = config.best_by if config is not None else "auto"
    if by != "auto" and by not in BEST_MEASURES:
        raise CheckpointError(
            f"@best:{by}: the measure must be one of {', '.join(['auto', *BEST_MEASURES])}"
        )
    if config is None or not config.games:
        game = None  # a single-game run's measures are eval/elo, ...
    else:
        from azjax import shared  # here: it brings in the training loop

        trained = list(shared.game_configs(config))
        if game is None:
            raise CheckpointError(
                f"{path}@best: the run trained one network over {', '.join(trained)}, each "
                f"evaluated on its own: name the game in a ckpt: agent "
                f"(ckpt:{path}@best,game={trained[0]}), or a step (export and --init_from take a "
                "run of one game)"
            )
        if game not in trained:
            raise CheckpointError(
                f"{path}@best: the run did not train {game}; it has {', '.join(trained)}"
            )
    saved = set(steps_on_disk(folder))
    every_row = read_rows(os.path.join(folder, METRICS_FILE))
    rows = [r for r in every_row if r["iteration"] in saved]
    metrics = [
        (game_metric(metric, game), higher)
        for metric, higher in (BEST_MEASURES[m] for m in (BEST_AUTO if by == "auto" else (by,)))
    ]
    cis = {game_metric(m, game): game_metric(ci, game) for m, ci in BEST_CI95.items()}
    for metric, higher in current_first(rows, metrics):
        ci95 = cis[metric]
        scored = [  # (score, higher better; its half-width; step)
            (
                float(r[metric]) if higher else -float(r[metric]),
                float(r[ci95]) if _logged(r, ci95) else 0.0,
                r["iteration"],
            )
            for r in rows
            if _logged(r, metric)
        ]
        if scored:
            top, top_ci, top_step = max(scored, key=lambda t: (t[0], t[2]))
            step, value = max((t[2], t[0]) for t in scored if level(t[0], t[1], top, top_ci))
            sign = 1.0 if higher else -1.0
            return Best(step, metric, sign * value, top_step, sign * top)
    evaluated = any(_logged(r, m) for r in every_row for m, _ in metrics)
    advice = (  # evaluations at iterations not saved, or none yet
        "train with an --eval_interval that divides --checkpoint_interval"
        if evaluated
        else "it has not been evaluated yet: train past its --eval_interval (or with --eval_final)"
    )
    prefix = "eval/" if game is None else f"eval/{game}/"
    never = not any(k.startswith("eval/") for r in every_row for k in r)
    if never and config is not None and not config.eval_interval:
        advice = (  # "train past its --eval_interval" of 0 meant nothing
            "it was trained with --eval_interval=0 (no in-loop evaluation): continue it with "
            "--resume --eval_interval=N"
            + ("" if config.games else ", or measure its checkpoints with evaluate.py curve")
        )  # (curve does not draw a shared run)
    if not evaluated and any(k.startswith(prefix) for r in rows for k in r):
        advice = (  # evaluated, but not by these measures (matches alone, say)
            f"its evaluations{'' if game is None else f' of {game}'} log none of these (the "
            "Elo needs --eval_ladder and a ladder table of the game, the error rate its solved "
            "positions, the opponent score --eval_opponent)"
        )
    raise CheckpointError(
        f"{path}@best: none of its saved checkpoints {sorted(saved)} has an in-loop evaluation "
        f"({' or '.join(m for m, _ in metrics)} in metrics.jsonl at its iteration); {advice}, "
        "or name a step: @STEP"
    )


def resolve_run(path: str) -> str:
    """The folder a run named on the command line is read from: `path` itself where that folder
    exists (a run, or a network exported by `azjax.pretrained.export`); else, for
    `pretrained/NAME`, the package's network NAME (a CheckpointError listing the shipped ones
    where there is none); else `path`, which `check_run_folder` refuses. Every reader of runs
    (`check_run_folder`, `steps`, `read_config`, `load_checkpoint`) resolves through it; a folder
    with some of an exported network's files, and no checkpoints, is refused as incomplete."""
    if os.path.isdir(path):
        missing = [f for f in pretrained.FILES if not os.path.isfile(os.path.join(path, f))]
        export_only = {"variables.msgpack", "card.json"} - set(missing)  # a run has config.json
        if missing and export_only and not os.path.isdir(os.path.join(path, "checkpoints")):
            raise CheckpointError(
                f"{path!r} is an incomplete exported network: it lacks {', '.join(missing)} "
                "(export it again)"
            )
        return path
    parts = os.path.normpath(path).split(os.sep)
    if len(parts) == 2 and parts[0] == pretrained.PREFIX:
        try:
            return pretrained.package_folder(parts[1])
        except pretrained.PretrainedError as e:
            raise CheckpointError(str(e)) from None
    return path


def check_run_folder(path: str) -> None:
    if not os.path.isdir(resolve_run(path)):
        raise CheckpointError(f"no run folder {path!r}")


def _exported_step(path: str, folder: str, step: int | None) -> int:
    """The step of the exported network in `folder`, which `step` (None: any) must be."""
    try:
        have = pretrained.step_of(folder)
    except pretrained.PretrainedError as e:
        raise CheckpointError(str(e)) from None
    if step is not None and step != have:
        raise CheckpointError(
            f"{path!r} is a network exported from step {have} only, not @{step}; drop the @{step}"
        )
    return have


def removed(workdir: str, step: int, wait: float = 0.5) -> bool:
    """Whether checkpoint `step` of `workdir` has gone (or goes within `wait` seconds: orbax
    removes a folder a file at a time), as a run still training removes its oldest beyond
    --keep_checkpoints while another command reads it."""
    deadline = time.monotonic() + wait
    while step in steps_on_disk(workdir):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def removed_error(workdir: str, step: int | None) -> CheckpointError:
    """The error for checkpoint `step` (None: one of them, as they were listed) removed by the
    run writing it while this process read it."""
    which = f"checkpoint {step}" if step is not None else "a checkpoint"
    return CheckpointError(
        f"{which} of {workdir!r} was removed while it was read: the run writing it keeps only "
        "its newest and its @best (--keep_checkpoints); read it again, or name a newer step"
    )


def missing_step_hint(workdir: str, step: int) -> str:
    """' (it was set aside in FOLDER by a --resume_step: ...)' where a `set_aside` folder of
    `workdir` holds checkpoint `step`; ' (older than its oldest ...)' where the run keeps only
    newer ones; ' (removed ...)' for a step between two kept ones that the run saved (a multiple
    of its --checkpoint_interval) and --keep_checkpoints pruned (the older one its @best); else
    ''."""
    have = steps_on_disk(workdir)
    folder = _set_aside_folder(workdir, step)
    if have and step < have[0] and not folder:
        return (
            f" (older than its oldest, {have[0]}: the run keeps only its newest checkpoints and "
            "its @best, --keep_checkpoints)"
        )
    if folder:
        return (
            f" (it was set aside in {folder} by a --resume_step: move "
            f"it back into {os.path.join(workdir, 'checkpoints')} to read it)"
        )
    if have and have[0] < step < have[-1]:
        try:
            config = read_config(workdir)
        except CheckpointError:
            return ""
        if config.keep_checkpoints and step % config.checkpoint_interval == 0:
            return (
                f" (removed: the run keeps only its newest {config.keep_checkpoints} "
                "checkpoints and its @best, --keep_checkpoints)"
            )
    return ""


def _set_aside_folder(workdir: str, step: int) -> str | None:
    names = os.listdir(workdir) if os.path.isdir(workdir) else []
    for name in sorted(names, reverse=True):  # the newest first
        if name.startswith("set_aside-") and os.path.isdir(os.path.join(workdir, name, str(step))):
            return os.path.join(workdir, name)
    return None


def run_rows(workdir: str) -> list[dict]:
    """The metrics rows of run folder `workdir`: metrics.jsonl's, then the rows its latest
    checkpoint holds that the file does not yet (a running run writes a row once the next
    checkpoint is on disk, a killed one never did; the checkpoint keeps them for --resume)."""
    rows = read_rows(os.path.join(workdir, METRICS_FILE))
    last = rows[-1]["iteration"] if rows else 0
    on_disk = steps_on_disk(workdir)
    if not on_disk or on_disk[-1] <= last:
        return rows
    try:
        checkpointer = Checkpointer(workdir)
    except CheckpointError:
        return rows
    try:
        saved = checkpointer.saved_rows(on_disk[-1])  # [] where it has gone meanwhile
    finally:
        checkpointer.close()
    later = {r["iteration"]: r for r in saved if last < r["iteration"] <= on_disk[-1]}
    return rows + [later[i] for i in sorted(later)]


def steps_on_disk(workdir: str) -> list[int]:
    """The finished checkpoints of run folder `workdir`, ascending, from the folder's names
    (orbax's temporary folders left out; no manager opened)."""
    folder = os.path.join(workdir, "checkpoints")
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted(int(n) for n in names if n.isdigit())


def steps(workdir: str) -> list[int]:
    """The checkpoint steps of a run folder, ascending (an exported network's one step)."""
    check_run_folder(workdir)
    folder = resolve_run(workdir)
    if pretrained.is_exported(folder):
        return [_exported_step(workdir, folder, None)]
    checkpointer = Checkpointer(workdir)
    try:
        return sorted(checkpointer.steps())
    finally:
        checkpointer.close()


def read_config(workdir: str, step: int | None = None) -> Config:
    """The Config saved with a checkpoint of `workdir` (default: the latest)."""
    folder = resolve_run(workdir)
    if pretrained.is_exported(folder):
        _exported_step(workdir, folder, step)
        try:
            return pretrained.read_config(folder)
        except pretrained.PretrainedError as e:
            raise CheckpointError(str(e)) from None
    workdir = folder
    if not os.path.isdir(os.path.join(workdir, "checkpoints")):
        parent, name = os.path.split(os.path.normpath(workdir))
        hint = f"; give the run folder, {parent!r}" if name == "checkpoints" else ""
        if parent == pretrained.PREFIX and name in pretrained.names():
            hint = (
                f"; this local folder is read before the package's network {name}: move it away "
                "to play the package's"
            )
        raise CheckpointError(f"{workdir!r} holds no checkpoints (no checkpoints/ folder){hint}")
    manager = _manager(workdir, create=False)
    try:
        have = sorted(manager.all_steps())
        if not have:
            raise CheckpointError(f"{workdir!r} holds no checkpoints yet (checkpoints/ is empty)")
        step = manager.latest_step() if step is None else step
        if step not in have:
            hint = missing_step_hint(workdir, step)
            raise CheckpointError(f"no checkpoint {step} in {workdir!r}; have {have}{hint}")
        just_config = ocp.args.Composite(config=ocp.args.JsonRestore())
        try:
            data = manager.restore(step, args=just_config)
        except Exception as e:
            if removed(workdir, step):  # not unreadable: gone
                raise removed_error(workdir, step) from None
            reason = _first_line(e)
            older = None
            for earlier in reversed([s for s in have if s < step]):
                with contextlib.suppress(Exception):
                    manager.restore(earlier, args=just_config)
                    older = earlier
                    break
            hint = (
                f"; checkpoint {older}'s can: --resume_step={older} continues from it, "
                f"{workdir}@{older} names it"
                if older is not None
                else ""
            )
            raise CheckpointError(
                f"cannot read the config of checkpoint {step} in {workdir!r}: {reason}{hint}"
            ) from None
    finally:
        manager.close()
    try:
        return Config.from_json(json.dumps(data["config"]))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"the config of checkpoint {step} in {workdir!r}: {e}") from None


def read_run_state(workdir: str, step: int | None = None) -> tuple[Config, RunState, int]:
    """(config, the whole run state, step) of checkpoint `step` (None: the latest) of run folder
    `workdir`: its networks, optimizer and gate."""
    config = read_config(workdir, step)
    checkpointer = Checkpointer(workdir)
    try:
        run, step = checkpointer.restore(run_template(config), step)
    finally:
        checkpointer.close()
    return config, run, step


NETWORKS = ("learner", "best")  # load_checkpoint's `network`: a gated run holds both


def load_checkpoint(
    path: str, step: int | None = None, *, network: str = "learner"
) -> tuple[Config, Any, int]:
    """(config, network variables, step) of checkpoint `step` (None: the latest) of run `path`,
    or of the network exported into `path` (`resolve_run`). `network="best"`: a gated run's best
    network (`--gating`: the one its self-play used) instead of the learner's; a CheckpointError
    where the run was not gated."""
    check_run_folder(path)
    folder = resolve_run(path)
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {network!r}")
    if pretrained.is_exported(folder):
        if network == "best":
            raise CheckpointError(f"{path!r} is an exported network: it has no gate's best one")
        step = _exported_step(path, folder, step)
        try:
            config, variables = pretrained.read(folder)
        except pretrained.PretrainedError as e:
            raise CheckpointError(str(e)) from None
        return config, variables, step
    path = folder
    for attempt in range(3):  # @latest of a run still training: its newest may go meanwhile
        on_disk = steps_on_disk(path)
        asked = step if step is not None or not on_disk else on_disk[-1]
        try:
            config, run, asked = read_run_state(path, asked)
            break
        except CheckpointError:
            if step is not None or asked is None or attempt == 2 or not removed(path, asked, 0):
                raise
    step = asked
    if network == "best":
        if run.gate is None:
            raise CheckpointError(
                f"checkpoint {step} of {path!r} has no best network: the run was not gated "
                "(the gate's best needs --gating)"
            )
        return config, run.gate.best, step
    return config, run.train.variables, step
