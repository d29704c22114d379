"""Solved positions and the exact error rate: the shipped set, the arithmetic, the solver that
built the set (against games/othello.py and a plain negamax), the CLI and the in-loop measure."""

import json
import math
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

import games
from azjax import solved as sv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OTHELLO6 = games.make("othello", size=6)
CONNECT_FOUR = games.make("connect_four")
HAS_CC = shutil.which("cc") is not None or shutil.which("gcc") is not None


@pytest.fixture(scope="module")
def shipped():
    solved = sv.load_set(OTHELLO6)
    assert solved is not None, "the package ships solved positions for 6x6 Othello"
    return solved


HEX5 = games.make("hex", size=5)
SHIPPED = {
    "othello-size6": OTHELLO6,
    "othello-size8": games.make("othello", size=8),
    "connect_four-cols7-connect4-rows6": CONNECT_FOUR,
    "hex-size5-swapfalse": HEX5,
    "hex-size6-swapfalse": games.make("hex", size=6),
    "tictactoe": games.make("tictactoe"),
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_each_shipped_set_replays_to_the_positions_it_values(name):
    game = SHIPPED[name]
    assert sorted(sv.shipped()) == sorted(SHIPPED)
    solved = sv.load_set(game)
    assert len(solved) >= 500 and sv.set_path(game).endswith(name + ".json")
    states = sv.start_states(game, solved)
    legal = np.asarray(jax.vmap(game.legal_mask)(states))
    terminal = np.asarray(jax.vmap(game.is_terminal)(states))
    # every position is live, the set values exactly its legal moves, and every one is a decision
    assert not terminal.any()
    np.testing.assert_array_equal(legal, solved.values != sv.ILLEGAL)
    assert set(np.unique(solved.values)) <= {sv.ILLEGAL, -1, 0, 1}
    worst = np.where(solved.values == sv.ILLEGAL, 2, solved.values).min(axis=1)
    assert (worst < solved.best).all() and (solved.best >= 0).all()
    assert len(set(solved.moves)) == len(solved)
    boards = jax.vmap(game.board)(states) if hasattr(game, "board") else states.board  # Hex's
    empties = (np.asarray(boards).reshape(len(solved), -1) == 0).sum(axis=1)
    lo, hi = solved.info["empties"]
    assert empties.min() >= lo and empties.max() <= hi


def test_error_rate_and_paired_comparison_by_hand():
    # three positions of a 4-action game; -2 marks illegal actions
    values = np.array([[1, -1, 0, -2], [0, 0, -1, -2], [-2, 1, 1, -1]], np.int8)
    solved = sv.SolvedSet("toy", {}, ((0,), (1,), (2,)), values)
    np.testing.assert_array_equal(solved.best, [1, 0, 1])
    np.testing.assert_array_equal(sv.errs(solved, [0, 2, 1]), [False, True, False])
    # an illegal move errs, and so does a resignation (-1) or an action past the table
    np.testing.assert_array_equal(sv.errs(solved, [3, 1, 0]), [True, False, True])
    np.testing.assert_array_equal(sv.errs(solved, [-1, 7, 2]), [True, True, False])
    rate = sv.error_rate(solved, [2, 2, 3])  # errs in all three
    assert (rate.errors, rate.positions, rate.rate, rate.ci95) == (3, 3, 1.0, 0.0)
    rate = sv.error_rate(solved, [1, 0, 1])  # errs in the first only
    assert rate.errors == 1 and rate.won == 0.5 and rate.drawn == 0.0
    won_only = sv.SolvedSet("toy", {}, ((0,), (2,)), values[[0, 2]])
    assert sv.error_rate(won_only, [0, 3]).drawn is None  # no drawn positions: no rate there
    assert rate.ci95 == pytest.approx(1.96 * math.sqrt(1 / 3 * 2 / 3 / 3), rel=1e-3)
    a = np.array([True, True, True, False, False])
    b = np.array([False, False, True, True, False])
    p = sv.paired(a, b)
    assert (p.only_a, p.only_b) == (2, 1)
    assert p.difference == pytest.approx(0.2) and p.z == pytest.approx(1 / math.sqrt(3))
    assert sv.paired(a, a).z == 0.0


def test_a_set_round_trips_and_bad_sets_are_refused(tmp_path, shipped):
    path = str(tmp_path / "set.json")
    few = sv.SolvedSet("othello", {"size": 6}, shipped.moves[:5], shipped.values[:5], {"a": 1})
    sv.save_set(few, path)
    back = sv.load_set(OTHELLO6, path)
    assert back.moves == few.moves and back.info == {"a": 1}
    np.testing.assert_array_equal(back.values, few.values)
    assert sv.load_set(OTHELLO6, path + ".missing") is None
    with pytest.raises(ValueError, match="is for othello {'size': 6}, not othello {'size': 8}"):
        sv.load_set(games.make("othello", size=8), path)
    # another game's set: named as such before its moves are read as this game's ("not a move")
    with pytest.raises(ValueError, match="is for othello {'size': 6}, not tictactoe {}"):
        sv.load_set(games.make("tictactoe"), path)
    data = json.loads(open(path).read())
    data["positions"][0]["moves"] = "e4 zz"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="cannot be read: othello: 'zz' is not a move"):
        sv.load_set(OTHELLO6, str(tmp_path / "bad.json"))
    (tmp_path / "torn.json").write_text(open(path).read()[:50])
    with pytest.raises(ValueError, match="cannot be read"):
        sv.load_set(OTHELLO6, str(tmp_path / "torn.json"))


