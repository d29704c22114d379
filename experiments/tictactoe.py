"""Tic-Tac-Toe: train with configs/tictactoe.py, then play the network-guided search against
perfect play with both colours. Success is zero losses.

    python -m experiments.tictactoe                          # train in runs/exp_tictactoe, evaluate
    python -m experiments.tictactoe --workdir=runs/ttt --eval_only --games=400
    python -m experiments.tictactoe --iterations=60 --learning_rate=0.001   # config overrides
    python -m experiments.tictactoe --workdir=runs/ttt --eval_only --figures  # seed 001's figures

The trained agent searches with the config's simulations and no noise (argmax of visits); the
perfect player picks uniformly among optimal moves (experiments.perfect_play), so the games cover
many lines. `--games` games are played with each colour.

`--figures` then plays seed 001's Figure 5.1b and 5.4 analogues against perfect play, counting
the draws of the searcher as O (the second player; as X it draws easily), `--figure_games` games:
5.1b  pure MCTS (`mcts:sims=N,c_uct=1.5`, random rollouts) at each of `--mcts_sims` simulations;
5.4a  every checkpoint of the run (`ckpt:RUN@STEP`) at `--curve_sims`, beside MCTS at as many;
5.4b  the final network and pure MCTS at each of `--compare_sims` simulations.
Writes <workdir>/figures.json and figures.png.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import numpy as np

from azjax import (
    MatchResult,
    SearchSpec,
    cli,
    flags,
    load_config,
    make_apply,
    make_match,
    make_network,
    make_search_agent,
    train_and_evaluate,
)
from azjax.config import game_defaults
from azjax.eval.specs import parse_agent
from experiments.common import (
    add_resume_flag,
    check_resume,
    checkpoint_steps,
    parse_floats,
    remove_earlier_results,
    restore_variables,
)
from experiments.perfect_play import make_perfect_agent


def play_perfect(config, variables, games_per_colour: int, seed: int = 1) -> MatchResult:
    """The trained search (config's simulations, no noise) against the perfect player."""
    game = config.make_game()
    apply = make_apply(make_network(config, game))
    agent = make_search_agent(game, SearchSpec.from_config(config), apply)
    match = make_match(game, agent, make_perfect_agent(), 2 * games_per_colour)
    return MatchResult.from_returns(*match(variables, None, jax.random.PRNGKey(seed)))


# The searchers of the figures, as agent specs (azjax/eval/specs.py), in one place.
MCTS = "mcts:sims={sims}"  # UCT at C = 1.4, its "default C = sqrt(2)" of Figure 5.4
MCTS_51B = "mcts:sims={sims},c_uct=1.5"  # Figure 5.1b's: "with C = 1.5"
NETWORK = "ckpt:{run}@{step},sims={sims},decisive=0"  # seed 001's search, no decisive moves

# What seed 001 reports in words (its figures are plots; games as black against Minimax): 5.1b,
# MCTS (UCT, C = 1.5) still lost one game at 1,200 iterations; 5.4a, MCTS(100) drew 53 of 100,
# AlphaZero 68 at best; 5.4b, AlphaZero drew 87 of 100 with its network alone (1 iteration),
# MCTS fewer than 70 at 200.
THESIS = {
    "5.1b": {1200: "lost 1"},
    "5.4a": {"mcts": 53, "best": 68},
    "5.4b": {1: "network 87", 200: "MCTS < 70"},
}


def draws_as_o(match, variables, games: int, key) -> dict:
    """A `make_match` of 2 x `games` games against the perfect player, from the searcher's side,
    counted where it played O (the second half): games, draws, losses, wins; draws as X too."""
    result = MatchResult.from_returns(*match(variables, None, key))
    w, d, l = result.second
    return dict(games=games, draws=d, losses=l, wins=w, draws_as_x=result.first[1])


def figures(workdir: str, *, games: int, mcts_sims, curve_sims: int, compare_sims, seed=2):
    """Seed 001's Figures 5.1b, 5.4a and 5.4b against perfect play, as a dict of rows."""
    config, _, _ = restore_variables(workdir)
    game = config.make_game()
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 1000))
    steps = checkpoint_steps(workdir)
    matches: dict[str, tuple] = {}  # spec of the final network or MCTS -> (match, variables)
    played: dict[str, dict] = {}  # spec -> its games: a point two figures share is played once

    def play(spec, base_spec, variables=None):
        if spec not in played:
            if base_spec not in matches:  # one compile per simulation count, not per checkpoint
                agent = parse_agent(base_spec, game)
                match = make_match(game, agent.act, make_perfect_agent(), 2 * games)
                matches[base_spec] = (match, agent.variables)
            match, base_variables = matches[base_spec]
            row = draws_as_o(
                match, base_variables if variables is None else variables, games, next(keys)
            )
            played[spec] = dict(spec=spec, **row)
        return played[spec]

    def mcts(n, spec=MCTS):
        return play(spec.format(sims=n), spec.format(sims=n))

    def network(step, n):
        spec = NETWORK.format(run=workdir, step=step, sims=n)
        final = NETWORK.format(run=workdir, step=steps[-1], sims=n)
        return play(spec, final, restore_variables(workdir, step)[1])

    return {
        "5.1b": [dict(sims=n, **mcts(n, MCTS_51B)) for n in mcts_sims],
        "5.4a": dict(
            mcts=mcts(curve_sims),
            checkpoints=[dict(step=s, **network(s, curve_sims)) for s in steps],
        ),
        "5.4b": [dict(sims=n, network=network(steps[-1], n), mcts=mcts(n)) for n in compare_sims],
    }


