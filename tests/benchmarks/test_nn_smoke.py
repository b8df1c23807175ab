"""Smoke test of the training-epoch benchmark workloads (benchmarks/nn_workloads.py) on tiny sizes,
hand-written and wengert only: the final parameters agree. No timing assertions."""


import pytest

from benchmarks.harness import run_workload
from benchmarks.nn_workloads import NN_WORKLOAD_NAMES, nn_workloads
from benchmarks.workloads import WORKLOAD_NAMES


@pytest.mark.parametrize("workload", nn_workloads(quick=True), ids=lambda w: w.name)
def test_epoch_workloads_cross_check(workload):
    workload.sample_s = 0.001
    res = run_workload(workload, impls=("hand", "wengert"), rounds=2, progress=lambda _: None)
    assert [r.status for r in res.results] == ["ok", "ok"], [r.detail for r in res.results]


def test_epoch_workloads_are_selectable():
    assert set(NN_WORKLOAD_NAMES) <= set(WORKLOAD_NAMES)
    assert [w.name for w in nn_workloads(quick=True)] == list(NN_WORKLOAD_NAMES)
