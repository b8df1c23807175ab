"""Linear algebra primitives (``numpy.linalg``): one array out each, stacked matrices allowed.

A decomposition with several results is several primitives (``eigh_values``/``eigh_vectors``,
``svd_values``/``svd_u``/``svd_vh``, ``qr_q``/``qr_r``); each rule asks for the other factors
through those primitives, so the rules are differentiable again. Complex matrices follow HIPS
autograd's and JAX's convention (``wengert.rules.cplx``): the VJP of ``X -> A X`` is ``A^T g``. The
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

import hashlib
import weakref

import numpy as np

from wengert.core.errors import TracingError
from wengert.core.primitive import Primitive, defjvp, defvjp
from wengert.core.trace import is_symbolic, unbox_all
from wengert.rules import broadcasting, indexing, products, reductions, shape
from wengert.rules.cplx import adjoint, conj, is_complex, mT, real, real_like, transposed

__all__ = ["inv", "solve", "cholesky", "eigh_values", "eigh_vectors", "eigvals", "eig_vectors",
           "svd_values", "svd_u", "svd_vh", "qr_q", "qr_r", "pinv", "SingularDerivativeError",
           "name_singular_errors"]

matmul = products.matmul
_shape = broadcasting.shape_of


# -- helpers (wengert functions only, so that the rules differentiate again) -------------------------


class UndefinedDerivativeError(ValueError):
    """Eigen- or singular vectors were differentiated where they have no derivative."""


class SingularDerivativeError(np.linalg.LinAlgError):
    """A linear-algebra derivative does not exist, or is not unique, at this (singular or
    defective) matrix; the message names the NumPy function, the shape, and what to do instead."""


_ADVICE = ("Differentiate at a matrix away from it (e.g. add a small multiple of the identity), "
           "or reformulate with a function whose derivative exists there")


def name_singular_errors(prim, what):
    """Wrap ``prim``'s rules so that a ``LinAlgError`` raised while differentiating names the
    user's function ``what`` (``numpy.linalg.<what>``) and the matrix's shape, not an inner solve;
    and fit each gradient to its argument's dtype."""
    def wrap(rule):
        if rule is None or getattr(rule, "names_singular_errors", False):
            return rule

        def named(c, out, *args, **kwargs):
            try:
                return rule(c, out, *args, **kwargs)
            except SingularDerivativeError:
                raise
            except np.linalg.LinAlgError as e:
                shapes = " and ".join(str(_shape(a)) for a in args if _shape(a))
                raise SingularDerivativeError(
                    f"{what}: its derivative at this input (shape {shapes}) needs a matrix that is "
                    f"singular ({e}), so it does not exist or is not unique there. {_ADVICE}.") from e

        named.__name__ = getattr(rule, "__name__", "rule")
        named.names_singular_errors = True
        return named

    prim.vjps = tuple(wrap(r) for r in prim.vjps)
    prim.jvps = tuple(wrap(r) for r in prim.jvps)
    if prim.grad_post is None:  # a gradient has its argument's dtype (float32 stays float32)
        prim.grad_post = broadcasting.unbroadcast
    return prim


def _nan_if_undefined(jvp_rule):
    """Forward mode computes every result's tangent, used or not: where the vectors have no
    derivative their tangent is NaN (an error only in reverse mode, where it is asked for)."""
    def rule(t, out, *args, **kwargs):
        try:
            return jvp_rule(t, out, *args, **kwargs)
        except UndefinedDerivativeError:
            return np.full(_shape(out), np.nan, dtype=broadcasting.dtype_of(out))

    rule.__name__ = jvp_rule.__name__
    return rule


def _n(x):
    return _shape(x)[-1]


_REAL = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


def _real_dtype(like):
    """The real dtype of ``like`` (float32 for float32 and complex64): constants a rule mixes in
    have it, so that single precision stays single."""
    dt = broadcasting.dtype_of(like)
    if dt.kind == "f":
        return dt
    return _REAL.get(dt, np.dtype(np.float64))


def _eye(n, like):
    return np.eye(n, dtype=_real_dtype(like))


def _tril(n, k, like):
    """The 0/1 lower-triangle mask (below diagonal ``k``) in ``like``'s real dtype."""
    return np.tri(n, n, k, dtype=_real_dtype(like))


def _col(v):
    """(..., n) -> (..., n, 1)."""
    return shape.reshape(v, _shape(v) + (1,))


def _row(v):
    """(..., n) -> (..., 1, n)."""
    s = _shape(v)
    return shape.reshape(v, s[:-1] + (1, s[-1]))


def _scalar_to_matrix(c):
    """(...) -> (..., 1, 1), to scale stacked matrices."""
    return shape.reshape(c, _shape(c) + (1, 1))


