"""Starting a run from another run's network (seed 004, sections 3.5 and 4.2).

    config = resolve(config)                         # init_from "runs/c4" -> "/abs/runs/c4@30"
    location, source_config = locate(config)         # the same without the fit's check
    # "pretrained/hex6": the package's network (azjax/pretrained), unless ./pretrained/hex6 exists
    variables, note = transferred_variables(config, fresh_variables)

The same game on the same board: the trunk and every head the source has in the same shapes are
loaded, parameters and batch statistics; a head the source lacks or shapes otherwise starts fresh
(`--ownership_weight` on here and off in the source; another `policy_head_kernel`, `value_hidden` or
`value_head`), and a head this run lacks is left out; the run's log line names each.
Another game or board: the trunk (the input block and the residual blocks,
`azjax.network.is_trunk`; convolutions and pooled biases only, so any board size fits) is loaded and
the policy and value heads keep their fresh initialisation, as seed 004 re-initialised its output
layers over Connect Four's feature extractor. The trunk's widths (num_blocks, num_filters) and its
global pooling (global_pool) must equal the source's, and so must the number of input planes (the
games' observation_shape[-1]): seed 004 transferred its whole feature extractor, input convolution
included, between games with the same planes, and so does this module; a source with other planes is
refused rather than given a new input convolution, with the flags that would fit where there are
some (`--mobility=false` for Othello under the CPU recipe from a Connect Four network). The
optimizer state, iteration and random key are the new run's own. With `freeze_trunk` the training
step keeps the loaded trunk (azjax/training.py).

Errors (an unknown run folder, no checkpoint, an unreadable one, other widths or planes) are
CheckpointErrors (ValueErrors) of one line starting "--init_from".
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax

from azjax.checkpoint import (
    CheckpointError,
    load_checkpoint,
    missing_step_hint,
    parse_location,
    read_config,
    resolve_run,
    steps,
)
from azjax.config import Config
from azjax.flags import value_text
from azjax.network import HEAD_MODULES, is_trunk, with_trunk


def _error(config: Config, text: str) -> CheckpointError:
    return CheckpointError(f"--init_from={config.init_from}: {text}")


def resolve(config: Config) -> Config:
    """`config` with init_from as 'ABSOLUTE_PATH@STEP' (the latest step when none was given); a
    CheckpointError when the run folder or the checkpoint does not exist, or when its network's
    trunk does not fit `config`'s (`check_compatible`)."""
    location, source = locate(config)
    check_compatible(source, config)  # before any work, not after the compiles
    path, step = parse_location(location)
    try:  # read now: a source still training may remove the step before the run loads it
        _LOADED[location] = load_checkpoint(path, step)
    except CheckpointError as e:
        raise _error(config, str(e)) from None
    return dataclasses.replace(config, init_from=location)


# resolve's source networks, {'ABSOLUTE_PATH@STEP': load_checkpoint's answer}, taken once by
# transferred_variables
_LOADED: dict[str, tuple] = {}


def locate(config: Config) -> tuple[str, Config]:
    """('ABSOLUTE_PATH@STEP', the source's config) of `config.init_from` (the latest step when
    none was given); a CheckpointError when the run folder or the checkpoint does not exist."""
    try:
        path, step = parse_location(config.init_from)
    except ValueError as e:
        raise _error(config, str(e)) from None
    try:
        folder = resolve_run(path)  # a run, an exported network, or pretrained/NAME
    except CheckpointError as e:
        raise _error(config, str(e)) from None
    path = os.path.abspath(folder)
    if not os.path.isdir(path):
        raise _error(config, f"no run folder {path!r}")
    try:
        have = steps(path)
    except CheckpointError as e:
        raise _error(config, str(e)) from None
    if not have:
        raise _error(config, f"no checkpoint in {path!r}")
    if step is None:
        step = have[-1]
    elif step not in have:
        raise _error(
            config, f"no checkpoint {step} in {path!r}; have {have}{missing_step_hint(path, step)}"
        )
    try:
        source = read_config(path, step)
    except CheckpointError as e:
        raise _error(config, str(e)) from None
    return f"{path}@{step}", source


def describe(config: Config) -> str:
    """'othello {'size': 6}': a config's game and options, for messages."""
    return f"{config.game} {dict(config.game_options)}"


def check_compatible(source: Config, config: Config) -> None:
    """A CheckpointError unless a network of `config` can take the trunk of `source`'s."""
    if source.games:  # azjax/shared.py: its tree holds a trunk and per-game parts
        raise _error(
            config,
            f"the source is a shared run of {source.games}; transfer from a shared run is not "
            "supported yet",
        )
    widths = ("num_blocks", "num_filters")
    if any(getattr(source, f) != getattr(config, f) for f in widths):
        have = ", ".join(f"{f}={getattr(source, f)}" for f in widths)
        want = ", ".join(f"{f}={getattr(config, f)}" for f in widths)
        flags = " ".join(f"--{f}={getattr(source, f)}" for f in widths)
        raise _error(
            config,
            f"the trunk widths must match the source run: it has {have}, this run {want} "
            f"(set {flags})",
        )
    if source.global_pool != config.global_pool:
        raise _error(
            config,
            f"the source's blocks {'pool' if source.global_pool else 'do not pool'} over the "
            f"board and this run's {'do' if config.global_pool else 'do not'} "
            f"(set --global_pool={str(source.global_pool).lower()})",
        )
    planes = source.make_game().observation_shape[-1], config.make_game().observation_shape[-1]
    if planes[0] != planes[1]:
        raise _error(
            config,
            f"the source's {describe(source)} has {planes[0]} input planes, this run's "
            f"{describe(config)} {planes[1]}: the input block cannot be transferred (seed 004 "
            f"transferred between games with the same planes){_option_hint(source, config)}",
        )


