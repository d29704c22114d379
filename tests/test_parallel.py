"""Data parallelism on 4 CPU devices: sharded results equal one device's, and no host copies.

The checks need `--xla_force_host_platform_device_count=4` before JAX starts, so they run in one
subprocess (this file run as a script: every check compiles once there) that prints its findings
as JSON; the tests below assert on them. Sizes are toys: the point is the layout, not the speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest
from xla_flags import with_host_devices

DEVICES = 4
TOY = dict(
    batch_games=8,
    num_simulations=4,
    num_blocks=1,
    num_filters=4,
    value_hidden=4,
    selfplay_steps=4,
    replay_games=8,
    train_batch_size=8,
    train_steps=2,
    min_replay=1,
    eval_interval=0,
    checkpoint_interval=1,
    iterations=2,
)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def found():
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=with_host_devices(DEVICES),
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), tmp],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_mesh_has_four_devices(found):
    assert found["devices"] == DEVICES


def test_sharded_selfplay_plays_what_one_device_plays_with_the_device_keys(found):
    assert found["selfplay_max_diff"] < 1e-5
    assert found["trajectory_spec"] == [None, "data"] and found["states_spec"] == ["data"]


def test_sharded_selfplay_with_tree_reuse_plays_what_one_device_plays(found):
    assert found["reuse_selfplay_max_diff"] < 1e-5


def test_sharded_sampling_draws_the_one_device_sample(found):
    assert found["ready"] > 0  # positions to draw: the samples compared are not all zero
    assert found["sample_equal"] and found["sample_spec"] == ["data"]
    assert found["surprise_sample_equal"]  # weighted by policy surprise too
    assert found["opponent_sample_equal"]  # and with opponent policy targets


def test_sharded_training_matches_one_device(found):
    assert found["train_step_max_diff"] < 1e-5
    assert found["train_iteration_max_diff"] < 1e-5
    assert found["params_replicated"]


def test_an_iteration_copies_nothing_to_the_host(found):
    assert found["transfer_guard"] == "ok", found["transfer_guard"]
    assert found["buffer_donated"]


def test_self_play_and_matches_end_without_a_collective(found):
    assert found["collectives"] == {"play": [], "match": [], "exit round": []}


def test_the_statistics_wait_for_self_play_on_every_device(found):
    """On several CPU devices the host waits for self-play's split results before it starts the
    statistics' collectives: a device must not wait in them while another still plays."""
    assert found["settled"] == [True]
    assert found["exit_settled"] and all(found["exit_settled"])  # ExIt: after each round


def test_the_learner_waits_for_each_call_on_several_cpu_devices(found):
    """Each learner call (one optimizer step on the CPU: a sample's all-gather and the gradient
    mean) is waited for before the next is dispatched: a 6x6 Othello hour on two devices died
    with the learner's calls queued one behind another (docs/benchmarks.md)."""
    assert found["learner_settled"] == [TOY["train_steps"]] * 2  # the loop's and ExIt's


def test_settle_does_not_wait_on_one_device(monkeypatch):
    """One device (or an accelerator's) keeps its programs queued: nothing waits."""
    import jax

    from azjax import parallel

    waited = []
    monkeypatch.setattr(jax, "block_until_ready", lambda tree: waited.append(tree) or tree)
    tree = {"x": 1}
    assert parallel.settle(tree, parallel.make_mesh(jax.devices()[:1])) is tree
    assert waited == []


def test_sampling_from_some_columns_is_the_one_device_sample(found):
    """Early stopping's sets (`make_sampler(columns=...)`): the devices' blocks of columns draw
    what one device draws, and only from the columns asked for, on two of the four devices."""
    assert found["columns_sample"] == [True, ["1", "6"]]


def test_an_early_stopped_apprentice_trains_on_four_devices(found):
    history, finite = found["early_stopped"]
    assert 2 <= history <= 3 and finite  # epoch 0, then one or two (max_epochs=2)


def test_exit_rounds_split_their_games_over_the_devices(found):
    """Expert Iteration's round on 4 devices labels what each device's games, played and
    labelled alone with its key, give: the buffer's rows are theirs, side by side."""
    assert found["exit_round_equal"]
    games, positions, ready = found["exit_stats"]
    assert (games, positions, ready) == (8, 16, 16)
    assert found["exit_evaluations"] == 16 * (4 + 1)  # network evaluator: sims + 1 a position


def test_batch_that_does_not_divide_is_named(found):
    assert "batch_games=6 does not divide over the 4 devices" in found["divisibility_error"]


def test_a_checkpoint_saved_before_donation_keeps_its_values(found):
    assert found["checkpoint_restored_equal"]


