"""Products with a diagonal constant: ``D @ x`` and ``x @ D`` computed as ``x`` scaled, where exact.

``wg.hessian``, ``wg.jacfwd`` and ``wg.jacrev`` push a basis of tangents (the identity) through the
function: a matrix ``A`` that is an input of the program -- an argument, or a captured array, which
``wg.compile`` reads at each call -- meets it as ``eye @ A``, an O(n^3) product whose value is ``A``
(a constant ``A`` is folded away when the program is traced, which is why a captured matrix was
slower than one held as a constant). ``diagonal_products(program)`` replaces each ``D @ x`` and
``x @ D`` (``D`` a finite 2-d constant whose nonzeros lie on its diagonal ``d``, ``x`` a Variable of
the result's shape and of ``D``'s float dtype) by a statement computing ``x * d`` along the axis
that ``D`` scales (``rows_scaled``, ``columns_scaled``), where the product is large enough for that to
pay (``MIN_WORK``).

Contract: the value is the product's. Element ``(i, j)`` of ``D @ x`` is ``d[i] * x[i, j]`` plus the
products of ``x``'s other elements of column ``j`` with the zeros of ``D``: exact zeros where ``x``
is finite, nan where one is inf or nan. So the statement first sums ``x`` (finite only where every
element is; an overflow counts as not finite) and computes the product itself where the sum is not
finite: nan and inf where NumPy's product has them. The result is a new array, never ``x``.

Signs of zeros: NumPy's product (BLAS, or its own loop) sums into an accumulator that starts at
``+0.0``, so an element whose terms are all zeros is ``+0.0`` even where ``d[i] * x[i, j]`` is
``-0.0`` (``x`` holding ``-0.0``, as ``-A`` does wherever ``A`` is zero). The scaling adds ``+0.0``
to match (every other value unchanged): ``1 / H``, ``np.signbit`` and ``np.copysign`` of a compiled
Hessian are the same with and without the pass. The one difference left is BLAS's own: a
``d[i] * x[i, j]`` that underflows from subnormals to ``-0.0`` inside a fused multiply-add may stay
``-0.0`` in some of BLAS's tiles and not others (NumPy's product is not consistent there itself).
"""


import numpy as np

from wengert.core.extend import facts
from wengert.core.primitive import Primitive
from wengert.program.ir import Statement, Variable
from wengert.program.rendering import register_helper
from wengert.rules.products import matmul

__all__ = ["MIN_WORK", "diagonal_products", "rows_scaled", "columns_scaled", "rows_scaled_native",
           "columns_scaled_native"]

_MATMUL = matmul.primitive

MIN_WORK = 1 << 16
"""Multiply-adds of a product (``n * x.size``) below which it is kept: measured on NumPy with OpenBLAS,
``eye(n) @ A`` costs about what the check and the scaling cost near ``n = 48`` (a call's overhead is
a few microseconds either way), and a matrix-vector product stays cheaper to far larger ``n``."""


def rows_scaled(x, scale, dense):
    """``dense @ x``, ``dense`` diagonal: ``x * scale`` (``scale`` its diagonal, shaped to ``x``'s rows)
    where every element of ``x`` is finite, else the product itself (module docs)."""
    if type(x) is not np.ndarray or not np.isfinite(np.add.reduce(x, None)):
        return dense @ x  # inf or nan in x (or an array library's array: no test of its data)
    out = x * scale
    out += 0.0  # -0.0 to +0.0, as the product's sum of zeros gives (module docs)
    return out


def columns_scaled(x, scale, dense):
    """``x @ dense``, ``dense`` diagonal: ``x * scale`` (``scale`` its diagonal) where every element of
    ``x`` is finite, else the product itself (module docs)."""
    if type(x) is not np.ndarray or not np.isfinite(np.add.reduce(x, None)):
        return x @ dense
    out = x * scale
    out += 0.0  # -0.0 to +0.0, as the product's sum of zeros gives (module docs)
    return out


def rows_scaled_native(x, scale, dense):
    """:func:`rows_scaled` in Numba's dialect (``native_helpers``)."""
    if np.isfinite(np.sum(x)):
        out = np.ascontiguousarray(x * scale)  # C-ordered as the product is (one type for Numba)
        out += 0.0  # -0.0 to +0.0 (module docs)
        return out
    return dense @ x


def columns_scaled_native(x, scale, dense):
    """:func:`columns_scaled` in Numba's dialect (``native_helpers``)."""
    if np.isfinite(np.sum(x)):
        out = np.ascontiguousarray(x * scale)  # C-ordered as the product is (one type for Numba)
        out += 0.0  # -0.0 to +0.0 (module docs)
        return out
    return x @ dense


_ROWS = facts(Primitive(rows_scaled, name="rows_scaled"), fresh=True, helper=True)
_COLUMNS = facts(Primitive(columns_scaled, name="columns_scaled"), fresh=True, helper=True)
register_helper(rows_scaled)  # their names are reserved in generated modules
register_helper(columns_scaled)


def _diagonal(c):
    """The diagonal of constant ``c`` where it is a finite square float matrix, zero off it; else None."""
    if type(c) is not np.ndarray or c.ndim != 2 or c.shape[0] != c.shape[1] or c.dtype.kind != "f" \
            or c.shape[0] < 2:
        return None
    d = np.diagonal(c)
    if not np.isfinite(d).all() or np.count_nonzero(c) != np.count_nonzero(d):
        return None
    return d.copy()


def _scale(d):
    """The diagonal as the statement's factor: a Python float where every element is the same, else the
    array."""
    first = d[0]
    return float(first) if d.dtype == np.float64 and (d == first).all() else d


def _rewritten(s, found):
    """The statement replacing matmul statement ``s``, or None."""
    if s.kwargs or s.inplace or len(s.args) != 2 or len(s.outs) != 1:
        return None
    a, b = s.args
    out = s.out
    for const, x, left in ((a, b, True), (b, a, False)):
        if type(x) is not Variable or x.kind != "array" or x.shape != out.shape or x.dtype != out.dtype:
            continue
        if type(const) is not np.ndarray or const.dtype != x.dtype:
            continue
        key = id(const)
        if key not in found:
            found[key] = (const, _diagonal(const))  # the constant kept: its id stays its own
        d = found[key][1]
        if d is None:
            continue
        n = d.shape[0]
        if n * int(np.prod(x.shape)) < MIN_WORK:
            return None
        if left and (len(x.shape) < 1 or x.shape[-2 if len(x.shape) > 1 else -1] != n):
            continue
        if not left and x.shape[-1] != n:
            continue
        scale = _scale(d)
        if type(scale) is not float and left and len(x.shape) > 1:
            scale = scale.reshape(n, 1)
        return Statement(s.outs, _ROWS if left else _COLUMNS, (x, scale, const))
    return None


def diagonal_products(program):
    """``program`` with its products by a diagonal constant computed as scalings (module docs), or
    ``program`` itself where it has none."""
    if _MATMUL not in program.census()[0]:
        return program
    found, statements, changed = {}, [], False
    for s in program.statements:
        if s.prim is _MATMUL:
            new = _rewritten(s, found)
            if new is not None:
                s, changed = new, True
        statements.append(s)
    return program.with_statements(statements, program.outputs) if changed else program
