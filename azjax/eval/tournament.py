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
from azjax.eval.records import check_games, outcome_record, plot_heatmap, write_json
from azjax.eval.specs import parse_agent
from azjax.eval.stats import Z95, elo, is_connected
from games.base import Game


def run_tournament(
    game: Game, specs: list[str], folder: str, *, games: int, seed: int = 0, log=print
) -> dict:
    """The agents `specs` name in a round robin of `games` games per pair; writes
    tournament.json and win_ratio.png into `folder` and returns the record."""
    check_games(games)
    if len(specs) < 2:
        raise ValueError("tournament: give at least two agents")
    agents = [parse_agent(s, game) for s in specs]
    try:
        record = round_robin(
            game, unique_names(specs), agents, games, jax.random.PRNGKey(seed), log=log
        )
    finally:
        for agent in agents:
            agent.close()
    record["seed"] = seed
    plot_heatmap(record, os.path.join(folder, "win_ratio.png"))
    write_json(folder, "tournament.json", record)
    return record


def round_robin(game: Game, names: list[str], agents: list, num_games: int, key, log=None) -> dict:
    """Every pair of `agents` (called `names`) plays `num_games` games, colours alternating.

    `seconds` agents are calibrated once, for the batch every match plays. Returns the record
    `evaluate.py tournament` writes: the matches, the win-ratio matrix and Elo ratings."""
    log = log or (lambda text: print(text, flush=True))
    batch = 1 if any(a.stateful for a in agents) else (num_games + 1) // 2
    agents = [calibrate(a, game, batch, jax.random.fold_in(key, i)) for i, a in enumerate(agents)]
    num = len(agents)
    points, played = np.zeros((num, num)), np.zeros((num, num))
    matches = []
    for i in range(num):
        for j in range(i + 1, num):
            k = jax.random.fold_in(key, 1000 + i * num + j)
            outcome = play_games(game, agents[i], agents[j], num_games, k)
            r = outcome.result
            points[i, j], points[j, i] = r.wins + 0.5 * r.draws, r.losses + 0.5 * r.draws
            played[i, j] = played[j, i] = r.games
            matches.append(outcome_record((names[i], names[j]), outcome))
            log(
                f"{names[i]} vs {names[j]}: W{r.wins} D{r.draws} L{r.losses} "
                f"({outcome.wall_seconds:.1f} s)"
            )
    return dict(
        game=game.name,
        game_options=game.options,
        games_per_pair=num_games,
        agents=list(names),
        matches=matches,
        **tournament_summary(names, points, played),
    )


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
    played: float[P, P], games between them.
    """
    prior = 0.0 if is_connected(points, played) else 1.0
    ratings = elo(points, played, prior_draws=prior)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(played > 0, points / played, np.nan)
    return dict(
        win_ratio=[[None if np.isnan(v) else float(v) for v in row] for row in ratio],
        elo={
            n: dict(elo=float(e), stderr=float(s), ci95=float(Z95 * s))
            for n, e, s in zip(names, ratings.elo, ratings.stderr)
        },
        elo_prior_draws=prior,
    )
