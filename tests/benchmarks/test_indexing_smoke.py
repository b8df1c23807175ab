"""Smoke test of the indexing benchmark at tiny sizes, wengert and hand-written only (no peer
library, no timing assertions): the cross-check passes and the slope table is produced."""


import numpy as np

from benchmarks import indexing
from benchmarks.__main__ import main
from benchmarks.workloads import WORKLOAD_NAMES, all_workloads
from tests.benchmarks.peer_guard import no_peer_imports  # noqa: F401 - an autouse fixture


def test_tiny_run_checks_gradients_and_reports_slopes():
    loops = indexing.workloads(quick=True)
    for workload in loops:
        workload.sample_s = 0.001
    results = indexing.run_interleaved(loops, impls=("hand", "wengert"), rounds=2, progress=lambda _: None)
    assert len(results) == len(loops)
    for res in results:  # hand-written, the tape and wg.compile's gradient
        assert [r.key for r in res.results] == ["hand", "wengert", indexing.COMPILED]
        assert [r.status for r in res.results] == ["ok", "ok", "ok"], [r.detail for r in res.results]
        assert all(len(r.times) == 2 for r in res.results)
        assert "trace+compile" in res.results[2].note
    text = indexing.summary(results)
    assert "wengert" in text and "hand-written" in text and "slope <= 1.1" in text
    assert "wg.compile slope <= 1.1" in text
    assert indexing.summary_markdown(results).startswith("## Indexing loop")


def test_registered_and_reference_gradient_is_right():
    assert indexing.NAME in WORKLOAD_NAMES
    assert sum(w.name == indexing.NAME for w in all_workloads(quick=True)) >= 2
    v = np.random.default_rng(0).standard_normal(6)
    value, (grad,) = indexing.loop_sum_by_hand(v)
    assert np.isclose(value, np.sum(v ** 2))
    eps = 1e-6
    e = np.eye(6)
    f = indexing.loop_sum
    fd = [(f(v + eps * e[i]) - f(v - eps * e[i])) / (2 * eps) for i in range(6)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_cli_runs_the_loop_interleaved(tmp_path, capsys):
    out = tmp_path / "bench.md"
    code = main(["--quick", "--only", "indexing", "--rounds", "2", "--impls", "hand", "wengert",
                 "--markdown", str(out)])
    assert code == 0
    assert "log-log slope" in capsys.readouterr().out
    assert "## Indexing loop: slopes" in out.read_text(encoding="utf-8")


def test_slope_of_power_laws():
    n = [500, 1000, 2000, 4000]
    assert abs(indexing.slope(n, [3e-6 * k for k in n]) - 1.0) < 1e-9
    assert abs(indexing.slope(n, [1e-9 * k * k for k in n]) - 2.0) < 1e-9
