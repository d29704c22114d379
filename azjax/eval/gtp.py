"""The Go Text Protocol (version 2) for our games: an engine that serves any agent, and a client.

`GTPEngine` answers GTP command lines for one game and an agent, a function from a game state to
an action. It is pure Python over the game's functions, so tests feed it lines and read the
answers; `play.py --gtp` connects it to stdin and stdout.

    engine = GTPEngine(games.make("hex", size=9), make_agent)   # make_agent(game) -> agent
    engine.handle("boardsize 9")      # "= \\n\\n"
    engine.handle("play b e5")        # "= \\n\\n"
    engine.handle("genmove w")        # "= d6\\n\\n"

`GTPClient` runs a GTP engine as a subprocess and speaks to it; `make_gtp_agent` wraps a client
as the `gtp:` agent, with which evaluate.py and play.py play other programs (or this project's
own engine). `serve_gtp` runs an engine on stdin and stdout (`play.py --gtp`).

    with GTPClient("python play.py --gtp --game=hex --size=9 --agent=random") as engine:
        engine.boardsize(9)
        engine.play("b", "e5")
        move = engine.genmove("w")     # "d6"

Conventions:
- colours: GTP ``b``/``black`` is player 0 (moves first), ``w``/``white`` player 1;
- moves are the games' own names (Hex ``a1``, Othello ``d3``/``pass``, Connect Four ``4``),
  case-insensitive on input, lower case on output. Hex's swap move is ``swap-pieces`` on the
  wire, as HexGui and MoHex name it; the engine also accepts ``swap``, and the client turns
  ``swap`` into ``swap-pieces`` when it sends and back when it reads, so callers use the games'
  names throughout;
- these games alternate strictly (an Othello pass is a move of its own), so ``play`` and
  ``genmove`` are accepted only for the colour to move, with one exception: when the side to
  move has nothing but a pass, a ``play`` or ``genmove`` for the other colour passes for it
  first (Othello engines and controllers leave such passes implicit); anything else is an error.
  Such a pass goes with the move that made it: a command that fails takes it back, and ``undo``
  takes back the move and the pass before it, as the controller saw one move;
- input is read with undecodable bytes replaced (U+FFFD), and what is echoed back of a bad
  argument is cut to ``ECHO_LIMIT`` characters;
- ``boardsize N`` (or ``boardsize N N``) rebuilds the game with ``size=N`` and clears the board;
  for games without a size option only their own square size is accepted;
- ``komi X`` (a required GTP command, which controllers such as GoGui's twogtp send before each
  game) takes any number and changes nothing: none of these games has komi.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import TextIO

import jax
import numpy as np

import games
from azjax import cli, xla_flags
from azjax.eval.agent import COLOURS, RESIGN, Agent
from games.base import Game, GameState

# The engine moves with a `azjax.eval.player.Player`, or any function of a state (not terminal)
# to a legal action (< 0: resign); a factory builds one for a game (ValueError if it cannot).
PlayerFactory = Callable[[Game], Callable[[GameState], int]]

GTP_COLOURS = {n: i for i, c in enumerate(COLOURS) for n in (c.letter, c.name)}  # b/black: 0
SWAP_WIRE = "swap-pieces"  # HexGui's and MoHex's name of the swap move
ECHO_LIMIT = 40  # characters of a bad argument quoted back in an error
_NUMBER = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit() also takes "²"

COMMANDS = (
    "protocol_version",
    "name",
    "version",
    "known_command",
    "list_commands",
    "quit",
    "boardsize",
    "clear_board",
    "komi",
    "play",
    "genmove",
    "undo",
    "showboard",
)


class GTPError(Exception):
    """A GTP failure: an engine's ``?`` answer, a crashed engine or a timeout."""


class GTPTimeout(GTPError):
    pass


class _Failure(Exception):
    """A command the engine refuses; its message is the text after ``?``."""


