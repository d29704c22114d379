"""Agents from specs (azjax/agents.py): parsing and its errors, minimax on hand-worked positions,
checkpoint agents, GTP and human agents, and matches between any two agents."""

import dataclasses
import os
import shutil
import sys

import jax
import numpy as np
import pytest

import azjax
import games
from azjax import agents
from azjax.checkpoint import CheckpointError

TTT = games.make("tictactoe")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_run(tmp_path_factory) -> str:
    """A 2-iteration Tic-Tac-Toe run (1 block, 4 filters, checkpoints 1 and 2), trained once per
    test session and shared by test_agents.py and test_evaluate.py."""
    workdir = str(tmp_path_factory.getbasetemp() / "tiny_ttt_run")
    if not os.path.exists(os.path.join(workdir, "summary.json")):
        shutil.rmtree(workdir, ignore_errors=True)
        config = azjax.load_config("tictactoe", dict(
            num_blocks=1, num_filters=4, value_hidden=4, batch_games=8, num_simulations=4,
            train_steps=2, train_batch_size=16, replay_games=50, iterations=2,
            checkpoint_interval=1, eval_interval=0))
        azjax.train_and_evaluate(config, workdir, progress=False)
    return workdir


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny_run(tmp_path_factory)


def board_state(game, moves: str):
    """The state after the space-separated move names `moves`."""
    state = game.init()
    for name in moves.split():
        state = game.step(state, game.parse_action(name, state))
    return state


# ---- parsing -------------------------------------------------------------------------------------
def test_specs_build_the_named_agents():
    mcts = agents.parse_agent("mcts:sims=7,eps=0.1,search=gumbel", TTT)
    assert mcts.batched and mcts.variables is None
    spec = mcts.search.spec
    assert (spec.num_simulations, spec.search, spec.evaluator) == (7, "gumbel", "uniform")
    assert (spec.rollout_policy, spec.rollout_prob, spec.rollout_weight) == ("random", 1.0, 1.0)
    assert mcts.search.epsilon == 0.1 and mcts.search.rollouts_per_move == 8.0
    assert agents.parse_agent("mcts", TTT).search.spec.num_simulations == 100
    assert agents.parse_agent("random", TTT).batched
    minimax = agents.parse_agent("minimax:depth=2,seed=3", TTT)
    assert not minimax.batched and not minimax.stateful
    timed = agents.parse_agent("mcts:seconds=0.5", TTT)
    assert timed.search.seconds == 0.5 and not timed.search.calibrated


@pytest.mark.parametrize("text, message", [
    ("alphabeta", "unknown agent 'alphabeta'; agents: ckpt:PATH"),
    ("mcts:simz=5", "mcts: unknown option 'simz'; options: sims, search, c_puct"),
    ("mcts:sims=lots", "mcts: sims (simulations per move) must be int, got 'lots'"),
    ("mcts:sims=0", "sims (simulations per move) must be in [1, 100000]"),
    ("mcts:sims", "option 'sims' needs a value"),
    ("mcts:search=alphazero", "search must be one of puct, gumbel"),
    ("mcts:sims=5,seconds=1", "give sims or seconds, not both"),
    ("random:sims=3", "random: unknown option 'sims'; options: none"),
    ("minimax:depth=-1", "depth (plies searched) must be in [1, 10000]"),
    ("human:x=1", "human: unknown option 'x'"),
    ("gtp:", "gtp: give the engine's command line"),
    ("ckpt:", "ckpt: give a run folder"),
    ("ckpt:runs/x@first", "step must be a number or 'latest', got 'first'"),
])
def test_bad_specs_say_what_is_accepted(text, message):
    with pytest.raises(ValueError) as e:
        agents.parse_agent(text, TTT)
    assert message in str(e.value)


def test_minimax_needs_a_depth_on_big_games():
    with pytest.raises(ValueError, match="minimax: give depth=D for hex"):
        agents.parse_agent("minimax", games.make("hex", size=6))


