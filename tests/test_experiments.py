"""The experiment scripts: the exact Tic-Tac-Toe solver, its perfect-play agent, and a toy-scale
run of experiments.experiment1 (training, checkpoint evaluation, final matches, plot)."""

import json
import os

import jax
import numpy as np
import pytest

import games
from azjax import MatchResult, make_match, make_random_agent
from experiments import perfect_play as pp
from experiments.common import wilson


def board(text: str) -> tuple[int, ...]:
    """'X.O/...' rows -> cells (0 empty, 1 X, 2 O)."""
    return tuple({".": 0, "X": 1, "O": 2}[c] for c in text.replace("/", ""))


def test_solver_values():
    assert len(pp.reachable_boards()) == 5478
    assert pp.negamax((0,) * 9) == 0  # Tic-Tac-Toe is a draw
    assert pp.optimal_moves((0,) * 9) == list(range(9))  # every first move draws
    # X in a corner: O must take the centre; every other reply loses.
    assert pp.optimal_moves(board("X../.../...")) == [4]
    assert pp.negamax(board("X../.O./...")) == 0
    assert pp.negamax(board("X../..O/...")) == 1  # X to move wins
    # X to move completes the top row.
    assert pp.optimal_moves(board("XX./OO./...")) == [2]
    # O to move must block the top row; with O in the centre that holds the draw...
    assert pp.optimal_moves(board("XX./.O./...")) == [2]
    assert pp.negamax(board("XX./.O./...")) == 0
    # ...but with O on an edge it is lost whatever O does (the block allows a fork at 4).
    assert pp.negamax(board("XX./O../...")) == -1
    # X wins after a corner reply to a corner opening, by 3, 6 or 8 (each forces a fork).
    assert pp.optimal_moves(board("X.O/.../...")) == [3, 6, 8]
    # O answering a corner opening with a corner loses.
    assert pp.negamax(board("X.O/.../...")) == 1
    assert pp.negamax(board("XXX/OO./...")) == -1  # finished: the mover (O) has lost


def test_table_matches_solver():
    table = pp.optimal_table()
    rng = np.random.default_rng(0)
    boards = pp.reachable_boards()
    for i in rng.choice(len(boards), 200, replace=False):
        b = boards[i]
        assert list(np.flatnonzero(table[pp.encode(b)])) == pp.optimal_moves(b)


def test_perfect_agent_never_loses_to_random():
    game = games.make("tictactoe")
    perfect = pp.make_perfect_agent()
    match = make_match(game, perfect, make_random_agent(game), 200)
    res = MatchResult.from_returns(*match(None, None, jax.random.PRNGKey(0)))
    assert res.losses == 0
    assert res.first[0] > 80  # as X against random play it wins nearly always
    # Perfect against perfect is always a draw.
    match = make_match(game, perfect, perfect, 64)
    res = MatchResult.from_returns(*match(None, None, jax.random.PRNGKey(1)))
    assert res.draws == 64


def test_wilson():
    lo, hi = wilson(95, 100)
    assert 0.88 < lo < 0.89 and 0.97 < hi < 0.98
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0


def test_experiment1_takes_every_config_field_and_game_option():
    from experiments import experiment1

    args, overrides = experiment1.parse(
        [
            "--game=hex",
            "--swap",
            "--size=5",
            "--num_filters=8",
            "--rollout_sample",
            "--eval_games=6",
        ]
    )
    assert overrides == dict(swap=True, size=5, num_filters=8, rollout_sample=True)
    assert args.eval_games == 6 and args.workdir == os.path.join("runs", "exp1_hex")
    _, overrides = experiment1.parse(["--game=connect_four", "--rows=5"])
    assert overrides == dict(rows=5)


