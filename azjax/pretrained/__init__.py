"""Trained networks shipped in the package, and the export format they are shipped in.

    names()                          # ['tictactoe', ...]: the networks this install ships
    config, variables = load("tictactoe")
    export("runs/hex6", 40, "hex6", card={"elo": 1450})  # into azjax/pretrained/hex6/

An exported network is a folder that needs neither orbax nor the run it came from:

    <folder>/config.json         the run's Config (as saved with the checkpoint)
    <folder>/variables.msgpack   {'params', 'batch_stats'} (no optimizer state), numpy arrays,
                                 flax.serialization.msgpack_serialize; float16 by default
    <folder>/card.json           where it came from (run, step, the run's summary), its storage
                                 dtype and what that costs (`precision`), and free fields given
                                 by whoever exported it (command, wall time, machine, Elo, results)

float16 storage halves the size (hex9, 3 blocks x 64 filters and its heads: 1.4 MB); `export`
measures what it changes, the largest difference of the policy logits and values over random
positions and how often the policy's argmax stays the same, and writes that into the card.
Loading casts back to float32.

Everywhere a run is accepted (`ckpt:` agents, `--init_from`, `evaluate.py curve`), an exported
folder is accepted too, and `pretrained/NAME` means this package's network NAME unless a local
folder `pretrained/NAME` exists: `azjax.checkpoint.resolve_run` is the one place that decides.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import os
import re
import shutil
import tempfile
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from azjax.config import Config
from azjax.network import init_variables, make_apply, make_network

STORE = os.path.dirname(os.path.abspath(__file__))  # the package's networks, one folder each
PREFIX = "pretrained"  # `pretrained/NAME` names a shipped network
FILES = ("config.json", "variables.msgpack", "card.json")
DTYPES = ("float16", "float32")
COMPUTE_DTYPES = ("float32", "bfloat16")  # Config.dtype's choices
AUTOMATIC = ("name", "game", "game_options", "network", "source", "storage", "precision")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def source_checkout() -> bool:
    """Whether azjax runs from a source checkout (the project's pyproject.toml beside the
    package, as in an editable install), where the package's files are the project's to change,
    rather than from an installed package, whose files stay as installed."""
    return os.path.isfile(os.path.join(os.path.dirname(os.path.dirname(STORE)), "pyproject.toml"))


def default_store() -> str:
    """Where `export` writes by default: the package's store in a source checkout, where a
    network is exported to be shipped; else the working directory's `pretrained/`, which
    `pretrained/NAME` finds first, so that an installed package's files stay as installed."""
    return STORE if source_checkout() else os.path.join(os.getcwd(), PREFIX)


class PretrainedError(ValueError):
    """A network that cannot be found, read or exported; one line."""


def names(store: str = STORE) -> list[str]:
    """The networks in `store` (default: the package's), sorted."""
    if not os.path.isdir(store):
        return []
    return sorted(
        n  # not an export's temporary folder (".NAME.xyz", left by a crash)
        for n in os.listdir(store)
        if NAME.fullmatch(n) and is_exported(os.path.join(store, n))
    )


def is_exported(folder: str) -> bool:
    """Whether `folder` holds an exported network (rather than a run, or nothing)."""
    return all(os.path.isfile(os.path.join(folder, f)) for f in FILES)


def check_name(name: str) -> None:
    if not NAME.fullmatch(name):
        raise PretrainedError(
            f"bad network name {name!r}: letters, digits, '_', '.' and '-' (64 at most), "
            "starting with a letter or digit"
        )


def package_folder(name: str) -> str:
    """The package's folder of network `name`; a PretrainedError listing the shipped ones."""
    folder = os.path.join(STORE, name)
    if NAME.fullmatch(name) and is_exported(folder):
        return folder
    shipped = ", ".join(names()) or "none"
    raise PretrainedError(
        f"no pretrained network {name!r} in the package; shipped: {shipped} "
        f"(a local folder {PREFIX}/{name} would be used first)"
    )


# ---- reading -------------------------------------------------------------------------------------
def read_card(folder: str) -> dict[str, Any]:
    try:
        with open(os.path.join(folder, "card.json"), encoding="utf-8") as f:
            card = json.load(f)
    except (OSError, ValueError) as e:
        raise PretrainedError(f"cannot read {folder}/card.json: {e}") from None
    if not isinstance(card, dict):
        raise PretrainedError(f"{folder}/card.json holds no card (a JSON object)")
    return card


def read_config(folder: str) -> Config:
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            return Config.from_json(f.read())
    except (OSError, ValueError, TypeError) as e:
        raise PretrainedError(f"cannot read {folder}/config.json: {e}") from None


