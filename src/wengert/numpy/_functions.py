"""NumPy-signature functions built on the rule table: argument handling, and the functions that are
composed from primitives rather than given rules of their own (mean, var, dot, stack, tile, ...).

Nothing here defines a derivative: each function only calls primitives.
"""

import builtins
import math
import string
from typing import Any

import numpy as np

from wengert.core.trace import BOX_TYPES, contains_box, unbox_all
from wengert.numpy._layout import copied_as_numpy_would, numpy_view
from wengert.rules import broadcasting, elementwise, indexing, products, reductions
from wengert.rules import complex as complex_parts
from wengert.rules import shape as shape_ops

_shape = broadcasting.shape_of


def _no_out(fname, out):
    if out is not None:
        raise TypeError(
            f"wengert.numpy.{fname}: out= is not supported (it would write into an array behind "
            f"the derivative's back); use the returned value instead")


def _ndim(x):
    return len(_shape(x))


def _operand(a):
    """A list or tuple given as an array argument, as NumPy reads it: one array, a traced stack when
    it holds traced values (HIPS autograd's habit), so that rules never see a list."""
    if type(a) is list or type(a) is tuple:
        return array(a)
    return a


# -- reductions ----------------------------------------------------------------------------------


def _reduce_args(fname, a, axis, dtype, out):
    _no_out(fname, out)
    a = _operand(a)
    if axis is not None:
        reductions.normalize_axis(axis, _ndim(a), fname)
    if dtype is not None:
        a = shape_ops.astype(a, dtype)
    if type(axis) is list:
        axis = tuple(axis)
    return a, axis


def _masked(fname, a, where, fill):
    """``a`` with ``fill`` where the ``where=`` mask is false (a mask is never traced: read its values)."""
    if where is True:
        return a
    if not isinstance(fill, (int, float)) and contains_box(fill):
        raise TypeError(f"wengert.numpy.{fname}: give a plain number as initial= with where=")
    return elementwise.where(unbox_all(where), a, fill)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True) -> Any:  # noqa: A001
    """numpy.sum (also of a list holding traced values); ``where=`` masks, ``initial=`` is added."""
    if axis is None and dtype is None and out is None and initial is None and where is True:
        if type(a) is list or type(a) is tuple:
            a = array(a)
        return reductions.sum(a, keepdims=keepdims)
    a, axis = _reduce_args("sum", a, axis, dtype, out)
    total = reductions.sum(_masked("sum", a, where, 0.0), axis=axis, keepdims=keepdims)
    return total if initial is None else total + initial


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True) -> Any:
    """numpy.prod; ``where=`` masks, ``initial=`` multiplies."""
    a, axis = _reduce_args("prod", a, axis, dtype, out)
    product = reductions.prod(_masked("prod", a, where, 1.0), axis=axis, keepdims=keepdims)
    return product if initial is None else product * initial


def _extreme(fname, reduction, pick, a, axis, out, keepdims, initial, where):
    """numpy.max/min with ``initial=`` (taken as one more element) and ``where=`` (which needs it)."""
    if where is not True and initial is None:
        ufunc = "maximum" if fname == "max" else "minimum"
        raise ValueError(f"reduction operation '{ufunc}' does not have an identity, so to "
                         f"use a where mask one has to specify 'initial'")
    a, axis = _reduce_args(fname, a, axis, None, out)
    result = reduction(_masked(fname, a, where, initial), axis=axis, keepdims=keepdims)
    return result if initial is None else pick(result, initial)


def max(a, axis=None, out=None, keepdims=False, initial=None, where=True) -> Any:  # noqa: A001
    """numpy.max (ties share the gradient equally, ``initial=`` counting as one of them)."""
    if axis is None and out is None and initial is None and where is True:
        return reductions.amax(_operand(a), keepdims=keepdims)
    return _extreme("max", reductions.amax, elementwise.maximum, a, axis, out, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=True) -> Any:  # noqa: A001
    """numpy.min (ties share the gradient equally, ``initial=`` counting as one of them)."""
    return _extreme("min", reductions.amin, elementwise.minimum, a, axis, out, keepdims, initial, where)


