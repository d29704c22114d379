"""XLA flags for the test processes and for the scripts the tests start as subprocesses.

The suite compiles far more than it computes (toy sizes), so tests/conftest.py sets FAST_COMPILE
before JAX starts, and tests check what is computed, not how fast:

- XLA:CPU at backend optimisation level 0 compiles the suite's programs in about two thirds of
  the time of the default level;
- XLA:CPU's MLIR fusion emitters off (the older elemental emitters instead) take about another
  third off a toy self-play chunk's compilation and nearly half off a learner's (2026-11-25, the
  2-core EPYC: 8x8 Othello 11.0 -> 7.8 s and 4.1 -> 2.4 s, 11x11 Hex 8.2 -> 5.7 s and 4.2 -> 2.1
  s), with the same run time at these sizes. XLA aborts the process on a flag it does not know,
  so this one is added only where a probe finds this XLA accepts it.

A caller's own optimisation level in XLA_FLAGS is kept, and then nothing is added.
"""

from __future__ import annotations

import os
import subprocess
import sys

FAST_COMPILE = "--xla_backend_optimization_level=0"
NO_FUSION_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
_DEVICE_COUNT = "--xla_force_host_platform_device_count"


def accepted(flag: str) -> bool:
    """Whether this XLA:CPU starts with `flag` in XLA_FLAGS (a short subprocess, ~1 s)."""
    env = dict(os.environ, XLA_FLAGS=flag, JAX_PLATFORMS="cpu")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    probe = "import jax.numpy as jnp; jnp.zeros(2).block_until_ready()"
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def suite_flags(flags: str) -> str:
    """`flags` with FAST_COMPILE (and NO_FUSION_EMITTERS where accepted) added, unless they set an
    optimisation level themselves."""
    if "--xla_backend_optimization_level" in flags:
        return flags
    added = [FAST_COMPILE]
    if "--xla_cpu_use_fusion_emitters" not in flags and accepted(NO_FUSION_EMITTERS):
        added.append(NO_FUSION_EMITTERS)
    return " ".join([flags, *added]).strip()


def with_host_devices(devices: int | None = None, env=os.environ) -> str:
    """XLA_FLAGS for a subprocess: `env`'s, without any forced host device count, then with
    `devices` host devices where given."""
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(_DEVICE_COUNT)]
    if devices is not None:
        flags.append(f"{_DEVICE_COUNT}={devices}")
    return " ".join(flags)
