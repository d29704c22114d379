"""An anchored Elo ladder: pure MCTS (UCT, random rollouts) at 2^k simulations, rated once.

    ladder = load_ladder(game)                      # None where no table ships for the game
    placement = place(play, ladder.elo, rounds=4, games_per_rung=16)
    placement.elo, placement.ci95

The rungs are fixed, reproducible players: `rung_spec(sims)`, UCT with c = 1.4 over uniform
priors, one random rollout per simulation (as OpenSpiel's MCTSBot). Their ratings come from one
round robin per game and options (`azjax.eval.ladder.rate_rungs`, `evaluate.py ladder`): the
maximum-likelihood Elo of `azjax.eval.stats`, shifted so that the rung of ANCHOR_SIMS = 16
simulations is at 0. The tables ship in the package (azjax/ladders/<game>[-<option><value>..].json),
so a rating of 800 means the same player on every machine and in every run.

Placement (`place`) puts a new player on that scale with a bounded number of games: it plays the
two rungs whose ratings bracket its current estimate (the two end rungs beyond the ladder),
re-estimates its rating by maximum likelihood with the rungs' ratings held fixed, and moves on.
The estimate's interval counts the player's games only, not the rungs' own uncertainty (the
table keeps their standard errors). This module is pure (numbers in, numbers out; `play` is
passed in), so the training loop can use it without importing the evaluation wing.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from azjax.search import SearchSpec

ANCHOR_SIMS = 16  # the rung rated 0
LOOP_MAX_SIMS = 8192  # the training loop's rungs by default, where a table sets no cap of its own
C_UCT = 1.4  # OpenSpiel's default
TABLES = os.path.join(os.path.dirname(__file__), "ladders")
ELO_PER_NAT = 400.0 / math.log(10.0)
Z95 = 1.959963984540054


def rung_spec(sims: int) -> SearchSpec:
    """The search of the rung with `sims` simulations: pure MCTS, UCT, random rollouts."""
    return SearchSpec.pure_mcts(sims, search="uct", c_uct=C_UCT)


@dataclasses.dataclass(frozen=True)
class Ladder:
    """The rated rungs of one game and options (R rungs, by increasing simulations)."""

    game: str
    game_options: dict[str, Any]
    sims: tuple[int, ...]  # [R]
    elo: tuple[float, ...]  # [R], the rung of ANCHOR_SIMS at 0
    stderr: tuple[float, ...]  # [R], standard errors of their difference from the anchor rung
    games_per_pair: int
    info: dict[str, Any] = dataclasses.field(default_factory=dict)  # command, seconds, machine
    # the rungs the training loop plays by default (`loop_cap`): a table whose top rungs cost a
    # CPU run's evaluations several times more sets a lower cap (0: LOOP_MAX_SIMS)
    loop_max_sims: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(
            game=self.game,
            game_options=dict(self.game_options),
            anchor_sims=ANCHOR_SIMS,
            rungs=[
                dict(sims=s, elo=e, stderr=d) for s, e, d in zip(self.sims, self.elo, self.stderr)
            ],
            games_per_pair=self.games_per_pair,
            info=dict(self.info),
            **({"loop_max_sims": self.loop_max_sims} if self.loop_max_sims else {}),
        )

    def up_to(self, max_sims: int) -> Ladder:
        """The ladder of the rungs of at most `max_sims` simulations (at least the lowest rung;
        0: every rung)."""
        keep = max(1, sum(s <= max_sims for s in self.sims)) if max_sims else len(self.sims)
        return dataclasses.replace(
            self, sims=self.sims[:keep], elo=self.elo[:keep], stderr=self.stderr[:keep]
        )

    @staticmethod
    def from_json(data: dict[str, Any]) -> Ladder:
        rungs = data["rungs"]
        return Ladder(
            game=data["game"],
            game_options=dict(data["game_options"]),
            sims=tuple(int(r["sims"]) for r in rungs),
            elo=tuple(float(r["elo"]) for r in rungs),
            stderr=tuple(float(r["stderr"]) for r in rungs),
            games_per_pair=int(data["games_per_pair"]),
            info=dict(data.get("info", {})),
            loop_max_sims=int(data.get("loop_max_sims", 0)),
        )

    def loop_cap(self, max_sims: int) -> int:
        """The training loop's cap on rung simulations for `eval_ladder_max_sims` = `max_sims`:
        -1 (auto) the table's `loop_max_sims`, or LOOP_MAX_SIMS where it sets none; else
        `max_sims` itself (0: every rung)."""
        if max_sims >= 0:
            return max_sims
        return self.loop_max_sims or LOOP_MAX_SIMS


def table_name(game_name: str, options: dict[str, Any]) -> str:
    """'hex-size6-swapfalse.json': the table's file name for a game and its options."""
    parts = [game_name] + [f"{k}{str(v).lower()}" for k, v in sorted(options.items())]
    return "-".join(parts) + ".json"


