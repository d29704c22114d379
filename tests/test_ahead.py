"""azjax.ahead: programs compiled on background threads before the evaluation that runs them."""

import threading
import time

import jax
import jax.numpy as jnp
import pytest

from azjax.ahead import Ahead, compile_clock, compile_for, default_workers, wanted


def _programs(n):
    """n distinct jitted functions (each its own program) and an argument for them."""
    return [jax.jit(lambda x, i=i: x * (i + 2) + 1) for i in range(n)], jnp.ones(3)


def test_a_pool_compiles_the_programs_side_by_side_into_jits_cache(lowerings):
    fns, x = _programs(3)
    ahead = Ahead(workers=2)
    ahead.start(lambda: [compile_for(f, x) for f in fns])
    ahead.wait()
    assert ahead.error is None and not ahead.busy()
    with lowerings() as lowered:
        results = [f(x) for f in fns]
    assert lowered == []  # compiled on the pool, found in jit's cache
    assert [float(r[0]) for r in results] == [3.0, 4.0, 5.0]
    ahead.close()
    ahead.close()  # nothing left: returns at once


@pytest.mark.parametrize("workers", [1, 2])
def test_the_evaluation_drops_what_has_not_started(lowerings, workers):
    fns, x = _programs(2)
    ahead, lowered_first, gate = Ahead(workers=workers), threading.Event(), threading.Event()

    def compile_programs():
        compile_for(fns[0], x)
        lowered_first.set()
        gate.wait()  # the evaluation falls due here
        compile_for(fns[1], x)  # dropped: raises on the thread, ends the call quietly

    ahead.start(compile_programs)
    lowered_first.wait()
    waiting = threading.Thread(target=ahead.wait, kwargs=dict(drop_pending=True))
    waiting.start()
    while not ahead.dropping.is_set():
        waiting.join(0.01)
    gate.set()
    waiting.join()
    assert ahead.error is None and not ahead.busy()
    with lowerings() as lowered:
        fns[0](x)
    assert lowered == []  # compiled before the drop
    with lowerings() as lowered:
        fns[1](x)
    assert len(lowered) == 1  # dropped: compiled by its own call
    ahead.start(lambda: compile_for(_programs(1)[0][0], x))  # a new call is not dropped
    ahead.wait()
    assert ahead.error is None
    ahead.close()


def test_a_failure_on_the_pool_is_kept():
    class Lowered:
        def compile(self):
            raise RuntimeError("no such instruction")

    class Program:
        def lower(self, *args):
            return Lowered()

    ahead = Ahead(workers=2)
    ahead.start(lambda: compile_for(Program()))
    ahead.close()
    assert isinstance(ahead.error, RuntimeError) and not ahead.busy()


def test_how_many_compile_at_once():
    assert [default_workers(c) for c in (1, 2, 4, 16, 64)] == [1, 1, 2, 8, 8]
    assert default_workers() >= 1
    with pytest.raises(ValueError, match="workers must be at least 1"):
        Ahead(workers=0)


def test_auto_compiles_ahead_where_the_host_has_a_core_to_spare():
    assert wanted("auto", cpus=2) and wanted("auto", cpus=16) and not wanted("auto", cpus=1)
    assert wanted("on", cpus=1) and not wanted("off", cpus=16)


def test_auto_counts_the_cores_the_process_may_run_on(monkeypatch):
    """Pinned to one core (`taskset -c 0`) the host's other cores are not spare: the default
    counts the process's affinity (`parallel.usable_cpus`), not os.cpu_count()."""
    import azjax.ahead

    monkeypatch.setattr(azjax.ahead, "usable_cpus", lambda: 1)
    assert not wanted("auto") and wanted("on") and default_workers() == 1
    monkeypatch.setattr(azjax.ahead, "usable_cpus", lambda: 6)
    assert wanted("auto") and default_workers() == 3


def test_the_compile_clock_merges_nested_spans_and_ignores_other_events():
    from jax import monitoring

    trace, compile_ = (
        "/jax/core/compile/jaxpr_trace_duration",
        ("/jax/core/compile/backend_compile_duration"),
    )
    t = time.time() + 100.0  # JAX's spans are time.time()'s
    with compile_clock() as compiling:
        monitoring.record_event_time_span(trace, t + 10.0, t + 12.0)
        monitoring.record_event_time_span(trace, t + 10.5, t + 11.0)  # nested in the first: once
        monitoring.record_event_time_span(compile_, t + 11.5, t + 13.0)  # overlaps it
        monitoring.record_event_time_span(compile_, t + 20.0, t + 20.25)
        monitoring.record_event_time_span("/jax/something/else", t + 30.0, t + 40.0)
        monitoring.record_event_time_span(trace, t - 1000.0, t - 900.0)  # before the block
    monitoring.record_event_time_span(trace, t + 50.0, t + 60.0)  # after the block: not counted
    assert compiling() == pytest.approx(3.25)
    with compile_clock() as compiling:  # a span begun before the block counts from its start
        opened = time.time()
        monitoring.record_event_time_span(compile_, opened - 1000.0, opened + 2.0)
    assert 2.0 <= compiling() <= 2.0 + (time.time() - opened) + 0.5


def test_the_compile_clock_counts_a_calls_compiling_and_not_its_running():
    inner = jax.jit(lambda x: jnp.cos(x) * 3)
    fn = jax.jit(lambda x: jnp.sin(inner(x)) + 7)  # a jit inside: its trace nests in fn's
    x = jnp.arange(5.0)
    with compile_clock() as compiling:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(x))
        wall = time.perf_counter() - t0
    assert 0 < compiling() <= wall
    with compile_clock() as compiling:
        jax.block_until_ready(fn(x))  # in jit's cache
        time.sleep(0.01)
    assert compiling() == 0
