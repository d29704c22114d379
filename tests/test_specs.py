"""Agent specs (azjax/eval/specs.py): what they build, their errors, and checkpoint agents."""

import dataclasses
import json
import os
import shutil

import jax
import numpy as np
import pytest

import azjax
import games
from azjax.checkpoint import CheckpointError, best_checkpoint, load_checkpoint, parse_location
from azjax.eval import specs
from azjax.eval.match import play_games
from azjax.eval.specs import parse_agent
from azjax.search import SearchSpec

TTT = games.make("tictactoe")


def test_specs_build_the_named_agents():
    mcts = parse_agent("mcts:sims=7,eps=0.1,search=gumbel", TTT)
    assert mcts.batched and mcts.variables is None
    spec = mcts.search.spec
    assert (spec.num_simulations, spec.search, spec.evaluator) == (7, "gumbel", "uniform")
    assert (spec.rollout_policy, spec.rollout_prob, spec.rollout_weight) == ("random", 1.0, 1.0)
    assert mcts.search.epsilon == 0.1 and mcts.search.rollouts_per_move == 8.0
    assert parse_agent("mcts", TTT).search.spec.num_simulations == 100
    # UCT as OpenSpiel's bot by default; seed 000's PUCT baseline by name
    default = parse_agent("mcts:c_uct=2", TTT).search.spec
    assert (default.search, default.c_uct) == ("uct", 2.0)
    assert parse_agent("mcts:search=puct", TTT).search.spec.search == "puct"
    assert default.puct_values == "minmax"  # mctx's, unless values= says otherwise
    assert parse_agent("mcts:search=puct,values=raw", TTT).search.spec.puct_values == "raw"
    assert parse_agent("mcts:search=puct,values=raw,fpu=0.3", TTT).search.spec.fpu_reduction == 0.3
    assert parse_agent("random", TTT).batched
    minimax = parse_agent("minimax:depth=2,seed=3", TTT)
    assert not minimax.batched and not minimax.stateful
    timed = parse_agent("mcts:seconds=0.5", TTT)
    assert timed.search.seconds == 0.5 and not timed.search.calibrated
    human = parse_agent("human", TTT)
    assert human.stateful and not human.batched


def test_the_commands_seed_reaches_agents_without_their_own():
    """A match's --seed reaches minimax, perfect and spiel agents whose spec gives no seed=, so
    another seed plays other games against them; a spec's own seed= wins."""
    state = TTT.init()

    def moves(text, seed):
        agent = parse_agent(text, TTT, seed=seed)  # the first moves tie at depth 1: drawn at random
        return [agent.choose(state) for _ in range(12)]

    assert moves("minimax:depth=1", 0) == moves("minimax:depth=1,seed=0", 5)
    assert moves("minimax:depth=1", 5) != moves("minimax:depth=1", 0)
    assert moves("minimax:depth=1", 5) == moves("minimax:depth=1", 5 + specs.SPEC_SEEDS)


@pytest.mark.parametrize(
    "text, message",
    [
        ("alphabeta", "unknown agent 'alphabeta'; agents: ckpt:PATH"),
        ("mcts:simz=5", "mcts: unknown option 'simz'; options: sims, search, c_puct"),
        ("mcts:sims=lots", "mcts: sims (simulations per move) must be int, got 'lots'"),
        ("mcts:sims=0", "sims (simulations per move) must be in [1, 100000]"),
        ("mcts:sims", "option 'sims' needs a value"),
        ("mcts:search=alphazero", "search must be one of uct, puct, gumbel"),
        ("mcts:values=max", "values must be one of minmax, raw"),
        ("mcts:search=puct,fpu=0.3", "fpu=0.3 needs search=puct and values=raw, got search=puct"),
        ("mcts:fpu=3", "fpu (PUCT's first-play urgency reduction (fpu_reduction; values=raw))"),
        ("mcts:sims=5,seconds=1", "give sims or seconds, not both"),
        ("mcts:sims=10,sims=20", "mcts: option 'sims' given twice; give it once"),
        ("mcts:decisive=yes", "decisive (1: a position whose mover can win at once is searched"),
        ("random:sims=3", "random: unknown option 'sims'; options: none"),
        ("minimax:depth=-1", "depth (plies searched) must be in [1, 10000]"),
        ("human:x=1", "human: unknown option 'x'"),
        ("gtp:", "gtp: give the engine's command line"),
        ("ckpt:", "ckpt: give a run folder"),
        (
            "ckpt:runs/x@first",
            "after @ must be a number, 'latest', 'best' or 'best:MEASURE', got 'first'",
        ),
    ],
)
def test_bad_specs_say_what_is_accepted(text, message):
    with pytest.raises(ValueError) as e:
        parse_agent(text, TTT)
    assert message in str(e.value)


