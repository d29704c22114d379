"""Batched tree search: mctx PUCT or Gumbel search, with rollouts blended into leaf values.

The tree is mctx's; this module supplies what it calls back. `root_fn` evaluates the root states,
`recurrent_fn` steps the game, evaluates the new leaf and, with probability `rollout_prob`, plays a
rollout from it and blends its outcome z into the leaf value (seed 000, section 4.3):

    v_leaf = (1 - rollout_weight) * v_eval + rollout_weight * z      (where a rollout happened)

At rollout_prob < 1 only the leaves drawn for a rollout are played out (`rollout_where`), so a
search's rollout cost grows with rollout_prob instead of being that of p = 1 at every p.

Two-player convention: values are from the player to move; a transition's reward is the return of
the player who moved; the discount between plies is -1, and 0 once the game is over (a terminal
leaf has its reward and value 0, and nothing below it counts).

Evaluators (`evaluate(variables, states[B]) -> (logits[B, A] in action order, value[B])`):
- "network": the policy-value net, its policy mapped from the canonical frame to action order
  (averaged over several board symmetries where `net_symmetries` > 1: `make_search`);
- "uniform": equal logits over legal moves and value 0. With random rollouts, rollout_prob = 1
  and rollout_weight = 1 this is pure MCTS with random rollouts, the thesis's baseline
  (`SearchSpec.pure_mcts`).

Searches: "uct" is plain UCT (`azjax.selection.uct_policy`: every legal child tried once, then
mean + c sqrt(ln n(s) / n(s, a)), as OpenSpiel's MCTSBot; `c_uct` is on OpenSpiel's scale of
values in [-1, 1], so c_uct = 1.4 is its default); "gumbel" is `mctx.gumbel_muzero_policy`; "puct"
is `mctx.muzero_policy` rewritten in `_puct_policy` around `mctx.search` so that its self-play root
noise is Dir(alpha) over the legal moves only (`azjax.noise`, drawn only when exploring), its
tie-breaks cost no Threefry draws (`azjax.selection.tie_break`, which UCT's use too) and its
priors' softmax is taken once per node, not at every visit; without noise it searches as
`mctx.muzero_policy` does (but for which of exactly tied moves it takes). All three run mctx's
search through `azjax.tree_search`, whose backward pass updates the B trees in place instead of
copying them at every level (the same trees; docs/benchmarks.md, "The backward pass"), and whose
walks hash each level's selection key from the walk's key instead of splitting it
(`level_keys="hash"`: the keys only break ties here, and Gumbel's interior selection reads none).

Score utility (`score_utility` w > 0, KataGo's score utility in the form of a mix): a search
values positions by (1 - w) v + w s instead of v, where s in [-1, 1] is the margin by which the
mover holds the board, the mean of the ownership head's prediction over the cells (Othello's disc
difference over the cells); a finished game's reward is (1 - w) r + w s of its final board
(`game.ownership`), so leaf values and terminal rewards are on one scale. Once the outcome is
decided every move has the same v, and s still ranks them: the search plays for the margin (the
most the loser can keep, the least the winner gives back) where v alone ranks them by the noise in
v. Needs a network with an ownership head (`ownership_weight` > 0).

B is the number of games searched at once, A the game's number of actions.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from azjax import symmetry, tree_reuse, tree_search
from azjax.network import prepare_variables
from azjax.noise import dirichlet_over_legal
from azjax.selection import tie_break, uct_policy
from games.base import Game

Evaluate = Callable  # (variables, states[B]) -> (logits[B, A], value[B])

_NEG = -1e9  # masks illegal logits; finite, so softmaxes stay NaN-free


@dataclasses.dataclass(frozen=True)
class SearchSpec:
    """The search settings of one agent (self-play, or an evaluation opponent)."""

    search: str = "puct"  # "puct" | "gumbel" | "uct"
    num_simulations: int = 50
    c_puct: float = 1.25
    puct_values: str = "minmax"  # "minmax" (mctx's) | "raw" (Q in [-1, 1], not stretched)
    fpu_reduction: float = 0.0  # "raw": unvisited children valued lower (`raw_values`)
    forced_playouts: float = 0.0  # k: KataGo's forced playouts and target pruning; with explore
    c_uct: float = 1.4  # "uct": exploration constant for values in [-1, 1] (OpenSpiel's scale)
    explore: bool = False  # root noise: Dirichlet over legal moves (puct) or Gumbel; self-play only
    dirichlet_alpha: float = 0.33
    dirichlet_fraction: float = 0.25
    max_considered_actions: int = 16
    gumbel_scale: float = 1.0
    evaluator: str = "network"  # "network" | "uniform"
    rollout_policy: str = "none"  # "none" | "random" | "policy"
    rollout_prob: float = 0.0
    rollout_weight: float = 0.5
    rollout_sample: bool = False
    net_symmetries: int = 1  # the network averaged over this many board symmetries (`averaged`)
    score_utility: float = 0.0  # w: utility (1 - w) value + w score (module doc; `scored`)
    decisive_moves: bool = False  # a node whose mover can win at once is won (`decisive_wins`)

    def __post_init__(self):
        """A ValueError naming a setting out of its range (a spec built by hand went in
        unchecked: 0 simulations of UCT played an illegal move, a NaN weight gave NaN values)."""
        for name, choices in (
            ("search", ("puct", "gumbel", "uct")),
            ("puct_values", ("minmax", "raw")),
            ("evaluator", ("network", "uniform")),
            ("rollout_policy", ("none", "random", "policy")),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"SearchSpec: {name} must be one of {', '.join(choices)}, got "
                    f"{getattr(self, name)!r}"
                )
        for name in ("num_simulations", "max_considered_actions", "net_symmetries"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"SearchSpec: {name} must be an int >= 1, got {value!r}")
        for name, low, high in (
            ("c_puct", 0.0, math.inf),
            ("fpu_reduction", 0.0, math.inf),
            ("forced_playouts", 0.0, math.inf),
            ("c_uct", 0.0, math.inf),
            ("dirichlet_alpha", 1e-6, math.inf),
            ("dirichlet_fraction", 0.0, 1.0),
            ("gumbel_scale", 0.0, math.inf),
            ("rollout_prob", 0.0, 1.0),
            ("rollout_weight", 0.0, 1.0),
            ("score_utility", 0.0, 1.0),
        ):
            value = getattr(self, name)
            if not (isinstance(value, (int, float, np.number)) and low <= value <= high):
                said = f"in [{low:g}, {high:g}]" if high < math.inf else f">= {low:g}"
                raise ValueError(f"SearchSpec: {name} must be a number {said}, got {value!r}")

    @staticmethod
    def from_config(config, **overrides) -> SearchSpec:
        names = {f.name for f in dataclasses.fields(SearchSpec)} - {"explore", "c_uct"}
        values = {n: getattr(config, n) for n in names}
        return SearchSpec(**{**values, **overrides})

    @staticmethod
    def pure_mcts(num_simulations: int, **overrides) -> SearchSpec:
        """Pure MCTS with random rollouts: uniform priors, every leaf rolled out, z alone.

        The search is PUCT unless `search` says otherwise: PUCT over uniform priors is seed 000's
        baseline (the thesis experiments and the in-loop evaluation name it); the `mcts:` agent
        and the Elo ladder (`azjax.ladder`) use `search="uct"`, OpenSpiel's UCT."""
        return SearchSpec(
            **{
                "num_simulations": num_simulations,
                "evaluator": "uniform",
                "rollout_policy": "random",
                "rollout_prob": 1.0,
                "rollout_weight": 1.0,
                **overrides,
            }
        )


