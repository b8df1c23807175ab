"""Smoke test of the LSTM benchmark (benchmarks/recurrent.py) at its quick size, NumPy-based
implementations only: nn.LSTM and the checkpointed loop agree with the hand-written
backpropagation through time, and the memory rows are produced. No timing or memory assertions."""

from benchmarks import recurrent
from benchmarks.harness import run_workload
from benchmarks.workloads import WORKLOAD_NAMES


def test_lstm_workload_cross_checks():
    workload = recurrent.lstm_workload(quick=True)
    workload.sample_s = 0.001
    res = run_workload(workload, impls=("hand", "wengert", "binomial"), rounds=1, progress=lambda _: None)
    assert [r.status for r in res.results] == ["ok", "ok", "ok"], [r.detail for r in res.results]
    assert recurrent.NAME in WORKLOAD_NAMES


def test_lstm_memory_rows():
    rows = recurrent.lstm_memory(quick=True)
    assert [label for _, label, _ in rows[:3]] == ["wengert nn.LSTM", "wengert iterate(checkpoint='all')",
                                                   "wengert iterate(checkpoint='binomial')"]
    assert not any("FAILED" in memory for _, _, memory in rows)
