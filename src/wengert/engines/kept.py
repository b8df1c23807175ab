"""The caller's arrays a recording keeps for a later backward pass: copied, so that a write into one
after the operation that read it -- later in the function, or between the forward pass and the
pullback -- cannot change a derivative.

Inside the function: a constant array an operation's rules read (``saves``: ``engines.saving``) is
copied as the operation is recorded (:func:`constants_kept`), since the function may write into it
afterwards -- a work buffer filled anew on each pass of a loop (``tmp[:] = data[t]``, then
``w * tmp``), which without the copy would give every pass's derivative the last pass's values.
The copies are read-only; one array read by several operations is copied once, as long as its
bytes stay those of the copy (compared where it is met again). Read-only arrays that view no
writeable memory are not copied (:func:`immutable`): the way to skip the copy of a large constant.

A pullback (``wg.vjp``'s, a ``wg.Tape``'s ``.grad()``) runs when the caller asks, and reads the arrays
the nodes saved. The arrays the recording made are its own: nothing outside holds a writeable
reference (outputs and aux are handed out as read-only views). The *caller's* arrays are not -- the
arguments, arrays a function closes over, constants passed to operations, and views of any of them
(``x[1:]``, ``x.T``). Of these, the ones the kept nodes' rules read (``saves``: ``engines.saving``) are
replaced by copies, so the pullback gives the derivative at the values of the forward pass, as
``jax.vjp`` does (its arrays are immutable). Arrays the rules do not read are left alone.

Not copied: Python and NumPy scalars (immutable), and read-only arrays that view no writeable memory
(a read-only view of a writeable array is copied: a write into its base changes it). Other array
libraries' arrays (Dask, CuPy: a type with ``__array_function__`` and ``copy``) read by an operation
inside the function are copied as it is recorded with their own ``copy()``: a Dask array's
``x[mask] = v`` replaces the graph of the object itself, and its copy is a new object holding the
old graph (nothing is computed); a CuPy copy is the device's. They are not copied for a later
pullback (:func:`keep_copies`). Eager tensors follow PyTorch instead: an in-place write into a
tensor is stamped and the backward pass refuses what it overwrote (``mutation.note_inplace_write``;
a write through the array ``numpy()`` handed out too: ``engines.escaped``); the caller's arrays and
lists beside a tensor are copied as each operation is recorded (:class:`OneOperation`).

When: ``wg.vjp`` calls :func:`keep_copies` once its function returns (one pass over the recorded array
nodes; compact float nodes are skipped: their inputs are floats, or the int index of ``v[i]``, whose
rule reads only ``v``'s shape). A ``wg.Tape`` has no end of its forward pass: ``tape.var`` copies its
array (:func:`own_copy`) and each operation's constants are copied as it is recorded
(:func:`copy_constants`). ``wg.grad``, the Jacobians and ``elementwise_grad`` pull back at once and
pay only the copies made inside the function (:func:`constants_kept`). Cost: the copies (bandwidth:
the MLP benchmark's weights and batch, 2.9 MB, are about 5% of its vjp and pullback; an 80 MB data
matrix read by a logistic regression's ``wg.grad`` takes it from 10 to 16 ms) and the pass (under 2%
of the 40,000-step scalar chain's; a few microseconds for the tiny network's ten array nodes). A
read-only array is the way to skip the copy of a large one.

A node whose rule runs the caller's function again (``wg.checkpoint``, ``wg.iterate``) reads, at
pullback time, the arrays that function captures (closure, globals, attributes: found as its random
sources are). Its first argument, the chain, has ``keep_for_pullback(copier)``: it keeps copies of
them (one per array, shared between the chains of one forward pass) and the recomputation refuses,
naming the array, if one was written since.
"""

import itertools

import numpy as np

from wengert.core.trace import BOX_TYPES
from wengert.engines.mutation import versions_by_box
from wengert.engines.saving import needs

