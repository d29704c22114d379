"""The run configuration: one frozen dataclass, per-game defaults in `configs/`, flag overrides.

    config = azjax.config.load("hex", {"size": 6, "num_simulations": 100})
    game, overrides = azjax.config.named_defaults("connect_four_thesis")   # train.py --config

Every field carries a help line and its accepted values in its metadata; `validate` checks a whole
config and raises a ValueError naming the field and what it accepts. Game options (`size`, `swap`,
`rows`, ...) are fields too, kept in `game_options` and checked by the game itself. A config is
never mutated after it is built: `dataclasses.replace` makes a new one.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import pkgutil
import runpy
from collections.abc import Mapping, Sequence
from typing import Any

import games


def _field(default, help: str, *, choices=None, low=None, high=None):
    meta = {"help": help, "choices": choices, "low": low, "high": high}
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(frozen=True)
class Config:
    # ---- game --------------------------------------------------------------------------------
    game: str = _field("hex", "the game to learn", choices=games.NAMES)  # registered ones too
    game_options: Mapping[str, Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "game options (size, swap, rows, ...)"}
    )
    seed: int = _field(
        0, "random seed of the run (32 bits: JAX keys keep only the low 32)", low=0, high=2**32 - 1
    )

    # ---- network -----------------------------------------------------------------------------
    num_blocks: int = _field(3, "residual blocks in the network", low=0, high=64)
    num_filters: int = _field(128, "convolution filters in every block", low=1, high=1024)
    value_hidden: int = _field(128, "hidden units of the value head", low=1, high=4096)
    value_head: str = _field(
        "tanh",
        "the value head's output: tanh (one number, squared-error loss) or wdl (win, draw and "
        "loss probabilities, cross-entropy loss on the value target split into them; Leela "
        "Chess Zero's)",
        choices=("tanh", "wdl"),
    )
    global_pool: bool = _field(
        False,
        "KataGo's global pooling: each residual block adds a bias from its channels' means and "
        "maxima over the board, and the value head reads its channels' means and maxima instead "
        "of one flattened plane",
    )
    policy_head_kernel: int = _field(
        3,
        "the policy head's convolution: 3 (3x3, num_filters channels, seed 000's) or 1 (1x1: a "
        "sixth less arithmetic for the 2x32 network; level on 6x6 Othello and Hex at 20 minutes, "
        "ahead on Connect Four, where --config=cpu uses it: docs/strength.md)",
        choices=(1, 3),
    )
    dtype: str = _field(
        "float32", "compute dtype (parameters stay float32)", choices=("float32", "bfloat16")
    )

    # ---- search ------------------------------------------------------------------------------
    search: str = _field(
        "puct",
        "mctx search: PUCT (muzero_policy) or Gumbel (gumbel_muzero_policy)",
        choices=("puct", "gumbel"),
    )
    num_simulations: int = _field(50, "search simulations per move", low=1, high=100_000)
    c_puct: float = _field(1.25, "PUCT exploration constant (mctx pb_c_init)", low=0.0)
    puct_values: str = _field(
        "minmax",
        "PUCT's value term: minmax (mctx's: a node's children's Q-values, the unvisited ones at "
        "the node's value, stretched min-max to [0, 1]) or raw (the same Q-values in [-1, 1], "
        "not stretched, as AlphaZero's)",
        choices=("minmax", "raw"),
    )
    fpu_reduction: float = _field(
        0.0,
        "PUCT with puct_values=raw: first-play urgency reduction r, each unvisited child valued "
        "at its parent's value less r * sqrt(the prior mass of the visited children), as Leela "
        "Zero and KataGo (0: at the parent's value)",
        low=0.0,
        high=2.0,
    )
    forced_playouts: float = _field(
        0.0,
        "PUCT self-play: KataGo's forced playouts and policy target pruning, k > 0: a root move "
        "the search has tried gets at least sqrt(k * noised prior * root visits) visits, and the "
        "visits so forced are taken out of the policy target and the move's draw (KataGo: 2; 0: "
        "off)",
        low=0.0,
        high=16.0,
    )
    dirichlet_alpha: float = _field(0.33, "Dirichlet noise alpha at the self-play root", low=1e-6)
    dirichlet_fraction: float = _field(
        0.25, "weight of the Dirichlet noise at the self-play root", low=0.0, high=1.0
    )
    max_considered_actions: int = _field(
        16, "Gumbel search: actions considered at the root", low=1, high=4096
    )
    gumbel_scale: float = _field(
        1.0, "Gumbel search: scale of the Gumbel noise in self-play", low=0.0
    )
    evaluator: str = _field(
        "network",
        "leaf evaluator: the network, or uniform priors and value 0",
        choices=("network", "uniform"),
    )
    rollout_policy: str = _field(
        "none",
        "rollouts from new leaves: none, uniformly random moves, or the network's best move",
        choices=("none", "random", "policy"),
    )
    rollout_prob: float = _field(
        0.0, "p_r: probability that an expansion also rolls out", low=0.0, high=1.0
    )
    rollout_weight: float = _field(
        0.5, "lambda: leaf value = (1-lambda) v_net + lambda z_rollout", low=0.0, high=1.0
    )
    rollout_sample: bool = _field(False, "policy rollouts sample from the policy instead of argmax")
    net_symmetries: int = _field(
        1,
        "every search's network evaluations averaged over this many of the board's symmetries "
        "(1: none; Othello and Tic-Tac-Toe have 8, Hex and Connect Four 2): self-play and the "
        "in-loop evaluation; costs that many network calls a leaf",
        low=1,
        high=8,
    )
    score_utility: float = _field(
        0.0,
        "w: every search values a position by (1 - w) value + w score, the score the margin the "
        "ownership head predicts (mean ownership; Othello's disc difference over the cells), so "
        "decided games are played for the margin (KataGo's score utility; needs "
        "ownership_weight > 0; 0: off)",
        low=0.0,
        high=1.0,
    )
    decisive_moves: bool = _field(
        False,
        "every search (self-play and the in-loop evaluation) values a position whose mover has a "
        "move that wins at once as won and searches only its winning moves (decisive moves; "
        "plays each of the game's moves from the root and every new leaf)",
    )

    # ---- self-play ---------------------------------------------------------------------------
    batch_games: int = _field(1024, "games played in lock-step", low=1)
    selfplay_steps: int = _field(
        0, "moves per game per iteration (0: the game's longest length)", low=0
    )
    sample_moves: int = _field(
        10, "plies that sample from the visit distribution; then argmax", low=0
    )
    opening_plies: int = _field(
        0,
        "self-play games start after 0..N uniformly random moves "
        "(N drawn per game; 0: from the empty board)",
        low=0,
        high=64,
    )
    branch_prob: float = _field(
        0.0,
        "the probability that a restarted self-play game begins one random move after another "
        "game's current position instead (Go-Exploit's visited states, the batch as the "
        "archive: the games on the same device, so a device needs several; 0: never)",
        low=0.0,
        high=1.0,
    )
    resign_threshold: float = _field(
        0.0,
        "AlphaZero's resignation: a self-play game ends, the mover losing, where the search's "
        "root value for the mover falls below -t (0: never; 0.9 = a root value below -0.9; "
        "`python -m experiments.decided`, in a checkout, measures how often a threshold would err)",
        low=0.0,
        high=0.999,
    )
    resign_playout: float = _field(
        0.1,
        "with resign_threshold > 0, the share of self-play's game slots whose games never "
        "resign and are played out (AlphaZero's tenth)",
        low=0.0,
        high=1.0,
    )
    full_search_prob: float = _field(
        1.0,
        "playout cap randomisation (KataGo): the probability that a move is searched with "
        "num_simulations and kept as a policy target; the others get fast_simulations, no root "
        "noise and no policy target (1: every move full)",
        low=0.0,
        high=1.0,
    )
    fast_simulations: int = _field(
        0,
        "playout cap randomisation: simulations of the fast searches "
        "(1 .. num_simulations - 1; used when full_search_prob < 1)",
        low=0,
    )
    tree_reuse: bool = _field(
        False,
        "each self-play search goes on from the subtree of the move played before (Leela "
        "Zero's and KataGo's tree reuse; search=puct with full_search_prob=1)",
    )
    replay_games: int = _field(5000, "replay capacity, in games of the longest length", low=1)
    policy_surprise: float = _field(
        0.0,
        "replay sampling: this share of the weight in proportion to each position's policy "
        "surprise, KL(search policy || network prior), the rest uniform (KataGo's policy "
        "surprise weighting, 0.5 there; 0: uniform)",
        low=0.0,
        high=1.0,
    )

    # ---- training ----------------------------------------------------------------------------
    optimizer: str = _field("sgd", "optimizer", choices=("sgd", "adam"))
    learning_rate: float = _field(0.01, "peak learning rate", low=0.0)
    lr_schedule: str = _field(
        "constant",
        "learning-rate schedule over the run: its iterations, or its time_budget where that "
        "ends it first (counting a resumed run's earlier sessions)",
        choices=("constant", "cosine", "warmup_cosine"),
    )
    momentum: float = _field(0.9, "SGD momentum", low=0.0, high=1.0)
    weight_decay: float = _field(0.001, "c in the loss term c * ||theta||^2", low=0.0)
    train_batch_size: int = _field(1024, "positions per optimizer step", low=1)
    train_steps: int = _field(
        100, "optimizer steps per iteration (network transfer interval)", low=0
    )
    augment: bool = _field(
        False,
        "train on a random board symmetry of each sampled position "
        "(Hex: 180-degree rotation; Othello, Tic-Tac-Toe: the square's 8; "
        "Connect Four: mirror)",
    )
    value_target_mix: float = _field(
        0.0,
        "value target (1 - m) * outcome + m * the search's root value of the position "
        "(Z+Q averaging; 0: the outcome alone)",
        low=0.0,
        high=1.0,
    )
    value_lambda: float = _field(
        1.0,
        "value target the TD(lambda) return over the later positions' root values, "
        "lambda per ply (1: the outcome alone; 0: the next position's root value)",
        low=0.0,
        high=1.0,
    )
    value_weight: float = _field(
        1.0,
        "weight of the value term in the loss (1: AlphaZero's equal weights; below 1 the value "
        "head fits its targets less closely, as MuZero Reanalyse's 0.25)",
        low=0.0,
    )
    ownership_weight: float = _field(
        0.0,
        "weight of an auxiliary loss on who holds each cell at the game's end (KataGo's "
        "ownership target; adds an ownership head to the network; 0: off)",
        low=0.0,
    )
    soft_policy_weight: float = _field(
        0.0,
        "weight of an auxiliary loss on the search policy softened to pi^(1/T) (KataGo's soft "
        "policy target, 8 there; adds a soft policy output to the network; 0: off)",
        low=0.0,
    )
    soft_policy_temperature: float = _field(
        4.0, "T of soft_policy_weight's target pi^(1/T) (KataGo's 4)", low=1.0
    )
    opponent_policy_weight: float = _field(
        0.0,
        "weight of an auxiliary loss on the search policy of the opponent's reply (KataGo's "
        "opponent policy target, 0.15 there; adds an opponent policy output to the network; "
        "0: off)",
        low=0.0,
    )
    min_replay: int = _field(
        0, "positions with a known outcome needed before training (0: one training batch)", low=0
    )

    # ---- evaluation, checkpoints, stopping ---------------------------------------------------
    eval_interval: int = _field(10, "iterations between evaluations (0: never)", low=0)
    eval_final: bool = _field(
        True,
        "also evaluate a session's last iteration where it falls between intervals (a time "
        "budget's or --iterations' end, once the run has passed its first interval), so that "
        "the run's last checkpoint is measured and can be its @best; eval_budget never puts "
        "it off",
    )
    eval_games: int = _field(64, "games per evaluation match (even: colours alternate)", low=2)
    eval_epsilon: float = _field(
        0.05, "epsilon-greedy move choice against the previous network", low=0.0, high=1.0
    )
    eval_budget: float = _field(
        0.1,
        "largest share of the session's wall time the in-loop evaluation may take: an "
        "evaluation that falls due when, with it (taken to last as long as the last one, its "
        "ladder placement as long as the rungs it will play took), the evaluations would take "
        "more is put off to the next interval (0: evaluate at every interval whatever it costs)",
        low=0.0,
        high=1.0,
    )
    eval_compile_ahead: str = _field(
        "auto",
        "compile the next in-loop evaluation's programs on background threads while self-play "
        "and learning run (auto: where the process may run on two cores or more)",
        choices=("auto", "on", "off"),
    )
    eval_opening_plies: int = _field(
        0,
        "in-loop evaluation: each game pair (one game with each colour) of the matches against "
        "the previous network, pure MCTS and eval_opponent starts after this many uniformly "
        "random plies (0: from the empty board)",
        low=0,
        high=64,
    )
    gating: float = _field(
        0.0,
        "gating (seed 004): self-play is played by the best network, which a new one replaces "
        "only when its score against it is above this, in [0, 1) (0: off, the learner's network "
        "plays; e.g. 0.55)",
        low=0.0,
    )
    gating_games: int = _field(40, "games per gate match (even: colours alternate)", low=2)
    gating_interval: int = _field(5, "iterations between gate matches", low=1)
    eval_ladder: bool = _field(
        True,
        "also place the network on the game's Elo ladder at each evaluation (eval/elo, "
        "eval/elo_ci95; eval_games games against the rungs nearest its rating), where "
        "azjax/ladders/ has a table for the game and options",
    )
    eval_ladder_max_sims: int = _field(
        -1,
        "the in-loop placement plays the ladder's rungs of at most this many simulations "
        "(a game against 32768 of pure MCTS takes about a minute of a CPU core; evaluate.py "
        "place plays every rung; 0: every rung here too; -1: the table's own cap where it "
        "sets one, 2048 on 8x8 Othello, else 8192)",
        low=-1,
    )
    eval_errors: bool = _field(
        True,
        "also measure the exact error rate at each evaluation (eval/error_rate, eval/error_ci95: "
        "the share of solved positions where the network's move throws a win or a draw away), "
        "where azjax/solved/ has a set for the game and options",
    )
    eval_opponent: str = _field(
        "",
        "also play this agent at each evaluation, any spec evaluate.py match accepts "
        "(gtp:\"COMMAND\", spiel:sims=1000, minimax:depth=4, ckpt:PATH, ...; '': none): "
        "eval/opponent_score, eval/opponent_ci95, eval/opponent_wdl, eval/opponent_seconds",
    )
    eval_opponent_games: int = _field(
        0, "games against eval_opponent per evaluation (even; 0: eval_games)", low=0
    )
    eval_opponent_sims: int = _field(
        0,
        "the network's simulations a move against eval_opponent (0: num_simulations); an "
        "engine that searches ahead wipes out 8x8 Othello networks that search 50 (200 see "
        "most of it, docs/strength.md)",
        low=0,
    )
    eval_opponent_decisive: bool = _field(
        True,
        "the network searches with decisive moves (as decisive_moves) in the match against "
        "eval_opponent, as ckpt: agents play, where self-play need not: an 8x8 Othello network is "
        "then rarely wiped out one move ahead, and the score measures its play, not its wipeout "
        "rate (docs/strength.md; false: the match searches as self-play)",
    )
    best_by: str = _field(
        "auto",
        "what RUN@best ranks a run's saved checkpoints by: auto (the score against "
        "eval_opponent where the run plays one, else the ladder Elo, else the error rate; "
        "one logged in the run's second half first), "
        "opponent, elo, or error_rate (the exact error rate on the game's solved positions, "
        "the lowest best)",
        choices=("auto", "opponent", "elo", "error_rate"),
    )
    checkpoint_interval: int = _field(10, "iterations between checkpoints", low=1)
    keep_checkpoints: int = _field(
        0, "the newest checkpoints kept on disk, and the one @best names (0: all)", low=0
    )
    iterations: int = _field(
        100,
        "stop after this many iterations (0: no limit, time_budget ends the run; train.py's "
        "--time_budget given without --iterations sets 0)",
        low=0,
    )
    time_budget: float = _field(
        0.0,
        "stop after this many minutes of the run, its earlier sessions' included (0: no limit; "
        "given without --iterations, it alone ends the run)",
        low=0.0,
    )

    # ---- Expert Iteration (seed 002; `--algorithm=exit`, azjax/exit.py) -----------------------
    algorithm: str = _field(
        "alphazero",
        "alphazero: search self-play (selfplay.py); exit: the "
        "apprentice network plays, an expert search labels one position per "
        "game (exit.py; its self-play ignores search, c_puct, fpu_reduction, forced_playouts, "
        "dirichlet_*, sample_moves, selfplay_steps, opening_plies, branch_prob, replay_games; the "
        "in-loop evaluation's searches use search, c_puct and fpu_reduction)",
        choices=("alphazero", "exit"),
    )
    policy_target: str = _field(
        "tpt",
        "policy target: tpt (the search's policy; ExIt: root visits n(s,a)/n(s)), cat (one-hot "
        "of the move chosen; both algorithms) or improved (alphazero with search=puct: Gumbel "
        "MuZero's improved policy, softmax(prior logits + sigma(completed Q)), at the root of "
        "each move's tree)",
        choices=("tpt", "cat", "improved"),
    )
    value_target: str = _field(
        "rollout",
        "ExIt value target: rollout (outcome of the "
        "apprentice's game from the position) or search (expert root value)",
        choices=("rollout", "search"),
    )
    positions_per_game: int = _field(
        1,
        "ExIt: positions drawn uniformly from each apprentice game (without replacement; a "
        "game with fewer plies than that gives its first draw again for the rest)",
        low=1,
        high=64,
    )
    dataset: str = _field(
        "online_buffer",
        "ExIt dataset: batch (train on this iteration's "
        "positions only), online_buffer (the latest dataset_size positions), "
        "online_grow (all positions; each iteration adds dataset_growth times "
        "the dataset, at least one batch of games)",
        choices=("batch", "online_buffer", "online_grow"),
    )
    dataset_size: int = _field(
        100_000,
        "ExIt: positions kept by online_buffer, the capacity of "
        "online_grow (rounded up to whole batches of batch_games)",
        low=1,
    )
    dataset_growth: float = _field(
        0.1,
        "ExIt online_grow: new positions per iteration as a fraction of the dataset",
        low=0.0,
        high=10.0,
    )
    retrain_from_scratch: bool = _field(
        False, "ExIt: train a freshly initialised apprentice every iteration instead of continuing"
    )
    early_stopping: int = _field(
        0,
        "ExIt: train the apprentice in epochs over the dataset (instead of train_steps steps) "
        "and stop at the first epoch after which the validation loss rose this many times in "
        "a row, keeping the epoch with the lowest (seed 002: 3); 0: off",
        low=0,
        high=100,
    )
    validation_fraction: float = _field(
        0.1,
        "ExIt with early_stopping: the share of the dataset's game slots (batch_games columns, "
        "every position of their games) held out of training to measure the validation loss",
        low=0.01,
        high=0.5,
    )
    max_epochs: int = _field(
        100, "ExIt with early_stopping: the most epochs an iteration trains", low=1, high=100_000
    )
    exit_c_uct: float = _field(
        0.05,
        "ExIt expert: UCT exploration constant c_b (values in "
        "[0, 1]; seed 002 Table 1: 0.25 vanilla, 0.05 N-MCTS)",
        low=0.0,
    )
    exit_prior_weight: float = _field(
        100.0,
        "ExIt expert: w_a, weight of the bonus w_a pi(a|s,tau) / (n(s,a) + 1); 0: plain UCT",
        low=0.0,
    )
    exit_prior_temperature: float = _field(
        0.1,
        "ExIt expert: tau, softmax temperature of the apprentice prior in the bonus",
        low=1e-3,
        high=100.0,
    )

    # ---- transfer (seed 004; azjax/transfer.py) ---------------------------------------------
    init_from: str = _field(
        "",
        "start a new run from another run's network, PATH[@STEP|@best] (default: its latest "
        "checkpoint): all of it for the same game and board but a head shaped otherwise, else "
        "the trunk only, with the heads initialised afresh; the run's config records the "
        "resolved PATH@STEP",
    )
    freeze_trunk: bool = _field(
        False,
        "train only the policy and value heads of the network init_from gave; the trunk's "
        "parameters and batch statistics stay as loaded",
    )

    # ---- shared learning (seed 004; azjax/shared.py) -----------------------------------------
    games: str = _field(
        "",
        "train one network on several games at once, NAME[:OPT=VALUE,...] separated by commas "
        "(e.g. connect_four,othello:size=6): one trunk of residual blocks, an input block and "
        "policy and value heads per game; the first game is the run's game (empty: one game, "
        "--game)",
    )

    # ---- derived -----------------------------------------------------------------------------
    def make_game(self) -> games.Game:
        return games.make(self.game, **self.game_options)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Config:
        data = json.loads(text)
        known = {f.name for f in dataclasses.fields(Config)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"config has unknown field(s) {', '.join(unknown)}")
        return validate(Config(**_as_it_ran(data)))


FIELDS = {f.name: f for f in dataclasses.fields(Config) if f.name != "game_options"}


def half_rollouts(policy: str, prob: float) -> bool:
    """Whether a rollout setting is half given (a policy without a probability, or the
    reverse): it plays no rollouts."""
    return (policy != "none") != (prob > 0)


def _as_it_ran(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved config (a run's config.json) as it ran: half a rollout setting, saved before
    `validate` refused it, played no rollouts."""
    if half_rollouts(saved.get("rollout_policy", "none"), saved.get("rollout_prob", 0.0)):
        return {**saved, "rollout_policy": "none", "rollout_prob": 0.0}
    return saved


