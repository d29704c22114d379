"""Matches between any two agents (azjax/eval/match.py): results add up, colours alternate,
Python agents and resignations, a GTP engine as an opponent."""

import json
import os
import sys

import jax
import pytest

import games
from azjax.eval.agent import RESIGN, Agent
from azjax.eval.game_records import read_record, replay, winner
from azjax.eval.match import play_games, run_match
from azjax.eval.specs import parse_agent

TTT = games.make("tictactoe")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Resigner:
    """A Python agent that resigns at its first move; counts the games it is reset for."""

    def __init__(self):
        self.resets = 0

    def agent(self):
        def reset():
            self.resets += 1

        return Agent(
            name="resigner", batched=False, stateful=True, reset=reset, choose=lambda state: RESIGN
        )


def test_match_results_add_up_and_colours_alternate():
    rand = parse_agent("random", TTT)
    first_mover = parse_agent("minimax:depth=1", TTT)
    out = play_games(TTT, rand, rand, 10, jax.random.PRNGKey(1))  # jitted, batched
    r = out.result
    assert r.wins + r.draws + r.losses == 10 and sum(r.first) == 5 and sum(r.second) == 5
    _assert_moves_replay(out)
    out = play_games(TTT, rand, rand, 10, jax.random.PRNGKey(1), openings=[(4,)] * 10)
    assert all(m[0] == 4 for m in out.moves)  # the opening is part of each game's moves
    _assert_moves_replay(out)
    out = play_games(TTT, rand, rand, 7, jax.random.PRNGKey(2))  # jitted: the odd game A's
    assert out.a_first.tolist() == [True] * 4 + [False] * 3 and sum(out.result.first) == 4
    _assert_moves_replay(out)
    out = play_games(TTT, first_mover, rand, 7, jax.random.PRNGKey(2))  # Python loop
    r = out.result
    assert r.games == 7 and sum(r.first) == 4 and sum(r.second) == 3
    _assert_moves_replay(out)
    resigner = _Resigner()
    out = play_games(TTT, resigner.agent(), rand, 4, jax.random.PRNGKey(3))
    assert (out.result.losses, resigner.resets) == (4, 4)  # resigns every game, played one by one
    assert [m[-1] for m in out.moves] == [RESIGN] * 4  # in its first move's place
    assert [len(m) for m in out.moves] == [1, 1, 2, 2]  # black at once; white after one move


def _assert_moves_replay(out):
    """Each game's moves, played through the rules, end in the result the match counted."""
    for moves, ret, a_first in zip(out.moves, out.returns, out.a_first):
        final, played = replay(TTT, moves)
        assert bool(final.terminal) and played == moves
        black = float(TTT.returns(final)[0])
        assert black == (ret if a_first else -ret)


def test_a_timed_side_compiles_nothing_inside_its_timing(lowerings):
    """The first timed move compiled its key's fold_in: 20 ms "a move" for one simulation, and
    in a short match the side that moved first looked slower than it was."""
    import numpy as np

    from azjax.eval.match import _Side, start_states

    game = games.make("tictactoe")
    side = _Side(parse_agent("mcts:sims=2", game), 2, jax.random.PRNGKey(0))
    states = start_states(game, [()] * 2)
    side.warm_up(states)
    with lowerings() as lowered:
        side.moves_for(states, np.arange(2))
    assert lowered == []


def test_match_json_holds_the_games_and_a_record_file_each(tmp_path):
    record = run_match(TTT, ["minimax:depth=1", "random"], str(tmp_path), games=3, seed=4)
    with open(tmp_path / "match.json") as f:
        assert json.load(f)["game_records"] == record["game_records"]
    assert [g["a_played"] for g in record["game_records"]] == ["black", "black", "white"]
    for i, g in enumerate(record["game_records"]):
        final, _ = replay(TTT, [TTT.parse_action(m) for m in g["moves"]])
        assert winner(float(TTT.returns(final)[0]), True) == g["result"]
        with open(tmp_path / "games" / f"game-{i + 1:04d}.txt") as f:
            assert read_record(TTT, f.read()) == [TTT.parse_action(m) for m in g["moves"]]


