"""Statistics of match results: confidence intervals and Elo ratings.

Confidence intervals are the normal approximation of seed 000's Appendix A: a proportion p̂ = k/n
of n games (wins, draws or losses, each a Bernoulli outcome) has the 95% interval
p̂ ± 1.96 sqrt(p̂ (1 - p̂) / n). The score (wins + draws/2)/n is the mean of per-game points in
{0, ½, 1}; its interval uses their sample variance the same way. Both are least reliable for small
n or p̂ near 0 or 1 (the interval collapses to a point at p̂ = 0 or 1).

Elo ratings are the maximum-likelihood Bradley–Terry fit over all games of a tournament:

    P(i beats j) = 1 / (1 + 10^((r_j - r_i) / 400)),

each game scored 1 / ½ / 0 for the first of the pair (a draw is half a win and half a loss).
Newton's method maximises the concave log-likelihood with the first player held at 0; the ratings
are then shifted to mean 0. Standard errors come from the inverse observed Fisher information (the
negative Hessian) and are those of the mean-anchored ratings, or with `anchor` of each rating's
difference from that player's (a ladder's rung 16). The maximum exists only when the
"scored against" graph is strongly connected (nobody won or lost every game against the rest);
`elo` can add `prior_draws` virtual draws to every pair that played to keep it finite.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal
ELO_PER_NAT = 400.0 / math.log(10.0)  # rating points per unit of the logistic scale


def proportion_ci(k: float, n: int, z: float = Z95) -> tuple[float, float]:
    """(p̂, half-width): the normal-approximation interval p̂ ± half of a proportion k / n."""
    if n <= 0:
        return 0.0, 0.0
    p = k / n
    return p, z * math.sqrt(max(p * (1.0 - p), 0.0) / n)


def score_ci(wins: int, draws: int, losses: int, z: float = Z95) -> tuple[float, float]:
    """(score, half-width) of (wins + draws/2) / games, from the variance of per-game points."""
    n = wins + draws + losses
    if n <= 0:
        return 0.0, 0.0
    mean = (wins + 0.5 * draws) / n
    mean_sq = (wins + 0.25 * draws) / n
    return mean, z * math.sqrt(max(mean_sq - mean * mean, 0.0) / n)


@dataclasses.dataclass(frozen=True)
class Ratings:
    """Elo ratings of P players: `elo[i] ± 1.96 * stderr[i]`, mean 0 (or one player's 0)."""

    elo: np.ndarray  # float64[P]
    stderr: np.ndarray  # float64[P], standard errors of the ratings so measured
    iterations: int  # Newton iterations used
    prior_draws: float  # virtual draws added to every pair that played


def elo(
    points: np.ndarray,
    games: np.ndarray,
    prior_draws: float = 0.0,
    max_iter: int = 100,
    tol: float = 1e-10,
    *,
    anchor: int | None = None,
) -> Ratings:
    """Maximum-likelihood Elo ratings of P players, mean 0; with `anchor`, measured from player
    `anchor` instead (its rating 0 and stderr 0, the others' stderr that of their difference
    from it, as a ladder's rungs are read).

    points: float[P, P], points[i, j] = wins + draws / 2 of i against j (all games between them);
    games:  float[P, P], games[i, j] = games[j, i] = games played between i and j.
    Raises ValueError when the maximum does not exist (see `is_connected`) and no prior is given.
    """
    played = np.asarray(games) > 0
    n = np.asarray(games, np.float64) + prior_draws * played
    s = np.asarray(points, np.float64) + 0.5 * prior_draws * played
    num = n.shape[0]
    if num < 2:
        return Ratings(np.zeros(num), np.zeros(num), 0, prior_draws)
    if not is_connected(s, n):
        raise ValueError(
            "Elo: the maximum-likelihood ratings are infinite (some player won or "
            "lost every game against the others, or players form separate groups); "
            "add virtual draws (prior_draws > 0)"
        )
    theta = np.zeros(num)  # logistic scale, theta[0] = 0
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (`it` is reported after the loop)
        grad, info = _gradient_information(theta, s, n)
        step = np.linalg.solve(info[1:, 1:], grad[1:])
        step *= min(1.0, 2.0 / max(np.max(np.abs(step)), 1e-300))  # damped: at most 2 per step
        theta[1:] += step
        if np.max(np.abs(step)) < tol:
            break
    _, info = _gradient_information(theta, s, n)
    cov = np.zeros((num, num))
    cov[1:, 1:] = np.linalg.inv(info[1:, 1:])
    # each rating less the mean's, or less the anchor's: cov of (I - 1 w^T) theta
    weights = np.full(num, 1.0 / num) if anchor is None else np.eye(num)[anchor]
    centre = np.eye(num) - weights[None, :]
    cov = centre @ cov @ centre.T
    return Ratings(
        ELO_PER_NAT * (theta - weights @ theta),
        ELO_PER_NAT * np.sqrt(np.maximum(np.diag(cov), 0.0)),
        it,
        prior_draws,
    )


def _gradient_information(theta, s, n):
    """Gradient of the log-likelihood and the observed information (-Hessian), logistic scale."""
    p = 1.0 / (1.0 + np.exp(theta[None, :] - theta[:, None]))  # p[i, j] = P(i beats j)
    grad = np.sum(s - n * p, axis=1)
    w = n * p * (1.0 - p)
    info = np.diag(np.sum(w, axis=1)) - w
    return grad, info


def is_connected(points: np.ndarray, games: np.ndarray) -> bool:
    """True when every player reaches every other along edges i -> j where i scored against j
    (points[i, j] > 0) — the condition for finite maximum-likelihood ratings."""
    num = points.shape[0]
    scored = (np.asarray(points) > 0) & (np.asarray(games) > 0)

    def reach(adj):
        seen, stack = {0}, [0]
        while stack:
            i = stack.pop()
            for j in np.flatnonzero(adj[i]):
                if j not in seen:
                    seen.add(int(j))
                    stack.append(int(j))
        return len(seen) == num

    return reach(scored) and reach(scored.T)