def test_a_game_name_for_a_game_is_named():
    """parse_agent("mcts", "tictactoe") was accepted and others failed with an AttributeError."""
    for spec in ("mcts", "minimax", "random"):
        with pytest.raises(TypeError, match="parse_agent: game must be a Game"):
            parse_agent(spec, "tictactoe")


def test_a_spec_that_names_no_agent_is_reported_before_a_missing_game():
    from azjax.eval.specs import game_for

    with pytest.raises(ValueError, match="unknown agent 'pretrained/hex6'; agents: ckpt:PATH"):
        game_for(["pretrained/hex6", "random"])  # ckpt: left out
    with pytest.raises(ValueError, match="give --game=NAME: no ckpt: agent"):
        game_for(["random", "mcts:sims=4"])


def test_minimax_needs_a_depth_on_big_games():
    with pytest.raises(ValueError, match="minimax: give depth=D for hex"):
        parse_agent("minimax", games.make("hex", size=6))
    with pytest.raises(ValueError, match="16 plies"):  # 4x4 Hex: tens of GB, no answer
        parse_agent("minimax", games.make("hex", size=4))
    assert parse_agent("minimax", games.make("hex", size=3)).name == "minimax"  # perfect play
    four = games.make("connect_four", rows=4, cols=4)  # 16 plies too, solved in about a second
    assert parse_agent("minimax", four).name == "minimax"


def test_a_list_of_specs_keeps_each_specs_options():
    text = 'ckpt:runs/a,sims=50, mcts:sims=512,c_uct=1.0,random,,gtp:"x --y=1",sims=2'
    assert specs.split_specs(text) == [
        "ckpt:runs/a,sims=50",
        "mcts:sims=512,c_uct=1.0",
        "random",
        'gtp:"x --y=1",sims=2',
    ]
    assert specs.split_specs("") == [] and specs.split_specs(" , ") == []


def test_checkpoint_locations():
    parse = specs.parse_checkpoint_location
    assert parse("runs/hex6") == ("runs/hex6", None)
    assert parse("runs/hex6@latest") == ("runs/hex6", None)
    assert parse("runs/hex6@40") == ("runs/hex6", 40)
    assert parse("runs/hex6/checkpoints/40") == ("runs/hex6", 40)
    with pytest.raises(ValueError, match="is checkpoint 40, not @30"):
        parse("runs/hex6/checkpoints/40@30")
    with pytest.raises(ValueError, match="is checkpoint 40, not @best"):
        parse("runs/hex6/checkpoints/40@best")


