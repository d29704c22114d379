"""The XLA option the commands set: on a GPU, while loops run inside CUDA graphs.

A search is loops within loops: mctx's simulations, the walk down the tree and back up, and a
random playout's plies. XLA:GPU runs a turn of a `while_loop` by launching the body's kernels and
then copying the loop's condition back to the host, which decides whether to launch the next
turn; a loop of many small turns (a playout: a few microseconds of work a ply) spends most of its
time on those round trips. With `--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL` XLA records
such a loop into a CUDA graph with conditional nodes, and the GPU tests the condition itself.
On an H200 (docs/benchmarks.md, "While loops as CUDA graphs", session 38) this made Othello 8x8
self-play with a random rollout from every leaf 1.20x faster (0.62x -> 0.69x of the positions/s
without rollouts) and self-play without rollouts about 1.07x faster.

`enable()` (called by `azjax.cli.run`, so by train.py, evaluate.py and play.py, and by the
self-play and rollout benchmarks) adds the option to the environment's `XLA_FLAGS` before JAX
starts its backend; XLA reads the variable then, on any backend (the CPU and TPUs ignore it).
The environment decides otherwise: where `XLA_FLAGS` already names
`xla_gpu_enable_command_buffer`, it is left as the user wrote it (XLA's own choice is
`--xla_gpu_enable_command_buffer=+FUSION`, which adds nothing to XLA's default list). Programs
the commands start that are not azjax (`gtp:` engines) get the environment without the option
(`without_added`). Library code (`azjax.loop`, notebooks) is left alone, as with the compilation
cache. JAX before 0.6 is left alone too: its XLA may not know WHILE, and an XLA flag it does not
know stops the process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

ENV = "XLA_FLAGS"
FLAG = "--xla_gpu_enable_command_buffer"
ADDED = "+WHILE,+CONDITIONAL"
MIN_JAX = (0, 6)  # checked with jax 0.6.2, 0.10.2 (the CPU) and 0.11.2 (an H200)


def with_defaults(xla_flags: str, jax_version: str) -> str:
    """`xla_flags` (the text of XLA_FLAGS) with the option added, or unchanged where it names
    the flag already or `jax_version` is older than MIN_JAX."""
    if FLAG in xla_flags or _release(jax_version) < MIN_JAX:
        return xla_flags
    return f"{xla_flags} {FLAG}={ADDED}".strip()


def enable(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Adds the option to ``environ[XLA_FLAGS]`` (module doc) and returns the variable's new
    text; None where JAX's backend has started already (XLA has read its flags) and nothing is
    changed."""
    import jax
    from jax._src import xla_bridge

    started = getattr(xla_bridge, "backends_are_initialized", lambda: False)
    if started():
        return None
    flags = with_defaults(environ.get(ENV, ""), jax.__version__)
    if flags:
        environ[ENV] = flags
    return flags


def without_added(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """A copy of ``environ`` without the option `enable` adds, for programs this one starts that
    are not azjax (a `gtp:` engine): another program's XLA, or TensorFlow's, may not know the
    option, and an XLA flag it does not know stops it."""
    env = dict(environ)
    flags = [f for f in env.get(ENV, "").split() if f != f"{FLAG}={ADDED}"]
    if flags:
        env[ENV] = " ".join(flags)
    else:
        env.pop(ENV, None)
    return env


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as "0.11.2" or "0.7.0.dev20250101"."""
    parts = []
    for part in version.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    major, minor = (parts + [0, 0])[:2]
    return major, minor
