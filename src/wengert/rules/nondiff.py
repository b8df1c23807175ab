"""Functions whose results carry no derivative: comparisons, logic, predicates, arg-functions,
and constructors that copy only a shape. Traced arguments are unboxed; the result is a constant.
"""

import operator

import numpy as np

from wengert.core.extend import defbatch, facts, nondiff_primitive
from wengert.core.trace import unbox_all
from wengert.rules.broadcasting import NotBatched, batch_unary, dtype_of, reshape, shape_of
from wengert.rules.elementwise import _binary

__all__ = [
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite",
    "signbit", "argmax", "argmin", "argsort", "nonzero", "flatnonzero", "argwhere", "count_nonzero",
    "zeros_like", "ones_like", "empty_like", "full_like", "shape", "ndim", "size",
    "isclose", "allclose", "array_equal", "stop_gradient",
]

equal = nondiff_primitive(_binary(np.equal, operator.eq), "equal")
not_equal = nondiff_primitive(_binary(np.not_equal, operator.ne), "not_equal")
less = nondiff_primitive(_binary(np.less, operator.lt), "less")
less_equal = nondiff_primitive(_binary(np.less_equal, operator.le), "less_equal")
greater = nondiff_primitive(_binary(np.greater, operator.gt), "greater")
greater_equal = nondiff_primitive(_binary(np.greater_equal, operator.ge), "greater_equal")
for _comparison, _symbol in ((equal, "=="), (not_equal, "!="), (less, "<"), (less_equal, "<="),
                             (greater, ">"), (greater_equal, ">=")):
    facts(_comparison, operator=_symbol, fresh=True, broadcasts=True)
logical_and = nondiff_primitive(np.logical_and)
logical_or = nondiff_primitive(np.logical_or)
logical_xor = nondiff_primitive(np.logical_xor)
logical_not = nondiff_primitive(np.logical_not)
isnan = nondiff_primitive(np.isnan)
isinf = nondiff_primitive(np.isinf)
isfinite = nondiff_primitive(np.isfinite)
signbit = nondiff_primitive(np.signbit)
argmax = nondiff_primitive(np.argmax)
argmin = nondiff_primitive(np.argmin)
argsort = nondiff_primitive(np.argsort)
nonzero = nondiff_primitive(np.nonzero)
flatnonzero = nondiff_primitive(np.flatnonzero)
argwhere = nondiff_primitive(np.argwhere)
count_nonzero = nondiff_primitive(np.count_nonzero)
zeros_like = facts(nondiff_primitive(np.zeros_like), shape_only=True)  # constant folding makes them constants
ones_like = facts(nondiff_primitive(np.ones_like), shape_only=True)
empty_like = nondiff_primitive(np.empty_like)
full_like = nondiff_primitive(np.full_like)
shape = nondiff_primitive(np.shape)
ndim = nondiff_primitive(np.ndim)
size = nondiff_primitive(np.size)
isclose = nondiff_primitive(np.isclose)
allclose = nondiff_primitive(np.allclose)
array_equal = nondiff_primitive(np.array_equal)


def no_derivative(x):
    """``x`` itself: the statement ``wg.stop_gradient`` leaves in a program, where the cut is the point."""
    return x


stop_gradient = facts(nondiff_primitive(no_derivative, "stop_gradient"), helper=True)
"""``wg.stop_gradient`` of a program's symbol (``wg.compile``, ``wg.source_grad``): a statement whose result
carries no derivative. On the engines' boxes ``wg.stop_gradient`` unboxes instead."""


def one_example(prim, values, batched, kwargs):
    """Batching rule of a function of its arguments' shapes and dtypes alone (``np.shape``,
    ``np.result_type``): one example's answer is every example's."""
    return NotBatched(prim(*[_stand_in(v, b) for v, b in zip(values, batched)], **kwargs))


def _stand_in(v, batched):
    """An array of one example's shape and dtype in place of ``v`` (traced or a batch), or ``v``."""
    if not batched and type(unbox_all(v)) is not type(v):
        return v
    shape = tuple(shape_of(v))[1 if batched else 0:]
    return np.empty(shape, dtype_of(v))


for _query in (shape, ndim, size):
    defbatch(_query, one_example)
for _like in (zeros_like, ones_like, empty_like, full_like):
    defbatch(_like, batch_unary)
for _predicate in (isnan, isinf, isfinite, signbit, logical_not, stop_gradient):  # elementwise, one argument
    defbatch(_predicate, batch_unary)


def batch_along_axis(position, default):
    """Batching rule of an arg-function along one ``axis`` of its first argument (``argsort``,
    ``argmax``), given at ``position`` or by keyword (``default`` where absent): the same along the
    example's axis, shifted past the batch axis; ``axis=None`` (NumPy's flattened array) along each
    example flattened alone. Options after the axis given by position take the loop."""
    def rule(prim, values, batched, kwargs):
        if any(batched[1:]) or len(values) > position + 1:
            return NotImplemented
        values, kwargs = list(values), dict(kwargs)
        axis = values.pop(position) if position < len(values) else kwargs.pop("axis", default)
        x = values[0]
        dims = tuple(shape_of(x))
        if axis is None:
            if kwargs.get("keepdims"):
                return NotImplemented
            values[0], axis = reshape(x, dims[:1] + (-1,)), 1
        elif len(dims) == 1:
            return NotImplemented  # an example of 0 dimensions
        else:
            axis = int(axis) % (len(dims) - 1) + 1
        return prim(*values, axis=axis, **kwargs)
    return rule


defbatch(argsort, batch_along_axis(1, -1))
defbatch(argmax, batch_along_axis(1, None))
defbatch(argmin, batch_along_axis(1, None))
