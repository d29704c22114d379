"""Small programs with collectives on two CPU devices, one behind another: the learner's calls.

    python -m benchmarks.cpu_collectives --mode=wait --seconds=90     # each call waited for
    python -m benchmarks.cpu_collectives --mode=queue --seconds=90    # calls queued (the old way)
    python -m benchmarks.cpu_collectives --mode=wait --compile        # and compiling beside them

Each call is one jitted `shard_map` step over a mesh of two CPU devices shaped like an optimizer
step of the CPU learner: an all-gather of per-device counts (the sample's), a small matrix
product, and a mean over the devices (the gradient's). `--mode=wait` waits on the host for each
call before dispatching the next (`azjax.parallel.settle`, what `training.learn` does on several
CPU devices); `--mode=queue` dispatches 200 calls and then waits, as the learner did until
session 42. `--compile` keeps a thread compiling other programs meanwhile (what `azjax.ahead`
does beside the training loop). It prints the calls made and the slowest batch of 200.

On XLA:CPU a queued call can end the process: one device's share waits in the all-gather for the
other's, which does not come, and after 40 s XLA stops with "Termination timeout for `all gather
RendezvousKey{...}`" (docs/benchmarks.md, "The learner's calls one at a time"). Run it beside
other work (a loaded machine met it sooner); a process that XLA ends prints nothing more.
"""

from __future__ import annotations

import sys
import threading
import time

BATCH = 200  # calls between the host's waits in queue mode


def _compile_until(stop: threading.Event) -> None:
    """Compiles (never runs) one new program after another until `stop` is set."""
    import jax
    import jax.numpy as jnp

    k = 0
    while not stop.is_set():

        def many_ops(y, k=k):
            for i in range(400 + k % 50):
                y = jnp.sin(y * (i + 1.0)) + jnp.cos(y[::-1] * 0.5)
            return y

        jax.jit(many_ops).lower(jnp.ones(1000)).compile()
        k += 1


def run(mode: str, seconds: float, compile_beside: bool) -> tuple[int, float]:
    """(calls made, slowest batch of `BATCH` calls in seconds) over `seconds` of `mode`."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from azjax import parallel

    if len(jax.devices("cpu")) < 2:
        raise SystemExit("cpu_collectives: needs two CPU devices (run it as its own process)")
    mesh = parallel.make_mesh(jax.devices("cpu")[:2])

    def step(w, x):  # w [64, 64] replicated, x [128, 64] per device
        counts = jax.lax.all_gather(jnp.sum(x), parallel.AXIS)
        grad = jax.lax.pmean(jnp.tanh(x @ w).sum() * counts.sum(), parallel.AXIS)
        return w - 1e-6 * grad

    call = jax.jit(
        jax.shard_map(
            step,
            mesh=mesh,
            in_specs=(P(), P(parallel.AXIS)),
            out_specs=P(),
            check_vma=False,
        )
    )
    w = jax.device_put(jnp.full((64, 64), 0.01), NamedSharding(mesh, P()))
    x = jax.device_put(jnp.ones((2 * 128, 64)), NamedSharding(mesh, P(parallel.AXIS)))
    w = jax.block_until_ready(call(w, x))  # compiled
    stop = threading.Event()
    compiler = threading.Thread(target=_compile_until, args=(stop,))
    if compile_beside:
        compiler.start()
    calls, slowest, end = 0, 0.0, time.time() + seconds
    while time.time() < end:
        t = time.time()
        for _ in range(BATCH):
            w = call(w, x)
            if mode == "wait":
                w = parallel.settle(w, mesh)
        jax.block_until_ready(w)
        calls += BATCH
        slowest = max(slowest, time.time() - t)
    stop.set()
    if compile_beside:
        compiler.join()  # its compilation in flight ends before the process may
    return calls, slowest


def main(argv: list[str] | None = None) -> int:
    from azjax import flags  # imports JAX; the devices are split below, before the backend starts

    parser = flags.Parser(module=__spec__.name, description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("wait", "queue"), default="wait")
    parser.add_argument("--seconds", type=float, default=90.0, help="how long to make calls")
    parser.add_argument("--compile", action="store_true", help="compile on a thread beside them")
    args = parser.parse_args(argv)
    if not 0 < args.seconds < float("inf"):  # NaN too
        parser.error(f"--seconds must be positive and finite, got {args.seconds}")
    from azjax import parallel

    parallel.split_cpu(2)
    calls, slowest = run(args.mode, args.seconds, args.compile)
    beside = ", compiling beside them" if args.compile else ""
    print(
        f"{args.mode}{beside}: {calls} calls with collectives on two CPU devices in "
        f"{args.seconds:g} s, the slowest batch of {BATCH} {slowest:.2f} s"
    )
    return 0


if __name__ == "__main__":
    from azjax import cli  # here: the module starts JAX itself, after its own settings

    sys.exit(cli.script("benchmarks.cpu_collectives", main))
