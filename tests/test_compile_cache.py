"""The commands' persistent compilation cache (azjax/compile_cache.py): where it goes, how the
environment moves or stops it, and that a run loading its programs from it learns the same."""

import json
import os
import subprocess
import sys

import jax
import pytest
from toy import TTT_RUN

from azjax import compile_cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_compilation_cache_max_size",
)


@pytest.fixture
def jax_settings():
    """JAX's cache settings as the suite set them, restored after the test."""
    before = {name: getattr(jax.config, name) for name in SETTINGS}
    yield
    for name, value in before.items():
        jax.config.update(name, value)


def test_on_by_default_under_the_users_cache_folder(tmp_path, jax_settings):
    folder = compile_cache.enable({"XDG_CACHE_HOME": str(tmp_path)})
    assert folder == str(tmp_path / "azjax" / "xla") and os.path.isdir(folder)
    assert jax.config.jax_compilation_cache_dir == folder
    assert jax.config.jax_compilation_cache_max_size == compile_cache.MAX_BYTES
    minimum = jax.config.jax_persistent_cache_min_compile_time_secs
    assert minimum == compile_cache.MIN_COMPILE_SECONDS
    home = compile_cache.default_folder({})
    assert home == os.path.join(os.path.expanduser("~"), ".cache", "azjax", "xla")


def test_the_environment_moves_it_or_turns_it_off(tmp_path, jax_settings):
    before = jax.config.jax_compilation_cache_dir
    assert compile_cache.enable({compile_cache.ENV: ""}) is None  # off
    assert jax.config.jax_compilation_cache_dir == before
    named = str(tmp_path / "mine")
    jax.config.update("jax_compilation_cache_max_size", 12345)  # as JAX read it from theirs
    environ = {compile_cache.ENV: named, "JAX_COMPILATION_CACHE_MAX_SIZE": "12345"}
    assert compile_cache.enable(environ) == named  # JAX reads the folder itself
    assert jax.config.jax_compilation_cache_max_size == 12345  # their size stands
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert compile_cache.enable({"XDG_CACHE_HOME": str(a_file)}) is None  # cannot be made: off


def test_a_named_folder_that_cannot_be_made_is_one_line_and_off(tmp_path, jax_settings, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("")
    jax.config.update("jax_compilation_cache_dir", str(a_file))  # as JAX read it
    assert compile_cache.enable({compile_cache.ENV: str(a_file)}) is None
    assert jax.config.jax_compilation_cache_dir is None  # JAX would warn at every compile
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be made" in err[0] and "without the cache" in err[0]


def test_a_folder_that_takes_no_files_is_off_and_a_relative_xdg_home_ignored(
    tmp_path, jax_settings, capsys, monkeypatch
):
    """An existing read-only folder passed the makedirs check, and JAX then warned at every
    compile; a relative XDG_CACHE_HOME put a cache under every folder a command ran from."""
    import tempfile

    assert compile_cache.default_folder({"XDG_CACHE_HOME": "relcache"}) == (
        compile_cache.default_folder({})
    )
    named = tmp_path / "ro"
    named.mkdir()

    def read_only(dir):
        raise PermissionError(13, "Permission denied", dir)

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)  # root writes whatever chmod says
    assert compile_cache.enable({"XDG_CACHE_HOME": str(tmp_path)}) is None
    assert compile_cache.enable({compile_cache.ENV: str(named)}) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be made or written (Permission denied)" in err[0]


def _toy_run(workdir, env):
    done = subprocess.run(
        [
            sys.executable,
            "train.py",
            *TTT_RUN,
            "--iterations=2",
            f"--workdir={workdir}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line)["loss/total"] for line in f]


@pytest.mark.integration  # two training runs as scripts
def test_a_second_run_loads_the_first_runs_programs_and_learns_the_same(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "home-cache"), JAX_PLATFORMS="cpu")
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # the toy's programs compile fast
    first = _toy_run(tmp_path / "first", env)
    folder = tmp_path / "home-cache" / "azjax" / "xla"
    entries = {n for n in os.listdir(folder) if n.endswith("-cache")}
    assert entries  # self-play and the learner, at least
    second = _toy_run(tmp_path / "second", env)
    assert {n for n in os.listdir(folder) if n.endswith("-cache")} == entries  # all loaded
    assert second == first  # the same programs, the same seed: the same losses