amax = max
amin = min


def _count(a, axis):
    s = _shape(a)
    return math.prod([s[i] for i in reductions.normalize_axis(axis, len(s))])


def mean(a, axis=None, dtype=None, out=None, keepdims=False) -> Any:
    """numpy.mean (composed: sum / count)."""
    a, axis = _reduce_args("mean", a, axis, dtype, out)
    if broadcasting.dtype_of(a).kind in "biu":
        a = shape_ops.astype(a, np.float64)
    return reductions.sum(a, axis=axis, keepdims=keepdims) / _count(a, axis)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False) -> Any:
    """numpy.var (composed; |x - mean|**2 for complex x, as NumPy)."""
    a, axis = _reduce_args("var", a, axis, dtype, out)
    if broadcasting.dtype_of(a).kind in "biu":
        a = shape_ops.astype(a, np.float64)
    d = a - reductions.sum(a, axis=axis, keepdims=True) / _count(a, axis)
    if broadcasting.dtype_of(d).kind == "c":  # NumPy's var of complex values: mean of |d|**2
        d2 = complex_parts.real(d * complex_parts.conj(d))
    else:
        d2 = d * d
    return reductions.sum(d2, axis=axis, keepdims=keepdims) / (_count(a, axis) - ddof)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False) -> Any:
    """numpy.std (composed: sqrt of var)."""
    return elementwise.sqrt(var(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims))


# -- products ------------------------------------------------------------------------------------


def dot(a, b, out=None) -> Any:
    """numpy.dot: multiply for scalars, matmul up to 2-D, tensordot over (last, second-last)."""
    _no_out("dot", out)
    a, b = _operand(a), _operand(b)
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return elementwise.multiply(a, b)
    if na <= 2 and nb <= 2:
        return products.matmul(a, b)
    return products.tensordot(a, b, ([na - 1], [builtins.max(nb - 2, 0)]))


def inner(a, b) -> Any:
    """numpy.inner: sum over the last axes."""
    a, b = _operand(a), _operand(b)
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return elementwise.multiply(a, b)
    return products.tensordot(a, b, ([na - 1], [nb - 1]))


def outer(a, b, out=None) -> Any:
    """numpy.outer (composed: a column times a row)."""
    _no_out("outer", out)
    a, b = _operand(a), _operand(b)
    return elementwise.multiply(shape_ops.reshape(a, (-1, 1)), shape_ops.reshape(b, (1, -1)))


def matmul(x1, x2, out=None) -> Any:
    """numpy.matmul."""
    _no_out("matmul", out)
    return products.matmul(_operand(x1), _operand(x2))


def tensordot(a, b, axes=2) -> Any:
    """numpy.tensordot."""
    return products.tensordot(_operand(a), _operand(b), axes)


def _sublist_subscripts(operands):
    """NumPy's sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as (subscripts, operands)."""
    def letters(sublist):
        return "".join("..." if s is Ellipsis else string.ascii_letters[int(s)] for s in sublist)
    pairs = operands[:-1] if len(operands) % 2 else operands
    out = "->" + letters(operands[-1]) if len(operands) % 2 else ""
    return ",".join(letters(s) for s in pairs[1::2]) + out, list(pairs[0::2])


def _diagonals_first(subscripts, operands):
    """Subscripts with a letter repeated inside one operand (``'ii->i'``): that operand's diagonal
    taken first (wnp.diagonal, exact and differentiable), so the einsum sees distinct letters."""
    shapes = [_shape(o) for o in operands]
    ins, out = products._parse_einsum(subscripts, shapes)
    if all(len(set(s)) == len(s) for s in ins):
        return subscripts, operands
    operands = list(operands)
    for k, subs in enumerate(ins):
        while len(set(subs)) != len(subs):
            letter = next(c for c in subs if subs.count(c) > 1)
            first = subs.index(letter)
            second = subs.index(letter, first + 1)
            operands[k] = _arrays_diagonal(operands[k], first, second)
            subs = subs[:first] + subs[first + 1:second] + subs[second + 1:] + letter
        ins[k] = subs
    return ",".join(ins) + "->" + out, operands


