"""Equal-time calibration (azjax/eval/calibration.py): when it runs, and its interpolation."""

import dataclasses

import jax

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


def test_a_tournament_calibrates_each_match_for_its_own_batch(monkeypatch):
    # with a stateful agent in it, only that agent's matches play one game at a time; the
    # others play half the games at once, and their seconds= agents are timed so
    import types

    from azjax.eval import tournament

    calibrated = lambda agent, game, batch, key: dataclasses.replace(  # noqa: E731
        agent, name=f"{agent.name}@{batch}"
    )
    pairs = []

    def play_games(game, a, b, num_games, key, openings=None):
        pairs.append((a.name, b.name))
        result = types.SimpleNamespace(wins=1, draws=0, losses=1, games=2)
        return types.SimpleNamespace(result=result, wall_seconds=0.0)

    monkeypatch.setattr(tournament, "calibrate", calibrated)
    monkeypatch.setattr(tournament, "play_games", play_games)
    monkeypatch.setattr(tournament, "outcome_record", lambda *args: {})
    timed, other = parse_agent("mcts:seconds=0.5", TTT), parse_agent("random", TTT)
    stateful = dataclasses.replace(other, name="engine", stateful=True)
    agents = [timed, other, stateful]
    key = jax.random.PRNGKey(0)
    tournament.round_robin(TTT, ["t", "r", "e"], agents, 8, key, log=lambda *a: None)
    assert pairs == [
        (f"{timed.name}@4", f"{other.name}@4"),  # lock-step: 4 games at once
        (f"{timed.name}@1", "engine@1"),
        (f"{other.name}@1", "engine@1"),
    ]
