"""More of NumPy's array functions, composed from the rule table: sorting and selection (``take``,
``take_along_axis``, ``sort``, ``partition``, ``select``), rearranging (``roll``, ``rot90``, ``pad``,
``meshgrid``, ``atleast_3d``, ...), diagonals and triangles, and ``vdot``/``kron``/``cross``.

Also ``rollaxis``, ``broadcast_arrays``, ``unstack``, the ``h``/``v``/``dsplit`` splits and NumPy 2's
``matvec``/``vecmat``. Nothing here defines a derivative: sorting and taking are ``getitem`` with
index arrays computed by NumPy, padding and rolling are slices joined by ``concatenate``. Signatures,
axis handling and errors follow NumPy's.
"""

import builtins
from typing import Any

import numpy as np

from wengert.core.extend import defbatch, nondiff_primitive
from wengert.core.trace import contains_box, is_symbolic, unbox_all
from wengert.numpy import _functions as F
from wengert.numpy._creation import buffer_like
from wengert.numpy._layout import new_array, numpy_view
from wengert.rules import broadcasting, elementwise, indexing, nondiff, products, reductions
from wengert.rules import complex as complex_parts
from wengert.rules import shape as shape_ops
from wengert.rules.nondiff import batch_along_axis

_shape = broadcasting.shape_of
_E = elementwise


def _ndim(x):
    return len(_shape(x))


def _axis(axis, ndim, fname):
    """One axis as a non-negative int (NumPy's AxisError when out of range)."""
    return reductions.normalize_axis(axis, ndim, fname)[0]


def _slice_along(x, axis, sl):
    return indexing.getitem(x, (slice(None),) * axis + (sl,))


def _zero_for(x):
    """The zero ``where`` fills with: 0.0 for inexact ``x`` (its fast path), else ``x``'s dtype's."""
    dt = broadcasting.dtype_of(x)
    return 0.0 if dt.kind in "fc" else np.zeros((), dt)


# -- sorting and selection -------------------------------------------------------------------------


def take_along_axis(arr, indices, axis=-1) -> Any:
    """numpy.take_along_axis (``getitem`` with broadcast index arrays)."""
    idx = unbox_all(indices)
    idx = idx if is_symbolic(idx) else np.asarray(idx)  # a traced argsort's indices stay symbolic
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


def take(a, indices, axis=None, out=None, mode="raise") -> Any:
    """numpy.take (``getitem`` along one axis)."""
    F._no_out("take", out)
    idx = unbox_all(indices)
    idx = idx if is_symbolic(idx) else np.asarray(idx)  # a batch of indices (wg.vmap) stays one
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
        bad = None if is_symbolic(idx) else idx[(idx >= n) | (idx < -n)]  # a batch's: NumPy's indexing checks
        if bad is not None and bad.size:
            raise IndexError(f"index {int(bad.flat[0])} is out of bounds for axis {axis} with size {n}")
    else:
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    key = int(idx) if not is_symbolic(idx) and idx.ndim == 0 else idx
    return indexing.getitem(a, (slice(None),) * axis + (key,) if axis else key)


def sort(a, axis=-1, kind=None, order=None) -> Any:
    """numpy.sort (values; the gradient follows each value to where it came from)."""
    if order is not None:
        raise NotImplementedError("wengert.numpy.sort: order= (structured arrays) is not supported")
    if axis is None:
        a, axis = F.ravel(a), 0
    axis = _axis(axis, _ndim(a), "sort")
    return take_along_axis(a, np.argsort(unbox_all(a), axis=axis, kind=kind), axis)


def partition(a, kth, axis=-1, kind="introselect", order=None) -> Any:
    """numpy.partition (values)."""
    if order is not None:
        raise NotImplementedError("wengert.numpy.partition: order= is not supported")
    if axis is None:
        a, axis = F.ravel(a), 0
    axis = _axis(axis, _ndim(a), "partition")
    return take_along_axis(a, np.argpartition(unbox_all(a), kth, axis=axis, kind=kind), axis)


