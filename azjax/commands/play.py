"""Play a game against an agent in the terminal, or serve an agent to other programs over GTP.

    python play.py --agent=ckpt:runs/othello8                # the game comes from the checkpoint
    python play.py --game=hex --size=9 --agent=mcts:sims=200 --human_color=white
    python play.py --gtp --game=hex --size=9 --agent=ckpt:runs/hex9,sims=100   # GTP 2 on stdio
    python play.py --game=tictactoe --agents=random,minimax     # watch two agents, then rematch?
    python play.py --game=hex --size=5 --agents=mcts:sims=50,perfect --games=4   # no questions

In the terminal, type a move by its name (Hex and Othello `d3`, Othello `pass`, Hex `swap`,
Connect Four `4`), or `undo` (takes back your last move and the agent's reply), `moves` (lists the
legal moves), `resign`, `help`, `quit`. Agents are the specs of azjax/eval/specs.py:
`ckpt:WORKDIR[@STEP][,..]` (a trained network with search), `mcts[:sims=N]` (pure MCTS with random
rollouts), `random`, `minimax[:depth=D]`, `reversi[:depth=D]` (8x8 Othello's alpha-beta engine),
`gtp:"COMMAND"` (another GTP engine), `human` (two people at this keyboard, taking turns).

`--agents=A,B` plays two agents against each other with the board printed after every move, A
black in the first game, then asks "rematch? [y/N]" (colours swapped); `--games=N` plays N games
without asking (colours alternating) and ends with a summary. Not with --agent, --gtp or
--human_color.

Ctrl-C (or SIGTERM) stops at once, also in the middle of the agent's search (exit code 130 or
143). Input bytes that are not valid in the locale's encoding are read as U+FFFD, not fatal.
Errors are one line and exit code 2 (`--debug` shows tracebacks); a GTP agent's engine that
fails during a game is one line and exit code 1, as in evaluate.py.
"""

from __future__ import annotations

import argparse
import sys

import games
from azjax import cli, flags
from azjax.commands import describe
from azjax.commands import prog as prog_name

DEFAULT_AGENT = "mcts:sims=100"
_NOT_WITH_AGENTS = ("--agent", "--gtp", "--human_color")  # flags of the other two modes


