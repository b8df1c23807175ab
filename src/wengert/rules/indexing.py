"""Indexing: ``x[idx]`` and its adjoint ``untake`` (scatter-add into zeros), a linear pair.

Any NumPy index works: integers, slices, ``Ellipsis``, ``None``, integer arrays (repeated indices
accumulate, through ``np.add.at``) and boolean masks. The index itself is never differentiated.

``x[idx]``'s reverse rule is stated once, ``untake``; the engines keep faster forms of it, not second
statements: an accumulate form (the in-place ``v_bar[i] += e_bar``: a first-order backward pass adds
``g`` into x's adjoint buffer, so reading ``x[i]`` for every ``i`` of a loop costs O(n) in all rather
than a zero-filled array of x's size per read), and the backward pass's gathering of Python-float
reads ``v[i]`` (``engines/backward.py``'s ``_into_reads``: the accumulate form inlined, its buffer a
Python list per array, added into the array's adjoint at once; worth about 15% on a loop of reads).
Both are proven equal to ``untake`` by ``tests/engines/test_reference_pass.py`` (the fast pass against
the reference pass, which calls only the table's rules, on every rule-table case and on random
programs). Programs take the accumulate form as the identity ``a + untake(e, idx, a.shape) ==
index_add(a, idx, e)`` written in place (``program/passes.py``'s ``accumulate_in_place``, the source
transformer's adjoints), checked in ``tests/rules/test_rule_forms.py``.
"""

import numpy as np

from wengert.core.extend import defjvp, defvjp, defvjp_accumulate, facts
from wengert.core.primitive import Primitive, binary_function
from wengert.core.trace import SYMBOLIC_TYPES, unbox_all
from wengert.rules import broadcasting

__all__ = ["getitem", "untake", "index_update", "index_add", "IndexUpdates", "may_repeat", "batch_index"]


def _getitem_impl(x, idx):
    """``x[idx]``; a float64 scalar comes back as a Python float (wengert's scalars, as
    everywhere: the arithmetic that follows takes the float fast paths). A Python float or complex
    (wengert's form of NumPy's scalars) indexes as NumPy's scalar would: ``x[None]``, ``x[...]``."""
    if type(idx) is tuple and not SYMBOLIC_TYPES.isdisjoint(map(type, idx)):
        return getitem(x, idx)  # x[i, j] with i batched by a wg.vmap around this trace: that vmap's rule
    try:
        r = x[idx]
    except TypeError:
        if type(x) is not float and type(x) is not complex:
            raise
        r = (_float64 if type(x) is float else np.complex128)(x)[idx]
    if type(r) is _float64:
        return float(r)
    return r


_float64 = np.float64


def may_repeat(idx):
    """Whether ``idx`` can select one element twice (it holds an integer array or list). A helper of
    generated code too (``untake`` and ``index_add`` call it), so NumPy alone."""
    if type(idx) is int or type(idx) is slice:
        return False
    parts = idx if type(idx) is tuple else (idx,)
    for p in parts:
        if isinstance(p, (list, np.ndarray)) and np.asarray(p).dtype.kind in "iu":
            return True
    return False


def _untake_impl(g, idx, shape):
    """A zero array of ``shape`` with ``g`` added at ``idx`` (the adjoint of ``x[idx]``).

    Another library's ``g`` gets zeros of its own library (CuPy); a lazy one (Dask), which has neither
    ``np.add.at`` nor assignment at every index, a weighted bincount of the flat positions ``idx``
    selects. NumPy alone: generated code includes this function."""
    if type(g) is not np.ndarray and hasattr(type(g), "__dask_graph__"):
        n = int(np.prod(shape))
        positions = np.arange(n, dtype=np.intp).reshape(shape)[idx]  # the index alone: NumPy's
        weights = np.reshape(np.broadcast_to(g, np.shape(positions)), (-1,))
        flat = np.zeros_like(weights, dtype=np.intp) + np.reshape(positions, (-1,))  # chunked as weights
        if g.dtype.kind == "c":
            total = (np.bincount(flat, weights=np.real(weights), minlength=n)
                     + 1j * np.bincount(flat, weights=np.imag(weights), minlength=n))
        else:
            total = np.bincount(flat, weights=weights, minlength=n)
        return np.reshape(total.astype(g.dtype), shape)
    if type(g) is not np.ndarray and hasattr(type(g), "__array_function__"):
        out = np.zeros_like(g, shape=shape)
    else:
        out = np.zeros(shape, dtype=np.result_type(g))
    if may_repeat(idx):
        np.add.at(out, idx, g)
    else:
        out[idx] = g
    return out


