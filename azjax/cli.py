"""What every command (azjax-train or train.py, evaluate, play) does with errors and signals.

    def main(argv=None) -> int:                       # azjax/commands/train.py
        return cli.run(prog("train.py"), _main, sys.argv[1:] if argv is None else argv)

PROG is the name the user ran, `azjax-train` or `train.py` (`azjax.commands.prog`).

An error the user can fix (a bad value, a file that cannot be written, a full disk, too little
memory, a diverged run) ends as one line, `PROG: error: what and how to fix it`, and exit code 2;
`--debug` anywhere on the command line shows its traceback instead. Anything else is a bug and
keeps its traceback. SIGINT and SIGTERM end with `PROG: SIGINT: what was kept` and 130 or 143
(`azjax.interrupt.Interrupted`). With `threaded=True` (evaluate.py, play.py: their work is
long calls into XLA that Python cannot interrupt) the work runs in a worker thread, and a signal
ends the process at once (`os._exit`), after what the work wrote so far. Every command keeps
its compiled programs in the persistent compilation cache (`azjax.compile_cache`).
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable

from azjax.checkpoint import describe_os_error
from azjax.interrupt import Interrupted, exits_at_once, raise_on_signals, run_interruptibly

MEMORY_HINT = (
    "lower --batch_games, --train_batch_size, --replay_games, --num_simulations or the "
    "network (--num_blocks, --num_filters)"
)


# optional packages some commands and benchmarks import (module: what pip installs)
PACKAGES = {"pgx": "pgx", "pyspiel": "open-spiel", "open_spiel": "open-spiel"}


def user_message(
    e: BaseException, memory_hint: str = MEMORY_HINT, folder: str = "--workdir"
) -> str | None:
    """The one-line explanation of an error the user can fix, or None for a bug; `memory_hint`
    says what to lower when memory runs out, `folder` what to choose another of when a folder
    cannot be written (the command's output flag)."""
    health = sys.modules.get("azjax.health")  # loaded with the loop; jax is not imported here
    if health is not None and isinstance(e, health.DivergenceError):
        return str(e)
    if isinstance(e, MemoryError):
        return f"out of host memory; {memory_hint}"
    if isinstance(e, ModuleNotFoundError) and e.name and e.name.split(".")[0] in PACKAGES:
        package = PACKAGES[e.name.split(".")[0]]
        return (
            f"this needs {package}, which is not installed (pip install {package}, or the test "
            "extras: pip install -e '.[test]')"
        )
    if isinstance(e, OSError) and e.filename == STDOUT:
        return f"{STDOUT}: {e.strerror or e} (the output could not be written where it was sent)"
    if isinstance(e, OSError):
        return describe_os_error(e, folder)
    text = str(e)
    if "RESOURCE_EXHAUSTED" in text and "os_error_code" not in text:  # XLA's out of memory
        first = text.strip().splitlines()[0][:160]
        return f"out of memory ({first}); {memory_hint}"
    if isinstance(e, ValueError):
        return text
    return None


_ON_STOP: list[Callable[[], None]] = []  # tidy-ups the work asks for should a signal end it


def tidy_on_stop(fn: Callable[[], None]) -> Callable[[], None]:
    """As `tidied_on_stop`, for what outlives a block (a GTP engine's process, which runs in a
    session of its own, so that a terminal's Ctrl-C no longer ends it): fn() is called should a
    signal end a threaded command; returns the call that takes it back."""
    _ON_STOP.append(fn)
    return lambda: _ON_STOP.remove(fn) if fn in _ON_STOP else None


@contextlib.contextmanager
def tidied_on_stop(fn: Callable[[], None]):
    """Within the block, a signal that ends a threaded command calls fn() before the process
    leaves (its `finally` clauses never run: the worker is left inside XLA); fn's errors are
    ignored."""
    forget = tidy_on_stop(fn)
    try:
        yield
    finally:
        forget()


def _usable_streams() -> None:
    """Standard streams a command can always use: a closed one (`<&-`, `>&-`: None in Python)
    reads as an empty file or writes to nothing, and text the locale cannot encode (an ASCII
    locale and a '±') is escaped rather than an error after the work is done."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode))
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, io.UnsupportedOperation):
            stream.reconfigure(errors="backslashreplace")


STDOUT = "standard output"  # the file name its write errors carry (`_Named`)


class _Named:
    """Standard output whose write errors name it: an OSError without a file name read as the
    output folder's (`train.py > /dev/full` said the disk was full and to choose another
    --workdir, the run saved)."""

    def __init__(self, stream, name: str):
        self._stream, self._name = stream, name

    def _named(self, method: str, *args):
        try:
            return getattr(self._stream, method)(*args)
        except OSError as e:
            if not e.filename:
                e.filename = self._name
            raise

    def write(self, text):
        return self._named("write", text)

    def flush(self):
        return self._named("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def _named_stdout():
    """Within the block, sys.stdout's write errors name it (`_Named`)."""
    outer = sys.stdout
    if isinstance(outer, _Named):
        yield
        return
    sys.stdout = _Named(outer, STDOUT)
    try:
        yield
    finally:
        if isinstance(sys.stdout, _Named):
            sys.stdout = outer


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (poll reports an error on it)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _, event in poll.poll(0))
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False


