"""evaluate.py: the match / tournament / curve commands at toy scale, bad input included."""

import json
import os
import shutil
import signal
import threading

import numpy as np
import pytest

import games
from azjax.commands import evaluate
from azjax.eval import calibration

GAME = games.make("tictactoe")


# ---- commands ------------------------------------------------------------------------------------
def _json(folder, name):
    with open(os.path.join(folder, name)) as f:
        return json.load(f)


def test_match_of_a_checkpoint_takes_the_game_from_it(tiny_run, tmp_path, capsys):
    out = str(tmp_path / "m")
    assert (
        evaluate.main(
            ["match", f"ckpt:{tiny_run},sims=2", "minimax:depth=1", "--games=4", f"--out={out}"]
        )
        == 0
    )
    record = _json(out, "match.json")
    assert record["game"] == "tictactoe" and record["games"] == 4
    # the network played, its step resolved: the spec names another once the run trains on
    assert record["checkpoints"] == {f"ckpt:{tiny_run},sims=2": f"{tiny_run}@2"}
    res = record["result"]
    assert res["first"]["games"] == res["second"]["games"] == 2
    overall = res["overall"]
    assert overall["wins"] + overall["draws"] + overall["losses"] == 4
    for k in ("wins", "draws", "losses"):
        assert overall[k] == res["first"][k] + res["second"][k]
    assert record["per_move"]["A"]["simulations"] == 2
    text = capsys.readouterr().out
    assert "A moved" in text and "overall" in text and "±" in text


def test_matches_started_in_the_same_second_write_folders_of_their_own(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(evaluate.time, "strftime", lambda fmt: "20261124-151707")
    argv = ["match", "random", "minimax:depth=1", "--game=tictactoe", "--games=2"]
    assert evaluate.main(argv) == 0 and evaluate.main([*argv[:-1], "--games=4"]) == 0
    folders = sorted(os.listdir(tmp_path / "runs" / "eval"))
    assert folders == ["match-20261124-151707", "match-20261124-151707-2"]
    games = [_json(tmp_path / "runs" / "eval" / f, "match.json")["games"] for f in folders]
    assert games == [2, 4]
    assert "wrote runs/eval/match-20261124-151707-2/match.json" in capsys.readouterr().out
    assert evaluate.main([*argv, "--openings=sometimes"]) == 2  # refused before any game
    assert evaluate.main(["match", "random", "nobody", "--game=tictactoe"]) == 2
    assert sorted(os.listdir(tmp_path / "runs" / "eval")) == folders  # no empty folders left


def test_equal_time_match_reports_simulations_per_move(tmp_path, capsys, monkeypatch):
    # Tiny probes and a budget below one simulation: the calibration settles on 1 simulation,
    # whose search it has compiled already (two compiles in all, not three).
    monkeypatch.setattr(calibration, "PROBE_SIMULATIONS", (1, 3))
    out = str(tmp_path / "t")
    assert (
        evaluate.main(
            [
                "match",
                "mcts:seconds=0.000001",
                "random",
                "--game=tictactoe",
                "--games=2",
                f"--out={out}",
            ]
        )
        == 0
    )
    a = _json(out, "match.json")["per_move"]["A"]
    assert a["budget"] == 0.000001 and a["simulations"] == 1 and a["seconds"] > 0
    assert a["rollouts"] == a["simulations"] + 1  # pure MCTS rolls out every leaf
    assert "sims" in capsys.readouterr().out


def test_tournament_writes_matrix_heatmap_and_elo(tmp_path, capsys):
    out = str(tmp_path / "r")
    specs = ["random", "perfect", "minimax:depth=9"]  # the last two draw every game
    assert (
        evaluate.main(["tournament", *specs, "--game=tictactoe", "--games=4", f"--out={out}"]) == 0
    )
    record = _json(out, "tournament.json")
    ratio = np.array([[np.nan if v is None else v for v in row] for row in record["win_ratio"]])
    assert np.isnan(np.diag(ratio)).all()
    off = ~np.eye(3, dtype=bool)
    assert np.allclose((ratio + ratio.T)[off], 1.0)
    assert len(record["matches"]) == 3 and set(record["elo"]) == set(specs)
    games = [g for m in record["matches"] for g in m["game_records"]]  # every game's moves
    assert len(games) == 12 and all(5 <= len(g["moves"]) <= 9 for g in games)
    assert ratio[2, 0] >= 0.5  # perfect play does not lose to random play
    assert ratio[1, 2] == ratio[2, 1] == 0.5  # a draw is half a point to each side
    elo = [record["elo"][s]["elo"] for s in specs]
    assert sum(elo) == pytest.approx(0.0, abs=1e-6)
    assert os.path.getsize(os.path.join(out, "win_ratio.png")) > 1000
    assert "Elo" in capsys.readouterr().out


def test_a_stopped_tournament_leaves_no_earlier_tournaments_files(tmp_path, monkeypatch):
    """An --out given again holds this tournament's files only, from its start: a stop before
    its first match once left the earlier tournament's complete tournament.json there."""
    from azjax.eval import tournament

    out = tmp_path / "t"
    out.mkdir()
    for stale in ("tournament.json", "win_ratio.png"):
        (out / stale).write_text("{}")

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tournament, "round_robin", stopped)
    with pytest.raises(KeyboardInterrupt):
        tournament.run_tournament(GAME, ["random", "random"], str(out), games=2)
    assert os.listdir(out) == []


