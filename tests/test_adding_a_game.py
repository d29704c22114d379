"""docs/adding_a_game.md's worked example, the m,n,k-game (examples/mnk_game.py): registered through
the public API it passes the shared API check, plays scripted games exactly, matches OpenSpiel's
`mnk`, and trains through train.py; `games.register` refuses taken names and bad targets."""

import json
import os

import jax
import numpy as np
import pyspiel
import pytest
from spiel_reference import compare_with_openspiel

import games
from azjax import config as cfg
from azjax.commands import train
from examples.mnk_game import MNKGame
from games.check import check_game

M, N, K = 4, 3, 3  # not square: rows and columns cannot be swapped unnoticed


class EnvMNK(MNKGame):
    """The same game under another name, registered through $AZJAX_GAMES below."""

    name = "mnk_env"


@pytest.fixture(scope="module")
def mnk():
    games.register("mnk", "examples.mnk_game:MNKGame")
    yield games.make("mnk", m=M, n=N, k=K)
    games.unregister("mnk")


def test_the_example_passes_the_shared_api_check(mnk):
    check_game(mnk)


def play(game, moves):
    step = jax.jit(game.step)
    state = game.init()
    for m in moves:
        state = step(state, game.parse_action(m, state))
    return state


def test_an_anti_diagonal_wins_and_the_board_is_exact(mnk):
    # X: d1 c2 b3 (anti-diagonal), O: a1 a2
    s = play(mnk, ["d1", "a1", "c2", "a2", "b3"])
    assert bool(mnk.is_terminal(s))
    np.testing.assert_array_equal(mnk.returns(s), [1, -1])
    np.testing.assert_array_equal(s.board, [2, 0, 0, 1, 2, 0, 1, 0, 0, 1, 0, 0])
    assert not mnk.legal_mask(s).any()
    assert mnk.render(s).splitlines()[1:] == [" 1 O . . X", " 2 O . X .", " 3 . X . ."]


def test_two_in_a_row_is_not_three_and_o_wins_a_row(mnk):
    s = play(mnk, ["a1", "a3", "b1", "b3", "d2", "c3"])  # X a1 b1 (not 3), O a3 b3 c3
    np.testing.assert_array_equal(mnk.returns(s), [-1, 1])
    obs = np.asarray(mnk.observe(play(mnk, ["a1", "a3", "b1"])))  # O to move: plane 0 is O
    assert obs.shape == (N, M, 3) and obs[2, 0, 0] == 1 and obs[0, 1, 1] == 1
    assert not obs[..., 2].any()
    with pytest.raises(ValueError, match="not a move"):
        mnk.parse_action("a4")  # three rows


def test_bad_options_are_named(mnk):
    with pytest.raises(ValueError, match="k must be an integer in 1..4"):
        games.make("mnk", m=4, n=3, k=5)


def test_the_example_matches_openspiel_mnk(mnk):
    stats = compare_with_openspiel(
        mnk, pyspiel.load_game("mnk", {"m": M, "n": N, "k": K}), lambda a: a, num_games=300
    )
    assert 5 <= stats["mean_length"] <= M * N


class StonesTaken(MNKGame):
    """A broken copy: the mover may also play on the opponent's stones, so games can go on."""

    name = "mnk_broken"

    def legal_mask(self, state):
        return ((state.board == 0) | (state.board == 2 - state.player)) & ~state.terminal


def test_the_check_names_a_game_that_does_not_end_rather_than_hang():
    # the trajectory's 16 games happened to end at 4,4,3; the playout looped for ever
    with pytest.raises(AssertionError, match="random games lasted longer than max_game_length"):
        check_game(StonesTaken(m=4, n=4, k=3))


