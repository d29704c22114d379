"""azjax.xla_flags: the commands' XLA option (while loops as CUDA graphs on a GPU)."""

import os
import subprocess
import sys

from azjax import xla_flags

ADDED = f"{xla_flags.FLAG}={xla_flags.ADDED}"


def test_added_to_what_the_user_set():
    assert xla_flags.with_defaults("", "0.11.2") == ADDED
    assert (
        xla_flags.with_defaults("--xla_dump_to=/tmp/d", "0.6.0") == f"--xla_dump_to=/tmp/d {ADDED}"
    )


def test_the_users_own_setting_and_old_jax_are_left_alone():
    mine = "--xla_gpu_enable_command_buffer=+FUSION"
    assert xla_flags.with_defaults(mine, "0.11.2") == mine
    assert xla_flags.with_defaults("", "0.5.3") == ""
    assert xla_flags.with_defaults("--a=1", "0.4.38") == "--a=1"
    assert xla_flags.with_defaults("", "0.10.0.dev20260101") == ADDED


def test_enable_after_the_backend_started_changes_nothing():
    import jax

    jax.devices()  # the test process's backend has started
    environ = {}
    assert xla_flags.enable(environ) is None
    assert environ == {}


def test_a_fresh_process_runs_with_the_option():
    """Set before the backend starts, XLA accepts the option (an XLA flag it did not know would
    end the process) and JAX computes as before."""
    code = (
        "import os, jax, jax.numpy as jnp\n"
        "from azjax import xla_flags\n"
        "print(xla_flags.enable())\n"
        "print(int(jax.jit(lambda x: x.sum())(jnp.arange(4))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != xla_flags.ENV}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == [ADDED, "6"]


def test_programs_that_are_not_azjax_get_the_environment_without_the_option():
    assert xla_flags.without_added({"XLA_FLAGS": ADDED, "HOME": "/h"}) == {"HOME": "/h"}
    environ = {"XLA_FLAGS": f"--xla_dump_to=/d {ADDED}"}
    assert xla_flags.without_added(environ) == {"XLA_FLAGS": "--xla_dump_to=/d"}
    mine = {"XLA_FLAGS": "--xla_gpu_enable_command_buffer=+FUSION"}
    assert xla_flags.without_added(mine) == mine
