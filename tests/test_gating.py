"""Gating (`--gating`, azjax/gating.py): the gate keeps the best network when the candidate loses
and replaces it when it wins (stubbed matches), the best is saved and restored on resume, an ungated
run has no gate, bad settings are one line; experiments/gating.py at toy size provides the runs."""

import dataclasses
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import readme_metrics

import azjax
from azjax import gating, loop, parallel
from azjax.checkpoint import (
    Checkpointer,
    CheckpointError,
    RunState,
    load_checkpoint,
    read_config,
    read_run_state,
)
from azjax.commands import train
from azjax.eval import parse_agent

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


def test_gate_games_start_after_two_random_moves(config):
    # the real gate match plays in tests/test_experiments.py (the gating experiment's toy run)
    game = config.make_game()
    opening = gating.fixed_opening(game, jax.random.PRNGKey(2), gating.OPENING_PLIES)
    assert int(np.sum(np.asarray(game.observe(opening))[..., :2])) == 2  # two stones
    assert int(game.current_player(opening)) == 0


# ---- in the training loop ------------------------------------------------------------------------
def _rows(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _gate_of(workdir, step):
    return read_run_state(workdir, step)[1]


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """experiments/gating.py at toy size: an ungated and a gated Tic-Tac-Toe run (a gate every
    iteration, 2 games), each checkpoint against pure MCTS."""
    from experiments import gating as gating_experiment

    out = str(tmp_path_factory.mktemp("gating") / "out")
    code = gating_experiment.main(
        [
            "--game=tictactoe",
            f"--out={out}",
            "--minutes=0",
            "--games=2",
            "--errors_sims=4",
            "--gating_games=2",
            "--gating_interval=1",
            "--no_progress",
            "--iterations=3",
            "--checkpoint_interval=3",
            "--batch_games=8",
            "--num_simulations=4",
            "--num_filters=4",
            "--value_hidden=4",
            "--num_blocks=1",
            "--train_batch_size=16",
            "--train_steps=2",
            "--replay_games=20",
        ]
    )
    assert code == 0
    return out


def _leaves_equal(a, b) -> list[bool]:
    return [
        np.array_equal(x, y)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
    ]


def test_the_experiment_compares_gated_and_ungated_runs(experiment):
    results = json.load(open(os.path.join(experiment, "results.json")))
    ungated, gated = results["curves"]["ungated"], results["curves"]["gated"]
    assert [r["iteration"] for r in ungated] == [r["iteration"] for r in gated] == [3]
    assert "best" not in ungated[0] and sum(ungated[0]["network"]["wdl"]) == 2
    assert sum(gated[0]["best"]["wdl"]) == 2 and gated[0]["gates_passed"][1] == 3
    assert results["configs"]["gated"]["gating"] == 0.55
    assert results["configs"]["ungated"]["gating"] == 0.0


def test_the_experiment_gives_the_final_networks_exact_error_rates(experiment):
    errors = json.load(open(os.path.join(experiment, "results.json")))["errors"]["agents"]
    assert list(errors) == ["ungated", "gated", "gated best"]
    assert all(e["positions"] == 573 and 0 <= e["rate"] <= 1 for e in errors.values())
    assert "z" in errors["gated best"]["against_first"]


def test_a_gated_runs_best_network_plays_as_net_best(experiment):
    """`ckpt:RUN,net=best` and `load_checkpoint(..., network="best")` give the gate's best network
    (the one self-play used); an ungated run has none, and says so in one line."""
    gated, ungated = (os.path.join(experiment, n) for n in ("gated", "ungated"))
    saved = _gate_of(gated, 3)
    _, best, step = load_checkpoint(gated, network="best")
    assert step == 3 and all(_leaves_equal(best, saved.gate.best))
    assert all(_leaves_equal(load_checkpoint(gated)[1], saved.train.variables))
    game = read_config(gated).make_game()
    agent = parse_agent(f"ckpt:{gated},net=best,sims=2", game)
    assert all(_leaves_equal(agent.variables, saved.gate.best))
    with pytest.raises(CheckpointError, match=r"has no best network: the run was not gated"):
        parse_agent(f"ckpt:{ungated},net=best", game)
    with pytest.raises(ValueError, match="net must be one of learner, best"):
        parse_agent(f"ckpt:{gated},net=worst", game)


def test_an_ungated_run_has_no_gate(experiment):
    workdir = os.path.join(experiment, "ungated")
    assert all(not any(k.startswith("gate") for k in r) for r in _rows(workdir))
    assert _gate_of(workdir, 3).gate is None


def test_the_gate_in_the_loop_counts_and_saves(experiment):
    workdir = os.path.join(experiment, "gated")
    rows = _rows(workdir)
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    assert not readme_metrics.undocumented(rows)
    assert all(sum(r["gate/wdl"]) == 2 for r in rows)  # the real gate match, 2 games a gate
    assert [r["gate/accepted_total"] for r in rows] == list(
        np.cumsum([r["gate/accepted"] for r in rows])
    )
    for r in rows:  # accepted: the best is this iteration's network; else the one before
        assert r["gate/accepted"] == int(r["gate/score"] > 0.55)
    best = [0] + [r["iteration"] if r["gate/accepted"] else None for r in rows]
    for i in range(1, len(best)):
        best[i] = best[i] if best[i] is not None else best[i - 1]
    assert [r["gate/best_iteration"] for r in rows] == best[1:]
    saved = _gate_of(workdir, 3)
    assert int(saved.gate.best_iteration) == best[-1] and int(saved.gate.gates) == 3


def test_resume_restores_the_best(experiment, tmp_path):
    workdir = str(tmp_path / "gated")
    shutil.copytree(os.path.join(experiment, "gated"), workdir)
    config = dataclasses.replace(read_config(workdir), iterations=5)
    fns = loop.make_iteration(config, parallel.make_mesh())
    checkpointer = Checkpointer(workdir)
    try:
        run = loop._open_run(config, workdir, fns, checkpointer, True, None)
    finally:
        checkpointer.close()
    saved = _gate_of(workdir, 3)
    assert all(_leaves_equal(run.gate.best, saved.gate.best))
    assert (int(run.gate.best_iteration), int(run.gate.accepted), int(run.gate.gates)) == (
        int(saved.gate.best_iteration),
        int(saved.gate.accepted),
        3,  # a new gate would say 0
    )
    assert gating.selfplay_variables(run) is run.gate.best  # self-play plays the best


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
