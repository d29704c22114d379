"""Rating the ladder's rungs and placing agents on it (`azjax.ladder` holds the pure parts).

    ladder = rate_rungs(game, [4, 8, 16, 32], games_per_pair=20, span=2, key=key)
    placement = place_agent(game, agent, ladder, rounds=4, games_per_rung=16, key=key)

    python evaluate.py ladder --game=hex --size=5 --rungs=2:9 --games=20     # the table
    python evaluate.py place ckpt:runs/hex5@latest --games=16                # an agent on it
    python evaluate.py ladder --game=hex --size=5 --rungs=2:11 --extend      # two rungs more

`rate_rungs` plays every pair of rungs at most `span` rungs apart (pairs further apart are
near-certain wins that cost the most and tell little) and fits maximum-likelihood Elo ratings
(`azjax.eval.stats.elo`, one virtual draw per pair where some rung won or lost every game),
shifted so that the rung of 16 simulations is at 0. `known=` (the command's `--extend`) keeps a
table's games and plays only the pairs that new rungs add, then fits every rating again.
"""

from __future__ import annotations

import functools
import platform
import time
from collections.abc import Callable

import jax
import numpy as np

from azjax.eval.agent import Agent, SearchSetup, search_agent
from azjax.eval.calibration import calibrate
from azjax.eval.match import play_games
from azjax.eval.stats import elo, is_connected
from azjax.flags import value_text
from azjax.ladder import (
    ANCHOR_SIMS,
    Ladder,
    Placement,
    load_ladder,
    place,
    rung_spec,
    shared_capacity,
)
from azjax.parallel import local_devices_used
from azjax.search import Budget
from games.base import Game


def rung_agent(game: Game, sims: int, capacity: int | None = None) -> Agent:
    """The rung of `sims` simulations. With a `capacity` of at least `sims` it searches in trees
    of capacity + 1 nodes and takes its count as its variables (`azjax.search.Budget`): every
    rung of one capacity then plays in the same compiled match, the same games."""
    setup = SearchSetup(game, rung_spec(sims), None)
    if capacity is None or capacity < sims:
        return search_agent(f"rung:{sims}", setup)
    return Agent(
        name=f"rung:{sims}",
        batched=True,
        act=_shared_act(game, capacity),
        variables=Budget(np.int32(sims)),
        search=setup,
    )


@functools.cache
def _shared_act(game: Game, capacity: int) -> Callable:
    """One act for every rung up to `capacity` simulations (jitted matches are cached by act)."""
    return SearchSetup(game, rung_spec(capacity), None).make_act()


def parse_rungs(text: str, *, anchored: bool = True) -> list[int]:
    """'2:9' -> [4, 8, ..., 512] (2^2 to 2^9); ValueError unless 0 <= lo < hi <= 16 and (where
    `anchored`, a table's rungs) the range holds the anchor, 2^4 = 16."""
    lo, sep, hi = text.partition(":")
    try:
        lo_k, hi_k = int(lo), int(hi)
    except ValueError:
        lo_k = hi_k = -1
    if not sep or not 0 <= lo_k < hi_k <= 16:
        raise ValueError(
            f"--rungs must be LO:HI with 0 <= LO < HI <= 16 (2^LO..2^HI), got {text!r}"
        )
    if anchored and not lo_k <= 4 <= hi_k:
        raise ValueError(f"--rungs {text!r} must include 4 (the anchor, 16 simulations at Elo 0)")
    return [2**k for k in range(lo_k, hi_k + 1)]


def rate_rungs(
    game: Game,
    sims: list[int],
    *,
    games_per_pair: int,
    span: int,
    key,
    known: Ladder | None = None,
    log=print,
) -> Ladder:
    """Rates the rungs `sims` (increasing, holding ANCHOR_SIMS) by a round robin of the pairs at
    most `span` rungs apart, `games_per_pair` games each. With a `known` table whose rungs `sims`
    holds, the pairs it played keep its games and only the others are played (a longer ladder
    without replaying the rated one); every rating is fitted again over all the games."""
    if ANCHOR_SIMS not in sims or sorted(set(sims)) != list(sims):
        raise ValueError(f"ladder: rungs must increase and hold {ANCHOR_SIMS}, got {sims}")
    if games_per_pair < 2 or span < 1:
        raise ValueError(
            f"ladder: --games must be >= 2 and --span >= 1, got {games_per_pair}, {span}"
        )
    t0 = time.time()
    num = len(sims)
    points, played = _known_games(known, sims)
    pending = [
        (i, j) for i in range(num) for j in range(i + 1, min(num, i + span + 1)) if not played[i, j]
    ]
    busy = sorted({sims[k] for pair in pending for k in pair})
    capacity = shared_capacity(game, busy or sims, games_per_pair)  # small rungs: one program
    agents = {s: rung_agent(game, s, capacity) for s in busy}
    compiled = set()  # the matches compiled so far: the rungs up to `capacity` share one agent
    for i, j in pending:
        match = tuple(s if s > capacity else 0 for s in (sims[i], sims[j]))
        new, compiled = match not in compiled, compiled | {match}
        outcome = play_games(
            game,
            agents[sims[i]],
            agents[sims[j]],
            games_per_pair,
            jax.random.fold_in(jax.random.fold_in(key, sims[i]), sims[j]),  # the pair's key
        )
        r = outcome.result
        points[i, j], points[j, i] = r.wins + 0.5 * r.draws, r.losses + 0.5 * r.draws
        played[i, j] = played[j, i] = r.games
        t = outcome.wall_seconds
        log(
            f"{sims[i]} vs {sims[j]} sims: W{r.wins} D{r.draws} L{r.losses} "
            f"({t:.{1 if t >= 0.1 else 2}f} s{', compiling included' if new else ''})"
        )
    prior = 0.0 if is_connected(points, played) else 1.0
    ratings = elo(points, played, prior_draws=prior, anchor=sims.index(ANCHOR_SIMS))
    return Ladder(
        game=game.name,
        game_options=dict(game.rules),
        sims=tuple(sims),
        elo=tuple(float(e) for e in ratings.elo),  # from the anchor rung, as their stderr
        stderr=tuple(float(s) for s in ratings.stderr),
        games_per_pair=games_per_pair,
        info=dict(
            span=span,
            prior_draws=prior,
            seconds=round(time.time() - t0, 1),
            machine=f"{platform.machine()}, {jax.devices()[0].platform}",
            devices=local_devices_used(),  # the games split over them: another count, other games
            points=points.tolist(),
            played=played.tolist(),
            **({"extended": _extended(known, len(pending))} if known else {}),
        ),
        loop_max_sims=known.loop_max_sims if known else 0,  # the training loop's, kept
    )


