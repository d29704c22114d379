"""Tests of the exact small-board Hex solver (`azjax.eval.hex_solver`).

The reference is a plain negamax written here from `games.hex`'s own neighbour and edge tables:
every move of every position is searched, with no pruning, no carriers and no virtual
connections. It is memoised only so that the same position is not searched twice; the memo
changes no value. The solver must agree with it on the value and on the exact set of winning
moves of every reachable 3x3 position, of 300 random 4x4 positions with 8 to 13 stones, of 60
random 5x5 positions with 17 to 21 stones and of 30 random 6x6 positions with 26 to 28 stones.
Earlier positions, too slow for it here, are checked against their children instead. (Offline,
the same search without the memo's tuple keys also agreed on 300 random 4x4 positions of 4 to 7
stones, 150 random 5x5 positions of 13 to 16 stones and all sixteen 4x4 openings.)
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

import games
from azjax.eval.hex_solver import (
    MAX_SIZE,
    HexSolver,
    board_of,
    for_game,
    from_state,
    solve_all_openings,
)
from games.hex import _tables

# ---- the plain reference search ----------------------------------------------------------------


@functools.cache
def _rules(size: int):
    """(neighbours: tuple of tuples, edges: [player][edge] -> frozenset) from games.hex's tables."""
    tables = _tables(size)
    neighbours = tuple(
        tuple(sorted({int(j) for j in row} - {i})) for i, row in enumerate(tables.neighbours)
    )
    edges = tuple(
        tuple(frozenset(np.flatnonzero(tables.edges[p, e]).tolist()) for e in (0, 1))
        for p in (0, 1)
    )
    return neighbours, edges


def _joins(board: tuple[int, ...], player: int, size: int) -> bool:
    """Whether `player`'s stones (board value player + 1) join its edges (breadth-first walk)."""
    neighbours, edges = _rules(size)
    start, goal = edges[player]
    frontier = [i for i in start if board[i] == player + 1]
    seen = set(frontier)
    while frontier:
        cell = frontier.pop()
        if cell in goal:
            return True
        for j in neighbours[cell]:
            if j not in seen and board[j] == player + 1:
                seen.add(j)
                frontier.append(j)
    return False


def _mover(board: tuple[int, ...]) -> int:
    return 0 if board.count(1) == board.count(2) else 1


def _joins_through(board: tuple[int, ...], cell: int, size: int) -> bool:
    """Whether the stone on `cell` belongs to a group that touches both of its colour's edges."""
    neighbours, edges = _rules(size)
    stone = board[cell]
    start, goal = edges[stone - 1]
    group, frontier = {cell}, [cell]
    while frontier:
        for j in neighbours[frontier.pop()]:
            if j not in group and board[j] == stone:
                group.add(j)
                frontier.append(j)
    return not group.isdisjoint(start) and not group.isdisjoint(goal)


@functools.cache
def _plain_move_values(board: tuple[int, ...], size: int) -> tuple[tuple[int, int], ...]:
    """((cell, value for the mover after playing it), ...) for every empty cell of an unfinished
    board, every child searched in full."""
    stone = _mover(board) + 1
    out = []
    for cell in range(size * size):
        if board[cell] == 0:
            child = board[:cell] + (stone,) + board[cell + 1 :]
            joins = _joins_through(child, cell, size)
            out.append((cell, 1 if joins else -_plain_value(child, size)))
    return tuple(out)


def _plain_value(board: tuple[int, ...], size: int) -> int:
    return max(v for _, v in _plain_move_values(board, size))


def _plain_winning_moves(board: tuple[int, ...], size: int) -> list[int]:
    return [cell for cell, v in _plain_move_values(board, size) if v == 1]


def _finished(board: tuple[int, ...], size: int) -> bool:
    return _joins(board, 0, size) or _joins(board, 1, size)


