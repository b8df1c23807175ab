"""More of NumPy's reductions, composed from the rule table: cumulative functions (``cumsum``,
``cumprod``, ``diff``, ``trapezoid``, ...), the nan-functions, ``average``, ``ptp``, and
``quantile``/``percentile``/``median``.

Nothing here defines a derivative (``cumsum``'s rule is in ``wengert/rules/cumulative.py``). ``cumprod`` is a
scan of products, exact when the input holds zeros. NaN entries get derivative zero.
"""

import warnings
from typing import Any

import numpy as np

from wengert.core.extend import nondiff_primitive
from wengert.core.trace import BOX_TYPES, contains_box, is_symbolic, unbox_all
from wengert.numpy import _functions as F
from wengert.numpy._arrays import _E, _axis, _ndim, _shape, _slice_along, sort
from wengert.rules import broadcasting, cumulative, indexing, reductions
from wengert.rules import complex as complex_parts
from wengert.rules import shape as shape_ops


def _to_inexact(a):
    """Integer and boolean inputs as float64 (as NumPy's mean does)."""
    return shape_ops.astype(a, np.float64) if broadcasting.dtype_of(a).kind in "biu" else a


def _abs2(d):
    """|d|**2, real for complex d."""
    if complex_parts.is_complex(d):
        return complex_parts.real(d * complex_parts.conj(d))
    return d * d


# -- cumulative ------------------------------------------------------------------------------------


def _cumulative_args(fname, a, axis, dtype, out):
    F._no_out(fname, out)
    if dtype is not None:
        a = shape_ops.astype(a, dtype)
    if axis is None:
        return F.ravel(a), 0
    return a, _axis(axis, _ndim(a), fname)


def cumsum(a, axis=None, dtype=None, out=None) -> Any:
    """numpy.cumsum."""
    a, axis = _cumulative_args("cumsum", a, axis, dtype, out)
    return cumulative.cumsum(a, axis)


def _scan_multiply(a, axis):
    """Inclusive cumulative product along ``axis`` in ceil(log2 n) rounds of products (exact with
    zeros, unlike a rule that divides by the input; each round is differentiable as it is)."""
    n = _shape(a)[axis]
    step = 1
    while step < n:
        head = _slice_along(a, axis, slice(0, step))
        tail = _slice_along(a, axis, slice(step, None)) * _slice_along(a, axis, slice(0, n - step))
        a = shape_ops.concatenate(head, tail, axis=axis)
        step *= 2
    return a


def cumprod(a, axis=None, dtype=None, out=None) -> Any:
    """numpy.cumprod (composed: a scan of products)."""
    a, axis = _cumulative_args("cumprod", a, axis, dtype, out)
    if type(a) not in BOX_TYPES:
        return np.cumprod(a, axis=axis)
    return _scan_multiply(a, axis)


def _include_initial(result, axis, value):
    s = list(_shape(result))
    s[axis] = 1
    init = np.full(tuple(s), value, dtype=broadcasting.dtype_of(result))
    return shape_ops.concatenate(init, result, axis=axis)


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False) -> Any:
    """numpy.cumulative_sum (the array-API cumsum)."""
    return _cumulative(cumsum, "cumulative_sum", 0, x, axis, dtype, out, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False) -> Any:
    """numpy.cumulative_prod (the array-API cumprod)."""
    return _cumulative(cumprod, "cumulative_prod", 1, x, axis, dtype, out, include_initial)


def _cumulative(scan, name, initial, x, axis, dtype, out, include_initial):
    if axis is None and _ndim(x) > 1:
        raise ValueError("axis must be specified for multi-dimensional arrays.")
    r = scan(x, axis=axis, dtype=dtype, out=out)
    if not include_initial:
        return r
    return _include_initial(r, _axis(-1 if axis is None else axis, _ndim(r), name), initial)


def diff(a, n=1, axis=-1, prepend=None, append=None) -> Any:
    """numpy.diff (composed: differences of slices)."""
    if n == 0:
        return a
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    nd = _ndim(a)
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = _axis(axis, nd, "diff")
    def block(extra):  # a scalar becomes a slab of thickness 1 along the axis
        if _ndim(extra) == 0:
            s = list(_shape(a))
            s[axis] = 1
            return broadcasting.broadcast_to(extra, tuple(s))
        return extra

    parts = ([block(prepend)] if prepend is not None else []) + [a]
    parts += [block(append)] if append is not None else []
    if len(parts) > 1:
        a = F.concatenate(parts, axis=axis)
    for _ in range(n):
        a = _slice_along(a, axis, slice(1, None)) - _slice_along(a, axis, slice(None, -1))
    return a