def make_evaluator(game: Game, kind: str, apply: Callable | None) -> Evaluate:
    """The leaf evaluator `kind` ("network" needs `apply(variables, obs) -> (logits, value)`)."""
    if kind == "uniform":

        def uniform(variables, states):
            del variables
            legal = jax.vmap(game.legal_mask)(states)
            return jnp.where(legal, 0.0, _NEG), jnp.zeros(legal.shape[0], jnp.float32)

        return uniform
    if kind != "network":
        raise ValueError(f"unknown evaluator {kind!r}; use network or uniform")
    if apply is None:
        raise ValueError("the network evaluator needs a network")

    def network(variables, states):
        logits, value = apply(variables, jax.vmap(game.observe)(states))
        logits = jax.vmap(game.policy_to_actions)(states, logits)
        legal = jax.vmap(game.legal_mask)(states)
        return jnp.where(legal, logits, _NEG), value

    return network


def scored(apply: Callable, weight: float) -> Callable:
    """apply(variables, obs[B, H, W, C]) -> (logits[B, A], utility[B]): the utility (1 - weight)
    value + weight score, the score the mean of the network's ownership prediction over the
    cells (`apply` must take `with_ownership=True`: `azjax.network.make_apply` of a network with
    `ownership_head`). `weight` 0: `apply` itself."""
    if weight == 0:
        return apply

    def utility(variables, obs):
        logits, value, owned = apply(variables, obs, with_ownership=True)
        return logits, (1.0 - weight) * value + weight * jnp.mean(owned, axis=-1)

    return utility


def final_score(game: Game, states, player) -> jax.Array:
    """float32[B]: the margin by which `player` (int32[B]) holds each board, in [-1, 1]: the mean
    of `game.ownership` over the cells (of a finished game, the score utility's final score)."""
    held = jax.vmap(game.ownership)(states, player)
    return jnp.mean(held.reshape(held.shape[0], -1), axis=-1)


def decisive_wins(game: Game, states, score_utility: float = 0.0):
    """(wins bool[B, A], value float32[B]): the legal moves of each state that end the game won
    for its mover (decisive moves, Teytaud and Teytaud 2010), and the best such move's reward for
    the mover (1, or with the score utility w (1 - w) + w times that final board's score; 0 where
    there is none). Every move of every state is played: A game steps a state."""
    actions = jnp.arange(game.num_actions, dtype=jnp.int32)
    mover = jax.vmap(game.current_player)(states)  # [B]

    def children(state, player):
        nxt = jax.vmap(game.step, in_axes=(None, 0))(state, actions)  # A states
        won = jax.vmap(game.is_terminal)(nxt) & (jax.vmap(game.returns)(nxt)[:, player] > 0)
        if score_utility > 0:
            score = final_score(game, nxt, jnp.full(actions.shape, player))
            return won, (1.0 - score_utility) + score_utility * score
        return won, jnp.ones(actions.shape, jnp.float32)

    won, reward = jax.vmap(children)(states, mover)  # [B, A] each
    wins = won & jax.vmap(game.legal_mask)(states)
    return wins, jnp.max(jnp.where(wins, reward, 0.0), axis=-1)