def _reachable(size: int) -> list[tuple[int, ...]]:
    """Every unfinished position reachable from the empty board."""
    seen, frontier = set(), [(0,) * (size * size)]
    while frontier:
        board = frontier.pop()
        if board in seen or _finished(board, size):
            continue
        seen.add(board)
        stone = _mover(board) + 1
        frontier += [board[:i] + (stone,) + board[i + 1 :] for i, v in enumerate(board) if not v]
    return sorted(seen)


def _random_positions(size: int, count: int, min_stones: int, max_stones: int, seed: int):
    """`count` distinct unfinished positions after random play of min..max stones."""
    rng = np.random.default_rng(seed)
    found: set[tuple[int, ...]] = set()
    while len(found) < count:
        board = [0] * (size * size)
        for ply in range(rng.integers(min_stones, max_stones + 1)):
            empty = [i for i, v in enumerate(board) if v == 0]
            board[empty[rng.integers(len(empty))]] = ply % 2 + 1
        if not _finished(tuple(board), size):
            found.add(tuple(board))
    return sorted(found)


def _arr(board) -> np.ndarray:
    return np.asarray(board, np.int8)


# ---- against the plain search --------------------------------------------------------------------


def test_every_3x3_position_matches_the_plain_search():
    solver = HexSolver(3)
    positions = _reachable(3)
    assert len(positions) > 1000
    for board in positions:
        assert solver.value(_arr(board)) == _plain_value(board, 3), board
        assert solver.winning_moves(_arr(board)) == _plain_winning_moves(board, 3), board


@pytest.mark.parametrize(
    "size, count, min_stones, max_stones", [(4, 300, 8, 13), (5, 60, 17, 21), (6, 30, 26, 28)]
)
def test_random_positions_match_the_plain_search(size, count, min_stones, max_stones):
    solver = HexSolver(size)
    positions = _random_positions(size, count, min_stones, max_stones, seed=size)
    values = [solver.value(_arr(board)) for board in positions]
    assert count // 6 < values.count(1) < count * 5 // 6  # both outcomes are well represented
    for board, value in zip(positions, values):
        assert value == _plain_value(board, size), board
        assert solver.winning_moves(_arr(board)) == _plain_winning_moves(board, size), board


def test_a_bounded_table_drops_positions_and_keeps_the_answers():
    # 4x4 openings store about 600 positions; a bound of 64 drops most of them again and again.
    bounded, unbounded = HexSolver(4, max_positions=64), HexSolver(4)
    positions = _random_positions(4, 60, 3, 9, seed=11)
    for board in positions:
        assert bounded.winning_moves(_arr(board)) == unbounded.winning_moves(_arr(board)), board
        assert bounded.table_size <= 64
    assert unbounded.table_size > 64
    assert bounded.opening_values() == solve_all_openings(4)
    for bad, error in [(1, ValueError), (2.5, TypeError), (True, TypeError)]:
        with pytest.raises(error, match="max_positions"):
            HexSolver(4, max_positions=bad)


def test_early_4x4_positions_are_consistent_with_their_children():
    # Too early for the plain search to be quick: check the negamax relation itself instead, a
    # position is won exactly when some move joins at once or leaves the opponent lost.
    solver = HexSolver(4)
    for board in _random_positions(4, 40, 1, 7, seed=7):
        stone = _mover(board) + 1
        expected = []
        for cell in (i for i, v in enumerate(board) if v == 0):
            child = board[:cell] + (stone,) + board[cell + 1 :]
            if _joins_through(child, cell, 4) or solver.value(_arr(child)) == -1:
                expected.append(cell)
        assert solver.winning_moves(_arr(board)) == expected, board
        assert solver.value(_arr(board)) == (1 if expected else -1), board


def test_the_shipped_6x6_set_is_what_a_fresh_solver_finds():
    # The set was built with one solver whose table grew over 3,500 positions: its quickest
    # positions, each solved again from an empty table, give the same winning moves.
    from azjax import solved as sv

    game = games.make("hex", size=6)
    shipped = sv.load_set(game)
    boards = np.asarray(sv.start_states(game, shipped).board)
    few = np.argsort((boards == 0).sum(axis=1), kind="stable")[:8]
    for i in few:
        winning = np.flatnonzero(shipped.values[i] == 1).tolist()
        assert HexSolver(6).winning_moves(boards[i]) == winning, shipped.moves[i]


