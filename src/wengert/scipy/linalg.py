"""wengert.scipy.linalg: scipy.linalg's solve_triangular, cholesky, cho_factor/cho_solve, expm,
sqrtm, solve_sylvester, block_diag and solve_banded, differentiable in every array argument.

Real 2-D matrices. ``cho_factor`` returns the factor with zeros (not SciPy's arbitrary values) in
the triangle it does not use, and ``cholesky``/``cho_factor`` read the symmetric part of ``a``
((a + a^T) / 2), so the gradient with respect to ``a`` is symmetric (JAX's convention).
``overwrite_*`` and ``check_finite`` are accepted for SciPy compatibility and ignored (nothing is
overwritten).
"""

import numpy as np

from wengert.numpy import linalg as numpy_linalg
from wengert.rules import broadcasting, elementwise, indexing, shape
from wengert.rules import scipy_linalg as ops

__all__ = ["solve_triangular", "cholesky", "cho_factor", "cho_solve", "expm", "sqrtm",
           "solve_sylvester", "block_diag", "solve_banded"]

_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}


def _matrix(a, fname):
    s = broadcasting.shape_of(a)
    if len(s) != 2 or s[0] != s[1]:
        raise ValueError(f"wengert.scipy.linalg.{fname}: expected a square 2-D matrix, got shape {s}")


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """scipy.linalg.solve_triangular: x with op(a) x = b, op given by ``trans`` (0/'N', 1/'T', 2/'C')."""
    if trans not in _TRANS:
        raise ValueError(f"Invalid 'trans' value {trans!r}; use 0, 1, 2, 'N', 'T' or 'C'")
    _matrix(a, "solve_triangular")
    return ops.solve_triangular(a, b, trans=_TRANS[trans], lower=bool(lower),
                                unit_diagonal=bool(unit_diagonal))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.cholesky: upper factor U (a = U^T U) by default, lower L (a = L L^T) if ``lower``."""
    _matrix(a, "cholesky")
    factor = ops.cholesky_lower(a)
    return factor if lower else shape.transpose(factor, (1, 0))


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.cho_factor: ``(c, lower)``, c the Cholesky factor (zeros in the other triangle)."""
    return cholesky(a, lower=lower), bool(lower)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """scipy.linalg.cho_solve: x with a x = b, given ``cho_factor(a)``."""
    c, lower = c_and_lower
    _matrix(c, "cho_solve")
    if lower:  # a = L L^T
        y = ops.solve_triangular(c, b, trans=0, lower=True)
        return ops.solve_triangular(c, y, trans=1, lower=True)
    y = ops.solve_triangular(c, b, trans=1, lower=False)  # a = U^T U
    return ops.solve_triangular(c, y, trans=0, lower=False)


def expm(A):
    """scipy.linalg.expm (gradient through the Frechet derivative, computed by a block expm)."""
    _matrix(A, "expm")
    return ops.expm(A)


def sqrtm(A, disp=True, blocksize=64):
    """scipy.linalg.sqrtm: the principal square root (gradient through a Sylvester equation).

    Real matrices whose square root is real (e.g. symmetric positive definite ones).
    """
    _matrix(A, "sqrtm")
    return ops.sqrtm(A)


def solve_sylvester(a, b, q):
    """scipy.linalg.solve_sylvester: x with a x + x b = q, differentiable in a, b and q."""
    return ops.solve_sylvester(a, b, q)


def block_diag(*arrs):
    """scipy.linalg.block_diag: the arrays on the diagonal of a zero matrix (1-D inputs are rows)."""
    if not arrs:
        return np.empty((1, 0))
    blocks = []
    for a in arrs:
        s = broadcasting.shape_of(a)
        if len(s) > 2:
            raise ValueError(f"arguments in the following positions have dimension greater than 2: "
                             f"{[i for i, x in enumerate(arrs) if len(broadcasting.shape_of(x)) > 2]}")
        blocks.append(shape.reshape(a, (1,) * (2 - len(s)) + tuple(s)) if len(s) < 2 else a)
    shapes = [broadcasting.shape_of(b) for b in blocks]
    cols = sum(s[1] for s in shapes)
    dtype = np.result_type(*[broadcasting.dtype_of(b) for b in blocks])
    rows, left = [], 0
    for b, (r, c) in zip(blocks, shapes):
        parts = [np.zeros((r, left), dtype), b, np.zeros((r, cols - left - c), dtype)]
        rows.append(shape.concatenate(*parts, axis=1))
        left += c
    return shape.concatenate(*rows, axis=0)


def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """scipy.linalg.solve_banded: x with a x = b, ``a`` given by its diagonals in ``ab``
    (``ab[u + i - j, j] = a[i, j]``). Composed: the band is placed into a dense matrix (a
    differentiable gather) and solved with ``wnp.linalg.solve``, so the cost is a dense solve's,
    O(n^3), not SciPy's O(n (l + u)^2); for a long narrow band on plain values call SciPy itself."""
    lower, upper = (int(k) for k in l_and_u)
    rows, n = broadcasting.shape_of(ab)
    if rows != lower + upper + 1:
        raise ValueError(f"invalid values for the number of lower and upper diagonals: l+u+1 "
                         f"({lower + upper + 1}) does not equal ab.shape[0] ({rows})")
    if broadcasting.shape_of(b)[0] != n:
        raise ValueError("shapes of ab and b are not compatible.")
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    band_row = upper + i - j
    inside = (band_row >= 0) & (band_row < rows)
    dense = elementwise.where(inside, indexing.getitem(ab, (np.where(inside, band_row, 0), j)), 0.0)
    return numpy_linalg.solve(dense, b)
