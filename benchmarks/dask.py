"""Dask benchmark: one gradient of the logistic loss over Dask arrays on a local cluster, wengert against
the hand-written Dask formula ``X.T @ (sigmoid(X @ w) - y) / n`` on the same cluster and data.

The data (by default 2 x 10^6 rows x 20 float64 features, 320 MB) is persisted in the workers' memory
first, so that both time the gradient alone: building the graph (wengert: recording the loss and its
backward pass) and computing it. The two are timed alternately, the median of ``rounds`` each; the
gradients must agree to 1e-10. Goal: wengert within 1.3x of the hand-written formula.

``python -m benchmarks --only dask [--quick]``; part of the default ``make bench`` when Dask and
distributed are installed (``pip install wengert[dask]``).
"""

import statistics
import time
from pathlib import Path

import numpy as np

import wengert as wg
import wengert.numpy as wnp

try:
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster
except ImportError:  # reported by run(): the benchmark needs the dask extra
    dask = None

__all__ = ["NAME", "run", "matches", "GOAL"]

NAME = "dask"
GOAL = 1.3
RESULTS = Path(__file__).resolve().parent / "results"
FULL = {"rows": 2_000_000, "features": 20, "chunk_rows": 250_000, "rounds": 7}
QUICK = {"rows": 20_000, "features": 5, "chunk_rows": 5_000, "rounds": 2}


def matches(name):
    """Whether an ``--only`` argument selects this benchmark."""
    return name.lower() == NAME


def logistic_loss(w, x, y):
    """Mean logistic loss log(1 + e^z) - y z, z = x w."""
    z = x @ w
    return wnp.mean(wnp.logaddexp(0.0, z) - y * z)


def hand_written_gradient(w, x, y):
    """The gradient of ``logistic_loss`` by hand, in Dask."""
    return x.T @ (1.0 / (1.0 + da.exp(-(x @ w))) - y) / x.shape[0]


def time_once(make_graph):
    start = time.perf_counter()
    value = make_graph().compute()
    return time.perf_counter() - start, value


def run(quick=False, rounds=None, markdown=None, progress=print, workers=2):
    """Time both gradients; print the table and write it (benchmarks/results/dask.md); return the
    number of failed cross-checks (0 or 1)."""
    if dask is None:
        progress("dask benchmark skipped: dask[array] and distributed are not installed "
                 "(pip install wengert[dask])")
        return 0
    cfg = dict(QUICK if quick else FULL)
    rounds = rounds or cfg["rounds"]
    rng = np.random.default_rng(0)
    w = rng.standard_normal(cfg["features"]) / np.sqrt(cfg["features"])
    grad = wg.grad(logistic_loss)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit="1.5GB",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        x = da.random.default_rng(1).standard_normal((cfg["rows"], cfg["features"]),
                                                     chunks=(cfg["chunk_rows"], cfg["features"]))
        y = (da.random.default_rng(2).random(cfg["rows"], chunks=cfg["chunk_rows"]) < 0.5).astype(np.float64)
        x, y = client.persist([x, y])
        dask.compute(x.sum(), y.sum())  # the data is in the workers' memory before any timing
        times = {"wengert": [], "hand-written Dask": []}
        values = {}
        time_once(lambda: grad(w, x, y))  # one warm-up each (imports, the cluster's first tasks)
        time_once(lambda: hand_written_gradient(w, x, y))
        for _ in range(rounds):
            for label, make in (("wengert", lambda: grad(w, x, y)),
                                ("hand-written Dask", lambda: hand_written_gradient(w, x, y))):
                seconds, values[label] = time_once(make)
                times[label].append(seconds)
        del client
    ok = np.allclose(values["wengert"], values["hand-written Dask"], rtol=1e-10, atol=1e-14)
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratio = medians["wengert"] / medians["hand-written Dask"]
    size = f"{cfg['rows']:,} x {cfg['features']} float64 ({cfg['rows'] * cfg['features'] * 8 / 1e6:.0f} MB)"
    lines = [f"## Dask: one logistic-loss gradient on a LocalCluster ({workers} workers x 1 thread), {size}",
             "", "| implementation | median time | vs hand-written | cross-check |", "|---|---|---|---|"]
    for label, m in medians.items():
        check = "reference" if label != "wengert" else ("agrees to 1e-10" if ok else "FAILED")
        lines.append(f"| {label} | {m * 1e3:.1f} ms | {m / medians['hand-written Dask']:.2f}x | {check} |")
    lines += ["", f"Goal: wengert within {GOAL}x of the hand-written formula: "
                  f"{'met' if ratio <= GOAL else 'NOT met'} ({ratio:.2f}x, median of {rounds} rounds each, "
                  "timed alternately)" + (" (quick size: not representative)" if quick else "")]
    text = "\n".join(lines) + "\n"
    progress("\n" + text)
    path = markdown or RESULTS / ("dask-quick.md" if quick else "dask.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return 0 if ok else 1
