"""Game records in the formats other programs read, and back again.

    text = write_record(game, actions, black="mcts", white="random", result="black")
    actions = read_record(game, text)        # the moves as the file holds them
    final, actions = replay(game, actions)   # through the rules (Othello's passes put back)

One format per game (`FORMATS`):
- Hex: SGF as HexGui and MoHex write it (red-bean.com/sgf/hex.html), e.g.
  ``(;FF[4]GM[11]SZ[5]AP[azjax]PB[..]PW[..]RE[B+];B[c3];W[swap-pieces];B[d2])``. A cell is its
  column letter and row number, a1 the top-left corner, black joining top and bottom, exactly the
  names of `games/hex.py`; the swap rule's move is ``swap-pieces`` (the convention games/hex.py
  plays), a resignation the resigning colour's ``resign`` with ``RE[B+R]`` / ``RE[W+R]``.
  Read back from any program: one game's main line (the first variation at each branch), a
  move wherever its node holds it, escapes and whitespace as FF[4] allows, no SZ meaning 11x11;
  a file of several games, or one that sets up a position (AB, AW, AE, PL), is refused.
- Othello: the move list as transcripts and Othello programs write it, two characters a move,
  ``f5d6c3d3c4``; passes are left out (a side with no placing move must pass, so the position
  says where they were: `replay` puts them back).
- Connect Four: the columns, 1-based, as one string, ``4453`` (the form the usual solvers, e.g.
  Pascal Pons's, read); boards of more than 9 columns separate them with spaces (``10 4 11``).
- Tic-Tac-Toe: the cells, space-separated, ``b2 a1 c3``.

The move-list texts have no mark for a resignation: a resigned game's text ends where play
stopped (its SGF, or match.json, says who resigned). Writing and reading are pure Python over
the games' move names; only `replay` steps the game (jitted).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import NamedTuple

from azjax.eval.agent import RESIGN
from games.base import Game

RESULTS = ("black", "white", "draw")  # who won a game, by colour
_SGF_SWAP = "swap-pieces"


class Format(NamedTuple):
    """One game's record format: its file extension, writer and reader."""

    extension: str
    write: Callable  # (game, actions, black, white, result) -> str
    read: Callable  # (game, text) -> list[int]


def move_names(game: Game, actions: list[int]) -> list[str]:
    """The games' own move names (`Game.action_to_str`), `resign` for RESIGN."""
    return ["resign" if a == RESIGN else game.action_to_str(a) for a in actions]


def winner(return_a: float, a_first: bool) -> str:
    """ "black", "white" or "draw", from A's return and whether A played black."""
    if return_a == 0:
        return "draw"
    return "black" if (return_a > 0) == bool(a_first) else "white"


def write_record(
    game: Game,
    actions: list[int],
    *,
    black: str = "",
    white: str = "",
    result: str | None = None,
) -> str:
    """The record of one game: `actions` from the initial position (RESIGN last where a side
    resigned), the players' names and the result (one of RESULTS; None: unknown). The text
    formats have no place for names or results; SGF keeps them (PB, PW, RE)."""
    if result is not None and result not in RESULTS:
        raise ValueError(f"result must be one of {', '.join(RESULTS)} or None, got {result!r}")
    return _format(game).write(game, list(actions), black, white, result)


def read_record(game: Game, text: str) -> list[int]:
    """The actions a record holds (Othello without its passes; RESIGN last where the record says
    a side resigned); ValueError naming what is wrong with the text."""
    return _format(game).read(game, text)


def record_filename(game: Game, index: int) -> str:
    """game-0001.sgf for the first game (index 0) of Hex, game-0001.txt for the others."""
    return f"game-{index + 1:04d}.{_format(game).extension}"


def write_records(
    folder: str, game: Game, games: list[dict], numbers: list[int] | None = None
) -> list[str]:
    """One file per game into `folder` (made if need be), named by `record_filename` of its
    index in `numbers` (default 0, 1, ..); `games` holds dicts with `actions`, `black`, `white`
    and `result` (`write_record`'s arguments). Returns the paths."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for i, g in zip(range(len(games)) if numbers is None else numbers, games):
        path = os.path.join(folder, record_filename(game, int(i)))
        with open(path, "w") as f:
            f.write(
                write_record(
                    game, g["actions"], black=g["black"], white=g["white"], result=g["result"]
                )
                + "\n"
            )
        paths.append(path)
    return paths


def clear_records(folder: str) -> None:
    """Removes the record files (`record_filename`'s game-NNNN.sgf / .txt) an earlier match left
    in `folder`, so that it holds only the games of the match about to be written there;
    ValueError where `folder` is a file (before the games, whose records it could not hold)."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(
            f"{folder} is a file, where the match writes its games' records: choose another --out"
        )
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            if re.fullmatch(r"game-\d{4,}\.(sgf|txt)", name):
                os.remove(os.path.join(folder, name))


