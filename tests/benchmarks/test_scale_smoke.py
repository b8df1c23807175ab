"""The stacking benchmark at tiny sizes: it runs, cross-checks every result against the formula, and
prints its table with a slope per row."""

from benchmarks import scale


def test_stacking_benchmark_runs_and_checks(capsys, monkeypatch):
    monkeypatch.setattr(scale, "QUICK_SIZES", (20, 40))
    assert scale.run(quick=True) == 0
    out = capsys.readouterr().out
    assert "| wengert grad, stack |" in out and "| wengert jvp, concatenate |" in out
    assert scale.matches("stack") and not scale.matches("checkpoint")


def test_slope_of_a_power_law():
    assert abs(scale.slope([10, 20, 40], [1.0, 2.0, 4.0]) - 1.0) < 1e-12
    assert abs(scale.slope([10, 20, 40], [1.0, 4.0, 16.0]) - 2.0) < 1e-12
