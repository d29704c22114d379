"""The console commands azjax-train, azjax-evaluate, azjax-play: declared, installed, runnable from
any folder, and naming themselves as the user ran them; the core never imports them."""

import ast
import importlib
import os
import subprocess
import sys
import sysconfig
from importlib.metadata import entry_points

import pytest

from azjax import commands
from azjax.checkpoint import measure_trends
from azjax.commands import COMMANDS, describe, prog, spell

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# console command -> its target, e.g. azjax-train -> azjax.commands.train:main
EXPECTED = {c: f"azjax.commands.{s.removesuffix('.py')}:main" for s, c in COMMANDS.items()}


def test_pyproject_declares_the_console_commands():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts == EXPECTED


def test_installed_entry_points_run_their_main(capsys):
    installed = {e.name: e for e in entry_points(group="console_scripts") if e.name in EXPECTED}
    if not installed:
        pytest.skip("azjax is installed without its console commands: pip install -e . again")
    assert {name: e.value for name, e in installed.items()} == EXPECTED
    for name, entry in installed.items():
        with pytest.raises(SystemExit) as exit:
            entry.load()(["--help"])
        assert exit.value.code == 0
        out = capsys.readouterr().out
        script = next(s for s, c in COMMANDS.items() if c == name)
        assert out.startswith(f"usage: {script}")  # called from Python: named as the script


@pytest.mark.parametrize("script", sorted(COMMANDS))
def test_a_command_names_itself_as_it_was_run(script, monkeypatch, capsys, tmp_path):
    module = importlib.import_module(f"azjax.commands.{script.removesuffix('.py')}")
    command = COMMANDS[script]
    monkeypatch.setattr(sys, "argv", [f"/venv/bin/{command}", "--bogus"])
    assert prog(script) == command
    with pytest.raises(SystemExit) as exit:
        args = ["match", "a", "b"] if script == "evaluate.py" else ["--game=tictactoe"]
        module.main([*args, "--bogus"])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"{command}: error: unrecognized arguments: --bogus")
        and err.count("\n") == 1
    )
    monkeypatch.setattr(sys, "argv", [os.path.join(ROOT, script)])
    assert prog(script) == script
    # python -m azjax.commands.<name> on an installed package, which has no train.py to name
    monkeypatch.setattr(sys, "argv", [module.__file__])
    assert prog(script) == script  # in this checkout
    monkeypatch.setattr(commands, "ROOT", str(tmp_path))
    assert prog(script) == command


