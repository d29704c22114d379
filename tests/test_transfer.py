"""Transfer between games (seed 004; azjax/transfer.py, --init_from, --freeze_trunk) and its
experiment at toy size: a Tic-Tac-Toe run (conftest's `tiny_run`) as the source of 4x4 Connect
Four (three in a row) runs, from scratch, transferred and frozen."""

import dataclasses
import json
import os
import shutil

import jax
import numpy as np
import pytest

from azjax import load_config, training
from azjax.checkpoint import CheckpointError, initial_variables, load_checkpoint
from azjax.commands import train
from azjax.network import HEAD_MODULES, is_trunk
from azjax.transfer import _head, resolve, transferred_variables

TOY = dict(
    num_blocks=1,
    num_filters=4,
    value_hidden=4,
    batch_games=8,
    num_simulations=4,
    train_steps=2,
    train_batch_size=16,
    min_replay=8,
    replay_games=20,
    iterations=1,
    checkpoint_interval=1,
    eval_interval=0,
)
C4 = dict(rows=4, cols=4, connect=3)


def flags(values: dict) -> list[str]:
    return [f"--{k}={v}" for k, v in values.items()]


def equal(a, b) -> bool:
    """Whether two trees hold the same arrays, bit for bit."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(
        x.shape == y.shape
        and np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8))
        for x, y in zip(la, lb)
    )


def split(variables) -> tuple[dict, dict]:
    """(trunk, heads): the variables' modules, each {collection: {module: ...}}."""
    parts = ({}, {})
    for c, modules in variables.items():
        for k, v in modules.items():
            parts[0 if is_trunk(k) else 1].setdefault(c, {})[k] = v
    return parts


@pytest.fixture(scope="module")
def source(tiny_run):
    return load_checkpoint(tiny_run, 1)[1]


@pytest.fixture(scope="module")
def c4(tiny_run):
    """(config, its untrained network): 4x4 Connect Four from tiny_run@1 (the experiment's runs
    start from the same network: the same seed and shapes)."""
    config = resolve(load_config("connect_four", {**TOY, **C4, "init_from": f"{tiny_run}@1"}))
    return config, initial_variables(config)


@pytest.fixture(scope="module")
def experiment(tiny_run, tmp_path_factory):
    """experiments.transfer at toy size; its source a copy of tiny_run, deleted afterwards (so
    resuming the transferred run shows that it does not read its source again)."""
    from experiments import transfer

    root = tmp_path_factory.mktemp("transfer")
    copy = str(root / "source")
    shutil.copytree(tiny_run, copy)
    argv = [
        "--game=connect_four",
        *flags(C4),
        f"--source={copy}@1",
        f"--workdir={root}",
        "--sims=2",
        "--games=2",
        "--no_progress",
        *flags(TOY),
    ]
    assert transfer.main(argv) == 0
    shutil.rmtree(copy)
    results = json.loads((root / "results" / "results.json").read_text())
    return root, results, copy


def test_another_game_takes_the_trunk_and_initialises_the_heads(tiny_run, source, c4):
    config, fresh = c4
    assert config.init_from == f"{os.path.abspath(tiny_run)}@1"
    variables, note = transferred_variables(config, fresh)
    assert "loaded the trunk" in note and "heads initialised afresh" in note
    trunk, heads = split(variables)
    assert equal(trunk, split(source)[0])  # the source's trunk, bit for bit
    assert equal(heads, split(fresh)[1])  # the new network's own heads
    # The policy head's conv block has the same shape in both games, but not the source's values.
    assert not equal(variables["params"]["ConvBlock_1"], source["params"]["ConvBlock_1"])
    assert jax.tree_util.tree_structure(variables) == jax.tree_util.tree_structure(fresh)