def replay(game: Game, actions: list[int]):
    """(final state, every action played) of `actions` played from the initial position; a pass
    is put in wherever the side to move has no other move and the next action is not a pass
    (Othello records leave passes out). Stops at RESIGN. ValueError at an illegal move."""
    import numpy as np

    step, legal_mask = _jitted(game)
    state, played = game.init(), []
    pass_action = getattr(game, "pass_action", None)
    for i, action in enumerate(actions):
        if action == RESIGN:
            break
        while pass_action not in (None, action) and not bool(game.is_terminal(state)):
            legal = np.flatnonzero(np.asarray(legal_mask(state)))
            if list(legal) != [pass_action]:
                break
            state, played = step(state, pass_action), played + [pass_action]
        legal = np.asarray(legal_mask(state))
        if bool(game.is_terminal(state)) or not 0 <= action < len(legal) or not legal[action]:
            raise ValueError(
                f"{game.name}: move {i + 1} ({move_names(game, [action])[0]}) is not legal there"
            )
        state, played = step(state, action), played + [action]
    return state, played


@functools.cache
def _jitted(game: Game):
    import jax

    return jax.jit(game.step), jax.jit(game.legal_mask)


def _format(game: Game) -> Format:
    if game.name not in FORMATS:
        raise ValueError(f"no record format for {game.name!r}; formats for {', '.join(FORMATS)}")
    return FORMATS[game.name]


def _parse(game: Game, names: list[str]) -> list[int]:
    """Actions of move names; ValueError naming the first that is not one."""
    return [RESIGN if n.lower() == "resign" else game.parse_action(n) for n in names]


# ---- Hex: SGF ------------------------------------------------------------------------------------
def _write_sgf(game: Game, actions: list[int], black: str, white: str, result) -> str:
    root = f"(;FF[4]GM[11]SZ[{game.size}]AP[azjax]"
    root += "".join(f"{k}[{_sgf_text(v)}]" for k, v in (("PB", black), ("PW", white)) if v)
    if result in ("black", "white"):
        root += f"RE[{result[0].upper()}+{'R' if actions and actions[-1] == RESIGN else ''}]"
    nodes = []
    for i, name in enumerate(move_names(game, actions)):
        name = _SGF_SWAP if name == "swap" else name
        nodes.append(f";{'BW'[i % 2]}[{name}]")  # a swap is white's move: colours alternate
    return root + "".join(nodes) + ")"


def _sgf_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("]", "\\]")


def _read_sgf(game: Game, text: str) -> list[int]:
    nodes = _sgf_main_line(text)
    root = nodes[0]
    gm = root.get("GM", ["11"])[0].strip()
    if gm != "11":
        raise ValueError(f"an SGF of game GM[{gm}], not Hex (GM[11])")
    size = root.get("SZ", ["11"])[0].strip()  # red-bean's hex.html: 11 x 11 where SZ is absent
    sides = size.split(":")
    if len(set(sides)) != 1 or not sides[0].isdigit() or int(sides[0]) != game.size:
        raise ValueError(f"the SGF's board is SZ[{size}]; this game is SZ[{game.size}]")
    setup = sorted({p for node in nodes for p in node if p in _SGF_SETUP})
    if setup:
        raise ValueError(
            f"the SGF sets up the board ({', '.join(setup)}); only games played from the empty "
            "board with B and W moves are read"
        )
    moves = []
    for node in nodes:
        played = [(c, v) for c in "BW" for v in node.get(c, [])]
        if len(played) > 1:
            raise ValueError(f"an SGF node holds {len(played)} moves; one a node")
        moves += played
    names = []
    for i, (colour, move) in enumerate(moves):
        if colour != "BW"[i % 2]:
            expected = "BW"[i % 2]
            raise ValueError(f"SGF move {i + 1} is {colour}[{move}], expected {expected} to move")
        move = move.strip().lower()
        if move == "swap-sides":
            raise ValueError("swap-sides is not this Hex's swap; use swap-pieces")
        names.append("swap" if move == _SGF_SWAP else move)
    if "resign" in names[:-1]:
        raise ValueError("SGF moves after a resignation")
    return _parse(game, names)


