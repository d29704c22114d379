"""Round-robin tournaments: every pair of agents plays, then a win-ratio matrix and Elo ratings.

record = round_robin(game, names, agents, 20, key)         # experiment 2
record = run_tournament(game, specs, folder, games=20)     # evaluate.py tournament
"""

from __future__ import annotations

import os

import jax
import numpy as np

from azjax.eval.calibration import calibrate
from azjax.eval.match import play_games
from azjax.eval.records import (
    check_games,
    checkpoints_record,
    outcome_record,
    plot_heatmap,
    remove_earlier,
    write_json,
)
from azjax.eval.specs import parse_agents
from azjax.eval.stats import Z95, elo, is_connected
from games.base import Game


def run_tournament(
    game: Game,
    specs: list[str],
    folder: str,
    *,
    games: int | None,
    seed: int = 0,
    openings: str = "none",
    log=print,
) -> dict:
    """The agents `specs` name in a round robin of `games` games per pair; writes
    tournament.json and win_ratio.png into `folder` and returns the record.

    `openings` (`azjax.eval.openings`): "all" or "random:N[:PLIES]" start every pair's games from
    those openings, each once with each colour (`games` then None, or twice their number: any
    other is refused), so that players that search deterministically do not play one game per
    colour over and over."""
    from azjax.eval import openings as op

    k_open, k_play = jax.random.split(jax.random.PRNGKey(seed))
    moves = op.openings(game, openings, k_open)
    starts = op.both_colours(moves) if openings != "none" else None
    games = op.games_played(openings, moves, games)
    check_games(games)
    if isinstance(specs, str) or len(specs) < 2:
        raise ValueError(f"tournament: give at least two agents' specs, got {specs!r}")
    agents = parse_agents(specs, game, seed=seed)

    names = unique_names(specs)
    played = dict(seed=seed, openings=openings, checkpoints=checkpoints_record(names, agents))
    remove_earlier(folder, "tournament.json", "win_ratio.png")

    def keep(partial: dict) -> None:  # a tournament stopped by a signal keeps its matches
        write_json(folder, "tournament.json", dict(partial, **played, complete=False))

    try:
        record = round_robin(
            game,
            names,
            agents,
            games,
            k_play if starts is not None else jax.random.PRNGKey(seed),  # none: the keys as before
            log=log,
            on_match=keep,
            openings=starts,
        )
    finally:
        for agent in agents:
            agent.close()
    record.update(played, complete=True)
    write_json(folder, "tournament.json", record)  # before the plot: a signal there keeps it
    plot_heatmap(record, os.path.join(folder, "win_ratio.png"))
    return record


def round_robin(
    game: Game,
    names: list[str],
    agents: list,
    num_games: int,
    key,
    log=None,
    on_match=None,
    openings: list[tuple[int, ...]] | None = None,
) -> dict:
    """Every pair of `agents` (called `names`) plays `num_games` games, colours alternating
    (from `openings`, `num_games` move sequences in `play_games`'s order, where given).

    `seconds` agents are calibrated once for the batch a match plays: half the games at once, or
    one at a time in the matches of a stateful agent (gtp, human), where a tournament holds one
    (then for both). Returns the record
    `evaluate.py tournament` writes: the matches, the win-ratio matrix and Elo ratings.
    `on_match(record)`, if given, is told the record of the matches played so far after each
    one (pairs not yet played have no win ratio)."""
    if len(names) != len(agents) or len(agents) < 2:
        raise ValueError(
            f"round_robin: give two or more agents and a name each, got {len(agents)} agents "
            f"and {len(names)} names"
        )
    log = log or (lambda text: print(text, flush=True))
    keys = [jax.random.fold_in(key, i) for i in range(len(agents))]
    lockstep = [calibrate(a, game, (num_games + 1) // 2, k) for a, k in zip(agents, keys)]
    alone = lockstep  # one game at a time: the matches with a stateful agent
    if any(a.stateful for a in agents):
        alone = [calibrate(a, game, 1, k) for a, k in zip(agents, keys)]
    num = len(agents)
    points, played = np.zeros((num, num)), np.zeros((num, num))
    matches = []
    for i in range(num):
        for j in range(i + 1, num):
            k = jax.random.fold_in(key, 1000 + i * num + j)
            pair = alone if agents[i].stateful or agents[j].stateful else lockstep
            outcome = play_games(game, pair[i], pair[j], num_games, k, openings=openings)
            r = outcome.result
            points[i, j], points[j, i] = r.wins + 0.5 * r.draws, r.losses + 0.5 * r.draws
            played[i, j] = played[j, i] = r.games
            matches.append(outcome_record((names[i], names[j]), outcome, game))
            record = dict(
                game=game.name,
                game_options=game.options,
                games_per_pair=num_games,
                agents=list(names),
                matches=matches,
                **tournament_summary(names, points, played),
            )
            if on_match is not None:  # the last match too: a signal may come before the end
                on_match(record)
            log(
                f"{names[i]} vs {names[j]}: W{r.wins} D{r.draws} L{r.losses} "
                f"({outcome.wall_seconds:.1f} s)"
            )
    return record


def unique_names(specs: list[str]) -> list[str]:
    """The specs as names, a repeated one numbered (`random`, `random #2`)."""
    seen: dict[str, int] = {}
    out = []
    for s in specs:
        seen[s] = seen.get(s, 0) + 1
        out.append(s if seen[s] == 1 else f"{s} #{seen[s]}")
    return out


def tournament_summary(names, points: np.ndarray, played: np.ndarray) -> dict:
    """Win-ratio matrix and Elo ratings (one virtual draw per pair if the MLE is infinite).

    points: float[P, P], wins + draws/2 of the row agent against the column agent;
    played: float[P, P], games between them. An agent with no games yet (a tournament stopped
    part-way) has no rating (None).
    """
    rated = np.flatnonzero(played.sum(axis=1) > 0)
    sub = np.ix_(rated, rated)
    prior = 0.0 if is_connected(points[sub], played[sub]) else 1.0
    ratings = elo(points[sub], played[sub], prior_draws=prior)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(played > 0, points / played, np.nan)
    by_agent: dict = {n: None for n in names}
    for i, e, s in zip(rated, ratings.elo, ratings.stderr):
        by_agent[names[i]] = dict(elo=float(e), stderr=float(s), ci95=float(Z95 * s))
    return dict(
        win_ratio=[[None if np.isnan(v) else float(v) for v in row] for row in ratio],
        elo=by_agent,
        elo_prior_draws=prior,
    )
