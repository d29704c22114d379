"""An exact Hex solver for small boards (no swap rule), and a perfect player built from it.

Conventions are those of `games.hex`: a board is a flat array of N = size * size cells, cell
(row, col) at index row * size + col, holding 0 empty, 1 black, 2 white. Black (player 0) moves
first and joins the top and bottom rows; white joins the left and right columns. Black is to move
when both colours have as many stones, white when black has one more. Hex has no draws, so every
position is won or lost for the player to move.

    solver = HexSolver(5)                       # or for_game(games.make("hex", size=5))
    solver.value(board)                         # +1 / -1 for the player to move
    solver.winning_moves(board)                 # every move that keeps a won position won
    move = solver.choose(board_of(state), rng)  # the perfect player's move
    solve_all_openings(5)                       # {first move: value for black}

The search is plain Python over bitboards (bit i = cell i, Python ints): a depth-first AND/OR
search with a transposition table keyed by the position up to the board's 180-degree rotation,
which maps each player's edges onto themselves. Each result carries a *carrier*: empty cells
outside which the loser's stones change nothing (Henderson's proof sets). A move outside the
carrier of the opponent's win against a move already tried loses too, so the mover only tries moves
inside every carrier seen so far (the "must-play" region). Leaves come early from virtual
connections found greedily: groups joined through two free common neighbours (bridges, and a
stone's two cells on the edge row), plus the third-row edge template (the ziggurat), all with
disjoint carriers; the mover wins at once when such chains join its edges or need one more stone,
and loses when the opponent's already do. Moves are tried in order of the fewest empty cells a
connection of the mover through the cell needs, then centre first, and the opponent's winning
reply to the last refuted move is tried next.

Measured on the 2-core AMD EPYC (Python 3.11), each with a fresh `HexSolver`: the empty 4x4
board in 0.3 ms and all 16 openings of 4x4 in 0.04 s (604 positions stored); the empty 5x5 board
in 0.4 ms (black's centre stone has a ziggurat to each edge, disjoint) and all 25 openings of 5x5
in 11 to 21 s, depending on how busy other work kept the two cores (251,356 positions stored,
about 110 bytes each: 27 MB). The time goes into positions lost for the player to move, where
every move in the must-play region needs its own refutation. With the table warm, a game from
any opening against a random opponent then took 0.05 to 8 s. On 6x6 the search takes positions
well into a game, not the empty board: middle-game positions of MCTS-1024 self-play with 20 to 26
empty cells took 0.01 - 0.65 s on average (fewer empty cells, less; 28 - 30 empty cells 3 - 12 s,
some half a minute), which is what the 6x6 set of solved positions needs (`azjax.solved`). So
`HexSolver` takes sizes up to 6, while `for_game`, the perfect player's solver, which must answer
from any position of a whole game, stops at 5. Larger boards are refused: they were not made fast.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

MIN_SIZE = 2
MAX_SIZE = 6  # the solver, for positions well into a game on 6x6 (the module's docstring)
PERFECT_MAX_SIZE = 5  # `for_game`: every position of a game, the empty board included
# The transposition table's bound: at the 110 bytes a position measured on 5x5 (the module's
# docstring), about 0.9 GB. Building 6x6's set of solved positions stored over 3 GB unbounded; a
# bound costs re-solving what was dropped.
MAX_POSITIONS = 1 << 23

# The ziggurat (template IIIa) joining a stone on row 2 to the top edge: its eight empty cells as
# (row, col) offsets from the stone; its mirror image is the other orientation.
_ZIGGURAT = ((0, 1), (-1, 0), (-1, 1), (-1, 2), (-2, 0), (-2, 1), (-2, 2), (-2, 3))


@dataclasses.dataclass(frozen=True)
class _Geometry:
    """Bit masks of one board size; bit i is cell i = row * size + col."""

    size: int
    full: int  # every cell
    not_first_col: int
    not_last_col: int
    edges: tuple[tuple[int, int], ...]  # [colour] -> (edge A, edge B) cells; 0 black, 1 white
    templates: tuple[tuple[tuple[tuple[int, int], ...], ...], ...]  # [colour][edge] -> ziggurats
    order: tuple[int, ...]  # one bit per cell, centre first


@functools.cache
def _geometry(size: int) -> _Geometry:
    cells = size * size
    full = (1 << cells) - 1
    first_col = sum(1 << (r * size) for r in range(size))
    last_col = first_col << (size - 1)
    top = (1 << size) - 1
    bottom = top << (size * (size - 1))

    def hex_distance_from_centre(i: int) -> float:
        dr, dc = i // size - (size - 1) / 2, i % size - (size - 1) / 2
        return (abs(dr) + abs(dc) + abs(dr + dc)) / 2

    centre_first = sorted(range(cells), key=lambda i: (hex_distance_from_centre(i), i))
    return _Geometry(
        size=size,
        full=full,
        not_first_col=full & ~first_col,
        not_last_col=full & ~last_col,
        edges=((top, bottom), (first_col, last_col)),
        templates=tuple(
            tuple(_edge_templates(size, colour, edge) for edge in (0, 1)) for colour in (0, 1)
        ),
        order=tuple(1 << i for i in centre_first),
    )


def _edge_templates(size: int, colour: int, edge: int) -> tuple[tuple[int, int], ...]:
    """(stone bit, carrier mask) of every ziggurat joining a `colour` stone to its `edge`.

    Built for black's top edge and carried to the other edges by the board's symmetries: the
    180-degree rotation (top to bottom) and the transpose (black's edges to white's); both keep the
    hex adjacency.
    """

    def to_board(r: int, c: int) -> int:
        if edge == 1:
            r, c = size - 1 - r, size - 1 - c
        if colour == 1:
            r, c = c, r
        return 1 << (r * size + c)

    shapes = (_ZIGGURAT, tuple((dr, -dc - dr) for dr, dc in _ZIGGURAT))  # and its mirror image
    found = []
    for col in range(size):
        for shape in shapes:
            cells = [(2 + dr, col + dc) for dr, dc in shape]
            if all(0 <= r < size and 0 <= c < size for r, c in cells):
                carrier = sum(to_board(r, c) for r, c in cells)
                found.append((to_board(2, col), carrier))
    return tuple(found)


def _dilate(x: int, geo: _Geometry) -> int:
    """The cells of `x` and their neighbours: (r-1, c), (r-1, c+1), (r, c-1), (r, c+1), (r+1, c-1),
    (r+1, c)."""
    n, m, a, b = geo.size, geo.size - 1, geo.not_first_col, geo.not_last_col
    return (
        x | ((x << 1) & a) | ((x >> 1) & b) | (x << n) | (x >> n) | ((x >> m) & a) | ((x << m) & b)
    ) & geo.full


def _flood(seed: int, stones: int, geo: _Geometry) -> int:
    """The cells of `stones` connected to `seed & stones` through `stones`."""
    n, m, a, b = geo.size, geo.size - 1, geo.not_first_col, geo.not_last_col  # `_dilate`, inlined
    x = seed & stones
    while True:
        near = x | ((x << 1) & a) | ((x >> 1) & b) | (x << n) | (x >> n)
        grown = stones & (near | ((x >> m) & a) | ((x << m) & b))
        if grown == x:
            return x
        x = grown


def _connects(stones: int, colour: int, geo: _Geometry) -> bool:
    """Whether `colour`'s stones already join its two edges."""
    edge_a, edge_b = geo.edges[colour]
    return bool(_flood(edge_a, stones, geo) & edge_b)