def test_a_match_whose_games_folder_is_a_file_is_refused_before_its_games(tmp_path, capsys):
    (tmp_path / "games").write_text("")
    argv = ["match", "random", "random", "--game=tictactoe", f"--out={tmp_path}"]
    assert evaluate.main(argv) == 2
    err = capsys.readouterr()
    assert "games is a file" in err.err and "--out" in err.err and err.out == ""  # no game


def test_a_stopped_evaluation_leaves_no_empty_folder_of_its_own(tmp_path, capsys, monkeypatch):
    """A signal ends evaluate.py by os._exit, past the worker's `finally`: the folder it
    reserved under runs/eval was left behind empty, as a refusal's is not."""
    from azjax import cli
    from azjax.eval import tournament

    monkeypatch.chdir(tmp_path)

    release = threading.Event()

    def stopped(*args, **kwargs):  # a Ctrl-C while the worker is busy, as inside XLA
        os.kill(os.getpid(), signal.SIGINT)
        release.wait(30)
        raise KeyboardInterrupt  # the worker's own end, after the process would have left

    left = []
    monkeypatch.setattr(tournament, "round_robin", stopped)
    monkeypatch.setattr(cli.os, "_exit", left.append)
    try:
        assert evaluate.main(["tournament", "random", "random", "--game=tictactoe"]) == 130
        assert left == [130] and "SIGINT" in capsys.readouterr().err
        assert not os.path.exists("runs")  # runs/eval/tournament-... and the parents it made
    finally:
        release.set()


def test_a_tournament_from_openings_plays_each_with_both_colours(tmp_path):
    """--openings: minimax at full depth is deterministic, so without openings its pair plays
    two distinct games; from 3 random openings it plays each once with each colour."""
    out = str(tmp_path / "o")
    specs = ["minimax:depth=9", "minimax:depth=2"]
    argv = ["tournament", *specs, "--game=tictactoe", "--openings=random:3:2", f"--out={out}"]
    assert evaluate.main(argv) == 0
    record = _json(out, "tournament.json")
    assert record["openings"] == "random:3:2"
    games = record["matches"][0]["game_records"]
    assert len(games) == 6  # --games is twice the openings
    starts = [tuple(g["moves"][:2]) for g in games]
    assert starts[:3] == starts[3:] and len(set(starts)) == 3
    assert [g["a_played"] for g in games] == ["black"] * 3 + ["white"] * 3
    assert evaluate.main([*argv[:-1], "--openings=sometimes", f"--out={out}2"]) == 2


def test_curve_plots_every_checkpoint(tiny_run, tmp_path, monkeypatch):
    import jax

    from azjax import checkpoint
    from azjax.eval import curve

    opponents = []  # the network each checkpoint's vs_previous match plays against
    play = curve.play_games

    def recorded(game, a, b, *args, **kwargs):
        if b.search is not None and b.search.epsilon:  # the epsilon-greedy match: vs previous
            opponents.append(b.variables)
        return play(game, a, b, *args, **kwargs)

    monkeypatch.setattr(curve, "play_games", recorded)
    out = str(tmp_path / "c")
    assert (
        evaluate.main(["curve", tiny_run, "--games=2", "--sims=2", "--mcts_sims=2", f"--out={out}"])
        == 0
    )
    # checkpoint 2 against checkpoint 1 (a mutation that kept the first network passed)
    _, first, _ = checkpoint.load_checkpoint(tiny_run, 1)
    same = jax.tree_util.tree_map(np.array_equal, opponents[1], first)
    assert len(opponents) == 2 and all(jax.tree_util.tree_leaves(same))
    differs = jax.tree_util.tree_map(np.array_equal, opponents[0], first)
    assert not all(jax.tree_util.tree_leaves(differs))  # checkpoint 1's: the network it began from
    record = _json(out, "curve.json")
    assert [row["step"] for row in record["curve"]] == [1, 2]
    assert all(row["training_games"] > 0 for row in record["curve"])
    assert record["curve"][0]["vs_mcts"]["overall"]["games"] == 2
    assert os.path.getsize(os.path.join(out, "curve.png")) > 1000


