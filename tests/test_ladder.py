"""The Elo ladder: placement on synthetic results of known Elo, the table, the CLI end to end."""

import dataclasses
import json
import math
import os
from types import SimpleNamespace

import jax
import numpy as np
import pytest
import readme_metrics

import games
from azjax.ladder import (
    ANCHOR_SIMS,
    LOOP_MAX_SIMS,
    Ladder,
    Rounds,
    bracket,
    estimate,
    load_ladder,
    moving,
    off_scale,
    parse_rounds,
    place,
    save_ladder,
    table_name,
    unmet,
)

RUNGS = np.array([-900.0, -600.0, -350.0, -150.0, 0.0, 180.0, 400.0, 650.0, 900.0, 1150.0])


def expected(r, rung):
    return 1.0 / (1.0 + 10.0 ** ((rung - r) / 400.0))


def fake_play(true_elo, seed, log=None):
    """play(rung, n): n games drawn from the Elo formula against the rung."""
    rng = np.random.default_rng(seed)

    def play(i, n):
        if log is not None:
            log.append(i)
        return float(rng.binomial(n, expected(true_elo, RUNGS[i])))

    return play


def test_estimate_recovers_a_hand_computed_rating():
    # 3 of 4 against a rung at 0 and nothing else: p = 3/4 -> r = 400 log10(3) = 190.8
    e = estimate(np.array([0.0, 500.0]), np.array([3.0, 0.0]), np.array([4.0, 0.0]), 0.0)
    assert e.elo == pytest.approx(400 * math.log10(3), abs=1e-6)
    # information n p (1 - p) = 4 * 3/16 = 3/4 on the logistic scale
    assert e.stderr == pytest.approx(400 / math.log(10) / math.sqrt(0.75), rel=1e-6)


def test_estimate_is_finite_when_every_game_was_won():
    e = estimate(RUNGS, np.eye(len(RUNGS))[-1] * 10, np.eye(len(RUNGS))[-1] * 10)
    assert RUNGS[-1] < e.elo < RUNGS[-1] + 800 and math.isfinite(e.stderr)


def test_bracket_takes_the_rungs_around_the_rating_or_the_ends():
    assert bracket(RUNGS, 50.0) == [4, 5]
    assert bracket(RUNGS, 0.0) == [4, 5]
    assert bracket(RUNGS, -5000.0) == [0, 1]
    assert bracket(RUNGS, 5000.0) == [8, 9]
    assert bracket([16.0, 32.0, 0.0, 81.0], 24.0) == [1, 2]  # 9x9 Hex's first rungs: in order


@pytest.mark.parametrize("true_elo", [-500.0, 250.0, 800.0])
def test_placement_finds_a_known_rating_and_covers_it(true_elo):
    hits = 0
    for seed in range(20):
        p = place(fake_play(true_elo, seed), RUNGS, rounds=6, games_per_rung=20, start=0.0)
        assert p.games == 6 * 2 * 20
        assert abs(p.elo - true_elo) < 150  # about 3 standard errors at 240 games
        hits += abs(p.elo - true_elo) <= p.ci95
    assert hits >= 15  # a 95% interval: about 19 of 20 (binomial: >= 15 unless it is wrong)


def test_a_strong_players_placement_is_unbiased_and_its_interval_covers_it():
    """On 9x9 Hex's shipped table (rungs to +2918) a player at +2600 placed from the anchor
    climbs past rungs far below it: a virtual draw against each of them pulled its rating about
    80 Elo down and its 95% interval covered the truth in 69% of placements. The virtual draws
    are for a player that won (or lost) every game only."""
    ladder = load_ladder(games.make("hex", size=9))
    rungs, true_elo = np.asarray(ladder.elo), 2600.0
    errors, hits = [], 0
    for seed in range(200):
        rng = np.random.default_rng(seed)

        def play(i, n, rng=rng):
            return float(rng.binomial(n, expected(true_elo, rungs[i])))

        p = place(play, rungs, rounds=4, games_per_rung=16, settle=True)
        errors.append(p.elo - true_elo)
        hits += abs(p.elo - true_elo) <= p.ci95
    assert abs(np.mean(errors)) < 25  # its standard error about 8 Elo: the prior's was -80
    assert hits >= 180  # 95%: 190 of 200 (the prior's: about 138)


def test_placement_moves_to_the_rungs_near_the_player():
    played = []
    place(fake_play(1000.0, 0, played), RUNGS, rounds=5, games_per_rung=20, start=0.0)
    assert played[:2] == [4, 5]  # starts around the guess
    assert set(played[-2:]) <= {7, 8, 9}  # ends around the true rating


def test_placement_of_a_player_off_the_top_stays_above_it():
    p = place(lambda i, n: float(n), RUNGS, rounds=3, games_per_rung=10)
    assert p.elo > RUNGS[-1] and p.played[-1] > 0
    assert off_scale(p) == 1  # the loop and `evaluate.py place` call it a lower bound
    assert off_scale(place(lambda i, n: 0.0, RUNGS, rounds=3, games_per_rung=10)) == -1
    on_scale = place(lambda i, n: n / 2, RUNGS, rounds=3, games_per_rung=10)
    assert off_scale(on_scale) == 0