def ediff1d(ary, to_end=None, to_begin=None) -> Any:
    """numpy.ediff1d."""
    d = diff(F.ravel(ary))
    parts = [F.ravel(F.asarray(p)) for p in (to_begin,) if p is not None] + [d]
    parts += [F.ravel(F.asarray(p)) for p in (to_end,) if p is not None]
    return F.concatenate(parts) if len(parts) > 1 else d


def nancumsum(a, axis=None, dtype=None, out=None) -> Any:
    """numpy.nancumsum (NaN counted as 0)."""
    return cumsum(_nan_filled(a, 0.0), axis=axis, dtype=dtype, out=out)


def nancumprod(a, axis=None, dtype=None, out=None) -> Any:
    """numpy.nancumprod (NaN counted as 1)."""
    return cumprod(_nan_filled(a, 1.0), axis=axis, dtype=dtype, out=out)


def trapezoid(y, x=None, dx=1.0, axis=-1) -> Any:
    """numpy.trapezoid (the trapezoidal rule)."""
    nd = _ndim(y)
    axis = _axis(axis, nd, "trapezoid")
    if x is None:
        d = dx
    else:
        d = diff(x, axis=-1 if _ndim(x) == 1 else axis)
        if _ndim(x) == 1 and nd > 1:
            s = [1] * nd
            s[axis] = _shape(d)[0]
            d = F.reshape(d, tuple(s))
    mid = (_slice_along(y, axis, slice(1, None)) + _slice_along(y, axis, slice(None, -1))) / 2.0
    return F.sum(d * mid, axis=axis)


# -- nan-functions and statistics -----------------------------------------------------------------


def _nan_filled(a, value):
    """``a`` with NaN replaced by ``value`` (those entries get derivative zero)."""
    mask = np.isnan(unbox_all(a))
    if not is_symbolic(mask) and not np.any(mask):  # traced: the where form, for any data
        return a
    return _E.where(mask, value, a)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False) -> Any:
    """numpy.nansum."""
    return F.sum(_nan_filled(a, 0.0), axis=axis, dtype=dtype, out=out, keepdims=keepdims)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False) -> Any:
    """numpy.nanprod."""
    return F.prod(_nan_filled(a, 1.0), axis=axis, dtype=dtype, out=out, keepdims=keepdims)


def _nan_count(a, axis, keepdims):
    """The number of non-NaN entries, in ``a``'s real dtype (so float32 stays float32)."""
    count = np.sum(~np.isnan(unbox_all(a)), axis=axis, keepdims=keepdims)
    dt = broadcasting.dtype_of(a)
    return count.astype(np.finfo(dt).dtype) if dt.kind in "fc" else count


def _all_nan_to_nan(result, a, axis, keepdims):
    empty = _nan_count(a, axis, keepdims) == 0
    if is_symbolic(empty):  # traced: the where form, for any data (no warning: the data is not known)
        return _E.where(empty, np.nan, result)
    if np.any(empty):
        warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
        return _E.where(empty, np.nan, result)
    return result


def nanmax(a, axis=None, out=None, keepdims=False) -> Any:
    """numpy.nanmax (ties share the gradient equally, as in max)."""
    r = F.max(_nan_filled(a, -np.inf), axis=axis, out=out, keepdims=keepdims)
    return _all_nan_to_nan(r, a, axis, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False) -> Any:
    """numpy.nanmin."""
    r = F.min(_nan_filled(a, np.inf), axis=axis, out=out, keepdims=keepdims)
    return _all_nan_to_nan(r, a, axis, keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False) -> Any:
    """numpy.nanmean."""
    a = _to_inexact(a)
    total = nansum(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims)
    count = _nan_count(a, axis, keepdims)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / count


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False) -> Any:
    """numpy.nanvar (|x - mean|**2 for complex, as NumPy)."""
    a = _to_inexact(a)
    m = nanmean(a, axis=axis, dtype=dtype, out=out, keepdims=True)
    d = _nan_filled(a - m, 0.0)
    count = _nan_count(a, axis, keepdims)
    with np.errstate(invalid="ignore", divide="ignore"):
        return F.sum(_abs2(d), axis=axis, keepdims=keepdims) / (count - ddof)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False) -> Any:
    """numpy.nanstd."""
    return _E.sqrt(nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims))


