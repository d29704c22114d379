"""azjax: a JAX-native AlphaZero pipeline.

The four parts of seed 000's design, one module each:
- games (the `games` package): pure, jittable rules;
- `azjax.network`: the policy-value ResNet;
- `azjax.search`: mctx search with rollouts blended into leaf values;
- `azjax.selfplay`, `azjax.replay`, `azjax.training`, `azjax.loop`: self-play and learning.
`azjax.arena` plays batched matches; `azjax.checkpoint` saves and restores runs; `azjax.flags`
builds command-line flags. The evaluation wing (agents named by specs, matches, tournaments,
learning curves, GTP) is the `azjax.eval` package, which the core never imports.
"""

from azjax import _siblings  # noqa: F401  (first: games/ and configs/ are azjax's own)
from azjax.arena import MatchResult, make_match, make_random_agent, make_search_agent
from azjax.checkpoint import (
    Checkpointer,
    CheckpointError,
    RunState,
    best_checkpoint,
    load_checkpoint,
    read_config,
)
from azjax.config import Config
from azjax.config import load as load_config
from azjax.loop import train_and_evaluate
from azjax.network import PolicyValueNet, init_variables, make_apply, make_network
from azjax.search import SearchSpec, make_evaluator, make_rollout, make_search, select_action
from azjax.selfplay import init_states, make_selfplay

__all__ = [
    "Checkpointer",
    "CheckpointError",
    "Config",
    "best_checkpoint",
    "load_checkpoint",
    "MatchResult",
    "PolicyValueNet",
    "RunState",
    "SearchSpec",
    "init_states",
    "init_variables",
    "load_config",
    "make_apply",
    "make_evaluator",
    "make_match",
    "make_network",
    "make_random_agent",
    "make_rollout",
    "make_search",
    "make_search_agent",
    "make_selfplay",
    "read_config",
    "select_action",
    "train_and_evaluate",
]
