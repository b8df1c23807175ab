"""The compiled workloads: ``wg.compile``'s generated gradient on the scalar chain and the tiny
network, against hand-written code, wengert's tape, PyTorch eager and ``jax.jit``. The one-time
trace+compile time of wengert and JAX is measured once and shown in the note column.

Two more measure ``wg.compile`` at scale:

- ``compiled-compile-time``: the one-time trace and compilation of the scalar chain's gradient at
  5,000 to 40,000 operations, with the log-log slope of the time against the operation count (the
  timed call is the largest size; the sizes and the slope are in the note). In ``make bench`` the
  sizes are timed in a fresh interpreter, so that the heap the workloads before it left behind does
  not weigh on it, and Python's own ``compile`` of the same sources is timed beside them;
- ``compiled-long-chain-memory``: 1,024 steps of ``x = a sin(x) + 0.1 x`` over 100,000 float64
  values, value and gradient, the compiled program beside the hand-written NumPy one: peak live
  memory (``tracemalloc``, in states of 800 KB) in the notes, and the time.

The compiled indexing loop runs with the indexing workload (``benchmarks/indexing.py``).
"""

import argparse
import gc
import json
import sys
import time
import tracemalloc

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from benchmarks import peers
from benchmarks import workloads as W
from benchmarks.checkpointing import hand_written, initial_state
from benchmarks.fresh import in_fresh_process
from benchmarks.harness import Impl, Target, Workload
from benchmarks.indexing import slope

__all__ = ["COMPILED_NAMES", "compiled_scalar_chain", "compiled_tiny_network", "compiled_compile_time",
           "compiled_long_chain_memory", "compile_times", "peak_states", "compiled_workloads"]

COMPILED_NAMES = ("compiled-scalar-chain", "compiled-tiny-network", "compiled-compile-time",
                  "compiled-long-chain-memory")
COMPILE_SIZES = (5_000, 10_000, 20_000, 40_000)
TARGET_COMPILE_S = 1.5  # at 40,000 operations
TARGET_SLOPE = 1.1
TARGET_MEMORY = 1.1  # compiled peak / hand-written peak


def _first_call(fun, *args):
    """``fun(*args)`` once (the trace and compilation happen there), and the seconds it took."""
    start = time.perf_counter()
    out = fun(*args)
    return out, time.perf_counter() - start


def _seconds(s):
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.1f} s"


def compiled_scalar_chain(steps=10_000, jit_steps=500, rounds=9, x=0.3, y=0.9):
    """The chain's gradient by wg.compile. ``jax.jit`` of the unrolled chain compiles in time that
    grows faster than the chain (about 26 s for 1,000 steps here), so it runs ``jit_steps`` steps,
    checked against the hand-written chain of that length and compared per operation."""
    base = W.scalar_chain(steps=steps, rounds=rounds, x=x, y=y)

    def compiled_impl():
        g = wg.compile(lambda a, b: W.chain_forward(wnp.sin, a, b, steps)).grad((0, 1))
        _, build = _first_call(g, x, y)
        return Impl(lambda: g(x, y), lambda out: (None, list(out)),
                    note=f"wg.compile, trace+compile {_seconds(build)}")

    def jit_impl():
        jax, jnp = peers.load_jax()
        n = min(steps, jit_steps)
        g = jax.jit(jax.grad(lambda a, b: W.chain_forward(jnp.sin, a, b, n), argnums=(0, 1)))
        _, build = _first_call(lambda: jax.block_until_ready(g(x, y)))
        return Impl(lambda: jax.block_until_ready(g(x, y)),
                    lambda out: (None, [float(np.asarray(v)) for v in out]),
                    reference=lambda: W.chain_by_hand(x, y, n), ops=4 * n,
                    note=f"{n:,} steps; jax.jit, trace+compile {_seconds(build)}")

    return Workload(
        name="compiled-scalar-chain",
        title=f"compiled scalar chain: {steps:,} steps of z = z*y + 0.5*sin(z), {4 * steps:,} operations",
        description="Gradient w.r.t. (x, y) by wg.compile(f).grad((0, 1)): straight-line generated "
                    "Python on floats, traced once. 'tape' is wg.grad on the same chain.",
        params=("x", "y"), rtol=1e-6, reference=base.reference,
        factories={"hand": base.factories["hand"], "wengert": compiled_impl,
                   "tape": base.factories["wengert"], "torch": base.factories["torch"], "jit": jit_impl},
        rounds=rounds, sample_s=0.0, max_calls=1, ops=4 * steps,
        targets=[Target("compiled gradient within 2x of hand-written Python", "hand", 2.0, kind="within")],
    )