def _virtual_connection(stones: int, colour: int, empty: int, geo: _Geometry):
    """Greedy virtual connection of `colour`'s edges, holding however the opponent moves first.

    Groups (the two edges count as groups, with the empty cells of their rows as neighbours) are
    merged while two of them share two free empty neighbours, or a group has a free ziggurat to an
    edge; each merge spends its cells, so the carriers are disjoint and the connection is sound.
    Returns ``(carrier, 0, 0)`` when the edges join (`carrier` holds the spent cells that matter),
    else ``(None, keys, key_carrier)``: `keys` are the empty cells next to both edge groups (a stone
    there joins them), `key_carrier` the cells the two edge groups' own connections spend.
    """
    edge_a, edge_b = geo.edges[colour]
    templates_a, templates_b = geo.templates[colour]
    group_a = [0, edge_a & empty, 0]  # [stones, empty neighbours, carrier]
    group_b = [0, edge_b & empty, 0]
    groups = [group_a, group_b]
    rest = stones
    while rest:
        group = _flood(rest & -rest, stones, geo)
        rest &= ~group
        neighbours = _dilate(group, geo) & empty
        if group & edge_a:
            group_a[0] |= group
            group_a[1] |= neighbours
        elif group & edge_b:
            group_b[0] |= group
            group_b[1] |= neighbours
        else:
            groups.append([group, neighbours, 0])
    free = empty
    merged = True
    while merged:
        merged = False
        i = 0
        while i < len(groups):
            j = i + 1
            while j < len(groups):
                gi, gj = groups[i], groups[j]
                link = _link(gi, gj, i, j, free, templates_a, templates_b)
                if not link:
                    j += 1
                    continue
                free &= ~link
                if j == 1:  # the two edge groups
                    return gi[2] | gj[2] | link, 0, 0
                del groups[j]
                gi[0] |= gj[0]
                gi[1] |= gj[1]
                gi[2] |= gj[2] | link
                merged = True
            i += 1
    return None, group_a[1] & group_b[1], group_a[2] | group_b[2]