LOCAL = "ladders"  # an installed package's: the working folder's tables, found before its own


def table_path(game) -> str:
    """Where `game`'s table is read from by default (which may not exist): the package's
    (azjax/ladders/), or with the package installed the working folder's `ladders/` where that
    holds one (`new_table_path`)."""
    local = new_table_path(game)
    return local if os.path.exists(local) else os.path.join(TABLES, os.path.basename(local))


def new_table_path(game) -> str:
    """Where `evaluate.py ladder` writes `game`'s table by default: the package's in a source
    checkout, where a table is rated to be shipped; with the package installed the working
    folder's `ladders/`, so that the package's files stay as installed (as `export` does)."""
    from azjax.pretrained import source_checkout

    folder = TABLES if source_checkout() else os.path.join(os.getcwd(), LOCAL)
    return os.path.join(folder, table_name(game.name, game.rules))


def load_ladder(game, path: str | None = None) -> Ladder | None:
    """The ladder of `game` from `path` (default: the package's table); None where there is no
    table; ValueError for a table of another game or options, or one that cannot be read."""
    return load_game_file(game, path or table_path(game), "ladder table", Ladder.from_json)


def save_ladder(ladder: Ladder, path: str) -> None:
    """Writes the table whole (a temporary file renamed over it)."""
    write_whole(path, json.dumps(ladder.to_json(), indent=2) + "\n")


def load_game_file(game, path: str, what: str, parse: Callable[[Any], Any]) -> Any:
    """parse(the JSON at `path`), a table with `.game` and `.game_options` that must be `game`'s
    (the ladder's tables, azjax.solved's sets); None where there is no file; ValueError naming
    `what` and the path for a file of another game or options, or one that cannot be read."""
    if not os.path.exists(path):
        return None

    def check(name, options):
        if name != game.name or options != dict(game.rules):
            raise ValueError(
                f"{what} {path!r} is for {name} {options}, not {game.name} {dict(game.rules)}"
            )

    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{what} {path!r} cannot be read: {e}") from None
    if isinstance(data, dict) and "game" in data:  # before its moves are read as the game's
        check(data["game"], data.get("game_options", {}))  # (another game's: "not a move")
    try:
        table = parse(data)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{what} {path!r} cannot be read: {e}") from None
    check(table.game, table.game_options)
    return table