def game_defaults(game: str) -> dict[str, Any]:
    """The overrides in `configs/<game>.py` (its `OVERRIDES` dict), game options included; none
    (the Config's own defaults) for a registered game without such a file."""
    games.game_class(game)  # unknown game -> ValueError naming the known ones
    try:
        module = importlib.import_module(f"configs.{game}")
    except ModuleNotFoundError as e:
        if e.name != f"configs.{game}":
            raise  # the file exists and one of its imports failed
        return {}
    return dict(module.OVERRIDES)


def config_names() -> list[str]:
    """The configs `--config=NAME` accepts: every `configs/<NAME>.py` with an `OVERRIDES` dict."""
    import configs

    names = [m.name for m in pkgutil.iter_modules(configs.__path__)]
    return sorted(n for n in names if _is_config(importlib.import_module(f"configs.{n}")))


def _is_config(module) -> bool:
    """A config module: OVERRIDES (a game's defaults or a variant), or recipe(game) (settings
    for any game, like configs/cpu.py)."""
    return hasattr(module, "OVERRIDES") or callable(getattr(module, "recipe", None))


def named_defaults(name: str, game: str | None = None) -> tuple[str | None, dict[str, Any]]:
    """(game, overrides) of `--config=NAME`: `configs/<NAME>.py`, a game's own defaults
    (`configs/hex.py`) or a variant that names its game in `GAME`
    (`configs/connect_four_thesis.py`), or a recipe for any game (`configs/cpu.py`: its
    `recipe(game)`, for `game`); or a file of overrides, `*.json` (e.g. a run's
    config.json, or {"num_simulations": 100}) or `*.py` (an `OVERRIDES` dict, and `GAME`).
    The game is None where a file names none.
    ValueError naming the file's problem, or listing the available configs for an unknown name."""
    if is_file(name):
        return _file_defaults(name)
    available = config_names()
    if name not in available:
        raise ValueError(
            f"--config: unknown config {name!r}; available: {', '.join(available)}, or a "
            ".json or .py file of overrides"
        )
    module = importlib.import_module(f"configs.{name}")
    if not hasattr(module, "OVERRIDES"):  # a recipe for any game: the game comes from --game
        return None, dict(module.recipe(game or "hex"))
    return getattr(module, "GAME", name), dict(module.OVERRIDES)


