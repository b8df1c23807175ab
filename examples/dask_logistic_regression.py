"""Logistic regression on more data than a worker holds: Dask arrays on a cluster, wengert's gradient.

The data -- by default 2 x 10^7 rows of 20 float64 features, 3.2 GB -- is generated lazily, chunk by
chunk, on a ``dask.distributed.LocalCluster`` of 2 worker processes with a 1.5 GB memory limit each: no
worker ever holds it all, and nothing large is persisted. The loss is the mean logistic loss with an L2
penalty, written once with ``wengert.numpy``; ``wg.value_and_grad`` turns it into one lazy Dask graph
per iteration, which the cluster computes (loss and gradient together, one pass over the data) for
SciPy's L-BFGS (``scipy.optimize.minimize(jac=True)``).

    python examples/dask_logistic_regression.py [--rows 20000000] [--check]

``--check`` (for sizes that fit in memory) fits the same rows again with NumPy arrays in memory and
prints the largest difference between the two fits' weights.
"""

import argparse
import threading
import time

import dask
import dask.array as da
import numpy as np
import scipy.optimize
from distributed import Client, LocalCluster

import wengert as wg
import wengert.numpy as wnp


def make_data(rows, features, chunk_rows, seed=0):
    """Features and 0/1 labels as lazy Dask arrays: each chunk of rows is drawn from its own generator
    (seeded by the chunk's position), so the data is the same whatever computes it, and never stored."""
    w_true = np.random.default_rng(seed).standard_normal(features) / np.sqrt(features)
    chunks = tuple(min(chunk_rows, rows - start) for start in range(0, rows, chunk_rows))

    def block(block_info=None):
        (start, stop), _ = block_info[None]["array-location"]
        rng = np.random.default_rng([seed, start])
        x = rng.standard_normal((stop - start, features))
        y = (rng.random(stop - start) < 1.0 / (1.0 + np.exp(-(x @ w_true)))).astype(np.float64)
        return np.concatenate([x, y[:, None]], axis=1)  # features and label drawn together

    xy = da.map_blocks(block, chunks=(chunks, (features + 1,)), dtype=np.float64, meta=np.empty((0, 0)))
    return xy[:, :features], xy[:, features]


def loss(w, x, y, l2):
    """Mean logistic loss, log(1 + e^z) - y z with z = x w, plus (l2 / 2) |w|^2."""
    z = x @ w
    return wnp.mean(wnp.logaddexp(0.0, z) - y * z) + 0.5 * l2 * wnp.sum(w * w)


value_and_grad = wg.value_and_grad(loss)


def fit(x, y, l2, compute=None, tol=1e-12):
    """L-BFGS from zero; ``compute`` turns the lazy loss and gradient into numbers (one graph)."""
    features = x.shape[1]
    calls = []

    def fun(w):
        value, grad = value_and_grad(w, x, y, l2)
        if compute is not None:
            value, grad = compute(value, grad)
        calls.append(float(value))
        return float(value), np.asarray(grad, dtype=np.float64)

    result = scipy.optimize.minimize(fun, np.zeros(features), jac=True, method="L-BFGS-B",
                                     options={"gtol": tol, "ftol": 1e-15, "maxiter": 200})
    return result, len(calls)


class PeakMemory:
    """The largest memory (RSS) each worker reported while active, polled from the scheduler."""

    def __init__(self, client, every=0.25):
        self.client, self.every, self.peak = client, every, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self._stop.is_set():
            for address, info in self.client.scheduler_info()["workers"].items():
                used = info.get("metrics", {}).get("memory", 0)
                self.peak[address] = max(self.peak.get(address, 0), used)
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--chunk-rows", type=int, default=250_000,
                        help="rows per chunk (40 MB at 20 features)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="1.5GB", help="per worker")
    parser.add_argument("--l2", type=float, default=1e-3)
    parser.add_argument("--check", action="store_true", help="fit the same rows with NumPy in memory too")
    args = parser.parse_args(argv)

    x, y = make_data(args.rows, args.features, args.chunk_rows)
    gigabytes = args.rows * (args.features + 1) * 8 / 1e9
    print(f"data: {args.rows:,} rows x {args.features} features (+ labels), {gigabytes:.2f} GB, "
          f"{x.numblocks[0]} chunks, generated lazily")
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      memory_limit=args.memory_limit, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers_before = set(client.scheduler_info()["workers"])
        start = time.perf_counter()
        with PeakMemory(client) as memory:
            result, calls = fit(x, y, args.l2, compute=lambda *lazy: dask.compute(*lazy))
        seconds = time.perf_counter() - start
        workers_after = set(client.scheduler_info()["workers"])
    survived = workers_before == workers_after
    peak = max(memory.peak.values()) / 1e9 if memory.peak else float("nan")
    print(f"L-BFGS: {result.nit} iterations, {calls} loss-and-gradient graphs, {seconds:.1f} s "
          f"({seconds / calls:.2f} s per graph); loss {result.fun:.10f}; "
          f"|grad| {np.abs(result.jac).max():.1e}")
    print(f"peak worker memory {peak:.2f} GB (limit {args.memory_limit}); "
          f"{'no worker was restarted' if survived else 'A WORKER WAS RESTARTED'}")
    out = {"w": result.x, "loss": result.fun, "seconds": seconds, "calls": calls, "peak_gb": peak,
           "workers_survived": survived, "converged": bool(result.success)}
    if args.check:
        xs, ys = dask.compute(x, y, scheduler="threads")
        reference, _ = fit(xs, ys, args.l2)
        out["max_difference"] = float(np.max(np.abs(reference.x - result.x)))
        print(f"in-memory NumPy fit: largest weight difference {out['max_difference']:.1e}")
    return out


if __name__ == "__main__":
    main()
