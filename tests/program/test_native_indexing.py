"""The Numba versions of indexing's adjoints (``untake``, ``index_add``, ``np.add.at``) and of the statement
that assembles a banded Hessian (``banded_dense``): as NumPy, equal to the Python helpers bit for bit on
repeated and negative indices, slices, tuples of index arrays, nan and inf; compiled, the Rosenbrock
Hessian runs natively (no NativeFallbackWarning) with the Python backend's numbers, the dense program's
where a factor is not finite, and equals wg.hessian and jax.hessian (one Numba compilation, shared)."""

import functools
import os
import warnings

os.environ.setdefault("NUMBA_OPT", "0")  # a third of the compile time; no fast-math either way: same floats

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import wengert as wg
import wengert.numpy as wnp
from wengert.program import band_values, native_helpers
from wengert.rules import indexing

VALUES = st.sampled_from([-2.0, -0.0, 0.0, 1.5, 3.0, np.inf, -np.inf, np.nan])
untake_python = indexing.untake.helper
index_add_python = indexing.index_add.helper


def _bits(a):
    """``a``'s dtype and bytes: equal arrays with the same zeros' signs and nans."""
    a = np.ascontiguousarray(a)
    return a.dtype, a.shape, a.tobytes()


def _index(data, shape):
    """An index of ``shape``: an int, a slice, an integer array (repeats, negatives), a tuple of those."""
    n = shape[0]
    positions = st.integers(-n, n - 1)
    ends = st.integers(-n, n) | st.none()
    one = st.one_of(positions, st.builds(slice, ends, ends),
                    hnp.arrays(np.int64, st.integers(0, 6), elements=positions))
    if len(shape) == 1:
        return data.draw(one)
    m = shape[1]
    second = st.one_of(st.just(slice(None)), st.integers(-m, m - 1),
                       hnp.arrays(np.int64, st.integers(1, 4), elements=st.integers(-m, m - 1)))
    first = data.draw(one)
    other = data.draw(second)
    if isinstance(first, np.ndarray) and isinstance(other, np.ndarray) and first.size != other.size:
        other = other[:1]  # two arrays broadcast together
    return (first, other)


# -- as NumPy: the same values as the Python helpers --------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(st.data(), st.sampled_from([(6,), (4, 3)]), st.sampled_from([np.float64, np.float32]))
def test_untake_equals_the_python_helper(data, shape, dtype):
    idx = _index(data, shape)
    picked = np.zeros(shape)[idx].shape
    g = data.draw(hnp.arrays(dtype, picked, elements=VALUES))
    with np.errstate(invalid="ignore"):  # inf - inf: nan, as NumPy gives it
        assert _bits(native_helpers.untake_native(g, idx, shape)) == _bits(untake_python(g, idx, shape))


@settings(max_examples=80, deadline=None)
@given(st.data(), st.sampled_from([(6,), (4, 3)]), st.sampled_from([np.float64, np.float32]))
def test_index_add_and_add_at_equal_the_python_helper_and_numpy(data, shape, dtype):
    idx = _index(data, shape)
    picked = np.zeros(shape)[idx].shape
    x = data.draw(hnp.arrays(dtype, shape, elements=VALUES))
    v = data.draw(hnp.arrays(np.float64, picked, elements=VALUES) | VALUES)
    with np.errstate(invalid="ignore"):  # inf - inf: nan, as NumPy gives it
        assert _bits(native_helpers.index_add_native(x, idx, v)) == _bits(index_add_python(x, idx, v))
        want, got = x.copy(), x.copy()
        np.add.at(want, idx, v)
        native_helpers.add_at_native(got, idx, v)
    assert _bits(got) == _bits(want)


def test_repeated_and_negative_indices_add_twice():
    idx = np.array([1, -1, 1, 3])
    got = native_helpers.untake_native(np.array([1.0, 2.0, 4.0, 8.0]), idx, (4,))
    np.testing.assert_array_equal(got, [0.0, 5.0, 0.0, 10.0])
    assert native_helpers.index_repeats(idx) and not native_helpers.index_repeats((slice(1), 2))
    buf = np.zeros((2, 3)).T  # not contiguous: written through
    native_helpers.add_at_native(buf, np.array([0, 0]), 1.0)
    np.testing.assert_array_equal(buf, [[2.0, 2.0], [0.0, 0.0], [0.0, 0.0]])