def test_help_and_suggestions_are_spelled_for_the_command_that_ran():
    from azjax.commands import train

    doc = "    python train.py --game=hex\n    python play.py --agent=ckpt:runs/hex\n"
    assert describe(doc, "train.py") == doc
    assert (
        describe(doc, "azjax-train")
        == "    azjax-train --game=hex\n    azjax-play --agent=ckpt:runs/hex\n"
    )
    assert spell("evaluate.py", "azjax-train") == "azjax-evaluate"
    assert spell("evaluate.py", "train.py") == "python evaluate.py"
    summary = dict(
        game="tictactoe",
        game_options={},
        iterations=2,
        games=10,
        positions=50,
        wall_seconds=6.0,
        stopped_by="iterations",
    )
    installed = train.closing_message(summary, "runs/t", prog="azjax-train")
    assert "  azjax-play --agent=ckpt:runs/t" in installed and "python " not in installed
    checkout = train.closing_message(summary, "runs/t", prog="train.py")
    assert "  python evaluate.py curve runs/t" in checkout
    spaced = train.closing_message(summary, "runs/my run", prog="train.py")  # pasted as shown
    assert "python play.py --agent='ckpt:runs/my run'" in spaced
    assert "tensorboard --logdir 'runs/my run'" in spaced
    assert "--resume --iterations=N" in checkout and "min in all" not in checkout
    assert "2 iterations: 10 self-play games, 50 positions (0.1 min this session;" in checkout
    exit_run = train.closing_message(dict(summary, algorithm="exit"), "runs/t")
    assert "10 apprentice games, 50 positions labelled by the expert (0.1 min" in exit_run
    summary.update(stopped_by="time_budget", run_seconds=606.0)  # a resumed run, out of time
    timed = train.closing_message(summary, "runs/t", prog="train.py")
    assert "(0.1 min this session, 10.1 in all; stopped by time_budget)" in timed
    assert "--resume --time_budget=M" in timed and "--iterations=N" not in timed
    assert "@best" not in timed  # no evaluation named a best checkpoint
    summary.update(best=dict(step=2, metric="eval/elo", value=612.4))
    assert "@best" not in train.closing_message(summary, "runs/t")  # the best is the last
    summary.update(best=dict(step=1, metric="eval/opponent_score", value=0.8531))
    line = "its best checkpoint by the in-loop eval/opponent_score (0.853) is 1, not the last"
    assert f"{line}: ckpt:runs/t@best names it" in train.closing_message(summary, "runs/t")
    # how the measures moved over the run, where they were taken twice or more
    assert "in-loop measures" not in train.closing_message(summary, "runs/t")
    rows = [
        {"iteration": 10, "eval/elo": 1227.0, "eval/error_rate": 0.117},
        {"iteration": 20, "eval/elo": 1603.0, "eval/error_rate": 0.029},
        {"iteration": 30, "eval/elo": 1497.0, "eval/error_rate": 0.021},
        {"iteration": 40, "eval/opponent_score": 0.5},
    ]
    summary.update(trends=measure_trends(rows))
    assert summary["trends"]["eval/elo"] == dict(
        evaluations=3, first=[10, 1227.0], last=[30, 1497.0], best=[20, 1603.0]
    )
    said = train.closing_message(summary, "runs/t")
    assert (
        "in-loop measures over the run: eval/elo +1227 at 10 -> +1497 at 30 (highest +1603 at "
        "20); eval/error_rate 0.117 at 10 -> 0.021 at 30 (its lowest)\n"
    ) in said
    # a best level with the highest score, not the highest itself, says so
    summary.update(best=dict(step=1, metric="eval/elo", value=1497.0, top_step=0, top_value=1603.0))
    assert (
        "its best checkpoint by the in-loop eval/elo (+1497; level with +1603 at 0 within the "
        "intervals) is 1, not the last"
    ) in train.closing_message(summary, "runs/t")
    assert "--measures=ladder" not in said  # every placement the loop wanted ran
    # evaluations the budget put off: where no error rate shows the progress, every
    # checkpoint's Elo after the run is offered
    summary.update(eval_seconds=40.0, eval_postponed=5)
    said = train.closing_message(summary, "runs/t", prog="train.py")
    assert "(--eval_budget; 5 evaluations put off to keep within it)" in said
    summary.update(eval_compile_seconds=21.4)  # compiling, which the budget leaves out
    assert ", 21 s of it compiling (--eval_budget counts the rest; 5 evaluations put off" in (
        train.closing_message(summary, "runs/t")
    )
    assert "--measures=ladder" not in said  # the error rate, never put off, shows it
    losses = {"loss/total": 1.5, "loss/value": 0.4, "loss/policy": 1.1}
    summary.update(last=losses)
    assert "last iteration: loss 1.500 (value 0.400, policy 1.100)\n" in (
        train.closing_message(summary, "runs/t")
    )
    held = {"heldout/value": 0.42, "heldout/policy": 1.05}
    summary.update(last={**losses, **held, "heldout/seen_value": 0.39, "heldout/seen_policy": 1.0})
    assert (
        "last iteration: loss 1.500 (value 0.400, policy 1.100); on positions it never trained "
        "on value 0.420, policy 1.050, on those it could value 0.390, policy 1.000\n"
    ) in train.closing_message(summary, "runs/t")
    del summary["last"]["heldout/policy"]  # its sample held only fast searches' positions
    assert "on positions it never trained on value 0.420, on those it could value 0.390, " in (
        train.closing_message(summary, "runs/t")
    )
    del summary["trends"]["eval/error_rate"]
    said = train.closing_message(summary, "runs/t", prog="train.py")
    assert "python evaluate.py curve runs/t --measures=ladder" in said
    assert "every checkpoint's Elo (the loop placed 3)" in said


def test_the_core_never_imports_the_commands():
    """STYLE.md: the core modules of azjax/ (the evaluation wing included) never import scripts."""
    offenders = []
    for folder in ("azjax", os.path.join("azjax", "eval"), "games"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if not name.endswith(".py"):
                continue
            path = os.path.join(ROOT, folder, name)
            with open(path) as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                if any(n == "azjax.commands" or n.startswith("azjax.commands.") for n in names):
                    offenders.append(os.path.relpath(path, ROOT))
    assert offenders == []


def test_installed_commands_run_from_any_folder(tmp_path):
    """The console scripts beside this interpreter (pip install puts them there), run from an
    empty folder: --help exits 0 and an error is one `azjax-train: error:` line and code 2."""
    folder = sysconfig.get_path("scripts")
    found = {
        c: os.path.join(folder, c) for c in EXPECTED if os.path.exists(os.path.join(folder, c))
    }
    if not found:
        pytest.skip(f"no console commands in {folder}: pip install -e . (or pip install .)")
    assert sorted(found) == sorted(EXPECTED)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    for command, path in found.items():
        done = subprocess.run(
            [path, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"usage: {command}")
    done = subprocess.run(
        [found["azjax-train"], "--game=nope"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("azjax-train: error: --game: unknown game 'nope'")
    assert os.listdir(tmp_path) == []  # nothing written where it ran


@pytest.mark.parametrize("name", ["games", "configs"])
def test_a_folder_that_shadows_azjax_s_own_packages_is_named(name, tmp_path):
    """A games/ or configs/ package in the working folder comes first on the path under
    `python -c` (and `python -m`): `import games` failed on games.base, and configs/'s defaults
    were silently none (Tic-Tac-Toe trained with the Config's 1024 games of 50 simulations)."""
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    done = subprocess.run(
        [sys.executable, "-c", "import azjax"],
        cwd=tmp_path,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert (
        f"azjax's {name} package ({os.path.join(ROOT, name)}) is shadowed by "
        f"{tmp_path / name}: a folder named {name} in the working folder"
    ) in done.stderr


def test_the_root_scripts_still_run_the_commands(tmp_path):
    """`python train.py` from a checkout: the thin wrapper runs the same main, named train.py."""
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "train.py"), "--game=nope"],
        cwd=tmp_path,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("train.py: error: --game: unknown game 'nope'")
