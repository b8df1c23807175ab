"""The Numba versions of indexing's adjoints (``untake``, ``index_add``, ``np.add.at``) and of the statement
that assembles a banded Hessian (``banded_dense``): as NumPy, equal to the Python helpers bit for bit on
repeated and negative indices, slices, tuples of index arrays, nan and inf; compiled, the Rosenbrock
Hessian runs natively (no NativeFallbackWarning) with the Python backend's numbers, the dense program's
where a factor is not finite (compiled at that first need, not when the program is built), and equals
wg.hessian and jax.hessian (one Numba compilation, shared)."""

import functools
import gc
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
from wengert.program import band_kernel, band_values, native_build, native_helpers
from wengert.rules import indexing

VALUES = st.sampled_from([-2.0, -0.0, 0.0, 1.5, 3.0, np.inf, -np.inf, np.nan])
untake_python = indexing.untake.helper
index_add_python = indexing.index_add.helper


def _bits(a):
    """``a``'s dtype and bytes: equal arrays with the same zeros' signs and nans at the same places
    (a nan's sign bit is not compared: IEEE 754 leaves it unspecified for ``inf - inf``, and Numba's
    float32 code gives the other one than NumPy's)."""
    a = np.array(a, order="C")
    if a.dtype.kind in "fc":
        a[np.isnan(a)] = np.nan
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


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([(5,), (4, 3), (3, 1, 4)]), st.sampled_from([np.float64, np.float32]))
def test_assigning_to_slices_by_a_loop_equals_the_assignment(data, shape, dtype):
    """``assign_slices`` (what compiled ``untake`` runs for slices alone) is NumPy's ``out[idx] = g``, bit
    for bit, ``g`` broadcast (its length-1 axes, fewer axes, a float) and cast to ``out``'s dtype."""
    ends = st.integers(-6, 6) | st.none()
    steps = st.sampled_from([None, 1, 2, -1])
    parts = data.draw(st.lists(st.builds(slice, ends, ends, steps), min_size=1, max_size=len(shape)))
    idx = parts[0] if len(parts) == 1 and data.draw(st.booleans()) else tuple(parts)
    picked = np.zeros(shape)[idx].shape
    given_shape = data.draw(st.sampled_from([picked, picked[1:], tuple(1 for _ in picked), ()]))
    g = data.draw(hnp.arrays(np.float64, given_shape, elements=VALUES) | VALUES)
    out, want = np.full(shape, 7.0, dtype), np.full(shape, 7.0, dtype)
    native_helpers.assign_slices(out, idx, g)
    want[idx] = g
    assert _bits(out) == _bits(want)


UNTAKE_CASES = {  # (g, idx, shape): each index kind compiled once
    "slice": (np.array([-0.0, np.nan, 1.5, np.inf]), slice(1, 5), (6,)),
    "step": (np.array([2.0, -3.0]), slice(None, None, -3), (6,)),
    "slices-3d": (np.arange(24.0).reshape(4, 1, 6), (slice(None), slice(None), slice(None, -1)), (4, 1, 7)),
    "broadcast": (np.array([[1.0, -0.0, 2.0]]), (slice(0, 3), slice(None)), (4, 3)),
    "float-into-slice": (-2.5, slice(1, 4), (6,)),
    "empty": (np.zeros((0, 3)), (slice(2, 2), slice(None, None, -1)), (4, 3)),
    "fewer-axes": (np.array([1.0, -0.0, np.nan]), (slice(1, 3), slice(None)), (4, 3)),
    "more-axes": (np.array([[[1.0, 2.0]]]), slice(0, 2), (3,)),
    "int": (2.5, 3, (6,)),
    "int-and-slice": (np.array([1.0, -2.0]), (1, slice(1, 3)), (3, 4)),
    "repeats": (np.array([1.0, 2.0, 4.0, -0.0]), np.array([1, -1, 1, 0]), (5,)),
    "float32": (np.array([1.5, -0.0], np.float32), slice(2, 4), (5,)),
}


@pytest.mark.parametrize("case", UNTAKE_CASES, ids=list(UNTAKE_CASES))
def test_untake_compiled_equals_the_python_helper(case):
    """``untake_native`` compiled by Numba (``assign_at`` typed by the index: a loop for slices alone,
    ``np.add.at`` where the index repeats, the assignment else) has the Python helper's bits."""
    numba = pytest.importorskip("numba")
    native_helpers.register_typing(numba)
    g, idx, shape = UNTAKE_CASES[case]
    got = _compiled_untake(numba)(g, idx, shape)
    assert _bits(got) == _bits(untake_python(g, idx, shape))


