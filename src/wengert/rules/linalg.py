"""Linear algebra primitives (``numpy.linalg``): one array out each, stacked matrices allowed.

A decomposition with several results is several primitives (``eigh_values``/``eigh_vectors``,
``svd_values``/``svd_u``/``svd_vh``, ``qr_q``/``qr_r``); each rule asks for the other factors
through those primitives, so the rules are differentiable again. Complex matrices follow HIPS
autograd's and JAX's convention (``wengert.rules.complex``): the VJP of ``X -> A X`` is ``A^T g``. The
rules of holomorphic functions are written so; the others are derived with the adjoint ``A^H`` and
converted by ``cplx.transposed``.

Documented choices: ``cholesky`` and ``eigh`` read one triangle of their argument, as LAPACK and
NumPy do, so their derivatives are those of that function (nothing flows to the other triangle); the
derivative of eigenvectors and singular vectors is undefined where eigen/singular values repeat:
asking for it there in reverse mode raises ``ValueError``, and forward mode (which computes every
result's tangent) gives NaN tangents. The extra columns of a full ``U`` or ``Q`` (rows of ``Vh``) of
a non-square matrix are not unique: their tangents are NaN, and a cotangent reaching them raises
``NotImplementedError`` (a zero one there is fine). Complex eigen and singular vectors (also
``eig``'s of a real matrix) are unique only up to a phase per column: their derivatives hold for
phase-invariant functions (as in JAX and PyTorch). ``pinv``'s derivative assumes the rank stays
constant (and, with ``hermitian=True``, a Hermitian input, as NumPy's values do): at a
rank-deficient matrix it is the derivative along matrices of that rank, as in JAX and PyTorch.

Where a derivative does not exist or is not unique -- ``qr`` of a matrix with dependent columns,
``eig`` of a defective matrix -- the rules raise :class:`SingularDerivativeError` (a
``LinAlgError``) naming the NumPy function and the shape; any ``LinAlgError`` from a solve inside a
rule is re-raised so too (:func:`name_singular_errors`). ``det`` and ``slogdet`` live in
``wengert.rules.determinant`` (derivatives through the adjugate, exact at singular matrices).
Constants a rule mixes in (identity, triangle masks) take the argument's dtype: float32 stays
float32.
"""

import numpy as np

from wengert.core.errors import TracingError
from wengert.core.extend import defbatch, defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.core.trace import is_symbolic, unbox_all
from wengert.rules import broadcasting, indexing, products, shape
from wengert.rules import matrix_helpers as mh
from wengert.rules.complex import conj_of, is_complex, real_like, real_of, transposed
from wengert.rules.matrix_helpers import (
    SingularDerivativeError,
    UndefinedDerivativeError,
    adjoint,
    mT,
    name_singular_errors,
)

__all__ = ["inv", "solve", "cholesky", "eigh_values", "eigh_vectors", "eigvals", "eig_vectors",
           "svd_values", "svd_u", "svd_vh", "qr_q", "qr_r", "pinv", "SingularDerivativeError",
           "name_singular_errors"]

matmul = products.matmul
_shape = broadcasting.shape_of


# -- helpers that solve ----------------------------------------------------------------------------

def _right_solve(z, r):
    """``z @ inv(r)``, through a solve."""
    return adjoint(solve(adjoint(r), adjoint(z)))



# -- inv, solve, det, slogdet ---------------------------------------------------------------------


def _inv_impl(a):
    """numpy.linalg.inv."""
    return np.linalg.inv(a)


inv = Primitive(_inv_impl, name="linalg.inv")
defvjp(inv, lambda g, out, a: -matmul(matmul(mT(out), g), mT(out)))
defjvp(inv, lambda t, out, a: -matmul(matmul(out, t), out))


def _solve_impl(a, b):
    """numpy.linalg.solve with ``b`` a stack of matrices (..., M, K)."""
    return np.linalg.solve(a, b)


def _solve_vjp_a(g, out, a, b):
    return real_like(-matmul(solve(mT(a), g), mT(out)), a)


def _solve_vjp_b(g, out, a, b):
    return real_like(solve(mT(a), g), b)