def test_a_placement_that_ran_out_of_rounds_names_the_rungs_it_would_meet_next():
    """A strong player placed from the anchor climbs a bracket or so a round: after one round
    its rating asks for rungs it has not met (`unmet`, which `evaluate.py place` reports as not
    settled); given rounds enough it has met them."""
    strong = fake_play(1000.0, 0)
    early = place(strong, RUNGS, rounds=1, games_per_rung=20, start=0.0)
    assert early.elo > RUNGS[5] and unmet(early, RUNGS)
    assert all(early.played[i] == 0 for i in unmet(early, RUNGS))
    assert unmet(place(strong, RUNGS, rounds=6, games_per_rung=20, start=0.0), RUNGS) == []
    top = place(lambda i, n: float(n), RUNGS, rounds=6, games_per_rung=10)
    assert off_scale(top) == 1 and unmet(top, RUNGS) == []  # above the top: the end rungs, met


def test_a_settling_placement_plays_on_until_it_has_met_its_rungs():
    """With `settle` a placement that has not settled after its rounds plays on until it has
    (the strong player from the anchor above); one that has settled stops at its rounds, and the
    rounds more are at most one a rung."""
    played = []
    p = place(fake_play(1000.0, 0, played), RUNGS, rounds=1, games_per_rung=20, settle=True)
    assert p.rounds > 1 and unmet(p, RUNGS) == [] and len(played) == 2 * p.rounds
    assert abs(p.elo - 1000.0) < 250  # it reached the player's rungs
    near = place(fake_play(50.0, 0), RUNGS, rounds=3, games_per_rung=20, settle=True)
    assert unmet(near, RUNGS) == [] and near.rounds == 3  # settled within its rounds
    # a play that swings from all wins to all losses never settles: the cap ends it
    swing = place(lambda i, n: float(n) * (i < 5), RUNGS, rounds=1, games_per_rung=4, settle=True)
    assert swing.rounds <= 1 + len(RUNGS)


def test_a_placement_still_moving_says_which_way():
    strong = place(fake_play(1000.0, 0), RUNGS, rounds=1, games_per_rung=20)
    weak = place(fake_play(-800.0, 0), RUNGS, rounds=1, games_per_rung=20)
    settled = place(fake_play(1000.0, 0), RUNGS, rounds=6, games_per_rung=20)
    assert (moving(strong, RUNGS), moving(weak, RUNGS), moving(settled, RUNGS)) == (1, -1, 0)


def test_the_progress_bar_shows_a_rating_still_moving():
    from azjax.metrics import elo_shown

    row = {"eval/elo": 812.4, "eval/elo_top": 900.0, "eval/elo_off_scale": 0}
    assert elo_shown(row) == "812" and elo_shown(row | {"eval/elo_moving": 1}) == "812↑"
    assert elo_shown(row | {"eval/elo_moving": -1}) == "812↓"
    assert elo_shown(row | {"eval/elo_off_scale": 1, "eval/elo_moving": 1}) == ">900"


def test_the_rounds_flag():
    assert parse_rounds("auto") == Rounds(4, True) and parse_rounds("6") == Rounds(6, False)
    for bad in ["0", "-1", "lots", ""]:
        with pytest.raises(ValueError, match="--rounds must be auto or a whole number >= 1"):
            parse_rounds(bad)


def test_place_rejects_zero_rounds():
    with pytest.raises(ValueError, match="rounds and games_per_rung"):
        place(lambda i, n: 0.0, RUNGS, rounds=0, games_per_rung=4)


def test_a_ladder_up_to_a_simulation_count():
    ladder = Ladder("tictactoe", {}, (4, 8, 16), (-100.0, 0.0, 100.0), (1.0, 0.0, 1.0), 2)
    assert ladder.up_to(8).sims == (4, 8) and ladder.up_to(8).elo == (-100.0, 0.0)
    assert ladder.up_to(15).stderr == (1.0, 0.0)
    assert ladder.up_to(0) == ladder and ladder.up_to(16) == ladder
    assert ladder.up_to(2).sims == (4,)  # below every rung: the lowest still plays


def test_the_training_loops_cap_on_the_rungs():
    """eval_ladder_max_sims = -1 (the default): the table's own cap, else 8192; a value >= 0 wins
    over the table's (0: every rung). The shipped 8x8 Othello table stops the loop at 2048, whose
    4096 and 8192 rungs made a CPU run's evaluations four times as dear (docs/strength.md)."""
    from azjax import config as cfg

    plain = Ladder("tictactoe", {}, (4, 8), (-100.0, 0.0), (1.0, 0.0), 2)
    capped = dataclasses.replace(plain, loop_max_sims=4)
    assert plain.loop_cap(-1) == LOOP_MAX_SIMS == 8192 and capped.loop_cap(-1) == 4
    assert capped.loop_cap(8192) == 8192 and capped.loop_cap(0) == 0 and plain.loop_cap(16) == 16
    assert cfg.load("othello", dict(size=8)).eval_ladder_max_sims == -1
    othello8 = load_ladder(games.make("othello", size=8))
    assert othello8.loop_cap(-1) == 2048 and max(othello8.sims) > 2048
    assert load_ladder(games.make("othello", size=6)).loop_cap(-1) == LOOP_MAX_SIMS


def test_table_round_trip_and_checks(tmp_path):
    game = games.make("hex", size=3)
    ladder = Ladder("hex", dict(game.options), (8, 16), (-90.0, 0.0), (30.0, 30.0), 10)
    path = str(tmp_path / table_name("hex", game.options))
    save_ladder(ladder, path)
    assert path.endswith("hex-size3-swapfalse.json")
    assert load_ladder(game, path) == ladder
    save_ladder(dataclasses.replace(ladder, loop_max_sims=8), path)
    assert load_ladder(game, path).loop_max_sims == 8
    save_ladder(ladder, path)
    assert load_ladder(game, str(tmp_path / "missing.json")) is None
    with pytest.raises(ValueError, match="is for hex"):
        load_ladder(games.make("hex", size=4), path)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="cannot be read"):
        load_ladder(game, str(tmp_path / "bad.json"))