__all__ = ["keep_copies", "copy_constants", "constants_kept", "OneOperation", "kept_array", "own_copy",
           "immutable", "may_hold_arrays", "PLAIN"]

_ndarray = np.ndarray
_PLAIN = frozenset((float, int, bool, complex, str, type(None), slice, type(Ellipsis), np.float64, np.float32,
                    np.complex128, np.complex64, np.int64, np.int32, np.bool_))
"""Types of values that hold no array (the commonest arguments beside arrays)."""
PLAIN = _PLAIN


def _owner(a):
    """The NumPy array that owns ``a``'s memory (``a`` itself, or its base's base ...)."""
    base = a.base
    while isinstance(base, _ndarray):
        a = base
        base = a.base
    return a


def immutable(a):
    """Whether nothing can write into ``a``'s memory: it and the array owning that memory are read-only,
    and the memory is NumPy's own or an immutable ``bytes``. (Anything but an array: True.)"""
    if not isinstance(a, _ndarray):
        return True
    if a.flags.writeable:
        return False
    owner = _owner(a)
    return not owner.flags.writeable and (owner.base is None or type(owner.base) is bytes)


def own_copy(value):
    """``value`` itself if nothing can change it, else a copy (``tape.var(x)``: torch.tensor's copy)."""
    if isinstance(value, _ndarray) and not immutable(value):
        return value.copy()
    return value


def may_hold_arrays(x):
    """Whether ``x`` is a NumPy array (or another library's: :func:`foreign_array`), a list (a list
    of numbers can be written into as an array can: ``w * lst``, then ``lst[0] = 5.0``), or a tuple
    holding one."""
    t = type(x)
    if t is _ndarray or t is list:
        return True
    if t is tuple:
        return any(map(may_hold_arrays, x))
    return t not in _PLAIN and (isinstance(x, _ndarray) or foreign_array(x))


def foreign_array(x):
    """Whether ``x`` is another array library's array (Dask, CuPy): a type with ``__array_function__``
    and a ``copy`` method, neither a NumPy array nor a traced value."""
    t = type(x)
    return (getattr(t, "__array_function__", None) is not None and not isinstance(x, _ndarray)
            and t not in BOX_TYPES and callable(getattr(t, "copy", None)))


class _Copier:
    """The caller's memory met so far (``callers``: ``{id(owner): owner}``) and the copies made
    (``copies``: by the id of the array copied, kept alive here so that its id stays its own)."""

    __slots__ = ("callers", "copies")

    def __init__(self):
        self.callers = {}
        self.copies = {}

    def note(self, x):
        """Count the memory of the arrays in ``x`` (an array, or a tuple or list) as the caller's."""
        if isinstance(x, _ndarray):
            owner = _owner(x)
            self.callers[id(owner)] = owner
        elif type(x) is tuple or type(x) is list:
            for part in x:
                self.note(part)

    def callers_memory(self, a):
        """Whether array ``a`` lies in memory noted as the caller's."""
        owner = _owner(a)
        return self.callers.get(id(owner)) is owner

    def copy(self, a):
        """A read-only copy of ``a`` (one per array; ``a`` itself if nothing can write into it)."""
        kept = self.copies.get(id(a))
        if kept is None:
            kept = self.copies[id(a)] = (a, a if immutable(a) else _frozen_copy(a))
        return kept[1]

    def replaced(self, x):
        """``x`` (an argument) with its arrays that lie in the caller's memory copied (``x`` itself
        when there are none)."""
        if isinstance(x, _ndarray):
            return self.copy(x) if self.callers_memory(x) else x
        t = type(x)
        if t is list:  # a new list: the caller may write into this one
            return [self.replaced(p) for p in x]
        if t is tuple:  # an index (v[rows, cols]), a sequence of arrays (concatenate)
            parts = [self.replaced(p) for p in x]
            if any(p is not q for p, q in zip(parts, x)):
                return t(parts)
        return x