def test_curve_reads_the_rows_a_checkpoint_holds_beyond_metrics_jsonl(tiny_run, tmp_path):
    """A run still training (or killed) writes a row once the next checkpoint is on disk: its
    newest checkpoint had no self-play count, and the curve's plots switched to iterations."""
    from azjax.checkpoint import run_rows
    from azjax.eval.curve import run_progress, training_games

    full = training_games(tiny_run)
    run = str(tmp_path / "run")
    shutil.copytree(tiny_run, run)
    path = os.path.join(run, "metrics.jsonl")
    lines = open(path).read().splitlines(keepends=True)
    open(path, "w").writelines(lines[:-1])  # iteration 2's row not written yet
    assert [r["iteration"] for r in run_rows(run)] == [1, 2]
    assert training_games(run) == full
    assert run_progress(run)(2) == run_progress(tiny_run)(2)


def test_curve_skips_a_checkpoint_the_run_removed_meanwhile(tiny_run, tmp_path, monkeypatch):
    """A run training with --keep_checkpoints removes old checkpoints while a curve reads them:
    the curve failed with "no checkpoint 42 ...; have [46, 47, 48]" after the first."""
    from azjax import checkpoint
    from azjax.eval import curve

    run = str(tmp_path / "run")
    shutil.copytree(tiny_run, run)
    real = curve.load_checkpoint

    def removing(path, step=None, **kwargs):  # the run removes checkpoint 1 as it is asked for
        if step == 1:
            shutil.rmtree(os.path.join(run, "checkpoints", "1"))
        return real(path, step, **kwargs)

    monkeypatch.setattr(curve, "load_checkpoint", removing)
    out = str(tmp_path / "c")
    argv = ["curve", run, "--errors_only", f"--out={out}"]
    assert evaluate.main(argv) == 0
    record = _json(out, "curve.json")
    assert [row["step"] for row in record["curve"]] == [2] and record["removed"] == [1]
    assert checkpoint.steps_on_disk(run) == [2]


def test_curve_lists_the_checkpoints_before_it_reads_the_rows(tiny_run, tmp_path, monkeypatch):
    """On a run still training, the rows were read before the checkpoints were listed: every
    checkpoint saved in between (seconds, while the first network is built) had no games."""
    from azjax.eval import curve

    run = str(tmp_path / "run")
    shutil.copytree(tiny_run, run)
    path = os.path.join(run, "metrics.jsonl")
    lines = open(path).read().splitlines(keepends=True)
    open(path, "w").writelines(lines[:-1])
    later = str(tmp_path / "2")
    shutil.move(os.path.join(run, "checkpoints", "2"), later)  # not saved yet
    real = curve.start_network

    def saving(*args, **kwargs):  # the run saves checkpoint 2 meanwhile
        shutil.move(later, os.path.join(run, "checkpoints", "2"))
        return real(*args, **kwargs)

    monkeypatch.setattr(curve, "start_network", saving)
    out = str(tmp_path / "c")
    assert evaluate.main(["curve", run, "--errors_only", f"--out={out}"]) == 0
    rows = _json(out, "curve.json")["curve"]
    assert rows and all(row["training_games"] is not None for row in rows)


def test_a_checkpoint_removed_while_read_is_said_so(tiny_run, tmp_path):
    """A run still training with --keep_checkpoints removes its oldest while other commands read
    them: a checkpoint gone mid-read was called corrupt, and @latest failed when its newest
    went; an older step than the run keeps is named as such."""
    from azjax import checkpoint

    run = str(tmp_path / "run")
    shutil.copytree(tiny_run, run)
    real = checkpoint.Checkpointer._restore
    gone = []

    def removing(self, template, step):  # the run removes the step being read, once
        if not gone:
            gone.append(step)
            shutil.rmtree(os.path.join(run, "checkpoints", str(step)))
        return real(self, template, step)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(checkpoint.Checkpointer, "_restore", removing)
        with pytest.raises(
            checkpoint.CheckpointError, match="checkpoint 2 of .* was removed while"
        ):
            checkpoint.load_checkpoint(run, 2)
    shutil.copytree(
        os.path.join(tiny_run, "checkpoints", "2"), os.path.join(run, "checkpoints", "2")
    )
    gone.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(checkpoint.Checkpointer, "_restore", removing)
        assert checkpoint.load_checkpoint(run)[2] == 1  # @latest: the newest left
    assert gone == [2]
    with pytest.raises(
        checkpoint.CheckpointError, match=r"older than its oldest, 2: the run keeps"
    ):
        shutil.copytree(
            os.path.join(tiny_run, "checkpoints", "2"), os.path.join(run, "checkpoints", "2")
        )
        shutil.rmtree(os.path.join(run, "checkpoints", "1"))
        checkpoint.load_checkpoint(run, 1)


