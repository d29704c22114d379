"""The run configuration: per-game defaults, overrides, validation, JSON round trip."""

import dataclasses
import importlib
import json

import pytest

from azjax import config as cfg


def test_game_defaults_then_overrides():
    config = cfg.load("hex", {"num_simulations": 7, "size": 5})
    assert config.num_simulations == 7
    assert config.game_options == {"size": 5, "swap": False}
    assert config.num_filters == 64  # configs/hex.py
    assert cfg.load("hex").game_options["size"] == 6


@pytest.mark.parametrize("game", ["hex", "othello"])
def test_the_thesis_settings_are_their_own_config(game):
    """configs/<game>.py is the measured recipe (raw PUCT, docs/strength.md);
    <game>_thesis, applied over it, is Table 5.1 again (the experiment1 --full settings), whatever
    the default sets."""
    default = cfg.load(game)
    assert (default.search, default.num_simulations, default.optimizer) == ("puct", 64, "adam")
    assert default.puct_values == "raw"  # PUCT's values unstretched (docs/strength.md)
    name, overrides = cfg.named_defaults(f"{game}_thesis")
    assert name == game
    thesis = cfg.load(game, overrides)
    table_5_1 = dict(
        search="puct",
        num_simulations=50,
        num_blocks=3,
        num_filters=128,
        value_hidden=128,
        batch_games=1024,
        optimizer="sgd",
        learning_rate=0.01,
        momentum=0.9,
        weight_decay=0.001,
        replay_games=5000,
        train_batch_size=1024,
        train_steps=1000,  # the network transfer interval
        opening_plies=0,
        augment=False,  # seed 000 turned no sample (section 4.2)
        puct_values="minmax",  # mctx's PUCT, as the reproduction searched
        eval_games=20,  # during training
    )
    assert {k: getattr(thesis, k) for k in table_5_1} == table_5_1
    # self-contained: nothing the default recipe sets leaks into the thesis's settings
    recipe = importlib.import_module(f"configs.{game}").OVERRIDES
    assert set(recipe) <= set(overrides)
    assert thesis.game_options["size"] == 6


def test_json_round_trip_is_exact():
    config = cfg.load("othello", {"size": 6, "opening_plies": 2, "dtype": "bfloat16"})
    assert cfg.Config.from_json(config.to_json()) == config


