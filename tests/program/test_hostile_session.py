"""Adversarial tests of three features: the diagonal-product pass (program/diagonal_products.py), NumPy's
array conversions in the source front end (program/source/conversions.py) and the banded Hessian's lazy
dense fallback on Numba (program/band_kernel.py; Numba's tests are in test_hostile_native.py, slow).

Each result is compared with the tape's (``wg.hessian``, an equivalent ``wnp`` program), with the same
program without the feature, with NumPy's own product, or with finite differences, bit for bit where the
feature promises NumPy's value (signs of zeros and nan positions included)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.program.diagonal_products as diagonal_products
from wengert.program.diagonal_products import MIN_WORK, columns_scaled, rows_scaled

N = 48  # eye(N) @ A: N ** 3 multiply-adds, above MIN_WORK
_rng = np.random.default_rng(11)
X0 = _rng.standard_normal(N)


def _bits(a):
    """``a``'s dtype, shape and bytes: equal exactly where two arrays are bit for bit the same."""
    a = np.ascontiguousarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def _assert_bits(got, want):
    assert _bits(got) == _bits(want), (got, want)


def _with_negative_zeros():
    """A matrix whose zeros are -0.0, as ``-A`` has them wherever ``A`` is zero."""
    a = np.triu(_rng.standard_normal((N, N)))
    return -a


# -- diagonal products: the signs of zeros ---------------------------------------------------------------


def test_a_compiled_hessian_keeps_the_tapes_signs_of_zeros(monkeypatch):
    """Silently wrong before: ``eye @ A`` became ``A * 1.0``, which keeps A's -0.0 where the product (and
    the tape's Hessian) has +0.0, so ``1 / H`` gave -inf where the tape's gave +inf."""
    captured = _with_negative_zeros()

    def quadratic(x):
        return x @ captured @ x

    def linear(x):
        return captured @ x

    hessian = wg.compile(wg.hessian(quadratic))
    assert "rows_scaled(" in hessian.source(X0)
    got, want = hessian(X0), wg.hessian(quadratic)(X0)
    _assert_bits(got, want)
    with np.errstate(divide="ignore"):
        _assert_bits(1.0 / got, 1.0 / want)
    rewritten = [wg.compile(wg.jacrev(linear))(X0), wg.compile(wg.jacfwd(linear))(X0)]
    monkeypatch.setattr(diagonal_products, "MIN_WORK", 1 << 60)  # the pass keeps every product
    assert "rows_scaled(" not in wg.compile(wg.hessian(quadratic)).source(X0)
    _assert_bits(got, wg.compile(wg.hessian(quadratic))(X0))
    _assert_bits(rewritten[0], wg.compile(wg.jacrev(linear))(X0))
    _assert_bits(rewritten[1], wg.compile(wg.jacfwd(linear))(X0))


def test_writes_between_calls_are_read_bit_for_bit():
    """A captured matrix written between calls: finite, inf, nan, -0.0, finite again; each call is the
    tape's Hessian at the values of that moment, nan positions and signs of zeros included."""
    captured = _rng.standard_normal((N, N))

    def quadratic(x):
        return x @ captured @ x

    hessian = wg.compile(wg.hessian(quadratic))
    for i, value in enumerate([1.5, np.inf, -np.inf, np.nan, -0.0, 0.0, 2.0, -0.0]):
        captured[i % 3, (2 * i) % N] = value
        if i == 6:
            captured[np.isnan(captured) | np.isinf(captured)] = -0.0
        with np.errstate(invalid="ignore"):
            _assert_bits(hessian(X0), wg.hessian(quadratic)(X0))
    assert hessian.cache_info().misses == 1


@pytest.mark.parametrize("view", ["transposed", "strided", "broadcast", "fortran", "float32"])
def test_views_and_dtypes_of_the_captured_matrix(view):
    base = _rng.standard_normal((2 * N, 2 * N))
    base[base > 1.0] = -0.0
    captured = {"transposed": base[:N, :N].T, "strided": base[::2, 1::2],
                "broadcast": np.broadcast_to(base[0, :N], (N, N)), "fortran": np.asfortranarray(base[:N, :N]),
                "float32": base[:N, :N].astype(np.float32)}[view]
    x = X0.astype(captured.dtype)

    def quadratic(x):
        return x @ captured @ x

    _assert_bits(wg.compile(wg.hessian(quadratic))(x), wg.hessian(quadratic)(x))


def test_vmap_of_grad_and_jacrev_of_grad_compiled():
    captured = _with_negative_zeros()

    def quadratic(x):
        return x @ captured @ x

    xs = _rng.standard_normal((5, N))
    _assert_bits(wg.compile(wg.vmap(wg.grad(quadratic)))(xs), wg.vmap(wg.grad(quadratic))(xs))
    np.testing.assert_allclose(wg.compile(wg.jacrev(wg.grad(quadratic)))(X0), captured + captured.T,
                               rtol=1e-14)


_finite = st.sampled_from([0.0, -0.0, 1.0, -2.5, 7.0, 1e300, -1e-300, 3.0])
_any = st.one_of(_finite, st.sampled_from([np.inf, -np.inf, np.nan]))


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 6), st.integers(1, 4), st.lists(_any, min_size=36, max_size=36),
       st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 4.0]), min_size=6, max_size=6),
       st.booleans(), st.booleans())
def test_the_helpers_equal_numpys_product_bit_for_bit(n, m, xs, ds, transposed, finite):
    """Silently wrong before (signs of zeros): each helper against NumPy's product on the same
    arguments, every bit compared (products of normal numbers: no underflow, where BLAS's own fused
    multiply-adds are not consistent in the sign of a zero)."""
    d = np.array(ds[:n])
    dense = np.diag(d)
    values = np.array(xs)
    if finite:
        values[~np.isfinite(values)] = -0.0
    x = np.resize(values, (m, n) if transposed else (n, m))
    x = x.T if transposed else x  # a view, as the pass meets A.T
    with np.errstate(all="ignore"):
        _assert_bits(rows_scaled(x, d.reshape(n, 1), dense), dense @ x)
        _assert_bits(columns_scaled(x.T, d, dense), x.T @ dense)
        _assert_bits(rows_scaled(x[:, 0], d, dense), dense @ x[:, 0])
        _assert_bits(columns_scaled(x[:, 0], d, dense), x[:, 0] @ dense)
        if (d == d[0]).all():
            _assert_bits(rows_scaled(x, float(d[0]), dense), dense @ x)


def test_a_float_scale_of_one_still_gives_a_new_array():
    x = -np.zeros((N, N))
    out = rows_scaled(x, 1.0, np.eye(N))
    assert out is not x and not np.signbit(out).any() and np.signbit(x).all()
    assert N ** 3 >= MIN_WORK