def with_decisive(game: Game, states, logits, value, score_utility: float = 0.0):
    """(logits, value) of `states` where a decisive move exists: the prior on the winning moves
    alone and the value the best one's reward (`decisive_wins`), a won node searched as one."""
    wins, won_value = decisive_wins(game, states, score_utility)
    any_win = jnp.any(wins, axis=-1)
    logits = jnp.where(any_win[:, None], jnp.where(wins, 0.0, _NEG), logits)
    return logits, jnp.where(any_win, won_value, value)


def make_rollout(game: Game, spec: SearchSpec, apply: Callable | None) -> Callable:
    """rollout(variables, key, states[B]) -> z float32[B], the outcome for each state's mover."""
    per_state = make_rollout_per_state(game, spec, apply)

    def rollout(variables, key, states):
        return per_state(variables, jax.random.split(key, _batch_size(states)), states)

    return rollout


def make_rollout_per_state(game: Game, spec: SearchSpec, apply: Callable | None) -> Callable:
    """rollout(variables, keys[B], states[B]) -> z float32[B]: each state played out with its own
    key, so a state's outcome does not depend on the others in the batch (`rollout_where` plays
    out a subset)."""
    if spec.rollout_policy == "random":

        def random_rollout(variables, keys, states):
            del variables
            returns = jax.vmap(game.random_playout)(states, keys)
            return _for_mover(game, states, returns)

        return random_rollout

    if spec.rollout_policy == "policy":
        network = make_evaluator(game, "network", apply)

        def policy_rollout(variables, keys, states):
            def body(carry):
                s, k = carry
                logits, _ = network(variables, s)
                if spec.rollout_sample:
                    k, sub = jnp.moveaxis(jax.vmap(jax.random.split)(k), 1, 0)
                    action = jax.vmap(jax.random.categorical)(sub, logits)
                else:
                    action = jnp.argmax(logits, axis=-1)
                return jax.vmap(game.step)(s, action.astype(jnp.int32)), k

            def unfinished(carry):
                return ~jnp.all(jax.vmap(game.is_terminal)(carry[0]))

            final, _ = jax.lax.while_loop(unfinished, body, (states, keys))
            return _for_mover(game, states, jax.vmap(game.returns)(final))

        return policy_rollout
    raise ValueError(f"no rollout for rollout_policy={spec.rollout_policy!r}")


def rollout_capacity(batch: int, prob: float) -> int:
    """How many of `batch` leaves `rollout_where` plays out when each is rolled out with
    probability `prob`: the mean number plus four standard deviations (a batch holds more about 3
    times in 100,000, and then all of it is played out), or the whole batch where that is no
    fewer."""
    if prob >= 1.0:
        return batch
    mean, sd = batch * prob, math.sqrt(batch * prob * (1.0 - prob))
    return min(batch, math.ceil(mean + 4.0 * sd) + 1)


def rollout_where(rollout: Callable, variables, keys, states, rolled, *, capacity: int):
    """z float32[B] from `rollout(variables, keys[B], states[B])` (`make_rollout_per_state`),
    the same where `rolled` (bool[B]) and anything elsewhere, playing out only `capacity` states.

    Rollouts cost the same whichever leaves keep their results, so at rollout_prob p < 1 only
    the leaves drawn for one need playing out: they are gathered (first) into a batch of
    `capacity` (`rollout_capacity(B, p)`; the rest of it other leaves), played out with their own
    keys and scattered back, which gives each the outcome the whole batch's rollout would. A batch
    with more rolled leaves than that (rare) is played out whole.
    """
    batch = rolled.shape[0]

    def whole():
        return rollout(variables, keys, states)

    if capacity >= batch:
        return whole()

    def gathered():
        order = jnp.argsort(~rolled, stable=True)[:capacity]  # the rolled leaves first, distinct
        z = rollout(variables, keys[order], jax.tree_util.tree_map(lambda x: x[order], states))
        return jnp.zeros(batch, z.dtype).at[order].set(z)

    return jax.lax.cond(jnp.sum(rolled) <= capacity, gathered, whole)


class Model(NamedTuple):
    """What mctx calls back: the root's evaluation and one step of the game below it."""

    root_fn: Callable  # (variables, key, states[B]) -> mctx.RootFnOutput
    recurrent_fn: Callable  # (variables, key, action[B], states[B]) -> (RecurrentFnOutput, states)