@contextlib.contextmanager
def _signals_ignored():
    """SIGINT and SIGTERM ignored within the block (in the main thread; elsewhere no handler can
    be set), their handlers put back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def fail(prog: str, message: object, code: int = 2) -> int:
    """Print the one line `PROG: error: MESSAGE` to stderr; return the exit `code`."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return code


def run(
    prog: str,
    body: Callable[[list[str]], int],
    argv: list[str],
    *,
    threaded: bool = False,
    stopped: str = "stopped",
    setup: bool = True,
    memory_hint: str = MEMORY_HINT,
    folder: str = "--workdir",
    debug: bool = False,
) -> int:
    """body(argv)'s exit code, with errors and signals handled as the module doc says;
    `stopped` is what a signal's line says was kept, `memory_hint` what to lower when memory
    runs out (training's flags by default), `folder` what to choose another of when a folder
    cannot be written (training's --workdir by default). `setup=False` leaves the compilation
    cache and XLA's flags as the environment has them (`script`); `debug` (or `--debug` in
    `argv`) lets a user error's traceback through."""
    debug = debug or "--debug" in argv
    _usable_streams()
    if setup:
        from azjax import compile_cache, xla_flags

        compile_cache.enable()  # before anything compiles: later runs load what this one compiles
        xla_flags.enable()  # before the backend starts: a GPU runs while loops as CUDA graphs
    try:
        # SIGTERM ends like Ctrl-C, with a line and 143, not silently; a stop at once by os._exit
        with raise_on_signals(), exits_at_once(), _named_stdout():
            if threaded:
                return run_interruptibly(lambda: body(argv))
            return body(argv)
    except KeyboardInterrupt as e:
        with _signals_ignored():  # a second signal here (`timeout` signals the process and
            # its group: two at once) ended in a traceback and an abort, the tidying undone
            signum = e.signum if isinstance(e, Interrupted) else 2
            name = e.name if isinstance(e, Interrupted) else "SIGINT"
            message = (e.message if isinstance(e, Interrupted) else "") or stopped
            print(f"{prog}: {name}: {message}", file=sys.stderr, flush=True)
            # the worker, or this thread where the signal's handler raised (`at_once`), may be
            # inside XLA: leave without waiting for it, and without the interpreter's shutdown,
            # which can crash there (a second Ctrl-C during a compile ended in a segmentation
            # fault)
            if threaded or getattr(e, "at_once", False):
                for tidy in list(_ON_STOP):
                    with contextlib.suppress(Exception):
                        tidy()
                sys.stdout.flush()
                os._exit(128 + signum)
        return 128 + signum
    except Exception as e:
        if isinstance(e, BrokenPipeError) and _stdout_closed():
            # the reader of the output stopped early (`| head`): end quietly, as Unix tools do,
            # standard output pointed at nothing so that the flush at exit does not fail again
            # (a pipe of the command's own, a GTP engine's, is an error as any other)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + signal.SIGPIPE
        message = user_message(e, memory_hint, folder)
        if message is None or debug:
            raise
        _leave_if_stuck(prog, fail(prog, message))
        return 2


def script(module: str, main: Callable[[list[str]], object]) -> int:
    """The exit code of `python -m MODULE` (an experiment or a benchmark): main(argv) with errors
    and signals handled as the commands' (one line naming the problem, exit code 2; 130 or 143),
    `prog` being `python -m MODULE` as its argparse usage names it. What the module sets up for
    its measurements (the compilation cache, XLA's flags) it keeps setting itself; a `main` that
    returns its results rather than a code ends with 0. `--debug` is taken out of the arguments
    (the module's parser does not know it) and shows tracebacks, as in the commands."""
    argv = sys.argv[1:]
    given = [a for a in argv if a != "--debug"]
    code = run(
        f"python -m {module}",
        main,
        given,
        setup=False,
        folder="folder",
        debug=len(given) < len(argv),
    )
    return code if isinstance(code, int) else 0


def _leave_if_stuck(prog: str, code: int, wait: float = 10.0) -> None:
    """In a script, end the process now when threads it cannot finish without are still busy
    `wait` seconds after an error (orbax's, after a failed save), rather than hang at exit; one
    of several processes (`--distributed`) at once."""
    if os.path.basename(sys.argv[0]) != prog:
        return  # called as a function (tests, notebooks): the caller decides
    parallel = sys.modules.get("azjax.parallel")
    if parallel is not None and parallel.distributed():  # the others would wait for it forever
        sys.stdout.flush()  # in a collective, and it for them in JAX's shutdown: leave now
        sys.stderr.flush()
        os._exit(code)
    busy = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    deadline = time.monotonic() + wait
    for thread in busy:  # Thread's own join: orbax's raises on a timeout, or the thread's error
        threading.Thread.join(thread, max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in busy):
        sys.stdout.flush()
        os._exit(code)
