"""The evaluation wing: agents named by specs, matches, tournaments, learning curves, GTP.

One job per module:
- `agent`: the `Agent` record, `SearchSetup`, constructors and jit caches, `RESIGN`, `COLOURS`;
- `specs`: the spec grammar (`parse_agent`, `KINDS`) and the game a command plays;
- `minimax`: alpha-beta negamax in Python;
- `calibration`: equal time (`seconds=T`): the simulations a time budget buys;
- `match`: `play_games` between any two agents, and `run_match`;
- `player`: one game at a time (`Player`), the person at the keyboard (`play_human`), two agents
  watched (`watch`);
- `stats`: confidence intervals and Elo ratings;
- `records`: JSON records, text tables and plots of results;
- `game_records`: one game's moves as SGF (Hex) or a move list (the others), written and read;
- `tournament`: round robins (`round_robin`, `run_tournament`);
- `curve`: a run's learning curve (`run_curve`);
- `errors`: the exact error rate of any agent on a game's solved positions (`run_errors`;
  `azjax.solved` holds the sets and the arithmetic);
- `ladder`: the Elo ladder's round robin (`rate_rungs`) and placing agents on it (`place_agent`;
  `azjax.ladder` holds the tables and the placement's arithmetic);
- `gtp`: the Go Text Protocol engine and client;
- `opponent`: any agent as an opponent at each of a training run's evaluations
  (`TrainingOpponent`, train.py --eval_opponent).

The core (`azjax/*.py`) never imports this package.
"""

from azjax.eval.agent import (
    COLOURS,
    RESIGN,
    Agent,
    SearchSetup,
    network_apply,
    random_agent,
    search_agent,
    with_simulations,
)
from azjax.eval.calibration import calibrate
from azjax.eval.curve import run_curve, training_games
from azjax.eval.errors import format_errors, run_errors
from azjax.eval.gtp import GTPClient, GTPEngine, GTPError, GTPTimeout, make_gtp_agent, serve_gtp
from azjax.eval.ladder import place_agent, rate_rungs
from azjax.eval.match import MatchOutcome, MoveStats, play_games, run_match
from azjax.eval.minimax import Minimax
from azjax.eval.opponent import TrainingOpponent
from azjax.eval.player import Player, make_human_agent, play_human, watch
from azjax.eval.records import (
    format_match,
    format_per_move,
    format_tournament,
    outcome_record,
    plot_curve,
    plot_heatmap,
    result_record,
)
from azjax.eval.specs import (
    KINDS,
    checkpoint_config,
    game_for,
    make_player,
    parse_agent,
    parse_agents,
    parse_options,
)
from azjax.eval.tournament import round_robin, run_tournament, tournament_summary

__all__ = [
    "COLOURS",
    "RESIGN",
    "Agent",
    "GTPClient",
    "GTPEngine",
    "GTPError",
    "GTPTimeout",
    "KINDS",
    "MatchOutcome",
    "Minimax",
    "MoveStats",
    "Player",
    "SearchSetup",
    "TrainingOpponent",
    "calibrate",
    "checkpoint_config",
    "format_errors",
    "format_match",
    "format_per_move",
    "format_tournament",
    "game_for",
    "make_gtp_agent",
    "make_human_agent",
    "make_player",
    "network_apply",
    "outcome_record",
    "parse_agent",
    "parse_agents",
    "parse_options",
    "place_agent",
    "play_games",
    "play_human",
    "plot_curve",
    "plot_heatmap",
    "random_agent",
    "rate_rungs",
    "result_record",
    "round_robin",
    "run_curve",
    "run_errors",
    "run_match",
    "run_tournament",
    "search_agent",
    "serve_gtp",
    "training_games",
    "tournament_summary",
    "watch",
    "with_simulations",
]