def test_the_same_game_and_network_load_everything(tiny_run, source, monkeypatch):
    config = resolve(load_config("tictactoe", {**TOY, "init_from": f"{tiny_run}@1"}))
    other = load_checkpoint(tiny_run, 2)[1]  # shaped and placed like the run's own network
    variables, note = transferred_variables(config, other)
    assert "every parameter" in note and equal(variables, source)
    assert resolve(dataclasses.replace(config, init_from=tiny_run)).init_from.endswith("@2")
    # With an ownership head (the CPU recipe's for Hex and Othello) the rest still loads.
    owned = dataclasses.replace(config, ownership_weight=1.5)
    fresh = initial_variables(owned)
    variables, note = transferred_variables(owned, fresh)
    assert "but the ownership head, initialised afresh" in note
    assert equal(variables["params"]["ownership"], fresh["params"]["ownership"])
    rest = {c: {k: v for k, v in m.items() if k != "ownership"} for c, m in variables.items()}
    assert equal(rest, source)
    # ...and from a source with the head to a run without it, the head is left out.
    import azjax.transfer

    monkeypatch.setattr(azjax.transfer, "load_checkpoint", lambda p, s: (owned, variables, 1))
    back, note = transferred_variables(config, other)
    assert "but the ownership head, left out" in note and equal(back, source)
    # The soft policy head likewise (a source with the ownership head, patched in above)...
    both = dataclasses.replace(owned, soft_policy_weight=8.0)
    with_both, note = transferred_variables(both, initial_variables(both))
    assert note.endswith("but the soft policy head, initialised afresh")
    assert equal(with_both["params"]["ownership"], variables["params"]["ownership"])
    # ...and both heads named in one line where a run has neither.
    monkeypatch.setattr(azjax.transfer, "load_checkpoint", lambda p, s: (both, with_both, 1))
    back, note = transferred_variables(config, other)
    assert note.endswith("but the ownership head, left out and the soft policy head, left out")
    assert equal(back, source)


def test_the_source_is_read_when_resolved(tiny_run, tmp_path):
    """--init_from=RUN@latest of a run still training with --keep_checkpoints: the step resolved
    at the start was gone by the time the run loaded it (a reviewer's 9 of 9 tries)."""
    run = str(tmp_path / "source")
    shutil.copytree(tiny_run, run)
    config = resolve(load_config("tictactoe", {**TOY, "init_from": run}))
    assert config.init_from.endswith("@2")
    shutil.rmtree(os.path.join(run, "checkpoints", "2"))  # the source run removes it meanwhile
    variables, note = transferred_variables(config, load_checkpoint(tiny_run, 1)[1])
    assert "init_from " + config.init_from in note
    assert equal(variables, load_checkpoint(tiny_run, 2)[1])


def test_curves_first_checkpoint_plays_the_network_the_run_started_from(tiny_run, source, tmp_path):
    from azjax.eval.curve import start_network

    config = resolve(load_config("tictactoe", {**TOY, "init_from": f"{tiny_run}@1"}))
    variables, what = start_network(config)
    assert equal(variables, source) and what == f"init_from {config.init_from}"
    said = []  # a source gone since: the untrained network, and the curve says so
    gone = dataclasses.replace(config, init_from=f"{tmp_path}/gone@1")
    variables, what = start_network(gone, said.append)
    assert equal(variables, initial_variables(gone)) and what == "untrained"
    assert "plays the untrained network" in said[0]


def test_a_gated_run_plays_self_play_with_the_transferred_network(tiny_run, source, tmp_path):
    from azjax import gating, loop, parallel
    from azjax.checkpoint import Checkpointer

    gated = {**TOY, "gating": 0.55, "gating_games": 2, "init_from": f"{tiny_run}@1"}
    config = resolve(load_config("tictactoe", gated))
    fns = loop.make_iteration(config, parallel.make_mesh())
    workdir = str(tmp_path / "gated")
    run = loop._open_run(
        config, workdir, fns, Checkpointer(workdir), resume=False, resume_step=None
    )
    assert equal(run.train.variables, source)
    assert equal(gating.selfplay_variables(run), source)  # the gate's best, not the untrained net