def _option_hint(source: Config, config: Config) -> str:
    """'; set --mobility=true' where the two runs play one game with other game options (the
    flags that give this run the source's), or where another game's source has the planes this
    game shows without its observation options (`matching_planes`); else ''."""
    if source.game != config.game:
        options = matching_planes(source, config)
    else:
        mine = dict(config.game_options)
        options = {k: v for k, v in sorted(dict(source.game_options).items()) if mine.get(k) != v}
    flags = [f"--{k}={value_text(v)}" for k, v in options.items()]
    return f"; set {' '.join(flags)}" if flags else ""


def matching_planes(source: Config, config: Config) -> dict:
    """{option: value}: `config`'s observation options (`games.Game.observation_options`, e.g.
    Othello's mobility planes) set back to their game defaults, where that gives `config`'s game
    as many input planes as `source`'s and it has other planes now (an Othello run of the CPU
    recipe from a Connect Four network: {'mobility': False}); {} otherwise."""
    want = source.make_game().observation_shape[-1]
    game = config.make_game()
    if game.observation_shape[-1] == want:
        return {}
    defaults = {f.name: f.default for f in dataclasses.fields(game)}
    changed = {
        k: defaults[k] for k in type(game).observation_options if game.options[k] != defaults[k]
    }
    if not changed:
        return {}
    plain = dataclasses.replace(game, **changed)
    return changed if plain.observation_shape[-1] == want else {}


def same_board(source: Config, config: Config) -> bool:
    """Whether the two runs play the same game on the same board (the same game options)."""
    return (source.game, dict(source.game_options)) == (config.game, dict(config.game_options))


# The options that shape each head beyond the trunk's widths and the board (named where a head's
# shapes differ from the source's).
_HEAD_OPTIONS = {"policy": ("policy_head_kernel",), "value": ("value_hidden", "value_head")}


def _head(variables: Any, name: str) -> dict:
    """{collection: {module: ...}}: the head `name`'s modules (`HEAD_MODULES`) in `variables`."""
    return {c: {k: m[k] for k in HEAD_MODULES[name] if k in m} for c, m in variables.items()}


def with_heads(variables: Any, source: Config, source_vars: Any) -> tuple[Any, list[str]]:
    """(variables with each head the source has in the same shapes taken from `source_vars`,
    notes such as "the ownership head, initialised afresh" for each head left as it was in
    `variables` or left out of the source's): for a source of the same game and board."""
    out = {c: dict(m) for c, m in variables.items()}
    notes = []
    for name in HEAD_MODULES:
        mine, theirs = _head(variables, name), _head(source_vars, name)
        label = f"the {name.replace('_', ' ')} head"
        if not mine["params"]:
            if theirs["params"]:
                notes.append(f"{label}, left out")
        elif not theirs["params"]:
            notes.append(f"{label}, initialised afresh")
        elif not _same_shapes(mine, theirs):
            options = ", ".join(f"{f}={getattr(source, f)}" for f in _HEAD_OPTIONS.get(name, ()))
            notes.append(f"{label}, initialised afresh (the source's has other shapes: {options})")
        else:
            for c, modules in theirs.items():
                out[c].update(modules)
    return out, notes


def _shapes(tree) -> list[tuple[int, ...]]:
    return [x.shape for x in jax.tree_util.tree_leaves(tree)]


def _same_shapes(a: Any, b: Any) -> bool:
    same_tree = jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    return same_tree and _shapes(a) == _shapes(b)


def merge_trunk(fresh: Any, source: Any) -> Any:
    """`fresh` variables ({'params', 'batch_stats'}) with the trunk of `source`'s; a
    CheckpointError where the two trunks differ (`check_compatible` catches that earlier)."""
    for collection in ("params", "batch_stats"):
        mine = sorted(k for k in fresh[collection] if is_trunk(k))
        theirs = sorted(k for k in source[collection] if is_trunk(k))
        if mine != theirs:
            raise CheckpointError(f"trunk modules differ: {theirs} vs {mine}")
        for k in mine:
            if _shapes(source[collection][k]) != _shapes(fresh[collection][k]):
                raise CheckpointError(f"trunk module {k} has other shapes in the source")
    return {c: with_trunk(fresh[c], source[c]) for c in ("params", "batch_stats")}


def transferred_variables(config: Config, fresh: Any) -> tuple[Any, str]:
    """(variables, what was loaded in one line): the network a run of `config` (init_from
    resolved) starts from, `fresh` (its own initialisation) with the source's trunk or all of
    the source's network; every leaf placed like `fresh`'s."""
    path, step = parse_location(config.init_from)
    try:
        loaded = _LOADED.pop(config.init_from, None) or load_checkpoint(path, step)
    except CheckpointError as e:
        raise _error(config, str(e)) from None
    source, source_vars, step = loaded
    check_compatible(source, config)
    where = f"{path}@{step}"
    try:
        variables = merge_trunk(fresh, source_vars)
    except CheckpointError as e:
        raise _error(config, str(e)) from None
    if same_board(source, config):
        variables, notes = with_heads(variables, source, source_vars)
        note = f"init_from {where}: loaded every parameter ({describe(config)})"
        if notes:
            note += " but " + " and ".join(notes)
    else:
        note = (
            f"init_from {where}: loaded the trunk (input block + {config.num_blocks} residual "
            f"blocks) of {describe(source)}; policy and value heads initialised afresh for "
            f"{describe(config)}"
        )
    if config.freeze_trunk:
        note += "; the trunk is frozen"
    placed = jax.tree_util.tree_map(
        lambda new, old: jax.device_put(new, old.sharding), variables, fresh
    )
    return placed, note
