"""pgx's AlphaZero example trained for a wall-clock budget, and judged on azjax's solved positions:
strength per hour against the project's own recipe, on the same machine.

    python -m experiments.pgx_recipe train --game=connect_four --minutes=20 --out=runs/pgx-c4
    python -m experiments.pgx_recipe errors runs/pgx-c4 --sims=50
    python -m experiments.pgx_recipe match runs/pgx-c4 ckpt:runs/c4,sims=50 --openings=random:50:4
    python evaluate.py errors ckpt:runs/c4,sims=50 --game=connect_four     # azjax's run beside it
    python -m experiments.pgx_recipe train --game=hex --size=6 --minutes=20 --out=runs/pgx-hex6
    python -m experiments.pgx_recipe train --game=othello --minutes=20 --out=runs/pgx-othello8
    python -m experiments.pgx_recipe place runs/pgx-othello8 --games=16  # on the ladder

The recipe is the one `benchmarks/selfplay.py` times (pgx's `examples/alphazero/train.py`, its
Haiku network swapped for azjax's ResNet): Gumbel MuZero search (`mctx.gumbel_muzero_policy`,
Gumbel scale 1, completed Q-values) over pgx's environment, each iteration `--batch` games from
the start for `--steps` moves (finished games restart; a game cut off gets no value target), the
value target the game's outcome, the policy target the search's improved policy, every sample used
once in minibatches of `--train_batch`, Adam at `--lr`. The example's sizes are a GPU's (1,024
games, 4,096 samples a step, 6 x 128 network); the defaults here are the CPU recipe's
(configs/cpu.py: 128 games, 32 simulations, 2 x 32 network) with the example's learning rate,
and 256 samples a step so that an iteration takes about as many steps as the CPU recipe's. The
example plays 256 moves an iteration; `--steps` is 64 here, so more games are cut off without a
value target (with random play 17% of the samples on Connect Four, 27% on 6 x 6 Hex, against 4%
and 6% at 256; docs/strength.md, "Against pgx's AlphaZero example").

Games: Connect Four, Tic-Tac-Toe and 8 x 8 Othello as pgx has them, and Hex at any `--size` without
the swap move (pgx's Hex has one, legal at the second ply; azjax's Hex and its solved sets are
without it, so it is masked here; `sized_hex` also gives pgx 2.6's Hex the size's starting board,
which it lacks). pgx's Othello is 8 x 8 only and ends on a second pass where azjax's ends after
the move that leaves neither side a move: the same positions and winners, two forced passes more.

`errors` and `match` play the trained network in azjax's game, through azjax's Gumbel search at
`--sims` simulations (the recipe's algorithm, mctx's `gumbel_muzero_policy`, without noise): the
network reads azjax's observation mapped to pgx's planes (`Pairing.to_pgx`: the first two planes
for Connect Four and Tic-Tac-Toe; for Hex also untransposed for white, azjax's frame, with pgx's
colour and swap planes), its logits mapped back (`Pairing.to_azjax`), and the planes and legal
moves are checked equal to pgx's at every solved position, each replayed through pgx's
environment (where the game has no solved set, as Hex above 6 x 6, at positions of random games:
`check_lines`). `errors` prints the share of the game's shipped solved positions
(`azjax.solved`) where its move throws a win or a draw away, as `evaluate.py errors` does for
azjax's agents; `match` plays it against any agent of `evaluate.py` (`azjax.eval.specs`), each
opening with both colours, and prints A's (the pgx network's) score; `place` rates it on the
game's ladder of pure MCTS (`azjax/ladders`) as `evaluate.py place` rates azjax's agents.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import games
from azjax import cli, flags
from azjax import solved as sv
from azjax.eval import openings as openings_lib
from azjax.eval.agent import SearchSetup, search_agent
from azjax.eval.errors import choose_moves
from azjax.eval.ladder import place_agent, require_ladder
from azjax.eval.match import play_games
from azjax.eval.specs import parse_agent
from azjax.interrupt import Interrupted, StopSignals
from azjax.ladder import Placement, off_scale, parse_rounds
from azjax.network import PolicyValueNet
from azjax.search import SearchSpec
from benchmarks.selfplay import RecipeOutput, make_recipe_selfplay

PROG = "python -m experiments.pgx_recipe"  # as its errors are named (cli.fail)

PGX_NAMES = {  # azjax's name -> pgx's
    "connect_four": "connect_four",
    "hex": "hex",
    "othello": "othello",
    "tictactoe": "tic_tac_toe",
}
SIZED = ("hex",)  # the games `--size` applies to (pgx's others have one size; Othello 8 x 8)


@dataclasses.dataclass(frozen=True)
class Pairing:
    """An azjax game and the pgx environment the example trains on, with the maps between them.

    `to_pgx(obs[..., H, W, C]) -> obs[..., H, W, C']`: azjax's observation as pgx's (checked equal
    at every solved position by `pgx_agent`); `to_azjax(logits[..., A'], obs) -> logits[..., A]`:
    the network's logits over pgx's actions as logits in azjax's policy frame.
    """

    game: Any  # azjax's game
    env: Any  # pgx's environment: init, step, num_actions
    to_pgx: Callable
    to_azjax: Callable


def sized_hex(size: int):
    """pgx's Hex on a size x size board, without its swap move (azjax's Hex is without it).

    pgx 2.6's `Hex(size=...)` keeps its 11 x 11 starting board and legal mask whatever the size
    (it fails at any other); the subclass starts from the size's, the rules otherwise pgx's."""
    from pgx._src.games.hex import GameState
    from pgx.hex import Hex

    def no_swap(state):
        return state.replace(legal_action_mask=state.legal_action_mask.at[-1].set(False))

    class SizedHex(Hex):
        def _init(self, key):
            state = super()._init(key)
            cells = jnp.zeros(size * size, jnp.int32)
            return no_swap(
                state.replace(
                    legal_action_mask=jnp.ones(size * size + 1, jnp.bool_),
                    _x=GameState(board=cells),
                )
            )

        def _step(self, state, action, key):
            return no_swap(super()._step(state, action, key))

    return SizedHex(size=size)


def hex_to_pgx(obs):
    """azjax's Hex planes [..., n, n, 3] (own, opponent's, mover-is-black; transposed for white) as
    pgx's [..., n, n, 4] (own, opponent's, mover-is-white, swap-is-legal; never transposed)."""
    white = obs[..., :1, :1, 2:3] == 0
    stones = jnp.where(white, jnp.swapaxes(obs[..., :2], -3, -2), obs[..., :2])
    one_stone = jnp.sum(stones, axis=(-3, -2, -1), keepdims=True) == 1
    planes = [white, one_stone]
    return jnp.concatenate([stones, *(jnp.broadcast_to(x, obs[..., :1].shape) for x in planes)], -1)


def hex_to_azjax(logits, obs):
    """pgx's Hex logits [..., n * n + 1] as azjax's [..., n * n]: the swap dropped, transposed for
    white (azjax's frame)."""
    n = obs.shape[-2]
    cells = logits[..., : n * n].reshape((*logits.shape[:-1], n, n))
    white = obs[..., :1, :1, 2] == 0
    cells = jnp.where(white, jnp.swapaxes(cells, -2, -1), cells)
    return cells.reshape((*logits.shape[:-1], n * n))


def pairing(name: str, size: int | None = None) -> Pairing:
    """The pairing of azjax's game `name` (at `size` where it has one) with pgx's environment."""
    import pgx

    if name not in SIZED and size is not None:
        raise ValueError(f"--size: only {', '.join(SIZED)} has a size here, not {name}")
    fixed = {"size": 8} if name == "othello" else {}  # pgx's Othello is 8 x 8 only
    game = games.make(name, **(fixed if size is None else {"size": size}))
    if name == "hex":
        return Pairing(game, sized_hex(game.size), hex_to_pgx, hex_to_azjax)
    return Pairing(game, pgx.make(PGX_NAMES[name]), lambda obs: obs[..., :2], lambda x, obs: x)


class Sample(NamedTuple):
    """The example's training sample, [N] after flattening moves and games."""

    obs: jax.Array  # [N, H, W, C], pgx's observation
    policy: jax.Array  # float32[N, A], the search's improved policy
    value: jax.Array  # float32[N], the outcome for the mover
    mask: jax.Array  # bool[N], the game ended within the iteration (else no value target)


def samples_of(data: RecipeOutput) -> Sample:
    """The example's `compute_loss_input`: outcomes summed back from each game's end, [T, B]."""

    def back(carry, step):
        reward, discount = step
        value = reward + discount * carry
        return value, value

    _, value = jax.lax.scan(
        back, jnp.zeros_like(data.reward[0]), (data.reward, data.discount), reverse=True
    )
    ended = jnp.cumsum(data.terminated[::-1], axis=0)[::-1] >= 1

    def flat(x):
        return x.reshape((-1, *x.shape[2:]))

    return Sample(flat(data.obs), flat(data.action_weights), flat(value), flat(ended))


def minibatches(samples: Sample, key, size: int) -> Sample:
    """The samples shuffled into [K, size, ...], K = N // size (the rest left out), as the example
    does: every sample used at most once."""
    count = samples.value.shape[0] // size * size
    order = jax.random.permutation(key, samples.value.shape[0])[:count]
    return jax.tree.map(lambda x: x[order].reshape((-1, size, *x.shape[1:])), samples)


def make_network(num_actions: int, blocks: int, filters: int) -> PolicyValueNet:
    return PolicyValueNet(
        num_actions=num_actions, num_blocks=blocks, num_filters=filters, value_hidden=filters
    )


def make_train_step(net: PolicyValueNet, optimizer):
    """step(variables, opt_state, Sample[M]) -> (variables, opt_state, (policy, value) losses)."""

    def loss_fn(params, batch_stats, batch: Sample):
        (logits, value), updates = net.apply(
            {"params": params, "batch_stats": batch_stats},
            batch.obs,
            train=True,
            mutable=["batch_stats"],
        )
        policy_loss = jnp.mean(optax.softmax_cross_entropy(logits, batch.policy))
        value_loss = jnp.mean(optax.l2_loss(value, batch.value) * batch.mask)
        return policy_loss + value_loss, (updates["batch_stats"], policy_loss, value_loss)

    @jax.jit
    def step(variables, opt_state, batch: Sample):
        grads, (batch_stats, policy_loss, value_loss) = jax.grad(loss_fn, has_aux=True)(
            variables["params"], variables["batch_stats"], batch
        )
        updates, opt_state = optimizer.update(grads, opt_state)
        params = optax.apply_updates(variables["params"], updates)
        return {"params": params, "batch_stats": batch_stats}, opt_state, (policy_loss, value_loss)

    return step


def train(args, env) -> dict:
    """The example's loop for `args.minutes` over pgx's `env`; writes variables.pkl and run.json
    into args.out (an earlier run's two removed first). A signal stops it after the iteration
    under way; the two files then keep what it trained, run.json saying `"stopped": true`."""
    for name in ("run.json", "variables.pkl"):  # never taken for this run's, should it stop
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(args.out, name))
    net = make_network(env.num_actions, args.blocks, args.filters)

    def apply(variables, obs):
        return net.apply(variables, obs, train=False)

    selfplay = jax.jit(make_recipe_selfplay(env, apply, args.sims, args.steps))
    init = jax.jit(jax.vmap(env.init))
    optimizer = optax.adam(args.lr)
    step = make_train_step(net, optimizer)
    key = jax.random.PRNGKey(args.seed)
    key, k_env, k_net = jax.random.split(key, 3)
    obs = init(jax.random.split(k_env, 2)).observation
    variables = net.init(k_net, obs.astype(jnp.float32))
    opt_state = optimizer.init(variables["params"])
    start, iteration, positions, losses = time.time(), 0, 0, (0.0, 0.0)
    stop = StopSignals("stopping after the iteration under way, keeping what it trained")
    with stop:
        while time.time() - start < 60 * args.minutes and not stop.signum:
            key, k_init, k_play, k_shuffle = jax.random.split(key, 4)
            states = init(jax.random.split(k_init, args.batch))
            _, data = selfplay(variables, k_play, states)
            samples = samples_of(data)
            batches = minibatches(samples, k_shuffle, args.train_batch)
            for i in range(batches.value.shape[0]):
                batch = jax.tree.map(lambda x, i=i: x[i], batches)
                variables, opt_state, losses = step(variables, opt_state, batch)
            iteration += 1
            positions += int(samples.value.shape[0])
            if not np.isfinite(float(losses[0]) + float(losses[1])):
                raise FloatingPointError(f"the loss is not finite at iteration {iteration}")
    record = {
        "game": args.game,
        **({} if args.size is None else {"size": args.size}),
        "minutes": args.minutes,
        "seconds": round(time.time() - start, 1),
        "iterations": iteration,
        "positions": positions,
        "policy_loss": float(losses[0]),
        "value_loss": float(losses[1]),
        **{k: getattr(args, k) for k in ("batch", "sims", "steps", "train_batch", "lr")},
        **{k: getattr(args, k) for k in ("blocks", "filters", "seed")},
        **({"stopped": True} if stop.signum else {}),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "variables.pkl"), "wb") as f:
        pickle.dump(jax.device_get(variables), f)
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(record, f, indent=1)
    if stop.signum:
        raise Interrupted(
            stop.signum,
            f'{args.out} keeps the {iteration} iterations trained (run.json: "stopped": true)',
        )
    return record


