"""Shared learning (seed 004 section 3.6; azjax/shared.py, --games): one trunk, an input block
and heads per game, at toy size (Tic-Tac-Toe and 4x5 Connect Four, 1 block of 8 filters)."""

import dataclasses
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import readme_metrics

import games
from azjax import gating, load_config, loop, parallel, shared, training
from azjax.arena import MatchResult
from azjax.checkpoint import RunState, load_checkpoint
from azjax.commands import train
from azjax.config import validate
from azjax.eval.agent import random_agent
from azjax.eval.match import play_games
from azjax.eval.specs import checkpoint_config, parse_agent
from azjax.loop import train_and_evaluate
from azjax.memory import memory_estimate
from azjax.network import init_variables, make_network
from azjax.play_stats import HeldOut, PlayStats
from azjax.replay import Batch

GAMES = "tictactoe,connect_four:rows=4,cols=5"
TOY = dict(
    games=GAMES,
    num_blocks=1,
    num_filters=8,
    value_hidden=8,
    search="puct",
    num_simulations=4,
    batch_games=8,
    train_batch_size=16,
    train_steps=2,
    replay_games=20,
    iterations=2,
    checkpoint_interval=2,
    eval_interval=0,
    gating=0.55,
    gating_games=4,
    gating_interval=2,
)


def equal(a, b) -> bool:
    """Whether two trees hold the same arrays, bit for bit."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(
        x.shape == y.shape and np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb)
    )


@pytest.fixture(scope="module")
def config():
    return load_config("tictactoe", TOY)


@pytest.fixture(scope="module")
def run0(config):
    return jax.jit(lambda: shared.init_run(config))()


# ---- the list of games and the config ------------------------------------------------------------
def test_games_parse_with_their_options():
    assert shared.parse_games(" connect_four:rows=4,cols=5 , othello:size=6") == (
        ("connect_four", {"rows": 4, "cols": 5}),
        ("othello", {"size": 6}),
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("tictactoe,chess", "unknown game 'chess'"),
        ("tictactoe,othello,tictactoe", "tictactoe is given twice"),
        ("othello", "give two games or more"),
        ("tictactoe,othello:rows=4", "'rows' is not an option of othello"),
        ("size=4,othello", "must start with a game name"),
        (["tictactoe", "othello"], "games must be a str"),  # a config file's JSON list
    ],
)
def test_bad_lists_of_games_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        shared.parse_games(text)


def test_the_run_game_is_the_first_and_each_game_its_own_options(config):
    assert (config.game, dict(config.game_options)) == ("tictactoe", {})
    per_game = shared.game_configs(config)
    assert list(per_game) == ["tictactoe", "connect_four"]
    assert per_game["connect_four"].make_game() == games.make("connect_four", rows=4, cols=5)
    assert all(c.games == "" and c.num_filters == 8 for c in per_game.values())
    with pytest.raises(ValueError, match="game must be the first"):
        validate(dataclasses.replace(config, game="connect_four"))
    with pytest.raises(ValueError, match="give them in the list"):
        load_config("connect_four", {**TOY, "games": "connect_four,tictactoe", "rows": 5})


def test_each_game_of_the_list_takes_the_in_loop_openings():
    # checked against the first game only, 9-ply openings filled Tic-Tac-Toe's board after 4x4
    # Hex's: every evaluation of it scored 0.5, each pair of games decided before a move
    with pytest.raises(ValueError, match="under tictactoe's longest length \\(9 plies\\), got 9"):
        load_config("hex", {**TOY, "games": "hex:size=4,tictactoe", "eval_opening_plies": 9})
    with pytest.raises(ValueError, match="players alternate .*; hex has it"):
        load_config(
            "tictactoe", {**TOY, "games": "tictactoe,hex:size=3,swap=true", "eval_opening_plies": 2}
        )
    fine = {**TOY, "games": "hex:size=4,tictactoe", "eval_opening_plies": 8}
    assert load_config("hex", fine).eval_opening_plies == 8


def test_default_options_go_under_the_list_s_own():
    text = shared.with_default_options(
        "othello:size=6,connect_four",
        {"othello": {"size": 8, "mobility": True}, "connect_four": {"rows": 5}},
    )
    assert shared.parse_games(text) == (
        ("othello", {"size": 6, "mobility": True}),
        ("connect_four", {"rows": 5}),
    )


def test_a_config_s_game_options_go_into_the_list():
    """`--config=cpu` gives Othello the mobility planes of its CPU recipe wherever it stands in
    the list, under the list's own options; before, a list starting with Othello was refused (the
    recipe's option looked given on the command line) and one ending with it went without."""
    from experiments.shared import make_configs

    first, _ = train.parse(
        ["--games=othello:size=6,connect_four", "--config=cpu", "--ownership_weight=0"]
    )
    assert first.games == "othello:mobility=true,size=6,connect_four"
    assert dict(first.game_options) == {"mobility": True, "size": 6}
    last, _ = train.parse(["--games=connect_four,othello:size=6,mobility=false", "--config=cpu"])
    assert last.policy_head_kernel == 1  # the first game's recipe: Connect Four's
    assert shared.game_configs(last)["othello"].make_game() == games.make(
        "othello", size=6, mobility=False
    )
    for order in ("othello:size=6,connect_four", "connect_four,othello:size=6"):
        othello = make_configs(order, {})["othello"]  # python -m experiments.shared
        assert othello.make_game() == games.make("othello", size=6, mobility=True)


