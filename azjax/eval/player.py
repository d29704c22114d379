"""One game at a time, move by move: the `Player` adapter and the person at the keyboard.

`Player` turns any `Agent` into ``player(state) -> action`` for one unbatched state; the terminal
(`play_human`, play.py) and the GTP engine (`azjax.eval.gtp`) both drive agents through it, and
both keep the game as a history of states so moves can be taken back: `Player.sync` keeps a
stateful agent (a GTP engine) in step with that history.

A person types moves through `ask_move`, both as the opponent in `play_human` (with `undo`) and
as the `human` agent of a match (`make_human_agent`, without it). `watch` shows two agents playing
each other, game after game (play.py --agents).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable

import numpy as np

from azjax.eval.agent import COLOURS, RESIGN, Agent
from games.base import Game

UNDO, QUIT = -2, -3  # what `ask_move` returns besides an action and RESIGN
HUMAN_COLOURS = {
    "first": 0,
    "second": 1,
    **{n: i for i, c in enumerate(COLOURS) for n in (c.name, c.stone.lower())},
}
SHOW_LEGAL_UP_TO = 40  # longer lists of legal moves are shown by the `moves` command
HELP = "type a move (e.g. {example}), or: {undo}moves (list the legal moves), resign, help, quit"
LONGEST_INPUT = 64  # characters: a longer line is not a move, and is not echoed back


def tolerant_stdin() -> None:
    """Read standard input with undecodable bytes replaced (U+FFFD) instead of failing on them,
    whatever the locale (a strict UTF-8 one raises UnicodeDecodeError on a stray byte)."""
    if isinstance(sys.stdin, io.TextIOWrapper):
        sys.stdin.reconfigure(errors="replace")


class Player:
    """An `Agent` as a player of one game: ``player(state) -> action`` (negative: it resigns).

    A batched agent gets the state with a leading axis of 1, jitted once, and a fresh key split
    from ``seed`` each call. A Python agent's ``choose`` is called as it is; a stateful one (a GTP
    engine) is kept in step by `sync`, which the GTP engine and the terminal loop call before each
    move with the game so far: it tells the agent the moves it has not seen, and after an undo or
    a new game resets it and tells it every move again.
    """

    def __init__(self, agent: Agent, seed: int = 0, *, announce: bool = False):
        import jax

        self.agent = agent
        self.told: list[int] | None = None  # the moves a stateful agent knows; None: reset it
        if agent.batched:
            add_axis = lambda s: jax.tree_util.tree_map(lambda x: x[None], s)  # noqa: E731
            self._act = jax.jit(lambda v, k, s: agent.act(v, k, add_axis(s))[0])
            self._key = jax.random.PRNGKey(seed)
        self._quiet = not announce  # `announce`: say (on stdout) that the first move compiles

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
            try:
                action = int(self.agent.choose(state))
            except BaseException:
                self.told = None  # what it played on its own board is unknown: set it up again
                raise
            if self.agent.stateful and self.told is not None and action >= 0:
                self.told.append(action)  # the agent played it on its own board
            return action
        import jax

        if not self._quiet:  # the first call compiles the search: say why it waits
            what = "its search" if self.agent.search is not None else "its move"
            print(f"({self.agent.name}: compiling {what} for the first move)", flush=True)
            self._quiet = True
        self._key, key = jax.random.split(self._key)
        return int(self._act(self.agent.variables, key, state))

    def close(self) -> None:
        self.agent.close()


# ---- a person ------------------------------------------------------------------------------------
def show(game: Game, state) -> str:
    """The board, and the legal moves when there are not too many to read."""
    text = game.render(state)
    if bool(game.is_terminal(state)):
        return text
    legal = [game.action_to_str(a) for a in np.flatnonzero(np.asarray(game.legal_mask(state)))]
    if len(legal) <= SHOW_LEGAL_UP_TO:
        return f"{text}\nlegal moves: {' '.join(legal)}"
    return f"{text}\n{len(legal)} legal moves (`moves` lists them)"


def help_text(game: Game, undo: bool) -> str:
    return HELP.format(
        example=game.action_to_str(0), undo="undo (take back your last move), " if undo else ""
    )


def ask_move(
    game: Game, state, *, read: Callable = input, write: Callable = print, undo: bool = False
) -> int:
    """Reads lines until the person to move in ``state`` types a legal move (its action),
    ``resign`` (RESIGN), ``undo`` (UNDO, where ``undo`` is allowed) or ``quit`` / the end of input
    (QUIT). ``help`` and ``moves`` are answered here; a bad move is explained and asked again."""
    prompt = f"{COLOURS[int(game.current_player(state))].label} to move> "
    while True:
        try:
            text = read(prompt)
        except EOFError:
            write("")
            return QUIT
        command = text.strip().lower()
        if not command:
            continue
        if len(command) > LONGEST_INPUT:
            write(f"that is not a move ({len(command)} characters)\n(type help for the commands)")
            continue
        if command in ("quit", "exit"):
            return QUIT
        if command == "resign":
            return RESIGN
        if command == "help":
            write(help_text(game, undo))
        elif command == "moves":
            legal = np.flatnonzero(np.asarray(game.legal_mask(state)))
            write("legal moves: " + " ".join(game.action_to_str(a) for a in legal))
        elif command == "undo" and undo:
            return UNDO
        else:
            try:
                return game.parse_action(text, state)
            except ValueError as e:
                write(f"{e}\n(type help for the commands)")


def make_human_agent(
    game: Game,
    name: str = "human",
    *,
    read: Callable = input,
    write: Callable = print,
    quits: bool = False,
) -> Agent:
    """The `human` agent of a match: shows the board and asks for a move (`ask_move`); quitting
    resigns the game. The end of input (stdin closed, or not a terminal) stops the match with a
    ValueError: resigning every later game would report a result no one played. With `quits`
    (a second person in `play_human`, where the game is all there is) quitting and the end of
    input return QUIT, which stops the game as the first person's do."""

    def choose(state):
        write(show(game, state))
        ended = []

        def reading(prompt: str) -> str:
            try:
                return read(prompt)
            except EOFError:
                ended.append(True)
                raise

        action = ask_move(game, state, read=reading, write=write)
        if quits and action == QUIT:
            return QUIT
        if ended:
            raise ValueError(
                f"{name}: the input ended (end of file on stdin) before the match did; play a "
                "human at a terminal, and type resign or quit to give up a game"
            )
        return RESIGN if action == QUIT else action

    return Agent(name=name, batched=False, choose=choose, stateful=True)


