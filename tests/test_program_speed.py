"""wg.compile's fast paths: the per-signature dispatcher, the in-function math fallback, and the
passes added for speed (each on a small program: statement count and values)."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def test_dispatcher_checks_shape_dtype_and_static_values():
    f = wg.compile(lambda x, k, s: wnp.sum(x * s) + k)
    a, b = np.arange(3.0), np.arange(4.0)
    assert f(a, 2, 0.5) == pytest.approx(3.5)  # traced
    assert f(a, 2, 1.5) == pytest.approx(6.5)  # the dispatcher: same signature
    assert f(b, 2, 1.0) == pytest.approx(8.0)  # another shape: traced
    assert f(a, 2, 1.0) == pytest.approx(5.0)  # back to the first: no new trace
    assert f(a, 3, 1.0) == pytest.approx(6.0)  # another static value: traced
    assert f(a.astype(np.float32), 3, 1.0) == pytest.approx(6.0)  # another dtype: traced
    assert f(a, True, 1.0) == pytest.approx(4.0)  # a bool is not the int 1: its own signature
    assert f(a, 2, 1.0) == pytest.approx(5.0)
    assert f(a[::-1].copy(), 2, 1.0) == pytest.approx(5.0)
    assert f.cache_info() == (4, 5, 5)


def test_dispatcher_with_one_argument_and_with_trees():
    f = wg.compile(lambda x: x * 2.0)
    np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])
    g = wg.compile(lambda d: {"y": d["x"] + 1.0})
    assert g({"x": np.zeros(2)})["y"].tolist() == [1.0, 1.0]
    assert g({"x": np.zeros(2)})["y"].tolist() == [1.0, 1.0]
    with pytest.raises(TypeError):
        f()
    assert f.cache_info().hits == 1 and g.cache_info().hits == 1


def test_math_fallback_runs_inside_the_function():
    f = wg.compile(lambda x: wnp.log(x) * 2.0)
    assert f(1.0) == 0.0
    program = f.program(1.0)
    assert program.function.__name__ == program.name  # no wrapper around the generated function
    with np.errstate(invalid="ignore"):
        assert np.isnan(f(-1.0))
    assert f(np.e) == pytest.approx(2.0)
