"""The machine-speed workloads: loop code over scalars and small arrays, where the interpreter is the
cost. Each runs every system that applies side by side, single-threaded, in one process:
hand-written Python/NumPy, ``jax.jit``, wengert uncompiled (``wg.grad``, ``wg.hessian``), its
derivative programs (``wg.compile``, ``wg.source_grad``), the same with ``backend="numba"``, PyTorch
where it is the usual tool, and a hand-written Numba loop with a hand-written adjoint or tangent
(``benchmarks/native_floors.py``): the floor.

- ``native-chain``: 10,000 steps of z = z*y + 0.5 sin(z) (40,000 operations), gradient w.r.t. (x, y);
- ``native-loop``: ``s += v[i] * v[i]`` by a loop at n = 4,000 and 10^6, timed interleaved;
  :func:`loop_summary` gives each system's time per element and its slope, (t(10^6) / t(4,000)) /
  (10^6 / 4,000): 1 for a cost linear in n;
- ``native-lorenz``: RK4 of the Lorenz system (sigma, rho, beta = 10, 14, 8/3; dt 0.01; 1,000 steps
  of a plain Python loop), gradient of x + y + z at the end w.r.t. (sigma, rho, beta);
- ``native-tiny-network``: gradient of a 20-20-10 softmax cross-entropy written with wengert.numpy;
- ``native-hessian``: the full Hessian of the Rosenbrock function, n = 100;
- ``native-compile-time``: ``wg.compile``'s trace and build of the chain's gradient at 10,000, 20,000
  and 40,000 operations beside Python's own ``compile`` of the generated source, with slopes (and
  the slope of a minimal pass written in Python over as many statements: ``_minimal_pass_s``).

A ``backend="numba"`` call that this checkout's wengert refuses (TypeError or ValueError naming
``backend``) or that cannot import Numba is reported "n/a"; a build that runs past
``BUILD_LIMIT_S`` is stopped and reported "unavailable"; a ``*FallbackWarning`` during the build is
shown in the note. One-time build times (trace, passes, code generation, Numba, XLA) are in the notes.
"""

import argparse
import contextlib
import gc
import json
import signal
import sys
import threading
import time
import warnings

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from benchmarks import indexing, peers
from benchmarks import workloads as W
from benchmarks.fresh import in_fresh_process
from benchmarks.harness import IMPLEMENTATIONS, Impl, Target, Workload
from benchmarks.indexing import slope
from benchmarks.native_floors import (
    LORENZ_START,
    kernels,
    lorenz_step,
    numba_kernels,
    rosenbrock,
    rosenbrock_hessian,
)
from benchmarks.source import loop_sum

__all__ = ["NATIVE_NAMES", "LOOP_NAME", "BUILD_LIMIT_S", "native_chain", "native_loop", "native_lorenz",
           "native_tiny_network", "native_hessian", "native_compile_time", "lorenz_rk4", "workloads",
           "loop_summary", "loop_summary_markdown", "native_build"]

LOOP_NAME = "native-loop"
NATIVE_NAMES = ("native-chain", LOOP_NAME, "native-lorenz", "native-tiny-network", "native-hessian",
                "native-compile-time")
LOOP_SIZES = (4_000, 1_000_000)
LOOP_HAND_MAX_N = 1_000_000  # hand-written Python: about 0.15 s a call at 10^6
LOOP_TAPE_MAX_N = 4_000  # wg.grad: a recorded node per operation, seconds at 10^6
COMPILE_SIZES = (10_000, 20_000, 40_000)
BUILD_LIMIT_S = 120.0  # a backend="numba" build (or one size of it) running longer is stopped
TARGET_LOOP_SLOPE = 1.05
TARGET_COMPILE_S = 1.0
NUMBA = "numba"


# -- building the systems --------------------------------------------------------------------------

class _BuildTimeout(BaseException):
    """Raised by the alarm in :func:`_time_limit`: a BaseException, so that no ``except Exception``
    in the library being timed swallows it."""


