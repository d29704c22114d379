"""train.py --eval_opponent=SPEC at toy scale: the metrics rows hold eval/opponent_* against
random, minimax and our own GTP engine; a bad spec is one line and exit code 2 before training;
a resumed run keeps its opponent; an engine that dies is dropped and training goes on; the match
starts from `eval_opening_plies` openings."""

import json
import os
import shutil
import sys

import numpy as np
import pytest
import readme_metrics

from azjax.commands import train
from azjax.eval.stats import score_ci

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY = [
    "--game=tictactoe",
    "--batch_games=8",
    "--num_simulations=4",
    "--num_blocks=1",
    "--num_filters=8",
    "--value_hidden=8",
    "--train_steps=2",
    "--train_batch_size=16",
    "--eval_interval=1",
    "--eval_games=2",
    "--eval_ladder=false",
    "--eval_budget=0",  # an evaluation at every interval, whatever it costs
    "--checkpoint_interval=1",
    "--no_progress",
]
NAMES = ("score", "ci95", "wdl", "seconds")


def _rows(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _check_opponent_values(row, games):
    w, d, l = row["eval/opponent_wdl"]
    assert w + d + l == games
    score, half = score_ci(w, d, l)
    assert row["eval/opponent_score"] == pytest.approx(score)
    assert row["eval/opponent_ci95"] == pytest.approx(half)
    assert row["eval/opponent_seconds"] > 0


@pytest.fixture(scope="module")
def random_run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("vs_random"))
    assert (
        train.main(TOY + [f"--workdir={workdir}", "--iterations=1", "--eval_opponent=random"]) == 0
    )
    return workdir


def test_the_metrics_row_holds_the_match_against_random(random_run):
    (row,) = _rows(random_run)
    assert not readme_metrics.undocumented([row])
    _check_opponent_values(row, 2)
    assert "eval/mcts_score" in row  # beside the loop's own evaluation


def test_a_resumed_run_keeps_its_opponent(random_run, tmp_path):
    workdir = str(tmp_path / "copy")
    shutil.copytree(random_run, workdir)
    argv = [f"--workdir={workdir}", "--resume", "--iterations=2", "--no_progress"]
    assert train.main(argv + ["--eval_opponent_games=4"]) == 0
    rows = _rows(workdir)
    assert [r["iteration"] for r in rows] == [1, 2]
    _check_opponent_values(rows[1], 4)
    config = json.load(open(os.path.join(workdir, "config.json")))
    assert config["eval_opponent"] == "random" and config["eval_opponent_games"] == 4


def test_keep_checkpoints_keeps_the_step_best_names(random_run, tmp_path, monkeypatch):
    """The loop gives its Checkpointer the run's @best to keep (`loop._best_steps`, asked once
    each save is on disk; here step 1, whatever the toy scores were)."""
    from azjax import checkpoint, loop

    workdir = str(tmp_path / "copy")
    shutil.copytree(random_run, workdir)
    asked = []
    monkeypatch.setattr(loop, "_best_steps", lambda *a: asked.append(a[0]) or {1})
    argv = [f"--workdir={workdir}", "--resume", "--iterations=3", "--no_progress"]
    assert train.main(argv + ["--keep_checkpoints=1"]) == 0
    assert checkpoint.steps_on_disk(workdir) == [1, 3] and asked == [workdir, workdir]


def _one_iteration_against(spec, workdir):
    argv = TOY + [f"--workdir={workdir}", "--iterations=1", f"--eval_opponent={spec}"]
    assert train.main(argv) == 0
    (row,) = _rows(workdir)
    _check_opponent_values(row, 2)
    return row


@pytest.mark.slow  # suite time: the random opponent and the dying engine cover the loop's path
def test_minimax_as_opponent(tmp_path):
    """Minimax plays perfect Tic-Tac-Toe: an untrained network scores at most a draw."""
    row = _one_iteration_against("minimax", tmp_path / "run")
    assert row["eval/opponent_wdl"][0] == 0


