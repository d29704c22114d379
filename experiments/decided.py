"""When a run's self-play games are decided: what a resignation rule would cut, and how often
it would be wrong.

    python -m experiments.decided pretrained/othello6 --thresholds=0.8,0.9,0.95
    python -m experiments.decided runs/hex6@10        # a run's checkpoint 10 (RUN@STEP)

AlphaZero's self-play resigns a game once the mover's root value falls below -t (t chosen so
that under 5% of the resignations are wrong, checked on a tenth of the games played out). This
plays a run's network in its own self-play (its config's search, root noise, sampled plies,
openings and branches; `--batch` games in lock-step for `--rounds` chunks of the game's longest
length) without resigning (a run trained with resignation too), and for each finished game
finds the first recorded move whose root value is below -t for the player to move. Printed per
threshold: the share of games where that happens, the share of those the mover did not go on to
lose (won or drawn: a wrong resignation), the moves after it (what resigning there saves, as a
share of all the moves played), and the median move of the game where it happens; then the
lowest of the thresholds that AlphaZero's rule would accept (`RESIGN_WRONG_LIMIT`: under 5% of its
resignations wrong).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import NamedTuple

import jax
import numpy as np

from azjax import cli, flags
from azjax.checkpoint import CheckpointError, load_checkpoint, parse_location
from azjax.loop import config_selfplay
from azjax.network import make_apply, make_network
from azjax.selfplay import RESIGN_WRONG_LIMIT, init_states
from experiments.common import parse_floats

PROG = "python -m experiments.decided"  # as its errors are named (cli.fail)


class Game(NamedTuple):
    """One finished self-play game, its recorded moves in order."""

    value: np.ndarray  # float[n], the search's root value for the player to move
    player: np.ndarray  # int[n], the player to move
    returns: np.ndarray  # float[2], the final returns of players 0 and 1


class Resignation(NamedTuple):
    """What resigning at the first root value below -threshold would have done."""

    threshold: float
    games: int  # finished games
    resigned: int  # games with a root value below -threshold for the player to move
    wrong: int  # of those, games the resigning player went on to win or draw
    moves: int  # moves of all the games
    saved: int  # moves after the resignation, summed over the resigned games
    median_move: float  # the median move (0-based, of the recorded game) of the resignations


def finished_games(value, player, done, returns) -> list[Game]:
    """The games that end within the trajectory ([T, B] arrays: root values, movers, whether
    the move ended its game; returns [T, B, 2]); each slot's games from its first move on (a
    slot's first game starts at move 0, its unfinished last one is left out)."""
    games = []
    for b in range(value.shape[1]):
        start = 0
        for t in np.nonzero(done[:, b])[0]:
            games.append(Game(value[start : t + 1, b], player[start : t + 1, b], returns[t, b]))
            start = t + 1
    return games


def resignation(games: list[Game], threshold: float) -> Resignation:
    """What resigning at each game's first root value below -threshold would have done."""
    resigned = wrong = saved = 0
    moves_at = []
    for g in games:
        below = np.nonzero(g.value < -threshold)[0]
        if len(below) == 0:
            continue
        i = int(below[0])
        resigned += 1
        wrong += bool(g.returns[g.player[i]] >= 0)
        saved += len(g.value) - i - 1
        moves_at.append(i)
    return Resignation(
        threshold=threshold,
        games=len(games),
        resigned=resigned,
        wrong=wrong,
        moves=sum(len(g.value) for g in games),
        saved=saved,
        median_move=float(np.median(moves_at)) if moves_at else float("nan"),
    )


def accepted(rows: list[Resignation], limit: float = RESIGN_WRONG_LIMIT) -> Resignation | None:
    """The row of the lowest threshold whose resignations are wrong in under `limit` of the
    games where they happen (a threshold no game reaches has none wrong); None if there is none."""
    ok = [r for r in rows if r.wrong < limit * r.resigned or r.resigned == 0]
    return min(ok, key=lambda r: r.threshold, default=None)


def play(location: str, *, batch: int, rounds: int, seed: int):
    """(config, [T, B] root values, movers, done, returns [T, B, 2]) of `rounds` chunks of the
    self-play of the network at `location` (RUN[@STEP], `checkpoint.parse_location`; the latest
    checkpoint without a step), from B start positions."""
    config, variables, _ = load_checkpoint(*parse_location(location))
    # a run that resigned (`resign_threshold`, Othello's CPU recipe) is played out here: what its
    # resignations cut, and how often wrongly, is what this measures
    config = dataclasses.replace(config, resign_threshold=0.0)
    game = config.make_game()
    length = game.max_game_length
    selfplay = jax.jit(
        config_selfplay(config, game, make_apply(make_network(config, game)), length)
    )
    states = init_states(game, batch)
    key = jax.random.PRNGKey(seed)
    chunks = []
    for r in range(rounds):
        states, traj = selfplay(variables, jax.random.fold_in(key, r), states)
        chunks.append(jax.device_get((traj.root_value, traj.player, traj.done, traj.returns)))
    return config, *(np.concatenate(parts) for parts in zip(*chunks))


def main(argv=None) -> int:
    p = flags.Parser(module=__spec__.name, description=__doc__.split("\n\n")[0])
    p.add_argument(
        "run", help="a run folder, RUN@STEP for one of its checkpoints, or pretrained/NAME"
    )
    p.add_argument("--thresholds", default="0.8,0.9,0.95,0.98", help="values of t (0.8,...)")
    p.add_argument("--batch", type=int, default=128, help="games at once (128)")
    p.add_argument("--rounds", type=int, default=3, help="chunks to play (3)")
    p.add_argument("--seed", type=flags.seed, default=0, help="self-play's key (0)")
    args = p.parse_args(argv)
    for flag, value in (("--batch", args.batch), ("--rounds", args.rounds)):
        if value < 1:
            p.error(f"{flag} must be at least 1, got {value}")
    try:
        thresholds = parse_floats("--thresholds", args.thresholds, 0.0, 1.0)
        start = time.time()
        config, value, player, done, returns = play(
            args.run, batch=args.batch, rounds=args.rounds, seed=args.seed
        )
    except (ValueError, CheckpointError) as e:
        return cli.fail(PROG, e)
    games = finished_games(value, player, done, returns)
    if not games:
        return cli.fail(PROG, f"no game ended in {value.shape[0]} moves: raise --rounds")
    rows = [resignation(games, t) for t in thresholds]
    print(
        f"{args.run}: {config.game} {dict(config.game_options)}, {config.search} at "
        f"{config.num_simulations} simulations; {len(games)} games of {value.shape[1]} slots "
        f"ended in {value.shape[0]} moves ({time.time() - start:.0f} s), "
        f"{rows[0].moves / len(games):.1f} moves a game"
    )
    print("| t | games resigned | wrong | moves saved | median move of resigning |")
    print("| --: | --: | --: | --: | --: |")
    for r in rows:
        wrong = r.wrong / r.resigned if r.resigned else 0.0
        print(
            f"| {r.threshold:g} | {r.resigned / r.games:.3f} | {wrong:.3f} ({r.wrong}) | "
            f"{r.saved / r.moves:.3f} | {r.median_move:g} |"
        )
    best = accepted(rows)
    if best is None:
        print(f"no threshold given has under {RESIGN_WRONG_LIMIT:.0%} of its resignations wrong")
    else:
        print(
            f"AlphaZero's rule (under {RESIGN_WRONG_LIMIT:.0%} wrong) takes "
            f"t = {best.threshold:g}: {best.saved / best.moves:.1%} of the moves saved"
        )
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.decided", main))