@functools.cache
def _compiled_untake(numba):
    """``untake_native`` under Numba (one dispatcher: each index kind compiled once a process)."""
    return numba.njit(error_model="numpy")(native_helpers.untake_native)


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
    np.testing.assert_array_equal(got, want)  # the same numbers, nans where the Python backend has them


def sine_chain(x):
    return wnp.sum(wnp.sin(x[:-1] * x[1:]))


X12 = np.random.default_rng(5).uniform(-1.5, 1.5, 12)


def _native_sine_chain_hessian():
    """A fresh ``wg.compile(wg.hessian(sine_chain), backend="numba")`` called once at finite values, and
    its statement's dense function (``band_kernel.run_dense``'s entry); a fallback an error. Its Numba
    modules are shared by every build in the process: one compilation."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        h = wg.compile(wg.hessian(sine_chain), backend="numba")
        h(X12)
    [statement] = [s for s in h.program(X12).statements if s.prim.__name__ == "banded_dense"]
    handle = statement.prim.fun.__self__.native[2][0]
    return h, band_kernel._DENSE[int(handle[0])]


def _bad(x, at, value):
    x = x.copy()
    x[at] = value
    return x


def test_the_dense_program_is_compiled_at_its_first_need_with_the_python_backends_values():
    """Building compiles no dense program (the fallback of banded_dense, which most calls never run):
    the first call with a factor not finite does, natively, with the Python backend's numbers."""
    pytest.importorskip("numba")
    h, dense = _native_sine_chain_hessian()
    python = wg.compile(wg.hessian(sine_chain))
    assert dense.function is None
    np.testing.assert_array_equal(h(X12 * 0.5), python(X12 * 0.5))
    assert dense.function is None  # finite factors: the banded assembly alone
    for at, value in [(4, np.inf), (0, np.nan), (11, -np.inf)]:
        with np.errstate(all="ignore"):
            got, want = h(_bad(X12, at, value)), python(_bad(X12, at, value))
        assert np.isnan(want).sum() > 3  # the dense program's nans, off the diagonals too
        np.testing.assert_array_equal(got, want)
    inner = getattr(dense.function, "func", dense.function)
    assert hasattr(inner, "py_func")  # the Numba dispatcher, not the Python fallback


def test_a_dense_program_numba_fails_to_compile_at_its_first_need_runs_as_python(monkeypatch):
    """Where Numba cannot compile the dense program when it is first needed (``native_function`` warns
    and gives the Python function), that call warns, naming the reason, and every call has the Python
    backend's numbers."""
    pytest.importorskip("numba")
    h, dense = _native_sine_chain_hessian()

    def fails(program):
        warnings.warn("backend='numba': dense runs as Python, not native code: primitive sin (a test). The "
                      "values are the same", wg.NativeFallbackWarning, stacklevel=2)
        return program.function

    monkeypatch.setattr(native_build, "native_function", fails)
    python = wg.compile(wg.hessian(sine_chain))
    bad = _bad(X12, 3, np.nan)
    with np.errstate(all="ignore"), pytest.warns(wg.NativeFallbackWarning, match="primitive sin"):
        got = h(bad)
    np.testing.assert_array_equal(got, python(bad))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        np.testing.assert_array_equal(h(_bad(X12, 7, np.inf)), python(_bad(X12, 7, np.inf)))


def test_the_dense_function_is_made_uncompiled_and_goes_with_its_handle():
    """Building a banded_dense statement's Numba version compiles nothing of the dense program: its
    entry in ``run_dense``'s table is a ``Deferred`` not yet built, which lives as long as the
    statement's handle (held by the statement and the programs calling it), and no longer."""
    numba = pytest.importorskip("numba")
    program = wg.compile(wg.hessian(sine_chain)).program(X12)
    [statement] = [s for s in program.statements if s.prim.__name__ == "banded_dense"]
    assembly = statement.prim.fun.__self__
    built = assembly.build_native(native_build.native_function,
                                  lambda text: native_build._import(text, numba))
    handle = built[2][0]
    number = int(handle[0])
    dense = band_kernel._DENSE[number]
    assert isinstance(dense, native_build.Deferred) and dense.function is None
    assert dense.program is assembly.dense_program()
    del built, handle, dense
    assembly.native = None
    gc.collect()
    assert number not in band_kernel._DENSE


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
