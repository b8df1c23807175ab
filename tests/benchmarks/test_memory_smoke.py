"""Smoke test of the memory benchmark at its quick size, NumPy implementations only, no subprocesses:
every gradient passes the cross-check and the table is written. No memory or timing assertions."""

import numpy as np

from benchmarks import memory as bench
from benchmarks import write_memory


def test_quick_run_writes_the_table(tmp_path):
    out = tmp_path / "memory.md"
    failed = bench.run(quick=True, peers_wanted=False, rss=False, markdown=out, progress=lambda m: None)
    assert failed == 0
    text = out.read_text(encoding="utf-8")
    for label in ("| wengert grad", '| wengert iterate(checkpoint="all")', "| hand-written NumPy",
                  "bytes per recorded scalar operation"):
        assert label in text
    assert "FAILED" not in text and "PyTorch" not in text


def test_only_memory_is_matched():
    assert bench.matches("memory") and bench.matches("mem") and not bench.matches("mlp")


def test_the_element_write_workloads_give_the_gradient():
    want = 8.0 * np.linspace(0.0, 1.0, 50)
    np.testing.assert_allclose(write_memory.wengert_grad(50), want, rtol=1e-12)
    np.testing.assert_allclose(write_memory.wengert_tensor(50), want, rtol=1e-12)
    assert write_memory.traced_peak(50) > 0