# ---- the engine ----------------------------------------------------------------------------------
class GTPEngine:
    """Answers GTP commands for one game, moving with an agent built by ``make_agent(game)``.

    Agents are built once per game (``boardsize`` may change it) and kept, so switching sizes back
    and forth does not rebuild or recompile them. A factory that cannot serve a game (say, a
    network trained on another board size) raises ValueError, which ``boardsize`` reports. An
    agent that keeps its own board may have ``sync(states, actions)``, called before each
    ``genmove`` with the game so far (``actions[i]`` leads from ``states[i]``); ``close()``, if it
    has one, is called by `close`. A negative action resigns: ``genmove`` answers ``resign``.
    """

    def __init__(
        self, game: Game, make_agent: PlayerFactory, name: str = "azjax", version: str = "0.1.0"
    ):
        self.name, self.version = name, version
        self.make_agent = make_agent
        self.finished = False  # True after `quit`
        self._agents: dict[Game, Callable] = {}
        self._jitted: dict[Game, tuple[Callable, Callable]] = {}  # step, legal_mask
        self._set_game(game)

    # ---- the game being played ------------------------------------------------------------
    def _set_game(self, game: Game) -> None:
        if game not in self._agents:
            self._agents[game] = self.make_agent(game)
            self._jitted[game] = (jax.jit(game.step), jax.jit(game.legal_mask))
        self.game = game
        self._step, self._legal = self._jitted[game]  # kept: `boardsize` comes before each game
        self.history = [game.init()]  # states from the start; the last is the position now
        self.actions: list[int] = []  # actions[i] leads from history[i] to history[i + 1]
        self.implicit: list[bool] = []  # implicit[i]: actions[i] is a pass the engine made

    @property
    def state(self) -> GameState:
        return self.history[-1]

    def legal_actions(self) -> list[int]:
        return [int(a) for a in np.flatnonzero(np.asarray(self._legal(self.state)))]

    def close(self) -> None:
        """Close the agents that hold resources (a GTP agent's engine subprocess)."""
        for agent in self._agents.values():
            if hasattr(agent, "close"):
                agent.close()

    def _push(self, action: int, *, implicit: bool = False) -> None:
        self.history.append(self._step(self.state, action))
        self.actions.append(action)
        self.implicit.append(implicit)

    def _pop(self) -> None:
        self.history.pop()
        self.actions.pop()
        self.implicit.pop()

    @contextlib.contextmanager
    def _or_no_pass(self):
        """Run a move's command after `_colour_to_move`; if it fails or plays nothing, the pass
        that made for the other side is taken back (the controller is told nothing happened).
        An implicit pass is last in `implicit` only where this command made it: otherwise the
        move after it follows it, or it was taken back."""
        played = len(self.actions)
        made = bool(self.implicit) and self.implicit[-1]
        try:
            yield
        finally:
            if made and len(self.actions) == played:
                self._pop()

    def move_name(self, action: int) -> str:
        name = self.game.action_to_str(action)
        return SWAP_WIRE if name == "swap" else name

    # ---- the protocol ---------------------------------------------------------------------
    def handle(self, line: str) -> str:
        """The full response to one command line ("" for blank and comment lines)."""
        line = "".join(c for c in line.replace("\t", " ") if c >= " " or c == "\n")
        words = line.split("#", 1)[0].split()
        if not words:
            return ""
        ident = ""
        if _NUMBER.fullmatch(words[0]):
            ident, words = words[0], words[1:]
        if not words:
            return f"?{ident} missing command\n\n"
        command, args = words[0].lower(), words[1:]
        try:
            if command not in COMMANDS:
                raise _Failure("unknown command")
            result = getattr(self, f"cmd_{command}")(args)
        except _Failure as e:
            return _response("?", ident, str(e))
        except Exception as e:  # an agent that fails answers `?` and the engine carries on
            traceback.print_exc(file=sys.stderr)
            return _response("?", ident, f"{command} failed: {type(e).__name__}: {e}")
        return _response("=", ident, result)

    def run(self, lines: Iterable[str], out: TextIO) -> None:
        """Answer commands from ``lines`` on ``out`` until ``quit`` or the end of input."""
        for line in lines:
            response = self.handle(line)
            if response:
                out.write(response)
                out.flush()
            if self.finished:
                break

    # ---- commands (each takes the argument words and returns the result text) ---------------
    def cmd_protocol_version(self, args) -> str:
        return "2"

    def cmd_name(self, args) -> str:
        return self.name

    def cmd_version(self, args) -> str:
        return self.version

    def cmd_known_command(self, args) -> str:
        (command,) = _arity(args, 1)
        return "true" if command.lower() in COMMANDS else "false"

    def cmd_list_commands(self, args) -> str:
        return "\n".join(COMMANDS)

    def cmd_quit(self, args) -> str:
        self.finished = True
        return ""

    def cmd_boardsize(self, args) -> str:
        if len(args) not in (1, 2) or not all(_NUMBER.fullmatch(a) for a in args):
            raise _Failure("syntax error: boardsize N (or N N)")
        dims = (int(args[0]), int(args[-1]))  # boardsize N: N x N
        if "size" not in self.game.options:  # its own board, given either way round, alone
            shape = self.game.board_shape
            if dims not in (shape, shape[::-1]):
                shape = "x".join(map(str, shape))
                raise _Failure(
                    f"unacceptable size: {self.game.name} has no size option (its board is {shape})"
                )
            self._set_game(self.game)
            return ""
        if dims[0] != dims[1]:
            raise _Failure(f"unacceptable size: {self.game.name} boards are square")
        size = dims[0]
        try:
            self._set_game(games.make(self.game.name, **{**self.game.options, "size": size}))
        except ValueError as e:
            raise _Failure(f"unacceptable size: {e}") from None
        return ""

    def cmd_clear_board(self, args) -> str:
        del self.history[1:], self.actions[:], self.implicit[:]
        return ""

    def cmd_komi(self, args) -> str:
        (value,) = _arity(args, 1)
        try:
            float(value)
        except ValueError:
            raise _Failure(f"syntax error: komi takes a number, got {_quote(value)}") from None
        return ""  # accepted, as GTP asks, and ignored: none of these games scores a komi

    def cmd_play(self, args) -> str:
        colour, vertex = _arity(args, 2)
        player = self._colour_to_move(colour)
        with self._or_no_pass():
            text = "swap" if vertex.lower() == SWAP_WIRE else vertex
            try:
                action = self.game.parse_action(text)
            except ValueError:
                first, last = self.move_name(0), self.move_name(self.game.num_actions - 1)
                raise _Failure(
                    f"invalid vertex {_quote(vertex)}: {self.game.name} moves look like "
                    f"{first} .. {last}"
                ) from None
            if action not in self.legal_actions():
                name = COLOURS[player].name
                raise _Failure(f"illegal move: {name} {_quote(vertex.lower())[1:-1]}")
            self._push(action)
        return ""

    def cmd_genmove(self, args) -> str:
        (colour,) = _arity(args, 1)
        player = self._colour_to_move(colour)
        with self._or_no_pass():
            agent = self._agents[self.game]
            if hasattr(agent, "sync"):
                agent.sync(self.history, self.actions)
            action = int(agent(self.state))
            if action < 0:
                return "resign"
            if action not in self.legal_actions():
                name = COLOURS[player].name
                raise _Failure(f"the agent chose an illegal move ({action}) for {name}")
            self._push(action)
        return self.move_name(action)

    def cmd_undo(self, args) -> str:
        if not self.actions:
            raise _Failure("cannot undo")
        self._pop()
        while self.implicit and self.implicit[-1]:  # the pass the engine made for that move
            self._pop()
        return ""

    def cmd_showboard(self, args) -> str:
        return "\n" + self.game.render(self.state)

    # ---- helpers --------------------------------------------------------------------------
    def _colour_to_move(self, text: str) -> int:
        """The player ``text`` names, which must be the one to move in a game still going on;
        where the other side has nothing but a pass, it passes first (marked in `implicit`)."""
        if text.lower() not in GTP_COLOURS:
            raise _Failure(f"invalid color {_quote(text)}: use b, black, w or white")
        player = GTP_COLOURS[text.lower()]
        if bool(self.game.is_terminal(self.state)):
            raise _Failure("game is over")
        to_move = int(self.game.current_player(self.state))
        if player != to_move:
            legal = self.legal_actions()
            if [self.move_name(a) for a in legal] != ["pass"]:
                raise _Failure(f"it is {COLOURS[to_move].name}'s turn")
            self._push(legal[0], implicit=True)
            if bool(self.game.is_terminal(self.state)):
                self._pop()
                raise _Failure("game is over")
        return player


