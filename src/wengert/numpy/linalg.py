"""wengert.numpy.linalg: ``numpy.linalg``, differentiable, with NumPy's signatures and results.

Decompositions return NumPy's named tuples' fields (``EighResult(eigenvalues, eigenvectors)``,
``SVDResult(U, S, Vh)``, ...). Stacked matrices work wherever NumPy allows them. Bad arguments
raise NumPy's own errors. The derivative's limits (repeated eigenvalues, ``full_matrices=True`` on
non-square matrices, triangles read by ``cholesky``/``eigh``) are described in
``wengert.rules.linalg``; ``norm``, ``matrix_power``, ``lstsq``, ``cond`` and ``multi_dot`` are
composed from primitives.
"""

import builtins
from collections import namedtuple
from typing import Any

import numpy as np

from wengert.core.errors import TracingError
from wengert.core.trace import BOX_TYPES, is_symbolic, unbox_all
from wengert.numpy import _classification as _table
from wengert.numpy import _functions as F
from wengert.numpy._layout import numpy_view
from wengert.rules import broadcasting, determinant, elementwise, indexing, products, shape
from wengert.rules import complex as cplx
from wengert.rules import linalg as ops
from wengert.rules.complex import is_complex
from wengert.rules.matrix_helpers import adjoint, mT

DIFFERENTIABLE = _table.names("numpy.linalg", _table.DIFFERENTIABLE)  # the classification's
NOT_DIFFERENTIABLE = ["LinAlgError"] + _table.names("numpy.linalg", _table.INTEGER, _table.ZERO)
__all__ = DIFFERENTIABLE + NOT_DIFFERENTIABLE

LinAlgError = np.linalg.LinAlgError
matmul = F.matmul
tensordot = F.tensordot

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
LstsqResult = namedtuple("LstsqResult", ["x", "residuals", "rank", "s"])

_shape = broadcasting.shape_of
_NO_VALUE = object()


def _array(a):
    a = a if type(a) in BOX_TYPES or isinstance(a, np.ndarray) else np.asarray(a)
    if broadcasting.dtype_of(a).kind in "biu":
        a = shape.astype(a, np.float64)
    return a


def _square(a, fname):
    """NumPy's errors for a non-square or less than 2-D argument."""
    s = _shape(a)
    if len(s) < 2:
        raise LinAlgError(f"{len(s)}-dimensional array given. Array must be at least two-dimensional")
    if s[-1] != s[-2]:
        raise LinAlgError("Last 2 dimensions of the array must be square")


def inv(a) -> Any:
    """numpy.linalg.inv."""
    a = _array(a)
    _square(a, "inv")
    return ops.inv(a)


def solve(a, b) -> Any:
    """numpy.linalg.solve (``b`` is a vector only when it is 1-D, as in NumPy 2)."""
    a, b = _array(a), _array(b)
    _square(a, "solve")
    if len(_shape(b)) == 1:
        return shape.reshape(ops.solve(a, shape.reshape(b, (-1, 1))), _shape(a)[:-2] + _shape(b))
    return ops.solve(a, b)


def det(a) -> Any:
    """numpy.linalg.det."""
    a = _array(a)
    _square(a, "det")
    return determinant.det(a)


def slogdet(a) -> Any:
    """numpy.linalg.slogdet: (sign, log|det|); the sign of a real matrix has zero derivative."""
    a = _array(a)
    _square(a, "slogdet")
    if type(a) not in BOX_TYPES:
        return np.linalg.slogdet(a)  # nothing traced: one LAPACK call, NumPy's result
    return SlogdetResult(determinant.slogdet_sign(a), determinant.slogdet_logabs(a))


def cholesky(a, /, *, upper=False) -> Any:
    """numpy.linalg.cholesky (reads the lower triangle, or the upper one with ``upper=True``)."""
    a = _array(a)
    _square(a, "cholesky")
    if upper:
        return adjoint(ops.cholesky(adjoint(a)))
    return ops.cholesky(a)


def _uplo(UPLO):
    UPLO = UPLO.upper()
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return UPLO


def eigh(a, UPLO="L") -> Any:
    """numpy.linalg.eigh (reads the ``UPLO`` triangle only, as NumPy does)."""
    UPLO = _uplo(UPLO)
    a = _array(a)
    _square(a, "eigh")
    if type(a) not in BOX_TYPES:
        return np.linalg.eigh(a, UPLO)
    return EighResult(ops.eigh_values(a, UPLO), ops.eigh_vectors(a, UPLO))


