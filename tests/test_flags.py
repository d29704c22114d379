"""azjax/flags.py: flags from Config fields and game options, their values and their errors."""

import os

import pytest

from azjax import flags


def parser_with(game, **kwargs):
    parser = flags.Parser(prog="prog")
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
    for no, yes in (("0", "1"), ("off", "on"), ("False", "YES")):  # each spelling, any case
        args = parser.parse_args([f"--swap={no}", f"--rollout_sample={yes}"])
        assert flags.game_options(args, "hex", option_flags) == {"swap": False}
        assert flags.config_overrides(args, config_flags) == {"rollout_sample": True}


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


def error_of(parser, argv, capsys) -> str:
    """The error `parser` prints for `argv`, after checking that it is one line and exit code 2."""
    with pytest.raises(SystemExit) as exit:
        parser.parse_args(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{parser.prog}: error: "), err
    return err.strip()


def test_an_unknown_flag_is_one_line_naming_the_nearest_flags(capsys):
    parser, _, _ = parser_with("hex")
    err = error_of(parser, ["--batch_gmaes=4"], capsys)
    assert err.endswith("unrecognized arguments: --batch_gmaes=4 (did you mean --batch_games?)")
    err = error_of(parser, ["--size=5", "--bogus", "x"], capsys)
    assert err.endswith("unrecognized arguments: --bogus x (prog --help lists the flags)")
    err = error_of(parser, ["--num_simulations"], capsys)  # argparse's own errors: one line too
    assert "--num_simulations: expected one argument" in err


def test_a_flags_prefix_is_an_unknown_flag_not_the_flag_it_starts(capsys):
    parser, _, _ = parser_with("hex")
    err = error_of(parser, ["--batch=8"], capsys)  # argparse alone reads it as --batch_games
    assert "unrecognized arguments: --batch=8" in err
    err = error_of(parser, ["--lr=0.1"], capsys)  # ... and this as --lr_schedule
    assert "unrecognized arguments: --lr=0.1" in err
    commands = flags.Parser(prog="prog").add_subparsers(dest="command")
    assert commands.add_parser("match").allow_abbrev is False


def test_another_games_option_names_this_games_options(capsys):
    hints = flags.game_option_hints("connect_four")
    assert (
        hints["--size"]
        == "--size is not an option of connect_four; its options: rows, cols, connect"
    )
    assert "--rows" not in hints and set(flags.game_option_hints("hex")) >= {"--rows", "--cols"}
    assert flags.game_option_hints("tictactoe")["--swap"].endswith("tictactoe; its options: none")
    parser, _, _ = parser_with("connect_four")
    parser.hints.update(hints)
    err = error_of(parser, ["--size=6"], capsys)
    assert err.endswith(
        "--size=6 (--size is not an option of connect_four; its options: rows, cols, connect)"
    )


def test_a_subcommands_unknown_flag_is_matched_against_its_own_flags(capsys):
    parser = flags.Parser(prog="prog")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("match").add_argument("--games")
    commands.add_parser("ladder").add_argument("--rungs")
    err = error_of(parser, ["match", "--gmaes=3"], capsys)
    assert err.endswith("(did you mean --games?)")
    err = error_of(parser, ["ladder", "--gmaes=3"], capsys)  # --games is match's, not ladder's
    assert err.endswith("--gmaes=3 (prog ladder --help lists the flags)")
    err = error_of(parser, [], capsys)
    assert err.endswith("required: command (prog --help)")
    err = error_of(parser, ["--games=3", "match"], capsys)  # before the command: not its flag
    assert err.endswith(
        "--games=3 (--games goes after the command's name: prog match ... --games=...)"
    )


def test_config_flags_can_be_chosen_or_skipped():
    _, names, _ = parser_with("hex", names=("search", "num_simulations"))
    assert names == ["search", "num_simulations"]
    _, names, _ = parser_with("hex", skip=("game", "eval_games"))
    assert "game" not in names and "eval_games" not in names and "eval_epsilon" in names


def test_every_script_names_itself_as_it_is_run_in_its_parse_errors(capsys):
    """An experiment's or benchmark's argparse errors say `python -m MODULE`, as its other errors
    (`cli.script`) do, not argparse's `FILE.py`; its pre-parser (reading --game) too."""
    from benchmarks import rollouts
    from experiments import transfer

    for module, main in (
        ("experiments.transfer", transfer.main),
        ("benchmarks.rollouts", rollouts.main),
    ):
        with pytest.raises(SystemExit) as exit:
            main(["--bogus"])
        assert exit.value.code == 2
        assert capsys.readouterr().err.startswith(f"python -m {module}: error: unrecognized")
    with pytest.raises(SystemExit):
        rollouts.main(["--game=chess"])  # the pre-parser's error
    assert capsys.readouterr().err.startswith(
        "python -m benchmarks.rollouts: error: argument --game"
    )


def test_an_output_folder_is_checked_by_making_a_file_there(tmp_path):
    """check_out makes (and removes) a file in the nearest folder that exists: os.access let
    root through to /proc, where the results were then lost after the games."""
    flags.check_out(str(tmp_path / "new" / "deeper"))  # made later, by the first file
    assert list(tmp_path.iterdir()) == []  # nothing left behind
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here")
    with pytest.raises(
        ValueError, match="'/proc/azjax' cannot be written .making a file in '/proc'"
    ):
        flags.check_out("/proc/azjax")


def test_a_list_flag_keeps_its_order_and_names_what_it_does_not_know():
    """flags.names: the benchmarks' --games, --modes and --parts."""
    assert flags.names(" off, auto,", "--modes", ("auto", "on", "off")) == ["off", "auto"]
    with pytest.raises(ValueError, match=r"^--games: unknown chess, go; choose from hex, othello$"):
        flags.names("hex,chess,go", "--games", {"hex": 1, "othello": 2})
    with pytest.raises(ValueError, match=r"^--parts: unknown \(none given\); choose from train$"):
        flags.names(" , ", "--parts", ("train",))