# ---- facts of small Hex ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [2, 3, 4, 5])
def test_the_first_player_wins_every_empty_board(size):
    assert HexSolver(size).value(np.zeros(size * size, np.int8)) == 1


def test_3x3_openings_as_the_plain_search_finds_them():
    # The plain search, from the empty board: the winning first moves are c1, a2, b2, c2 and a3, the
    # short diagonal c1-b2-a3 between the obtuse corners and the middle row.
    plain = {cell: v for cell, v in _plain_move_values((0,) * 9, 3)}
    assert {cell for cell, v in plain.items() if v == 1} == {2, 3, 4, 5, 6}
    assert solve_all_openings(3) == plain


def test_4x4_winning_openings_are_the_short_diagonal():
    # The short diagonal d1-c2-b3-a4 (cells 3, 6, 9, 12); checked once against the plain search,
    # which needs about a minute and 2 million positions on 4x4 and so does not run here.
    openings = solve_all_openings(4)
    assert sorted(openings) == list(range(16))
    assert {cell for cell, v in openings.items() if v == 1} == {3, 6, 9, 12}


def test_5x5_centre_wins_and_acute_corner_loses():
    solver = HexSolver(5)
    after = np.zeros(25, np.int8)
    after[12] = 1  # black's centre stone: white to move has lost
    assert solver.value(after) == -1
    after[:] = 0
    after[0] = 1  # black's acute corner a1: white to move wins
    assert solver.value(after) == 1


# ---- hand-made boards --------------------------------------------------------------------------


def test_a_win_in_one_that_is_also_the_only_block():
    # X joins b1-b2-b3 and needs b4; O (a3-a4 and c3-d3) joins on b4 as well, so b4 is the only
    # winning move. Cells: b1 = 1, d1 = 3, b2 = 5, a3 = 8, b3 = 9, c3 = 10, d3 = 11, a4 = 12.
    board = np.zeros(16, np.int8)
    board[[1, 3, 5, 9]] = 1
    board[[8, 10, 11, 12]] = 2
    solver = HexSolver(4)
    assert solver.value(board) == 1
    assert solver.winning_moves(board) == [13] == _plain_winning_moves(tuple(board.tolist()), 4)
    assert solver.choose(board, np.random.default_rng(0)) == 13


def test_a_lost_position_has_no_winning_move():
    # O's a2 and c1 are joined by the bridge b1 / b2 and touch both of O's edges: X to move lost.
    board = np.zeros(9, np.int8)
    board[[6, 7]] = 1  # a3, b3
    board[[3, 2]] = 2  # a2, c1
    solver = HexSolver(3)
    assert _plain_value(tuple(board.tolist()), 3) == -1
    assert solver.value(board) == -1
    assert solver.winning_moves(board) == []
    assert board[solver.choose(board, np.random.default_rng(0))] == 0


def test_a_finished_board():
    board = np.zeros(4, np.int8)
    board[[0, 2]] = 1  # a1-a2 joins top and bottom
    board[1] = 2
    solver = HexSolver(2)
    assert solver.value(board) == -1  # white to move, black has won
    assert solver.winning_moves(board) == []
    with pytest.raises(ValueError, match="game is over"):
        solver.choose(board, np.random.default_rng(0))


# ---- the perfect player -------------------------------------------------------------------------


def test_choose_is_legal_and_keeps_won_positions_won():
    solver = HexSolver(4)
    rng = np.random.default_rng(1)
    for board in _random_positions(4, 100, 2, 12, seed=1):
        move = solver.choose(_arr(board), rng)
        assert board[move] == 0
        winning = solver.winning_moves(_arr(board))
        assert (move in winning) if winning else True


