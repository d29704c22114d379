"""Optimizer steps per second: the training iteration's learner against its step called alone.

    python -m benchmarks.learner                       # the CPU recipe of 6x6 Hex (issue 17)
    python -m benchmarks.learner --game=othello --size=6 --train_steps=30 --repeats=3

Three ways to take the same `train_steps` optimizer steps on one filled replay buffer, each timed
after a compiling call (compilation is reported on its own line), best of `--repeats`:
- `step alone`: a Python loop over one jitted (sample + train step) call — the reference;
- `learner`: what `train_and_evaluate` runs, `training.make_learner` with its measured rule of
  steps per call for this backend (`training.steps_per_call`);
- `scan in cond`: the learner before issue 17, one `lax.scan` of every step inside `lax.cond`.
Rows print steps/s and the ratio to `step alone`; the learner should be within 1.2x of it.

    python -m benchmarks.learner --game=othello --size=6 --train_steps=90 --loop_devices=2

`--loop_devices=N` times instead what a run of `--config=cpu --cpu_devices=N` learns with: the
training loop's learner (`loop.make_iteration(...).learn`) with the game's whole CPU recipe
(configs/cpu.py: its augmentation, ownership target, mobility planes), on N CPU devices, its
buffer filled by the loop's own self-play (docs/benchmarks.md, "The learner on two CPU devices").
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time

import jax
import jax.numpy as jnp

import games
from azjax import cli, flags, loop, network, parallel, replay, training
from azjax import config as cfg
from configs.cpu import CPU_SCALE, cpu_recipe

RECIPE = dict(CPU_SCALE, size=6)  # configs/cpu.py's recipe on 6x6 Hex


def filled_buffer(game, key, games: int = 64):
    """A replay buffer of `games` columns, every position of one random game each, settled."""
    rows = game.max_game_length
    buffer = replay.init(rows, games, game.observation_shape, game.num_actions)
    k_obs, k_pol = jax.random.split(key)
    obs = jax.random.uniform(k_obs, (rows, games) + game.observation_shape) < 0.3
    policy = jax.nn.softmax(jax.random.normal(k_pol, (rows, games, game.num_actions)))
    for t in range(rows):
        buffer = replay.add_step(
            buffer,
            obs[t].astype(jnp.float32),
            policy[t],
            jnp.full((games,), t % 2),
            jnp.full((games,), t == rows - 1),
            jnp.tile(jnp.array([1.0, -1.0]), (games, 1)),
        )
    return buffer


def _time(fn, repeats: int) -> tuple[float, float]:
    """(seconds of the first call, best seconds of the next `repeats`)."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return first, best


def run(config: cfg.Config, repeats: int) -> list[tuple[str, float, float]]:
    """[(name, compile+first seconds, best seconds)] of the three learners (module doc)."""
    game = config.make_game()
    net = network.make_network(config, game)
    opt = training.make_optimizer(config)
    step = training.make_train_step(net, opt, config.weight_decay)
    sample = loop.make_sampler(config.train_batch_size)
    state = training.init_train_state(network.init_variables(net, game, jax.random.PRNGKey(0)), opt)
    buffer = filled_buffer(game, jax.random.PRNGKey(1))
    key = jax.random.PRNGKey(2)
    n = config.train_steps

    one = jax.jit(lambda s, b, k: step(s, sample(b, k)))

    def alone():
        s = state
        for k in jax.random.split(key, n):
            s, losses = one(s, buffer, k)
        return s

    learner = training.make_learner(step, sample, n)
    chunk = jax.jit(learner.chunk)

    def chunked():
        return training.learn(learner, chunk, state, buffer, key)

    @jax.jit
    def in_cond(s, b, k, go):
        def scanned(s):
            return jax.lax.scan(lambda c, kk: step(c, sample(b, kk)), s, jax.random.split(k, n))[0]

        return jax.lax.cond(go, scanned, lambda s: s, s)

    rows = []
    for name, fn in (
        ("step alone", alone),
        ("learner", chunked),
        ("scan in cond", lambda: in_cond(state, buffer, key, jnp.bool_(True))),
    ):
        rows.append((name, *_time(fn, repeats)))
    return rows