def result_text(game: Game, state, human: int | None) -> str:
    """'game over: ...' of a finished game; `human`: the person's colour (None: two people)."""
    returns = [float(r) for r in game.returns(state)]
    if returns[0] == returns[1]:
        return "game over: a draw"
    winner = 0 if returns[0] > returns[1] else 1
    if human is None:
        return f"game over: {COLOURS[winner].label} wins"
    who = "you win" if winner == human else "the agent wins"
    return f"game over: {COLOURS[winner].label} wins; {who}"


def play_human(
    game: Game,
    agent: Callable | None,
    human: int,
    read: Callable = input,
    write: Callable = print,
):
    """One game between a person (player ``human``) typing at ``read`` and ``agent``; with
    ``agent=None`` between two people at one keyboard, each with ``undo`` (back to before their
    own last move), ``resign`` and ``quit``.

    ``agent(state) -> action`` (negative: it resigns; QUIT: a person behind it quit), with an
    optional ``agent.sync(states, actions)`` called before each of its moves (see `Player`).
    Returns the last state, or None if a person quit (``quit`` or the end of input).
    """
    import jax

    step = jax.jit(game.step)
    history, actions = [game.init()], []  # actions[i] leads from history[i] to history[i + 1]
    if agent is None:
        first = COLOURS[0].label
        write(f"{game.name}: two people, {first} first; {help_text(game, undo=True)}")
    else:
        write(f"{game.name}: you are {COLOURS[human].label}; {help_text(game, undo=True)}")
    while True:
        state = history[-1]
        write("\n" + show(game, state))
        if bool(game.is_terminal(state)):
            write(result_text(game, state, None if agent is None else human))
            return state
        mover = int(game.current_player(state))
        if agent is not None and mover != human:
            if hasattr(agent, "sync"):
                agent.sync(history, actions)
            action = agent(state)
            if action == QUIT:  # a person behind the agent (`make_human_agent(quits=True)`)
                return None
            if action < 0:
                write(f"{COLOURS[mover].label}, the agent, resigns; you win")
                return state
            write(f"{COLOURS[mover].label}, the agent, plays {game.action_to_str(action)}")
        else:  # a person: the one at the keyboard, or either of two
            action = _person_moves(game, history, actions, mover, read, write)
            if action == QUIT:
                return None
            if action == RESIGN:
                winner = "the agent" if agent is not None else COLOURS[1 - mover].label
                write(f"{COLOURS[mover].label} resigns; {winner} wins")
                return state
            if action == UNDO:
                continue
        history.append(step(state, action))
        actions.append(action)


