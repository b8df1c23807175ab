"""Stacking many traced pieces: ``wg.grad`` and ``wg.jvp`` of
``sum(stack([x[i] * x[i] for i in range(N)]) ** 2)`` over N float64 scalars, for N up to 200,000,
and the slope of log time against log N (1 is linear). The same with ``wnp.array`` of the pieces and
with ``concatenate`` of length-one pieces, beside PyTorch's ``torch.stack`` and the hand-written
derivative. Run by ``make bench`` (or ``python -m benchmarks --only stack``).
"""

import math
import time

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from benchmarks import peers

__all__ = ["matches", "run", "SIZES", "slope"]

SIZES = (25_000, 50_000, 100_000, 200_000)
QUICK_SIZES = (500, 1_000, 2_000)


def matches(name):
    """Whether an ``--only`` argument selects this benchmark ("stack", "stacking")."""
    key = name.lower()
    return key.startswith("stack")


def slope(sizes, times):
    """The least-squares slope of log time against log size."""
    lx, ly = np.log(sizes), np.log(times)
    return float(np.polyfit(lx, ly, 1)[0])


def _builders():
    return {
        "stack": lambda ps: wnp.stack(ps),
        "array": lambda ps: wnp.array(ps),
        "concatenate": lambda ps: wnp.concatenate([wnp.reshape(p, (1,)) for p in ps]),
    }


def _loss(make, n):
    def f(v):
        return wnp.sum(make([v[i] * v[i] for i in range(n)]) ** 2)
    return f


def _best(fun, rounds):
    """The median wall time of ``rounds`` calls of ``fun`` and its last result."""
    times, out = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        out = fun()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), out


def _torch(n, rounds):
    torch = peers.load_torch()
    x = torch.linspace(0.1, 1.0, n, dtype=torch.float64, requires_grad=True)

    def call():
        x.grad = None
        y = torch.stack([x[i] * x[i] for i in range(n)])
        (y ** 2).sum().backward()
        return x.grad.numpy().copy()

    return _best(call, rounds)


def run(quick=False, rounds=None):
    """Print the table (seconds per call, and slopes); returns the number of failed cross-checks."""
    sizes = QUICK_SIZES if quick else SIZES
    rounds = rounds or (1 if quick else 3)
    rows = {}
    failed = 0
    for name in _builders():
        for mode in ("grad", "jvp"):
            rows[f"wengert {mode}, {name}"] = []
    rows["PyTorch, torch.stack"] = []
    rows["hand-written"] = []
    for n in sizes:
        x = np.linspace(0.1, 1.0, n)
        t = np.cos(np.arange(float(n)))
        want = 4 * x ** 3
        for name, make in _builders().items():
            f = _loss(make, n)
            secs, g = _best(lambda f=f, x=x: wg.grad(f)(x), rounds)
            rows[f"wengert grad, {name}"].append(secs)
            failed += not np.allclose(g, want, rtol=1e-12)
            secs, (_, d) = _best(lambda f=f, x=x, t=t: wg.jvp(f, (x,), (t,)), rounds)
            rows[f"wengert jvp, {name}"].append(secs)
            failed += not math.isclose(d, float(want @ t), rel_tol=1e-10)
        secs, _ = _best(lambda x=x: 4 * x ** 3, rounds)
        rows["hand-written"].append(secs)
        try:
            secs, g = _torch(n, rounds)
            rows["PyTorch, torch.stack"].append(secs)
            failed += not np.allclose(g, want, rtol=1e-12)
        except peers.PeerUnavailable as e:
            rows.pop("PyTorch, torch.stack", None)
            print(f"PyTorch skipped: {e}")
    print(f"\nStacking N traced scalars: seconds per call (median of {rounds}), slope of log time "
          "against log N")
    header = "| implementation | " + " | ".join(f"N = {n:,}" for n in sizes) + " | slope |"
    print(header)
    print("|---" * (len(sizes) + 2) + "|")
    for name, times in rows.items():
        if len(times) == len(sizes):
            cells = " | ".join(f"{s:.3g}" for s in times)
            print(f"| {name} | {cells} | {slope(sizes, times):.2f} |")
    if failed:
        print(f"{failed} stacking result(s) differ from the formula")
    return failed


if __name__ == "__main__":
    run()