def _link(gi, gj, i, j, free, templates_a, templates_b) -> int:
    """The carrier of a virtual link between groups i < j (0 and 1 are the edges), or 0."""
    common = gi[1] & gj[1] & free
    if common & (common - 1):
        low = common & -common
        common ^= low
        return low | (common & -common)
    if i > 1:
        return 0
    for stone, carrier in templates_a if i == 0 else templates_b:
        if gj[0] & stone and not carrier & ~free:
            return carrier
    if j == 1:
        for stone, carrier in templates_b:
            if gi[0] & stone and not carrier & ~free:
                return carrier
    return 0


def _distance_levels(stones: int, edge: int, empty: int, geo: _Geometry) -> list[int]:
    """Masks of cells by distance from `edge`: level k holds the stones and empty cells that a path
    from the edge through no opponent stone reaches with k empty cells (the cell itself counted)."""
    reach = _flood(edge, stones, geo)
    levels, seen = [], 0
    while True:
        levels.append(reach & ~seen)
        seen |= reach
        front = (_dilate(reach, geo) | edge) & empty & ~seen
        if not front:
            return levels
        reach = _flood(seen | front, seen | front | stones, geo)


def _shortest_connection(stones: int, colour: int, empty: int, geo: _Geometry) -> int:
    """How many empty cells `colour` must still fill to join its edges (N + 1 when it cannot)."""
    edge_a, edge_b = geo.edges[colour]
    for k, level in enumerate(_distance_levels(stones, edge_a, empty, geo)):
        if level & edge_b:
            return k
    return geo.size * geo.size + 1


def _move_order(me: int, colour: int, empty: int, candidates: int, geo: _Geometry) -> list[int]:
    """The bits of `candidates`, fewest empty cells in the mover's best connection through the cell
    first (its distance from one edge plus from the other), then centre first."""
    edge_a, edge_b = geo.edges[colour]
    from_b = _distance_levels(me, edge_b, empty, geo)
    by_length = [0] * (len(from_b) + geo.size * geo.size)  # [connection length] -> cells
    for i, level_a in enumerate(_distance_levels(me, edge_a, empty, geo)):
        level_a &= candidates
        if level_a:
            for j, level_b in enumerate(from_b):
                by_length[i + j] |= level_a & level_b
    reached = 0
    for cells in by_length:
        reached |= cells
    by_length.append(candidates & ~reached)  # walled off from an edge: last
    centre_first = [bit for bit in geo.order if candidates & bit]
    return [bit for cells in by_length if cells for bit in centre_first if cells & bit]