_SGF_SETUP = ("AB", "AW", "AE", "PL")  # properties that set up a position instead of playing


def _sgf_main_line(text: str) -> list[dict[str, list[str]]]:
    """The nodes (each {property: [values]}) of an SGF game's main line: its first game tree,
    down the first variation at each branch (SGF FF[4]: properties in any order within a node,
    ``\\`` escapes in values, whitespace between tokens). ValueError for text that is not SGF or
    holds more than one game."""
    shape = "expected (;FF[4]GM[11]SZ[n];B[..];W[..]...)"
    body = text.strip().lstrip("\ufeff")
    at = 0

    def fail(what: str):
        raise ValueError(f"not an SGF game: {what} at character {at + 1}; {shape}")

    def skip_space():
        nonlocal at
        while at < len(body) and body[at].isspace():
            at += 1

    def value() -> str:
        nonlocal at
        out, at = [], at + 1  # past "["
        while at < len(body) and body[at] != "]":
            if body[at] == "\\":
                at += 1
            if at < len(body):
                out.append(body[at])
                at += 1
        if at >= len(body):
            fail("a value with no closing ]")
        at += 1
        return "".join(out)

    def node() -> dict[str, list[str]]:
        nonlocal at
        props: dict[str, list[str]] = {}
        at += 1  # past ";"
        skip_space()
        while at < len(body) and body[at].isalpha():
            start = at
            while at < len(body) and body[at].isalpha():
                at += 1
            name = "".join(c for c in body[start:at] if c.isupper())  # FF[3]'s lowercase dropped
            skip_space()
            if at >= len(body) or body[at] != "[":
                fail(f"property {body[start:at]} with no [value]")
            values = props.setdefault(name, [])
            while at < len(body) and body[at] == "[":
                values.append(value())
                skip_space()
        return props

    def tree() -> list[dict[str, list[str]]]:
        nonlocal at
        if at >= len(body) or body[at] != "(":
            fail("no (")
        at += 1
        skip_space()
        nodes = []
        while at < len(body) and body[at] == ";":
            nodes.append(node())
            skip_space()
        if not nodes:
            fail("a game tree with no node")
        variations = []
        while at < len(body) and body[at] == "(":
            variations.append(tree())
            skip_space()
        if at >= len(body) or body[at] != ")":
            fail("no closing )")
        at += 1
        return nodes + (variations[0] if variations else [])

    skip_space()
    nodes = tree()
    skip_space()
    if at < len(body):
        if body[at] == "(":
            raise ValueError("the SGF holds more than one game; give one game a record")
        fail("text after the game")
    return nodes


# ---- Othello, Connect Four, Tic-Tac-Toe: move lists ----------------------------------------------
def _write_othello(game: Game, actions: list[int], black, white, result) -> str:
    return "".join(move_names(game, [a for a in actions if a not in (game.pass_action, RESIGN)]))


def _read_othello(game: Game, text: str) -> list[int]:
    body = re.sub(r"\s+", "", text).lower()
    names = re.findall(r"[a-z]\d+", body)
    if "".join(names) != body:
        raise ValueError(f"not an Othello move list (like f5d6c3): {text.strip()[:40]!r}")
    return _parse(game, names)


def _write_connect_four(game: Game, actions: list[int], black, white, result) -> str:
    names = move_names(game, [a for a in actions if a != RESIGN])
    return ("" if game.cols <= 9 else " ").join(names)


def _read_connect_four(game: Game, text: str) -> list[int]:
    body = text.strip()
    return _parse(game, body.split() if len(body.split()) > 1 or game.cols > 9 else list(body))


def _write_list(game: Game, actions: list[int], black, white, result) -> str:
    return " ".join(move_names(game, [a for a in actions if a != RESIGN]))


def _read_list(game: Game, text: str) -> list[int]:
    return _parse(game, text.split())


FORMATS = {
    "hex": Format("sgf", _write_sgf, _read_sgf),
    "othello": Format("txt", _write_othello, _read_othello),
    "connect_four": Format("txt", _write_connect_four, _read_connect_four),
    "tictactoe": Format("txt", _write_list, _read_list),
}
