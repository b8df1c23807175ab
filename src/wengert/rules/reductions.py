"""Reductions: sum, prod, max, min over axes (``mean``, ``var``, ``std`` are composed from these).

Each rule puts the reduced axes back (``expand_reduced``) and broadcasts to the input's shape.
``max``/``min`` split the cotangent equally between tied maxima, as HIPS autograd and JAX do.
``prod`` is exact when inputs contain zeros (no division by zero).
"""

import numpy as np

from wengert.core.extend import defbatch, defjvp, defvjp, facts, nondiff_primitive
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, elementwise
from wengert.rules.broadcasting import expand_reduced, normalize_axis, sum  # noqa: A004 - NumPy's name

__all__ = ["sum", "prod", "amax", "amin", "normalize_axis", "expand_reduced", "chooser_weights", "add_chosen"]


def _prod_impl(a, axis=None, keepdims=False):
    return np.prod(a, axis=axis, keepdims=keepdims)


def _prod_partials(out, x, axis, keepdims):
    """d prod / d x_i, the product of the other elements, without dividing by zero.

    With q the product of the nonzero elements and z that of the zero ones (prod = q z):
    a nonzero x_i gets q z / x_i; a zero x_i gets q times the product of the *other* zeros, i.e.
    q with one zero, the other zero (written s - x_i, s the sum of the zeros) with two, 0 with
    more. Written so, the partials have the right derivatives too (second order exact).
    """
    E = elementwise
    is_zero = x == 0
    zeros = np.sum(is_zero, axis=axis, keepdims=True)
    q = prod(E.where(is_zero, 1.0, x), axis=axis, keepdims=True)
    z = prod(E.where(is_zero, x, 1.0), axis=axis, keepdims=True)
    nonzero_part = q * z / E.where(is_zero, 1.0, x)
    s = sum(E.where(is_zero, x, 0.0), axis=axis, keepdims=True)
    zero_part = q * E.where(zeros == 1, 1.0, E.where(zeros == 2, s - x, 0.0))
    return E.where(is_zero, zero_part, nonzero_part)


prod = Primitive(_prod_impl, name="prod")
defvjp(prod, lambda g, out, x, axis=None, keepdims=False:
       expand_reduced(g, broadcasting.shape_of(x), axis, keepdims) * _prod_partials(out, x, axis, keepdims))
defjvp(prod, lambda t, out, x, axis=None, keepdims=False:
       sum(t * _prod_partials(out, x, axis, keepdims), axis=axis, keepdims=keepdims))
facts(prod, fresh=True, saves=(0,))  # its VJP reads x (_prod_partials ignores out; wengert.engines.saving)


def _chooser_weights_impl(out, x, axis, keepdims):
    """1/k on each of the k elements equal to the max (min) along ``axis``, 0 elsewhere (a helper of
    generated code too: NumPy alone)."""
    other = type(x) is not np.ndarray and hasattr(type(x), "__array_function__")  # Dask, CuPy: their own
    if not other:
        x = np.asarray(x)
    hit = x == (out if keepdims or axis is None else np.expand_dims(out, axis))
    if axis is None and not other:  # one count: cheaper than a keepdims reduction and a broadcast division
        w = hit.astype(x.dtype)
        k = np.count_nonzero(hit)
        if k != 1:
            w /= k
        return w
    return hit / hit.sum(axis=axis, keepdims=True).astype(x.dtype)


def add_chosen(buf, g, out, x, axis=None, keepdims=False):
    """``buf += g * chooser_weights(out, x, axis, keepdims)`` in place, ``g`` a scalar, ``out`` the max (min)
    of ``x``: those statements' values for every ``g`` -- a nan or infinite ``g`` times a weight 0 is nan,
    0 times the weights' nan (no element equals a nan maximum) is nan -- the sign of a zero aside (adding
    ``g * 0`` is adding nothing: ``add``'s unit). Without a dense array of weights where that is exact:
    nothing at ``g == 0`` and no nan maximum; over all axes, a finite ``g`` shared by the maxima in one
    update of those alone. ``chooser_weights``' ``adds_scaled`` fact: generated code's form of the
    accumulation into a max's adjoint buffer (``liveness.scaled_adds``), called at every ``g``; NumPy
    alone."""
    if not g and ((out == out) if axis is None else (out == out).all()):
        return  # 0 times finite weights (no maximum is nan): nothing, the commonest case in a logsumexp
    if axis is None and abs(g) <= 1.7976931348623157e308:  # g finite (the largest double): g * 0 adds nothing
        x = np.asarray(x)
        where = (x == out).ravel().nonzero()[0]
        if len(where) == 1:
            buf.flat[where[0]] += g
            return
        if len(where):
            buf.flat[where] += g * (np.ones((), x.dtype) / len(where))
            return
    # over some axes, a nan or infinite g, or no element equal to the maximum (a nan): the dense weights
    buf += g * chooser_weights(out, x, axis, keepdims)


# The weights are piecewise constant in x: no derivative flows through them.
chooser_weights = nondiff_primitive(_chooser_weights_impl, "chooser_weights")
facts(chooser_weights, fresh=True, helper=True, adds_scaled=add_chosen)


def _chooser_weights(out, x, axis, keepdims):
    return chooser_weights(out, x, axis, keepdims)


def _amax_impl(a, axis=None, keepdims=False):
    """numpy.max."""
    if type(a) is np.ndarray:
        return a.max(axis=axis, keepdims=keepdims)
    return np.max(a, axis=axis, keepdims=keepdims)


def _chooser_vjp(g, out, x, axis=None, keepdims=False):
    w = _chooser_weights(out, x, axis, keepdims)  # shaped like x
    if axis is None and not keepdims:
        return g * w  # g is a scalar: the product already has x's shape
    return expand_reduced(g, broadcasting.shape_of(x), axis, keepdims) * w


def _chooser_jvp(t, out, x, axis=None, keepdims=False):
    return sum(t * _chooser_weights(out, x, axis, keepdims), axis=axis, keepdims=keepdims)


amax = Primitive(_amax_impl, name="max")
defvjp(amax, _chooser_vjp)
defjvp(amax, _chooser_jvp)
facts(amax, fresh=True, saves=("out", 0))  # the maxima's places: x == out


def _amin_impl(a, axis=None, keepdims=False):
    """numpy.min."""
    if type(a) is np.ndarray:
        return a.min(axis=axis, keepdims=keepdims)
    return np.min(a, axis=axis, keepdims=keepdims)


amin = Primitive(_amin_impl, name="min")
defvjp(amin, _chooser_vjp)
defjvp(amin, _chooser_jvp)
facts(amin, fresh=True, saves=("out", 0))


def _batch_chooser_weights(prim, values, batched, kwargs):
    out, x, axis, keepdims = values
    if batched[2] or batched[3]:
        return NotImplemented
    n = len(broadcasting.shape_of(x)) - batched[1]
    axes = broadcasting.example_axes(axis, n)
    if batched[0] and not batched[1]:
        return NotImplemented
    if not batched[0]:  # one maximum for every example's x: line it up with the batch
        out = broadcasting.broadcast_to(out, broadcasting.shape_of(x)[:1] + tuple(broadcasting.shape_of(out)))
    return prim(out, x, axes, keepdims)


for _reduction in (prod, amax, amin):
    defbatch(_reduction, broadcasting.batch_reduction)
defbatch(chooser_weights, _batch_chooser_weights)
