"""Play a game against an agent in the terminal, or serve an agent to other programs over GTP.

    python play.py --game=othello --size=8 --agent=ckpt:runs/othello8
    python play.py --game=hex --size=9 --agent=mcts:sims=200 --human_color=white
    python play.py --gtp --game=hex --size=9 --agent=mcts:sims=100     # GTP version 2 on stdio

In the terminal, type a move by its name (Hex and Othello `d3`, Othello `pass`, Connect Four `4`),
or `undo` (takes back your last move and the agent's reply), `moves` (lists the legal moves),
`help`, `quit`. Agents: `random`, `mcts:sims=N` (pure MCTS with random rollouts),
`ckpt:WORKDIR[@STEP][,sims=N]` (a trained network with search, latest checkpoint by default).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Callable

import games
from azjax import config as cfg

PLAYER_NAMES = ("X (black)", "O (white)")
HUMAN_COLOURS = {"first": 0, "black": 0, "x": 0, "second": 1, "white": 1, "o": 1}
SHOW_LEGAL_UP_TO = 40  # longer lists of legal moves are shown by the `moves` command


# ---- command line ----------------------------------------------------------------------------------
def build_parser(game: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--game", default="hex", help=f"one of {', '.join(games.names())}")
    parser.add_argument("--agent", default="mcts:sims=100",
                        help="random | mcts:sims=N | ckpt:WORKDIR[@STEP][,sims=N]")
    parser.add_argument("--human_color", default=None,
                        help="first/black or second/white (default: first)")
    parser.add_argument("--gtp", action="store_true",
                        help="speak GTP version 2 on stdin/stdout instead of playing a person")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the agent")
    options = parser.add_argument_group(f"{game} options")
    for f in dataclasses.fields(games.game_class(game)):
        options.add_argument(f"--{f.name}", default=None, help=f"(default: {f.default})")
    return parser


def parse(argv: list[str]) -> tuple[games.Game, argparse.Namespace]:
    """The game (with its options) and the parsed flags; ValueError for bad values."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--game", default="hex")
    known, _ = pre.parse_known_args(argv)
    if known.game not in games.names():
        raise ValueError(f"--game: unknown game {known.game!r}; known games: "
                         f"{', '.join(games.names())}")
    args = build_parser(known.game).parse_args(argv)
    options = {}
    for f in dataclasses.fields(games.game_class(args.game)):
        text = getattr(args, f.name)
        if text is not None:
            options[f.name] = cfg.parse_value(f.name, text, type(f.default))
    if args.gtp and args.human_color is not None:
        raise ValueError("--human_color is for play in the terminal, not --gtp")
    colour = (args.human_color or "first").lower()
    if colour not in HUMAN_COLOURS:
        raise ValueError(f"--human_color: {args.human_color!r}; use first, second, black or white")
    args.human = HUMAN_COLOURS[colour]
    return games.make(args.game, **options), args


# ---- agents (stopgap until azjax/agents.py) ----------------------------------------------------------
def single_state(act: Callable, variables, seed: int) -> Callable:
    """An agent for one state, ``agent(state) -> int``, over a batched ``act(v, key, states[B])``.

    The state gets a leading axis of 1 and the whole call is jitted once; every call uses a fresh
    key split from ``seed``.
    """
    import jax

    one = jax.jit(lambda v, k, s: act(v, k, jax.tree_util.tree_map(lambda x: x[None], s))[0])
    key = [jax.random.PRNGKey(seed)]  # the next call's key, replaced on every call

    def agent(state) -> int:
        key[0], sub = jax.random.split(key[0])
        return int(one(variables, sub, state))

    return agent


def make_agent(text: str, game: games.Game, seed: int = 0) -> Callable:
    """``random``, ``mcts:sims=N`` or ``ckpt:WORKDIR[@STEP][,sims=N]`` as ``agent(state) -> int``."""
    from azjax.arena import make_random_agent, make_search_agent
    from azjax.search import SearchSpec

    kind, _, rest = text.partition(":")
    fields = [f for f in rest.split(",") if f]
    if kind == "random" and not rest:
        return single_state(make_random_agent(game), None, seed)
    if kind == "mcts":
        sims = _sims(fields, text, 100)
        return single_state(make_search_agent(game, SearchSpec.pure_mcts(sims), None), None, seed)
    if kind == "ckpt" and fields:
        from azjax.network import make_apply, make_network
        from experiments.common import restore_variables

        path, _, step = fields[0].partition("@")
        step = None if step in ("", "latest") else int(step)
        config, variables, _ = restore_variables(path, step)
        if config.make_game() != game:
            raise ValueError(f"{text}: the network plays {config.make_game()}, not {game}")
        spec = SearchSpec.from_config(config, num_simulations=_sims(fields[1:], text,
                                                                    config.num_simulations))
        apply = make_apply(make_network(config, game))
        return single_state(make_search_agent(game, spec, apply), variables, seed)
    raise ValueError(f"unknown agent {text!r}; use random, mcts:sims=N or "
                     "ckpt:WORKDIR[@STEP][,sims=N]")


