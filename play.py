"""Play a game against an agent in the terminal, or serve an agent to other programs over GTP.

    python play.py --agent=ckpt:runs/othello8                # the game comes from the checkpoint
    python play.py --game=hex --size=9 --agent=mcts:sims=200 --human_color=white
    python play.py --gtp --game=hex --size=9 --agent=ckpt:runs/hex9,sims=100   # GTP 2 on stdio

In the terminal, type a move by its name (Hex and Othello `d3`, Othello `pass`, Hex `swap`,
Connect Four `4`), or `undo` (takes back your last move and the agent's reply), `moves` (lists the
legal moves), `resign`, `help`, `quit`. Agents are the specs of azjax/eval/specs.py:
`ckpt:WORKDIR[@STEP][,..]` (a trained network with search), `mcts[:sims=N]` (pure MCTS with random
rollouts), `random`, `minimax[:depth=D]`, `gtp:"COMMAND"` (another GTP engine), `human`.

Ctrl-C (or SIGTERM) stops at once, also in the middle of the agent's search (exit code 130 or
143). Input bytes that are not valid in the locale's encoding are read as U+FFFD, not fatal.
Errors are one line and exit code 2 (`--debug` shows tracebacks).
"""

from __future__ import annotations

import argparse
import sys

import games
from azjax import flags

DEFAULT_AGENT = "mcts:sims=100"


def _seed(text: str) -> int:
    value = int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be in [0, {2**32 - 1}], got {text}")
    return value


def build_parser(
    game: str | None, defaults: dict | None = None
) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser, and the names of its game option flags (those of `game`)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--game",
        default=None,
        help=f"one of {', '.join(games.names())} (default: the ckpt agent's game)",
    )
    parser.add_argument(
        "--agent",
        default=DEFAULT_AGENT,
        help="an agent spec (azjax/eval/specs.py): ckpt:WORKDIR[@STEP][,sims=N,"
        '...], mcts[:sims=N], random, minimax[:depth=D], gtp:"COMMAND", '
        f"human (default: {DEFAULT_AGENT})",
    )
    parser.add_argument(
        "--human_color", default=None, help="first/black or second/white (default: first)"
    )
    parser.add_argument(
        "--gtp",
        action="store_true",
        help="speak GTP version 2 on stdin/stdout instead of playing a person",
    )
    parser.add_argument("--seed", type=_seed, default=0, help="random seed of the agent")
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks of errors instead of one line"
    )
    option_flags = []
    if game is not None:
        option_flags = flags.add_game_flags(
            parser.add_argument_group(f"{game} options"), game, defaults=defaults
        )
    return parser, option_flags


def parse(argv: list[str]) -> tuple[games.Game, argparse.Namespace]:
    """The game (with its options) and the parsed flags; ValueError for bad values.

    Without --game the game is the ckpt agent's, with its options (flags override them).
    """
    from azjax.eval.player import HUMAN_COLOURS

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--game", default=None)
    pre.add_argument("--agent", default=DEFAULT_AGENT)
    pre.add_argument("-h", "--help", action="store_true")
    known, _ = pre.parse_known_args(argv)
    name, base = known.game, {}
    if name is None and not known.help:
        from azjax.eval import checkpoint_config

        config = checkpoint_config(known.agent)
        if config is None:
            raise ValueError("give --game=NAME (only a ckpt: agent brings its own game)")
        name, base = config.game, dict(config.game_options)
    if name is not None and name not in games.names():
        raise ValueError(f"--game: unknown game {name!r}; known games: {', '.join(games.names())}")
    parser, option_flags = build_parser(name, base)
    args = parser.parse_args(argv)
    options = {**base, **flags.game_options(args, name, option_flags)}
    if args.gtp and args.human_color is not None:
        raise ValueError("--human_color is for play in the terminal, not --gtp")
    if args.gtp and args.agent.strip().partition(":")[0] == "human":
        raise ValueError("--agent=human cannot serve GTP: stdin carries the protocol")
    colour = (args.human_color or "first").lower()
    if colour not in HUMAN_COLOURS:
        raise ValueError(f"--human_color: {args.human_color!r}; use first, second, black or white")
    args.human = HUMAN_COLOURS[colour]
    return games.make(name, **options), args


def main(argv: list[str] | None = None) -> int:
    from azjax import cli

    return cli.run("play.py", _main, sys.argv[1:] if argv is None else argv, threaded=True)


def _main(argv: list[str]) -> int:
    from azjax.eval.player import tolerant_stdin

    tolerant_stdin()
    game, args = parse(argv)
    from azjax.eval import make_player, play_human, serve_gtp

    if args.gtp:
        serve_gtp(game, lambda g: make_player(args.agent, g, args.seed), args.agent)
        return 0
    player = make_player(args.agent, game, args.seed)
    try:
        play_human(game, player, args.human)
    finally:
        player.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
