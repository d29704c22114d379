"""The GTP engine command by command, two engine subprocesses playing a game through GTPClient,
and the gtp: agent over the client interface (azjax/eval/gtp.py)."""

import io
import os
import sys
import time

import jax
import numpy as np
import pytest

import games
from azjax.eval.agent import RESIGN
from azjax.eval.gtp import GTPClient, GTPEngine, GTPError, GTPTimeout, make_gtp_agent, serve_gtp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def first_legal(game):
    """A deterministic agent: the lowest-numbered legal action."""
    return lambda state: int(np.flatnonzero(np.asarray(game.legal_mask(state)))[0])


def engine_for(name, **options):
    return GTPEngine(games.make(name, **options), first_legal)


def ok(text=""):
    return f"= {text}\n\n"


def test_protocol_commands_and_ids():
    engine = engine_for("tictactoe")
    assert engine.handle("protocol_version") == ok("2")
    assert engine.handle("7 name") == "=7 azjax\n\n"
    assert engine.handle("version").startswith("= ")
    listed = engine.handle("list_commands")[2:].split()
    assert {"play", "genmove", "undo", "boardsize", "showboard", "quit"} <= set(listed)
    assert engine.handle("known_command genmove") == ok("true")
    assert engine.handle("known_command reg_genmove") == ok("false")
    assert engine.handle("3 frobnicate") == "?3 unknown command\n\n"
    assert engine.handle("   # a comment") == "" and engine.handle("") == ""
    assert engine.handle("play b a1 # the corner") == ok()
    assert engine.handle("known_command").startswith("? syntax error")
    assert engine.handle("known_command komi") == ok("true")  # GTP's required commands, all
    assert engine.handle("komi 6.5") == ok() and engine.handle("komi -7") == ok()
    assert engine.handle("komi six").startswith("? syntax error: komi takes a number")
    assert engine.handle("9 quit") == "=9 \n\n" and engine.finished


def test_play_genmove_undo_and_errors():
    engine = engine_for("tictactoe")
    assert engine.handle("play b b2") == ok()
    assert engine.handle("play b a1") == "? it is white's turn\n\n"
    assert engine.handle("play white b2") == "? illegal move: white b2\n\n"
    assert engine.handle("play w z9").startswith("? invalid vertex 'z9'")
    assert engine.handle("play purple a1").startswith("? invalid color")
    assert engine.handle("play w").startswith("? syntax error")
    assert engine.handle("genmove b") == "? it is white's turn\n\n"
    assert engine.handle("5 genmove w") == "=5 a1\n\n"  # the lowest free cell
    assert engine.handle("showboard") == ok("\n  a b c\n1 O . .\n2 . X .\n3 . . .")
    assert engine.handle("undo") == ok()
    assert engine.handle("showboard") == ok("\n  a b c\n1 . . .\n2 . X .\n3 . . .")
    assert engine.handle("undo") == ok()
    assert engine.handle("undo") == "? cannot undo\n\n"
    for move in ("a1", "b1", "c1", "a2", "b2", "c2", "a3"):  # black wins on the diagonal c1-a3
        assert engine.handle(f"genmove {'bw'[len(engine.history) % 2 == 0]}") == ok(move)
    assert engine.handle("genmove w") == "? game is over\n\n"
    assert engine.handle("play w c3") == "? game is over\n\n"
    assert engine.handle("clear_board") == ok() and len(engine.history) == 1


def test_boardsize_rebuilds_the_game_and_reports_bad_sizes():
    engine = engine_for("hex", size=5, swap=True)
    engine.handle("play b a1")
    assert engine.handle("boardsize 3") == ok()
    assert engine.game == games.make("hex", size=3, swap=True) and len(engine.history) == 1
    assert engine.handle("boardsize 1").startswith("? unacceptable size: hex: size must be")
    assert engine.handle("boardsize 3 4").startswith("? unacceptable size")
    assert engine.handle("boardsize x").startswith("? syntax error")
    assert engine.handle("boardsize 4 4") == ok() and engine.game.size == 4
    assert engine.handle("boardsize 3") == ok() and engine.game.size == 3

    # the pie rule: HexGui's and MoHex's name `swap-pieces` on the wire, `swap` accepted too
    assert engine.handle("play w swap") == "? it is black's turn\n\n"
    assert engine.handle("play b c1") == ok()
    assert engine.handle("play w SWAP-PIECES") == ok()
    assert " 3    O . ." in engine.handle("showboard")  # c1 mirrored to a3, white
    assert engine.handle("undo") == ok() and engine.handle("play w swap") == ok()
    assert engine.handle("undo") == ok() and engine.handle("genmove w") == ok("a1")

    othello = engine_for("othello", size=4)
    assert othello.handle("boardsize 5").startswith(
        "? unacceptable size: othello: size must be an even"
    )
    assert othello.handle("boardsize 6") == ok() and othello.game.size == 6
    fixed = engine_for("tictactoe")
    assert fixed.handle("boardsize 3") == ok() and fixed.handle("boardsize 4").startswith("? unacc")
    four = engine_for("connect_four")  # not square: its own board, either way round, alone
    assert four.handle("boardsize 6 7") == ok() and four.handle("boardsize 7 6") == ok()
    assert (
        four.handle("boardsize 7") == "? unacceptable size: connect_four has no size option "
        "(its board is 6x7)\n\n"
    )