def game_option_defaults(name: str, game_names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{game: its options from `--config=NAME`} for a shared run of `game_names` (the first the
    run's game). A recipe for any game (configs/cpu.py) gives each game its own (Othello its
    mobility planes wherever it stands in the list); any other config gives its options to the
    game it names, or to the first game where it names none. ValueError as `named_defaults`."""
    named = {game: named_defaults(name, game) for game in game_names}  # ValueError: a bad name
    recipe = not is_file(name) and not hasattr(
        importlib.import_module(f"configs.{name}"), "OVERRIDES"
    )
    out = {}
    for i, (game, (config_game, values)) in enumerate(named.items()):
        if config_game == game or (config_game is None and (recipe or i == 0)):
            names = set(games.option_names(game))
            out[game] = {k: v for k, v in values.items() if k in names}
    return out


def options_into_the_list(overrides: Mapping[str, Any], config_name: str | None) -> dict:
    """A shared run's settings (`overrides["games"]` its list) with the game options of a config
    or of a resumed run taken out: the list holds each game's (a resumed run's has them all
    already), and `--config=config_name`'s go into it under the ones it gives
    (`--games=othello:size=6,connect_four --config=cpu`: the mobility planes the CPU recipe gives
    Othello). `load` refuses game options beside a list."""
    from azjax.shared import parse_games, with_default_options

    listed = [name for name, _ in parse_games(overrides["games"])]
    names = set(games.option_names(listed[0]))
    out = {k: v for k, v in overrides.items() if k not in names}
    if config_name is not None:
        defaults = game_option_defaults(config_name, listed)
        out["games"] = with_default_options(out["games"], defaults)
    return out


def is_file(name: str) -> bool:
    """`--config=NAME` names a file of overrides, not a module of configs/."""
    return name.endswith((".json", ".py")) or os.sep in name


def _file_defaults(path: str) -> tuple[str | None, dict[str, Any]]:
    if not os.path.isfile(path):
        raise ValueError(f"--config: no file {path!r} (give configs/NAME or a .json or .py file)")
    try:
        if path.endswith(".py"):
            module = runpy.run_path(path)
            if "OVERRIDES" not in module and "GAME" not in module:
                raise ValueError("it defines neither OVERRIDES (a dict of settings) nor GAME")
            data = dict(module.get("OVERRIDES", {}))
            if module.get("GAME") is not None:  # else OVERRIDES may name the game
                data["game"] = module["GAME"]
        else:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if isinstance(data, dict) and {"rollout_policy", "rollout_prob"} <= set(data):
                data = _as_it_ran(data)  # a run's config.json, which holds every setting
    except SystemExit as e:  # sys.exit() or exit() in the file: the run would end unexplained
        raise ValueError(f"--config: {path} exited (code {e.code!r}) as it was read") from None
    except Exception as e:  # the user's file: any error in it is theirs to fix
        raise ValueError(f"--config: cannot read {path}: {type(e).__name__}: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config: {path} holds {type(data).__name__}, not a dict of settings")
    data = dict(data)
    game = data.pop("game", None)
    options = data.pop("game_options", None) or {}
    if not isinstance(options, dict):
        raise ValueError(f"--config: {path}: game_options must be a dict, got {options!r}")
    return game, {**data, **options}


def load(game: str, overrides: Mapping[str, Any] | None = None) -> Config:
    """The config of `game`: defaults, then `configs/<game>.py`, then `overrides`, validated.

    Keys of `overrides` are Config fields or the game's options (e.g. `size`); anything else is a
    ValueError listing what is accepted.
    """
    if (overrides or {}).get("game", game) != game:  # it was dropped for `game`
        raise ValueError(
            f"overrides name game={overrides['game']!r}, the config is {game!r}'s: give the game "
            "as load's first argument"
        )
    values = {**game_defaults(game), **dict(overrides or {}), "game": game}
    options = set(games.option_names(game))
    game_options = {k: values.pop(k) for k in list(values) if k in options}
    if values.get("games"):  # a shared run: each game's options come from the list
        from azjax.shared import parse_games

        given = sorted(set(overrides or {}) & options)
        if given:
            raise ValueError(
                f"game option(s) {', '.join(given)} with games={values['games']}: give them in "
                "the list, e.g. othello:size=6"
            )
        game_options = dict(parse_games(values["games"])[0][1])
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise ValueError(
            f"unknown setting(s) {', '.join(unknown)}; valid: {', '.join(sorted(FIELDS))} "
            f"and the {game} options {', '.join(sorted(options)) or '(none)'}"
        )
    return validate(Config(**values, game_options=game_options))


def _validate_best_by(config: Config) -> None:
    """best_by names a measure the run's evaluations log."""
    if config.best_by == "auto":
        return
    if not config.eval_interval:
        raise ValueError(f"best_by={config.best_by} ranks evaluations: it needs eval_interval > 0")
    if config.best_by == "opponent" and not config.eval_opponent:
        raise ValueError("best_by=opponent needs an eval_opponent to score against")
    if config.best_by == "elo" and not config.eval_ladder:
        raise ValueError("best_by=elo needs eval_ladder=true")
    if config.best_by == "error_rate":
        from azjax import solved  # here, as symmetry below: it brings in JAX and mctx

        if not config.eval_errors:
            raise ValueError("best_by=error_rate needs eval_errors=true")
        if not config.games and not os.path.exists(solved.set_path(config.make_game())):
            raise ValueError(
                "best_by=error_rate needs solved positions of the game; the package has sets "
                f"for {', '.join(solved.shipped())}"
            )
        if config.games:  # each game's @best ranks by its own error rate
            from azjax import shared

            unsolved = [
                name
                for name, c in shared.game_configs(config).items()
                if not os.path.exists(solved.set_path(c.make_game()))
            ]
            if unsolved:
                raise ValueError(
                    f"best_by=error_rate needs solved positions of every game of --games; "
                    f"{', '.join(unsolved)} has none (the package has sets for "
                    f"{', '.join(solved.shipped())})"
                )


