"""Gating (`--gating`, azjax/gating.py): the gate keeps the best network when the candidate loses
and replaces it when it wins, the best is saved and restored on resume, an ungated run has no
gate, bad settings are one line."""

import dataclasses
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import azjax
import train
from azjax import gating, loop, parallel
from azjax.checkpoint import Checkpointer, RunState, read_config, run_template

GAMES = 4


def _stub(candidate_wins: list[float]):
    """A gate match whose candidate gets `candidate_wins` (+1 / 0 / -1 per game)."""
    returns = np.asarray(candidate_wins, np.float32)
    first = np.arange(len(returns)) < len(returns) // 2

    def match(candidate, best, key):
        del candidate, best, key
        return returns, first

    return match


def _tree(value: float):
    return {"params": {"w": jnp.full((3,), value)}}


@pytest.fixture(scope="module")
def config():
    return azjax.load_config("tictactoe", dict(gating=0.55, gating_games=GAMES, eval_interval=0))


def _fake_run(candidate: float, best: float, best_iteration: int = 0):
    """A RunState-like object: only `train.variables`, `key` and `gate` are used by the gate."""

    @dataclasses.dataclass(frozen=True)
    class Train:
        variables: dict

    gate = gating.init_gate(_tree(best)).replace(best_iteration=jnp.int32(best_iteration))
    return RunState(
        train=Train(_tree(candidate)), iteration=jnp.int32(5), key=jax.random.PRNGKey(0), gate=gate
    )


def test_a_losing_candidate_leaves_the_best_in_place(config):
    gate = gating.make_gate(config, match=_stub([1, -1, -1, 0]))  # (1 + 0.5) / 4 = 0.375
    run, values = gate(_fake_run(candidate=1.0, best=2.0, best_iteration=3), 5)
    assert values["gate/score"] == pytest.approx(0.375)
    assert values["gate/wdl"] == [1, 1, 2]
    assert values["gate/accepted"] == 0 and values["gate/accepted_total"] == 0
    assert values["gate/best_iteration"] == 3 and values["gate/gates"] == 1
    np.testing.assert_array_equal(run.gate.best["params"]["w"], 2.0)


def test_a_winning_candidate_replaces_the_best(config):
    gate = gating.make_gate(config, match=_stub([1, 1, 0, -1]))  # 2.5 / 4 = 0.625 > 0.55
    run, values = gate(_fake_run(candidate=1.0, best=2.0), 5)
    assert values["gate/accepted"] == 1 and values["gate/accepted_total"] == 1
    assert values["gate/best_iteration"] == 5
    np.testing.assert_array_equal(run.gate.best["params"]["w"], 1.0)
    # the next gate counts on from there; a score at the threshold is not above it
    at = dataclasses.replace(config, gating=0.5)
    run, values = gating.make_gate(at, match=_stub([1, 1, -1, -1]))(run, 6)
    assert values["gate/accepted"] == 0 and values["gate/accepted_total"] == 1
    assert values["gate/gates"] == 2 and values["gate/best_iteration"] == 5


def test_resuming_with_gating_off_drops_the_best_and_on_adds_it():
    run = _fake_run(candidate=1.0, best=2.0)
    off = gating.adapt(run, False, copy=None)
    assert off.gate is None and gating.selfplay_variables(off) is off.train.variables
    on = gating.adapt(off, True, copy=lambda tree: jax.tree_util.tree_map(jnp.copy, tree))
    assert int(on.gate.best_iteration) == 5 and int(on.gate.accepted) == 0
    np.testing.assert_array_equal(on.gate.best["params"]["w"], 1.0)


def test_the_gate_match_plays_each_colour_half_the_games(config):
    small = dataclasses.replace(
        config, num_blocks=1, num_filters=4, value_hidden=4, num_simulations=4
    )
    variables = azjax.checkpoint.initial_variables(small)
    returns, first = gating.make_gate_match(small)(variables, variables, jax.random.PRNGKey(1))
    assert returns.shape == (GAMES,) and set(np.asarray(returns).tolist()) <= {-1.0, 0.0, 1.0}
    assert np.asarray(first).tolist() == [True, True, False, False]
    game = small.make_game()
    opening = gating.fixed_opening(game, jax.random.PRNGKey(2), gating.OPENING_PLIES)
    assert int(np.sum(np.asarray(game.observe(opening))[..., :2])) == 2  # two stones
    assert int(game.current_player(opening)) == 0