def test_a_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.load("tictactoe").num_simulations = 3


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"num_simulations": 0}, "num_simulations must be >= 1"),
        ({"optimizer": "rmsprop"}, "optimizer must be one of sgd, adam"),
        ({"learning_rate": float("nan")}, "learning_rate must be finite"),
        ({"batch_games": 2.5}, "batch_games must be an int"),
        ({"swap": True, "rows": 3}, "unknown setting(s) rows"),
        ({"game": "othello"}, "overrides name game='othello', the config is 'hex''s"),  # dropped
        ({"opening_plies": 65}, "opening_plies must be <= 64"),
        ({"size": 1}, "size must be an integer in 2..19"),
        ({"value_target_mix": 1.5}, "value_target_mix must be <= 1.0"),
        (
            {"value_target_mix": 0.5, "algorithm": "exit"},
            "value_target_mix needs algorithm=alphazero",
        ),
        ({"value_lambda": -0.1}, "value_lambda must be >= 0.0"),
        ({"value_lambda": 0.9, "algorithm": "exit"}, "value_lambda < 1 needs algorithm=alphazero"),
        ({"value_lambda": 0.9, "value_target_mix": 0.5}, "set one (value_lambda=1"),
        (
            {"score_utility": 0.5, "ownership_weight": 1.0, "value_target_mix": 0.5},
            "score_utility with value_target_mix: the search's root value blends in the score",
        ),
        (
            {"score_utility": 0.5, "ownership_weight": 1.0, "resign_threshold": 0.9},
            "score_utility with resign_threshold:",
        ),
        (
            {"score_utility": 0.5, "ownership_weight": 1.0, "value_lambda": 0.8},
            "score_utility with value_lambda < 1:",
        ),
        ({"net_symmetries": 8}, "net_symmetries must be in 1..2 for hex (its board symmetries)"),
        ({"net_symmetries": 9}, "net_symmetries must be <= 8"),
        ({"net_symmetries": 2, "algorithm": "exit"}, "net_symmetries needs algorithm=alphazero"),
        ({"decisive_moves": True, "algorithm": "exit"}, "decisive_moves needs algorithm=alphazero"),
        ({"fpu_reduction": 3.0}, "fpu_reduction must be <= 2.0"),
        (
            {"fpu_reduction": 0.2, "puct_values": "minmax"},
            "fpu_reduction (0.2) needs search=puct and puct_values=raw, got search=puct, "
            "puct_values=minmax",
        ),
        ({"forced_playouts": 20}, "forced_playouts must be <= 16.0"),
        ({"forced_playouts": 2, "search": "gumbel"}, "forced_playouts (2) needs search=puct, got"),
        (
            {"policy_target": "improved", "search": "gumbel"},
            "policy_target=improved needs algorithm=alphazero, search=puct",
        ),
        (
            {"policy_target": "improved", "full_search_prob": 0.5, "fast_simulations": 8},
            "full_search_prob=1 (each move's tree); got algorithm=alphazero, search=puct, "
            "full_search_prob=0.5",
        ),
        ({"resign_threshold": 1.0}, "resign_threshold must be <= 0.999"),
        ({"resign_playout": -0.1}, "resign_playout must be >= 0.0"),
        (
            {"resign_threshold": 0.9, "algorithm": "exit"},
            "resign_threshold needs algorithm=alphazero",
        ),
        ({"best_by": "first"}, "best_by must be one of auto, opponent, elo, error_rate"),
        ({"best_by": "opponent"}, "best_by=opponent needs an eval_opponent to score against"),
        ({"best_by": "elo", "eval_ladder": False}, "best_by=elo needs eval_ladder=true"),
        ({"best_by": "elo", "eval_interval": 0}, "best_by=elo ranks evaluations: it needs eval"),
        (
            {"best_by": "error_rate", "size": 7},
            "best_by=error_rate needs solved positions of the game; the package has sets for "
            "connect_four-cols7-connect4-rows6, hex-size5-swapfalse,",
        ),
        ({"best_by": "error_rate", "size": 6, "eval_errors": False}, "needs eval_errors=true"),
        (  # either half alone played no rollouts, silently
            {"rollout_policy": "random"},
            "rollouts need both rollout_policy (random or policy) and rollout_prob (p_r > 0), "
            "got rollout_policy=random rollout_prob=0: that plays none",
        ),
        ({"rollout_prob": 0.5}, "got rollout_policy=none rollout_prob=0.5: that plays none"),
    ],
)
def test_bad_values_are_named(overrides, message):
    with pytest.raises(ValueError) as e:
        cfg.load("hex", overrides)
    assert message in str(e.value)


def test_best_by_takes_a_measure_the_run_logs():
    assert cfg.load("hex", {"size": 6, "best_by": "error_rate"}).best_by == "error_rate"
    assert cfg.load("hex", {"best_by": "opponent", "eval_opponent": "random"}).best_by
    assert cfg.load("hex").best_by == "auto"


def test_a_saved_config_with_half_a_rollout_setting_loads_as_it_ran(tmp_path):
    # saved before validate refused it: it played no rollouts, and it still loads so, resumed
    # (Config.from_json) or given as --config
    from azjax.commands import train

    data = json.loads(cfg.load("tictactoe").to_json())
    for half in (dict(rollout_policy="random"), dict(rollout_prob=0.5)):
        config = cfg.Config.from_json(json.dumps({**data, **half}))
        assert (config.rollout_policy, config.rollout_prob) == ("none", 0.0)
        (tmp_path / "config.json").write_text(json.dumps({**data, **half}))
        config, _ = train.parse([f"--config={tmp_path / 'config.json'}"])
        assert (config.rollout_policy, config.rollout_prob) == ("none", 0.0)
    (tmp_path / "mine.json").write_text('{"rollout_policy": "random"}')  # not a saved run's
    with pytest.raises(ValueError, match="rollouts need both"):
        train.parse(["--game=tictactoe", f"--config={tmp_path / 'mine.json'}"])
    rolled = cfg.Config.from_json(
        json.dumps({**data, "rollout_policy": "policy", "rollout_prob": 1})
    )
    assert (rolled.rollout_policy, rolled.rollout_prob) == ("policy", 1)