def test_shipped_tables_are_anchored_and_readable():
    import glob
    import os

    from azjax.ladder import TABLES

    for path in glob.glob(os.path.join(TABLES, "*.json")):
        data = json.load(open(path))
        game = games.make(data["game"], **data["game_options"])
        ladder = load_ladder(game)
        assert ladder is not None and ladder.elo[ladder.sims.index(ANCHOR_SIMS)] == 0.0
        assert list(ladder.sims) == sorted(ladder.sims)


def test_a_timed_agent_is_calibrated_once_for_its_whole_placement(ttt_table, monkeypatch):
    """Each rung's match calibrated a `seconds` agent afresh: one placement rated an agent of
    187 - 278 simulations, and paid a calibration a match."""
    from azjax.eval import calibration
    from azjax.eval.ladder import place_agent
    from azjax.eval.specs import parse_agent

    timed = []

    def time_search(agent, states, key):  # 0.1 ms a simulation: no compiling, no clock
        timed.append(agent.search.spec.num_simulations)
        return 1e-4 * agent.search.spec.num_simulations

    monkeypatch.setattr(calibration, "_time_search", time_search)
    game, said = games.make("tictactoe"), []
    agent = parse_agent("mcts:seconds=0.0008", game)
    p = place_agent(
        game,
        agent,
        load_ladder(game, ttt_table),
        rounds=2,
        games_per_rung=4,
        key=jax.random.PRNGKey(0),
        log=said.append,
    )
    assert p.games == 16  # four matches, one calibration: 16 (2 games at once) in one line
    assert timed == [16, 64]  # the probes; the line through them gives 16 (1.6 ms for 2 games)
    assert said[0] == "mcts:seconds=0.0008: 16 simulations a move (calibrated to 0.0008 s)"
    # another game's ladder placed the agent on its ratings, silently
    hex5 = load_ladder(games.make("hex", size=5))
    with pytest.raises(ValueError, match="the ladder is for hex .*, not tictactoe"):
        place_agent(game, agent, hex5, rounds=1, games_per_rung=2, key=jax.random.PRNGKey(0))
    # nor the same game's of other options (a reviewer's mutation that checked the name alone
    # passed): 5x5 Hex's ratings for a 6x6 agent
    hex6 = games.make("hex", size=6)
    with pytest.raises(
        ValueError, match="the ladder is for hex .*'size': 5.*, not hex .*'size': 6"
    ):
        place_agent(hex6, parse_agent("random", hex6), hex5, rounds=1, games_per_rung=2, key=None)


def test_ladder_and_place_commands(ttt_table, tmp_path, capsys):
    from azjax.commands import evaluate

    table = ttt_table
    data = json.load(open(table))
    assert [r["sims"] for r in data["rungs"]] == [8, 16]
    assert data["rungs"][1]["elo"] == 0.0 and sum(map(sum, data["info"]["played"])) == 8
    assert data["info"]["seed"] == 0 and data["info"]["devices"] >= 1  # what picks its games
    out = str(tmp_path / "place")
    # mcts:sims=8 is rung 8 itself: its match against rung 16 is the one compiled above
    code = evaluate.main(
        ["place", "mcts:sims=8", "--game=tictactoe", "--rounds=1", "--games=4"]
        + [f"--table={table}", f"--out={out}"]
    )
    assert code == 0
    record = json.load(open(f"{out}/place.json"))
    assert record["games"] == 8 and math.isfinite(record["elo"])
    assert record["unmet_rungs"] == []  # two rungs, both played: nothing more to meet
    # several agents: each placed as alone (the same seed, the same games), then ranked
    argv = ["place", "random", "mcts:sims=8", "--game=tictactoe", "--rounds=1", "--games=4"]
    assert evaluate.main([*argv, f"--table={table}", f"--out={out}2"]) == 0
    both = json.load(open(f"{out}2/place.json"))
    assert both["complete"] is True
    assert [r["agent"] for r in both["placements"]] == ["random", "mcts:sims=8"]
    assert both["placements"][1] == record
    ranking = both["ranking"]
    assert [r["elo"] for r in ranking] == sorted(
        (r["elo"] for r in both["placements"]), reverse=True
    )
    assert ranking[0]["below_best"] == 0.0 and ranking[1]["below_best"] >= 0.0
    assert ranking[0]["gap"] == "best" and ranking[1]["gap"] in ("estimate", "at least")
    by_name = {r["agent"]: r for r in both["placements"]}
    best, other = (by_name[r["agent"]] for r in ranking)
    at_bound = [best["off_scale"] > 0, other["off_scale"] < 0]  # a bound holds no interval
    if ranking[1]["gap"] == "estimate":
        at_bound = [False, False]
    ci = [r["ci95"] for r, bound in zip((best, other), at_bound) if not bound]
    assert ranking[1]["below_best_ci95"] == pytest.approx(math.hypot(*ci))
    said = capsys.readouterr().out
    assert "best first:" in said and "below the best" in said
    argv = ["place", "random", "random", "--game=tictactoe", "--rounds=1", "--games=2"]
    assert evaluate.main([*argv, f"--table={table}", f"--out={out}3"]) == 0
    twice = json.load(open(f"{out}3/place.json"))  # told apart, as in a tournament
    assert [r["agent"] for r in twice["ranking"]] == ["random", "random #2"] or [
        r["agent"] for r in twice["ranking"]
    ] == ["random #2", "random"]
    assert [r["checkpoint"] for r in twice["placements"]] == [None, None]


