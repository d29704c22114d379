"""The Colab notebooks run end to end on a CPU at toy scale, so they cannot rot.

Each notebook's first code cell (tagged "parameters") reads AZJAX_NOTEBOOK_TOY=1 and switches to
toy sizes, and AZJAX_NOTEBOOK_WORKDIR for its run folder; Colab-only cells (pip install from
REPO_URL, mounting Drive, TensorBoard) are skipped off Colab. The training notebook runs first and
the play notebook loads the checkpoint it wrote.
"""

from __future__ import annotations

import os

import pytest
from xla_flags import with_host_devices

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = os.path.join(ROOT, "notebooks")
TRAIN, PLAY = "train_hex_tpu.ipynb", "play_checkpoint.ipynb"


def _read(name):
    return nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)


def _execute(name, cwd, workdir):
    notebook = _read(name)
    env = dict(
        os.environ,
        AZJAX_NOTEBOOK_TOY="1",
        AZJAX_NOTEBOOK_WORKDIR=workdir,
        JAX_PLATFORMS="cpu",
        MPLBACKEND="module://matplotlib_inline.backend_inline",
    )
    env["XLA_FLAGS"] = with_host_devices()  # the suite's, one device
    # the checkout's code, whatever is installed (an old editable install can shadow packages)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": cwd}}
    )
    client.execute(env=env)  # raises CellExecutionError, naming the cell, if any cell fails
    return notebook


def _outputs(notebook):
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]


def _text(notebook):
    parts = []
    for o in _outputs(notebook):
        parts.append(o.get("text", ""))
        parts.append(o.get("data", {}).get("text/plain", ""))
    return "".join(parts)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("notebooks")
    workdir = str(cwd / "hex_toy")
    return _execute(TRAIN, str(cwd), workdir), _execute(PLAY, str(cwd), workdir), workdir


@pytest.mark.parametrize("name", [TRAIN, PLAY])
def test_notebook_has_parameters_placeholder_and_colab_guards(name):
    cells = [c for c in _read(name).cells if c.cell_type == "code"]
    first = cells[0]
    assert "parameters" in first.metadata.get("tags", [])
    assert first.source.lstrip("# ").count("REPO_URL") >= 1 and 'REPO_URL = "' in first.source
    assert '"google.colab" in sys.modules' in first.source and "AZJAX_NOTEBOOK_TOY" in first.source
    for cell in cells:
        if any(s in cell.source for s in ("drive.mount", "pip", "tensorboard")):
            assert "if IN_COLAB:" in cell.source, cell.source


def test_training_notebook_trains_checkpoints_and_draws_the_curve(executed):
    notebook, _, workdir = executed
    assert os.path.isdir(os.path.join(workdir, "checkpoints", "2", "state"))
    assert any("image/png" in o.get("data", {}) for o in _outputs(notebook))
    assert '"iterations": 2' in _text(notebook)
    # the last redraw drew the evaluation of the last iteration (metrics.jsonl lags behind)
    assert "iteration 2/2: " in _text(notebook) and "; 1 evaluation drawn" in _text(notebook)


def test_play_notebook_loads_evaluates_and_plays_a_drawn_game(executed):
    _, notebook, _ = executed
    text = _text(notebook)
    assert "checkpoint 2" in text and "vs pure MCTS (4 simulations)" in text
    assert any(s in text for s in ("You win!", "azjax wins.", "A draw."))
    svgs = [o for o in _outputs(notebook) if "image/svg+xml" in o.get("data", {})]
    assert svgs and "<polygon" in svgs[-1]["data"]["image/svg+xml"]


def test_play_notebook_loads_the_shipped_network_by_default(monkeypatch):
    # its first cell says "By default it loads pretrained/hex6 ... nothing needs training first",
    # on Colab and off it
    import sys

    import azjax

    monkeypatch.delenv("AZJAX_NOTEBOOK_TOY", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    settings = {}
    exec([c for c in _read(PLAY).cells if c.cell_type == "code"][0].source, settings)
    assert "By default it loads `pretrained/hex6`" in _read(PLAY).cells[0].source
    assert settings["WORKDIR"] == "pretrained/hex6"
    config, _, _ = azjax.load_checkpoint(settings["WORKDIR"], settings["STEP"])
    assert config.game == "hex" and config.game_options["size"] == 6
