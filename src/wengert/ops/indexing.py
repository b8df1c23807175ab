"""Indexing: ``x[idx]`` and its adjoint ``untake`` (scatter-add into zeros), a linear pair.

Any NumPy index works: integers, slices, ``Ellipsis``, ``None``, integer arrays (repeated indices
accumulate, through ``np.add.at``) and boolean masks. The index itself is never differentiated.
"""

import numpy as np

from wengert.ops import broadcasting
from wengert.primitive import Primitive, binary_function, defjvp, defvjp

__all__ = ["getitem", "untake"]


def _getitem_impl(x, idx):
    """``x[idx]``."""
    return x[idx]


def _may_repeat(idx):
    """Whether ``idx`` can select one element twice (it holds an integer array or list)."""
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


getitem = binary_function(Primitive(_getitem_impl, name="getitem"))
defvjp(getitem, lambda g, out, x, idx: untake(g, idx, broadcasting.shape_of(x)))
defjvp(getitem, lambda t, out, x, idx: getitem(t, idx))

untake = Primitive(_untake_impl, name="untake")
defvjp(untake, lambda g, out, x, idx, shape: getitem(g, idx))
defjvp(untake, lambda t, out, x, idx, shape: untake(t, idx, shape))
