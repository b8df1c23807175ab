"""Smoke test of the compiled workloads at scale (compile time by size, long-chain memory) at
tiny sizes, wengert and hand-written only (no peer library, no timing assertions): the gradients
cross-check, and the notes carry the sizes, the slope and the peak memory in states."""


import numpy as np

from benchmarks import compiled
from benchmarks.harness import run_workload
from tests.benchmarks.peer_guard import no_peer_imports  # noqa: F401 - an autouse fixture


def test_registered():
    names = [w.name for w in compiled.compiled_workloads(quick=True)]
    assert names == list(compiled.COMPILED_NAMES)


def test_compile_time_by_size_with_its_slope():
    work = compiled.compiled_compile_time(sizes=(40, 80, 160), repeats=1, rounds=1)
    res = run_workload(work, impls=("wengert",), progress=lambda _: None)
    (r,) = res.results
    assert r.status == "ok", r.detail
    assert "40 ops" in r.note and "160 ops" in r.note and "slope <= 1.1" in r.note
    assert "Python's compile" in r.note
    times = compiled.compile_times((40, 80), repeats=1)
    assert len(times) == 2 and all(t > 0 for t in times)


def test_long_chain_memory_beside_hand_written():
    work = compiled.compiled_long_chain_memory(size=5_000, n=8, rounds=1)
    res = run_workload(work, impls=("hand", "wengert"), progress=lambda _: None)
    assert [r.status for r in res.results] == ["ok", "ok"], [r.detail for r in res.results]
    hand, mine = res.results
    assert "states" in hand.note and "states" in mine.note and "hand-written" in mine.note


def test_peak_states_counts_what_is_alive():
    state = np.zeros(10_000)
    two = compiled.peak_states(lambda: (np.ones(10_000), np.ones(10_000)), state.nbytes)
    assert 2.0 <= two < 2.5


def test_compile_times_in_a_fresh_process():
    work = compiled.compiled_compile_time(sizes=(40, 80), repeats=1, rounds=1, fresh=True)
    res = run_workload(work, impls=("wengert",), progress=lambda _: None)
    (r,) = res.results
    assert r.status == "ok", r.detail
    assert r.note.startswith("in a fresh process: 40 ops")
    assert compiled.main(["--compile-times", "40", "--repeats", "1"]) == 0
