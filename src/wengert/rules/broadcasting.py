"""Broadcasting and its adjoint, in one place, with the structural primitives they are made of.

``broadcast_to`` repeats an array along new or size-1 axes; its adjoint is ``sum_to_shape``, which
sums a cotangent back over those axes. Every broadcasting primitive uses :func:`unbroadcast` as its
``grad_post`` (so a rule may return an output-shaped cotangent) and :func:`broadcast_tangent` as
its ``tangent_post``. ``unbroadcast`` also casts a cotangent to its argument's float dtype, so that
float32 inputs get float32 gradients even when mixed with float64 constants, and gives a real
argument of a complex result the real part of its cotangent (docs/complex.md).

The adjoint of broadcasting is a sum, whose own adjoint is a broadcast, and fitting a cotangent to
its argument takes a reshape, a cast and a real part: these primitives (``sum``, ``reshape``,
``astype``, ``real``) are defined here too, so that this module needs no other family. The families
built on them (``reductions``, ``shape``, ``complex``) present them under their NumPy groupings.
"""

import math

import numpy as np

from wengert.core import primitive as _primitive
from wengert.core.extend import defbatch, defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.core.trace import BOX_TYPES, unbox_all

__all__ = ["broadcast_to", "sum_to_shape", "unbroadcast", "broadcast_tangent", "shape_of", "dtype_of",
           "sum", "reshape", "astype", "real", "normalize_axis", "expand_reduced", "foreign",
           "filled_like"]

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


def foreign(x):
    """Whether ``x`` is an array of another NEP-18 library (Dask, CuPy): not NumPy's, not a scalar, not
    traced. Rules give such arrays their generic path -- the library's own functions through NumPy's
    dispatch, ``zeros_like`` -- never an in-place write, ``np.asarray``, or a test of the data (which
    would compute a lazy array)."""
    t = type(x)
    if t in _NATIVE:
        return False
    return t not in BOX_TYPES and hasattr(t, "__array_function__")


_NATIVE = frozenset((_ndarray, float, int, complex, bool, np.float64, np.float32, np.complex128,
                     np.complex64))  # decided without a call


def filled_like(x, shape, dtype, fill=0.0):
    """``np.full(shape, fill, dtype)`` in ``x``'s own array library (NumPy's, unless ``x`` is another
    library's array, traced or not)."""
    v = unbox_all(x)
    if foreign(v):
        return np.full_like(v, fill, shape=shape, dtype=dtype)
    return np.full(shape, fill, dtype=dtype)


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
    if type(c) is _ndarray:  # untraced: the array's own method, as the sum primitive would call it
        r = c.sum(axis=axes)
        return r if r.shape == target else r.reshape(target)
    r = sum(c, axis=axes)
    return r if shape_of(r) == target else reshape(r, target)


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
        return real(c) if dtype_of(c).kind == "c" else c
    c = sum_to_shape(c, shape_of(arg))
    want = dtype_of(arg)
    have = dtype_of(c)
    if have != want and want.kind in "fc":
        if have.kind == "c" and want.kind == "f":  # a real argument of a complex result: the real part
            c = real(c)
            have = dtype_of(c)
        if have.kind in "fc" and have != want:  # complex64 stays complex64 as float32 stays float32
            c = astype(c, want)
    return c


def broadcast_tangent(t, out):
    """``tangent_post`` of broadcasting primitives: give the tangent ``out``'s shape."""
    if type(t) is float and type(out) is float:
        return t
    s = shape_of(out)
    return t if shape_of(t) == s else broadcast_to(t, s)


def _broadcast_to_impl(array, shape):
    """numpy.broadcast_to (a read-only view; small arrays are filled instead, which is cheaper
    than NumPy's Python-level view construction -- C-contiguous ones only, so that a copy of the
    result is laid out as a copy of NumPy's view is: its ravel a view or a copy where NumPy's is)."""
    fillable = isinstance(array, (np.generic, float)) or (
        isinstance(array, _ndarray) and array.flags.c_contiguous)
    if fillable and math.prod(shape) <= 4096:
        out = np.empty(shape, dtype_of(array))
        out[...] = array
        return out
    return np.broadcast_to(array, shape)