def make_model(
    game: Game,
    spec,
    apply: Callable | None = None,
    *,
    score_utility: float = 0.0,
    decisive_moves: bool = False,
) -> Model:
    """The root and recurrent functions of a search whose leaves `spec` evaluates (its
    `evaluator`, `rollout_policy`, `rollout_prob`, `rollout_weight`, `rollout_sample`: a
    SearchSpec, or Expert Iteration's ExpertSpec); see the module doc. `score_utility` w > 0:
    `apply` answers utilities (`scored`), and a finished game's reward is (1 - w) r + w times its
    final score. `decisive_moves`: a state whose mover has a winning move is valued as won and
    searched through its winning moves alone (`with_decisive`), the root's and every leaf's."""
    evaluate = make_evaluator(game, spec.evaluator, apply)
    rollout = None
    if spec.rollout_policy != "none" and spec.rollout_prob > 0:
        rollout = make_rollout_per_state(game, spec, apply)

    def leaf_value(variables, key, states, value):
        if rollout is None:
            return value
        k_coin, k_roll = jax.random.split(key)
        rolled = jax.random.bernoulli(k_coin, spec.rollout_prob, value.shape)
        keys = jax.random.split(k_roll, value.shape[0])
        capacity = rollout_capacity(value.shape[0], spec.rollout_prob)
        z = rollout_where(rollout, variables, keys, states, rolled, capacity=capacity)
        blended = (1.0 - spec.rollout_weight) * value + spec.rollout_weight * z
        return jnp.where(rolled, blended, value)

    def evaluated(variables, key, states):  # (logits, value) of a root or a new leaf
        logits, value = evaluate(variables, states)
        value = leaf_value(variables, key, states, value)
        if decisive_moves:
            return with_decisive(game, states, logits, value, score_utility)
        return logits, value

    def root_fn(variables, key, states):
        logits, value = evaluated(variables, key, states)
        return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=states)

    def recurrent_fn(variables, key, action, states):
        actor = jax.vmap(game.current_player)(states)
        was_legal = jnp.take_along_axis(jax.vmap(game.legal_mask)(states), action[:, None], axis=1)[
            :, 0
        ]
        nxt = jax.vmap(game.step)(states, action)
        terminal = jax.vmap(game.is_terminal)(nxt)
        reward = jnp.take_along_axis(jax.vmap(game.returns)(nxt), actor[:, None], axis=1)[:, 0]
        if score_utility > 0:
            score = final_score(game, nxt, actor)
            blended = (1.0 - score_utility) * reward + score_utility * score
            reward = jnp.where(terminal, blended, reward)
        # An illegal move (mctx can pick one deep in the tree when every legal move looks bad)
        # ends the line as a loss for the mover instead of reaching a state the rules never make.
        reward = jnp.where(was_legal, reward, -1.0)
        done = terminal | ~was_legal
        logits, value = evaluated(variables, key, nxt)
        out = mctx.RecurrentFnOutput(
            reward=reward,
            discount=jnp.where(done, 0.0, -1.0),
            prior_logits=logits,
            value=jnp.where(done, 0.0, value),
        )
        return out, nxt

    return Model(root_fn, recurrent_fn)


class Budget(NamedTuple):
    """The variables of a UCT search without a network that takes its simulation count at run
    time: `make_search(game, spec)(Budget(sims), key, states)` runs `sims` (int32[], 1 to
    spec.num_simulations) simulations in trees of spec.num_simulations + 1 nodes, the same
    search as a spec of `sims` simulations. One compiled program then plays every count up to
    the spec's (the Elo ladder's rungs, `azjax.ladder`)."""

    sims: jax.Array


