"""Memory of reverse mode, measured the way time is: ``python -m benchmarks --only memory``.

Rows (quick sizes with ``--quick``):
- long chain ``x = 0.9 sin x + 0.1 x``, store-all: peak live memory during one gradient, in states
  (bytes of one x): tracemalloc's peak for NumPy-based code (wengert ``grad``, ``iterate(checkpoint=
  "all")``, HIPS autograd, hand-written), the resident peak above the start in a fresh process for
  PyTorch and JAX (whose buffers tracemalloc does not see);
- bytes per recorded scalar operation: tracemalloc's peak over a chain of ``x * 1.0001 + 0.5`` and
  ``sin`` steps, divided by the operations; and a 10^7-operation chain's resident peak (full size only);
- cyclic garbage: one-KB cycles made inside ``wg.grad`` next to the same loop in plain Python
  (resident peak in a fresh process each);
- element writes ``y[i] = x[i] * 2`` into an n-element buffer (``benchmarks.write_memory``): 4,000 and
  16,000 writes, resident peak for ``wg.grad``, an eager ``wg.Tensor`` and PyTorch.
"""

import argparse
import gc
import importlib.util
import json
import sys
import tracemalloc
from pathlib import Path

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from benchmarks import peers, recurrent, write_memory
from benchmarks.fresh import in_fresh_process, rss_bytes

RESULTS = Path(__file__).resolve().parent / "results"
FULL = {"size": 100_000, "n": 1024, "scalar_ops": 100_000, "big_chain": 10_000_000, "cycles": 300_000}
QUICK = {"size": 2_000, "n": 64, "scalar_ops": 10_000, "big_chain": 0, "cycles": 20_000}


def matches(name):
    """Whether an ``--only`` argument selects this benchmark ("memory", "mem")."""
    return "memory".startswith(name.lower()) and len(name) >= 3


def _step_np(x):
    return 0.9 * np.sin(x) + 0.1 * x


def _loss_wg(x, n):
    for _ in range(n):
        x = 0.9 * wnp.sin(x) + 0.1 * x
    return wnp.sum(x)


def hand_written(x0, n):
    xs = [x0]
    for _ in range(n):
        xs.append(_step_np(xs[-1]))
    g = np.ones_like(x0)
    for x in reversed(xs[:-1]):
        g = g * (0.9 * np.cos(x) + 0.1)
    return g


def wengert_grad(x0, n):
    return wg.grad(lambda x: _loss_wg(x, n))(x0)


def wengert_iterate(x0, n):
    def loss(x):
        return wnp.sum(wg.iterate(lambda y: 0.9 * wnp.sin(y) + 0.1 * y, x, n, checkpoint="all"))
    return wg.grad(loss)(x0)


def autograd_grad(x0, n):
    ag, anp = peers.load_autograd()

    def loss(x):
        for _ in range(n):
            x = 0.9 * anp.sin(x) + 0.1 * x
        return anp.sum(x)
    return ag.grad(loss)(x0)


def torch_grad(x0, n):
    torch = peers.load_torch()
    x = torch.tensor(x0, requires_grad=True)
    y = x
    for _ in range(n):
        y = 0.9 * torch.sin(y) + 0.1 * y
    y.sum().backward()
    return x.grad.numpy()


def jax_grad(x0, n):
    jax, jnp = peers.load_jax()

    def loss(x):
        for _ in range(n):
            x = 0.9 * jnp.sin(x) + 0.1 * x
        return jnp.sum(x)
    return np.asarray(jax.grad(loss)(x0))


TRACED = {"wengert grad": wengert_grad, 'wengert iterate(checkpoint="all")': wengert_iterate,
          "HIPS autograd": autograd_grad, "hand-written NumPy": hand_written}
RESIDENT = {"PyTorch": torch_grad, "JAX": jax_grad}


def traced_peak(fun, *args):
    """tracemalloc's peak (bytes) during ``fun(*args)``, and its result."""
    gc.collect()
    tracemalloc.start()
    try:
        out = fun(*args)
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