def _person_moves(game: Game, history: list, actions: list, human: int, read, write) -> int:
    """The person's move, RESIGN or QUIT; or UNDO after cutting ``history`` and ``actions`` back
    to before the person's last move."""
    while True:
        action = ask_move(game, history[-1], read=read, write=write, undo=True)
        if action != UNDO:
            return action
        earlier = [i for i, s in enumerate(history[:-1]) if int(game.current_player(s)) == human]
        if earlier:
            break
        write(f"nothing to undo: {COLOURS[human].label} has not moved yet")
    del history[earlier[-1] + 1 :], actions[earlier[-1] :]
    write(f"took back to move {int(history[-1].num_moves) + 1}")
    return UNDO


# ---- two agents, watched -------------------------------------------------------------------------
def watch(
    game: Game,
    players: tuple[Callable, Callable],
    names: tuple[str, str],
    *,
    games: int | None = None,
    read: Callable = input,
    write: Callable = print,
) -> list[float]:
    """Two agents play each other with the board shown after every move (`show`), the first
    (``names[0]``) black in the first game and the colours swapped every game after. With
    ``games`` that many games are played; without, the viewer is asked "rematch? [y/N]" after
    each (the end of input is a no). Ends with a summary line. Returns the first agent's return
    (+1 / 0 / -1) in each game. ``players`` are ``player(state) -> action`` as in `play_human`
    (negative: resign), each with an optional ``sync``. Two equal names are told apart as
    ``NAME #1`` and ``NAME #2``."""
    import jax

    if names[0] == names[1]:
        names = (f"{names[0]} #1", f"{names[1]} #2")
    step = jax.jit(game.step)  # compiled once for all the games
    scores: list[float] = []
    while True:
        first_black = len(scores) % 2 == 0
        order = (0, 1) if first_black else (1, 0)  # the agent playing player 0, player 1
        write(
            f"\ngame {len(scores) + 1}: {COLOURS[0].label} {names[order[0]]}, "
            f"{COLOURS[1].label} {names[order[1]]}"
        )
        returns = _watch_game(
            game, step, [players[i] for i in order], [names[i] for i in order], write
        )
        scores.append(returns[0] if first_black else returns[1])
        if games is not None:
            if len(scores) >= games:
                break
            continue
        try:
            again = read("rematch? [y/N] ").strip().lower()
        except EOFError:
            again = ""
        if again not in ("y", "yes"):
            break
    wins, losses = scores.count(1.0), scores.count(-1.0)
    write(
        f"{len(scores)} game{'s' * (len(scores) != 1)}: {names[0]} won {wins}, "
        f"{names[1]} won {losses}, {len(scores) - wins - losses} drawn"
    )
    return scores


def _watch_game(
    game: Game, step: Callable, players: list, names: list[str], write: Callable
) -> list[float]:
    """One game, player 0 ``players[0]``; shows every move and returns the players' returns."""
    history, actions = [game.init()], []
    write(show(game, history[0]))
    while not bool(game.is_terminal(history[-1])):
        state = history[-1]
        mover = int(game.current_player(state))
        who = f"{COLOURS[mover].label}, {names[mover]},"
        if hasattr(players[mover], "sync"):
            players[mover].sync(history, actions)
        action = players[mover](state)
        if action < 0:
            write(f"{who} resigns; {COLOURS[1 - mover].label}, {names[1 - mover]}, wins")
            return [-1.0, 1.0] if mover == 0 else [1.0, -1.0]
        write(f"\n{who} plays {game.action_to_str(action)}")
        history.append(step(state, action))
        actions.append(action)
        write(show(game, history[-1]))
    returns = [float(r) for r in game.returns(history[-1])]
    if returns[0] == returns[1]:
        write("game over: a draw")
    else:
        winner = 0 if returns[0] > returns[1] else 1
        write(f"game over: {COLOURS[winner].label}, {names[winner]}, wins")
    return returns