def write_whole(path: str, text: str) -> None:
    """Writes `text` to `path` whole (a temporary file renamed over it): a reader, or a process
    stopped while writing, never sees half a file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


# ---- placement -----------------------------------------------------------------------------------
class Estimate(NamedTuple):
    elo: float  # maximum-likelihood rating on the ladder's scale
    stderr: float  # from the observed information


def estimate(
    rung_elo: np.ndarray, points: np.ndarray, games: np.ndarray, prior_draws: float = 1.0
) -> Estimate:
    """The rating r maximising prod_i p_i^s_i (1 - p_i)^(n_i - s_i), p_i = 1 / (1 + 10^((R_i -
    r) / 400)), the rungs' ratings R held fixed.

    rung_elo, points, games: float[R] (points = wins + draws / 2 against each rung). Where every
    game was won (or every game lost) the maximum is infinite: then each rung that was played
    gets `prior_draws` virtual draws, which keeps r finite (a bound, `off_scale`); otherwise none,
    since draws added against rungs far below a strong player (those it met climbing to its
    rating) pull its rating down: about 80 Elo at +2600 on 9x9 Hex's table, where the 95%
    interval then covered the truth in 69% of placements. With none played the estimate is 0
    with infinite error."""
    rung_elo, s, n = (np.asarray(x, np.float64) for x in (rung_elo, points, games))
    played = n > 0
    if not np.any(played):
        return Estimate(0.0, math.inf)
    if not 0 < s.sum() < n.sum():
        n = n + prior_draws * played
        s = s + 0.5 * prior_draws * played
    t = rung_elo / ELO_PER_NAT  # logistic scale
    theta = float(np.sum(n * t) / np.sum(n))  # start at the games' weighted mean rung
    info = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(t - theta))
        grad = float(np.sum(s - n * p))
        info = float(np.sum(n * p * (1.0 - p)))
        step = grad / max(info, 1e-12)
        step = max(-2.0, min(2.0, step))  # damped: at most 2 logistic units a step
        theta += step
        if abs(step) < 1e-10:
            break
    p = 1.0 / (1.0 + np.exp(t - theta))
    info = float(np.sum(n * p * (1.0 - p)))
    return Estimate(ELO_PER_NAT * theta, ELO_PER_NAT / math.sqrt(max(info, 1e-300)))


def bracket(rung_elo, rating: float, count: int = 2) -> list[int]:
    """The `count` rungs nearest `rating` on the ladder, by increasing index: with count = 2 those
    bracketing it, the last rung (by index) rated at or below it and the first rated above (where
    a table's top is not monotone, the larger budget of rungs rated alike within noise), or the
    end rungs where it lies beyond them."""
    r = np.asarray(rung_elo, np.float64)
    count = min(count, len(r))
    order = np.argsort(np.abs(r - rating), kind="stable")
    below = [int(i) for i in np.flatnonzero(r <= rating)]
    above = [int(i) for i in np.flatnonzero(r > rating)]
    if count == 2 and below and above:
        return sorted([below[-1], above[0]])
    return sorted(int(i) for i in order[:count])


def _unplayed(rung_elo, rating: float, played) -> list[int]:
    """The rungs bracketing `rating` with no game in `played` (float[R])."""
    return [i for i in bracket(rung_elo, rating) if played[i] == 0]


class Placement(NamedTuple):
    """Where a player stands on a ladder after `place`."""

    elo: float
    ci95: float  # half-width of the 95% interval
    games: int
    points: np.ndarray  # float64[R], wins + draws / 2 against each rung
    played: np.ndarray  # float64[R], games against each rung
    rounds: int = 0  # the rounds it played

    def said(self) -> str:
        """The placement as the commands print it: Elo +E ± C (G games, R rounds)."""
        rounds = f"{self.rounds} round{'s' if self.rounds != 1 else ''}"
        return f"Elo {self.elo:+.0f} ± {self.ci95:.0f} ({self.games} games, {rounds})"


# `evaluate.py place --rounds=auto` (its default): these rounds, then more while it has not settled
AUTO_ROUNDS = 4


class Rounds(NamedTuple):
    """A placement's rounds as `--rounds` names them: `auto` or a count."""

    count: int  # rounds played in any case
    settle: bool  # then more while it has not settled (`place`'s `settle`)


def parse_rounds(text: str) -> Rounds:
    """`--rounds`: "auto" (AUTO_ROUNDS rounds, then more until it has settled) or a count >= 1
    (exactly that many); ValueError naming both otherwise."""
    from azjax.flags import auto_or_count

    count = auto_or_count(text, "--rounds")
    return Rounds(AUTO_ROUNDS, True) if count is None else Rounds(count, False)


def place(
    play: Callable[[int, int], float],
    rung_elo,
    *,
    rounds: int,
    games_per_rung: int,
    start: float = 0.0,
    prior_draws: float = 1.0,
    settle: bool = False,
) -> Placement:
    """Places a player on the ladder with at most 2 x rounds x games_per_rung games (with
    `settle`, at most R rounds more).

    `play(rung, n)` plays n games against rung `rung` (its index) and returns the player's points
    (wins + draws / 2). Each round plays the two rungs that bracket the current estimate (first
    `start`), then re-estimates the rating from all games so far (`estimate`). With `settle`,
    where after `rounds` rounds a next round would still play a rung it has not met (`unmet`:
    from the anchor a strong player climbs about a rung a round), it plays on until it has met
    them, at most one round more per rung of the ladder."""
    if rounds < 1 or games_per_rung < 1:
        raise ValueError(
            f"place: rounds and games_per_rung must be >= 1, got {rounds}, {games_per_rung}"
        )
    rung_elo = np.asarray(rung_elo, np.float64)
    points, played = np.zeros(len(rung_elo)), np.zeros(len(rung_elo))
    current = Estimate(float(start), math.inf)
    done = 0
    while done < rounds or (
        settle and done < rounds + len(rung_elo) and _unplayed(rung_elo, current.elo, played)
    ):
        for i in bracket(rung_elo, current.elo):
            points[i] += play(i, games_per_rung)
            played[i] += games_per_rung
        current = estimate(rung_elo, points, played, prior_draws)
        done += 1
    return Placement(current.elo, Z95 * current.stderr, int(played.sum()), points, played, done)


def off_scale(p: Placement) -> int:
    """+1 where the player won every game it played against the ladder's top rung (its Elo is
    then only a lower bound: the ladder is too short for it), -1 where it lost every game
    against the bottom rung (an upper bound), else 0 (no game against either end: 0 too)."""
    top, bottom = len(p.played) - 1, 0
    if p.played[top] > 0 and p.points[top] == p.played[top]:
        return 1
    if p.played[bottom] > 0 and p.points[bottom] == 0:
        return -1
    return 0


def unmet(p: Placement, rung_elo) -> list[int]:
    """The rungs a next round of `place` would play (`bracket` of the final rating) that the
    placement never played: where there are any, it was still climbing (or falling) when its
    rounds ran out, and more rounds would move the rating further; [] where it has settled."""
    return _unplayed(rung_elo, p.elo, p.played)


def moving(p: Placement, rung_elo) -> int:
    """+1 where the placement had not settled (`unmet`) and was climbing (its rating above the
    mean of the rungs it played, by games), -1 where falling, 0 where it has settled: a rating
    still moving is short of (+1) or above (-1) what more rounds would give."""
    if not unmet(p, rung_elo):
        return 0
    played_mean = float(np.sum(np.asarray(rung_elo) * p.played) / max(p.played.sum(), 1.0))
    return 1 if p.elo >= played_mean else -1


# A match against a rung costs more than its simulations' share at the top of a ladder (one core,
# 16 games, `python -m benchmarks.ladder_rungs`: Connect Four x2.0, 2.9, 3.1 a doubling from 1024
# to 8192 simulations, 8x8 Othello x2.0, 2.3, 2.8; docs/benchmarks.md): a rung not yet played is
# costed as sims^RUNG_COST_EXPONENT.
RUNG_COST_EXPONENT = 1.5


def scaled_seconds(seconds: float, from_sims: int, to_sims: int) -> float:
    """A rung match's seconds at `from_sims` simulations costed at `to_sims`: by their ratio to
    the power RUNG_COST_EXPONENT where it has more, as the same where it has fewer (a bound: the
    network's half does not shrink)."""
    return seconds * max(1.0, to_sims / from_sims) ** RUNG_COST_EXPONENT


def placement_seconds(sims, rung_elo, rating: float, seconds: dict[int, float]) -> float:
    """What a loop placement (two rounds) starting at `rating` is expected to take: twice the
    seconds of the first round's two rungs (`bracket`), the second round taken to play them
    again. `seconds`: {rung index: seconds its last match took}; a rung not yet played is
    costed from the played one nearest in simulations (`scaled_seconds`). 0 where none was
    played."""
    if not seconds:
        return 0.0
    sims = np.asarray(sims, np.float64)

    def cost(i: int) -> float:
        if i in seconds:
            return seconds[i]
        k = min(seconds, key=lambda j: (abs(math.log(sims[j] / sims[i])), -sims[j]))
        return scaled_seconds(seconds[k], sims[k], sims[i])

    return 2.0 * sum(cost(i) for i in bracket(rung_elo, rating))


def compile_order(rung_elo, rating: float) -> list[int]:
    """The rungs whose matches a placement starting at `rating` most likely plays, most likely
    first: the first round's two (`bracket`), then the others by their distance in rungs from
    those, nearer first and above before below (a network in training climbs)."""
    first = bracket(rung_elo, rating)
    lo, hi = min(first), max(first)

    def distance(i: int) -> tuple[int, int]:
        return (0, 0) if i in first else (1 + max(lo - i, i - hi, 0), int(i < lo))

    return sorted(range(len(rung_elo)), key=distance)


# ---- the training loop's placement ---------------------------------------------------------------
def ladder_games_per_rung(eval_games: int) -> int:
    """Games against each rung in each of the in-loop placement's two rounds: eval_games in all
    (two rounds of two rungs), even, at least 2."""
    return max(2, 2 * (eval_games // 8))


# The in-loop placement's rungs up to the largest whose trees, for one match's games, fit in
# SHARED_TREE_BYTES share one compiled program (`azjax.search.Budget`: the simulation count is an
# argument); the rungs above it get one program each, where a small rung's search would spend
# more on its empty nodes than a compilation saves.
SHARED_TREE_BYTES = 8 << 20


def shared_capacity(game, sims, games: int) -> int:
    """The simulations of the largest of the rungs `sims` whose trees for `games` games take at
    most SHARED_TREE_BYTES (at least the smallest rung's)."""
    from azjax.search import bytes_per_tree

    fit = [s for s in sims if games * bytes_per_tree(game, s) <= SHARED_TREE_BYTES]
    return max(fit, default=min(sims))


def make_ladder_evaluation(
    config, path: str | None = None, *, mesh=None, start: float = 0.0
) -> Callable | None:
    """evaluate(variables, key) -> {"eval/elo", "eval/elo_ci95", "eval/elo_games",
    "eval/elo_off_scale", "eval/elo_moving", "eval/elo_top", "eval/elo_seconds",
    "eval/elo_compile_seconds", "eval/elo_next_seconds"}: the network
    (the run's search, greedy) placed on the game's ladder by `place`, two rounds of
    `ladder_games_per_rung(eval_games)` games against each of two rungs, starting at the previous
    evaluation's rating (the Python loop keeps it; `start` at the first: a resumed run's last logged
    rating, else 0), its games split over `mesh`'s devices where they divide
    (`azjax.arena.make_match`). The rungs up to `shared_capacity` play in one compiled match, their
    simulation count its argument. None where `config.eval_ladder` is off or the package has no
    table for the game and options (`path`: another table). Only the rungs of at most
    `config.eval_ladder_max_sims` simulations play (`Ladder.up_to`; -1, the default: the table's
    `loop_max_sims`, else LOOP_MAX_SIMS, `Ladder.loop_cap`).
    "eval/elo_seconds" is what the placement took ("eval/elo_compile_seconds" of it compiling a
    rung's match not compiled ahead); "eval/elo_next_seconds" what the next one,
    starting at this rating, is expected to take, by the seconds each rung's last match took less
    any compiling in it (`placement_seconds`, `azjax.ahead.compile_clock`): the loop's
    `eval_budget` weighs an evaluation by it, so that one whose rungs are dearer than the last
    evaluation's is put off before it runs over.
    `evaluate(variables, key, compile_only=True)` compiles the matches the next placement's first
    round plays, then the others by `compile_order` (nearest first: `azjax.ahead` drops what it
    has not reached by the evaluation), leaving out those already played, and returns {}."""
    from azjax import parallel
    from azjax.ahead import compile_clock, compile_for
    from azjax.arena import MatchResult, make_match, make_search_agent
    from azjax.network import make_apply, make_network
    from azjax.search import Budget

    if not config.eval_ladder:
        return None
    game = config.make_game()
    ladder = load_ladder(game, path)
    if ladder is None:
        return None
    ladder = ladder.up_to(ladder.loop_cap(config.eval_ladder_max_sims))  # the rest: place
    n = ladder_games_per_rung(config.eval_games)
    agent = make_search_agent(
        game, SearchSpec.from_config(config), make_apply(make_network(config, game))
    )
    shared = shared_capacity(game, ladder.sims, n)
    matches: dict[int, Callable] = {}  # capacity -> jitted match, compiled when first needed
    last = [float(start)]  # the previous evaluation's rating
    played: set[int] = set()  # the capacities whose match has run (and so is compiled)
    seconds: dict[int, float] = {}  # rung index -> seconds its last match took

    def capacity(i: int) -> int:  # the simulations of the trees rung i searches in
        return max(shared, ladder.sims[i])

    def match(i: int) -> tuple[Callable, Budget]:  # rung i's match and the rung's variables
        c = capacity(i)
        if c not in matches:
            rung = make_search_agent(game, rung_spec(c), None)
            matches[c] = make_match(game, agent, rung, n, mesh=mesh)
        return matches[c], Budget(np.int32(ladder.sims[i]))

    def evaluate(variables, key, compile_only: bool = False) -> dict[str, Any]:
        if compile_only:  # most wanted first: `azjax.ahead` may drop the rest
            asked = set(played)
            for i in compile_order(ladder.elo, last[0]):
                if capacity(i) not in asked:
                    asked.add(capacity(i))
                    program, budget = match(i)
                    compile_for(program, variables, budget, jax.random.fold_in(key, 1))
            return {}
        calls = [0]
        compiled = [0.0]  # the seconds the placement spent compiling
        t_start = time.perf_counter()

        def play(i: int, games: int) -> float:
            calls[0] += 1
            with compile_clock() as compiling:  # a rung not compiled ahead compiles here
                t0 = time.perf_counter()
                program, budget = match(i)
                out = program(variables, budget, jax.random.fold_in(key, calls[0]))
                played.add(capacity(i))  # compiled, in jit's cache
                r = MatchResult.from_returns(*parallel.fetch(out))
                took, compiling_took = time.perf_counter() - t0, compiling()
                seconds[i] = max(took - compiling_took, 0.0)  # what it takes played again
                compiled[0] += min(compiling_took, took)
            return r.wins + 0.5 * r.draws

        p = place(play, ladder.elo, rounds=2, games_per_rung=n, start=last[0])
        last[0] = p.elo
        return {
            "eval/elo": p.elo,
            "eval/elo_ci95": p.ci95,
            "eval/elo_games": p.games,
            "eval/elo_off_scale": off_scale(p),  # +1: above the top rung, a lower bound
            "eval/elo_moving": moving(p, ladder.elo),  # +1 still climbing, -1 falling, 0 settled
            "eval/elo_top": float(ladder.elo[-1]),
            "eval/elo_seconds": time.perf_counter() - t_start,
            "eval/elo_compile_seconds": compiled[0],  # of those, compiling
            "eval/elo_next_seconds": placement_seconds(ladder.sims, ladder.elo, p.elo, seconds),
        }

    return evaluate