# Expert Iteration's own settings (azjax/exit.py), refused in an AlphaZero run
EXIT_ONLY = (
    "value_target",
    "positions_per_game",
    "dataset",
    "dataset_size",
    "dataset_growth",
    "retrain_from_scratch",
    "early_stopping",
    "validation_fraction",
    "max_epochs",
    "exit_c_uct",
    "exit_prior_weight",
    "exit_prior_temperature",
)


# Settings that change nothing unless others say so: (field, the settings it depends on, whether
# it acts in a config, what it needs). Given on a command line where they do not act, they are
# refused (`ignored`). Self-play's root noise acts in AlphaZero's self-play alone (Expert
# Iteration's apprentice does not search, and evaluations search without noise). Not the search's
# own settings (c_puct, puct_values, max_considered_actions, the rollouts'), nor ExIt's expert's:
# a `ckpt:` agent takes them from a run's config where its spec overrides the search
# (`ckpt:RUN,search=puct` plays a Gumbel run with its c_puct), as `experiments.exit_expert
# --prior_weight` does exit_prior_temperature.
CONDITIONAL = (
    (
        "fast_simulations",
        ("full_search_prob",),
        lambda c: c.full_search_prob < 1,
        "full_search_prob < 1",
    ),
    (
        "resign_playout",
        ("resign_threshold",),
        lambda c: c.resign_threshold > 0,
        "resign_threshold > 0",
    ),
    ("gating_games", ("gating",), lambda c: c.gating > 0, "gating > 0"),
    (
        "gumbel_scale",
        ("search", "algorithm"),
        lambda c: c.search == "gumbel" and c.algorithm == "alphazero",
        "search=gumbel and algorithm=alphazero: self-play's noise",
    ),
    (
        "dirichlet_alpha",
        ("search", "algorithm"),
        lambda c: c.search == "puct" and c.algorithm == "alphazero",
        "search=puct and algorithm=alphazero: self-play's root noise",
    ),
    (
        "dirichlet_fraction",
        ("search", "algorithm"),
        lambda c: c.search == "puct" and c.algorithm == "alphazero",
        "search=puct and algorithm=alphazero: self-play's root noise",
    ),
    (
        "soft_policy_temperature",
        ("soft_policy_weight",),
        lambda c: c.soft_policy_weight > 0,
        "soft_policy_weight > 0",
    ),
    ("momentum", ("optimizer",), lambda c: c.optimizer == "sgd", "optimizer=sgd"),
    *(
        (name, ("early_stopping",), lambda c: c.early_stopping > 0, "early_stopping > 0")
        for name in ("validation_fraction", "max_epochs")
    ),
    (
        "train_steps",
        ("early_stopping",),
        lambda c: c.early_stopping == 0,
        "early_stopping=0: early stopping trains in epochs",
    ),
    ("gating_interval", ("gating",), lambda c: c.gating > 0, "gating > 0"),
    *(
        (name, ("eval_opponent",), lambda c: bool(c.eval_opponent), "an eval_opponent")
        for name in ("eval_opponent_games", "eval_opponent_sims", "eval_opponent_decisive")
    ),
    # the in-loop evaluation's own settings (eval_epsilon and eval_ladder_max_sims are also
    # `evaluate.py curve`'s defaults for the run, so they count without it); a switch turned off
    # changes nothing either way
    *(
        (name, ("eval_interval",), lambda c: c.eval_interval > 0, "eval_interval > 0")
        for name in ("eval_games", "eval_budget", "eval_compile_ahead", "eval_opening_plies")
    ),
    *(
        (
            name,
            ("eval_interval",),
            lambda c, name=name: c.eval_interval > 0 or not getattr(c, name),
            "eval_interval > 0",
        )
        for name in ("eval_final", "eval_ladder", "eval_errors")
    ),
)