def negamax(state, step, legal_mask) -> int:
    """Win / draw / loss for the player to move, by plain negamax over the game's module."""
    if bool(state.terminal):
        return int(np.sign(np.asarray(state.rewards)[int(state.player)]))
    best = -1
    for a in np.flatnonzero(np.asarray(legal_mask(state))):
        best = max(best, -negamax(step(state, int(a)), step, legal_mask))
        if best == 1:
            break
    return best


SOLVED_GAMES = [(OTHELLO6, 6), (CONNECT_FOUR, 6)]  # (game, empty squares checked)


@pytest.mark.skipif(not HAS_CC, reason="no C compiler for the solver")
@pytest.mark.parametrize("game, empties", SOLVED_GAMES, ids=["othello6", "connect_four"])
def test_the_solver_values_moves_as_a_plain_negamax_over_the_game_does(tmp_path, game, empties):
    from experiments.solved_positions import KINDS, Solver, compile_solver

    step, legal_mask = jax.jit(game.step), jax.jit(game.legal_mask)
    cells = int(np.prod(game.board_shape))
    rng = np.random.default_rng(0)
    checked = 0
    with Solver(compile_solver(str(tmp_path), game.name), game) as solver:
        while checked < 6:
            state = game.init()
            while (
                not state.terminal
                and cells - int((np.asarray(game.board(state)) > 0).sum()) > empties
            ):
                state = step(state, int(rng.choice(np.flatnonzero(np.asarray(legal_mask(state))))))
            if bool(state.terminal):
                continue
            batch = jax.tree.map(lambda x: x[None], state)
            own, opp = (x[0] for x in KINDS[game.name].board(game, batch))
            values = solver.solve(own, opp)
            legal = np.flatnonzero(np.asarray(legal_mask(state)))
            assert sorted(values) == list(legal) == solver.legal(own, opp)
            for a, v in values.items():
                assert v == -negamax(step(state, a), step, legal_mask), (a, values)
            checked += 1


