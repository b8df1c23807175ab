"""More of NumPy's surface, composed from the rule table: cumulative and nan-ignoring reductions,
sorting and selection, padding and rolling, diagonals and triangles, kron/cross/vdot, complex parts,
and small elementwise helpers.

Nothing here defines a derivative: each function calls primitives (sorting, ``take`` and friends are
``getitem`` with index arrays computed by NumPy; ``cumprod`` is a scan of products, exact with zeros).
Signatures, axis handling and errors follow NumPy's.
"""

import builtins
import math
import warnings

import numpy as np

from wengert.numpy import _functions as F
from wengert.ops import broadcasting, cumulative, elementwise, indexing, more_elementwise, reductions
from wengert.ops import complex as complex_parts
from wengert.ops import shape as shape_ops
from wengert.primitive import nondiff_primitive
from wengert.trace import BOX_TYPES, contains_box, unbox_all

_shape = broadcasting.shape_of
_E = elementwise


def _ndim(x):
    return len(_shape(x))


def _axis(axis, ndim, fname):
    """One axis as a non-negative int (NumPy's AxisError when out of range)."""
    return reductions.normalize_axis(axis, ndim, fname)[0]


def _slice_along(x, axis, sl):
    return indexing.getitem(x, (slice(None),) * axis + (sl,))


def _is_complex(x):
    return broadcasting.dtype_of(x).kind == "c"


def _to_inexact(a):
    """Integer and boolean inputs as float64 (as NumPy's mean does)."""
    return shape_ops.astype(a, np.float64) if broadcasting.dtype_of(a).kind in "biu" else a


def _zero_for(x):
    """The zero ``where`` fills with: 0.0 for inexact ``x`` (its fast path), else ``x``'s dtype's."""
    dt = broadcasting.dtype_of(x)
    return 0.0 if dt.kind in "fc" else np.zeros((), dt)


def _abs2(d):
    """|d|**2, real for complex d."""
    if _is_complex(d):
        return complex_parts.real(d * complex_parts.conj(d))
    return d * d


# -- complex parts and elementwise helpers --------------------------------------------------------


def real(val):
    """numpy.real."""
    return complex_parts.real(val)


def imag(val):
    """numpy.imag."""
    return complex_parts.imag(val)


def conjugate(x):
    """numpy.conjugate (numpy.conj)."""
    return complex_parts.conj(x)


conj = conjugate


def angle(z, deg=False):
    """numpy.angle (composed: arctan2(imag, real); its derivative is undefined at 0)."""
    a = _E.arctan2(complex_parts.imag(z), complex_parts.real(z))
    return a * (180.0 / math.pi) if deg else a


def deg2rad(x):
    """numpy.deg2rad (numpy.radians)."""
    return x * (math.pi / 180.0)


def rad2deg(x):
    """numpy.rad2deg (numpy.degrees)."""
    return x * (180.0 / math.pi)


radians = deg2rad
degrees = rad2deg


def round(a, decimals=0, out=None):  # noqa: A001 - NumPy's name
    """numpy.round (numpy.around): derivative zero, as floor/ceil/rint."""
    F._no_out("round", out)
    return more_elementwise.round_(a, decimals)


around = round


def fix(x, out=None):
    """numpy.fix (round towards zero): derivative zero."""
    F._no_out("fix", out)
    return _E.trunc(x)


def logaddexp(x1, x2):
    """numpy.logaddexp: log(exp(x1) + exp(x2)), with its own stable rule."""
    return more_elementwise.logaddexp(x1, x2)


def logaddexp2(x1, x2):
    """numpy.logaddexp2: log2(2**x1 + 2**x2)."""
    return more_elementwise.logaddexp2(x1, x2)


def sinc(x):
    """numpy.sinc: sin(pi x) / (pi x), 1 at 0."""
    return more_elementwise.sinc(x)


def fmax(x1, x2):
    """numpy.fmax: maximum that ignores NaN (the gradient goes to the value chosen; ties split)."""
    n1, n2 = np.isnan(unbox_all(x1)), np.isnan(unbox_all(x2))
    return _E.maximum(_E.where(n1, x2, x1), _E.where(n2, x1, x2))


def fmin(x1, x2):
    """numpy.fmin: minimum that ignores NaN."""
    n1, n2 = np.isnan(unbox_all(x1)), np.isnan(unbox_all(x2))
    return _E.minimum(_E.where(n1, x2, x1), _E.where(n2, x1, x2))


def fabs(x):
    """numpy.fabs (real inputs)."""
    return _E.absolute(x)