def _known_games(known: Ladder | None, sims: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(points, played) [R, R] over the rungs `sims` with the games the `known` table played (none
    without one); a ValueError where `sims` leaves out one of its rungs or it holds no games."""
    points, played = np.zeros((2, len(sims), len(sims)))
    if known is None:
        return points, played
    if not set(known.sims) <= set(sims):
        raise ValueError(
            f"--extend: the rungs {sims[0]}..{sims[-1]} must hold the table's "
            f"({', '.join(map(str, known.sims))})"
        )
    if "points" not in known.info or "played" not in known.info:
        raise ValueError("--extend: the table holds no games to keep; rate it without --extend")
    at = [sims.index(s) for s in known.sims]
    points[np.ix_(at, at)] = known.info["points"]
    played[np.ix_(at, at)] = known.info["played"]
    return points, played


def _extended(known: Ladder, new_pairs: int) -> dict:
    """What an extended table kept of the one before it (its `info` names the latest rating): its
    rungs and how their games were played (the pairs' games, span, seed, devices and machine:
    what reproduces them, which the new table's own fields no longer say)."""
    return dict(
        sims=list(known.sims),
        games_per_pair=known.games_per_pair,
        seconds=known.info.get("seconds"),
        span=known.info.get("span"),
        **{k: known.info[k] for k in ("seed", "devices", "machine") if k in known.info},
        new_pairs=new_pairs,
        **({"before": known.info["extended"]} if "extended" in known.info else {}),
    )


def place_agent(
    game: Game,
    agent: Agent,
    ladder: Ladder,
    *,
    rounds: int,
    games_per_rung: int,
    key,
    start: float = 0.0,
    settle: bool = False,
    log=None,
) -> Placement:
    """`agent` placed on `ladder` by `azjax.ladder.place` with real games (the rungs up to
    `shared_capacity` in one compiled match); `settle` as there. The rungs' searches are cached
    by their settings (`azjax.eval.agent`), so later placements reuse what earlier ones compiled.
    A ladder of another game or options is a ValueError (its ratings would be taken as this
    game's rungs')."""
    if ladder is None:
        raise ValueError(f"no ladder to place on (load_ladder found no table for {game.name})")
    if ladder.game != game.name or ladder.game_options != dict(game.rules):
        raise ValueError(
            f"the ladder is for {ladder.game} {ladder.game_options}, not {game.name} "
            f"{dict(game.rules)}"
        )
    rungs: dict[int, Agent] = {}
    calls = [0]
    capacity = shared_capacity(game, ladder.sims, games_per_rung)
    # a `seconds` agent calibrated once for the batch its matches play: one agent rated on every
    # rung (each match calibrated it afresh: 187 - 278 simulations on one placement)
    batch = 1 if agent.stateful else (games_per_rung + 1) // 2
    calibrated = calibrate(agent, game, batch, jax.random.fold_in(key, 0))  # the matches: 1, 2..
    if log and calibrated is not agent:
        log(
            f"{agent.name}: {calibrated.search.spec.num_simulations} simulations a move "
            f"(calibrated to {agent.search.seconds:g} s)"
        )
    agent = calibrated

    def play(i: int, n: int) -> float:
        rung = rungs.setdefault(i, rung_agent(game, ladder.sims[i], capacity))
        calls[0] += 1
        r = play_games(game, agent, rung, n, jax.random.fold_in(key, calls[0])).result
        if log:
            log(
                f"vs rung {ladder.sims[i]} sims ({ladder.elo[i]:+.0f}): "
                f"W{r.wins} D{r.draws} L{r.losses}"
            )
        return r.wins + 0.5 * r.draws

    return place(
        play,
        ladder.elo,
        rounds=rounds,
        games_per_rung=games_per_rung,
        start=start,
        settle=settle,
    )


def require_ladder(game: Game, path: str | None = None) -> Ladder:
    """The ladder of `game`; ValueError naming the command that makes one where none exists."""
    ladder = load_ladder(game, path)
    if ladder is None and path is not None:
        raise ValueError(f"--table {path!r}: no such file (leave it out for the package's table)")
    if ladder is None:
        flags = " ".join(
            f"--{k}={value_text(v)}" for k, v in {"game": game.name, **game.rules}.items()
        )
        raise ValueError(
            f"no ladder table for {game.name} {dict(game.rules)}; make one with azjax-evaluate "
            f"ladder {flags} --rungs=2:9 --games=20 (python evaluate.py in a checkout)"
        )
    return ladder
