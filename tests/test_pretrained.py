"""Networks shipped in the package (azjax/pretrained): the export format's round trip, every
shipped network against a random player, `ckpt:pretrained/NAME` and `--init_from=pretrained/NAME`,
the export command's one-line errors, and the package data that installs them."""

import ast
import dataclasses
import errno
import glob
import json
import os
import re

import jax
import numpy as np
import pytest

import games
from azjax import load_config, pretrained
from azjax.checkpoint import (
    Checkpointer,
    CheckpointError,
    init_run,
    load_checkpoint,
    read_config,
    resolve_run,
)
from azjax.commands import evaluate, train
from azjax.eval import parse_agent, play_games, random_agent
from azjax.ladder import load_ladder, table_path
from azjax.network import make_apply, make_network

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = dict(num_blocks=1, num_filters=8, value_hidden=8, iterations=1)


@pytest.fixture(scope="module")
def state():
    """A run state of a randomly initialised Tic-Tac-Toe network whose batch statistics are not
    the initial ones (no training: the format is what is tested)."""
    config = load_config("tictactoe", TINY)
    state = jax.jit(lambda: init_run(config))()
    variables = state.train.variables
    key = jax.random.PRNGKey(1)
    stats = jax.tree_util.tree_map(
        lambda x: x + jax.random.uniform(key, x.shape, minval=0.1, maxval=0.5),
        variables["batch_stats"],
    )
    return state.replace(train=state.train.replace(variables={**variables, "batch_stats": stats}))


def _saved(workdir: str, state, config) -> str:
    checkpointer = Checkpointer(workdir)
    checkpointer.save(3, state, config)
    checkpointer.wait()
    checkpointer.close()
    return workdir


@pytest.fixture(scope="module")
def run(tmp_path_factory, state) -> str:
    """A Tic-Tac-Toe run folder with `state` as its one checkpoint (step 3)."""
    workdir = str(tmp_path_factory.mktemp("pretrained") / "run")
    return _saved(workdir, state, load_config("tictactoe", TINY))


@pytest.fixture(scope="module")
def bf16_run(tmp_path_factory, state) -> str:
    """The same checkpoint as `run`'s in a run that computes in bfloat16."""
    workdir = str(tmp_path_factory.mktemp("pretrained") / "bf16")
    return _saved(workdir, state, load_config("tictactoe", {**TINY, "dtype": "bfloat16"}))


@pytest.fixture(scope="module")
def positions():
    """Observations [B, 3, 3, 3] of 64 Tic-Tac-Toe positions after random moves."""
    from azjax.selfplay import random_moves

    game = load_config("tictactoe", TINY).make_game()
    keys = jax.random.split(jax.random.PRNGKey(2), 64)
    plies = np.arange(64) % 8
    states = jax.vmap(lambda k, p: random_moves(game, k, p, 9))(keys, plies)
    return jax.vmap(game.observe)(states)


def outputs(config, variables, obs):
    apply = make_apply(make_network(config, config.make_game()))
    return tuple(np.asarray(x) for x in jax.jit(apply)(variables, obs))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_export_then_load_gives_the_checkpoints_outputs(run, positions, tmp_path, dtype):
    folder = pretrained.export(run, None, "ttt", to=str(tmp_path), card={"note": 1}, dtype=dtype)
    assert sorted(os.listdir(folder)) == sorted(pretrained.FILES)
    config, variables, step = load_checkpoint(run)
    config2, variables2, step2 = load_checkpoint(folder)  # no orbax: an exported folder
    assert (config2, step2) == (config, 3)
    assert read_config(folder) == config
    assert set(variables2) == {"params", "batch_stats"}  # no optimizer state
    logits, value = outputs(config, variables, positions)
    logits2, value2 = outputs(config2, variables2, positions)
    if dtype == "float32":
        np.testing.assert_array_equal(logits2, logits)
        np.testing.assert_array_equal(value2, value)
    else:
        np.testing.assert_allclose(logits2, logits, atol=2e-2)
        np.testing.assert_allclose(value2, value, atol=2e-2)
    card = pretrained.read_card(folder)
    assert card["note"] == 1 and card["source"]["step"] == 3
    assert card["source"]["run"] == os.path.abspath(run)
    assert card["storage"]["dtype"] == dtype
    assert card["precision"]["argmax_agreement"] >= 0.95
    assert card["precision"]["max_logit_error"] < (1e-6 if dtype == "float32" else 2e-2)