@contextlib.contextmanager
def _time_limit(seconds):
    """Stop the block with ``_BuildTimeout`` after ``seconds``, and every half second after that until it
    stops (main thread only; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def alarm(_signum, _frame):
        raise _BuildTimeout()

    previous = signal.signal(signal.SIGALRM, alarm)
    # repeating: an exception raised where Python ignores it (a gc callback, a __del__) is lost
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _seconds(s):
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.1f} s"


def native_build(build, call, what, limit_s=BUILD_LIMIT_S):
    """``build()`` (a wengert transform with ``backend="numba"``) and its first ``call(fn)``, timed
    together: ``(fn, first output, seconds, note)``. Raises ``peers.NotApplicable`` where this
    wengert refuses the keyword or lacks Numba, ``peers.PeerUnavailable`` past ``limit_s``; the note
    names any ``*FallbackWarning`` (the program, or part of it, ran as Python)."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with _time_limit(limit_s):
                fn = build()
                out = call(fn)
        except ImportError as e:
            raise peers.NotApplicable(f"{what}: {type(e).__name__}: {e}") from None
        except (TypeError, ValueError) as e:
            if "backend" not in str(e):
                raise
            raise peers.NotApplicable(f"{what}: {type(e).__name__}: {e}") from None
        except _BuildTimeout:
            raise peers.PeerUnavailable(f"{what}: build stopped after {limit_s:.0f} s") from None
    seconds = time.perf_counter() - start
    fallbacks = [str(w.message) for w in caught if type(w.message).__name__.endswith("FallbackWarning")]
    note = f"{what}, build+first call {_seconds(seconds)}"
    if fallbacks:
        note += f"; {len(fallbacks)} fallback warning(s): {fallbacks[0]}"
    return fn, out, seconds, note


def _first_call(run):
    start = time.perf_counter()
    out = run()
    return out, time.perf_counter() - start


def _jit_note(build):
    return f"jax.jit, trace+compile {_seconds(build)}"


def _floats(values):
    return [float(np.asarray(v)) for v in values]


def _floor(name):
    """The hand-written Numba kernel ``name``, compiled by its first call outside the timing."""
    return numba_kernels()[name]


# -- 1. the scalar chain ---------------------------------------------------------------------------

def native_chain(steps=10_000, rounds=9, x=0.3, y=0.9):
    """The scalar chain's gradient (``steps`` steps, four operations each) by every system."""

    def f(a, b):
        return W.chain_forward(wnp.sin, a, b, steps)

    def loop(a, b):  # the same chain with its loop in view, for the derivatives from source
        z = a
        for _ in range(steps):
            z = z * b + 0.5 * wnp.sin(z)
        return z

    def hand_impl():
        return Impl(lambda: W.chain_by_hand(x, y, steps), lambda out: (out[0], list(out[1])))

    def source_impl():
        d = wg.source_grad(loop, argnums=(0, 1))
        _, build = _first_call(lambda: d(x, y))
        return Impl(lambda: d(x, y), lambda out: (None, list(out)), note=f"build {_seconds(build)}")

    def source_numba_impl():
        d, _, _, note = native_build(lambda: wg.source_grad(loop, argnums=(0, 1), backend=NUMBA),
                                     lambda d: d(x, y), 'wg.source_grad(f, backend="numba")')
        return Impl(lambda: d(x, y), lambda out: (None, list(out)), note=note)

    def tape_impl():
        g = wg.grad(f, argnums=(0, 1))
        return Impl(lambda: g(x, y), lambda out: (None, list(out)), note="wg.grad")

    def compiled_impl():
        g = wg.compile(f).grad((0, 1))
        _, build = _first_call(lambda: g(x, y))
        return Impl(lambda: g(x, y), lambda out: (None, list(out)), note=f"trace+compile {_seconds(build)}")

    def compiled_numba_impl():
        g, _, _, note = native_build(lambda: wg.compile(f, backend=NUMBA).grad((0, 1)), lambda g: g(x, y),
                                     'wg.compile(f, backend="numba")')
        return Impl(lambda: g(x, y), lambda out: (None, list(out)), note=note)

    def jit_impl():
        jax, jnp = peers.load_jax()

        def loss(a, b):
            return jax.lax.fori_loop(0, steps, lambda _, z: z * b + 0.5 * jnp.sin(z), a)

        g = jax.jit(jax.grad(loss, argnums=(0, 1)))
        _, build = _first_call(lambda: jax.block_until_ready(g(x, y)))
        return Impl(lambda: jax.block_until_ready(g(x, y)), lambda out: (None, _floats(out)),
                    note="lax.fori_loop; " + _jit_note(build))

    def numba_impl():
        kernel = _floor("chain_adjoint")
        _, build = _first_call(lambda: kernel(x, y, steps))
        return Impl(lambda: kernel(x, y, steps), lambda out: (out[0], [out[1], out[2]]),
                    note=f"forward loop keeping z, adjoint loop; njit {_seconds(build)}")

    return Workload(
        name="native-chain",
        title=f"scalar chain, machine speed: {steps:,} steps of z = z*y + 0.5*sin(z), "
              f"{4 * steps:,} operations",
        description="Gradient w.r.t. (x, y) on Python floats. wg.compile traces the chain to straight-line "
                    "code (which Numba takes minutes to compile: over 1,000 statements its backend keeps "
                    "the Python program, with a warning); wg.source_grad keeps the loop; jax.jit runs the "
                    "same step in lax.fori_loop.",
        params=("x", "y"), rtol=1e-6, reference=lambda: W.chain_by_hand(x, y, steps),
        factories={"hand": hand_impl, "wengert": tape_impl, "jit": jit_impl, "wg.compile": compiled_impl,
                   "compile-numba": compiled_numba_impl, "source": source_impl,
                   "source-numba": source_numba_impl, "numba": numba_impl},
        rounds=rounds, sample_s=0.05, max_calls=500, ops=4 * steps, subject="source-numba",
        targets=[Target("source_grad numba at most jax.jit's time", "jit", 1.0, kind="within"),
                 Target("source_grad numba within 1.5x of hand-written Numba", "numba", 1.5, kind="within")],
    )


