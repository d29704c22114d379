"""XLA flags for the test processes and for the scripts the tests start as subprocesses.

The suite compiles far more than it computes (toy sizes), so tests/conftest.py sets FAST_COMPILE
before JAX starts: XLA:CPU at backend optimisation level 0 compiles the suite's programs in about
two thirds of the time, and tests check what is computed, not how fast. A caller's own
optimisation level in XLA_FLAGS is kept.
"""

from __future__ import annotations

import os

FAST_COMPILE = "--xla_backend_optimization_level=0"
_DEVICE_COUNT = "--xla_force_host_platform_device_count"


def suite_flags(flags: str) -> str:
    """`flags` with FAST_COMPILE added unless they set an optimisation level themselves."""
    if "--xla_backend_optimization_level" in flags:
        return flags
    return f"{flags} {FAST_COMPILE}".strip()


def with_host_devices(devices: int | None = None, env=os.environ) -> str:
    """XLA_FLAGS for a subprocess: `env`'s, without any forced host device count, then with
    `devices` host devices where given."""
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(_DEVICE_COUNT)]
    if devices is not None:
        flags.append(f"{_DEVICE_COUNT}={devices}")
    return " ".join(flags)