def test_best_names_the_checkpoint_its_evaluations_scored_highest(tiny_run, tmp_path):
    """`@best`: among the saved checkpoints, the one whose in-loop evaluation scored highest,
    by the score against --eval_opponent where the run logged one, else by the ladder Elo."""
    run = str(tmp_path / "run")
    shutil.copytree(tiny_run, run)  # checkpoints 1 and 2, no evaluations
    path = os.path.join(run, "metrics.jsonl")
    rows = [json.loads(line) for line in open(path)]

    def log(*evals):
        _log_evaluations(path, rows + [{"iteration": 3}], evals)

    # trained with --eval_interval=0: "train past its --eval_interval" meant nothing
    with pytest.raises(CheckpointError, match=r"\[1, 2\] has an in.*--eval_interval=0 \(no in-"):
        parse_location(f"{run}@best")
    config = json.load(open(os.path.join(run, "config.json")))
    json.dump(dict(config, eval_interval=2), open(os.path.join(run, "config.json"), "w"))
    with pytest.raises(CheckpointError, match=r"\[1, 2\] has an in.*not been evaluated yet"):
        parse_location(f"{run}@best")
    log({}, {}, {"eval/elo": 900.0})  # evaluated at 3 alone, which is not saved
    with pytest.raises(CheckpointError, match="an --eval_interval that divides"):
        parse_location(f"{run}@best")
    log({"eval/elo": 300.0}, {"eval/elo": 200.0}, {"eval/elo": 900.0})  # 3 is not saved
    assert best_checkpoint(run)[:3] == (1, "eval/elo", 300.0)
    assert parse_location(f"{run}@best") == (run, 1)
    agent = parse_agent(f"ckpt:{run}@best,sims=2", TTT)
    first = load_checkpoint(run, 1)[1]
    same = jax.tree_util.tree_map(np.array_equal, agent.variables, first)
    assert all(jax.tree_util.tree_leaves(same))
    # the opponent's score outranks the Elo; a tie goes to the later step; NaN never wins
    log({"eval/elo": 300.0, "eval/opponent_score": 0.5}, {"eval/opponent_score": 0.5})
    assert best_checkpoint(run)[:3] == (2, "eval/opponent_score", 0.5)
    log({"eval/opponent_score": 0.25}, {"eval/opponent_score": float("nan")})
    assert best_checkpoint(run).step == 1
    # scores level within their intervals: the later step, the highest named beside it
    log({"eval/elo": 300.0, "eval/elo_ci95": 100.0}, {"eval/elo": 250.0, "eval/elo_ci95": 100.0})
    assert best_checkpoint(run) == (2, "eval/elo", 250.0, 1, 300.0)
    log({"eval/elo": 300.0, "eval/elo_ci95": 30.0}, {"eval/elo": 200.0, "eval/elo_ci95": 30.0})
    assert best_checkpoint(run) == (1, "eval/elo", 300.0, 1, 300.0)  # told apart: the highest
    with pytest.raises(CheckpointError, match="an exported network .* drop the @best"):
        parse_location("pretrained/tictactoe@best")


def test_a_measure_from_the_first_half_of_the_run_gives_way():
    from azjax.checkpoint import BEST_MEASURES, current_first

    auto = [BEST_MEASURES[m] for m in ("opponent", "elo", "error_rate")]
    errors = [{"iteration": i, "eval/error_rate": 0.1} for i in range(10, 100, 10)]
    # a 5x5 Hex run whose ladder placements the budget put off after the first (session 80)
    rated_once = [dict(errors[0], **{"eval/elo": 1227.0}), *errors[1:]]
    assert [m for m, _ in current_first(rated_once, auto)] == [
        "eval/error_rate",
        "eval/opponent_score",  # never logged: after, as before
        "eval/elo",
    ]
    # an 8x8 Othello hour whose final evaluation (and the one before) was put off: the Elo stays
    rated_often = [dict(r, **{"eval/elo": 1000.0}) if r["iteration"] <= 70 else r for r in errors]
    assert [m for m, _ in current_first(rated_often, auto)] == [
        "eval/elo",
        "eval/error_rate",
        "eval/opponent_score",  # never logged
    ]


def _log_evaluations(path: str, rows: list[dict], evals) -> None:
    """Rewrites metrics.jsonl at `path` as `rows`, each with its entry of `evals` added."""
    with open(path, "w") as f:
        for row, extra in zip(rows, evals):
            f.write(json.dumps({**row, **extra}) + "\n")