def eigvalsh(a, UPLO="L") -> Any:
    """numpy.linalg.eigvalsh."""
    UPLO = _uplo(UPLO)
    a = _array(a)
    _square(a, "eigvalsh")
    return ops.eigh_values(a, UPLO)


def eigvals(a) -> Any:
    """numpy.linalg.eigvals (real when every eigenvalue of a real matrix is real, as in NumPy)."""
    a = _array(a)
    _square(a, "eigvals")
    return ops.eigvals(a)


def eig(a) -> Any:
    """numpy.linalg.eig; the vectors have unit norm (NumPy's choice; complex ones up to a phase)."""
    a = _array(a)
    _square(a, "eig")
    if type(a) not in BOX_TYPES:
        return np.linalg.eig(a)
    return EigResult(ops.eigvals(a), ops.eig_vectors(a))


def _take_last(x, order):
    """``np.take_along_axis(x, order, -1)`` for a constant integer ``order`` of x's shape."""
    grids = np.indices(order.shape, sparse=True)[:-1]
    return indexing.getitem(x, tuple(grids) + (order,))


def _svd_hermitian(a, compute_uv):
    """NumPy's ``svd(..., hermitian=True)``: from eigh, sorted by decreasing |eigenvalue|."""
    w = ops.eigh_values(a, "L")
    s = elementwise.absolute(w)
    order = np.argsort(unbox_all(s), axis=-1)[..., ::-1]
    if not compute_uv:
        return _take_last(s, order)
    sign = np.sign(unbox_all(w))
    sign = np.take_along_axis(sign, order, axis=-1)
    v = ops.eigh_vectors(a, "L")
    batch = np.indices(order.shape[:-1], sparse=True)
    rows = np.arange(_shape(v)[-2]).reshape((1,) * len(batch) + (-1, 1))
    index = tuple(g[..., None, None] for g in batch) + (rows, order[..., None, :])
    u = indexing.getitem(v, index) if batch else indexing.getitem(v, (rows, order[None, :]))
    vh = adjoint(u * sign[..., None, :])
    return SVDResult(u, _take_last(s, order), vh)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False) -> Any:
    """numpy.linalg.svd. Derivatives of U and Vh need ``full_matrices=False`` unless square (as JAX)."""
    a = _array(a)
    if len(_shape(a)) < 2:
        raise LinAlgError(f"{len(_shape(a))}-dimensional array given. Array must be at least "
                          f"two-dimensional")
    if type(a) not in BOX_TYPES:
        return np.linalg.svd(a, full_matrices, compute_uv, hermitian)
    if hermitian:
        return _svd_hermitian(a, compute_uv)
    s = ops.svd_values(a)
    if not compute_uv:
        return s
    m, n = _shape(a)[-2:]
    full = bool(full_matrices) and m != n
    return SVDResult(ops.svd_u(a, full), s, ops.svd_vh(a, full))


def svdvals(x, /) -> Any:
    """numpy.linalg.svdvals."""
    return svd(x, compute_uv=False)