def build_parser(
    game: str | None, defaults: dict | None = None, *, prog: str | None = None
) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser, and the names of its game option flags (those of `game`); `prog`: the name
    in its usage (default: as run)."""
    prog = prog or prog_name("play.py")
    parser = flags.Parser(
        prog=prog,
        description=describe(__doc__, prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--game",
        default=None,
        help=f"one of {', '.join(games.names())} (default: the ckpt agent's game)",
    )
    parser.add_argument(
        "--agent",
        default=None,
        help="an agent spec (azjax/eval/specs.py): ckpt:WORKDIR[@STEP][,sims=N,"
        '...], mcts[:sims=N], random, minimax[:depth=D], reversi[:depth=D], gtp:"COMMAND", '
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
    parser.add_argument(
        "--agents",
        default=None,
        metavar="A,B",
        help="watch two agents (specs as --agent, separated by a comma) play each other",
    )
    parser.add_argument(
        "--games",
        type=int,
        default=None,
        help="with --agents: play this many games without asking for a rematch",
    )
    parser.add_argument("--seed", type=flags.seed, default=0, help="random seed of the agent")
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks of errors instead of one line"
    )
    option_flags = []
    if game is not None:
        option_flags = flags.add_game_flags(
            parser.add_argument_group(f"{game} options"), game, defaults=defaults
        )
        parser.hints.update(flags.game_option_hints(game))
    return parser, option_flags


def parse(argv: list[str]) -> tuple[games.Game, argparse.Namespace]:
    """The game (with its options) and the parsed flags; ValueError for bad values.

    Without --game the game is the ckpt agent's, with its options (flags override them).
    """
    from azjax.eval.player import HUMAN_COLOURS

    pre = flags.Parser(add_help=False)
    pre.add_argument("--game", default=None)
    pre.add_argument("--agent", default=None)
    pre.add_argument("--agents", default=None)
    pre.add_argument("-h", "--help", action="store_true")
    known, _ = pre.parse_known_args(argv)
    if known.agents is not None and known.agent is not None:  # before the game they may imply
        raise ValueError("--agents (two agents, watched) cannot be used with --agent")
    name, base = known.game, {}
    if name is None and not known.help:
        from azjax.eval import checkpoint_config

        agent = DEFAULT_AGENT if known.agent is None else known.agent
        specs = [agent] if known.agents is None else split_agents(known.agents)
        configs = [c for c in map(checkpoint_config, specs) if c is not None]
        if not configs:
            check, _ = build_parser(None)  # a mistyped flag is the one to name first
            flags.add_game_flags(check.add_argument_group("game options"), None)
            check.parse_args(argv)
            raise ValueError("give --game=NAME (only a ckpt: agent brings its own game)")
        name, base = configs[0].game, dict(configs[0].game_options)
    if name is not None and name not in games.names():
        raise ValueError(f"--game: unknown game {name!r}; known games: {', '.join(games.names())}")
    parser, option_flags = build_parser(name, base)
    args = parser.parse_args(argv)
    options = {**base, **flags.game_options(args, name, option_flags)}
    if args.agents is not None:
        given = {"--agent": args.agent, "--gtp": args.gtp, "--human_color": args.human_color}
        clash = [flag for flag in _NOT_WITH_AGENTS if given[flag] not in (None, False)]
        if clash:
            raise ValueError(f"--agents (two agents, watched) cannot be used with {clash[0]}")
        args.agents = split_agents(args.agents)
        if args.games is not None and args.games < 1:
            raise ValueError(f"--games must be at least 1, got {args.games}")
    elif args.games is not None:
        raise ValueError("--games is for --agents=A,B (two agents watched)")
    args.agent = DEFAULT_AGENT if args.agent is None else args.agent
    if args.gtp and args.human_color is not None:
        raise ValueError("--human_color is for play in the terminal, not --gtp")
    if args.gtp and args.agent.strip().partition(":")[0] == "human":
        raise ValueError("--agent=human cannot serve GTP: stdin carries the protocol")
    colour = ("first" if args.human_color is None else args.human_color).lower()
    if colour not in HUMAN_COLOURS:
        raise ValueError(f"--human_color: {args.human_color!r}; use first, second, black or white")
    args.human = HUMAN_COLOURS[colour]
    return games.make(name, **options), args


def split_agents(text: str) -> list[str]:
    """--agents: two specs separated by a comma (`specs.split_specs`)."""
    from azjax.eval.specs import split_specs

    specs = split_specs(text)
    if len(specs) != 2:
        raise ValueError(
            f"--agents: give two agent specs separated by a comma (e.g. random,minimax), "
            f"got {len(specs)}: {text!r}"
        )
    return specs


def main(argv: list[str] | None = None) -> int:
    """`azjax-play` and `python play.py`: the exit code (0, 2 for an error, 1 for a failing GTP
    engine, 130 or 143 when stopped by a signal)."""
    argv = sys.argv[1:] if argv is None else argv
    return cli.run(
        prog_name("play.py"),
        _main,
        argv,
        threaded=True,
        memory_hint="lower the agent's sims=",
        folder="folder",
    )


def _main(argv: list[str]) -> int:
    from azjax.eval import GTPError

    try:
        return _play(argv)
    except GTPError as e:  # a GTP agent's engine that fails: one line, as evaluate.py's
        if "--debug" in argv:
            raise
        return cli.fail(prog_name("play.py"), f"GTP engine: {e}", code=1)


def _play(argv: list[str]) -> int:
    from azjax.eval.player import tolerant_stdin

    tolerant_stdin()
    game, args = parse(argv)
    from azjax.eval import make_player, play_human, serve_gtp, watch

    if args.agents is not None:
        players = []
        try:
            for i, spec in enumerate(args.agents):
                players.append(make_player(spec, game, args.seed + i, announce=True))
            watch(game, players, args.agents, games=args.games)
        finally:
            for player in players:
                player.close()
        return 0
    if args.gtp:
        serve_gtp(game, lambda g: make_player(args.agent, g, args.seed), args.agent)
        return 0
    if args.agent.strip().partition(":")[0] == "human":  # two people at this keyboard
        play_human(game, None, args.human)
        return 0
    player = make_player(args.agent, game, args.seed, announce=True)
    try:
        play_human(game, player, args.human)
    finally:
        player.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