def test_two_alike_seeded_agents_do_not_replay_each_others_games(tmp_path):
    """The command's --seed went to both agents: `perfect` against `perfect` drew one stream on
    each side, so the match's second half (the colours swapped) replayed its first move for
    move. Agent i now takes --seed + i."""
    record = run_match(TTT, ["perfect", "perfect"], str(tmp_path), games=16, seed=0)
    moves = [tuple(g["moves"]) for g in record["game_records"]]
    assert sum(moves[i] == moves[i + 8] for i in range(8)) < 4
    assert len(set(moves)) > 8


def test_minimax_never_loses_to_random():
    minimax = parse_agent("minimax", TTT)  # the whole game: perfect play
    out = play_games(TTT, minimax, parse_agent("random", TTT), 16, jax.random.PRNGKey(0))
    r = out.result
    assert r.losses == 0 and r.games == 16
    assert r.first[0] >= 6  # as X it beats random play nearly always
    assert out.stats[0].seconds > 0 and out.stats[1].seconds > 0


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "play.py")), reason="no play.py yet")
def test_gtp_agent_plays_our_own_engine():
    command = (
        f'"{sys.executable} {os.path.join(ROOT, "play.py")} --gtp --game=tictactoe --agent=random"'
    )
    engine = parse_agent(f"gtp:{command}", TTT)
    try:
        out = play_games(TTT, parse_agent("minimax", TTT), engine, 2, jax.random.PRNGKey(0))
    finally:
        engine.close()
    assert out.result.games == 2 and out.result.losses == 0


def test_the_api_s_counts_are_checked(tmp_path):
    """From Python: play_games with no games said "give 0 openings of one length", run_match
    given one spec or a string a TypeError or "unknown agent 'r'", round_robin given fewer names
    than agents an UnboundLocalError."""
    from azjax.eval.tournament import round_robin, run_tournament

    ttt = games.make("tictactoe")
    rnd = parse_agent("random", ttt)
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="play_games: num_games must be an int >= 1, got 0"):
        play_games(ttt, rnd, rnd, 0, key)
    for specs in (["random"], "random", ["random"] * 3):
        with pytest.raises(ValueError, match="match: give two agents' specs"):
            run_match(ttt, specs, str(tmp_path), games=2)
    with pytest.raises(ValueError, match="tournament: give at least two agents' specs"):
        run_tournament(ttt, "random", str(tmp_path), games=2)
    with pytest.raises(ValueError, match="round_robin: give two or more agents and a name each"):
        round_robin(ttt, ["a"], [rnd, rnd], 2, key)
    assert not os.listdir(tmp_path)


def test_an_agent_made_for_another_game_is_refused():
    """A 5x5 Hex agent given a 6x6 match picked moves over 5x5's actions without a word (a
    random one played on; others failed deep in jax). Every agent now records its game: another
    game or other rules is one ValueError naming both; other observation options play."""
    from azjax.eval.agent import random_agent

    hex5, hex6 = games.make("hex", size=5), games.make("hex", size=6)
    key = jax.random.PRNGKey(0)
    opponent = parse_agent("random", hex6)
    for agent in (
        parse_agent("random", hex5),
        random_agent("r", hex5),
        parse_agent("mcts:sims=2", hex5),
        parse_agent("minimax:depth=1", hex5),
        parse_agent("random", TTT),
    ):
        with pytest.raises(ValueError, match=r"was made for (hex \{'size': 5|tictactoe).* not hex"):
            play_games(hex6, agent, opponent, 2, key)
        with pytest.raises(ValueError, match="was made for"):
            play_games(hex6, opponent, agent, 2, key)
    othello = games.make("othello", size=6)
    seen = parse_agent("random", games.make("othello", size=6, mobility=True))
    assert play_games(othello, seen, parse_agent("random", othello), 2, key).result.games == 2
