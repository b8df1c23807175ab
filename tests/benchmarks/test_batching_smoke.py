"""Smoke test of the batched-derivative benchmark workloads (benchmarks/batching.py) on small sizes,
wengert's implementations against the hand-written ones (the formulas themselves checked against
finite differences here). No timing assertions."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from benchmarks import batching
from benchmarks.harness import run_workload
from benchmarks.workloads import WORKLOAD_NAMES


@pytest.mark.parametrize("workload", batching.workloads(quick=True), ids=lambda w: w.name)
def test_batched_workloads_cross_check(workload):
    workload.sample_s = 0.001
    impls = [k for k in ("hand", "wengert", "jacfwd", "grad-loop", "vjp") if k in workload.factories]
    res = run_workload(workload, impls=impls, rounds=2, progress=lambda _: None)
    assert [r.status for r in res.results] == ["ok"] * len(impls), [r.detail for r in res.results]


def test_the_hand_written_references_are_right():
    x = np.linspace(-1.2, 1.2, 7)
    np.testing.assert_allclose(batching.rosenbrock_hessian_by_hand(x),
                               wg.hessian(lambda v: batching._rosen(wnp, v))(x), rtol=1e-12)
    params = batching._mlp_params((5, 4, 3), np.float64)
    X = np.random.default_rng(2).standard_normal((6, 5))
    labels = np.array([0, 2, 1, 1, 0, 2])
    targets = np.eye(3)[labels]
    by_hand = batching.per_example_by_hand(params, X, labels)
    for i in range(6):
        eps, p = 1e-6, [q.copy() for q in params]
        for k in range(len(p)):
            flat = p[k].reshape(-1)
            fd = np.empty(flat.size)
            for j in range(flat.size):
                flat[j] += eps
                up = batching._example_loss(np, p, X[i], targets[i])
                flat[j] -= 2 * eps
                down = batching._example_loss(np, p, X[i], targets[i])
                flat[j] += eps
                fd[j] = (up - down) / (2 * eps)
            np.testing.assert_allclose(by_hand[k][i].reshape(-1), fd, rtol=1e-5, atol=1e-8)


def test_batched_workloads_are_selectable():
    assert set(batching.NAMES) <= set(WORKLOAD_NAMES)
