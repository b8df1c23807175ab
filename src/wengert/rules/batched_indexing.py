"""Batching rules of indexing (``wg.vmap``): ``x[idx]``, its adjoint ``untake``, and the functional
updates, for a batched ``x``, a batched index, or both; and the refusal of results whose shape
depends on the data.

A batched integer index (an embedding lookup ``W[i]``, ``x[i, j]`` with ``j`` batched, a 2-d batch of
indices) becomes one NumPy gather on the whole batch: each batched index part gets the batch axis in
front (lined up against the example's advanced-index shape), a batched ``x`` an ``arange`` over the
batch as one more advanced index, and the result is transposed where NumPy puts the advanced axes
elsewhere than a single example would. An unbatched ``x`` is indexed as it is, so the adjoint
scatters into a buffer of ``x``'s own shape, never one per example.

A result whose shape depends on the data -- a selection by a *batched* boolean mask, ``nonzero``,
``flatnonzero``, ``argwhere`` -- cannot be one batch (its examples have different shapes); the
primitives declare it with the batching rule :func:`data_dependent_shape`, which refuses before
anything runs, as JAX's ``NonConcreteBooleanIndexError`` does. A mask that is the same for every
example selects the same number of elements from each, and works.
"""

import numpy as np

from wengert.core.extend import defbatch
from wengert.rules import broadcasting, indexing, nondiff
from wengert.rules.shape import transpose

__all__ = ["DataDependentShapeError", "data_dependent_shape", "batched_gather_index", "refusal"]


class DataDependentShapeError(IndexError):
    """A result whose shape depends on the data was asked for inside ``wg.vmap`` (JAX's
    ``NonConcreteBooleanIndexError``)."""


_INSTEAD = ("Keep the shape fixed: wnp.where(mask, x, 0) in place of x[mask] (then a sum or a max "
            "ignores the zeros), wnp.sum(wnp.where(mask, x, 0)) for a masked sum, or a fixed number of "
            "indices such as wnp.argsort(...)[:k]; or loop over the examples in Python and keep the "
            "results in a list.")


def data_dependent_shape(what, depends_on):
    """The batching rule of a primitive whose result's shape depends on its argument's values:
    it refuses, naming ``what`` (``"np.nonzero(x)"``) and what the shape counts (``depends_on``)."""

    def refuse(prim, values, batched, kwargs):
        raise DataDependentShapeError(refusal(what, depends_on))

    refuse.__name__ = f"refuse_{what}"
    return refuse


def refusal(what, depends_on):
    """The message refusing ``what`` (a data-dependent shape) inside ``wg.vmap``."""
    return (f"wg.vmap: {what} has a result whose shape depends on the data ({depends_on}, which differs "
            f"between examples), so the examples cannot be one batch (as in jax.vmap: "
            f"NonConcreteBooleanIndexError). {_INSTEAD}")


defbatch(nondiff.nonzero, data_dependent_shape(
    "np.nonzero(x) (also np.where(x) with one argument)", "the number of nonzero elements"))
defbatch(nondiff.flatnonzero, data_dependent_shape("np.flatnonzero(x)", "the number of nonzero elements"))
defbatch(nondiff.argwhere, data_dependent_shape("np.argwhere(x)", "the number of nonzero elements"))


# -- gathers --------------------------------------------------------------------------------------

def _parts(idx, flags):
    """``idx`` as a tuple of parts and a tuple saying which are batched; lists as arrays."""
    if type(idx) is tuple:
        parts, flags = idx, flags if type(flags) is tuple else (bool(flags),) * len(idx)
    else:
        parts, flags = (idx,), (bool(flags),)
    return tuple(np.asarray(p) if type(p) is list else p for p in parts), flags


def _advanced(p, batched):
    """Whether index part ``p`` is an advanced index (an integer array, or an integer, which NumPy
    counts as one beside arrays) rather than a slice, None or Ellipsis."""
    return batched or not (p is None or p is Ellipsis or type(p) is slice)


