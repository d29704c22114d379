"""The training loop's own evaluation (azjax/loop.py's module doc): the network against the
network of the previous evaluation and against pure MCTS at twice its simulations (seed 000's
PUCT baseline), from paired random openings where `eval_opening_plies` asks; its exact error
rate on the game's solved positions (`azjax.solved`); its placement on the game's Elo ladder
(`azjax.ladder`). `make_evaluation` builds it; `evaluation_affordable` and
`next_evaluation_seconds` hold it to `eval_budget` of the session's wall time. The evaluation
wing (`azjax.eval`) plays any other agent, `--eval_opponent`, beside it."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from azjax import parallel
from azjax.ahead import Ahead, compile_clock, compile_for
from azjax.ahead import wanted as ahead_wanted
from azjax.arena import MatchResult, make_match, make_search_agent
from azjax.config import Config
from azjax.ladder import make_ladder_evaluation
from azjax.metrics import Metrics
from azjax.network import make_apply, make_network
from azjax.search import SearchSpec
from azjax.selfplay import random_moves
from azjax.solved import make_error_evaluation

# the caller's evaluation key: fold_in(the evaluation key, this). Not 0 - 3: JAX's split(key, n)
# is fold_in(key, 0 .. n - 1), the matches' and the ladder's keys, and 3 the error rate's (at 1,
# --eval_opponent's match drew the keys of the match against pure MCTS)
EXTRA_EVALUATION_STREAM = 4


def evaluation_matches(
    config: Config, num_games: int, mesh: Mesh | None = None
) -> tuple[Callable, Callable]:
    """(vs_previous, vs_mcts): the in-loop evaluation's two jitted matches of `num_games` games
    (`azjax.arena.make_match`, its games split over `mesh`'s devices where they divide; module
    doc)."""
    game = config.make_game()
    apply = make_apply(make_network(config, game))
    spec = SearchSpec.from_config(config)
    agent = make_search_agent(game, spec, apply)
    agent_eps = make_search_agent(game, spec, apply, epsilon=config.eval_epsilon)
    baseline = SearchSpec.pure_mcts(2 * config.num_simulations, search="puct")  # seed 000's
    mcts = make_search_agent(game, baseline, None)
    return (
        make_match(game, agent_eps, agent_eps, num_games, mesh=mesh),
        make_match(game, agent, mcts, num_games, mesh=mesh),
    )


def make_evaluation(
    config: Config, mesh: Mesh | None = None, *, ratings: dict[str, float] | None = None
) -> Callable:
    """evaluate(variables, previous, key, full=True) -> {"eval/...": ...}: the in-loop matches
    (module doc), split over `mesh`'s devices where the games divide, and the exact error rate;
    with `full=False` the error rate alone (a few seconds: the loop measures it also when the
    budget puts the matches off; {} where the game has no solved positions). For a shared run
    each game's, as eval/<game>/.... With `compile_only=True` it compiles the programs such a
    call would run (the ladder's: those its placement most likely plays) and returns {}: the loop
    has them compiled on background threads while it plays (`azjax.ahead`). `ratings`: {game:
    the ladder Elo its placement starts from} (a resumed run's last, `last_ratings`; else 0)."""
    if config.games:
        from azjax import shared

        each = shared.per_game(config, lambda c: make_evaluation(c, mesh, ratings=ratings))
        return lambda variables, previous, key, **options: {
            k.replace("eval/", f"eval/{name}/", 1): v
            for name, values in each(variables, previous, key, **options).items()
            for k, v in values.items()
        }
    vs_previous, vs_mcts = evaluation_matches(config, config.eval_games, mesh)
    start = (ratings or {}).get(config.game, 0.0)
    on_ladder = make_ladder_evaluation(config, mesh=mesh, start=start)  # None without a table
    on_solved = make_error_evaluation(config, mesh=mesh)  # None without solved positions
    game = config.make_game()

    def evaluate(variables, previous, key, full=True, compile_only=False) -> dict[str, Any]:
        k_prev, k_mcts, k_ladder = jax.random.split(key, 3)
        k_solved = jax.random.fold_in(key, 3)  # the matches' keys as before
        out = {}
        if on_solved is not None:
            out.update(on_solved(variables, k_solved, compile_only=compile_only))
        if not full:
            return out
        for name, match, opponent, k in (
            ("previous", vs_previous, previous, k_prev),
            ("mcts", vs_mcts, None, k_mcts),
        ):
            args = match_args(config, game, config.eval_games, variables, opponent, k)
            if compile_only:
                compile_for(match, *args)
                continue
            res = MatchResult.from_returns(*parallel.fetch(match(*args)))
            out[f"eval/{name}_score"] = res.score
            out[f"eval/{name}_wdl"] = [res.wins, res.draws, res.losses]
        if on_ladder is not None:
            out.update(on_ladder(variables, k_ladder, compile_only=compile_only))
        return out

    return evaluate


def match_args(config: Config, game, num_games: int, variables, opponent, key) -> tuple:
    """The arguments of an `evaluation_matches` match of `num_games` games: (variables, opponent,
    key) from the empty board (the keys as before openings existed), or with
    `config.eval_opening_plies` (variables, opponent, key, starts) from `paired_openings`."""
    if not config.eval_opening_plies:
        return variables, opponent, key
    k_match, k_open = jax.random.split(key)
    starts = paired_openings(game, k_open, num_games, config.eval_opening_plies)
    return variables, opponent, k_match, starts


OPENING_DRAWS = 64  # draws of an opening that ends the game before another is kept


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def paired_openings(game, key, num_games: int, plies: int):
    """num_games start states (even): num_games / 2 positions after `plies` uniformly random legal
    moves, each twice, at i and i + num_games / 2, where `azjax.arena.make_match` gives the first
    agent the other colour: every opening is played once with each colour. An opening that ends
    the game is drawn again (with `fold_in(key_i, n)`, up to OPENING_DRAWS times): a decided
    pair is a win for each side, whatever the agents."""

    def opening(k):
        def again(carry):
            n, _ = carry
            return n + 1, random_moves(game, jax.random.fold_in(k, n + 1), plies, plies)

        def over(carry):
            n, state = carry
            return game.is_terminal(state) & (n < OPENING_DRAWS - 1)

        return jax.lax.while_loop(over, again, (0, random_moves(game, k, plies, plies)))[1]

    half = jax.vmap(opening)(jax.random.split(key, num_games // 2))
    return jax.tree_util.tree_map(lambda x: jnp.concatenate([x, x]), half)


def last_ratings(config: Config, metrics: Metrics | None) -> dict[str, float]:
    """{game: its last logged ladder Elo} from process 0's metrics (a resumed run's: the
    placement starts there instead of at 0), the same on every process; games never placed are
    left out."""
    from azjax import shared

    names = list(shared.game_configs(config))
    keys = [f"eval/{name}/elo" if config.games else "eval/elo" for name in names]
    rows = metrics.rows if metrics is not None else []
    last = np.array([next((r[k] for r in reversed(rows) if k in r), np.nan) for k in keys])
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        last = np.asarray(multihost_utils.broadcast_one_to_all(last.astype(np.float64)))
    return {name: float(v) for name, v in zip(names, last) if np.isfinite(v)}


def last_matches(metrics: Metrics | None, upto: int) -> int:
    """The last iteration up to `upto` whose evaluation played its matches (a row with a
    `previous_score`, each game's in a shared run), 0 where none did, from process 0's metrics,
    the same on every process: the network a resumed run's next "vs previous" match plays."""
    rows = metrics.rows if metrics is not None else []
    step = max(
        (
            r["iteration"]
            for r in rows
            if r["iteration"] <= upto and any(k.endswith("previous_score") for k in r)
        ),
        default=0,
    )
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        step = int(multihost_utils.broadcast_one_to_all(np.int64(step)))
    return step


def next_evaluation_seconds(values: dict[str, Any]) -> float:
    """What the next full evaluation is expected to take, from the last one's `values`: as long
    as it (`eval_seconds`) less what it spent compiling (`eval_compile_seconds`: its programs are
    in jit's cache now), its ladder placements' part (`eval/elo_seconds` less
    `eval/elo_compile_seconds`, each game's in a shared run) replaced by what the next placements'
    rungs are expected to take (`eval/elo_next_seconds`, `azjax.ladder.placement_seconds`)."""
    seconds = values["eval_seconds"] - values.get("eval_compile_seconds", 0.0)
    for k, v in values.items():
        if k.startswith("eval/") and k.endswith("/elo_next_seconds"):
            placed = values[k.replace("/elo_next_seconds", "/elo_seconds")]
            placed -= values.get(k.replace("/elo_next_seconds", "/elo_compile_seconds"), 0.0)
            seconds += v - placed
    return max(seconds, 0.0)


def evaluation_affordable(
    config: Config, eval_seconds: float, session_seconds: float, expected: float = 0.0
) -> bool:
    """Whether an evaluation that falls due may run: with it, taking `expected` seconds (as
    long as the last one, its ladder part as its next rungs: `next_evaluation_seconds`), the
    evaluations of this session (`eval_seconds` so far) would take at most `config.eval_budget`
    of its time (`session_seconds` so far); always with eval_budget 0. In a multi-host run
    process 0's clock decides for all, which must agree."""
    budget = config.eval_budget
    ok = not budget or eval_seconds + expected <= budget * (session_seconds + expected)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        ok = bool(multihost_utils.broadcast_one_to_all(np.bool_(ok)))
    return ok


class Evaluations:
    """The in-loop evaluations of one training session: whether one falls due at an iteration
    (`due`), whether `eval_budget` affords it (`evaluation_affordable`, else the exact error
    rate alone and `eval_postponed`), the next one's programs compiled ahead on `azjax.ahead`'s
    threads (`compile_ahead`), and the seconds they took: `seconds` (all), `budgeted` (what the
    budget counts: less the compiling, paid once) and `next` (what the next full one is expected
    to take, `next_evaluation_seconds`). `evaluate`: `make_evaluation`'s, or None where the run
    does not evaluate; `extra`: the caller's own, (variables, key) -> values, played beside it
    with a key of its own; `limit`: the session's last iteration (math.inf: its time budget)."""

    def __init__(
        self,
        config: Config,
        evaluate: Callable | None,
        *,
        limit: float,
        extra: Callable | None = None,
    ):
        self.config, self.evaluate, self.limit, self.extra = config, evaluate, limit, extra
        self.ahead = Ahead()  # the next evaluation's programs, compiled while the loop plays
        self.compiling_for = 0  # the iteration whose evaluation `ahead` was last given
        self.seconds = self.budgeted = self.next = 0.0

    def due(self, it: int, session_ends: Callable[[], bool]) -> bool:
        """Whether iteration `it` evaluates: every `eval_interval`, and the session's last
        (`eval_final`; `session_ends` says whether it is)."""
        if self.evaluate is None:
            return False
        return it % self.config.eval_interval == 0 or (self.config.eval_final and session_ends())

    def compile_ahead(self, it: int, variables, key: jax.Array) -> None:
        """Has the programs of the evaluation due after iteration `it` compiled on the threads
        (`variables`, `key`: of the shapes it will be called with), where that one falls in the
        session, is not already given and `eval_compile_ahead` wants it."""
        config = self.config
        upcoming = config.eval_interval * (it // config.eval_interval + 1) if self.evaluate else 0
        if upcoming == self.compiling_for or not ahead_wanted(config.eval_compile_ahead):
            return
        if 0 < upcoming <= self.limit:
            self.compiling_for = upcoming
            args = (variables, variables, key)  # as the evaluation's own
            self.ahead.start(functools.partial(self.evaluate, *args, compile_only=True))

    def run(
        self, variables, previous, key: jax.Array, session_seconds: float, *, final: bool = False
    ) -> tuple[dict[str, Any], bool]:
        """(the metrics, whether the full evaluation ran) of an evaluation that fell due
        `session_seconds` into the session: the full one where the budget affords it, its
        compiling timed (`eval_compile_seconds`); else `eval_postponed` and the exact error rate
        alone, whose seconds count but are not what the next evaluation will take. The session's
        last iteration (`final`, where `eval_final` asks for it) has no later one to wait for: it
        runs in full whatever the budget, so that the run's last checkpoint is measured."""
        final = final and self.config.eval_final
        affordable = evaluation_affordable(self.config, self.budgeted, session_seconds, self.next)
        if not (final or affordable):
            values: dict[str, Any] = {"eval_postponed": 1}  # over eval_budget: the next interval
            t_eval = time.time()  # but the exact error rate, seconds, is measured
            errors = self.evaluate(variables, previous, key, full=False)
            if errors:
                values.update(errors, eval_seconds=time.time() - t_eval)
                self.seconds += values["eval_seconds"]
                self.budgeted += values["eval_seconds"]
            return values, False
        t_eval = time.time()
        with compile_clock() as compiling:  # what the next one will not pay again
            self.ahead.wait(drop_pending=True)  # what it has not compiled, it compiles
            values = dict(self.evaluate(variables, previous, key))
            if self.extra is not None:  # a key of its own, the loop's unchanged
                extra_key = jax.random.fold_in(key, EXTRA_EVALUATION_STREAM)
                values.update(self.extra(variables, extra_key))
        values["eval_seconds"] = time.time() - t_eval
        values["eval_compile_seconds"] = min(compiling(), values["eval_seconds"])
        self.seconds += values["eval_seconds"]
        self.budgeted += values["eval_seconds"] - values["eval_compile_seconds"]
        self.next = next_evaluation_seconds(values)
        return values, True

    def close(self) -> None:
        """Ends the threads: a compilation in flight ends before the process may."""
        self.ahead.close()
