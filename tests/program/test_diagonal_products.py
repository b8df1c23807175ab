"""A captured matrix in a compiled Jacobian or Hessian (program/diagonal_products.py): ``eye @ A`` with
``A`` read at each call is computed as ``A`` scaled, with NumPy's product where ``A`` is not finite.
Checked against the same function with the matrix as a constant of the program (a default argument),
the tape, finite differences and JAX; after rebinding the global and writing into it in place; and
the pass's helpers against NumPy's product, nan and inf included."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
from wengert.program.diagonal_products import MIN_WORK, columns_scaled, rows_scaled

N = 48  # eye(N) @ A is N ** 3 multiply-adds, above MIN_WORK: rewritten
_rng = np.random.default_rng(7)
A = _rng.standard_normal((N, N))
X0 = _rng.standard_normal(N)


def quadratic(x):
    return x @ A @ x


def make_quadratic(B):
    def closure_quadratic(x):
        return x @ B @ x
    return closure_quadratic


def constant_quadratic(x, M=A.copy()):  # noqa: B008 - a default: a constant of the traced program
    return x @ M @ x


def linear_map(x):
    return A @ x


TRANSFORMS = {
    "compile": lambda f: wg.compile(f),
    "grad": lambda f: wg.compile(f).grad(),
    "value_and_grad": lambda f: wg.compile(f).value_and_grad(),
    "compile_of_grad": lambda f: wg.compile(wg.grad(f)),
    "hessian": lambda f: wg.compile(wg.hessian(f)),
}


def _fd_hessian(f, x, h=1e-4):
    """Central differences of the gradient's finite differences (f quadratic: exact up to rounding)."""
    n = x.size
    out = np.empty((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = h
        gp = np.array([(f(x + e + d) - f(x + e - d)) / (2 * h) for d in np.eye(n) * h])
        gm = np.array([(f(x - e + d) - f(x - e - d)) / (2 * h) for d in np.eye(n) * h])
        out[:, i] = (gp - gm) / (2 * h)
    return out


@pytest.fixture(autouse=True)
def _restore_a():
    global A
    saved = A
    A = saved.copy()
    yield
    A = saved


def _close(a, b):
    for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_captured_global_and_closure_agree_with_the_constant_program(transform):
    make = TRANSFORMS[transform]
    expected = make(constant_quadratic)(X0)
    _close(make(quadratic)(X0), expected)
    _close(make(make_quadratic(A.copy()))(X0), expected)


def test_the_hessian_of_a_captured_matrix_is_a_scaling_not_a_product():
    h = wg.compile(wg.hessian(quadratic))
    text = str(h.program(X0))  # the SSA statements
    assert "rows_scaled(" in text and " @ " not in text
    got = h(X0)
    np.testing.assert_array_equal(got, wg.hessian(quadratic)(X0))  # the tape's, bit for bit
    np.testing.assert_allclose(got, A + A.T, rtol=1e-14)
    np.testing.assert_allclose(got, _fd_hessian(quadratic, X0[:N]), rtol=1e-5, atol=1e-5)


def test_hessian_agrees_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    expected = np.asarray(jax.hessian(lambda x: x @ jax.numpy.asarray(A) @ x)(X0))
    np.testing.assert_allclose(wg.compile(wg.hessian(quadratic))(X0), expected, rtol=1e-12)


def test_rebinding_and_writing_in_place_are_seen_by_the_next_call():
    global A
    h = wg.compile(wg.hessian(quadratic))
    jac = wg.compile(wg.jacrev(linear_map))
    np.testing.assert_array_equal(h(X0), A + A.T)
    A[3, 5] = 10.0  # in place
    np.testing.assert_array_equal(h(X0), A + A.T)
    np.testing.assert_array_equal(jac(X0), A)
    A = _rng.standard_normal((N, N))  # rebound
    np.testing.assert_array_equal(h(X0), A + A.T)
    np.testing.assert_array_equal(jac(X0), A)
    assert h.cache_info().misses == 1 and jac.cache_info().misses == 1  # read, not traced again


def test_the_result_is_a_new_array_not_the_captured_one():
    jac = wg.compile(wg.jacrev(linear_map))
    before = A.copy()
    out = jac(X0)
    assert "rows_scaled(" in jac.source(X0)
    out[:] = -1.0
    np.testing.assert_array_equal(A, before)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_a_matrix_that_is_not_finite_gives_the_products_nan_and_inf(bad):
    A[2, 7] = bad
    h, jac = wg.compile(wg.hessian(quadratic)), wg.compile(wg.jacfwd(linear_map))
    with np.errstate(invalid="ignore"):
        expected_h, expected_jac = wg.hessian(quadratic)(X0), wg.jacfwd(linear_map)(X0)
        got_h, got_jac = h(X0), jac(X0)
    assert np.isnan(expected_h).any()  # 0 * inf in eye @ A: the case the fallback exists for
    np.testing.assert_array_equal(got_h, expected_h)
    np.testing.assert_array_equal(got_jac, expected_jac)


def test_a_sum_that_overflows_takes_the_product():
    A[:] = 1e308  # every element finite, their sum is not: the product, whose value is the same
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(wg.compile(wg.hessian(quadratic))(X0), A + A.T)


def test_small_products_are_kept():
    b = _rng.standard_normal((8, 8))

    def small(x):
        return x @ b @ x

    assert 8 ** 3 < MIN_WORK
    text = wg.compile(wg.hessian(small)).source(X0[:8])
    assert "rows_scaled(" not in text and "columns_scaled(" not in text


def test_a_diagonal_other_than_the_identity_and_products_from_the_right():
    d = np.linspace(-2.0, 3.0, N)
    d[5] = 0.0
    D = np.diag(d)
    Y = _rng.standard_normal((3, N, N))

    def left(y, D=D):  # noqa: B008
        return D @ y

    def right(y, D=D):  # noqa: B008
        return y @ D

    for f, helper in ((left, "rows_scaled("), (right, "columns_scaled(")):
        for y in (Y[0].T.copy(), Y, Y[0, :, 0]):
            cf = wg.compile(f)
            if N * y.size >= MIN_WORK:
                assert helper in cf.source(y)
            np.testing.assert_array_equal(cf(y), f(y))


def test_a_constant_that_is_not_diagonal_is_a_product():
    P = np.eye(N)[::-1].copy()  # a permutation

    def f(y, P=P):  # noqa: B008
        return P @ y

    cf = wg.compile(f)
    y = _rng.standard_normal((N, N))
    assert "rows_scaled(" not in cf.source(y)
    np.testing.assert_array_equal(cf(y), P @ y)


_values = st.sampled_from([0.0, -0.0, 1.0, -2.5, 3e-300, np.inf, -np.inf, np.nan, 7.0])


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(1, 4), st.lists(_values, min_size=36, max_size=36),
       st.lists(st.sampled_from([0.0, 1.0, -1.0, 0.5]), min_size=6, max_size=6), st.booleans())
def test_the_helpers_give_numpys_product(n, m, xs, ds, transposed):
    d = np.array(ds[:n])
    dense = np.diag(d)
    x = np.resize(np.array(xs), (m, n) if transposed else (n, m))
    x = x.T if transposed else x  # a view, as the pass meets A.T
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(rows_scaled(x, d.reshape(n, 1), dense), dense @ x)
        np.testing.assert_array_equal(columns_scaled(x.T, d, dense), x.T @ dense)
        np.testing.assert_array_equal(rows_scaled(x[:, 0], d, dense), dense @ x[:, 0])
    # the sign of a zero aside (assert_array_equal: 0.0 == -0.0), bit for bit


def test_numba_runs_the_scaling_natively():
    pytest.importorskip("numba")
    h_py = wg.compile(wg.hessian(quadratic))
    h_nb = wg.compile(wg.hessian(quadratic), backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.program.native.NativeFallbackWarning)
        got = h_nb(X0)
    assert h_nb.program(X0).native
    np.testing.assert_array_equal(got, h_py(X0))
    A[1, 1] = np.inf  # the product, natively too
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(h_nb(X0), h_py(X0))