# ---- in the training loop ------------------------------------------------------------------------
def _rows(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _gate_of(workdir, step):
    config = read_config(workdir, step)
    checkpointer = Checkpointer(workdir)
    try:
        run, _ = checkpointer.restore(run_template(config), step)
    finally:
        checkpointer.close()
    return run


@pytest.fixture(scope="module")
def gated(tiny_run, tmp_path_factory):
    """tiny_run (ungated, 2 iterations, a checkpoint each) resumed with gating to iteration 4:
    iteration 3's candidate wins its gate, iteration 4's loses."""
    workdir = str(tmp_path_factory.mktemp("gated") / "run")
    shutil.copytree(tiny_run, workdir)
    config = dataclasses.replace(
        read_config(workdir), iterations=4, gating=0.55, gating_games=GAMES, gating_interval=1
    )
    results = iter([_stub([1] * GAMES), _stub([-1] * GAMES)])

    def match(candidate, best, key):
        return next(results)(candidate, best, key)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gating, "make_gate_match", lambda config: match)
        azjax.train_and_evaluate(config, workdir, resume=True, progress=False)
    return workdir, config


def _leaves_equal(a, b) -> list[bool]:
    return [
        np.array_equal(x, y)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
    ]


def test_an_ungated_run_has_no_gate(tiny_run):
    assert all(not any(k.startswith("gate") for k in r) for r in _rows(tiny_run))
    assert _gate_of(tiny_run, 2).gate is None


def test_the_gate_in_the_loop_keeps_and_replaces_the_best(gated):
    workdir, _ = gated
    rows = {r["iteration"]: r for r in _rows(workdir)}
    assert "gate/score" not in rows[2]  # the ungated part of the run
    assert rows[3]["gate/accepted"] == 1 and rows[3]["gate/best_iteration"] == 3
    assert rows[4]["gate/accepted"] == 0 and rows[4]["gate/accepted_total"] == 1
    assert rows[4]["gate/gates"] == 2 and rows[4]["gate/best_iteration"] == 3
    three, four = _gate_of(workdir, 3), _gate_of(workdir, 4)
    assert all(_leaves_equal(three.gate.best, three.train.variables))  # accepted at 3
    assert all(_leaves_equal(three.gate.best, four.gate.best))  # rejected at 4
    assert not all(_leaves_equal(four.gate.best, four.train.variables))  # the learner went on
    assert int(four.gate.best_iteration) == 3 and int(four.gate.accepted) == 1


def test_resume_restores_the_best(gated):
    workdir, config = gated
    config = dataclasses.replace(config, iterations=5)
    fns = loop.make_iteration(config, parallel.make_mesh())
    checkpointer = Checkpointer(workdir)
    try:
        run = loop._open_run(config, workdir, fns, checkpointer, True, None)
    finally:
        checkpointer.close()
    saved = _gate_of(workdir, 4)
    assert all(_leaves_equal(run.gate.best, saved.gate.best))
    assert not all(_leaves_equal(run.gate.best, run.train.variables))
    assert (int(run.gate.best_iteration), int(run.gate.accepted), int(run.gate.gates)) == (3, 1, 2)
    # self-play plays the best network
    assert gating.selfplay_variables(run) is run.gate.best


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--gating=1", "gating must be in [0, 1)"),
        ("--gating=-0.1", "--gating must be >= 0.0"),
        ("--gating_games=5", "gating_games must be even"),
        ("--gating_games=0", "--gating_games must be >= 2"),
    ],
)
def test_bad_gating_settings_are_one_line(flag, message, tmp_path, capsys):
    assert train.main(["--game=tictactoe", f"--workdir={tmp_path}", flag, "--no_progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