def float_power(x1, x2):
    """numpy.float_power: power computed in float64 (complex128 for complex inputs)."""
    def up(v):
        if type(v) is float:
            return v
        return shape_ops.astype(v, np.complex128 if _is_complex(v) else np.float64)
    return _E.power(up(x1), up(x2))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """numpy.nan_to_num: replaced entries get derivative zero."""
    v = np.asarray(unbox_all(x))
    if v.dtype.kind not in "fc":
        return x
    if v.dtype.kind == "c":
        re = nan_to_num(complex_parts.real(x), nan=nan, posinf=posinf, neginf=neginf)
        im = nan_to_num(complex_parts.imag(x), nan=nan, posinf=posinf, neginf=neginf)
        return re + 1j * im
    info = np.finfo(v.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = _E.where(np.isnan(v), nan, x)
    out = _E.where(np.isposinf(v), hi, out)
    return _E.where(np.isneginf(v), lo, out)


# -- cumulative ----------------------------------------------------------------------------------


def _cumulative_args(fname, a, axis, dtype, out):
    F._no_out(fname, out)
    if dtype is not None:
        a = shape_ops.astype(a, dtype)
    if axis is None:
        return F.ravel(a), 0
    return a, _axis(axis, _ndim(a), fname)


def cumsum(a, axis=None, dtype=None, out=None):
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


def cumprod(a, axis=None, dtype=None, out=None):
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


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """numpy.cumulative_sum (the array-API cumsum)."""
    if axis is None and _ndim(x) > 1:
        raise ValueError("axis must be specified for multi-dimensional arrays.")
    r = cumsum(x, axis=axis, dtype=dtype, out=out)
    return _include_initial(r, _axis(-1 if axis is None else axis, _ndim(r), "cumulative_sum"), 0) \
        if include_initial else r


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """numpy.cumulative_prod (the array-API cumprod)."""
    if axis is None and _ndim(x) > 1:
        raise ValueError("axis must be specified for multi-dimensional arrays.")
    r = cumprod(x, axis=axis, dtype=dtype, out=out)
    return _include_initial(r, _axis(-1 if axis is None else axis, _ndim(r), "cumulative_prod"), 1) \
        if include_initial else r


def diff(a, n=1, axis=-1, prepend=None, append=None):
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
            return F.broadcast_to(extra, tuple(s))
        return extra

    parts = ([block(prepend)] if prepend is not None else []) + [a]
    parts += [block(append)] if append is not None else []
    if len(parts) > 1:
        a = F.concatenate(parts, axis=axis)
    for _ in range(n):
        a = _slice_along(a, axis, slice(1, None)) - _slice_along(a, axis, slice(None, -1))
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    """numpy.ediff1d."""
    d = diff(F.ravel(ary))
    parts = [F.ravel(F.asarray(p)) for p in (to_begin,) if p is not None] + [d]
    parts += [F.ravel(F.asarray(p)) for p in (to_end,) if p is not None]
    return F.concatenate(parts) if len(parts) > 1 else d


def nancumsum(a, axis=None, dtype=None, out=None):
    """numpy.nancumsum (NaN counted as 0)."""
    return cumsum(_nan_filled(a, 0.0), axis=axis, dtype=dtype, out=out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """numpy.nancumprod (NaN counted as 1)."""
    return cumprod(_nan_filled(a, 1.0), axis=axis, dtype=dtype, out=out)


def trapezoid(y, x=None, dx=1.0, axis=-1):
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


# -- nan-ignoring reductions -----------------------------------------------------------------------


def _nan_filled(a, value):
    """``a`` with NaN replaced by ``value`` (those entries get derivative zero)."""
    mask = np.isnan(unbox_all(a))
    if not np.any(mask):
        return a
    return _E.where(mask, value, a)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    """numpy.nansum."""
    return F.sum(_nan_filled(a, 0.0), axis=axis, dtype=dtype, out=out, keepdims=keepdims)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False):
    """numpy.nanprod."""
    return F.prod(_nan_filled(a, 1.0), axis=axis, dtype=dtype, out=out, keepdims=keepdims)


def _nan_count(a, axis, keepdims):
    return np.sum(~np.isnan(unbox_all(a)), axis=axis, keepdims=keepdims)


def _all_nan_to_nan(result, a, axis, keepdims):
    empty = _nan_count(a, axis, keepdims) == 0
    if np.any(empty):
        warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
        return _E.where(empty, np.nan, result)
    return result


def nanmax(a, axis=None, out=None, keepdims=False):
    """numpy.nanmax (ties share the gradient equally, as in max)."""
    r = F.max(_nan_filled(a, -np.inf), axis=axis, out=out, keepdims=keepdims)
    return _all_nan_to_nan(r, a, axis, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False):
    """numpy.nanmin."""
    r = F.min(_nan_filled(a, np.inf), axis=axis, out=out, keepdims=keepdims)
    return _all_nan_to_nan(r, a, axis, keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    """numpy.nanmean."""
    a = _to_inexact(a)
    total = nansum(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims)
    count = _nan_count(a, axis, keepdims)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / count


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """numpy.nanvar (|x - mean|**2 for complex, as NumPy)."""
    a = _to_inexact(a)
    m = nanmean(a, axis=axis, dtype=dtype, out=out, keepdims=True)
    d = _nan_filled(a - m, 0.0)
    count = _nan_count(a, axis, keepdims)
    with np.errstate(invalid="ignore", divide="ignore"):
        return F.sum(_abs2(d), axis=axis, keepdims=keepdims) / (count - ddof)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """numpy.nanstd."""
    return _E.sqrt(nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims))


def ptp(a, axis=None, out=None, keepdims=False):
    """numpy.ptp (max - min)."""
    return F.max(a, axis=axis, out=out, keepdims=keepdims) - F.min(a, axis=axis, keepdims=keepdims)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
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
        scl = F.sum(F.broadcast_to(w, sa) if _shape(w) != sa else w, axis=axis, keepdims=keepdims)
        if np.any(unbox_all(scl) == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = F.sum(a * w, axis=axis, keepdims=keepdims) / scl
    if returned:
        if _shape(scl) != _shape(avg):
            scl = F.broadcast_to(scl, _shape(avg))
        return avg, scl
    return avg


# -- sorting and selection -------------------------------------------------------------------------


def take_along_axis(arr, indices, axis=-1):
    """numpy.take_along_axis (``getitem`` with broadcast index arrays)."""
    idx = np.asarray(unbox_all(indices))
    if idx.dtype.kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(f"when axis=None, `indices` must have a single dimension, got {idx.shape}")
        return indexing.getitem(F.ravel(arr), idx)
    nd = _ndim(arr)
    if idx.ndim != nd:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    axis = _axis(axis, nd, "take_along_axis")
    s = _shape(arr)
    index = tuple(idx if i == axis else np.arange(n).reshape((1,) * i + (n,) + (1,) * (nd - i - 1))
                  for i, n in enumerate(s))
    return indexing.getitem(arr, index)


def take(a, indices, axis=None, out=None, mode="raise"):
    """numpy.take (``getitem`` along one axis)."""
    F._no_out("take", out)
    idx = np.asarray(unbox_all(indices))
    if axis is None:
        a, axis = F.ravel(a), 0
    else:
        axis = _axis(axis, _ndim(a), "take")
    n = _shape(a)[axis]
    if mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1)
    elif mode == "raise":
        bad = idx[(idx >= n) | (idx < -n)]
        if bad.size:
            raise IndexError(f"index {int(bad.flat[0])} is out of bounds for axis {axis} with size {n}")
    else:
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    key = int(idx) if idx.ndim == 0 else idx
    return indexing.getitem(a, (slice(None),) * axis + (key,))


def sort(a, axis=-1, kind=None, order=None):
    """numpy.sort (values; the gradient follows each value to where it came from)."""
    if order is not None:
        raise NotImplementedError("wengert.numpy.sort: order= (structured arrays) is not supported")
    if axis is None:
        a, axis = F.ravel(a), 0
    axis = _axis(axis, _ndim(a), "sort")
    return take_along_axis(a, np.argsort(unbox_all(a), axis=axis, kind=kind), axis)


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """numpy.partition (values)."""
    if order is not None:
        raise NotImplementedError("wengert.numpy.partition: order= is not supported")
    if axis is None:
        a, axis = F.ravel(a), 0
    axis = _axis(axis, _ndim(a), "partition")
    return take_along_axis(a, np.argpartition(unbox_all(a), kth, axis=axis, kind=kind), axis)


def _reduce_to_last(a, axis):
    """``a`` with the axes in ``axis`` merged into one last axis; also the kept-dims shape."""
    s = _shape(a)
    axes = reductions.normalize_axis(axis, len(s), "reduction")
    rest = [i for i in range(len(s)) if i not in axes]
    moved = F.transpose(a, tuple(rest) + axes) if axes != tuple(range(len(s) - len(axes), len(s))) else a
    merged = F.reshape(moved, tuple(s[i] for i in rest) + (-1,))
    kept = tuple(1 if i in axes else n for i, n in enumerate(s))
    return merged, kept


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
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


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False):
    """numpy.percentile (method='linear' only)."""
    if contains_box(q):
        raise TypeError("wengert.numpy.percentile: the derivative with respect to q is not supported; "
                        "pass q as a plain number or array")
    qv = np.asarray(q, dtype=float)
    if np.any((qv < 0) | (qv > 100)):
        raise ValueError("Percentiles must be in the range [0, 100]")
    return quantile(a, qv / 100.0, axis=axis, out=out, method=method, keepdims=keepdims)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """numpy.median (the mean of the middle values when their number is even)."""
    return quantile(a, 0.5, axis=axis, out=out, keepdims=keepdims)


