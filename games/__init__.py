"""Board games as pure, jittable state-transition functions.

import games
game = games.make("hex", size=6)
state = game.init()
state = game.step(state, game.parse_action("c3", state))
"""

from __future__ import annotations

import dataclasses
import importlib

from games.base import Game, GameState

# name -> "module:Class"; modules are imported on first use so one broken game cannot hide others.
_REGISTRY: dict[str, str] = {
    "hex": "games.hex:Hex",
    "othello": "games.othello:Othello",
    "connect_four": "games.connect_four:ConnectFour",
    "tictactoe": "games.tictactoe:TicTacToe",
}


def names() -> list[str]:
    """The names `make` accepts."""
    return sorted(_REGISTRY)


def game_class(name: str) -> type[Game]:
    if name not in _REGISTRY:
        raise ValueError(f"unknown game {name!r}; known games: {', '.join(names())}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


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


__all__ = ["Game", "GameState", "make", "names", "option_names", "game_class"]
