"""The indexing workload: the gradient of ``sum(v[i] * v[i] for i in range(n))``.

Each read ``v[i]`` has an adjoint of v's full size if it is built as a zero-filled array (HIPS autograd,
PyTorch's index backward), which makes the backward pass O(n^2); adding into the adjoint in place makes
it O(n). One workload per n, all named ``indexing-loop`` (times shown per element); :func:`summary` adds the
log-log slope of time against n per implementation and checks its targets. Besides the libraries'
keys (``harness.IMPLEMENTATIONS``) it runs ``wg.compile``'s gradient ("wg.compile", its one-time trace
and compilation in the note), whose slope has the same target.
"""

import gc
import time

import numpy as np

import wengert as wg
from benchmarks import peers
from benchmarks.harness import IMPLEMENTATIONS, Impl, Target, Workload, WorkloadResult, _prepare, _progress

__all__ = ["NAME", "SIZES", "loop_sum", "loop_sum_by_hand", "indexing_loop", "workloads", "run_interleaved",
           "summary", "summary_markdown", "slope"]

NAME = "indexing-loop"
SIZES = (500, 1000, 2000, 4000, 8000, 16000)
JAX_MAX_N = 500  # JAX eager costs about 0.4 ms per operation: only the smallest size is run
AUTOGRAD_MAX_N = 4000  # HIPS autograd allocates n arrays of size n per call: 2 GB at n = 16,000
TARGET_SLOPE = 1.1
TARGET_US = 5.0
COMPILED = "wg.compile"
KEYS = dict(IMPLEMENTATIONS, **{COMPILED: "wg.compile"})
"""The implementations of this workload, in table order: the harness's and the compiled gradient."""
COMPILED_MAX_N = 8000  # its one-time compilation costs about a millisecond per element


def loop_sum(v):
    """The program, the same in every library."""
    return sum(v[i] * v[i] for i in range(len(v)))


def loop_sum_by_hand(v):
    """Value and gradient in plain NumPy: the forward loop, then the adjoint loop ``g[i] += 2 v[i]``."""
    n = len(v)
    s = 0.0
    for i in range(n):
        s += v[i] * v[i]
    g = np.zeros(n)
    for i in range(n):
        g[i] += 2.0 * v[i]
    return s, [g]


def indexing_loop(n, rounds=None, seed=0):
    """The workload at size ``n``."""
    v = np.random.default_rng(seed).standard_normal(n)
    # 21 rounds: the slope compares six sizes, and on a shared machine the per-round times of a
    # 15 ms call scatter by a third; medians of more rounds keep that scatter out of the slope
    rounds = rounds if rounds is not None else 21

    def hand_impl():
        return Impl(lambda: loop_sum_by_hand(v), lambda out: out)

    def wengert_impl():
        vg = wg.value_and_grad(loop_sum)
        return Impl(lambda: vg(v), lambda out: (float(out[0]), [out[1]]))

    def compiled_impl():
        vg = wg.compile(loop_sum).value_and_grad()
        start = time.perf_counter()
        vg(v)  # traced and compiled here, once
        build = time.perf_counter() - start
        return Impl(lambda: vg(v), lambda out: (float(out[0]), [out[1]]),
                    note=f"trace+compile {build:.2f} s")

    def torch_impl():
        torch = peers.load_torch()

        def run():
            x = torch.tensor(v, requires_grad=True)
            s = loop_sum(x)
            s.backward()
            return s, x.grad

        return Impl(run, lambda out: (out[0].item(), [out[1].numpy()]))

    def autograd_impl():
        autograd, _ = peers.load_autograd()
        vg = autograd.value_and_grad(loop_sum)
        return Impl(lambda: vg(v), lambda out: (float(out[0]), [np.asarray(out[1])]))

    def jax_impl():
        jax, jnp = peers.load_jax()
        vg = jax.value_and_grad(loop_sum)
        vj = jnp.asarray(v)
        return Impl(lambda: jax.block_until_ready(vg(vj)),
                    lambda out: (float(out[0]), [np.asarray(out[1])]))

    factories = {"hand": hand_impl, "wengert": wengert_impl, "torch": torch_impl}
    if n <= COMPILED_MAX_N:
        factories[COMPILED] = compiled_impl
    if n <= AUTOGRAD_MAX_N:
        factories["autograd"] = autograd_impl
    if n <= JAX_MAX_N:
        factories["jax"] = jax_impl
    return Workload(
        name=NAME,
        title=f"indexing loop: grad of sum(v[i] * v[i] for i in range(n)), n = {n:,}",
        description="Times per element (µs / op = µs per element of v). Each element costs two reads, a "
                    "multiply and an add, forward and backward.",
        params=("v",), rtol=1e-9, reference=lambda: loop_sum_by_hand(v), factories=factories,
        rounds=rounds, sample_s=0.1, max_calls=20, ops=n,
        targets=[Target("wengert at least 10x faster than PyTorch", "torch", 10.0)] if n == SIZES[-1] else [],
    )


def workloads(quick=False):
    """One workload per size (``quick``: tiny sizes, for smoke-testing)."""
    sizes = (20, 40) if quick else SIZES
    return [indexing_loop(n, rounds=3 if quick else None) for n in sizes]


