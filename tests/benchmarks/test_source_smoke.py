"""Smoke test of the source-loop benchmark at tiny sizes, wengert and hand-written only (no peer
library, no timing assertions): the cross-check passes and the slope table is produced."""



from benchmarks import indexing, source
from benchmarks.workloads import WORKLOAD_NAMES


def test_tiny_run_checks_gradients_and_reports_slopes():
    loops = source.workloads(quick=True)
    for workload in loops:
        workload.sample_s = 0.001
    results = indexing.run_interleaved(loops, impls=("hand", "wengert"), rounds=2, progress=lambda _: None)
    assert len(results) == len(loops)
    for res in results:
        assert [r.status for r in res.results] == ["ok", "ok"], [r.detail for r in res.results]
    text = source.summary(results)
    assert "wengert source_grad" in text and "hand-written" in text and "slope <= 1.1" in text
    assert source.summary_markdown(results).startswith("## Source loop")


def test_registered():
    assert source.NAME in WORKLOAD_NAMES
