"""Seed 002, section 4.3: tree-policy targets (TPT) against chosen-action targets (CAT).

One expert dataset, two apprentices. Positions are drawn one per game from games of the
untrained apprentice (near-uniform play; the paper drew its first dataset with a weak MCTS) and
labelled by vanilla MCTS (plain UCT, random rollouts, c_b = 0.25, `ExpertSpec.vanilla`); a
network is trained from the same initial weights on the TPT targets (the root visit
distribution) and another on the CAT targets (one-hot of the most visited move), with the same
value target (the apprentice game's outcome), steps and batches. Reported: top-1 / top-3
move-prediction error of each against the expert's move on held-out positions (paper: 47.0% /
65.4% CAT, 47.7% / 65.7% TPT), and TPT against CAT playing greedily (most likely move), one game
per legal opening with each colour, as an Elo difference (paper: TPT 50 +- 13 stronger). Here an
error is the share of positions whose expert move is not among the network's top k, so top-3 is
at most top-1; the paper's top-3 "errors" are above its top-1 ones, so they are some other
measure (top-3 accuracy, perhaps): compare the top-1 figures only.

    python -m experiments.exit_targets                         # CPU scale: 5x5 Hex, minutes
    python -m experiments.exit_targets --full                  # the paper's scale (accelerator)
    python -m experiments.exit_targets --size=3 --positions=64 --test_positions=16 --sims=8 \\
        --train_steps=4 --num_filters=4 --out=/tmp/t           # a smoke test

Writes <out>/results.json and <out>/log.txt (default runs/exit_targets).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import azjax
from azjax import cli, flags, training
from azjax.exit import ExpertSpec, make_round
from azjax.network import init_variables, make_apply, make_network
from azjax.replay import Batch
from experiments.common import (
    Log,
    add_scale_flags,
    remove_earlier_results,
    set_scale,
    write_results,
)
from experiments.exit_common import elo_difference, greedy_agent, opening_match

SCALES = {  # CPU scale / the paper's (9x9 Hex, 100,000 positions, 10,000 simulations)
    False: dict(
        size=5,
        positions=2000,
        test_positions=500,
        sims=200,
        batch_games=250,
        train_steps=800,
        num_blocks=2,
        num_filters=32,
    ),
    True: dict(
        size=9,
        positions=100_000,
        test_positions=10_000,
        sims=10_000,
        batch_games=1000,
        train_steps=20_000,
        num_blocks=6,
        num_filters=64,
    ),
}


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scale_flags(parser, SCALES, "the paper's scale")
    parser.add_argument("--batch_size", type=int, default=250, help="positions per step (250)")
    parser.add_argument("--learning_rate", type=float, default=1e-3, help="Adam (1e-3)")
    parser.add_argument("--seeds", type=int, default=1, help="repetitions (new data each)")
    parser.add_argument("--out", type=flags.path, default=os.path.join("runs", "exit_targets"))
    args = parser.parse_args(argv)
    set_scale(args, SCALES)
    for name in (*SCALES[False], "batch_size", "seeds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.size < 2:
        parser.error(f"--size must be at least 2, got {args.size}")
    try:
        flags.check_out(args.out)  # before the work, not after it
    except ValueError as e:
        parser.error(str(e))
    return args


def make_dataset(game, apply, variables, args, key) -> dict:
    """numpy arrays obs, tpt, cat, outcome, legal of `positions + test_positions` positions."""
    label = jax.jit(make_round(game, ExpertSpec.vanilla(args.sims), apply, args.batch_games, 1))
    need = args.positions + args.test_positions
    parts = []
    for i in range(-(-need // args.batch_games)):
        data = label(variables, jax.random.fold_in(key, i))
        parts.append(jax.device_get((data.obs, data.tpt, data.cat, data.outcome, data.legal)))
    names = ("obs", "tpt", "cat", "outcome", "legal")
    return {n: np.concatenate([p[j] for p in parts])[:need] for j, n in enumerate(names)}


def train(net, config, variables, data: dict, target: str, args, key):
    """The apprentice trained on `target` ("tpt" | "cat") from `variables`."""
    optimizer = training.make_optimizer(config)
    step = jax.jit(training.make_train_step(net, optimizer, config.weight_decay))
    state = training.init_train_state(variables, optimizer)
    n = args.positions
    for k in jax.random.split(key, args.train_steps):
        idx = np.asarray(jax.random.randint(k, (args.batch_size,), 0, n))
        batch = Batch(
            obs=jnp.asarray(data["obs"][idx]),
            policy=jnp.asarray(data[target][idx]),
            value=jnp.asarray(data["outcome"][idx]),
        )
        state, _ = step(state, batch)
    return state.variables


def prediction_errors(apply, variables, data: dict, start: int) -> tuple[float, float]:
    """(top-1, top-3) error of the network's legal-move ranking against the expert's move."""
    logits, _ = jax.jit(apply)(variables, jnp.asarray(data["obs"][start:]))
    logits = np.where(data["legal"][start:], np.asarray(logits), -np.inf)
    expert = data["cat"][start:].argmax(-1)
    rank = (logits > logits[np.arange(len(expert)), expert][:, None]).sum(-1)
    return float(np.mean(rank >= 1)), float(np.mean(rank >= 3))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    log = Log(os.path.join(args.out, "log.txt"))
    remove_earlier_results(args.out)
    t0 = time.time()
    config = azjax.load_config(
        "hex",
        dict(
            size=args.size,
            swap=False,
            num_blocks=args.num_blocks,
            num_filters=args.num_filters,
            value_hidden=args.num_filters,
            optimizer="adam",
            learning_rate=args.learning_rate,
            weight_decay=1e-4,
        ),
    )
    game = config.make_game()
    net = make_network(config, game)
    apply = make_apply(net)
    log(
        f"TPT vs CAT on {args.size}x{args.size} Hex: {args.positions} + {args.test_positions} "
        f"positions labelled by vanilla MCTS-{args.sims}, {args.train_steps} steps of "
        f"{args.batch_size}, {args.seeds} seed(s)"
    )
    runs = []
    for seed in range(args.seeds):
        t_seed = time.time()  # each seed's own seconds (the first's include compiling)
        k_init, k_data, k_train, k_match = jax.random.split(jax.random.PRNGKey(seed), 4)
        variables = init_variables(net, game, k_init)
        data = make_dataset(game, apply, variables, args, k_data)
        t_data = time.time()
        row: dict = dict(seed=seed)
        trained = {}
        for target in ("tpt", "cat"):
            trained[target] = train(net, config, variables, data, target, args, k_train)
            top1, top3 = prediction_errors(apply, trained[target], data, args.positions)
            row[target] = dict(top1_error=top1, top3_error=top3)
            log(f"seed {seed} {target.upper()}: top-1 error {top1:.1%}, top-3 error {top3:.1%}")
        match = opening_match(
            game,
            greedy_agent("tpt", game, apply, trained["tpt"]),
            greedy_agent("cat", game, apply, trained["cat"]),
            k_match,
        )
        row["tpt_vs_cat"] = match
        row["seconds"] = dict(data=round(t_data - t_seed, 1), all=round(time.time() - t_seed, 1))
        log(
            f"seed {seed} TPT vs CAT (greedy, every opening, both colours): W/D/L "
            f"{match['wdl']}, score {match['score']:.3f} +- {match['ci95']:.3f}, Elo "
            f"{match['elo']:+.0f}"
        )
        runs.append(row)
    scores = [r["tpt_vs_cat"]["score"] for r in runs]
    summary = dict(
        tpt_top1=float(np.mean([r["tpt"]["top1_error"] for r in runs])),
        cat_top1=float(np.mean([r["cat"]["top1_error"] for r in runs])),
        tpt_top3=float(np.mean([r["tpt"]["top3_error"] for r in runs])),
        cat_top3=float(np.mean([r["cat"]["top3_error"] for r in runs])),
        tpt_score=float(np.mean(scores)),
        tpt_elo=elo_difference(float(np.mean(scores))),
    )
    log(
        f"mean over seeds: top-1 error TPT {summary['tpt_top1']:.1%} CAT "
        f"{summary['cat_top1']:.1%} (paper 47.7% / 47.0%); top-3 TPT {summary['tpt_top3']:.1%} "
        f"CAT {summary['cat_top3']:.1%} (paper's 65.7% / 65.4%: not errors as here, being above its"
        f" top-1); TPT score {summary['tpt_score']:.3f}"
        f", Elo {summary['tpt_elo']:+.0f} (paper +50 +- 13)"
    )
    results = dict(
        command="python -m experiments.exit_targets " + " ".join(argv),
        args=vars(args),
        runs=runs,
        summary=summary,
        seconds=round(time.time() - t0, 1),
    )
    write_results(args, results, log)
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.exit_targets", main))