solve = Primitive(_solve_impl, name="linalg.solve", grad_post=broadcasting.unbroadcast,
                  tangent_post=broadcasting.broadcast_tangent)
defvjp(solve, _solve_vjp_a, _solve_vjp_b)
defjvp(solve, lambda t, out, a, b: -solve(a, matmul(t, out)), lambda t, out, a, b: solve(a, t))


# -- cholesky ---------------------------------------------------------------------------------------


def _cholesky_vjp(g, out, a):
    y = matmul(adjoint(out), g) * mh.triangle_mask(mh.size_of(out), "L", out)
    w = solve(adjoint(out), y)
    return real_like(mh.to_triangle(_right_solve(w, out), "L"), a)


def _cholesky_jvp(t, out, a):
    x = _right_solve(solve(out, mh.hermitian_from(t, "L")), adjoint(out))
    return matmul(out, x * mh.triangle_mask(mh.size_of(out), "L", out))


def _cholesky_impl(a):
    """numpy.linalg.cholesky: the lower factor, from ``a``'s lower triangle. Another library's factor
    is made lower whatever its convention (Dask's ``np.linalg.cholesky`` returns the upper one)."""
    if type(a) is np.ndarray or not hasattr(type(a), "__array_function__"):
        return np.linalg.cholesky(a)
    c = np.linalg.cholesky(np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2).conj())
    return np.tril(c) + np.swapaxes(np.triu(c, 1), -1, -2).conj()


cholesky = Primitive(_cholesky_impl, name="linalg.cholesky")
defvjp(cholesky, transposed(_cholesky_vjp))
defjvp(cholesky, _cholesky_jvp)


# -- eigh -------------------------------------------------------------------------------------------


def _eigh_values_vjp(g, out, a, UPLO="L"):
    v = eigh_vectors(a, UPLO)
    return real_like(mh.to_triangle(matmul(v * mh.row(g), adjoint(v)), UPLO), a)


def _eigh_values_jvp(t, out, a, UPLO="L"):
    v = eigh_vectors(a, UPLO)
    return real_of(mh.diag_part(matmul(adjoint(v), matmul(mh.hermitian_from(t, UPLO), v))))


eigh_values = Primitive(lambda a, UPLO="L": mh.eigh_factors(a, UPLO)[0], name="linalg.eigh_values")
defvjp(eigh_values, transposed(_eigh_values_vjp))
defjvp(eigh_values, _eigh_values_jvp)


def _eigh_vectors_vjp(g, out, a, UPLO="L"):
    f = mh.gaps(eigh_values(a, UPLO), "eigh", None)
    inner = matmul(matmul(out, f * matmul(adjoint(out), g)), adjoint(out))
    return real_like(mh.to_triangle(inner, UPLO), a)


@mh.nan_if_undefined
def _eigh_vectors_jvp(t, out, a, UPLO="L"):
    f = mh.gaps(eigh_values(a, UPLO), "eigh", None)
    return matmul(out, f * matmul(adjoint(out), matmul(mh.hermitian_from(t, UPLO), out)))


eigh_vectors = Primitive(lambda a, UPLO="L": mh.eigh_factors(a, UPLO)[1], name="linalg.eigh_vectors")
defvjp(eigh_vectors, transposed(_eigh_vectors_vjp))
defjvp(eigh_vectors, _eigh_vectors_jvp)


# -- eig (values; the vectors serve the values' rules) ----------------------------------------------