# -- 2. the indexing loop ----------------------------------------------------------------------------

def native_loop(n, rounds=None, seed=0):
    """``s += v[i] * v[i]`` by a loop at size ``n``: its gradient by every system."""
    v = np.random.default_rng(seed).standard_normal(n)
    rounds = rounds if rounds is not None else 9

    def hand_impl():
        return Impl(lambda: indexing.loop_sum_by_hand(v), lambda out: out)

    def tape_impl():
        g = wg.grad(loop_sum)
        return Impl(lambda: g(v), lambda out: (None, [out]), note="wg.grad")

    def source_impl():
        d = wg.source_grad(loop_sum)
        _, build = _first_call(lambda: d(v))
        return Impl(lambda: d(v), lambda out: (None, [out]), note=f"build {_seconds(build)}")

    def source_numba_impl():
        d, _, _, note = native_build(lambda: wg.source_grad(loop_sum, backend=NUMBA), lambda d: d(v),
                                     'wg.source_grad(f, backend="numba")')
        return Impl(lambda: d(v), lambda out: (None, [out]), note=note)

    def jit_impl():
        jax, jnp = peers.load_jax()

        def f(u):
            return jax.lax.fori_loop(0, u.shape[0], lambda i, s: s + u[i] * u[i], jnp.float64(0.0))

        g = jax.jit(jax.grad(f))
        vj = jnp.asarray(v)
        _, build = _first_call(lambda: jax.block_until_ready(g(vj)))
        return Impl(lambda: jax.block_until_ready(g(vj)), lambda out: (None, [np.asarray(out)]),
                    note="lax.fori_loop; " + _jit_note(build))

    def numba_impl():
        kernel = _floor("loop_adjoint")
        _, build = _first_call(lambda: kernel(v))
        return Impl(lambda: kernel(v), lambda out: (out[0], [out[1]]), note=f"njit {_seconds(build)}")

    factories = {"hand": hand_impl, "wengert": tape_impl, "jit": jit_impl, "source": source_impl,
                 "source-numba": source_numba_impl, "numba": numba_impl}
    if n > LOOP_HAND_MAX_N:
        del factories["hand"]
    if n > LOOP_TAPE_MAX_N:
        del factories["wengert"]
    targets = [Target("wg.source_grad numba at most jax.jit's time", "jit", 1.0, kind="within")]
    if n == LOOP_SIZES[-1]:
        targets.append(Target("wg.source_grad numba within 2x of hand-written Numba", "numba", 2.0,
                              kind="within"))
    return Workload(
        name=LOOP_NAME,
        title=f"loop, machine speed: gradient of `for i in range(n): s += v[i] * v[i]`, n = {n:,}",
        description="Times per element (µs / op = µs per element of v). jax.jit runs the same loop in "
                    "lax.fori_loop; the hand-written code adds 2 v[i] into v_bar[i] in a reverse loop.",
        params=("v",), rtol=1e-9, reference=lambda: indexing.loop_sum_by_hand(v),
        factories=factories, rounds=rounds, sample_s=0.1, max_calls=2000, ops=n, subject="source-numba",
        targets=targets,
    )


