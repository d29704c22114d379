"""Othello: scripted games with exact boards and masks, perft, and differential checks.

The scripted games were found by searching random games of a plain Python implementation of the
rules (the `_Reference` class below); the flip and pass games were also worked through by hand. The
perft figures are the published
ones for 8x8 (a pass counts as a move); the differential checks replay random games in OpenSpiel
(8x8 only) and in `_Reference` (other sizes).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest
from spiel_reference import compare_with_openspiel

import games


def jitted(size):
    game = games.make("othello", size=size)
    return game, jax.jit(game.init), jax.jit(game.step)


@pytest.fixture(scope="module")
def othello8():
    return jitted(8)


@pytest.fixture(scope="module")
def othello4():
    return jitted(4)


def play(fixture, moves):
    """The state after `moves` (names, each checked legal)."""
    game, init, step = fixture
    state = init()
    for m in moves:
        state = step(state, game.parse_action(m, state))
    return state


def rows(game, state):
    """The board as strings, row 1 first: '.' empty, 'X' black, 'O' white."""
    return ["".join(".XO"[v] for v in row) for row in np.asarray(game.board(state))]


def legal(game, state):
    return [game.action_to_str(a) for a in np.flatnonzero(game.legal_mask(state))]


# ---- scripted games --------------------------------------------------------------------------


def test_start_position(othello8):
    game, init, _ = othello8
    s = init()
    assert rows(game, s)[2:6] == ["........", "...OX...", "...XO...", "........"]
    assert legal(game, s) == ["d3", "c4", "f5", "e6"]
    assert int(game.current_player(s)) == 0 and not bool(game.is_terminal(s))
    obs = np.asarray(game.observe(s))  # black to move: plane 0 is black
    assert obs.shape == (8, 8, 3) and obs[3, 4, 0] == 1 and obs[3, 3, 1] == 1 and obs[..., 2].all()
    assert game.render(s).splitlines()[4] == "  4 . . * O X . . . 4"


def test_opening_moves(othello8):
    game, _, step = othello8
    s = play(othello8, ["d3"])  # brackets d4 between d3 and d5
    assert rows(game, s)[2:6] == ["...X....", "...XX...", "...XO...", "........"]
    assert legal(game, s) == ["c3", "e3", "c5"]
    assert int(s.player) == 1 and int(s.num_moves) == 1
    obs = np.asarray(game.observe(s))  # white to move: plane 0 is white, colour plane 0
    assert obs[4, 4, 0] == 1 and obs[2, 3, 1] == 1 and not obs[..., 2].any()
    s = step(s, game.parse_action("c3", s))  # diagonal c3-d4-e5
    assert rows(game, s)[2:6] == ["..OX....", "...OX...", "...XO...", "........"]
    assert legal(game, s) == ["b3", "c4", "f5", "e6"]
    np.testing.assert_array_equal(np.flatnonzero(game.legal_mask(s)), [17, 26, 37, 44])


def test_a_move_that_flips_three_lines(othello8):
    game, _, _ = othello8
    s = play(othello8, ["c4", "c3", "d3", "e3", "e2"])
    assert legal(game, s) == ["e1", "c2", "b4", "c5", "c6"]
    # c5 flips c4 (up), d4 (up-right) and d5 (right)
    s = play(othello8, ["c4", "c3", "d3", "e3", "e2", "c5"])
    assert rows(game, s) == [
        "........",
        "....X...",
        "..OXO...",
        "..OOO...",
        "..OOO...",
        "........",
        "........",
        "........",
    ]
    assert legal(game, s) == ["b3", "f3", "b5", "f5", "d6", "e6"]
    assert game.render(s).splitlines()[-1] == "X (black) to move: X 2, O 8"


def test_forced_pass_and_an_early_end(othello4):
    game, _, step = othello4
    s = play(othello4, ["d3", "d2", "d1", "d4", "b4"])
    assert rows(game, s) == ["...X", ".OXX", ".XXX", ".X.O"]
    assert legal(game, s) == ["pass"]  # white has no placing move
    assert int(s.player) == 1 and not bool(s.terminal)
    s = step(s, game.parse_action("pass", s))
    assert int(s.player) == 0 and int(s.num_moves) == 6  # the pass is a ply
    assert legal(game, s) == ["a1", "b1", "a2"]
    s = step(s, game.parse_action("a1", s))
    assert rows(game, s) == ["X..X", ".XXX", ".XXX", ".X.O"]  # neither side can place: over
    assert bool(game.is_terminal(s)) and int(s.num_moves) == 7
    np.testing.assert_array_equal(game.returns(s), [1, -1])
    assert not game.legal_mask(s).any()
    assert game.render(s).splitlines()[-1] == "game over: X 9, O 1"


def test_draw_before_the_board_is_full(othello4):
    game, _, step = othello4
    s = play(othello4, ["d3", "d2", "a1", "a4", "a3", "a2", "d1", "b4"])
    assert legal(game, s) == ["pass"] and int(s.player) == 0
    s = play(othello4, ["d3", "d2", "a1", "a4", "a3", "a2", "d1", "b4", "pass", "d4", "c4"])
    assert rows(game, s) == ["X..X", "OOXX", "OOXX", "OOXO"]
    assert bool(s.terminal) and int(s.num_moves) == 11
    np.testing.assert_array_equal(game.returns(s), [0, 0])


def test_draw_on_a_full_board(othello4):
    game, _, _ = othello4
    s = play(othello4, "a2 a3 a4 c1 d1 a1 d3 d4 c4 d2 b1".split())
    assert legal(game, s) == ["b4"] and int(s.player) == 1
    np.testing.assert_array_equal(game.returns(s), [0, 0])
    s = play(othello4, "a2 a3 a4 c1 d1 a1 d3 d4 c4 d2 b1 b4".split())
    assert rows(game, s) == ["OXXX", "XXOO", "XXOO", "XOOO"]
    assert bool(s.terminal) and int(s.num_moves) == 12
    np.testing.assert_array_equal(game.returns(s), [0, 0])


def test_terminal_state_is_absorbing(othello4):
    game, _, step = othello4
    end = play(othello4, ["d3", "d2", "d1", "d4", "b4", "pass", "a1"])
    for action in [0, 3, 12, game.pass_action]:
        after = step(end, action)
        for a, b in zip(jax.tree_util.tree_leaves(end), jax.tree_util.tree_leaves(after)):
            np.testing.assert_array_equal(a, b)


def test_illegal_actions_in_the_jitted_core(othello8):
    # Not checked there (parse_action checks); documented: the turn simply passes.
    game, init, step = othello8
    s = step(init(), game.pass_action)  # a pass while black has moves
    assert int(s.player) == 1 and int(s.num_moves) == 1 and not bool(s.terminal)
    assert rows(game, s)[3:5] == ["...OX...", "...XO..."]
    s = step(init(), 0)  # a1 brackets nothing: the disc lands, nothing flips
    assert rows(game, s)[0] == "X......." and rows(game, s)[3:5] == ["...OX...", "...XO..."]
    s = step(init(), 500)  # out of range: like a pass
    assert int(s.player) == 1 and rows(game, s)[3:5] == ["...OX...", "...XO..."]


@pytest.fixture(scope="module")
def playout4():
    return jax.jit(jax.vmap(games.make("othello", size=4).random_playout))


def test_random_playout_of_forced_lines(othello4, playout4):
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    batch = lambda s: jax.tree_util.tree_map(lambda x: jnp.stack([x] * 8), s)
    # white must play d4, black c4: a draw, whatever the key
    s = play(othello4, ["d3", "d2", "a1", "a4", "a3", "a2", "d1", "b4", "pass"])
    np.testing.assert_array_equal(playout4(batch(s), keys), np.zeros((8, 2)))
    # black must pass first (a pass inside the playout), then it is the same line
    s = play(othello4, ["d3", "d2", "a1", "a4", "a3", "a2", "d1", "b4"])
    np.testing.assert_array_equal(playout4(batch(s), keys), np.zeros((8, 2)))
    # from a terminal state: its result
    s = play(othello4, ["d3", "d2", "d1", "d4", "b4", "pass", "a1"])
    np.testing.assert_array_equal(playout4(batch(s), keys), np.tile([1.0, -1.0], (8, 1)))


def reference_playout(size, uniforms):
    """`random_playout` as documented, with the plain Python rules: ply t (passes included) plays
    the floor(u_t * count)-th legal square in board order, u = uniform(key, (length,))."""
    state = _Reference(size).new_initial_state()
    t = 0
    while not state.is_terminal():
        moves = state.placing(state.player)
        if moves:
            pick = int(np.float32(uniforms[t]) * np.float32(len(moves)))  # float32, as jitted
            state.apply_action(moves[min(pick, len(moves) - 1)])
        else:
            state.apply_action(size * size)
        t += 1
    return state.returns()


@pytest.mark.parametrize("size,num_games", [(4, 200), (6, 40), (8, 40), (10, 6)])
def test_random_playout_replays_exactly(size, num_games, othello4, othello8, playout4):
    # Each playout is a real game: the same random numbers drive a plain Python game to the same
    # result, game by game (passes and early ends included on 4x4; rows across two words of the
    # flat board on 6x6, four words on 10x10).
    game, init, _ = othello4 if size == 4 else othello8 if size == 8 else jitted(size)
    playout = playout4 if size == 4 else jax.jit(jax.vmap(game.random_playout))
    keys = jax.random.split(jax.random.PRNGKey(size), num_games)
    states = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (num_games, *x.shape)), init())
    ours = np.asarray(playout(states, keys))
    draw = jax.jit(jax.vmap(lambda k: jax.random.uniform(k, (game.max_game_length + 1,))))
    theirs = np.array([reference_playout(size, u) for u in np.asarray(draw(keys))])
    np.testing.assert_array_equal(ours, theirs)
    if num_games >= 40:
        assert len(np.unique(ours[:, 0])) == 3  # wins, losses and draws all occur


# ---- perft -----------------------------------------------------------------------------------

PERFT_8X8 = [4, 12, 56, 244, 1396, 8200, 55092, 390216, 3005288]
CHUNK = 4096


@pytest.fixture(scope="module")
def perft():
    """perft(depth) on 8x8: the leaf counts of the move tree at depths 1..depth, found by
    expanding it level by level (legal masks and steps vmapped, bookkeeping in numpy)."""
    game = games.make("othello")
    legal_fn = jax.jit(jax.vmap(game.legal_mask))
    step_fn = jax.jit(jax.vmap(game.step))

    def in_chunks(fn, tree, *args):  # fn over a batch in fixed-size chunks (one compilation)
        size = len(jax.tree_util.tree_leaves(tree)[0])
        outs = []
        for start in range(0, size, CHUNK):
            idx = np.minimum(np.arange(start, start + CHUNK), size - 1)
            out = fn(
                *[
                    jax.tree_util.tree_map(lambda x: x[idx], t)  # noqa: B023
                    for t in (tree, *args)
                ]
            )
            outs.append(jax.device_get(out))
        return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs)[:size], *outs)

    def counts(depth):
        frontier = jax.device_get(jax.tree_util.tree_map(lambda x: x[None], jax.jit(game.init)()))
        out = []
        for d in range(1, depth + 1):
            parent, action = np.nonzero(in_chunks(legal_fn, frontier))
            out.append(len(parent))  # a pass is a move; finished games have none
            if d < depth:  # the last level is only counted
                children = jax.tree_util.tree_map(lambda x: x[parent], frontier)  # noqa: B023
                frontier = in_chunks(step_fn, children, action.astype(np.int32))
        return out

    return counts


def test_perft_8x8(perft):
    assert perft(8) == PERFT_8X8[:8]  # about a second: the last level is counted, not stepped


@pytest.mark.slow
def test_perft_8x8_deep(perft):
    assert perft(9) == PERFT_8X8  # depth 9 is the first with finished games (9-ply wipeouts)


# ---- differential checks ---------------------------------------------------------------------


def test_matches_openspiel():
    # OpenSpiel numbers actions as we do (row * 8 + col, row 0 on top, pass = 64), also ends the
    # game right after the placement that leaves neither side a move, and counts a pass as a ply.
    spiel = _CountingPasses(pyspiel.load_game("othello"))
    stats = compare_with_openspiel(games.make("othello"), spiel, lambda a: a, num_games=1000)
    assert 58 <= stats["mean_length"] <= 62  # random games fill (nearly) the board
    assert spiel.games_with_a_pass > 200  # about a third of random games have one


class _CountingPasses:
    """A pyspiel game whose states count the games in which a pass (action 64) was played."""

    def __init__(self, spiel_game):
        self.spiel_game, self.games_with_a_pass = spiel_game, 0

    def new_initial_state(self):
        outer, state, passed = self, self.spiel_game.new_initial_state(), [False]

        class State:
            def __getattr__(self, name):
                return getattr(state, name)

            def __str__(self):
                return str(state)

            def apply_action(self, action):
                if action == 64 and not passed[0]:
                    passed[0] = True
                    outer.games_with_a_pass += 1
                state.apply_action(action)

        return State()


class _Reference:
    """Othello rules in plain Python, square by square, with OpenSpiel's state interface."""

    class State:
        def __init__(self, n):
            h = n // 2
            self.n, self.player, self.over = n, 0, False
            self.board = [0] * (n * n)  # 0 empty, 1 black, 2 white
            self.board[(h - 1) * n + h - 1] = self.board[h * n + h] = 2
            self.board[(h - 1) * n + h] = self.board[h * n + h - 1] = 1

        def flips(self, square, player):
            n, b = self.n, self.board
            if b[square]:
                return []
            out = []
            for dr, dc in [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)]:
                r, c, run = square // n + dr, square % n + dc, []
                while 0 <= r < n and 0 <= c < n and b[r * n + c] == 2 - player:
                    run.append(r * n + c)
                    r, c = r + dr, c + dc
                if run and 0 <= r < n and 0 <= c < n and b[r * n + c] == player + 1:
                    out += run
            return out

        def placing(self, player):
            return [p for p in range(self.n**2) if self.flips(p, player)]

        def is_terminal(self):
            return self.over

        def current_player(self):
            return self.player

        def legal_actions(self):
            return self.placing(self.player) or [self.n**2]

        def apply_action(self, action):
            if action != self.n**2:
                for p in self.flips(action, self.player) + [action]:
                    self.board[p] = self.player + 1
                if not self.placing(0) and not self.placing(1):
                    self.over = True
                    return
            self.player = 1 - self.player

        def returns(self):
            diff = self.board.count(1) - self.board.count(2)
            return [float(np.sign(diff)), -float(np.sign(diff))]

        def __str__(self):
            n = self.n
            rows = [self.board[r * n : r * n + n] for r in range(n)]
            return "\n".join("".join(".XO"[v] for v in row) for row in rows)

    def __init__(self, n):
        self.n = n

    def new_initial_state(self):
        return self.State(self.n)