def _diag_embed(v):
    """(..., n) -> (..., n, n) with ``v`` on the diagonal."""
    return _col(v) * _eye(_n(v), v)


def _diag_part(x):
    """(..., n, n) -> (..., n), the diagonal."""
    return reductions.sum(x * _eye(_n(x), x), axis=-1)


def _trace(x):
    return reductions.sum(_diag_part(x), axis=-1)


def _zeros(x):
    return np.zeros(_shape(x), dtype=broadcasting.dtype_of(x))


def _imag_diag(x):
    """``i * Im(diag(x))`` as a diagonal matrix (zero, and nothing recorded, for real ``x``)."""
    if not is_complex(x):
        return 0.0
    return _diag_embed(real(_diag_part(x) * -1j) * 1j)


def _triangle_mask(n, uplo, like):
    """The strictly lower (``L``) or upper (``U``) triangle plus half the diagonal."""
    m = _tril(n, -1, like)
    m = m if uplo == "L" else m.T.copy()
    return m + 0.5 * _eye(n, like)


def _hermitian_from(t, uplo):
    """The Hermitian matrix a function reading only triangle ``uplo`` of its input sees in ``t``."""
    p = t * _triangle_mask(_n(t), uplo, t)
    return p + adjoint(p)


def _to_triangle(g, uplo):
    """Adjoint of :func:`_hermitian_from`: a cotangent for the Hermitian matrix, on ``uplo`` only."""
    return (g + adjoint(g)) * _triangle_mask(_n(g), uplo, g)


def _right_solve(z, r):
    """``z @ inv(r)``, through a solve."""
    return adjoint(solve(adjoint(r), adjoint(z)))


def _gaps(w, what, gap_of):
    """``1 / (w_j - w_i)`` off the diagonal, 0 on it; raise if two values coincide."""
    d = _row(w) - _col(w) if gap_of is None else gap_of(w)
    n = np.shape(d)[-1]
    if is_symbolic((w, d)):  # a traced program cannot check its data: repeated values give inf there
        eye = _eye(n, d)
        return (1.0 - eye) / (d + eye)
    raw = np.asarray(unbox_all(d))
    off = ~np.eye(n, dtype=bool)
    scale = max(np.max(np.abs(unbox_all(w)), initial=0.0), np.max(np.abs(raw), initial=0.0), 1e-300)
    if n > 1 and np.min(np.abs(raw[..., off])) <= 1e3 * np.finfo(float).eps * scale:
        kind = "singular " if gap_of is not None else "eigen"
        raise UndefinedDerivativeError(
            f"{what}: the derivative of the {kind}vectors is undefined where {kind}values repeat "
            f"(here two coincide to rounding). Differentiate the values instead, or a function that "
            f"does not depend on the choice of vectors within the repeated subspace.")
    eye = _eye(n, d)
    return (1.0 - eye) / (d + eye)


# -- one LAPACK call per decomposition -------------------------------------------------------------

_LAST = {}
"""kind -> (weak reference to the array, fingerprint, result): the last decomposition of each kind."""


def _factorised(kind, a, compute):
    """``compute(a)``, remembered for the very same array with the very same contents.

    A decomposition's several primitives (U, s and Vh; values and vectors) and then their rules
    ask for it again and again; the memo makes that one LAPACK call. The fingerprint (shape,
    dtype, a hash of the bytes) makes an array changed in place a different key; the results are
    read-only (they are shared), and an entry goes when its array does."""
    if type(a) is not np.ndarray or a.ndim < 2:
        return compute(a)
    digest = hashlib.blake2b(np.ascontiguousarray(a).view(np.uint8), digest_size=16).digest()
    fingerprint = (a.shape, a.dtype.str, digest)
    entry = _LAST.get(kind)
    if entry is not None and entry[0]() is a and entry[1] == fingerprint:
        return entry[2]
    result = tuple(compute(a))
    for r in result:
        r.flags.writeable = False

    def forget(ref, kind=kind):
        if _LAST.get(kind, (None,))[0] is ref:
            _LAST.pop(kind, None)  # another thread may have replaced or dropped it meanwhile

    _LAST[kind] = (weakref.ref(a, forget), fingerprint, result)
    return result


def _svd(a, full_matrices):
    return _factorised(("svd", bool(full_matrices)), a, lambda x: np.linalg.svd(x, bool(full_matrices)))


def _eigh(a, UPLO):
    return _factorised(("eigh", UPLO), a, lambda x: np.linalg.eigh(x, UPLO))


def _eig(a):
    return _factorised("eig", a, np.linalg.eig)