def test_othello_pass_over_gtp_and_a_failing_factory():
    engine = engine_for("othello", size=4)
    for move in ("b1", "a1", "d3", "c1", "a2", "a3"):  # black then has to pass (as in test_play)
        assert engine.handle(f"play {'bw'[len(engine.history) % 2 == 0]} {move}") == ok()
    before = list(engine.actions)
    # a command that fails after passing for black takes the pass back: nothing happened
    assert engine.handle("play w zz").startswith("? invalid vertex 'zz'")
    assert engine.handle("play w b1").startswith("? illegal move: white b1")
    assert engine.actions == before
    assert engine.handle("play w d2") == ok()  # black's forced pass is left implicit
    assert [engine.move_name(a) for a in engine.actions[-2:]] == ["pass", "d2"]
    # the controller sent one move, so one undo takes back d2 and the pass the engine made
    assert engine.handle("undo") == ok() and engine.actions == before
    assert engine.handle("undo") == ok() and engine.actions == before[:-1]
    assert engine.handle("play w a3") == ok() and engine.actions == before
    assert engine.handle("genmove b") == ok("pass")  # an explicit pass is a move of its own
    assert engine.handle("undo") == ok() and engine.actions == before
    assert engine.handle("play b pass") == ok()
    assert engine.handle("play w pass").startswith("? illegal move: white pass")

    def refuses_size_6(game):
        if game.size == 6:
            raise ValueError("the network was trained on 4x4")
        return first_legal(game)

    engine = GTPEngine(games.make("othello", size=4), refuses_size_6)
    assert engine.handle("boardsize 6") == "? unacceptable size: the network was trained on 4x4\n\n"
    assert engine.game.size == 4 and engine.handle("genmove b") == ok("b1")


