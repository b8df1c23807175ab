"""Shape primitives: reshape, transpose, astype, concatenate, stack, repeat (and repeat's adjoint).

Everything else that moves data without arithmetic (expand_dims, squeeze, swapaxes, moveaxis,
split, tile, flip, ravel) is composed from these and indexing in ``wengert.numpy``.
"""

import weakref

import numpy as np

from wengert.core.extend import defbatch, defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, elementwise, indexing
from wengert.rules.broadcasting import astype, reshape

__all__ = ["reshape", "transpose", "astype", "concatenate", "stack", "repeat", "sum_repeats"]


def _transpose_impl(a, axes=None):
    """numpy.transpose."""
    if type(a) is np.ndarray:
        return a.transpose(axes)
    return np.transpose(a, axes)


def _inverse_perm(axes):
    if axes is None:
        return None
    return tuple(np.argsort(axes))


transpose = Primitive(_transpose_impl, name="transpose")
defvjp(transpose, lambda g, out, x, axes=None: transpose(g, _inverse_perm(axes)))
defjvp(transpose, lambda t, out, x, axes=None: transpose(t, axes))
facts(transpose, linear=(0,))
facts(transpose, saves=())  # what its VJP reads (wengert.engines.saving)
facts(transpose, updates_view=lambda x, new, axes=None: transpose(new, _inverse_perm(axes)))
facts(reshape, updates_view=lambda x, new, newshape: reshape(new, broadcasting.shape_of(x)))


def _concatenate_impl(*arrays, axis=0):
    """numpy.concatenate, taking the arrays as separate arguments."""
    return np.concatenate(arrays, axis=axis)


def _concat_offsets(out, arrays, axis):
    """The axis of the concatenation ``out`` and where each argument starts along it (and the end),
    computed once per concatenation: an engine that asks for each argument's share in turn (the
    program transformer, by :meth:`Primitive.vjp_rule`) would otherwise be quadratic in their number.
    The concatenation is identified by its result ``out``, of which each has its own (a symbol per
    variable in a traced program, a value or placeholder per node on the tape); its arguments do
    not identify it: one array (symbol) may begin several concatenations of different pieces."""
    key = (id(out), id(arrays[0]), len(arrays), axis)
    cached = _OFFSETS.get("last")
    if cached is None or cached[0] != key or cached[1]() is not out or cached[2]() is not arrays[0]:
        ax = axis % len(broadcasting.shape_of(out))
        offsets = [0]
        for a in arrays:
            offsets.append(offsets[-1] + broadcasting.shape_of(a)[ax])
        cached = (key, _referent(out), _referent(arrays[0]), ax, offsets)
        _OFFSETS["last"] = cached
    return cached[3], cached[4]


_OFFSETS = {}
"""The last concatenation's offsets (its result and first argument, held weakly where they can be,
identify it)."""


def _referent(x):
    try:
        return weakref.ref(x)
    except TypeError:  # a Python float or another object without weak references: compared once
        return lambda: x


def _concatenate_jvp(tangents, out, *arrays, axis=0):
    """The tangent from every argument's at once: their concatenation (zeros for arguments without one),
    the forward rule in the joint form -- linear in the number of arguments, where a sum of one-argument
    rules would be quadratic."""
    parts = [elementwise.zeros_of(a) if t is None else t for t, a in zip(tangents, arrays)]
    return concatenate(*parts, axis=axis)


def _concatenate_vjp(needed, g, out, *arrays, axis=0):
    """Every argument's cotangent, its slice of ``g`` (None where not ``needed``): the reverse rule, in
    the joint form (one call for all arguments: linear in their number, on the tape and in programs)."""
    if axis is None:
        raise NotImplementedError("concatenate(axis=None) is not differentiable; ravel the inputs first")
    ax, offsets = _concat_offsets(out, arrays, axis)
    lead = (slice(None),) * ax
    return [indexing.getitem(g, lead + (slice(offsets[i], offsets[i + 1]),)) if need else None
            for i, need in enumerate(needed)]


def stack_arrays(*arrays, axis=0):
    """numpy.stack, taking the arrays as separate arguments."""
    return np.stack(arrays, axis=axis)


def _stack_vjp(needed, g, out, *arrays, axis=0):
    """Every argument's cotangent, its slice of ``g`` (None where not ``needed``): the reverse rule, in
    the joint form; for Python floats stacked into a plain vector, Python floats (the backward pass's
    scalar path)."""
    ax = axis % len(broadcasting.shape_of(out))
    if type(g) is np.ndarray:
        if g.ndim == 1 and g.dtype == np.float64:
            parts = g.tolist()
            return [(p if type(a) is float else g[i]) if need else None
                    for i, (need, p, a) in enumerate(zip(needed, parts, arrays))]
        moved = np.moveaxis(g, ax, 0)
        return [moved[i] if need else None for i, need in enumerate(needed)]
    lead = (slice(None),) * ax
    return [indexing.getitem(g, lead + (i,)) if need else None for i, need in enumerate(needed)]


def _stack_jvp(tangents, out, *arrays, axis=0):
    """The tangent from every argument's at once: their stack (zeros for arguments without one)."""
    parts = [elementwise.zeros_of(a) if t is None else t for t, a in zip(tangents, arrays)]
    return stack(*parts, axis=axis)


def _fit(c, arg):
    """``grad_post``: a real argument of a complex result gets the real part (broadcasting is
    loaded after this module, hence the call at run time)."""
    return broadcasting.unbroadcast(c, arg)


