"""Adversarial tests on Numba (slow group: tests/conftest.py SLOW_PATHS): the banded Hessian's lazy dense
fallback (program/band_kernel.py, native_build.Deferred) across calls alternating finite and non-finite
inputs, two compiled functions sharing a program, one dropped while the other lives, a pickled Hessian;
and the diagonal-product pass's native helpers with -0.0 and inf (program/diagonal_products.py).

Values are compared with the Python backend's and the tape's bit for bit where finite, nan positions
equal (Numba's code may give a nan the other sign: IEEE leaves a nan's sign unspecified, and LLVM
rewrites ``x * -1.0`` as a negation)."""

import gc
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.program import band_kernel


def sine_chain(x):  # module level: a compiled function pickles as a reference to it
    return wnp.sum(wnp.sin(x[:-1] * x[1:]))


X12 = np.random.default_rng(5).uniform(-1.5, 1.5, 12)


def _same(got, want):
    """Bit for bit where ``want`` is not nan; nan exactly where it is nan (either sign)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    a, b = np.ascontiguousarray(got[~nan]), np.ascontiguousarray(want[~nan])
    assert a.tobytes() == b.tobytes(), (got, want)


def _native():
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        return wg.compile(wg.hessian(sine_chain), backend="numba")


_SHARED = {}


def _shared():
    """Two native compiled Hessians of one function and the Python backend's (built once per process)."""
    if not _SHARED:
        _SHARED.update(first=_native(), second=_native(), python=wg.compile(wg.hessian(sine_chain)))
    return _SHARED["first"], _SHARED["second"], _SHARED["python"]


_entries = st.sampled_from([np.nan, np.inf, -np.inf, 1e200, 0.0, -0.0, 0.5])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 11), _entries), max_size=3), min_size=2, max_size=5))
def test_calls_alternating_finite_and_not_finite_give_the_python_backends_numbers(calls):
    """A sequence of calls on two compiled functions, each input finite or not: every value is the
    Python backend's and the tape's (the dense fallback compiled at the first need, reused after)."""
    pytest.importorskip("numba")
    first, second, python = _shared()
    for k, writes in enumerate(calls):
        x = X12 * (1.0 + 0.1 * k)
        for at, value in writes:
            x[at] = value
        with np.errstate(all="ignore"):
            want = python(x)
            np.testing.assert_array_equal(want, wg.hessian(sine_chain)(x))  # zero signs aside: see
            # test_hostile_session.py::test_a_banded_hessians_zero_signs_are_the_tapes
            _same(first(x), want)
            _same(second(x), want)
            _same(first(X12), python(X12))  # finite again right after


def test_a_dropped_compiled_function_leaves_the_other_one_working():
    pytest.importorskip("numba")
    python = wg.compile(wg.hessian(sine_chain))
    kept, dropped = _native(), _native()
    bad = X12.copy()
    bad[6] = np.nan
    with np.errstate(all="ignore"):
        _same(dropped(bad), python(bad))
        before = len(band_kernel._DENSE)
        del dropped
        gc.collect()
        assert len(band_kernel._DENSE) <= before
        _same(kept(bad), python(bad))
        bad[6] = np.inf
        _same(kept(bad), python(bad))
        _same(kept(X12), python(X12))


def test_a_compiled_hessian_refuses_pickling_with_a_message():
    """``wg.compile(wg.hessian(f))`` pickles by reference to the function it compiles, which is the
    Hessian's wrapper, not ``f``: pickling is refused (never a handle to another process's dense
    program), naming what to do."""
    pytest.importorskip("numba")
    with pytest.raises(pickle.PicklingError, match="cannot pickle .*sine_chain.*call wg.compile"):
        pickle.dumps(_native())


def test_the_diagonal_products_natively_keep_the_signs_of_zeros_and_read_writes():
    """The native helpers (rows_scaled_native): +0.0 where NumPy's product has it, nan and inf from a
    captured matrix written between calls, as the Python backend and the tape."""
    pytest.importorskip("numba")
    n = 48
    captured = -np.triu(np.random.default_rng(3).standard_normal((n, n)))  # -0.0 below the diagonal
    x = np.linspace(-1.0, 1.0, n)

    def quadratic(v):
        return v @ captured @ v

    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        native = wg.compile(wg.hessian(quadratic), backend="numba")
        got = native(x)
    python = wg.compile(wg.hessian(quadratic))
    assert "rows_scaled(" in python.source(x)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(wg.hessian(quadratic)(x)).tobytes()
    for value in (np.inf, np.nan, -0.0, 2.0):
        captured[5, 9] = value
        with np.errstate(all="ignore"):
            _same(native(x), python(x))
            _same(native(x), wg.hessian(quadratic)(x))