def keep_copies(trace, leaves):
    """At the end of a forward pass on ``trace`` (which keeps its Wengert list): in its nodes, and the
    old versions of boxes assigned to (``mutation.py``'s log), replace the caller's arrays that the
    rules read -- ``leaves`` (the arguments' values), constants, and views of either -- by copies."""
    copier = _Copier()
    callers = copier.callers
    for v in leaves:
        copier.note(v)
    nodes = trace.entries
    if trace.mutations:
        nodes = itertools.chain(nodes, (old for versions in versions_by_box(trace).values()
                                        for _, old in versions if old._prim is not None))
    scalar_type = trace.scalar_type  # its float nodes: skipped (see the module's docs)
    for node in nodes:
        if type(node) is scalar_type:
            continue
        # inline, for the commonest argument: an array the recording made (a parent's output)
        args = node._args
        parents = node._parents
        found = None
        i = -1
        for a in args:
            i += 1
            t = type(a)
            if t is _ndarray:
                base = a.base
                owner = a if base is None else _owner(a)
                if callers.get(id(owner)) is not owner:
                    if parents[i] is not None:
                        continue  # the recording's own array
                    callers[id(owner)] = owner  # a constant: the caller's (or one the function made)
            elif t in _PLAIN:
                continue
            elif not may_hold_arrays(a):
                keep = getattr(a, "keep_for_pullback", None)  # a recomputing node's chain (checkpoint)
                if keep is not None:
                    keep(copier)
                continue
            else:  # an index tuple, a sequence of arrays, an ndarray subclass
                if parents[i] is None:
                    copier.note(a)
                if copier.replaced(a) is a:
                    continue
            if found is None:
                found = [i]
            else:
                found.append(i)
        kwargs = node._kwargs
        if kwargs and found is None:
            for v in kwargs.values():
                if type(v) not in _PLAIN and may_hold_arrays(v):
                    found = []
                    break
        if found is not None:
            _replace(node, found, copier)
        else:
            out = node.value
            if type(out) is _ndarray:  # a view of the caller's array (or that array itself)?
                base = out.base
                owner = out if base is None else _owner(out)
                if callers.get(id(owner)) is owner:
                    _replace(node, (), copier)


def _replace(node, found, copier):
    """Copy, in ``node``, the arguments at ``found`` (indices holding the caller's arrays), and the
    arrays of its keyword arguments and output in the caller's memory, where its rules read them."""
    keep = needs(node._prim, node._parents)
    reads_all = keep is None
    if found:
        args = list(node._args)
        for i in found:
            if reads_all or i in keep:
                args[i] = copier.replaced(args[i])
        node._args = tuple(args)
    kwargs = node._kwargs
    if kwargs:  # (read by every rule)
        for v in kwargs.values():
            copier.note(v)
        node._kwargs = {k: copier.replaced(v) for k, v in kwargs.items()}
    out = node.value
    if isinstance(out, _ndarray) and copier.callers_memory(out) and (reads_all or "out" in keep):
        node.value = copier.copy(out)


def copy_constants(prim, args, parents, kwargs):
    """``(args, kwargs)`` with copies of the constant arrays (``parents[i]`` None) that ``prim``'s
    rules read: for a recording read back at any later time (a ``wg.Tape``), made at record time."""
    copier = None
    keep = False
    new = None
    i = -1
    for a in args:
        i += 1
        if parents[i] is not None:
            continue
        if not may_hold_arrays(a):
            hook = getattr(a, "keep_for_pullback", None)  # a recomputing node's chain (checkpoint)
            if hook is not None:
                copier = copier or _Copier()
                hook(copier)
            continue
        if keep is False:
            keep = needs(prim, parents)
        if keep is not None and i not in keep:
            continue
        if copier is None:
            copier = _Copier()
        copier.note(a)
        if new is None:
            new = list(args)
        new[i] = copier.replaced(a)
    if kwargs and any(map(may_hold_arrays, kwargs.values())):
        copier = copier or _Copier()
        for v in kwargs.values():
            copier.note(v)
        kwargs = {k: copier.replaced(v) for k, v in kwargs.items()}
    return (args if new is None else tuple(new)), kwargs