def test_a_set_aside_checkpoint_is_said_where_it_went(tiny_run, tmp_path, capsys):
    run = str(tmp_path / "run")
    shutil.copytree(tiny_run, run)
    aside = os.path.join(run, "set_aside-20261206-120000")
    os.makedirs(aside)
    shutil.move(os.path.join(run, "checkpoints", "2"), os.path.join(aside, "2"))
    argv = ["match", f"ckpt:{run}@2", "random", "--games=2", f"--out={tmp_path / 'm'}"]
    assert evaluate.main(argv) == 2
    assert f"(it was set aside in {aside} by a --resume_step" in capsys.readouterr().err
    from azjax.commands import train  # and where train.py is asked for it

    for argv in (
        [f"--workdir={run}", "--resume", "--resume_step=2"],
        ["--game=tictactoe", f"--init_from={run}@2", f"--workdir={tmp_path / 'new'}"],
    ):
        assert train.main([*argv, "--no_progress"]) == 2
        assert f"(it was set aside in {aside} by a --resume_step" in capsys.readouterr().err


def test_curve_errors_only_measures_each_checkpoint_without_matches(
    tiny_run, tmp_path, monkeypatch, capsys
):
    from azjax import solved

    # A made-up Tic-Tac-Toe set (the plumbing, not the values): from the empty board every move
    # draws but a1; after b2 every move draws but c3, in place of the package's set.
    values = np.zeros((2, 9), np.int8)
    values[0, 0] = values[1, 8] = -1
    values[1, 4] = solved.ILLEGAL
    monkeypatch.setattr(solved, "SETS", str(tmp_path / "sets"))
    solved.save_set(solved.SolvedSet("tictactoe", {}, ((), (4,)), values), solved.set_path(GAME))
    import jax

    from azjax.eval import curve

    keys = []
    choose = curve.choose_moves
    monkeypatch.setattr(curve, "choose_moves", lambda *a: keys.append(a[-1]) or choose(*a))
    out = str(tmp_path / "c")
    os.makedirs(out)
    with open(os.path.join(out, "curve.png"), "w") as f:  # an earlier curve's plot in --out
        f.write("old")
    assert evaluate.main(["curve", tiny_run, "--errors_only", "--sims=2", f"--out={out}"]) == 0
    # one key for every checkpoint's error rate, none of their matches' (the curve's key, whose
    # split is fold_in(key, 0 or 1): checkpoint 1's matches' base)
    base = jax.random.PRNGKey(0)
    assert len(keys) == 2 and np.array_equal(keys[0], keys[1])
    assert not np.array_equal(keys[0], base)
    for step in (1, 2):
        assert not np.array_equal(keys[0], jax.random.fold_in(base, step))
    assert capsys.readouterr().out.strip().endswith("curve.json, curve_errors.png")
    record = _json(out, "curve.json")
    assert [row["step"] for row in record["curve"]] == [1, 2]
    for row in record["curve"]:
        assert "vs_mcts" not in row and row["errors"]["positions"] == 2
        assert row["errors"]["errors"] == round(2 * row["errors"]["rate"])
    assert os.path.getsize(os.path.join(out, "curve_errors.png")) > 1000
    assert not os.path.exists(os.path.join(out, "curve.png"))
    # --every=K: every K-th checkpoint counted back from the last, which is always measured
    argv = ["curve", tiny_run, "--measures=errors", "--every=2", "--sims=2", f"--out={out}2"]
    assert evaluate.main(argv) == 0
    record = _json(f"{out}2", "curve.json")
    assert [row["step"] for row in record["curve"]] == [2] and record["every"] == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["match", "ckpt:{tmp}/missing", "random"], "no run folder"),
        (["match", "random", "ckpt:{tmp}/missing", "--game=tictactoe"], "no run folder"),
        (["match", "alphabeta", "random", "--game=tictactoe"], "unknown agent 'alphabeta'"),
        (["match", "ckpt:{run}", "random", "--game=hex", "--size=3"], "is for tictactoe"),
        (["match", "random", "random"], "give --game=NAME"),
        (["match", "random", "random", "--game=chess"], "unknown game 'chess'"),
        (
            ["match", "random", "random", "--game=hex", "--size=1"],
            "size must be an integer in 2..19",
        ),
        (
            ["match", "random", "random", "--game=tictactoe", "--games=0"],
            "--games must be at least 1",
        ),
        (["curve", "{tmp}/missing"], "holds no checkpoints"),
        (["curve", "{run}@1"], "curve takes a run folder and evaluates each of its checkpoints"),
        (["curve", "{run}/checkpoints/1"], "curve takes a run folder"),
        (["curve", "pretrained/tictactoe"], "(an exported network, one checkpoint): give a run"),
        (["curve", "{run}", "--game=hex"], "is a tictactoe {} run, not hex"),
        (["curve", "{run}", "--size=5"], "--size is not an option of tictactoe"),  # no --game
        (["curve", "{run}", "--table={tmp}/t.json"], "--table is for ladder: give it with"),
        # options the curve's measures would not use: accepted and ignored before
        (
            ["curve", "{run}", "--errors_only", "--epsilon=0.3", "--games=8"],
            "--games, --epsilon are for matches: give them with --measures=...,matches (this "
            "curve measures errors)",
        ),
        (["curve", "{run}", "--ladder_games=4"], "--ladder_games is for ladder"),  # the default
        (["curve", "{run}", "--errors_only"], "--errors_only: no solved positions for tictactoe"),
        (["curve", "{run}", "--measures=errors"], "--measures=errors: no solved positions"),
        (
            ["curve", "{run}", "--measures=elo"],
            "--measures: unknown elo; choose from matches, errors, ladder",
        ),
        (["curve", "{run}", "--errors_only", "--measures=ladder"], "not both"),
        (["curve", "{run}", "--ladder_games=0"], "--ladder_games must be at least 1"),
        (
            ["curve", "{run}", "--measures=ladder", "--rounds=0"],
            "--rounds must be auto or a whole number",
        ),
        (["curve", "{run}", "--ladder_max_sims=-2"], "--ladder_max_sims must be -1"),
        (["curve", "{run}", "--every=0"], "--every must be at least 1"),
        (
            ["curve", "{run}", "--measures=ladder", "--table={tmp}/none.json"],
            "none.json': no such file (leave it out for the package's table)",
        ),
    ],
)
def test_bad_input_exits_with_code_2(argv, message, tiny_run, tmp_path, capsys, monkeypatch):
    from azjax import solved

    monkeypatch.setattr(solved, "SETS", str(tmp_path / "no-sets"))  # a package without sets
    argv = [a.format(tmp=tmp_path, run=tiny_run) for a in argv] + [f"--out={tmp_path / 'o'}"]
    assert evaluate.main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("evaluate.py: error:") and message in err
    assert out == ""  # the one line is all: no match header before it
    assert not os.path.exists(tmp_path / "o")  # nothing written


