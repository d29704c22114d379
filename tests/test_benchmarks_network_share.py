"""benchmarks.network_share at a toy size: both self-plays and the forward pass timed, the share
printed, and bad input refused in one line with exit code 2."""

import jax
import jax.numpy as jnp
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
    forward, apart, hoisted = out[-3:]
    assert forward.startswith("forward pass alone, 4 positions: ") and "evaluations/s" in forward
    # the searches' folded batch norms against the module's own form, timed in the same run
    assert apart.startswith("the same with the batch norms apart") and "folded / apart = " in apart
    # XLA computes the fold (a per-channel rsqrt a convolution) once a chunk, not once a simulation
    assert hoisted.startswith("the fold's rsqrt in self-play's program: 0 of ")
    assert hoisted.endswith("inside its while loops (hoisted: folded once a chunk)")


def test_ops_in_loops_tells_a_hoisted_op_from_one_the_loop_runs():
    def f(w, x):  # rsqrt(w + 1) is invariant, rsqrt(x * x + i) depends on the loop's carry
        body = lambda i, x: jnp.tanh(x * jax.lax.rsqrt(w + 1.0)) + jax.lax.rsqrt(x * x + i)
        return jax.lax.fori_loop(0, 5, body, x)

    hlo = jax.jit(f).lower(jnp.ones(3), jnp.ones(3)).compile().as_text()
    assert network_share.ops_in_loops(hlo, "rsqrt") == (1, 2)
    assert network_share.ops_in_loops(hlo, "cosine") == (0, 0)


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
