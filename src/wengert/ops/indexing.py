"""Indexing: ``x[idx]`` and its adjoint ``untake`` (scatter-add into zeros), a linear pair.

Any NumPy index works: integers, slices, ``Ellipsis``, ``None``, integer arrays (repeated indices
accumulate, through ``np.add.at``) and boolean masks. The index itself is never differentiated.

``x[idx]`` also has an accumulate rule (the second seed's ``v_bar[i] += e_bar``): a first-order
backward pass adds ``g`` into x's adjoint buffer in place, so reading ``v[i]`` for every ``i`` of a
loop costs O(n) in the backward pass rather than one zero-filled array of v's size per read.
"""

import numpy as np

from wengert.ops import broadcasting
from wengert.primitive import Primitive, binary_function, defjvp, defvjp, defvjp_accumulate

__all__ = ["getitem", "untake"]


def _getitem_impl(x, idx):
    """``x[idx]``; a float64 scalar comes back as a Python float (wengert's scalars, as
    everywhere: the arithmetic that follows takes the float fast paths)."""
    r = x[idx]
    if type(r) is _float64:
        return float(r)
    return r


_float64 = np.float64


def _may_repeat(idx):
    """Whether ``idx`` can select one element twice (it holds an integer array or list)."""
    if type(idx) is int or type(idx) is slice:
        return False
    parts = idx if type(idx) is tuple else (idx,)
    for p in parts:
        if isinstance(p, (list, np.ndarray)) and np.asarray(p).dtype.kind in "iu":
            return True
    return False


def _untake_impl(g, idx, shape):
    """A zero array of ``shape`` with ``g`` added at ``idx`` (the adjoint of ``x[idx]``)."""
    out = np.zeros(shape, dtype=broadcasting.dtype_of(g))
    if _may_repeat(idx):
        np.add.at(out, idx, g)
    else:
        out[idx] = g
    return out


def _getitem_accumulate(buffer, g, out, x, idx):
    """``buffer[idx] += g`` in place (np.add.at where an element may be selected twice)."""
    if type(idx) is int:
        buffer[idx] += g
    elif _may_repeat(idx):
        np.add.at(buffer, idx, g)
    else:
        buffer[idx] += g


getitem = binary_function(Primitive(_getitem_impl, name="getitem"))
defvjp(getitem, lambda g, out, x, idx: untake(g, idx, broadcasting.shape_of(x)))
defvjp_accumulate(getitem, _getitem_accumulate)
defjvp(getitem, lambda t, out, x, idx: getitem(t, idx))

untake = Primitive(_untake_impl, name="untake")
defvjp(untake, lambda g, out, x, idx, shape: getitem(g, idx))
defjvp(untake, lambda t, out, x, idx, shape: untake(t, idx, shape))