def test_a_shared_run_whose_first_game_has_options_resumes(tmp_path):
    """A resumed run's list holds every game's options; the first game's, also in its saved
    game_options, no longer count as given beside --games."""
    saved, _ = train.parse(["--games=othello:size=4,tictactoe", "--num_filters=8"])
    (tmp_path / "config.json").write_text(saved.to_json())
    resumed, _ = train.parse([f"--workdir={tmp_path}", "--resume"])
    assert (resumed.games, dict(resumed.game_options)) == (saved.games, {"size": 4})
    assert resumed.num_filters == 8


def test_a_shared_run_resumes_with_its_list_given_again(tmp_path, capsys):
    """The list a run started with, given again with --resume (its config's options left out,
    written with spaces), continues it; a list in another order says what the run holds."""
    from azjax.checkpoint import check_resumable

    saved, _ = train.parse(["--games=tictactoe,othello:size=4", "--config=cpu"])
    assert saved.games == "tictactoe,othello:mobility=true,size=4"  # the CPU recipe's planes
    (tmp_path / "config.json").write_text(saved.to_json())
    for given in ("tictactoe,othello:size=4", "tictactoe, othello:size=4,mobility=true"):
        resumed, _ = train.parse([f"--workdir={tmp_path}", "--resume", f"--games={given}"])
        assert resumed.games == saved.games
        check_resumable(saved, resumed)
    argv = [f"--workdir={tmp_path}", "--resume", "--games=othello:size=4,tictactoe"]
    assert train.main(argv) == 2
    err = capsys.readouterr().err
    assert f"but {tmp_path} holds a run of tictactoe,othello:mobility=true,size=4" in err


# ---- the network ---------------------------------------------------------------------------------
def test_each_game_sees_a_single_game_network_around_one_trunk(config, run0):
    variables = run0.train.variables
    assert sorted(variables["params"]) == ["connect_four", "tictactoe", "trunk"]
    assert list(variables["params"]["trunk"]) == ["ResidualBlock_0"]
    for name, c in shared.game_configs(config).items():
        game = c.make_game()
        alone = jax.eval_shape(
            lambda g=game, c=c: init_variables(make_network(c, g), g, jax.random.PRNGKey(0))
        )
        mine = shared.view(variables, name)
        assert jax.tree_util.tree_structure(mine) == jax.tree_util.tree_structure(alone)
        assert [x.shape for x in jax.tree_util.tree_leaves(mine)] == [
            x.shape for x in jax.tree_util.tree_leaves(alone)
        ]
        assert equal(shared.merge(variables, name, mine), variables)
    # each game's input block and heads are its own, initialised apart
    ttt, c4 = (variables["params"][n]["ConvBlock_0"] for n in ("tictactoe", "connect_four"))
    assert not equal(ttt, c4)


