"""Othello's random playouts on flat bitboards: the whole board as a few uint32 words.

`games.othello` keeps a board as one uint32 word per row, which suits a step (flips gather the
four lines through the new disc) but makes every ply of a playout sum and select over rows. Here
square (r, c) is bit r * size + c of one long bit string, held as ``ceil(size**2 / 32)`` words
(two on 8x8 and 6x6, one on 4x4). A move in direction (dr, dc) is a shift of the whole string by
dr * size + dc bits, with the column the shift must not wrap into masked out (Kogge-Stone fills as
in chess engines). Every operation of a ply is then element-wise on a handful of words: under
``vmap`` XLA fuses a ply into one loop over the batch, with no reductions over rows and no
gathers. The games played are exactly `games.othello`'s (tests/test_othello.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from games.base import playout_unroll, while_unrolled

_U = jnp.uint32
# Plies a playout takes per loop turn on a GPU or TPU (games.base.playout_unroll; the CPU keeps
# 1). A ply here is one small fused kernel, so the loop's turns are most of a playout's cost: on
# an H200 a 32-simulation search of 1024 8x8 positions with a rollout from every leaf took 1.45x,
# 1.29x and 1.20x the time of the search without at 4, 8 and 16 plies a turn (docs/benchmarks.md,
# session 38). More plies a turn compile for longer (on the CPU, 8 s at 4 and 86 s at 16).
ACCELERATOR_PLAYOUT_UNROLL = 16
# (row step, column step) of the 8 directions a line of discs can run in.
DIRECTIONS = [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)]


@struct.dataclass
class Flat:
    """A set of squares: bit i of ``words[i // 32]`` is square i (row-major)."""

    words: tuple  # uint32[] words, least significant first

    def __and__(self, other):
        return Flat(tuple(a & b for a, b in zip(self.words, other.words)))

    def __or__(self, other):
        return Flat(tuple(a | b for a, b in zip(self.words, other.words)))

    def __invert__(self):
        return Flat(tuple(~a for a in self.words))

    def any(self):
        """bool[]: is any square in the set?"""
        out = self.words[0]
        for w in self.words[1:]:
            out = out | w
        return out != 0

    def counts(self) -> list:
        """int32[] population count of each word."""
        return [jax.lax.population_count(w).astype(jnp.int32) for w in self.words]

    def where(self, keep):
        """The set where ``keep`` holds, else the empty set."""
        return Flat(tuple(jnp.where(keep, w, _U(0)) for w in self.words))

    def shift(self, d: int):
        """Every square moved from i to i + d (d a Python int of either sign), zeros coming in
        and squares moved off either end dropped."""
        if d == 0:
            return self
        n = len(self.words)
        zero = self.words[0] & _U(0)  # a zero with the words' (batched) shape
        q, r = divmod(abs(d), 32)

        def word(i):  # a source word, zero outside the string
            return self.words[i] if 0 <= i < n else zero

        out = []
        for i in range(n):  # word i takes from word src and the bits that spill from its neighbour
            src = i - q if d > 0 else i + q
            w = word(src)
            if r and d > 0:
                w = (w << r) | (word(src - 1) >> (32 - r))
            elif r:
                w = (w >> r) | (word(src + 1) << (32 - r))
            out.append(w)
        return Flat(tuple(out))


def constant(bits: int, num_words: int) -> Flat:
    """The Flat set of a Python integer's bits."""
    return Flat(tuple(_U((bits >> (32 * i)) & 0xFFFFFFFF) for i in range(num_words)))


def num_words(size: int) -> int:
    return -(-size * size // 32)


def from_rows(rows, size: int) -> Flat:
    """The Flat set of a row bitboard (uint32[size], bit c of row r for square (r, c))."""
    k = num_words(size)
    out = constant(0, k)
    for r in range(size):
        row = Flat((rows[r],) + (rows[r] & _U(0),) * (k - 1))
        out = out | row.shift(r * size)
    return out


class _Masks:
    """The board's squares, and for each column step dc the squares a one-square shift with that
    step may land on (not the column it would wrap into)."""

    def __init__(self, size: int):
        k = num_words(size)
        board = (1 << (size * size)) - 1
        column = lambda c: sum(1 << (r * size + c) for r in range(size))  # noqa: E731
        self.board = constant(board, k)
        self.landing = {
            1: constant(board & ~column(0), k),
            0: self.board,
            -1: constant(board & ~column(size - 1), k),
        }


def _fill(gen: Flat, through: Flat, d: int, size: int) -> Flat:
    """``gen`` grown through runs of ``through`` (already masked by the direction's landing
    squares) by steps of d bits: Kogge-Stone, round i moving 2**i steps, so ceil(log2(size - 1))
    rounds cover the size - 2 squares a run can hold."""
    k = 1
    while k - 1 < size - 2:  # after the round with step k, runs up to 2k - 1 long are covered
        gen = gen | (through & gen.shift(k * d))
        through = through & through.shift(k * d)
        k *= 2
    return gen


def placing_moves(own: Flat, opp: Flat, masks: _Masks, size: int) -> Flat:
    """The empty squares where the owner of ``own`` brackets a line of ``opp``."""
    empty = masks.board & ~(own | opp)
    moves = constant(0, len(own.words))
    for dr, dc in DIRECTIONS:
        d, land = dr * size + dc, masks.landing[dc]
        gen = _fill(own, opp & land, d, size)
        moves = moves | ((gen & opp).shift(d) & land & empty)  # one past each run
    return moves


def flips(own: Flat, opp: Flat, placed: Flat, masks: _Masks, size: int) -> Flat:
    """The ``opp`` discs that a disc at ``placed`` (one square, or none for a pass) turns over:
    in each direction the run of ``opp`` next to it flips when the square past it is ours."""
    out = constant(0, len(own.words))
    for dr, dc in DIRECTIONS:
        d, land = dr * size + dc, masks.landing[dc]
        ray = _fill(placed, opp & land, d, size)  # the new disc and the run next to it
        out = out | (ray & opp).where((ray.shift(d) & land & own).any())
    return out


def _nth_bit(word, n):
    """uint32 with only the n-th (from 0, lowest first) set bit of ``word``; n < popcount."""
    pos = jnp.int32(0)
    for width in (16, 8, 4, 2, 1):  # binary search: is the n-th bit above the low `width`?
        low = jax.lax.population_count((word >> pos.astype(_U)) & _U((1 << width) - 1))
        up = n >= low.astype(jnp.int32)
        pos = pos + jnp.where(up, width, 0)
        n = n - jnp.where(up, low.astype(jnp.int32), 0)
    return _U(1) << pos.astype(_U)


def nth_square(moves: Flat, n) -> Flat:
    """The set holding only the n-th square of ``moves`` in board order; empty if n < 0."""
    before = jnp.int32(0)
    out = []
    for word, count in zip(moves.words, moves.counts()):
        here = (before <= n) & (n < before + count)
        out.append(jnp.where(here, _nth_bit(word, n - before), _U(0)))
        before = before + count
    return Flat(tuple(out))


def random_playout(size: int, max_game_length: int, state, key):
    """(own, opp, mover) at the end of one uniformly random game from an `OthelloState`: the
    discs of ``mover`` and of the other player as uint32[num_words] flat boards.

    Ply t plays the floor(u_t * count)-th legal square in board order, u = uniform(key,
    (max_game_length + 1,)); a side without placing moves passes, and two in a row end the game
    (a terminal ``state`` is returned as it is). Each ply generates the mover's moves and
    nothing else, so the loop carries only the discs (the fewer words a ply writes, the fewer
    loops XLA:CPU runs over the batch: 1.2 - 1.8x faster there than carrying the next mover's
    moves too); the end is seen one or two passes after the last disc, which changes no disc
    (the uniforms read past the last are clamped to it, and unused).
    """
    masks = _Masks(size)
    uniforms = jax.random.uniform(key, (max_game_length + 1,))

    def body(carry):
        own, opp, player, passed, _, t = carry
        moves = placing_moves(own, opp, masks, size)
        count = sum(moves.counts())
        pick = jnp.minimum((uniforms[t] * count).astype(jnp.int32), count - 1)  # -1: a pass
        placed = nth_square(moves, pick)
        flipped = flips(own, opp, placed, masks, size)
        mine, theirs = own | placed | flipped, opp & ~flipped
        done = (count == 0) & passed  # two passes in a row: the game has ended
        return theirs, mine, 1 - player, count == 0, done, t + 1

    flat = lambda rows: from_rows(rows, size)  # noqa: E731
    start = (flat(state.own), flat(state.opp), state.player, jnp.bool_(False), state.terminal)
    start = (*start, jnp.int32(0))
    unroll = playout_unroll(accelerator=ACCELERATOR_PLAYOUT_UNROLL)
    own, opp, player, _, _, _ = while_unrolled(lambda c: ~c[4], body, start, unroll=unroll)
    return jnp.stack(own.words), jnp.stack(opp.words), player
