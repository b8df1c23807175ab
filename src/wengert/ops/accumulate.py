"""Accumulation into an array at an index: ``index_add(buf, e, idx) = buf + untake(e, idx, buf.shape)``.

The second seed's ``v̄[i] += ē``. As a primitive it is pure (it returns a new array); the program
transformer's in-place pass (``wengert.program.passes.accumulate_in_place``) lets the code generator
write it as ``buf[idx] += e`` when ``buf`` is a buffer the program owns and uses only there.
Repeated integer indices accumulate (``np.add.at``), as in ``untake``.
"""

import numpy as np

from wengert.ops import broadcasting, indexing
from wengert.primitive import Primitive, defjvp, defvjp

__all__ = ["index_add"]


def _index_add_impl(buf, e, idx):
    """``buf`` with ``e`` added at ``idx`` (a new array)."""
    out = np.array(buf, dtype=np.result_type(buf, e), copy=True)
    np.add.at(out, idx, e)
    return out


index_add = Primitive(_index_add_impl, name="index_add", grad_post=broadcasting.unbroadcast)
defvjp(index_add,
       lambda g, out, buf, e, idx: g,
       lambda g, out, buf, e, idx: indexing.getitem(g, idx))
defjvp(index_add,
       lambda t, out, buf, e, idx: t,
       lambda t, out, buf, e, idx: indexing.untake(t, idx, broadcasting.shape_of(buf)))