def step_of(folder: str) -> int:
    """The training step (checkpoint) the network in `folder` was exported from."""
    source = read_card(folder).get("source")
    step = source.get("step") if isinstance(source, dict) else None
    if not isinstance(step, int):
        raise PretrainedError(f"{folder}/card.json has no source step")
    return step


def read(folder: str) -> tuple[Config, dict]:
    """(config, variables) of the exported network in `folder`: float32 numpy arrays, checked
    against the network the config describes."""
    config = read_config(folder)
    try:
        with open(os.path.join(folder, "variables.msgpack"), "rb") as f:
            stored = serialization.msgpack_restore(f.read())
    except Exception as e:  # msgpack raises several types for damaged files
        raise PretrainedError(f"cannot read {folder}/variables.msgpack: {e}") from None
    expected = variables_shape(config)
    try:
        same = jax.tree_util.tree_structure(stored) == jax.tree_util.tree_structure(expected)
    except Exception:
        same = False
    if not same or _shapes(stored) != _shapes(expected):
        raise PretrainedError(
            f"{folder}/variables.msgpack does not hold the network its config.json describes "
            f"({config.num_blocks} blocks x {config.num_filters} filters for {config.game})"
        )
    variables = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float32), stored)
    return config, variables


def load(name: str) -> tuple[Config, dict]:
    """(config, variables) of the package's network `name`."""
    return read(package_folder(name))


def variables_shape(config: Config) -> Any:
    """The network's variables as ShapeDtypeStructs (nothing initialised)."""
    game = config.make_game()
    net = make_network(config, game)
    return jax.eval_shape(lambda: init_variables(net, game, jax.random.PRNGKey(0)))


def _shapes(tree) -> list[tuple[int, ...]]:
    return [tuple(np.shape(x)) for x in jax.tree_util.tree_leaves(tree)]


# ---- writing -------------------------------------------------------------------------------------
def export(
    run: str,
    step: int | None,
    name: str,
    *,
    to: str | None = None,
    card: dict[str, Any] | None = None,
    dtype: str = "float16",
    compute_dtype: str | None = None,
    force: bool = False,
) -> str:
    """Exports checkpoint `step` (None: the latest) of `run` as network `name` into `to`/`name`
    (default: `default_store()`); returns the folder. `card` holds the exporter's fields (how it
    was trained, its measured strength); the source, the run's summary and the storage's
    precision are filled in here. `compute_dtype` is the dtype the exported config.json computes
    in (None: the run's; float32 plays faster on a CPU than a bfloat16-trained run's own).
    An existing `name` is replaced only with `force`."""
    from azjax.checkpoint import load_checkpoint, resolve_run  # it resolves exported networks

    check_name(name)
    if dtype not in DTYPES:
        raise PretrainedError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if compute_dtype not in (None, *COMPUTE_DTYPES):
        raise PretrainedError(
            f"--compute_dtype must be one of {', '.join(COMPUTE_DTYPES)}, got {compute_dtype!r}"
        )
    config, variables, step = load_checkpoint(run, step)  # a bad run first, then the target
    if compute_dtype is not None:
        config = dataclasses.replace(config, dtype=compute_dtype)
    to = default_store() if to is None else to
    source_folder = os.path.abspath(resolve_run(run))  # pretrained/NAME: the folder it names
    earlier = read_card(source_folder) if is_exported(source_folder) else None
    if config.games:
        raise PretrainedError(
            f"{run} is a shared run (games={config.games}): export takes a run of one game; "
            f"play one of its games with ckpt:{run},game=NAME"
        )
    folder = os.path.join(to, name)
    if os.path.exists(folder) and not force:
        raise PretrainedError(f"{folder} exists; pass --force to replace it")
    if os.path.exists(folder) and not is_exported(folder):  # a run, say: never deleted
        raise PretrainedError(f"{folder} exists and is not an exported network; choose another")
    if os.path.exists(to) and not os.path.isdir(to):
        raise PretrainedError(f"--to {to!r} is a file, not a folder")
    reserved = sorted(set(card or {}) & set(AUTOMATIC))
    if reserved:
        raise PretrainedError(
            f"--card {', '.join(reserved)}: filled in by the export; choose other keys"
        )
    host = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float32), variables)
    stored = jax.tree_util.tree_map(lambda x: x.astype(dtype), host)
    if not all(np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(stored)):
        raise PretrainedError(f"the network does not fit {dtype} (values overflow); use float32")
    blob = serialization.msgpack_serialize(stored)
    full = dict(
        name=name,
        game=config.game,
        game_options=dict(config.game_options),
        network=dict(
            num_blocks=config.num_blocks,
            num_filters=config.num_filters,
            value_hidden=config.value_hidden,
            parameters=int(sum(x.size for x in jax.tree_util.tree_leaves(host["params"]))),
        ),
        source=dict(
            run=source_folder,
            step=int(step),
            exported=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            **_earlier_source(source_folder, earlier),
        ),
        storage=dict(dtype=dtype, bytes=len(blob), compute_dtype=config.dtype),
        precision=precision(config, host, stored),
    )
    carried = {k: v for k, v in (earlier or {}).items() if k not in AUTOMATIC}  # how it trained
    full = {**full, **carried, **(card or {})}  # the exporter's fields over the carried ones
    _write_folder(
        folder,
        {
            "config.json": config.to_json().encode() + b"\n",
            "variables.msgpack": blob,
            "card.json": (json.dumps(full, indent=2) + "\n").encode(),
        },
    )
    return folder


