"""Statistical checks that azjax.noise draws Gamma(alpha) and Dir(alpha) over the legal moves.

Each check is a test of a known distribution at a fixed seed: sample means and variances within
5 standard errors of the Dirichlet's, and a Kolmogorov-Smirnov statistic under its critical value
at level 0.001. The same checks must reject samples of Dir(2 alpha), so they can fail.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from azjax.noise import dirichlet_over_legal, flat_dirichlet_over_legal, log_gamma, retry_capacity

ALPHAS = [0.03, 0.1, 0.3, 1.0]
N = 20_000  # rows per sample: a KS critical value of 0.014 at level 0.001
# A = 10 actions, K = 6 legal in row pattern 0 and 3 in pattern 1; rows alternate patterns.
PATTERNS = np.array([[1, 0, 1, 1, 0, 1, 1, 0, 0, 1], [0, 0, 0, 1, 0, 0, 1, 0, 1, 0]], bool)


def ks_statistic(samples, cdf, lower=-np.inf, upper=np.inf):
    """sup |ECDF - F| over the sample points in [lower, upper] (float64).

    Restricting the sup keeps values that float32 cannot resolve (Dir(0.03) puts about 10% of a
    marginal's mass below 1e-30) out of it, while the ECDF still counts them; the restricted
    statistic is never larger than the full one, so the usual critical value stays valid.
    """
    x = np.sort(np.asarray(samples, np.float64))
    n = len(x)
    f = cdf(x)
    above = np.arange(1, n + 1) / n - f  # ECDF just after each point
    below = f - np.arange(n) / n  # ECDF just before it
    keep = (x >= lower) & (x <= upper)
    return max(above[keep].max(), below[keep].max())


def ks_critical(n, level=0.001):
    return stats.kstwo.ppf(1 - level, n)


def dirichlet_failures(samples, legal, alpha, resolution=1e-30):
    """What is wrong with `samples` (float[N, A]) as Dir(alpha) over the legal moves of each row
    (`legal` bool[N, A], one K for every row): a list of messages, empty when nothing is.

    The KS statistic looks at values from `resolution` to 1 - 1e-6 (see `ks_statistic`)."""
    samples = np.asarray(samples, np.float64)
    k = int(legal[0].sum())
    failures = []
    if np.any(samples[~legal] != 0):
        failures.append("weight on an illegal move")
    if not np.allclose(samples.sum(1), 1, atol=1e-5):
        failures.append("rows do not sum to 1")
    x = samples[legal].reshape(len(samples), k)  # [N, K] the legal components
    n = len(x)
    a0 = k * alpha
    mean, var = 1 / k, (k - 1) / (k * k * (a0 + 1))  # Dir(alpha 1_K): alpha_i / a0, its variance
    mean_se = math.sqrt(var / n)
    for i in range(k):
        if abs(x[:, i].mean() - mean) > 5 * mean_se:
            failures.append(f"mean of component {i}: {x[:, i].mean():.4f} against {mean:.4f}")
        centred = x[:, i] - x[:, i].mean()
        var_se = math.sqrt(max(np.mean(centred**4) - np.var(x[:, i]) ** 2, 0) / n)
        if abs(np.var(x[:, i]) - var) > 5 * var_se:
            failures.append(f"variance of component {i}: {np.var(x[:, i]):.5f} against {var:.5f}")
    beta = stats.beta(alpha, (k - 1) * alpha)  # the marginal of one component
    d = ks_statistic(x[:, 0], beta.cdf, lower=resolution, upper=1 - 1e-6)
    if d > ks_critical(n):
        failures.append(f"KS of component 0 against Beta: {d:.4f} > {ks_critical(n):.4f}")
    return failures


LEGAL = np.tile(PATTERNS, (N, 1))  # [2N, A]
# One compiled sampler for every alpha (alpha is an argument, not a constant).
_dirichlet = jax.jit(lambda key, alpha: dirichlet_over_legal(key, jnp.asarray(LEGAL), alpha=alpha))
_log_gamma = jax.jit(lambda key, alpha: log_gamma(key, (N,), alpha=alpha))


def draw(alpha, seed=0):
    return np.asarray(_dirichlet(jax.random.PRNGKey(seed), jnp.float32(alpha))), LEGAL


@pytest.mark.parametrize("alpha", ALPHAS)
def test_draws_the_dirichlet_over_the_legal_moves(alpha):
    noise, legal = draw(alpha)
    for pattern in (0, 1):
        rows = slice(pattern, None, 2)
        assert dirichlet_failures(noise[rows], legal[rows], alpha) == []


def test_a_constant_alpha_draws_what_an_array_alpha_does():
    # make_search passes the spec's float; the tests above pass an array to compile once.
    key, legal = jax.random.PRNGKey(4), jnp.asarray(LEGAL[:64])
    array = jax.jit(lambda k, a: dirichlet_over_legal(k, legal, alpha=a))
    for alpha in (0.3, 2.5):
        constant = jax.jit(lambda k, a=alpha: dirichlet_over_legal(k, legal, alpha=a))
        np.testing.assert_allclose(constant(key), array(key, jnp.float32(alpha)), rtol=1e-5)


def test_a_constant_alpha_of_one_draws_the_flat_dirichlet():
    # alpha = 1 as a Python number takes flat_dirichlet_over_legal (Exp(1) variates), another
    # draw of the same distribution, which the same checks must accept, and reject as Dir(2).
    flat = jax.jit(lambda k: dirichlet_over_legal(k, jnp.asarray(LEGAL), alpha=1.0))
    np.testing.assert_array_equal(
        flat(jax.random.PRNGKey(0)), flat_dirichlet_over_legal(jax.random.PRNGKey(0), LEGAL)
    )
    noise = np.asarray(flat(jax.random.PRNGKey(6)))
    for pattern in (0, 1):
        rows = slice(pattern, None, 2)
        assert dirichlet_failures(noise[rows], LEGAL[rows], 1.0) == []
        failures = dirichlet_failures(noise[rows], LEGAL[rows], 2.0)
        assert any(f.startswith("variance") for f in failures)
        assert any(f.startswith("KS") for f in failures)


def test_the_flat_dirichlet_keeps_a_row_of_zero_variates_on_the_simplex(monkeypatch):
    # u = 0 (one draw in 2^23) gives the Exp variate 0; held at the smallest float32, a row of
    # them is still a point of the simplex (here its centre), not a row of zeros or NaNs.
    monkeypatch.setattr(jax.random, "uniform", lambda key, shape: jnp.zeros(shape))
    legal = jnp.array([[True, False, True], [False, False, False]])
    noise = flat_dirichlet_over_legal(jax.random.PRNGKey(0), legal)
    np.testing.assert_array_equal(noise, [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize("alpha", ALPHAS)
def test_the_checks_reject_dirichlet_of_twice_alpha(alpha):
    noise, legal = draw(2 * alpha)
    failures = dirichlet_failures(noise[0::2], legal[0::2], alpha)
    assert any(f.startswith("variance") for f in failures)
    assert any(f.startswith("KS") for f in failures)


@pytest.mark.parametrize("alpha", ALPHAS + [2.5])
def test_log_gamma_against_the_gamma_cdf(alpha):
    # KS on log G, where float32 resolves every tail: P(log G <= t) = P(alpha, e^t).
    logs = np.asarray(_log_gamma(jax.random.PRNGKey(1), jnp.float32(alpha)))
    assert np.all(np.isfinite(logs))
    cdf = lambda t: special.gammainc(alpha, np.exp(t))
    assert ks_statistic(logs, cdf) < ks_critical(N)
    wrong = lambda t: special.gammainc(1.2 * alpha, np.exp(t))
    assert ks_statistic(logs, wrong) > ks_critical(N)


def test_one_proposal_is_accepted_at_the_marsaglia_tsang_rate():
    # With a single proposal and no retries, Gamma(1) falls back to d = 2/3 exactly when it is
    # rejected, which happens with probability 1 - 0.9517 (numerical integration of the
    # acceptance test).
    n = 200_000
    one = jax.jit(lambda k: log_gamma(k, (n,), alpha=1.0, proposals=1, retries=0))
    logs = np.asarray(one(jax.random.PRNGKey(2)))
    rejected = np.mean(np.abs(logs - math.log(2 / 3)) < 1e-6)
    assert abs(rejected - (1 - 0.9517)) < 5 * math.sqrt(0.048 * 0.952 / n)


@pytest.mark.parametrize("alpha", [0.1, 1.0, 2.5])
def test_the_variates_rejected_at_first_are_drawn_again(alpha):
    # One proposal each: 2-5% of the variates are rejected and drawn again from proposals of
    # their own, so the sample is Gamma(alpha). Without the retries those 2-5% take the fallback
    # d exactly (alpha >= 1, where no boost spreads it); with them, none does.
    again = jax.jit(
        lambda k, r: log_gamma(k, (N,), alpha=alpha, proposals=1, retries=r), static_argnums=1
    )
    cdf = lambda t: special.gammainc(alpha, np.exp(t))
    with_retries = np.asarray(again(jax.random.PRNGKey(5), 8))
    assert ks_statistic(with_retries, cdf) < ks_critical(N)
    if alpha >= 1:
        at_d = lambda logs: np.mean(np.abs(logs - math.log(alpha - 1 / 3)) < 1e-6)
        assert at_d(np.asarray(again(jax.random.PRNGKey(5), 0))) > 0.01
        assert at_d(with_retries) == 0


def test_the_retry_capacity_is_rarely_exceeded():
    # the number of variates with no first proposal accepted is Binomial(n, p <= 0.05^P)
    for n, proposals in [(256 * 121, 2), (4096 * 122, 2), (256 * 121, 3), (20_000, 1), (10, 2)]:
        p = 0.05**proposals
        capacity = retry_capacity(n, proposals)
        assert capacity <= n
        assert capacity == n or stats.binom.sf(capacity, n, p) < 1e-12


def test_rows_with_one_or_no_legal_move():
    legal = jnp.array([[False, True, False], [False, False, False]])
    noise = jax.jit(lambda k: dirichlet_over_legal(k, legal, alpha=0.03))(jax.random.PRNGKey(3))
    np.testing.assert_array_equal(noise, [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])


def test_rejects_a_nonpositive_alpha():
    with pytest.raises(ValueError, match="alpha"):
        log_gamma(jax.random.PRNGKey(0), (3,), alpha=0.0)