def test_each_game_s_keys_are_apart_from_the_run_s_iterations(run0):
    """A game's key was fold_in(run key, its index), the base of the run's iteration of that
    number: connect_four's (index 1) iteration-2 keys were the shared in-loop evaluation's keys
    after iteration 1."""
    bases = {tuple(np.asarray(jax.random.fold_in(run0.key, it))) for it in range(64)}
    for index, name in enumerate(("tictactoe", "connect_four")):
        key = shared.view_run(run0, name, index).key
        assert tuple(np.asarray(key)) not in bases
        assert not equal(key, shared.view_run(run0, name, 1 - index).key)


def test_one_step_on_one_game_moves_the_trunk_and_that_game_only(config, run0):
    """A step from Connect Four's batch changes what Tic-Tac-Toe's apply computes (the trunk is
    shared) and leaves Tic-Tac-Toe's input block, heads, batch statistics and optimizer state
    bit for bit as they were."""
    c4_config = shared.game_configs(config)["connect_four"]
    c4 = c4_config.make_game()
    ttt = shared.game_configs(config)["tictactoe"].make_game()
    net = make_network(c4_config, c4)
    step = jax.jit(
        training.make_train_step(net, training.make_optimizer(c4_config), c4_config.weight_decay)
    )
    key = jax.random.PRNGKey(1)
    obs = jax.random.bernoulli(key, 0.3, (16, *c4.observation_shape)).astype(jnp.float32)
    batch = Batch(obs, jnp.full((16, c4.num_actions), 1 / c4.num_actions), jnp.ones(16))
    before = run0.train
    trained, _ = step(shared.view_run(run0, "connect_four", 1).train, batch)
    after = shared.merge_train(before, "connect_four", trained)

    for c in ("params", "batch_stats"):
        assert equal(after.variables[c]["tictactoe"], before.variables[c]["tictactoe"])
        assert not equal(after.variables[c]["trunk"], before.variables[c]["trunk"])
        assert not equal(after.variables[c]["connect_four"], before.variables[c]["connect_four"])
    assert equal(after.opt_state["tictactoe"], before.opt_state["tictactoe"])
    assert int(after.step) == int(before.step) + 1

    apply = make_network(shared.game_configs(config)["tictactoe"], ttt).apply
    ttt_obs = jax.vmap(ttt.observe)(jax.vmap(lambda _: ttt.init())(jnp.arange(2)))
    old = apply(shared.view(before.variables, "tictactoe"), ttt_obs)
    new = apply(shared.view(after.variables, "tictactoe"), ttt_obs)
    assert not np.allclose(old[0], new[0]) and not np.allclose(old[1], new[1])


def test_the_update_order_is_a_random_permutation_per_iteration():
    orders = {tuple(shared.update_order(0, it, 2)) for it in range(1, 20)}
    assert orders == {(0, 1), (1, 0)}
    assert shared.update_order(3, 7, 3) == shared.update_order(3, 7, 3)  # again on resume