def test_best_ranks_by_the_measure_asked_for(tiny_run, tmp_path):
    """`@best:MEASURE`, or the run's --best_by: the exact error rate ranks lowest first."""
    run = str(tmp_path / "run")
    shutil.copytree(tiny_run, run)
    path = os.path.join(run, "metrics.jsonl")
    rows = [json.loads(line) for line in open(path)]
    evals = [
        {"eval/elo": 300.0, "eval/error_rate": 0.2},
        {"eval/elo": 200.0, "eval/error_rate": 0.1},
    ]
    _log_evaluations(path, rows, evals)
    assert best_checkpoint(run)[:3] == (1, "eval/elo", 300.0)  # auto: the ladder
    assert best_checkpoint(run, "error_rate")[:3] == (2, "eval/error_rate", 0.1)
    assert parse_location(f"{run}@best:error_rate") == (run, 2)
    assert parse_location(f"{run}@best:elo") == (run, 1)
    with pytest.raises(CheckpointError, match=r"none of its saved .* \(eval/opponent_score in"):
        parse_location(f"{run}@best:opponent")
    with pytest.raises(CheckpointError, match="its evaluations log none of these .* --eval_opp"):
        parse_location(f"{run}@best:opponent")  # evaluated: not 'train past --eval_interval'
    # a run folder whose name holds an @ is that folder, not a step of another
    named = str(tmp_path / "exp@v2")
    shutil.copytree(run, named)
    assert parse_location(named) == (named, None)
    assert parse_location(f"{named}@best:elo") == (named, 1)
    with pytest.raises(CheckpointError, match="@best:wins: the measure must be one of auto, opp"):
        parse_location(f"{run}@best:wins")
    # the run's own --best_by, from its config.json
    config = os.path.join(run, "config.json")
    saved = json.load(open(config))
    with open(config, "w") as f:
        json.dump({**saved, "best_by": "error_rate", "eval_interval": 1}, f)
    assert parse_location(f"{run}@best") == (run, 2)
    assert parse_location(f"{run}@best:auto") == (run, 1)
    # a tie in the error rate goes to the later step
    evals[0]["eval/error_rate"] = 0.1
    _log_evaluations(path, rows, evals)
    assert best_checkpoint(run).step == 2
    # the lowest error rate, or one level with it within the intervals (the later)
    evals[0].update({"eval/error_rate": 0.05, "eval/error_ci95": 0.02})
    evals[1].update({"eval/error_rate": 0.07, "eval/error_ci95": 0.02})
    _log_evaluations(path, rows, evals)
    assert best_checkpoint(run) == (2, "eval/error_rate", 0.07, 1, 0.05)
    evals[1]["eval/error_rate"] = 0.1
    _log_evaluations(path, rows, evals)
    assert best_checkpoint(run).step == 1  # told apart: the lowest
    # auto falls back on the error rate where no saved step has a score or an Elo (the matches
    # of an evaluation put off by --eval_budget)
    evals = [{"eval/error_rate": 0.3}, {"eval/error_rate": 0.2, "eval_postponed": 1}]
    _log_evaluations(path, rows, evals)
    assert best_checkpoint(run, "auto")[:3] == (2, "eval/error_rate", 0.2)
    # and where the evaluations of the run's second half were put off, an Elo logged before them
    # ranks only the checkpoints before them: auto takes a measure logged in that half
    evals[0]["eval/elo"] = 1227.0
    _log_evaluations(path, rows, evals)
    assert best_checkpoint(run, "auto")[:3] == (2, "eval/error_rate", 0.2)
    assert best_checkpoint(run, "elo")[:3] == (1, "eval/elo", 1227.0)  # asked for: as asked
    evals[1]["eval/elo"] = 900.0  # rated at the end too: the Elo ranks again
    _log_evaluations(path, rows, evals)
    assert best_checkpoint(run, "auto")[:3] == (1, "eval/elo", 1227.0)


def test_the_game_comes_from_the_flags_or_the_first_checkpoint(tiny_run):
    assert specs.game_for(["random"], "hex", {"size": 5}) == games.make("hex", size=5)
    assert specs.game_for(["random", f"ckpt:{tiny_run}"]) == TTT
    assert specs.checkpoint_config("random") is None
    with pytest.raises(ValueError, match="unknown agent 'foo'"):  # not "give --game" (play.py)
        specs.checkpoint_config("foo")
    assert specs.checkpoint_config(f"ckpt:{tiny_run},sims=3").num_filters == 4
    with pytest.raises(ValueError, match="give --game=NAME"):
        specs.game_for(["random", "mcts"])
    with pytest.raises(ValueError, match="unknown option"):  # a checkpoint's game checks options
        specs.game_for([f"ckpt:{tiny_run}"], None, {"size": 5})