class HexSolver:
    """Exact values and perfect moves for Hex on a `size` x `size` board without the swap rule.

    One instance keeps its transposition table, so positions met again (all of a game's, once its
    first position is solved) are answered from it. The table holds at most `max_positions`
    positions, those met least recently dropped first (two generations, `_store`).
    """

    def __init__(self, size: int, *, max_positions: int = MAX_POSITIONS):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise TypeError(f"hex solver: size must be an integer, got {size!r}")
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise ValueError(f"hex solver: size must be {MIN_SIZE}..{MAX_SIZE}, got {size}")
        if isinstance(max_positions, bool) or not isinstance(max_positions, int):
            raise TypeError(f"hex solver: max_positions must be an integer, got {max_positions!r}")
        if max_positions < 2:
            raise ValueError(f"hex solver: max_positions must be >= 2, got {max_positions}")
        self.size = int(size)
        self._geo = _geometry(self.size)
        self._cells = self.size * self.size
        # canonical (mover << 64 | opponent) -> carrier << 7 | (best cell + 1) << 1 | mover wins.
        # Two generations bound the memory: when the newer holds half of `max_positions`, it
        # becomes the older and the oldest is dropped; an older entry met again moves up.
        self._half = max_positions // 2
        self._table: dict[int, int] = {}
        self._older: dict[int, int] = {}

    # ---- public API --------------------------------------------------------------------------
    def value(self, board) -> int:
        """+1 if the player to move wins with perfect play, else -1 (also on a finished board)."""
        me, opp, colour = self._position(board)
        if _connects(opp, 1 - colour, self._geo):
            return -1
        return 1 if self._search(me, opp, colour)[0] else -1

    def winning_moves(self, board) -> list[int]:
        """Every move (ascending) after which the mover still wins; empty for a lost position."""
        me, opp, colour = self._position(board)
        if _connects(opp, 1 - colour, self._geo):
            return []
        return [cell for cell, wins in self._move_results(me, opp, colour) if wins]

    def choose(self, board, rng: np.random.Generator) -> int:
        """The perfect player's move; `rng` is a numpy Generator. ValueError on a finished board.

        In a won position: a uniformly random winning move (the first winning one of the legal
        moves in random order, so only the moves tried before it are solved). In a lost one every
        move loses, and the move taken is one after which the opponent's shortest connection needs
        the most empty cells, ties at random: a cheap way to resist, not the move that survives
        longest.
        """
        me, opp, colour = self._position(board)
        geo = self._geo
        if _connects(opp, 1 - colour, geo):
            raise ValueError("hex solver: the game is over, there is no move to choose")
        empty = geo.full & ~(me | opp)
        moves = [cell for cell in range(self._cells) if empty >> cell & 1]
        if self._search(me, opp, colour)[0]:
            for cell in rng.permutation(moves):
                if self._wins_with(me, opp, colour, 1 << int(cell)):
                    return int(cell)
            raise AssertionError("a won position with no winning move")  # the search is exact
        distances = [
            _shortest_connection(opp, 1 - colour, empty & ~(1 << cell), geo) for cell in moves
        ]
        stubborn = [cell for cell, d in zip(moves, distances) if d == max(distances)]
        return int(stubborn[rng.integers(len(stubborn))])

    def opening_values(self) -> dict[int, int]:
        """{first move m: value for black of the position after black plays m} (+1 or -1)."""
        return {cell: 1 if wins else -1 for cell, wins in self._move_results(0, 0, 0)}

    @property
    def table_size(self) -> int:
        """How many positions the transposition table holds (at most `max_positions`)."""
        return len(self._table) + len(self._older)

    # ---- internals ---------------------------------------------------------------------------
    def _position(self, board) -> tuple[int, int, int]:
        """(mover's bits, opponent's bits, mover's colour: 0 black, 1 white) of a checked board."""
        cells = np.asarray(board).reshape(-1)
        if cells.shape[0] != self._cells:
            raise ValueError(
                f"hex solver: a {self.size}x{self.size} board has {self._cells} cells, "
                f"got {cells.shape[0]}"
            )
        if not np.isin(cells, (0, 1, 2)).all():
            raise ValueError("hex solver: board cells must be 0 (empty), 1 (black) or 2 (white)")
        black = sum(1 << int(i) for i in np.flatnonzero(cells == 1))
        white = sum(1 << int(i) for i in np.flatnonzero(cells == 2))
        num_black, num_white = black.bit_count(), white.bit_count()
        if num_black not in (num_white, num_white + 1):
            raise ValueError(
                f"hex solver: {num_black} black and {num_white} white stones cannot arise in play "
                "(black moves first)"
            )
        colour = num_black - num_white  # black to move when the counts are equal
        me, opp = (black, white) if colour == 0 else (white, black)
        if _connects(me, colour, self._geo):
            raise ValueError("hex solver: the player to move has already joined its edges")
        return me, opp, colour

    def _move_results(self, me: int, opp: int, colour: int) -> list[tuple[int, bool]]:
        """(cell, whether the mover wins after playing it) for every empty cell, ascending."""
        empty = self._geo.full & ~(me | opp)
        return [
            (cell, self._wins_with(me, opp, colour, 1 << cell))
            for cell in range(self._cells)
            if empty >> cell & 1
        ]

    def _wins_with(self, me: int, opp: int, colour: int, move: int) -> bool:
        """Whether the mover still wins after playing the empty cell `move` (a bit)."""
        if _connects(me | move, colour, self._geo):
            return True
        return not self._search(opp, me | move, 1 - colour)[0]

    def _rotate(self, x: int) -> int:
        """The 180-degree rotation of a bitboard: cell i goes to N - 1 - i."""
        return int(format(x, f"0{self._cells}b")[::-1], 2)

    def _search(self, me: int, opp: int, colour: int) -> tuple[bool, int, int]:
        """(mover wins, carrier, a winning move's bit or 0) of an unfinished position.

        The position must be unfinished: neither colour joins its edges.
        """
        key = (me << 64) | opp
        rotated_key = (self._rotate(me) << 64) | self._rotate(opp)
        flip = rotated_key < key
        canonical = rotated_key if flip else key
        entry = self._table.get(canonical)
        if entry is None and (entry := self._older.get(canonical)) is not None:
            self._store(canonical, entry)  # met again: it moves up to the newer generation
        if entry is None:
            result = self._expand(me, opp, colour)
            wins, carrier, best = result
            if flip:
                carrier, best = self._rotate(carrier), self._rotate(best)
            best_index = best.bit_length()  # cell + 1, 0 for none
            self._store(canonical, (carrier << 7) | (best_index << 1) | wins)
            return result
        wins, best_index, carrier = entry & 1, (entry >> 1) & 63, entry >> 7
        best = 1 << (best_index - 1) if best_index else 0
        if flip:
            carrier, best = self._rotate(carrier), self._rotate(best)
        return bool(wins), carrier, best

    def _store(self, key: int, entry: int) -> None:
        """Keep `entry` in the newer generation, turning it into the older one when full."""
        if len(self._table) >= self._half:
            self._older, self._table = self._table, {}
        self._table[key] = entry

    def _expand(self, me: int, opp: int, colour: int) -> tuple[bool, int, int]:
        """`_search` of a position missing from the table."""
        geo = self._geo
        empty = geo.full & ~(me | opp)
        connection, keys, key_carrier = _virtual_connection(me, colour, empty, geo)
        if connection is not None:
            return True, connection, 0
        if keys:
            key = keys & -keys
            return True, key | key_carrier, key
        connection, keys, key_carrier = _virtual_connection(opp, 1 - colour, empty, geo)
        if connection is not None:
            return False, connection, 0
        if keys:  # the opponent joins with one stone: block it or break its connections
            must = key_carrier if keys & (keys - 1) else keys | key_carrier
            carrier = keys | key_carrier
        else:
            must, carrier = empty, 0
        ordered = _move_order(me, colour, empty, must, geo) if must & (must - 1) else [must]
        replies: list[int] = []  # the opponent's winning replies, tried next
        index = 0
        while True:
            move = 0
            while replies and not move:
                reply = replies.pop()
                move = reply if must & reply else 0
            while index < len(ordered) and not move:
                move = ordered[index] if must & ordered[index] else 0
                index += 1
            if not move:
                return False, carrier, 0
            opponent_wins, child_carrier, reply = self._search(opp, me | move, 1 - colour)
            if not opponent_wins:
                return True, child_carrier | move, move
            must &= child_carrier & ~move
            carrier |= child_carrier | move
            if reply:
                replies.append(reply)