def test_an_agent_that_fails_or_cheats_gets_a_question_mark():
    game = games.make("tictactoe")
    crashing = GTPEngine(game, lambda g: lambda state: 1 // 0)
    assert crashing.handle("genmove b").startswith("? genmove failed: ZeroDivisionError")

    def raising(state):
        raise RuntimeError("first line\n\nsecond paragraph")

    # its message without the blank line, which would end the response at "first line"
    said = GTPEngine(game, lambda g: raising).handle("7 genmove b")
    assert said == "?7 genmove failed: RuntimeError: first line\nsecond paragraph\n\n"
    cheating = GTPEngine(game, lambda g: lambda state: 0)
    cheating.handle("play b a1")
    assert cheating.handle("genmove w").startswith("? the agent chose an illegal move")


def play_command(*flags):
    return f"{sys.executable} play.py --gtp " + " ".join(flags)


def test_two_engine_subprocesses_play_a_game_over_gtp():
    """Our engine against itself (random agents: MCTS would add half a minute of compiling).

    Hex 3x3 with the pie rule: the swap travels as `swap-pieces` and comes back as `swap`.
    """
    game = games.make("hex", size=3, swap=True)
    step = jax.jit(game.step)  # an eager Hex step costs seconds of op-by-op compiling
    black = GTPClient(
        play_command("--game=hex --size=3 --swap=true --agent=random --seed=1"),
        timeout=60,
        cwd=ROOT,
    )
    white = GTPClient(
        play_command("--game=hex --swap=true --agent=random --seed=2"), timeout=60, cwd=ROOT
    )
    with black, white:
        assert black.protocol_version() == "2" and white.name() == "azjax"
        for engine in (black, white):
            engine.boardsize(3)
            engine.clear_board()
        state, moves = game.init(), []
        first = black.genmove("b")
        white.play("black", first)
        for engine in (black, white):  # white takes the opening over with the pie rule
            engine.play("w", "swap")
        state = step(step(state, game.parse_action(first)), game.parse_action("swap"))
        moves += [first, "swap"]
        while not bool(game.is_terminal(state)):
            player = int(game.current_player(state))
            mover, other = (black, white) if player == 0 else (white, black)
            move = mover.genmove(player)
            state = step(state, game.parse_action(move, state))  # raises if illegal
            other.play(player, move)
            moves.append(move)
        assert black.showboard() == white.showboard()
        with pytest.raises(GTPError, match="game is over"):
            black.genmove(int(game.current_player(state)))
        with pytest.raises(GTPError, match="unknown command"):
            white.send("frobnicate")
    assert black.process.returncode == 0 and white.process.returncode == 0
    assert 4 <= len(moves) <= 10 and sorted(np.asarray(game.returns(state)).tolist()) == [-1, 1]


def test_the_engine_runs_in_a_session_of_its_own(tmp_path):
    """A terminal's Ctrl-C reaches the whole foreground process group: the engine died with the
    trainer's first Ctrl-C, whose evaluation then reported the opponent failed and dropped."""
    silent = tmp_path / "silent.py"
    silent.write_text("import sys\nsys.stdin.readline()\n")
    with GTPClient(f"{sys.executable} {silent}") as engine:
        assert os.getsid(engine.process.pid) == engine.process.pid != os.getsid(0)
    # out of the terminal's reach, the engine is ended by the tidy-ups of a threaded command that
    # a signal ends at once (evaluate.py, play.py: no `close` runs then), and only while it runs
    from azjax import cli

    assert engine._end_at_once not in cli._ON_STOP
    engine = GTPClient(f"{sys.executable} {silent}")
    for tidy in list(cli._ON_STOP):
        tidy()
    assert engine.process.wait(timeout=10) != 0
    engine.close()
    assert engine._end_at_once not in cli._ON_STOP


def test_client_reports_dead_and_silent_engines(tmp_path):
    silent = tmp_path / "silent.py"
    silent.write_text("import sys, time\nsys.stdin.readline()\ntime.sleep(30)\n")
    with GTPClient(f"{sys.executable} {silent}", timeout=0.5) as engine:
        with pytest.raises(GTPTimeout):
            engine.send("name")
    crashing = tmp_path / "crash.py"
    crashing.write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    with GTPClient(f"{sys.executable} {crashing}") as engine:
        with pytest.raises(GTPError, match=r"exited with code 3; its stderr ends: boom$"):
            engine.send("name")
    # a program that does not speak GTP (`cat` echoes): refused at its first line, not after
    # the timeout, though it never sends the blank line that ends an answer
    echo = tmp_path / "echo.py"
    echo.write_text("import sys\nfor line in sys.stdin:\n    print(line.strip(), flush=True)\n")
    with GTPClient(f"{sys.executable} {echo}", timeout=60) as engine:
        t0 = time.monotonic()
        with pytest.raises(GTPError, match="'name': not a GTP answer: 'name'.*was stopped"):
            engine.send("name")
        assert time.monotonic() - t0 < 30
        # and stopped: each later answer would be the one before's (a stray line read first)
        with pytest.raises(GTPError, match="'version': the engine was stopped earlier"):
            engine.send("version")


def test_quit_does_not_wait_long_for_a_busy_engine(tmp_path, monkeypatch):
    """An engine still thinking about a genmove (the run stopped by a second signal, or the
    genmove timed out) never answers `quit`: the client waited its whole timeout (300 s by
    default) before killing it."""
    from azjax.eval import gtp

    busy = tmp_path / "busy.py"
    busy.write_text(
        "import sys, time\n"
        "for line in sys.stdin:\n"
        "    if line.startswith('genmove'):\n"
        "        time.sleep(60)\n"
        "    print('= \\n', flush=True)\n"
    )
    monkeypatch.setattr(gtp, "QUIT_SECONDS", 0.5)
    engine = GTPClient(f"{sys.executable} {busy}", timeout=1.0)
    engine.boardsize(3)
    with pytest.raises(GTPTimeout, match="within 1 s \\(gtp:...,timeout=SECONDS sets it\\)"):
        engine.genmove("b")
    engine = GTPClient(f"{sys.executable} {busy}", timeout=300.0)
    engine.process.stdin.write("genmove b\n")  # thinking, as a stopped match leaves it
    engine.process.stdin.flush()
    t0 = time.monotonic()
    engine.quit()
    assert time.monotonic() - t0 < 10 and engine.process.poll() is not None
    assert engine.timeout == 300.0


def test_the_gtp_spec_takes_a_timeout(tmp_path):
    from azjax.eval.specs import parse_agent

    game = games.make("tictactoe")
    command = f"{sys.executable} -c 'print(1)'"
    agent = parse_agent(f'gtp:"{command}",timeout=2.5', game)
    assert agent.close.__self__.timeout == 2.5 and agent.close.__self__.command == command
    agent.close()
    agent = parse_agent(f'gtp:"{command}"', game)  # quoted whole, as before: the default
    assert agent.close.__self__.timeout == 300.0
    agent.close()
    for bad, said in (
        ("timeout=0", r"timeout \(seconds a GTP engine"),
        ("sims=3", "unknown option"),
    ):
        with pytest.raises(ValueError, match=said):
            parse_agent(f'gtp:"{command}",{bad}', game)


def test_a_signal_while_the_opponent_starts_ends_its_engine(monkeypatch):
    """A SIGTERM while train.py was asking its --eval_opponent engine to set up a board left the
    engine running after the run had ended."""
    from azjax.eval import opponent

    closed = []

    class Starting:
        def reset(self):
            raise KeyboardInterrupt  # cli.raise_on_signals's Interrupted is one

        def close(self):
            closed.append(True)

    monkeypatch.setattr(opponent, "parse_agent", lambda *args, **kwargs: Starting())
    with pytest.raises(KeyboardInterrupt):
        opponent.make_opponent('gtp:"engine"', games.make("tictactoe"))
    assert closed == [True]


# ---- the gtp: agent ------------------------------------------------------------------------------
class FakeGTP:
    """The GTPClient interface, answering genmove from a script and logging what it is told."""

    def __init__(self, replies):
        self.replies, self.log = list(replies), []

    def boardsize(self, n):
        self.log.append(f"boardsize {n}")

    def clear_board(self):
        self.log.append("clear_board")

    def play(self, colour, move):
        self.log.append(f"play {colour} {move}")

    def genmove(self, colour):
        self.log.append(f"genmove {colour}")
        return self.replies.pop(0)

    def quit(self):
        self.log.append("quit")


def test_gtp_agent_speaks_the_client_interface():
    game = games.make("hex", size=3)
    client = FakeGTP(["B2", "resign"])
    agent = make_gtp_agent("gtp", game, client)
    agent.reset()
    state = game.init()
    assert agent.choose(state) == 4  # black's move, parsed case-insensitively
    state = game.step(state, 4)
    agent.observe_move(state, 0)  # white played a1
    assert agent.choose(game.step(state, 0)) == RESIGN
    agent.close()
    assert client.log == [
        "boardsize 3",
        "clear_board",
        "genmove b",
        "play w a1",
        "genmove b",
        "quit",
    ]
    bad = make_gtp_agent("gtp", game, FakeGTP(["z9"]))
    with pytest.raises(GTPError, match="the engine played 'z9'"):  # a failing engine: exit 1
        bad.choose(game.init())


def test_a_remote_move_refused_here_sets_the_remote_board_up_again():
    # The remote played its a1 on its own board before we refused it: the next genmove must
    # clear that board and replay the game, not build on the refused move.
    from azjax.eval.player import Player

    client = FakeGTP(["a1", "c3"])
    game = games.make("tictactoe")
    engine = GTPEngine(game, lambda g: Player(make_gtp_agent("remote", g, client)))
    assert engine.handle("play b a1") == ok()
    assert engine.handle("genmove w").startswith("? genmove failed: GTPError: remote: the engi")
    assert engine.handle("genmove w") == ok("c3")
    assert client.log == ["clear_board", "play b a1", "genmove w"] * 2


def test_serve_gtp_answers_on_stdout_and_keeps_prints_off_it(monkeypatch, capsys):
    def make_player(game):
        print("building the agent")  # must not reach the controller
        return first_legal(game)

    monkeypatch.setattr(sys, "stdin", io.StringIO("1 name\n2 genmove b\nquit\n"))
    serve_gtp(games.make("tictactoe"), make_player, "first-legal")
    out, err = capsys.readouterr()
    assert out == "=1 azjax\n\n=2 a1\n\n= \n\n"
    assert "building the agent" in err
