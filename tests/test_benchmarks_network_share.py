"""benchmarks.network_share at a toy size: both self-plays and the forward pass timed, the share
printed, and bad input refused in one line with exit code 2."""

import pytest

from benchmarks import network_share


def test_times_self_play_with_the_network_and_the_stub_and_the_forward_pass(capsys):
    argv = ["--game=hex", "--size=3", "--steps=2", "--repeats=1", "--batch_games=4"]
    assert network_share.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# hex {'size': 3") and "--config=cpu: gumbel 32 simulations" in out[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in out if line.startswith("| ")}
    assert {"network", "stub"} <= set(rows)
    share = next(line for line in out if line.startswith("the network's share of self-play: "))
    # as measured: at this toy size, on a loaded machine, the stub may take the longer
    assert int(share.rsplit(" ", 1)[1].rstrip("%")) <= 100
    forward, apart = out[-2:]
    assert forward.startswith("forward pass alone, 4 positions: ") and "evaluations/s" in forward
    # the searches' folded batch norms against the module's own form, timed in the same run
    assert apart.startswith("the same with the batch norms apart") and "folded / apart = " in apart


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--game=go"], "unknown game 'go'"),
        (["--game=othello", "--size=7"], "size must be an even integer"),
        (
            ["--game=connect_four", "--size=5"],
            "--size is not an option of connect_four; its options: rows, cols, connect",
        ),
        (["--game=hex", "--config=othello"], "--game=hex but --config=othello is othello"),
        (["--repeats=0"], "--repeats must be at least 1"),
        (["--steps=0"], "--steps must be at least 1"),
    ],
)
def test_refuses_bad_input_in_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        network_share.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]
