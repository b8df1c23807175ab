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
from tests.support.engines import finite_differences, function_from_text
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


# -- NumPy's conversions in the source front end, against the tape on the same program with wnp ---------

XC = np.array([0.7, -1.3, 2.1])

CONVERTING = {  # name -> the body of ``def f(x):``; the tape runs it with np.array/np.asarray as wnp's
    "dtype_int_truncates": "y = np.array(x * 3.0, dtype=int)\n    return np.sum(y * x) + np.sum(np.sin(x))",
    "asarray_int64": "y = np.asarray(x * 3.0, dtype=np.int64)\n    return np.sum(y * x)",
    "float32_then_written": "y = np.asarray(x, dtype=np.float32)\n    y[0] = 2.0\n    return np.sum(y * x)",
    "ndmin_3": "m = np.array(x, ndmin=3)\n    return np.sum(m * m * x)",
    "mixed_nested": "m = np.array([x, [x[0], 1.0, x[1] * x[2]]])\n    return np.sum(np.sin(m) * m)",
    "reversed_copy_written": "y = np.array(x)[::-1]\n    y[0] = 0.0\n    return np.sum(y * x)",
    "branch": "if x[0] > 0:\n        y = np.array(x)\n        y[1] = x[0] ** 2\n    else:\n"
              "        y = np.asarray(x * 2.0)\n    return np.sum(y * x)",
    "loop": "s = x[0]\n    for i in range(3):\n        y = np.array([s, x[i]])\n"
            "        s = np.sum(y * y) * 0.5\n    return s",
    "alias_written_when_x_is_dead": "y = np.asarray(x * 1.0)\n    y += 1.0\n    return np.sum(y * y)",
    "copy_of_a_slice_written": "v = np.array(x[1:])\n    v[0] = 0.0\n"
                               "    return np.sum(x * x) + np.sum(v * x[:2])",
    "zero_d_values_listed": "a = np.sum(x * x)\n    v = np.array([a, a * 2.0, x[1]])\n"
                            "    return np.sum(v * v)",
}


def _pair(body):
    """The function as NumPy runs it (read by the source front end) and its wnp twin for the tape."""
    tape_body = body.replace("np.array(", "wnp.array(").replace("np.asarray(", "wnp.asarray(")
    numpy_f = function_from_text(f"def f(x):\n    {body}\n", tag="hostile")
    tape_f = function_from_text(f"import wengert.numpy as wnp\n\n\ndef f(x):\n    {tape_body}\n",
                                tag="hostile")
    return numpy_f, tape_f


_COMPILED = {}


def _compiled(name):
    if name not in _COMPILED:
        numpy_f, tape_f = _pair(CONVERTING[name])
        _COMPILED[name] = (numpy_f, tape_f, wg.source_grad(numpy_f), wg.source_jvp(numpy_f),
                           wg.compile(numpy_f))
    return _COMPILED[name]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(CONVERTING)),
       st.lists(st.floats(-3.0, 3.0, allow_subnormal=False), min_size=3, max_size=3))
def test_conversions_equal_the_tape_on_the_wnp_program(name, values):
    """Gradient (source_grad, compile's source fallback), forward derivative (source_jvp) and value
    against the tape running the same program with ``wnp.array``/``wnp.asarray``, at varying inputs
    (branches taken both ways, int truncation at varying points)."""
    numpy_f, tape_f, source_grad, source_jvp, compiled = _compiled(name)
    x = np.array(values)
    tangent = np.array([0.5, -1.0, 2.0])
    value, want = wg.value_and_grad(tape_f)(x.copy())
    assert numpy_f(x.copy()) == value
    np.testing.assert_allclose(source_grad(x.copy()), want, rtol=1e-13, atol=1e-13)
    assert compiled(x.copy()) == pytest.approx(value, rel=1e-13, abs=1e-13)
    np.testing.assert_allclose(compiled.grad()(x.copy()), want, rtol=1e-13, atol=1e-13)
    out, derivative = source_jvp((x.copy(),), (tangent,))
    tape_out, tape_derivative = wg.jvp(tape_f, (x.copy(),), (tangent,))
    assert out == pytest.approx(tape_out, rel=1e-13, abs=1e-13)
    assert derivative == pytest.approx(tape_derivative, rel=1e-12, abs=1e-12)
    # float32 rounds the tangent in forward mode, the cotangent in reverse: the two differ by that
    loose = 1e-6 if "float32" in name else 1e-12
    assert derivative == pytest.approx(float(want @ tangent), rel=loose, abs=loose)


