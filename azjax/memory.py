"""What a run needs in memory, checked before it starts (`check_memory`): a lower bound per part
(replay buffer, network and optimizer, self-play trajectories, search trees, training
activations) from shapes alone, against the device's limit or the host's memory; a run that
cannot fit is refused with the largest part and the flags that size it."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import jax
import numpy as np

from azjax.config import Config

if TYPE_CHECKING:
    from azjax.loop import Iteration


def _nbytes(tree) -> int:
    return sum(
        math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(tree)
    )


def memory_estimate(config: Config, fns: Iteration, devices: int) -> dict[str, tuple[int, str]]:
    """{part: (bytes on each device, the flags that size it)}: a lower bound on what the run
    allocates (XLA's temporaries come on top), from shapes alone (nothing is allocated).

    A shared run (`--games`, azjax/shared.py) holds every game's replay buffer at once (their
    sum), but plays one game's self-play after the other and trains on one game's replay after
    the other: its trajectories, search trees and training activations are the largest game's,
    whatever the order of the list."""
    buffers = jax.eval_shape(fns.init_buffer)
    run = jax.eval_shape(fns.init_run)
    if config.games:
        from azjax import shared  # it imports azjax.loop, which imports this module

        configs = shared.game_configs(config)
        per_game = [_game_parts(c, _nbytes(buffers[name]), devices) for name, c in configs.items()]
        played = {part: max(parts[part] for parts in per_game) for part in per_game[0]}
    else:
        played = _game_parts(config, _nbytes(buffers), devices)
    return {
        "replay buffer": (_nbytes(buffers) // devices, "--replay_games"),
        "network and optimizer": (  # the run (optimizer state included), the previous
            _nbytes(run) + 2 * _nbytes(run.train.variables),  # network, the gradients
            "--num_blocks, --num_filters, --value_hidden",
        ),
        "self-play trajectories": (
            played["self-play trajectories"],
            "--selfplay_steps, --batch_games",
        ),
        "search trees": (played["search trees"], "--batch_games, --num_simulations"),
        "training activations": (
            played["training activations"],
            "--train_batch_size, --num_filters, --num_blocks",
        ),
    }


def _game_parts(config: Config, buffer: int, devices: int) -> dict[str, int]:
    """The bytes on each device of one game's self-play trajectories, search trees and training
    activations, `buffer` the bytes of its replay buffer (on all devices)."""
    game = config.make_game()
    steps = config.selfplay_steps or game.max_game_length
    games = -(-config.batch_games // devices)
    batch = -(-config.train_batch_size // devices)
    position = buffer / max(
        1,
        config.batch_games
        * math.ceil(config.replay_games * game.max_game_length / config.batch_games),
    )
    state = _nbytes(jax.eval_shape(game.init))
    cells = math.prod(game.board_shape)
    nodes = config.num_simulations + 1
    f = config.num_filters
    return {
        "self-play trajectories": int(steps * games * position),
        # a node: its game state and six arrays over the actions (mctx.Tree); the network's
        # activations are one batch of leaves' at a time, not one per node
        "search trees": games * nodes * (6 * 4 * game.num_actions + state)
        + games * 4 * f * cells * (2 * config.num_blocks + 2),
        "training activations": batch * cells * f * 4 * (2 * config.num_blocks + 2) * 3,
    }


def memory_limit() -> tuple[int | None, str]:
    """(bytes each device can hold, what that is): the accelerator's own limit where JAX tells
    it, else the host's physical memory shared by its devices; (None, ...) when unknown."""
    device = jax.local_devices()[0]
    try:
        stats = device.memory_stats() or {}
    except Exception:  # some backends do not implement it
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{device.platform} device memory"
    try:
        host = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None, "unknown"
    return host // jax.local_device_count(), "host memory"


def check_memory(config: Config, fns: Iteration, devices: int) -> None:
    """A ValueError naming the largest part and its flags when the run cannot fit in memory."""
    limit, what = memory_limit()
    if limit is None:
        return
    parts = memory_estimate(config, fns, devices)
    need = sum(b for b, _ in parts.values())
    if need <= limit:
        return
    name, (largest, flags) = max(parts.items(), key=lambda kv: kv[1][0])
    raise ValueError(
        f"the run needs at least {need / 2**30:.1f} GiB on each device but has "
        f"{limit / 2**30:.1f} GiB ({what}); the largest part is the {name} "
        f"({largest / 2**30:.1f} GiB): lower {flags}"
    )