def test_a_negative_zero_is_assigned_by_a_slice_and_added_by_an_array():
    g = np.array([-0.0])
    assert np.signbit(native_helpers.untake_native(g, slice(0, 1), (2,))[0])
    assert not np.signbit(native_helpers.untake_native(g, np.array([0]), (2,))[0])


# -- banded_dense: its checks and its fallback --------------------------------------------------------

def rosenbrock(x):
    return wnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


X = np.random.default_rng(0).uniform(-1.5, 1.5, 100)


def test_the_banded_hessian_checks_every_element_not_the_sum(monkeypatch):
    """Finite factors whose sum overflows keep the banded assembly (what the Numba version checks too)."""
    x = 2.5e152 * (1.0 + X[:20] / 100)  # 200 (x1 - x0^2) about 1.25e307, finite; their sum over 19 is not
    h = wg.compile(wg.hessian(rosenbrock))
    want = wg.hessian(rosenbrock)(x)
    monkeypatch.setattr(band_values.Assembly, "dense_program", lambda _: pytest.fail("ran the dense program"))
    with np.errstate(over="ignore"):
        got = h(x)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-13)


@functools.cache
def _native_hessian():
    """``wg.compile(wg.hessian(rosenbrock), backend="numba")`` built once, a fallback an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        h = wg.compile(wg.hessian(rosenbrock), backend="numba")
        h(X)
    return h


def test_the_rosenbrock_hessian_runs_natively_with_the_python_backends_numbers():
    pytest.importorskip("numba")
    h = _native_hessian()
    got = h(X)
    assert _bits(got) == _bits(wg.compile(wg.hessian(rosenbrock))(X))
    np.testing.assert_allclose(got, wg.hessian(rosenbrock)(X), rtol=1e-13, atol=1e-12)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    want = jax.hessian(lambda x: jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2))(X)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-10)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 99), st.sampled_from([np.inf, -np.inf, np.nan, 1e200])), max_size=3))
def test_a_factor_not_finite_runs_the_dense_program_natively_as_python_does(bad):
    pytest.importorskip("numba")
    h = _native_hessian()
    x = X.copy()
    for i, v in bad:
        x[i] = v
    with np.errstate(all="ignore"):
        got, want = h(x), wg.compile(wg.hessian(rosenbrock))(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


def test_a_gather_at_repeated_indices_runs_natively():
    """``np.add.at`` in the generated gradient (an index array that repeats) has a Numba spelling."""
    pytest.importorskip("numba")
    idx = np.array([0, 3, 3, -1, 2])

    def f(v):
        return wnp.sum(wnp.sin(v[idx]) * v[idx]) + wnp.sum(v[1:] * v[:-1])

    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        grad = wg.compile(f, backend="numba").grad()
        got = grad(X[:6])
    assert "np.add.at" in wg.compile(f).grad().source(X[:6])
    np.testing.assert_array_equal(got, wg.compile(f).grad()(X[:6]))
    np.testing.assert_allclose(got, wg.grad(f)(X[:6]), rtol=1e-14)


def test_a_loop_state_of_an_array_and_a_float_runs_natively():
    """A wg.iterate state of several leaves is cut apart by indexing, whose adjoint (untake) is native."""
    pytest.importorskip("numba")
    m = np.array([[0.5, -0.2, 0.1], [0.3, 0.4, -0.6], [0.2, 0.1, 0.3]])

    def f(x, c):
        def step(s):
            a, b = s
            return wnp.tanh(m @ a + b), b * c + 0.01 * wnp.sum(a)

        a, b = wg.iterate(step, (x, 0.5), 40, checkpoint="binomial")
        return wnp.sum(a ** 2) + b

    x = np.array([0.3, -0.2, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        got = wg.compile(f, backend="numba").grad((0, 1))(x, 0.9)
    python = wg.compile(f).grad((0, 1))(x, 0.9)
    tape = wg.grad(f, (0, 1))(x, 0.9)
    for g, p, t in zip(got, python, tape):
        np.testing.assert_allclose(g, p, rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(g, t, rtol=1e-11, atol=1e-15)