def select(condlist, choicelist, default=0) -> Any:
    """numpy.select (composed: nested where; the first true condition wins)."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    conds = [c if is_symbolic(c) else np.asarray(c) for c in map(unbox_all, condlist)]
    for i, c in enumerate(conds):
        if c.dtype.kind != "b":
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    out = default
    for c, choice in zip(reversed(conds), reversed(list(choicelist))):
        out = _E.where(c, choice, out)
    return out


# -- rearranging, diagonals, triangles -------------------------------------------------------------


def roll(a, shift, axis=None) -> Any:
    """numpy.roll (composed: two slices joined; a new array, as NumPy's, also for a shift of 0)."""
    if axis is None:
        return new_array(F.reshape(roll(F.ravel(a), shift, 0), _shape(a)), a)
    return new_array(_roll(a, shift, axis), a)


def _roll(a, shift, axis):
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


def rot90(m, k=1, axes=(0, 1)) -> Any:
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


def pad(array, pad_width, mode="constant", **kwargs) -> Any:
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
                    block = broadcasting.broadcast_to(shape_ops.astype(values, dt), tuple(s))
                parts.append(block)
            out = shape_ops.concatenate(parts[0], out, parts[1], axis=ax)
        return new_array(out, array)
    if mode in ("edge", "reflect", "symmetric", "wrap"):
        out = array
        for ax in range(nd):
            before, after = (int(w) for w in widths[ax])
            if not (before or after):
                continue
            src = np.pad(np.arange(_shape(out)[ax]), (before, after), mode=mode, **kwargs)
            out = indexing.getitem(out, (slice(None),) * ax + (src,))
        return new_array(out, array)
    raise NotImplementedError(
        f"wengert.numpy.pad: mode={mode!r} has no derivative in wengert; use 'constant', 'edge', "
        f"'reflect', 'symmetric' or 'wrap'")


def diagonal(a, offset=0, axis1=0, axis2=1) -> Any:
    """numpy.diagonal: the diagonal as the last axis; NumPy's read-only view (a write into ``a`` is seen
    in it, a write into it is NumPy's ValueError)."""
    out = _diagonal(a, offset, axis1, axis2)
    return numpy_view(out, a, lambda base: _diagonal(base, offset, axis1, axis2), "diagonal", readonly=True,
                        numpy_fun=lambda base: np.diagonal(base, offset, axis1, axis2))


def _diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal, gathered (a copy)."""
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


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None) -> Any:
    """numpy.trace (composed: the diagonal summed)."""
    F._no_out("trace", out)
    return F.sum(_diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k=0) -> Any:
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
    square = broadcasting.broadcast_to(line, (size, size))
    return _E.where(np.eye(size, k=k, dtype=bool), square, _zero_for(v))


def diagflat(v, k=0) -> Any:
    """numpy.diagflat."""
    return diag(F.ravel(v), k)


def tril(m, k=0) -> Any:
    """numpy.tril (entries above the k-th diagonal set to zero)."""
    mask = np.tri(*_shape(m)[-2:], k=k, dtype=bool)  # type: ignore[call-overload]  # one or two sizes
    return _E.where(mask, m, _zero_for(m))


def triu(m, k=0) -> Any:
    """numpy.triu (entries below the k-th diagonal set to zero)."""
    mask = np.tri(*_shape(m)[-2:], k=k - 1, dtype=bool)  # type: ignore[call-overload]  # one or two sizes
    return _E.where(mask, _zero_for(m), m)


def atleast_1d(*arys) -> Any:
    """numpy.atleast_1d (a tuple for several arrays)."""
    res = tuple(F.reshape(a, (1,)) if _ndim(a) == 0 else a for a in arys)
    return res[0] if len(res) == 1 else res


def atleast_2d(*arys) -> Any:
    """numpy.atleast_2d (a tuple for several arrays)."""
    res = tuple(F.reshape(a, (1,) * (2 - _ndim(a)) + _shape(a)) if _ndim(a) < 2 else a for a in arys)
    return res[0] if len(res) == 1 else res


def atleast_3d(*arys) -> Any:
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


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None) -> Any:
    """numpy.full_like; differentiable in ``fill_value`` (as jax.numpy.full_like); a new array that
    traced values can be stored into, as NumPy's is."""
    if not contains_box(fill_value):
        return buffer_like(a, nondiff.full_like(a, unbox_all(fill_value), dtype=dtype, order=order,
                                                subok=subok, shape=shape))  # a program records it
    dt = dtype if dtype is not None else broadcasting.dtype_of(a)
    s = _shape(a) if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
    # a new array, not broadcast_to's read-only view: written into, it writes nothing else
    filled = broadcasting.broadcast_to(shape_ops.astype(fill_value, dt), s)
    return buffer_like(a, elementwise.positive(filled))


def meshgrid(*xi, copy=True, sparse=False, indexing="xy") -> Any:
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
    if copy:  # new arrays, as NumPy's (not broadcast_to's read-only views of xi)
        out = [new_array(o, o) for o in out]
    return tuple(out)


def append(arr, values, axis=None) -> Any:
    """numpy.append."""
    if axis is None:
        return F.concatenate([F.ravel(arr), F.ravel(values)], axis=0)
    return F.concatenate([arr, values], axis=axis)


def column_stack(tup) -> Any:
    """numpy.column_stack."""
    return F.concatenate([F.reshape(a, (-1, 1)) if _ndim(a) < 2 else a for a in tup], axis=1)


def dstack(tup) -> Any:
    """numpy.dstack."""
    return F.concatenate([atleast_3d(a) for a in tup], axis=2)


# -- products -------------------------------------------------------------------------------------


def vdot(a, b) -> Any:
    """numpy.vdot: sum(conj(a) * b) over the flattened arrays."""
    fa, fb = F.ravel(a), F.ravel(b)
    if _shape(fa) != _shape(fb):
        raise ValueError("cannot reshape array: vdot needs arrays of the same size")
    if complex_parts.is_complex(fa):
        fa = complex_parts.conj(fa)
    return F.sum(fa * fb)


def kron(a, b) -> Any:
    """numpy.kron (composed: a broadcast product, reshaped)."""
    sa, sb = _shape(a), _shape(b)
    nd = builtins.max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    ar = F.reshape(a, tuple(v for n in sa for v in (n, 1)))
    br = F.reshape(b, tuple(v for n in sb for v in (1, n)))
    return F.reshape(ar * br, tuple(p * q for p, q in zip(sa, sb)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None) -> Any:
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
    comps = [broadcasting.broadcast_to(c, full) if _shape(c) != full else c
             for c in (a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z)]
    c = F.stack(comps, axis=-1)
    return F.moveaxis(c, -1, _axis(axisc, _ndim(c), "cross"))


# -- results without a derivative -----------------------------------------------------------------

argpartition = nondiff_primitive(np.argpartition)
searchsorted = nondiff_primitive(np.searchsorted)


def _batch_searchsorted(prim, values, batched, kwargs):
    """Sorted ``a`` the same for every example: one call on the batch of ``v``. A batch of sorted
    ``a``: the insertion point is the count of ``a``'s elements before ``v`` (``a < v`` for the left
    side, ``a <= v`` for the right, NaN sorting last as in NumPy), every example at once."""
    if any(batched[2:]) or set(kwargs) - {"side"} or len(values) > 2:
        return NotImplemented
    if not batched[0]:
        return prim(*values, **kwargs)
    a, v = (unbox_all(x) for x in values)
    if len(np.shape(a)) != 2 or not all(isinstance(x, (np.ndarray, np.generic, float, int)) for x in (a, v)):
        return NotImplemented
    v_rows = v if batched[1] else np.broadcast_to(v, np.shape(a)[:1] + np.shape(v))
    flat = np.reshape(v_rows, (np.shape(a)[0], -1, 1))
    rows = np.reshape(a, (np.shape(a)[0], 1, -1))
    if kwargs.get("side", "left") == "right":
        before = (rows <= flat) | np.isnan(flat)
    else:
        before = (rows < flat) | (np.isnan(flat) & ~np.isnan(rows))
    return np.reshape(np.count_nonzero(before, axis=-1).astype(np.intp), np.shape(v_rows))


defbatch(searchsorted, _batch_searchsorted)
defbatch(argpartition, batch_along_axis(2, -1))
digitize = nondiff_primitive(np.digitize)
tri = np.tri
tril_indices = np.tril_indices
triu_indices = np.triu_indices
diag_indices = np.diag_indices
indices = np.indices


# -- moving axes, broadcasting together, splitting; NumPy 2's matrix-vector products --------------

def rollaxis(a, axis, start=0) -> Any:
    """numpy.rollaxis (moveaxis with NumPy's older convention for ``start``)."""
    n = len(_shape(a))
    (axis,) = reductions.normalize_axis(axis, n, "rollaxis")
    if start < 0:
        start += n
    if not 0 <= start <= n:
        raise np.exceptions.AxisError(
            f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in")
    if axis < start:
        start -= 1
    return F.moveaxis(a, axis, start) if axis != start else a


def broadcast_arrays(*args, subok=False) -> Any:
    """numpy.broadcast_arrays (a tuple, as NumPy 2): the arrays themselves where they all have the
    shape already, as NumPy's; else views (read-only: NumPy 2 warns on a write into its views)."""
    shape = np.broadcast_shapes(*[_shape(a) for a in args])
    if all(_shape(a) == shape for a in args):
        return tuple(F.asarray(a) for a in args)
    return tuple(F.broadcast_to(a, shape) for a in args)


def unstack(x, /, *, axis=0) -> Any:
    """numpy.unstack: the slices along ``axis``, as a tuple."""
    moved = F.moveaxis(x, axis, 0)
    return tuple(moved[i] for i in range(_shape(moved)[0]))


def hsplit(ary, indices_or_sections) -> Any:
    """numpy.hsplit."""
    if len(_shape(ary)) == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return F.split(ary, indices_or_sections, axis=1 if len(_shape(ary)) > 1 else 0)


def vsplit(ary, indices_or_sections) -> Any:
    """numpy.vsplit."""
    if len(_shape(ary)) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return F.split(ary, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections) -> Any:
    """numpy.dsplit."""
    if len(_shape(ary)) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return F.split(ary, indices_or_sections, axis=2)


def matvec(x1, x2, /) -> Any:
    """numpy.matvec: the matrix-vector product over the last axes."""
    return products.einsum("...ij,...j->...i", x1, x2)


def vecmat(x1, x2, /) -> Any:
    """numpy.vecmat: conj(x1) times the matrix x2, over the last axes."""
    return products.einsum("...j,...ji->...i", complex_parts.conj_of(x1), x2)