def qr(a, mode="reduced") -> Any:
    """numpy.linalg.qr (modes 'reduced', 'complete', 'r'; 'raw' only without a derivative)."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    a = _array(a)
    if len(_shape(a)) < 2:
        raise LinAlgError(f"{len(_shape(a))}-dimensional array given. Array must be at least "
                          f"two-dimensional")
    if mode == "raw" and type(a) in BOX_TYPES:
        raise NotImplementedError("wengert.numpy.linalg.qr: mode='raw' (Householder reflectors) "
                                  "has no derivative rule; use mode='reduced'")
    if type(a) not in BOX_TYPES:
        return np.linalg.qr(a, mode)
    m, n = _shape(a)[-2:]
    if m < n:  # wide: A = Q [R1 | Q^H A2] with A1 = Q R1 square
        left = indexing.getitem(a, (Ellipsis, slice(None), slice(0, m)))
        right = indexing.getitem(a, (Ellipsis, slice(None), slice(m, None)))
        q = ops.qr_q(left)
        r = shape.concatenate(ops.qr_r(left), matmul(adjoint(q), right), axis=-1)
    elif mode == "complete" and m > n:
        q = ops.qr_q(a, "complete")
        zeros = np.zeros(_shape(a)[:-2] + (m - n, n), dtype=broadcasting.dtype_of(a))
        r = shape.concatenate(ops.qr_r(a), zeros, axis=-2)
    else:
        q, r = ops.qr_q(a), ops.qr_r(a)
    return r if mode == "r" else QRResult(q, r)


def pinv(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE) -> Any:
    """numpy.linalg.pinv (the derivative assumes the rank does not change nearby)."""
    a = _array(a)
    if rtol is not _NO_VALUE:
        if rcond is not None:
            raise ValueError("`rtol` and `rcond` can't be both set.")
        rcond = rtol
    return ops.pinv(a, rcond, hermitian)


def _abs2(x):
    """|x|**2, for complex x as Re(x)**2 + Im(x)**2 (wengert.rules.complex, whatever the core's abs)."""
    if not is_complex(x):
        return x * x
    re, im = cplx.real_of(x), cplx.real_of(x * -1j)
    return re * re + im * im


def _abs(x):
    return elementwise.absolute(x) if not is_complex(x) else elementwise.sqrt(_abs2(x))


def _vector_norm(x, order, axis, keepdims):
    """Vector norms along one axis (NumPy's cases, in NumPy's order)."""
    if order == np.inf:
        return F.max(_abs(x), axis=axis, keepdims=keepdims)
    if order == -np.inf:
        return F.min(_abs(x), axis=axis, keepdims=keepdims)
    if order == 0:  # a count: piecewise constant, so no derivative
        raw = unbox_all(x)
        if is_symbolic(raw):  # a traced program counts at run time
            real = np.zeros((), broadcasting.dtype_of(raw)).real.dtype
            return F.sum(shape.astype(raw != 0, real), axis=axis, keepdims=keepdims)
        raw = np.asarray(raw)
        return (raw != 0).astype(raw.real.dtype).sum(axis=axis, keepdims=keepdims)
    if order == 1:
        return F.sum(_abs(x), axis=axis, keepdims=keepdims)
    if order is None or order == 2:
        return elementwise.sqrt(F.sum(_abs2(x), axis=axis, keepdims=keepdims))
    s = F.sum(_abs(x) ** order, axis=axis, keepdims=keepdims)
    return s ** (1.0 / order)


def _matrix_norm(x, order, row, col, keepdims):
    """Matrix norms over axes ``row`` and ``col`` (non-negative)."""
    if order in (2, -2, "nuc"):
        s = ops.svd_values(F.moveaxis(x, (row, col), (-2, -1)))
        r = F.max(s, axis=-1) if order == 2 else F.min(s, axis=-1) if order == -2 else F.sum(s, axis=-1)
    elif order in (1, -1):
        c = col - 1 if col > row else col
        sums = F.sum(_abs(x), axis=row)
        r = F.max(sums, axis=c) if order == 1 else F.min(sums, axis=c)
    elif order in (np.inf, -np.inf):
        rr = row - 1 if row > col else row
        sums = F.sum(_abs(x), axis=col)
        r = F.max(sums, axis=rr) if order == np.inf else F.min(sums, axis=rr)
    else:  # None, 'fro', 'f'
        r = elementwise.sqrt(F.sum(_abs2(x), axis=(row, col)))
    if keepdims:
        s = list(_shape(x))
        s[row] = s[col] = 1
        r = shape.reshape(r, tuple(s))
    return r


def norm(x, ord=None, axis=None, keepdims=False) -> Any:  # noqa: A002 - NumPy's name
    """numpy.linalg.norm: every vector and matrix ``ord`` NumPy has."""
    x = _array(x)
    ndim = len(_shape(x))
    with np.errstate(all="ignore"):  # NumPy validates ord and axis (its errors, its words)
        np.linalg.norm(np.ones((1,) * ndim), ord=ord, axis=axis, keepdims=keepdims)
    if axis is None:
        if ord is None or (ord in ("f", "fro") and ndim == 2) or (ord == 2 and ndim == 1):
            r = elementwise.sqrt(F.sum(_abs2(shape.reshape(x, (-1,)))))
            return shape.reshape(r, (1,) * ndim) if keepdims else r
        axis = tuple(range(ndim))
    elif not isinstance(axis, tuple):
        axis = (int(axis),)
    axis = tuple(int(ax) % ndim for ax in axis)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis[0], keepdims)
    return _matrix_norm(x, ord, axis[0], axis[1], keepdims)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2) -> Any:  # noqa: A002 - NumPy's name
    """numpy.linalg.vector_norm."""
    x = _array(x)
    s = _shape(x)
    if axis is None:
        r = _vector_norm(shape.reshape(x, (-1,)), ord, 0, False)
        return shape.reshape(r, (1,) * len(s)) if keepdims else r
    if isinstance(axis, tuple) and len(axis) > 1:
        axes = tuple(int(ax) % len(s) for ax in axis)
        rest = [i for i in range(len(s)) if i not in axes]
        moved = shape.reshape(F.transpose(x, rest + list(axes)), tuple(s[i] for i in rest) + (-1,))
        r = _vector_norm(moved, ord, -1, False)
        if keepdims:
            r = shape.reshape(r, tuple(1 if i in axes else n for i, n in enumerate(s)))
        return r
    return norm(x, ord=ord, axis=axis, keepdims=keepdims)