def _shown(value) -> str:
    """A setting's value as a flag gives it ('' for the empty string)."""
    return repr(value) if value == "" else str(value)


def ignored(config: Config, given) -> list[str]:
    """'--FIELD changes nothing with OTHER=VALUE (it needs WHAT)' for each setting of `given` (the
    names a user set) that changes nothing in `config` (CONDITIONAL)."""
    return [
        f"--{name} changes nothing with "
        f"{', '.join(f'{o}={_shown(getattr(config, o))}' for o in others)} (it needs {needs})"
        for name, others, acts, needs in CONDITIONAL
        if name in given and not acts(config)
    ]


def validate(config: Config) -> Config:
    """Check every field against its metadata, and the game options by building the game."""
    for name, f in FIELDS.items():
        value = getattr(config, name)
        meta = f.metadata
        kind = type(f.default)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            article = "an" if kind is int else "a"
            raise ValueError(f"{name} must be {article} {kind.__name__}, got {value!r}")
        if kind is float and not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
        if meta["choices"] is not None and value not in meta["choices"]:
            accepted = ", ".join(map(str, meta["choices"]))
            hint = (  # a run of a registered game, read where it is not registered
                " (a game of your own: register it, e.g. $AZJAX_GAMES=NAME=module:Class; "
                "docs/adding_a_game.md)"
                if name == "game"
                else ""
            )
            raise ValueError(f"{name} must be one of {accepted}; got {value!r}{hint}")
        if meta["low"] is not None and value < meta["low"]:
            raise ValueError(f"{name} must be >= {meta['low']}, got {value!r}")
        if meta["high"] is not None and value > meta["high"]:
            raise ValueError(f"{name} must be <= {meta['high']}, got {value!r}")
    config.make_game()  # the game names bad options and values itself
    if config.games:
        _validate_shared(config)
    if config.full_search_prob < 1 and not 1 <= config.fast_simulations < config.num_simulations:
        raise ValueError(
            f"fast_simulations must be in 1..{config.num_simulations - 1} (below num_simulations) "
            f"with full_search_prob={config.full_search_prob}, got {config.fast_simulations}"
        )
    if config.policy_target == "improved" and (
        config.algorithm != "alphazero" or config.search != "puct" or config.full_search_prob < 1
    ):
        raise ValueError(
            "policy_target=improved needs algorithm=alphazero, search=puct (Gumbel's own target "
            "is it already) and full_search_prob=1 (each move's tree); got "
            f"algorithm={config.algorithm}, search={config.search}, "
            f"full_search_prob={config.full_search_prob}"
        )
    if config.tree_reuse and (
        config.algorithm != "alphazero" or config.search != "puct" or config.full_search_prob < 1
    ):
        raise ValueError(
            "tree_reuse needs algorithm=alphazero, search=puct and full_search_prob=1 (every "
            f"move's tree); got algorithm={config.algorithm}, search={config.search}, "
            f"full_search_prob={config.full_search_prob}"
        )
    if config.net_symmetries > 1 and (config.games or config.algorithm != "alphazero"):
        raise ValueError(
            "net_symmetries needs algorithm=alphazero on one game (not Expert Iteration's expert "
            "or shared learning)"
        )
    if config.full_search_prob < 1 and config.algorithm != "alphazero":
        raise ValueError(
            "full_search_prob < 1 needs algorithm=alphazero (Expert Iteration's expert searches "
            "every position it labels with num_simulations, and its apprentice does not search)"
        )
    if config.resign_threshold and config.algorithm != "alphazero":
        raise ValueError(
            "resign_threshold needs algorithm=alphazero (Expert Iteration's apprentice games "
            "are played out)"
        )
    if config.decisive_moves and config.algorithm != "alphazero":
        raise ValueError(
            "decisive_moves needs algorithm=alphazero (Expert Iteration's expert searches "
            "without them)"
        )
    if config.net_symmetries > 1:
        from azjax.symmetry import check_count

        check_count(config.make_game(), config.net_symmetries, "net_symmetries")
    if config.eval_games % 2:
        raise ValueError(f"eval_games must be even so colours alternate, got {config.eval_games}")
    if config.iterations == 0 and not config.time_budget:
        raise ValueError("iterations=0 (no limit) needs a time_budget to end the run")
    _check_opening_plies(config.make_game(), config.eval_opening_plies)
    longest = config.make_game().max_game_length
    if config.algorithm == "exit" and config.positions_per_game > longest:
        raise ValueError(
            f"positions_per_game must be in 1..{longest} for {config.game} (its longest game, "
            f"in plies), got {config.positions_per_game}"
        )
    if config.early_stopping and config.batch_games < 2:
        raise ValueError(
            f"early_stopping holds out some of batch_games' game slots for its validation loss "
            f"and trains on the others: it needs batch_games >= 2, got {config.batch_games}"
        )
    if config.eval_opponent and not config.eval_interval:
        raise ValueError("eval_opponent is played at each evaluation: it needs eval_interval > 0")
    if config.eval_opponent_games % 2:
        raise ValueError(
            f"eval_opponent_games must be even so colours alternate, got "
            f"{config.eval_opponent_games}"
        )
    _validate_best_by(config)
    if not config.gating < 1:
        raise ValueError(f"gating must be in [0, 1) (0: off; e.g. 0.55), got {config.gating!r}")
    if config.gating_games % 2:
        raise ValueError(
            f"gating_games must be even so colours alternate, got {config.gating_games}"
        )
    exit_only = [n for n in EXIT_ONLY if getattr(config, n) != FIELDS[n].default]
    if exit_only and config.algorithm != "exit":  # they would change nothing
        raise ValueError(
            f"{', '.join(exit_only)}: Expert Iteration's setting{'s' * (len(exit_only) > 1)}, "
            f"{'they need' if len(exit_only) > 1 else 'it needs'} algorithm=exit"
        )
    if config.dataset_size != FIELDS["dataset_size"].default and config.dataset == "batch":
        raise ValueError(
            "dataset_size is online_buffer's and online_grow's: dataset=batch trains on each "
            "iteration's positions alone"
        )
    if (
        config.dataset_growth != FIELDS["dataset_growth"].default
        and config.dataset != "online_grow"
    ):
        raise ValueError(f"dataset_growth needs dataset=online_grow, got dataset={config.dataset}")
    if config.value_target_mix and config.algorithm != "alphazero":
        raise ValueError(
            "value_target_mix needs algorithm=alphazero (Expert Iteration's value target is "
            "value_target=rollout or search)"
        )
    if config.value_lambda < 1 and config.algorithm != "alphazero":
        raise ValueError(
            "value_lambda < 1 needs algorithm=alphazero (Expert Iteration's value target is "
            "value_target=rollout or search)"
        )
    if config.value_lambda < 1 and config.value_target_mix:
        raise ValueError(
            "value_lambda < 1 and value_target_mix > 0 both put the root values into the value "
            "target: set one (value_lambda=1 or value_target_mix=0)"
        )
    if config.ownership_weight and config.algorithm != "alphazero":
        raise ValueError(
            "ownership_weight needs algorithm=alphazero (Expert Iteration's apprentice has no "
            "ownership target): pass --ownership_weight=0 (the CPU recipe sets 1.5 for Hex and "
            "Othello)"
        )
    if config.ownership_weight and config.games:
        raise ValueError(
            "ownership_weight is for a run on one game, not shared learning (games): pass "
            "--ownership_weight=0 (the CPU recipe sets 1.5 for Hex and Othello)"
        )
    if config.soft_policy_weight and config.algorithm != "alphazero":
        raise ValueError("soft_policy_weight needs algorithm=alphazero")
    if config.opponent_policy_weight and config.algorithm != "alphazero":
        raise ValueError("opponent_policy_weight needs algorithm=alphazero")
    if config.policy_surprise and config.algorithm != "alphazero":
        raise ValueError(
            "policy_surprise needs algorithm=alphazero (Expert Iteration's apprentice samples "
            "its replay uniformly)"
        )
    if config.score_utility and not config.ownership_weight:
        raise ValueError(
            "score_utility reads the ownership head: it needs ownership_weight > 0 (e.g. 1.5, "
            "the CPU recipe's for Hex and Othello)"
        )
    if config.fpu_reduction and (config.search != "puct" or config.puct_values != "raw"):
        raise ValueError(
            f"fpu_reduction ({config.fpu_reduction}) needs search=puct and puct_values=raw, got "
            f"search={config.search}, puct_values={config.puct_values}"
        )
    if config.forced_playouts and config.search != "puct":
        raise ValueError(
            f"forced_playouts ({config.forced_playouts}) needs search=puct, got "
            f"search={config.search} (Gumbel's root has its own sequential halving)"
        )
    if config.score_utility and config.evaluator != "network":
        raise ValueError("score_utility needs evaluator=network (the ownership head)")
    root_value = [  # what reads the search's root value as the game's
        name
        for name, on in (
            ("value_target_mix", config.value_target_mix > 0),
            ("value_lambda < 1", config.value_lambda < 1),
            ("resign_threshold", config.resign_threshold > 0),
        )
        if on
    ]
    if config.score_utility and root_value:
        raise ValueError(
            f"score_utility with {', '.join(root_value)}: the search's root value blends in the "
            "score, and these read it as the game's value (the value head would learn the score, "
            "resignation compare it); give score_utility=0 or leave them off"
        )
    if config.gating and config.algorithm != "alphazero":
        raise ValueError("gating needs algorithm=alphazero (Expert Iteration has no gate)")
    if half_rollouts(config.rollout_policy, config.rollout_prob):
        raise ValueError(
            "rollouts need both rollout_policy (random or policy) and rollout_prob (p_r > 0), "
            f"got rollout_policy={config.rollout_policy} rollout_prob={config.rollout_prob:g}: "
            "that plays none"
        )
    no_rollouts = config.rollout_policy == "none"
    if config.score_utility and not no_rollouts:
        raise ValueError(
            "score_utility with rollouts: a rollout's result is the outcome, not the score the "
            "leaf values are blended with; give rollout_policy=none rollout_prob=0, or "
            "score_utility=0"
        )
    if config.evaluator == "uniform" and no_rollouts:
        raise ValueError(
            "evaluator=uniform needs rollouts (rollout_policy=random or policy, "
            "rollout_prob > 0): a uniform evaluator alone has no value signal"
        )
    if config.rollout_policy == "policy" and config.evaluator == "uniform":
        raise ValueError("rollout_policy=policy needs the network (evaluator=network)")
    if config.freeze_trunk and not config.init_from:
        raise ValueError("freeze_trunk needs init_from=RUN[@STEP]: nothing to transfer")
    if config.init_from and config.algorithm == "exit" and config.retrain_from_scratch:
        raise ValueError(
            "init_from with retrain_from_scratch: the apprentice is initialised afresh every "
            "iteration, so nothing would be transferred"
        )
    return config