def select(condlist, choicelist, default=0):
    """numpy.select (composed: nested where; the first true condition wins)."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    conds = [np.asarray(unbox_all(c)) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype.kind != "b":
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    out = default
    for c, choice in zip(reversed(conds), reversed(list(choicelist))):
        out = _E.where(c, choice, out)
    return out


# -- shapes ------------------------------------------------------------------------------------


def roll(a, shift, axis=None):
    """numpy.roll (composed: two slices joined)."""
    if axis is None:
        return F.reshape(roll(F.ravel(a), shift, 0), _shape(a))
    nd = _ndim(a)
    shifts = {}
    for sh, ax in np.broadcast(shift, axis):
        ax = _axis(int(ax), nd, "roll")
        shifts[ax] = shifts.get(ax, 0) + int(sh)
    for ax, sh in shifts.items():
        n = _shape(a)[ax]
        sh = sh % n if n else 0
        if sh:
            a = shape_ops.concatenate(_slice_along(a, ax, slice(n - sh, None)),
                                      _slice_along(a, ax, slice(0, n - sh)), axis=ax)
    return a


def rot90(m, k=1, axes=(0, 1)):
    """numpy.rot90 (composed: flips and a transpose)."""
    axes = tuple(axes)
    nd = _ndim(m)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    if axes[0] == axes[1] or builtins.abs(axes[0] - axes[1]) == nd:
        raise ValueError("Axes must be different.")
    if not (-nd <= axes[0] < nd and -nd <= axes[1] < nd):
        raise ValueError(f"Axes={axes} out of range for array of ndim={nd}.")
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return F.flip(F.flip(m, axes[0]), axes[1])
    perm = list(range(nd))
    i, j = axes[0] % nd, axes[1] % nd
    perm[i], perm[j] = perm[j], perm[i]
    if k == 1:
        return F.transpose(F.flip(m, axes[1]), tuple(perm))
    return F.flip(F.transpose(m, tuple(perm)), axes[1])


_PAD_MODES = ("constant", "edge", "linear_ramp", "maximum", "mean", "median", "minimum", "reflect",
              "symmetric", "wrap", "empty")


def pad(array, pad_width, mode="constant", **kwargs):
    """numpy.pad (modes 'constant', 'edge', 'reflect', 'symmetric', 'wrap')."""
    if callable(mode) or mode not in _PAD_MODES:
        raise ValueError(f"mode {mode!r} is not supported")
    nd = _ndim(array)
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")
    widths = np.broadcast_to(widths, (nd, 2))
    if np.any(widths < 0):
        raise ValueError("index can't contain negative values")
    if mode == "constant":
        values = kwargs.pop("constant_values", 0)
        if kwargs:
            raise ValueError(f"unsupported keyword arguments for mode 'constant': {set(kwargs)}")
        cv = np.broadcast_to(np.asarray(unbox_all(values)), (nd, 2)) if not contains_box(values) else None
        dt = broadcasting.dtype_of(array)
        out = array
        for ax in range(nd):
            before, after = (int(w) for w in widths[ax])
            if not (before or after):
                continue
            parts = []
            for width, side in ((before, 0), (after, 1)):
                s = list(_shape(out))
                s[ax] = width
                if cv is not None:
                    block = np.full(tuple(s), cv[ax, side], dtype=dt)
                else:
                    block = F.broadcast_to(shape_ops.astype(values, dt), tuple(s))
                parts.append(block)
            out = shape_ops.concatenate(parts[0], out, parts[1], axis=ax)
        return out
    if mode in ("edge", "reflect", "symmetric", "wrap"):
        out = array
        for ax in range(nd):
            before, after = (int(w) for w in widths[ax])
            if not (before or after):
                continue
            src = np.pad(np.arange(_shape(out)[ax]), (before, after), mode=mode, **kwargs)
            out = indexing.getitem(out, (slice(None),) * ax + (src,))
        return out
    raise NotImplementedError(
        f"wengert.numpy.pad: mode={mode!r} has no derivative in wengert; use 'constant', 'edge', "
        f"'reflect', 'symmetric' or 'wrap'")


def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy.diagonal (a copy; the diagonal is the last axis)."""
    nd = _ndim(a)
    if nd < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    i, j = _axis(axis1, nd, "diagonal"), _axis(axis2, nd, "diagonal")
    if i == j:
        raise ValueError("axis1 and axis2 cannot be the same")
    moved = F.moveaxis(a, (i, j), (-2, -1))
    n, m = _shape(moved)[-2:]
    if offset >= 0:
        length = builtins.max(0, builtins.min(n, m - offset))
        rows = np.arange(length)
        cols = rows + offset
    else:
        length = builtins.max(0, builtins.min(n + offset, m))
        cols = np.arange(length)
        rows = cols - offset
    return indexing.getitem(moved, (Ellipsis, rows, cols))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """numpy.trace (composed: the diagonal summed)."""
    F._no_out("trace", out)
    return F.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k=0):
    """numpy.diag: the diagonal of a 2-D array, or a 2-D array with ``v`` on its k-th diagonal."""
    nd = _ndim(v)
    if nd == 2:
        return diagonal(v, k)
    if nd != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = _shape(v)[0]
    size = n + builtins.abs(k)
    if k:
        v = shape_ops.concatenate(v, np.zeros(builtins.abs(k), dtype=broadcasting.dtype_of(v)), axis=0)
    line = F.reshape(v, (size, 1) if k >= 0 else (1, size))
    return _E.where(np.eye(size, k=k, dtype=bool), F.broadcast_to(line, (size, size)), _zero_for(v))