@pytest.mark.parametrize(
    "options, fresh_heads, note",
    [
        (
            {"policy_head_kernel": 1},
            {"policy"},
            "policy head, initialised afresh (the source's has other shapes: policy_head_kernel=3)",
        ),
        (
            {"value_hidden": 8},
            {"value"},
            "value head, initialised afresh (the source's has other "
            "shapes: value_hidden=4, value_head=tanh)",
        ),
        ({"value_head": "wdl"}, {"value"}, "value_head=tanh)"),
    ],
)
def test_a_head_of_other_shapes_starts_fresh_and_the_rest_loads(
    tiny_run, source, options, fresh_heads, note
):
    """The same game and board with another policy head kernel, value head width or value head:
    the trunk and every other head are the source's, bit for bit; that head is the run's own."""
    config = resolve(load_config("tictactoe", {**TOY, **options, "init_from": f"{tiny_run}@1"}))
    fresh = initial_variables(config)
    variables, said = transferred_variables(config, fresh)
    assert "loaded every parameter (tictactoe {}) but the " in said and said.endswith(note), said
    assert equal(split(variables)[0], split(source)[0])
    for head in ("policy", "value"):
        want = fresh if head in fresh_heads else source
        assert equal(_head(variables, head), _head(want, head)), head


def test_the_head_modules_name_every_module_outside_the_trunk():
    """HEAD_MODULES (what --init_from loads head by head) names each top-level module that is
    not the trunk's, with every head on: a module Flax names otherwise would fail here."""
    config = load_config(
        "tictactoe",
        {
            **TOY,
            "ownership_weight": 1.0,
            "soft_policy_weight": 1.0,
            "opponent_policy_weight": 1.0,
            "value_head": "wdl",
        },
    )
    shapes = jax.eval_shape(lambda: initial_variables(config))
    named = {k for modules in HEAD_MODULES.values() for k in modules}
    assert {k for k in shapes["params"] if not is_trunk(k)} == named


def test_a_frozen_trunk_has_no_optimizer_state(tiny_run, source):
    config = load_config("tictactoe", {**TOY, "optimizer": "adam", "init_from": tiny_run})
    params = source["params"]
    everything = sum(x.size for x in jax.tree.leaves(params))
    heads = sum(x.size for k, v in params.items() if not is_trunk(k) for x in jax.tree.leaves(v))
    assert 0 < heads < everything
    for freeze, size in ((False, 2 * everything), (True, 2 * heads)):
        frozen = dataclasses.replace(config, freeze_trunk=freeze)
        state = training.make_optimizer(frozen).init(params)
        floats = [x for x in jax.tree.leaves(state) if x.dtype == np.float32]
        assert sum(x.size for x in floats) == size  # Adam's two moments of what trains


def test_freezing_keeps_the_trunk_and_trains_the_heads(experiment, source, c4):
    root, _, _ = experiment
    config, variables, step = load_checkpoint(str(root / "frozen"))
    assert config.freeze_trunk and step == 1
    trunk, heads = split(variables)
    assert equal(trunk, split(source)[0])  # parameters and batch statistics, bit for bit
    fresh_heads = split(c4[1])[1]  # where the heads started
    for c in ("params", "batch_stats"):
        for k in heads[c]:
            assert not equal(heads[c][k], fresh_heads[c][k]), (c, k)  # trained


def test_a_trainable_trunk_trains(experiment, source):
    root, _, _ = experiment
    config, variables, _ = load_checkpoint(str(root / "transfer"), 1)
    assert not config.freeze_trunk
    assert not equal(split(variables)[0]["params"], split(source)[0]["params"])


def test_the_experiment_records_sources_and_tournaments(experiment):
    root, results, copy = experiment
    where = f"{os.path.abspath(copy)}@1"
    for name, recorded in (("scratch", ""), ("transfer", where), ("frozen", where)):
        saved = json.loads((root / name / "config.json").read_text())
        assert saved["init_from"] == recorded and results["runs"][name]["init_from"] == recorded
        assert results["runs"][name]["summary"]["iterations"] == TOY["iterations"]
    assert results["source"]["location"] == where
    assert [t["sims"] for t in results["tournaments"]] == [2]
    for t in results["tournaments"]:
        assert t["agents"] == ["scratch", "transfer", "frozen"] and len(t["matches"]) == 3
    assert sum(results["points"].values()) == 3 * 2  # 3 pairs, 2 games each
    assert results["errors"] is None  # 4x4 Connect Four has no solved positions in the package


