"""Smoke test of the Dask benchmark at its quick size: the cluster starts, both gradients agree, the
table is written, and ``--only dask`` selects it. No timing assertions."""

import pytest

from benchmarks import dask as bench

pytest.importorskip("dask.array")
pytest.importorskip("distributed")


def test_quick_run_writes_the_table(tmp_path):
    out = tmp_path / "dask.md"
    printed = []
    assert bench.run(quick=True, rounds=1, markdown=out, progress=printed.append) == 0
    text = out.read_text(encoding="utf-8")
    assert "| wengert |" in text and "| hand-written Dask |" in text
    assert "agrees to 1e-10" in text and "FAILED" not in text
    assert "Goal: wengert within 1.3x" in text and text in printed[0]


def test_only_dask_selects_it():
    assert bench.matches("dask") and bench.matches("Dask") and not bench.matches("checkpoint")