# ---- checkpoints ---------------------------------------------------------------------------------
def test_checkpoint_agent_takes_search_settings(tiny_run):
    agent = parse_agent(f"ckpt:{tiny_run}@1,sims=3,eps=0.2,rollout=random,p_r=0.5,lambda=0.25", TTT)
    assert agent.batched
    assert jax.tree_util.tree_structure(agent.variables) == jax.tree_util.tree_structure(
        load_checkpoint(tiny_run, 1)[1]
    )
    spec = agent.search.spec
    assert (spec.num_simulations, spec.evaluator) == (3, "network")
    assert (spec.rollout_policy, spec.rollout_prob, spec.rollout_weight) == ("random", 0.5, 0.25)
    assert agent.search.epsilon == 0.2 and agent.search.rollouts_per_move == 2.0
    latest = parse_agent(f"ckpt:{tiny_run}@latest", TTT)
    assert latest.search.spec.num_simulations == 4  # the run's own setting
    assert latest.search.spec.puct_values == "minmax"  # the run's own (the default)
    assert parse_agent(f"ckpt:{tiny_run},values=raw", TTT).search.spec.puct_values == "raw"
    assert latest.search.spec.net_symmetries == 1  # the run's own (the default)
    assert latest.search.spec.fpu_reduction == 0  # the run's own (the default)
    fpu = parse_agent(f"ckpt:{tiny_run},search=puct,values=raw,fpu=0.2", TTT).search.spec
    assert (fpu.puct_values, fpu.fpu_reduction) == ("raw", 0.2)
    # a run's own reduction gives way where the options change the search; an option's does not
    inherited = SearchSpec(search="puct", puct_values="raw", fpu_reduction=0.2)
    assert specs._check_fpu("x", {}, inherited) == inherited
    gumbel = dataclasses.replace(inherited, search="gumbel")
    assert specs._check_fpu("x", {}, gumbel).fpu_reduction == 0
    with pytest.raises(ValueError, match="x: fpu=0.2 needs search=puct and values=raw"):
        specs._check_fpu("x", {"fpu": 0.2}, gumbel)
    assert parse_agent(f"ckpt:{tiny_run},sym=8", TTT).search.spec.net_symmetries == 8
    assert latest.search.spec.score_utility == 0  # the run's own (the default)
    assert not load_checkpoint(tiny_run)[0].decisive_moves  # trained without them,
    assert latest.search.spec.decisive_moves  # a ckpt: agent plays with them (CKPT_DECISIVE)
    assert not parse_agent(f"ckpt:{tiny_run},decisive=0", TTT).search.spec.decisive_moves
    assert not parse_agent("mcts", TTT).search.spec.decisive_moves  # pure MCTS: without
    assert parse_agent("mcts:decisive=1", TTT).search.spec.decisive_moves
    othello6 = parse_agent("ckpt:pretrained/othello6,score=0.2", games.make("othello", size=6))
    assert othello6.search.spec.score_utility == 0.2  # a network with an ownership head
    changed = jax.tree_util.tree_map(
        lambda a, b: not np.array_equal(a, b), agent.variables, latest.variables
    )
    assert any(jax.tree_util.tree_leaves(changed["params"]))  # @1 and @latest (2) differ
    config, variables, step = load_checkpoint(tiny_run)
    assert step == 2 and config.num_filters == 4


@pytest.mark.parametrize("half", [dict(rollout_prob=0.5), dict(rollout_policy="random")])
def test_a_checkpoint_trained_with_half_a_rollout_setting_plays_without_rollouts(
    tiny_run, monkeypatch, half
):
    # training reads either half alone as no rollouts (config.validate): so does its ckpt: agent,
    # and `rollout=none` or `p_r=0` alone turn off what a checkpoint had
    trained = specs.read_config(tiny_run)
    monkeypatch.setattr(specs, "read_config", lambda *a: dataclasses.replace(trained, **half))
    for options in ("", ",rollout=none", ",p_r=0"):
        spec = parse_agent(f"ckpt:{tiny_run}{options}", TTT).search.spec
        assert (spec.rollout_policy, spec.rollout_prob) == ("none", 0.0)
    rolled = dataclasses.replace(trained, rollout_policy="random", rollout_prob=0.5)
    monkeypatch.setattr(specs, "read_config", lambda *a: rolled)
    for options in (",rollout=none", ",p_r=0"):
        spec = parse_agent(f"ckpt:{tiny_run}{options}", TTT).search.spec
        assert (spec.rollout_policy, spec.rollout_prob) == ("none", 0.0)
    spec = parse_agent(f"ckpt:{tiny_run},rollout=policy", TTT).search.spec
    assert (spec.rollout_policy, spec.rollout_prob) == ("policy", 0.5)
    with pytest.raises(ValueError, match="rollout=random needs p_r > 0"):
        parse_agent(f"ckpt:{tiny_run},rollout=random,p_r=0", TTT)
    with pytest.raises(ValueError, match="p_r=0.3 needs rollout=random or rollout=policy"):
        parse_agent(f"ckpt:{tiny_run},rollout=none,p_r=0.3", TTT)


