"""NumPy's constructors with traced arguments (``full``, ``linspace``, ``logspace``: differentiable in
the fill value and the end points, as in JAX), copies and casts. Nothing here defines a derivative.

Buffers (``zeros_like``, ``ones_like``, ``empty_like``, ``full_like`` of a traced array): NumPy hands
these to wengert when their argument is traced, and the result is a *buffer* that traced values can
be stored into (``y = np.zeros_like(x); y[i] = x[i] ** 2``), as ``torch.zeros_like`` is in PyTorch.
It is a box at every level its argument is traced at, made by each trace's ``lift``, that carries no
derivative: operations on it alone give plain constants (``y[0]``, ``y.sum()``, ``y[0] > 0``), and it
converts to plain numbers and arrays (``float(y[0])``, ``y.tolist()``, ``np.asarray(y)``) until a
traced value is stored into it. A store makes it traced, as ``x[i] = v`` makes any traced array
(``wengert.engines.mutation``). Under ``wg.vmap`` and ``wg.compile`` the buffer is already a batch or a
program's symbol. Integer and boolean buffers stay plain arrays: they cannot hold a derivative.
"""

from typing import Any

import numpy as np

from wengert.core.trace import BOX_TYPES, SYMBOLIC_TYPES, contains_box
from wengert.engines.mutation import array_of
from wengert.numpy import _functions as F
from wengert.numpy._layout import copy_in_order, numpy_layout
from wengert.rules import broadcasting, elementwise, nondiff
from wengert.rules import shape as shape_ops

__all__ = ["full", "linspace", "logspace", "copy", "astype", "ascontiguousarray", "asfortranarray",
           "zeros_like", "ones_like", "empty_like", "buffer_like"]


def buffer_like(a, out):
    """``out``, an array made for ``a`` (of its shape), as a buffer that values traced like ``a`` can be
    stored into: lifted by every trace ``a`` is boxed by (outermost first) that ``out`` is not already
    a box of or above. Not inexact, or ``a`` not traced: ``out`` as it is."""
    dtype = getattr(out, "dtype", None)
    if type(a) not in BOX_TYPES or dtype is None or dtype.kind not in "fc":
        return out
    traces = []
    while type(a) in BOX_TYPES and type(a) not in SYMBOLIC_TYPES:  # a batch or a symbol: out is one
        traces.append(a._trace)
        a = a.value
    for trace in reversed(traces):
        lift = getattr(trace, "lift", None)
        if lift is not None and not (type(out) in BOX_TYPES and out._trace.level >= trace.level):
            out = lift(out)
    return out


def _like(make, a, dtype, order, subok, shape, device):
    # only the arguments given: other array libraries' *_like (Dask's) take fewer keywords
    given = {"dtype": dtype, "shape": shape, "device": device}
    kwargs = {k: v for k, v in given.items() if v is not None}
    if order != "K":
        kwargs["order"] = order
    if subok is not True:
        kwargs["subok"] = subok
    return buffer_like(a, make(a, **kwargs))


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> Any:
    """numpy.zeros_like; of a traced ``a``, a buffer traced values can be stored into (torch.zeros_like)."""
    return _like(nondiff.zeros_like, a, dtype, order, subok, shape, device)


def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> Any:
    """numpy.ones_like; of a traced ``a``, a buffer traced values can be stored into (torch.ones_like)."""
    return _like(nondiff.ones_like, a, dtype, order, subok, shape, device)


def empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None) -> Any:
    """numpy.empty_like; of a traced argument, a buffer for traced stores (torch.empty_like)."""
    return _like(nondiff.empty_like, prototype, dtype, order, subok, shape, device)

_shape = broadcasting.shape_of


_WRITEABLE = np.ones(1).flags


def full(shape, fill_value, dtype=None, order="C") -> Any:
    """numpy.full; differentiable in ``fill_value`` (as jax.numpy.full)."""
    if not contains_box(fill_value):
        return np.full(shape, fill_value, dtype=dtype, order=order)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if dtype is not None:
        fill_value = shape_ops.astype(fill_value, dtype)
    out = broadcasting.broadcast_to(fill_value, shape)  # a new array, as NumPy's: not a read-only view
    return elementwise.positive(out) if not getattr(array_of(out), "flags", _WRITEABLE).writeable else out


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0) -> Any:
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


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0) -> Any:
    """numpy.logspace: ``base ** linspace(start, stop)``."""
    if not (contains_box(start) or contains_box(stop) or contains_box(base)):
        return np.logspace(start, stop, num, endpoint, base, dtype, axis)
    out = elementwise.power(base, linspace(start, stop, num, endpoint, axis=axis))
    return out if dtype is None else shape_ops.astype(out, dtype)


def copy(a, order="K", subok=False) -> Any:
    """numpy.copy: a new traced value equal to ``a``."""
    if not contains_box(a):
        return np.copy(a, order=order, subok=subok)
    if type(a) is list or type(a) is tuple:  # a list holding traced values: its array is already new
        return F.array(a)
    return copy_in_order(a, order)


def astype(x, dtype, /, *, copy=True, device=None) -> Any:
    """numpy.astype."""
    if not contains_box(x):
        return np.astype(x, dtype, copy=copy)
    return shape_ops.astype(x, dtype)


def ascontiguousarray(a, dtype=None, *, like=None) -> Any:
    """numpy.ascontiguousarray: a traced ``a`` itself where NumPy's is a view (``a`` C-contiguous, of
    ``dtype``), else a copy; at least 1-d."""
    out = _as_laid_out(a, dtype, np.ascontiguousarray)
    return F.reshape(out, (1,)) if len(_shape(out)) == 0 else out


def asfortranarray(a, dtype=None, *, like=None) -> Any:
    """numpy.asfortranarray: a traced ``a`` itself where NumPy's is a view (``a`` Fortran-contiguous,
    of ``dtype``), else a copy."""
    return _as_laid_out(a, dtype, np.asfortranarray)


def _as_laid_out(a, dtype, numpy_fun):
    if not contains_box(a):
        return numpy_fun(a, dtype=dtype)
    out = F.asarray(a, dtype)
    if out is a:  # a copy where NumPy's layout needs one
        value = numpy_layout(a)
        value = array_of(a) if value is None else value
        if type(value) is not np.ndarray or not np.shares_memory(numpy_fun(value), value):
            out = copy_in_order(out, "C" if numpy_fun is np.ascontiguousarray else "F")
    return out
