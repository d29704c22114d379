"""The metrics a run writes that README's "Metrics, by name" does not name: every test that runs
training can check its rows, so a new key cannot land undocumented."""

from __future__ import annotations

import os
import re

README = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")


def named() -> set[str]:
    """What README's "Metrics, by name" (its table, the shared-run note and the held-out losses)
    writes between backquotes."""
    readme = open(README).read()
    start = readme.index("**Metrics, by name**")
    return set(
        re.findall(
            r"`([^`]+)`", readme[start : readme.index("\n\n", readme.index("**Held-out losses.**"))]
        )
    )


def undocumented(rows: list[dict], games: tuple[str, ...] = ()) -> list[str]:
    """The keys of `rows` README does not name: each as written there, by its last part
    (`resign_checked`) or as `_ply4`; a shared run's `games` as `<group>/<game>/...` beside the
    name without the game."""
    names, missing = named(), []
    for key in sorted(set().union(*rows) - {"iteration"}):
        base = key
        for game in games:
            if f"/{game}/" in key:
                base = key.replace(f"/{game}/", "/")
                if f"{key.split('/')[0]}/<game>/..." not in names:
                    missing.append(key)
        last = base.split("/")[-1]
        if not {base, last, "_" + last.rsplit("_", 1)[-1]} & names:
            missing.append(key)
    return missing