def _getitem_accumulate(buffer, g, out, x, idx):
    """``buffer[idx] += g`` in place (np.add.at where an element may be selected twice)."""
    if type(idx) is int:
        buffer[idx] += g
    elif may_repeat(idx):
        np.add.at(buffer, idx, g)
    else:
        buffer[idx] += g


getitem = binary_function(Primitive(_getitem_impl, name="getitem"))
defvjp(getitem, lambda g, out, x, idx: untake(g, idx, broadcasting.shape_of(x)))
defvjp_accumulate(getitem, _getitem_accumulate)
defjvp(getitem, lambda t, out, x, idx: getitem(t, idx))
facts(getitem, linear=(0,))
facts(getitem, saves=(1,))  # what its VJPs read: the index (wengert.engines.saving)

untake = Primitive(_untake_impl, name="untake")
defvjp(untake, lambda g, out, x, idx, shape: getitem(g, idx))
defjvp(untake, lambda t, out, x, idx, shape: untake(t, idx, shape))
facts(untake, linear=(0,), fresh=True, helper=True)
facts(untake, saves=(1,))


# -- functional updates: x with x[idx] replaced (index_update) or incremented (index_add) --------------
# NumPy's ``x[idx] = v`` and ``np.add.at(x, idx, v)`` without the mutation (JAX's ``x.at[idx].set(v)`` and
# ``.add(v)``): the result is a new array of x's shape and dtype (v is cast to it, as NumPy does when it
# assigns); x is never modified. ``v`` broadcasts to the shape of ``x[idx]``. With repeated integer
# indices, ``index_add`` adds every value and ``index_update`` keeps the last one written (NumPy's
# order), and the derivative with respect to v flows to that one only.


def _index_update_impl(x, idx, v):
    """``x`` with NumPy's ``x[idx] = v`` applied to a copy, as a new array (JAX's ``x.at[idx].set(v)``)."""
    if broadcasting.foreign(x) or broadcasting.foreign(v):
        return _update_foreign(x, idx, v)
    out = np.array(x, copy=True)
    out[idx] = v
    return out


def _index_add_impl(x, idx, v):
    """``x`` with ``v`` added at ``idx`` (``np.add.at`` on a copy; ``x.at[idx].add(v)``)."""
    if hasattr(type(x), "__dask_graph__") or hasattr(type(v), "__dask_graph__"):  # lazy: no writes
        v = np.broadcast_to(v, np.shape(np.empty(np.shape(x), dtype=bool)[idx]))
        if not hasattr(type(v), "__dask_graph__"):
            v = np.zeros_like(x, shape=np.shape(v)) + v
        return x + untake(v, idx, np.shape(x)).astype(np.result_type(x.dtype, v.dtype))  # NumPy alone
    out = x.copy() if hasattr(type(x), "__array_function__") else np.array(x, copy=True)  # CuPy's own
    if may_repeat(idx):
        np.add.at(out, idx, v)
    else:
        out[idx] += v
    return out


def _update_foreign(x, idx, v):
    """``index_update`` on another library's arrays, by its own index assignment on a copy; a lazy
    array (Dask) with an index that selects an element twice is refused (which write is kept is
    NumPy's order, which Dask's assignment does not promise)."""
    if not broadcasting.foreign(x):
        x = np.zeros_like(v, shape=np.shape(x), dtype=np.result_type(x, v.dtype)) + x
    if hasattr(x, "__dask_graph__") and may_repeat(idx):
        raise NotImplementedError(
            f"index_update (x.at[idx].set(v), x[idx] = v) on a {type(x).__module__}.{type(x).__name__} "
            "with an integer-array index: Dask cannot assign with an index that may repeat an element. "
            "Use a slice or a boolean mask, or compute x to NumPy first.")
    out = x.copy()
    out[idx] = v
    return out


def _last_writes(idx, shape):
    """1.0 where an element of ``x[idx]`` is the one a repeated-index assignment keeps, else 0.0."""
    label = np.full(shape, -1, dtype=np.intp)
    picked_shape = np.shape(label[idx])
    order = np.arange(int(np.prod(picked_shape)), dtype=np.intp).reshape(picked_shape)
    label[idx] = order
    return (label[idx] == order).astype(float)