def test_bfloat16_run_end_to_end_keeps_float32_parameters_and_statistics(found):
    run = found["bf16_run"]
    assert run["devices"] == DEVICES and run["iterations"] == 2
    assert all(v == "float32" for v in run["dtypes"].values()), run["dtypes"]
    assert run["losses_finite"] and run["trained"]
    assert run["ownership_learned"] and run["ownership_spec"] == [None, "data"]


def test_sharded_match_plays_what_one_device_plays(found):
    """The evaluation's matches split over 4 devices: key-independent players give the one-device
    results game for game (openings still paired, colours where they were), and search players
    give what each device's games played alone with its key give, in the global order."""
    assert found["match_deterministic_equal"] and found["match_a_first_equal"]
    assert found["match_search_equal"]


def test_the_loop_evaluates_on_four_devices(found):
    run = found["bf16_run"]
    assert run["evaluated"] and 0.0 <= run["mcts_score"] <= 1.0


def test_selfplay_benchmark_reports_positions_per_device_and_in_total():
    from benchmarks import selfplay as bench

    rows = [
        bench.Row("hex", "recipe", "gumbel", "none", 800.0, 2.0, 9.0, 1.0, 4),
        bench.Row("hex", "azjax", "puct", "none", 1000.0, 1.6, 9.0, 1.25, 4),
    ]
    lines = bench.format_table(rows, markdown=True).splitlines()
    assert lines[0] == (
        "| game | impl | search | rollouts | positions/s | per device | ms/move "
        "| compile s | vs recipe |"
    )
    assert lines[3] == "| hex | azjax | puct | none | 1000.0 | 250.0 | 1.6 | 9 | 1.25x |"
    assert bench.resolve_devices("all") >= 1 and bench.resolve_devices("1") == 1
    with pytest.raises(ValueError, match="from 1 to"):
        bench.resolve_devices("0")


# ---- the checks, run in the 4-device subprocess -------------------------------------------