def compiled_tiny_network(rounds=41, seed=0):
    """The tiny network, value and gradient by wg.compile."""
    base = W.tiny_network(rounds=rounds, seed=seed)
    W1, W2, x, label = W.tiny_data(seed)

    def compiled_impl():
        vg = wg.compile(lambda a, b, xx, lab: W.tiny_loss(wnp, a, b, xx, lab)).value_and_grad((0, 1))
        _, build = _first_call(vg, W1, W2, x, label)
        return Impl(lambda: vg(W1, W2, x, label), lambda out: (out[0], list(out[1])),
                    note=f"wg.compile, trace+compile {_seconds(build)}")

    def jit_impl():
        jax, jnp = peers.load_jax()
        loss = lambda a, b, xx, lab: W.tiny_loss(jnp, a, b, xx, lab)
        vg = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)), static_argnums=3)
        a, b, xj = jnp.asarray(W1), jnp.asarray(W2), jnp.asarray(x)
        _, build = _first_call(lambda: jax.block_until_ready(vg(a, b, xj, label)))
        return Impl(lambda: jax.block_until_ready(vg(a, b, xj, label)),
                    lambda out: (float(np.asarray(out[0])), [np.asarray(g) for g in out[1]]),
                    note=f"jax.jit, trace+compile {_seconds(build)}")

    return Workload(
        name="compiled-tiny-network",
        title="compiled tiny network: x (20,1), W1 (20,20), W2 (10,20), softmax cross-entropy, float64",
        description="loss = logsumexp(W2 @ W1 @ x) - pred[label]; value and gradient w.r.t. (W1, W2) by "
                    "wg.compile(loss).value_and_grad((0, 1)); 'tape' is wg.value_and_grad.",
        params=("W1", "W2"), rtol=1e-6, reference=base.reference,
        factories={"hand": base.factories["hand"], "wengert": compiled_impl,
                   "tape": base.factories["wengert"], "torch": base.factories["torch"], "jit": jit_impl},
        rounds=rounds, sample_s=0.02, max_calls=2000,
        targets=[Target("compiled forward+backward within 1.5x of hand-written NumPy", "hand", 1.5,
                        kind="within")],
    )


def _chain_grad(steps):
    """A new compiled gradient of the ``steps``-step chain (not traced yet: its first call is)."""
    return wg.compile(lambda a, b: W.chain_forward(wnp.sin, a, b, steps)).grad((0, 1))


