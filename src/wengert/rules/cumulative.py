"""Cumulative sums: ``cumsum`` and its adjoint, the reversed cumulative sum.

``cumsum`` is linear: its VJP sums the cotangent from the end (``flip(cumsum(flip(g)))``) and its
JVP is the cumulative sum of the tangent. ``cumprod`` is composed from products in
``wengert.numpy`` (a scan), exact when the input holds zeros.
"""

import numpy as np

from wengert.core.extend import defbatch, defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, indexing

__all__ = ["cumsum"]


def _cumsum_impl(a, axis):
    """numpy.cumsum along one (non-negative) axis; the caller flattens for ``axis=None``."""
    return np.cumsum(a, axis=axis)


def _reverse(x, axis):
    return indexing.getitem(x, (slice(None),) * axis + (slice(None, None, -1),))


def _cumsum_vjp(g, out, x, axis):
    return _reverse(cumsum(_reverse(g, axis), axis), axis)


cumsum = Primitive(_cumsum_impl, name="cumsum", grad_post=broadcasting.unbroadcast)
defvjp(cumsum, _cumsum_vjp)
defjvp(cumsum, lambda t, out, x, axis: cumsum(t, axis))
facts(cumsum, linear=(0,), fresh=True)
facts(cumsum, saves=())  # what its VJP reads: nothing but g (wengert.engines.saving)
defbatch(cumsum, broadcasting.batch_axes_argument(1))
