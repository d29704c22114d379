"""The commands the README and docs/ show still parse: every `train.py`, `evaluate.py` and
`play.py` line of their code blocks (or `azjax-train` ...) is given to that command's own parser,
nothing run, so a flag renamed or removed cannot leave a documented command behind.

Placeholders are filled in first (`--game=G`: hex; a one-letter `S`, `N`: 1; `RUN`, `NET`: a
word; a bare `...` between arguments dropped). A line that is a pattern rather than a command
(`--card ...`, alternatives `[A | B]`) is left out. Parsing only: the checkpoints and runs the
commands name need not exist, except a shipped network given to `--init_from`, whose trunk must fit
the run the command makes.
"""

import glob
import os
import re
import shlex

import pytest

import games
from azjax import transfer
from azjax.commands import evaluate, play, train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {"train": "train", "evaluate": "evaluate", "play": "play"}
COMMAND = re.compile(r"^(?:python3? (train|evaluate|play)\.py|azjax-(train|evaluate|play))(?=\s|$)")
# a word that stands for something to fill in: G, N, S, RUN, PATH, NET, OTHER, ...
PLACEHOLDER = re.compile(r"(?<![A-Za-z0-9_])([A-Z][A-Z0-9_]*)(?![A-Za-z0-9_])")


def filled(command: str) -> str:
    """`command` with its placeholders filled in (module doc)."""
    command = re.sub(r"\s\.\.\.(?=\s|$)", "", command).replace("...", "x")
    return PLACEHOLDER.sub(
        lambda m: "hex" if m[1] == "G" else ("1" if len(m[1]) == 1 else "x"), command
    )


def pattern(command: str) -> bool:
    """A line that shows a pattern, not a command: a flag whose value is `...`, or alternatives
    in brackets (`[--seed=S | --openings=...]`, cut at the `|`)."""
    return bool(re.search(r"--\w+ \.\.\.", command)) or command.count("[") != command.count("]")


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the markdown's code: fenced blocks and 4-space indented ones."""
    out, fenced = [], False
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            out.append((number, line.strip()))
    return out


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) for every train/evaluate/play command in the code of README.md and
    docs/*.md, continuation lines joined, shell comments and what follows && or | dropped."""
    found = []
    for path in [os.path.join(ROOT, "README.md"), *sorted(glob.glob(f"{ROOT}/docs/*.md"))]:
        lines = code_lines(open(path, encoding="utf-8").read())
        for i, (number, line) in enumerate(lines):
            for part in re.split(r"\s*(?:&&|;)\s*", line):
                part = part.strip().removeprefix("$ ")
                if not COMMAND.match(part):
                    continue
                j = i
                while part.endswith("\\") and j + 1 < len(lines):  # a command over several lines
                    j += 1
                    part = part[:-1].rstrip() + " " + lines[j][1]
                part = re.split(r"\s+#|\s*[|>]\s", part)[0].strip()
                if part.count("'") % 2:  # the end of a quoted --command='...' (docs/scaling.md)
                    part = part.rstrip("'")
                found.append((f"{os.path.relpath(path, ROOT)}:{number}", part))
    return found


COMMANDS = documented_commands()


def test_the_docs_have_commands_to_check():
    kinds = {COMMAND.match(c).group(1) or COMMAND.match(c).group(2) for _, c in COMMANDS}
    assert kinds == set(SCRIPTS) and len(COMMANDS) > 100


def check(command: str) -> None:
    """Parses `command` (placeholders filled, an optional part's brackets taken away: its
    [--config=hex_thesis] kept) as its script would; raises (or exits) where it would refuse it."""
    command = re.sub(r"\[([^\]]*)\]", r"\1", filled(command))
    argv = shlex.split(command)
    kind = COMMAND.match(command).group(1) or COMMAND.match(command).group(2)
    argv = argv[1:] if argv[0].startswith("azjax-") else argv[2:]
    if "--help" in argv or "-h" in argv:
        return
    if kind == "train":
        config, _ = train.parse(argv)
        if str(config.init_from).startswith("pretrained/"):  # the shipped network must fit
            transfer.resolve(config)
    elif kind == "evaluate":
        parser, _ = evaluate.build_parser()
        parser.parse_args(argv)
    else:  # play.py: its parser for the game named (a ckpt agent's game needs its checkpoint)
        game = next((a.split("=", 1)[1] for a in argv if a.startswith("--game=")), None)
        parser, _ = play.build_parser(game)
        parser.parse_args(argv)


@pytest.mark.parametrize(
    "where, command", [c for c in COMMANDS if not pattern(c[1])], ids=lambda v: v
)
def test_a_documented_command_parses(where, command, monkeypatch):
    if "--game=mnk" in command:  # docs/adding_a_game.md's worked example, registered as there
        monkeypatch.setitem(games._REGISTRY, "mnk", "examples.mnk_game:MNKGame")
    try:
        check(command)
    except SystemExit as e:
        pytest.fail(f"{where}: {command!r} is refused by its parser (exit {e.code})")
    except ValueError as e:  # a CheckpointError too
        pytest.fail(f"{where}: {command!r} is refused: {e}")
