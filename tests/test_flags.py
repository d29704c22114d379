"""azjax/flags.py: flags from Config fields and game options, their values and their errors."""

import argparse

import pytest

from azjax import flags


def parser_with(game, **kwargs):
    parser = argparse.ArgumentParser()
    config_flags = flags.add_config_flags(parser, **kwargs)
    option_flags = flags.add_game_flags(parser, game)
    return parser, config_flags, option_flags


def test_boolean_flags_work_bare_or_with_a_value():
    parser, config_flags, option_flags = parser_with("hex")
    args = parser.parse_args(["--swap", "--rollout_sample"])
    assert flags.game_options(args, "hex", option_flags) == {"swap": True}
    assert flags.config_overrides(args, config_flags) == {"rollout_sample": True}
    args = parser.parse_args(["--swap=false", "--rollout_sample", "no", "--size=5"])
    assert flags.game_options(args, "hex", option_flags) == {"swap": False, "size": 5}
    assert flags.config_overrides(args, config_flags) == {"rollout_sample": False}
    assert flags.config_overrides(parser.parse_args([]), config_flags) == {}  # nothing given


def test_help_names_the_accepted_values_and_defaults():
    parser, _, _ = parser_with("hex", defaults={"num_simulations": 800})
    text = parser.format_help()
    assert "--swap [true|false]" in text and "bare --swap: true" in text
    assert "--search puct|gumbel" in text
    assert "search simulations per move (default: 800)" in " ".join(text.split())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--swap=maybe"], "--swap: expected true or false, got 'maybe'"),
        (["--size=big"], "--size: expected int, got 'big'"),
        (["--search=alphabeta"], "--search must be one of puct, gumbel; got 'alphabeta'"),
        (["--rollout_prob=1.5"], "--rollout_prob must be <= 1.0, got '1.5'"),
        (["--num_blocks=-1"], "--num_blocks must be >= 0, got '-1'"),
        (["--c_puct=nan"], "--c_puct must be finite"),
        (["--rows=5"], "--rows is not an option of hex; its options: size, swap"),
    ],
)
def test_bad_values_name_the_flag_and_what_it_accepts(argv, message):
    parser, config_flags, option_flags = parser_with(None)
    args = parser.parse_args(argv)
    with pytest.raises(ValueError) as e:
        flags.config_overrides(args, config_flags)
        flags.game_options(args, "hex", option_flags)
    assert str(e.value).startswith(message)


def test_a_game_has_its_own_options_and_no_game_has_every_option():
    assert list(flags.option_fields("hex")) == ["size", "swap"]
    assert list(flags.option_fields("tictactoe")) == []
    every = flags.option_fields(None)
    assert set(every) == {"size", "swap", "rows", "cols", "connect", "mobility"}
    assert every["swap"].default is False and every["rows"].default == 6
    parser, _, option_flags = parser_with(None)
    assert set(option_flags) == set(every)
    assert "option of hex, othello" in parser.format_help()  # --size, both games' option
    with pytest.raises(SystemExit):  # a game's parser has its own options only
        parser_with("othello")[0].parse_args(["--swap"])


def test_config_flags_can_be_chosen_or_skipped():
    _, names, _ = parser_with("hex", names=("search", "num_simulations"))
    assert names == ["search", "num_simulations"]
    _, names, _ = parser_with("hex", skip=("game", "eval_games"))
    assert "game" not in names and "eval_games" not in names and "eval_epsilon" in names