def test_unknown_fields_in_json_are_refused():
    text = cfg.load("tictactoe").to_json().replace('"seed"', '"sead"')
    with pytest.raises(ValueError, match="unknown field"):
        cfg.Config.from_json(text)


def test_a_named_config_is_chosen_with_train_config_flag(capsys):
    from azjax.commands import train

    game, overrides = cfg.named_defaults("connect_four_thesis")
    assert game == "connect_four" and overrides["num_simulations"] == 400
    assert {"connect_four_thesis", "cpu"} <= set(cfg.config_names())
    # configs/connect_four_thesis.py (seed 001's Table 5.4) under flags; game options from it.
    run, _ = train.parse(["--config=connect_four_thesis", "--num_simulations=8"])
    assert (run.game, run.num_simulations, run.num_filters, run.sample_moves) == (
        "connect_four",
        8,
        128,
        30,
    )
    assert (run.c_puct, run.learning_rate, run.weight_decay, run.train_steps) == (1.0, 1e-3, 0, 5)
    assert run.puct_values == "raw"  # Q in [-1, 1], seed 001's equation 3.1
    assert (run.value_hidden, run.replay_games) == (256, 80)  # its section 3.3; the last games
    assert dict(run.game_options) == dict(rows=6, cols=7, connect=4)
    assert train.main(["--config=nope"]) == 2
    assert "--config: unknown config 'nope'; available: connect_four, connect_four_thesis" in (
        capsys.readouterr().err
    )
    assert train.main(["--game=hex", "--config=connect_four_thesis"]) == 2
    assert "--game=hex but --config=connect_four_thesis is connect_four" in capsys.readouterr().err


def test_config_files_of_overrides(tmp_path, capsys):
    from azjax.commands import train

    flat = tmp_path / "fast.json"
    flat.write_text('{"num_simulations": 7, "size": 5}')
    run, _ = train.parse(["--game=hex", f"--config={flat}", "--batch_games=8"])
    assert (run.game, run.num_simulations, run.batch_games, run.game_options["size"]) == (
        "hex",
        7,
        8,
        5,
    )
    saved = tmp_path / "config.json"  # a previous run's config.json names its game
    saved.write_text(cfg.load("othello", {"size": 6, "num_filters": 16}).to_json())
    run, _ = train.parse([f"--config={saved}", "--num_blocks=1"])
    assert (run.game, run.game_options["size"], run.num_filters, run.num_blocks) == (
        "othello",
        6,
        16,
        1,
    )
    script = tmp_path / "mine.py"
    script.write_text('GAME = "tictactoe"\nOVERRIDES = {"iterations": 3}\n')
    run, _ = train.parse([f"--config={script}"])
    assert (run.game, run.iterations) == ("tictactoe", 3)
    script.write_text('OVERRIDES = {"game": "othello", "size": 6}\n')  # the game in OVERRIDES
    assert train.parse([f"--config={script}"])[0].game == "othello"
    (tmp_path / "budget.json").write_text('{"time_budget": 60}')  # minutes alone end the run
    run, _ = train.parse(["--game=tictactoe", f"--config={tmp_path / 'budget.json'}"])
    assert (run.time_budget, run.iterations) == (60, 0)
    (tmp_path / "typo.py").write_text('OVERIDES = {"iterations": 3}\n')
    (tmp_path / "run").mkdir()  # --config beside --resume: the run's own settings win
    (tmp_path / "run" / "config.json").write_text(cfg.load("tictactoe").to_json())
    (tmp_path / "bad.json").write_text('{"num_simulations": 7, "sims": 1}')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "type.json").write_text('{"num_simulations": "abc"}')
    (tmp_path / "chess.json").write_text('{"game": "chess"}')
    for name, needle in (
        # the file named, not the flag the user never typed
        ("type.json", f"--config={tmp_path / 'type.json'}: num_simulations must be an int"),
        ("chess.json", f"--config={tmp_path / 'chess.json'}: unknown game 'chess'; known games"),
        ("bad.json", "unknown setting(s) sims"),
        ("list.json", "holds list, not a dict"),
        ("missing.json", "--config: no file"),
        ("typo.py", "it defines neither OVERRIDES (a dict of settings) nor GAME"),
        ("exits.py", "exits.py exited (code 3) as it was read"),  # not a silent exit 3
        ("run --resume --config=cpu", "--config with --resume: "),
    ):
        argv = [f"--config={tmp_path / name}"]
        if name.startswith("run"):
            argv = [f"--workdir={tmp_path / 'run'}", "--resume", "--config=cpu"]
        assert train.main(argv) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err


