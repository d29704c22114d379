"""The commands' persistent XLA compilation cache: a program compiled once is loaded from disk
by every later run that compiles it again.

Compilation is much of a short run: on a 2-core CPU the README's Tic-Tac-Toe run spent about a
minute compiling self-play, the learner and the in-loop evaluation's matches, and every run of
the same recipe compiled them again (docs/benchmarks.md, "The commands' compilation cache"). JAX
can keep compiled programs on disk, keyed by the program, the compile options, the device and
the JAX and XLA versions, so an entry from another version or machine is only ever a miss.

`enable()` (called by `azjax.cli.run`, so by train.py, evaluate.py and play.py and their
`azjax-*` commands) turns the cache on at `default_folder()` (`$XDG_CACHE_HOME/azjax/xla`, else
`~/.cache/azjax/xla`), at most `MAX_BYTES`, the least recently used entries dropped first, with
JAX's file lock (`filelock`) between processes that share it. The environment decides otherwise:
`JAX_COMPILATION_CACHE_DIR=PATH` puts it at PATH (JAX's own variable, read as JAX documents) and
`JAX_COMPILATION_CACHE_DIR=` (empty) turns it off. Library code (`azjax.loop`, notebooks) is
left alone: a program calling `train_and_evaluate` sets JAX's cache itself, if it wants one.
A multi-process run on the CPU compiles without it (`azjax.parallel.initialize` says why).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

ENV = "JAX_COMPILATION_CACHE_DIR"
MAX_BYTES = 2 * 2**30
MIN_COMPILE_SECONDS = 0.5  # programs that compile faster than this are not worth a file


def default_folder(environ: Mapping[str, str] = os.environ) -> str:
    """`$XDG_CACHE_HOME/azjax/xla`, else `~/.cache/azjax/xla` (a relative XDG_CACHE_HOME is
    ignored, as the XDG spec says: it would put a cache in every folder a command runs from)."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "azjax", "xla")


def _usable(folder: str) -> None:
    """OSError unless `folder` exists, or can be made, and takes files: an existing read-only
    one would have JAX warn at every compile."""
    import tempfile

    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryFile(dir=folder):
        pass


def enable(environ: Mapping[str, str] = os.environ) -> str | None:
    """Turns the cache on before the first compilation (module doc); returns its folder, or None
    where the environment turns it off. Where the user names a folder, JAX has read it already
    and only the size limit is added; a folder that cannot be made leaves the cache off rather
    than stopping the command (a named one with a line on stderr saying so)."""
    import jax

    try:
        import filelock  # noqa: F401  (JAX locks a size-limited cache with it)
    except ImportError:  # a dependency; without it two processes could share a half-written file
        locked = False
    else:
        locked = True
    if ENV in environ:
        folder = environ[ENV]
        if not folder:
            return None
        try:
            _usable(folder)
        except OSError as e:  # else JAX warns at every compile, in lines about its own code
            print(
                f"azjax: {ENV}={folder!r} cannot be made or written ({e.strerror or e}): "
                "compiling without the cache",
                file=sys.stderr,
                flush=True,
            )
            jax.config.update("jax_compilation_cache_dir", None)
            return None
    else:
        if not locked:  # no shared cache without the lock
            return None
        folder = default_folder(environ)
        try:
            _usable(folder)
        except OSError:
            return None
        jax.config.update("jax_compilation_cache_dir", folder)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    if locked and "JAX_COMPILATION_CACHE_MAX_SIZE" not in environ:
        jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return folder