def _frozen_copy(a):
    """A copy of array ``a`` that nothing can write into (the recording's own: never copied again)."""
    c = a.copy()
    c.setflags(write=False)
    return c


def _same_bytes(kept, a):
    """Whether array ``a`` holds exactly what ``kept`` (a C-ordered copy) holds: shape, dtype and bytes
    (so ``-0.0`` differs from ``0.0``, and a nan equals itself)."""
    if kept.shape != a.shape or kept.dtype != a.dtype or kept.dtype.hasobject:
        return False
    if not kept.size:
        return True
    size = kept.dtype.itemsize
    word = _WORDS.get(size) or (_WORDS[8] if size % 8 == 0 else _WORDS[1])  # the widest that divides it
    mine = kept.reshape(-1).view(word)
    theirs = np.ascontiguousarray(a).reshape(-1).view(word)
    return bool(np.array_equal(mine, theirs))


# unsigned integers to compare bytes as (compared 8 at a time, an 80 MB array takes a third of the time)
_WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def kept_array(store, a):
    """``a``, or the read-only copy of it the recording reads instead (``store``: ``id -> copy`` of
    this recording's copies; an earlier copy serves while ``a``'s bytes are still the copy's). The
    program tracer holds its constants so too (``tracing.ProgramBuilder``)."""
    if (not a.flags.writeable and immutable(a)) or a.dtype.hasobject:
        return a
    key = id(a)
    kept = store.get(key)
    if kept is None or not _same_bytes(kept, a):
        kept = store[key] = _frozen_copy(a)
    return kept


def _kept_value(store, x):
    """``x`` (an argument or keyword value) with its arrays replaced by :func:`kept_array`'s (another
    library's array by its own copy: see the module's docs)."""
    if isinstance(x, _ndarray):
        return kept_array(store, x)
    t = type(x)
    if t not in _PLAIN and foreign_array(x):
        return x.copy()
    if t is list:  # a new list: the function may write into this one
        return [_kept_value(store, p) for p in x]
    if t is tuple:  # an index (v[rows, cols]), a sequence of arrays (concatenate)
        parts = [_kept_value(store, p) for p in x]
        if any(p is not q for p, q in zip(parts, x)):
            return t(parts)
    return x


class OneOperation:
    """The store of copies of one operation, for :func:`constants_kept` on a trace that never ends (the
    eager tensors'): a transform's trace keeps them by array until it ends; this keeps nothing."""

    __slots__ = ("kept_constants",)

    def __init__(self):
        self.kept_constants = None


def constants_kept(trace, prim, args, parents, kwargs):
    """``(args, kwargs)`` of an operation about to be recorded on a reverse-mode ``trace``, with the
    constant arrays its rules read (``parents[i]`` None; the arrays among the keyword arguments)
    replaced by read-only copies (see the module's docs). ``args`` itself where there are none.
    (Once per recorded operation with a constant: the commonest argument, an array, tested first.)"""
    new = None
    keep = False
    i = -1
    for a in args:
        i += 1
        if parents[i] is not None:
            continue
        t = type(a)
        if t is not _ndarray and (t in _PLAIN or not may_hold_arrays(a)):
            continue
        if keep is False:
            keep = needs(prim, parents)
        if keep is not None and i not in keep:
            continue
        store = trace.kept_constants
        if store is None:
            store = trace.kept_constants = {}
        c = kept_array(store, a) if t is _ndarray else _kept_value(store, a)
        if c is not a:
            if new is None:
                new = list(args)
            new[i] = c
    if kwargs:
        for v in kwargs.values():
            if type(v) not in _PLAIN and may_hold_arrays(v):
                store = trace.kept_constants
                if store is None:
                    store = trace.kept_constants = {}
                kwargs = {k: _kept_value(store, v) for k, v in kwargs.items()}
                break
    return (args if new is None else tuple(new)), kwargs