@pytest.mark.parametrize("size,num_games", [(6, 100), (12, 2)])
def test_matches_plain_python_rules(size, num_games):
    game = games.make("othello", size=size)
    compare_with_openspiel(game, _Reference(size), lambda a: a, num_games=num_games, seed=size)


@pytest.mark.slow
def test_matches_plain_python_rules_on_the_largest_board():
    game = games.make("othello", size=16)
    compare_with_openspiel(game, _Reference(16), lambda a: a, num_games=3, seed=16)


# ---- move names and options ------------------------------------------------------------------


def test_move_names(othello8):
    game, _, _ = othello8
    assert game.parse_action("d3") == 2 * 8 + 3
    assert game.parse_action(" D3 ") == 19 and game.action_to_str(19) == "d3"
    assert game.parse_action("h8") == 63 and game.parse_action("a1") == 0
    assert game.parse_action("pass") == 64 and game.action_to_str(64) == "pass"
    assert games.make("othello", size=16).parse_action("p16") == 255
    for bad in ["i1", "a9", "a0", "d", "3d", "d3x", "passes", "", "a01", "a\u00b2", "a\u0663"]:
        with pytest.raises(ValueError, match="not a move"):
            game.parse_action(bad)


def test_illegal_moves_are_rejected_with_the_legal_list(othello8):
    game, init, _ = othello8
    s = init()
    with pytest.raises(ValueError, match="legal moves: d3, c4, f5, e6"):
        game.parse_action("pass", s)
    with pytest.raises(ValueError, match="legal moves: d3, c4, f5, e6"):
        game.parse_action("a1", s)
    with pytest.raises(ValueError, match="legal moves: d3, c4, f5, e6"):
        game.parse_action("d4", s)  # occupied