def _earlier_source(folder: str, earlier: dict[str, Any] | None) -> dict[str, Any]:
    """The card's source fields besides the folder, step and time: the run's summary; where
    `folder` is itself an exported network (`earlier`: its card), the summary that card carries
    and, as `exported_from`, the run and storage it recorded (this card's `precision` is measured
    against that storage, not against the run)."""
    if earlier is None:
        return dict(run_summary=_run_summary(folder))
    before = earlier.get("source") if isinstance(earlier.get("source"), dict) else {}
    return dict(
        run_summary=before.get("run_summary"),
        exported_from=dict(
            {k: v for k, v in before.items() if k != "run_summary"},
            storage=earlier.get("storage"),
        ),
    )


def _run_summary(run: str) -> dict[str, Any] | None:
    """The parts of the run's summary.json (the whole run, not only up to the step exported)
    that say how it was trained; None where the run has none."""
    try:
        with open(os.path.join(run, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return None
    keys = ("iterations", "games", "positions", "wall_seconds", "devices", "stopped_by")
    return {k: summary[k] for k in keys if k in summary}


def precision(config: Config, full: dict, stored: dict, positions: int = 256) -> dict[str, Any]:
    """What storing `full` (float32) as `stored` changes: the largest absolute difference of the
    policy logits (legal moves) and of the value, and the share of positions whose policy argmax
    over legal moves is unchanged, over `positions` positions after uniformly random moves. Both
    sides compute in float32, whatever `config.dtype`: a bfloat16 network's own rounding (0.008
    of a logit near 1) would otherwise be counted as the storage's."""
    outputs = _probe(dataclasses.replace(config, dtype="float32").to_json(), positions)
    logits32, value32, legal = (np.asarray(x) for x in outputs(full))
    low = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float32), stored)
    logits16, value16, _ = (np.asarray(x) for x in outputs(low))
    best = lambda x: np.argmax(np.where(legal, x, -np.inf), -1)
    playable = legal.any(-1)  # a finished game has no legal move
    return dict(
        positions=int(playable.sum()),
        max_logit_error=float(np.abs(logits32 - logits16)[legal].max(initial=0.0)),
        max_value_error=float(np.abs(value32 - value16).max()),
        argmax_agreement=float(np.mean((best(logits32) == best(logits16))[playable])),
    )


@functools.lru_cache(maxsize=4)
def _probe(config_json: str, positions: int):
    """outputs(variables) -> (logits[P, A] in action order, value[P], legal[P, A]) over P =
    `positions` positions after 0, 1, 2, ... uniformly random moves; jitted once per config."""
    from azjax.selfplay import random_moves

    config = Config.from_json(config_json)
    game = config.make_game()
    apply = make_apply(make_network(config, game))
    keys = jax.random.split(jax.random.PRNGKey(0), positions)
    plies = jnp.arange(positions) % game.max_game_length

    @jax.jit
    def outputs(variables):
        states = jax.vmap(lambda k, p: random_moves(game, k, p, game.max_game_length))(keys, plies)
        logits, value = apply(variables, jax.vmap(game.observe)(states))
        # in action order: Hex's network frame is transposed for player 1
        return (
            jax.vmap(game.policy_to_actions)(states, logits),
            value,
            jax.vmap(game.legal_mask)(states),
        )

    return outputs


def _write_folder(folder: str, files: dict[str, bytes]) -> None:
    """Writes the files into a fresh folder beside `folder`, then puts it in its place, so that a
    failed export leaves no half-written network."""
    parent = os.path.dirname(os.path.abspath(folder))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(folder)}.", dir=parent)
    try:
        for file, data in files.items():
            with open(os.path.join(tmp, file), "wb") as f:
                f.write(data)
        os.chmod(tmp, 0o755)
        if os.path.exists(folder):
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
