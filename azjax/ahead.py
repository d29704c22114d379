"""Programs compiled ahead, on a background thread, while the training loop plays.

On a machine's first run most of an in-loop evaluation's time is compiling its programs: in the
README's Tic-Tac-Toe run, 50 of the first evaluation's 56 seconds on a 2-core CPU (the matches
against the previous network and pure MCTS, the ladder's rungs, the exact error rate's search).
`Ahead` compiles the next evaluation's programs on a thread of its own while self-play and
learning run; XLA compiles without holding Python's lock, and jit's cache then holds each
program for the evaluation's own call, which only plays.

    ahead = Ahead()
    ahead.start(lambda: evaluate(previous, previous, key, compile_only=True))
    ...                          # the iterations up to the evaluation
    ahead.wait()                 # never two compilations of one program at once
    evaluate(variables, previous, key)

The loop does this where `wanted(config.eval_compile_ahead)`: by default where self-play runs on
a GPU or TPU, whose host's cores are idle while the device plays. On a CPU the thread takes the
cores self-play uses, and the run took no less time (`wanted`). A failure on the thread is
kept (`error`) and otherwise ignored: the evaluation compiles the program again and reports what
goes wrong there, with its traceback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax


def wanted(setting: str) -> bool:
    """Whether to compile ahead under `eval_compile_ahead=setting` ("auto", "on", "off"): auto
    where the default device is a GPU or TPU. On a 2-core CPU the thread takes the cores
    self-play runs on: the README's Tic-Tac-Toe run to its first evaluation took 133 and 140 s
    with it, 116 and 137 s without (docs/benchmarks.md, "Compiling the evaluation ahead")."""
    return setting == "on" or (setting == "auto" and jax.default_backend() != "cpu")


def compile_for(fn: Any, *args) -> None:
    """Compiles the jitted `fn` for `args` without running it; a later `fn(*args)` with arguments
    of the same shapes, types and shardings finds the program in jit's cache."""
    fn.lower(*args).compile()


class Ahead:
    """One background compilation at a time (module doc)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self, compile_programs: Callable[[], Any]) -> None:
        """Runs `compile_programs()` on a new thread, after the last one has finished."""
        self.wait()

        def run() -> None:
            try:
                compile_programs()
            except Exception as e:  # the evaluation meets it again, on the loop's thread
                self.error = e

        self._thread = threading.Thread(target=run, name="azjax-compile-ahead", daemon=True)
        self._thread.start()

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self) -> None:
        """Returns once the compilation in flight, if any, has finished."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