# ---- the gate's per-game floor -------------------------------------------------------------------
def _stub(by_game: dict[str, list[float]]):
    def match(candidate, best, key):
        return {
            g: (np.asarray(r, np.float32), np.arange(len(r)) < len(r) // 2)
            for g, r in by_game.items()
        }

    return match


def _fake_run():
    tree = {"params": {"w": jnp.zeros(3)}}

    @dataclasses.dataclass(frozen=True)
    class Train:
        variables: dict

    cand = {"params": {"w": jnp.ones(3)}}
    return RunState(
        train=Train(cand),
        iteration=jnp.int32(5),
        key=jax.random.PRNGKey(0),
        gate=gating.init_gate(tree),
    )


def test_the_gate_keeps_the_best_when_one_game_scores_48_percent_or_less(config):
    """Seed 004: above 55% overall and above 48% in each game. 50 games each: Tic-Tac-Toe
    won 50 of 50, Connect Four 24 of 50 (48%): 74% overall, still rejected; 25 of 50 passes."""
    at_floor = {"tictactoe": [1.0] * 50, "connect_four": [1.0] * 24 + [-1.0] * 26}
    run, values = gating.make_gate(config, match=_stub(at_floor))(_fake_run(), 5)
    assert values["gate/score"] == pytest.approx(0.74)
    assert values["gate/connect_four/score"] == pytest.approx(0.48)
    assert values["gate/tictactoe/wdl"] == [50, 0, 0]
    assert values["gate/accepted"] == 0
    np.testing.assert_array_equal(run.gate.best["params"]["w"], 0.0)

    above = {"tictactoe": [1.0] * 50, "connect_four": [1.0] * 25 + [-1.0] * 25}
    run, values = gating.make_gate(config, match=_stub(above))(_fake_run(), 5)
    assert values["gate/accepted"] == 1
    np.testing.assert_array_equal(run.gate.best["params"]["w"], 1.0)
    assert not gating.accepts(0.5, 0.55, [0.9, 0.9])  # the threshold still holds overall


# ---- a run, its checkpoint, and the command line -------------------------------------------------
@pytest.fixture(scope="module")
def shared_run(config, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("shared") / "run")
    summary = train_and_evaluate(config, workdir, progress=False)
    return workdir, summary


def test_a_shared_run_trains_every_game_and_gates_them(shared_run, run0):
    workdir, summary = shared_run
    assert summary["shared_games"] == GAMES and summary["iterations"] == 2
    rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    last = rows[-1]
    for name in ("tictactoe", "connect_four"):
        assert np.isfinite(last[f"loss/{name}/total"])
        assert len(last[f"gate/{name}/wdl"]) == 3 and sum(last[f"gate/{name}/wdl"]) == 4
    assert last["loss/total"] == pytest.approx(
        (last["loss/tictactoe/total"] + last["loss/connect_four/total"]) / 2
    )
    _, variables, step = load_checkpoint(workdir)
    assert step == 2
    for part in ("trunk", "tictactoe", "connect_four"):  # every part learned
        assert not equal(variables["params"][part], run0.train.variables["params"][part])


def test_a_shared_run_resumes_with_every_game_s_replay(shared_run, config, tmp_path, capsys):
    workdir = str(tmp_path / "run")
    shutil.copytree(shared_run[0], workdir)
    train_and_evaluate(
        dataclasses.replace(config, iterations=3), workdir, resume=True, progress=False
    )
    assert "replay buffer starts empty" not in capsys.readouterr().err
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    # the fewest settled positions of any game's buffer: the saved ones and the session's
    assert rows[2]["replay_ready"] > rows[1]["replay_ready"] > rows[0]["replay_ready"]
    folder = os.path.join(workdir, "checkpoints")
    assert [s for s in sorted(os.listdir(folder)) if os.path.isdir(f"{folder}/{s}/replay")] == ["3"]


def test_a_shared_run_logs_each_game_s_self_play(shared_run):
    # as loss/<game>/... and eval/<game>/...: the games' self-play, held-out losses and outcome
    # shares each under its own name, the variety summed beside them, no outcome share combined
    workdir, _ = shared_run
    rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    names = ("tictactoe", "connect_four")
    for row in rows:
        for name in names:
            for k in ("distinct_ply2", "distinct_ply4", "positions_ply2", "positions_ply4"):
                assert isinstance(row[f"selfplay/{name}/{k}"], int)
            for k in ("first_player_wins", "draws"):
                assert 0 <= row[f"selfplay/{name}/{k}"] <= 1
            assert f"heldout/{name}/positions" in row
        for k in ("distinct_ply2", "positions_ply4"):
            assert row[f"selfplay/{k}"] == sum(row[f"selfplay/{n}/{k}"] for n in names)
        assert row["heldout/positions"] == sum(row[f"heldout/{n}/positions"] for n in names)
        assert "selfplay/draws" not in row and "selfplay/first_player_wins" not in row


def test_the_readme_names_every_metric_a_shared_run_writes(shared_run):
    rows = [json.loads(line) for line in open(os.path.join(shared_run[0], "metrics.jsonl"))]
    assert not readme_metrics.undocumented(rows, ("tictactoe", "connect_four"))


def test_a_shared_checkpoint_plays_each_of_its_games(shared_run):
    workdir, _ = shared_run
    for name, options in shared.parse_games(GAMES):
        game = games.make(name, **options)
        spec = f"ckpt:{workdir},game={name},sims=2"
        assert checkpoint_config(spec).make_game() == game
        agent = parse_agent(spec, game)
        outcome = play_games(game, agent, random_agent("random", game), 2, jax.random.PRNGKey(0))
        assert isinstance(outcome.result, MatchResult) and outcome.result.games == 2


def test_a_shared_checkpoint_names_its_games_when_asked_for_another(shared_run):
    workdir, _ = shared_run
    hex3 = games.make("hex", size=3)
    with pytest.raises(ValueError, match="did not train hex; it has tictactoe, connect_four"):
        parse_agent(f"ckpt:{workdir},game=hex", hex3)
    with pytest.raises(ValueError, match="give game=NAME: the run trained tictactoe, connect_four"):
        parse_agent(f"ckpt:{workdir}", games.make("tictactoe"))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--games=tictactoe,chess"], "unknown game 'chess'"),
        (["--games=tictactoe,tictactoe"], "tictactoe is given twice"),
        (["--games=tictactoe,hex", "--game=hex"], "give one of them"),
        (["--games=tictactoe,hex:size=3", "--eval_opponent=random"], "games with eval_opponent"),
        (["--games=hex:size=3,tictactoe", "--size=4"], "--size with --games"),
        (["--games=tictactoe,hex", "--size=3"], "--size with --games: give each game's"),
        (["--games=hex:size=3,tictactoe", "--config=tictactoe"], "--games lists hex first but"),
    ],
)
def test_bad_games_flags_are_one_line(argv, message, tmp_path, capsys):
    try:
        code = train.main([*argv, f"--workdir={tmp_path}", "--no_progress"])
    except SystemExit as e:  # argparse's own refusal
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_help_lists_the_games_flag(capsys):
    with pytest.raises(SystemExit):
        train.main(["--games=tictactoe,hex:size=3", "--help"])
    assert "--games" in capsys.readouterr().out