@pytest.mark.skipif(not HAS_CC, reason="no C compiler for the solver")
@pytest.mark.parametrize("size", [6, 8])
def test_the_othello_solvers_table_search_values_moves_as_its_plain_alpha_beta(tmp_path, size):
    """Above 6 empty squares the solver orders moves and keeps a table; built with
    LAST_EMPTIES=64 it is a plain alpha-beta over the empty squares (the search the negamax test
    checks at 6): both value every move of positions with 11 to 14 empty squares alike, 16 of
    them with a drawing move (where the searches' null windows matter)."""
    from experiments.solved_positions import KINDS, Solver, compile_solver

    game = games.make("othello", size=size)
    batch = jax.tree.map(lambda x: x[None], game.init())
    start = tuple(int(x[0]) for x in KINDS["othello"].board(game, batch))
    rng = np.random.default_rng(size)
    plain_exe = compile_solver(str(tmp_path), "othello", ["LAST_EMPTIES=64"])
    with Solver(compile_solver(str(tmp_path)), game) as table, Solver(plain_exe, game) as plain:
        drawn = 0
        while drawn < 16:
            own, opp = start
            target = int(rng.integers(11, 15))
            while size * size - bin(own | opp).count("1") > target:
                moves = table.legal(own, opp)
                if moves == [game.pass_action] and table.legal(opp, own) == [game.pass_action]:
                    break  # the game ended early: no position here
                own, opp = table.step(own, opp, int(rng.choice(moves)))
            else:
                values = table.solve(own, opp)
                assert values == plain.solve(own, opp)
                assert sorted(values) == table.legal(own, opp)
                drawn += 0 in values.values()


@pytest.mark.skipif(not HAS_CC, reason="no C compiler for the solver")
@pytest.mark.parametrize(
    "game, flags",
    [
        (OTHELLO6, ["--pair", "random", "minimax:depth=1", "--games=4", "--empties=8:14"]),
        (CONNECT_FOUR, ["--game=connect_four", "--games=8", "--empties=20:28"]),
    ],
    ids=["othello6", "connect_four"],
)
def test_building_a_set_checks_the_solver_against_the_game_and_keeps_decisions(
    tmp_path, game, flags, monkeypatch, capsys
):
    from experiments import solved_positions

    out = str(tmp_path / "set.json")
    argv = ["--pairs=random/random", "--per_game=3", f"--out={out}", *flags]
    assert solved_positions.main(argv) == 0
    built = sv.load_set(game, out)
    assert built.info["games"] == int(flags[-2].split("=")[1])
    pairs = [["random", "minimax:depth=1"]] if "--pair" in flags else [["random", "random"]]
    assert built.info["players"] == pairs  # --pair A B replaces --pairs
    assert built.info["drawn"] >= len(built) >= 1
    worst = np.where(built.values == sv.ILLEGAL, 2, built.values).min(axis=1)
    assert (worst < built.best).all()
    assert solved_positions.main(["--pairs=random", f"--out={out}"]) == 2
    assert solved_positions.main(["--pair", "ckpt:nowhere", "random", f"--out={out}"]) == 2
    assert solved_positions.main(["--game=connect_four", "--rows=8", f"--out={out}"]) == 2
    monkeypatch.setenv("CC", str(tmp_path / "no-compiler"))  # refused before any game is played
    assert solved_positions.main(["--pairs=random/random", "--games=2", f"--out={out}"]) == 2
    assert "the solver" in capsys.readouterr().err


PERFECT_GAMES = [(games.make("tictactoe"), 6), (games.make("hex", size=3), 5)]


@pytest.mark.parametrize("game, empties", PERFECT_GAMES, ids=["tictactoe", "hex3"])
def test_the_perfect_player_values_moves_as_a_plain_negamax_does(game, empties):
    from experiments.solved_positions import PerfectSolver

    solver = PerfectSolver(game)
    step, legal_mask = jax.jit(game.step), jax.jit(game.legal_mask)
    rng = np.random.default_rng(1)
    checked = 0
    while checked < 5:
        moves, state = [], game.init()
        while not state.terminal and int((np.asarray(state.board) == 0).sum()) > empties:
            moves.append(int(rng.choice(np.flatnonzero(np.asarray(legal_mask(state))))))
            state = step(state, moves[-1])
        if bool(state.terminal):
            continue
        values = solver.solve(state)
        assert sorted(values) == list(np.flatnonzero(np.asarray(legal_mask(state))))
        for a, v in values.items():
            assert v == -negamax(step(state, a), step, legal_mask), (moves, a, values)
        ply, key, _ = solver.positions(moves + [0], empties, empties)[0]
        assert ply == len(moves) and key == np.asarray(state.board).tobytes()
        checked += 1