def _checks(tmp: str) -> dict:
    import dataclasses
    import functools

    import jax
    import jax.numpy as jnp
    import numpy as np

    # the suite's shared cache where tests/conftest.py set one (this process inherits it)
    cache = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(tmp, "jax-cache")
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

    from azjax import config as cfg
    from azjax import loop, parallel, replay, training
    from azjax.checkpoint import Checkpointer
    from azjax.network import init_variables, make_apply, make_network
    from azjax.search import SearchSpec
    from azjax.selfplay import init_states, make_selfplay
    from azjax.training import init_train_state, make_optimizer, make_train_step

    out: dict = {}
    mesh = parallel.make_mesh()
    out["devices"] = parallel.num_devices(mesh)
    d = out["devices"]
    spec_of = lambda x: list(x.sharding.spec)  # noqa: E731
    max_diff = lambda a, b: max(  # noqa: E731
        float(jnp.max(jnp.abs(jnp.asarray(x, jnp.float32) - jnp.asarray(y, jnp.float32))))
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
    )

    config = cfg.load("tictactoe", dict(TOY, rollout_policy="random", rollout_prob=0.5))
    game = config.make_game()
    net = make_network(config, game)
    variables = init_variables(net, game, jax.random.PRNGKey(0))
    spec = SearchSpec.from_config(config, explore=True)
    B, T = config.batch_games, config.selfplay_steps
    key = jax.random.PRNGKey(7)

    # Self-play: the sharded chunk against each device's games played alone with its key.
    cat = lambda axis, *xs: jnp.concatenate(xs, axis=axis)  # noqa: E731

    def selfplay_both_ways(search_spec, **options):
        """(the sharded chunk, each device's part played alone, concatenated)."""
        sharded = jax.jit(make_selfplay(game, search_spec, make_apply(net), T, 3, mesh, **options))
        alone = jax.jit(make_selfplay(game, search_spec, make_apply(net), T, 3, **options))
        states = jax.device_put(init_states(game, B), parallel.sharding(mesh, jax.P("data")))
        pieces = [
            alone(variables, jax.random.fold_in(key, i), init_states(game, B // d))
            for i in range(d)
        ]
        one_states = jax.tree_util.tree_map(lambda *x: cat(0, *x), *[p[0] for p in pieces])
        one_traj = jax.tree_util.tree_map(lambda *x: cat(1, *x), *[p[1] for p in pieces])
        return sharded(variables, key, states), (one_states, one_traj)

    (s_states, s_traj), (one_states, one_traj) = selfplay_both_ways(spec)
    out["selfplay_max_diff"] = max(max_diff(s_traj, one_traj), max_diff(s_states, one_states))
    out["trajectory_spec"] = spec_of(s_traj.obs)
    out["states_spec"] = spec_of(jax.tree_util.tree_leaves(s_states)[0])[:1]
    # ... and with tree reuse (PUCT), which carries each game's kept subtree from move to move
    reuse_config = cfg.load("tictactoe", dict(TOY, search="puct"))
    reuse_spec = SearchSpec.from_config(reuse_config, explore=True)
    (r_states, r_traj), (r_one_states, r_one_traj) = selfplay_both_ways(reuse_spec, tree_reuse=True)
    out["reuse_selfplay_max_diff"] = max(
        max_diff(r_traj, r_one_traj), max_diff(r_states, r_one_states)
    )

    # A buffer with settled positions, once on one device and once split along B. A chunk of
    # T = 4 moves ends no game of Tic-Tac-Toe: the last move is marked as an end, so that there
    # are positions to draw.
    one_traj = one_traj._replace(done=one_traj.done.at[-1].set(True))
    buffer = replay.add(replay.init(6, B, game.observation_shape, game.num_actions), one_traj)
    buffer = replay.add(buffer, one_traj)
    out["ready"] = int(replay.num_ready(buffer))
    split = jax.device_put(buffer, parallel.shardings(mesh, replay.partition_specs("data")))

    def drawn_both_ways(buf, **options):
        """(16 positions drawn from `buf` split along B, the same drawn on one device)."""
        draw = functools.partial(replay.sample, batch_size=16, **options)
        sharded = jax.shard_map(
            lambda b, k: draw(b, k, axis_name="data"),
            mesh=mesh,
            in_specs=(replay.partition_specs("data"), jax.P()),
            out_specs=jax.P("data"),
        )
        buf_split = jax.device_put(buf, parallel.shardings(mesh, replay.partition_specs("data")))
        return jax.jit(sharded)(buf_split, key), jax.jit(draw)(buf, key)

    same = lambda got, want: all(np.array_equal(x, y) for x, y in zip(got, want))  # noqa: E731
    got, drawn = drawn_both_ways(buffer)
    out["sample_equal"] = same(got, drawn)
    out["sample_spec"] = spec_of(got.obs)[:1]
    # ... and weighted by policy surprise (whole numbers: the devices' sums are exact)
    surprises = jnp.asarray(np.arange(T * B).reshape(T, B) % 4, jnp.float32)
    weighted_traj = one_traj._replace(surprise=surprises)
    weighted = replay.init(6, B, game.observation_shape, game.num_actions, surprise=True)
    weighted = replay.add(replay.add(weighted, weighted_traj), weighted_traj)
    out["surprise_sample_equal"] = same(*drawn_both_ways(weighted, surprise_fraction=0.5))
    # ... and with opponent policy targets, read from the next row of each column
    replied = replay.init(6, B, game.observation_shape, game.num_actions, opponent=True)
    replied = replay.add(replay.add(replied, one_traj), one_traj)
    got, want = drawn_both_ways(replied, opponent_frames=game.opponent_frames)
    out["opponent_sample_equal"] = same(got, want) and bool(np.sum(want.opponent_policy) > 0)
    # ... and from some columns alone (an early-stopped apprentice's training or validation set)
    held = np.zeros(B, bool)
    held[[1, 6]] = True  # on the first and the last device
    marked = buffer.replace(value=jnp.broadcast_to(jnp.arange(B, dtype=jnp.float32), (6, B)))
    marked_split = jax.device_put(marked, parallel.shardings(mesh, replay.partition_specs("data")))
    from_columns = [
        jax.jit(loop.make_sampler(64, m, columns=held))(b, key)
        for m, b in ((mesh, marked_split), (None, marked))
    ]
    drawn_columns = sorted({str(int(v)) for v in np.asarray(from_columns[0].value)})
    out["columns_sample"] = [same(*from_columns), drawn_columns]

    # Training: one step on the same batch, then a whole sampled iteration, both ways.
    opt = make_optimizer(config)
    state = init_train_state(variables, opt)
    step = make_train_step(net, opt, config.weight_decay)
    rep = parallel.replicated(mesh)
    batch_sh = parallel.sharding(mesh, jax.P("data"))
    s_state, s_loss = jax.jit(step, in_shardings=(rep, batch_sh))(state, drawn)
    u_state, u_loss = jax.jit(step)(state, drawn)
    out["train_step_max_diff"] = max(max_diff(s_state, u_state), max_diff(s_loss, u_loss))
    out["params_replicated"] = all(
        x.sharding.is_fully_replicated for x in jax.tree_util.tree_leaves(s_state)
    )
    learn_sh = training.make_learner(step, loop.make_sampler(8, mesh), 2, per_call=2)
    learn_one = training.make_learner(step, loop.make_sampler(8), 2, per_call=2)
    out["train_iteration_max_diff"] = max_diff(
        training.learn(learn_sh, jax.jit(learn_sh.chunk), state, split, key),
        training.learn(learn_one, jax.jit(learn_one.chunk), state, buffer, key),
    )

    # Matches (the in-loop evaluation's) split over the devices, against one device.
    from azjax import loop_eval
    from azjax.arena import _match_fn, device_order, make_match, make_search_agent

    def first_legal(v, k, states):
        return jnp.argmax(jax.vmap(game.legal_mask)(states), axis=-1).astype(jnp.int32)

    n_games = 16
    starts = loop_eval.paired_openings(game, jax.random.PRNGKey(3), n_games, 2)
    one = make_match(game, first_legal, first_legal, n_games, record=True)(None, None, key, starts)
    split_games = make_match(game, first_legal, first_legal, n_games, record=True, mesh=mesh)(
        None, None, key, starts
    )
    out["match_deterministic_equal"] = all(np.array_equal(x, y) for x, y in zip(one, split_games))
    out["match_a_first_equal"] = np.array_equal(split_games.a_first, np.arange(n_games) < 8)
    searcher = make_search_agent(game, SearchSpec.from_config(config), make_apply(net), 0.2)
    got = make_match(game, searcher, searcher, n_games, mesh=mesh)(variables, variables, key)
    local = jax.jit(_match_fn(game, searcher, searcher, n_games // d, split=None, record=False))
    order = device_order(n_games, d)
    initial = jax.vmap(lambda _: game.init())(jnp.arange(n_games // d))
    parts = [local(variables, variables, jax.random.fold_in(key, i), initial) for i in range(d)]
    want = np.empty(n_games)
    want[order] = np.concatenate([np.asarray(p[0]) for p in parts])
    out["match_search_equal"] = np.array_equal(np.asarray(got[0]), want)

    # The jitted iteration under a transfer guard: no copy to or from the host inside it (with
    # the ownership target on, so its trajectory, buffer and sample are split over the devices too,
    # and resignation, whose played-out slots are counted per device).
    bf16 = cfg.load(
        "tictactoe", dict(TOY, dtype="bfloat16", ownership_weight=1.0, resign_threshold=0.5)
    )
    fns = loop.make_iteration(bf16, mesh)
    run, states, buf = fns.init_run(), fns.init_states(), fns.init_buffer()
    old_buffer = buf
    try:
        with jax.transfer_guard("disallow"):
            for _ in range(2):
                states, buf, played = fns.play(run, states, buf)
                train, learned = fns.learn(run, buf)
                run = run.replace(train=train, iteration=fns.advance(run.iteration))
            jax.block_until_ready((run, buf, played, learned))
        out["transfer_guard"] = "ok"
    except Exception as e:  # report, do not crash: the test names what happened
        out["transfer_guard"] = f"{type(e).__name__}: {e}"[:500]
    out["buffer_donated"] = old_buffer.obs.is_deleted()

    # The statistics start once self-play has ended on every device (`parallel.settle`): the host
    # waits for the self-play program's results before it dispatches their reductions.
    import contextlib

    @contextlib.contextmanager
    def recorded_waits():
        """[bool] a host wait, each True where it waited for results split over the devices."""
        waited, real_wait = [], jax.block_until_ready

        def recording_wait(tree):
            leaves = jax.tree_util.tree_leaves(tree)
            waited.append(any(not leaf.sharding.is_fully_replicated for leaf in leaves))
            return real_wait(tree)

        jax.block_until_ready = recording_wait
        try:
            yield waited
        finally:
            jax.block_until_ready = real_wait

    with recorded_waits() as waited:
        states, buf, played = fns.play(run, states, buf)
    out["settled"] = waited  # one wait a call, for results split over the devices

    # The long programs end without a collective: their results stay split (module doc of
    # azjax.parallel); the statistics' reductions are a program of their own.
    import re

    def collectives(lowered):
        found = re.findall(
            r"all-reduce|all-gather|all-to-all|collective-permute|reduce-scatter",
            lowered.compile().as_text(),
        )
        return sorted(set(found))

    # Expert Iteration's round: each device plays and labels its B / D games alone, with its key.
    from azjax import exit as ex

    exit_config = cfg.load("tictactoe", dict(TOY, algorithm="exit", positions_per_game=2))
    xfns = ex.make_iteration(exit_config, mesh)
    xrun, xbuf = xfns.init_run(), xfns.init_buffer()
    with recorded_waits() as xwaited:
        _, xbuf, xstats = xfns.play(xrun, xfns.init_states(), xbuf)
    out["exit_settled"] = xwaited  # one wait a round
    with recorded_waits() as lwaited:  # and one a learner call: one program with collectives
        fns.learn(fns.copy(run), buf)  # at a time
    with recorded_waits() as xlwaited:
        xfns.learn(xfns.copy(xrun), xbuf)
    out["learner_settled"] = [len(lwaited), len(xlwaited)]
    # ... and early-stopped, its training and validation sets split over the devices
    es_config = dataclasses.replace(exit_config, early_stopping=1, max_epochs=2)
    ex.VALIDATION_POSITIONS = 1023  # rounded up to a multiple of the 4 devices (3 failed deep)
    es_fns = ex.make_iteration(es_config, mesh)
    _, es_report = es_fns.learn(xrun, xbuf)
    out["early_stopped"] = [len(es_report.history), bool(np.isfinite(es_report.validation))]
    k_round = jax.random.fold_in(ex._iteration_keys(xrun, xrun.iteration + 1)[0], 0)
    xspec = ex.ExpertSpec.from_config(exit_config)
    label = jax.jit(ex.make_round(game, xspec, make_apply(net), B // d, 2))
    alone = [label(xrun.train.variables, jax.random.fold_in(k_round, i)) for i in range(d)]
    targets = dict(policy_target=exit_config.policy_target, value_target=exit_config.value_target)
    rows = [ex.as_trajectory(x, **targets, num_games=B // d) for x in alone]
    out["exit_round_equal"] = np.array_equal(
        np.asarray(parallel.fetch(xbuf.obs))[:2], np.concatenate([r.obs for r in rows], 1)
    ) and np.allclose(
        np.asarray(parallel.fetch(xbuf.policy))[:2], np.concatenate([r.policy for r in rows], 1)
    )
    out["exit_stats"] = [int(xstats.games), int(xstats.positions), int(xstats.ready)]
    out["exit_evaluations"] = xstats.metrics()["exit/network_evaluations"] - sum(
        int(x.apprentice_moves) for x in alone
    )  # what the expert searched: (sims + 1) per position

    sharded = make_match(game, searcher, searcher, n_games, mesh=mesh)
    out["collectives"] = {
        "play": collectives(fns.play.play.lower(run, states, buf)),
        "match": collectives(sharded.lower(variables, variables, key)),
        "exit round": collectives(xfns.play.round.lower(xrun, xbuf, jnp.int32(0))),
    }

    try:
        loop.make_iteration(cfg.load("tictactoe", dict(TOY, batch_games=6)), mesh)
        out["divisibility_error"] = ""
    except ValueError as e:
        out["divisibility_error"] = str(e)

    # A checkpoint saved, then its arrays donated at once: the restored values are the saved ones.
    ckpt = Checkpointer(os.path.join(tmp, "donate"))
    kept = fns.copy(run)
    ckpt.save(1, run, bf16)
    fns.learn(run, buf)  # donates run.train
    ckpt.wait()
    restored, _ = ckpt.restore(kept)
    out["checkpoint_restored_equal"] = max_diff(restored, kept) == 0.0
    ckpt.close()

    # The whole loop in bfloat16 on 4 devices, its evaluation's matches split over them.
    workdir = os.path.join(tmp, "bf16")
    summary = loop.train_and_evaluate(
        dataclasses.replace(bf16, eval_interval=2, eval_games=8, eval_ladder=False),
        workdir,
        progress=False,
    )
    restored, _ = Checkpointer(workdir).restore(fns.init_run())
    variables = restored.train.variables
    rows = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    out["bf16_run"] = dict(
        devices=summary["devices"],
        iterations=summary["iterations"],
        dtypes={
            k: ",".join(sorted({str(x.dtype) for x in jax.tree_util.tree_leaves(variables[k])}))
            for k in ("params", "batch_stats")
        },
        trained=any("loss/total" in r for r in rows),
        evaluated=any("eval/mcts_score" in r for r in rows),
        mcts_score=next((r["eval/mcts_score"] for r in rows if "eval/mcts_score" in r), -1.0),
        losses_finite=all(np.isfinite(r["loss/total"]) for r in rows if "loss/total" in r),
        ownership_learned=all(r["loss/ownership"] > 0 for r in rows if "loss/total" in r),
        ownership_spec=spec_of(buf.ownership),
    )
    return out


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    print(json.dumps(_checks(sys.argv[1])))