def matrix_norm(x, /, *, keepdims=False, ord="fro") -> Any:  # noqa: A002 - NumPy's name
    """numpy.linalg.matrix_norm."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def cond(x, p=None) -> Any:
    """numpy.linalg.cond (composed: ratio of singular values, or norm(x) * norm(inv(x)))."""
    x = _array(x)
    if p is None or p == 2 or p == -2:
        s = ops.svd_values(x)
        first = indexing.getitem(s, (Ellipsis, 0))
        last = indexing.getitem(s, (Ellipsis, -1))
        return first / last if p != -2 else last / first
    _square(x, "cond")
    return norm(x, p, axis=(-2, -1)) * norm(ops.inv(x), p, axis=(-2, -1))


def matrix_power(a, n) -> Any:
    """numpy.linalg.matrix_power (composed: repeated squaring; negative n through inv)."""
    a = _array(a)
    if not isinstance(n, (int, np.integer)):
        raise TypeError("exponent must be an integer")
    _square(a, "matrix_power")
    if n == 0:
        out = np.empty(_shape(a), dtype=broadcasting.dtype_of(a))
        out[...] = np.eye(_shape(a)[-1], dtype=out.dtype)
        return out
    if n < 0:
        a, n = ops.inv(a), -n
    result = z = None
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def lstsq(a, b, rcond=None) -> Any:
    """numpy.linalg.lstsq (composed: x = pinv(a) b; rank and residuals as NumPy gives them)."""
    a, b = _array(a), _array(b)
    if is_symbolic((a, b)):
        raise TracingError("wengert.numpy.linalg.lstsq cannot be traced to a program (wg.compile, "
                           "wg.Program.from_trace) nor batched by wg.vmap: its rank, and the shape of its "
                           "residuals, depend on the data. Use wnp.linalg.pinv(a) @ b, or differentiate with "
                           "the tape (wg.grad) one example at a time.")
    plain = np.linalg.lstsq(unbox_all(a), unbox_all(b), rcond=rcond)  # NumPy's checks, rank
    if type(a) not in BOX_TYPES and type(b) not in BOX_TYPES:
        return plain
    rank = plain[2]
    m, n = _shape(a)
    cutoff = np.finfo(broadcasting.dtype_of(a)).eps * builtins.max(m, n) if rcond is None else rcond
    x = matmul(ops.pinv(a, cutoff), b)
    if rank == n and m > n:
        residual = matmul(a, x) - b
        residuals = F.sum(_abs2(residual), axis=0)
        if len(_shape(b)) == 1:
            residuals = shape.reshape(residuals, (1,))
    else:
        residuals = np.empty((0,), dtype=np.real(np.zeros((), broadcasting.dtype_of(a))).dtype)
    return LstsqResult(x, residuals, rank, ops.svd_values(a))


def multi_dot(arrays, *, out=None) -> Any:
    """numpy.linalg.multi_dot (left to right; same values to rounding)."""
    if out is not None:
        raise TypeError("wengert.numpy.linalg.multi_dot: out= is not supported; use the result")
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    result = _array(arrays[0])
    for b in arrays[1:]:
        result = products.matmul(result, _array(b))
    return result


def matrix_transpose(x, /) -> Any:
    """numpy.linalg.matrix_transpose."""
    x = _array(x)
    if len(_shape(x)) < 2:
        raise ValueError(f"Input array must be at least 2-dimensional, but it is {len(_shape(x))}")
    return mT(x)


def tensorinv(a, ind=2) -> Any:
    """numpy.linalg.tensorinv (composed: reshape, inv, reshape)."""
    a = _array(a)
    s = _shape(a)
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    inv_shape = s[ind:] + s[:ind]
    rows = int(np.prod(s[:ind]))
    return shape.reshape(inv(shape.reshape(a, (rows, -1))), inv_shape)


def tensorsolve(a, b, axes=None) -> Any:
    """numpy.linalg.tensorsolve (composed: transpose, reshape, solve, reshape)."""
    a, b = _array(a), _array(b)
    an, bn = len(_shape(a)), len(_shape(b))
    if axes is not None:
        order = [k for k in range(an) if k not in [ax % an for ax in axes]] + [ax % an for ax in axes]
        a = F.transpose(a, order)
    old = _shape(a)[bn:]
    prod = int(np.prod(old))
    if int(np.prod(_shape(a))) != prod ** 2:
        raise LinAlgError("Input arrays must satisfy the requirement             "
                          "prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])")  # NumPy's words and spaces
    x = solve(shape.reshape(a, (prod, prod)), shape.reshape(b, (-1,)))
    return shape.reshape(x, old)


def outer(x1, x2, /) -> Any:
    """numpy.linalg.outer (1-D arguments only, as NumPy requires)."""
    x1, x2 = _array(x1), _array(x2)
    if len(_shape(x1)) != 1 or len(_shape(x2)) != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={len(_shape(x1))} "
                         f"and x2.ndim={len(_shape(x2))}.")
    return shape.reshape(x1, (-1, 1)) * x2


def vecdot(x1, x2, /, *, axis=-1) -> Any:
    """numpy.linalg.vecdot: sum(conj(x1) * x2) along each argument's ``axis`` (a gufunc's axis)."""
    x1, x2 = F.moveaxis(_array(x1), axis, -1), F.moveaxis(_array(x2), axis, -1)
    return F.sum(cplx.conj_of(x1) * x2, axis=-1)


def diagonal(x, /, *, offset=0) -> Any:
    """numpy.linalg.diagonal: the ``offset`` diagonal of the last two axes, NumPy's read-only view (as
    numpy.diagonal's)."""
    out = _diagonal(x, offset)
    return numpy_view(out, x, lambda base: _diagonal(base, offset), "linalg.diagonal", readonly=True)