@pytest.mark.parametrize("game, cpu_search", [("hex", "gumbel"), ("othello", "puct")])
def test_experiment1_full_is_table_5_1_not_the_default_recipe(game, cpu_search):
    from experiments import experiment1

    full = experiment1.make_config(game, True, 0, {})
    assert (full.search, full.num_simulations, full.num_filters, full.optimizer) == (
        "puct",
        50,
        128,
        "sgd",
    )
    assert full.eval_interval == 0  # the script evaluates the checkpoints afterwards
    cpu = experiment1.make_config(game, False, 5, {})
    assert (cpu.search, cpu.num_filters, cpu.time_budget) == (cpu_search, 32, 5)  # configs/cpu.py
    # from the command line: --full runs Table 5.1's iterations, the CPU scale 22 minutes
    assert experiment1.parse([f"--game={game}", "--full"])[0].minutes == 0
    assert experiment1.parse([f"--game={game}"])[0].minutes == 22
    assert experiment1.parse([f"--game={game}", "--full"])[0].eval_games == 40  # Table 5.1's
    assert experiment1.parse([f"--game={game}"])[0].eval_games == 64


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--game=othello", "--swap"], "--swap is not an option of othello; its options: size"),
        (["--game=hex", "--swap=maybe"], "--swap: expected true or false, got 'maybe'"),
        (["--game=hex", "--search=alphabeta"], "--search must be one of puct, gumbel"),
        (["--game=hex", "--frobnicate=1"], "unrecognized arguments: --frobnicate=1"),
    ],
)
def test_experiment1_refuses_bad_flags(argv, message, capsys):
    from experiments import experiment1

    with pytest.raises(SystemExit) as exit_info:
        experiment1.parse(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_experiment1_eval_only_needs_a_run_and_makes_no_folder_first(tmp_path, capsys):
    from experiments import experiment1

    with pytest.raises(SystemExit) as exit_info:
        experiment1.parse(["--eval_only", f"--workdir={tmp_path}"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--eval_only:" in err and "holds no checkpoints" in err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("module", ["experiment1", "tictactoe", "connect_four"])
def test_an_experiments_stopped_training_goes_on_with_resume(module, tmp_path, capsys, monkeypatch):
    """A second invocation on a workdir with checkpoints was refused by train.py with 'pass
    --resume', which these experiments did not take, and a stop said 'continue with --resume'."""
    import importlib

    from experiments import common

    experiment = importlib.import_module(f"experiments.{module}")
    workdir = str(tmp_path / "run")
    os.makedirs(os.path.join(workdir, "checkpoints", "2"))
    argv = [f"--workdir={workdir}", "--no_progress"] + (["--game=hex"] * (module == "experiment1"))
    with pytest.raises(SystemExit) as exit_info:
        experiment.parse(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "holds a trained run already: --resume" in err, err
    given = {}

    def train_and_evaluate(config, workdir, **kwargs):
        given.update(kwargs, workdir=workdir)
        raise KeyboardInterrupt  # enough: what it was asked is the point

    monkeypatch.setattr(experiment, "train_and_evaluate", train_and_evaluate)
    monkeypatch.setattr(common, "read_config", lambda workdir: None)  # no real run here
    monkeypatch.setattr(common, "check_resumable", lambda saved, config: None)
    with pytest.raises(KeyboardInterrupt):
        experiment.main(
            [*argv, "--resume"] + [f"--out={tmp_path / 'out'}"] * (module != "tictactoe")
        )
    assert given["resume"] is True and given["workdir"] == workdir


def test_a_refused_rerun_keeps_the_earlier_results(tiny_run, tmp_path, capsys):
    """The earlier results go once nothing refuses the run: a gating rerun into an --out that
    holds its runs, or an experiment's --resume with another network, removed them first."""
    from experiments import common, gating, tictactoe

    out = tmp_path / "g"
    os.makedirs(out / "ungated" / "checkpoints" / "1")
    (out / "results.json").write_text("{}")
    with pytest.raises(ValueError, match="holds this experiment's runs already"):
        gating.main([f"--out={out}", "--game=tictactoe"])
    assert (out / "results.json").exists()
    report = os.path.join(tiny_run, "vs_perfect.json")
    with open(report, "w") as f:
        f.write("{}")
    try:
        with pytest.raises(SystemExit):  # tiny_run has 4 filters
            tictactoe.main([f"--workdir={tiny_run}", "--resume", "--num_filters=8"])
        assert "cannot resume" in capsys.readouterr().err and os.path.exists(report)
    finally:
        os.remove(report)
    # a save that never finished (orbax's temporary folder) is no run to resume
    os.makedirs(tmp_path / "r" / "checkpoints" / "3.orbax-checkpoint-tmp-1")
    assert not common.holds_checkpoints(str(tmp_path / "r"))


def test_an_experiment_stopped_in_an_out_given_again_leaves_no_earlier_results(
    tiny_run, tmp_path, monkeypatch
):
    """Its results are written at its end: a stop before then left the earlier invocation's
    results.json and plots there, as if this one's. log.txt and everything else stay."""
    from experiments import experiment2

    out = tmp_path / "e2"
    out.mkdir()
    for name in ("results.json", "win_ratio_lambda0.75.png", "rollout_probability.png", "mine.png"):
        (out / name).write_text("{}")
    (out / "log.txt").write_text("an earlier run\n")

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(experiment2, "round_robin", stopped)
    argv = [f"--workdir={tiny_run}", f"--out={out}", "--probs=0,1", "--games=2", "--sims=2"]
    with pytest.raises(KeyboardInterrupt):
        experiment2.main(argv)
    assert sorted(os.listdir(out)) == ["log.txt", "mine.png"]
    assert (out / "log.txt").read_text().startswith("an earlier run")


def test_a_stop_while_an_experiment_trains_its_runs_names_what_to_do(tmp_path, monkeypatch):
    """gating, shared, transfer: the loop's stop line said 'continue with --resume', which these
    experiments do not take."""
    import azjax
    from azjax.interrupt import Interrupted
    from experiments import common

    def stopped(config, workdir, progress):
        raise Interrupted(2, "checkpoint 4 saved; continue with --resume")

    monkeypatch.setattr(azjax, "train_and_evaluate", stopped)
    configs = {"single": azjax.load_config("tictactoe", {})}
    with pytest.raises(Interrupted) as info:
        common.train_runs(configs, str(tmp_path), lambda text: None, progress=False)
    assert info.value.message == (
        "single stopped (checkpoint 4 saved); run again with another --out (the experiment "
        "trains its runs afresh)"
    )


def test_experiment1_toy_run(tmp_path):
    from experiments import experiment1

    workdir, out = str(tmp_path / "run"), str(tmp_path / "out")
    code = experiment1.main(
        [
            "--game=hex",
            f"--workdir={workdir}",
            f"--out={out}",
            "--minutes=0",
            "--eval_games=4",
            "--final_games=4",
            "--final_simulations=4",
            "--mcts_simulations=4,8",
            "--no_progress",
            "--size=3",
            "--iterations=2",
            "--checkpoint_interval=1",
            "--batch_games=8",
            "--num_simulations=4",
            "--num_filters=4",
            "--value_hidden=4",
            "--num_blocks=1",
            "--train_batch_size=16",
            "--train_steps=2",
            "--replay_games=20",
        ]
    )
    assert code == 0
    results = json.load(open(os.path.join(out, "results.json")))
    assert [r["iteration"] for r in results["curve"]] == [1, 2]
    assert results["curve"][1]["training_games"] == results["training"]["games"]
    assert [f["mcts_simulations"] for f in results["final"]] == [4, 8]
    assert all(f["games"] == 4 for f in results["final"])
    assert os.path.getsize(os.path.join(out, "learning_curve.png")) > 1000


@pytest.mark.parametrize("plies", [0, 2])
def test_the_checkpoint_curve_plays_the_runs_openings(tiny_run, monkeypatch, plies):
    """experiment1's curve and the gating experiment play their matches as the training loop
    does: from paired random openings where the run's eval_opening_plies asks for them."""
    import dataclasses

    from experiments import experiment1
    from experiments import gating as gating_experiment

    calls = []

    def matches(config, games):
        def match(*args):
            calls.append(args[3] if len(args) == 4 else None)
            return np.ones(games), np.arange(games) % 2 == 0

        return match, match

    def with_plies(load):
        def load_with(*args, **kwargs):
            config, *rest = load(*args, **kwargs)
            return dataclasses.replace(config, eval_opening_plies=plies), *rest

        return load_with

    monkeypatch.setattr(experiment1, "evaluation_matches", matches)
    monkeypatch.setattr(experiment1, "restore_variables", with_plies(experiment1.restore_variables))
    rows = experiment1.evaluate_checkpoints(tiny_run, 4, log=lambda *_: None)
    assert [r["vs_mcts"]["wins"] for r in rows] == [4, 4]
    monkeypatch.setattr(gating_experiment, "evaluation_matches", matches)
    read = gating_experiment.read_config
    monkeypatch.setattr(
        gating_experiment,
        "read_config",
        lambda *a: dataclasses.replace(read(*a), eval_opening_plies=plies),
    )
    gating_experiment.evaluate_run(tiny_run, 4, 0, log=lambda *_: None)
    assert len(calls) == 6  # two matches a checkpoint, then one
    for starts in calls:
        if plies:
            legal = jax.vmap(games.make("tictactoe").legal_mask)(starts)
            moves = 9 - np.sum(np.asarray(legal), axis=-1)
            assert np.all(moves == plies)  # the openings' boards, paired
        else:
            assert starts is None


# ---- experiments 2 and 3 on a 2-iteration Tic-Tac-Toe run ----------------------------------------
def test_experiment2_round_robin_per_lambda(tiny_run, tmp_path):
    from experiments import experiment2

    out = str(tmp_path / "e2")
    assert (
        experiment2.main(
            [
                f"--workdir={tiny_run}",
                f"--out={out}",
                "--probs=0,1",
                "--lambdas=0.5,0.25",
                "--games=2",
                "--sims=2",
            ]
        )
        == 0
    )
    results = json.load(open(os.path.join(out, "results.json")))
    assert [r["lambda"] for r in results["rounds"]] == [0.5, 0.25]
    for r in results["rounds"]:
        assert r["agents"] == ["p_r=0", "p_r=1"]
        assert r["specs"][0].endswith("rollout=none,p_r=0")
        assert r["specs"][1].endswith(f"rollout=random,p_r=1.0,lambda={r['lambda']}")
        (_, ab), (ba, _) = r["win_ratio"]
        assert ab + ba == pytest.approx(1.0)  # one match of two games, seen from both sides
        pooled = {p["agent"]: p for p in r["pooled"]}
        assert pooled["p_r=0"]["score"] == pytest.approx(ab)
        assert pooled["p_r=0"]["wins"] == pooled["p_r=1"]["losses"]
        assert sum(pooled["p_r=0"][k] for k in ("wins", "draws", "losses")) == 2
    for name in ("win_ratio_lambda0.5.png", "win_ratio_lambda0.25.png", "rollout_probability.png"):
        assert os.path.getsize(os.path.join(out, name)) > 1000


def test_experiment3_equal_time_configurations(tiny_run, tmp_path, monkeypatch):
    from azjax.eval import calibration
    from experiments import experiment3

    # A budget below one simulation: calibration settles on 1 simulation after two compiles.
    monkeypatch.setattr(calibration, "PROBE_SIMULATIONS", (1, 3))
    out = str(tmp_path / "e3")
    assert (
        experiment3.main(
            [
                f"--workdir={tiny_run}",
                f"--out={out}",
                "--games=2",
                "--seconds=0.000001",
                "--configs=evaluator,no_rollouts",
            ]
        )
        == 0
    )
    results = json.load(open(os.path.join(out, "results.json")))
    assert list(results["configs"]) == ["evaluator", "no_rollouts"]
    evaluator, baseline = results["configs"]["evaluator"], results["configs"]["no_rollouts"]
    assert "rollout=policy" in evaluator["agents"][0] and "rollout=random" in evaluator["agents"][1]
    for record in (evaluator, baseline):
        overall = record["result"]["overall"]
        assert overall["wins"] + overall["draws"] + overall["losses"] == 2
        b = record["per_move"]["B"]  # random rollouts on every leaf and the root
        assert b["budget"] == 0.000001 and b["rollouts"] == b["simulations"] + 1
    assert baseline["per_move"]["A"]["rollouts"] == 0.0


@pytest.mark.parametrize(
    "module, argv, message",
    [
        ("experiment2", ["--probs=0,1.5"], "every value must be in [0, 1]"),
        ("experiment2", ["--games=3"], "--games must be even"),
        ("experiment3", ["--configs=evaluator,bogus"], "accepted: evaluator, rollouts_only"),
        ("experiment3", ["--seconds=0"], "--seconds must be positive"),
        ("tictactoe", ["--eval_only", "--games=0"], "--games must be at least 1, got 0"),
        # checked before Experiment 1's 22 minutes of training, not after them
        ("experiment1", ["--mcts_simulations=abc"], "--mcts_simulations: expected comma-sep"),
        ("experiment1", ["--final_games=2,2,2"], "--final_games: one even number, or one per"),
        ("experiment1", ["--final_games=-2"], "--final_games: every value must be at least 2"),
        ("recipes", ["--seeds=a"], "--seeds: expected comma-separated integers, got 'a'"),
        ("exit_datasets", ["--anchors=-5"], "--anchors: every value must be at least 1"),
        ("exit_expert", ["--workdir=x", "--prior_weight=-1"], "--prior_weight must be >= 0"),
        ("final_move", ["ckpt:x", "--seed=-1"], "--seed: must be in [0, 4294967295], got -1"),
        ("recipes", ["--seed=x"], "--seed: expected a whole number, got 'x'"),
        ("decided", ["x", "--batch=0"], "--batch must be at least 1, got 0"),
        ("decided", ["x", "--rounds=-2"], "--rounds must be at least 1, got -2"),
        ("openings_curve", ["--workdir=x", "--opponent=random", "--every=0"], "--every must"),
        ("openings_curve", ["--workdir=x", "--opponent=random", "--empty_games=3"], "got 3"),
        ("shared", ["--eps=2"], "--eps (the share of random moves) must be in [0, 1], got 2.0"),
        ("exit_datasets", ["--size=0"], "--size must be at least 2, got 0"),
        ("exit_datasets", ["--out="], "--out: an empty path"),
        ("exit_datasets", ["--out=/etc/passwd"], "--out '/etc/passwd' is a file"),
        ("exit_targets", ["--out=/etc/passwd"], "--out '/etc/passwd' is a file"),
        ("recipes", ["--game=tictactoe", "--out=/etc/passwd"], "--out '/etc/passwd' is a file"),
        ("experiment1", ["--out=/etc/passwd"], "--out '/etc/passwd' is a file"),
        ("experiment2", ["--game=chess"], "--game: unknown game 'chess'; known games: "),
        ("experiment3", ["--game=chess"], "--game: unknown game 'chess'; known games: "),
        ("lost_games", ["x.json", "--from_ply=-1"], "--from_ply must be >= 0, got -1"),
        ("pgx_recipe", ["train", "--out=/etc/passwd"], "--out '/etc/passwd' is a file"),
        ("pgx_recipe", ["train", "--out=x", "--lr=inf"], "--lr must be positive and finite"),
        ("tictactoe", ["--figure_games=-1"], "--figure_games must be at least 1, got -1"),
        ("gating", ["--eval_seed=-1"], "--eval_seed: must be in [0, 4294967295], got -1"),
        ("gating", ["--minutes=nan"], "--minutes must be >= 0 (0: no limit), got nan"),
        ("gating", ["--out=/etc/passwd"], "--out '/etc/passwd' is a file, not a folder"),
        ("openings_curve", ["--workdir=x", "--opponent=random", "--out=/etc/passwd"], "a file"),
        ("experiment3", ["--configs=evaluator,evaluator"], "evaluator given twice; give each"),
        ("experiment2", ["--workdir="], "--workdir: an empty path"),
        ("experiment3", ["--workdir="], "--workdir: an empty path"),
        ("experiment1", ["--game=tictactoe", "--full"], "--full: no thesis settings for tictac"),
        (
            "experiment1",
            ["--search=gumbel", "--tree_reuse"],
            "tree_reuse needs algorithm=alphazero, search=puct",
        ),
        ("experiment1", ["--eval_only", "--num_simulations=8"], "drop --num_simulations"),
    ],
)
def test_experiment_flags_are_checked(module, argv, message, capsys, tmp_path, monkeypatch):
    import importlib

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(f"experiments.{module}").main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert os.listdir(tmp_path) == []  # refused before any folder is made


def test_the_tictactoe_experiment_refuses_another_games_run():
    from experiments import tictactoe

    with pytest.raises(ValueError, match="holds a hex run, not Tic-Tac-Toe"):
        tictactoe.main(["--workdir=pretrained/hex6", "--eval_only", "--games=2"])


def test_experiments_without_a_run_folder_say_so(tmp_path, capsys):
    from experiments import experiment2, experiment3

    assert experiment2.main([f"--workdir={tmp_path}/none"]) == 2
    assert experiment3.main([f"--workdir={tmp_path}/none"]) == 2
    assert "run experiments.experiment1 first" in capsys.readouterr().err


def test_openings_curve_against_perfect_play(tiny_run, tmp_path, capsys):
    from experiments import openings_curve

    out = tmp_path / "oc"
    assert (
        openings_curve.main(
            [
                f"--workdir={tiny_run}",
                "--opponent=perfect",
                "--sims=4",
                "--empty_games=2",
                f"--out={out}",
            ]
        )
        == 0
    )
    results = json.loads((out / "results.json").read_text())
    assert [r["step"] for r in results["curve"]] == [1, 2]
    assert results["games_per_checkpoint"] == 18  # 9 first moves, both colours
    for row in results["curve"]:  # perfect play never loses a drawn opening: A never wins
        assert row["wins"] == 0 and row["wins"] + row["draws"] + row["losses"] == 18
        assert row["won_sides"]["decisive_openings"] == 0
    assert (
        results["empty_board"]["wins"]
        + results["empty_board"]["draws"]
        + results["empty_board"]["losses"]
        == 2
    )
    assert (out / "curve.png").exists()
    assert "checkpoint 2: 0-" in capsys.readouterr().out


def test_openings_curve_refuses_bad_input(tmp_path, capsys):
    from experiments import openings_curve

    assert openings_curve.main([f"--workdir={tmp_path}/none", "--opponent=random"]) == 2
    assert "no run folder" in capsys.readouterr().err


# ---- seed 001: Connect Four (Table 5.5) and the Tic-Tac-Toe figures -----------------------------
def test_connect_four_trains_with_a_named_config_under_flags():
    from experiments import connect_four

    args, overrides = connect_four.parse(
        ["--config=connect_four_thesis", "--minutes=5", "--num_simulations=8", "--rows=5"]
    )
    config = connect_four.training_config(args, overrides)
    assert (config.game, config.num_simulations, config.num_filters) == ("connect_four", 8, 128)
    assert (config.time_budget, config.sample_moves, config.game_options["rows"]) == (5, 30, 5)
    args, overrides = connect_four.parse([])  # the fast default, no time limit
    config = connect_four.training_config(args, overrides)
    assert config.num_filters == 64 and config.time_budget == 0
    args, overrides = connect_four.parse(["--config=cpu"])  # a recipe for any game: its C4 one
    config = connect_four.training_config(args, overrides)
    assert (config.game, config.policy_head_kernel) == ("connect_four", 1)


def test_connect_four_toy_run_trains_and_plays_every_opponent(tmp_path, capsys):
    """Trains a 1-iteration 4x4 connect-3 run through the experiment, then plays Minimax."""
    from experiments import connect_four

    run, out = str(tmp_path / "c4run"), str(tmp_path / "c4out")
    tiny = "--num_blocks=1 --num_filters=4 --value_hidden=4 --batch_games=4 --num_simulations=2"
    tiny += " --train_steps=1 --train_batch_size=8 --replay_games=20 --iterations=1"
    tiny += " --checkpoint_interval=1 --eval_interval=0 --rows=4 --cols=4 --connect=3"
    argv = [f"--workdir={run}", f"--out={out}", "--sims=2", "--games=1", "--no_progress"]
    assert connect_four.main(argv + tiny.split() + ["--minimax_depths=1,2", "--mcts_sims="]) == 0
    results = json.load(open(os.path.join(out, "results.json")))
    assert results["game"] == "connect_four" and results["checkpoint"] == 1
    assert results["game_options"] == dict(rows=4, cols=4, connect=3)
    assert results["agent"] == f"ckpt:{run},sims=2,decisive=0"
    assert results["training"]["workdir"] == run and results["training"]["games"] > 0
    specs = [m["opponent"] for m in results["matches"]]
    assert specs == [
        "minimax:depth=1,heuristic=lines2,seed=0",
        "minimax:depth=2,heuristic=lines2,seed=0",
    ]  # no MCTS opponents: --mcts_sims is empty (MCTS specs: test_connect_four_thesis_table)
    for m in results["matches"]:
        assert sum(m["first"].values()) == 1 and sum(m["second"].values()) == 1
        assert m["thesis"] is None  # seed 001's numbers are for 6x7 Connect Four only
    assert "minimax:depth=2,heuristic=lines2,seed=0" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--heuristic=lines9"], "invalid choice: 'lines9'"),
        (["--games=0"], "--games must be at least 1, got 0"),
        (["--minutes=-1"], "--minutes must be at least 0 (0: no limit), got -1.0"),
        (["--mcts_sims=400,x"], "--mcts_sims: expected comma-separated integers"),
        (["--config=hex"], "--config=hex is a hex config, not Connect 4"),
        (["--config=nope"], "unknown config 'nope'; available: connect_four, connect_four_thesis"),
        ([f"--out={__file__}"], "is a file, not a folder"),  # refused before the training
    ],
)
def test_connect_four_flags_are_checked(argv, message, capsys):
    from experiments import connect_four

    with pytest.raises(SystemExit) as exit_info:
        connect_four.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_connect_four_refuses_another_games_run(tiny_run, capsys):
    from experiments import connect_four

    assert connect_four.main([f"--run={tiny_run}", "--games=2"]) == 2
    assert "holds a tictactoe run; Table 5.5 is Connect Four's" in capsys.readouterr().err


def test_connect_four_thesis_table():
    from experiments import connect_four

    # Every match of Table 5.5 is 50 games; draws are what the wins and losses leave.
    for first, second in connect_four.THESIS.values():
        assert sum(first) <= 50 and sum(second) <= 50
    assert [s for _, _, s in connect_four.opponents([5], [400], "lines2", 0)] == [
        "minimax:depth=5,heuristic=lines2,seed=0",
        "mcts:sims=400",
    ]


def test_tictactoe_figures_of_seed_001(tiny_run, tmp_path, capsys):
    from experiments import tictactoe

    results = tictactoe.figures(tiny_run, games=2, mcts_sims=[2], curve_sims=2, compare_sims=[2])
    assert [r["sims"] for r in results["5.1b"]] == [2]
    assert results["5.1b"][0]["spec"] == "mcts:sims=2,c_uct=1.5"  # Figure 5.1b's C
    assert results["5.4a"]["mcts"]["spec"] == "mcts:sims=2"  # Figure 5.4's, sqrt(2)
    assert [r["step"] for r in results["5.4a"]["checkpoints"]] == [1, 2]
    assert results["5.4b"][0]["network"]["spec"] == f"ckpt:{tiny_run}@2,sims=2,decisive=0"
    assert results["5.4b"][0]["mcts"] == results["5.4a"]["mcts"]  # the same point, played once
    for row in [*results["5.1b"], *results["5.4a"]["checkpoints"]]:
        assert row["wins"] == 0 and row["draws"] + row["losses"] == 2  # perfect play never loses
    tictactoe.print_figures(results)
    assert "5.4b      2 sims: network" in capsys.readouterr().out
    tictactoe.plot_figures(results, str(tmp_path / "figures.png"))
    assert os.path.getsize(tmp_path / "figures.png") > 1000
    args, _ = tictactoe.parse(["--figures", "--mcts_sims=100,1200", "--compare_sims=1"])
    assert args.figures and args.mcts_sims == [100, 1200] and args.compare_sims == [1]
    with pytest.raises(SystemExit):
        tictactoe.parse(["--mcts_sims=1.5"])
    assert "--mcts_sims: simulations must be whole numbers" in capsys.readouterr().err


def test_shared_learning_against_single_game_runs(tmp_path, capsys):
    """experiments.shared at toy size: a shared Tic-Tac-Toe + 4x5 Connect Four run and a run of
    each game alone with its settings, then Figure 5 per game (1 checkpoint each: a 1 x 1 table)."""
    from experiments import shared

    out = str(tmp_path / "out")
    toy = "--batch_games=8 --num_simulations=4 --num_filters=8 --value_hidden=8 --num_blocks=1 "
    toy += "--train_batch_size=16 --train_steps=2 --replay_games=20 --iterations=1"
    argv = ["--games=tictactoe,connect_four:rows=4,cols=5", f"--out={out}", "--pair_games=2"]
    assert shared.main([*argv, "--sims=2", "--errors_sims=4", "--no_progress", *toy.split()]) == 0
    with open(os.path.join(out, "results.json")) as f:
        results = json.load(f)
    assert set(results["configs"]) == {"shared", "tictactoe", "connect_four"}
    c4 = results["configs"]["connect_four"]
    assert (c4["game_options"], c4["games"], c4["num_filters"]) == ({"cols": 5, "rows": 4}, "", 8)
    for name in ("tictactoe", "connect_four"):
        t = results["tables"][name]
        assert (t["rows"], t["columns"]) == ([1], [1]) and 0 <= t["score"][0][0] <= 100
    assert results["training"]["shared"]["shared_games"] == "tictactoe,connect_four:rows=4,cols=5"
    # Tic-Tac-Toe's solved positions: both final networks' exact error rates, paired; 4x5 Connect
    # Four has no set
    errors = results["errors"]["tictactoe"]["agents"]
    assert set(errors) == {"shared", "tictactoe"} and errors["shared"]["positions"] == 573
    assert all(0 <= e["rate"] <= 1 for e in errors.values())
    assert "z" in errors["tictactoe"]["against_first"] and results["errors"]["connect_four"] is None
    assert os.path.exists(os.path.join(out, "errors-tictactoe", "errors.json"))
    # --eval_only records the runs as they were trained, not as the flags given now would train
    # them (the CPU recipe's 32 filters and 30 iterations), and keeps their summaries
    assert shared.main([*argv, "--sims=2", "--errors_sims=0", "--eval_only"]) == 0
    with open(os.path.join(out, "results.json")) as f:
        again = json.load(f)
    assert again["configs"] == results["configs"]
    assert again["training"]["shared"]["games"] == results["training"]["shared"]["games"]
    # training again into the same --out: one line before any training, not train.py's --resume
    with pytest.raises(ValueError, match="holds this experiment's runs already .*--eval_only"):
        shared.main([*argv, "--no_progress", *toy.split()])  # cli.script: one line, exit 2
    with pytest.raises(SystemExit):
        shared.main(["--games=tictactoe,tictactoe"])
    assert "tictactoe is given twice" in capsys.readouterr().err


@pytest.mark.parametrize(
    "module, argv",
    [
        ("decided", ["{tmp}/none"]),
        ("final_move", ["bogus"]),
        ("lost_games", ["{tmp}/none"]),
        ("pgx_recipe", ["errors", "{tmp}/none"]),
        ("solved_positions", ["--game=tictactoe", "--empties=9:2"]),
    ],
)
def test_experiments_name_their_errors_as_their_parsers_do(module, argv, tmp_path, capsys):
    """`python -m experiments.NAME: error: ...`, as argparse's errors and the other experiments'
    are named, not `NAME: ...`."""
    import importlib

    main = importlib.import_module(f"experiments.{module}").main
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m experiments.{module}: error: ") and err.count("\n") == 1


def test_lists_of_values_are_refused_where_a_value_repeats(capsys):
    """experiment2 --probs=0,0 made two agents named p_r=0 and merged their games in its
    tables; recipes --seeds=0,0 said two seeds and ran one."""
    from experiments import experiment2, recipes
    from experiments.common import parse_floats, parse_ints

    with pytest.raises(ValueError, match=r"--probs: 0 given twice in '0,0.5,0'"):
        parse_floats("--probs", "0,0.5,0", 0.0, 1.0)
    with pytest.raises(ValueError, match="--seeds: 1 given twice"):
        parse_ints("--seeds", "1,1", 0)
    assert parse_ints("--final_games", "10,10", 2, distinct=False) == [10, 10]  # counts
    for main, argv in (
        (experiment2.main, ["--workdir=none", "--probs=0,0"]),
        (recipes.main, ["--game=tictactoe", "--seeds=0,0"]),
    ):
        with pytest.raises(SystemExit) as stop:  # argparse's one line
            main(argv)
        assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--probs: 0 given twice" in err and "--seeds: 0 given twice" in err
