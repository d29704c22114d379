"""Confidence intervals and Elo ratings (azjax/eval/stats.py) on hand-computed cases."""

import math

import numpy as np
import pytest

from azjax.eval import stats


def test_confidence_intervals_on_known_numbers():
    p, half = stats.proportion_ci(50, 100)  # 1.96 * sqrt(0.25 / 100)
    assert p == 0.5 and half == pytest.approx(0.098, abs=1e-3)
    p, half = stats.proportion_ci(28, 100)  # seed 000 Table A.1's form: p ± 1.96 sqrt(p(1-p)/n)
    assert half == pytest.approx(1.959964 * math.sqrt(0.28 * 0.72 / 100))
    assert stats.proportion_ci(0, 20) == (0.0, 0.0)
    # points 1, 1, 0.5, 0: mean 0.625, variance (2 + 0.25) / 4 - 0.625^2 = 0.171875
    score, half = stats.score_ci(2, 1, 1)
    assert score == 0.625 and half == pytest.approx(1.959964 * math.sqrt(0.171875 / 4))


def test_elo_of_a_three_one_record():
    r = stats.elo(np.array([[0.0, 3.0], [1.0, 0.0]]), np.array([[0.0, 4.0], [4.0, 0.0]]))
    assert r.elo[0] - r.elo[1] == pytest.approx(400 * math.log10(3))
    assert r.elo.sum() == pytest.approx(0.0, abs=1e-9)
    # information about the difference: 4 games * p (1 - p) with p = 3/4; each of the two
    # mean-anchored ratings carries half the difference's standard error
    se_diff = stats.ELO_PER_NAT / math.sqrt(4 * 0.75 * 0.25)
    assert r.stderr == pytest.approx([se_diff / 2, se_diff / 2])
    # measured from player 1 (a ladder's anchor rung): player 0 carries the difference's whole
    # standard error, the anchor none
    a = stats.elo(np.array([[0.0, 3.0], [1.0, 0.0]]), np.array([[0.0, 4.0], [4.0, 0.0]]), anchor=1)
    assert a.elo == pytest.approx([400 * math.log10(3), 0.0]) and a.stderr == pytest.approx(
        [se_diff, 0.0]
    )
    # A beats B 3-1 and B beats C 3-1 (A and C never met): from B, A and C have one pair's error
    points = np.array([[0, 3, 0], [1, 0, 3], [0, 1, 0]], float)
    games = np.array([[0, 4, 0], [4, 0, 4], [0, 4, 0]], float)
    chain = stats.elo(points, games, anchor=1)
    assert chain.stderr == pytest.approx([se_diff, 0.0, se_diff])
    assert stats.elo(points, games, anchor=0).stderr[2] == pytest.approx(math.sqrt(2) * se_diff)


def test_elo_counts_draws_as_half_points_and_is_transitive():
    # 2 wins + 2 draws of 4 = 3 points: the same as a 3-1 record
    r = stats.elo(np.array([[0.0, 3.0], [1.0, 0.0]]), np.array([[0.0, 4.0], [4.0, 0.0]]))
    # three players, each pair scoring 3 of 4 in a chain and 1:1 elsewhere balance out
    points = np.array([[0, 2, 2], [2, 0, 2], [2, 2, 0]], float)
    games = np.full((3, 3), 4.0) - 4 * np.eye(3)
    assert stats.elo(points, games).elo == pytest.approx([0, 0, 0], abs=1e-9)
    # A beats B 3-1 and B beats C 3-1, A-C never met: A - C = 2 * 400 log10(3)
    points = np.array([[0, 3, 0], [1, 0, 3], [0, 1, 0]], float)
    games = np.array([[0, 4, 0], [4, 0, 4], [0, 4, 0]], float)
    r3 = stats.elo(points, games)
    assert r3.elo[0] - r3.elo[2] == pytest.approx(2 * (r.elo[0] - r.elo[1]))


def test_elo_refuses_infinite_ratings_unless_given_a_prior():
    points, games = np.array([[0.0, 4.0], [0.0, 0.0]]), np.array([[0.0, 4.0], [4.0, 0.0]])
    assert not stats.is_connected(points, games)
    with pytest.raises(ValueError, match="infinite"):
        stats.elo(points, games)
    r = stats.elo(points, games, prior_draws=1.0)  # 4.5 of 5 points: 400 log10(9)
    assert r.elo[0] - r.elo[1] == pytest.approx(400 * math.log10(9))
