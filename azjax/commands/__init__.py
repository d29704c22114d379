"""The command lines: `train`, `evaluate`, `play`, each a module with `main(argv=None) -> int`.

    azjax-train --game=tictactoe          # installed console commands ([project.scripts])
    python train.py --game=tictactoe      # the same, from a checkout (train.py calls main)

A command names itself as the user ran it, in its usage, its `PROG: error: ...` lines and the
commands it suggests: `azjax-train` when run as the console command, `train.py` otherwise
(`python train.py`, `python -m azjax.commands.train`, or `main([...])` called from Python).

The core modules of `azjax/` never import this package; it imports them.
"""

from __future__ import annotations

import os
import sys

# each script of the repository root, and the console command that runs the same main()
COMMANDS = {"train.py": "azjax-train", "evaluate.py": "azjax-evaluate", "play.py": "azjax-play"}


# the checkout's root, where train.py, evaluate.py and play.py stand (an installed package has none)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def prog(script: str) -> str:
    """What the user typed to run `script`'s main: its console command (`azjax-train`) when
    that is how this process started, else the script's name (`train.py`); the console command
    too where there is no such script to name (`python -m azjax.commands.train` on an installed
    package)."""
    command = COMMANDS[script]
    started = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if started in (command, f"{command}.exe"):
        return command
    return script if os.path.isfile(os.path.join(ROOT, script)) else command


def spell(script: str, prog: str) -> str:
    """How a user who ran `prog` runs `script`: `azjax-play` after an `azjax-...` command,
    `python play.py` after a script."""
    return COMMANDS[script] if prog in COMMANDS.values() else f"python {script}"


def describe(doc: str, prog: str) -> str:
    """A command's module doc as its --help shows it: its `python train.py ...` examples
    spelled as the user runs commands (`azjax-train ...` after a console command)."""
    if prog not in COMMANDS.values():
        return doc
    for script, command in COMMANDS.items():
        doc = doc.replace(f"python {script}", command)
    return doc


def split_cpu(setting: str, *sizes: int) -> None:
    """`--cpu_devices=N|auto`: makes JAX's CPU N devices before anything starts it
    (`azjax.parallel.split_cpu`); auto: one per CPU this process may use, as many as every one of
    `sizes` (global batch sizes) divides over, and in a process that has already started JAX its
    devices stay as they are. ValueError (one line) for a count that is not a whole number >= 1
    or that comes too late."""
    from azjax import parallel
    from azjax.flags import auto_or_count

    count = auto_or_count(setting, "--cpu_devices")
    limit = max(16, 4 * (os.cpu_count() or 1))  # XLA makes every one: 100,000 never finished
    if count is not None and count > limit:
        raise ValueError(
            f"--cpu_devices={count}: at most {limit} here (the point is one per core; this "
            f"machine has {os.cpu_count()}), or auto"
        )
    if count is None:
        parallel.split_cpu(parallel.cpu_device_count(*sizes))
        return
    have = parallel.split_cpu(count)
    if have != count:
        raise ValueError(
            f"--cpu_devices={count}: JAX has already started in this process with {have} CPU "
            "devices; give the count before anything uses JAX"
        )