broadcast_to = Primitive(_broadcast_to_impl, name="broadcast_to")
defvjp(broadcast_to, lambda g, out, x, s: sum_to_shape(g, shape_of(x)))
defjvp(broadcast_to, lambda t, out, x, s: broadcast_to(t, s))
facts(broadcast_to, linear=(0,), identity_if_unchanged=True)
facts(broadcast_to, saves=())  # what its VJP reads: shapes only (wengert.engines.saving)


# -- the primitives broadcasting's adjoint is made of: sums, reshapes, casts, real parts ---------------

def normalize_axis(axis, ndim, fname="reduction"):
    """``axis`` as a sorted tuple of non-negative ints; NumPy's AxisError when out of range."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(int(a), ndim, None)
        out.append(int(a) % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{fname}: duplicate value in 'axis': {axis!r}")
    return tuple(sorted(out))


def expand_reduced(g, x_shape, axis, keepdims):
    """Broadcast a reduction's cotangent ``g`` back to the reduced input's shape ``x_shape``."""
    if not keepdims and axis is not None:
        axes = normalize_axis(axis, len(x_shape))
        kept = tuple(1 if i in axes else n for i, n in enumerate(x_shape))
        g = reshape(g, kept)
    return broadcast_to(g, x_shape)


def _sum_impl(a, axis=None, keepdims=False):
    """numpy.sum."""
    if type(a) is np.ndarray:
        return a.sum(axis=axis, keepdims=keepdims)  # the method skips NumPy's Python wrapper
    return np.sum(a, axis=axis, keepdims=keepdims)


sum = Primitive(_sum_impl, name="sum")  # noqa: A001 - NumPy's name
def _sum_vjp(g, out, x, axis=None, keepdims=False):
    if type(x) is not _ndarray and foreign(x) and type(g) not in BOX_TYPES:
        # the cotangent of another library's sum is broadcast in that library, chunked as x is (a Dask
        # graph then holds no NumPy array of the data's size, and needs no rechunking)
        if not keepdims and axis is not None:
            axes = normalize_axis(axis, len(shape_of(x)))
            g = np.reshape(g, tuple(1 if i in axes else n for i, n in enumerate(shape_of(x))))
        return np.zeros_like(x, dtype=np.result_type(dtype_of(g), dtype_of(x))) + g
    return expand_reduced(g, shape_of(x), axis, keepdims)


defvjp(sum, _sum_vjp)
defjvp(sum, lambda t, out, x, axis=None, keepdims=False: sum(t, axis=axis, keepdims=keepdims))
facts(sum, linear=(0,), fresh=True)
facts(sum, saves=())


def _reshape_impl(a, newshape):
    """numpy.reshape (C order)."""
    if type(a) is np.ndarray:
        return a.reshape(newshape)
    return np.reshape(a, newshape)


reshape = Primitive(_reshape_impl, name="reshape")
defvjp(reshape, lambda g, out, x, newshape: reshape(g, shape_of(x)))
defjvp(reshape, lambda t, out, x, newshape: reshape(t, newshape))
facts(reshape, linear=(0,), identity_if_unchanged=True)
facts(reshape, saves=())


def _astype_impl(x, dtype):
    """``x.astype(dtype)`` (a Python float becomes a 0-d array of that dtype)."""
    if foreign(x):  # another library's array keeps its library
        return x.astype(dtype)
    return np.asarray(x).astype(dtype)


def _astype_vjp(g, out, x, dtype):
    want = dtype_of(x)
    if want.kind != "c" and dtype_of(g).kind == "c":
        g = real(g)  # complex made from a real input: only the real part flows back
    return astype(g, want)


astype = Primitive(_astype_impl, name="astype")
defvjp(astype, _astype_vjp)
defjvp(astype, lambda t, out, x, dtype: astype(t, dtype))
facts(astype, linear=(0,), fresh=True, identity_if_unchanged=True)
facts(astype, saves=())


def _is_complex(x):
    return dtype_of(x).kind == "c"


def _as_complex(g, x):
    """A real cotangent ``g`` as the complex dtype of ``x`` (unchanged when ``x`` is real)."""
    if not _is_complex(x) or _is_complex(g):
        return g
    return astype(g, dtype_of(x))


def _real_impl(x):
    """numpy.real (a real input is returned as it is)."""
    return np.real(x)


real = Primitive(_real_impl, name="real")
defvjp(real, lambda g, out, x: _as_complex(g, x))
defjvp(real, lambda t, out, x: real(t))
facts(real, linear=(0,))
facts(real, saves=())

_primitive.BROADCASTING[:] = [unbroadcast, broadcast_tangent]  # for users' primitives (wg.primitive)


# -- batching rules (``wengert.engines.batching``), given with ``defbatch``: rule(prim, values, batched,
# kwargs) -> the result for every example, batch on axis 0, with the batched values' batch on axis 0;
# NotImplemented to decline (the primitive then runs once per example); NotBatched(v) for a result the
# same for every example.

class NotBatched:
    """A batching rule's result that is the same for every example (a shape, a dtype)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def normalize_axis_order(axes, ndim):
    """A permutation ``axes`` of ``ndim`` axes with negative entries made positive."""
    return tuple(int(a) % ndim for a in axes)


