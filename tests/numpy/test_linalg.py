"""wengert.numpy.linalg: values against NumPy, NumPy's errors, the documented edge cases, complex
inputs (first order), and plain ``np.linalg`` calls on traced values."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
import wengert.numpy.linalg as wla
from tests.support.complex_helpers import realified
from wengert.rules import determinant as dt
from wengert.rules import linalg as la
from wengert.rules import matrix_helpers as mh
from wengert.testing import check_grads

rng = np.random.default_rng(11)


def W(*shape, complex_=False):
    a = np.eye(*shape[-2:]) * shape[-1] + 0.5 * rng.standard_normal(shape)
    return a + 0.5j * rng.standard_normal(shape) if complex_ else a


A = W(3, 3)
TALL = rng.standard_normal((5, 3))
WIDE = rng.standard_normal((2, 4))
STACK = W(2, 3, 3)
SYM = A + A.T
SPD = A @ A.T + np.eye(3)
T6 = W(6, 6).reshape(2, 3, 6)
T4 = W(4, 4).reshape(2, 2, 2, 2)
CSTACK = W(3, 3, complex_=True)

VALUE_CASES = [
    ("inv", lambda m: m.inv(STACK), None),
    ("solve vector", lambda m: m.solve(A, np.arange(3.0)), None),
    ("solve stacked", lambda m: m.solve(STACK, TALL[:3, :2]), None),
    ("det", lambda m: m.det(STACK), None),
    ("slogdet", lambda m: m.slogdet(-A), None),
    ("cholesky", lambda m: m.cholesky(SPD), None),
    ("cholesky upper", lambda m: m.cholesky(np.triu(SPD) + 5.0 * np.tril(np.ones((3, 3)), -1), upper=True),
     None),
    ("eigh", lambda m: m.eigh(A), None),
    ("eigh U", lambda m: m.eigh(A, UPLO="U"), None),
    ("eigvalsh", lambda m: m.eigvalsh(STACK, "u"), None),
    ("eigvals", lambda m: m.eigvals(A), None),
    ("eig", lambda m: m.eig(A), None),
    ("svd full", lambda m: m.svd(TALL), None),
    ("svd reduced", lambda m: m.svd(WIDE, full_matrices=False), None),
    ("svd values", lambda m: m.svd(STACK, compute_uv=False), None),
    ("svd hermitian", lambda m: m.svd(SYM - 4 * np.eye(3), hermitian=True), None),
    ("svd hermitian values", lambda m: m.svd(np.stack([SYM, -SYM]), compute_uv=False, hermitian=True), None),
    ("svdvals", lambda m: m.svdvals(TALL), None),
    ("qr", lambda m: m.qr(TALL), None),
    ("qr complete", lambda m: m.qr(TALL, mode="complete"), None),
    ("qr r", lambda m: m.qr(TALL, mode="r"), None),
    ("qr wide", lambda m: m.qr(WIDE), None),
    ("qr stacked", lambda m: m.qr(STACK), None),
    ("pinv", lambda m: m.pinv(TALL), None),
    ("pinv rcond", lambda m: m.pinv(np.outer(TALL[:, 0], TALL[:, 1]), rcond=1e-8), None),
    ("pinv rtol", lambda m: m.pinv(WIDE, rtol=1e-3), None),
    ("matrix_power", lambda m: [m.matrix_power(A, k) for k in range(-3, 6)], None),
    ("lstsq tall", lambda m: m.lstsq(TALL, np.arange(5.0)), None),
    ("lstsq matrix", lambda m: m.lstsq(TALL, TALL[:, :2] + 1.0), None),
    ("lstsq wide", lambda m: m.lstsq(WIDE, np.ones(2)), None),
    ("cond", lambda m: [m.cond(A, p) for p in (None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc")], None),
    ("multi_dot", lambda m: m.multi_dot([np.ones(3), A, TALL.T, np.ones(5)]), None),
    ("matrix_transpose", lambda m: m.matrix_transpose(STACK), None),
    ("tensorinv", lambda m: m.tensorinv(A.reshape(3, 3, 1), 1), None),
    ("matrix_rank", lambda m: m.matrix_rank(np.outer(TALL[:, 0], TALL[:, 1])), None),
    ("tensorsolve", lambda m: m.tensorsolve(T6, np.arange(6.0).reshape(2, 3)), None),
    ("tensorsolve axes", lambda m: m.tensorsolve(T4, np.ones((2, 2)), axes=(0,)), None),
    ("outer", lambda m: m.outer(np.arange(3.0), TALL[0]), None),
    ("vecdot", lambda m: m.vecdot(STACK, CSTACK, axis=1), None),
    ("vecdot complex", lambda m: m.vecdot(CSTACK, STACK), None),
    ("diagonal", lambda m: [m.diagonal(STACK, offset=k) for k in (-3, -1, 0, 2)], None),
    ("diagonal wide", lambda m: m.diagonal(WIDE, offset=1), None),
    ("trace", lambda m: [m.trace(STACK, offset=k) for k in (-1, 0, 1)], None),
    ("cross", lambda m: m.cross(TALL[:, :3], TALL[::-1, :3]), None),
    ("cross axis", lambda m: m.cross(TALL[:3, :2], TALL[2:, :2], axis=0), None),
]


def _compare(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _compare(o, t)
    else:
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name,call,_", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_match_numpy(name, call, _):
    _compare(call(wla), call(np.linalg))


NORM_ARGS = [(ord_, None) for ord_ in (None, 0, 1, -1, 2, -2, 3, 0.5, np.inf, -np.inf)]
MATRIX_ORDS = (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)


@pytest.mark.parametrize("keepdims", [False, True])
def test_norm_values_match_numpy_for_every_ord(keepdims):
    x = rng.standard_normal((3, 4, 2))
    for ord_ in (None, 0, 1, -1, 2, -2, 3, 0.5, np.inf, -np.inf):
        for axis in (0, -1, 1):
            _compare(wla.norm(x, ord_, axis, keepdims), np.linalg.norm(x, ord_, axis, keepdims))
        _compare(wla.norm(x[0, :, 0], ord_, None, keepdims), np.linalg.norm(x[0, :, 0], ord_, None, keepdims))
    for ord_ in MATRIX_ORDS:
        for axis in ((0, 1), (2, 0), (-1, -2)):
            _compare(wla.norm(x, ord_, axis, keepdims), np.linalg.norm(x, ord_, axis, keepdims))
        _compare(wla.norm(x[0], ord_, None, keepdims), np.linalg.norm(x[0], ord_, None, keepdims))
    _compare(wla.norm(x, keepdims=keepdims), np.linalg.norm(x, keepdims=keepdims))
    _compare(wla.vector_norm(x, axis=(0, 2), ord=3, keepdims=keepdims),
             np.linalg.vector_norm(x, axis=(0, 2), ord=3, keepdims=keepdims))
    _compare(wla.vector_norm(x, keepdims=keepdims), np.linalg.vector_norm(x, keepdims=keepdims))
    _compare(wla.matrix_norm(x, ord="nuc", keepdims=keepdims),
             np.linalg.matrix_norm(x, ord="nuc", keepdims=keepdims))
    _compare(wla.norm(np.arange(4), 1), np.linalg.norm(np.arange(4), 1))


def _same_error(call):
    with pytest.raises(Exception) as theirs:
        call(np.linalg)
    with pytest.raises(type(theirs.value)) as ours:
        call(wla)
    assert str(theirs.value) in str(ours.value)


@pytest.mark.parametrize("call", [
    lambda m: m.eigh(A, UPLO="X"),
    lambda m: m.eigvalsh(A, UPLO="lower"),
    lambda m: m.norm(np.ones(3), ord="fro"),
    lambda m: m.norm(np.ones(3), ord="nonsense"),
    lambda m: m.norm(np.ones((2, 2)), ord=3),
    lambda m: m.norm(np.ones((2, 2)), ord="x"),
    lambda m: m.norm(np.ones((2, 2, 2)), ord=2),
    lambda m: m.norm(np.ones((2, 2)), axis=(0, 1, 1)),
    lambda m: m.norm(np.ones(3), axis=2),
    lambda m: m.qr(A, mode="economic-ish"),
    lambda m: m.matrix_power(A, 1.5),
    lambda m: m.matrix_power(TALL, 2),
    lambda m: m.inv(np.ones(3)),
    lambda m: m.inv(TALL),
    lambda m: m.inv(np.ones((2, 2))),
    lambda m: m.pinv(A, rcond=1e-3, rtol=1e-3),
    lambda m: m.lstsq(np.ones((2, 2, 2)), np.ones(2)),
    lambda m: m.multi_dot([A]),
    lambda m: m.outer(A, np.ones(3)),
    lambda m: m.cross(np.ones(2), np.ones(3)),
    lambda m: m.tensorsolve(np.ones((2, 3)), np.ones(2)),
    lambda m: m.diagonal(np.ones(3)),
], ids=["eigh-UPLO", "eigvalsh-UPLO", "norm-fro-vector", "norm-vector-str", "norm-matrix-3",
        "norm-matrix-str", "norm-3d", "norm-3-axes", "norm-axis", "qr-mode", "matrix_power-float",
        "matrix_power-nonsquare", "inv-1d", "inv-nonsquare", "inv-singular", "pinv-rtol-rcond",
        "lstsq-3d", "multi_dot-one", "outer-2d", "cross-2", "tensorsolve-shapes", "diagonal-1d"])
def test_bad_arguments_raise_numpys_errors(call):
    _same_error(call)


def test_plain_numpy_linalg_and_fft_calls_dispatch():
    def plain(a):
        return np.sum(np.linalg.inv(a)) + np.linalg.norm(a, "nuc") + np.linalg.slogdet(a)[1] \
            + np.sum(np.linalg.eigvalsh(a + a.T))

    def ours(a):
        return wnp.sum(wla.inv(a)) + wla.norm(a, "nuc") + wla.slogdet(a)[1] + wnp.sum(wla.eigvalsh(a + a.T))

    np.testing.assert_allclose(wg.grad(plain)(A), wg.grad(ours)(A), rtol=1e-12)
    check_grads(plain, A, order=1)
    check_grads(lambda x: np.fft.irfft(np.fft.rfft(x) * np.arange(3.0), n=5), rng.standard_normal(5))


def test_eigh_vectors_at_repeated_eigenvalues_raise_and_values_do_not():
    a = np.diag([1.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="eigenvalues repeat"):
        wg.grad(lambda x: wnp.sum(wla.eigh(x).eigenvectors[:, 2] ** 2))(a)
    # sum of eigenvalues = trace, whatever the multiplicities: gradient I
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(wla.eigvalsh(x)))(np.eye(3)), np.eye(3))


def test_forward_mode_gives_nan_vector_tangents_at_repeated_values():
    # forward mode computes every result's tangent: the vectors' are NaN, the values' finite
    # (their sum is the trace's derivative, whatever the multiplicities)
    _, (tw, tv) = wg.jvp(lambda x: tuple(wla.eigh(x)), (np.eye(3),), (SYM,))
    np.testing.assert_allclose(np.sum(tw), np.trace(SYM))
    assert np.all(np.isnan(tv))
    _, ts = wg.jvp(lambda x: wla.svd(x).S, (np.eye(3),), (np.diag([1.0, 2.0, 3.0]),))
    np.testing.assert_allclose(np.sum(ts), 6.0)


def test_svd_vectors_at_repeated_singular_values_raise():
    with pytest.raises(ValueError, match="singular values repeat"):
        wg.grad(lambda x: wnp.sum(wla.svd(x, full_matrices=False).U))(np.eye(3))
    with pytest.raises(ValueError, match="rank-deficient"):
        wg.grad(lambda x: wnp.sum(wla.svd(x).Vh))(np.diag([2.0, 1.0, 0.0]))


def test_full_svd_of_non_square_matrix():
    # a result that uses the extra columns of U has no derivative: an error, never a silent value
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        wg.grad(lambda x: wnp.sum(wla.svd(x).U))(TALL)
    # the first columns and the values are fine, in both modes
    check_grads(lambda x: wla.svd(x).U[:, :3] * wla.svd(x).S, TALL, order=1)
    # forward mode marks the extra columns' tangents NaN
    _, tangent = wg.jvp(lambda x: wla.svd(x).U, (TALL,), (np.ones_like(TALL),))
    assert np.all(np.isfinite(tangent[:, :3])) and np.all(np.isnan(tangent[:, 3:]))


def test_eigh_and_cholesky_read_one_triangle_like_numpy():
    a = rng.standard_normal((3, 3))
    g = wg.grad(lambda x: wnp.sum(wla.eigvalsh(x) ** 3))(a)
    assert np.all(np.triu(g, 1) == 0)  # NumPy never reads the upper triangle
    g = wg.grad(lambda x: wnp.sum(wla.eigvalsh(x, UPLO="U") ** 3))(a)
    assert np.all(np.tril(g, -1) == 0)
    g = wg.grad(lambda x: wnp.sum(wla.cholesky(x)))(SPD)
    assert np.all(np.triu(g, 1) == 0)


def test_det_gradient_is_cofactor_matrix():
    # independent formula: d det(A) / dA = det(A) inv(A)^T
    np.testing.assert_allclose(wg.grad(wla.det)(A), np.linalg.det(A) * np.linalg.inv(A).T, rtol=1e-12)


def _hermitian(f):
    return lambda x: f(x + mh.adjoint(x))


COMPLEX_CASES = [
    ("inv", la.inv, (W(3, 3, complex_=True),)),
    ("solve", la.solve, (W(3, 3, complex_=True), rng.standard_normal((3, 2)) + 1j)),
    ("solve real a", la.solve, (A, rng.standard_normal((3, 2)) + 1j)),
    ("det", dt.det, (W(3, 3, complex_=True),)),
    ("slogdet logabs", dt.slogdet_logabs, (W(3, 3, complex_=True),)),
    ("slogdet sign", dt.slogdet_sign, (W(3, 3, complex_=True),)),
    ("cholesky", _hermitian(la.cholesky), (W(3, 3, complex_=True),)),
    ("eigh values", _hermitian(la.eigh_values), (W(3, 3, complex_=True),)),
    ("eigvals of real matrix", la.eigvals, (np.array([[1.0, 2.0, 0.0], [-2.0, 1.5, 0.3], [0.1, 0.0, 3.0]]),)),
    ("eigvals", la.eigvals, (W(3, 3, complex_=True),)),
    ("svd values", la.svd_values, (W(3, 2, complex_=True),)),
    ("qr q", la.qr_q, (W(4, 3, complex_=True),)),
    ("qr r", la.qr_r, (W(3, 3, complex_=True),)),
    ("pinv", la.pinv, (W(2, 3, complex_=True),)),
    ("norm", wla.norm, (W(2, 3, complex_=True),)),
    ("norm nuc", lambda a: wla.norm(a, "nuc"), (W(3, 2, complex_=True),)),
    ("norm 3 axis", lambda a: wla.norm(a, 3, axis=0), (W(3, 2, complex_=True),)),
    ("norm inf", lambda a: wla.norm(a, np.inf), (W(2, 2, complex_=True),)),
    ("vecdot", wla.vecdot, (W(2, 3, complex_=True), W(3, 3, complex_=True)[0])),
    ("cross", wla.cross, (W(2, 3, complex_=True), W(3, 3, complex_=True)[1])),
]


def test_complex_norm_values_match_numpy():
    z = W(3, 4, complex_=True)
    for ord_ in (None, 1, -1, 2, -2, np.inf, -np.inf, "fro", "nuc"):
        _compare(wla.norm(z, ord_), np.linalg.norm(z, ord_))
    for ord_ in (None, 0, 1, 2, 3, np.inf):
        _compare(wla.norm(z, ord_, axis=1), np.linalg.norm(z, ord_, axis=1))


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("name,fun,args", COMPLEX_CASES, ids=[c[0] for c in COMPLEX_CASES])
def test_complex_matrices(name, fun, args, order):
    """Complex matrices in both modes, through their real and imaginary parts (no convention)."""
    g, real_args = realified(fun, *args)
    check_grads(g, *real_args, order=order)


def test_an_array_changed_in_place_is_decomposed_again():
    # the decompositions are shared by their primitives and rules (one LAPACK call), keyed by contents
    a = rng.standard_normal((4, 3))
    first = wg.grad(lambda x: wnp.sum(wla.svd(x, full_matrices=False).U[:, 0] ** 3))(a)
    a[0, 0] += 1.0
    second = wg.grad(lambda x: wnp.sum(wla.svd(x, full_matrices=False).U[:, 0] ** 3))(a)
    fresh = wg.grad(lambda x: wnp.sum(wla.svd(x, full_matrices=False).U[:, 0] ** 3))(a.copy())
    np.testing.assert_allclose(second, fresh, rtol=1e-12)
    assert not np.allclose(first, second)
    s = wg.grad(lambda x: wnp.sum(wla.eigh(x).eigenvalues * np.arange(3.0)))(SYM)
    SYM2 = SYM.copy()
    SYM2[1, 0] += 0.5
    s2 = wg.grad(lambda x: wnp.sum(wla.eigh(x).eigenvalues * np.arange(3.0)))(SYM2)
    v = np.linalg.eigh(SYM2)[1]
    np.testing.assert_allclose(np.tril(s2), np.tril(2 * (v * np.arange(3.0)) @ v.T - np.diag(np.diag(
        (v * np.arange(3.0)) @ v.T))), rtol=1e-10, atol=1e-12)
    assert not np.allclose(s, s2)


# -- singular and defective matrices: exact derivatives where they exist, clear refusals elsewhere ---


@pytest.fixture
def jax64():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", False)


def _rank(n, r, seed):
    g = np.random.default_rng(seed)
    return g.uniform(-1, 1, (n, r)) @ g.uniform(-1, 1, (r, n))


def _cofactors(a):
    """The cofactor matrix (adj(a)^T) from minors: an independent polynomial oracle."""
    n = a.shape[0]
    c = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            c[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return c


def _cofactor_jacobian(a, h=1e-4):
    """d cofactors / d a by central differences (exact to O(h^2) for this polynomial)."""
    n = a.shape[0]
    jac = np.empty((n, n, n, n))
    for k in range(n):
        for m in range(n):
            e = np.zeros_like(a)
            e[k, m] = h
            jac[:, :, k, m] = (_cofactors(a + e) - _cofactors(a - e)) / (2 * h)
    return jac


SINGULAR_CASES = [
    pytest.param(_rank(3, 2, 1), id="3x3 rank 2"), pytest.param(_rank(4, 2, 2), id="4x4 rank 2"),
    pytest.param(_rank(3, 1, 3), id="3x3 rank 1"), pytest.param(np.zeros((2, 2)), id="zero 2x2"),
    pytest.param(np.diag([1.0, 0.0, 0.0]), id="diag(1, 0, 0)"),
]


@pytest.mark.parametrize("a", SINGULAR_CASES)
def test_det_derivatives_at_singular_matrices_are_the_adjugate_and_its_derivative(a):
    np.testing.assert_allclose(wg.grad(wla.det)(a), _cofactors(a), atol=1e-12)
    hess = _cofactor_jacobian(a)
    np.testing.assert_allclose(wg.jacfwd(wg.grad(wla.det))(a), hess, atol=1e-8)
    np.testing.assert_allclose(wg.jacrev(wg.grad(wla.det))(a), hess, atol=1e-8)
    e = rng.standard_normal(a.shape)
    _, tangent = wg.jvp(wla.det, (a,), (e,))
    np.testing.assert_allclose(tangent, np.sum(_cofactors(a) * e), atol=1e-12)


@pytest.mark.parametrize("a", SINGULAR_CASES[:3])
def test_det_at_singular_matrices_agrees_with_jax(jax64, a):
    jnp = jax64.numpy
    np.testing.assert_allclose(wg.grad(wla.det)(a), jax64.grad(jnp.linalg.det)(a), atol=1e-10)


def test_det_hessian_at_rank_n_minus_1_agrees_with_jax(jax64):
    a = _rank(3, 2, 1)
    np.testing.assert_allclose(wg.jacfwd(wg.grad(wla.det))(a), jax64.hessian(jax64.numpy.linalg.det)(a),
                               atol=1e-10)


def test_det_third_derivative_at_a_singular_matrix_is_refused_by_name():
    a, e = _rank(3, 2, 1), rng.standard_normal((3, 3))
    third = wg.jacfwd(wg.jacfwd(lambda x: wg.jvp(wla.det, (x,), (e,))[1]))
    with pytest.raises(la.SingularDerivativeError, match=r"det: the third derivative .* singular 3x3"):
        third(a)
    with pytest.raises(np.linalg.LinAlgError):  # the error is a LinAlgError too
        third(a)
    check_grads(lambda x: wg.jvp(wla.det, (x,), (e,))[1], W(3, 3), order=2)  # invertible: fine


def test_singular_det_errors_do_not_name_inv():
    a = _rank(3, 2, 1)
    g = wg.grad(lambda x: wla.det(x) ** 2)(a)  # once raised "Singular matrix" from linalg.inv
    np.testing.assert_allclose(g, 0.0, atol=1e-12)


def test_slogdet_at_a_singular_matrix_follows_jax(jax64):
    jnp = jax64.numpy
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    sign, logabs = wla.slogdet(a)
    assert sign == 0 and logabs == -np.inf
    sign_j, logabs_j = jnp.linalg.slogdet(a)
    assert sign_j == 0 and logabs_j == -np.inf
    with np.errstate(invalid="ignore"):
        g = wg.grad(lambda x: wla.slogdet(x)[1])(a)
        _, t = wg.jvp(lambda x: wla.slogdet(x)[1], (a,), (np.ones((3, 3)),))
        gz = wg.grad(lambda x: wla.slogdet(x)[1])(np.zeros((3, 3)))
    g_jax = np.asarray(jax64.grad(lambda x: jnp.linalg.slogdet(x)[1])(a))
    assert not np.any(np.isfinite(g)) and not np.any(np.isfinite(g_jax))  # inf/nan, no error, as JAX
    np.testing.assert_array_equal(g[:2], g_jax[:2])  # the same infinities where JAX's LU gives them
    _, t_jax = jax64.jvp(lambda x: jnp.linalg.slogdet(x)[1], (a,), (np.ones((3, 3)),))
    assert np.isnan(t) and np.isnan(t_jax)
    assert np.all(np.isnan(gz))
    assert np.all(np.isnan(np.asarray(jax64.grad(lambda x: jnp.linalg.slogdet(x)[1])(np.zeros((3, 3))))))


def test_qr_of_a_rank_deficient_matrix_refuses_a_derivative():
    a = np.array([[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]) + np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    for part in (0, 1):
        with pytest.raises(la.SingularDerivativeError, match=r"qr: the 3x2 matrix .* linearly dependent"):
            wg.grad(lambda x: wnp.sum(wla.qr(x)[part]))(a)
        with pytest.raises(la.SingularDerivativeError, match="qr"):
            wg.jvp(lambda x: wla.qr(x)[part], (a,), (np.ones((3, 2)),))
    check_grads(lambda x: wla.qr(x)[0], a + np.array([[0.0, 0.5], [0.0, 0.0], [0.0, 0.0]]))  # full rank


@pytest.mark.parametrize("a", [np.array([[1.0, 1.0], [0.0, 1.0]]), np.array([[3.0, 1.0], [-1.0, 1.0]]),
                               np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [0.0, 0.0, 2.0]]),
                               np.array([[0.0, 1.0], [0.0, 0.0]])],
                         ids=["jordan", "defective 2", "jordan 3", "nilpotent"])
def test_eig_of_a_defective_matrix_refuses_a_derivative(a):
    with pytest.raises(la.SingularDerivativeError, match=r"eig.*defective"):
        wg.grad(lambda x: wnp.sum(wnp.real(wla.eigvals(x))))(a)
    with pytest.raises(la.SingularDerivativeError, match=r"eig.*defective"):
        wg.jvp(wla.eigvals, (a,), (np.ones(a.shape),))
    with pytest.raises(la.SingularDerivativeError, match=r"eig.*defective"):
        wg.grad(lambda x: wnp.sum(wnp.real(wla.eig(x).eigenvectors)))(a)


def test_eig_of_an_ill_conditioned_but_not_defective_matrix_is_differentiated():
    check_grads(wla.eigvals, np.array([[1.0, 1e3], [0.0, 2.0]]), order=1, rtol=1e-4)
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(wla.eigvals(x)))(np.eye(2)), np.eye(2))


def test_every_linalg_rule_names_the_user_function_on_a_linalg_error():
    from wengert.core.primitive import Primitive
    from wengert.rules import determinant, linalg

    for module in (linalg, determinant):
        for value in vars(module).values():
            if isinstance(value, Primitive):
                rules = [r for r in value.vjps + value.jvps if r is not None]
                assert rules and all(getattr(r, "names_singular_errors", False) for r in rules), value


def test_a_linalg_error_inside_a_rule_names_the_function_and_shape(monkeypatch):
    def broken(*args, **kwargs):
        raise np.linalg.LinAlgError("Singular matrix")

    monkeypatch.setattr(la.solve, "fun", broken)
    with pytest.raises(la.SingularDerivativeError, match=r"cholesky: .*shape \(3, 3\).*Singular matrix"):
        wg.grad(lambda x: wnp.sum(wla.cholesky(x)))(SPD)


@pytest.mark.filterwarnings("ignore:Matrix is singular")  # SciPy's own warning for the value
def test_sqrtm_at_a_singular_matrix_refuses_a_derivative():
    wsl = pytest.importorskip("wengert.scipy.linalg")
    for a in (np.diag([4.0, 0.0]), np.ones((2, 2)), np.zeros((2, 2))):
        with pytest.raises(la.SingularDerivativeError, match=r"sqrtm: the 2x2 .* singular"):
            wg.grad(lambda x: wnp.sum(wsl.sqrtm(x)))(a)
    check_grads(wsl.sqrtm, np.diag([4.0, 1.0]) + 0.1, order=1)


def test_pinv_and_lstsq_of_rank_deficient_matrices_follow_jax(jax64):
    """The derivative along matrices of the same rank (NumPy's pinv jumps where the rank changes):
    JAX's and PyTorch's convention, documented in wengert.rules.linalg."""
    jnp = jax64.numpy
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    b = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(wla.pinv(x) ** 2))(a),
                               jax64.grad(lambda x: jnp.sum(jnp.linalg.pinv(x) ** 2))(a), atol=1e-12)
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(wla.lstsq(x, b)[0]))(a),
                               jax64.grad(lambda x: jnp.sum(jnp.linalg.lstsq(x, b)[0]))(a), atol=1e-12)


def test_matrix_power_with_negative_powers_agrees_with_jax(jax64):
    jnp = jax64.numpy
    for n in (-1, -2, -3):
        want = jax64.grad(lambda x: jnp.sum(jnp.linalg.matrix_power(x, n)))(A)
        np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(wla.matrix_power(x, n)))(A), want, rtol=1e-10)


@pytest.mark.parametrize("name,fun", [
    ("qr", lambda x: wnp.sum(wla.qr(x).Q) + wnp.sum(wla.qr(x).R)),
    ("eigvalsh", lambda x: wnp.sum(wla.eigvalsh(x) ** 2)),
    ("cholesky", lambda x: wnp.sum(wla.cholesky(x))),
    ("det", wla.det), ("svdvals", lambda x: wnp.sum(wla.svdvals(x))),
    ("slogdet", lambda x: wla.slogdet(x)[1]), ("inv", lambda x: wnp.sum(wla.inv(x))),
])
def test_float32_gradients_and_tangents_of_public_linalg_stay_float32(name, fun):
    x = SPD.astype(np.float32)
    assert wg.grad(fun)(x).dtype == np.float32
    value, tangent = wg.jvp(fun, (x,), (np.ones((3, 3), np.float32),))
    assert np.result_type(value) == np.float32 and np.result_type(tangent) == np.float32
