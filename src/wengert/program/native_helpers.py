"""Numba versions of generated code's helpers: the same values as the Python helper, in Numba's dialect.

A helper (``rendering``: a function of NumPy alone whose source a generated module includes) is
written for any array library, with type checks Numba cannot compile. Its Numba version here is a
plain function of the same signature and values (ties split exactly as the Python helper splits
them, ``0 * inf`` never made, the result in the Python helper's dtype) written with what Numba
compiles for scalars and arrays of any rank alike; ``native_build`` puts its source in place of the
Python helper's in a program's Numba module (under the name generated code calls), and
``native.native_fact`` counts a primitive whose helper has one as native. The functions run as
plain NumPy too (the tests compare both ways); they are not decorated here: the module that
includes them decorates every function.
"""

from typing import cast

import numpy as np

from wengert.core.primitive import Primitive
from wengert.program.diagonal_products import (
    columns_scaled,
    columns_scaled_native,
    rows_scaled,
    rows_scaled_native,
)
from wengert.rules.elementwise import masked, tie_select
from wengert.rules.indexing import index_add, may_repeat, untake
from wengert.rules.nondiff import no_derivative
from wengert.rules.reductions import add_chosen, chooser_weights

__all__ = ["native_helper", "NATIVE_HELPERS", "SUPPORT", "TYPED", "index_repeats", "assign_at",
           "register_typing"]


def masked_native(a, mask):
    """``np.where(mask, a, 0)`` in ``a``'s dtype (the Python helper's ``masked``): the product, exact but
    where ``a`` is inf or nan and the mask false, which entries are then set to 0."""
    out = np.asarray(a * mask)
    flat = out.reshape(out.size)  # a view (0-d too: Numba's isfinite of a 0-d array is a bool)
    if not np.isfinite(flat).all():
        chosen = np.asarray(np.asarray(mask) + np.zeros_like(out)).reshape(out.size)  # the mask, broadcast
        for i in range(flat.size):
            if chosen[i] == 0:
                flat[i] = 0
    return out


def tie_select_native(g, x, y):
    """``g`` where x > y, ``g / 2`` where x == y, 0 elsewhere, in ``g``'s dtype (``tie_select``): ``g``
    times weights 1, 0.5 or 0 (exact products), 0 set where the weight is 0 and ``g`` inf or nan."""
    g = np.asarray(g)
    weight = np.asarray((x > y) + 0.5 * (x == y)).astype(g.dtype)
    out = np.asarray(g * weight)
    flat = out.reshape(out.size)  # a view (0-d too: Numba's isfinite of a 0-d array is a bool)
    if not np.isfinite(flat).all():
        chosen = np.asarray(weight + np.zeros_like(out)).reshape(out.size)  # the weights, broadcast
        for i in range(flat.size):
            if chosen[i] == 0:
                flat[i] = 0
    return out


def reduced_groups(x, axis):
    """``(group, count)``: the group of each of ``x``'s elements in C order (its index in the C-ordered
    result of a reduction over ``axis``: None, an int or a tuple of ints) and the number of groups."""
    n = x.ndim
    reduced = np.zeros(max(n, 1), np.bool_)
    if axis is None:
        reduced[:] = True
    else:
        for a in np.atleast_1d(np.asarray(axis)):
            reduced[a % n] = True
    shape = x.shape
    stride = np.zeros(max(n, 1), np.int64)  # a step along axis d moves the group by stride[d]
    count = 1
    for d in range(n - 1, -1, -1):
        if not reduced[d]:
            stride[d] = count
            count *= shape[d]
    group = np.empty(x.size, np.int64)
    index = np.zeros(max(n, 1), np.int64)
    at = 0
    for i in range(x.size):  # counting through x's index in C order
        group[i] = at
        d = n - 1
        while d >= 0:
            index[d] += 1
            at += stride[d]
            if index[d] < shape[d]:
                break
            at -= stride[d] * shape[d]
            index[d] = 0
            d -= 1
    return group, count


def chooser_weights_native(out, x, axis, keepdims):
    """1/k on each of the k elements equal to ``out`` (the max or min along ``axis``), 0 elsewhere
    (``chooser_weights``): ``out``'s elements, in C order, are the reduced groups' in C order."""
    x = np.asarray(x)
    group, groups = reduced_groups(x, axis)
    maxima = np.asarray(out).ravel()
    if maxima.size != groups:
        raise ValueError("chooser_weights: the maxima do not have the reduced shape of x")
    flat = x.ravel()
    one = np.ones(1, x.dtype) / np.ones(1, x.dtype)  # 1 in true division's dtype (x's, for floats)
    counts = np.zeros(groups, one.dtype)
    for i in range(flat.size):
        if flat[i] == maxima[group[i]]:
            counts[group[i]] += 1
    weights = np.zeros(flat.size, one.dtype)
    for i in range(flat.size):
        if flat[i] == maxima[group[i]]:
            weights[i] = one[0] / counts[group[i]]
        elif counts[group[i]] == 0:  # no element equals the maximum (a nan): the Python helper's 0 / 0
            weights[i] = np.nan
    return weights.reshape(x.shape)