def diagflat(v, k=0):
    """numpy.diagflat."""
    return diag(F.ravel(v), k)


def tril(m, k=0):
    """numpy.tril (entries above the k-th diagonal set to zero)."""
    mask = np.tri(*_shape(m)[-2:], k=k, dtype=bool)
    return _E.where(mask, m, _zero_for(m))


def triu(m, k=0):
    """numpy.triu (entries below the k-th diagonal set to zero)."""
    mask = np.tri(*_shape(m)[-2:], k=k - 1, dtype=bool)
    return _E.where(mask, _zero_for(m), m)


def atleast_1d(*arys):
    """numpy.atleast_1d (a tuple for several arrays)."""
    res = tuple(F.reshape(a, (1,)) if _ndim(a) == 0 else a for a in arys)
    return res[0] if len(res) == 1 else res


def atleast_2d(*arys):
    """numpy.atleast_2d (a tuple for several arrays)."""
    res = tuple(F.reshape(a, (1,) * (2 - _ndim(a)) + _shape(a)) if _ndim(a) < 2 else a for a in arys)
    return res[0] if len(res) == 1 else res


def atleast_3d(*arys):
    """numpy.atleast_3d: (n,) -> (1, n, 1), (m, n) -> (m, n, 1) (a tuple for several arrays)."""
    res = []
    for a in arys:
        s = _shape(a)
        if len(s) == 0:
            a = F.reshape(a, (1, 1, 1))
        elif len(s) == 1:
            a = F.reshape(a, (1, s[0], 1))
        elif len(s) == 2:
            a = F.reshape(a, s + (1,))
        res.append(a)
    return res[0] if len(res) == 1 else tuple(res)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    """numpy.full_like; differentiable in ``fill_value`` (as jax.numpy.full_like)."""
    if not contains_box(fill_value):
        return np.full_like(unbox_all(a), unbox_all(fill_value), dtype=dtype, order=order,
                            subok=subok, shape=shape)
    dt = dtype if dtype is not None else broadcasting.dtype_of(a)
    s = _shape(a) if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
    return F.broadcast_to(shape_ops.astype(fill_value, dt), s)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """numpy.meshgrid (a tuple of arrays)."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    ones = (1,) * nd
    out = [F.reshape(x, ones[:i] + (-1,) + ones[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and nd > 1:
        out[0] = F.reshape(out[0], (1, -1) + ones[2:])
        out[1] = F.reshape(out[1], (-1, 1) + ones[2:])
    if not sparse:
        full = np.broadcast_shapes(*[_shape(o) for o in out])
        out = [F.broadcast_to(o, full) for o in out]
    return tuple(out)


def append(arr, values, axis=None):
    """numpy.append."""
    if axis is None:
        return F.concatenate([F.ravel(arr), F.ravel(values)], axis=0)
    return F.concatenate([arr, values], axis=axis)


def column_stack(tup):
    """numpy.column_stack."""
    return F.concatenate([F.reshape(a, (-1, 1)) if _ndim(a) < 2 else a for a in tup], axis=1)


def dstack(tup):
    """numpy.dstack."""
    return F.concatenate([atleast_3d(a) for a in tup], axis=2)


# -- products ------------------------------------------------------------------------------------


def vdot(a, b):
    """numpy.vdot: sum(conj(a) * b) over the flattened arrays."""
    fa, fb = F.ravel(a), F.ravel(b)
    if _shape(fa) != _shape(fb):
        raise ValueError("cannot reshape array: vdot needs arrays of the same size")
    if _is_complex(fa):
        fa = complex_parts.conj(fa)
    return F.sum(fa * fb)


def kron(a, b):
    """numpy.kron (composed: a broadcast product, reshaped)."""
    sa, sb = _shape(a), _shape(b)
    nd = builtins.max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    ar = F.reshape(a, tuple(v for n in sa for v in (n, 1)))
    br = F.reshape(b, tuple(v for n in sb for v in (1, n)))
    return F.reshape(ar * br, tuple(p * q for p, q in zip(sa, sb)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """numpy.cross (vectors of length 2 or 3 along ``axisa``/``axisb``)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = F.moveaxis(a, _axis(axisa, _ndim(a), "cross"), -1)
    b = F.moveaxis(b, _axis(axisb, _ndim(b), "cross"), -1)
    na, nb = _shape(a)[-1], _shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")

    def part(v, n, i):
        return indexing.getitem(v, (Ellipsis, i)) if i < n else 0.0

    a0, a1, a2 = (part(a, na, i) for i in range(3))
    b0, b1, b2 = (part(b, nb, i) for i in range(3))
    z = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return z
    full = np.broadcast_shapes(_shape(a)[:-1], _shape(b)[:-1])
    comps = [F.broadcast_to(c, full) if _shape(c) != full else c
             for c in (a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z)]
    c = F.stack(comps, axis=-1)
    return F.moveaxis(c, -1, _axis(axisc, _ndim(c), "cross"))