def test_curve_places_every_checkpoint_on_the_ladder(
    ttt_table, tiny_run, tmp_path, capsys, monkeypatch
):
    from azjax.commands import evaluate
    from azjax.eval import curve

    starts = []

    def place_agent(*args, start, **kwargs):  # the real one, its starting rating noted
        starts.append(start)
        return real(*args, start=start, **kwargs)

    real = curve.place_agent
    monkeypatch.setattr(curve, "place_agent", place_agent)
    out = str(tmp_path / "curve")
    argv = ["curve", tiny_run, "--measures=ladder", "--sims=2", "--ladder_games=2", "--rounds=1"]
    assert evaluate.main([*argv, f"--table={ttt_table}", f"--out={out}"]) == 0
    record = json.load(open(f"{out}/curve.json"))
    assert record["measures"] == ["ladder"] and record["complete"]
    assert record["ladder_top"] == 16  # the run's loop's cap (8192 by default) keeps both rungs
    assert (record["ladder_games"], record["ladder_rounds"]) == (2, 1)  # what it was asked
    assert record["ladder_table"] == ttt_table and record["devices"] >= 1
    assert [r["step"] for r in record["curve"]] == [1, 2]
    for row in record["curve"]:  # no matches: a placement of 1 round, 2 games a rung
        assert "vs_mcts" not in row and "errors" not in row
        assert row["ladder"]["games"] == 4 and row["ladder"]["rounds"] == 1
        assert math.isfinite(row["ladder"]["elo"]) and row["ladder"]["moving"] == 0
    placed = record["placed"]
    assert [p["iteration"] for p in placed] == [1, 2]
    assert [p["elo"] for p in placed] == [r["ladder"]["elo"] for r in record["curve"]]
    assert 0 < placed[0]["positions"] < placed[1]["positions"] and placed[1]["hours"] > 0
    assert starts == [0.0, placed[0]["elo"]]  # each from the rating of the one before
    assert os.path.getsize(f"{out}/curve_elo.png") > 1000
    assert not os.path.exists(f"{out}/curve.png")
    said = capsys.readouterr().out
    assert "checkpoint 2: ladder Elo" in said and "curve_elo.png" in said


def test_place_says_when_its_rounds_ran_out_before_it_settled(tmp_path, capsys):
    from azjax.commands import evaluate

    # a random player from the anchor: its one round, against 16 and 32 simulations, puts it
    # below them, where the next round would meet the rungs of 4 and 8
    out = str(tmp_path / "place")
    argv = ["place", "random", "--game=tictactoe", "--rounds=1", "--games=4", f"--out={out}"]
    assert evaluate.main(argv) == 0
    record = json.load(open(f"{out}/place.json"))
    assert [r["sims"] for r in record["rungs"]] == [16, 32]
    assert record["unmet_rungs"] and set(record["unmet_rungs"]) <= {4, 8}
    said = capsys.readouterr().out
    assert "not settled" in said and "still falling" in said and "--rounds=3" in said
    assert record["moving"] == -1
    # by default (--rounds=auto) it plays on until it has met them
    argv = ["place", "random", "--game=tictactoe", "--games=4", f"--out={out}"]
    assert evaluate.main(argv) == 0
    record = json.load(open(f"{out}/place.json"))
    assert record["unmet_rungs"] == [] and record["rounds"] >= 4 and record["moving"] == 0
    assert {4, 8} & {r["sims"] for r in record["rungs"]} and record["rounds_asked"] == "auto"
    assert "not settled" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ladder", "--game=tictactoe", "--rungs=5:7"], "must include 4"),
        (["ladder", "--game=tictactoe", "--rungs=lots"], "--rungs must be LO:HI"),
        (
            ["place", "random", "--game=hex", "--size=3"],
            "make one with azjax-evaluate ladder --game=hex --size=3 --swap=false --rungs=2:9",
        ),
        (["place", "ckpt:pretrained/tictactoe", "--game=hex"], "is for tictactoe {}, but"),
        (
            ["place", "random", "--game=tictactoe", "--rounds=lots"],
            "--rounds must be auto or a whole",
        ),
        (["ladder", "--game=tictactoe", "--table=/"], "is a folder; choose a file as --table"),
        (  # and were it not refused, the package's table would not be the one written
            ["ladder", "--game=tictactoe", "--out=/tmp/x", "--table=/tmp/azjax-test-t.json"],
            "not into --out: give the table's file",
        ),
        (["place", "random", "--game=tictactoe", "--table=/no.json"], "'/no.json': no such file"),
        (["curve", "/nowhere", "--measures=matches", "--table=/t.json"], "--measures=...,ladder"),
        (["errors", "random", "--game=tictactoe", "--positions=0"], "'0': no such file"),
    ],
)
def test_bad_ladder_input_is_one_line(argv, message, capsys):
    from azjax.commands import evaluate

    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_stopped_place_or_errors_leaves_no_earlier_result_in_its_out(
    ttt_table, tmp_path, monkeypatch, capsys
):
    """An --out given again: a stop before the command wrote its own file kept the earlier
    run's place.json or errors.json there, as if this run's; the stop's line says none was
    written."""
    from azjax import cli
    from azjax.commands import evaluate
    from azjax.eval import errors, ladder

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ladder, "place_agent", stopped)
    monkeypatch.setattr(errors, "choose_moves", stopped)
    monkeypatch.setattr(cli.os, "_exit", lambda code: None)
    for command, name in (("place", "place.json"), ("errors", "errors.json")):
        (tmp_path / name).write_text("{}")
        table = [f"--table={ttt_table}"] if command == "place" else []
        argv = [command, "random", "--game=tictactoe", f"--out={tmp_path}", *table]
        assert evaluate.main(argv) == 130
        assert not (tmp_path / name).exists()
        said = capsys.readouterr().err
        if command == "place":
            assert "SIGINT: stopped (place.json keeps the placements finished so far" in said
        else:
            assert "SIGINT: stopped (errors.json is written at the end: none written)" in said


