"""Smoke test of the CNN benchmark workloads (benchmarks/cnn.py) at batch 4: wengert's gradients and
per-example gradients pass the cross-check against the reference. No timing assertions."""

import pytest

from benchmarks.cnn import CNN_WORKLOAD_NAMES, cnn_workloads
from benchmarks.harness import run_workload
from benchmarks.workloads import WORKLOAD_NAMES


@pytest.mark.parametrize("workload", cnn_workloads(quick=True), ids=lambda w: w.name)
def test_cnn_workloads_cross_check(workload):
    workload.sample_s = 0.001
    res = run_workload(workload, impls=("wengert", "grad-loop"), rounds=1, progress=lambda _: None)
    assert {r.status for r in res.results} == {"ok"}, [r.detail for r in res.results]


def test_cnn_workloads_are_selectable():
    assert set(CNN_WORKLOAD_NAMES) <= set(WORKLOAD_NAMES)
    assert [w.name for w in cnn_workloads(quick=True)] == list(CNN_WORKLOAD_NAMES)