def test_a_game_module_in_the_working_folder_is_found_off_the_path(tmp_path, monkeypatch):
    """A console script (azjax-train) has its bin/ folder on the path, not the folder it runs
    in: a target there was 'no module' (python -m and python train.py put that folder first)."""
    import sys

    (tmp_path / "azjax_test_local_mnk.py").write_text("from examples.mnk_game import MNKGame\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        assert games._resolve("mnk", "azjax_test_local_mnk:MNKGame") is MNKGame
    finally:
        sys.modules.pop("azjax_test_local_mnk", None)
    with pytest.raises(ValueError, match=f"no module 'nowhere_mnk' in {tmp_path} or on the path"):
        games._resolve("mnk", "nowhere_mnk:MNKGame")


def test_register_refuses_taken_names_and_bad_targets(mnk):
    with pytest.raises(ValueError, match="'mnk' is taken"):
        games.register("mnk", MNKGame)
    with pytest.raises(ValueError, match="'hex' is taken"):
        games.register("hex", "games.hex:Hex")
    with pytest.raises(ValueError, match="no module 'examples.nope'"):
        games.register("nope", "examples.nope:Nope")
    with pytest.raises(ValueError, match="has no 'Nope'"):
        games.register("nope", "examples.mnk_game:Nope")
    with pytest.raises(ValueError, match="not of the form 'module:Class'"):
        games.register("nope", "examples.mnk_game.MNKGame")
    with pytest.raises(ValueError, match="is not a Game"):
        games.register("nope", "examples.mnk_game:lines")
    with pytest.raises(ValueError, match="MNKGame.name is 'mnk', not 'gomoku'"):
        games.register("gomoku", MNKGame)

    class Forgot(MNKGame):  # no @dataclass: make("forgot") built the parent's 5 x 5, k = 4
        name = "forgot"
        m: int = 3

    with pytest.raises(ValueError, match="declares m but is not itself a dataclass.*@dataclasses"):
        games.register("forgot", Forgot)
    with pytest.raises(ValueError, match="lowercase letters"):
        games.register("M-N-K", MNKGame)
    with pytest.raises(ValueError, match="cannot unregister 'hex'"):
        games.unregister("hex")
    assert not {"nope", "gomoku", "forgot"} & set(games.names())


def test_the_environment_registers_for_the_scripts(monkeypatch):
    monkeypatch.setenv(games.ENVIRONMENT, "mnk_env=test_adding_a_game:EnvMNK")
    assert "mnk_env" in games.names()
    config = cfg.load("mnk_env", {"m": 3, "n": 3, "k": 3})  # no configs/mnk_env.py: the defaults
    assert config.make_game() == EnvMNK(m=3, n=3, k=3)
    assert config.num_filters == cfg.Config().num_filters
    monkeypatch.setenv(games.ENVIRONMENT, "mnk_env=test_adding_a_game:EnvMNK,hex=games.hex:Hex")
    with pytest.raises(ValueError, match="AZJAX_GAMES: game name 'hex' is taken"):
        games.names()
    monkeypatch.setenv(games.ENVIRONMENT, "mnk_env")
    with pytest.raises(ValueError, match="AZJAX_GAMES: bad entry 'mnk_env'"):
        games.names()
    monkeypatch.delenv(games.ENVIRONMENT)
    with pytest.raises(ValueError, match=r"game must be one of connect_four, hex.*AZJAX_GAMES"):
        cfg.validate(config)  # gone with the variable: the Config's game choices are live


def test_train_py_trains_the_registered_game(mnk, tmp_path):
    workdir = str(tmp_path / "mnk")
    argv = ["--game=mnk", f"--m={M}", f"--n={N}", f"--k={K}", "--batch_games=8"]
    argv += ["--num_simulations=4", "--num_blocks=1", "--num_filters=4", "--value_hidden=4"]
    argv += ["--train_steps=2", "--train_batch_size=16", "--iterations=1", "--eval_interval=0"]
    assert train.main(argv + ["--no_progress", f"--workdir={workdir}"]) == 0
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    assert summary["game"] == "mnk" and summary["game_options"] == {"m": M, "n": N, "k": K}
    assert summary["iterations"] == 1 and summary["games"] > 0
    # the doc's next steps: its network plays, and a match keeps match.json without a record
    # format (before: "no symmetries known for mnk" for any ckpt: agent, and no match.json)
    from azjax.commands import evaluate

    out = str(tmp_path / "match")
    argv = ["match", f"ckpt:{workdir},sims=2", "random", "--games=2", f"--out={out}"]
    assert evaluate.main(argv) == 0
    record = json.load(open(os.path.join(out, "match.json")))
    assert record["game"] == "mnk" and len(record["game_records"]) == 2