def test_a_stopped_place_of_several_agents_keeps_those_placed(
    ttt_table, tmp_path, monkeypatch, capsys
):
    """place.json was written once every agent was placed: a stop lost the placements done."""
    from azjax import cli
    from azjax.commands import evaluate
    from azjax.eval import ladder

    real, calls = ladder.place_agent, []

    def second_stopped(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(ladder, "place_agent", second_stopped)
    monkeypatch.setattr(cli.os, "_exit", lambda code: None)
    argv = ["place", "random", "random", "random", "--game=tictactoe", "--rounds=1", "--games=2"]
    assert evaluate.main([*argv, f"--table={ttt_table}", f"--out={tmp_path}"]) == 130
    record = json.load(open(tmp_path / "place.json"))
    assert record["complete"] is False
    assert [r["agent"] for r in record["placements"]] == ["random"]
    assert [r["agent"] for r in record["ranking"]] == ["random"]
    assert "best first" not in capsys.readouterr().out  # said once, at the end


def _rung_games(monkeypatch):
    """play_games replaced for the ladder by the Elo formula's expected points over games of
    rungs rated 200 x log2(sims), one game of each pair drawn (no search, no compile); the pairs
    it was asked, in order."""
    from azjax.eval import ladder as eval_ladder

    asked = []

    def play(game, a, b, n, key):
        sa, sb = (int(x.name.split(":")[1]) for x in (a, b))
        asked.append((sa, sb))
        wins = round((n - 1) * expected(200 * math.log2(sa), 200 * math.log2(sb)))
        result = SimpleNamespace(wins=wins, draws=1, losses=n - 1 - wins, games=n)  # one drawn
        return SimpleNamespace(result=result, wall_seconds=0)

    monkeypatch.setattr(eval_ladder, "play_games", play)
    return asked


def test_extend_keeps_the_tables_games_and_plays_only_the_new_pairs(
    ttt_table, tmp_path, monkeypatch
):
    from azjax.commands import evaluate

    table = str(tmp_path / "ttt.json")
    before = json.load(open(ttt_table))
    with open(table, "w") as f:  # the table with a training-loop cap, which --extend keeps
        json.dump({**before, "loop_max_sims": 8}, f)
    asked = _rung_games(monkeypatch)
    argv = [
        "ladder",
        "--game=tictactoe",
        "--rungs=2:5",
        "--games=4",
        "--extend",
        f"--table={table}",
    ]
    assert evaluate.main(argv) == 0
    assert asked == [(4, 8), (4, 16), (8, 32), (16, 32)]  # span 2; 8 vs 16 was rated before
    after = json.load(open(table))
    assert [r["sims"] for r in after["rungs"]] == [4, 8, 16, 32]
    points, played = np.array(after["info"]["points"]), np.array(after["info"]["played"])
    assert points[1:3, 1:3].tolist() == before["info"]["points"]  # the kept games, as they were
    np.testing.assert_array_equal(points + points.T, played)  # a draw half a point each side
    assert played[1:3, 1:3].tolist() == before["info"]["played"]
    assert played.sum() == 2 * 4 * 5 and after["rungs"][2]["elo"] == 0.0
    assert after["info"]["extended"]["sims"] == [8, 16]
    assert after["info"]["extended"]["new_pairs"] == 4 and after["loop_max_sims"] == 8
    kept = {k: before["info"][k] for k in ("seed", "devices", "machine")}  # what played them
    assert {k: after["info"]["extended"][k] for k in kept} == kept
    assert after["rungs"][3]["elo"] > after["rungs"][2]["elo"] > after["rungs"][0]["elo"]
    asked.clear()  # the same rungs again: nothing left to play, the same table
    assert evaluate.main(argv) == 0 and asked == []
    assert json.load(open(table))["rungs"] == after["rungs"]


@pytest.mark.parametrize(
    "rungs, message",
    [("4:5", "must hold the table's (8, 16)"), ("2:4", None)],
)
def test_extend_needs_a_table_that_its_rungs_hold(ttt_table, tmp_path, rungs, message, capsys):
    from azjax.commands import evaluate

    missing = str(tmp_path / "none.json")
    argv = ["ladder", "--game=tictactoe", f"--rungs={rungs}", "--extend"]
    if message is None:  # no table there
        argv, message = [*argv, f"--table={missing}"], f"no table at {missing} to extend"
    else:
        argv.append(f"--table={ttt_table}")
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_placement_off_the_top_names_the_extension_to_rate(
    ttt_table, tmp_path, monkeypatch, capsys
):
    from azjax.commands import evaluate
    from azjax.eval import ladder as eval_ladder
    from azjax.ladder import Placement

    def won_everything(game, agent, ladder, **_):
        return Placement(400.0, 300.0, 8, np.array([0.0, 4.0]), np.array([0.0, 4.0]))

    monkeypatch.setattr(eval_ladder, "place_agent", won_everything)
    argv = ["place", "random", "--game=tictactoe", "--rounds=1", "--games=4", f"--out={tmp_path}"]
    assert evaluate.main([*argv, f"--table={ttt_table}"]) == 0
    out = capsys.readouterr().out
    assert "above the ladder" in out and "only a lower bound" in out
    assert f"evaluate.py ladder --rungs=3:6 --extend --table={ttt_table}" in out  # 8..16 sims
    # the bound, the top rung's rating (16 sims: 0), not the fit's +400 ± 300 (virtual draws)
    assert "random: Elo > +0 (8 games, 0 rounds)" in out and "± 300" not in out
    record = json.load(open(tmp_path / "place.json"))
    assert record["off_scale"] == 1 and record["elo_bound"] == 0.0


@pytest.fixture(scope="module")
def ttt_table(tmp_path_factory):
    """A two-rung Tic-Tac-Toe ladder (8 and 16 simulations), rated by the CLI."""
    from azjax.commands import evaluate

    table = str(tmp_path_factory.mktemp("ladder") / "ttt.json")
    argv = ["ladder", "--game=tictactoe", "--rungs=3:4", "--games=4", f"--table={table}"]
    assert evaluate.main(argv) == 0
    return table


def test_the_training_loops_placement(tmp_path, lowerings):
    from azjax import config as cfg
    from azjax.checkpoint import initial_variables
    from azjax.ladder import make_ladder_evaluation

    # one rung under eval_ladder_max_sims (one match to compile): the placement plays it in both
    # rounds; the rung above the cap (which the first round would bracket) is never played
    table = str(tmp_path / "ttt.json")
    save_ladder(Ladder("tictactoe", {}, (16, 64), (0.0, 400.0), (0.0, 0.0), 2), table)
    config = cfg.load(
        "tictactoe",
        dict(
            num_blocks=1,
            num_filters=4,
            value_hidden=4,
            num_simulations=4,
            eval_games=16,
            eval_ladder_max_sims=32,
        ),
    )
    assert make_ladder_evaluation(config, table + ".missing") is None
    off = cfg.load("tictactoe", dict(eval_ladder=False))
    assert make_ladder_evaluation(off, table) is None
    evaluate = make_ladder_evaluation(config, table)
    variables = initial_variables(config)
    # compiled ahead (the loop does it on a thread while it plays): the placement lowers nothing
    assert evaluate(variables, jax.random.PRNGKey(1), compile_only=True) == {}
    with lowerings() as lowered:
        values = evaluate(variables, jax.random.PRNGKey(0))
    assert lowered == []
    assert not readme_metrics.undocumented([values])
    assert values["eval/elo_games"] == 2 * 4  # two rounds of 4 games against the one rung
    assert values["eval/elo_off_scale"] in (-1, 0, 1) and values["eval/elo_top"] == 0.0
    assert values["eval/elo_moving"] == 0  # its one rung under the cap, played: settled
    assert math.isfinite(values["eval/elo"]) and 0 < values["eval/elo_ci95"] < 5000
    # the untrained network against 16 simulations of pure MCTS: well below it
    assert values["eval/elo"] < 0


def test_a_rung_compiled_in_the_placement_is_costed_without_its_compiling(
    tmp_path, lowerings, monkeypatch
):
    """A rung whose match was not compiled ahead compiles in the placement: its seconds, which
    cost the next placement, leave the compiling out (`compile_clock`), so the first estimate is
    what the second one, played from jit's cache, says. (One round, so that the match that
    compiles is the rung's last: in two, the second round's replaces its seconds.)"""
    from azjax import config as cfg
    from azjax import ladder as ladder_module
    from azjax.checkpoint import initial_variables
    from azjax.ladder import make_ladder_evaluation

    place = ladder_module.place
    monkeypatch.setattr(ladder_module, "place", lambda *a, **k: place(*a, **{**k, "rounds": 1}))
    table = str(tmp_path / "ttt.json")
    save_ladder(Ladder("tictactoe", {}, (16, 64), (0.0, 400.0), (0.0, 0.0), 2), table)
    options = dict(num_blocks=1, num_filters=4, value_hidden=4, num_simulations=4, eval_games=16)
    config = cfg.load("tictactoe", dict(options, eval_ladder_max_sims=32))
    evaluate = make_ladder_evaluation(config, table)
    variables = initial_variables(config)
    with lowerings() as lowered:
        first = evaluate(variables, jax.random.PRNGKey(0))  # compiles its one match
    assert lowered and first["eval/elo_games"] == 4  # one match, compiled in it
    again = evaluate(variables, jax.random.PRNGKey(0))
    compiling = first["eval/elo_seconds"] - again["eval/elo_seconds"]
    slack = max(0.05, min(0.25, compiling))  # timing noise, below what compiling adds
    assert first["eval/elo_next_seconds"] < again["eval/elo_next_seconds"] + slack


def test_the_loop_logs_the_ladders_elo(monkeypatch):
    from azjax import config as cfg
    from azjax import loop_eval

    def match(variables, opponent, key):
        return np.array([1.0, -1.0]), np.array([True, False])

    seen = []
    matches = lambda config, n, mesh=None: (match, match)  # noqa: E731
    monkeypatch.setattr(loop_eval, "evaluation_matches", matches)
    monkeypatch.setattr(
        loop_eval,
        "make_ladder_evaluation",
        lambda config, mesh=None, start=0.0: (
            lambda v, k, compile_only=False: (
                seen.append((v, start)) or {"eval/elo": 12.0, "eval/elo_ci95": 3.0}
            )
        ),
    )
    config = cfg.load("tictactoe", {"eval_errors": False})  # no network: only the ladder's part
    values = loop_eval.make_evaluation(config)("vars", None, jax.random.PRNGKey(0))
    assert seen == [("vars", 0.0)] and values["eval/elo"] == 12.0
    assert values["eval/mcts_score"] == 0.5
    # a resumed run's placement starts at its last logged rating (process 0's metrics)
    metrics = SimpleNamespace(rows=[{"eval/elo": 300.0}, {"loss/total": 1.0}, {"eval/elo": 450.0}])
    ratings = loop_eval.last_ratings(config, metrics)
    assert ratings == {"tictactoe": 450.0} and loop_eval.last_ratings(config, None) == {}
    loop_eval.make_evaluation(config, ratings=ratings)("vars", None, jax.random.PRNGKey(0))
    assert seen[-1] == ("vars", 450.0)
    both = cfg.load("tictactoe", {"games": "tictactoe,connect_four"})
    metrics.rows.append({"eval/connect_four/elo": -20.0})
    assert loop_eval.last_ratings(both, metrics) == {"connect_four": -20.0}  # per game


def test_curve_reads_and_draws_the_ladder_elo(tmp_path):
    from azjax.eval.curve import elo_rows
    from azjax.eval.records import plot_elo

    rows = [
        dict(iteration=1, positions=100, selfplay_seconds=1800.0, train_seconds=0.0),
        dict(iteration=2, positions=100, selfplay_seconds=1700.0, train_seconds=50.0)
        | {"eval_seconds": 50.0, "eval/elo": -120.0, "eval/elo_ci95": 80.0},
        dict(iteration=3, positions=50, selfplay_seconds=1800.0, train_seconds=0.0)
        | {"eval/elo": 300.0, "eval/elo_ci95": 90.0, "eval/elo_moving": 1},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    elo = elo_rows(str(tmp_path))
    assert elo == [
        dict(iteration=2, elo=-120.0, ci95=80.0, moving=0, positions=200, hours=1.0),
        dict(iteration=3, elo=300.0, ci95=90.0, moving=1, positions=250, hours=1.5),
    ]
    record = dict(game="tictactoe", game_options={}, elo=elo)
    plot_elo(record, str(tmp_path / "curve_elo.png"))
    assert (tmp_path / "curve_elo.png").stat().st_size > 1000
    plot_elo(dict(record, elo=elo[:1]), str(tmp_path / "settled.png"))  # no open marker
    assert (tmp_path / "settled.png").stat().st_size > 1000
    assert elo_rows(str(tmp_path / "no-run")) == []


def test_the_rungs_compiled_ahead_most_likely_first():
    from azjax.ladder import compile_order

    elo = [16.0, 32.0, 0.0, 81.0, 580.0, 842.0, 1071.0]  # 9x9 Hex's first rungs: not monotone
    assert compile_order(elo, 0.0) == [0, 2, 1, 3, 4, 5, 6]  # bracket, then inside, then out
    assert compile_order(elo, 700.0) == [4, 5, 6, 3, 2, 1, 0]  # above before below at a tie
    assert compile_order(elo, 5000.0) == [5, 6, 4, 3, 2, 1, 0]  # beyond the top: the end rungs


def test_a_placements_seconds_are_estimated_from_its_rungs():
    from azjax.ladder import placement_seconds

    sims = (256, 512, 1024, 2048, 4096)
    elo = (600.0, 750.0, 860.0, 850.0, 990.0)  # not monotone, as 8x8 Othello's near its top
    assert placement_seconds(sims, elo, 700.0, {}) == 0.0  # nothing played yet
    # the rungs it will play, played: twice their last matches' seconds
    assert placement_seconds(sims, elo, 700.0, {0: 3.0, 1: 5.0}) == 2 * (3.0 + 5.0)
    # a rating that moved up: 2048 (the last rung at or below 900) and 4096, neither played;
    # each costed from 1024, the nearest played, by the ratio of simulations to the power 1.5
    assert placement_seconds(sims, elo, 900.0, {1: 5.0, 2: 9.0}) == pytest.approx(
        2 * (2**1.5 * 9.0 + 4**1.5 * 9.0)
    )
    # a rung with fewer simulations than the nearest played costs as much as that one
    assert placement_seconds(sims, elo, 650.0, {2: 9.0}) == 2 * (9.0 + 9.0)
    # at an equal distance in simulations the dearer of the two played rungs decides
    assert placement_seconds(sims, elo, 900.0, {2: 9.0, 4: 40.0}) == 2 * (40.0 + 40.0)


def test_the_loop_expects_an_evaluation_to_cost_what_its_rungs_will(monkeypatch):
    """--eval_budget weighs the next evaluation by its ladder placement's rungs: the last one's
    placement seconds replaced by the next's estimate, every game's in a shared run."""
    from azjax import config as cfg
    from azjax import loop_eval

    assert loop_eval.next_evaluation_seconds({"eval_seconds": 50.0}) == 50.0  # no ladder
    values = {"eval_seconds": 50.0, "eval/elo_seconds": 40.0, "eval/elo_next_seconds": 400.0}
    assert loop_eval.next_evaluation_seconds(values) == 410.0
    # the compiling in it will not come again: 30 s of the 50 (of them 25 in the placement)
    compiled = {"eval_compile_seconds": 30.0, "eval/elo_compile_seconds": 25.0}
    assert loop_eval.next_evaluation_seconds({**values, **compiled}) == 50 - 30 - (40 - 25) + 400
    shared = {
        "eval_seconds": 50.0,
        "eval/hex/elo_seconds": 20.0,
        "eval/hex/elo_next_seconds": 10.0,
        "eval/othello/elo_seconds": 20.0,
        "eval/othello/elo_next_seconds": 100.0,
    }
    assert loop_eval.next_evaluation_seconds(shared) == 120.0
    # 50 s of a 1,449-s session: as long as the last (50 s) it runs, as its rungs (410 s) not
    config = cfg.load("tictactoe", {"eval_budget": 0.1})
    assert loop_eval.evaluation_affordable(config, 50.0, 1449.0, 50.0)
    assert not loop_eval.evaluation_affordable(config, 50.0, 1449.0, 410.0)


def test_the_placements_small_rungs_share_one_program(tmp_path, lowerings, monkeypatch):
    from azjax import config as cfg
    from azjax import ladder as ladder_module
    from azjax.checkpoint import initial_variables
    from azjax.ladder import make_ladder_evaluation, shared_capacity

    hex6 = games.make("hex", size=6)
    sims = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
    assert shared_capacity(hex6, sims, 16) == 256  # 16 trees of 257 nodes fit in 8 MB
    assert shared_capacity(hex6, sims, 10**6) == 4  # none fits: the smallest rung alone
    table = str(tmp_path / "ttt.json")
    save_ladder(Ladder("tictactoe", {}, (2, 4, 8), (-100.0, 0.0, 100.0), (0.0, 0.0, 0.0), 4), table)
    config = cfg.load(
        "tictactoe",
        dict(num_blocks=1, num_filters=4, value_hidden=4, num_simulations=4, eval_games=16),
    )
    variables = initial_variables(config)
    monkeypatch.setattr(ladder_module, "SHARED_TREE_BYTES", 0)  # first a program per rung
    by_rung = make_ladder_evaluation(config, table)
    with lowerings() as lowered:
        assert by_rung(variables, jax.random.PRNGKey(1), compile_only=True) == {}
    assert len(lowered) >= 3
    alone = by_rung(variables, jax.random.PRNGKey(0))
    monkeypatch.undo()
    evaluate = make_ladder_evaluation(config, table)
    with lowerings() as lowered:
        assert evaluate(variables, jax.random.PRNGKey(1), compile_only=True) == {}
    assert len(lowered) == 1  # the three rungs: one match, their simulation count its argument
    with lowerings() as lowered:
        shared = evaluate(variables, jax.random.PRNGKey(0))
    assert lowered == []
    timed = ("eval/elo_seconds", "eval/elo_compile_seconds", "eval/elo_next_seconds")  # clocks'
    assert all(shared.pop(k) >= 0.0 and alone.pop(k) >= 0.0 for k in timed)
    assert shared == alone and shared["eval/elo_games"] == 4 * 4  # the same games


def test_the_round_robin_and_a_placement_play_their_small_rungs_in_one_program(
    lowerings, monkeypatch
):
    from azjax import ladder as ladder_module
    from azjax.eval.ladder import place_agent, rate_rungs, rung_agent

    game = games.make("tictactoe")
    key = jax.random.PRNGKey(2)

    def rate_and_place():
        table = rate_rungs(game, [4, 8, 16], games_per_pair=2, span=2, key=key, log=lambda _: 0)
        agent = rung_agent(game, 6)  # a player of its own, placed on the table
        p = place_agent(game, agent, table, rounds=2, games_per_rung=2, key=key)
        return table, p

    monkeypatch.setattr(ladder_module, "SHARED_TREE_BYTES", 0)  # first a program per rung
    with lowerings() as lowered:
        alone, alone_placement = rate_and_place()
    assert len(lowered) >= 5  # three pairs, and two rungs against the player
    monkeypatch.undo()
    with lowerings() as lowered:
        shared, shared_placement = rate_and_place()
    assert len(lowered) == 2  # rung against rung, and the player against a rung
    assert shared.elo == alone.elo and shared.info["points"] == alone.info["points"]
    assert shared_placement.elo == alone_placement.elo  # the same games


def test_place_ranks_bounds_as_bounds(capsys):
    from azjax.commands.evaluate import _ranking

    def rec(agent, elo, off):
        return dict(agent=agent, elo=elo, ci95=100.0, off_scale=off, elo_bound=off and 1200.0)

    ranking = _ranking([rec("b", 900.0, 0), rec("a", 1600.0, 1), rec("c", 1500.0, 1)])
    assert [r["agent"] for r in ranking] == ["a", "c", "b"]
    assert [r["gap"] for r in ranking] == ["best", "unknown", "at least"]
    said = capsys.readouterr().out
    # a's Elo is above its bound, 1200: b is at least 300 below it, b's interval alone
    assert "not told apart: both off the ladder" in said and "at least 300 ± 100 below" in said
    assert "a  Elo > +1200" in said and "b  Elo   +900 ± 100" in said  # a bound, not the fit's
    assert [r["gap"] for r in _ranking([rec("a", 900.0, 0), rec("b", 800.0, 0)])] == [
        "best",
        "estimate",
    ]


def test_each_placement_plays_with_the_seed_its_record_names(tmp_path):
    """Placements never meet, so each agent takes --seed, as place.json records it: with --seed
    + i (as a match's agents) the second of two alike agents was placed elsewhere, by a seed
    its record did not name."""
    from azjax.commands import evaluate

    out = str(tmp_path / "p")
    argv = ["place", "minimax:depth=1", "minimax:depth=1", "--game=tictactoe", "--games=4"]
    assert evaluate.main([*argv, f"--out={out}"]) == 0
    placed = json.load(open(os.path.join(out, "place.json")))["placements"]
    assert [p["seed"] for p in placed] == [0, 0] and placed[0]["elo"] == placed[1]["elo"]