def compile_times(sizes, repeats=3, x=0.3, y=0.9):
    """Seconds of the first call (trace, passes, code generation, Python's compile) of the scalar
    chain's compiled gradient with each of ``sizes`` operations: the least of ``repeats`` rounds,
    the sizes interleaved within a round, so that a change in the machine's load bends no slope."""
    _chain_grad(3)(x, y)  # what every first compilation imports and caches
    best = [float("inf")] * len(sizes)
    for _ in range(repeats):
        for k, n in enumerate(sizes):
            g = _chain_grad(n // 4)
            gc.collect()
            start = time.perf_counter()
            g(x, y)
            best[k] = min(best[k], time.perf_counter() - start)
            del g
    return best


def _python_compile_seconds(sizes, x, y, repeats=3):
    """Python's own ``compile`` of the generated source of the chain's gradient, for each of
    ``sizes`` operations (least of ``repeats``): how the part no pass of ours can change scales."""
    texts = [_chain_grad(n // 4).source(x, y) for n in sizes]
    best = [float("inf")] * len(sizes)
    for _ in range(repeats):
        for k, text in enumerate(texts):
            gc.collect()
            start = time.perf_counter()
            compile(text, "<chain>", "exec")
            best[k] = min(best[k], time.perf_counter() - start)
    return best


def _met(ok):
    return "MET" if ok else "NOT MET"


def _times_by_size(sizes, repeats, x, y):
    """``(pipeline seconds, Python's compile seconds)`` by size, measured in this process."""
    return compile_times(sizes, repeats, x, y), _python_compile_seconds(sizes, x, y, repeats)


def compiled_compile_time(sizes=COMPILE_SIZES, repeats=3, rounds=3, x=0.3, y=0.9, fresh=False):
    """Trace+compile time of the scalar chain's gradient by size, and its slope (see module docs).
    ``fresh``: the sizes are timed in a new interpreter (what ran before in this process -- other
    workloads, peer libraries -- leaves its heap behind, and a long compile is sensitive to it)."""
    steps = sizes[-1] // 4

    def compiled_impl():
        got = None
        if fresh:
            got = in_fresh_process("benchmarks.compiled", ["--compile-times", *map(str, sizes),
                                                           "--repeats", str(repeats)], "compile times",
                                   for_memory=False)
        where = "a fresh process" if got is not None else "this process"
        times, python = got if got is not None else _times_by_size(sizes, repeats, x, y)
        s = slope(sizes, times)
        note = (f"in {where}: " + ", ".join(f"{n:,} ops {t:.2f} s" for n, t in zip(sizes, times))
                + f" (Python's compile of the source alone {python[-1]:.2f} s at {sizes[-1]:,} ops, "
                f"slope {slope(sizes, python):.2f}); "
                f"[{_met(s <= TARGET_SLOPE)}] slope <= {TARGET_SLOPE} (measured {s:.2f}); "
                f"[{_met(times[-1] <= TARGET_COMPILE_S)}] <= {TARGET_COMPILE_S} s at {sizes[-1]:,} ops")

        def run():
            return _chain_grad(steps)(x, y)  # a new compiled function: traced and compiled again

        return Impl(run, lambda out: (None, list(out)), note=note)

    def jit_impl():
        jax, jnp = peers.load_jax()

        def loss(a, b):
            return jax.lax.fori_loop(0, steps, lambda _, z: z * b + 0.5 * jnp.sin(z), a)

        def run():  # a new function each time: traced and compiled again
            return jax.block_until_ready(jax.jit(jax.grad(lambda a, b: loss(a, b), argnums=(0, 1)))(x, y))

        return Impl(run, lambda out: (None, [float(np.asarray(v)) for v in out]),
                    note="lax.fori_loop (not unrolled): trace+compile+run")

    return Workload(
        name="compiled-compile-time",
        title="wg.compile's one-time cost: the scalar chain's gradient, "
              f"{', '.join(f'{n:,}' for n in sizes)} ops",
        description="Each timed call compiles anew (trace, passes, code generation, Python's compile) and "
                    "runs once; the note has every size (least of a few interleaved rounds) and the "
                    "log-log slope of the time against the operation count.",
        params=("x", "y"), rtol=1e-6, reference=lambda: W.chain_by_hand(x, y, steps),
        factories={"wengert": compiled_impl, "jit": jit_impl},
        rounds=rounds, sample_s=0.0, max_calls=1, ops=sizes[-1],
    )


def peak_states(fun, state_bytes):
    """Peak memory traced while ``fun()`` runs (``tracemalloc``), in states of ``state_bytes``."""
    gc.collect()
    tracemalloc.start()
    try:
        fun()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / state_bytes


def compiled_long_chain_memory(size=100_000, n=1024, rounds=3, a=0.9):
    """Peak live memory of the compiled long chain beside the hand-written NumPy program."""
    x0 = initial_state(size)
    hand = hand_written({"n": n})  # with a = 0.9

    def loss(x, s):
        for _ in range(n):
            x = s * wnp.sin(x) + 0.1 * x
        return wnp.sum(x)

    def hand_impl():
        return Impl(lambda: hand(x0), lambda out: out,
                    note=f"peak {peak_states(lambda: hand(x0), x0.nbytes):,.0f} states")

    def compiled_impl():
        vg = wg.compile(loss).value_and_grad((0, 1))
        _, build = _first_call(vg, x0, a)
        mine = peak_states(lambda: vg(x0, a), x0.nbytes)
        theirs = peak_states(lambda: hand(x0), x0.nbytes)
        note = (f"peak {mine:,.0f} states, hand-written {theirs:,.0f}: "
                f"[{_met(mine <= TARGET_MEMORY * theirs)}] <= {TARGET_MEMORY}x hand-written; "
                f"trace+compile {_seconds(build)}")
        return Impl(lambda: vg(x0, a), lambda out: (float(out[0]), list(out[1])), note=note)

    return Workload(
        name="compiled-long-chain-memory",
        title=f"compiled long chain: {n:,} steps of x = a sin(x) + 0.1 x over {size:,} float64, "
              "value and gradient",
        description="wg.compile(loss).value_and_grad((0, 1)) beside the hand-written NumPy program (which "
                    "keeps every x and computes sin(x) again backwards). Peak live memory by tracemalloc, "
                    "in states of one x (notes).",
        params=("x0", "a"), rtol=1e-8, reference=lambda: hand(x0),
        factories={"hand": hand_impl, "wengert": compiled_impl},
        rounds=rounds, sample_s=0.0, max_calls=1, ops=4 * n,
        targets=[Target("compiled within 1.5x of hand-written", "hand", 1.5, kind="within")],
    )


def compiled_workloads(quick=False):
    """The compiled workloads (``quick``: small sizes and few rounds, for smoke-testing)."""
    if quick:
        return [compiled_scalar_chain(steps=500, jit_steps=50, rounds=3), compiled_tiny_network(rounds=3),
                compiled_compile_time(sizes=(200, 400, 800), repeats=1, rounds=1),
                compiled_long_chain_memory(size=5_000, n=16, rounds=1)]
    return [compiled_scalar_chain(), compiled_tiny_network(), compiled_compile_time(fresh=True),
            compiled_long_chain_memory()]


def main(argv=None):
    """The child mode of ``compiled-compile-time``: ``--compile-times N ... [--repeats R]`` prints
    ``[pipeline seconds, Python's compile seconds]`` by size as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compiled")
    parser.add_argument("--compile-times", nargs="+", type=int, required=True, metavar="OPS")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(_times_by_size(args.compile_times, args.repeats, 0.3, 0.9)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
