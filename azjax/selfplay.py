"""Self-play: B games in lock-step, one jitted function that scans over moves.

At each move every game is searched, a move is chosen (sampled from the search policy for the
first `sample_moves` plies of a game, the best move after), and played. A game that ends is
restarted in its slot at once, so the batch stays full; its positions get their outcome in the
replay buffer (see `replay.py`).

Opening coverage (`opening_plies` = N > 0): a restarted game begins from a random opening, the
position after n uniformly random legal moves with n drawn uniformly from 0..N for each game (as
KataGo and Leela Zero randomise their openings). Those moves are not searched and not recorded:
the game's positions, from the opening on, get the outcome of the play that followed. Without it
self-play from the empty board narrows to a few lines, and the network never sees what follows
the other first moves (docs/experiments.md, "Every opening").

Branched restarts (`branch_prob` = p > 0; Go-Exploit, Trudeau & Bowling 2023, with the batch as
its archive of visited states): a restarted game begins, with probability p, from the current
position of another game of the batch that goes on, after one uniformly random legal move
there. Self-play from the start rarely meets a position one side has just thrown away, the
kind a network must convert against an engine that errs; a random move in the middle game
makes such positions, and the outcome of the play that follows values them (the play before
the branch, in the other game, keeps its own outcome).

    selfplay = make_selfplay(game, spec, apply, num_steps, sample_moves)
    states, traj = selfplay(variables, key, states)   # states: B games, traj: [T, B] Trajectory

Resignation (`resign_threshold` = t > 0; AlphaZero's, Silver et al. 2017): a game ends where
the search's root value for the mover falls below -t, the mover losing, instead of being played
out. The games of a share `resign_playout` of the slots (the first ceil(share * B) of the whole
batch, however it is split over devices) never resign, AlphaZero's played-out tenth: they keep
the learner seeing endgames and the positions a resignation would have misjudged
(`experiments.decided` measures how often it would err, and the training loop counts it in those
games: `check_resignations`). A resigned game's positions get their ownership target left out of
the loss (`replay.UNKNOWN_OWNER`): its final board was never reached.

Policy surprise (`surprise=True`, for the replay's surprise weighting, `azjax.replay`): each
move's recorded policy target is compared with the network's own prior at the root, one more
network call on the B positions (a fast search's empty target is not, and records 0).

With a `mesh` (see `azjax.parallel`) the B games are split over its devices under `shard_map`:
each device plays its B / D games with the key `fold_in(key, device index)` and never talks to
another device. (mctx draws one batch's noise from one key, so a game's moves depend on the key
its device got: a run on D devices plays what D separate one-device runs with those keys would.)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mctx
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from azjax import replay
from azjax import tree_reuse as tree_reuse_lib
from azjax.network import prepare_variables
from azjax.parallel import AXIS, num_devices
from azjax.search import SearchSpec, improved_policy, make_evaluator, make_search, select_action
from games.base import Game, absorbing, sample_legal

POLICY_TARGETS = ("tpt", "cat", "improved")  # `make_selfplay`'s; config.py's policy_target
# With tree reuse a kept subtree has at most this many times the simulations in nodes (a larger
# one is not kept); the trees then have (REUSE_KEEP + 1) x the simulations in nodes.
REUSE_KEEP = 3


def init_states(game: Game, batch_games: int):
    """B start positions (a batch of states, leading axis B)."""
    if isinstance(batch_games, bool) or not isinstance(batch_games, (int, np.integer)):
        raise ValueError(f"batch_games must be an int, got {batch_games!r}")
    if batch_games < 1:
        raise ValueError(f"batch_games must be >= 1, got {batch_games}")
    return jax.vmap(lambda _: game.init())(jnp.arange(batch_games))


def random_opening(game: Game, key, max_plies: int):
    """The position after n uniformly random legal moves from the start, n uniform in
    0..max_plies (unbatched; a game that ends sooner stays at its end, which `is_terminal`
    reports)."""
    k_n, k_moves = jax.random.split(key)
    plies = jax.random.randint(k_n, (), 0, max_plies + 1)
    return random_moves(game, k_moves, plies, max_plies)


def random_moves(game: Game, key, plies, max_plies: int):
    """The position after `plies` (an int, traced or not, at most `max_plies`) uniformly random
    legal moves from the start, the i-th drawn with `fold_in(key, i)` (unbatched; a game that
    ends sooner stays at its end: `absorbing`)."""

    def body(i, state):
        action = sample_legal(jax.random.fold_in(key, i), game.legal_mask(state))
        moved = absorbing(state, game.step(state, action))
        return jax.tree_util.tree_map(
            lambda old, new: jnp.where(i >= plies, old, new), state, moved
        )

    return jax.lax.fori_loop(0, max_plies, body, game.init())


def root_value(out: mctx.PolicyOutput, gumbel: bool = False) -> jax.Array:
    """float32[B]: the search's value of each root, for the player to move there: mctx's
    `summary().value` (the root's value after the simulations were backed up), or with `gumbel`
    the value of the improved policy it plays and trains on, sum_a pi'(a) q(a) over the root's
    Q-values completed by the mixed value (`out.action_weights`, mctx's completed Q-values
    unscaled). Gumbel's sequential halving spends visits on the moves it rules out, so the
    backed-up value of its root is pulled towards theirs: on 600 won 5x5 Hex positions (the shipped
    network, 32 simulations) it erred by 0.99 on average and had the wrong sign in half, where
    the improved policy's value erred by 0.15 and had it in 5% (PUCT's root value: 0.11, 2%);
    docs/strength.md, "The root value of a Gumbel search"."""
    tree = out.search_tree
    if not gumbel:
        return tree.summary().value

    def completed(t):  # [A], raw values: the transform's visit scale divided out
        q = mctx.qtransform_completed_by_mix_value(
            t, t.ROOT_INDEX, value_scale=1.0, maxvisit_init=1.0, rescale_values=False
        )
        return q / (1.0 + jnp.max(t.children_visits[t.ROOT_INDEX]))

    return jnp.sum(out.action_weights * jax.vmap(completed)(tree), axis=-1)


def policy_surprise(policy: jax.Array, logits: jax.Array) -> jax.Array:
    """float32[B]: KL(policy || softmax(logits)) of each row, `policy` [B, A] a search's target
    (0 where the search gives a move nothing; an all-zero row has surprise 0) and `logits`
    [B, A] the network's prior over the same moves (illegal ones masked far below)."""
    log_prior = jax.nn.log_softmax(logits, axis=-1)
    held = policy > 0
    log_policy = jnp.log(jnp.where(held, policy, 1.0))
    return jnp.sum(jnp.where(held, policy * (log_policy - log_prior), 0.0), axis=-1)