def test_a_transferred_run_resumes_without_its_source(experiment, capsys):
    root, _, copy = experiment
    workdir = str(root / "transfer")
    assert not os.path.exists(copy)
    # Resumed at its end: the loop restores the checkpoint, then stops (no new compiles).
    assert train.main([f"--workdir={workdir}", "--resume", "--no_progress", "--json"]) == 0
    saved = json.loads(open(os.path.join(workdir, "config.json")).read())
    assert saved["init_from"] == f"{os.path.abspath(copy)}@1"
    assert json.loads(capsys.readouterr().out)["iterations"] == 1


def _fails(capsys, argv, *needles):
    assert train.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def test_bad_sources_are_one_line(tiny_run, tmp_path, capsys, monkeypatch):
    toy = ["--game=connect_four", *flags(C4), *flags(TOY), "--no_progress"]
    run = [*toy, f"--workdir={tmp_path}/run"]
    _fails(capsys, [*run, f"--init_from={tmp_path}/none"], "--init_from", "no run folder")
    os.makedirs(tmp_path / "empty")
    _fails(capsys, [*run, f"--init_from={tmp_path}/empty"], "--init_from", "no checkpoint in")
    _fails(capsys, [*run, f"--init_from={tiny_run}@7"], "no checkpoint 7", "have [1, 2]")
    _fails(
        capsys,
        [*run, f"--init_from={tiny_run}@x"],
        "must be a number, 'latest', 'best' or 'best:MEASURE'",
    )
    _fails(
        capsys,
        [*run, f"--init_from={tiny_run}", "--num_filters=8"],
        "trunk widths must match",
        "it has num_blocks=1, num_filters=4, this run num_blocks=1, num_filters=8",
    )
    _fails(
        capsys,
        [*run, f"--init_from={tiny_run}", "--global_pool=true"],
        "the source's blocks do not pool over the board and this run's do",
        "(set --global_pool=false)",
    )
    _fails(capsys, [*run, f"--init_from={tiny_run}", "--resume"], "--init_from starts a new run")
    _fails(capsys, [*run, "--freeze_trunk"], "nothing to transfer")
    assert not os.path.exists(tmp_path / "run")  # refused before the workdir (and its lock)

    from games.connect_four import ConnectFour

    monkeypatch.setattr(ConnectFour, "observation_shape", property(lambda self: (4, 4, 2)))
    _fails(capsys, [*run, f"--init_from={tiny_run}"], "has 3 input planes", "this run's")


def test_other_planes_of_one_game_name_the_flags_that_match_them():
    """A network that sees Othello's mobility planes (pretrained/othello6's) transfers to a run
    with them; the refusal says which flags give this run the source's planes."""
    from azjax.transfer import check_compatible

    source = load_config("othello", dict(size=4, mobility=True, init_from="src"))
    plain = dataclasses.replace(source, game_options={"size": 4})
    check_compatible(source, source)
    with pytest.raises(CheckpointError, match=r"5 input planes.* 3: .*; set --mobility=true$"):
        check_compatible(source, plain)
    with pytest.raises(CheckpointError, match=r"same planes\)$"):  # another game: no flags
        check_compatible(source, dataclasses.replace(plain, game="hex"))