def resident_peak(fun, *args):
    """The resident peak above the current level during ``fun(*args)`` (Linux; None elsewhere)."""
    try:
        before = rss_bytes("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
    except OSError:
        return None, fun(*args)
    out = fun(*args)
    return rss_bytes("VmHWM") - before, out


def scalar_chain(ops):
    """``x = sin(x * 1.0001 + 0.5)``-style steps, ``ops`` recorded operations in all."""
    def f(x):
        for _ in range(ops // 3):
            x = wnp.sin(x * 1.0001 + 0.5)
        return x
    return f


def bytes_per_scalar_op(ops):
    """tracemalloc's peak of recording (and differentiating) ``ops`` scalar operations, per operation."""
    fun = scalar_chain(ops)
    peak, _ = traced_peak(wg.grad(fun), 0.3)
    return peak / (3 * (ops // 3))


def cycles_in(n, traced):
    """Make ``n`` one-KB reference cycles (inside ``wg.grad`` when ``traced``), alongside a scalar step."""
    def f(x):
        for _ in range(n):
            a = [bytes(1000)]
            a.append(a)
            x = x * 1.0000001
        return x
    return (lambda: wg.grad(f)(0.3)) if traced else (lambda: f(0.3))


def _installed(name):
    return importlib.util.find_spec(name) is not None


def _in_subprocess(what, quick):
    return in_fresh_process("benchmarks.memory", ["--child", what] + (["--quick"] if quick else []), what)


def _child(what, quick):
    cfg = QUICK if quick else FULL
    if what in RESIDENT:
        RESIDENT[what](np.linspace(-2.0, 2.0, 16), 4)  # the library's own start-up, not counted
        x0 = np.linspace(-2.0, 2.0, cfg["size"])
        peak, out = resident_peak(RESIDENT[what], x0, cfg["n"])
        ok = np.allclose(out, hand_written(x0, cfg["n"]), rtol=1e-9, atol=1e-12)
        return {"peak": peak, "ok": bool(ok)}
    if what == "big-chain":
        peak, _ = resident_peak(wg.grad(scalar_chain(cfg["big_chain"])), 0.3)
        return {"peak": peak}
    if what in ("cycles-grad", "cycles-plain"):
        peak, _ = resident_peak(cycles_in(cfg["cycles"], what == "cycles-grad"))
        return {"peak": peak}
    raise SystemExit(f"unknown child {what!r}")


def run(quick=False, peers_wanted=True, rss=True, markdown=None, progress=print):
    """Measure every row, print the table, write it as Markdown; 0, or the number of failed checks."""
    cfg = QUICK if quick else FULL
    x0 = np.linspace(-2.0, 2.0, cfg["size"])
    state = x0.nbytes
    n = cfg["n"]
    want = hand_written(x0, n)
    rows, failed = [], 0
    for label, fun in TRACED.items():
        if fun is autograd_grad and not (peers_wanted and _installed("autograd")):
            continue
        progress(f"  long chain: {label}")
        peak, got = traced_peak(fun, x0, n)
        ok = np.allclose(got, want, rtol=1e-9, atol=1e-12)
        failed += not ok
        shown = f"{peak / state:,.0f}" + ("" if ok else " FAILED")
        rows.append(("long chain, store-all peak (states)", label, shown))
    if peers_wanted and rss:
        for label in RESIDENT:
            if not _installed({"PyTorch": "torch", "JAX": "jax"}[label]):
                continue
            progress(f"  long chain: {label}")
            got = _in_subprocess(label, quick)
            if got is not None and got["peak"] is not None:
                failed += not got["ok"]
                rows.append(("long chain, store-all peak (states, resident)", label,
                             f"{got['peak'] / state:,.0f}" + ("" if got["ok"] else " FAILED")))
    progress("  bytes per scalar operation")
    per_op = bytes_per_scalar_op(cfg["scalar_ops"])
    rows.append(("bytes per recorded scalar operation", "wengert grad", f"{per_op:.0f}"))
    if rss and cfg["big_chain"]:
        progress("  10^7-operation chain")
        got = _in_subprocess("big-chain", quick)
        if got is not None and got["peak"] is not None:
            rows.append((f"{cfg['big_chain']:,}-operation scalar chain, resident peak", "wengert grad",
                         f"{got['peak'] / 2**20:,.0f} MiB"))
    if rss:
        for what, label in (("cycles-grad", "inside wengert grad"), ("cycles-plain", "plain Python")):
            progress(f"  cyclic garbage: {label}")
            got = _in_subprocess(what, quick)
            if got is not None and got["peak"] is not None:
                rows.append((f"{cfg['cycles']:,} one-KB cycles, resident peak", label,
                             f"{got['peak'] / 2**20:,.0f} MiB"))
    if rss:
        write_rows, write_failed = write_memory.rows(quick=quick, peers_wanted=peers_wanted,
                                                       progress=progress)
        rows += write_rows
        failed += write_failed
    progress("  LSTM, with and without checkpointing over time steps")
    lstm_rows = recurrent.lstm_memory(quick)
    failed += sum("FAILED" in memory for _, _, memory in lstm_rows)
    rows += lstm_rows
    lines = ["| workload | implementation | memory |", "|---|---|---|"]
    lines += [f"| {w} | {i} | {m} |" for w, i, m in rows]
    table = "\n".join(lines) + "\n"
    print(f"\nMemory (state = {state:,} bytes, {n} steps)\n" + table)
    path = markdown or RESULTS / ("memory-quick.md" if quick else "memory.md")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("# Memory\n\n" + table, encoding="utf-8")
    return failed


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", metavar="WHAT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.quick)))
        return 0
    return 1 if run(quick=args.quick) else 0



if __name__ == "__main__":
    sys.exit(main())
