"""NumPy's numerical-analysis helpers, composed from primitives (no rule of their own): ``gradient``,
``interp``, ``convolve``/``correlate``, the polynomials ``polyval``/``polyfit``/``vander``, and
``copysign``/``real_if_close``.

Each is exact where NumPy's function is differentiable: linear ones (``gradient``, ``convolve``) are
built from indexing and products, so every derivative of them is a derivative of those.
"""

from typing import Any

import numpy as np

from wengert.core.errors import TracingError
from wengert.core.trace import contains_box, is_symbolic, unbox_all
from wengert.numpy import _functions as F
from wengert.numpy import linalg
from wengert.numpy._arrays import searchsorted
from wengert.rules import broadcasting, elementwise, indexing, reductions
from wengert.rules import complex as complex_parts
from wengert.rules import shape as shape_ops

__all__ = ["gradient", "interp", "convolve", "correlate", "polyval", "polyfit", "vander", "copysign",
           "real_if_close"]

_shape = F._shape


def _plain(fname, what, value):
    if contains_box(value):
        raise TypeError(f"wengert.numpy.{fname}: {what} must be plain numbers or arrays, not traced "
                        f"values (wengert differentiates {fname} with respect to its data only)")
    return value


def _known(fname, why, *values):
    """The plain values of ``values``, which ``fname`` reads to choose what it computes; a program
    tracer's symbols have none yet."""
    if is_symbolic(values):
        raise TracingError(f"wengert.numpy.{fname} cannot be traced to a program (wg.compile, "
                           f"wg.Program.from_trace) nor batched by wg.vmap: {why} depends on "
                           f"the data. Differentiate it with the tape (wg.grad, wg.jvp), one "
                           f"example at a time.")
    return [np.asarray(unbox_all(v)) for v in values]


def _bands(n, spacing, edge_order):
    """numpy.gradient along one axis of length ``n`` as three bands: ``(index, coefficient)`` pairs
    with ``gradient(f)[i] = sum_k coefficient_k[i] * f[index_k[i]]``.

    NumPy's stencil for row ``i`` reads the three consecutive entries from ``s(i) = clip(i - 1, 0,
    n - 3)``, whose residues modulo 3 differ: so NumPy's own gradient of the comb ``arange(n) % 3 == k``
    is, in row ``i``, exactly the weight of the one entry read with residue ``k``.
    """
    rows = np.arange(n)
    start = np.clip(rows - 1, 0, max(n - 3, 0))
    bands = []
    for k in range(3):
        comb = (rows % 3 == k).astype(float)
        coefficient = np.gradient(comb, *spacing, edge_order=edge_order)
        index = start + (k - start) % 3
        outside = index >= n
        bands.append((np.where(outside, start, index), np.where(outside, 0.0, coefficient)))
    return bands


def gradient(f, *varargs, axis=None, edge_order=1) -> Any:
    """numpy.gradient (differentiable in ``f``; spacings and coordinates are plain values)."""
    _plain("gradient", "the spacings", varargs)
    f = F._operand(f)
    if broadcasting.dtype_of(f).kind in "biu":
        f = shape_ops.astype(f, np.float64)
    nd = F._ndim(f)
    axes = tuple(range(nd)) if axis is None else reductions.normalize_axis(axis, nd, "gradient")
    spacings: list[tuple[Any, ...]]
    if len(varargs) == 0:
        spacings = [()] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacings = [(varargs[0],)] * len(axes)
    elif len(varargs) == len(axes):
        spacings = [(v,) for v in varargs]
    else:
        raise TypeError("invalid number of arguments")
    real = np.finfo(broadcasting.dtype_of(f)).dtype  # float32 data stays float32, as in NumPy
    out = []
    for ax, spacing in zip(axes, spacings):
        n = _shape(f)[ax]
        if n < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                             "(edge_order + 1) elements are required.")
        along = [1] * nd
        along[ax] = n
        total = None
        for index, coefficient in _bands(n, spacing, edge_order):
            weights = coefficient.astype(real).reshape(along)
            term = indexing.getitem(f, (slice(None),) * ax + (index,)) * weights
            total = term if total is None else total + term
        out.append(total)
    return out[0] if len(out) == 1 else tuple(out)


