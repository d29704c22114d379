"""play.py: a person against an agent with scripted input, and the command line's errors."""

import numpy as np
import pytest

import games
import play


def first_legal(game):
    """A deterministic agent: the lowest-numbered legal action."""
    return lambda state: int(np.flatnonzero(np.asarray(game.legal_mask(state)))[0])


class Script:
    """Stands in for `input`: hands out the lines in turn, then EOFError; records the prompts."""

    def __init__(self, *lines):
        self.lines, self.prompts = list(lines), []

    def __call__(self, prompt=""):
        self.prompts.append(prompt)
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)


def run(game, *lines, human=0):
    script, out = Script(*lines), []
    final = play.play_human(game, first_legal(game), human, read=script, write=out.append)
    return final, script, "\n".join(out)


def test_bad_input_is_explained_and_undo_takes_back_a_move_pair():
    game = games.make("tictactoe")
    # X a1, O b1; "zz" is refused; undo goes back to the start (the second has nothing left);
    # then X a2, O a1, X b2, O b1, X c2 completes row 2.
    final, script, out = run(game, "a1", "zz", "undo", "undo", "a2", "b2", "  C2 ")
    assert "'zz' is not a move" in out and "type help" in out
    assert "nothing to undo" in out  # the second undo: back at the start, nothing is left
    assert "legal moves: a1 b1 c1 a2 b2 c2 a3 b3 c3" in out  # the board is shown with its moves
    assert "O (white), the agent, plays b1" in out
    np.testing.assert_array_equal(np.asarray(final.board), [2, 2, 0, 1, 1, 1, 0, 0, 0])
    assert "game over: X (black) wins; you win" in out
    assert len(script.prompts) == 7 and script.prompts[0] == "X (black) to move> "


def test_quit_and_end_of_input_stop_the_game():
    game = games.make("tictactoe")
    final, script, out = run(game, "help", "moves", "quit", "b2")
    assert final is None and script.lines == ["b2"]
    assert "undo (take back your last move)" in out and "legal moves: a1 b1 c1" in out
    final, _, _ = run(game, "b2")  # then the input ends
    assert final is None


def test_the_agent_can_move_first_and_othello_passes_are_typed():
    game = games.make("othello", size=4)
    # The agent (white) answers b1 with a1, d3 with c1, a2 with a3: then black must pass.
    final, script, out = run(game, "pass", "b1", "d3", "a2", "undo", "a2", "pass", "quit")
    assert "'pass' is not legal here; legal moves: b1, a2, d3, c4" in out
    assert "legal moves: pass" in out
    assert "O (white), the agent, plays d2" in out  # after black's pass
    assert final is None and script.lines == []

    final, _, out = run(games.make("tictactoe"), "undo", "quit", human=1)
    assert out.index("X (black), the agent, plays a1") < out.index("nothing to undo")


def test_command_line_options_and_errors(capsys):
    game, args = play.parse(["--game=othello", "--size=6", "--human_color=white"])
    assert game == games.make("othello", size=6) and args.human == 1 and args.agent
    game, args = play.parse(["--game=hex", "--size=5", "--swap=true", "--gtp", "--agent=random"])
    assert game == games.make("hex", size=5, swap=True) and args.gtp
    for argv, message in [
        (["--game=chess"], "unknown game 'chess'"),
        (["--game=othello", "--size=5"], "size must be an even integer"),
        (["--game=hex", "--human_color=red"], "--human_color"),
        (["--game=hex", "--gtp", "--human_color=white"], "not --gtp"),
        (["--game=tictactoe", "--agent=alphago"], "unknown agent 'alphago'"),
        (["--game=tictactoe", "--agent=mcts:sims=0"], "sims=N"),
    ]:
        assert play.main(argv) == 2
        assert message in capsys.readouterr().err