def run_interleaved(workloads, impls=None, rounds=None, progress=_progress):
    """Like ``harness.run_workload`` for several workloads at once: every round times every size and
    implementation once, in an order rotating between rounds, so that a change in the machine's load
    during the run spreads over all sizes instead of bending the slopes. Each timed batch follows
    one untimed call of the same implementation.

    An implementation offered at some sizes only (JAX eager: the smallest) has no slope to protect;
    it is checked and timed after all the others, in rounds of its own. On the 2-core test machine,
    one JAX eager call earlier in the process (its own check included) left wengert's n = 4000 loop
    5-20% slower over the next half-minute measured, with JAX's threads idle, and a JAX call right
    before each batch 30-60% slower (n = 500: about 10%): either way every other library's slope
    bends.
    """
    if not workloads:
        return []
    started = time.perf_counter()
    keys = [k for k in KEYS if impls is None or k in impls or (k == COMPILED and "wengert" in impls)]
    everywhere = [k for k in keys if all(k in w.factories for w in workloads)]
    apart = [k for k in keys if k not in everywhere and any(k in w.factories for w in workloads)]
    n_rounds = max(w.rounds for w in workloads) if rounds is None else rounds
    prepared = [[] for _ in workloads]
    for group in (everywhere, apart):
        if not group:
            continue
        slots = []
        for w, pairs in zip(workloads, prepared):
            progress(f"[{w.name}] {w.title}")
            reference = w.reference()
            for key in group:
                if key in w.factories:
                    result, impl = _prepare(w, key, reference, progress)
                    pairs.append((result, impl))
                    if impl is not None:
                        slots.append((result, impl))
        _time_rounds(slots, n_rounds)
    for pairs in prepared:  # table order
        pairs.sort(key=lambda pair: list(KEYS).index(pair[0].key))
    seconds = (time.perf_counter() - started) / max(1, len(workloads))
    progress(f"[{NAME}] done in {seconds * len(workloads):.1f} s")
    return [WorkloadResult(w, [r for r, _ in pairs], n_rounds, seconds)
            for w, pairs in zip(workloads, prepared)]


def _time_rounds(slots, n_rounds):
    """``n_rounds`` rounds over ``slots`` [(result, impl)], the order rotating between rounds."""
    for i in range(n_rounds):
        shift = (i * 3) % len(slots) if slots else 0
        for result, impl in slots[shift:] + slots[:shift]:
            if result.status != "ok":
                continue
            gc.collect()
            try:
                # One untimed call first: the implementation before this one may have churned
                # through far more memory (HIPS autograd allocates n arrays of size n per call,
                # 128 MB at n = 4000), and what that leaves in the caches and the allocator is
                # not this implementation's cost.
                if len(slots) > 1:
                    impl.run()
                start = time.perf_counter()
                for _ in range(result.calls):
                    impl.run()
            except Exception as e:  # passed its check, then raised: a failure, reported as such
                result.status, result.times = "FAILED", []
                result.detail = f"raised {type(e).__name__} while timed: {e}"
                continue
            result.times.append((time.perf_counter() - start) / result.calls)


def slope(sizes, times):
    """Least-squares slope of log(time) against log(n): 1 for O(n), 2 for O(n^2)."""
    x = np.log(np.asarray(sizes, dtype=float))
    y = np.log(np.asarray(times, dtype=float))
    return float(np.polyfit(x, y, 1)[0])


def summary(results):
    """A text table (µs per element per n, slope, ratio to wengert) of the indexing workloads among
    ``results``, with the slope and time targets; "" when none was run."""
    runs = sorted((r for r in results if r.workload.name == NAME),
                  key=lambda r: r.workload.ops)
    if len(runs) < 2:
        return ""
    sizes = [r.workload.ops for r in runs]
    head = ["implementation"] + [f"n={n}" for n in sizes] + ["slope", f"÷ wengert (n={sizes[-1]})"]
    rows, slopes, last = [], {}, {}
    for key, label in KEYS.items():
        per = [r.get(key).per_op() * 1e6 if r.get(key) else None for r in runs]
        if all(p is None for p in per):
            continue
        known = [(n, p) for n, p in zip(sizes, per) if p is not None]
        if len(known) >= 2:
            slopes[key] = slope([n for n, _ in known], [p * n for n, p in known])
        last[key] = per[-1]
        rows.append([label] + ["-" if p is None else f"{p:.3g}" for p in per]
                    + [f"{slopes[key]:.2f}" if key in slopes else "-", key])
    w = last.get("wengert")
    for row in rows:
        p = last.get(row[-1])
        row[-1] = f"{p / w:.2f}x" if p is not None and w else "-"
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(wd) if i == 0 else c.rjust(wd)
                                  for i, (c, wd) in enumerate(zip(cells, widths)))
    lines = ["== indexing loop: µs per element by n, and log-log slope of the time per call against n",
             fmt(head), fmt(["-" * wd for wd in widths])] + [fmt(row) for row in rows]
    for key in ("wengert", COMPILED):
        if key in slopes and w is not None:
            s = slopes[key]
            met = "MET" if s <= TARGET_SLOPE else "NOT MET"
            lines.append(f"  [{met}] {KEYS[key]} slope <= {TARGET_SLOPE} (measured {s:.2f})")
    if "wengert" in slopes and w is not None:
        lines.append(f"  [{'MET' if w <= TARGET_US else 'NOT MET'}] wengert <= {TARGET_US:g} µs per element "
                     f"at n = {sizes[-1]} (measured {w:.3g})")
    return "\n".join(lines)


def summary_markdown(results):
    """:func:`summary` as a Markdown section ("" when no indexing workload was run)."""
    text = summary(results)
    return f"## Indexing loop: slopes\n\n```\n{text}\n```\n" if text else ""
