"""What a run needs in memory, checked before it starts (`check_memory`): an estimate per part
(replay buffer, network and optimizer, self-play trajectories, search trees, training
activations, evaluation matches) from shapes alone, against the device's limit or the host's
memory (a cgroup's limit included); a run that cannot fit is refused with the largest part, the
flags that size it and, where that part grows in proportion to its first flag, a value of that
flag that would fit.

The replay buffer and the network are held for the whole run; the other parts are one phase's
temporaries each (self-play: its trajectories and trees; learning: its activations; evaluation:
its matches' trees), freed before the next phase starts, so the run needs the held parts plus the
largest phase."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, NamedTuple

import jax
import numpy as np

from azjax.config import Config
from azjax.search import bytes_per_tree, chunk_games

if TYPE_CHECKING:
    from azjax.loop import Iteration

HELD = ("replay buffer", "network and optimizer")  # the run's whole life
PHASES = {  # one phase at a time
    "self-play": ("self-play trajectories", "search trees"),
    "learning": ("training activations",),
    "evaluation": ("evaluation matches",),
}
FIT_MARGIN = 0.98  # a suggested value's share of what would just fit
UNLIMITED = 1 << 60  # a cgroup limit at least this large is no limit (v1 writes 2^63 - 4096)


class Part(NamedTuple):
    """A part's bytes on each device and the flags that size it, the first the one it grows
    with in proportion (`check_memory`'s suggestion) where `linear`."""

    nbytes: int
    flags: str
    linear: bool = False


def _nbytes(tree) -> int:
    return sum(
        math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(tree)
    )


def memory_estimate(config: Config, fns: Iteration, devices: int) -> dict[str, Part]:
    """{part: Part(bytes on each device, the flags that size it, ...)}: what the run allocates
    for each, from shapes alone (nothing is allocated): the trajectories as compiled, the trees
    within a few per cent of the compiled self-play's temporaries (a reviewer's memory analysis
    of Connect Four and 6x6 Othello), XLA's other temporaries on top.

    A shared run (`--games`, azjax/shared.py) holds every game's replay buffer at once (their
    sum), but plays one game's self-play after the other and trains on one game's replay after
    the other: its trajectories, search trees and training activations are the largest game's,
    whatever the order of the list."""
    buffers = jax.eval_shape(fns.init_buffer)
    run = jax.eval_shape(fns.init_run)
    exit_ = config.algorithm == "exit"
    if config.games:
        from azjax import shared  # it imports azjax.loop, which imports this module

        per_game = [_game_parts(c, devices) for c in shared.game_configs(config).values()]
        played = {part: max(parts[part] for parts in per_game) for part in per_game[0]}
    elif exit_:
        played = _exit_parts(config, devices)
    else:
        played = _game_parts(config, devices)
    if exit_:  # the dataset: one round's positions (batch), or dataset_size of them
        replay_flags = (
            "--positions_per_game, --batch_games" if config.dataset == "batch" else "--dataset_size"
        )
    else:
        replay_flags = "--replay_games"
    parts = {
        "replay buffer": Part(_nbytes(buffers) // devices, replay_flags, linear=True),
        "network and optimizer": Part(  # the run (optimizer state included), the previous
            _nbytes(run) + 2 * _nbytes(run.train.variables),  # network, the gradients
            "--num_blocks, --num_filters, --value_hidden",
        ),
        "self-play trajectories": Part(
            played["self-play trajectories"],
            "--batch_games" if exit_ else "--selfplay_steps, --batch_games",
            linear=True,
        ),
        "search trees": Part(
            played["search trees"],
            "--batch_games, --positions_per_game, --num_simulations"
            if exit_
            else "--batch_games, --num_simulations",
            linear=config.tree_reuse,  # else searched in chunks of a fixed size
        ),
        "training activations": Part(
            played["training activations"],
            "--train_batch_size, --num_filters, --num_blocks",
            linear=True,
        ),
    }
    if config.eval_interval:
        parts["evaluation matches"] = Part(
            played["evaluation matches"], "--eval_games, --num_simulations"
        )
    return parts


def _activations(config: Config, cells: int) -> int:
    """Bytes of the network's activations for one position (its residual tower's)."""
    itemsize = 2 if config.dtype == "bfloat16" else 4
    return itemsize * config.num_filters * cells * (2 * config.num_blocks + 2)


def _training_activations(config: Config, devices: int, leaf: int) -> int:
    """Bytes of one device's share of a training batch's activations (forward, backward and
    the gradient's), `leaf` bytes a position's forward pass."""
    return -(-config.train_batch_size // devices) * leaf * 3


def _trees(game, sims: int, games: int, leaf: int, *, chunked: bool = True) -> int:
    """Bytes of the trees of `games` searches of `sims` simulations held at once (`make_search`
    searches a batch whose trees exceed `search.tree_bytes()` in chunks), and the network's
    activations for one batch of their leaves, `leaf` bytes each."""
    at_once = chunk_games(game, sims, games) if chunked else games
    return at_once * (bytes_per_tree(game, sims) + leaf)


def _selfplay_position(config: Config, game) -> int:
    """Bytes of one position of self-play's trajectory (`replay.Trajectory`): its float32
    observation, policy, player, done, returns, ply and root value, and the options' fields."""
    nbytes = 4 * math.prod(game.observation_shape) + 4 * game.num_actions + 4 + 1 + 8 + 4 + 4
    if config.ownership_weight > 0:
        nbytes += 2 * math.prod(game.board_shape)
    if config.policy_surprise > 0:
        nbytes += 4
    if config.resign_threshold > 0:
        nbytes += 1
    return nbytes


def _eval_parts(config: Config, game, devices: int) -> int:
    """The bytes on each device of the largest of the in-loop evaluation's searches: the network
    against pure MCTS at twice its simulations, and the ladder's top rung where it plays
    (azjax/loop_eval.py). A match splits its games over the devices where they divide by twice
    their number, and each agent searches the half of the games where it is to move."""
    from azjax import ladder  # it imports azjax.search, which this module imports

    def searched(games: int) -> int:
        split = devices > 1 and games % (2 * devices) == 0
        on_device = games // devices if split else games
        return max(1, on_device // 2 if game.alternating else on_device)

    cells = math.prod(game.board_shape)
    g = searched(config.eval_games)
    sizes = [
        _trees(game, config.num_simulations, g, _activations(config, cells)),
        _trees(game, 2 * config.num_simulations, g, 0),
    ]
    table = ladder.load_ladder(game) if config.eval_ladder else None
    if table is not None:
        top = table.up_to(table.loop_cap(config.eval_ladder_max_sims)).sims[-1]
        sizes.append(
            _trees(game, top, searched(ladder.ladder_games_per_rung(config.eval_games)), 0)
        )
    return max(sizes)


def _game_parts(config: Config, devices: int) -> dict[str, int]:
    """The bytes on each device of one game's self-play trajectories (their observations are
    float32, the buffer's uint8), search trees, training activations and evaluation matches."""
    game = config.make_game()
    steps = config.selfplay_steps or game.max_game_length
    games = -(-config.batch_games // devices)
    cells = math.prod(game.board_shape)
    leaf = _activations(config, cells)
    if config.tree_reuse:  # the kept subtrees and the new nodes, every game at once
        from azjax import selfplay, tree_reuse

        sims = tree_reuse.capacity(
            selfplay.REUSE_KEEP * config.num_simulations, config.num_simulations
        )
        trees = _trees(game, sims, games, leaf, chunked=False)
    else:
        trees = _trees(game, config.num_simulations, games, leaf)
    return {
        "self-play trajectories": steps * games * _selfplay_position(config, game),
        "search trees": trees,
        "training activations": _training_activations(config, devices, leaf),
        "evaluation matches": _eval_parts(config, game, devices) if config.eval_interval else 0,
    }


def _exit_parts(config: Config, devices: int) -> dict[str, int]:
    """Expert Iteration's parts on each device (azjax/exit.py): the apprentice's games (every
    ply's state) and the labelled positions as "self-play trajectories", the expert's trees over
    a round's positions (in chunks where they exceed `search.tree_bytes()`) as "search trees"."""
    game = config.make_game()
    games = -(-config.batch_games // devices)
    positions = games * config.positions_per_game
    cells = math.prod(game.board_shape)
    leaf = _activations(config, cells)
    state = _nbytes(jax.eval_shape(game.init))
    labelled = 4 * math.prod(game.observation_shape) + 4 * 3 * game.num_actions + 5 * 4
    return {
        "self-play trajectories": game.max_game_length * games * (state + 1) + positions * labelled,
        "search trees": _trees(
            game,
            config.num_simulations,
            positions,
            leaf if config.evaluator == "network" else 0,
        ),
        "training activations": _training_activations(config, devices, leaf),
        "evaluation matches": _eval_parts(config, game, devices) if config.eval_interval else 0,
    }


def _cgroup_limit(root: str = "/") -> int | None:
    """The memory limit of this process's cgroup (v2's memory.max, v1's
    memory.limit_in_bytes, at its own path or the root of the mount), None where none is set;
    `root` the file system's (tests)."""
    fs = os.path.join(root, "sys/fs/cgroup")
    paths = []
    try:
        with open(os.path.join(root, "proc/self/cgroup")) as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                path = path.strip("/")
                if controllers == "":  # v2
                    paths.append(os.path.join(fs, path, "memory.max"))
                elif "memory" in controllers.split(","):
                    paths.append(os.path.join(fs, "memory", path, "memory.limit_in_bytes"))
    except (OSError, ValueError):
        pass
    paths += [os.path.join(fs, "memory.max"), os.path.join(fs, "memory/memory.limit_in_bytes")]
    limits = []
    for path in paths:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < UNLIMITED:  # v2 writes "max" for none
            limits.append(int(text))
    return min(limits, default=None)


def memory_limit() -> tuple[int | None, str]:
    """(bytes each device can hold, what that is): the accelerator's own limit where JAX tells
    it, else the host's physical memory, or its cgroup's limit where that is lower, shared by
    its devices; (None, ...) when unknown."""
    device = jax.local_devices()[0]
    try:
        stats = device.memory_stats() or {}
    except Exception:  # some backends do not implement it
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{device.platform} device memory"
    try:
        host, what = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "host memory"
    except (ValueError, OSError, AttributeError):
        host, what = None, "unknown"
    cgroup = _cgroup_limit()
    if cgroup is not None and (host is None or cgroup < host):
        host, what = cgroup, "the cgroup's memory limit"
    if host is None:
        return None, what
    return host // jax.local_device_count(), what


def _sum(parts: dict[str, Part], names) -> int:
    return sum(parts[p].nbytes for p in names if p in parts)


def largest_phase(parts: dict[str, Part]) -> tuple[str, ...]:
    """The parts of the phase that needs the most."""
    return max(PHASES.values(), key=lambda names: _sum(parts, names))


def needed(parts: dict[str, Part]) -> int:
    """What the run needs on each device: the held parts and the largest phase."""
    return _sum(parts, HELD) + _sum(parts, largest_phase(parts))


def fitting_value(config: Config, parts: dict[str, Part], name: str, limit: int, devices: int):
    """(flag, value): the largest value of part `name`'s first flag with which the run fits in
    `limit`, the others as they are, where the part grows in proportion to it; None where it
    does not, or no value would do."""
    part = parts[name]
    if not part.linear or not part.nbytes:
        return None
    flag = part.flags.split(",")[0]
    field = flag.removeprefix("--")
    current = getattr(config, field)
    if field == "selfplay_steps" and not current:  # 0: the game's longest
        current = config.make_game().max_game_length
    rest = dict(parts, **{name: part._replace(nbytes=0)})
    if needed(rest) > limit:  # the others alone do not fit
        return None
    if name in HELD:
        room = limit - needed(rest)
    else:  # within its phase, beside the held parts
        phase = next(names for names in PHASES.values() if name in names)
        room = limit - _sum(rest, HELD + phase)
    value = int(current * room * FIT_MARGIN) // part.nbytes  # (sizes round up to whole rows)
    if field in ("batch_games", "train_batch_size"):  # split evenly over the devices
        value -= value % devices
    return (flag, value) if 1 <= value < current else None


def check_memory(config: Config, fns: Iteration, devices: int) -> None:
    """A ValueError naming the largest part, its flags and a value that would fit, when the run
    cannot fit in memory."""
    limit, what = memory_limit()
    if limit is None:
        return
    parts = memory_estimate(config, fns, devices)
    need = needed(parts)
    if need <= limit:
        return
    counted = {p: parts[p] for p in HELD + largest_phase(parts) if p in parts}
    name, largest = max(counted.items(), key=lambda kv: kv[1].nbytes)
    fit = fitting_value(config, parts, name, limit, devices)
    hint = f" (about {fit[0]}={fit[1]} would fit, the rest as it is)" if fit else ""
    raise ValueError(
        f"the run needs at least {need / 2**30:.1f} GiB on each device but has "
        f"{limit / 2**30:.1f} GiB ({what}); the largest part is the {name} "
        f"({largest.nbytes / 2**30:.1f} GiB): lower {largest.flags}{hint}"
    )
