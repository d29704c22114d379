"""Data parallelism over every device of every host, with `jax.sharding` and `jit` (no pmap).

One mesh axis, `data`, runs over all devices (`jax.devices()`: every host's, in multi-host runs).
The single-device run is the one-device case of the same code.

    what                              layout                    on each of D devices
    game states         [B, ...]      P("data")                 B / D games
    trajectory          [T, B, ...]   P(None, "data")           its games' T moves
    replay buffer       [R, B, ...]   P(None, "data")           its games' columns (R rows each)
    training batch      [N, ...]      P("data")                 N / D positions
    parameters, optimizer state, keys P()                       a full copy

- Self-play runs under `shard_map`: each device plays its B / D games with its own key,
  `fold_in(key, device index)`, and talks to no other device (see `selfplay.make_selfplay`).
- The replay buffer's column-per-slot layout shards along B with no change: a device writes and
  settles only its own columns.
- Sampling is exactly uniform over all ready positions of all devices, or weighted by policy
  surprise (`replay.sample` with an axis name): the devices share their counts of tickets (one
  integer each; under surprise weighting also their sums of surprise), every device draws the
  same N global tickets, gathers the ones it holds, and a reduce-scatter hands each device its
  N / D. The result does not depend on the number of devices.
- The training step is plain `jit` with the batch sharded and the state replicated: the loss is a
  mean over the global batch, so XLA averages the gradients (and batch-norm statistics) across
  devices by itself.

`batch_games` and `train_batch_size` are global sizes; each must divide over the devices
(`check_divisible` says so otherwise). Multi-host: `initialize` wraps `jax.distributed.initialize`;
every process runs the same program on its local share, global arrays are made inside `jit` with
`out_shardings` (so no host builds another's data), and only process 0 (`is_primary`) writes logs.

On a CPU, JAX makes one device of the whole host, and XLA:CPU runs a small network's convolutions
(a 2 x 32 ResNet on 6x6 boards, 128 games) on one core however many there are. `split_cpu` makes
one device per core instead (`jax_num_cpu_devices`, before JAX starts), and the same sharded
program then keeps every core busy: `train.py --cpu_devices=auto` doubled a 6x6 Othello
iteration's speed on 2 cores.

**Long programs end without a collective.** XLA:CPU runs each device's share of a program on a
thread of a pool as large as the host's cores (or devices), hands its independent steps to a
second pool of that size, and a device that reaches a collective first holds its thread while it
waits for the others. A 60-minute run with two devices on two cores died when one device waited
40 s in the all-gather at the end of the exact error rate's search, the other device's search
never arriving (docs/benchmarks.md, "A device per core"). So self-play, matches and that search
return their results split over the devices, `fetch` assembles them on the host, and the
reductions that remain (self-play's statistics, the learner's gradients and sample) are short
programs of their own. Where one follows a long program (self-play's statistics after self-play,
ExIt's after each round) the host first waits for the long one on every device (`settle`): a
60-minute Hex run still died once in an all-gather as an iteration's self-play ended, most
likely one device in the statistics while the other still played (docs/benchmarks.md). **One
program with collectives at a time**: the learner's calls (on the CPU one optimizer step each, a
sample's all-gather and a gradient mean) are each waited for before the next is dispatched
(`training.learn`'s `settle`). Queued one behind another, such calls end the process on
XLA:CPU: `python -m benchmarks.cpu_collectives --mode=queue` died within a minute each time it
ran, `--mode=wait` made hundreds of thousands of calls without a stall, and a 6x6 Othello hour
died so after 55 minutes, in an iteration with no evaluation or checkpoint near (docs/benchmarks.md,
"The learner's calls one at a time"). Larger pools (PJRT_NPROC) would leave spare threads but
cost a 6-iteration run 20 - 35% of its speed on 2 cores, spinning threads taking the cores.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXIS = "data"  # the mesh axis the batch is split along


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-axis mesh ("data") over `devices` (default: every device of every process)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (AXIS,))


def num_devices(mesh: Mesh) -> int:
    return mesh.shape[AXIS]


def check_divisible(mesh: Mesh, **sizes: int) -> None:
    """ValueError unless every global size (e.g. batch_games=1024) divides over the mesh."""
    d = num_devices(mesh)
    for name, value in sizes.items():
        if value % d:
            raise ValueError(
                f"--{name}={value} does not divide over the {d} devices "
                f"({jax.devices()[0].platform}, {jax.process_count()} process(es)): it is the "
                f"global size, split evenly; use a multiple of {d} (e.g. --{name}="
                f"{max(d, value - value % d)})"
            )


def sharding(mesh: Mesh, spec: P) -> NamedSharding:
    return NamedSharding(mesh, spec)


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def shardings(mesh: Mesh, specs: Any) -> Any:
    """A pytree of PartitionSpecs -> the same tree of NamedShardings."""
    return jax.tree_util.tree_map(
        lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda x: isinstance(x, P)
    )


def fetch(tree: Any) -> Any:
    """Host (numpy) copies of a tree of global arrays, replicated or split; works on every
    process of a multi-host run, where `jax.device_get` refuses arrays that span other hosts'
    devices. An array split over this process's devices is assembled here from their shards,
    with no collective: programs that end in long loops return their results split and leave
    the gathering to this (see the module doc). Split over several hosts, it takes one
    collective (`process_allgather`)."""

    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            if x.is_fully_replicated:
                return np.asarray(x.addressable_data(0))
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return np.asarray(x)

    return jax.tree_util.tree_map(one, tree)


def settle(tree: Any, mesh: Mesh) -> Any:
    """`tree`, waited for on the host where `mesh` is several CPU devices, before a program with
    collectives is dispatched on it (module doc: a device that enters such a program while
    another still runs a long one can hold the threads the other needs). Elsewhere `tree` at once,
    so accelerators keep their programs queued."""
    if num_devices(mesh) > 1 and mesh.devices.flat[0].platform == "cpu":
        jax.block_until_ready(tree)
    return tree


def local_mesh() -> Mesh | None:
    """A mesh over this process's devices where it has several and runs alone (a CPU split by
    `split_cpu`, a GPU host); None for one device, or in a multi-host run. What evaluation
    outside the training loop (`evaluate.py`) splits its games and positions over."""
    if jax.process_count() > 1 or jax.local_device_count() < 2:
        return None
    return make_mesh(jax.local_devices())


def local_devices_used() -> int:
    """The devices `local_mesh` splits evaluation over (1 without a mesh), for records: the
    split changes which games a seed plays."""
    return 1 if local_mesh() is None else jax.local_device_count()


def split_states(states: Any, mesh: Mesh) -> Any:
    """A batch of states (leading axis B) ready for `split_call`: filled up to a multiple of the
    mesh's devices with copies of its first state (whose results the caller drops), on every
    device of `mesh`."""
    states = jax.device_get(states)
    fill = -jax.tree_util.tree_leaves(states)[0].shape[0] % num_devices(mesh)
    if fill:
        states = jax.tree_util.tree_map(
            lambda x: np.concatenate([x, np.repeat(x[:1], fill, 0)]), states
        )
    return jax.device_put(states, replicated(mesh))


def split_call(fn: Any, mesh: Mesh) -> Any:
    """fn(variables, key, states) -> per-state outputs [B, ...], jitted with the states' batch
    split over `mesh`'s devices (B a multiple of D: `split_states`): each device calls `fn` on its
    B / D states with the key `fold_in(key, device index)`, and the outputs stay split, with no
    collective at the end (`fetch` assembles them; the module doc says why)."""

    def shard(variables, key, states):
        return fn(variables, jax.random.fold_in(key, jax.lax.axis_index(AXIS)), states)

    # check_vma=False: mctx's loops mix per-device and replicated values in one carry.
    return jax.jit(
        jax.shard_map(
            shard, mesh=mesh, in_specs=(P(), P(), P(AXIS)), out_specs=P(AXIS), check_vma=False
        ),
        out_shardings=sharding(mesh, P(AXIS)),
    )


def put_scalar(value: float, mesh: Mesh) -> jax.Array:
    """A host float as a float32[] replicated over `mesh`: an explicit copy (allowed under
    `jax.transfer_guard("disallow")`), the same value on every process of a multi-host run."""
    return jax.device_put(np.float32(value), replicated(mesh))


def is_primary() -> bool:
    """True on the process that writes logs, metrics and summaries (process 0)."""
    return jax.process_index() == 0


def initialize(
    coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None
) -> None:
    """`jax.distributed.initialize`, before any other JAX call.

    Arguments left as None come from the environment: JAX detects Cloud TPU pod slices, SLURM,
    Open MPI and Kubernetes itself, and reads JAX_COORDINATOR_ADDRESS. On CPU the processes talk
    through gloo (`jax_cpu_collectives_implementation`, set here explicitly), and compile without
    the persistent compilation cache: with jax 0.12 a program with collectives that one run
    compiled hangs in the next run that loads it from the cache, in every process (a `psum` of
    two processes is enough; jax 0.10 runs it). Nothing has compiled yet, so the switch holds.
    """
    global _distributed
    if coordinator is not None:
        host, _, port = coordinator.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"--coordinator must be HOST:PORT (port 1-65535), got {coordinator!r}")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator, num_processes=num_processes, process_id=process_id
        )
    except (ValueError, RuntimeError) as e:  # JaxRuntimeError is a RuntimeError
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"--distributed: {first} (give --coordinator=HOST:PORT, --num_processes and "
            "--process_id, or run where JAX finds them: a TPU pod slice, SLURM, Open MPI)"
        ) from None
    if jax.default_backend() == "cpu":
        jax.config.update("jax_enable_compilation_cache", False)
    _distributed = True


_distributed = False  # set by `initialize`: an error then ends the process at once (azjax.cli)


def distributed() -> bool:
    """Whether this process is one of several (`initialize` was called)."""
    return _distributed


def check_same_everywhere(values: dict[str, Any]) -> None:
    """A ValueError naming the entries of `values` (flag name: this process's value) that differ
    between the processes, raised in every process alike; called before any work that would hang
    or crash in a collective on a mismatch (another batch size, one process resuming and one not).
    One gathered int32 digest an entry; nothing to do in a process alone."""
    import json
    import zlib

    if jax.process_count() < 2:
        return
    from jax.experimental import multihost_utils

    digests = [
        zlib.crc32(json.dumps(v, sort_keys=True, default=str).encode()) for v in values.values()
    ]
    mine = np.array(digests, np.uint32).view(np.int32)
    everyone = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, len(values))
    differ = [name for name, column in zip(values, everyone.T) if (column != column[0]).any()]
    if differ:
        raise ValueError(
            f"--distributed: the processes differ in {', '.join(differ)}; start every process "
            "with the same flags"
        )


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_device_count(*sizes: int, cpus: int | None = None) -> int:
    """The most devices, at most one per CPU (`cpus`, default `usable_cpus()`), over which every
    one of the global `sizes` (batch_games, train_batch_size) divides evenly."""
    cpus = usable_cpus() if cpus is None else cpus
    return max(n for n in range(1, max(cpus, 1) + 1) if all(s % n == 0 for s in sizes))


def split_cpu(count: int) -> int:
    """Makes JAX's CPU backend `count` devices, which must happen before JAX starts (before any
    array is made), and returns the CPU devices the process will have: `count`, or, where JAX has
    already started (a caller in a process that has used JAX), the devices it started with."""
    if count < 1:
        raise ValueError(f"CPU devices must be at least 1, got {count}")
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:  # JAX has started: its CPU devices are fixed
        return len(jax.devices("cpu"))
    return count