def _check_not_defective(a, what):
    """Refuse at a defective (or numerically defective) matrix: there its eigenvalues and vectors
    have no derivative (they move like the square root of the perturbation), and the rules'
    solve with the nearly singular eigenvector matrix would return large meaningless numbers."""
    if is_symbolic(a):
        return
    raw = unbox_all(a)
    if type(raw) is not np.ndarray:
        return
    w, v = mh.eig_factors(raw)
    n = w.shape[-1]
    if n < 2:
        return
    root_eps = np.sqrt(np.finfo(raw.dtype).eps)
    scale = np.maximum(np.max(np.abs(w), axis=-1), np.max(np.abs(raw), axis=(-2, -1)) * root_eps)
    gaps = np.abs(w[..., :, None] - w[..., None, :]) + np.where(np.eye(n, dtype=bool), np.inf, 0)
    close = np.min(gaps, axis=(-2, -1)) <= 10 * root_eps * scale
    if not np.any(close):
        return
    with np.errstate(all="ignore"):
        cond = np.linalg.cond(v)
    if np.any(close & ~(cond < 0.1 / root_eps)):
        raise SingularDerivativeError(
            f"{what}: the {raw.shape[-2]}x{raw.shape[-1]} matrix (shape {raw.shape}) is defective "
            f"(a repeated eigenvalue without a full set of eigenvectors; the eigenvector matrix has "
            f"condition number {np.max(cond):.3g}), so its eigenvalues and eigenvectors have no "
            f"derivative there. Differentiate a symmetric function of the eigenvalues instead (trace, "
            f"det), or use eigh for a symmetric matrix.")


def _eigvals_vjp(g, out, a):
    _check_not_defective(a, "eig/eigvals")
    v = eig_vectors(a)
    return real_like(solve(mT(v), matmul(mh.diag_embed(g), mT(v))), a)


def _eigvals_jvp(t, out, a):
    _check_not_defective(a, "eig/eigvals")
    v = eig_vectors(a)
    d = mh.diag_part(solve(v, matmul(t, v)))
    return d if is_complex(out) else real_of(d)


eigvals = Primitive(lambda a: mh.eig_factors(a)[0], name="linalg.eigvals")
defvjp(eigvals, _eigvals_vjp)
defjvp(eigvals, _eigvals_jvp)


def _eig_vectors_vjp(g, out, a):
    """Columns have unit norm (NumPy's choice), which fixes the real part of ``v_i^H dv_i``."""
    _check_not_defective(a, "eig")
    f = mh.gaps(eigvals(a), "eig", None)
    g = g - out * mh.row(real_of(mh.diag_part(matmul(adjoint(out), g))))
    c = conj_of(f) * matmul(adjoint(out), g)
    return real_like(solve(adjoint(out), matmul(c, adjoint(out))), a)


@mh.nan_if_undefined
def _eig_vectors_jvp(t, out, a):
    _check_not_defective(a, "eig")
    f = mh.gaps(eigvals(a), "eig", None)
    dv = matmul(out, f * solve(out, matmul(t, out)))
    dv = dv - out * mh.row(real_of(mh.diag_part(matmul(adjoint(out), dv))))
    return dv if is_complex(out) else real_of(dv)


eig_vectors = Primitive(lambda a: mh.eig_factors(a)[1], name="linalg.eig_vectors")
defvjp(eig_vectors, transposed(_eig_vectors_vjp))
defjvp(eig_vectors, _eig_vectors_jvp)


# -- svd --------------------------------------------------------------------------------------------


def _svd_gaps(s):
    sq = s * s
    return mh.row(sq) - mh.col(sq)


def _reduced_svd(a):
    """U, s, Vh (reduced) of ``a``: one LAPACK call for a plain array, else the three primitives
    (so that a rule evaluated on traced values differentiates again)."""
    if type(a) is np.ndarray:
        return tuple(mh.svd_factors(a, False))
    return svd_u(a, False), svd_values(a), svd_vh(a, False)


def _svd_parts(a, what):
    """Reduced U, s, Vh of ``a``, and the gap matrix F; raise where the vectors have no derivative."""
    u, s, vh = _reduced_svd(a)
    f = mh.gaps(s, what, _svd_gaps)
    if is_symbolic(s):  # a traced program cannot check its data (a zero singular value gives inf)
        return u, s, vh, f
    raw = np.asarray(unbox_all(s))
    if np.min(raw, initial=np.inf) <= 1e3 * np.finfo(float).eps * max(np.max(raw, initial=0.0), 1e-300):
        raise UndefinedDerivativeError(
            f"{what}: the derivative of the singular vectors is undefined for a rank-deficient "
            f"matrix (a zero singular value); differentiate the values instead")
    return u, s, vh, f