def test_the_cpu_recipe_applies_to_any_game():
    from azjax.commands import train
    from configs.cpu import cpu_recipe

    run, _ = train.parse(["--game=hex", "--size=5", "--config=cpu", "--iterations=3"])
    recipe = cpu_recipe("hex")
    assert (run.game, run.game_options["size"], run.iterations) == ("hex", 5, 3)
    assert (run.search, run.num_filters, run.opening_plies) == (
        recipe["search"],
        recipe["num_filters"],
        2,  # 0..2 plies: the hours that met the Hex target (0..4's did not, session 63)
    )
    assert run.augment and run.train_steps == 30  # measured on 6x6 Hex (docs/strength.md)
    othello, _ = train.parse(["--game=othello", "--config=cpu"])
    assert othello.game == "othello" and othello.opening_plies == 6 and othello.augment  # its hour
    assert othello.train_steps == 90 and othello.ownership_weight == 1.5
    assert (othello.search, othello.puct_values, othello.c_puct) == ("puct", "raw", 1.25)
    assert othello.game_options["mobility"] and othello.make_game().observation_shape[-1] == 5
    assert (othello.lr_schedule, othello.branch_prob) == ("cosine", 0.5)  # two hours, session 49
    assert othello.resign_threshold == 0.9 and run.resign_threshold == 0  # session 103; Hex never
    assert run.ownership_weight == 1.5  # measured on 6x6 Hex and Othello
    steps, _ = train.parse(["--game=othello", "--config=cpu", "--train_steps=20"])
    assert steps.train_steps == 20  # a flag over the recipe
    gpu, _ = train.parse(["--game=othello"])  # configs/othello.py: measured on an H200
    assert gpu.augment and gpu.num_filters == 64
    c4, _ = train.parse(["--game=connect_four", "--config=cpu"])
    assert c4.augment and c4.train_steps == 30 and c4.ownership_weight == 0  # as measured
    assert (c4.search, c4.puct_values) == ("puct", "raw")  # docs/strength.md, as measured
    assert c4.policy_head_kernel == 1 and run.policy_head_kernel == othello.policy_head_kernel == 3
    assert c4.opening_plies == 2  # random openings, three seeds in session 96


@pytest.mark.parametrize(
    "field, module, constant",
    [
        ("value_head", "azjax.network", "VALUE_HEADS"),
        ("puct_values", "azjax.search", "PUCT_VALUES"),
        ("lr_schedule", "azjax.training", "LR_SCHEDULES"),
        ("policy_target", "azjax.selfplay", "POLICY_TARGETS"),
    ],
)
def test_literal_choices_are_the_implementations(field, module, constant):
    """config.py stays free of flax and mctx, so it spells these choices out: they must be what
    the module that implements them accepts, or a flag would pass the check and fail later."""
    import importlib

    meta = {f.name: f.metadata for f in dataclasses.fields(cfg.Config)}
    assert tuple(meta[field]["choices"]) == getattr(importlib.import_module(module), constant)


def test_train_and_evaluate_checks_a_config_made_without_load(tmp_path):
    """A Config from dataclasses.replace (or built by hand) went in unchecked: num_simulations=-1
    ended in a ZeroDivisionError deep in the memory check, learning_rate=nan trained an
    iteration and was reported as divergence, a game name an AttributeError."""
    from azjax import train_and_evaluate

    toy = cfg.load("tictactoe")
    for bad, said in (
        (dict(num_simulations=-1), "num_simulations must be >= 1"),
        (dict(learning_rate=float("nan")), "learning_rate must be finite"),
    ):
        with pytest.raises(ValueError, match=said):
            train_and_evaluate(dataclasses.replace(toy, **bad), str(tmp_path / "run"))
    with pytest.raises(TypeError, match="config must be an azjax.config.Config"):
        train_and_evaluate("tictactoe", str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