def interp(x, xp, fp, left=None, right=None, period=None) -> Any:
    """numpy.interp, differentiable in ``x``, ``fp`` (and ``xp``): the slope of the segment holding
    ``x`` (at a knot, the segment to its right; constant beyond the ends). The segments are found
    by ``searchsorted``, a recorded step, so programs and ``wg.vmap`` follow the data too."""
    if period is not None:
        raise NotImplementedError("wengert.numpy.interp: period= is not supported; wrap x first: "
                                  "x % period, with xp and fp extended by one period on each side")
    x, xp, fp = F._operand(x), F._operand(xp), F._operand(fp)
    if F._ndim(xp) != 1 or F._ndim(fp) != 1 or _shape(xp)[0] != _shape(fp)[0]:
        raise ValueError("fp and xp are not of the same length.")
    n = _shape(xp)[0]
    if n == 0:
        raise ValueError("array of sample points is empty")
    left = fp[0] if left is None else left
    right = fp[-1] if right is None else right
    E = elementwise
    if n == 1:
        inside = fp[0] + 0.0 * x
    else:
        i = E.minimum(E.maximum(searchsorted(xp, x, side="right") - 1, 0), n - 2)
        x0, x1 = indexing.getitem(xp, i), indexing.getitem(xp, i + 1)
        y0, y1 = indexing.getitem(fp, i), indexing.getitem(fp, i + 1)
        inside = y0 + (x - x0) * ((y1 - y0) / (x1 - x0))
    return _double(E.where(x < xp[0], left, E.where(x > xp[-1], right, inside)))


def _double(x):
    """``x`` in double precision, as NumPy's interp and polyfit answer whatever their input."""
    kind = broadcasting.dtype_of(x).kind
    target = np.complex128 if kind == "c" else np.float64
    return x if broadcasting.dtype_of(x) == target else shape_ops.astype(x, target)


def _full_convolution(a, v):
    """The full 1-D convolution of ``a`` (length n) with ``v`` (length m): a matrix of shifted
    copies of ``a`` (gathered from it padded with zeros) contracted with ``v``; bilinear, as it should be."""
    n, m = _shape(a)[0], _shape(v)[0]
    zeros = np.zeros(m - 1, broadcasting.dtype_of(a))
    padded = F.concatenate([zeros, a, zeros]) if m > 1 else a
    shifts = np.arange(n + m - 1)[:, None] - np.arange(m)[None, :] + (m - 1)
    return F.einsum("ij,j->i", indexing.getitem(padded, shifts), v)


def _crop(full, n, m, mode):
    if mode == "full":
        return full
    if mode == "same":
        start = (min(n, m) - 1) // 2
        return indexing.getitem(full, slice(start, start + max(n, m)))
    if mode == "valid":
        return indexing.getitem(full, slice(min(n, m) - 1, max(n, m)))
    raise ValueError(f"mode must be one of 'valid', 'same' or 'full', not {mode!r}")


def _vectors(fname, a, v):
    a, v = F._operand(a), F._operand(v)
    if F._ndim(a) != 1 or F._ndim(v) != 1:
        raise ValueError(f"wengert.numpy.{fname}: a and v must be one-dimensional (for n-d arrays "
                         f"along chosen axes use wengert.scipy.signal.convolve(..., axes=...))")
    n, m = _shape(a)[0], _shape(v)[0]
    if n == 0 or m == 0:
        raise ValueError(f"{'a' if n == 0 else 'v'} cannot be empty")
    return a, v, n, m


def convolve(a, v, mode="full") -> Any:
    """numpy.convolve (1-D; differentiable in both arguments)."""
    a, v, n, m = _vectors("convolve", a, v)
    full = _full_convolution(a, v) if n >= m else _full_convolution(v, a)
    return _crop(full, n, m, mode)


