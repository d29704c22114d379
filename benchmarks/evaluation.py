"""The in-loop evaluation's cost: its two matches, each agent searching every game or only the
half where it is to move (`azjax.arena.make_match`'s `split`), against one training iteration.

    python -m benchmarks.evaluation                          # the 6x6 Hex CPU recipe
    python -m benchmarks.evaluation --game=othello --size=6 --eval_games=64

Times, after a compiling call, the evaluation `train_and_evaluate` runs every `eval_interval`
iterations (the network against the previous network, epsilon-greedy, and against pure MCTS at
twice the simulations; `eval_games` games each) both ways, and one iteration of self-play and
learning; prints seconds and the share of wall time evaluation takes at `--eval_interval`. Not
timed: the ladder's rungs and the exact error rate's search, which the loop also runs where the
package has a ladder or solved positions for the game (a run's metrics.jsonl logs all of it as
`eval_seconds`), so the share printed is a lower bound.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax

import games
from azjax import cli, flags, loop, parallel
from azjax import config as cfg
from azjax.arena import make_match, make_search_agent
from azjax.network import make_apply, make_network
from azjax.search import SearchSpec
from configs.cpu import CPU_SCALE

# configs/cpu.py's recipe on 6x6 Hex, evaluating as the training loop does by default
RECIPE = dict(CPU_SCALE, size=6, eval_games=64, eval_interval=10, min_replay=1)


def best_seconds(fn, repeats: int) -> float:
    """The fastest of `repeats` calls of `fn` (its outputs waited for), after one that compiles."""
    jax.block_until_ready(fn())  # compile
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


def evaluation_seconds(config: cfg.Config, split: bool, repeats: int) -> float:
    """Seconds of the in-loop evaluation's two matches (as `loop_eval.make_evaluation` plays
    them)."""
    game = config.make_game()
    net = make_network(config, game)
    apply = make_apply(net)
    variables = jax.jit(lambda: loop.init_run(config).train.variables)()
    spec = SearchSpec.from_config(config)
    agent = make_search_agent(game, spec, apply)
    greedy = make_search_agent(game, spec, apply, epsilon=config.eval_epsilon)
    mcts = make_search_agent(
        game, SearchSpec.pure_mcts(2 * config.num_simulations, search="puct"), None
    )
    vs_previous = make_match(game, greedy, greedy, config.eval_games, split=split)
    vs_mcts = make_match(game, agent, mcts, config.eval_games, split=split)
    key = jax.random.PRNGKey(0)
    return best_seconds(
        lambda: (vs_previous(variables, variables, key), vs_mcts(variables, None, key)), repeats
    )


def iteration_seconds(config: cfg.Config, repeats: int) -> float:
    """Seconds of one iteration's self-play and learning."""
    fns = loop.make_iteration(config, parallel.make_mesh())
    state = dict(run=fns.init_run(), states=fns.init_states(), buffer=fns.init_buffer())

    def one():
        state["states"], state["buffer"], _ = fns.play(
            state["run"], state["states"], state["buffer"]
        )
        train, losses = fns.learn(state["run"], state["buffer"])
        state["run"] = state["run"].replace(train=train)
        return losses

    return best_seconds(one, repeats)


def main(argv=None) -> int:
    parser = flags.Parser(
        module=__spec__.name,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--game", default="hex")
    parser.add_argument(
        "--size", type=int, default=None, help="board size (Hex, Othello; default 6)"
    )
    parser.add_argument("--eval_games", type=int, default=RECIPE["eval_games"])
    parser.add_argument("--eval_interval", type=int, default=RECIPE["eval_interval"])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.eval_interval < 1:  # the share of a run that evaluates: it must evaluate
        parser.error(f"--eval_interval must be at least 1, got {args.eval_interval}")
    settings = {**RECIPE, "eval_games": args.eval_games, "eval_interval": args.eval_interval}
    if args.size is not None:
        settings["size"] = args.size
    elif args.game not in games.names() or "size" not in flags.option_fields(args.game):
        del settings["size"]  # a game without a size (or none: its own error says so)
    try:
        config = cfg.load(args.game, settings)
    except ValueError as e:
        parser.error(str(e))
    iteration = iteration_seconds(config, args.repeats)
    print(
        f"# {config.game} {dict(config.game_options)}, {config.num_blocks}x{config.num_filters} "
        f"{config.search} {config.num_simulations} sims, {config.eval_games} games per match, "
        f"evaluation every {config.eval_interval} iterations; backend {jax.default_backend()}"
    )
    print(f"one iteration (self-play + learning): {iteration:.2f} s")
    print("| evaluation | seconds | share of wall time |")
    print("|---|--:|--:|")
    for split in (False, True):
        seconds = evaluation_seconds(config, split, args.repeats)
        share = seconds / (seconds + config.eval_interval * iteration)
        name = "half the games per agent" if split else "every game, both agents"
        print(f"| {name} | {seconds:.2f} | {100 * share:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.evaluation", main))