def _play(solver, board, perfect_colour: int, rng) -> int:
    """Play out `board` (perfect player vs uniformly random); the winner's colour (0 / 1)."""
    board = list(board)
    while not (_joins(tuple(board), 0, solver.size) or _joins(tuple(board), 1, solver.size)):
        player = _mover(tuple(board))
        if player == perfect_colour:
            move = solver.choose(_arr(board), rng)
        else:
            empty = [i for i, v in enumerate(board) if v == 0]
            move = empty[rng.integers(len(empty))]
        board[move] = player + 1
    return 0 if _joins(tuple(board), 0, solver.size) else 1


@pytest.mark.parametrize("size", [3, 4])
def test_the_perfect_player_beats_a_random_one(size):
    solver = HexSolver(size)
    rng = np.random.default_rng(size)
    empty = (0,) * (size * size)
    assert all(_play(solver, empty, 0, rng) == 0 for _ in range(20))
    for cell, value in solve_all_openings(size).items():
        if value == -1:  # black's opening loses: the perfect white must win from it
            opened = empty[:cell] + (1,) + empty[cell + 1 :]
            assert all(_play(solver, opened, 1, rng) == 1 for _ in range(3))


def test_the_perfect_player_wins_5x5_games_from_the_centre_opening():
    solver = HexSolver(5)
    rng = np.random.default_rng(5)
    for reply in rng.choice([i for i in range(25) if i != 12], 3, replace=False):
        board = [0] * 25
        board[12], board[int(reply)] = 1, 2  # black's centre, a random white reply
        assert _play(solver, tuple(board), 0, rng) == 0


def test_it_plays_games_hex_states():
    game = games.make("hex", size=3)
    solver = for_game(game)
    rng = np.random.default_rng(0)
    step = jax.jit(game.step)
    state = game.init()
    while not bool(game.is_terminal(state)):
        board = board_of(state)
        if int(game.current_player(state)) == 0:
            action = solver.choose(board, rng)
        else:
            action = int(rng.choice(np.flatnonzero(np.asarray(game.legal_mask(state)))))
        assert bool(game.legal_mask(state)[action])
        state = step(state, action)
    assert np.asarray(game.returns(state)).tolist() == [1.0, -1.0]
    numpy_state = jax.tree_util.tree_map(np.asarray, state)
    assert from_state(numpy_state).tolist() == board_of(state).tolist()
    with pytest.raises(ValueError, match="unbatched"):
        board_of(jax.tree_util.tree_map(lambda x: np.stack([x, x]), numpy_state))


# ---- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 7, 11])
def test_unsupported_sizes_are_refused(size):
    with pytest.raises(ValueError, match=r"2\.\.6"):
        HexSolver(size)


def test_for_game_refuses_swap_and_large_boards():
    with pytest.raises(ValueError, match="swap"):
        for_game(games.make("hex", size=4, swap=True))
    with pytest.raises(ValueError, match=r"2\.\.5"):  # the perfect player's whole games: 5x5
        for_game(games.make("hex", size=6))
    with pytest.raises(ValueError, match=r"2\.\.6"):
        for_game(games.make("hex", size=7), max_size=MAX_SIZE)
    with pytest.raises(ValueError, match="hex game"):
        for_game(games.make("tictactoe"))
    assert for_game(games.make("hex", size=5)).size == 5
    assert for_game(games.make("hex", size=6), max_size=MAX_SIZE).size == 6


def test_malformed_boards_are_refused():
    solver = HexSolver(3)
    with pytest.raises(ValueError, match="9 cells"):
        solver.value(np.zeros(16, np.int8))
    with pytest.raises(ValueError, match="0 \\(empty\\)"):
        solver.value(np.full(9, 3, np.int8))
    with pytest.raises(ValueError, match="cannot arise"):
        solver.value(np.array([2, 0, 0, 0, 0, 0, 0, 0, 0], np.int8))