def loop_summary(results):
    """µs per element at each size, and the slope (t(large) / t(small)) / (large / small), per
    system ("" when the loop was not run at two sizes)."""
    runs = sorted((r for r in results if r.workload.name == LOOP_NAME), key=lambda r: r.workload.ops)
    if len(runs) < 2:
        return ""
    small, large = runs[0], runs[-1]
    n0, n1 = small.workload.ops, large.workload.ops
    head = ["implementation"] + [f"n={r.workload.ops:,}" for r in runs] + [f"slope {n1:,}/{n0:,}"]
    rows, slopes = [], {}
    for key, label in IMPLEMENTATIONS.items():
        per = [r.get(key).per_op() * 1e6 if r.get(key) else None for r in runs]
        if all(p is None for p in per):
            continue
        if per[0] is not None and per[-1] is not None:
            slopes[key] = per[-1] / per[0]  # (t1 / t0) / (n1 / n0), from the times per element
        rows.append([label] + ["-" if p is None else f"{p:.3g}" for p in per]
                    + [f"{slopes[key]:.2f}" if key in slopes else "-"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]

    def fmt(cells):
        return "  ".join(c.ljust(wd) if i == 0 else c.rjust(wd)
                         for i, (c, wd) in enumerate(zip(cells, widths)))

    lines = ["== loop, machine speed: µs per element by n; slope = (time at the larger n / time at the "
             "smaller) / (ratio of the n), 1 for a linear cost", fmt(head), fmt(["-" * wd for wd in widths])]
    lines += [fmt(row) for row in rows]
    label = IMPLEMENTATIONS["source-numba"]
    if "source-numba" in slopes:
        s = slopes["source-numba"]
        verdict = "MET" if s <= TARGET_LOOP_SLOPE else "NOT MET"
        lines.append(f"  [{verdict}] {label} slope <= {TARGET_LOOP_SLOPE} (measured {s:.2f})")
    else:
        lines.append(f"  [N/A] {label} slope <= {TARGET_LOOP_SLOPE} (not measured)")
    return "\n".join(lines)


def loop_summary_markdown(results):
    """:func:`loop_summary` as a Markdown section ("" when not run)."""
    text = loop_summary(results)
    return f"## Loop at machine speed: slopes\n\n```\n{text}\n```\n" if text else ""


# -- 3. RK4 of the Lorenz system -------------------------------------------------------------------

def lorenz_rk4(sigma, rho, beta, steps):
    """x + y + z after ``steps`` RK4 steps (dt 0.01) of the Lorenz system from (1, 1, 1): a plain
    Python loop over floats, about 70 operations a step."""
    dt = 0.01
    x = 1.0
    y = 1.0
    z = 1.0
    for _ in range(steps):
        k1x = sigma * (y - x)
        k1y = x * (rho - z) - y
        k1z = x * y - beta * z
        x2 = x + 0.5 * dt * k1x
        y2 = y + 0.5 * dt * k1y
        z2 = z + 0.5 * dt * k1z
        k2x = sigma * (y2 - x2)
        k2y = x2 * (rho - z2) - y2
        k2z = x2 * y2 - beta * z2
        x3 = x + 0.5 * dt * k2x
        y3 = y + 0.5 * dt * k2y
        z3 = z + 0.5 * dt * k2z
        k3x = sigma * (y3 - x3)
        k3y = x3 * (rho - z3) - y3
        k3z = x3 * y3 - beta * z3
        x4 = x + dt * k3x
        y4 = y + dt * k3y
        z4 = z + dt * k3z
        k4x = sigma * (y4 - x4)
        k4y = x4 * (rho - z4) - y4
        k4z = x4 * y4 - beta * z4
        x = x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        y = y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
        z = z + dt / 6.0 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z)
    return x + y + z


