"""Fixtures shared across test files, and the `integration` mark.

The test files that train networks, run the scripts as processes, play experiments or benchmarks
end to end are marked `integration`; `python -m pytest -q -m "not integration"` runs the rest (the
rules, search, learner, agents and formats: a few minutes) as a first check.
"""

import os
import shutil
import tempfile

from xla_flags import suite_flags

# Set before JAX is imported, so that both xdist workers and the scripts they start inherit it
# (tests/xla_flags.py says why).
os.environ["XLA_FLAGS"] = suite_flags(os.environ.get("XLA_FLAGS", ""))

# One XLA compilation cache for the whole suite, set before JAX is imported so that the test
# processes (both xdist workers) and the scripts they start as subprocesses all read and write it:
# many tests compile the same toy programs. Entries are keyed by the program and the JAX and XLA
# versions, so a cache left from an earlier run is only ever a hit or a miss; at most 2 GiB, the
# least recently used entries go first. Set JAX_COMPILATION_CACHE_DIR to put it elsewhere. JAX
# locks the cache with `filelock` (a dependency) when it has a size limit; without the lock two
# processes could read a half-written entry, so without filelock there is no cache.
try:
    import filelock  # noqa: F401
except ImportError:
    pass
else:
    os.environ.setdefault(
        "JAX_COMPILATION_CACHE_DIR",
        os.path.join(
            tempfile.gettempdir(), f"azjax-tests-xla-cache-{getattr(os, 'getuid', str)()}"
        ),
    )
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(2 * 2**30))

import pytest  # noqa: E402

import azjax  # noqa: E402


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which makes an unset --dist "load"
def pytest_cmdline_main(config):
    """With -n, each xdist worker takes whole files (`--dist loadfile`: a file's module-scoped
    fixtures compile once, in one worker) unless the command line chose a --dist. Set here, not
    in pyproject's addopts, where `-p no:xdist` (a debugger's run) failed on the unknown option."""
    if config.pluginmanager.hasplugin("xdist") and config.option.numprocesses:
        if config.option.dist == "no":
            config.option.dist = "loadfile"


INTEGRATION = {
    "test_adding_a_game.py",
    "test_api_doc.py",
    "test_benchmarks_games.py",
    "test_benchmarks_selfplay.py",
    "test_distributed.py",
    "test_eval_opponent.py",
    "test_evaluate.py",
    "test_exit.py",
    "test_experiments.py",
    "test_gating.py",
    "test_ladder.py",
    "test_notebooks.py",
    "test_parallel.py",
    "test_reliability.py",
    "test_training.py",
    "test_transfer.py",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in INTEGRATION:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> str:
    """A 2-iteration Tic-Tac-Toe run (1 block, 4 filters, checkpoints 1 and 2), trained once per
    test session for the evaluation and experiment tests."""
    workdir = str(tmp_path_factory.getbasetemp() / "tiny_ttt_run")
    if not os.path.exists(os.path.join(workdir, "summary.json")):
        shutil.rmtree(workdir, ignore_errors=True)
        config = azjax.load_config(
            "tictactoe",
            dict(
                num_blocks=1,
                num_filters=4,
                value_hidden=4,
                batch_games=8,
                num_simulations=4,
                train_steps=2,
                train_batch_size=16,
                replay_games=50,
                iterations=2,
                checkpoint_interval=1,
                eval_interval=0,
            ),
        )
        azjax.train_and_evaluate(config, workdir, progress=False)
    return workdir


_LOWERING = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_counting: list[list[float]] = []  # the open `lowerings()` blocks' counts


def _count_lowering(event: str, seconds: float, **kwargs) -> None:
    if event == _LOWERING:
        for seen in _counting:
            seen.append(seconds)


@pytest.fixture(scope="session")
def lowerings():
    """`with lowerings() as seen: ...` -> `seen` lists one entry per program JAX lowered inside
    the block (every compilation lowers first, a hit in the persistent compilation cache too; a
    program in jit's own cache is not lowered again)."""
    import contextlib

    from jax import monitoring

    monitoring.register_event_duration_secs_listener(_count_lowering)

    @contextlib.contextmanager
    def block():
        seen: list[float] = []
        _counting.append(seen)
        try:
            yield seen
        finally:
            _counting.remove(seen)

    return block
