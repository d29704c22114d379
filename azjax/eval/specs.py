"""Agents named on the command line: the spec grammar shared by evaluate.py, play.py and the
experiments.

    agent = parse_agent("ckpt:runs/hex6@latest,sims=50", game)
    player = make_player("mcts:sims=100", game)      # one game at a time (play.py, GTP)

Specs (options are comma-separated `name=value`):

    ckpt:PATH[@STEP|@latest|@best[:M]][,opts]  a trained network with search; PATH is a run
                                     folder (or its checkpoints/<STEP> folder; @best: the saved
                                     step its in-loop evaluation scored best by the run's
                                     --best_by or by M, opponent | elo | error_rate | auto:
                                     against --eval_opponent where it had one, else on the
                                     ladder; `checkpoint.best_checkpoint`), a network exported by
                                     `evaluate.py export`, or pretrained/NAME (a network the
                                     package ships, azjax/pretrained). Options: sims, search (puct |
                                     gumbel), c_puct, values (PUCT's: minmax | raw, the config's
                                     puct_values), fpu (PUCT's first-play urgency reduction with
                                     values=raw, the config's fpu_reduction), considered
                                     (Gumbel root actions), rollout (none | random | policy),
                                     p_r, lambda, sym (the network averaged over that many
                                     board symmetries: up to 8 on Othello and Tic-Tac-Toe, 2 on
                                     Hex and Connect Four), decisive (1 by default: a
                                     position whose mover can win at once searched as won;
                                     decisive=0: without them), eps, seconds; the other unset ones
                                     come from the checkpoint's config (search=uct: UCT on the
                                     network's values, its priors unused).
                                     game=NAME picks one game of a shared run (`--games`),
                                     whose network plays each of them (and whose in-loop
                                     evaluations rank its @best). net=best plays a gated
                                     run's best network (the one its self-play used), net=learner
                                     (the default) the learner's.
    mcts[:opts]                      pure MCTS with random rollouts (uniform priors, every leaf
                                     rolled out). Options: sims (100), search (uct, the default:
                                     OpenSpiel's UCT; puct: seed 000's baseline; gumbel), c_uct
                                     (1.4), c_puct, values, fpu, considered, decisive (0),
                                     eps, seconds.
    random                           a uniformly random legal move.
    minimax[:depth=D,seed=S,heuristic=H]  alpha-beta negamax in Python (see `Minimax`); depth
                                     defaults to the whole game, allowed only for small games;
                                     heuristic (none | lines2 | lines3) values the depth limit:
                                     0, or seed 001's Connect-N open lines of 2 or 3 stones.
    spiel[:sims=N,c=C,seed=S]        OpenSpiel's C++ MCTS bot (UCT, one random rollout a leaf;
                                     sims 1000, c 1.4): an engine this project did not write.
    reversi[:depth=D,eval=E]         rust-reversi's alpha-beta engine (8x8 Othello only; depth 6,
                                     eval matrix | piece | mobility: weighted squares, disc
                                     difference, legal moves): a searcher that is not MCTS and
                                     that this project did not write; see `azjax.eval.reversi`.
    perfect[:seed=S]                 a perfect player: the exact Hex solver (up to 5x5, no swap)
                                     or whole-game minimax (Tic-Tac-Toe); see `perfect`.
    human                            asks for moves on stdin.
    gtp:"COMMAND"                    an external engine speaking GTP, run as a subprocess.

`seconds=T` (ckpt, mcts) asks for T seconds per move per game instead of a number of
simulations (`azjax.eval.calibration`: matches time it for the games they play at once, play.py
and the GTP engine for one game, as they start). The agents that draw their own random numbers
(minimax, perfect, spiel) take the command's seed (`--seed`, `parse_agent(..., seed=S)`) where
their spec gives no seed=, so a match with another --seed plays other games against them; a
match's or tournament's i-th agent takes --seed + i (`parse_agents`, as play.py's players), so two
such agents alike do not draw one stream (a match of `perfect` against `perfect` played each game
twice, the colours swapped).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import games
from azjax.checkpoint import (
    NETWORKS,
    check_run_folder,
    load_checkpoint,
    parse_location,
    read_config,
)
from azjax.config import Config, half_rollouts
from azjax.eval.agent import Agent, SearchSetup, network_apply, random_agent, search_agent
from azjax.eval.calibration import calibrate
from azjax.eval.gtp import ANSWER_SECONDS, GTPClient, make_gtp_agent
from azjax.eval.minimax import HEURISTICS, Minimax, solvable_whole
from azjax.eval.player import Player, make_human_agent
from azjax.eval.reversi import EVALUATORS, reversi_agent
from azjax.search import PUCT_VALUES, SearchSpec
from azjax.shared import check_game, view
from azjax.symmetry import check_count
from games.base import Game

SPEC_SEEDS = 2**31  # a spec's seed= is below this
# option -> (type or tuple of choices, low, high, help)
_OPTIONS: dict[str, tuple] = {
    "sims": (int, 1, 100_000, "simulations per move"),
    "search": (("uct", "puct", "gumbel"), None, None, "mctx search"),
    "c_puct": (float, 0.0, 1000.0, "PUCT exploration constant"),
    "values": (PUCT_VALUES, None, None, "PUCT's value term (puct_values)"),
    "fpu": (float, 0.0, 2.0, "PUCT's first-play urgency reduction (fpu_reduction; values=raw)"),
    "c_uct": (float, 0.0, 100.0, "UCT exploration constant (values in [-1, 1])"),
    "considered": (int, 1, 4096, "Gumbel search: actions considered at the root"),
    "rollout": (("none", "random", "policy"), None, None, "rollout policy"),
    "p_r": (float, 0.0, 1.0, "probability that a new leaf also rolls out"),
    "lambda": (float, 0.0, 1.0, "weight of the rollout outcome in the leaf value"),
    "sym": (int, 1, 8, "the network averaged over this many board symmetries"),
    "score": (float, 0.0, 1.0, "score utility weight w: (1 - w) value + w score"),
    "decisive": (int, 0, 1, "1: a position whose mover can win at once is searched as won"),
    "eps": (float, 0.0, 1.0, "probability of a random legal move instead of the best"),
    "seconds": (float, 1e-6, 3600.0, "seconds per move per game instead of sims"),
    "depth": (int, 1, 10_000, "plies searched"),
    "seed": (int, 0, SPEC_SEEDS - 1, "random seed of the tie-breaking"),
    "c": (float, 0.0, 100.0, "UCT exploration constant"),
    "heuristic": (tuple(HEURISTICS), None, None, "minimax's value at the depth limit"),
    "eval": (EVALUATORS, None, None, "reversi's evaluation at the depth limit"),
    "game": (str, None, None, "the game of a shared run to play"),
    "net": (NETWORKS, None, None, "a gated run's network: learner or best"),
    "timeout": (float, 0.1, 86_400.0, "seconds a GTP engine may take to answer a command"),
}

SEEDED_KINDS = ("minimax", "perfect", "spiel")  # Python agents with their own random numbers

KINDS = {
    "ckpt": "ckpt:PATH[@STEP|@latest|@best[:MEASURE]][,sims=..,search=puct|gumbel|uct,c_puct=..,"
    "values=minmax|raw,fpu=..,c_uct=..,"
    "considered=..,decisive=0|1,rollout=none|random|policy,p_r=..,lambda=..,sym=..,score=..,"
    "eps=..,seconds=..,game=NAME,net=learner|best]",
    "mcts": "mcts[:sims=..,search=uct|puct|gumbel,c_uct=..,c_puct=..,values=minmax|raw,fpu=..,"
    "considered=..,decisive=0|1,eps=..,"
    "seconds=..] (search=uct by default; search=puct is seed 000's baseline)",
    "random": "random",
    "minimax": f"minimax[:depth=D,seed=S,heuristic={'|'.join(HEURISTICS)}]",
    "reversi": f"reversi[:depth=D,eval={'|'.join(EVALUATORS)}] (8x8 Othello's alpha-beta engine)",
    "perfect": "perfect[:seed=S] (exact: Hex up to 5x5, Tic-Tac-Toe)",
    "spiel": "spiel[:sims=..,c=..,seed=..] (OpenSpiel's C++ MCTS bot, random rollouts)",
    "human": "human",
    "gtp": f'gtp:"COMMAND"[,timeout=SECONDS] (each answer waited for {ANSWER_SECONDS:g} s by '
    "default)",
}


def split_specs(text: str) -> list[str]:
    """Agent specs in one comma-separated flag (play.py's --agents, the experiments' --anchors):
    a piece that is an option (`name=value`, e.g. `sims=50`) belongs to the spec before it, so
    `ckpt:runs/a,sims=50,mcts:sims=512` is two specs. Empty pieces are dropped."""
    specs: list[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if specs and "=" in piece and ":" not in piece.partition("=")[0]:
            specs[-1] += "," + piece
        else:
            specs.append(piece)
    return specs


def parse_agents(specs, game: Game, *, seed: int = 0) -> list[Agent]:
    """The agents of a match's specs, the i-th (those that draw their own random numbers) with
    `seed` + i where its spec gives no seed=: alike agents seeded alike drew the same numbers,
    so that the second half of a match (the colours swapped) replayed the first."""
    return [parse_agent(text, game, seed=seed + i) for i, text in enumerate(specs)]


def parse_agent(text: str, game: Game, *, seed: int = 0) -> Agent:
    """The agent a spec names, for `game`; ValueError naming the kinds or options on bad specs.
    `seed`: the seed of minimax, perfect and spiel agents whose spec has no seed= (the command's
    --seed, so that another seed plays other games; folded into the spec's range)."""
    if not isinstance(game, Game):  # a name: some kinds failed later, `mcts` was accepted
        raise TypeError(f"parse_agent: game must be a Game (games.make(...)), got {game!r}")
    kind, _, rest = _kind(text)
    builders = {
        "ckpt": _ckpt,
        "mcts": _mcts,
        "random": _random,
        "minimax": _minimax,
        "reversi": _reversi,
        "perfect": _perfect,
        "spiel": _spiel,
        "human": _human,
        "gtp": _gtp,
    }
    if kind in SEEDED_KINDS:
        agent = builders[kind](game, rest, text.strip(), seed=seed % SPEC_SEEDS)
    else:
        agent = builders[kind](game, rest, text.strip())
    return agent if agent.game is not None else dataclasses.replace(agent, game=game)


def _kind(text: str) -> tuple[str, str, str]:
    """(kind, ":", options) of a spec; ValueError naming the kinds where `kind` is none."""
    kind, colon, rest = text.strip().partition(":")
    if kind not in KINDS:
        raise ValueError(f"unknown agent {text!r}; agents: {'; '.join(KINDS.values())}")
    return kind, colon, rest


def parse_options(kind: str, text: str, accepted: tuple[str, ...]) -> dict[str, Any]:
    """`name=value,...` -> {name: typed value}, each checked against `_OPTIONS`."""
    out: dict[str, Any] = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        name, eq, value = (s.strip() for s in item.partition("="))
        if name not in accepted:
            raise ValueError(
                f"{kind}: unknown option {name!r}; options: "
                f"{', '.join(accepted) or 'none'} (spec: {KINDS[kind]})"
            )
        if not eq or not value:
            raise ValueError(f"{kind}: option {name!r} needs a value ({name}=...)")
        if name in out:
            raise ValueError(f"{kind}: option {name!r} given twice; give it once")
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
        raise ValueError(
            f"{kind}: {name} ({help_}) must be {kind_of.__name__}, got {text!r}"
        ) from None
    if low is not None and not low <= value <= high:
        raise ValueError(f"{kind}: {name} ({help_}) must be in [{low}, {high}], got {text!r}")
    return value


def _spec_overrides(opts: dict[str, Any]) -> dict[str, Any]:
    """SearchSpec fields from agent options."""
    names = {
        "sims": "num_simulations",
        "search": "search",
        "c_puct": "c_puct",
        "values": "puct_values",
        "fpu": "fpu_reduction",
        "c_uct": "c_uct",
        "considered": "max_considered_actions",
        "rollout": "rollout_policy",
        "p_r": "rollout_prob",
        "lambda": "rollout_weight",
        "sym": "net_symmetries",
        "score": "score_utility",
    }
    out = {names[k]: v for k, v in opts.items() if k in names}
    if "decisive" in opts:
        out["decisive_moves"] = bool(opts["decisive"])
    return out


def _check_fpu(name: str, opts: dict[str, Any], spec: SearchSpec) -> SearchSpec:
    """`spec`, its first-play urgency reduction checked: an `fpu` option needs PUCT with raw
    values; one from a checkpoint's config is dropped where the options change the search."""
    if not spec.fpu_reduction or (spec.search == "puct" and spec.puct_values == "raw"):
        return spec
    if "fpu" in opts:
        raise ValueError(
            f"{name}: fpu={spec.fpu_reduction} needs search=puct and values=raw, got "
            f"search={spec.search}, values={spec.puct_values}"
        )
    return dataclasses.replace(spec, fpu_reduction=0.0)


def _check_sims_or_seconds(kind: str, opts: dict[str, Any]) -> None:
    if "sims" in opts and "seconds" in opts:
        raise ValueError(f"{kind}: give sims or seconds, not both")


# ---- the kinds -----------------------------------------------------------------------------------
_SEARCH_OPTIONS = (
    "sims",
    "search",
    "c_puct",
    "values",
    "fpu",
    "c_uct",
    "considered",
    "decisive",
    "eps",
    "seconds",
)
MCTS_SEARCH = "uct"  # the mcts: agent's default search (OpenSpiel's); "puct" is seed 000's
# A ckpt: agent searches with decisive moves unless its spec says decisive=0: at play they cost
# 1.02 - 1.3x a 50-simulation search and keep a network from losing at once to a move it did not
# look at (8x8 Othello's wipeouts, a Connect Four threat; docs/strength.md, "Decisive moves at
# play by default"). Self-play and the in-loop ladder follow the run's decisive_moves.
CKPT_DECISIVE = True


def _random(game: Game, rest: str, name: str) -> Agent:
    parse_options("random", rest, ())
    return random_agent(name, game)


def _mcts(game: Game, rest: str, name: str) -> Agent:
    opts = parse_options("mcts", rest, _SEARCH_OPTIONS)
    _check_sims_or_seconds("mcts", opts)
    defaults = {"num_simulations": 100, "search": MCTS_SEARCH}
    spec = _check_fpu("mcts", opts, SearchSpec.pure_mcts(**{**defaults, **_spec_overrides(opts)}))
    setup = SearchSetup(game, spec, None, opts.get("eps", 0.0), opts.get("seconds"))
    return search_agent(name, setup)


_CKPT_OPTIONS = _SEARCH_OPTIONS[:-2] + (
    "rollout",
    "p_r",
    "lambda",
    "sym",
    "score",
    "eps",
    "seconds",
    "game",
    "net",
)


def _ckpt(game: Game, rest: str, name: str) -> Agent:
    location, _, option_text = rest.partition(",")
    opts = parse_options("ckpt", option_text, _CKPT_OPTIONS)
    path, step = parse_checkpoint_location(location, opts.get("game"))
    _check_sims_or_seconds("ckpt", opts)
    check_run_folder(path)
    config = check_game(read_config(path, step), opts.get("game"), name)
    own = config.make_game()
    if not own.same_rules(game):
        raise ValueError(
            f"{name}: checkpoint {'latest' if step is None else step} of {path!r} "
            f"is for {own.name} {own.rules}, but the games here are {game.name} {game.rules}"
        )
    saved, variables, step = load_checkpoint(path, step, network=opts.get("net", "learner"))
    if saved.games:  # a shared run: the network of `config.game`
        variables = view(variables, config.game)
    overrides = {"decisive_moves": CKPT_DECISIVE, **_spec_overrides(opts)}
    spec = _check_fpu(name, opts, SearchSpec.from_config(config, **overrides))
    check_count(game, spec.net_symmetries, f"{name}: sym")
    if spec.score_utility and not config.ownership_weight:
        raise ValueError(
            f"{name}: score={spec.score_utility} reads the ownership head, and this network has "
            "none (it was trained with ownership_weight=0)"
        )
    if half_rollouts(spec.rollout_policy, spec.rollout_prob):
        # half a rollout setting: refused where the options ask for the half that is on; else
        # no rollouts, as training reads a checkpoint's half-set pair (`rollout=none` or `p_r=0`
        # alone turn off what the checkpoint had)
        if "rollout" in opts and spec.rollout_policy != "none":
            raise ValueError(f"{name}: rollout={spec.rollout_policy} needs p_r > 0 (p_r is 0)")
        if "p_r" in opts and spec.rollout_prob > 0:
            raise ValueError(
                f"{name}: p_r={spec.rollout_prob} needs rollout=random or "
                "rollout=policy (the rollout policy is none)"
            )
        spec = dataclasses.replace(spec, rollout_policy="none", rollout_prob=0.0)
    if spec.score_utility and spec.rollout_policy != "none":
        raise ValueError(
            f"{name}: score={spec.score_utility} with rollout={spec.rollout_policy}: a rollout's "
            "result is the outcome, not the score the leaf values are blended with"
        )
    # the network's own game: what it observes may differ from the match's game (`same_rules`)
    setup = SearchSetup(
        own,
        spec,
        network_apply(config),
        opts.get("eps", 0.0),
        opts.get("seconds"),
    )
    return search_agent(name, setup, variables, checkpoint=f"{path}@{step}")


def _minimax(game: Game, rest: str, name: str, *, seed: int) -> Agent:
    opts = parse_options("minimax", rest, ("depth", "seed", "heuristic"))
    if "depth" not in opts and not solvable_whole(game):
        raise ValueError(
            f"minimax: give depth=D for {game.name} {game.options}: the whole game "
            f"({game.max_game_length} plies) is too deep to search in Python"
        )
    search = Minimax(
        game,
        depth=opts.get("depth", game.max_game_length),
        seed=opts.get("seed", seed),
        heuristic=opts.get("heuristic", "none"),
    )
    return Agent(name=name, batched=False, choose=search.choose)


REVERSI_DEPTH = 6  # the reversi: agent's default depth (about 3 ms a move on one core)


def _reversi(game: Game, rest: str, name: str) -> Agent:
    opts = parse_options("reversi", rest, ("depth", "eval"))
    return reversi_agent(
        game, name, depth=opts.get("depth", REVERSI_DEPTH), evaluator=opts.get("eval", "matrix")
    )


def _perfect(game: Game, rest: str, name: str, *, seed: int) -> Agent:
    from azjax.eval.perfect import perfect_agent

    opts = parse_options("perfect", rest, ("seed",))
    return perfect_agent(game, name, opts.get("seed", seed))


def _spiel(game: Game, rest: str, name: str, *, seed: int) -> Agent:
    from azjax.eval.spiel import spiel_mcts_agent

    opts = parse_options("spiel", rest, ("sims", "c", "seed"))
    return spiel_mcts_agent(
        game,
        name,
        sims=opts.get("sims", 1000),
        c=opts.get("c", 1.4),
        seed=opts.get("seed", seed),
    )


def _human(game: Game, rest: str, name: str) -> Agent:
    parse_options("human", rest, ())
    return make_human_agent(game, name)


def _gtp(game: Game, rest: str, name: str) -> Agent:
    command, opts = rest.strip(), {}
    quote = command[:1]
    if len(command) >= 2 and quote in "\"'" and command.endswith(quote):
        command = command[1:-1].strip()
    elif quote in "\"'" and f"{quote}," in command:  # "COMMAND",timeout=S
        command, _, options = command[1:].rpartition(f"{quote},")
        opts = parse_options("gtp", options, ("timeout",))
    if not command:
        raise ValueError(
            f"gtp: give the engine's command line, e.g. gtp:\"azjax-play --gtp "
            f'--game={game.name} --agent=random"'
        )
    try:
        client = GTPClient(command, timeout=opts.get("timeout", ANSWER_SECONDS))
    except (OSError, ValueError) as e:  # ValueError: shlex's, a quote left open
        raise ValueError(f"gtp: cannot start {command!r}: {e}") from None
    return make_gtp_agent(name, game, client)


# ---- checkpoints ---------------------------------------------------------------------------------
def parse_checkpoint_location(text: str, game: str | None = None) -> tuple[str, int | None]:
    """'PATH[@STEP|@latest|@best[:MEASURE]]' -> (run folder, step or None), as
    `checkpoint.parse_location` (`game`: the spec's game=NAME, whose evaluations rank a shared
    run's @best)."""
    try:
        return parse_location(text, game)
    except ValueError as e:
        raise ValueError(f"ckpt: {e} (spec: {KINDS['ckpt']})") from None


def checkpoint_config(text: str) -> Config | None:
    """The config of the checkpoint a `ckpt:` spec names (None for other kinds; ValueError naming
    the kinds where the spec names none)."""
    kind, _, rest = _kind(text)
    if kind != "ckpt":
        return None
    location, _, option_text = rest.partition(",")
    opts = parse_options("ckpt", option_text, _CKPT_OPTIONS)
    path, step = parse_checkpoint_location(location, opts.get("game"))
    check_run_folder(path)
    return check_game(read_config(path, step), opts.get("game"), text.strip())


def make_player(text: str, game: Game, seed: int = 0, *, announce: bool = False) -> Player:
    """The agent a spec names, as a `Player` of one game at a time (play.py, the GTP engine),
    a `seconds=T` agent calibrated to T seconds a move for one game, and `human` a person whose
    quit ends the game (not a resignation); `announce`: it says so when
    it calibrates and when its first move compiles (the terminal, not GTP)."""
    import jax

    agent = parse_agent(text, game, seed=seed)
    if _kind(text)[0] == "human":  # a second person: quitting ends the game, as the first's does
        agent = make_human_agent(game, agent.name, quits=True)
    if agent.search is not None and agent.search.seconds is not None:
        if announce:
            print(f"({agent.name}: timing its search for {agent.search.seconds:g} s a move)")
        agent = calibrate(agent, game, 1, jax.random.PRNGKey(seed))
    return Player(agent, seed, announce=announce)


def game_for(specs: list[str], name: str | None = None, options: dict | None = None) -> Game:
    """The game `name` with `options`, or else the first ckpt spec's game with `options` over its
    own; ValueError when neither is given."""
    options = dict(options or {})
    if name is not None:
        return games.make(name, **options)
    for spec in specs:
        _kind(spec)  # a spec that names no agent is the error to report, not a missing --game
        config = checkpoint_config(spec)
        if config is not None:
            return games.make(config.game, **{**config.game_options, **options})
    raise ValueError("give --game=NAME: no ckpt: agent to take the game from")