def native_lorenz(steps=1_000, rounds=5, params=(10.0, 14.0, 8.0 / 3.0)):
    """The Lorenz RK4's gradient w.r.t. (sigma, rho, beta) by every system."""
    dt = 0.01
    sigma, rho, beta = params
    args = (sigma, rho, beta, steps)

    def reference():
        out = kernels()["lorenz_tangents"](sigma, rho, beta, steps, dt)
        return out[0], list(out[1:])

    def hand_impl():
        tangents = kernels()["lorenz_tangents"]
        return Impl(lambda: tangents(sigma, rho, beta, steps, dt), lambda out: (out[0], list(out[1:])),
                    note="forward mode, three tangents (the Numba kernel's text, in Python)")

    def tape_impl():
        g = wg.grad(lorenz_rk4, argnums=(0, 1, 2))
        return Impl(lambda: g(*args), lambda out: (None, list(out)), note="wg.grad")

    def compiled_impl():
        g = wg.compile(lorenz_rk4, static_argnums=3).grad((0, 1, 2))  # steps: a range bound
        _, build = _first_call(lambda: g(*args))
        return Impl(lambda: g(*args), lambda out: (None, list(out)), note=f"trace+compile {_seconds(build)}")

    def compiled_numba_impl():
        g, _, _, note = native_build(lambda: wg.compile(lorenz_rk4, static_argnums=3,
                                                        backend=NUMBA).grad((0, 1, 2)),
                                     lambda g: g(*args), 'wg.compile(f, backend="numba")')
        return Impl(lambda: g(*args), lambda out: (None, list(out)), note=note)

    def source_impl():
        d = wg.source_grad(lorenz_rk4, argnums=(0, 1, 2))
        _, build = _first_call(lambda: d(*args))
        return Impl(lambda: d(*args), lambda out: (None, list(out)), note=f"build {_seconds(build)}")

    def source_numba_impl():
        d, _, _, note = native_build(lambda: wg.source_grad(lorenz_rk4, argnums=(0, 1, 2), backend=NUMBA),
                                     lambda d: d(*args), 'wg.source_grad(f, backend="numba")')
        return Impl(lambda: d(*args), lambda out: (None, list(out)), note=note)

    def torch_impl():
        torch = peers.load_torch()

        def run():
            p = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in params]
            x, y, z = LORENZ_START
            for _ in range(steps):
                x, y, z = lorenz_step(x, y, z, *p, dt)
            out = x + y + z
            out.backward()
            return out, [q.grad for q in p]

        return Impl(run, lambda out: (out[0].item(), [g.item() for g in out[1]]),
                    note="0-d tensors, the same step in a Python loop")

    def jit_impl():
        jax, jnp = peers.load_jax()

        def f(s, r, b):
            start = tuple(jnp.float64(c) for c in LORENZ_START)
            x, y, z = jax.lax.fori_loop(0, steps, lambda _, st: lorenz_step(*st, s, r, b, dt), start)
            return x + y + z

        g = jax.jit(jax.grad(f, argnums=(0, 1, 2)))
        _, build = _first_call(lambda: jax.block_until_ready(g(*params)))
        return Impl(lambda: jax.block_until_ready(g(*params)), lambda out: (None, _floats(out)),
                    note="lax.fori_loop; " + _jit_note(build))

    def numba_impl():
        kernel = _floor("lorenz_tangents")
        _, build = _first_call(lambda: kernel(sigma, rho, beta, steps, dt))
        return Impl(lambda: kernel(sigma, rho, beta, steps, dt), lambda out: (out[0], list(out[1:])),
                    note=f"forward mode, three tangents; njit {_seconds(build)}")

    return Workload(
        name="native-lorenz",
        title=f"Lorenz RK4, machine speed: {steps:,} steps, gradient of x+y+z w.r.t. (sigma, rho, beta)",
        description=f"sigma, rho, beta = {sigma:g}, {rho:g}, {beta:.4g}; dt {dt}; from (1, 1, 1). wengert "
                    "differentiates the plain Python loop (about 70 scalar operations a step); jax.jit runs "
                    "the same step in lax.fori_loop; the hand-written code is forward mode with three "
                    "tangents.",
        params=("sigma", "rho", "beta"), rtol=1e-8, reference=reference,
        factories={"hand": hand_impl, "wengert": tape_impl, "torch": torch_impl, "jit": jit_impl,
                   "wg.compile": compiled_impl, "compile-numba": compiled_numba_impl, "source": source_impl,
                   "source-numba": source_numba_impl, "numba": numba_impl},
        rounds=rounds, sample_s=0.05, max_calls=500, subject="source-numba",
        targets=[Target("wg.source_grad numba at most 0.5x jax.jit's time", "jit", 0.5, kind="within"),
                 Target("wg.source_grad numba within 1.5x of hand-written Numba", "numba", 1.5,
                        kind="within")],
    )


