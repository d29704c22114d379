"""Checks, on `import azjax` and before anything imports them, that the `games` and `configs`
packages on the path are the ones installed beside azjax.

A folder named games/ or configs/ in the working folder (first on the path under `python -m` and
`python -c`) or on PYTHONPATH would come first: `import games` then fails on a missing module, and
configs/'s game defaults are silently none. The ImportError says which folder shadows which.
"""

import importlib.util
import os


def check() -> None:
    home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in ("games", "configs"):
        spec = importlib.util.find_spec(name)
        origin = getattr(spec, "origin", None)
        found = os.path.dirname(os.path.abspath(origin)) if origin else None
        if found != os.path.join(home, name):
            raise ImportError(
                f"azjax's {name} package ({os.path.join(home, name)}) is shadowed by "
                f"{found or 'another'}: a folder named {name} in the working folder or on "
                "PYTHONPATH comes first on the path; run from another folder or rename it"
            )


check()