def test_the_precision_of_a_bfloat16_runs_export_is_the_storages_alone(
    bf16_run, tmp_path, monkeypatch
):
    """The card measures float16 storage in float32 compute whatever the run computes in (a
    bfloat16 network's own rounding once counted as the storage's: 0.008 of a logit near 1, and
    4% of argmaxes on a toy network); --compute_dtype sets what the exported config.json computes
    in (the run's by default)."""
    probed = []
    probe = pretrained._probe
    monkeypatch.setattr(
        pretrained, "_probe", lambda c, p: probed.append(json.loads(c)["dtype"]) or probe(c, p)
    )
    bf16 = pretrained.export(bf16_run, None, "b", to=str(tmp_path))
    assert probed == ["float32"]
    assert read_config(bf16).dtype == "bfloat16"
    assert pretrained.read_card(bf16)["storage"]["compute_dtype"] == "bfloat16"
    played = pretrained.export(bf16_run, None, "c", to=str(tmp_path), compute_dtype="float32")
    assert read_config(played).dtype == "float32"
    assert read_config(played) == dataclasses.replace(read_config(bf16), dtype="float32")
    assert pretrained.read_card(played)["storage"]["compute_dtype"] == "float32"


def test_a_local_pretrained_folder_wins_and_unknown_names_list_the_shipped(
    run, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    name = "tictactoe"
    assert resolve_run(f"pretrained/{name}") == os.path.join(pretrained.STORE, name)
    pretrained.export(run, 3, name, to="pretrained")
    assert resolve_run(f"pretrained/{name}") == f"pretrained/{name}"
    assert load_checkpoint(f"pretrained/{name}", 3)[0].num_filters == 8  # the local one
    with pytest.raises(CheckpointError, match="no pretrained network 'nothing'.*shipped: "):
        load_checkpoint("pretrained/nothing")
    with pytest.raises(CheckpointError, match="exported from step 3 only, not @4"):
        load_checkpoint(f"pretrained/{name}", 4)
    os.makedirs("pretrained/hex6")  # an empty local folder hides the shipped network: say so
    with pytest.raises(CheckpointError, match="read before the package's network hex6: move"):
        load_checkpoint("pretrained/hex6")


def test_a_damaged_export_is_one_error(run, tmp_path):
    folder = pretrained.export(run, 3, "ttt", to=str(tmp_path))
    with open(os.path.join(folder, "variables.msgpack"), "r+b") as f:
        f.truncate(100)
    with pytest.raises(CheckpointError, match="variables.msgpack"):
        load_checkpoint(folder)
    with open(os.path.join(folder, "card.json"), "w") as f:
        f.write("[]")
    with pytest.raises(CheckpointError, match="card.json holds no card"):
        load_checkpoint(folder)


def test_an_incomplete_export_is_named_as_one(run, tmp_path):
    folder = pretrained.export(run, 3, "ttt", to=str(tmp_path))
    os.remove(os.path.join(folder, "variables.msgpack"))
    with pytest.raises(CheckpointError, match="incomplete exported network: it lacks variables"):
        load_checkpoint(folder)
    started = tmp_path / "started"  # a run killed before its first checkpoint: not an export
    started.mkdir()
    (started / "config.json").write_text(load_config("tictactoe", TINY).to_json())
    with pytest.raises(CheckpointError, match="holds no checkpoints"):
        read_config(str(started))


def test_exporting_an_exported_network_keeps_its_card_and_records_its_source(
    run, tmp_path, monkeypatch
):
    first = pretrained.export(run, 3, "ttt", to=str(tmp_path / "a"), card={"elo": 7.0})
    card = pretrained.read_card(first)
    monkeypatch.chdir(tmp_path)  # pretrained/ttt: the local folder, found first
    os.rename(tmp_path / "a", tmp_path / "pretrained")
    again = pretrained.read_card(pretrained.export("pretrained/ttt", None, "copy", to="b"))
    assert again["elo"] == 7.0 and again["source"]["run"] == str(tmp_path / "pretrained" / "ttt")
    assert again["source"]["exported_from"]["run"] == card["source"]["run"] == run
    assert again["source"]["exported_from"]["storage"] == card["storage"]
    assert again["source"]["run_summary"] == card["source"]["run_summary"]
    # a field the exporter gives again replaces the carried one (it raised a TypeError)
    newer = pretrained.export("pretrained/ttt", None, "c2", to="b", card={"elo": 9.0})
    assert pretrained.read_card(newer)["elo"] == 9.0


def test_export_writes_into_the_package_only_in_a_source_checkout(monkeypatch, tmp_path):
    assert pretrained.default_store() == pretrained.STORE  # the tests run in the checkout
    installed = tmp_path / "site-packages" / "azjax" / "pretrained"
    monkeypatch.setattr(pretrained, "STORE", str(installed))
    monkeypatch.chdir(tmp_path)
    assert pretrained.default_store() == str(tmp_path / "pretrained")


def test_a_ladder_table_is_written_into_the_package_only_in_a_source_checkout(
    monkeypatch, tmp_path
):
    """Installed, `evaluate.py ladder` wrote its table into site-packages (left behind by pip
    uninstall, overwritten by an upgrade, refused on a read-only install)."""
    from azjax import ladder

    game = games.make("hex", size=3)
    name = ladder.table_name("hex", dict(game.rules))
    assert ladder.new_table_path(game) == os.path.join(ladder.TABLES, name)  # the checkout
    installed = tmp_path / "site-packages" / "azjax"
    monkeypatch.setattr(pretrained, "STORE", str(installed / "pretrained"))
    monkeypatch.setattr(ladder, "TABLES", str(installed / "ladders"))
    monkeypatch.chdir(tmp_path)
    assert ladder.new_table_path(game) == str(tmp_path / "ladders" / name)
    assert ladder.table_path(game) == str(installed / "ladders" / name)  # none here yet
    (tmp_path / "ladders").mkdir()
    (tmp_path / "ladders" / name).write_text("{}")
    assert ladder.table_path(game) == str(tmp_path / "ladders" / name)  # found first


def test_the_package_ships_networks_and_they_stay_small():
    assert "tictactoe" in pretrained.names()
    sizes = [
        os.path.getsize(os.path.join(pretrained.package_folder(name), file))
        for name in pretrained.names()
        for file in pretrained.FILES
    ]
    assert sum(sizes) < 5e6  # a few MB in all


@pytest.mark.parametrize("name", pretrained.names())
def test_a_cards_ladder_rating_is_on_its_games_shipped_table(name):
    """A card's `elo` names the table of its own game and options, which the package ships; a
    rating the card calls a lower bound (the network won every game against the top rung) lies
    above that table's top rung, so a card goes stale when its table grows past it."""
    card = pretrained.read_card(pretrained.package_folder(name))
    rating = card.get("elo")
    if not isinstance(rating, dict) or rating.get("ladder") is None:
        return  # no table for the game when it was made (hex9: an H100 network, its own scale)
    game = games.make(card["game"], **card["game_options"])
    assert os.path.basename(table_path(game)) == rating["ladder"] + ".json"
    ladder = load_ladder(game)
    assert ladder is not None and rating["ci95"] > 0
    if rating.get("lower_bound"):
        assert rating["elo"] > ladder.elo[-1]


@pytest.mark.parametrize("name", pretrained.names())
def test_every_shipped_network_loads_and_beats_a_random_player(name, tmp_path, monkeypatch):
    """Through the spec a user types (from a folder without a local pretrained/)."""
    monkeypatch.chdir(tmp_path)
    config, _ = pretrained.load(name)
    game = config.make_game()
    card = pretrained.read_card(pretrained.package_folder(name))
    assert (card["name"], card["game"], card["game_options"]) == (
        name,
        config.game,
        dict(config.game_options),
    )
    variables = os.path.join(pretrained.package_folder(name), "variables.msgpack")
    assert os.path.getsize(variables) < 1.5e6
    agent = parse_agent(f"ckpt:pretrained/{name},sims=8", game)
    result = play_games(game, agent, random_agent("random", game), 20, jax.random.PRNGKey(0))
    r = result.result
    assert (r.wins + 0.5 * r.draws) / 20 >= 0.8, r


@pytest.mark.integration  # trains (one tiny iteration)
def test_init_from_a_shipped_network_starts_a_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config, variables = pretrained.load("tictactoe")
    widths = {f: getattr(config, f) for f in ("num_blocks", "num_filters", "value_hidden")}
    toy = dict(
        batch_games=4,
        num_simulations=2,
        train_steps=1,
        train_batch_size=8,
        min_replay=4,
        replay_games=8,
        iterations=1,
        checkpoint_interval=1,
        eval_interval=0,
        **widths,
    )
    argv = ["--game=tictactoe", "--init_from=pretrained/tictactoe", "--no_progress"]
    argv += [f"--workdir={tmp_path}/run", *(f"--{k}={v}" for k, v in toy.items())]
    assert train.main(argv) == 0
    assert "loaded every parameter" in capsys.readouterr().err
    saved = read_config(f"{tmp_path}/run")
    folder = pretrained.package_folder("tictactoe")
    assert saved.init_from == f"{folder}@{pretrained.step_of(folder)}"


def test_the_shipped_8x8_network_plays_with_the_decisive_moves_it_trained_with():
    """othello8 was trained with --decisive_moves (session 76): its agent searches with them
    unless told decisive=0, and a run started from it takes the network alone."""
    config, _ = pretrained.load("othello8")
    game = config.make_game()
    assert parse_agent("ckpt:pretrained/othello8", game).search.spec.decisive_moves
    assert not parse_agent("ckpt:pretrained/othello8,decisive=0", game).search.spec.decisive_moves
    flags = ["--game=othello", "--size=8", "--config=cpu", "--init_from=pretrained/othello8"]
    started, _ = train.parse(flags)
    assert not started.decisive_moves


@pytest.mark.parametrize(
    "name, flags",
    [
        ("hex5", ["--game=hex", "--size=5"]),
        ("hex6", ["--game=hex", "--size=6"]),
        ("othello6", ["--game=othello", "--size=6"]),
        ("othello8", ["--game=othello", "--size=8"]),
        ("connect_four", ["--game=connect_four"]),
    ],
)
def test_the_cpu_recipe_starts_from_the_networks_it_trained(name, flags):
    """`train.py --config=cpu --init_from=pretrained/NAME` needs no other flag for the networks
    the CPU recipe trained: othello6 and othello8 see the mobility planes, as the recipe does
    (session 49); and every head of them loads, none starting fresh (connect_four has the recipe's
    1x1 policy head since session 85)."""
    from azjax.transfer import _HEAD_OPTIONS, check_compatible

    config, _ = train.parse([*flags, "--config=cpu", f"--init_from=pretrained/{name}"])
    source = read_config(config.init_from)
    check_compatible(source, config)  # a CheckpointError fails it
    for option in (o for options in _HEAD_OPTIONS.values() for o in options):
        assert getattr(source, option) == getattr(config, option), option


def _fails(capsys, argv, *parts):
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("evaluate.py: error:"), err
    for part in parts:
        assert part in err, err


def test_export_errors_are_one_line(run, tmp_path, capsys):
    to = f"--to={tmp_path}"
    assert evaluate.main(["export", run, "--name=ttt", to, "--card", "elo=12.5"]) == 0
    assert "exported" in capsys.readouterr().out
    assert pretrained.read_card(f"{tmp_path}/ttt")["elo"] == 12.5
    _fails(capsys, ["export", run, "--name=ttt", to], "exists; pass --force")
    assert evaluate.main(["export", run, "--name=ttt", to, "--force", "--card", "m=cpu"]) == 0
    assert pretrained.read_card(f"{tmp_path}/ttt")["m"] == "cpu"
    _fails(capsys, ["export", run, "--name=a/b", to], "bad network name 'a/b'")
    os.makedirs(f"{tmp_path}/mine")  # --force replaces exported networks, nothing else
    _fails(capsys, ["export", run, "--name=mine", to, "--force"], "not an exported network")
    _fails(capsys, ["export", f"{tmp_path}/none", "--name=x", to], "no run folder")
    _fails(capsys, ["export", f"{run}@9", "--name=x", to], "no checkpoint 9")
    _fails(capsys, ["export", f"{run}@9", "--name=ttt", to], "no checkpoint 9")  # before 'exists'
    _fails(capsys, ["export", run, "--name=x", to, "--card", "source=me"], "--card source")
    _fails(capsys, ["export", run, "--name=x", to, "--card", "novalue"], "KEY=VALUE")
    _fails(capsys, ["export", run, "--name=x", to, "--card", "elo=NaN"], "a finite number")
    _fails(capsys, ["export", run, "--name=x", to, "--dtype=int8"], "--dtype")
    _fails(capsys, ["export", run, "--name=x", to, "--compute_dtype=f16"], "float32, bfloat16")
    _fails(
        capsys,
        ["match", "ckpt:pretrained/nothing", "random", f"--out={tmp_path}/m"],
        "no pretrained network 'nothing'",
    )
    capsys.readouterr()
    assert not os.path.exists(f"{tmp_path}/x")


def test_an_export_that_cannot_be_written_names_the_to_flag(run, tmp_path, capsys, monkeypatch):
    def refused(folder, files):
        raise PermissionError(errno.EACCES, "Permission denied", folder)

    monkeypatch.setattr(pretrained, "_write_folder", refused)
    _fails(
        capsys,
        ["export", run, "--name=x", f"--to={tmp_path}"],
        "Permission denied (no permission: choose another folder (--out; export: --to))",
    )


def test_package_data_installs_every_shipped_file():
    """pyproject.toml's package-data globs cover every file in azjax/pretrained/*/,
    azjax/ladders/ and azjax/solved/ (a file they miss would be absent from an installed
    package)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()  # tomllib is Python 3.11+; the project supports 3.10
    section = text.split("[tool.setuptools.package-data]")[1].split("\n[")[0]
    globs = ast.literal_eval(re.search(r"^azjax = (\[.*?\])", section, re.M | re.S).group(1))
    package = os.path.join(ROOT, "azjax")
    installed = {f for g in globs for f in glob.glob(os.path.join(package, g))}  # setuptools' way
    shipped = [
        os.path.join(folder, file)
        for data in ("pretrained", "ladders", "solved")
        for folder, subfolders, files in os.walk(os.path.join(package, data))
        for file in files
        if "__pycache__" not in folder and not file.endswith(".py")
    ]
    assert any(f.startswith(os.path.join(package, "pretrained")) for f in shipped)
    missed = [os.path.relpath(f, package) for f in shipped if f not in installed]
    assert not missed, f"add to [tool.setuptools.package-data]: {missed}"
    for name in pretrained.names():  # and each network's files are the format's three
        assert sorted(os.listdir(pretrained.package_folder(name))) == sorted(pretrained.FILES)