def board_of(state: Any) -> np.ndarray:
    """int8[N] board of one unbatched `games.hex` state (numpy or jax arrays alike)."""
    board = np.asarray(state.board)
    if board.ndim != 1:
        raise ValueError(f"hex solver: expected one unbatched state, got a board of {board.shape}")
    return board.astype(np.int8)


from_state = board_of  # the same helper under the name the evaluation protocol uses


def for_game(game, *, max_size: int = PERFECT_MAX_SIZE) -> HexSolver:
    """A solver for a `games.make("hex", size=N)` game; ValueError for swap or sizes above
    `max_size` (by default the perfect player's 5: a game's every position, the empty board
    included; `MAX_SIZE` for positions well into a game)."""
    if getattr(game, "name", None) != "hex":
        raise ValueError(f"hex solver: needs a hex game, got {getattr(game, 'name', game)!r}")
    if game.swap:
        raise ValueError("hex solver: the swap rule is not supported; use swap=False")
    limit = min(max_size, MAX_SIZE)
    if not MIN_SIZE <= game.size <= limit:
        raise ValueError(f"hex solver: size must be {MIN_SIZE}..{limit}, got {game.size}")
    return HexSolver(game.size)


def solve_all_openings(size: int) -> dict[int, int]:
    """{first move m: value for black (+1 win, -1 loss) of the position after black plays m}."""
    return HexSolver(size).opening_values()
