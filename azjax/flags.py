"""Command-line flags from the `Config`'s fields and the games' options: one way to build them,
parse their values and turn them into config overrides and game options, shared by train.py,
evaluate.py, play.py and the experiments.

    parser = Parser()                                  # argparse's, with one-line errors
    config_flags = add_config_flags(parser, defaults=config.game_defaults("hex"))
    option_flags = add_game_flags(parser, "hex")       # --size, --swap; None: every game's options
    args = parser.parse_args(argv)
    overrides = {**config_overrides(args, config_flags), **game_options(args, "hex", option_flags)}

A flag holds its text (None when not given) until `config_overrides` / `game_options` convert it
with `parse_value`, which raises a ValueError naming the flag and what it accepts. Boolean flags
work bare (`--swap` means true) or with a value (`--swap=false`). `Parser`'s errors are one
line, and an unknown flag names the nearest known one (`--batch_gmaes`: did you mean
--batch_games?) or, for another game's option, what this game takes.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import os
import tempfile
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import games
from azjax.config import FIELDS

TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def auto_or_count(text: str, flag: str) -> int | None:
    """A flag that takes `auto` or a whole number >= 1 (`--cpu_devices`, `--rounds`): None for
    auto, else the number; ValueError naming `flag` and both otherwise."""
    if text.strip() == "auto":
        return None
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"{flag} must be auto or a whole number >= 1, got {text!r}")
    return count


def names(text: str, flag: str, choices: Collection[str]) -> list[str]:
    """A flag that takes a comma-separated list of `choices` (`--games=hex,othello`): the names
    in order; ValueError naming `flag`, the unknown ones and the choices otherwise."""
    given = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in given if name not in choices]
    if unknown or not given:
        raise ValueError(
            f"{flag}: unknown {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(choices)}"
        )
    return given


SEED_LIMIT = 2**32 - 1  # JAX keys keep 32 bits of a seed


def seed(text: str) -> int:
    """--seed's type: a whole number in [0, SEED_LIMIT]."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= value <= SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"must be in [0, {SEED_LIMIT}], got {text}")
    return value


def path(text: str) -> str:
    """An argparse type for a file or folder flag: an empty value is refused, where it would
    otherwise stand for the flag's default (`--out=` writing into runs/eval/, `--to=` into the
    package's store)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path: give one, or leave the flag out")
    return text


class Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, `PROG: error: MESSAGE`, exit code 2, without
    the usage block (`PROG --help` shows it). An unknown flag is named with the nearest known flags
    of the (sub)command given, or with `hints[flag]`: why it is no flag here (`game_option_hints`).
    Flags are taken whole: argparse's prefix matching would read `--batch=8` as `--batch_games`
    and `--lr=0.1` as whichever flag alone starts so, silently; here they are unknown flags.
    `module` (an experiment's or benchmark's `__spec__.name`) names it `python -m MODULE`, as its
    other errors are named (`cli.script`), rather than argparse's `FILE.py`.
    """

    def __init__(self, *args, module: str | None = None, **kwargs):
        if module is not None:
            kwargs.setdefault("prog", f"python -m {module}")
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.hints: dict[str, str] = {}

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            hint = self.chosen(namespace).unknown_hint(extras)
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return namespace

    def chosen(self, namespace: argparse.Namespace) -> Parser:
        """The innermost parser that `namespace`'s subcommand chose (self without one)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                sub = action.choices.get(getattr(namespace, action.dest, None))
                if isinstance(sub, Parser):
                    return sub.chosen(namespace)
        return self

    def unknown_hint(self, extras: list[str]) -> str:
        """' (...)': what the first unknown flag in `extras` may have meant."""
        flag = next((e.partition("=")[0] for e in extras if e.startswith("--")), None)
        if flag in self.hints:
            return f" ({self.hints[flag]})"
        known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        if flag in known:  # the subcommand's own flag, given before the subcommand's name
            return f" ({flag} goes after the command's name: {self.prog} ... {flag}=...)"
        near = difflib.get_close_matches(flag, known, n=2, cutoff=0.75) if flag else []
        if near:
            return f" (did you mean {' or '.join(near)}?)"
        return f" ({self.prog} --help lists the flags)"

    def error(self, message: str):
        if message.startswith("the following arguments are required"):
            message += f" ({self.prog} --help)"
        self.exit(2, f"{self.prog}: error: {message}\n")


def check_out(folder: str, flag: str = "--out") -> None:
    """ValueError unless results can be written into `folder` (made later, by the first file):
    checked before the games, whose results would otherwise be lost. `flag` names the flag
    that gave it."""
    if os.path.exists(folder):
        if not os.path.isdir(folder):
            raise ValueError(f"{flag} {folder!r} is a file, not a folder; choose another {flag}")
        existing = folder
    else:
        existing = os.path.dirname(os.path.abspath(folder))
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise ValueError(f"{flag} {folder!r} cannot be made: {existing!r} is a file")
    try:  # a file made and removed: os.access lets root pass everywhere, /proc and /sys too
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise ValueError(
            f"{flag} {folder!r} cannot be written (making a file in {existing!r} failed: "
            f"{e.strerror or e}); choose another {flag}"
        ) from None


def check_file_out(path: str, flag: str) -> None:
    """ValueError unless a file can be written at `path` (a folder there, or an unwritable
    folder above it, is refused before the work whose result it would hold)."""
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path!r} is a folder; choose a file as {flag}")
    check_out(os.path.dirname(os.path.abspath(path)), flag)


def parse_value(
    name: str,
    text: str,
    kind: type,
    *,
    choices: Iterable[str] | None = None,
    low: float | None = None,
    high: float | None = None,
) -> Any:
    """A flag's text as `kind` (bool, int, float or str), checked against `choices` and
    [`low`, `high`]; a ValueError naming the flag and what it accepts otherwise."""
    if kind is bool:
        if text.lower() in TRUE:
            return True
        if text.lower() in FALSE:
            return False
        raise ValueError(f"--{name}: expected true or false, got {text!r}")
    if choices is not None:  # str choices, or another kind's (their text the flag's)
        names = [str(c) for c in choices]
        if text not in names:
            raise ValueError(f"--{name} must be one of {', '.join(names)}; got {text!r}")
        return list(choices)[names.index(text)]
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"--{name}: expected {kind.__name__}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise ValueError(f"--{name} must be finite, got {text!r}")
    if low is not None and value < low:
        raise ValueError(f"--{name} must be >= {low}, got {text!r}")
    if high is not None and value > high:
        raise ValueError(f"--{name} must be <= {high}, got {text!r}")
    return value


def value_text(value: Any) -> str:
    """A setting's value as a flag or list takes it back (`parse_value`): true / false for a
    bool, else its str."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def add_flag(
    parser, name: str, kind: type, help: str, *, default: Any, choices: Iterable[str] | None = None
) -> None:
    """--name holding text (None when not given); a bool flag may be given bare."""
    if kind is bool:
        default = value_text(default)
        parser.add_argument(
            f"--{name}",
            default=None,
            nargs="?",
            const="true",
            metavar="true|false",
            help=f"{help} (default: {default}; bare --{name}: true)",
        )
    else:
        metavar = "|".join(map(str, choices)) if choices else kind.__name__.upper()
        parser.add_argument(
            f"--{name}", default=None, metavar=metavar, help=f"{help} (default: {default})"
        )


