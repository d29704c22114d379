"""Programs compiled ahead, on background threads, while the training loop plays.

On a machine's first run most of an in-loop evaluation's time is compiling its programs: in the
README's Tic-Tac-Toe run, 50 of the first evaluation's 56 seconds on a 2-core CPU (the matches
against the previous network and pure MCTS, the ladder's rungs, the exact error rate's search).
`Ahead` runs the next evaluation's `compile_only` call on a thread of its own while self-play
and learning run; jit's cache then holds each program for the evaluation's own call, which only
plays. The thread lowers each program (Python, one at a time) and hands its compilation to a
pool of `workers` threads: XLA compiles without holding Python's lock, so on a many-core host
the programs compile side by side.

    ahead = Ahead(workers=4)
    ahead.start(lambda: evaluate(previous, previous, key, compile_only=True))
    ...                          # the iterations up to the evaluation
    ahead.wait(drop_pending=True)  # what is compiling finishes; what has not started is dropped
    evaluate(variables, previous, key)  # compiles, in jit's cache, whatever was dropped

`compile_only` calls list their programs most wanted first (the ladder's: the rungs its
placement plays first, then outwards), so the evaluation can drop the rest: asking for more than
it plays costs the host's idle cores, never the evaluation's time. A program is never compiled
twice at once: the evaluation starts after the compilations in flight have finished.

The loop does this where `wanted(config.eval_compile_ahead)` (by default wherever the process
may run on two cores or more), from the end of a session's first iteration (which compiles
self-play and the learner: lowering takes Python's lock, and on an H200 a pool started
alongside made that iteration 15 - 18 s longer). On a GPU or TPU the host's cores are idle while
the device plays; on a CPU the threads take cores from self-play, which then takes longer, but
less than the evaluation saves (`wanted`). A failure on a thread is kept (`error`) and otherwise
ignored: the evaluation compiles the program again and reports what goes wrong there, with its
traceback.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from jax import monitoring

from azjax.parallel import usable_cpus

MAX_WORKERS = 8  # compilations side by side at most: each holds a program's XLA passes in memory


def wanted(setting: str, cpus: int | None = None) -> bool:
    """Whether to compile ahead under `eval_compile_ahead=setting` ("auto", "on", "off"): auto
    where the process has a core to spare (`cpus`, default the CPUs it may run on,
    `parallel.usable_cpus()`: its affinity, so `taskset -c 0` counts one; at least 2). Measured
    (docs/benchmarks.md, "Compiling the evaluation ahead"): on an H200 the first evaluation of a
    9x9 Hex run took 24 - 70 s instead of 94; on the 2-core CPU, where the thread takes cores
    from self-play, the first runs to their first evaluation took 84 - 88 s instead of 95 - 103
    (Tic-Tac-Toe) and 378 s instead of 392 (6x6 Othello, the CPU recipe); pinned to one core
    the README's Tic-Tac-Toe run took 169 s with it and 168 s without (session 82)."""
    cpus = usable_cpus() if cpus is None else cpus
    return setting == "on" or (setting == "auto" and (cpus or 1) >= 2)


def default_workers(cpus: int | None = None) -> int:
    """Compilations side by side: half the process's cores (`parallel.usable_cpus()`; the other
    half for the loop and the device's runtime), at least 1 and at most MAX_WORKERS."""
    cpus = usable_cpus() if cpus is None else cpus
    return max(1, min(MAX_WORKERS, (cpus or 1) // 2))


class Dropped(Exception):
    """Raised by `compile_for` on an `Ahead` thread once `wait(drop_pending=True)` was called: the
    `compile_only` call ends there, its remaining programs left to the evaluation."""


_local = threading.local()  # .job: the `Ahead` whose thread this is, if any


def compile_for(fn: Any, *args) -> None:
    """Compiles the jitted `fn` for `args` without running it; a later `fn(*args)` with arguments
    of the same shapes, types and shardings finds the program in jit's cache. On an `Ahead`
    thread the compilation goes to its pool and this returns once the program is lowered."""
    job: Ahead | None = getattr(_local, "job", None)
    if job is None:
        fn.lower(*args).compile()
        return
    if job.dropping.is_set():
        raise Dropped
    lowered = fn.lower(*args)
    if job.dropping.is_set():
        raise Dropped
    job.submit(lowered.compile)


# JAX's time spans of making a program: tracing it, lowering it to MLIR, compiling it (a hit in
# the persistent compilation cache is a short compile)
COMPILE_EVENTS = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)


@contextlib.contextmanager
def compile_clock() -> Iterator[Callable[[], float]]:
    """`with compile_clock() as compiling: ...`, then `compiling()`: the seconds in the block that
    JAX spent making programs (`COMPILE_EVENTS`' time spans merged, so a trace nested in another
    counts once; a span begun before the block counts from its start). A timed call's wall time
    less this is what it takes with its program in jit's cache. The events come from every thread:
    for code that runs while nothing compiles beside it but what it waits for (the loop's
    evaluation, which waits for `Ahead`'s compiling)."""
    spans: list[tuple[float, float]] = []
    opened = time.time()  # JAX stamps its spans with time.time()

    def listen(event: str, start: float, end: float, **kwargs) -> None:
        if event in COMPILE_EVENTS:
            spans.append((start, end))

    def seconds() -> float:
        total, reach = 0.0, float("-inf")
        for start, end in sorted((max(s, opened), e) for s, e in spans if e > opened):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total

    monitoring.register_event_time_span_listener(listen)  # both since jax 0.8.1 (pyproject)
    try:
        yield seconds
    finally:
        monitoring.unregister_event_time_span_listener(listen)


class Ahead:
    """One background `compile_only` call at a time, its compilations on `workers` threads
    (default `default_workers()`; module doc)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = default_workers() if workers is None else workers
        if self.workers < 1:
            raise ValueError(f"Ahead: workers must be at least 1, got {self.workers}")
        self.error: BaseException | None = None
        self.dropping = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._futures: list[concurrent.futures.Future] = []
        self._lock = threading.Lock()

    def start(self, compile_programs: Callable[[], Any]) -> None:
        """Runs `compile_programs()` on a new thread, after the last one has finished."""
        self.wait()
        self.dropping.clear()

        def run() -> None:
            _local.job = self
            try:
                compile_programs()
            except Dropped:
                pass
            except Exception as e:  # the evaluation meets it again, on the loop's thread
                self.error = e

        self._thread = threading.Thread(target=run, name="azjax-compile-ahead", daemon=True)
        self._thread.start()

    def submit(self, compile_program: Callable[[], Any]) -> None:
        """Compiles on the pool (on the calling thread where `workers` is 1)."""
        if self.workers == 1:
            compile_program()
            return
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.workers, thread_name_prefix="azjax-compile"
                )
            self._futures.append(self._pool.submit(compile_program))

    def busy(self) -> bool:
        return (self._thread is not None and self._thread.is_alive()) or any(
            not f.done() for f in self._futures
        )

    def wait(self, drop_pending: bool = False) -> None:
        """Returns once the call in flight, if any, and its compilations have finished; with
        `drop_pending`, those not yet started are dropped, and so are the call's programs not yet
        lowered."""
        if drop_pending:
            self.dropping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            futures, self._futures = self._futures, []
        for f in futures:
            if drop_pending:
                f.cancel()  # False for one that is compiling: it finishes below
        for f in futures:
            if f.cancelled():
                continue
            e = f.exception()
            if e is not None and self.error is None:
                self.error = e

    def close(self) -> None:
        """Drops what has not started, waits for the rest and ends the pool's threads."""
        self.wait(drop_pending=True)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