# -- 4. the tiny network, loss written with wengert.numpy --------------------------------------------

def native_tiny_network(rounds=41, seed=0):
    """The tiny network's gradient w.r.t. (W1, W2), its loss from wengert.numpy pieces."""
    W1, W2, x, label = W.tiny_data(seed)

    def f(a, b, xx, lab):
        return W.tiny_loss(wnp, a, b, xx, lab)

    def hand_impl():
        return Impl(lambda: W.tiny_by_hand(W1, W2, x, label), lambda out: out)

    def compiled_impl():
        g = wg.compile(f).grad((0, 1))
        _, build = _first_call(lambda: g(W1, W2, x, label))
        return Impl(lambda: g(W1, W2, x, label), lambda out: (None, list(out)),
                    note=f"trace+compile {_seconds(build)}")

    def compiled_numba_impl():
        g, _, _, note = native_build(lambda: wg.compile(f, backend=NUMBA).grad((0, 1)),
                                     lambda g: g(W1, W2, x, label), 'wg.compile(f, backend="numba")')
        return Impl(lambda: g(W1, W2, x, label), lambda out: (None, list(out)), note=note)

    def jit_impl():
        jax, jnp = peers.load_jax()
        g = jax.jit(jax.grad(lambda a, b, xx, lab: W.tiny_loss(jnp, a, b, xx, lab), argnums=(0, 1)),
                    static_argnums=3)
        a, b, xj = jnp.asarray(W1), jnp.asarray(W2), jnp.asarray(x)
        _, build = _first_call(lambda: jax.block_until_ready(g(a, b, xj, label)))
        return Impl(lambda: jax.block_until_ready(g(a, b, xj, label)),
                    lambda out: (None, [np.asarray(v) for v in out]), note=_jit_note(build))

    def numba_impl():
        kernel = _floor("tiny_adjoint")
        _, build = _first_call(lambda: kernel(W1, W2, x, label))
        return Impl(lambda: kernel(W1, W2, x, label), lambda out: (out[0], [out[1], out[2]]),
                    note=f"njit {_seconds(build)}")

    return Workload(
        name="native-tiny-network",
        title="tiny network, machine speed: x (20,1), W1 (20,20), W2 (10,20), softmax cross-entropy, float64",
        description="Gradient w.r.t. (W1, W2) of max(pred) + log(sum(exp(pred - max))) - pred[label], "
                    "pred = W2 @ (W1 @ x), written with wengert.numpy (jax.numpy for jax.jit).",
        params=("W1", "W2"), rtol=1e-6, reference=lambda: W.tiny_by_hand(W1, W2, x, label),
        factories={"hand": hand_impl, "jit": jit_impl, "wg.compile": compiled_impl,
                   "compile-numba": compiled_numba_impl, "numba": numba_impl},
        rounds=rounds, sample_s=0.02, max_calls=5000, subject="wg.compile",
        targets=[Target("wg.compile within 1.2x of hand-written NumPy", "hand", 1.2, kind="within"),
                 Target("wg.compile numba faster than jax.jit", "jit", 1.0, subject="compile-numba")],
    )


# -- 5. the Rosenbrock Hessian -----------------------------------------------------------------------