def batched_gather_index(x_batched, ndim, idx, flags, size):
    """``(new, perm)``: ``x[new]`` transposed by ``perm`` (None: as it is) is the batch of every example's
    ``x_b[idx_b]``, where ``x`` holds the batch on axis 0 if ``x_batched`` (``ndim``: an example's rank)
    and ``idx``'s parts marked in ``flags`` hold the batch on axis 0 (``flags`` a bool, or one per part
    of a tuple index). None where NumPy's own per-example call should answer (an index it refuses);
    raises :class:`DataDependentShapeError` for a batched boolean mask."""
    parts, flags = _parts(idx, flags)
    expanded, eflags = [], []
    for p, b in zip(parts, flags):
        kind = broadcasting.dtype_of(p).kind if (b or type(p) is np.ndarray) else None
        if kind == "b":
            if b:
                raise DataDependentShapeError(refusal("x[mask] with a boolean mask batched by wg.vmap",
                                                      "the number of True elements"))
            if p.ndim == 0:
                return None
            expanded.extend(p.nonzero())  # a constant mask: the same selection for every example
            eflags.extend([False] * p.ndim)
            continue
        if kind is not None and kind not in "iu":
            return None  # NumPy's own error, from one example
        expanded.append(p)
        eflags.append(b)
    adv = [k for k, (p, b) in enumerate(zip(expanded, eflags)) if _advanced(p, b)]
    if not adv:
        return None
    shapes = [tuple(broadcasting.shape_of(p))[1 if b else 0:] for p, b in zip(expanded, eflags)
              if _advanced(p, b)]
    try:
        common = np.broadcast_shapes(*shapes)
    except ValueError:
        return None
    r = len(common)
    consumed = sum(1 for p, b in zip(expanded, eflags) if p is not None and p is not Ellipsis)
    if consumed > ndim or sum(p is Ellipsis for p in expanded) > 1:
        return None
    dims = [1 if (p is None or type(p) is slice) else (ndim - consumed if p is Ellipsis else 0)
            for p in expanded]
    implicit = 0 if any(p is Ellipsis for p in expanded) else ndim - consumed  # trailing axes not named
    rest = sum(dims) + implicit
    together = adv == list(range(adv[0], adv[-1] + 1))
    lead = sum(dims[:adv[0]]) if together else 0  # the example's axes before its advanced ones
    new = []
    for p, b in zip(expanded, eflags):
        if b:  # the batch in front, the example's index axes lined up with the others'
            s = tuple(broadcasting.shape_of(p))
            if len(s) - 1 < r:
                p = broadcasting.reshape(p, s[:1] + (1,) * (r + 1 - len(s)) + s[1:])
        new.append(p)
    if x_batched:  # the layout is (batch, advanced..., the rest...): the arange comes first
        new.insert(0, np.arange(size).reshape((size,) + (1,) * r))
        if lead == 0:
            return tuple(new), None
        perm = ((0,) + tuple(1 + r + k for k in range(lead)) + tuple(1 + k for k in range(r))
                + tuple(1 + r + k for k in range(lead, rest)))
        return tuple(new), perm
    if not together or lead == 0:  # the batch axis comes out first, as it should
        return tuple(new), None
    perm = (lead,) + tuple(range(lead)) + tuple(range(lead + 1, 1 + r + rest))
    return tuple(new), perm


def _inverse(perm):
    return None if perm is None else tuple(int(k) for k in np.argsort(perm))


def _batch_getitem(prim, values, batched, kwargs):
    x, idx = values
    bx, bidx = batched
    if not bidx:
        simple = indexing.batch_index(idx)  # a slice in front of the index: no gather needed
        if simple is not None:
            return prim(x, simple)
    ndim = len(broadcasting.shape_of(x)) - (1 if bx else 0)
    size = _size(values, batched)
    found = batched_gather_index(bx, ndim, idx, bidx, size)
    if found is None:
        return NotImplemented
    new, perm = found
    out = prim(x, new)
    return out if perm is None else transpose(out, perm)


def _size(values, batched):
    for v, b in zip(values, batched):
        if b is True:
            return broadcasting.shape_of(v)[0]
        if type(b) is tuple:
            for p, bp in zip(v, b):
                if bp:
                    return broadcasting.shape_of(p)[0]
    raise AssertionError("a batching rule was called with nothing batched")


def _batch_untake(prim, values, batched, kwargs):
    g, idx, shape = values
    if batched[2]:
        return NotImplemented
    size = _size(values, batched)
    if not batched[0]:  # one cotangent for every example's index
        g = broadcasting.broadcast_to(g, (size,) + tuple(broadcasting.shape_of(g)))
    if not batched[1]:
        simple = indexing.batch_index(idx)
        if simple is not None:
            return prim(g, simple, (size,) + tuple(shape))
    found = batched_gather_index(True, len(shape), idx, batched[1], size)
    if found is None:
        return NotImplemented
    new, perm = found
    return prim(g if perm is None else transpose(g, _inverse(perm)), new, (size,) + tuple(shape))


def _batch_index_update(prim, values, batched, kwargs):
    """``x.at[idx].set(v)`` (or ``.add``) for a batch: the index with the batch axis in front, ``x``
    repeated for every example if only ``v`` is batched (an unbatched ``v`` broadcasts as it is)."""
    x, idx, v = values
    new = None if batched[1] else indexing.batch_index(idx)
    if new is None:
        return NotImplemented
    shape_x = tuple(broadcasting.shape_of(x))
    if not batched[0]:
        shape_x = tuple(broadcasting.shape_of(v))[:1] + shape_x
        x = broadcasting.broadcast_to(x, shape_x)
    if batched[2]:  # v's example axes lined up with the slot's trailing axes, the batch axis in front
        slot = np.broadcast_to(np.empty((), np.int8), shape_x)[new].shape
        sv = tuple(broadcasting.shape_of(v))
        if len(sv) < len(slot):
            v = broadcasting.reshape(v, sv[:1] + (1,) * (len(slot) - len(sv)) + sv[1:])
    return prim(x, new, v)


for _rule in (_batch_getitem, _batch_untake):
    setattr(_rule, "unpacks_tuples", True)  # noqa: B010 - a mark read by BatchTrace.apply
defbatch(indexing.getitem.primitive, _batch_getitem)
defbatch(indexing.index_update, _batch_index_update)
defbatch(indexing.index_add, _batch_index_update)
defbatch(indexing.untake, _batch_untake)
