"""One game at a time: the latency of one search (what the GTP engine, play.py and `gtp:` or
`spiel:` matches pay per move), against OpenSpiel's C++ MCTS bot in the same run.

    python -m benchmarks.latency                               # 6x6 Hex, 1000 simulations
    python -m benchmarks.latency --game=othello --size=8 --sims=400

For each line, milliseconds per searched position after a compiling call (the median of
`--repeats` calls, each searching the position reached by a few random moves):
- azjax UCT with one random rollout per leaf, the `mcts:` agent's search (OpenSpiel's
  algorithm), on a batch of one position: what a `gtp:` or `spiel:` match, play.py or the GTP
  engine pays for an `mcts:` move;
- azjax pure MCTS as seed 000 defined it (PUCT over uniform priors, one random rollout per leaf)
  on a batch of one position;
- the same search over a batch of 64 positions, per position, as `make_search` runs it (all at
  once, as far as the trees fit in `azjax.search.tree_bytes()`), and game by game (`chunk=1`:
  64 searches of one position one after another in a `lax.map`);
- azjax with the game's default network (untrained: its speed, not its strength);
- OpenSpiel's MCTSBot (UCT, c = 1.4, one random rollout per leaf; open-spiel is a test extra).
The last column is each line's time over OpenSpiel's.
"""

from __future__ import annotations

import statistics
import sys
import time

import jax
import numpy as np

import games
from azjax import cli, flags
from azjax import config as cfg
from azjax.network import init_variables, make_apply, make_network
from azjax.search import SearchSpec, make_search
from azjax.selfplay import random_opening


def _positions(game, batch: int, key, plies: int = 4):
    """`batch` positions after up to `plies` random moves (a batch of states)."""
    return jax.jit(jax.vmap(lambda k: random_opening(game, k, plies)))(jax.random.split(key, batch))


def azjax_ms(
    game, spec: SearchSpec, apply, variables, batch: int, repeats: int, chunk=None
) -> float:
    """Median milliseconds per position of one jitted search over `batch` positions
    (`chunk`: `make_search`'s)."""
    search = jax.jit(make_search(game, spec, apply, chunk=chunk))
    key = jax.random.PRNGKey(0)
    jax.block_until_ready(search(variables, key, _positions(game, batch, key)))  # compile
    times = []
    for i in range(repeats):
        k = jax.random.fold_in(key, i + 1)
        states = jax.block_until_ready(_positions(game, batch, k))
        t0 = time.perf_counter()
        jax.block_until_ready(search(variables, k, states))
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times) / batch


def spiel_ms(game, sims: int, repeats: int) -> float | None:
    """Median milliseconds of one OpenSpiel MCTSBot move, or None without open-spiel or a
    matching OpenSpiel game."""
    try:
        import pyspiel

        from azjax.eval.spiel import spiel_game_string

        name = spiel_game_string(game)
    except (ImportError, ValueError):
        return None
    spiel_game = pyspiel.load_game(name)
    rng = np.random.default_rng(0)
    times = []
    for i in range(repeats):
        evaluator = pyspiel.RandomRolloutEvaluator(1, i)
        bot = pyspiel.MCTSBot(spiel_game, evaluator, 1.4, sims, 1000, False, i, False)
        state = spiel_game.new_initial_state()
        for _ in range(int(rng.integers(0, 5))):
            state.apply_action(int(rng.choice(state.legal_actions())))
        t0 = time.perf_counter()
        bot.step(state)
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def run(game_name: str, options: dict, sims: int, repeats: int) -> list[tuple[str, float | None]]:
    config = cfg.load(game_name, {**options, "num_simulations": sims})
    game = config.make_game()
    net = make_network(config, game)
    variables = init_variables(net, game, jax.random.PRNGKey(0))
    uct = SearchSpec.pure_mcts(sims, search="uct")
    pure = SearchSpec.pure_mcts(sims)
    network = SearchSpec.from_config(config)
    return [
        ("azjax UCT (the mcts: agent), batch 1", azjax_ms(game, uct, None, None, 1, repeats)),
        ("azjax pure MCTS (PUCT), batch 1", azjax_ms(game, pure, None, None, 1, repeats)),
        (
            "azjax pure MCTS (PUCT), batch 64 (per position)",
            azjax_ms(game, pure, None, None, 64, repeats),
        ),
        (
            "  the same, game by game",
            azjax_ms(game, pure, None, None, 64, repeats, chunk=1),
        ),
        (
            f"azjax {config.search} + network {config.num_blocks}x{config.num_filters}, batch 1",
            azjax_ms(game, network, make_apply(net), variables, 1, repeats),
        ),
        ("OpenSpiel MCTSBot (C++), one position", spiel_ms(game, sims, repeats)),
    ]


def main(argv=None) -> int:
    pre = flags.Parser(module=__spec__.name, add_help=False)
    pre.add_argument("--game", default="hex", choices=games.names())
    known, _ = pre.parse_known_args(argv)
    parser = flags.Parser(module=__spec__.name, description=__doc__, parents=[pre])
    parser.add_argument("--sims", type=int, default=1000, help="simulations per search")
    parser.add_argument("--repeats", type=int, default=5, help="timed searches per line")
    defaults = {"size": 6} if known.game == "hex" else {}
    option_flags = flags.add_game_flags(  # help: what runs, configs/<game>.py's size elsewhere
        parser.add_argument_group(f"{known.game} options"),
        known.game,
        defaults={**cfg.game_defaults(known.game), **defaults},
    )
    args = parser.parse_args(argv)
    if args.sims < 1 or args.repeats < 1:
        parser.error("--sims and --repeats must be at least 1")
    options = {**defaults, **flags.game_options(args, known.game, option_flags)}
    rows = run(known.game, options, args.sims, args.repeats)
    spiel = rows[-1][1]
    print(f"{known.game} {options}, {args.sims} simulations, {jax.devices()[0].platform}")
    print(f"{'search':<48}{'ms/position':>12}{'/ OpenSpiel':>13}")
    for name, ms in rows:
        ratio = "-" if ms is None or spiel is None else f"{ms / spiel:.2f}x"
        print(f"{name:<48}{'-' if ms is None else f'{ms:.2f}':>12}{ratio:>13}")
    if spiel is None:
        print(
            "(no OpenSpiel row: open-spiel is not installed, or has no such game; "
            "pip install open-spiel, or the test extras)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("benchmarks.latency", main))
