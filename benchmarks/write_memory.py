"""Memory of element writes into a traced buffer, beside PyTorch: ``python -m benchmarks --only memory``
(a part of the memory table), or ``python -m benchmarks.write_memory [--quick]`` alone.

The workload, n writes into an n-element buffer, then the gradient::

    y = x * 0.0                      # wengert: traced;  PyTorch: torch.zeros(n, dtype=float64)
    for i in range(n): y[i] = x[i] * 2.0
    grad of sum(y * y)

Each row is the resident peak above the start of the call, in a fresh process (the library's start-up
not counted; glibc's allocator set to return freed memory, as for the other resident rows), for
``wg.grad``, an eager ``wg.Tensor`` and PyTorch; and tracemalloc's peak for ``wg.grad`` (which sees
NumPy's and Python's allocations, not PyTorch's). Before writes released the overwritten array,
each write kept a whole buffer: n^2 * 8 bytes, 125 MiB for 4,000 writes.
"""

import argparse
import gc
import importlib.util
import json
import sys
import tracemalloc

import numpy as np

import wengert as wg
from benchmarks.fresh import in_fresh_process, rss_bytes

FULL = (4_000, 16_000)
QUICK = (500, 2_000)
KINDS = ("wengert grad", "wengert Tensor", "PyTorch")


def _loss(x):
    y = x * 0.0
    for i in range(x.shape[0]):
        y[i] = x[i] * 2.0
    return (y * y).sum()


def wengert_grad(n):
    return wg.grad(_loss)(np.linspace(0.0, 1.0, n))


def wengert_tensor(n):
    t = wg.tensor(np.linspace(0.0, 1.0, n), requires_grad=True)
    _loss(t).backward()
    return t.grad


def torch_grad(n):
    import torch

    x = torch.linspace(0.0, 1.0, n, dtype=torch.float64, requires_grad=True)
    y = torch.zeros(n, dtype=torch.float64)
    for i in range(n):
        y[i] = x[i] * 2.0
    (y * y).sum().backward()
    return x.grad.numpy()


RUNS = {"wengert grad": wengert_grad, "wengert Tensor": wengert_tensor, "PyTorch": torch_grad}


def _child(kind, n):
    run = RUNS[kind]
    run(8)  # the library's own start-up, not counted
    before = rss_bytes("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
    except OSError:
        return {"peak": None, "ok": True}
    got = run(n)
    peak = rss_bytes("VmHWM") - before
    return {"peak": peak, "ok": bool(np.allclose(got, 8.0 * np.linspace(0.0, 1.0, n), rtol=1e-12))}


def traced_peak(n):
    """tracemalloc's peak (bytes) of ``wg.grad`` over n writes."""
    wengert_grad(8)
    gc.collect()
    tracemalloc.start()
    try:
        wengert_grad(n)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def rows(quick=False, peers_wanted=True, progress=print):
    """``([(workload, implementation, memory)], failed)`` for the memory table."""
    out, failed = [], 0
    torch_there = peers_wanted and importlib.util.find_spec("torch") is not None
    for n in QUICK if quick else FULL:
        workload = f"{n:,} element writes y[i] = x[i] * 2, then grad"
        for kind in KINDS:
            if kind == "PyTorch" and not torch_there:
                continue
            progress(f"  element writes: {kind}, n={n:,}")
            got = in_fresh_process("benchmarks.write_memory", ["--child", kind, str(n)], kind)
            if got is not None and got["peak"] is not None:
                failed += not got["ok"]
                out.append((workload + " (resident)", kind,
                            f"{got['peak'] / 2**20:,.1f} MiB" + ("" if got["ok"] else " FAILED")))
        out.append((workload + " (tracemalloc)", "wengert grad", f"{traced_peak(n) / 2**20:,.1f} MiB"))
    return out, failed


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.write_memory")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child[0], int(args.child[1]))))
        return 0
    table, failed = rows(quick=args.quick)
    print("| workload | implementation | memory |\n|---|---|---|")
    for w, i, m in table:
        print(f"| {w} | {i} | {m} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