@pytest.mark.parametrize(
    "argv",
    [
        ["match", "bogus", "random", "--game=tictactoe"],
        ["place", "random", "--game=tictactoe", "--games=0"],
        ["ladder", "--game=tictactoe", "--rungs=9:2"],
    ],
)
def test_a_refused_evaluation_leaves_no_folder_behind(argv, tmp_path, monkeypatch, capsys):
    """Without --out, a refusal left the runs/eval/ it had made for its records."""
    monkeypatch.chdir(tmp_path)
    assert evaluate.main(argv) == 2
    assert "error:" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
    (tmp_path / "runs" / "eval").mkdir(parents=True)  # an earlier evaluation's folders stay
    assert evaluate.main(argv) == 2
    assert os.listdir(tmp_path / "runs") == ["eval"]


def test_usage_errors_exit_with_code_2():
    with pytest.raises(SystemExit) as e:
        evaluate.main(["match", "random"])
    assert e.value.code == 2


def test_one_command_at_a_time_writes_an_out_folder(tmp_path, capsys):
    """Two matches given one --out at once interleaved their game files, and one failed on the
    other's temporary file (a reviewer: 3 of 15 pairs)."""
    from azjax.checkpoint import WorkdirLock
    from azjax.commands.evaluate import OUT_LOCK

    out = tmp_path / "out"
    argv = ["match", "random", "random", "--game=tictactoe", "--games=2", f"--out={out}"]
    out.mkdir()
    with WorkdirLock(str(out), name=OUT_LOCK, holder="another evaluate.py", flag="--out"):
        assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert "is in use by process" in err and "(another evaluate.py)" in err
    assert "choose another --out" in err and not (out / "match.json").exists()
    assert evaluate.main(argv) == 0
    assert (out / "match.json").exists() and not (out / OUT_LOCK).exists()  # left clean