def _qr(a, mode):
    return _factorised(("qr", mode), a, lambda x: np.linalg.qr(x, mode))


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
    y = matmul(adjoint(out), g) * _triangle_mask(_n(out), "L", out)
    w = solve(adjoint(out), y)
    return real_like(_to_triangle(_right_solve(w, out), "L"), a)


def _cholesky_jvp(t, out, a):
    x = _right_solve(solve(out, _hermitian_from(t, "L")), adjoint(out))
    return matmul(out, x * _triangle_mask(_n(out), "L", out))


cholesky = Primitive(lambda a: np.linalg.cholesky(a), name="linalg.cholesky")
defvjp(cholesky, transposed(_cholesky_vjp))
defjvp(cholesky, _cholesky_jvp)


# -- eigh -------------------------------------------------------------------------------------------


def _eigh_values_vjp(g, out, a, UPLO="L"):
    v = eigh_vectors(a, UPLO)
    return real_like(_to_triangle(matmul(v * _row(g), adjoint(v)), UPLO), a)


def _eigh_values_jvp(t, out, a, UPLO="L"):
    v = eigh_vectors(a, UPLO)
    return real(_diag_part(matmul(adjoint(v), matmul(_hermitian_from(t, UPLO), v))))


eigh_values = Primitive(lambda a, UPLO="L": _eigh(a, UPLO)[0], name="linalg.eigh_values")
defvjp(eigh_values, transposed(_eigh_values_vjp))
defjvp(eigh_values, _eigh_values_jvp)


def _eigh_vectors_vjp(g, out, a, UPLO="L"):
    f = _gaps(eigh_values(a, UPLO), "eigh", None)
    inner = matmul(matmul(out, f * matmul(adjoint(out), g)), adjoint(out))
    return real_like(_to_triangle(inner, UPLO), a)


@_nan_if_undefined
def _eigh_vectors_jvp(t, out, a, UPLO="L"):
    f = _gaps(eigh_values(a, UPLO), "eigh", None)
    return matmul(out, f * matmul(adjoint(out), matmul(_hermitian_from(t, UPLO), out)))


eigh_vectors = Primitive(lambda a, UPLO="L": _eigh(a, UPLO)[1], name="linalg.eigh_vectors")
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
    w, v = _eig(raw)
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
    return real_like(solve(mT(v), matmul(_diag_embed(g), mT(v))), a)


def _eigvals_jvp(t, out, a):
    _check_not_defective(a, "eig/eigvals")
    v = eig_vectors(a)
    d = _diag_part(solve(v, matmul(t, v)))
    return d if is_complex(out) else real(d)


eigvals = Primitive(lambda a: _eig(a)[0], name="linalg.eigvals")
defvjp(eigvals, _eigvals_vjp)
defjvp(eigvals, _eigvals_jvp)


def _eig_vectors_vjp(g, out, a):
    """Columns have unit norm (NumPy's choice), which fixes the real part of ``v_i^H dv_i``."""
    _check_not_defective(a, "eig")
    f = _gaps(eigvals(a), "eig", None)
    g = g - out * _row(real(_diag_part(matmul(adjoint(out), g))))
    c = conj(f) * matmul(adjoint(out), g)
    return real_like(solve(adjoint(out), matmul(c, adjoint(out))), a)


@_nan_if_undefined
def _eig_vectors_jvp(t, out, a):
    _check_not_defective(a, "eig")
    f = _gaps(eigvals(a), "eig", None)
    dv = matmul(out, f * solve(out, matmul(t, out)))
    dv = dv - out * _row(real(_diag_part(matmul(adjoint(out), dv))))
    return dv if is_complex(out) else real(dv)


eig_vectors = Primitive(lambda a: _eig(a)[1], name="linalg.eig_vectors")
defvjp(eig_vectors, transposed(_eig_vectors_vjp))
defjvp(eig_vectors, _eig_vectors_jvp)


# -- svd --------------------------------------------------------------------------------------------


def _svd_gaps(s):
    sq = s * s
    return _row(sq) - _col(sq)


def _reduced_svd(a):
    """U, s, Vh (reduced) of ``a``: one LAPACK call for a plain array, else the three primitives
    (so that a rule evaluated on traced values differentiates again)."""
    if type(a) is np.ndarray:
        return tuple(_svd(a, False))
    return svd_u(a, False), svd_values(a), svd_vh(a, False)


def _svd_parts(a, what):
    """Reduced U, s, Vh of ``a``, and the gap matrix F; raise where the vectors have no derivative."""
    u, s, vh = _reduced_svd(a)
    f = _gaps(s, what, _svd_gaps)
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
    return shape.concatenate(d, np.full(s, np.nan, dtype=broadcasting.dtype_of(d)), axis=axis)


