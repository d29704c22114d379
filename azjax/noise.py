"""Dirichlet noise over the legal moves, drawn without data-dependent loops.

`jax.random.dirichlet` draws its gamma variates with a rejection `while_loop` per element, with a
key split per element and per round; under `jit` on a batch the loop runs until the slowest of
the B x A elements is accepted. Here every element gets a fixed number of Marsaglia-Tsang
proposals at once and keeps the first accepted one, so the cost is fixed and all random numbers
come from two vectorised draws.

Gamma(a), a >= 1 (Marsaglia and Tsang, 2000): with d = a - 1/3 and c = 1 / sqrt(9 d), draw
x ~ N(0, 1) and u ~ U(0, 1], put v = (1 + c x)^3, and accept d v when v > 0 and
log u < x^2 / 2 + d - d v + d log v. For a < 1, Gamma(a) = Gamma(a + 1) * U^(1/a) with U ~ U(0, 1]
independent; everything is kept as a logarithm, so the tiny variates of small a (0.03 gives
U^33) never underflow before the normalisation.

Acceptance of one proposal is 0.952 at a = 1 (the worst case here: a < 1 is boosted to a + 1 in
(1, 2)), 0.954 at 1.03, 0.967 at 1.3, 0.982 at 2 (numerical integration of the acceptance test).
Every variate gets `proposals = 2` at once; the few of which none was accepted (at most
(1 - 0.952)^2 = 2.3e-3 of them, about 70 in a self-play move of 256 x 121 variates) are gathered,
up to `retry_capacity(n)` of them, and get `retries = 8` fresh proposals each. Their proposals are
independent of the first two, so the first accepted proposal of the ten is still exactly a
Gamma(a) variate. A variate with none of its ten accepted (probability 0.048^10 = 6e-14), or
one past the capacity (a capacity of the mean plus eight standard deviations and 8: the
probability of going past it is far below that), takes the deterministic value d (v = 1, close to
the mode a - 1), so the sampled distribution is within about 1e-13 of Gamma(a) in total
variation. Eight proposals for every variate (an earlier sampler) drew the same distribution to
within 3e-11 at 2.4 times the cost of three with retries, and two cost 23% less than three
(Dir(0.33) over [256, 121]); docs/benchmarks.md, "PUCT's priors and its noise" and "Hashed level
keys and two noise proposals".

Dir(1) (alpha = 1, the flat Dirichlet of the Othello, Connect Four and Tic-Tac-Toe configs) needs
no rejection at all: Gamma(1) is Exp(1), -log U (`flat_dirichlet_over_legal`).

Dir(alpha) over the K legal moves of each row is the vector of K independent Gamma(alpha) variates
divided by their sum (a softmax of their logarithms); illegal moves get exactly 0, and a row with no
legal move is all zeros.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

PROPOSALS = 2  # Marsaglia-Tsang proposals for every variate; see the module docstring
RETRIES = 8  # further proposals for each variate none of whose first ones was accepted
REJECTION = 0.05  # the chance that one proposal is rejected, rounded up from 0.048 (alpha >= 1)


def retry_capacity(n: int, proposals: int = PROPOSALS) -> int:
    """How many of `n` variates `log_gamma` can draw again: the mean number with none of
    `proposals` accepted plus eight standard deviations and 8, at most `n`."""
    p = REJECTION**proposals
    return min(n, math.ceil(n * p + 8 * math.sqrt(n * p * (1 - p))) + 8)


def log_gamma(
    key, shape: tuple[int, ...], *, alpha, proposals: int = PROPOSALS, retries: int = RETRIES
):
    """float32[*shape]: logarithms of independent Gamma(alpha, 1) variates.

    `alpha` > 0 is a float or a float32[] array (one compiled function then serves every alpha).
    Each variate gets `proposals` Marsaglia-Tsang proposals, and those with none accepted (up to
    `retry_capacity`) `retries` more (0: none); see the module docstring.
    """
    if isinstance(alpha, (int, float)) and not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    k_first, k_retry, k_boost = jax.random.split(key, 3)
    alpha = jnp.asarray(alpha, jnp.float32)
    boost = alpha < 1
    d = jnp.where(boost, alpha + 1, alpha) - 1.0 / 3.0  # Marsaglia-Tsang for a = alpha (+ 1)
    log_v, accepted = _first_accepted(k_first, proposals, shape, d)
    n = math.prod(shape)
    if retries > 0 and n > 0:
        capacity = retry_capacity(n, proposals)
        # the rejected variates' flat indices, first; n (dropped below) fills the rest
        again = jnp.flatnonzero(~accepted, size=capacity, fill_value=n)
        log_v2, _ = _first_accepted(k_retry, retries, (capacity,), d)
        log_v = log_v.reshape(-1).at[again].set(log_v2, mode="drop").reshape(shape)
    log_boost = jnp.log1p(-jax.random.uniform(k_boost, shape)) / alpha  # log U^(1/alpha)
    return jnp.log(d) + log_v + jnp.where(boost, log_boost, 0.0)


def _first_accepted(key, proposals: int, shape, d):
    """(log v float32[*shape], accepted bool[*shape]): per variate, log v of the first of
    `proposals` accepted Marsaglia-Tsang proposals for Gamma(d + 1/3), 0 (v = 1) where none was."""
    k_normal, k_accept = jax.random.split(key)
    c = 1.0 / jnp.sqrt(9.0 * d)
    x = jax.random.normal(k_normal, (proposals, *shape), jnp.float32)  # [P, *shape]
    log_u = jnp.log1p(-jax.random.uniform(k_accept, (proposals, *shape)))  # log of U(0, 1]
    v = (1.0 + c * x) ** 3
    positive = v > 0
    log_v = jnp.log(jnp.where(positive, v, 1.0))
    accepted = positive & (log_u < 0.5 * x * x + d - d * v + d * log_v)  # [P, *shape]
    chosen = jnp.zeros(shape, jnp.float32)  # all rejected: v = 1
    for i in reversed(range(proposals)):  # the first accepted proposal wins (unrolled selects)
        chosen = jnp.where(accepted[i], log_v[i], chosen)
    return chosen, jnp.any(accepted, axis=0)


def dirichlet_over_legal(key, legal, *, alpha, proposals: int = PROPOSALS, retries: int = RETRIES):
    """float32[..., A]: per row of `legal` (bool[..., A]), a Dir(alpha, ..., alpha) sample over its
    legal moves; exactly 0 on illegal moves, and all 0 in a row without a legal move.

    Where `alpha` is the Python number 1 (the configs of Othello, Connect Four and Tic-Tac-Toe),
    the sample is drawn as `flat_dirichlet_over_legal`'s, another draw of the same distribution.
    """
    if isinstance(alpha, (int, float)) and alpha == 1:
        return flat_dirichlet_over_legal(key, legal)
    log_g = log_gamma(key, legal.shape, alpha=alpha, proposals=proposals, retries=retries)
    log_g = jnp.where(legal, log_g, -jnp.inf)
    top = jnp.max(log_g, axis=-1, keepdims=True)
    weights = jnp.exp(log_g - jnp.where(jnp.isfinite(top), top, 0.0))  # illegal: exp(-inf) = 0
    total = jnp.sum(weights, axis=-1, keepdims=True)
    return weights / jnp.maximum(total, jnp.finfo(jnp.float32).tiny)


def flat_dirichlet_over_legal(key, legal):
    """float32[..., A]: Dir(1, ..., 1) over the legal moves of each row of `legal` (bool[..., A]),
    the uniform distribution on the simplex: K independent Exp(1) variates, -log U, divided by
    their sum. Exact and without rejection: one uniform and one logarithm per move, a quarter of
    the Marsaglia-Tsang sampler's time (docs/benchmarks.md, "Flat noise"). U = 1 - u with u ~
    U[0, 1); the variate of u = 0 (one in 2^23), 0, is kept at the smallest float32, so a row with
    a legal move always sums to 1."""
    u = jax.random.uniform(key, legal.shape)
    tiny = jnp.finfo(jnp.float32).tiny
    e = jnp.where(legal, jnp.maximum(-jnp.log1p(-u), tiny), 0.0)
    return e / jnp.maximum(jnp.sum(e, axis=-1, keepdims=True), tiny)