@dataclasses.dataclass(frozen=True)
class Replayed:
    """pgx's environment as `azjax.solved.start_states` replays a position: init() and step()."""

    env: Any

    def init(self):
        return self.env.init(jax.random.PRNGKey(0))  # the games here draw nothing

    def step(self, state, action):
        return self.env.step(state, action)


def load_record(folder: str) -> dict:
    """run.json's record of a folder `train` wrote."""
    with open(os.path.join(folder, "run.json")) as f:
        return json.load(f)


def load_run(folder: str):
    """(run.json's record, the network's variables) of a folder `train` wrote."""
    with open(os.path.join(folder, "variables.pkl"), "rb") as f:
        return load_record(folder), pickle.load(f)


class Loaded(NamedTuple):
    """A trained run, ready to play in azjax's game."""

    game: Any  # azjax's game of the run
    solved: sv.SolvedSet | None  # the game's shipped solved positions; None where it has none
    states: Any  # the positions checked (the set's where there is one), azjax's states, a batch
    agent: Any  # the network as an azjax search agent


def check_lines(game, key) -> list[tuple[int, ...]]:
    """Lines of random legal moves, four of each length 0, 4, 8, ... below half the game's
    longest, none of them finished: where pgx's planes and legal moves are checked against
    azjax's in a game without a solved set."""
    lengths = range(0, game.max_game_length // 2, 4)
    return [
        line
        for i, plies in enumerate(lengths)
        for line in openings_lib.random_sequences(
            game, 4, plies, jax.random.fold_in(key, i), distinct=False
        )
    ]


def pgx_agent(folder: str, sims: int) -> Loaded:
    """The network `train` wrote into `folder` as an azjax search agent (Gumbel at `sims`) over
    its game; ValueError where pgx's legal moves or planes differ from azjax's (through the
    pairing's map) at the game's solved positions (at `check_lines`' where it has none)."""
    record, variables = load_run(folder)
    pair = pairing(record["game"], record.get("size"))
    game = pair.game
    net = make_network(pair.env.num_actions, record["blocks"], record["filters"])
    solved = sv.load_set(game)
    lines = check_lines(game, jax.random.PRNGKey(0)) if solved is None else solved.moves
    theirs = sv.replay(Replayed(pair.env), lines)
    ours = sv.replay(game, lines)
    legal = np.asarray(jax.vmap(game.legal_mask)(ours))
    pgx_legal = np.asarray(theirs.legal_action_mask)
    if (
        not np.array_equal(pgx_legal[:, : legal.shape[1]], legal)
        or pgx_legal[:, legal.shape[1] :].any()
    ):
        raise ValueError("pgx's legal moves differ from azjax's at the positions checked")
    obs = jax.vmap(game.observe)(ours)
    if not np.array_equal(np.asarray(pair.to_pgx(obs)), np.asarray(theirs.observation, obs.dtype)):
        raise ValueError("azjax's observation, mapped, differs from pgx's planes")

    def apply(variables, obs, with_ownership: bool = False):
        del with_ownership
        logits, value = net.apply(variables, pair.to_pgx(obs), train=False)
        return pair.to_azjax(logits, obs), value

    setup = SearchSetup(game, SearchSpec(search="gumbel", num_simulations=sims), apply)
    agent = search_agent(f"pgx:{folder},sims={sims}", setup, variables)
    return Loaded(game, solved, ours, agent)


def match(args) -> dict:
    """The trained network (A) against `args.opponent` from `args.openings`, both colours each."""
    run = pgx_agent(args.run, args.sims)
    b = parse_agent(args.opponent, run.game, seed=args.seed)
    k_open, k_play = jax.random.split(jax.random.PRNGKey(args.seed))
    moves = openings_lib.openings(run.game, args.openings, k_open)
    starts = openings_lib.both_colours(moves)
    outcome = play_games(run.game, run.agent, b, len(starts), k_play, openings=starts)
    returns = np.asarray(outcome.returns)
    return dict(
        games=len(returns),
        wins=int((returns > 0).sum()),
        draws=int((returns == 0).sum()),
        losses=int((returns < 0).sum()),
        score=float((returns + 1).mean() / 2),
    )


def errors(args) -> sv.ErrorRate:
    """The trained network's exact error rate on the game's shipped solved positions; ValueError
    before the network is loaded and checked where its game has none."""
    record = load_record(args.run)
    game = pairing(record["game"], record.get("size")).game
    if sv.load_set(game) is None:
        have = ", ".join(sorted(sv.shipped()))
        raise ValueError(f"no solved positions for {game.name} {game.options} ({have} have)")
    run = pgx_agent(args.run, args.sims)
    key = jax.random.PRNGKey(0)
    return sv.error_rate(run.solved, choose_moves(run.game, run.agent, run.solved, run.states, key))


def place(args) -> Placement:
    """The trained network's Elo on its game's ladder of pure MCTS (`evaluate.py place`'s)."""
    rounds = parse_rounds(args.rounds)
    if args.games < 1:
        raise ValueError(f"--games must be >= 1, got {args.games}")
    run = pgx_agent(args.run, args.sims)
    ladder = require_ladder(run.game)
    return place_agent(
        run.game,
        run.agent,
        ladder,
        rounds=rounds.count,
        settle=rounds.settle,
        games_per_rung=args.games,
        key=jax.random.PRNGKey(args.seed),
        log=lambda text: print(text, flush=True),
    )


def main(argv=None) -> int:
    p = flags.Parser(module=__spec__.name, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train the recipe for --minutes")
    t.add_argument("--game", choices=sorted(PGX_NAMES), default="connect_four")
    t.add_argument("--size", type=int, help="the board's size (hex only; azjax's default 11)")
    t.add_argument("--minutes", type=float, default=20.0, help="wall-clock budget (20)")
    t.add_argument(
        "--out", type=flags.path, required=True, help="folder for variables.pkl and run.json"
    )
    t.add_argument("--batch", type=int, default=128, help="self-play games an iteration (128)")
    t.add_argument("--sims", type=int, default=32, help="simulations a move (32)")
    t.add_argument("--steps", type=int, default=64, help="moves an iteration (64)")
    t.add_argument("--train_batch", type=int, default=256, help="samples a step (256)")
    t.add_argument("--lr", type=float, default=0.001, help="Adam's learning rate (0.001)")
    t.add_argument("--blocks", type=int, default=2, help="residual blocks (2)")
    t.add_argument("--filters", type=int, default=32, help="filters (32)")
    t.add_argument("--seed", type=flags.seed, default=0)
    e = sub.add_parser("errors", help="the trained network's exact error rate")
    e.add_argument("run", help="a folder written by train")
    e.add_argument("--sims", type=int, default=50, help="simulations a move (50)")
    m = sub.add_parser("match", help="the trained network against an evaluate.py agent")
    m.add_argument("run", help="a folder written by train")
    m.add_argument("opponent", help="an agent of evaluate.py, e.g. ckpt:runs/c4,sims=50")
    m.add_argument("--sims", type=int, default=50, help="the network's simulations a move (50)")
    m.add_argument("--openings", default="random:50:4", help="random:N[:PLIES] or all")
    m.add_argument("--seed", type=flags.seed, default=0)
    r = sub.add_parser("place", help="the trained network's Elo on the game's ladder")
    r.add_argument("run", help="a folder written by train")
    r.add_argument("--sims", type=int, default=50, help="the network's simulations a move (50)")
    r.add_argument(
        "--rounds", default="auto", help="auto (4, then until settled) or a whole number"
    )
    r.add_argument("--games", type=int, default=16, help="games per rung and round (16)")
    r.add_argument("--seed", type=flags.seed, default=0)
    args = p.parse_args(argv)
    if args.command == "train":
        small = [
            n
            for n in ("batch", "sims", "steps", "train_batch", "blocks", "filters")
            if getattr(args, n) < 1
        ]
        if small:
            p.error(f"--{small[0]} must be positive, got {getattr(args, small[0])}")
        for name in ("minutes", "lr"):
            if not 0 < getattr(args, name) < float("inf"):
                p.error(f"--{name} must be positive and finite, got {getattr(args, name)}")
        if args.batch * args.steps < args.train_batch:
            p.error("--train_batch must be at most --batch x --steps (the samples an iteration)")
        try:
            env = pairing(args.game, args.size).env
            flags.check_out(args.out)  # before the training, which would be lost
        except ValueError as err:
            p.error(str(err))
        record = train(args, env)
        print(json.dumps(record))
        return 0
    if args.sims < 1:
        p.error("--sims must be positive")
    try:
        if args.command == "match":
            if args.openings == "none":
                raise ValueError("--openings: give random:N[:PLIES] or all (each played twice)")
            r = match(args)
            line = (
                f" against {args.opponent}: W{r['wins']} D{r['draws']} L{r['losses']} "
                f"of {r['games']}, score {r['score']:.3f}"
            )
        elif args.command == "place":
            at = place(args)
            bound = {
                1: " (won every game at the top rung: a lower bound)",
                -1: " (lost every game at the bottom rung: an upper bound)",
            }.get(off_scale(at), "")
            line = f": {at.said()}{bound}"
        else:
            rate = errors(args)
            line = (
                f": {rate.errors} errors of {rate.positions} solved positions, "
                f"{rate.rate:.4f} ± {rate.ci95:.4f}"
            )
    except (OSError, KeyError, ValueError, pickle.UnpicklingError) as err:
        return cli.fail(PROG, f"{args.run}: {err}")
    print(f"{args.run} at {args.sims} simulations{line}")
    return 0


if __name__ == "__main__":
    sys.exit(cli.script("experiments.pgx_recipe", main))