@pytest.mark.parametrize(
    "game, flags",
    [
        (games.make("tictactoe"), ["--game=tictactoe", "--empties=2:7"]),
        (games.make("hex", size=4), ["--game=hex", "--size=4", "--empties=6:12"]),
    ],
    ids=["tictactoe", "hex4"],
)
def test_building_a_set_with_the_perfect_player_keeps_decisions(tmp_path, game, flags, capsys):
    from experiments import solved_positions

    out = str(tmp_path / "set.json")
    argv = ["--pairs=random/random", "--games=8", "--per_game=3", f"--out={out}", *flags]
    assert solved_positions.main(argv) == 0
    built = sv.load_set(game, out)
    assert built.info["games"] == 8 and built.info["drawn"] >= len(built) >= 1
    worst = np.where(built.values == sv.ILLEGAL, 2, built.values).min(axis=1)
    assert (worst < built.best).all()
    states = sv.start_states(game, built)  # the stored moves replay to positions with a choice
    assert (np.asarray(jax.vmap(game.legal_mask)(states)).sum(axis=1) > 1).all()
    best_moves = built.values.argmax(axis=1)
    assert sv.error_rate(built, best_moves).errors == 0
    capsys.readouterr()
    assert solved_positions.main(["--game=hex", "--size=7", f"--out={out}"]) == 2
    assert "no solver for hex {'size': 7, 'swap': False}" in capsys.readouterr().err
    for bad, says in [
        (["--empties=a:b"], "--empties: LO:HI, two integers, got a:b"),
        (["--empties=10:12"], "at most the board's 9 cells"),
        (["--games=200", "--opening_plies=2"], "needs 100 distinct openings of --opening_plies=2"),
    ]:
        assert solved_positions.main(["--game=tictactoe", "--pairs=random/random", *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and says in err, err


# a game of 6x6 Othello to its end, each move the lowest legal one
FINISHED = (8, 7, 6, 0, 13, 9, 1, 2, 3, 4, 10, 12, 22, 11, 5, 16, 17, 25, 19, 24, 18, 26, 30)
FINISHED += (23, 27, 28, 29, 31, 32, 33, 34, 35)


# ~bool(finished) (an int's inversion, right only by its bits) warns from Python 3.12 on
@pytest.mark.filterwarnings("error:Bitwise inversion:DeprecationWarning")
def test_evaluate_errors_refuses_positions_it_cannot_score(tmp_path, shipped, capsys):
    from azjax.commands import evaluate

    row = shipped.values[0]
    bad = {  # empty; the first position's values after an illegal move (a stone on a stone)
        "empty": ((), np.zeros((0, row.shape[0]), np.int8), "holds no positions"),
        "illegal": ((shipped.moves[0] + shipped.moves[0][-1:],), row[None], "is not legal"),
        "unvalued": ((shipped.moves[0],), np.where(row == 1, sv.ILLEGAL, row)[None], "exactly"),
        "finished": ((FINISHED,), np.full_like(row, sv.ILLEGAL)[None], "is finished"),
    }
    for name, (moves, values, message) in bad.items():
        path = str(tmp_path / f"{name}.json")
        sv.save_set(sv.SolvedSet("othello", {"size": 6}, moves, values), path)
        argv = ["errors", "random", "--game=othello", "--size=6", f"--positions={path}"]
        assert evaluate.main([*argv, f"--out={tmp_path}/o"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err and f"--positions {path!r}" in err


def test_evaluate_errors_measures_agents_position_by_position(tmp_path, shipped, capsys):
    from azjax.commands import evaluate

    positions = str(tmp_path / "few.json")
    sv.save_set(
        sv.SolvedSet("othello", {"size": 6}, shipped.moves[:12], shipped.values[:12]), positions
    )
    out = str(tmp_path / "out")
    code = evaluate.main(
        ["errors", "random", "minimax:depth=1", "--game=othello", "--size=6",
         f"--positions={positions}", f"--out={out}"]
    )  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "exact error rate on 12 solved positions" in text
    assert "minimax:depth=1 against random" in text
    record = json.loads(open(f"{out}/errors.json").read())
    rows = record["agents"]
    assert [r["agent"] for r in rows] == ["random", "minimax:depth=1"]
    few = sv.load_set(OTHELLO6, positions)
    wrong = []
    for row in rows:  # the moves recorded are legal, and their errors are the set's arithmetic
        assert all(few.values[i, a] != sv.ILLEGAL for i, a in enumerate(row["moves"]))
        wrong.append(sv.errs(few, row["moves"]))
        assert row["errors"] == int(wrong[-1].sum()) and row["positions"] == 12
    p = sv.paired(wrong[1], wrong[0])
    assert rows[1]["against_first"] == dict(
        only_this=p.only_a, only_first=p.only_b, difference=p.difference, z=p.z
    )


def test_evaluate_errors_gives_its_seed_to_agents_without_one(tmp_path):
    # minimax breaks ties at random, from the command's --seed where its spec names none
    from azjax.eval.errors import run_errors

    ttt = games.make("tictactoe")
    specs = ["minimax:depth=1", "minimax:depth=1,seed=1"]
    one = run_errors(ttt, specs, str(tmp_path / "one"), seed=1, log=lambda *a: None)["agents"]
    zero = run_errors(ttt, specs[:1], str(tmp_path / "zero"), log=lambda *a: None)["agents"]
    assert one[0]["moves"] == one[1]["moves"] != zero[0]["moves"]


def test_evaluate_errors_refuses_a_game_without_a_set(tmp_path, capsys):
    from azjax.commands import evaluate

    code = evaluate.main(["errors", "random", "--game=hex", "--size=4", f"--out={tmp_path}/o"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no solved positions for hex {'size': 4, 'swap': False}" in err[0]
    assert "connect_four-cols7-connect4-rows6, hex-size5-swapfalse, hex-size6-swapfalse" in err[0]


def test_the_loop_measures_the_error_rate_on_a_set(tmp_path, shipped, lowerings):
    from azjax import config as cfg
    from azjax.checkpoint import initial_variables

    path = str(tmp_path / "few.json")
    sv.save_set(sv.SolvedSet("othello", {"size": 6}, shipped.moves[:16], shipped.values[:16]), path)
    config = cfg.load(
        "othello", dict(num_blocks=1, num_filters=4, value_hidden=4, num_simulations=2)
    )
    assert sv.make_error_evaluation(config, path + ".missing") is None
    assert sv.make_error_evaluation(cfg.load("othello", dict(eval_errors=False)), path) is None
    assert sv.make_error_evaluation(cfg.load("hex", dict(size=4)), None) is None
    evaluate = sv.make_error_evaluation(config, path)
    variables = initial_variables(config)
    assert evaluate(variables, jax.random.key(1), compile_only=True) == {}  # the loop's thread
    with lowerings() as lowered:
        values = evaluate(variables, jax.random.key(0))
    assert lowered == []  # compiled ahead
    assert 0.0 <= values["eval/error_rate"] <= 1.0 and values["eval/error_ci95"] >= 0.0
    assert values["eval/error_rate"] * 16 == pytest.approx(round(values["eval/error_rate"] * 16))
    names = {"eval/error_rate", "eval/error_ci95", "eval/error_won", "eval/error_drawn"}
    assert set(values) <= names


def test_the_error_rate_split_over_devices_is_the_one_device_rate(tmp_path, shipped):
    # 3 host devices, 16 positions: the last device's share is filled up; the evaluation's
    # Gumbel search is deterministic, so the devices' own keys change nothing
    path = str(tmp_path / "few.json")
    sv.save_set(sv.SolvedSet("othello", {"size": 6}, shipped.moves[:16], shipped.values[:16]), path)
    script = f"""
import jax
from azjax import config as cfg, parallel, solved
from azjax.checkpoint import initial_variables
config = cfg.load("othello", dict(num_blocks=1, num_filters=4, value_hidden=4, num_simulations=4))
variables = initial_variables(config)
one = solved.make_error_evaluation(config, {path!r})(variables, jax.random.key(0))
mesh = parallel.make_mesh()
split = solved.make_error_evaluation(config, {path!r}, mesh=mesh)
variables = jax.device_put(variables, parallel.replicated(mesh))
spread = split(variables, jax.random.key(0))
print(jax.device_count(), one["eval/error_rate"], spread["eval/error_rate"])
"""
    env = dict(os.environ)
    env["XLA_FLAGS"] = env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=3"
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    devices, one, split = done.stdout.split()
    assert devices == "3" and one == split


@pytest.mark.skipif(not HAS_CC, reason="no C compiler for the solver")
def test_lost_games_values_every_move_of_a_match_and_adds_up_to_its_results(
    tmp_path, capsys, monkeypatch
):
    from azjax.commands import evaluate
    from experiments import lost_games

    out = str(tmp_path / "match")
    argv = ["match", "random", "random", "--game=othello", "--size=6", "--games=6", f"--out={out}"]
    assert evaluate.main(argv) == 0
    path = f"{out}/match.json"
    assert lost_games.main([path, "--from_ply=20"]) == 0  # every game checked: values add up
    record = json.loads(open(f"{out}/lost_games.json").read())
    match = json.loads(open(path).read())
    long_enough = sum(len(r["moves"]) > 20 for r in match["game_records"])
    throws = 0
    sooner = lost_games.ENDED_SOONER
    for s in record["summary"].values():
        rows = s["by_value"]
        assert sum(row["games"] for k, row in rows.items() if sooner not in k) == long_enough
        assert sum(row["games"] for row in rows.values()) == len(match["game_records"])
        assert s["throws"] <= s["decisions"] <= s["moves"]
        throws += s["throws"]
        for colour, held in s["held_won"].items():  # every judged game won held a won position
            judged_wins = sum(r.get("won", 0) for k, r in rows.items() if k.startswith(colour))
            judged_wins -= rows.get(f"{colour}, {sooner}", {}).get("won", 0)
            assert held["won"] == judged_wins and held["games"] >= held["won"]
        assert s["converted_score"] >= s["score"]  # converting never loses points
    assert list(record["summary"]) == ["random (A)", "random (B)"]  # an agent against itself
    assert sum(s["score"] for s in record["summary"].values()) == pytest.approx(1.0)
    assert throws > 0  # random players throw wins away
    for judged in record["games"]:
        assert all(m["chosen"] <= m["best"] and m["ply"] >= 20 for m in judged)
        assert [m["colour"] for m in judged] == [("black", "white")[m["ply"] % 2] for m in judged]
    # a won position held: at the first judged ply, or after the opponent threw the game away
    lost_line = [
        lost_games.Move(20, "black", -1, -1, True),
        lost_games.Move(21, "white", 1, 1, True),
    ]
    thrown = [lost_games.Move(20, "black", -1, -1, True), lost_games.Move(21, "white", 1, -1, True)]
    assert lost_games.best_held(lost_line, "black") == -1
    assert lost_games.best_held(lost_line, "white") == 1
    assert lost_games.best_held(thrown, "black") == 1  # white's move handed black the game
    summary = lost_games.summarise(
        [{"moves": [], "result": "white", "a_played": "black"}] * 2, [lost_line, thrown], ["A", "B"]
    )
    assert summary["A"]["held_won"] == {"black": {"games": 1, "lost": 1}}
    assert summary["B"]["held_won"] == {"white": {"games": 2, "won": 2}}
    assert (summary["A"]["score"], summary["A"]["converted_score"]) == (0.0, 0.5)
    assert (summary["B"]["score"], summary["B"]["converted_score"]) == (1.0, 1.0)
    # white resigned a game it held won (a gtp: engine may): black scored it, converted or not
    resigned = lost_games.summarise(
        [{"moves": [], "result": "black", "a_played": "black"}], [lost_line], ["A", "B"]
    )
    assert (resigned["A"]["score"], resigned["A"]["converted_score"]) == (1.0, 1.0)
    drawn = [lost_games.Move(20, "black", 0, -1, True), lost_games.Move(21, "white", 1, 1, True)]
    assert lost_games.best_held(drawn, "black") == 0
    printed = "\n".join(lost_games.report(summary, 20))
    assert "black: held a won position at some ply from 20 in 1 of 2 games" in printed
    assert (
        "score 0.000; converting every won or drawn position it held from ply 20 on: 0.500"
        in printed
    )
    # a game over before the first judged ply (a wipeout) has a row of its own, per colour
    short = {"moves": ["d3"], "result": "white", "a_played": "black"}
    summary = lost_games.summarise([short], [[]], ["A", "B"])
    assert summary["A"]["by_value"] == {f"black, {sooner}": {"games": 1, "lost": 1}}
    assert summary["B"]["by_value"] == {f"white, {sooner}": {"games": 1, "won": 1}}
    assert f"black, {sooner}" in "\n".join(lost_games.report(summary, 20))
    capsys.readouterr()

    def dump(records):
        path = str(tmp_path / "resigned.json")
        with open(path, "w") as f:
            json.dump({**match, "game_records": records}, f)
        return path

    def refused(changes, *flags):
        bad = str(tmp_path / "bad.json")
        with open(bad, "w") as f:
            json.dump({**match, **changes}, f)
        assert lost_games.main([bad, *flags]) == 2
        return capsys.readouterr().err

    # several matches of the same agents: each judged beside itself, then summed
    os.makedirs(tmp_path / "again")
    again = str(tmp_path / "again" / "match.json")
    with open(again, "w") as f:
        json.dump({**match, "game_records": match["game_records"][:4]}, f)
    total = str(tmp_path / "total.json")
    assert lost_games.main([path, again, "--from_ply=20", f"--out={total}"]) == 0
    assert "all 2 matches, 10 games" in capsys.readouterr().out
    assert os.path.exists(str(tmp_path / "again" / "lost_games.json"))
    summed = json.loads(open(total).read())
    assert summed["match"] == [path, again] and "games" not in summed
    for name, s in summed["summary"].items():
        alone = record["summary"][name]
        rows = s["by_value"]
        assert sum(row["games"] for row in rows.values()) == 10
        assert s["moves"] > alone["moves"] and s["throws"] >= alone["throws"]
    assert sum(s["score"] for s in summed["summary"].values()) == pytest.approx(1.0)
    with open(again, "w") as f:
        json.dump({**match, "agents": ["random", "perfect"]}, f)
    assert lost_games.main([path, again, "--from_ply=20"]) == 2
    assert "its game or agents differ" in capsys.readouterr().err
    assert lost_games.main([path, path, "--from_ply=20"]) == 2
    assert "in one folder" in capsys.readouterr().err

    wrong = list(match["game_records"])
    i = next(i for i, r in enumerate(wrong) if len(r["moves"]) > 20)
    swapped = {"black": "white", "white": "black", "draw": "white"}
    wrong[i] = {**wrong[i], "result": swapped[wrong[i]["result"]]}
    assert "do not add up" in refused({"game_records": wrong}, "--from_ply=20")
    wrong[i] = {**wrong[i], "moves": wrong[i]["moves"][:24] + ["resign"]}
    assert lost_games.main([dump(wrong), "--from_ply=20"]) == 0  # a resignation is not checked
    assert "opening plies" in refused({"openings": "random:3:4"}, "--from_ply=2")
    assert "no solver for hex" in refused({"game": "hex", "game_options": {"size": 7}})
    assert lost_games.main([str(tmp_path / "none.json")]) == 2
    monkeypatch.setenv("CC", str(tmp_path / "no-compiler"))
    assert lost_games.main([path, "--from_ply=20"]) == 2
    assert "the solver" in capsys.readouterr().err


@pytest.mark.parametrize("game, options", [("tictactoe", []), ("hex", ["--size=4"])])
def test_lost_games_values_a_match_by_the_perfect_player(game, options, tmp_path, capsys):
    """Tic-Tac-Toe and small Hex, which have no C solver: every move from the first valued by
    the package's perfect player, and each game's values add up to its result."""
    from azjax.commands import evaluate
    from experiments import lost_games

    out = str(tmp_path / "match")
    argv = ["match", "random", "perfect", f"--game={game}", *options, "--games=4", f"--out={out}"]
    assert evaluate.main(argv) == 0
    assert lost_games.main([f"{out}/match.json", "--from_ply=0"]) == 0
    record = json.loads(open(f"{out}/lost_games.json").read())
    summary = record["summary"]
    perfect = next(s for name, s in summary.items() if name.startswith("perfect"))
    rando = next(s for name, s in summary.items() if name.startswith("random"))
    assert perfect["throws"] == 0 and perfect["decisions"] > 0  # it never throws value away
    assert rando["moves"] > 0 and rando["throws"] <= rando["decisions"]
    assert all(judged[0]["ply"] == 0 for judged in record["games"])
    capsys.readouterr()
    if game != "tictactoe":
        return
    match = json.loads(open(f"{out}/match.json").read())
    record = match["game_records"][0]
    for changes in (  # each a malformed match.json: one line, exit code 2, no traceback
        {"game": ["tictactoe"]},
        {"game_options": "abc"},
        {"game_records": [["x", 1]]},
        {"game_records": [{**record, "moves": 5}]},
        {"game_records": [{k: v for k, v in record.items() if k != "a_played"}]},
    ):
        bad = str(tmp_path / "bad.json")
        with open(bad, "w") as f:
            json.dump({**match, **changes}, f)
        assert lost_games.main([bad]) == 2, changes
        assert "not a match.json of evaluate.py match" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--per_game=0"], "--per_game must be >= 1 and --opening_plies >= 0, got 0 and"),
        (["--opening_plies=-1"], "--per_game must be >= 1 and --opening_plies >= 0, got 2 and -1"),
        (["--out=TMP"], "is a folder; choose a file as --out"),
        (["--out=TMP/file.json/set.json"], "file.json' is a file, not a folder"),
    ],
)
def test_building_a_set_refuses_bad_flags_before_any_game(tmp_path, extra, message, capsys):
    from experiments import solved_positions

    (tmp_path / "file.json").write_text("{}")
    argv = ["--game=tictactoe", "--pairs=random/random", "--games=2"]
    argv += [a.replace("TMP", str(tmp_path)) for a in extra]
    assert solved_positions.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_lost_games_refuses_an_illegal_move_before_the_first_judged_ply(tmp_path, capsys):
    """Tic-Tac-Toe's perfect player walks every ply, judged or not: a move onto a taken cell at
    ply 1 is named, not judged from ply 5 on."""
    from azjax.commands import evaluate
    from experiments import lost_games

    out = str(tmp_path / "match")
    argv = ["match", "random", "random", "--game=tictactoe", "--games=2", f"--out={out}"]
    assert evaluate.main(argv) == 0
    path = f"{out}/match.json"
    assert lost_games.main([path, "--from_ply=5"]) == 0
    match = json.load(open(path))
    record = match["game_records"][0]
    record["moves"] = [record["moves"][0], *record["moves"][:-1]]  # ply 1 repeats ply 0's cell
    with open(path, "w") as f:
        json.dump(match, f)
    capsys.readouterr()
    assert lost_games.main([path, "--from_ply=5"]) == 2
    err = capsys.readouterr().err
    assert "game 1: move" in err and "at ply 1 is not legal" in err