def make_search(
    game: Game,
    spec: SearchSpec,
    apply: Callable | None = None,
    *,
    chunk: int | None = None,
    keep_nodes: int = 0,
) -> Callable:
    """search(variables, key, states[B]) -> mctx.PolicyOutput over the B states.

    `apply(variables, obs) -> (logits, value)` is the network, needed when the spec uses it;
    `spec.net_symmetries` > 1 averages it over that many of the game's symmetries
    (`azjax.symmetry.averaged`: the views of a batch evaluated together). `chunk`: search the B
    games in chunks of this many, one chunk after another (`in_chunks`; 1: game by game); None:
    all at once, unless the batch's trees would take more than
    `tree_bytes()` (`chunk_games`). A UCT search with no network takes a `Budget` as its
    variables.

    `keep_nodes` K > 0 (PUCT only; `azjax.tree_reuse`): search(variables, key, states, start)
    continues the trees of `start` (a `tree_reuse.Start`, K nodes kept at most), which are of
    K + num_simulations nodes, as its output's; `tree_reuse.reroot(out.search_tree, action,
    limit=K)` keeps the played move's subtree for the next. The B games are searched at once.
    """
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk must be at least 1 game, got {chunk}")
    if keep_nodes < 0 or (keep_nodes and spec.search != "puct"):
        raise ValueError(f"tree reuse (keep_nodes={keep_nodes}) is PUCT's, got {spec.search}")
    if spec.score_utility > 0 and (apply is None or spec.evaluator != "network"):
        raise ValueError("score_utility needs the network evaluator (its ownership head)")
    network = apply  # (prepare_variables needs make_apply's own function, unwrapped)
    if apply is not None:  # the utility first, so that the symmetries average it
        apply = scored(apply, spec.score_utility)
        if spec.net_symmetries > 1:
            apply = symmetry.averaged(apply, symmetry.symmetries(game), spec.net_symmetries)
    root_fn, recurrent_fn = make_model(
        game,
        spec,
        apply,
        score_utility=spec.score_utility,
        decisive_moves=spec.decisive_moves,
    )

    def search(variables, key, states, start=None):
        sims, capacity = spec.num_simulations, None
        if isinstance(variables, Budget):
            if spec.search != "uct" or apply is not None:
                raise ValueError("a Budget is the variables of a UCT search with no network")
            sims, capacity, variables = variables.sims, spec.num_simulations, None
        k_root, k_search = jax.random.split(key)
        root = root_fn(variables, k_root, states)
        invalid = ~jax.vmap(game.legal_mask)(states)
        if spec.search == "puct":
            return _puct_policy(
                variables,
                k_search,
                root,
                recurrent_fn,
                num_simulations=spec.num_simulations,
                invalid_actions=invalid,
                c_puct=spec.c_puct,
                values=spec.puct_values,
                fpu_reduction=spec.fpu_reduction,
                forced_playouts=spec.forced_playouts if spec.explore else 0.0,
                dirichlet_fraction=spec.dirichlet_fraction if spec.explore else 0.0,
                dirichlet_alpha=spec.dirichlet_alpha,
                start=start,
                capacity=(
                    tree_reuse.capacity(keep_nodes, spec.num_simulations) if keep_nodes else None
                ),
            )
        if spec.search == "gumbel":
            return tree_search.gumbel_muzero_policy(
                variables,
                k_search,
                root,
                recurrent_fn,
                spec.num_simulations,
                invalid_actions=invalid,
                max_num_considered_actions=spec.max_considered_actions,
                gumbel_scale=spec.gumbel_scale if spec.explore else 0.0,
                level_keys="hash",
            )
        if spec.search == "uct":
            return uct_policy(
                variables,
                k_search,
                root,
                recurrent_fn,
                sims,
                invalid_actions=invalid,
                c_uct=spec.c_uct / 2,  # selection.py's q is in [0, 1]: half the scale
                capacity=capacity,
            )
        raise ValueError(f"unknown search {spec.search!r}; use puct, gumbel or uct")

    budgeted = within_budget(game, search, spec.num_simulations, chunk)

    def chunked(variables, key, states, start=None):  # the chunk is chosen at the batch size
        variables = prepare_variables(network, variables)  # once, outside the loops
        if keep_nodes:
            return search(variables, key, states, start)
        return budgeted(variables, key, states)

    return chunked


def within_budget(game: Game, search: Callable, num_simulations: int, chunk: int | None = None):
    """search(variables, key, states[B]) over the B games at once, or in chunks (`in_chunks`)
    of `chunk` games, or where None of as many as `tree_bytes()` holds (`chunk_games`), chosen
    at the batch size."""

    def run(variables, key, states):
        batch = _batch_size(states)
        size = chunk if chunk is not None else chunk_games(game, num_simulations, batch)
        if size >= batch:
            return search(variables, key, states)
        return in_chunks(game, search, size)(variables, key, states)

    return run


# A search's B trees take memory in proportion to B x simulations x actions, all of it at once;
# a batch whose trees would take more than `tree_bytes()` is searched in chunks (`chunk_games`).
# A match against pure MCTS at 10,000 simulations, 100 games of 8x8 Othello at once, would take
# about 1.7 GB. None: CPU_TREE_BYTES on a CPU; on a GPU or TPU a quarter of the device's memory
# (ACCELERATOR_TREE_BYTES where the device does not say), where big batches are the speed.
TREE_BYTES: int | None = None
CPU_TREE_BYTES = 1 << 30
ACCELERATOR_TREE_BYTES = 4 << 30


def tree_bytes() -> int:
    """The memory a search's trees may take at once (TREE_BYTES, else by the default backend)."""
    if TREE_BYTES is not None:
        return TREE_BYTES
    if jax.default_backend() == "cpu":
        return CPU_TREE_BYTES
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("bytes_limit", 4 * ACCELERATOR_TREE_BYTES) // 4


def bytes_per_tree(game: Game, num_simulations: int) -> int:
    """The memory of one game's search tree: num_simulations + 1 nodes, each with six [A] arrays
    of 4-byte numbers, five 4-byte numbers and a game state."""
    state = sum(
        math.prod(x.shape) * x.dtype.itemsize
        for x in jax.tree_util.tree_leaves(jax.eval_shape(game.init))
    )
    return (num_simulations + 1) * (6 * 4 * game.num_actions + 5 * 4 + state)


