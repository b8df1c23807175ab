"""Broadcasting and its adjoint, in one place.

``broadcast_to`` repeats an array along new or size-1 axes; its adjoint is ``sum_to_shape``, which
sums a cotangent back over those axes. Every broadcasting primitive uses :func:`unbroadcast` as its
``grad_post`` (so a rule may return an output-shaped cotangent) and :func:`broadcast_tangent` as
its ``tangent_post``. ``unbroadcast`` also casts a cotangent to its argument's float dtype, so that
float32 inputs get float32 gradients even when mixed with float64 constants, and gives a real
argument of a complex result the real part of its cotangent (docs/complex.md).
"""

import math

import numpy as np

from wengert.core import primitive as _primitive
from wengert.core.primitive import Primitive, defjvp, defvjp
from wengert.rules import reductions, shape

__all__ = ["broadcast_to", "sum_to_shape", "unbroadcast", "broadcast_tangent", "shape_of", "dtype_of",
           "real_part"]

_SCALARS = (float, int, bool, complex)
_ndarray = np.ndarray
_NUMPY_SCALARS = frozenset((np.float64, np.float32, np.float16, np.complex128, np.complex64))
_FLOAT64 = np.dtype(np.float64)


def shape_of(x):
    """``np.shape`` for arrays, NumPy scalars, Python scalars and traced values alike."""
    if type(x) in _SCALARS:
        return ()
    try:
        return x.shape
    except AttributeError:
        return np.shape(x)


def dtype_of(x):
    """The dtype ``x`` has (or would have as an array); Python floats are float64."""
    if type(x) is float:
        return _FLOAT64
    try:
        return x.dtype
    except AttributeError:
        return np.result_type(x)


def sum_to_shape(c, target):
    """Sum ``c`` over the axes along which ``target`` was broadcast to ``c``'s shape."""
    cs = shape_of(c)
    if cs == target:
        return c
    lead = len(cs) - len(target)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(target, cs[lead:])):
        return broadcast_to(c, target)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(target) if n == 1 and cs[lead + i] != 1
    )
    r = reductions.sum(c, axis=axes)
    return r if shape_of(r) == target else shape.reshape(r, target)


def unbroadcast(c, arg):
    """``grad_post`` of broadcasting primitives: fit cotangent ``c`` to ``arg``'s shape and dtype."""
    tc = type(c)
    if tc is type(arg):  # the common cases, decided without a call
        if tc is _ndarray:
            if c.shape == arg.shape and c.dtype == arg.dtype:
                return c
        elif tc is float or tc in _NUMPY_SCALARS:
            return c
    if type(arg) is float:
        if type(c) is float:
            return c
        c = sum_to_shape(c, ())
        return real_part(c) if dtype_of(c).kind == "c" else c
    c = sum_to_shape(c, shape_of(arg))
    want = dtype_of(arg)
    have = dtype_of(c)
    if have != want and want.kind in "fc":
        if have.kind == "c" and want.kind == "f":  # a real argument of a complex result: the real part
            c = real_part(c)
            have = dtype_of(c)
        if have.kind in "fc" and have != want:  # complex64 stays complex64 as float32 stays float32
            c = shape.astype(c, want)
    return c


def real_part(c):
    from wengert.rules.complex import real  # complex imports this module

    return real(c)


def broadcast_tangent(t, out):
    """``tangent_post`` of broadcasting primitives: give the tangent ``out``'s shape."""
    if type(t) is float and type(out) is float:
        return t
    s = shape_of(out)
    return t if shape_of(t) == s else broadcast_to(t, s)


def _broadcast_to_impl(array, shape):
    """numpy.broadcast_to (a read-only view; small arrays are filled instead, which is cheaper
    than NumPy's Python-level view construction)."""
    if isinstance(array, (_ndarray, np.generic, float)) and math.prod(shape) <= 4096:
        out = np.empty(shape, dtype_of(array))
        out[...] = array
        return out
    return np.broadcast_to(array, shape)


broadcast_to = Primitive(_broadcast_to_impl, name="broadcast_to")
defvjp(broadcast_to, lambda g, out, x, s: sum_to_shape(g, shape_of(x)))
defjvp(broadcast_to, lambda t, out, x, s: broadcast_to(t, s))

_primitive.BROADCASTING[:] = [unbroadcast, broadcast_tangent]  # for users' primitives (wg.primitive)
