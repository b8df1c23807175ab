"""The source-transformation workload: the gradient of the loop
``s = 0.0; for i in range(n): s += v[i] * v[i]`` built from its source (``wg.source_grad``).

The derivative program keeps the loop: the forward loop pushes ``(v[i], i)`` on a stack, the reverse
loop pops them and adds into ``v_bar[i]`` in place, so its cost is linear in n. One workload per n
(1,000 to 100,000), all named ``source-loop``, times shown per element, against the hand-written
loops and the tape (``wg.grad`` of the same function, up to n = 10,000); :func:`summary` adds the
log-log slope of the time per call against n.

:func:`checkpoint_comparison` (printed by :func:`summary`, or ``python -m benchmarks.source``) compares
the peak memory (``tracemalloc``) and time of ``source_grad(..., checkpoint="all")`` with
``"binomial"`` and ``"ctz"`` on a long loop over a sizeable carried state.
"""

import time
import tracemalloc

import numpy as np

import wengert as wg
from benchmarks import indexing
from benchmarks.harness import IMPLEMENTATIONS, Impl, Workload

__all__ = ["NAME", "SIZES", "loop_sum", "source_loop", "workloads", "summary", "summary_markdown", "sine_map",
           "checkpoint_comparison"]

NAME = "source-loop"
SIZES = (1000, 10000, 100000)
TAPE_MAX_N = 10000
TARGET_SLOPE = 1.1


def loop_sum(v):
    """The element-wise loop."""
    s = 0.0
    for i in range(len(v)):
        s += v[i] * v[i]
    return s


def source_loop(n, rounds=None, seed=0):
    """The workload at size ``n``."""
    v = np.random.default_rng(seed).standard_normal(n)
    rounds = rounds if rounds is not None else 7

    def hand_impl():
        return Impl(lambda: indexing.loop_sum_by_hand(v), lambda out: out)

    def wengert_impl():
        d = wg.source_grad(loop_sum)
        d(v)  # built once per signature, outside the timing
        return Impl(lambda: d(v), lambda out: (None, [out]))

    def tape_impl():
        g = wg.grad(loop_sum)
        return Impl(lambda: g(v), lambda out: (None, [out]))

    factories = {"hand": hand_impl, "wengert": wengert_impl}
    if n <= TAPE_MAX_N:
        factories["tape"] = tape_impl
    return Workload(
        name=NAME,
        title=f"source loop: wg.source_grad of `for i in range(n): s += v[i] * v[i]`, n = {n:,}",
        description="Times per element (µs / op = µs per element of v): the generated forward loop "
                    "(pushing v[i] and i) and reverse loop (popping them, v_bar[i] += ...).",
        params=("v",), rtol=1e-9, reference=lambda: indexing.loop_sum_by_hand(v), factories=factories,
        rounds=rounds, sample_s=0.1, max_calls=20, ops=n, targets=[],
    )


def sine_map(x, n):
    """A long loop over a carried array: n steps of x = 0.9 sin(x) + 0.1 x."""
    for _ in range(n):
        x = 0.9 * np.sin(x) + 0.1 * x
    return np.sum(x)


def checkpoint_comparison(n=1000, size=10000, repeats=3):
    """Peak memory (MiB, tracemalloc) and best time (s) of the gradient of :func:`sine_map` per
    checkpointing policy, as text lines; the gradients must agree."""
    x = np.random.default_rng(1).standard_normal(size)
    rows, ref = [], None
    for policy in ("all", "binomial", "ctz"):
        d = wg.source_grad(sine_map, checkpoint=policy)
        g = d(x, n)  # built (and the schedule computed) outside the measurements
        if ref is None:
            ref = g
        elif not np.allclose(g, ref, rtol=1e-12, atol=0):
            raise AssertionError(f"checkpoint={policy!r}: gradient differs from 'all'")
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            d(x, n)
            times.append(time.perf_counter() - t0)
        tracemalloc.start()
        d(x, n)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows.append((policy, peak / 2 ** 20, min(times)))
    lines = [f"== source_grad checkpointing: {n:,} steps of x = 0.9*sin(x) + 0.1*x, x of {size:,} float64 "
             f"({size * 8 / 2 ** 20:.3g} MiB)", f"{'checkpoint':<10}  {'peak MiB':>9}  {'time s':>7}"]
    lines += [f"{p:<10}  {m:>9.1f}  {t:>7.3f}" for p, m, t in rows]
    return "\n".join(lines)


def workloads(quick=False):
    """One workload per size (``quick``: tiny sizes, for smoke-testing)."""
    sizes = (20, 40) if quick else SIZES
    return [source_loop(n, rounds=3 if quick else None) for n in sizes]


def summary(results):
    """µs per element per n and the log-log slope, per implementation ("" when not run)."""
    runs = sorted((r for r in results if r.workload.name == NAME), key=lambda r: r.workload.ops)
    if len(runs) < 2:
        return ""
    sizes = [r.workload.ops for r in runs]
    head = ["implementation"] + [f"n={n}" for n in sizes] + ["slope"]
    rows, slopes = [], {}
    for key, label in IMPLEMENTATIONS.items():
        per = [r.get(key).per_op() * 1e6 if r.get(key) else None for r in runs]
        if all(p is None for p in per):
            continue
        known = [(n, p) for n, p in zip(sizes, per) if p is not None]
        if len(known) >= 2:
            slopes[key] = indexing.slope([n for n, _ in known], [p * n for n, p in known])
        label = "wengert source_grad" if key == "wengert" else label
        rows.append([label] + ["-" if p is None else f"{p:.3g}" for p in per]
                    + [f"{slopes[key]:.2f}" if key in slopes else "-"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]

    def fmt(cells):
        return "  ".join(c.ljust(wd) if i == 0 else c.rjust(wd)
                         for i, (c, wd) in enumerate(zip(cells, widths)))

    lines = ["== source loop: µs per element by n, and log-log slope of the time per call against n",
             fmt(head), fmt(["-" * wd for wd in widths])] + [fmt(row) for row in rows]
    if "wengert" in slopes:
        s = slopes["wengert"]
        lines.append(f"  [{'MET' if s <= TARGET_SLOPE else 'NOT MET'}] source_grad slope <= {TARGET_SLOPE} "
                     f"(linear cost; measured {s:.2f})")
    quick = max(sizes) < 1000
    lines += ["", checkpoint_comparison(50, 100, 1) if quick else checkpoint_comparison()]
    return "\n".join(lines)


def summary_markdown(results):
    """:func:`summary` as a Markdown section ("" when not run)."""
    text = summary(results)
    return f"## Source loop: slopes\n\n```\n{text}\n```\n" if text else ""


if __name__ == "__main__":
    print(checkpoint_comparison())