# ---- Config fields -------------------------------------------------------------------------------
def add_config_flags(
    parser,
    *,
    names: Iterable[str] | None = None,
    skip: Iterable[str] = (),
    defaults: Mapping[str, Any] | None = None,
    default_text: str | None = None,
) -> list[str]:
    """A flag per Config field (`names`, default all but `skip`) with its help and accepted
    values; each help ends with `defaults[name]` (default: the field's own default) or with
    `default_text`. Returns the names added, for `config_overrides`."""
    added = []
    for name in FIELDS if names is None else names:
        if name in skip:
            continue
        field, meta = FIELDS[name], FIELDS[name].metadata
        default = default_text or (defaults or {}).get(name, field.default)
        add_flag(
            parser,
            name,
            type(field.default),
            meta["help"],
            default=default,
            choices=meta["choices"],
        )
        added.append(name)
    return added


def config_overrides(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """{field: value} of the Config flags `names` that were given, converted and checked."""
    out = {}
    for name in names:
        text = getattr(args, name)
        if text is not None:
            meta = FIELDS[name].metadata
            out[name] = parse_value(
                name,
                text,
                type(FIELDS[name].default),
                choices=meta["choices"],
                low=meta["low"],
                high=meta["high"],
            )
    return out


# ---- game options --------------------------------------------------------------------------------
def game_option_hints(game: str) -> dict[str, str]:
    """{--option: why it is no flag for `game`} for the options only other games take, for
    `Parser.hints`: `--size` with connect_four names its options, rows, cols and connect."""
    mine = games.option_names(game)
    others = {o for name in games.names() for o in games.option_names(name)} - set(mine)
    return {f"--{o}": not_an_option(o, game) for o in sorted(others)}


def not_an_option(name: str, game: str | None) -> str:
    """`--name is not an option of GAME; its options: ...`."""
    options = ", ".join(option_fields(game)) or "none"
    return f"--{name} is not an option of {game}; its options: {options}"


def option_fields(game: str | None) -> dict[str, dataclasses.Field]:
    """The options of `game` (its dataclass fields), or with None every option of every game."""
    fields: dict[str, dataclasses.Field] = {}
    for name in games.names() if game is None else [game]:
        for f in dataclasses.fields(games.game_class(name)):
            fields.setdefault(f.name, f)
    return fields


def add_game_flags(
    parser, game: str | None, *, defaults: Mapping[str, Any] | None = None
) -> list[str]:
    """A flag per option of `game` (None: of every game, each help naming the games that take
    it); help ends with `defaults[name]`, else the game's default. Returns the names added."""
    takers: dict[str, list[str]] = {}
    for name in games.names() if game is None else [game]:
        for option in games.option_names(name):
            takers.setdefault(option, []).append(name)
    added = []
    for name, f in option_fields(game).items():
        if game is None:
            help, default = f"option of {', '.join(takers[name])}", "the game's"
        else:
            help, default = f"{game} option", (defaults or {}).get(name, f.default)
        add_flag(parser, name, type(f.default), help, default=default)
        added.append(name)
    return added


def game_options(
    args: argparse.Namespace, game: str | None, names: Iterable[str]
) -> dict[str, Any]:
    """{option: value} of the game flags `names` that were given, for `game`; a ValueError for
    an option `game` does not take. With None (the game is not known yet) any game's options
    are accepted, and `games.make` checks them later."""
    fields = option_fields(game)
    out = {}
    for name in names:
        text = getattr(args, name)
        if text is None:
            continue
        if name not in fields:
            raise ValueError(not_an_option(name, game))
        out[name] = parse_value(name, text, type(fields[name].default))
    return out
