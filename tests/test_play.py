"""play.py: the command line's options and errors (the game itself: test_player.py)."""

import games
import play


def test_command_line_options_and_errors(capsys):
    game, args = play.parse(["--game=othello", "--size=6", "--human_color=white"])
    assert game == games.make("othello", size=6) and args.human == 1
    assert args.agent == play.DEFAULT_AGENT
    game, args = play.parse(["--game=hex", "--size=5", "--swap=true", "--gtp", "--agent=random"])
    assert game == games.make("hex", size=5, swap=True) and args.gtp
    game, _ = play.parse(["--game=hex", "--swap", "--agent=random"])  # a bare boolean flag
    assert game == games.make("hex", swap=True)
    for argv, message in [
        (["--game=chess"], "unknown game 'chess'"),
        (["--game=othello", "--size=5"], "size must be an even integer"),
        (["--game=hex", "--swap=maybe"], "--swap: expected true or false, got 'maybe'"),
        (["--game=hex", "--human_color=red"], "--human_color"),
        (["--game=hex", "--gtp", "--human_color=white"], "not --gtp"),
        (["--game=tictactoe", "--agent=alphago"], "unknown agent 'alphago'"),
        (["--game=tictactoe", "--agent=mcts:sims=0"], "sims"),
        (["--agent=random"], "give --game=NAME"),
        (["--game=hex", "--gtp", "--agent=human"], "stdin carries the protocol"),
    ]:
        assert play.main(argv) == 2
        assert message in capsys.readouterr().err


def test_the_game_comes_from_the_checkpoint(tiny_run):
    game, args = play.parse([f"--agent=ckpt:{tiny_run}", "--human_color=o"])
    assert game == games.make("tictactoe") and args.human == 1