def chunk_games(game: Game, num_simulations: int, batch: int) -> int:
    """How many of `batch` games `make_search` searches at once: all of them, unless their
    trees would take more than `tree_bytes()` (a tree: num_simulations + 1 nodes, each with six
    [A] arrays of 4-byte numbers and a game state), then the fewest chunks whose trees fit, as
    even as they go (at least one game a chunk)."""
    if batch < 1:  # (a ZeroDivisionError below)
        raise ValueError(f"no games to search: a batch of {batch} states")
    fit = max(1, tree_bytes() // bytes_per_tree(game, num_simulations))
    count = -(-batch // fit)  # chunks
    return -(-batch // count)  # as even as they go: 100 games that fit 63 at a time run as 50 + 50


def in_chunks(game: Game, search: Callable, chunk: int) -> Callable:
    """search(variables, key, states[B]) run over chunks of `chunk` games, one after another in a
    `lax.map`, each chunk with its own key split from `key` (so chunks of 1 give each game the
    search it would get alone with that key). A chunk of finished games only is not searched:
    its output is zeros (a match's agents search every ply of its scan, over games long over);
    the last chunk is filled up with copies of the first game, whose results are dropped."""

    def one_unless_over(variables, key, states):
        shapes = jax.eval_shape(search, variables, key, states)
        return jax.lax.cond(
            jnp.all(jax.vmap(game.is_terminal)(states)),
            lambda: jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes),
            lambda: search(variables, key, states),
        )

    def by_chunk(variables, key, states):
        batch = _batch_size(states)
        count = -(-batch // chunk)
        fill = count * chunk - batch

        def split(x):  # [B, ...] -> [count, chunk, ...]
            x = jnp.concatenate([x, jnp.repeat(x[:1], fill, axis=0)]) if fill else x
            return x.reshape(count, chunk, *x.shape[1:])

        chunks = jax.tree_util.tree_map(split, states)
        keys = jax.random.split(key, count)
        out = jax.lax.map(lambda ks: one_unless_over(variables, *ks), (keys, chunks))
        return jax.tree_util.tree_map(lambda x: x.reshape(-1, *x.shape[2:])[:batch], out)

    return by_chunk


def _puct_policy(
    params,
    key,
    root: mctx.RootFnOutput,
    recurrent_fn,
    *,
    num_simulations: int,
    invalid_actions,
    c_puct: float,
    dirichlet_fraction: float,
    dirichlet_alpha: float,
    values: str = "minmax",
    fpu_reduction: float = 0.0,
    forced_playouts: float = 0.0,
    start=None,
    capacity: int | None = None,
) -> mctx.PolicyOutput:
    """`mctx.muzero_policy` (temperature 1), but for its root noise and its tie-breaks.

    B games, A actions; `invalid_actions` bool[B, A]. mctx mixes `jax.random.dirichlet` noise
    over all A actions into the root prior, drawing it even when the fraction is 0, and breaks
    ties with `jax.random.uniform(key, [A])` at every node of every simulation. Here the noise is
    drawn only when `dirichlet_fraction > 0`, over the legal moves only (`azjax.noise`; at a root
    `with_decisive` cut to its winning moves, over those alone), so the legal moves get exactly
    that fraction of noise; ties are broken by
    `azjax.selection.tie_break` from keys hashed per tree level (`tree_search.level_key`), so
    without noise and without exact ties the search is the same.

    Its trees hold each child's prior *probability* in `children_prior_logits`: mctx's selection
    takes a softmax of the node's logits at every visit of every node, here it is taken once, when
    the node is expanded (the same numbers; a fifth of an interior level's cost on the CPU,
    docs/benchmarks.md, "PUCT's priors and its noise").

    `values`: the value term of the selection (`_puct_select`): "minmax", mctx's, or "raw"
    (`raw_values`; `fpu_reduction` > 0 only with "raw").

    `forced_playouts` k > 0 (KataGo's forced playouts and policy target pruning, Wu 2019, section
    3.1; self-play only): a root child that has had any simulations but fewer than
    sqrt(k P(c) N) of the root's N, P the noised prior, takes the next one (`_puct_select`), so
    the moves the noise favours are looked at; the visits that forcing added are then taken back
    out of the policy (`pruned_visits`), which is what the move is drawn from and what the network
    learns.

    `start` and `capacity`: `tree_search.search`'s (tree reuse, `azjax.tree_reuse`): a kept root
    takes this root's prior, noise included, and keeps its visits.
    """
    k_act, k_noise, k_search = jax.random.split(key, 3)
    probs = jax.nn.softmax(root.prior_logits)  # [B, A]
    if dirichlet_fraction > 0:  # over the moves the prior allows: a decisive root's wins alone
        allowed = ~invalid_actions & (root.prior_logits > _NEG / 2)
        noise = dirichlet_over_legal(k_noise, allowed, alpha=dirichlet_alpha)  # [B, A]
        probs = (1.0 - dirichlet_fraction) * probs + dirichlet_fraction * noise
    tiny = jnp.finfo(probs.dtype).tiny
    prior = jnp.log(jnp.maximum(probs, tiny))
    prior = jnp.where(
        invalid_actions, jnp.finfo(prior.dtype).min, prior - jnp.max(prior, axis=-1, keepdims=True)
    )

    def expand_with_probs(params, key, action, states):
        out, nxt = recurrent_fn(params, key, action, states)
        return out.replace(prior_logits=jax.nn.softmax(out.prior_logits)), nxt

    if values not in PUCT_VALUES:
        raise ValueError(f"puct_values must be one of {', '.join(PUCT_VALUES)}, got {values!r}")
    if fpu_reduction and values != "raw":
        raise ValueError(f"fpu_reduction ({fpu_reduction}) needs puct_values=raw, got {values!r}")
    if forced_playouts < 0:
        raise ValueError(f"forced_playouts must be >= 0, got {forced_playouts}")
    terms = dict(pb_c_init=c_puct, values=values, fpu_reduction=fpu_reduction)
    select = functools.partial(_puct_select, **terms)
    tree = tree_search.search(
        params,
        k_search,
        root=root.replace(prior_logits=jax.nn.softmax(prior)),
        recurrent_fn=expand_with_probs,
        root_action_selection_fn=functools.partial(select, depth=0, forced=forced_playouts),
        interior_action_selection_fn=select,
        num_simulations=num_simulations,
        invalid_actions=invalid_actions,
        extra_data=root.prior_logits,  # the network's logits, before the noise: `improved_policy`
        level_keys="hash",
        capacity=capacity,
        start=start,
    )
    weights = tree.summary().visit_probs  # [B, A]
    if forced_playouts:
        kept = jax.vmap(functools.partial(pruned_visits, forced=forced_playouts, **terms))(tree)
        weights = kept / jnp.sum(kept, axis=-1, keepdims=True)
    logits = jnp.log(jnp.maximum(weights, tiny))
    action = jax.random.categorical(k_act, logits - jnp.max(logits, axis=-1, keepdims=True))
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=tree)


PUCT_VALUES = ("minmax", "raw")


def improved_policy(tree: mctx.Tree) -> jax.Array:
    """float32[B, A]: the improved policy at the roots of a PUCT search's B trees (Danihelka et
    al. 2022, Gumbel MuZero's policy target), softmax(logits + sigma(completed Q)).

    The logits are the network's at the root before any noise (`_puct_policy` keeps them in the
    trees' `extra_data`); completed Q is each visited child's Q-value and, for the unvisited
    ones, the root's mixed value estimate (`mctx.qtransform_completed_by_mix_value` with its
    defaults: Q stretched to [0, 1] over the children, then scaled by 0.1 (50 + the most visits
    of a child), as mctx's Gumbel search computes its own target). Where the visit counts of
    32 - 50 simulations give each move's share by how often it was looked at, this moves the
    prior by how good the looked-at moves turned out to be; illegal moves get 0.
    """
    logits = tree.extra_data  # [B, A], illegal moves at a large negative number
    root = tree.ROOT_INDEX
    clean = tree.replace(children_prior_logits=tree.children_prior_logits.at[:, root].set(logits))
    completed = jax.vmap(mctx.qtransform_completed_by_mix_value, in_axes=[0, None])(clean, root)
    legal = ~tree.root_invalid_actions
    return jax.nn.softmax(jnp.where(legal, logits + completed, _NEG), axis=-1)


def raw_values(tree: mctx.Tree, node_index, fpu_reduction: float = 0.0) -> jax.Array:
    """float[A]: the node's children's Q-values in the game's [-1, 1], the unvisited ones at the
    node's own value: `mctx.qtransform_by_parent_and_siblings` without its min-max stretch.

    Stretched, the first child valued above its parent scores 1 and its unvisited siblings 0, so
    only a prior above 1 / (c_puct sqrt(N)) ever draws a simulation away from it: at 32 - 50
    simulations the search gives nearly all of them to one root move and its trees are lines
    (`python -m benchmarks.tree_depth`). Unstretched, a child must be better by as much as the
    exploration term says (AlphaZero's PUCT, whose Q is the mean outcome).

    `fpu_reduction` r > 0 values the unvisited children lower, at the node's value less
    r * sqrt(the prior mass of its visited children) (Leela Zero's and KataGo's first-play
    urgency): the more of the policy the search has looked at, the less an untried move is
    presumed worth, so simulations go deeper into the moves the prior favours. The tree must hold
    prior probabilities (`_puct_policy`'s trees do)."""
    visited = tree.children_visits[node_index] > 0
    unvisited = tree.node_values[node_index]
    if fpu_reduction:  # a Python 0 leaves the values as they were, to the bit
        seen = jnp.sum(jnp.where(visited, tree.children_prior_logits[node_index], 0.0))
        unvisited = unvisited - fpu_reduction * jnp.sqrt(seen)
    return jnp.where(visited, tree.qvalues(node_index), unvisited)


def _puct_scores(
    tree: mctx.Tree,
    node_index,
    *,
    pb_c_init: float,
    pb_c_base: float = 19652.0,
    values: str = "minmax",
    fpu_reduction: float = 0.0,
):
    """(value_score[A], exploration[A]): the node's children's PUCT terms, the exploration term
    being sqrt(N) pb_c P(c) / (n(c) + 1) with its numerator sqrt(N) pb_c P(c)."""
    node_visit = tree.node_visits[node_index]
    pb_c = pb_c_init + jnp.log((node_visit + pb_c_base + 1.0) / pb_c_base)
    prior_probs = tree.children_prior_logits[node_index]  # [A], probabilities (`_puct_policy`)
    if values == "raw":
        value_score = raw_values(tree, node_index, fpu_reduction)
    else:
        value_score = mctx.qtransform_by_parent_and_siblings(tree, node_index)
    return value_score, jnp.sqrt(node_visit) * pb_c * prior_probs


def forced_visits(prior, visits, forced: float):
    """float[A]: KataGo's forced playouts at the root, sqrt(k P(c) N) with N the visits of the
    root's children so far (`forced` = k); a child is forced while it has had some but fewer."""
    return jnp.sqrt(forced * prior * jnp.sum(visits))


_FORCED = 1e6  # above any PUCT score: values are at most 1, the exploration term sqrt(N) pb_c


def _puct_select(
    key,
    tree: mctx.Tree,
    node_index,
    depth,
    *,
    forced: float = 0.0,
    **terms,
):
    """`mctx.muzero_action_selection` for one node of one tree, its tie-break from `tie_break`;
    the tree holds prior probabilities, not logits (`_puct_policy`). `terms`: `_puct_scores`'s
    (`values`: "minmax", mctx's value term, or "raw", `raw_values` with its `fpu_reduction`).
    `forced` k > 0 (the root only): a child with forced playouts left (`forced_visits`) goes
    first, the most urgent of them by PUCT if there are several."""
    visit_counts = tree.children_visits[node_index]  # [A]
    value_score, explore = _puct_scores(tree, node_index, **terms)
    policy_score = explore / (visit_counts + 1)
    # Exact ties are decided by how the 1e-7 tie-break rounds against scores near 0.1 (a few
    # float32 spacings): the barrier keeps that sum's rounding mctx's whatever XLA fuses around it
    # (at optimisation level 0 it did not without; tests/test_search.py's exact ties).
    value_score, policy_score = jax.lax.optimization_barrier((value_score, policy_score))
    to_argmax = value_score + policy_score + 1e-7 * tie_break(key, tree.num_actions)
    if forced:  # a Python 0 leaves the selection as it was, to the bit
        prior = tree.children_prior_logits[node_index]
        owed = (visit_counts > 0) & (visit_counts < forced_visits(prior, visit_counts, forced))
        to_argmax = jnp.where(owed, to_argmax + _FORCED, to_argmax)
    # mctx masks the root only. Below it an illegal child has prior 0, and raw values score it
    # at the node's value: above every legal child once all have fallen under that (a network
    # whose values contradict each other), and recurrent_fn would back up a made-up loss. So an
    # unvisited child of prior 0 (a legal one only where its logit is ~90 under the best) is
    # passed over at every depth.
    unreachable = (tree.children_prior_logits[node_index] == 0) & (visit_counts == 0)
    invalid = jnp.where(depth == 0, tree.root_invalid_actions, unreachable)
    return jnp.argmax(jnp.where(invalid, -jnp.inf, to_argmax)).astype(jnp.int32)


def pruned_visits(tree: mctx.Tree, *, forced: float, **terms) -> jax.Array:
    """float[A]: one tree's root visits less the forced playouts (KataGo's policy target pruning).

    c*, the most visited child, keeps its visits. Every other child c gives back up to
    `forced_visits` of them, as many as leave its PUCT score below c*'s (both with their final
    values and visits); a child left with one visit or fewer is dropped. `terms`: the search's
    (`_puct_scores`: c_puct, the value term).
    """
    visits = tree.children_visits[0].astype(jnp.float32)  # [A]
    prior = tree.children_prior_logits[0]
    value_score, explore = _puct_scores(tree, 0, **terms)
    best = jnp.argmax(visits)
    best_score = value_score[best] + explore[best] / (visits[best] + 1)
    # Visits n keep value + explore / (n + 1) below best_score while n > explore / gap - 1 (the
    # visits are real numbers here, as KataGo's); none are given back where the gap is not positive.
    gap = best_score - value_score
    fewest = jnp.where(gap > 0, explore / jnp.maximum(gap, 1e-12) - 1, visits)
    kept = jnp.clip(jnp.maximum(visits - forced_visits(prior, visits, forced), fewest), 0, visits)
    kept = jnp.where(kept > 1, kept, 0.0)
    return jnp.where(jnp.arange(visits.shape[0]) == best, visits, kept)


def select_action(key, spec: SearchSpec, output: mctx.PolicyOutput, sample: jax.Array) -> jax.Array:
    """int32[B] moves: sampled from the search policy where `sample` (bool[B]), else the best.

    The best move is the most visited one for PUCT and the search's own choice for Gumbel
    (sequential halving picks it) and UCT (the most visited, ties to the first).
    """
    weights = output.action_weights
    sampled = jax.random.categorical(key, jnp.where(weights > 0, jnp.log(weights), -jnp.inf))
    if spec.search == "puct":
        best = jnp.argmax(weights, axis=-1)
    else:
        best = output.action
    return jnp.where(sample, sampled, best).astype(jnp.int32)


def _batch_size(states) -> int:
    return jax.tree_util.tree_leaves(states)[0].shape[0]


def _for_mover(game: Game, states, returns):
    mover = jax.vmap(game.current_player)(states)
    return jnp.take_along_axis(returns, mover[:, None], axis=1)[:, 0]