def extremes_native(x, axis, largest):
    """The max (``largest``) or min of ``x`` over ``axis``, flat, in C order (Numba has no ``axis`` for
    ``np.max``; the module reshapes the result): nan wins, as in NumPy."""
    group, groups = reduced_groups(x, axis)
    flat = x.ravel()
    out = np.empty(groups, x.dtype)
    seen = np.zeros(groups, np.bool_)
    for i in range(flat.size):
        k = group[i]
        v = flat[i]
        if not seen[k]:
            out[k] = v
            seen[k] = True
        elif out[k] == out[k] and (v != v or (v > out[k] if largest else v < out[k])):
            out[k] = v
    return out


def add_chosen_native(buf, g, out, x, axis, keepdims):
    """``buf += g * chooser_weights(out, x, axis, keepdims)`` in place, as ``add_chosen``, for every ``g``:
    over some axes, at a nan or infinite ``g``, or where no element equals the maximum (a nan) the dense
    weights; else nothing added where ``g`` is 0, and ``g`` shared by the maxima alone."""
    share = np.asarray(g).ravel()[0]
    tops = np.asarray(out).ravel()
    if share == 0 and not np.isnan(tops).any():  # 0 times finite weights (no maximum is nan)
        return
    if axis is not None or not np.isfinite(share):  # nan or inf times a weight 0 is nan: everywhere
        buf += g * chooser_weights_native(out, x, axis, keepdims)
        return
    top = tops[0]
    flat = np.asarray(x).ravel()
    count = 0
    for i in range(flat.size):
        if flat[i] == top:
            count += 1
    if count == 0:
        buf += g * chooser_weights_native(out, x, axis, keepdims)
        return
    if count != 1:  # 1/k in x's dtype, as the Python helper's np.ones((), x.dtype) / k
        share = share * (np.ones(1, flat.dtype) / np.full(1, count, flat.dtype))[0]
    for i in range(flat.size):
        if flat[i] == top:
            buf.flat[i] += share


# -- indexing's adjoints: np.add.at where an index may repeat, assignment (or +=) where it may not ------

def index_repeats(idx):
    """``may_repeat(idx)``: whether ``idx`` holds an integer array. Numba cannot ask a value's type in
    its own code (no ``isinstance`` of a slice or an array), so compiled code calls this very function,
    which :func:`register_typing` answers from the argument's Numba type (a constant of the signature)."""
    return may_repeat(idx)


def add_at_native(buf, idx, e):
    """NumPy's ``np.add.at`` of ``buf, idx, e``: ``e`` (broadcast to ``buf[idx]``'s shape) added at each
    position ``idx`` selects, one at a time in the index's C order, a repeated position once per occurrence;
    ``buf``'s flat positions are those of an ``arange`` of its size indexed like it (Numba's indexing:
    negative indices count from the end; no bounds are checked)."""
    picked = np.atleast_1d(np.asarray(np.arange(buf.size).reshape(buf.shape)[idx]))
    values = np.broadcast_to(np.asarray(e), picked.shape).ravel()
    positions = picked.ravel()
    for i in range(positions.size):
        buf.flat[positions[i]] += values[i]


def assign_at(out, idx, g):
    """``out[idx] = g``, or ``np.add.at(out, idx, g)`` (``add_at_native``) where the index may repeat:
    where ``untake`` puts its ``g``. Compiled code calls this very function, to which
    :func:`register_typing` gives one implementation by the index's Numba type, so that Numba compiles
    only the one it runs: ``add_at_native``; :func:`assign_slices` for slices alone (a loop, which
    Numba compiles in about a quarter of the time of its slice assignment); else the assignment."""
    if index_repeats(idx):
        add_at_native(out, idx, g)
    else:
        out[idx] = g


