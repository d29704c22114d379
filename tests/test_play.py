"""play.py: the command line's options and errors (the game itself: test_player.py), and two
agents watched (--agents)."""

import numpy as np
import pytest

import games
from azjax.commands import play
from azjax.eval import watch


def test_command_line_options_and_errors(capsys):
    game, args = play.parse(["--game=othello", "--size=6", "--human_color=white"])
    assert game == games.make("othello", size=6) and args.human == 1
    assert args.agent == play.DEFAULT_AGENT
    assert play.parse(["--game=tictactoe"])[1].human == 0  # the person moves first by default
    game, args = play.parse(["--game=hex", "--size=5", "--swap=true", "--gtp", "--agent=random"])
    assert game == games.make("hex", size=5, swap=True) and args.gtp
    game, _ = play.parse(["--game=hex", "--swap", "--agent=random"])  # a bare boolean flag
    assert game == games.make("hex", swap=True)
    for argv, message in [
        (["--game=chess"], "unknown game 'chess'"),
        (["--game=othello", "--size=5"], "size must be an even integer"),
        (["--game=hex", "--swap=maybe"], "--swap: expected true or false, got 'maybe'"),
        (["--game=hex", "--human_color=red"], "--human_color"),
        (["--game=hex", "--human_color="], "--human_color: ''; use first, second"),
        (["--game=hex", "--gtp", "--human_color=white"], "not --gtp"),
        (["--game=tictactoe", "--agent=alphago"], "unknown agent 'alphago'"),
        (["--game=tictactoe", "--agent=mcts:sims=0"], "sims"),
        (["--agent=random"], "give --game=NAME"),
        (["--agent=alphago"], "unknown agent 'alphago'"),  # the spec first, then the game
        (["--game=hex", "--gtp", "--agent=human"], "stdin carries the protocol"),
    ]:
        assert play.main(argv) == 2
        assert message in capsys.readouterr().err
    for argv, message in [  # argparse's own errors: SystemExit(2), one line
        (["--game=hex", "--seed=abc"], "--seed: expected a whole number, got 'abc'"),
        (["--game=hex", "--seed=-1"], "--seed: must be in [0, 4294967295], got -1"),
        (["--agnet=ckpt:x"], "did you mean --agent or --agents?"),  # not "give --game"
        (["--agent=random", "--siz=5"], "did you mean --size?"),
    ]:
        with pytest.raises(SystemExit) as e:
            play.main(argv)
        assert e.value.code == 2 and message in capsys.readouterr().err


def test_the_game_comes_from_the_checkpoint(tiny_run):
    game, args = play.parse([f"--agent=ckpt:{tiny_run}", "--human_color=o"])
    assert game == games.make("tictactoe") and args.human == 1


def test_two_agents_are_watched_game_after_game(capsys):
    assert play.main(["--game=tictactoe", "--agents=random,minimax", "--games=2"]) == 0
    out = capsys.readouterr().out
    assert "game 1: X (black) random, O (white) minimax" in out
    assert "game 2: X (black) minimax, O (white) random" in out  # colours swapped
    assert out.count("  a b c") >= 10  # the board after every move: at least 5 plies a game
    assert "O (white), minimax, plays" in out and "X (black), minimax, plays" in out
    assert "2 games: random won 0, minimax won " in out  # minimax never loses Tic-Tac-Toe
    assert "(random: compiling its move for the first move)" in out  # no search to compile


def test_agent_human_is_two_people_at_one_keyboard(capsys, monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO("a1\nb1\nresign\n"))
    assert play.main(["--game=tictactoe", "--agent=human"]) == 0
    out = capsys.readouterr().out
    assert "two people, X (black) first" in out and "the agent" not in out
    assert "X (black) resigns; O (white) wins" in out


def test_watching_asks_for_a_rematch_until_told_no():
    game = games.make("tictactoe")
    first_legal = lambda state: int(np.argmax(np.asarray(game.legal_mask(state))))  # noqa: E731
    answers, lines = iter(["y", "n"]), []

    def read(prompt):
        lines.append(prompt)
        return next(answers)

    scores = watch(game, (first_legal, first_legal), ("A", "B"), read=read, write=lines.append)
    assert scores == [1.0, -1.0]  # a1 b1 c1 a2 b2 c2 a3: the first mover wins, colours swap
    assert lines.count("rematch? [y/N] ") == 2 and lines[-1] == "2 games: A won 1, B won 1, 0 drawn"

    def end_of_input(prompt):
        raise EOFError

    assert len(watch(game, (first_legal, first_legal), ("A", "B"), read=end_of_input)) == 1
    watch(game, (first_legal, first_legal), ("A", "A"), games=1, write=lines.append)
    assert lines[-1] == "1 game: A #1 won 1, A #2 won 0, 0 drawn"  # the same spec twice
    assert "\ngame 1: X (black) A #1, O (white) A #2" in lines


def test_agents_flag_errors(capsys):
    specs = play.split_agents("mcts:sims=5,c_puct=1.5, random")
    assert specs == ["mcts:sims=5,c_puct=1.5", "random"]  # options stay with their spec
    for argv, message in [
        (["--agents=random,random", "--agent=random"], "cannot be used with --agent"),
        (["--agents=random,random", "--gtp"], "cannot be used with --gtp"),
        (["--agents=random,random", "--human_color=white"], "cannot be used with --human_color"),
        (["--agents=random"], "give two agent specs"),
        (["--agents=random,minimax,random"], "give two agent specs"),
        (["--agents=random,alphago"], "unknown agent 'alphago'"),
        (["--agents=random,random", "--games=0"], "--games must be at least 1"),
        (["--games=2"], "--games is for --agents"),
    ]:
        assert play.main(["--game=tictactoe", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
    # Without --game, the clash is named before the game is asked for (a ckpt: --agent brings one).
    assert play.main(["--agent=ckpt:pretrained/tictactoe", "--agents=random,random"]) == 2
    err = capsys.readouterr().err
    assert "cannot be used with --agent" in err and len(err.strip().splitlines()) == 1


def test_a_failing_gtp_engine_is_one_line_and_exit_1(capsys):
    """`cat` echoes the commands back: not a GTP engine (evaluate.py says the same)."""
    assert play.main(["--game=tictactoe", "--agents=gtp:cat,random", "--games=1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("play.py: error: GTP engine: ")
