"""Board games as pure, jittable state-transition functions.

import games
game = games.make("hex", size=6)
state = game.init()
state = game.step(state, game.parse_action("c3", state))

A new game is registered with `games.register("mnk", "examples.mnk_game:MNKGame")` (or the class
itself) before flags are parsed, or for the scripts through the environment:
`AZJAX_GAMES=mnk=examples.mnk_game:MNKGame python train.py --game=mnk`. docs/adding_a_game.md walks
through writing one.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
from collections.abc import Sequence

from games.base import Game, GameState

# name -> "module:Class" (or a class given to `register`); modules are imported on first use so
# one broken game cannot hide others.
_BUILTIN: dict[str, str] = {
    "hex": "games.hex:Hex",
    "othello": "games.othello:Othello",
    "connect_four": "games.connect_four:ConnectFour",
    "tictactoe": "games.tictactoe:TicTacToe",
}
_REGISTRY: dict[str, str | type[Game]] = dict(_BUILTIN)

ENVIRONMENT = "AZJAX_GAMES"  # "name=module:Class[,name=module:Class...]", read at every look-up
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _from_environment() -> dict[str, str]:
    """The games named in $AZJAX_GAMES; a ValueError naming the variable for a malformed entry."""
    out: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in os.environ.get(ENVIRONMENT, "").split(","))):
        name, _, target = entry.partition("=")
        if not _NAME.fullmatch(name) or target.count(":") != 1 or name in out:
            raise ValueError(
                f"{ENVIRONMENT}: bad entry {entry!r}; expected name=module:Class entries separated "
                "by commas, each name new, e.g. mnk=examples.mnk_game:MNKGame"
            )
        if name in _REGISTRY:
            raise ValueError(f"{ENVIRONMENT}: game name {name!r} is taken; taken: {_taken()}")
        out[name] = target
    return out


def _entries() -> dict[str, str | type[Game]]:
    return {**_REGISTRY, **_from_environment()}


def _taken() -> str:
    return ", ".join(sorted(_REGISTRY))


def names() -> list[str]:
    """The names `make` accepts: the built-in games, registered ones and those in $AZJAX_GAMES."""
    return sorted(_entries())


class _Names(Sequence):
    """`names()` read at each use: a Config field's choices that include games registered after
    the config module was imported."""

    def __getitem__(self, index):
        return names()[index]

    def __len__(self) -> int:
        return len(names())

    def __iter__(self):
        return iter(names())

    def __contains__(self, name) -> bool:
        return name in names()

    def __repr__(self) -> str:
        return f"games.NAMES{tuple(names())}"


NAMES: Sequence[str] = _Names()


def _import(target: str, module_name: str):
    """The module of a game target, imported from the path or else from the working folder (a
    console script such as `azjax-train` puts its own bin/ folder on the path, not the folder it
    runs in, where `python -m` and `python train.py` put theirs); ValueError where neither has
    it."""
    for attempt in range(2):
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if not module_name.startswith(str(e.name)):
                raise  # the module exists and one of its own imports failed: show that
            here = os.getcwd()
            if attempt or here in sys.path or "" in sys.path:
                raise ValueError(
                    f"game target {target!r}: no module {module_name!r} in {here} or on the "
                    "path (run from the folder that holds it, add that folder to PYTHONPATH, or "
                    "install the module)"
                ) from None
            sys.path.append(here)  # after the installed packages: none of theirs is shadowed


def _resolve(name: str, target: str | type) -> type[Game]:
    """The Game subclass a "module:Class" string (or a class) names, its `name` being `name`;
    ValueError otherwise."""
    if isinstance(target, str):
        module_name, _, attr = target.partition(":")
        if not module_name or not attr or ":" in attr:
            raise ValueError(f"game target {target!r} is not of the form 'module:Class'")
        module = _import(target, module_name)
        if not hasattr(module, attr):
            raise ValueError(f"game target {target!r}: module {module_name!r} has no {attr!r}")
        target = getattr(module, attr)
    ok = isinstance(target, type) and issubclass(target, Game) and dataclasses.is_dataclass(target)
    if not ok:
        raise ValueError(
            f"game target {target!r} is not a Game: a frozen dataclass subclassing games.base.Game"
        )
    own = vars(target).get("__annotations__", {})  # fields it declares (is_dataclass is inherited)
    if own and "__dataclass_fields__" not in vars(target):
        raise ValueError(
            f"game target {target!r} declares {', '.join(own)} but is not itself a dataclass "
            "(its options would be its parent's): decorate it with "
            "@dataclasses.dataclass(frozen=True)"
        )
    if target.name != name:
        raise ValueError(f"game {name!r}: {target.__name__}.name is {target.name!r}, not {name!r}")
    return target


def register(name: str, target: str | type[Game]) -> None:
    """Make `name` a game that `make`, `names` and the scripts' --game accept.

    `target` is a `games.base.Game` subclass or "module:Class" (imported now, so a typo shows at
    once). A ValueError for a malformed or taken name, or a target that is not a Game.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"game name {name!r} must be lowercase letters, digits and '_', starting with a letter"
        )
    if name in _entries():
        raise ValueError(f"game name {name!r} is taken; taken: {', '.join(names())}")
    _resolve(name, target)
    _REGISTRY[name] = target


def unregister(name: str) -> None:
    """Forget a game `register` added; a ValueError for built-in or unknown names."""
    if name in _BUILTIN or name not in _REGISTRY:
        added = sorted(set(_REGISTRY) - set(_BUILTIN))
        raise ValueError(
            f"cannot unregister {name!r}; registered games: {', '.join(added) or 'none'}"
        )
    del _REGISTRY[name]


def game_class(name: str) -> type[Game]:
    entries = _entries()
    if name not in entries:
        raise ValueError(
            f"unknown game {name!r}; known games: {', '.join(sorted(entries))} (add one with "
            f"games.register or ${ENVIRONMENT}: docs/adding_a_game.md)"
        )
    return _resolve(name, entries[name])


def option_names(name: str) -> list[str]:
    """The options a game takes, e.g. ['size', 'swap'] for hex."""
    return [f.name for f in dataclasses.fields(game_class(name))]


def make(name: str, **options) -> Game:
    """The game registered as `name`, with its options; ValueError naming valid names/options."""
    cls = game_class(name)
    valid = option_names(name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(
            f"{name}: unknown option(s) {', '.join(unknown)}; "
            f"valid options: {', '.join(valid) or 'none'}"
        )
    return cls(**options)


__all__ = [
    "Game",
    "GameState",
    "NAMES",
    "game_class",
    "make",
    "names",
    "option_names",
    "register",
    "unregister",
]