def example_axes(axis, ndim):
    """``axis`` of one example's ``ndim`` axes, as a tuple of axes of the batch (shifted past axis 0)."""
    return tuple(a + 1 for a in normalize_axis(axis, ndim))


def batch_reduction(prim, values, batched, kwargs):
    """A reduction of its first argument over ``axis`` (given second, or by keyword): the same
    reduction of the batch, over the example's axes shifted past the batch axis."""
    if any(batched[1:]):
        return NotImplemented
    x = values[0]
    ndim = len(shape_of(x)) - 1
    if len(values) > 1:
        return prim(x, example_axes(values[1], ndim), *values[2:], **kwargs)
    return prim(x, **{**kwargs, "axis": example_axes(kwargs.get("axis"), ndim)})


def _batch_reshape(prim, values, batched, kwargs):
    x, newshape = values
    if batched[1]:
        return NotImplemented
    newshape = (newshape,) if isinstance(newshape, (int, np.integer)) else tuple(newshape)
    return prim(x, (shape_of(x)[0],) + newshape, **kwargs)


def _batch_broadcast_to(prim, values, batched, kwargs):
    x, shape = values
    if batched[1]:
        return NotImplemented
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    s = tuple(shape_of(x))
    x = reshape(x, s[:1] + (1,) * (len(shape) - len(s) + 1) + s[1:])
    return prim(x, s[:1] + shape, **kwargs)


def batch_elementwise(prim, values, batched, kwargs):
    """An elementwise primitive on the whole batch: each batched argument gets singleton axes after
    its batch axis up to the widest example's rank, so that NumPy's broadcasting (which aligns
    trailing axes) pairs example axes with example axes and the batch axis comes out in front."""
    ranks = [len(shape_of(v)) - b for v, b in zip(values, batched)]
    rank = max(ranks)
    if all(r == rank for r, b in zip(ranks, batched) if b):  # lined up already (the common case)
        return prim(*values, **kwargs)
    aligned = []
    for v, b, r in zip(values, batched, ranks):
        if b and r < rank:
            s = tuple(shape_of(v))
            v = reshape(v, s[:1] + (1,) * (rank - r) + s[1:])
        aligned.append(v)
    return prim(*aligned, **kwargs)


def batch_axes_argument(position, name="axis"):
    """The rule of a primitive that works along ``axis`` (or ``axes``) of its first argument alone,
    given at ``position`` or by keyword: the same on the batch, the axes shifted past the batch
    axis (None, meaning every axis, becomes every example axis)."""
    def rule(prim, values, batched, kwargs):
        if any(b for i, b in enumerate(batched) if i):
            return NotImplemented
        values, kwargs = list(values), dict(kwargs)
        where = values if position < len(values) else kwargs
        key = position if position < len(values) else name
        axes = where.get(key) if where is kwargs else where[key]
        ndim = len(shape_of(values[0])) - 1
        shifted = example_axes(axes, ndim)
        if axes is not None and isinstance(axes, (int, np.integer)):
            shifted = shifted[0]
        elif axes is not None:  # an ordered list of axes keeps its order
            shifted = tuple(int(a) % ndim + 1 for a in axes)
        where[key] = shifted
        return prim(*values, **kwargs)
    return rule


def batch_unary(prim, values, batched, kwargs):
    """A function of its first argument's elements alone (a cast, a real part): the batch as it is."""
    if any(batched[1:]):
        return NotImplemented
    return prim(*values, **kwargs)


defbatch(sum, batch_reduction)
defbatch(reshape, _batch_reshape)
defbatch(broadcast_to, _batch_broadcast_to)
defbatch(astype, batch_unary)
defbatch(real, batch_unary)