@pytest.mark.parametrize("size", [5, 2, 18, "8", 8.0, True])
def test_bad_sizes_are_rejected(size):
    with pytest.raises(ValueError, match="othello: size must be an even integer in 4..16"):
        games.make("othello", size=size)


def test_sizes():
    for size in (4, 6, 8, 16):
        game = games.make("othello", size=size)
        assert game.num_actions == size * size + 1 and game.pass_action == size * size
        assert game.board_shape == (size, size) and game.observation_shape == (size, size, 3)
        assert game.max_game_length == 2 * (size * size - 4) - 1
    game = games.make("othello", size=6)
    assert game.render(game.init()).splitlines()[2:6] == [
        "  2 . . * . . . 2",
        "  3 . * O X . . 3",
        "  4 . . X O * . 4",
        "  5 . . . * . . 5",
    ]


# ---- the mobility planes ---------------------------------------------------------------------


def test_mobility_planes_are_both_sides_placing_moves():
    """Along random 6x6 games, planes 3 and 4 are where the mover and the opponent can place
    (the plain Python rules), the first three planes are the plain observation, and both
    mobility planes are empty once the game is over."""
    game = games.make("othello", size=6, mobility=True)
    plain = games.make("othello", size=6)
    assert game.observation_shape == (6, 6, 5) and plain.observation_shape == (6, 6, 3)
    assert game.options == {"size": 6, "mobility": True} and game.rules == {"size": 6}
    assert game.same_rules(plain) and not game.same_rules(games.make("othello", size=8))
    observe, step = jax.jit(game.observe), jax.jit(game.step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        state, ref = game.init(), _Reference.State(6)
        while True:
            obs = np.asarray(observe(state))
            assert obs.shape == (6, 6, 5)
            np.testing.assert_array_equal(obs[..., :3], np.asarray(plain.observe(state)))
            mover = int(state.player)
            for plane, player in ((3, mover), (4, 1 - mover)):
                want = np.zeros(36)
                if not ref.over:
                    want[ref.placing(player)] = 1
                np.testing.assert_array_equal(obs[..., plane].ravel(), want)
            if ref.over:
                break
            action = rng.choice(ref.legal_actions())
            ref.apply_action(action)
            state = step(state, action)


@pytest.mark.parametrize("value", ["true", 1, None])
def test_mobility_takes_a_bool(value):
    with pytest.raises(ValueError, match="othello: mobility must be True or False"):
        games.make("othello", size=6, mobility=value)