def make_selfplay(
    game: Game,
    spec: SearchSpec,
    apply: Callable | None,
    num_steps: int,
    sample_moves: int,
    mesh: Mesh | None = None,
    *,
    opening_plies: int = 0,
    branch_prob: float = 0.0,
    policy_target: str = "tpt",
    full_search_prob: float = 1.0,
    fast_simulations: int = 0,
    ownership: bool = False,
    surprise: bool = False,
    resign_threshold: float = 0.0,
    resign_playout: float = 0.1,
    tree_reuse: bool = False,
    on_move: Callable[[Any], None] | None = None,
) -> Callable:
    """selfplay(variables, key, states[B]) -> (states[B], Trajectory [num_steps, B]).

    Restarted games begin after 0..`opening_plies` random moves, or with probability
    `branch_prob` one random move after another game's current position (module doc). The
    recorded policy target is the search's policy (`policy_target="tpt"`), a one-hot of the
    move played ("cat", Anthony et al. 2017's chosen-action target), or with PUCT the improved
    policy of Gumbel MuZero (Danihelka et al. 2022) at its root ("improved",
    `search.improved_policy`: the prior moved by the completed Q-values; the move is still
    played by the visits).

    Playout cap randomisation (Wu 2019, KataGo, section 3.1) with `full_search_prob` < 1: each
    move (of the whole batch at once) is searched with `spec.num_simulations` with that
    probability and recorded with its policy target; the other moves are searched with
    `fast_simulations`, without root noise, and recorded with an all-zero policy, which the
    learner leaves out of the policy loss (their value targets are kept). More games per
    simulation, hence more, less correlated value targets.

    The trajectory records each root's searched value (`root_value`) as well as the outcome,
    for a value target that mixes the two (`replay.add`'s `value_mix`), and with `ownership` the
    board after each move as `Game.ownership` gives it to each player (int8[T, B, 2, H*W]; the
    final board's is the ownership target of the game's positions, `replay.add`), and with
    `surprise` each position's policy surprise (float32[T, B], module doc; needs `apply`).

    With `resign_threshold` = t > 0 a mover whose root value is below -t resigns, except in the
    first ceil(`resign_playout` * B) slots (module doc); the trajectory records which moves
    were resignations (`resigned`, bool[T, B]).

    With `tree_reuse` (PUCT, every move searched in full) each game's search goes on from the
    subtree of the move played before (`azjax.tree_reuse`; module doc), within the call: its
    first move, and a game's first after a restart, search afresh.

    `on_move(t)`, if given, is called on the host (`jax.debug.callback`) as move t (0-based) of
    the `num_steps` starts: a progress display within the iteration. With `mesh`, B is
    split along its "data" axis (states P("data"), trajectory P(None, "data"), variables and key
    replicated); B must divide over the devices.
    """
    if surprise and apply is None:
        raise ValueError("surprise compares the search with the network's prior: it needs apply")
    keep = REUSE_KEEP * spec.num_simulations if tree_reuse else 0
    if tree_reuse and (spec.search != "puct" or full_search_prob < 1):
        raise ValueError(
            f"tree_reuse needs search=puct and full_search_prob=1 (every move's tree), got "
            f"search={spec.search}, full_search_prob={full_search_prob}"
        )
    search = make_search(game, spec, apply, keep_nodes=keep)
    prior = make_evaluator(game, "network", apply) if surprise else None
    if policy_target not in POLICY_TARGETS:
        raise ValueError(
            f"policy_target must be one of {', '.join(POLICY_TARGETS)}, got {policy_target!r}"
        )
    if policy_target == "improved" and spec.search != "puct":
        raise ValueError(
            f"policy_target=improved is PUCT's (Gumbel's own target is it already), got "
            f"search={spec.search}"
        )
    if not 0.0 <= branch_prob <= 1.0:
        raise ValueError(f"branch_prob must be in [0, 1], got {branch_prob}")
    if not 0.0 <= full_search_prob <= 1.0:  # (NaN too)
        raise ValueError(f"full_search_prob must be in [0, 1], got {full_search_prob}")
    for name, value, low in (("num_steps", num_steps, 1), ("sample_moves", sample_moves, 0)):
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    if opening_plies < 0:
        raise ValueError(f"opening_plies must be >= 0, got {opening_plies}")
    if not 0.0 <= resign_threshold < 1.0:
        raise ValueError(f"resign_threshold must be in [0, 1) (0: never), got {resign_threshold}")
    if not 0.0 <= resign_playout <= 1.0:
        raise ValueError(f"resign_playout must be in [0, 1], got {resign_playout}")
    resigning = resign_threshold > 0
    capped = full_search_prob < 1.0
    if capped and policy_target == "improved":
        raise ValueError("policy_target=improved needs each move's tree: full_search_prob=1")
    if capped and not 1 <= fast_simulations < spec.num_simulations:
        raise ValueError(
            f"fast_simulations must be in [1, num_simulations={spec.num_simulations}) with "
            f"full_search_prob < 1, got {fast_simulations}"
        )
    fast_search = (
        make_search(
            game,
            dataclasses.replace(spec, num_simulations=fast_simulations, explore=False),
            apply,
        )
        if capped
        else None
    )

    gumbel = spec.search == "gumbel"

    def searched(variables, key, states, start):
        """(search output, root value: float32[B] for the mover, full: bool[] whether this move
        had the full budget). Under playout cap randomisation the output has no tree."""
        if tree_reuse:
            out = search(variables, key, states, start)
            return out, root_value(out, gumbel), jnp.bool_(True)
        if not capped:
            out = search(variables, key, states)
            return out, root_value(out, gumbel), jnp.bool_(True)
        k_cap, k_search = jax.random.split(key)
        full = jax.random.uniform(k_cap) < full_search_prob

        def run(fn):  # the trees differ in size: keep what both searches return alike
            out = fn(variables, k_search, states)
            return out.action, out.action_weights, root_value(out, gumbel)

        action, weights, value = jax.lax.cond(full, lambda: run(search), lambda: run(fast_search))
        out = mctx.PolicyOutput(action=action, action_weights=weights, search_tree=None)
        return out, value, full

    def target(out, action):
        if policy_target == "cat":
            return jax.nn.one_hot(action, game.num_actions, dtype=out.action_weights.dtype)
        if policy_target == "improved":
            return improved_policy(out.search_tree)
        return out.action_weights

    def surprise_of(variables, states, policy, full):
        """float32[B]: the policy surprise of the recorded targets; 0 after a fast search."""

        def measured():
            logits, _ = prior(variables, states)
            return policy_surprise(policy, logits)

        if not capped:
            return measured()
        return jax.lax.cond(full, measured, lambda: jnp.zeros(policy.shape[0], jnp.float32))

    def restart_states(key, batch: int):
        if opening_plies == 0:
            return init_states(game, batch)
        return jax.vmap(lambda k: random_opening(game, k, opening_plies))(
            jax.random.split(key, batch)
        )

    def one_move(variables, carry, key):
        states, start = carry if tree_reuse else (carry, None)
        k_search, k_act, k_open = jax.random.split(key, 3)
        out, value, full = searched(variables, k_search, states, start)
        action = select_action(k_act, spec, out, states.num_moves < sample_moves)
        nxt = jax.vmap(game.step)(states, action)
        done = jax.vmap(game.is_terminal)(nxt)
        player = jax.vmap(game.current_player)(states)
        returns = jax.vmap(game.returns)(nxt)
        owned = jax.vmap(lambda s: owners(game, s))(nxt) if ownership else None
        resign = None
        if resigning:
            local = value.shape[0]  # this device's block of slots, under a mesh
            first = 0 if mesh is None else jax.lax.axis_index(AXIS) * local
            total = local * (1 if mesh is None else num_devices(mesh))
            resign = resigns(value, resign_threshold, resign_playout, first, total) & ~done
            returns = jnp.where(resign[:, None], resigned_returns(player, returns.dtype), returns)
            if ownership:
                owned = jnp.where(resign[:, None, None], jnp.int8(replay.UNKNOWN_OWNER), owned)
            done = done | resign
        policy = target(out, action) * full  # [B, A], in the game's frame
        record = replay.Trajectory(
            obs=jax.vmap(game.observe)(states),
            policy=jax.vmap(game.actions_to_policy)(states, policy),
            player=player,
            done=done,
            returns=returns,
            ply=states.num_moves,
            root_value=value,
            ownership=owned,
            surprise=surprise_of(variables, states, policy, full) if surprise else None,
            resigned=resign,
        )
        if branch_prob > 0:  # (without it the keys are those of runs before the option)
            k_open, k_branch = jax.random.split(k_open)
        # a random opening that happens to be over already starts its game again
        fresh = restart_states(k_open, done.shape[0])
        over = jax.vmap(game.is_terminal)(fresh)
        fresh = jax.tree_util.tree_map(
            lambda f, s0: jnp.where(_expand(over, f), s0, f),
            fresh,
            init_states(game, done.shape[0]),
        )
        if branch_prob > 0:
            fresh = branched(game, k_branch, nxt, done, fresh, branch_prob)
        restarted = jax.tree_util.tree_map(
            lambda s, s0: jnp.where(_expand(done, s), s0, s), nxt, fresh
        )
        if tree_reuse:  # a game that goes on keeps the played move's subtree
            kept = tree_reuse_lib.reroot(out.search_tree, action, limit=keep)
            kept = kept._replace(nodes=jnp.where(done, 0, kept.nodes))
            return (restarted, kept), record
        return restarted, record

    def selfplay(variables, key, states):
        variables = prepare_variables(apply, variables)  # once a chunk, outside its loops
        keys = jax.random.split(key, num_steps)
        carry = states
        if tree_reuse:  # the chunk's first search keeps nothing
            carry = (
                states,
                tree_reuse_lib.empty_start(
                    states, game.num_actions, keep_nodes=keep, num_simulations=spec.num_simulations
                ),
            )
        if on_move is None:
            carry, traj = jax.lax.scan(lambda s, k: one_move(variables, s, k), carry, keys)
        else:

            def body(s, xs):  # tells the host of each move (a progress display), then plays it
                k, t = xs
                jax.debug.callback(on_move, t)
                return one_move(variables, s, k)

            carry, traj = jax.lax.scan(body, carry, (keys, jnp.arange(num_steps)))
        return (carry[0] if tree_reuse else carry), traj

    if mesh is None:
        return selfplay

    def shard(variables, key, states):
        return selfplay(variables, jax.random.fold_in(key, jax.lax.axis_index(AXIS)), states)

    # check_vma=False: mctx's loops mix per-device and replicated values in one carry.
    return jax.shard_map(
        shard,
        mesh=mesh,
        in_specs=(P(), P(), P(AXIS)),
        out_specs=(P(AXIS), P(None, AXIS)),
        check_vma=False,
    )