def plot_figures(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    rows = results["5.1b"]
    axes[0].plot([r["sims"] for r in rows], [r["draws"] / r["games"] for r in rows], "o-")
    axes[0].set(title="5.1b: pure MCTS as O", xlabel="simulations", ylabel="draw ratio")
    curve = results["5.4a"]
    steps = [r["step"] for r in curve["checkpoints"]]
    axes[1].plot(steps, [r["draws"] / r["games"] for r in curve["checkpoints"]], "o-", label="net")
    axes[1].axhline(curve["mcts"]["draws"] / curve["mcts"]["games"], color="grey", label="MCTS")
    axes[1].set(title="5.4a: checkpoints as O", xlabel="iteration", ylabel="draw ratio")
    axes[1].legend()
    rows = results["5.4b"]
    x = np.arange(len(rows))
    for offset, who in ((-0.2, "network"), (0.2, "mcts")):
        axes[2].bar(x + offset, [r[who]["draws"] / r[who]["games"] for r in rows], 0.4, label=who)
    axes[2].set_xticks(x, [str(r["sims"]) for r in rows])
    axes[2].set(title="5.4b: final network vs MCTS as O", xlabel="simulations", ylabel="draw ratio")
    axes[2].legend()
    for ax in axes:
        ax.set_ylim(0, 1.05)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _sims_list(flag: str, text: str) -> list[int]:
    values = parse_floats(flag, text, 1, 100_000)
    if any(v != int(v) for v in values):
        raise ValueError(f"{flag}: simulations must be whole numbers, got {text!r}")
    return [int(v) for v in values]


def parse(argv):
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workdir", type=flags.path, default="runs/exp_tictactoe")
    parser.add_argument(
        "--eval_only",
        action="store_true",
        help="skip training; evaluate the latest checkpoint in --workdir",
    )
    add_resume_flag(parser)
    parser.add_argument("--games", type=int, default=400, help="games with each colour")
    parser.add_argument("--no_progress", action="store_true")
    figs = parser.add_argument_group("seed 001's Figures 5.1b and 5.4 (--figures)")
    figs.add_argument("--figures", action="store_true", help="play them after the evaluation")
    figs.add_argument("--figure_games", type=int, default=100, help="games as O per point")
    figs.add_argument("--mcts_sims", default="100,200,400,800,1200", help="Figure 5.1b")
    figs.add_argument("--curve_sims", type=int, default=100, help="Figure 5.4a")
    figs.add_argument("--compare_sims", default="1,20,100,200", help="Figure 5.4b")
    config_flags = flags.add_config_flags(
        parser.add_argument_group("run settings"),
        skip=("game", "games"),  # --games is this script's own
        defaults=game_defaults("tictactoe"),
    )
    args = parser.parse_args(argv)
    try:
        overrides = flags.config_overrides(args, config_flags)
        args.mcts_sims = _sims_list("--mcts_sims", args.mcts_sims)
        args.compare_sims = _sims_list("--compare_sims", args.compare_sims)
        if args.games < 1:
            raise ValueError(f"--games must be at least 1, got {args.games}")
        for flag, value in (
            ("--figure_games", args.figure_games),
            ("--curve_sims", args.curve_sims),
        ):
            if value < 1:
                raise ValueError(f"{flag} must be at least 1, got {value}")
        if args.eval_only and args.resume:
            raise ValueError("--resume trains on and --eval_only skips training: give one of them")
        if not args.eval_only:
            args.config = load_config("tictactoe", overrides)
            check_resume(args.workdir, args.resume, "--eval_only evaluates it", args.config)
    except ValueError as e:
        parser.error(str(e))
    return args, overrides


def print_figures(results: dict) -> None:
    print("draws as O against perfect play (seed 001's figures in brackets, of 100):")
    for r in results["5.1b"]:
        note = THESIS["5.1b"].get(r["sims"])
        print(
            f"  5.1b  MCTS {r['sims']:>5} sims: {r['draws']}/{r['games']}"
            + (f"  [{note}]" if note else "")
        )
    curve = results["5.4a"]
    print(
        f"  5.4a  MCTS {curve['mcts']['spec']}: {curve['mcts']['draws']}/{curve['mcts']['games']}"
        + ("  [53]" if curve["mcts"]["spec"] == MCTS.format(sims=100) else "")
        + "; network by checkpoint (best of seed 001, at 100 simulations: 68):"
    )
    for r in curve["checkpoints"]:
        print(f"        checkpoint {r['step']:>4}: {r['draws']}/{r['games']}")
    for r in results["5.4b"]:
        note = THESIS["5.4b"].get(r["sims"])
        net, mcts = r["network"], r["mcts"]
        print(
            f"  5.4b  {r['sims']:>5} sims: network {net['draws']}/{net['games']}, MCTS "
            f"{mcts['draws']}/{mcts['games']}" + (f"  [{note}]" if note else "")
        )


def main(argv=None) -> int:
    args, overrides = parse(sys.argv[1:] if argv is None else argv)
    # an earlier invocation's reports, never taken for this one's should it stop
    remove_earlier_results(args.workdir, "vs_perfect.json", "figures.json", "figures.png")
    t0 = time.time()
    summary = None
    if not args.eval_only:
        summary = train_and_evaluate(
            args.config, args.workdir, resume=args.resume, progress=not args.no_progress
        )
    t_train = time.time() - t0
    config, variables, step = restore_variables(args.workdir)
    if config.game != "tictactoe":
        raise ValueError(f"--workdir={args.workdir} holds a {config.game} run, not Tic-Tac-Toe")
    t1 = time.time()
    result = play_perfect(config, variables, args.games)
    t_eval = time.time() - t1
    report = dict(
        workdir=os.path.abspath(args.workdir),
        checkpoint=step,
        simulations=config.num_simulations,
        train_seconds=round(t_train, 1),
        eval_seconds=round(t_eval, 1),
        training_games=summary["games"] if summary else None,
        as_x=dict(zip("wdl", result.first)),
        as_o=dict(zip("wdl", result.second)),
        losses=result.losses,
        success=result.losses == 0,
    )
    print(
        f"vs perfect play, {args.games} games per colour, checkpoint {step}, "
        f"{config.num_simulations} simulations:"
    )
    print(f"  as X (first):  W {result.first[0]}  D {result.first[1]}  L {result.first[2]}")
    print(f"  as O (second): W {result.second[0]}  D {result.second[1]}  L {result.second[2]}")
    print(json.dumps(report, indent=2))
    with open(os.path.join(args.workdir, "vs_perfect.json"), "w") as f:
        json.dump(report, f, indent=2)
    if args.figures:
        t2 = time.time()
        results = figures(
            args.workdir,
            games=args.figure_games,
            mcts_sims=args.mcts_sims,
            curve_sims=args.curve_sims,
            compare_sims=args.compare_sims,
        )
        print_figures(results)
        results.update(thesis=THESIS, seconds=round(time.time() - t2, 1))
        with open(os.path.join(args.workdir, "figures.json"), "w") as f:
            json.dump(results, f, indent=2)
        plot_figures(results, os.path.join(args.workdir, "figures.png"))
    return 0 if result.losses == 0 else 1


if __name__ == "__main__":
    sys.exit(cli.script("experiments.tictactoe", main))