def _check_opening_plies(game, plies: int, name: str = "") -> None:
    """eval_opening_plies against a game of the run (`name`: a shared run's game, for the
    message)."""
    whose = f"{name}'s" if name else "the game's"
    if plies and not game.alternating:
        raise ValueError(
            "eval_opening_plies needs a game whose players alternate (Hex's swap rule breaks it"
            f"{f'; {name} has it' if name else ''})"
        )
    if plies >= game.max_game_length:
        raise ValueError(
            f"eval_opening_plies must be under {whose} longest length ({game.max_game_length} "
            f"plies), got {plies}"
        )


def _validate_shared(config: Config) -> None:
    """A shared run (azjax/shared.py): a valid list of games whose first is `game`, a trunk to
    share, and none of the settings it does not support."""
    from azjax.shared import parse_games

    first, options = parse_games(config.games)[0]
    if (config.game, dict(config.game_options)) != (first, options):
        raise ValueError(
            f"games={config.games}: game must be the first of them ({first} {options}), got "
            f"{config.game} {dict(config.game_options)}"
        )
    for name, options in parse_games(config.games)[1:]:  # the first's: validate's own check
        _check_opening_plies(games.make(name, **options), config.eval_opening_plies, name)
    if config.num_blocks < 1:
        raise ValueError("games needs num_blocks >= 1: the residual blocks are what is shared")
    if config.algorithm != "alphazero":
        raise ValueError("games needs algorithm=alphazero (Expert Iteration trains one game)")
    if config.init_from:
        raise ValueError("games with init_from: a shared run starts from a fresh network")
    if config.eval_opponent:
        raise ValueError(
            "games with eval_opponent: the opponent plays one game's network, not a shared run's "
            "(measure a shared run's checkpoints with evaluate.py match ckpt:RUN,game=NAME)"
        )
