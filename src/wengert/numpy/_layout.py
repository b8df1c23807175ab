"""Copies and views laid out as NumPy's: the helpers that make a wengert.numpy function's result share
memory with its argument exactly where NumPy's does (tests/numpy/test_copy_view_semantics.py).

A traced array's own array is laid out as NumPy's would be (the tape runs NumPy), except where a
function is composed of primitives that copy while NumPy's makes a view (``diagonal``, a small
``broadcast_to``, which is filled): such a result is marked a view of its argument (:func:`numpy_view`),
taken again when the argument is written, and a reshape or ravel of it is a view or a copy as NumPy's
of NumPy's own view would be (:func:`copied_as_numpy_would`). A copy is laid out in the order NumPy's
copy is (:func:`copy_in_order`), so that a later reshape of it is a view where NumPy's is.
"""

import numpy as np

from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.engines.mutation import array_of, mark_view
from wengert.engines.views import Retake
from wengert.rules import broadcasting, elementwise
from wengert.rules import shape as shape_ops

__all__ = ["new_array", "copy_in_order", "numpy_view", "numpy_layout", "copied_as_numpy_would"]

_shape = broadcasting.shape_of


def new_array(out, a):
    """``out``, copied where it is ``a`` itself: for a NumPy function whose result is always a new array
    (``np.pad(x, 0)``, ``np.roll(x, 0)``), so that a write into either leaves the other alone."""
    if out is not a:
        return out
    if type(out) not in BOX_TYPES:
        return np.array(out, copy=True)
    return elementwise.positive(out) if broadcasting.dtype_of(out).kind != "b" else out


def copy_in_order(a, order="K"):
    """A new array equal to traced ``a``, laid out as NumPy's copy in ``order`` is ('K': as ``a``, which
    a ufunc keeps; 'C' or 'F': contiguous so), so that a later ``reshape`` or ``ravel`` of it is a view
    exactly where NumPy's is (``x.T.copy().ravel()`` is one)."""
    value, shape = array_of(a), _shape(a)
    if (order not in ("C", "F") or type(value) is not np.ndarray or len(shape) < 2
            or (value.flags.c_contiguous if order == "C" else value.flags.f_contiguous)):
        return elementwise.positive(a)
    if order == "F":
        return shape_ops.transpose(copy_in_order(shape_ops.transpose(a), "C"), None)
    flat = shape_ops.reshape(a, (-1,))  # not C-contiguous: NumPy's reshape copies, in C order
    if np.shares_memory(array_of(flat), value):
        return elementwise.positive(a)
    return shape_ops.reshape(flat, shape)


def numpy_view(out, a, remake, name, readonly=False, numpy_fun=None):
    """``out = remake(a)``, composed of primitives that copy, marked as the view of ``a`` that NumPy's
    ``name`` (``numpy_fun`` on arrays) makes: a write into ``a`` takes it again (as NumPy's view sees
    the write), a write into it is refused (NumPy's ValueError where its view is read-only)."""
    if (type(out) in BOX_TYPES and type(a) in BOX_TYPES and out is not a
            and getattr(out, "_trace", None) is a._trace):
        mark_view(out, a, Retake(remake, name, readonly=readonly, numpy_fun=numpy_fun))
    return out


def numpy_layout(a):
    """The array of traced ``a`` as NumPy lays it out: where ``a`` is (a view of) a composed view (a
    filled broadcast, a gathered diagonal), NumPy's own views taken again on the arrays; else None
    (``a``'s own array is laid out as NumPy's)."""
    steps, link = [], a
    while True:
        mark = getattr(link, "_view", None)
        if mark is None or mark[0] is None:
            return None
        if mark[1].updates_view is None:  # a Retake: NumPy's function, if it has one
            numpy_fun = getattr(mark[1], "numpy_fun", None)
            if numpy_fun is None:
                return None
            laid_out = numpy_fun(array_of(mark[0]))
            break
        steps.append(mark)
        link = mark[0]
    for _, prim, rest, kwargs in reversed(steps):
        laid_out = prim.fun(laid_out, *unbox_all(rest), **(kwargs or {}))
    return laid_out


def copied_as_numpy_would(out, a, numpy_op, remake):
    """``out = remake(a)`` (a reshape), a view of ``a`` or a copy, made the other where NumPy's
    ``numpy_op`` of ``a``'s array laid out as NumPy's is (a read-only view, ``a`` being one)."""
    laid_out = numpy_layout(a) if type(out) in BOX_TYPES else None
    if laid_out is None and numpy_op is np.ravel and getattr(out, "_view", None) is not None:
        laid_out = array_of(a)  # ravel copies where reshape would view a reversed array
    if type(laid_out) is not np.ndarray:
        return out
    numpy_views = np.shares_memory(numpy_op(laid_out), laid_out)
    if getattr(out, "_view", None) is not None:
        return out if numpy_views else elementwise.positive(out)
    if numpy_views:
        return numpy_view(out, a, remake, "reshape", readonly=not laid_out.flags.writeable)
    return out