def native_hessian(n=100, rounds=21, seed=0):
    """The full Hessian of the Rosenbrock function at a random point of size ``n``."""
    x = np.random.default_rng(seed).uniform(-1.5, 1.5, n)

    def f(v):
        return rosenbrock(wnp, v)

    def extract(out):
        return None, [np.asarray(out)]

    def hand_impl():
        return Impl(lambda: rosenbrock_hessian(x), extract, note="analytic, NumPy")

    def tape_impl():
        h = wg.hessian(f)
        return Impl(lambda: h(x), extract, note="wg.hessian")

    def compiled_impl():
        h = wg.compile(wg.hessian(f))
        _, build = _first_call(lambda: h(x))
        return Impl(lambda: h(x), extract, note=f"wg.compile(wg.hessian(f)), trace+compile {_seconds(build)}")

    def compiled_numba_impl():
        h, _, _, note = native_build(lambda: wg.compile(wg.hessian(f), backend=NUMBA), lambda h: h(x),
                                     'wg.compile(wg.hessian(f), backend="numba")')
        return Impl(lambda: h(x), extract, note=note)

    def jit_impl():
        jax, jnp = peers.load_jax()
        h = jax.jit(jax.hessian(lambda v: rosenbrock(jnp, v)))
        xj = jnp.asarray(x)
        _, build = _first_call(lambda: jax.block_until_ready(h(xj)))
        return Impl(lambda: jax.block_until_ready(h(xj)), extract, note="jax.hessian; " + _jit_note(build))

    def numba_impl():
        kernel = _floor("rosenbrock_hessian_loops")
        _, build = _first_call(lambda: kernel(x))
        return Impl(lambda: kernel(x), extract,
                    note=f"analytic, a loop over the terms; njit {_seconds(build)}")

    return Workload(
        name="native-hessian",
        title=f"Hessian, machine speed: Rosenbrock function, n = {n}, the full {n} x {n} matrix",
        description="sum(100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2) at a uniform random point in [-1.5, 1.5]^n.",
        params=("x",), rtol=1e-9, reference=lambda: (None, [rosenbrock_hessian(x)]),
        factories={"hand": hand_impl, "wengert": tape_impl, "jit": jit_impl, "wg.compile": compiled_impl,
                   "compile-numba": compiled_numba_impl, "numba": numba_impl},
        rounds=rounds, sample_s=0.02, max_calls=2000, subject="wg.compile",
        targets=[Target("wg.compile(wg.hessian(f)) at most 0.5x jax.jit(jax.hessian(f))", "jit", 0.5,
                        kind="within")],
    )


# -- 6. compile time --------------------------------------------------------------------------------

def _chain(steps):
    return lambda a, b: W.chain_forward(wnp.sin, a, b, steps)


def _python_compile_s(text):
    start = time.perf_counter()
    compile(text, "<chain>", "exec")
    return time.perf_counter() - start


class _Statement:
    __slots__ = ("outs", "prim", "args", "kwargs")


def _minimal_pass_s(n):
    """Seconds of the least a Python pass over an ``n``-statement program does: make the statements,
    key each by its primitive and arguments in a dict, and write each as a line of source. How the
    cost of any pass written in Python grows with the program on this machine (caches, allocator)."""
    start = time.perf_counter()
    statements = []
    for i in range(n):
        s = _Statement()
        s.outs, s.prim, s.args, s.kwargs = (i,), "multiply", (i - 1, i - 2), None
        statements.append(s)
    seen = {}
    for s in statements:
        seen[(s.prim, *s.args)] = s
    lines = [f"v{s.outs[0]} = v{s.args[0]} * v{s.args[1]}" for s in statements]
    seconds = time.perf_counter() - start
    del statements, seen, lines
    return seconds


STATEMENTS_PER_OP = 2.5
"""The chain's gradient program has about 2.5 statements per operation of the chain (forward and adjoint)."""