def _arrays_diagonal(a, axis1, axis2):
    """numpy.diagonal(a, 0, axis1, axis2): the diagonal as the last axis."""
    moved = moveaxis(a, (axis1, axis2), (-2, -1))
    n = builtins.min(_shape(moved)[-2:])
    return indexing.getitem(moved, (Ellipsis, np.arange(n), np.arange(n)))


def einsum(*operands, out=None, optimize=False) -> Any:
    """numpy.einsum: subscripts as a string or in the sublist form; a letter repeated inside one
    operand (``'ii->i'``, ``'ii'``) takes that operand's diagonal."""
    _no_out("einsum", out)
    arrays: list[Any]
    if isinstance(operands[0], str):
        subscripts, arrays = operands[0], [_operand(o) for o in operands[1:]]
    elif len(operands) >= 2:
        subscripts, arrays = _sublist_subscripts(operands)
        arrays = [_operand(o) for o in arrays]
    else:
        raise TypeError("wengert.numpy.einsum: give the subscripts as a string, e.g. 'ij,jk->ik', "
                        "or in the sublist form einsum(a, [0, 1], b, [1, 2])")
    subscripts, arrays = _diagonals_first(subscripts, arrays)
    return products.einsum(subscripts, *arrays, optimize=optimize)


# -- shapes --------------------------------------------------------------------------------------


def reshape(a, shape_=None, order="C", *, newshape=None, shape=None, copy=None) -> Any:
    """numpy.reshape; ``order='F'`` is the C-order reshape of the reversed axes, reversed back."""
    target = shape_ if shape_ is not None else (shape if shape is not None else newshape)
    if isinstance(target, (int, np.integer)):
        target = (int(target),)
    target = tuple(target)
    if order == "F":
        flipped = shape_ops.transpose(a, None) if _ndim(a) > 1 else a
        out = shape_ops.reshape(flipped, target[::-1])
        return shape_ops.transpose(out, None) if len(target) > 1 else out
    if order not in ("C", "A"):  # 'A' is 'C' here: wengert's arrays are C-contiguous
        raise ValueError(f"wengert.numpy.reshape: order must be 'C', 'F' or 'A', not {order!r}")
    return copied_as_numpy_would(shape_ops.reshape(a, target), a, lambda v: np.reshape(v, target),
                                  lambda base: shape_ops.reshape(base, target))


def ravel(a, order="C") -> Any:
    """numpy.ravel (``order='F'`` reads the columns first): a view where ``a`` is C-contiguous, else a
    copy, as NumPy's (whose reshape would view a reversed array: ``x[::-1].reshape(-1)``)."""
    out = reshape(a, (-1,), order)
    if order != "C":
        return out
    return copied_as_numpy_would(out, a, np.ravel, lambda base: shape_ops.reshape(base, (-1,)))


def transpose(a, axes=None) -> Any:
    """numpy.transpose."""
    if axes is not None:
        axes = tuple(reductions.normalize_axis(ax, _ndim(a), "transpose")[0] for ax in axes)
        if sorted(axes) != list(range(_ndim(a))):
            raise ValueError("axes don't match array")
    return shape_ops.transpose(a, axes)


def swapaxes(a, axis1, axis2) -> Any:
    """numpy.swapaxes."""
    n = _ndim(a)
    (i,) = reductions.normalize_axis(axis1, n, "swapaxes")
    (j,) = reductions.normalize_axis(axis2, n, "swapaxes")
    perm = list(range(n))
    perm[i], perm[j] = perm[j], perm[i]
    return shape_ops.transpose(a, tuple(perm))