def test_checkpoint_errors_name_the_problem(tiny_run, tmp_path):
    with pytest.raises(CheckpointError, match="no run folder"):
        parse_agent(f"ckpt:{tmp_path}/nowhere", TTT)
    with pytest.raises(CheckpointError, match=r"no checkpoint 7 .*have \[1, 2\]"):
        parse_agent(f"ckpt:{tiny_run}@7", TTT)
    with pytest.raises(CheckpointError, match=r"no checkpoints/ folder\); give the run folder"):
        parse_agent(f"ckpt:{tiny_run}/checkpoints", TTT)
    os.makedirs(tmp_path / "early" / "checkpoints")  # a run killed before its first checkpoint
    with pytest.raises(CheckpointError, match=r"holds no checkpoints yet \(checkpoints/ is empty"):
        parse_agent(f"ckpt:{tmp_path}/early", TTT)
    with pytest.raises(ValueError, match=r"is for tictactoe \{\}, but the games here are hex"):
        parse_agent(f"ckpt:{tiny_run}", games.make("hex", size=3))
    with pytest.raises(ValueError, match="rollout=random needs p_r > 0"):
        parse_agent(f"ckpt:{tiny_run},rollout=random", TTT)
    with pytest.raises(ValueError, match="p_r=0.3 needs rollout=random or rollout=policy"):
        parse_agent(f"ckpt:{tiny_run},p_r=0.3", TTT)
    with pytest.raises(ValueError, match=r"sym \(.*\) must be in \[1, 8\], got '9'"):
        parse_agent(f"ckpt:{tiny_run},sym=9", TTT)
    with pytest.raises(ValueError, match=r"sym must be in 1\.\.2 for hex \(its board symmetries"):
        parse_agent("ckpt:pretrained/hex6,sym=8", games.make("hex", size=6))
    with pytest.raises(ValueError, match=r"score=0.2 reads the ownership head, and this network"):
        parse_agent(f"ckpt:{tiny_run},score=0.2", TTT)
    with pytest.raises(ValueError, match="score=0.2 with rollout=random: a rollout's result"):
        parse_agent(
            "ckpt:pretrained/othello6,score=0.2,rollout=random,p_r=1", games.make("othello", size=6)
        )
    with pytest.raises(ValueError, match="ckpt: unknown option 'depth'"):
        parse_agent(f"ckpt:{tiny_run},depth=3", TTT)


@pytest.fixture(scope="module")
def mobility_run(tmp_path_factory) -> str:
    """A 1-iteration 4x4 Othello run whose network sees the mobility planes (5 input planes)."""
    workdir = str(tmp_path_factory.mktemp("mobility") / "run")
    config = azjax.load_config(
        "othello",
        dict(
            size=4,
            mobility=True,
            num_blocks=1,
            num_filters=4,
            value_hidden=4,
            batch_games=4,
            num_simulations=4,
            train_steps=1,
            train_batch_size=8,
            replay_games=20,
            iterations=1,
            checkpoint_interval=1,
            eval_interval=0,
        ),
    )
    azjax.train_and_evaluate(config, workdir, progress=False)
    return workdir


def test_a_network_that_sees_more_planes_plays_the_plain_game(mobility_run):
    """An observation option (Othello's mobility) is not part of the game's rules: the network
    plays a match of the plain game, observing the positions as it was trained to, and the
    match's game is still checked against the network's rules."""
    plain = games.make("othello", size=4)
    net = parse_agent(f"ckpt:{mobility_run},sims=2", plain)
    assert net.search.game.observation_shape == (4, 4, 5) and net.search.game.same_rules(plain)
    out = play_games(plain, net, parse_agent("random", plain), 4, jax.random.PRNGKey(0))
    assert out.result.games == 4
    with pytest.raises(
        ValueError, match=r"is for othello \{'size': 4\}, but .* othello \{'size': 6\}"
    ):
        parse_agent(f"ckpt:{mobility_run}", games.make("othello", size=6))
