"""More of NumPy's functions, composed from wengert's: constructors with traced arguments
(``full``, ``linspace``, ``logspace``), copies and casts, splits and stacks, and the
matrix-vector products of NumPy 2. Nothing here defines a derivative."""

import numpy as np

from wengert.core.trace import contains_box
from wengert.numpy import _functions as F
from wengert.rules import broadcasting, cplx, elementwise, products, reductions
from wengert.rules import shape as shape_ops

__all__ = ["full", "linspace", "logspace", "copy", "astype", "rollaxis", "broadcast_arrays",
           "unstack", "hsplit", "vsplit", "dsplit", "matvec", "vecmat"]

_shape = broadcasting.shape_of


def full(shape, fill_value, dtype=None, order="C"):
    """numpy.full; differentiable in ``fill_value`` (as jax.numpy.full)."""
    if not contains_box(fill_value):
        return np.full(shape, fill_value, dtype=dtype, order=order)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if dtype is not None:
        fill_value = shape_ops.astype(fill_value, dtype)
    return F.broadcast_to(fill_value, shape)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """numpy.linspace; differentiable in ``start`` and ``stop`` (as jax.numpy.linspace)."""
    if not (contains_box(start) or contains_box(stop)):
        return np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
    # start + (stop - start) * t: NumPy's values to rounding, in NumPy's dtype (float32 stays float32)
    weak = [v if type(v) in (int, float, complex) else None for v in (start, stop)]  # as NumPy: weak
    start, stop = F.asarray(start), F.asarray(stop)
    kind = np.result_type(*(w if w is not None else v.dtype for w, v in zip(weak, (start, stop))), 1.0)
    steps = np.linspace(0.0, 1.0, num, endpoint, dtype=np.finfo(kind).dtype)
    ndim = len(np.broadcast_shapes(_shape(start), _shape(stop)))
    t = steps.reshape((-1,) + (1,) * ndim)
    out = start + (stop - start) * t
    if axis != 0:
        out = F.moveaxis(out, 0, axis)
    if dtype is not None:
        out = shape_ops.astype(out, dtype)
    if retstep:
        div = (num - 1) if endpoint else num
        return out, (stop - start) / div if div > 0 else np.nan
    return out


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """numpy.logspace: ``base ** linspace(start, stop)``."""
    if not (contains_box(start) or contains_box(stop) or contains_box(base)):
        return np.logspace(start, stop, num, endpoint, base, dtype, axis)
    out = elementwise.power(base, linspace(start, stop, num, endpoint, axis=axis))
    return out if dtype is None else shape_ops.astype(out, dtype)


def copy(a, order="K", subok=False):
    """numpy.copy: a new traced value equal to ``a``."""
    if not contains_box(a):
        return np.copy(a, order=order, subok=subok)
    if type(a) is list or type(a) is tuple:  # a list holding traced values: its array is already new
        return F.array(a)
    return elementwise.positive(a)


def astype(x, dtype, /, *, copy=True, device=None):
    """numpy.astype."""
    if not contains_box(x):
        return np.astype(x, dtype, copy=copy)
    return shape_ops.astype(x, dtype)


def rollaxis(a, axis, start=0):
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


def broadcast_arrays(*args, subok=False):
    """numpy.broadcast_arrays (a tuple, as NumPy 2)."""
    shape = np.broadcast_shapes(*[_shape(a) for a in args])
    return tuple(F.broadcast_to(a, shape) for a in args)


def unstack(x, /, *, axis=0):
    """numpy.unstack: the slices along ``axis``, as a tuple."""
    moved = F.moveaxis(x, axis, 0)
    return tuple(moved[i] for i in range(_shape(moved)[0]))


def hsplit(ary, indices_or_sections):
    """numpy.hsplit."""
    if len(_shape(ary)) == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return F.split(ary, indices_or_sections, axis=1 if len(_shape(ary)) > 1 else 0)


def vsplit(ary, indices_or_sections):
    """numpy.vsplit."""
    if len(_shape(ary)) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return F.split(ary, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    """numpy.dsplit."""
    if len(_shape(ary)) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return F.split(ary, indices_or_sections, axis=2)


def matvec(x1, x2, /):
    """numpy.matvec: the matrix-vector product over the last axes."""
    return products.einsum("...ij,...j->...i", x1, x2)


def vecmat(x1, x2, /):
    """numpy.vecmat: conj(x1) times the matrix x2, over the last axes."""
    return products.einsum("...j,...ji->...i", cplx.conj(x1), x2)
