"""Match openings: deterministic players repeat the same game, so play from many positions.

    moves = openings(game, "all")            # every legal first move, one tuple each
    moves = openings(game, "random:20", key) # 20 distinct positions after 2 random plies
    games = both_colours(moves)              # each opening twice: A as black, then A as white

`--openings=all` is Expert Iteration's protocol against MoHex (Anthony et al. 2017): one game per
legal opening move with each colour. With a perfect player at hand (`perfect_values`: the Hex
solver up to 5x5, full-depth minimax for Tic-Tac-Toe) an agent is scored by the share of won
sides it wins: for each opening, the side that wins with perfect play; a perfect agent wins them
all.
"""

from __future__ import annotations

import jax
import numpy as np

from azjax.eval.agent import batch_functions
from games.base import Game

KINDS = "none | all | random:N[:PLIES]"
MISSES = 1000  # draws in a row without a new position that end `random_sequences`


def parse(text: str) -> tuple[str, int, int]:
    """'none' | 'all' | 'random:N[:PLIES]' -> (kind, N, plies); ValueError naming the forms."""
    kind, _, rest = text.strip().partition(":")
    if kind in ("none", "all") and not rest:
        return kind, 0, 1
    if kind == "random":
        parts = rest.split(":")
        try:
            n, plies = int(parts[0]), int(parts[1]) if len(parts) > 1 else 2
        except (ValueError, IndexError):
            n = plies = 0
        if len(parts) <= 2 and n >= 1 and plies >= 1:
            return kind, n, plies
    raise ValueError(f"--openings: expected {KINDS}, got {text!r}")


def openings(game: Game, text: str, key=None) -> list[tuple[int, ...]]:
    """The opening move sequences `text` names (see `parse`); [()] for none."""
    kind, n, plies = parse(text)
    if kind == "none":
        return [()]
    fns = batch_functions(game)
    if kind == "all":
        legal = np.asarray(jax.device_get(fns.legal(fns.init(1))))[0]
        return [(int(a),) for a in np.flatnonzero(legal)]
    return random_sequences(game, n, plies, key)


def games_played(text: str, moves: list[tuple[int, ...]], games: int | None) -> int:
    """The games a match from the openings `text` names (`moves`) plays: each opening once with
    each colour, twice their number; without openings `games`. ValueError for a `games` given
    beside openings that is not that number (it was overridden silently), or none without."""
    if text == "none":
        if games is None:
            raise ValueError("give the number of games (--games)")
        return games
    if games is not None and games != 2 * len(moves):
        raise ValueError(
            f"--games={games} with --openings={text}: each of its {len(moves)} openings is "
            f"played once with each colour, {2 * len(moves)} games; give --games="
            f"{2 * len(moves)} or leave --games out"
        )
    return 2 * len(moves)


def random_sequences(
    game: Game, n: int, plies: int, key=None, *, distinct: bool = True
) -> list[tuple[int, ...]]:
    """`n` move sequences of `plies` uniformly random legal moves that leave the game unfinished
    (from `key`; None: seed 0), all reaching different positions unless `distinct` is False (two
    orders of the same moves are one opening; ValueError if `n` distinct ones are not found: after
    50 n draws, or at once when max(MISSES, 10 x found) draws in a row found none new, as when
    `n` is more than the game has)."""
    fns = batch_functions(game)
    observe = jax.jit(jax.vmap(game.observe))  # what the position is, whatever led to it
    rng = np.random.default_rng(
        np.asarray(jax.random.key_data(key)).ravel() if key is not None else 0
    )
    found: set[bytes] = set()  # the positions drawn: their observations (one mover at `plies`)
    drawn: list[tuple[int, ...]] = []
    misses = 0  # draws in a row that found nothing new: the space is spent after many
    for _ in range(50 * n):
        if len(drawn) == n or misses >= max(MISSES, 10 * len(found)):
            break
        misses += 1
        moves, state = [], fns.init(1)
        for _ in range(plies):
            legal = np.flatnonzero(np.asarray(jax.device_get(fns.legal(state)))[0])
            if legal.size == 0:  # over before `plies`: no move left to draw
                break
            moves.append(int(rng.choice(legal)))
            state = fns.step(state, np.asarray(moves[-1:], np.int32))
        if len(moves) < plies or bool(np.asarray(fns.status(state)[0])[0]):  # already over
            continue
        position = np.asarray(observe(state)).tobytes()
        if not distinct or position not in found:
            found.add(position)
            drawn.append(tuple(moves))
            misses = 0
    if len(drawn) < n:
        raise ValueError(
            f"--openings=random:{n}:{plies}: only {len(drawn)} distinct positions "
            f"of {plies} plies found in {game.name} {game.options}"
        )
    return drawn


def both_colours(moves: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Each opening twice, in `play_games`'s order: A is black in the first half of the games
    and white in the second, so game i and game i + len(moves) share opening i."""
    return list(moves) + list(moves)


def perfect_values(game: Game, moves: list[tuple[int, ...]]) -> list[int] | None:
    """For each opening, the outcome for black with perfect play from it (+1, 0 or -1), or
    None when there is no perfect player for `game` here."""
    from azjax.eval import perfect

    value_of = perfect.black_value_fn(game)
    if value_of is None:
        return None
    fns = batch_functions(game)
    out = []
    for seq in moves:
        state = fns.init(1)
        for action in seq:
            state = fns.step(state, np.asarray([action], np.int32))
        out.append(value_of(jax.tree_util.tree_map(lambda x: np.asarray(x)[0], state)))
    return out


def opening_records(game: Game, moves: list[tuple[int, ...]], returns: np.ndarray) -> list:
    """[{opening: move names, a_as_black: return, a_as_white: return}] of `both_colours`
    games."""
    k = len(moves)
    return [
        dict(
            opening=" ".join(game.action_to_str(a) for a in seq),
            a_as_black=float(returns[i]),
            a_as_white=float(returns[k + i]),
        )
        for i, seq in enumerate(moves)
    ]


def won_sides(values: list[int], returns: np.ndarray) -> dict:
    """How many of the openings' won sides agent A won: `returns` are A's returns of the
    `both_colours` games (first half A black, second half A white)."""
    k = len(values)
    as_black, as_white = np.asarray(returns[:k]), np.asarray(returns[k:])
    won = lost_draws = 0
    decisive = 0
    for v, b, w in zip(values, as_black, as_white):
        if v > 0:
            decisive += 1
            won += int(b > 0)
        elif v < 0:
            decisive += 1
            won += int(w > 0)
        else:  # a drawn opening: the agent should not lose either side
            lost_draws += int(b < 0) + int(w < 0)
    return dict(
        won_sides=won,
        decisive_openings=decisive,
        drawn_openings=k - decisive,
        losses_in_drawn_openings=lost_draws,
        score=won / decisive if decisive else None,
    )
