"""Agents named on the command line, shared by evaluate.py, play.py and the experiments.

    agent = parse_agent("ckpt:runs/hex6@latest,sims=50", game)
    outcome = play_games(game, agent, parse_agent("mcts:sims=100", game), 64, key)

Specs (options are comma-separated `name=value`):

    ckpt:PATH[@STEP|@latest][,opts]  a trained network with search; PATH is a run folder (or its
                                     checkpoints/<STEP> folder). Options: sims, search (puct |
                                     gumbel), c_puct, considered (Gumbel root actions), rollout
                                     (none | random | policy), p_r, lambda, eps, seconds; unset
                                     ones come from the checkpoint's config.
    mcts[:opts]                      pure MCTS with random rollouts (uniform priors, every leaf
                                     rolled out). Options: sims (100), search, c_puct, considered,
                                     eps, seconds.
    random                           a uniformly random legal move.
    minimax[:depth=D,seed=S]         alpha-beta negamax in Python (see `Minimax`); depth defaults
                                     to the whole game, allowed only for small games.
    human                            asks for moves on stdin.
    gtp:"COMMAND"                    an external engine speaking GTP, run as a subprocess.

An `Agent` is either batched, with a jittable `act(variables, key, states[B]) -> int32[B]` (B
games at once, `variables` passed in), or a Python agent with `choose(state) -> action` for one
unbatched state plus hooks: `reset()` before each game and `observe_move(state, action)` for each
move the opponent plays (a GTP engine must be told them). A Python agent may return `RESIGN`.

`seconds=T` (ckpt, mcts) asks for T seconds per move per game instead of a number of
simulations: `calibrate` times batched searches from the initial position (after compiling) at a
few simulation counts, interpolating towards the count whose batch takes T x (games in the batch);
`play_games` then reports the simulations, the expected rollouts (p_r x (simulations + 1): the
root and each new leaf roll out with probability p_r) and the measured seconds per move.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from azjax.arena import MatchResult, make_match, make_random_agent, make_search_agent
from azjax.checkpoint import check_run_folder, load_checkpoint, parse_location, read_config
from azjax.config import Config
from azjax.network import make_apply, make_network
from azjax.search import SearchSpec
from games.base import Game

RESIGN = -1  # what a Python agent's `choose` returns to resign
COLOURS = ("b", "w")  # GTP colour of player 0 and player 1


def _nothing(*args) -> None:
    del args


# ---- agents --------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SearchSetup:
    """How a search agent searches; kept so `seconds` can re-make it with other simulations."""

    game: Game
    spec: SearchSpec
    apply: Callable | None  # the network's apply, None for pure MCTS
    epsilon: float = 0.0  # probability of a uniformly random legal move instead of the best
    seconds: float | None = None  # time per move per game; simulations set by `calibrate`
    calibrated: bool = False

    def make_act(self) -> Callable:
        return _search_act(self.game, self.spec, self.apply, self.epsilon)

    @property
    def rollouts_per_move(self) -> float:
        """Expected rollouts per move: the root and every new leaf roll out with p = p_r."""
        if self.spec.rollout_policy == "none":
            return 0.0
        return self.spec.rollout_prob * (self.spec.num_simulations + 1)


@dataclasses.dataclass(frozen=True)
class Agent:
    """A player: batched (`act`, `variables`) or Python (`choose`, `reset`, `observe_move`)."""

    name: str
    batched: bool
    act: Callable | None = None  # (variables, key, states[B]) -> int32[B], jittable
    variables: Any = None  # the network's variables for `act` (None without a network)
    choose: Callable | None = None  # (state) -> action, or RESIGN
    reset: Callable = _nothing  # () -> None, before each game
    observe_move: Callable = _nothing  # (state, action) -> None, after each opponent move
    close: Callable = _nothing  # () -> None, when done (ends a GTP engine)
    stateful: bool = False  # holds one game at a time: its games are played one by one
    search: SearchSetup | None = None  # search agents (ckpt, mcts)


def with_simulations(agent: Agent, simulations: int) -> Agent:
    """The same search agent with another number of simulations per move."""
    setup = dataclasses.replace(
        agent.search, spec=dataclasses.replace(agent.search.spec, num_simulations=simulations))
    return dataclasses.replace(agent, search=setup, act=setup.make_act())


def search_agent(name: str, setup: SearchSetup, variables=None) -> Agent:
    return Agent(name=name, batched=True, act=setup.make_act(), variables=variables, search=setup)


# Agents with the same settings share one act function, so jax.jit compiles each search once per
# process however often it is built (a tournament, a curve over many checkpoints, calibration).
@functools.lru_cache(maxsize=None)
def _search_act(game: Game, spec: SearchSpec, apply: Callable | None, epsilon: float) -> Callable:
    return make_search_agent(game, spec, apply, epsilon)


def network_apply(config: Config) -> Callable:
    """The network's apply for a run's config; one function per architecture and game, so the
    checkpoints of one run share their compiled searches."""
    return _apply_for(config.make_game(), config.num_blocks, config.num_filters,
                      config.value_hidden, config.dtype)


@functools.lru_cache(maxsize=None)
def _apply_for(game: Game, num_blocks: int, num_filters: int, value_hidden: int, dtype: str):
    config = Config(num_blocks=num_blocks, num_filters=num_filters, value_hidden=value_hidden,
                    dtype=dtype)
    return make_apply(make_network(config, game))


@functools.lru_cache(maxsize=None)
def _random_act(game: Game) -> Callable:
    return make_random_agent(game)


@functools.lru_cache(maxsize=None)
def _match_fn(game: Game, act_a: Callable, act_b: Callable, num_games: int) -> Callable:
    return make_match(game, act_a, act_b, num_games)


# ---- parsing -------------------------------------------------------------------------------------
# option -> (type or tuple of choices, low, high, help)
_OPTIONS: dict[str, tuple] = {
    "sims": (int, 1, 100_000, "simulations per move"),
    "search": (("puct", "gumbel"), None, None, "mctx search"),
    "c_puct": (float, 0.0, math.inf, "PUCT exploration constant"),
    "considered": (int, 1, 4096, "Gumbel search: actions considered at the root"),
    "rollout": (("none", "random", "policy"), None, None, "rollout policy"),
    "p_r": (float, 0.0, 1.0, "probability that a new leaf also rolls out"),
    "lambda": (float, 0.0, 1.0, "weight of the rollout outcome in the leaf value"),
    "eps": (float, 0.0, 1.0, "probability of a random legal move instead of the best"),
    "seconds": (float, 1e-6, math.inf, "seconds per move per game instead of sims"),
    "depth": (int, 1, 10_000, "plies searched"),
    "seed": (int, 0, 2**31 - 1, "random seed of the tie-breaking"),
}

KINDS = {
    "ckpt": "ckpt:PATH[@STEP|@latest][,sims=..,search=puct|gumbel,c_puct=..,considered=..,"
            "rollout=none|random|policy,p_r=..,lambda=..,eps=..,seconds=..]",
    "mcts": "mcts[:sims=..,search=..,c_puct=..,considered=..,eps=..,seconds=..]",
    "random": "random",
    "minimax": "minimax[:depth=D,seed=S]",
    "human": "human",
    "gtp": 'gtp:"COMMAND"',
}


def parse_agent(text: str, game: Game) -> Agent:
    """The agent a spec names, for `game`; ValueError naming the kinds or options on bad specs."""
    kind, _, rest = text.strip().partition(":")
    builders = {"ckpt": _ckpt, "mcts": _mcts, "random": _random, "minimax": _minimax,
                "human": _human, "gtp": _gtp}
    if kind not in builders:
        raise ValueError(f"unknown agent {text!r}; agents: {'; '.join(KINDS.values())}")
    return builders[kind](game, rest, text.strip())


def parse_options(kind: str, text: str, accepted: tuple[str, ...]) -> dict[str, Any]:
    """`name=value,...` -> {name: typed value}, each checked against `_OPTIONS`."""
    out: dict[str, Any] = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        name, eq, value = (s.strip() for s in item.partition("="))
        if name not in accepted:
            raise ValueError(f"{kind}: unknown option {name!r}; options: "
                             f"{', '.join(accepted) or 'none'} (spec: {KINDS[kind]})")
        if not eq or not value:
            raise ValueError(f"{kind}: option {name!r} needs a value ({name}=...)")
        out[name] = _convert(kind, name, value)
    return out


def _convert(kind: str, name: str, text: str) -> Any:
    kind_of, low, high, help_ = _OPTIONS[name]
    if isinstance(kind_of, tuple):
        if text not in kind_of:
            raise ValueError(f"{kind}: {name} must be one of {', '.join(kind_of)}; got {text!r}")
        return text
    try:
        value = kind_of(text)
    except ValueError:
        raise ValueError(f"{kind}: {name} ({help_}) must be {kind_of.__name__}, got {text!r}") \
            from None
    if not low <= value <= high:
        raise ValueError(f"{kind}: {name} ({help_}) must be in [{low}, {high}], got {text!r}")
    return value


def _spec_overrides(opts: dict[str, Any]) -> dict[str, Any]:
    """SearchSpec fields from agent options."""
    names = {"sims": "num_simulations", "search": "search", "c_puct": "c_puct",
             "considered": "max_considered_actions", "rollout": "rollout_policy",
             "p_r": "rollout_prob", "lambda": "rollout_weight"}
    return {names[k]: v for k, v in opts.items() if k in names}


def _check_sims_or_seconds(kind: str, opts: dict[str, Any]) -> None:
    if "sims" in opts and "seconds" in opts:
        raise ValueError(f"{kind}: give sims or seconds, not both")


# ---- the kinds -----------------------------------------------------------------------------------
_SEARCH_OPTIONS = ("sims", "search", "c_puct", "considered", "eps", "seconds")


def _random(game: Game, rest: str, name: str) -> Agent:
    parse_options("random", rest, ())
    return Agent(name=name, batched=True, act=_random_act(game))


def _mcts(game: Game, rest: str, name: str) -> Agent:
    opts = parse_options("mcts", rest, _SEARCH_OPTIONS)
    _check_sims_or_seconds("mcts", opts)
    spec = SearchSpec.pure_mcts(**{"num_simulations": 100, **_spec_overrides(opts)})
    setup = SearchSetup(game, spec, None, opts.get("eps", 0.0), opts.get("seconds"))
    return search_agent(name, setup)


def _ckpt(game: Game, rest: str, name: str) -> Agent:
    location, _, option_text = rest.partition(",")
    path, step = parse_checkpoint_location(location)
    opts = parse_options("ckpt", option_text,
                         _SEARCH_OPTIONS[:-2] + ("rollout", "p_r", "lambda", "eps", "seconds"))
    _check_sims_or_seconds("ckpt", opts)
    check_run_folder(path)
    config = read_config(path, step)
    if config.make_game() != game:
        raise ValueError(f"{name}: checkpoint {'latest' if step is None else step} of {path!r} "
                         f"is for {config.game} {dict(config.game_options)}, but the games here "
                         f"are {game.name} {game.options}")
    config, variables, step = load_checkpoint(path, step)
    spec = SearchSpec.from_config(config, **_spec_overrides(opts))
    if spec.rollout_policy != "none" and spec.rollout_prob == 0:
        raise ValueError(f"{name}: rollout={spec.rollout_policy} needs p_r > 0 (p_r is 0)")
    if spec.rollout_policy == "none" and spec.rollout_prob > 0:
        raise ValueError(f"{name}: p_r={spec.rollout_prob} needs rollout=random or "
                         "rollout=policy (the rollout policy is none)")
    setup = SearchSetup(game, spec, network_apply(config), opts.get("eps", 0.0),
                        opts.get("seconds"))
    return search_agent(name, setup, variables)


def _minimax(game: Game, rest: str, name: str) -> Agent:
    opts = parse_options("minimax", rest, ("depth", "seed"))
    if "depth" not in opts and game.max_game_length > FULL_DEPTH_LIMIT:
        raise ValueError(f"minimax: give depth=D for {game.name} {game.options}: the whole game "
                         f"({game.max_game_length} plies) is too deep to search in Python")
    search = Minimax(game, opts.get("depth", game.max_game_length), opts.get("seed", 0))
    return Agent(name=name, batched=False, choose=search.choose)


def _human(game: Game, rest: str, name: str) -> Agent:
    parse_options("human", rest, ())
    return make_human_agent(game, name)


def make_human_agent(game: Game, name: str = "human", ask: Callable = input,
                     show: Callable = print) -> Agent:
    """A Python agent that shows the board and asks for a move name (or `resign`)."""

    def choose(state):
        show(game.render(state))
        while True:
            text = ask(f"{COLOURS[int(game.current_player(state))]} to move (or resign): ")
            if text.strip().lower() == "resign":
                return RESIGN
            try:
                return game.parse_action(text, state)
            except ValueError as e:
                show(str(e))

    return Agent(name=name, batched=False, choose=choose, stateful=True)


def _gtp(game: Game, rest: str, name: str) -> Agent:
    command = rest.strip()
    if len(command) >= 2 and command[0] == command[-1] and command[0] in "\"'":
        command = command[1:-1].strip()
    if not command:
        raise ValueError(f'gtp: give the engine\'s command line, e.g. gtp:"python play.py --gtp '
                         f'--game={game.name} --agent=random"')
    try:
        from azjax.gtp import GTPClient
    except ImportError as e:
        raise ValueError(f"gtp: the GTP client (azjax/gtp.py) is not available: {e}") from None
    try:
        client = GTPClient(command)
    except OSError as e:
        raise ValueError(f"gtp: cannot start {command!r}: {e}") from None
    return make_gtp_agent(name, game, client)


def make_gtp_agent(name: str, game: Game, client) -> Agent:
    """A Python agent that asks a GTP engine (`GTPClient` interface) for its moves."""

    def colour(state) -> str:
        return COLOURS[int(game.current_player(state))]

    def reset():
        if "size" in game.options:
            client.boardsize(game.options["size"])
        client.clear_board()

    def choose(state):
        reply = client.genmove(colour(state)).strip().lower()
        if reply == "resign":
            return RESIGN
        try:
            return game.parse_action(reply, state)
        except ValueError as e:
            raise ValueError(f"{name}: the engine played {reply!r}: {e}") from None

    def observe_move(state, action):
        client.play(colour(state), game.action_to_str(int(action)))

    return Agent(name=name, batched=False, choose=choose, reset=reset, observe_move=observe_move,
                 close=client.quit, stateful=True)


# ---- checkpoints ---------------------------------------------------------------------------------
def parse_checkpoint_location(text: str) -> tuple[str, int | None]:
    """'PATH[@STEP|@latest]' -> (run folder, step or None), as `checkpoint.parse_location`."""
    try:
        return parse_location(text)
    except ValueError as e:
        raise ValueError(f"ckpt: {e} (spec: {KINDS['ckpt']})") from None


def checkpoint_config(text: str) -> Config | None:
    """The config of the checkpoint a `ckpt:` spec names (None for other kinds)."""
    kind, _, rest = text.strip().partition(":")
    if kind != "ckpt":
        return None
    path, step = parse_checkpoint_location(rest.partition(",")[0])
    check_run_folder(path)
    return read_config(path, step)


# ---- minimax -------------------------------------------------------------------------------------
FULL_DEPTH_LIMIT = 16  # `minimax` without depth= searches whole games only this long
_GAMMA = 0.999  # per-ply discount: quicker wins and slower losses score higher
_EXACT, _LOWER, _UPPER = 0, 1, 2


@functools.lru_cache(maxsize=None)
def _expander(game: Game) -> Callable:
    """expand(state) -> (children[A], legal bool[A], terminal bool[A], reward float32[A]).

    reward[a] is the return, to the player who moves, of the state after action a. Jitted once
    per game.
    """
    actions = jnp.arange(game.num_actions, dtype=jnp.int32)

    @jax.jit
    def expand(state):
        children = jax.vmap(game.step, in_axes=(None, 0))(state, actions)
        reward = jax.vmap(game.returns)(children)[:, game.current_player(state)]
        return children, game.legal_mask(state), jax.vmap(game.is_terminal)(children), reward

    return expand


def _state_key(state) -> bytes:
    return b"".join(np.ascontiguousarray(x).tobytes() for x in jax.tree_util.tree_leaves(state))


@dataclasses.dataclass(frozen=True)
class _Node:
    children: Any  # numpy pytree of the A child states
    moves: tuple[int, ...]  # legal actions, immediate wins first
    terminal: np.ndarray  # bool[A]
    reward: np.ndarray  # float32[A], to the mover

    def child(self, action: int):
        return jax.tree_util.tree_map(lambda x: x[action], self.children)


class Minimax:
    """Alpha-beta negamax to `depth` plies in Python over the game's jitted functions.

    A state's value for its mover is +1 win / -1 loss / 0 draw, discounted by 0.999 a ply (so
    quicker wins are preferred), and 0 (the heuristic) at the depth limit. Expanded positions and
    search bounds are memoised by the state's bytes for the agent's lifetime. The root's moves
    are searched with a window that keeps ties exact, and one of the best is picked at random
    (`seed`). Each new position costs one jitted call, so this suits Tic-Tac-Toe, Connect Four
    and small Hex/Othello boards at modest depths; big games are slow.
    """

    def __init__(self, game: Game, depth: int, seed: int = 0):
        self.game, self.depth = game, depth
        self.rng = np.random.default_rng(seed)
        self.expand = _expander(game)
        self.nodes: dict[bytes, _Node] = {}
        self.table: dict[bytes, tuple[int, float, int]] = {}  # key -> (depth, value, flag)

    def choose(self, state) -> int:
        return int(self.rng.choice(self.best_moves(state)))

    def best_moves(self, state) -> list[int]:
        """The root moves of maximal value (state not terminal)."""
        node = self._node(_state_key(state), state)
        values, best = {}, -math.inf
        for a in node.moves:
            values[a] = self._child_value(node, a, self.depth, best - 1e-9, math.inf)
            best = max(best, values[a])
        return [a for a in node.moves if values[a] > best - 1e-9]

    def value(self, state) -> float:
        """The search value of `state` for its mover (state not terminal)."""
        return self._search(_state_key(state), state, self.depth, -math.inf, math.inf)

    def _node(self, key: bytes, state) -> _Node:
        node = self.nodes.get(key)
        if node is None:
            children, legal, terminal, reward = jax.device_get(self.expand(state))
            moves = [int(a) for a in np.flatnonzero(legal)]
            moves.sort(key=lambda a: -int(terminal[a] and reward[a] > 0))
            node = self.nodes[key] = _Node(children, tuple(moves), terminal, reward)
        return node

    def _child_value(self, node: _Node, action: int, depth: int, alpha: float, beta: float):
        if node.terminal[action]:
            return float(node.reward[action])
        if depth <= 1:
            return 0.0
        child = node.child(action)
        return -_GAMMA * self._search(_state_key(child), child, depth - 1, -beta / _GAMMA,
                                      -alpha / _GAMMA)

    def _search(self, key: bytes, state, depth: int, alpha: float, beta: float) -> float:
        entry = self.table.get(key)
        if entry is not None and entry[0] >= depth:
            _, v, flag = entry
            if flag == _EXACT or (flag == _LOWER and v >= beta) or (flag == _UPPER and v <= alpha):
                return v
        node = self._node(key, state)
        alpha0, best = alpha, -math.inf
        for a in node.moves:
            best = max(best, self._child_value(node, a, depth, alpha, beta))
            alpha = max(alpha, best)
            if alpha >= beta:
                break
        flag = _UPPER if best <= alpha0 else _LOWER if best >= beta else _EXACT
        self.table[key] = (depth, best, flag)
        return best


# ---- equal-time calibration ----------------------------------------------------------------------
PROBE_SIMULATIONS = (16, 64)


def calibrate(agent: Agent, game: Game, batch: int, key, probes=None, tolerance: float = 0.2,
              refinements: int = 3) -> Agent:
    """`agent` (with `seconds`) given the simulations whose search of `batch` games at once takes
    about seconds x batch.

    Times one search of `batch` initial states (after compiling) at each probe count (default
    `PROBE_SIMULATIONS`), then at the count a line through the two timings closest to the budget
    predicts, until one is within `tolerance` of it or `refinements` are spent (the cost of a
    simulation grows with the tree, so a first straight line can be far off). Each count costs a
    compile, which the match then reuses. Agents without `seconds`, or already calibrated, are
    returned as they are.
    """
    setup = agent.search
    if setup is None or setup.seconds is None or setup.calibrated:
        return agent
    budget = setup.seconds * batch
    states = jax.device_get(_initial_states(game, batch))  # host arrays, as `play_games` has
    times = {n: _time_search(with_simulations(agent, n), states, key)
             for n in probes or PROBE_SIMULATIONS}
    sims = _predict(times, budget)
    for _ in range(refinements):
        if sims in times:
            break
        times[sims] = _time_search(with_simulations(agent, sims), states, key)
        if abs(times[sims] - budget) <= tolerance * budget:
            break
        sims = _predict(times, budget)
    calibrated = with_simulations(agent, sims)
    return dataclasses.replace(calibrated,
                               search=dataclasses.replace(calibrated.search, calibrated=True))


def _predict(times: dict[int, float], budget: float) -> int:
    """Simulations taking `budget` seconds, on the line through the nearest timings either side
    of it (or the two nearest, when all lie on one side)."""
    below = [kv for kv in times.items() if kv[1] <= budget]
    above = [kv for kv in times.items() if kv[1] > budget]
    if below and above:
        pair = [max(below, key=lambda kv: kv[1]), min(above, key=lambda kv: kv[1])]
    else:
        pair = sorted(times.items(), key=lambda kv: abs(kv[1] - budget))[:2]
    (n0, t0), (n1, t1) = sorted(pair)
    slope = (t1 - t0) / (n1 - n0)
    if slope <= 0:  # timing noise: assume time proportional to simulations
        return int(np.clip(round(n1 * budget / max(t1, 1e-9)), 1, 100_000))
    return int(np.clip(round(n0 + (budget - t0) / slope), 1, 100_000))


def _time_search(agent: Agent, states, key, repeats: int = 2) -> float:
    """The fastest of `repeats` timed searches of the batch `states`, after compiling."""
    act = jax.jit(agent.act)
    jax.block_until_ready(act(agent.variables, key, states))  # compile
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(act(agent.variables, key, states))
        best = min(best, time.perf_counter() - t0)
    return best


@functools.lru_cache(maxsize=None)
def _batch_functions(game: Game):
    """Jitted batched helpers: init(n), step(states, actions), status(states)."""
    init = jax.jit(lambda n: jax.vmap(lambda _: game.init())(jnp.arange(n)), static_argnums=0)
    step = jax.jit(jax.vmap(game.step))

    @jax.jit
    def status(states):
        return (jax.vmap(game.is_terminal)(states), jax.vmap(game.current_player)(states),
                jax.vmap(game.returns)(states))

    return init, step, status


def _initial_states(game: Game, n: int):
    return _batch_functions(game)[0](n)


# ---- playing games -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MoveStats:
    """What one agent spent per move in a match (None where it does not apply)."""

    simulations: int | None  # search simulations per move
    rollouts: float | None  # expected rollouts per move
    seconds: float | None  # measured wall seconds per move per game (Python-loop matches)
    budget: float | None  # the `seconds` asked for


@dataclasses.dataclass(frozen=True)
class MatchOutcome:
    result: MatchResult  # from agent A's side
    stats: tuple[MoveStats, MoveStats]  # A, B
    wall_seconds: float  # the whole match, compilation included


def play_games(game: Game, a: Agent, b: Agent, num_games: int, key) -> MatchOutcome:
    """`num_games` games of A against B, A moving first in the even-numbered games.

    Two batched agents without `seconds` play in one jitted scan (`azjax.arena.make_match`);
    otherwise a Python loop over plies calls batched agents once per ply on the games where they
    are to move and Python agents game by game. Stateful agents (gtp, human) play one game at a
    time. `seconds` agents are calibrated first (batch: half the games at once).
    """
    t0 = time.perf_counter()
    k_cal, k_play = jax.random.split(key)
    lockstep = not (a.stateful or b.stateful)
    batch = (num_games + 1) // 2 if lockstep else 1
    a, b = (calibrate(x, game, batch, k_cal) for x in (a, b))
    timed = any(x.search is not None and x.search.seconds is not None for x in (a, b))
    if a.batched and b.batched and not timed:
        match = _match_fn(game, a.act, b.act, num_games)
        result = MatchResult.from_returns(*match(a.variables, b.variables, k_play))
        seconds = (None, None)
    else:
        result, seconds = _play_loop(game, (a, b), num_games, k_play, lockstep)
    stats = tuple(_move_stats(x, s) for x, s in zip((a, b), seconds))
    return MatchOutcome(result, stats, time.perf_counter() - t0)


def _move_stats(agent: Agent, seconds: float | None) -> MoveStats:
    setup = agent.search
    if setup is None:
        return MoveStats(None, None, seconds, None)
    return MoveStats(setup.spec.num_simulations, setup.rollouts_per_move, seconds, setup.seconds)


class _Player:
    """One side of a Python-loop match: calls the agent and times it."""

    def __init__(self, agent: Agent, pad: int, key):
        self.agent, self.pad, self.key = agent, pad, key
        self.act = jax.jit(agent.act) if agent.batched else None
        self.seconds, self.moves, self.calls = 0.0, 0, 0

    def warm_up(self, states) -> None:
        if self.act is not None:  # compile outside the timing
            sub = jax.tree_util.tree_map(lambda x: x[np.zeros(self.pad, int)], states)
            jax.block_until_ready(self.act(self.agent.variables, self.key, sub))

    def moves_for(self, states, idx: np.ndarray) -> np.ndarray:
        """int actions for the games `idx` of the numpy batch `states`."""
        t0 = time.perf_counter()
        if self.act is None:
            out = np.array([self.agent.choose(_take(states, i)) for i in idx], np.int64)
        else:
            out = np.concatenate([self._batched(states, idx[i:i + self.pad])
                                  for i in range(0, len(idx), self.pad)])
        self.seconds += time.perf_counter() - t0
        self.moves += len(idx)
        return out

    def _batched(self, states, idx: np.ndarray) -> np.ndarray:
        padded = np.concatenate([idx, np.full(self.pad - len(idx), idx[0])])
        sub = jax.tree_util.tree_map(lambda x: x[padded], states)
        self.calls += 1
        key = jax.random.fold_in(self.key, self.calls)
        return np.asarray(self.act(self.agent.variables, key, sub))[: len(idx)]

    @property
    def seconds_per_move(self) -> float | None:
        return self.seconds / self.moves if self.moves else None


def _take(states, i: int):
    return jax.tree_util.tree_map(lambda x: x[i], states)


def _play_loop(game: Game, agents, num_games: int, key, lockstep: bool):
    """(MatchResult, (A's, B's seconds per move)) of a Python-loop match."""
    a_first = np.arange(num_games) % 2 == 0
    waves = [np.arange(num_games)] if lockstep else [np.array([i]) for i in range(num_games)]
    pad = (len(waves[0]) + 1) // 2
    players = [_Player(x, pad, k) for x, k in zip(agents, jax.random.split(key))]
    init = _batch_functions(game)[0]
    for p in players:
        p.warm_up(init(len(waves[0])))
    returns_a = np.zeros(num_games, np.float32)
    for wave in waves:
        returns_a[wave] = _play_wave(game, players, a_first[wave])
    result = MatchResult.from_returns(returns_a, a_first)
    return result, tuple(p.seconds_per_move for p in players)


def _play_wave(game: Game, players, a_first: np.ndarray) -> np.ndarray:
    """A's returns float32[n] of n games played in lock-step (A first where a_first)."""
    init, step, status = _batch_functions(game)
    n = len(a_first)
    for p in players:
        p.agent.reset()
    states = jax.device_get(init(n))
    resigned = np.full(n, -1)  # the side (0: A, 1: B) that resigned, else -1
    for _ in range(game.max_game_length + 1):
        terminal, mover, returns = jax.device_get(status(states))
        live = ~terminal & (resigned < 0)
        if not live.any():
            break
        side = np.where((mover == 0) == a_first, 0, 1)
        actions = np.zeros(n, np.int64)
        for s, p in enumerate(players):
            idx = np.flatnonzero(live & (side == s))
            if len(idx):
                actions[idx] = p.moves_for(states, idx)
        resigned = np.where(live & (actions == RESIGN), side, resigned)
        played = live & (actions != RESIGN)
        for s, p in enumerate(players):
            if not p.agent.batched:
                for i in np.flatnonzero(played & (side != s)):
                    p.agent.observe_move(_take(states, i), int(actions[i]))
        actions = np.where(played, actions, 0)  # finished games: any action, it is absorbed
        states = jax.device_get(step(states, jnp.asarray(actions, jnp.int32)))
    terminal, mover, returns = jax.device_get(status(states))
    ret_a = np.where(a_first, returns[:, 0], returns[:, 1])
    return np.where(resigned == 0, -1.0, np.where(resigned == 1, 1.0, ret_a))
