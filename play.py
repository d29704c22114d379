"""Play a game against an agent in the terminal, or serve an agent to other programs over GTP.

    python play.py --agent=ckpt:runs/othello8                # the game comes from the checkpoint
    python play.py --game=hex --size=9 --agent=mcts:sims=200 --human_color=white
    python play.py --gtp --game=hex --size=9 --agent=ckpt:runs/hex9,sims=100   # GTP 2 on stdio

In the terminal, type a move by its name (Hex and Othello `d3`, Othello `pass`, Hex `swap`,
Connect Four `4`), or `undo` (takes back your last move and the agent's reply), `moves` (lists the
legal moves), `help`, `quit`. Agents are the specs of azjax/agents.py: `ckpt:WORKDIR[@STEP][,..]`
(a trained network with search), `mcts[:sims=N]` (pure MCTS with random rollouts), `random`,
`minimax[:depth=D]`, `gtp:"COMMAND"` (another GTP engine), `human`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Callable

import games
from azjax import config as cfg

DEFAULT_AGENT = "mcts:sims=100"
PLAYER_NAMES = ("X (black)", "O (white)")
HUMAN_COLOURS = {"first": 0, "black": 0, "x": 0, "second": 1, "white": 1, "o": 1}
SHOW_LEGAL_UP_TO = 40  # longer lists of legal moves are shown by the `moves` command


# ---- command line ----------------------------------------------------------------------------------
def build_parser(game: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--game", default=None,
                        help=f"one of {', '.join(games.names())} (default: the ckpt agent's game)")
    parser.add_argument("--agent", default=DEFAULT_AGENT,
                        help="an agent spec (azjax/agents.py): ckpt:WORKDIR[@STEP][,sims=N,...], "
                             "mcts[:sims=N], random, minimax[:depth=D], gtp:\"COMMAND\", human "
                             f"(default: {DEFAULT_AGENT})")
    parser.add_argument("--human_color", default=None,
                        help="first/black or second/white (default: first)")
    parser.add_argument("--gtp", action="store_true",
                        help="speak GTP version 2 on stdin/stdout instead of playing a person")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the agent")
    if game is not None:
        options = parser.add_argument_group(f"{game} options")
        for f in dataclasses.fields(games.game_class(game)):
            options.add_argument(f"--{f.name}", default=None, help=f"(default: {f.default})")
    return parser


def parse(argv: list[str]) -> tuple[games.Game, argparse.Namespace]:
    """The game (with its options) and the parsed flags; ValueError for bad values.

    Without --game the game is the ckpt agent's, with its options (flags override them).
    """
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--game", default=None)
    pre.add_argument("--agent", default=DEFAULT_AGENT)
    pre.add_argument("-h", "--help", action="store_true")
    known, _ = pre.parse_known_args(argv)
    name, base = known.game, {}
    if name is None and not known.help:
        from azjax.agents import checkpoint_config

        config = checkpoint_config(known.agent)
        if config is None:
            raise ValueError("give --game=NAME (only a ckpt: agent brings its own game)")
        name, base = config.game, dict(config.game_options)
    if name is not None and name not in games.names():
        raise ValueError(f"--game: unknown game {name!r}; known games: {', '.join(games.names())}")
    args = build_parser(name).parse_args(argv)
    options = dict(base)
    for f in dataclasses.fields(games.game_class(name)):
        text = getattr(args, f.name)
        if text is not None:
            options[f.name] = cfg.parse_value(f.name, text, type(f.default))
    if args.gtp and args.human_color is not None:
        raise ValueError("--human_color is for play in the terminal, not --gtp")
    if args.gtp and args.agent.strip().partition(":")[0] == "human":
        raise ValueError("--agent=human cannot serve GTP: stdin carries the protocol")
    colour = (args.human_color or "first").lower()
    if colour not in HUMAN_COLOURS:
        raise ValueError(f"--human_color: {args.human_color!r}; use first, second, black or white")
    args.human = HUMAN_COLOURS[colour]
    return games.make(name, **options), args


# ---- agents -----------------------------------------------------------------------------------------
class Player:
    """An agent of azjax/agents.py as a player of one game: ``player(state) -> action``.

    A batched agent gets the state with a leading axis of 1, jitted once, and a fresh key split
    from ``seed`` each call. A Python agent's ``choose`` is called as it is; a stateful one (a GTP
    engine) is kept in step by `sync`, which the GTP engine and the terminal loop call before each
    move with the game so far: it tells the agent the moves it has not seen, and after an undo or
    a new game resets it and tells it every move again. A resigning agent returns a negative
    action (``agents.RESIGN``).
    """

    def __init__(self, agent, seed: int = 0):
        import jax

        self.agent = agent
        self.told: list[int] | None = None  # the moves a stateful agent knows; None: reset it
        if agent.batched:
            add_axis = lambda s: jax.tree_util.tree_map(lambda x: x[None], s)  # noqa: E731
            self._act = jax.jit(lambda v, k, s: agent.act(v, k, add_axis(s))[0])
            self._key = jax.random.PRNGKey(seed)

    def sync(self, states: list, actions: list[int]) -> None:
        """``states[i]`` is the position before ``actions[i]``; ``states[-1]`` the one now."""
        if not self.agent.stateful:
            return
        if self.told is None or self.told != actions[: len(self.told)]:
            self.agent.reset()
            self.told = []
        for i in range(len(self.told), len(actions)):
            self.agent.observe_move(states[i], actions[i])
        self.told = list(actions)

    def __call__(self, state) -> int:
        if not self.agent.batched:
            action = int(self.agent.choose(state))
            if self.agent.stateful and self.told is not None and action >= 0:
                self.told.append(action)  # the agent played it on its own board
            return action
        import jax

        self._key, key = jax.random.split(self._key)
        return int(self._act(self.agent.variables, key, state))

    def close(self) -> None:
        self.agent.close()


def make_player(text: str, game: games.Game, seed: int = 0) -> Player:
    """The agent a spec names (``azjax.agents.parse_agent``), as a `Player` of ``game``."""
    from azjax.agents import parse_agent

    return Player(parse_agent(text, game), seed)


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

    ``agent(state) -> action`` (negative: it resigns), with an optional ``agent.sync(states,
    actions)`` called before each of its moves (see `Player`). Returns the last state, or None if
    the person quit (``quit`` or the end of input).
    """
    import jax
    import numpy as np

    step = jax.jit(game.step)
    history, actions = [game.init()], []  # actions[i] leads from history[i] to history[i + 1]
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
            if hasattr(agent, "sync"):
                agent.sync(history, actions)
            action = agent(state)
            if action < 0:
                write(f"{PLAYER_NAMES[mover]}, the agent, resigns; you win")
                return state
            write(f"{PLAYER_NAMES[mover]}, the agent, plays {game.action_to_str(action)}")
            history.append(step(state, action))
            actions.append(action)
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
                del history[earlier[-1] + 1:], actions[earlier[-1]:]
                write(f"took back to move {int(history[-1].num_moves) + 1}")
                break
            else:
                try:
                    action = game.parse_action(text, state)
                except ValueError as e:
                    write(f"{e}\n(type help for the commands)")
                    continue
                history.append(step(state, action))
                actions.append(action)
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
    try:
        engine = GTPEngine(game, lambda g: make_player(agent_text, g, seed), name="azjax",
                           version=f"{package} {agent_text}")
        try:
            engine.run(iter(sys.stdin.readline, ""), out)
        finally:
            engine.close()
    finally:
        sys.stdout = out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        game, args = parse(argv)
        if args.gtp:
            serve_gtp(game, args.agent, args.seed)
            return 0
        player = make_player(args.agent, game, args.seed)
    except ValueError as e:  # CheckpointError is one too
        print(f"play.py: error: {e}", file=sys.stderr)
        return 2
    try:
        play_human(game, player, args.human)
    except KeyboardInterrupt:
        print()
    finally:
        player.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