def _reduced_cotangent(g, k, axis, what):
    """The cotangent of the first ``k`` columns (axis -1) or rows (axis -2) of a full factor.

    The extra columns of a full U or Q (and extra rows of Vh) are not unique, so they have no
    derivative: a cotangent that reaches them is an error; a zero one there is fine."""
    s = _shape(g)
    if s[axis] == k:
        return g
    index = (Ellipsis, slice(None), slice(k, None)) if axis == -1 else (Ellipsis, slice(k, None), slice(None))
    if is_symbolic(g):
        raise TracingError(
            f"{what}: the extra {'columns' if axis == -1 else 'rows'} of a full factor have no derivative, "
            f"and a traced program cannot check that its result does not depend on them (the check is on "
            f"data); use the reduced factorisation (full_matrices=False / mode='reduced'), or differentiate "
            f"with the tape (wg.grad)")
    if np.any(np.asarray(unbox_all(g))[index] != 0):
        raise NotImplementedError(
            f"{what}: the extra {'columns' if axis == -1 else 'rows'} of a full factor (beyond the "
            f"first {k}) are not unique, so they have no derivative, and this result depends on them; "
            f"use the reduced factorisation (full_matrices=False / mode='reduced')")
    keep = (Ellipsis, slice(None), slice(0, k)) if axis == -1 else (Ellipsis, slice(0, k), slice(None))
    return indexing.getitem(g, keep)


def _check_leading(out, reduced, axis, what):
    """A full factor's first columns (rows) must be the reduced factor's: the rules use the latter
    (a LAPACK consistency check, on data: skipped while a program is traced)."""
    if is_symbolic((out, reduced)):
        return
    full, part = np.asarray(unbox_all(out)), np.asarray(unbox_all(reduced))
    k = part.shape[axis]
    lead = full[..., :k] if axis == -1 else full[..., :k, :]
    if not np.allclose(lead, part, rtol=1e-8, atol=1e-10 * max(1.0, np.max(np.abs(part), initial=0.0))):
        raise RuntimeError(f"{what}: LAPACK's full and reduced factors differ in their leading "
                           f"{'columns' if axis == -1 else 'rows'}; use the reduced factorisation")


def _nan_extra(d, size, axis):
    """Tangent ``d`` of the first columns/rows, NaN for the extra ones (they have no derivative)."""
    s = list(_shape(d))
    if s[axis] == size:
        return d
    s[axis] = size - s[axis]
    return shape.concatenate(d, broadcasting.filled_like(d, s, broadcasting.dtype_of(d), np.nan), axis=axis)


def _svd_values_vjp(g, out, a):
    u, _, vh = _reduced_svd(a)
    return real_like(matmul(u * mh.row(g), vh), a)


def _svd_values_jvp(t, out, a):
    u, _, vh = _reduced_svd(a)
    return real_of(mh.diag_part(matmul(adjoint(u), matmul(t, adjoint(vh)))))


svd_values = Primitive(lambda a: mh.svd_factors(a, False)[1], name="linalg.svd_values")
defvjp(svd_values, transposed(_svd_values_vjp))
defjvp(svd_values, _svd_values_jvp)


def _svd_u_vjp(g, out, a, full_matrices=False):
    u, s, vh, f = _svd_parts(a, "svd")
    g = _reduced_cotangent(g, mh.size_of(s), -1, "svd")
    _check_leading(out, u, -1, "svd")
    b = matmul(adjoint(u), g)
    inner = (f * (b - adjoint(b))) * mh.row(s) + mh.imag_diag(b) / mh.row(s)
    return real_like(matmul(matmul(u, inner) + (g - matmul(u, b)) / mh.row(s), vh), a)


@mh.nan_if_undefined
def _svd_u_jvp(t, out, a, full_matrices=False):
    u, s, vh, f = _svd_parts(a, "svd")
    _check_leading(out, u, -1, "svd")
    tv = matmul(t, adjoint(vh))
    dp = matmul(adjoint(u), tv)
    j = f * (dp * mh.row(s) + mh.col(s) * adjoint(dp)) + mh.imag_diag(dp) / mh.row(s)
    return _nan_extra(matmul(u, j) + (tv - matmul(u, dp)) / mh.row(s), _shape(out)[-1], -1)


