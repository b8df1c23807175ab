"""A checkpointed loop compiled natively: the gradient of the Lorenz RK4 (``native_floors.lorenz_step``,
1,000 steps from (1, 1, 1), of x + y + z w.r.t. (sigma, rho, beta)) written with ``wg.iterate(...,
checkpoint=policy)`` and compiled with ``wg.compile``, by:

- ``compile``: ``wg.compile(f).grad``, the Python backend (the loop one statement, run in Python);
- ``compile-numba``: ``wg.compile(f, backend="numba").grad`` (``program/native_loop.py``);
- ``source-numba``: ``wg.source_grad(lorenz_rk4, backend="numba")`` of the plain loop (all states kept);
- ``jit``: ``jax.jit(jax.grad)`` of ``lax.fori_loop`` over ``jax.checkpoint`` of the step;
- ``floor``: the native loop's own step kernels called by one njit loop as often as the schedule
  evaluates them (advances + n forward steps, n VJPs), without the schedule: what a schedule costs
  is ``compile-numba`` minus this, per step (``schedule overhead``).

Interleaved in one process, medians of ``--rounds`` rounds, each the mean of several calls; wall
clock, single-threaded. ``python -m benchmarks.iterate_native [--n 1000] [--rounds 7]``.
"""

import argparse
import statistics
import sys
import time
import warnings

import numpy as np

import wengert as wg
from benchmarks import peers
from benchmarks.native import lorenz_rk4
from benchmarks.native_floors import LORENZ_START, lorenz_step
from wengert.checkpointing import binomial, ctz

__all__ = ["main"]

DT = 0.01
PARAMS = (10.0, 14.0, 8.0 / 3.0)


def _iterated(policy, n):
    def f(sigma, rho, beta):
        x, y, z = wg.iterate(lambda st: lorenz_step(*st, sigma, rho, beta, DT), LORENZ_START, n,
                             checkpoint=policy)
        return x + y + z
    return f


def _floor(native_grad, policy, n):
    """An njit loop calling the loop's step kernels as often as its schedule does."""
    numba = peers.load_numba()
    program = native_grad.program(*PARAMS)
    loop = next(s.prim.fun.__self__ for s in program.statements if s.prim.__name__.endswith("_vjp"))
    drivers = sys.modules[loop.native[0]]
    step, vjp = drivers.step, drivers.step_vjp
    schedule = binomial(n) if policy == "binomial" else ctz(n)
    advances = schedule.advances + n if policy != "all" else 2 * n - 1

    @numba.njit
    def floor(advances, n, s, r, b):
        x, y, z = 1.0, 1.0, 1.0
        for _ in range(advances):
            x, y, z = step(x, y, z, s, r, b)
        gx, gy, gz, acc = 1.0, 1.0, 1.0, 0.0
        for _ in range(n):  # each VJP from the cotangents of the one before: nothing to hoist
            got = vjp(x, y, z, s, r, b, gx, gy, gz)
            gx, gy, gz = got[3] * 1e-3, got[4] * 1e-3, got[5] * 1e-3
            acc += got[6]
        return x + acc + gx

    floor(advances, n, *PARAMS)
    return lambda: floor(advances, n, *PARAMS)


def _jit(n):
    jax, jnp = peers.load_jax()

    def f(s, r, b):
        start = tuple(jnp.float64(c) for c in LORENZ_START)
        body = jax.checkpoint(lambda _, st: lorenz_step(*st, s, r, b, DT))
        x, y, z = jax.lax.fori_loop(0, n, body, start)
        return x + y + z

    g = jax.jit(jax.grad(f, argnums=(0, 1, 2)))
    jax.block_until_ready(g(*PARAMS))
    return lambda: jax.block_until_ready(g(*PARAMS))


def _timed(fun, min_s=0.02):
    calls, start = 0, time.perf_counter()
    while True:
        fun()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_s:
            return elapsed / calls


def run(n, rounds, policy):
    f = _iterated(policy, n)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        native = wg.compile(f, backend="numba").grad((0, 1, 2))
        native(*PARAMS)
        build = time.perf_counter() - start
    fallbacks = [str(w.message) for w in caught if "Fallback" in type(w.message).__name__]
    python = wg.compile(f).grad((0, 1, 2))
    source = wg.source_grad(lorenz_rk4, argnums=(0, 1, 2), backend="numba")
    args = (*PARAMS, n)
    cases = {"compile": lambda: python(*PARAMS), "compile-numba": lambda: native(*PARAMS),
             "source-numba": lambda: source(*args), "floor": _floor(native, policy, n)}
    try:
        cases["jit"] = _jit(n)
    except peers.PeerUnavailable:
        pass
    want = np.array(python(*PARAMS))
    diffs = {k: float(np.max(np.abs(np.array(cases[k]()) / want - 1)))
             for k in ("compile-numba", "source-numba")}
    times = {k: [] for k in cases}
    for _ in range(rounds):
        for k, fun in cases.items():
            times[k].append(_timed(fun))
    med = {k: statistics.median(v) for k, v in times.items()}
    return med, build, fallbacks, diffs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--policy", nargs="+", default=["binomial", "ctz"])
    args = parser.parse_args(argv)
    print("| policy | n | compile (Python) | compile-numba | source-numba (plain loop) | jax.jit checkpoint "
          "| floor (kernels alone) | schedule overhead / step | numba build |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.n:
        for policy in args.policy:
            med, build, fallbacks, diffs = run(n, args.rounds, policy)
            us = {k: v * 1e6 for k, v in med.items()}
            jit = f"{us['jit']:.0f} µs" if "jit" in us else "n/a"
            print(f"| {policy} | {n:,} | {us['compile']:.0f} µs | {us['compile-numba']:.0f} µs | "
                  f"{us['source-numba']:.0f} µs | {jit} | {us['floor']:.0f} µs | "
                  f"{(us['compile-numba'] - us['floor']) / n * 1e3:.0f} ns | {build:.1f} s |", flush=True)
            if fallbacks:
                print(f"  fallback: {fallbacks[0]}")
            print(f"  max rel. diff vs the Python backend: {diffs}")
    print(f"medians of {args.rounds} interleaved rounds (wall clock)")


if __name__ == "__main__":
    main()