def _joining(impl, name, vjp, jvp):
    """A primitive joining any number of arrays: its reverse rule gives every argument's cotangent in one
    call, its forward rule the tangent from every argument's (each argument's alone is derived from them:
    ``Primitive.vjp_rule``, ``jvp_rule``), linear, not quadratic, in their number."""
    prim = Primitive(impl, name=name, grad_post=_fit)
    defvjp(prim, joint=vjp)
    defjvp(prim, joint=jvp)
    return facts(prim, fresh=True)


concatenate = _joining(_concatenate_impl, "concatenate", _concatenate_vjp, _concatenate_jvp)
facts(concatenate, saves=())  # its VJP reads the pieces' shapes only
stack = _joining(stack_arrays, "stack", _stack_vjp, _stack_jvp)
facts(stack, saves=())  # its VJP reads the output's shape only


def _repeat_impl(a, repeats, axis=None):
    """numpy.repeat."""
    return np.repeat(a, repeats, axis=axis)


def _sum_repeats_impl(g, repeats, axis, n):
    """Adjoint of repeat along ``axis``: sum each run of repeated entries (``n`` original entries).
    Another library's ``g`` (Dask, CuPy: no ``np.add.at`` or no writes) takes differences of a running
    sum at the runs' ends, in its own library."""
    if type(g) is not np.ndarray and hasattr(type(g), "__array_function__"):
        g = np.moveaxis(g, axis, 0)
        ends = np.cumsum(np.broadcast_to(repeats, (n,)))
        running = np.concatenate([np.zeros_like(g, shape=(1,) + g.shape[1:]), np.cumsum(g, axis=0)])
        return np.moveaxis(running[ends] - running[ends - np.broadcast_to(repeats, (n,))], 0, axis)
    g = np.moveaxis(np.asarray(g), axis, 0)
    segment = np.repeat(np.arange(n), np.broadcast_to(repeats, (n,)))
    out = np.zeros((n,) + g.shape[1:], dtype=g.dtype)
    np.add.at(out, segment, g)
    return np.moveaxis(out, 0, axis)


sum_repeats = Primitive(_sum_repeats_impl, name="sum_repeats")
defvjp(sum_repeats, lambda g, out, x, repeats, axis, n: repeat(g, repeats, axis=axis))
defjvp(sum_repeats, lambda t, out, x, repeats, axis, n: sum_repeats(t, repeats, axis, n))
facts(sum_repeats, linear=(0,), fresh=True, helper=True, saves=("repeats",))  # an array, maybe


def _repeat_vjp(g, out, x, repeats, axis=None):
    xs = broadcasting.shape_of(x)
    if axis is None:
        n = int(np.prod(xs))
        return reshape(sum_repeats(g, repeats, 0, n), xs)
    ax = axis % len(xs)
    return sum_repeats(g, repeats, ax, xs[ax])


repeat = Primitive(_repeat_impl, name="repeat")
defvjp(repeat, _repeat_vjp)
defjvp(repeat, lambda t, out, x, repeats, axis=None: repeat(t, repeats, axis=axis))
facts(repeat, linear=(0,), fresh=True, saves=("repeats",))  # and x's shape (wengert.engines.saving)


def _batch_transpose(prim, values, batched, kwargs):
    if any(batched[1:]):
        return NotImplemented
    x = values[0]
    axes = values[1] if len(values) > 1 else kwargs.get("axes")
    n = len(broadcasting.shape_of(x)) - 1
    order = range(n - 1, -1, -1) if axes is None else broadcasting.normalize_axis_order(axes, n)
    return prim(x, (0,) + tuple(a + 1 for a in order))


def _batch_concatenate(prim, values, batched, kwargs):
    axis = kwargs.get("axis", 0)
    if axis is None:
        return NotImplemented
    size = next(broadcasting.shape_of(v)[0] for v, b in zip(values, batched) if b)
    parts = [v if b else broadcasting.broadcast_to(v, (size,) + tuple(broadcasting.shape_of(v)))
             for v, b in zip(values, batched)]
    n = len(broadcasting.shape_of(parts[0])) - 1
    return prim(*parts, axis=broadcasting.example_axes(axis, n)[0])


def _batch_stack(prim, values, batched, kwargs):
    size = next(broadcasting.shape_of(v)[0] for v, b in zip(values, batched) if b)
    parts = [v if b else broadcasting.broadcast_to(v, (size,) + tuple(broadcasting.shape_of(v)))
             for v, b in zip(values, batched)]
    n = len(broadcasting.shape_of(parts[0]))  # the example's rank + 1: the stacked result's
    axis = kwargs.get("axis", 0)
    return prim(*parts, axis=broadcasting.example_axes(axis, n)[0])


defbatch(transpose, _batch_transpose)
defbatch(concatenate, _batch_concatenate)
defbatch(stack, _batch_stack)


def _batch_repeat(prim, values, batched, kwargs):
    """Along the example's axis shifted past the batch axis; ``axis=None`` (NumPy's flattened array)
    along each example flattened alone."""
    axis = values[2] if len(values) > 2 else kwargs.get("axis")
    if any(batched[1:]):
        return NotImplemented
    x = values[0]
    if axis is None:
        return prim(reshape(x, (broadcasting.shape_of(x)[0], -1)), values[1], axis=1)
    (axis,) = broadcasting.example_axes(axis, len(broadcasting.shape_of(x)) - 1)
    return prim(x, values[1], axis=axis)


defbatch(repeat, _batch_repeat)
defbatch(sum_repeats, broadcasting.batch_axes_argument(2))