def test_tools_that_do_not_read_a_shared_run_refuse_it_in_one_line(shared_run, tmp_path):
    from azjax import pretrained
    from azjax.eval.curve import run_curve
    from azjax.transfer import resolve

    workdir, _ = shared_run
    with pytest.raises(ValueError, match="is a shared run of tictactoe,connect_four"):
        run_curve(workdir, str(tmp_path), games=2)
    with pytest.raises(ValueError, match="the source is a shared run"):
        resolve(load_config("tictactoe", {**TOY, "games": "", "init_from": workdir}))
    with pytest.raises(ValueError, match="is a shared run .* export takes a run of one game"):
        pretrained.export(workdir, None, "both", to=str(tmp_path / "store"))


def test_the_games_play_statistics_combine():
    def stats(games, ready, surprise=None):
        return PlayStats(
            jnp.int32(games), jnp.int32(ready), jnp.array([4, 1]), jnp.array([4, 2]), surprise
        )

    both = shared._combine([stats(3, 10, jnp.float32(0.2)), stats(5, 7, jnp.float32(0.4))])
    assert (int(both.games), int(both.ready)) == (8, 7)  # the learner waits for the least
    np.testing.assert_array_equal(both.distinct, [8, 2])
    np.testing.assert_array_equal(both.reached, [8, 4])
    assert float(both.surprise) == pytest.approx(0.3)  # the games' mean policy surprise
    assert shared._combine([stats(3, 10), stats(5, 7)]).surprise is None
    # held-out losses: the mean over the games that had such positions, the counts summed
    # none seen yet; and a's sample of the previous chunk's positions had no policy target
    a = HeldOut(*map(jnp.float32, (100, 0, 0.2, 1.0, 9.0, 9.0, 10, 0.3, 0.0, 8, 0, 0)))
    b = HeldOut(*map(jnp.float32, (50, 400, 0.4, 2.0, 0.3, 1.5, 60, 0.35, 1.6, 8, 8, 8)))
    held = shared._combine([stats(3, 10)._replace(heldout=a), stats(5, 7)._replace(heldout=b)])
    expected = [150, 400, 0.3, 1.5, 0.3, 1.5, 70, 0.325, 1.6, 16, 8, 8]
    np.testing.assert_allclose(held.heldout, expected, rtol=1e-6)
    assert shared._combine([stats(3, 10), stats(5, 7)]).heldout is None
    # no outcomes over the games: a draw share over Tic-Tac-Toe and Hex means nothing (per game:
    # test_a_shared_run_logs_each_game_s_self_play)
    won = stats(3, 10)._replace(outcomes=jnp.array([2, 1, 0]))
    assert shared._combine([won, won]).outcomes is None