def _sims(fields: list[str], text: str, default: int) -> int:
    sims = default
    for f in fields:
        name, _, value = f.partition("=")
        if name != "sims" or not value.isdigit() or int(value) < 1:
            raise ValueError(f"{text}: expected sims=N (N >= 1), got {f!r}")
        sims = int(value)
    return sims


# ---- a person against an agent ---------------------------------------------------------------------
def show(game: games.Game, state) -> str:
    """The board, and the legal moves when there are not too many to read."""
    import numpy as np

    text = game.render(state)
    if bool(game.is_terminal(state)):
        return text
    legal = [game.action_to_str(a) for a in np.flatnonzero(np.asarray(game.legal_mask(state)))]
    if len(legal) <= SHOW_LEGAL_UP_TO:
        return f"{text}\nlegal moves: {' '.join(legal)}"
    return f"{text}\n{len(legal)} legal moves (`moves` lists them)"


def result_text(game: games.Game, state, human: int) -> str:
    returns = [float(r) for r in game.returns(state)]
    if returns[0] == returns[1]:
        return "game over: a draw"
    winner = 0 if returns[0] > returns[1] else 1
    who = "you win" if winner == human else "the agent wins"
    return f"game over: {PLAYER_NAMES[winner]} wins; {who}"


HELP = ("type a move (e.g. {example}), or: undo (take back your last move), moves (list the legal "
        "moves), help, quit")


def play_human(game: games.Game, agent: Callable, human: int, read: Callable = input,
               write: Callable = print):
    """One game between a person (player ``human``) typing at ``read`` and ``agent``.

    Returns the final state, or None if the person quit (``quit`` or the end of input).
    """
    import jax
    import numpy as np

    step = jax.jit(game.step)
    history = [game.init()]
    write(f"{game.name}: you are {PLAYER_NAMES[human]}; "
          + HELP.format(example=game.action_to_str(0)))
    while True:
        state = history[-1]
        write("\n" + show(game, state))
        if bool(game.is_terminal(state)):
            write(result_text(game, state, human))
            return state
        mover = int(game.current_player(state))
        if mover != human:
            action = agent(state)
            write(f"{PLAYER_NAMES[mover]}, the agent, plays {game.action_to_str(action)}")
            history.append(step(state, action))
            continue
        while True:  # read until the person moves or takes moves back
            try:
                text = read(f"{PLAYER_NAMES[human]} to move> ")
            except EOFError:
                write("")
                return None
            command = text.strip().lower()
            if not command:
                continue
            if command in ("quit", "exit"):
                return None
            if command == "help":
                write(HELP.format(example=game.action_to_str(0)))
            elif command == "moves":
                legal = np.flatnonzero(np.asarray(game.legal_mask(state)))
                write("legal moves: " + " ".join(game.action_to_str(a) for a in legal))
            elif command == "undo":
                earlier = [i for i, s in enumerate(history[:-1])
                           if int(game.current_player(s)) == human]
                if not earlier:
                    write("nothing to undo: you have not moved yet")
                    continue
                del history[earlier[-1] + 1:]
                write(f"took back to move {int(history[-1].num_moves) + 1}")
                break
            else:
                try:
                    action = game.parse_action(text, state)
                except ValueError as e:
                    write(f"{e}\n(type help for the commands)")
                    continue
                history.append(step(state, action))
                break


# ---- GTP --------------------------------------------------------------------------------------------
def serve_gtp(game: games.Game, agent_text: str, seed: int) -> None:
    """GTP on stdin/stdout. Anything else printed goes to stderr so it cannot corrupt answers."""
    from importlib.metadata import PackageNotFoundError, version

    from azjax.gtp import GTPEngine

    try:
        package = version("azjax")
    except PackageNotFoundError:
        package = "unknown"
    out, sys.stdout = sys.stdout, sys.stderr
    engine = GTPEngine(game, lambda g: make_agent(agent_text, g, seed), name="azjax",
                       version=f"{package} {agent_text}")
    try:
        engine.run(iter(sys.stdin.readline, ""), out)
    finally:
        sys.stdout = out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        game, args = parse(argv)
        if args.gtp:
            serve_gtp(game, args.agent, args.seed)
            return 0
        agent = make_agent(args.agent, game, args.seed)
    except ValueError as e:
        print(f"play.py: error: {e}", file=sys.stderr)
        return 2
    try:
        play_human(game, agent, args.human)
    except KeyboardInterrupt:
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