def test_another_games_source_names_the_observation_options_that_match_its_planes():
    """Connect Four's 3 planes fit Othello without its mobility planes (the CPU recipe's): the
    refusal says --mobility=false; where no option of the game gives the planes, it names none."""
    from azjax.transfer import check_compatible, matching_planes

    source = load_config("connect_four", dict(C4, init_from="src"))
    othello = load_config("othello", dict(size=4, mobility=True, init_from="src"))
    assert matching_planes(source, othello) == {"mobility": False}
    with pytest.raises(CheckpointError, match=r"3 input planes.* 5: .*; set --mobility=false$"):
        check_compatible(source, othello)
    plain = dataclasses.replace(othello, game_options={"size": 4})
    assert matching_planes(source, plain) == {}
    check_compatible(source, plain)
    mobile = load_config("othello", dict(size=4, mobility=True))
    assert matching_planes(mobile, plain) == {}  # the default has fewer planes than the source


def test_an_unreadable_source_is_one_line(tiny_run, tmp_path, c4):
    copy = str(tmp_path / "source")
    shutil.copytree(tiny_run, copy)
    for root, _, files in os.walk(os.path.join(copy, "checkpoints", "1", "state")):
        for name in files:  # cut the arrays' data short: orbax's reads fail half-way
            if os.path.basename(root) == "d":
                os.truncate(os.path.join(root, name), 10)
    config = dataclasses.replace(c4[0], init_from=f"{copy}@1")
    with pytest.raises(CheckpointError) as error:
        transferred_variables(config, c4[1])
    text = str(error.value)
    assert text.startswith(f"--init_from={copy}@1: ") and "checkpoint 1" in text
    assert "cannot be read" in text and "\n" not in text


def test_the_experiment_fits_the_targets_planes_to_the_source_before_training(tmp_path):
    """The default experiment (Othello under the CPU recipe from Connect Four) turns the recipe's
    mobility planes off, as seed 004 transferred between games with the same planes, and says so;
    given on the command line they are refused, before anything trains."""
    from experiments import transfer

    lines = []
    args = transfer.parse([f"--workdir={tmp_path}", "--size=4"])
    source, target = transfer.plan(args, lines.append)
    assert source.game == "connect_four" and target.game == "othello"
    assert dict(target.game_options) == {"size": 4, "mobility": False}
    assert lines and "mobility=false, the input planes of the source's connect_four" in lines[0]
    args = transfer.parse([f"--workdir={tmp_path}", "--size=4", "--mobility"])
    with pytest.raises(CheckpointError, match=r"; set --mobility=false$"):
        transfer.plan(args, lines.append)
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--games=3"], "--games must be even"),
        (["--sims=0"], "--sims: every value must be at least 1"),
        (["--game=othello", "--rows=4"], "--rows is not an option of othello"),
        (["--init_from=x"], "unrecognized arguments: --init_from=x"),  # the experiment sets it
        (["--errors_sims=-1"], "--errors_sims: expected 0..100000 simulations (0: none)"),
    ],
)
def test_the_experiment_checks_its_flags(argv, message, capsys):
    from experiments import transfer

    with pytest.raises(SystemExit) as exit_info:
        transfer.parse(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_the_experiment_into_its_own_workdir_again_says_what_to_do(experiment, tiny_run, capsys):
    """A second run into the same --workdir ended with train.py's 'pass --resume to continue
    that run', a flag the experiment does not take."""
    from experiments import transfer

    root, _, _ = experiment
    argv = ["--game=connect_four", *flags(C4), f"--source={tiny_run}@1", f"--workdir={root}"]
    assert transfer.main([*argv, "--no_progress", *flags(TOY)]) == 2
    err = capsys.readouterr().err
    assert "holds this experiment's runs already" in err and "choose another --workdir" in err
    assert "--resume" not in err


def test_the_experiment_s_points_count_a_draw_as_half():
    """Wins + draws / 2 over every round (a reviewer's full point a draw passed: the end-to-end
    test's total of games holds whatever a draw is worth)."""
    from experiments import transfer

    first = [dict(agent="scratch", wins=2, draws=2), dict(agent="frozen", wins=0, draws=1)]
    second = [dict(agent="scratch", wins=1, draws=0), dict(agent="transfer", wins=3, draws=1)]
    rounds = [{"pooled": first}, {"pooled": second}]
    assert transfer.points(rounds) == {"scratch": 4.0, "transfer": 3.5, "frozen": 0.5}