# -- functions whose results carry no derivative ----------------------------------------------------

nanargmax = nondiff_primitive(np.nanargmax)
nanargmin = nondiff_primitive(np.nanargmin)
argpartition = nondiff_primitive(np.argpartition)
searchsorted = nondiff_primitive(np.searchsorted)
digitize = nondiff_primitive(np.digitize)
iscomplex = nondiff_primitive(np.iscomplex)
isreal = nondiff_primitive(np.isreal)
iscomplexobj = nondiff_primitive(np.iscomplexobj)
isrealobj = nondiff_primitive(np.isrealobj)
isposinf = nondiff_primitive(np.isposinf)
isneginf = nondiff_primitive(np.isneginf)
tri = np.tri
tril_indices = np.tril_indices
triu_indices = np.triu_indices
diag_indices = np.diag_indices
indices = np.indices

DIFFERENTIABLE = [
    "real", "imag", "conj", "conjugate", "angle", "deg2rad", "rad2deg", "radians", "degrees",
    "round", "around", "fix", "logaddexp", "logaddexp2", "sinc", "fmax", "fmin", "fabs",
    "float_power", "nan_to_num",
    "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "diff", "ediff1d", "nancumsum",
    "nancumprod", "trapezoid",
    "nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "ptp", "average",
    "take_along_axis", "take", "sort", "partition", "quantile", "percentile", "median", "select",
    "roll", "rot90", "pad", "diagonal", "trace", "diag", "diagflat", "tril", "triu",
    "atleast_1d", "atleast_2d", "atleast_3d", "full_like", "meshgrid", "append", "column_stack",
    "dstack", "vdot", "kron", "cross",
]
NOT_DIFFERENTIABLE = [
    "nanargmax", "nanargmin", "argpartition", "searchsorted", "digitize", "iscomplex", "isreal",
    "iscomplexobj", "isrealobj", "isposinf", "isneginf", "tri", "tril_indices", "triu_indices",
    "diag_indices", "indices",
]