@pytest.mark.slow  # the dying engine below covers gtp: in the loop; this adds a real engine
def test_our_own_gtp_engine_as_opponent(tmp_path):
    play = os.path.join(ROOT, "play.py")
    engine = f"{sys.executable} {play} --gtp --game=tictactoe --agent=random"
    _one_iteration_against(f'gtp:"{engine}"', tmp_path / "run")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("alphabeta", "unknown agent 'alphabeta'"),
        ("mcts:depth=3", "mcts: unknown option 'depth'"),
        ("human", "human asks for moves on stdin"),
        ("gtp:/no/such/engine --gtp", "gtp: cannot start"),
        ('gtp:"engine --gtp', "gtp: cannot start '\"engine --gtp': No closing quotation"),
        (f'gtp:"{sys.executable} -c pass"', "the engine does not answer"),
    ],
)
def test_a_bad_spec_is_one_line_and_exit_2_before_training(spec, message, tmp_path, capsys):
    workdir = tmp_path / "run"
    assert train.main(TOY + [f"--workdir={workdir}", f"--eval_opponent={spec}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("train.py: error: --eval_opponent: ") and message in err
    assert err.count("\n") == 1
    assert not workdir.exists()  # nothing trained


def test_a_checkpoint_of_another_game_is_refused(random_run, tmp_path, capsys):
    argv = ["--game=connect_four", f"--workdir={tmp_path}/c4", f"--eval_opponent=ckpt:{random_run}"]
    assert train.main(argv) == 2
    assert "is for tictactoe" in capsys.readouterr().err


def test_an_engine_that_dies_is_dropped_and_training_goes_on(tmp_path, capsys):
    dying = tmp_path / "dying.py"
    dying.write_text(
        "import sys\n"
        "for line in sys.stdin:\n"
        "    if line.startswith('genmove'):\n"
        "        print('out of cheese', file=sys.stderr)\n"
        "        sys.exit(3)\n"
        "    print('=\\n', flush=True)\n"
    )
    workdir = str(tmp_path / "run")
    argv = TOY + [
        f"--workdir={workdir}",
        "--iterations=2",
        f"--eval_opponent=gtp:{sys.executable} {dying}",
    ]
    assert train.main(argv) == 0
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if "--eval_opponent" in x]  # said once
    assert "failed and is dropped, training goes on" in line and "out of cheese" in line
    rows = _rows(workdir)
    assert [r["iteration"] for r in rows] == [1, 2]
    assert not any(k.startswith("eval/opponent") for r in rows for k in r)
    assert all(np.isfinite(r["eval/mcts_score"]) for r in rows)


@pytest.mark.parametrize("plies", [0, 2])
def test_the_opponent_match_starts_from_eval_opening_plies(plies, monkeypatch):
    """As the loop's own matches: each game pair from one position `plies` random plies in, once
    with each colour; from the empty board without them."""
    import jax

    import azjax
    from azjax.eval import opponent as opponent_module
    from azjax.eval.agent import batch_functions

    seen = {}

    def fake_play_games(game, a, b, num_games, key, *, openings=None):
        seen.update(num_games=num_games, openings=openings)
        raise RuntimeError("stop here")  # the opponent is then dropped: nothing else to check

    monkeypatch.setattr(opponent_module, "play_games", fake_play_games)
    config = azjax.load_config(
        "tictactoe",
        dict(eval_opponent="random", eval_opponent_games=6, eval_opening_plies=plies),
    )
    opponent = opponent_module.TrainingOpponent(config)
    assert opponent(None, jax.random.PRNGKey(0)) == {}
    assert seen["num_games"] == 6
    if not plies:
        assert seen["openings"] is None
        return
    starts = seen["openings"]
    assert len(starts) == 6 and starts[:3] == starts[3:]  # game i and i + 3: one opening
    fns = batch_functions(config.make_game())
    for moves in starts[:3]:
        assert len(moves) == plies and len(set(moves)) == plies
        state = fns.init(1)
        for move in moves:
            assert bool(np.asarray(fns.legal(state))[0, move])
            state = fns.step(state, np.asarray([move], np.int32))


def test_the_runs_seed_reaches_an_opponent_without_its_own(monkeypatch):
    """As `evaluate.py --seed`: a spiel/minimax/perfect opponent takes the run's --seed where its
    spec has no seed=, so two runs with other seeds do not replay one draw of the bot."""
    import azjax
    from azjax.eval import opponent as opponent_module

    seeds = []
    parse = opponent_module.parse_agent

    def recording_parse(text, game, *, seed=0):
        seeds.append(seed)
        return parse(text, game, seed=seed)

    monkeypatch.setattr(opponent_module, "parse_agent", recording_parse)
    for seed in (0, 7):
        config = azjax.load_config("tictactoe", dict(eval_opponent="minimax:depth=1", seed=seed))
        opponent_module.TrainingOpponent(config).close()
    assert seeds == [0, 7]


def test_the_network_searches_eval_opponent_sims_against_the_opponent():
    """`eval_opponent_sims` sets the network's simulations in the opponent's match alone; 0 keeps
    the run's `num_simulations`."""
    import azjax
    from azjax.eval.opponent import TrainingOpponent

    for sims, expected in [(0, 5), (12, 12)]:
        config = azjax.load_config(
            "tictactoe", dict(eval_opponent="random", num_simulations=5, eval_opponent_sims=sims)
        )
        with TrainingOpponent(config) as opponent:
            assert opponent.network.search.spec.num_simulations == expected


def test_eval_opponent_decisive_gives_the_network_decisive_moves_in_that_match_alone():
    """`eval_opponent_decisive` (on by default, as `ckpt:` agents play) turns decisive moves on
    in the opponent's match where self-play has them off; off, the match searches as self-play;
    a run trained with `decisive_moves` keeps them there either way."""
    import azjax
    from azjax.eval.opponent import TrainingOpponent
    from azjax.search import SearchSpec

    for options, expected in [
        ({}, True),
        ({"eval_opponent_decisive": False}, False),
        ({"decisive_moves": True, "eval_opponent_decisive": False}, True),
    ]:
        config = azjax.load_config("tictactoe", dict(eval_opponent="random", **options))
        assert SearchSpec.from_config(config).decisive_moves == options.get("decisive_moves", False)
        with TrainingOpponent(config) as opponent:
            assert opponent.network.search.spec.decisive_moves is expected
