"""Packing a checkpointed computation's outputs: its node has one output, so several float outputs
are packed into one vector (:func:`_pack`) and cut apart again (:func:`_unpack`); cotangents come
back in each leaf's own type (:func:`_fix`). Used by ``recompute.py``.
"""

import numpy as np

from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.rules import shape as shape_ops

_LIMIT = 4096  # the most shapes and dtypes remembered by _like


def _fix(g, value):
    """A leaf's cotangent in the leaf's own type (None stays None: a symbolic zero)."""
    if g is None or type(g) in BOX_TYPES:
        return g
    if type(value) is float:
        g = np.asarray(g)
        return float(g) if g.dtype.kind != "c" else complex(g)
    if np.shape(g) != np.shape(value):
        return np.broadcast_to(g, np.shape(value)).copy()
    return g


def _like(v):
    """A stand-in for ``v`` with its type, shape and dtype, holding no data."""
    if type(v) is float:
        return v
    key = (np.shape(v), np.result_type(v))
    got = _LIKE.get(key)
    if got is None:
        got = np.broadcast_to(np.zeros((), key[1]), key[0])
        if len(_LIKE) < _LIMIT:
            _LIKE[key] = got
    return got


_LIKE = {}


def _pack(values):
    """One value holding every float output (the value itself when there is one)."""
    if len(values) == 1:
        return values[0]
    dtype = np.result_type(*[unbox_all(v) for v in values])
    flat = [shape_ops.reshape(v, (-1,)) for v in values]
    flat = [f if np.result_type(unbox_all(f)) == dtype else f.astype(dtype) for f in flat]
    return shape_ops.concatenate(*flat, axis=0)


def _unpack(packed, like):
    """Cut ``packed`` (from :func:`_pack`) into values shaped as ``like``."""
    if len(like) == 1:
        return [packed]
    parts, start = [], 0
    for v in like:
        shape, dtype = np.shape(v), np.result_type(v)
        size = int(np.prod(shape))
        part = shape_ops.reshape(packed[start:start + size], shape)
        if np.result_type(unbox_all(part)) != dtype:
            part = part.astype(dtype)
        if type(v) is float and type(part) not in BOX_TYPES:
            part = float(part)
        parts.append(part)
        start += size
    return parts


def _unpack_cotangent(g, like):
    if len(like) == 1:
        return [_fix(g, like[0])]
    return [_fix(p, v) for p, v in zip(_unpack(g, like), like)]