# ---- the memory pre-check ------------------------------------------------------------------------
def test_a_shared_run_s_memory_estimate_is_every_game_s_whatever_the_order():
    # the games' self-play and training run one game after the other and their buffers are all
    # held at once: the estimate was the first game's alone (Tic-Tac-Toe's trees, 88 MiB, for
    # 8x8 Othello's 626 MiB when it came first), so the list's order changed it
    sizes = dict(
        batch_games=1024,
        num_simulations=64,
        num_blocks=2,
        num_filters=32,
        replay_games=2000,
        train_batch_size=256,
        search="gumbel",
        value_hidden=32,
    )
    mesh = parallel.make_mesh()

    def estimate(games_list):
        config = load_config(games_list.split(":")[0].split(",")[0], dict(sizes, games=games_list))
        parts = memory_estimate(config, shared.make_iteration(config, mesh), 1)
        return {k: part.nbytes for k, part in parts.items()}

    forward = estimate("tictactoe,othello:size=8")
    assert forward == estimate("othello:size=8,tictactoe")
    singles = []
    for name, options in (("tictactoe", {}), ("othello", {"size": 8})):
        config = load_config(name, dict(sizes, **options))
        singles.append(
            {
                k: b
                for k, (b, *_) in memory_estimate(
                    config, loop.make_iteration(config, mesh), 1
                ).items()
            }
        )
        assert set(singles[-1]) == set(forward)
        for part, need in singles[-1].items():
            assert forward[part] >= need, (name, part)
    # the largest game's self-play and training, the sum of the buffers
    for part in ("self-play trajectories", "search trees", "training activations"):
        assert forward[part] == max(s[part] for s in singles)
    assert forward["replay buffer"] == sum(s["replay buffer"] for s in singles)