def test_conversions_against_finite_differences():
    for name in sorted(CONVERTING):
        numpy_f, _, source_grad, _, compiled = _compiled(name)
        eps = 1e-3 if "float32" in name else 1e-6
        tol = 1e-3 if "float32" in name else 1e-6
        want = finite_differences(numpy_f, XC.copy(), eps=eps)
        np.testing.assert_allclose(source_grad(XC.copy()), want, rtol=tol, atol=tol, err_msg=name)
        np.testing.assert_allclose(compiled.grad()(XC.copy()), want, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("body, error, message", [
    ("y = np.array([x[0], x[1]], copy=False)\n    return np.sum(y)", ValueError, "copy"),
    ("y = np.array(x, dtype=np.float32, copy=False)\n    return np.sum(y)", ValueError, "copy"),
    ("return np.sum(np.array([x, x[:2]]))", ValueError, "inhomogeneous"),
    ("a = np.sum(x)\n    return np.sum(np.array([a, x]))", ValueError, "inhomogeneous"),
])
def test_numpys_refusals_stand(body, error, message):
    """What NumPy refuses (a copy that copy=False forbids, a ragged list) is refused with NumPy's error."""
    numpy_f, _ = _pair(body)
    with pytest.raises(error, match=message):
        numpy_f(XC.copy())
    with pytest.raises(error, match=message):
        wg.source_grad(numpy_f)(XC.copy())


@pytest.mark.parametrize("body", [
    "m = np.outer(x, x)\n    f = np.asarray(m.T)\n    f[0, 1] = 0.0\n    return np.sum(f * 2.0) + np.sum(m)",
    "m = np.outer(x, x)\n    f = np.asarray(m, order='F')\n    f[0, 0] = 0.0\n"
    "    return np.sum(f) + np.sum(m)",
    "m = np.array(x, ndmin=2, copy=None)\n    m[0, 0] = 5.0\n    return np.sum(m) + np.sum(x * x)",
    "a = (x * 2.0)[1:2].reshape(())\n    b = np.ascontiguousarray(a)\n    b[0] = 5.0\n"
    "    return a * x[0] + b[0]",
    "v = x[1:]\n    w = np.asarray(v)\n    x[2] = 0.0\n    return np.sum(w * w)",
    "y = np.asarray(x)\n    x += 1.0\n    return np.sum(y * x)",
])
def test_a_write_through_a_conversion_that_numpy_aliases_is_refused(body):
    """NumPy's result shares memory here (a view of a transpose, ndmin, a 0-d array made 1-d): the write
    changes both names in NumPy; the source front end and wg.compile refuse, naming both."""
    numpy_f, _ = _pair(body)
    with pytest.raises(wg.TransformError, match="in-place write into '[a-z]', while '[a-z]'"):
        wg.source_grad(numpy_f)(XC.copy())
    with pytest.raises(Exception, match="in-place write into '[a-z]', while '[a-z]'"):
        wg.compile(numpy_f)(XC.copy())


# -- the banded Hessian (program/band_values.py) ----------------------------------------------------


def test_a_banded_hessians_zero_signs_are_the_tapes():
    """The compiled banded Hessian adds each diagonal's terms onto +0.0, as the dense program sums them:
    a -0.0 term (an input element 0: ``-sin(0) * x0 ** 2``) gives the tape's +0.0 (it wrote -0.0)."""
    import wengert.numpy as wnp

    def sine_chain(x):
        return wnp.sum(wnp.sin(x[:-1] * x[1:]))

    x = np.random.default_rng(5).uniform(-1.5, 1.5, 12) * 1.1
    x[1] = 0.0
    got, want = wg.compile(wg.hessian(sine_chain))(x), wg.hessian(sine_chain)(x)
    np.testing.assert_array_equal(got, want)  # the values (0.0 == -0.0)
    assert _bits(got) == _bits(want)  # the signs of zeros too
