"""One game at a time (azjax/eval/player.py): a person against an agent with scripted input, the
human agent of a match, and a stateful agent kept in step through undo."""

import os
import sys

import numpy as np
import pytest

import games
from azjax.eval.agent import RESIGN, Agent
from azjax.eval.gtp import GTPEngine
from azjax.eval.player import QUIT, Player, ask_move, make_human_agent, play_human
from azjax.eval.specs import parse_agent

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TTT = games.make("tictactoe")


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
    final = play_human(game, first_legal(game), human, read=script, write=out.append)
    return final, script, "\n".join(out)


# ---- a person in the terminal --------------------------------------------------------------------
def test_bad_input_is_explained_and_undo_takes_back_a_move_pair():
    # X a1, O b1; "zz" is refused; undo goes back to the start (the second has nothing left);
    # then X a2, O a1, X b2, O b1, X c2 completes row 2.
    final, script, out = run(TTT, "a1", "zz", "undo", "undo", "a2", "b2", "  C2 ")
    assert "'zz' is not a move" in out and "type help" in out
    assert "nothing to undo" in out  # the second undo: back at the start, nothing is left
    assert "legal moves: a1 b1 c1 a2 b2 c2 a3 b3 c3" in out  # the board is shown with its moves
    assert "O (white), the agent, plays b1" in out
    np.testing.assert_array_equal(np.asarray(final.board), [2, 2, 0, 1, 1, 1, 0, 0, 0])
    assert "game over: X (black) wins; you win" in out
    assert len(script.prompts) == 7 and script.prompts[0] == "X (black) to move> "


def test_quit_and_end_of_input_stop_the_game():
    final, script, out = run(TTT, "help", "moves", "quit", "b2")
    assert final is None and script.lines == ["b2"]
    assert "undo (take back your last move)" in out and "legal moves: a1 b1 c1" in out
    final, _, _ = run(TTT, "b2")  # then the input ends
    assert final is None


def test_a_person_can_resign():
    final, script, out = run(TTT, "b2", "resign", "a3")
    assert "X (black) resigns; the agent wins" in out and script.lines == ["a3"]
    assert int(final.num_moves) == 2  # b2 and the agent's a1


def test_the_agent_can_move_first_and_othello_passes_are_typed():
    game = games.make("othello", size=4)
    # The agent (white) answers b1 with a1, d3 with c1, a2 with a3: then black must pass.
    final, script, out = run(game, "pass", "b1", "d3", "a2", "undo", "a2", "pass", "quit")
    assert "'pass' is not legal here; legal moves: b1, a2, d3, c4" in out
    assert "legal moves: pass" in out
    assert "O (white), the agent, plays d2" in out  # after black's pass
    assert final is None and script.lines == []

    final, _, out = run(TTT, "undo", "quit", human=1)
    assert out.index("X (black), the agent, plays a1") < out.index("nothing to undo")


def test_two_people_take_turns_each_with_undo():
    # X a1, O b1, X c1; O takes back its b1 (and X's c1), plays b2; X resigns.
    script, out = Script("a1", "b1", "c1", "undo", "b2", "resign"), []
    final = play_human(TTT, None, 0, read=script, write=out.append)
    out = "\n".join(out)
    assert "two people, X (black) first" in out and "the agent" not in out
    assert out.count("legal moves: a1 b1 c1 a2 b2 c2 a3 b3 c3") == 1  # each board shown once
    assert "took back to move 2" in out and "X (black) resigns; O (white) wins" in out
    np.testing.assert_array_equal(np.asarray(final.board), [1, 0, 0, 0, 2, 0, 0, 0, 0])
    assert script.prompts[3] == "O (white) to move> " and script.lines == []


# ---- the human agent of a match ------------------------------------------------------------------
def test_human_agent_asks_until_the_move_is_legal():
    answers = iter(["zz", "a1", "b2"])
    shown = []
    human = make_human_agent(TTT, read=lambda prompt: next(answers), write=shown.append)
    state = TTT.step(TTT.init(), 0)  # X on a1: O to move
    assert human.choose(state) == 4
    assert any("not legal here" in s for s in shown) and any("not a move" in s for s in shown)
    assert shown[0].startswith(TTT.render(state))  # the board first
    assert human.stateful and not human.batched


def test_human_agent_resigns_and_has_no_undo():
    shown = []
    lines = iter(["undo", "resign"])
    human = make_human_agent(TTT, read=lambda prompt: next(lines), write=shown.append)
    assert human.choose(TTT.init()) == RESIGN
    assert any("'undo' is not a move" in s for s in shown)  # no history to take back in a match
    quitter = make_human_agent(TTT, read=Script("quit"), write=shown.append)
    assert quitter.choose(TTT.init()) == RESIGN  # quitting gives up this game
    ended = make_human_agent(TTT, read=Script(), write=shown.append)  # the input ends
    with pytest.raises(ValueError, match="human: the input ended .* before the match did"):
        ended.choose(TTT.init())  # not a resignation in every game left
    assert ask_move(TTT, TTT.init(), read=Script("exit"), write=shown.append) == QUIT