# ---- @best and summary.json's measures, per game -------------------------------------------------
def _evaluated_run(config, folder, evals: dict[int, dict]) -> str:
    """A shared run's folder as `best_checkpoint` reads it: config.json, checkpoints 1 and 2 (no
    arrays) and metrics.jsonl with `evals` ({iteration: its eval/<game>/... values})."""
    os.makedirs(os.path.join(folder, "checkpoints", "1"))
    os.makedirs(os.path.join(folder, "checkpoints", "2"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(config.to_json())
    with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
        for it in (1, 2):
            f.write(json.dumps({"iteration": it, **evals.get(it, {})}) + "\n")
    return str(folder)


def test_best_of_a_shared_run_ranks_the_game_named(config, tmp_path):
    from azjax.checkpoint import CheckpointError, best_checkpoint, parse_location

    run = _evaluated_run(
        config,
        tmp_path / "run",
        {
            1: {"eval/tictactoe/elo": 500.0, "eval/connect_four/elo": 100.0},
            2: {"eval/tictactoe/elo": 100.0, "eval/connect_four/elo": 300.0},
        },
    )
    assert best_checkpoint(run, game="tictactoe")[:3] == (1, "eval/tictactoe/elo", 500.0)
    assert best_checkpoint(run, "elo", "connect_four")[:3] == (2, "eval/connect_four/elo", 300.0)
    assert parse_location(f"{run}@best:elo", "tictactoe") == (run, 1)
    with pytest.raises(CheckpointError, match=r"in a ckpt: agent \(ckpt:.*@best,game=tictactoe\)"):
        parse_location(f"{run}@best")
    with pytest.raises(CheckpointError, match="did not train hex; it has tictactoe, connect_four"):
        best_checkpoint(run, game="hex")
    with pytest.raises(CheckpointError, match="error_rate.*evaluations of tictactoe log none"):
        best_checkpoint(run, "error_rate", "tictactoe")  # it has an Elo, no error rate
    # never evaluated (eval_interval=0): the advice leaves out curve, which refuses shared runs
    never = _evaluated_run(config, tmp_path / "never", {})
    with pytest.raises(CheckpointError, match=r"--resume --eval_interval=N, or name a step") as e:
        best_checkpoint(never, game="tictactoe")
    assert "evaluate.py curve" not in str(e.value)


def test_a_shared_runs_summary_keeps_trends_and_best_per_game(config, tmp_path):
    from azjax import loop
    from azjax.checkpoint import best_checkpoint

    run = _evaluated_run(
        config,
        tmp_path / "run",
        {1: {"eval/tictactoe/error_rate": 0.2}, 2: {"eval/tictactoe/error_rate": 0.3}},
    )
    rows = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))]
    trends = loop._trends(config, rows)
    assert trends == {
        "tictactoe": {
            "eval/tictactoe/error_rate": dict(
                evaluations=2, first=[1, 0.2], last=[2, 0.3], best=[1, 0.2]
            )
        },
        "connect_four": {},
    }
    best = loop._best(run, config)
    assert best["connect_four"] is None and best["tictactoe"]["step"] == 1
    with pytest.raises(ValueError, match="connect_four/error_rate.*not been evaluated yet"):
        best_checkpoint(run, game="connect_four")
    summary = dict(
        game="tictactoe",
        game_options={},
        shared_games=GAMES,
        iterations=2,
        games=8,
        positions=40,
        wall_seconds=60.0,
        stopped_by="iterations",
        trends=trends,
        best=best,
    )
    message = train.closing_message(summary, run, prog="train.py")
    assert "eval/tictactoe/error_rate 0.200 at 1 -> 0.300 at 2 (lowest 0.200 at 1)" in message
    assert f"is 1, not the last: ckpt:{run}@best,game=tictactoe names it" in message


def test_a_shared_checkpoints_best_plays_with_game(shared_run, tmp_path):
    import shutil

    workdir, _ = shared_run
    run = str(tmp_path / "run")
    shutil.copytree(workdir, run)
    with open(os.path.join(run, "metrics.jsonl"), "a") as f:  # the last row again, evaluated
        f.write(json.dumps({"iteration": 2, "eval/connect_four/elo": 100.0}) + "\n")
    spec = f"ckpt:{run}@best,game=connect_four,sims=2"
    assert checkpoint_config(spec).game == "connect_four"
    assert parse_agent(spec, games.make("connect_four", rows=4, cols=5)).name
    with pytest.raises(ValueError, match="name the game in a ckpt: agent"):
        checkpoint_config(f"ckpt:{run}@best")


def test_best_by_error_rate_with_games_needs_every_games_solved_positions(tmp_path, capsys):
    argv = ["--games=tictactoe,hex:size=3", "--eval_errors", "--best_by=error_rate"]
    code = train.main([*argv, "--eval_interval=1", f"--workdir={tmp_path}", "--no_progress"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "hex has none" in err and len(err.splitlines()) == 1