def ptp(a, axis=None, out=None, keepdims=False) -> Any:
    """numpy.ptp (max - min)."""
    return F.max(a, axis=axis, out=out, keepdims=keepdims) - F.min(a, axis=axis, keepdims=keepdims)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False) -> Any:
    """numpy.average (weighted mean; differentiable in ``a`` and in ``weights``)."""
    a = _to_inexact(a)
    if weights is None:
        avg = F.mean(a, axis=axis, keepdims=keepdims)
        scl = float(np.size(unbox_all(a)) / np.size(unbox_all(avg)))
    else:
        w = weights
        sa, sw = _shape(a), _shape(w)
        if sa != sw:
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            if len(sw) != 1:
                raise TypeError("1D weights expected when shapes of a and weights differ.")
            ax = _axis(axis, len(sa), "average")
            if sw[0] != sa[ax]:
                raise ValueError("Length of weights not compatible with specified axis.")
            w = F.reshape(w, tuple(sw[0] if i == ax else 1 for i in range(len(sa))))
        scl = F.sum(broadcasting.broadcast_to(w, sa) if _shape(w) != sa else w, axis=axis, keepdims=keepdims)
        if not is_symbolic(scl) and np.any(unbox_all(scl) == 0.0):  # traced: inf/nan, as a division
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = F.sum(a * w, axis=axis, keepdims=keepdims) / scl
    if returned:
        if _shape(scl) != _shape(avg):
            scl = _E.positive(broadcasting.broadcast_to(scl, _shape(avg)))  # a copy, as NumPy's
        return avg, scl
    return avg


def _reduce_to_last(a, axis):
    """``a`` with the axes in ``axis`` merged into one last axis; also the kept-dims shape."""
    s = _shape(a)
    axes = reductions.normalize_axis(axis, len(s), "reduction")
    rest = [i for i in range(len(s)) if i not in axes]
    moved = F.transpose(a, tuple(rest) + axes) if axes != tuple(range(len(s) - len(axes), len(s))) else a
    merged = F.reshape(moved, tuple(s[i] for i in rest) + (-1,))
    kept = tuple(1 if i in axes else n for i, n in enumerate(s))
    return merged, kept


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False) -> Any:
    """numpy.quantile (method='linear' only; differentiable in ``a``)."""
    F._no_out("quantile", out)
    if method != "linear":
        raise NotImplementedError(f"wengert.numpy.quantile: method={method!r}; only 'linear' is supported")
    if contains_box(q):
        raise TypeError("wengert.numpy.quantile: the derivative with respect to q is not supported; "
                        "pass q as a plain number or array")
    qv = np.asarray(q, dtype=float)
    if np.any((qv < 0) | (qv > 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    a = _to_inexact(a)
    merged, kept = _reduce_to_last(a, axis)
    n = _shape(merged)[-1]
    s = sort(merged, axis=-1)
    pos = qv * (n - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    t = pos - lo
    if np.ndim(q) == 0 and not isinstance(q, np.ndarray):  # a Python number keeps a's precision
        t = t.astype(np.finfo(broadcasting.dtype_of(a)).dtype)
    below = indexing.getitem(s, (Ellipsis, lo))
    above = indexing.getitem(s, (Ellipsis, hi))
    r = below + (above - below) * t  # shape rest + q.shape
    nq = qv.ndim
    if nq:
        nr = _ndim(r) - nq
        r = F.transpose(r, tuple(range(nr, nr + nq)) + tuple(range(nr)))
    if keepdims:
        r = F.reshape(r, qv.shape + kept)
    return r


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False) -> Any:
    """numpy.percentile (method='linear' only)."""
    if contains_box(q):
        raise TypeError("wengert.numpy.percentile: the derivative with respect to q is not supported; "
                        "pass q as a plain number or array")
    qv = np.asarray(q, dtype=float)
    if np.any((qv < 0) | (qv > 100)):
        raise ValueError("Percentiles must be in the range [0, 100]")
    return quantile(a, qv / 100.0, axis=axis, out=out, method=method, keepdims=keepdims)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False) -> Any:
    """numpy.median (the mean of the middle values when their number is even)."""
    return quantile(a, 0.5, axis=axis, out=out, keepdims=keepdims)


# -- results without a derivative -----------------------------------------------------------------

nanargmax = nondiff_primitive(np.nanargmax)
nanargmin = nondiff_primitive(np.nanargmin)