def _update_value_vjp(g, out, x, idx, v):
    picked = getitem(g, idx)
    if may_repeat(idx):
        picked = picked * _last_writes(idx, broadcasting.shape_of(x))
    return picked


def _zeros_for(t, out):
    if broadcasting.foreign(t) or broadcasting.foreign(out):
        return np.zeros_like(t if broadcasting.foreign(t) else out, shape=broadcasting.shape_of(out),
                             dtype=np.result_type(broadcasting.dtype_of(out), broadcasting.dtype_of(t)))
    return np.zeros(broadcasting.shape_of(out), dtype=np.result_type(broadcasting.dtype_of(out),
                                                                     broadcasting.dtype_of(t)))


def _fit_cotangent(c, arg):  # broadcasting's functions, looked up late: this module loads first
    return broadcasting.unbroadcast(c, arg)


def _fit_tangent(t, out):
    return broadcasting.broadcast_tangent(t, out)


index_update = Primitive(_index_update_impl, name="index_update", grad_post=_fit_cotangent,
                         tangent_post=_fit_tangent)
defvjp(index_update, lambda g, out, x, idx, v: index_update(g, idx, 0.0), None, _update_value_vjp)
defjvp(index_update, index_update.vjps[0], None,  # x's part is the same map both ways: zero at idx
       lambda t, out, x, idx, v: index_update(_zeros_for(t, out), idx, t))
facts(index_update, fresh=True)
facts(index_update, saves={0: (1,), 2: (1,)})  # the index (and x's shape, for repeated indices)
# x[idx] is a view of x for a basic index: a write into it writes x[idx] (wengert.engines.mutation)
facts(getitem, updates_view=lambda x, new, idx: index_update(x, idx, new))

index_add = Primitive(_index_add_impl, name="index_add", grad_post=_fit_cotangent, tangent_post=_fit_tangent)
defvjp(index_add, lambda g, out, x, idx, v: g, None, lambda g, out, x, idx, v: getitem(g, idx))
defjvp(index_add, index_add.vjps[0], None,  # x's part is the identity both ways
       lambda t, out, x, idx, v: index_add(_zeros_for(t, out), idx, t))
facts(index_add, fresh=True, helper=True)
facts(index_add, saves={0: (), 2: (1,)})


class IndexUpdates:
    """``x.at``: JAX's functional index updates on a traced value; ``x.at[idx]`` names the elements."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return _IndexRef(self.x, unbox_all(idx))  # indices are never differentiated


class _IndexRef:
    """``x.at[idx]``: each method returns a new array; x is left as it was."""

    __slots__ = ("x", "idx")

    def __init__(self, x, idx):
        self.x = x
        self.idx = idx

    def get(self):
        """``x[idx]``."""
        return getitem(self.x, self.idx)

    def set(self, v):
        """x with ``x[idx] = v`` (``index_update``)."""
        return index_update(self.x, self.idx, v)

    def add(self, v):
        """x with v added at idx, repeated indices adding up (``index_add``, ``np.add.at``)."""
        return index_add(self.x, self.idx, v)

    def multiply(self, v):
        """x with ``x[idx] *= v``."""
        return index_update(self.x, self.idx, getitem(self.x, self.idx) * self._unique(v, "multiply"))

    def divide(self, v):
        """x with ``x[idx] /= v``."""
        return index_update(self.x, self.idx, getitem(self.x, self.idx) / self._unique(v, "divide"))

    def _unique(self, v, name):
        if may_repeat(self.idx) and not _last_writes(self.idx, broadcasting.shape_of(self.x)).all():
            raise ValueError(
                f"x.at[idx].{name}(v): idx selects some elements more than once, which wengert does not "
                f"support for {name}; combine the factors per element first (e.g. with x.at[...].add on "
                f"their logarithms), or pass unique indices")
        return v


def batch_index(idx):
    """``idx`` for the batch: a full slice in front, for the batch axis; None where NumPy would move
    the batch axis (array indices apart from each other put their axes first). Anything but an int,
    a slice, None and Ellipsis counts as an array (a traced index too)."""
    parts = idx if type(idx) is tuple else (idx,)
    advanced = [k for k, p in enumerate(parts) if not (p is None or p is Ellipsis or type(p) is slice)]
    if advanced and advanced != list(range(advanced[0], advanced[-1] + 1)) \
            and any(not isinstance(parts[k], (int, np.integer)) for k in advanced):
        return None
    return (slice(None),) + parts