def playout_slots(batch: int, playout: float, first: int | jax.Array = 0, total: int = 0):
    """bool[batch]: which of the slots `first` .. `first` + batch - 1 of all `total` (0: batch)
    never resign, the first ceil(`playout` * total) of the whole batch, however it is split over
    devices (a device holds a contiguous block of slots: its first is its index times its batch)."""
    total = total or batch
    return first + jnp.arange(batch) < math.ceil(playout * total)


def resigns(
    value: jax.Array, threshold: float, playout: float, first: int | jax.Array = 0, total: int = 0
) -> jax.Array:
    """bool[B]: the movers that resign, those with a root value (`value`, float32[B], for the
    mover) below -`threshold`, outside the `playout_slots` (`first`, `total`: where these B
    slots lie in the whole batch), which play out."""
    slots = playout_slots(value.shape[0], playout, first, total)
    return (value < -threshold) & ~slots


# AlphaZero kept the wrong share of its resignations, checked in the played-out games, under this
RESIGN_WRONG_LIMIT = 0.05


def check_resignations(low, traj: replay.Trajectory, threshold: float, playout: float):
    """(low, checked, wrong): how often resigning would have been wrong, counted in the games of
    the `playout_slots` of the B games, which never resign.
    `low` (bool[B, 2], carried from chunk to chunk) marks the players whose root value has
    fallen below -`threshold` in the slot's game so far, on a move that did not end it (where
    `resigns` would have resigned); for the games the chunk `traj` ended,
    `checked` (int32[B]) counts those players and `wrong` (int32[B]) the ones among them that
    did not lose (AlphaZero's false positives, kept under 5% there)."""
    plays_out = playout_slots(traj.done.shape[1], playout)

    def body(low, x):
        value, player, done, returns = x
        below = plays_out & (value < -threshold) & ~done  # as `resigns`: not on a final move
        low = low | (below[:, None] & (player[:, None] == jnp.arange(2)))
        ended = low & done[:, None]
        wrong = ended & (returns >= 0)
        counts = jnp.sum(ended, axis=1, dtype=jnp.int32), jnp.sum(wrong, axis=1, dtype=jnp.int32)
        return low & ~done[:, None], counts

    xs = (traj.root_value, traj.player, traj.done, traj.returns)
    low, (checked, wrong) = jax.lax.scan(body, low, xs)
    return low, jnp.sum(checked, axis=0), jnp.sum(wrong, axis=0)