def _svd_values_vjp(g, out, a):
    u, _, vh = _reduced_svd(a)
    return real_like(matmul(u * _row(g), vh), a)


def _svd_values_jvp(t, out, a):
    u, _, vh = _reduced_svd(a)
    return real(_diag_part(matmul(adjoint(u), matmul(t, adjoint(vh)))))


svd_values = Primitive(lambda a: _svd(a, False)[1], name="linalg.svd_values")
defvjp(svd_values, transposed(_svd_values_vjp))
defjvp(svd_values, _svd_values_jvp)


def _svd_u_vjp(g, out, a, full_matrices=False):
    u, s, vh, f = _svd_parts(a, "svd")
    g = _reduced_cotangent(g, _n(s), -1, "svd")
    _check_leading(out, u, -1, "svd")
    b = matmul(adjoint(u), g)
    inner = (f * (b - adjoint(b))) * _row(s) + _imag_diag(b) / _row(s)
    return real_like(matmul(matmul(u, inner) + (g - matmul(u, b)) / _row(s), vh), a)


@_nan_if_undefined
def _svd_u_jvp(t, out, a, full_matrices=False):
    u, s, vh, f = _svd_parts(a, "svd")
    _check_leading(out, u, -1, "svd")
    tv = matmul(t, adjoint(vh))
    dp = matmul(adjoint(u), tv)
    j = f * (dp * _row(s) + _col(s) * adjoint(dp)) + _imag_diag(dp) / _row(s)
    return _nan_extra(matmul(u, j) + (tv - matmul(u, dp)) / _row(s), _shape(out)[-1], -1)


svd_u = Primitive(lambda a, full_matrices=False: _svd(a, full_matrices)[0], name="linalg.svd_u")
defvjp(svd_u, transposed(_svd_u_vjp))
defjvp(svd_u, _svd_u_jvp)


def _svd_vh_vjp(g, out, a, full_matrices=False):
    u, s, vh, f = _svd_parts(a, "svd")
    g = _reduced_cotangent(g, _n(s), -2, "svd")
    _check_leading(out, vh, -2, "svd")
    gv = adjoint(g)
    b = matmul(vh, gv)
    inner = _col(s) * (f * (b - adjoint(b)))
    return real_like(matmul(u, matmul(inner, vh) + (g - matmul(matmul(g, adjoint(vh)), vh)) / _col(s)), a)


@_nan_if_undefined
def _svd_vh_jvp(t, out, a, full_matrices=False):
    u, s, vh, f = _svd_parts(a, "svd")
    _check_leading(out, vh, -2, "svd")
    th_u = matmul(adjoint(t), u)
    dp = adjoint(matmul(vh, th_u))  # U^H t V
    k = f * (_col(s) * dp + adjoint(dp) * _row(s))
    dv = matmul(adjoint(vh), k) + (th_u - matmul(adjoint(vh), adjoint(dp))) / _row(s)
    return _nan_extra(adjoint(dv), _shape(out)[-2], -2)


svd_vh = Primitive(lambda a, full_matrices=False: _svd(a, full_matrices)[2], name="linalg.svd_vh")
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
    d = np.abs(np.diagonal(_qr(raw, "reduced")[1], axis1=-2, axis2=-1))
    if np.any(np.min(d, axis=-1) <= 10 * m * np.finfo(raw.dtype).eps * np.max(d, axis=-1)):
        raise SingularDerivativeError(
            f"qr: the {m}x{n} matrix (shape {raw.shape}) has linearly dependent columns (rank "
            f"deficient; a zero on R's diagonal), so Q and R are not unique and have no derivative "
            f"there. Differentiate a function that does not depend on the choice of basis (e.g. "
            f"through svd or pinv, whose derivative assumes a constant rank), or perturb the input.")


def _lower_skew(n_mat):
    """``tril(N - N^H, -1)`` plus ``i Im(diag N)``: the adjoint of Q^H dQ's parametrisation."""
    n = _n(n_mat)
    return (n_mat - adjoint(n_mat)) * _tril(n, -1, n_mat) + _imag_diag(n_mat)


def _qr_x(t, q, r):
    return _right_solve(matmul(adjoint(q), t), r)


def _omega(x):
    n = _n(x)
    low = x * _tril(n, -1, x)
    return low - adjoint(low) + _imag_diag(x)


def _qr_q_vjp(g, out, a, mode="reduced"):
    _qr_check(a)
    r = qr_r(a)
    g = _reduced_cotangent(g, _n(r), -1, "qr")
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


qr_q = Primitive(lambda a, mode="reduced": _qr(a, mode)[0], name="linalg.qr_q")
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


qr_r = Primitive(lambda a: _qr(a, "reduced")[1], name="linalg.qr_r")
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