def _response(status: str, ident: str, text: str) -> str:
    """A whole GTP response: `status` (= or ?), the id, `text` without its blank lines (a blank
    line ends a response: a controller would read the rest as the next one) and the blank line."""
    first, *rest = text.split("\n")  # a first line of "" puts a board below the "="
    rest = [line for line in rest if line.strip()]
    return "\n".join([f"{status}{ident} {first}", *rest]) + "\n\n"


def _quote(text: str) -> str:
    """repr(text), cut to ECHO_LIMIT characters."""
    return repr(text if len(text) <= ECHO_LIMIT else text[:ECHO_LIMIT] + "...")


def _arity(args: list[str], n: int) -> list[str]:
    if len(args) != n:
        raise _Failure(f"syntax error: expected {n} argument{'s' * (n != 1)}, got {len(args)}")
    return args


# ---- the client ----------------------------------------------------------------------------------
_STATUS = re.compile(r"^([=?])(\d*)(?:\s(.*))?$")


ANSWER_SECONDS = 300.0  # how long a GTP client waits for an answer by default (gtp:...,timeout=)
QUIT_SECONDS = 5.0  # how long `quit` waits for an engine's answer before it kills the engine


class GTPClient:
    """A GTP engine run as a subprocess: ``send`` a command, get its answer or a `GTPError`.

    ``command`` is split like a shell line (no shell runs). Each command waits at most
    ``timeout`` seconds (None: forever); a timed-out engine is killed and `GTPTimeout` raised.
    The engine's stderr is kept (the last lines, in ``stderr_tail``) and quoted when it dies.
    """

    def __init__(
        self,
        command: str,
        timeout: float | None = ANSWER_SECONDS,
        cwd: str | None = None,
        env: dict | None = None,
    ):
        self.command, self.timeout = command, timeout
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._stopped = ""  # why the engine was stopped: a reply that was not GTP
        self._lines: queue.Queue = queue.Queue()
        self.process = subprocess.Popen(
            shlex.split(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            cwd=cwd,
            env=xla_flags.without_added() if env is None else env,
            # a session of its own: a terminal's Ctrl-C (or a SIGTERM to the job's process group)
            # is the command's to handle, which ends the engine itself; in the group, the engine
            # died with it, and train.py's evaluation reported its opponent failed and dropped,
            # "training goes on", as the run stopped
            start_new_session=True,
        )
        # a threaded command (evaluate.py, play.py) that a signal ends leaves at once, its
        # `close` never called: the engine, out of the terminal's reach, is ended then
        self._forget = cli.tidy_on_stop(self._end_at_once)
        threading.Thread(
            target=self._pump, args=(self.process.stdout, self._lines.put), daemon=True
        ).start()
        self._stderr_pump = threading.Thread(
            target=self._pump,
            args=(self.process.stderr, self.stderr_tail.append, False),
            daemon=True,
        )
        self._stderr_pump.start()

    @staticmethod
    def _pump(stream, put, mark_end: bool = True) -> None:
        try:
            for line in stream:
                put(line.rstrip("\r\n"))
        except (OSError, ValueError):  # the stream was closed under us by `close`
            pass
        if mark_end:
            put(None)

    # ---- the protocol ---------------------------------------------------------------------
    def send(self, command: str) -> str:
        """The engine's answer to one command (the text after ``=``, lines joined by newlines)."""
        if self._stopped:
            raise GTPError(f"{command!r}: the engine was stopped earlier ({self._stopped})")
        if self.process.poll() is not None and self._lines.empty():
            raise self._died(command)
        try:
            self.process.stdin.write(command.strip() + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died(command) from None
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        lines: list[str] = []
        while True:
            line = self._next_line(command, deadline)
            if not lines and not line.strip():
                continue  # blank lines before an answer
            if lines and not line.strip():
                break
            if not lines and _STATUS.match(line) is None:
                # at once: a program that does not speak GTP may never send the blank line; and
                # stopped: its answers would be read one command late from now on
                self._stopped = f"{command!r}: not a GTP answer: {line!r}"
                self.process.kill()
                raise GTPError(f"{self._stopped}; the engine {self.command!r} was stopped")
            lines.append(line)
        match = _STATUS.match(lines[0])
        text = "\n".join([match.group(3) or "", *lines[1:]]).strip()
        if match.group(1) == "?":
            raise GTPError(f"{command!r}: {text}")
        return text

    def _next_line(self, command: str, deadline: float | None) -> str:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            line = self._lines.get(timeout=wait)
        except queue.Empty:
            self.process.kill()
            self.process.wait()
            raise GTPTimeout(
                f"{command!r}: no answer from {self.command!r} within "
                f"{self.timeout:g} s (gtp:...,timeout=SECONDS sets it); the engine was killed"
            ) from None
        if line is None:
            raise self._died(command)
        return line

    def _died(self, command: str) -> GTPError:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = "(still running)"
        else:  # the pipe is at its end: let the pump read the engine's last words
            self._stderr_pump.join(timeout=5)
        tail = " | ".join(line.strip() for line in self.stderr_tail if line.strip())
        said = f"its stderr ends: {tail}" if tail else "nothing on stderr"
        return GTPError(  # one line: the commands print it as their error line
            f"{command!r}: the engine {self.command!r} exited with code {code}; {said}"
        )

    # ---- commands -------------------------------------------------------------------------
    def name(self) -> str:
        return self.send("name")

    def protocol_version(self) -> str:
        return self.send("protocol_version")

    def boardsize(self, n: int) -> None:
        self.send(f"boardsize {int(n)}")

    def clear_board(self) -> None:
        self.send("clear_board")

    def play(self, color: str | int, move: str) -> None:
        """Tell the engine ``color`` (b/w/black/white, or player 0/1) played ``move``."""
        move = SWAP_WIRE if move.strip().lower() == "swap" else move.strip()
        self.send(f"play {_colour(color)} {move}")

    def genmove(self, color: str | int) -> str:
        """The engine's move for ``color``, in the games' move names (lower case, ``swap``)."""
        move = self.send(f"genmove {_colour(color)}").strip().lower()
        return "swap" if move == SWAP_WIRE else move

    def undo(self) -> None:
        self.send("undo")

    def showboard(self) -> str:
        return self.send("showboard")

    def quit(self) -> None:
        """Send ``quit`` and wait for the engine to exit, killing it where it does not answer
        within QUIT_SECONDS (an engine still busy with a move it was asked for, after a signal
        or a timeout)."""
        if self.process.poll() is None:
            timeout, self.timeout = self.timeout, min(self.timeout or QUIT_SECONDS, QUIT_SECONDS)
            try:
                self.send("quit")
            except GTPError:
                pass
            finally:
                self.timeout = timeout
        self.close()

    def _end_at_once(self) -> None:
        if self.process.poll() is None:
            self.process.kill()

    def close(self) -> None:
        """Close the pipes and end the engine: at once if it is still running."""
        self._forget()
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass

    def __enter__(self) -> GTPClient:
        return self

    def __exit__(self, *exc) -> None:
        self.quit()


def _colour(color: str | int) -> str:
    if isinstance(color, (int, np.integer)) and int(color) in (0, 1):
        return COLOURS[int(color)].letter
    if isinstance(color, str) and color.lower() in GTP_COLOURS:
        return COLOURS[GTP_COLOURS[color.lower()]].letter
    raise ValueError(f"not a colour: {color!r}; use b, black, w, white, 0 or 1")


# ---- a client as an agent ------------------------------------------------------------------------
def make_gtp_agent(name: str, game: Game, client) -> Agent:
    """The `gtp:` agent: asks a GTP engine (the `GTPClient` interface) for its moves."""

    def colour(state) -> str:
        return COLOURS[int(game.current_player(state))].letter

    def reset():
        if "size" in game.options:
            client.boardsize(game.options["size"])
        client.clear_board()

    def choose(state):
        reply = client.genmove(colour(state)).strip().lower()
        if reply == "resign":
            return RESIGN
        try:
            return game.parse_action(reply, state)
        except ValueError as e:  # the engine fails, as one that dies (exit code 1)
            raise GTPError(f"{name}: the engine played {reply!r}: {e}") from None

    def observe_move(state, action):
        client.play(colour(state), game.action_to_str(int(action)))

    return Agent(
        name=name,
        batched=False,
        choose=choose,
        reset=reset,
        observe_move=observe_move,
        close=client.quit,
        stateful=True,
    )


# ---- an engine on stdin and stdout ---------------------------------------------------------------
def serve_gtp(game: Game, make_player: PlayerFactory, description: str) -> None:
    """GTP on stdin/stdout until ``quit`` or the end of input; ``version`` answers the package's
    version and ``description``. Anything else printed goes to stderr so it cannot corrupt
    answers."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = version("azjax")
    except PackageNotFoundError:
        package = "unknown"
    from azjax.eval.player import tolerant_stdin

    tolerant_stdin()
    out, sys.stdout = sys.stdout, sys.stderr
    try:
        engine = GTPEngine(game, make_player, name="azjax", version=f"{package} {description}")
        try:
            engine.run(iter(sys.stdin.readline, ""), out)
        finally:
            engine.close()
    finally:
        sys.stdout = out
