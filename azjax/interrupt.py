"""Stopping on request: SIGINT (Ctrl-C) and SIGTERM (preemption, a batch system's time limit).

    with StopSignals("finishing iteration 12, then saving") as stop:
        while not stop.requested:
            ...                                # one unit of work
    if stop.signum: raise Interrupted(stop.signum, "checkpoint 12 saved; continue with --resume")

The first signal only sets `stop.requested` (and prints `note` once, on stderr): the work finishes
its current unit, saves and stops. A second one raises `Interrupted` at once, wherever the program
is, and puts the default handlers back, so a third ends the process the usual way.

`Interrupted` is a KeyboardInterrupt (code that catches Ctrl-C still does) whose `exit_code` is
128 + the signal number (130 for SIGINT, 143 for SIGTERM), the shells' convention.

`run_interruptibly(fn)` runs a long call (a search compiled by XLA, which Python cannot interrupt)
in a worker thread, so that Ctrl-C stops the waiting at once.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_exiting = [False]  # within `exits_at_once`: an `at_once` stop ends the process by os._exit


@contextlib.contextmanager
def exits_at_once():
    """Within it (`azjax.cli.run`), a stop `at_once` ends the process by `os._exit`, so the work
    stopped need not wait for threads that may be inside XLA (a compilation in flight); outside
    (a Python caller of `azjax.train_and_evaluate`, whose interpreter then shuts down with them)
    it waits for them."""
    before, _exiting[0] = _exiting[0], True
    try:
        yield
    finally:
        _exiting[0] = before


def exiting_at_once() -> bool:
    """Whether an `at_once` stop ends the process by `os._exit` (`exits_at_once`)."""
    return _exiting[0]


class Interrupted(KeyboardInterrupt):
    """The program was stopped by a signal; `message` says what was kept. `at_once`: raised by
    the signal's handler wherever the program was (a second signal, or one with no step to
    finish), perhaps inside XLA's native code: the process should then end without the
    interpreter's shutdown (`azjax.cli.run` leaves by `os._exit`), which can crash there."""

    def __init__(self, signum: int, message: str = "", *, at_once: bool = False):
        super().__init__(message)
        self.signum, self.message, self.at_once = signum, message, at_once

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopSignals:
    """SIGINT and SIGTERM ask the work to stop (see the module doc). Outside the main thread,
    where Python cannot install handlers, it does nothing."""

    def __init__(self, note: str | Callable[[], str] = "stopping after the current step"):
        self.note = note
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}
        self._shielded = False
        self._deferred: int | None = None
        self._at_once: int | None = None  # a second signal's, for `check`
        self._quiet = contextlib.ExitStack()

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _handle(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum
            note = self.note() if callable(self.note) else self.note
            print(
                f"\n{signal.Signals(signum).name}: {note} (send it again to stop at once)",
                file=sys.stderr,
                flush=True,
            )
            return
        if self._shielded and self._deferred is None:
            self._deferred = signum
            print(
                f"\n{signal.Signals(signum).name}: finishing the checkpoint being written "
                "(send it again to stop at once)",
                file=sys.stderr,
                flush=True,
            )
            return
        self._at_once = signum
        self._restore()
        raise Interrupted(signum, at_once=True)

    def check(self) -> None:
        """Raises the second signal's `Interrupted` again where its handler's was lost: a handler
        that runs inside a callback from native code (XLA's, while it compiles) raises into code
        that only reports it ("Exception ignored in"), and the work would go on to its first
        signal's stop."""
        if self._at_once is not None:
            raise Interrupted(self._at_once, at_once=True)

    @contextlib.contextmanager
    def shield(self):
        """Within it (a checkpoint being written), a second signal waits until the end of the
        block, so that the checkpoint is finished; a third one still stops at once."""
        self._shielded = True
        try:
            yield
        finally:
            self._shielded = False
        if self._deferred is not None:
            self._restore()
            raise Interrupted(self._deferred, at_once=True)

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
            # a lost second signal is acted on by `check`
            self._quiet.enter_context(_unreported(lambda e: isinstance(e, Interrupted)))
        return self

    def __exit__(self, *exc) -> None:
        self._restore()
        self._quiet.close()


@contextlib.contextmanager
def _unreported(lost: Callable[[BaseException], bool]):
    """Within it, Python leaves out its report ("Exception ignored in" and a traceback) of an
    exception raised into code that only reports it where `lost(exception)`: a signal handler's
    `Interrupted` raised inside a callback from native code (XLA's), which the code that acts on
    it instead (`StopSignals.check`, `run_interruptibly`'s wait) stops on with its own line."""
    previous = sys.unraisablehook

    def hook(unraisable) -> None:
        if not lost(unraisable.exc_value):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


@contextlib.contextmanager
def raise_on_signals():
    """Within it, SIGTERM raises `Interrupted` as Ctrl-C does (SIGINT too, as `Interrupted`),
    where the program cannot stop step by step: it keeps what it has and stops. Outside the main
    thread it does nothing."""

    def handle(signum, frame):
        _RAISED.append(signum)  # until it reaches `run_interruptibly`'s wait (`_raise_lost`)
        raise Interrupted(signum, at_once=True)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handle) for signum in SIGNALS}
    _RAISED.clear()
    try:  # a lost signal, still in _RAISED, is raised by the next wait (`_raise_lost`)
        with _unreported(lambda e: isinstance(e, Interrupted) and bool(_RAISED)):
            yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _RAISED.clear()


# the signals `raise_on_signals`' handler raised that have not reached the waiting thread: a
# handler that runs inside a callback from native code (XLA's garbage-collection callback, while
# the main thread waits) raises into code that only reports it ("Exception ignored in"), and the
# command went on until its work ended (a CI run's test of a stopped tournament waited 30 s)
_RAISED: list[int] = []


def _raise_lost() -> None:
    if _RAISED:
        signum = _RAISED[-1]
        _RAISED.clear()
        raise Interrupted(signum, at_once=True)


def run_interruptibly(fn: Callable[[], Any], *, finish: bool = False) -> Any:
    """fn() in a worker thread while this thread waits, so a signal (`Interrupted`, or
    KeyboardInterrupt) reaches the caller at once instead of after the call, and each signal
    its own handler's call (signals that arrive while the main thread is inside native code are
    merged into one). The interrupted call goes on in its daemon thread; the caller is expected
    to end the process, or with `finish` the exception waits for the call to end."""
    box: dict[str, Any] = {}

    def work():
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the waiting thread
            box["error"] = e

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.05)
            _raise_lost()
    except BaseException:
        _RAISED.clear()  # raised here: not lost
        if finish:  # no thread left inside XLA for the interpreter's shutdown to meet
            thread.join()
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]