def loop_learner(config: cfg.Config, devices: int, repeats: int) -> tuple[float, float, int]:
    """(seconds of the first call, best seconds of the next `repeats`, positions ready) of the
    loop's learner of `config` on the first `devices` devices, after self-play has filled its
    buffer to the learner's minimum."""
    it = loop.make_iteration(config, parallel.make_mesh(jax.devices()[:devices]))
    run, states, buffer = it.init_run(), it.init_states(), it.init_buffer()
    ready = 0
    while ready < it.min_replay:
        states, buffer, played = it.play(run, states, buffer)
        ready = int(played.ready)
    # learn donates the train state: each call gets a copy, made before the clock starts
    trains = iter([it.copy(run.train) for _ in range(repeats + 1)])
    first, best = _time(lambda: it.learn(run.replace(train=next(trains)), buffer)[1], repeats)
    return first, best, ready


def main(argv=None) -> int:
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--game", default="hex", choices=games.names())
    parser.add_argument(
        "--size",
        type=int,
        default=None,
        help=f"board size, for games that have one (default {RECIPE['size']})",
    )
    parser.add_argument("--train_steps", type=int, default=RECIPE["train_steps"])
    parser.add_argument("--train_batch_size", type=int, default=RECIPE["train_batch_size"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--loop_devices",
        type=int,
        default=0,
        help="time the training loop's learner with the game's CPU recipe on this many CPU "
        "devices instead (module doc); 0: the three learners of the CPU_SCALE network",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.loop_devices < 0:
        parser.error(f"--loop_devices must be 0 or more, got {args.loop_devices}")
    if args.train_steps < 1:
        parser.error(f"--train_steps must be at least 1 (steps to time), got {args.train_steps}")
    if args.loop_devices:
        return _main_loop(parser, args)
    config = _config(parser, args, RECIPE)
    n = config.train_steps
    print(
        f"# {config.game} {dict(config.game_options)}: {config.num_blocks}x{config.num_filters} "
        f"ResNet, batch {config.train_batch_size}, {n} steps; backend {jax.default_backend()} "
        f"({platform.processor() or platform.machine()}), steps per learner call "
        f"{training.steps_per_call(n)}"
    )
    rows = run(config, args.repeats)
    reference = rows[0][2]
    print("| learner | first call s (compile) | s per iteration | steps/s | vs step alone |")
    print("|---|--:|--:|--:|--:|")
    for name, first, best in rows:
        print(f"| {name} | {first:.2f} | {best:.3f} | {n / best:.1f} | {reference / best:.2f}x |")
    return 0


def _config(parser: argparse.ArgumentParser, args, recipe: dict) -> cfg.Config:
    """The game's config with `recipe` and the flags' sizes over it; exit 2 on a bad value."""
    takes_size = "size" in games.option_names(args.game)
    if args.size is not None and not takes_size:
        parser.error(flags.not_an_option("size", args.game))
    overrides = {
        **{k: v for k, v in recipe.items() if k != "size"},
        "train_steps": args.train_steps,
        "train_batch_size": args.train_batch_size,
    }
    if takes_size:
        overrides["size"] = RECIPE["size"] if args.size is None else args.size
    try:
        return cfg.load(args.game, overrides)
    except ValueError as e:
        parser.error(str(e))


def _main_loop(parser: argparse.ArgumentParser, args) -> int:
    devices = parallel.split_cpu(args.loop_devices)  # before JAX starts
    if devices != args.loop_devices:
        parser.error(
            f"--loop_devices={args.loop_devices}: JAX has started with {devices} CPU devices"
        )
    config = _config(parser, args, cpu_recipe(args.game))
    if config.batch_games % devices:  # the recipe's, not a flag here
        parser.error(
            f"--loop_devices={devices}: the CPU recipe's {config.batch_games} games an iteration "
            f"do not divide over {devices} devices; choose a divisor of {config.batch_games}"
        )
    try:
        parallel.check_divisible(
            parallel.make_mesh(jax.devices()[:devices]), train_batch_size=config.train_batch_size
        )
    except ValueError as e:
        parser.error(str(e))
    first, best, ready = loop_learner(config, devices, args.repeats)
    n = config.train_steps
    print(
        f"# {config.game} {dict(config.game_options)}: the CPU recipe's learner (configs/cpu.py), "
        f"{config.num_blocks}x{config.num_filters} ResNet, batch {config.train_batch_size}, "
        f"{n} steps, on {devices} CPU device(s) ({platform.processor() or platform.machine()}), "
        f"{ready} positions ready"
    )
    print(
        f"loop's learner: first call {first:.2f} s (compile), best {best:.3f} s an iteration, "
        f"{n / best:.1f} steps/s, {best / n * 1e3:.1f} ms a step"
    )
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.learner", main))