svd_u = Primitive(lambda a, full_matrices=False: mh.svd_factors(a, full_matrices)[0], name="linalg.svd_u")
defvjp(svd_u, transposed(_svd_u_vjp))
defjvp(svd_u, _svd_u_jvp)


def _svd_vh_vjp(g, out, a, full_matrices=False):
    u, s, vh, f = _svd_parts(a, "svd")
    g = _reduced_cotangent(g, mh.size_of(s), -2, "svd")
    _check_leading(out, vh, -2, "svd")
    gv = adjoint(g)
    b = matmul(vh, gv)
    inner = mh.col(s) * (f * (b - adjoint(b)))
    return real_like(matmul(u, matmul(inner, vh) + (g - matmul(matmul(g, adjoint(vh)), vh)) / mh.col(s)), a)


@mh.nan_if_undefined
def _svd_vh_jvp(t, out, a, full_matrices=False):
    u, s, vh, f = _svd_parts(a, "svd")
    _check_leading(out, vh, -2, "svd")
    th_u = matmul(adjoint(t), u)
    dp = adjoint(matmul(vh, th_u))  # U^H t V
    k = f * (mh.col(s) * dp + adjoint(dp) * mh.row(s))
    dv = matmul(adjoint(vh), k) + (th_u - matmul(adjoint(vh), adjoint(dp))) / mh.row(s)
    return _nan_extra(adjoint(dv), _shape(out)[-2], -2)


svd_vh = Primitive(lambda a, full_matrices=False: mh.svd_factors(a, full_matrices)[2], name="linalg.svd_vh")
defvjp(svd_vh, transposed(_svd_vh_vjp))
defjvp(svd_vh, _svd_vh_jvp)


# -- qr (m >= n; wide matrices are composed in wengert.numpy.linalg) -------------------------------


def _qr_check(a):
    m, n = _shape(a)[-2:]
    if m < n:
        raise NotImplementedError("qr: the primitive takes m >= n; wengert.numpy.linalg.qr "
                                  "handles wide matrices")
    raw = unbox_all(a)
    if is_symbolic(a) or type(raw) is not np.ndarray:
        return
    d = np.abs(np.diagonal(mh.qr_factors(raw, "reduced")[1], axis1=-2, axis2=-1))
    if np.any(np.min(d, axis=-1) <= 10 * m * np.finfo(raw.dtype).eps * np.max(d, axis=-1)):
        raise SingularDerivativeError(
            f"qr: the {m}x{n} matrix (shape {raw.shape}) has linearly dependent columns (rank "
            f"deficient; a zero on R's diagonal), so Q and R are not unique and have no derivative "
            f"there. Differentiate a function that does not depend on the choice of basis (e.g. "
            f"through svd or pinv, whose derivative assumes a constant rank), or perturb the input.")


def _lower_skew(n_mat):
    """``tril(N - N^H, -1)`` plus ``i Im(diag N)``: the adjoint of Q^H dQ's parametrisation."""
    n = mh.size_of(n_mat)
    return (n_mat - adjoint(n_mat)) * mh.tril(n, -1, n_mat) + mh.imag_diag(n_mat)


def _qr_x(t, q, r):
    return _right_solve(matmul(adjoint(q), t), r)


def _omega(x):
    n = mh.size_of(x)
    low = x * mh.tril(n, -1, x)
    return low - adjoint(low) + mh.imag_diag(x)


def _qr_q_vjp(g, out, a, mode="reduced"):
    _qr_check(a)
    r = qr_r(a)
    g = _reduced_cotangent(g, mh.size_of(r), -1, "qr")
    q = qr_q(a) if mode == "complete" else out
    _check_leading(out, q, -1, "qr")
    out = q
    b = matmul(adjoint(out), g)
    z = matmul(out, _lower_skew(b)) + g - matmul(out, b)
    return real_like(_right_solve(z, adjoint(r)), a)


def _qr_q_jvp(t, out, a, mode="reduced"):
    _qr_check(a)
    r = qr_r(a)
    q = qr_q(a) if mode == "complete" else out
    _check_leading(out, q, -1, "qr")
    x = _qr_x(t, q, r)
    d = matmul(q, _omega(x)) + _right_solve(t - matmul(q, matmul(adjoint(q), t)), r)
    return _nan_extra(d, _shape(out)[-1], -1)