def test_checkpoint_locations():
    parse = agents.parse_checkpoint_location
    assert parse("runs/hex6") == ("runs/hex6", None)
    assert parse("runs/hex6@latest") == ("runs/hex6", None)
    assert parse("runs/hex6@40") == ("runs/hex6", 40)
    assert parse("runs/hex6/checkpoints/40") == ("runs/hex6", 40)
    with pytest.raises(ValueError, match="is checkpoint 40, not @30"):
        parse("runs/hex6/checkpoints/40@30")


# ---- minimax -------------------------------------------------------------------------------------
def test_minimax_wins_in_one_and_blocks():
    search = agents.Minimax(TTT, depth=9)
    # X (a1 b1) to move with O on a2 b2: both c1 (X wins) and c2 (O's threat) matter; c1 wins now.
    assert search.best_moves(board_state(TTT, "a1 a2 b1 b2")) == [2]
    # O to move must block c1 (X threatens a1-b1-c1), with O in the centre that draws.
    blocked = board_state(TTT, "a1 b2 b1")
    assert search.best_moves(blocked) == [2] and search.value(blocked) == 0.0
    # A corner reply to a corner opening loses for O: X to move wins (a fork within 5 plies).
    assert search.value(board_state(TTT, "a1 c1")) > 0.99
    assert search.value(TTT.init()) == 0.0  # Tic-Tac-Toe is a draw
    shallow = agents.Minimax(TTT, depth=1)
    assert shallow.best_moves(board_state(TTT, "a1 a2 b1 b2")) == [2]


def test_minimax_solves_hex_3():
    game = games.make("hex", size=3)
    search = agents.Minimax(game, depth=9)
    assert search.value(game.init()) > 0.99  # the first player wins
    assert 4 in search.best_moves(game.init())  # b2, the centre, wins


def test_minimax_never_loses_to_random():
    minimax = agents.parse_agent("minimax", TTT)  # the whole game: perfect play
    out = agents.play_games(TTT, minimax, agents.parse_agent("random", TTT), 16,
                            jax.random.PRNGKey(0))
    r = out.result
    assert r.losses == 0 and r.games == 16
    assert r.first[0] >= 6  # as X it beats random play nearly always
    assert out.stats[0].seconds > 0 and out.stats[1].seconds > 0


# ---- matches -------------------------------------------------------------------------------------
class _Resigner:
    """A Python agent that resigns at its first move; counts the games it is reset for."""

    def __init__(self):
        self.resets = 0

    def agent(self):
        def reset():
            self.resets += 1

        return agents.Agent(name="resigner", batched=False, stateful=True, reset=reset,
                            choose=lambda state: agents.RESIGN)


def test_match_results_add_up_and_colours_alternate():
    rand = agents.parse_agent("random", TTT)
    first_mover = agents.parse_agent("minimax:depth=1", TTT)
    out = agents.play_games(TTT, rand, rand, 10, jax.random.PRNGKey(1))  # jitted, batched
    r = out.result
    assert r.wins + r.draws + r.losses == 10 and sum(r.first) == 5 and sum(r.second) == 5
    out = agents.play_games(TTT, first_mover, rand, 7, jax.random.PRNGKey(2))  # Python loop
    r = out.result
    assert r.games == 7 and sum(r.first) == 4 and sum(r.second) == 3
    resigner = _Resigner()
    out = agents.play_games(TTT, resigner.agent(), rand, 4, jax.random.PRNGKey(3))
    assert (out.result.losses, resigner.resets) == (4, 4)  # resigns every game, played one by one


def test_calibration_happens_once_and_only_for_timed_agents():
    timed = agents.parse_agent("mcts:seconds=0.5", TTT)
    done = dataclasses.replace(timed, search=dataclasses.replace(timed.search, calibrated=True))
    assert agents.calibrate(done, TTT, 2, None) is done
    untimed = agents.parse_agent("mcts:sims=3", TTT)
    assert agents.calibrate(untimed, TTT, 2, None) is untimed
    # (a real calibration runs in test_evaluate.py's equal-time match)


def test_calibration_interpolates_between_timings():
    assert agents._predict({16: 0.1, 64: 0.5}, 0.3) == 40  # bracketed: 16 + 0.2 / (0.4 / 48)
    assert agents._predict({16: 0.1, 64: 0.2}, 0.3) == 112  # extrapolated from the nearest two
    # a far-off third timing is not used when two others bracket the budget
    assert agents._predict({16: 0.1, 64: 0.5, 800: 9.0}, 0.3) == 40
    assert agents._predict({16: 0.2, 64: 0.1}, 0.3) == 192  # noise (time falls): proportional