def moveaxis(a, source, destination) -> Any:
    """numpy.moveaxis."""
    n = _ndim(a)
    src = [reductions.normalize_axis(s, n, "moveaxis")[0] for s in np.atleast_1d(source)]
    dst = [reductions.normalize_axis(d, n, "moveaxis")[0] for d in np.atleast_1d(destination)]
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    order = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return shape_ops.transpose(a, tuple(order))


def expand_dims(a, axis) -> Any:
    """numpy.expand_dims."""
    s = _shape(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out_ndim = len(s) + len(axes)
    axes = reductions.normalize_axis(axes, out_ndim, "expand_dims")
    it = iter(s)
    new = tuple(1 if i in axes else next(it) for i in range(out_ndim))
    return shape_ops.reshape(a, new)


def squeeze(a, axis=None) -> Any:
    """numpy.squeeze."""
    s = _shape(a)
    if axis is None:
        axes = tuple(i for i, n in enumerate(s) if n == 1)
    else:
        axes = reductions.normalize_axis(axis, len(s), "squeeze")
        if any(s[i] != 1 for i in axes):
            raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return shape_ops.reshape(a, tuple(n for i, n in enumerate(s) if i not in axes))


def broadcast_to(array, shape) -> Any:
    """numpy.broadcast_to: NumPy's read-only view (a write into ``array`` is seen in it, a write into it
    is NumPy's ValueError), whether or not the primitive's array is one (small ones are filled)."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(shape)
    out = broadcasting.broadcast_to(array, shape)
    return numpy_view(out, array, lambda base: broadcasting.broadcast_to(base, shape), "broadcast_to",
                      readonly=True, numpy_fun=lambda base: np.broadcast_to(base, shape))


def concatenate(arrays, axis=0, out=None, dtype=None) -> Any:
    """numpy.concatenate."""
    _no_out("concatenate", out)
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    else:
        n = _ndim(arrays[0])
        if n == 0:
            raise ValueError("zero-dimensional arrays cannot be concatenated")
        for a in arrays[1:]:
            if _ndim(a) != n:
                raise ValueError(
                    f"all the input array dimensions except for the concatenation axis must match "
                    f"exactly, but got arrays of {n} and {_ndim(a)} dimensions")
        (axis,) = reductions.normalize_axis(axis, n, "concatenate")
    out_arr = shape_ops.concatenate(*arrays, axis=axis)
    return out_arr if dtype is None else shape_ops.astype(out_arr, dtype)


def stack(arrays, axis=0, out=None) -> Any:
    """numpy.stack."""
    _no_out("stack", out)
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to stack")
    shapes = {_shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError("all input arrays must have the same shape")
    n = _ndim(arrays[0]) + 1
    (axis,) = reductions.normalize_axis(axis, n, "stack")
    return shape_ops.stack(*arrays, axis=axis)


def hstack(tup) -> Any:
    """numpy.hstack."""
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, axis=0 if _ndim(arrs[0]) == 1 else 1)


def vstack(tup) -> Any:
    """numpy.vstack."""
    return concatenate([atleast_2d(a) for a in tup], axis=0)


def atleast_1d(a):
    """numpy.atleast_1d (one array)."""
    return reshape(a, (1,)) if _ndim(a) == 0 else a


def atleast_2d(a):
    """numpy.atleast_2d (one array)."""
    n = _ndim(a)
    return reshape(a, (1,) * (2 - n) + _shape(a)) if n < 2 else a


def _split_bounds(n, indices_or_sections, even):
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        if even and n % k:
            raise ValueError("array split does not result in an equal division")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    return [(int(bounds[i]), int(bounds[i + 1])) for i in range(len(bounds) - 1)]


def split(ary, indices_or_sections, axis=0) -> Any:
    """numpy.split (composed from slices)."""
    n = _ndim(ary)
    (axis,) = reductions.normalize_axis(axis, n, "split")
    bounds = _split_bounds(_shape(ary)[axis], indices_or_sections, even=True)
    pre = (slice(None),) * axis
    return [indexing.getitem(ary, pre + (slice(lo, hi),)) for lo, hi in bounds]


def array_split(ary, indices_or_sections, axis=0) -> Any:
    """numpy.array_split (composed from slices)."""
    n = _ndim(ary)
    (axis,) = reductions.normalize_axis(axis, n, "array_split")
    bounds = _split_bounds(_shape(ary)[axis], indices_or_sections, even=False)
    pre = (slice(None),) * axis
    return [indexing.getitem(ary, pre + (slice(lo, hi),)) for lo, hi in bounds]


def tile(A, reps) -> Any:
    """numpy.tile (composed: reshape, broadcast_to, reshape)."""
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    s = _shape(A)
    d = builtins.max(len(reps), len(s))
    reps = (1,) * (d - len(reps)) + reps
    s = (1,) * (d - len(s)) + s
    interleaved = tuple(v for n in s for v in (1, n))
    wide = tuple(v for r, n in zip(reps, s) for v in (r, n))
    out = broadcasting.broadcast_to(shape_ops.reshape(A, interleaved), wide)
    return shape_ops.reshape(out, tuple(r * n for r, n in zip(reps, s)))


def repeat(a, repeats, axis=None) -> Any:
    """numpy.repeat."""
    if axis is not None:
        (axis,) = reductions.normalize_axis(axis, _ndim(a), "repeat")
    return shape_ops.repeat(a, repeats, axis=axis)


def flip(m, axis=None) -> Any:
    """numpy.flip (composed: reversed slices)."""
    n = _ndim(m)
    axes = reductions.normalize_axis(axis, n, "flip")
    return indexing.getitem(m, tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(n)))


def fliplr(m) -> Any:
    """numpy.fliplr."""
    return flip(m, 1)


def flipud(m) -> Any:
    """numpy.flipud."""
    return flip(m, 0)


# -- elementwise with NumPy's argument conventions ---------------------------------------------


def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None) -> Any:  # noqa: A002
    """numpy.clip (the gradient passes where a_min <= a <= a_max, bounds included)."""
    _no_out("clip", out)
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    if lo is None and hi is None:
        raise ValueError("One of max or min must be given")
    return elementwise.clip(a, lo, hi)


def where(condition, x=None, y=None) -> Any:
    """numpy.where; with one argument, the indices where it is true (not differentiable)."""
    if x is None and y is None:
        return np.nonzero(unbox_all(condition))
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    return elementwise.where(unbox_all(condition), x, y)


# -- constructors ----------------------------------------------------------------------------------


def _stack_nested(obj):
    if type(obj) in BOX_TYPES:
        return obj
    if isinstance(obj, (list, tuple)):
        return stack([_stack_nested(o) for o in obj])
    return np.asarray(obj)


def array(object, dtype=None, copy=True, ndmin=0) -> Any:  # noqa: A002
    """numpy.array; lists that contain traced values become a stack of them (differentiable); a traced
    value itself is copied (``copy=True``: a write into either leaves the other alone, as NumPy's)."""
    if contains_box(object):
        out = _stack_nested(object)
        if dtype is not None and np.dtype(dtype) != broadcasting.dtype_of(out):
            out = shape_ops.astype(out, dtype)
        elif out is object and copy and broadcasting.dtype_of(out).kind != "b":  # np.positive: no bools
            out = elementwise.positive(out)
        while _ndim(out) < ndmin:
            out = expand_dims(out, 0)
        return out
    return np.array(object, dtype=dtype, copy=copy, ndmin=ndmin)


def asarray(a, dtype=None) -> Any:
    """numpy.asarray; traced values are returned as they are (cast when ``dtype`` differs)."""
    if contains_box(a):
        out = _stack_nested(a)
        if dtype is not None and np.dtype(dtype) != broadcasting.dtype_of(out):
            out = shape_ops.astype(out, dtype)
        return out
    return np.asarray(a, dtype=dtype)