qr_q = Primitive(lambda a, mode="reduced": mh.qr_factors(a, mode)[0], name="linalg.qr_q")
defvjp(qr_q, transposed(_qr_q_vjp))
defjvp(qr_q, _qr_q_jvp)


def _qr_r_vjp(g, out, a):
    _qr_check(a)
    q = qr_q(a)
    grh = matmul(g, adjoint(out))
    gx = grh + _lower_skew(-grh)
    return real_like(_right_solve(matmul(q, gx), adjoint(out)), a)


def _qr_r_jvp(t, out, a):
    _qr_check(a)
    q = qr_q(a)
    x = _qr_x(t, q, out)
    return matmul(x - _omega(x), out)


qr_r = Primitive(lambda a: mh.qr_factors(a, "reduced")[1], name="linalg.qr_r")
defvjp(qr_r, transposed(_qr_r_vjp))
defjvp(qr_r, _qr_r_jvp)


# -- pinv -------------------------------------------------------------------------------------------


def _pinv_impl(a, rcond=None, hermitian=False):
    """numpy.linalg.pinv."""
    return np.linalg.pinv(a, rcond=rcond, hermitian=hermitian)


def _pinv_vjp(g, out, a, rcond=None, hermitian=False):
    p, ph, gh = out, adjoint(out), adjoint(g)
    first = -matmul(matmul(ph, g), ph)
    left = matmul(gh, matmul(p, ph))
    second = left - matmul(a, matmul(p, left))  # (I - A P) g^H P P^H
    right = matmul(matmul(ph, p), gh)
    third = right - matmul(matmul(right, p), a)  # P^H P g^H (I - P A)
    return real_like(first + second + third, a)


def _pinv_jvp(t, out, a, rcond=None, hermitian=False):
    p, ph, th = out, adjoint(out), adjoint(t)
    first = -matmul(matmul(p, t), p)
    mid = matmul(matmul(p, ph), th)
    second = mid - matmul(matmul(mid, a), p)  # P P^H t^H (I - A P)
    tail = matmul(th, matmul(ph, p))
    third = tail - matmul(p, matmul(a, tail))  # (I - P A) t^H P^H P
    return first + second + third


pinv = Primitive(_pinv_impl, name="linalg.pinv")
defvjp(pinv, transposed(_pinv_vjp))
defjvp(pinv, _pinv_jvp)


_USER_NAMES = {inv: "inv", solve: "solve", cholesky: "cholesky", eigh_values: "eigh/eigvalsh",
               eigh_vectors: "eigh", eigvals: "eig/eigvals", eig_vectors: "eig", svd_values: "svd/svdvals",
               svd_u: "svd", svd_vh: "svd", qr_q: "qr", qr_r: "qr", pinv: "pinv"}
for _prim, _what in _USER_NAMES.items():
    name_singular_errors(_prim, _what)
del _prim, _what

# -- what each VJP reads (the tape keeps only that: wengert.engines.saving) ------------------------------
# A rule that asks for the other factors (eigh_vectors(a), qr_r(a), _reduced_svd(a)) reads ``a``.
facts(inv, saves=("out",))
facts(solve, saves={0: ("out", 0), 1: (0,)})  # b's rule: b's dtype only
facts(cholesky, saves=("out",))
facts(eigh_values, saves=(0,))
facts(eigh_vectors, saves=("out", 0))
facts(eigvals, saves=(0,))
facts(eig_vectors, saves=("out", 0))
facts(svd_values, saves=(0,))
facts(svd_u, saves=("out", 0))
facts(svd_vh, saves=("out", 0))
facts(qr_q, saves=("out", 0))
facts(qr_r, saves=("out", 0))
facts(pinv, saves=("out", 0))

for _stacked in (inv, solve, cholesky, eigh_values, eigh_vectors, eigvals, eig_vectors, svd_values, svd_u,
                 svd_vh, qr_q, qr_r, pinv):
    defbatch(_stacked, mh.batch_stacked)
