"""Smoke test of the checkpointing benchmark at its quick size, NumPy implementations only: every
gradient passes the cross-check, the table and targets are written. No timing assertions.
"""


import numpy as np
import pytest

from benchmarks import checkpointing as bench
from tests.benchmarks.peer_guard import no_peer_imports  # noqa: F401 - an autouse fixture


def test_quick_run_writes_the_table(tmp_path, capsys):
    out = tmp_path / "checkpointing.md"
    code = bench.run(quick=True, peers_wanted=False, rss=False, markdown=out, progress=lambda m: None)
    assert code == 0
    text = out.read_text(encoding="utf-8")
    for label in ('wengert checkpoint="all"', 'wengert checkpoint="binomial"', 'wengert checkpoint="ctz"',
                  "hand-written NumPy"):
        assert f"| {label}" in text
    assert "FAILED" not in text and "| PyTorch" not in text and "| JAX" not in text
    assert text.count("| MET |") + text.count("| NOT MET |") == 6 + 3  # 3 for the scale rows
    assert "6 snapshots (peak)" in text  # binomial with the quick size's 6 snapshots
    assert "8 snapshots (peak)" in text  # and with more snapshots (32 at full size)
    assert "## Checkpointing at scale" in text
    for key, (label, _, _) in bench.SCALE.items():
        assert f"| {label.format(**bench.QUICK)} |" in text, key
    assert "| failed |" not in text


def test_scale_workloads_measure_memory_by_counting():
    cfg = dict(bench.QUICK, scalar_n=300, schedule_n=3_000, schedule_s=4)
    got = {key: bench.measure_scale(key, cfg) for key in bench.SCALE}
    assert all(g["traced"] > 0 for g in got.values())
    # the schedule's generator holds its few slots, not its thousands of actions
    assert got["schedule-binomial"]["traced"] < 20_000
    assert bench._iterate_schedule(3_000, 4) == len(bench.binomial(3_000, 4))


def test_hand_written_reference_agrees_with_finite_differences():
    cfg = dict(bench.QUICK, size=6, n=20)
    x0 = bench.initial_state(6)
    value, (gx, ga) = bench.hand_written(cfg)(x0)
    direction = np.random.default_rng(2).standard_normal(6)

    def loss(x, a):
        for _ in range(20):
            x = a * np.sin(x) + 0.1 * x
        return np.sum(x)

    eps = 1e-6
    fd_x = (loss(x0 + eps * direction, bench.A) - loss(x0 - eps * direction, bench.A)) / (2 * eps)
    fd_a = (loss(x0, bench.A + eps) - loss(x0, bench.A - eps)) / (2 * eps)
    assert value == pytest.approx(loss(x0, bench.A), rel=1e-12)
    assert np.dot(gx, direction) == pytest.approx(fd_x, rel=1e-6)
    assert ga == pytest.approx(fd_a, rel=1e-6)


def test_only_names_that_mean_checkpointing_select_it():
    assert bench.matches("checkpoint") and bench.matches("checkpointing") and bench.matches("Checkpoint")
    assert not bench.matches("mlp") and not bench.matches("scalar-chain") and not bench.matches("c")