def assign_slices(out, idx, g):
    """``out[idx] = g`` for ``idx`` a slice or a tuple of slices (a view of ``out``), ``g`` broadcast
    to it: element by element (:func:`copy_rows`), in ``out``'s dtype, as the assignment. Under Numba,
    for ``g`` an array of ``out``'s rank (:func:`spread_slices` for the others)."""
    view = out[idx]
    values = np.asarray(g)
    if values.shape == view.shape:
        copy_rows(view, values)
    else:
        spread_slices(out, idx, values)


def spread_slices(out, idx, g):
    """:func:`assign_slices` with ``g`` broadcast to the view, whatever its shape."""
    view = out[idx]
    copy_rows(view, np.broadcast_to(np.asarray(g), view.shape))


def copy_rows(view, values):
    """``view[...] = values`` (arrays of one shape), a row of the last axis at a time: under Numba,
    faster to compile and to run than its assignment into a slice (or a loop over every index)."""
    for i in np.ndindex(view.shape[:-1]):
        row, source = view[i], values[i]
        for j in range(row.shape[0]):
            row[j] = source[j]


def assign_item(out, idx, g):
    """``out[idx] = g``, as written: an index of integers (and slices) that does not repeat."""
    out[idx] = g


def untake_native(g, idx, shape):
    """Zeros of ``shape`` in ``g``'s dtype with ``g`` added at ``idx`` (``untake``): ``np.add.at`` where
    the index may repeat (0 + g: -0.0 becomes 0.0, as there), assignment where it may not."""
    out = np.zeros(shape, np.asarray(g).dtype)
    assign_at(out, idx, g)
    return out


def index_add_native(x, idx, v):
    """A copy of ``x`` with ``v`` added at ``idx`` (``index_add``, ``x.at[idx].add(v)``): ``np.add.at``
    where the index may repeat, ``out[idx] += v`` where it may not (v cast to x's dtype)."""
    out = np.copy(x)
    if index_repeats(idx):
        add_at_native(out, idx, v)
    else:
        out[idx] += v
    return out


def _repeats_type(idx, types):
    """``may_repeat`` of a value of Numba type ``idx`` (``types``: ``numba.core.types``): an integer array
    (or list) in it, or among its parts."""
    parts = idx.types if isinstance(idx, types.BaseTuple) else (idx,)
    return any(isinstance(t, (types.Array, types.List)) and isinstance(t.dtype, types.Integer) for t in parts)


_TYPED = []


def register_typing(numba):
    """Teach Numba :func:`index_repeats` (once a process): its answer is a constant of the argument's
    type; and :func:`assign_at`: an implementation chosen by the index's type."""
    if _TYPED:
        return
    _TYPED.append(numba)

    types = numba.core.types

    def typed(idx):
        repeats = _repeats_type(idx, types)
        return (lambda idx: True) if repeats else (lambda idx: False)

    numba.extending.overload(index_repeats)(typed)
    add_at = numba.njit(error_model="numpy")(add_at_native)

    def placed(out, idx, g):
        if _repeats_type(idx, types):
            return lambda out, idx, g: add_at(out, idx, g)
        parts = idx.types if isinstance(idx, types.BaseTuple) else (idx,)
        if not all(isinstance(t, types.SliceType) for t in parts):
            return assign_item
        if isinstance(g, types.Array) and g.ndim == out.ndim:
            return assign_slices
        if not isinstance(g, types.Array) or g.ndim < out.ndim:
            return spread_slices
        return assign_item  # more axes than out (length 1): NumPy's assignment drops them

    numba.extending.overload(assign_at)(placed)
    for called in (spread_slices, copy_rows):  # what assign_slices calls
        numba.extending.register_jitable(called)


NATIVE_HELPERS = {masked: masked_native, cast(Primitive, tie_select).helper: tie_select_native,
                  chooser_weights.helper: chooser_weights_native, add_chosen: add_chosen_native,
                  no_derivative: no_derivative, cast(Primitive, untake).helper: untake_native,
                  cast(Primitive, index_add).helper: index_add_native,
                  rows_scaled: rows_scaled_native, columns_scaled: columns_scaled_native}
"""The Python helper -> its Numba version (``no_derivative``, the identity, is its own)."""

SUPPORT = (reduced_groups, extremes_native, chooser_weights_native, add_at_native)
"""What the Numba versions call, the reductions over axes Numba lacks and ``np.add.at``'s spelling:
included in a module that uses any of them (under their own names)."""

TYPED = (index_repeats, assign_at)
"""What the Numba versions call that Numba types by an overload (:func:`register_typing`): imported
by a module that uses any of them, not included."""


def native_helper(fun):
    """The Numba version of helper ``fun`` (a function of :data:`NATIVE_HELPERS`), or None."""
    return NATIVE_HELPERS.get(fun)
