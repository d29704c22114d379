"""The run configuration: per-game defaults, overrides, validation, JSON round trip."""

import dataclasses

import pytest

from azjax import config as cfg


def test_game_defaults_then_overrides():
    config = cfg.load("hex", {"num_simulations": 7, "size": 5})
    assert config.num_simulations == 7
    assert config.game_options == {"size": 5, "swap": False}
    assert config.num_filters == 128  # configs/hex.py
    assert cfg.load("hex").game_options["size"] == 6


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
        ({"batch_games": 2.5}, "batch_games must be a int"),
        ({"swap": True, "rows": 3}, "unknown setting(s) rows"),
        ({"opening_plies": 65}, "opening_plies must be <= 64"),
        ({"size": 1}, "size must be an integer in 2..19"),
    ],
)
def test_bad_values_are_named(overrides, message):
    with pytest.raises(ValueError) as e:
        cfg.load("hex", overrides)
    assert message in str(e.value)


def test_unknown_fields_in_json_are_refused():
    text = cfg.load("tictactoe").to_json().replace('"seed"', '"sead"')
    with pytest.raises(ValueError, match="unknown field"):
        cfg.Config.from_json(text)