def _diagonal(x, offset):
    x = _array(x)
    if len(_shape(x)) < 2:
        np.linalg.diagonal(np.zeros((1,) * len(_shape(x))))  # NumPy's error
    m, n = _shape(x)[-2:]
    first_row, first_col = max(-offset, 0), max(offset, 0)
    k = max(0, min(m - first_row, n - first_col))
    rows, cols = np.arange(k) + first_row, np.arange(k) + first_col
    return indexing.getitem(x, (Ellipsis, rows, cols))


def trace(x, /, *, offset=0, dtype=None) -> Any:
    """numpy.linalg.trace: sum of the ``offset`` diagonal of the last two axes."""
    return F.sum(_diagonal(x, offset), axis=-1, dtype=dtype)


def cross(x1, x2, /, *, axis=-1) -> Any:
    """numpy.linalg.cross of 3-vectors (composed from their components)."""
    x1, x2 = _array(x1), _array(x2)
    n1, n2 = _shape(x1)[axis], _shape(x2)[axis]
    if n1 != 3 or n2 != 3:
        raise ValueError(f"Both input arrays must be (arrays of) 3-dimensional vectors, but they are "
                         f"{n1} and {n2} dimensional instead.")
    a, b = F.moveaxis(x1, axis, -1), F.moveaxis(x2, axis, -1)
    a0, a1, a2 = (indexing.getitem(a, (Ellipsis, i)) for i in range(3))
    b0, b1, b2 = (indexing.getitem(b, (Ellipsis, i)) for i in range(3))
    c = F.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return F.moveaxis(c, -1, axis)


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None) -> Any:
    """numpy.linalg.matrix_rank (an integer: no derivative)."""
    return np.linalg.matrix_rank(unbox_all(A), tol=tol, hermitian=hermitian, rtol=rtol)


def __getattr__(name):
    if _table.entry("numpy.linalg", name) is not None:  # unsupported: the table says what to do instead
        raise _table.missing_attribute("numpy.linalg", name)
    if hasattr(np.linalg, name):
        raise AttributeError(
            f"wengert.numpy.linalg has no '{name}': numpy.linalg.{name} has no derivative rule in "
            f"wengert. Compose it from wengert.numpy.linalg functions, or define it with wg.primitive "
            f"and wg.defvjp/wg.defjvp (see docs/adding-a-primitive.md).")
    raise AttributeError(f"module 'wengert.numpy.linalg' has no attribute '{name}'")