# ---- a stateful agent ----------------------------------------------------------------------------
def test_a_stateful_agent_is_kept_in_step_through_undo():
    """`Player.sync` tells a Python agent with its own board (like a GTP engine) what it missed."""
    events = []
    pick = first_legal(TTT)

    def choose(state):
        events.append(("choose", int(state.num_moves)))
        return pick(state)

    agent = Agent(
        name="fake",
        batched=False,
        choose=choose,
        stateful=True,
        reset=lambda: events.append(("reset",)),
        observe_move=lambda state, action: events.append(("observe", action)),
        close=lambda: events.append(("close",)),
    )
    engine = GTPEngine(TTT, lambda g: Player(agent))
    for command in (
        "play b a1",
        "genmove w",
        "play b c1",
        "genmove w",
        "undo",
        "undo",
        "play b b2",
        "genmove w",
    ):
        assert engine.handle(command).startswith("=")
    engine.close()
    assert events == [
        ("reset",),
        ("observe", 0),
        ("choose", 1),  # b1 = 1
        ("observe", 2),
        ("choose", 3),  # a2 = 3; its own b1 is not told again
        ("reset",),
        ("observe", 0),
        ("observe", 1),
        ("observe", 4),
        ("choose", 3),  # after undo
        ("close",),
    ]


def test_players_of_both_kinds_play_one_state():
    player = Player(parse_agent("minimax:depth=2", TTT))  # a Python agent, called as it is
    state = TTT.init()
    for action in (0, 3, 1, 4):  # X a1 b1, O a2 b2: X to move wins at c1
        state = TTT.step(state, action)
    assert player(state) == 2
    player = Player(parse_agent("mcts:sims=50", TTT), seed=1)  # batched: a leading axis of 1
    assert player(state) == 2


def test_a_seconds_agent_is_calibrated_for_one_game(monkeypatch, capsys):
    # play.py and the GTP engine play `seconds=T` agents as evaluate.py does: timed, not at the
    # default simulations (cheap probes and no refinement keep the test fast)
    from azjax.eval import calibration, specs

    seen = []

    def quick(agent, game, batch, key):
        seen.append(batch)
        return calibration.calibrate(agent, game, batch, key, probes=(2, 4), refinements=0)

    monkeypatch.setattr(specs, "calibrate", quick)
    player = specs.make_player("mcts:seconds=0.5", TTT, announce=True)
    assert seen == [1] and player.agent.search.calibrated
    assert player.agent.search.spec.num_simulations != 100  # the mcts default
    assert "timing its search for 0.5 s a move" in capsys.readouterr().out
    assert specs.make_player("mcts:sims=8", TTT).agent.search.spec.num_simulations == 8
    assert seen == [1]  # a spec with simulations is not timed


def test_a_second_person_quits_the_game_as_the_first_does(monkeypatch):
    # a person behind the agent (make_player("human"); play.py's --agent=human passes no agent
    # since session 113): their quit or end of input stops the game (no "the agent resigns", no
    # error about a match), as the first person's does
    import io

    from azjax.eval.specs import make_player

    for typed in ("quit\n", ""):  # quit, and the end of input
        monkeypatch.setattr(sys, "stdin", io.StringIO(typed))
        script, out = Script("b2"), []
        final = play_human(TTT, make_player("human", TTT), 0, read=script, write=out.append)
        assert final is None and "resigns" not in "\n".join(out)
    # in a match, the human agent's quit still resigns the game
    assert make_human_agent(TTT, read=Script("quit"), write=lambda _: None).choose(TTT.init()) < 0


def test_a_person_against_our_engine_through_the_gtp_agent():
    """The gtp: agent driving `play.py --gtp` in a subprocess; undo included.

    The person tries every cell in order (occupied ones are refused and the next line read), so
    the game ends whatever the random engine plays. After the undo the engine must be reset and
    told the moves again: a stale board would refuse `play b a1`.
    """
    command = (
        f"{sys.executable} {os.path.join(ROOT, 'play.py')} --gtp --game=tictactoe --agent=random"
    )
    player = Player(parse_agent(f'gtp:"{command}"', TTT))
    script, out = Script("a1", "undo", *"a1 b1 c1 a2 b2 c2 a3 b3 c3".split()), []
    try:
        final = play_human(TTT, player, 0, read=script, write=out.append)
    finally:
        player.close()
    text = "\n".join(out)
    assert "took back" in text and "game over" in text and bool(final.terminal)
    assert player.agent.stateful and player.told is not None
