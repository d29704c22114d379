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
    allocates (XLA's temporaries come on top), from shapes alone (nothing is allocated)."""
    game = config.make_game()
    steps = config.selfplay_steps or game.max_game_length
    games = -(-config.batch_games // devices)
    batch = -(-config.train_batch_size // devices)
    buffer = _nbytes(jax.eval_shape(fns.init_buffer))
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
        "replay buffer": (buffer // devices, "--replay_games"),
        "network and optimizer": (
            3 * _nbytes(jax.eval_shape(fns.init_run)),
            "--num_blocks, --num_filters, --value_hidden",
        ),
        "self-play trajectories": (
            int(steps * games * position),
            "--selfplay_steps, --batch_games",
        ),
        "search trees": (
            games * nodes * (6 * 4 * game.num_actions + state + 4 * f * cells),
            "--batch_games, --num_simulations",
        ),
        "training activations": (
            batch * cells * f * 4 * (2 * config.num_blocks + 2) * 3,
            "--train_batch_size, --num_filters, --num_blocks",
        ),
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
