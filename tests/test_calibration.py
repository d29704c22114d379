"""Equal-time calibration (azjax/eval/calibration.py): when it runs, and its interpolation."""

import dataclasses

import games
from azjax.eval import calibration
from azjax.eval.specs import parse_agent

TTT = games.make("tictactoe")


def test_calibration_happens_once_and_only_for_timed_agents():
    timed = parse_agent("mcts:seconds=0.5", TTT)
    done = dataclasses.replace(timed, search=dataclasses.replace(timed.search, calibrated=True))
    assert calibration.calibrate(done, TTT, 2, None) is done
    untimed = parse_agent("mcts:sims=3", TTT)
    assert calibration.calibrate(untimed, TTT, 2, None) is untimed
    # (a real calibration runs in test_evaluate.py's equal-time match)


def test_calibration_interpolates_between_timings():
    predict = calibration._predict
    assert predict({16: 0.1, 64: 0.5}, 0.3) == 40  # bracketed: 16 + 0.2 / (0.4 / 48)
    assert predict({16: 0.1, 64: 0.2}, 0.3) == 112  # extrapolated from the nearest two
    # a far-off third timing is not used when two others bracket the budget
    assert predict({16: 0.1, 64: 0.5, 800: 9.0}, 0.3) == 40
    assert predict({16: 0.2, 64: 0.1}, 0.3) == 192  # noise (time falls): proportional
