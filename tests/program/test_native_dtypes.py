"""The Numba backend in other dtypes than float64 (program/native_types.py): Numba promotes a Python
number with a float32 or small-integer array to 64 bits, where NumPy 2 keeps the array's dtype, and
gives a float32 scalar back as a Python float; such a program runs as Python with a
``NativeFallbackWarning`` naming it, and gives the Python backend's numbers in the Python backend's
dtypes. Each test compiles a few programs (about a second each)."""

import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def _both(make, *args):
    """``(python backend's result, Numba backend's result, the Numba build's fallback messages)``."""
    want = make("python")(*args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", wg.NativeFallbackWarning)
        got = make("numba")(*args)
    return want, got, [str(w.message) for w in caught if w.category is wg.NativeFallbackWarning]


def _same(got, want):
    """Same type, dtype, shape and bits."""
    assert type(got) is type(want), (got, want)
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (got, want)


def scaled(x):
    return x * 0.1 + 1.0


def scaled_sum(x):
    return wnp.sum(wnp.sin(x) * 0.1)


def test_float32_times_a_python_float_stays_float32_and_says_why_it_runs_as_python(tmp_path, monkeypatch):
    """Numba computes ``float32[3] * 0.1`` in float64 (a float64 array back, other numbers); NumPy
    keeps float32: the program runs as Python, warning with its name and the dtypes."""
    pytest.importorskip("numba")
    monkeypatch.setenv("WENGERT_CACHE_DIR", str(tmp_path))
    x = np.array([0.1, 0.7, 3.0], np.float32)
    want, got, said = _both(lambda be: wg.compile(scaled, backend=be), x)
    _same(got, want)
    assert want.dtype == np.float32
    assert len(said) == 1 and said[0].startswith("backend='numba': scaled runs as Python")
    assert "Numba promotes dtypes otherwise than NumPy" in said[0] and "float32" in said[0]


def test_a_float32_scalar_result_comes_back_as_numpys_float32(tmp_path, monkeypatch):
    """Numba returns a float32 scalar as a Python float (``0.37999999895691877`` for ``np.float32(0.38)``),
    of the source gradient's and the compiled value's."""
    pytest.importorskip("numba")
    monkeypatch.setenv("WENGERT_CACHE_DIR", str(tmp_path))
    x = np.array([0.1, 0.7, 3.0], np.float32)
    want, got, said = _both(lambda be: wg.compile(scaled_sum, backend=be), x)
    _same(got, want)
    assert type(want) is np.float32 and said
    want, got, said = _both(lambda be: wg.source_grad(scaled_sum, backend=be), x)
    _same(got, want)
    assert want.dtype == np.float32 and said and "scaled_sum_grad" in said[0]


def wraps(x):
    return x + 250


def test_uint8_arithmetic_wraps_around_as_in_numpy(tmp_path, monkeypatch):
    """``uint8[1] + 250`` is 4 in NumPy (it wraps), 260 in Numba's int64: not a rounding, another number."""
    pytest.importorskip("numba")
    monkeypatch.setenv("WENGERT_CACHE_DIR", str(tmp_path))
    want, got, said = _both(lambda be: wg.compile(wraps, backend=be), np.array([10], np.uint8))
    _same(got, want)
    assert want.tolist() == [4] and said


def test_float64_programs_still_run_natively(tmp_path, monkeypatch):
    """The check refuses no program whose types agree: float64 arrays, Python floats and ints, results
    that are float64 scalars (given back as Python floats, the same number, as docs/compiling.md says)."""
    pytest.importorskip("numba")
    monkeypatch.setenv("WENGERT_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        cf = wg.compile(lambda x, k: (wnp.sum(x * 0.1) * k, x * k), backend="numba")
        value, array = cf(np.array([0.1, 0.7]), 3)
    assert type(value) is float and array.dtype == np.float64
    assert value == float(wg.compile(lambda x, k: wnp.sum(x * 0.1) * k)(np.array([0.1, 0.7]), 3))


@pytest.mark.parametrize("want, numba_type, same", [
    (np.float64(1.0), "float64", True), (1.0, "float64", True),
    (np.float64(1.0), "array(float64, 0d, C)", True),
    (np.ones(()), "float64", True), (np.ones(3), "array(float64, 1d, C)", True), (np.int64(0), "int64", True),
    (np.float32(1.0), "array(float32, 0d, C)", True),
    (np.float32(1.0), "float32", False), (np.ones(3, np.float32), "array(float64, 1d, C)", False),
    (np.ones(3), "array(float64, 2d, C)", False), (np.ones(3, np.uint8), "array(int64, 1d, C)", False),
    (np.ones((), np.float32), "float32", False), (1.0, "array(float64, 1d, C)", False)],
    ids=lambda v: v if isinstance(v, str) else str(v) if isinstance(v, bool) else
    f"{type(v).__name__}-{getattr(v, 'dtype', '')}{list(np.shape(v))}")
def test_which_result_types_count_as_numpys(want, numba_type, same):
    """A result of the same dtype and rank (a 0-d array and a scalar alike) is the Python program's; a
    float32 scalar given back as a Python float, or another dtype or rank, is not (no compiling here)."""
    numba = pytest.importorskip("numba")
    from wengert.program.native_types import _result_differs

    got = _array(numba, numba_type) if numba_type.startswith("array(") else getattr(numba.types, numba_type)
    assert (_result_differs(numba, got, want) is None) == same


def _array(numba, spelled):
    """Numba's array type spelled ``array(float64, 2d, C)``."""
    dtype, rank, _ = (p.strip() for p in spelled[len("array("):-1].split(","))
    return numba.types.Array(getattr(numba.types, dtype), int(rank[:-1]), "C")
