"""Any agent as an opponent during training: `train.py --eval_opponent=SPEC`.

    opponent = TrainingOpponent(config)     # parses config.eval_opponent; ValueError if it is bad
    with opponent:
        train_and_evaluate(config, workdir, extra_evaluation=opponent)

At each in-loop evaluation (`azjax.loop`, every `eval_interval` iterations) the current network,
searching as the loop's evaluation has it search against pure MCTS (the run's `SearchSpec`, no
epsilon; with `eval_opponent_sims` simulations where that is not 0, and decisive moves unless
`eval_opponent_decisive` is off and self-play has none), plays `eval_opponent_games` games (0:
`eval_games`) against the agent the spec names (`azjax.eval.specs`: gtp:"COMMAND", spiel:, mcts:,
minimax:, ckpt:, ...), half with each colour (`play_games`); with `eval_opening_plies` = n, as the
loop's own matches, each game pair starts from a position after n uniformly random plies, once with
each colour (positions may repeat between pairs). The agents that draw their own random numbers
(spiel:, minimax:, perfect:) take the run's `--seed` where the spec gives no seed=, as `evaluate.py
--seed` (`parse_agent`), and go on drawing from one stream across a session's evaluations (a
resumed session starts it again from the seed). The values, from the network's side:

    eval/opponent_score     (wins + draws / 2) / games
    eval/opponent_ci95      the half-width of its 95% interval (`stats.score_ci`)
    eval/opponent_wdl       [wins, draws, losses]
    eval/opponent_seconds   the match's wall time (Python agents such as gtp, spiel and minimax
                            play game by game or move by move: their cost shows here)

The spec is checked when the opponent is built: an unknown kind or option, a checkpoint of
another game, `human`, or an engine that does not start or answer is a ValueError. An opponent
that fails later (a GTP engine that dies) is reported once, on stderr, and dropped: training goes
on without it.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import jax

from azjax.config import Config
from azjax.eval.agent import Agent, SearchSetup, search_agent
from azjax.eval.gtp import GTPError
from azjax.eval.match import play_games
from azjax.eval.openings import both_colours, random_sequences
from azjax.eval.specs import parse_agent
from azjax.eval.stats import score_ci
from azjax.network import make_apply, make_network
from azjax.search import SearchSpec

PREFIX = "eval/opponent_"


class TrainingOpponent:
    """`(variables, key) -> {"eval/opponent_...": ...}`: one match of the run's network against
    `config.eval_opponent` (module doc). `close()` ends the opponent (a GTP engine)."""

    def __init__(self, config: Config, *, prog: str = "train.py"):
        self.spec, self.prog = config.eval_opponent, prog
        self.num_games = config.eval_opponent_games or config.eval_games
        self.opening_plies = config.eval_opening_plies
        game = config.make_game()
        self.game = game
        self.opponent: Agent | None = make_opponent(self.spec, game, seed=config.seed)
        apply = make_apply(make_network(config, game))  # as azjax.loop_eval.evaluation_matches
        spec = SearchSpec.from_config(
            config,
            num_simulations=config.eval_opponent_sims or config.num_simulations,
            decisive_moves=config.decisive_moves or config.eval_opponent_decisive,
        )
        setup = SearchSetup(game, spec, apply)
        self.network = search_agent("network", setup)

    def __call__(self, variables, key: jax.Array) -> dict[str, Any]:
        if self.opponent is None:  # it failed earlier
            return {}
        network = dataclasses.replace(self.network, variables=variables)
        try:
            starts = None
            if self.opening_plies:
                key, k_open = jax.random.split(key)
                pairs, plies = self.num_games // 2, self.opening_plies
                starts = both_colours(
                    random_sequences(self.game, pairs, plies, k_open, distinct=False)
                )
            outcome = play_games(
                self.game, network, self.opponent, self.num_games, key, openings=starts
            )
        except Exception as e:  # noqa: BLE001 - any failure of the opponent: report, train on
            print(
                f"{self.prog}: --eval_opponent={self.spec} failed and is dropped, training goes "
                f"on: {type(e).__name__}: {one_line(str(e))}",
                file=sys.stderr,
            )
            self.close()
            return {}
        res = outcome.result
        score, half = score_ci(res.wins, res.draws, res.losses)
        return {
            f"{PREFIX}score": score,
            f"{PREFIX}ci95": half,
            f"{PREFIX}wdl": [res.wins, res.draws, res.losses],
            f"{PREFIX}seconds": outcome.wall_seconds,
        }

    def close(self) -> None:
        opponent, self.opponent = self.opponent, None
        if opponent is not None:
            try:
                opponent.close()
            except Exception:  # noqa: BLE001 - a dead engine cannot be told to quit
                pass

    def __enter__(self) -> TrainingOpponent:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def make_opponent(spec: str, game, *, seed: int = 0) -> Agent:
    """The agent `spec` names for `game`, checked to be playable: ValueError otherwise (a GTP
    engine is asked to set up a board, so one that does not start or answer is named here).
    `seed`: the run's seed, for the agents that draw their own random numbers (spiel, minimax,
    perfect) where the spec gives none (`parse_agent`), so another run plays other games."""
    if spec.strip().partition(":")[0] == "human":
        raise ValueError("human asks for moves on stdin: not an opponent during training")
    agent = parse_agent(spec, game, seed=seed)
    try:
        agent.reset()  # a GTP engine: boardsize, clear_board
    except (GTPError, OSError) as e:
        agent.close()
        raise ValueError(f"{spec}: the engine does not answer: {one_line(str(e))}") from None
    except BaseException:  # a signal while it starts: the engine goes too
        agent.close()
        raise
    return agent


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line (an engine's error quotes its stderr), cut at `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
