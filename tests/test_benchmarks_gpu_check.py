"""benchmarks.gpu_check runs each part's command in turn, teeing it to OUT/PART.txt, and says
which parts failed (the commands themselves are stood in for: their own tests run them)."""

import pytest

from benchmarks import gpu_check


def test_parts_run_the_project_commands_at_real_and_toy_sizes():
    parts = {p: gpu_check.command(p, "OUT") for p in gpu_check.PARTS}
    selfplay, bf16, train = parts["selfplay"], parts["bf16"], parts["train"]
    assert selfplay == [*gpu_check.SELFPLAY, "--markdown"]
    assert "1024" in selfplay and "benchmarks.selfplay" in selfplay
    assert bf16 == [*selfplay, "--dtype=bfloat16"]
    assert parts["plumbing"] == [*selfplay, "--games=hex", "--network=stub"]
    assert parts["batch256"] == [*selfplay, "--batch=256"]  # argparse keeps the last --batch
    assert parts["network"][:2] == ["-m", "benchmarks.network_share"]
    assert "--size=11" in parts["network"] and "--batch_games=1024" in parts["network"]
    assert "--size=5" in gpu_check.command("network", "OUT", quick=True)
    assert train[:2] == ["-m", "azjax.commands.train"]
    assert "--batch_games=1024" in train and train[-1].startswith("--workdir=OUT/train-")
    quick = gpu_check.command("train", "OUT", quick=True)
    assert "--size=5" in quick and "--iterations=2" in quick
    assert "--quick" in gpu_check.command("bf16", "OUT", quick=True)
    with pytest.raises(ValueError, match="choose from selfplay, network, bf16, plumbing"):
        gpu_check.command("latency", "OUT")


def test_each_part_is_logged_and_a_failure_named(tmp_path, monkeypatch, capsys):
    fake = {
        "selfplay": ["-c", "print('positions/s 123')"],
        "network": ["-c", "print('folded / apart = 0.80x')"],
        "bf16": ["-c", "import sys; print('out of memory'); sys.exit(3)"],
        "plumbing": ["-c", "pass"],
        "batch256": ["-c", "pass"],
        "train": ["-c", "print('in-loop evaluation: 9 s, 4% of the session')"],
    }
    monkeypatch.setattr(gpu_check, "command", lambda part, out, quick=False: fake[part])
    assert gpu_check.main([f"--out={tmp_path}"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "# parts failed: bf16"
    assert (tmp_path / "selfplay.txt").read_text().splitlines()[1] == "positions/s 123"
    bf16 = (tmp_path / "bf16.txt").read_text()
    assert "out of memory" in bf16 and "# exit 3 after" in bf16
    assert "4% of the session" in (tmp_path / "train.txt").read_text()
    assert "folded / apart = 0.80x" in (tmp_path / "network.txt").read_text()
    assert gpu_check.main([f"--out={tmp_path}", "--parts=train,selfplay"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "# every part ran"


def test_rejects_an_unknown_part(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        gpu_check.main([f"--out={tmp_path}", "--parts=selfplay,speed"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--parts: unknown speed; choose from selfplay, network, bf16, plumbing" in err