def correlate(a, v, mode="valid") -> Any:
    """numpy.correlate (1-D; ``sum_n a[n + k] * conj(v[n])``, differentiable in both arguments)."""
    a, v, n, m = _vectors("correlate", a, v)
    if n < m:  # NumPy's order: the correlation of the swapped pair, reversed and conjugated
        return indexing.getitem(complex_parts.conj(correlate(v, a, mode)), slice(None, None, -1))
    reversed_v = complex_parts.conj(indexing.getitem(v, slice(None, None, -1)))
    return _crop(_full_convolution(a, reversed_v), n, m, mode)


def polyval(p, x) -> Any:
    """numpy.polyval (Horner's scheme, as NumPy; differentiable in ``p`` and ``x``)."""
    p = F._operand(p)
    x = F._operand(x)
    y = np.zeros_like(unbox_all(x), dtype=np.result_type(unbox_all(x), unbox_all(p), 1.0))
    for i in range(_shape(p)[0]):
        y = y * x + p[i]
    return y


def vander(x, N=None, increasing=False) -> Any:
    """numpy.vander (columns built by repeated multiplication: exact derivatives at x = 0 too)."""
    x = F._operand(x)
    if F._ndim(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    N = _shape(x)[0] if N is None else int(N)
    columns, power = [], None
    for k in range(N):
        power = np.ones(_shape(x), np.result_type(unbox_all(x), 1.0)) if k == 0 else (
            x if k == 1 else power * x)
        columns.append(power)
    if not columns:
        return np.zeros((_shape(x)[0], 0))
    out = F.stack(columns if increasing else columns[::-1], axis=1)
    return out


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False) -> Any:
    """numpy.polyfit (least squares on the column-scaled Vandermonde matrix, as NumPy; differentiable
    in ``x``, ``y`` and ``w``). ``full=`` and ``cov=`` are not supported."""
    if full or cov:
        raise NotImplementedError("wengert.numpy.polyfit: full= and cov= are not supported; compute "
                                  "the residuals from wnp.polyval(p, x) - y")
    x, y = F._operand(x), F._operand(y)
    deg = int(deg)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if F._ndim(x) != 1 or F._ndim(y) not in (1, 2) or _shape(x)[0] != _shape(y)[0]:
        raise TypeError("expected 1-D x and 1-D or 2-D y of the same length")
    if rcond is None:
        rcond = _shape(x)[0] * np.finfo(np.result_type(unbox_all(x), 1.0)).eps
    lhs, rhs = vander(x, deg + 1), y
    if w is not None:
        w = F._operand(w)
        lhs = lhs * F.reshape(w, (-1, 1))
        rhs = rhs * (w if F._ndim(y) == 1 else F.reshape(w, (-1, 1)))
    scale = elementwise.sqrt(F.sum(lhs * lhs, axis=0))
    # lstsq's solution, written so that wg.compile and wg.vmap can trace it
    coefficients = F.einsum("ij,j...->i...", linalg.pinv(lhs / scale, rcond=rcond), rhs)
    return _double(coefficients / (scale if F._ndim(y) == 1 else F.reshape(scale, (-1, 1))))


def copysign(x1, x2, out=None) -> Any:
    """numpy.copysign: ``x1`` or ``-x1``, whichever has ``x2``'s sign (slope +-1 in ``x1``, 0 in ``x2``)."""
    F._no_out("copysign", out)
    flip = np.signbit(unbox_all(x1)) != np.signbit(unbox_all(x2))
    dtype = np.result_type(broadcasting.dtype_of(x1), x2 if isinstance(x2, (int, float)) else
                           broadcasting.dtype_of(x2))
    dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
    return elementwise.multiply(x1, np.where(flip, -1.0, 1.0).astype(dtype))


def real_if_close(a, tol=100) -> Any:
    """numpy.real_if_close: the real part when every imaginary part is within ``tol`` (machine
    epsilons if ``tol > 1``) of zero, else ``a`` unchanged."""
    if broadcasting.dtype_of(a).kind != "c":
        return a
    (values,) = _known("real_if_close", "whether the result is real", a)
    if values.dtype.kind != "c":
        return a
    if tol > 1:
        tol = np.finfo(values.dtype).eps * tol
    return complex_parts.real(a) if np.all(np.abs(values.imag) < tol) else a
