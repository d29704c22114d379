"""The flat bitboards of `games.othello_flat` against Python integers, and their moves and flips
against `games.othello`'s row bitboards on random positions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from games import othello, othello_flat
from games.othello_flat import Flat

RNG = np.random.default_rng(0)


def as_int(flat: Flat) -> np.ndarray:
    """Python integers (object array) of a batch of Flat sets."""
    return sum(np.asarray(w).astype(object) << (32 * i) for i, w in enumerate(flat.words))


@pytest.mark.parametrize("num_words", [1, 2, 4])
def test_shift_is_the_integer_shift(num_words):
    words = RNG.integers(0, 2**32, (num_words, 64), dtype=np.uint64).astype(np.uint32)
    flat = Flat(tuple(jnp.asarray(w) for w in words))
    value, top = as_int(flat), (1 << (32 * num_words)) - 1
    for d in range(-32 * num_words - 3, 32 * num_words + 4):
        want = (value << d) & top if d >= 0 else value >> -d
        np.testing.assert_array_equal(as_int(flat.shift(d)), want, err_msg=f"shift {d}")


@pytest.mark.parametrize("size", [4, 6, 10])
def test_from_rows_is_row_major(size):
    rows = RNG.integers(0, 2**size, (8, size), dtype=np.uint64).astype(np.uint32)
    flat = jax.vmap(lambda r: othello_flat.from_rows(r, size))(jnp.asarray(rows))
    want = [sum(int(row) << (r * size) for r, row in enumerate(board)) for board in rows]
    np.testing.assert_array_equal(as_int(flat), np.array(want, dtype=object))


def test_nth_square_picks_in_board_order():
    moves = othello_flat.constant((1 << 3) | (1 << 31) | (1 << 32) | (1 << 60), 2)
    picked = [int(as_int(othello_flat.nth_square(moves, jnp.int32(n)))) for n in range(-1, 4)]
    assert picked == [0, 1 << 3, 1 << 31, 1 << 32, 1 << 60]


@pytest.mark.parametrize("size", [6, 8, 10])
def test_moves_and_flips_match_the_row_boards(size):
    # Random boards (not reachable positions: any pattern of discs) and every empty square as a
    # move (the flat flips assume an empty square, as in a playout).
    n = size
    own = RNG.integers(0, 2**n, (32, n), dtype=np.uint64).astype(np.uint32)
    opp = RNG.integers(0, 2**n, (32, n), dtype=np.uint64).astype(np.uint32) & ~own
    full = jnp.uint32((1 << n) - 1)
    masks = othello_flat._Masks(n)
    flat = lambda rows: othello_flat.from_rows(rows, n)  # noqa: E731

    @jax.jit
    def both(own, opp, action):
        rows_moves = othello._placing_moves(own, opp, full)
        rows_flips = othello._flips(own, opp, action)
        placed = flat(
            jnp.where(jnp.arange(n) == action // n, 1 << (action % n), 0).astype(jnp.uint32)
        )
        flat_moves = othello_flat.placing_moves(flat(own), flat(opp), masks, n)
        flat_flips = othello_flat.flips(flat(own), flat(opp), placed, masks, n)
        return flat(rows_moves), flat_moves, flat(rows_flips), flat_flips

    run = jax.vmap(jax.vmap(both, (None, None, 0)), (0, 0, None))
    rows_moves, flat_moves, rows_flips, flat_flips = run(own, opp, jnp.arange(n * n))
    np.testing.assert_array_equal(as_int(flat_moves), as_int(rows_moves))
    taken = as_int(jax.vmap(flat)(jnp.asarray(own | opp)))[:, None] >> np.arange(n * n)[None] & 1
    empty = taken == 0  # [board, action]
    np.testing.assert_array_equal(as_int(flat_flips)[empty], as_int(rows_flips)[empty])
    assert (as_int(flat_flips)[empty] != 0).mean() > 0.1  # moves flip something often enough