def compile_table(sizes, repeats=3, x=0.3, y=0.9):
    """``(wg.compile seconds, Python's compile seconds, a minimal pass's seconds)`` by size: the first
    call of a new compiled gradient of the chain (trace, passes, code generation, Python's compile,
    one run), Python's ``compile`` of the source it generated, and :func:`_minimal_pass_s` over as
    many statements as the program has; the least of ``repeats`` rounds, sizes interleaved."""
    wg.compile(_chain(3)).grad((0, 1))(x, y)  # what every first compilation imports and caches
    pipeline = [float("inf")] * len(sizes)
    python = [float("inf")] * len(sizes)
    minimal = [float("inf")] * len(sizes)
    for _ in range(repeats):
        for k, ops in enumerate(sizes):
            grad = wg.compile(_chain(ops // 4)).grad((0, 1))
            start = time.perf_counter()
            grad(x, y)
            pipeline[k] = min(pipeline[k], time.perf_counter() - start)
            python[k] = min(python[k], _python_compile_s(grad.source(x, y)))
            del grad
            gc.collect()
            minimal[k] = min(minimal[k], _minimal_pass_s(int(ops * STATEMENTS_PER_OP)))
    return pipeline, python, minimal


def native_compile_time(sizes=COMPILE_SIZES, repeats=3, rounds=1, x=0.3, y=0.9, limit_s=BUILD_LIMIT_S,
                        fresh=False):
    """wg.compile's trace and build of the chain's gradient by size beside Python's ``compile`` of
    the generated source (note), the timed call a whole build at the largest size. ``fresh``: the
    sizes are timed in a new interpreter (see ``benchmarks/compiled.py``: what ran before in this
    process leaves its heap behind, and a long compile is sensitive to it)."""
    steps = sizes[-1] // 4

    def compiled_impl():
        got = None
        if fresh:
            got = in_fresh_process("benchmarks.native", ["--compile-times", *map(str, sizes), "--repeats",
                                                         str(repeats)], "compile times", for_memory=False)
        pipeline, python, minimal = got if got is not None else compile_table(sizes, repeats, x, y)
        ours, theirs, floor = slope(sizes, pipeline), slope(sizes, python), slope(sizes, minimal)
        cells = [f"{n:,} ops {p:.2f} s (Python's compile {c:.2f} s, {p / c:.1f}x)"
                 for n, p, c in zip(sizes, pipeline, python)]
        met_s = "MET" if pipeline[-1] <= TARGET_COMPILE_S else "NOT MET"
        met_slope = "MET" if ours <= theirs else "NOT MET"
        met_floor = "MET" if ours <= max(theirs, floor) else "NOT MET"
        where = "a fresh process" if got is not None else "this process"
        note = (f"in {where}: " + "; ".join(cells) + f"; slope {ours:.2f}, Python's compile {theirs:.2f}, "
                f"a minimal Python pass over as many statements {floor:.2f}: [{met_slope}] slope <= Python's "
                f"compile's; [{met_floor}] slope <= the larger of Python's compile's and the minimal pass's; "
                f"[{met_s}] <= {TARGET_COMPILE_S:g} s at {sizes[-1]:,} ops")
        return Impl(lambda: wg.compile(_chain(steps)).grad((0, 1))(x, y), lambda out: (None, list(out)),
                    note=note)

    def compiled_numba_impl():
        what = 'wg.compile(f, backend="numba")'
        times = []
        for ops in sizes:  # stops at the first size that is refused or runs past the limit
            build = lambda ops=ops: wg.compile(_chain(ops // 4), backend=NUMBA).grad((0, 1))  # noqa: E731
            times.append(native_build(build, lambda g: g(x, y), what, limit_s)[2])
        note = f"{what}, build+first call: " + "; ".join(f"{n:,} ops {t:.2f} s" for n, t in zip(sizes, times))
        if len(sizes) > 1:
            note += f"; slope {slope(sizes, times):.2f}"

        def run():
            return native_build(lambda: wg.compile(_chain(steps), backend=NUMBA).grad((0, 1)),
                                lambda g: g(x, y), what, limit_s)[1]

        return Impl(run, lambda out: (None, list(out)), note=note)

    return Workload(
        name="native-compile-time",
        title="compile time, machine speed: the scalar chain's gradient at "
              f"{', '.join(f'{n:,}' for n in sizes)} operations",
        description="Each timed call builds anew at the largest size (trace, passes, code generation, "
                    "compile, one run). The note has each size (least of a few interleaved rounds), Python's "
                    "own compile() of the generated source beside it, and the log-log slopes, with that of "
                    "the least a pass written in Python does over as many statements (make them, key them "
                    "in a dict, write a line each): what any Python-level pass's growth is measured against.",
        params=("x", "y"), rtol=1e-6, reference=lambda: W.chain_by_hand(x, y, steps),
        factories={"wg.compile": compiled_impl, "compile-numba": compiled_numba_impl},
        rounds=rounds, sample_s=0.0, max_calls=1, ops=sizes[-1], subject="wg.compile",
    )


def workloads(quick=False):
    """The machine-speed workloads (``quick``: small sizes and few rounds, for smoke-testing)."""
    if quick:
        return ([native_chain(steps=250, rounds=3)] + [native_loop(n, rounds=3) for n in (400, 4000)]
                + [native_lorenz(steps=50, rounds=3), native_tiny_network(rounds=3),
                   native_hessian(n=20, rounds=3),
                   native_compile_time(sizes=(400, 800, 1600), repeats=1, rounds=1, limit_s=30.0)])
    return ([native_chain()] + [native_loop(n) for n in LOOP_SIZES]
            + [native_lorenz(), native_tiny_network(), native_hessian(), native_compile_time(fresh=True)])


def main(argv=None):
    """The child mode of ``native-compile-time``: ``--compile-times OPS ... [--repeats R]`` prints
    ``[wg.compile seconds, Python's compile seconds]`` by size as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.native")
    parser.add_argument("--compile-times", nargs="+", type=int, required=True, metavar="OPS")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(compile_table(args.compile_times, args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