def resigned_returns(player: jax.Array, dtype) -> jax.Array:
    """[B, 2]: the returns of games whose mover (`player`, int[B]) resigned: -1 for the mover,
    +1 for the other player."""
    return jnp.where(player[:, None] == jnp.arange(2), -1, 1).astype(dtype)


def branched(game: Game, key, states, done, fresh, prob: float):
    """`fresh` [B] with each slot, with probability `prob`, replaced by the position one uniformly
    random legal move after the state of a game of `states` [B] that goes on (`~done`), drawn
    uniformly among them; a slot keeps its fresh start where no game goes on or the move ends
    the game."""
    k_pick, k_source, k_move = jax.random.split(key, 3)
    batch = done.shape[0]
    source = jax.random.categorical(k_source, jnp.where(done, -jnp.inf, 0.0), shape=(batch,))
    picked = jax.tree_util.tree_map(lambda x: x[source], states)
    moved = jax.vmap(lambda k, s: game.step(s, sample_legal(k, game.legal_mask(s))))(
        jax.random.split(k_move, batch), picked
    )
    use = (
        (jax.random.uniform(k_pick, (batch,)) < prob)
        & jnp.any(~done)
        & ~jax.vmap(game.is_terminal)(moved)
    )
    return jax.tree_util.tree_map(lambda m, f: jnp.where(_expand(use, m), m, f), moved, fresh)


def owners(game: Game, state) -> jax.Array:
    """int8[2, H*W]: `game.ownership` of `state` for player 0 and for player 1 (unbatched)."""
    held = jnp.stack([game.ownership(state, jnp.int32(p)) for p in (0, 1)])
    return held.reshape(2, -1).astype(jnp.int8)


def _expand(mask, x):
    """Broadcast a [B] mask against an array with leading axis B."""
    return mask.reshape(mask.shape + (1,) * (x.ndim - 1))