# ---- checkpoints ---------------------------------------------------------------------------------
def test_checkpoint_agent_takes_search_settings(run):
    agent = agents.parse_agent(f"ckpt:{run}@1,sims=3,eps=0.2,rollout=random,p_r=0.5,lambda=0.25",
                               TTT)
    assert agent.batched and agent.variables is not None
    spec = agent.search.spec
    assert (spec.num_simulations, spec.evaluator) == (3, "network")
    assert (spec.rollout_policy, spec.rollout_prob, spec.rollout_weight) == ("random", 0.5, 0.25)
    assert agent.search.epsilon == 0.2 and agent.search.rollouts_per_move == 2.0
    latest = agents.parse_agent(f"ckpt:{run}@latest", TTT)
    assert latest.search.spec.num_simulations == 4  # the run's own setting
    changed = jax.tree_util.tree_map(lambda a, b: not np.array_equal(a, b), agent.variables,
                                     latest.variables)
    assert any(jax.tree_util.tree_leaves(changed["params"]))  # @1 and @latest (2) differ
    config, variables, step = agents.load_checkpoint(run)
    assert step == 2 and config.num_filters == 4


def test_checkpoint_errors_name_the_problem(run, tmp_path):
    with pytest.raises(CheckpointError, match="no run folder"):
        agents.parse_agent(f"ckpt:{tmp_path}/nowhere", TTT)
    with pytest.raises(CheckpointError, match=r"no checkpoint 7 .*have \[1, 2\]"):
        agents.parse_agent(f"ckpt:{run}@7", TTT)
    with pytest.raises(ValueError, match=r"is for tictactoe \{\}, but the games here are hex"):
        agents.parse_agent(f"ckpt:{run}", games.make("hex", size=3))
    with pytest.raises(ValueError, match="rollout=random needs p_r > 0"):
        agents.parse_agent(f"ckpt:{run},rollout=random", TTT)
    with pytest.raises(ValueError, match="p_r=0.3 needs rollout=random or rollout=policy"):
        agents.parse_agent(f"ckpt:{run},p_r=0.3", TTT)
    with pytest.raises(ValueError, match="ckpt: unknown option 'depth'"):
        agents.parse_agent(f"ckpt:{run},depth=3", TTT)


# ---- Python agents -------------------------------------------------------------------------------
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
    agent = agents.make_gtp_agent("gtp", game, client)
    agent.reset()
    state = game.init()
    assert agent.choose(state) == 4  # black's move, parsed case-insensitively
    state = game.step(state, 4)
    agent.observe_move(state, 0)  # white played a1
    assert agent.choose(game.step(state, 0)) == agents.RESIGN
    agent.close()
    assert client.log == ["boardsize 3", "clear_board", "genmove b", "play w a1", "genmove b",
                          "quit"]
    bad = agents.make_gtp_agent("gtp", game, FakeGTP(["z9"]))
    with pytest.raises(ValueError, match="the engine played 'z9'"):
        bad.choose(game.init())


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "play.py")), reason="no play.py yet")
def test_gtp_agent_plays_our_own_engine():
    command = f'"{sys.executable} {os.path.join(ROOT, "play.py")} --gtp --game=tictactoe ' \
              f'--agent=random"'
    engine = agents.parse_agent(f"gtp:{command}", TTT)
    try:
        out = agents.play_games(TTT, agents.parse_agent("minimax", TTT), engine, 2,
                                jax.random.PRNGKey(0))
    finally:
        engine.close()
    assert out.result.games == 2 and out.result.losses == 0


def test_human_agent_asks_until_the_move_is_legal():
    answers = iter(["zz", "a1", "b2"])
    shown = []
    human = agents.make_human_agent(TTT, ask=lambda prompt: next(answers), show=shown.append)
    state = board_state(TTT, "a1")
    assert human.choose(state) == 4
    assert any("not legal here" in s for s in shown) and any("not a move" in s for s in shown)
    assert human.stateful and not human.batched
