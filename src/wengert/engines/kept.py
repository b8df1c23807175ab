"""The caller's arrays a recording keeps for a later backward pass: copied, so that a write into one
between the forward pass and the pullback cannot change a derivative.

A pullback (``wg.vjp``'s, a ``wg.Tape``'s ``.grad()``) runs when the caller asks, and reads the arrays
the nodes saved. The arrays the recording made are its own: nothing outside holds a writeable
reference (outputs and aux are handed out as read-only views). The *caller's* arrays are not -- the
arguments, arrays a function closes over, constants passed to operations, and views of any of them
(``x[1:]``, ``x.T``). Of these, the ones the kept nodes' rules read (``saves``: ``engines.saving``) are
replaced by copies, so the pullback gives the derivative at the values of the forward pass, as
``jax.vjp`` does (its arrays are immutable). Arrays the rules do not read are left alone.

Not copied: Python and NumPy scalars (immutable), other array libraries' arrays (a Dask array is
immutable, and copying would compute it), and read-only arrays that view no writeable memory (a
read-only view of a writeable array is copied: a write into its base changes it). Eager tensors
follow PyTorch instead: an in-place write is stamped and the backward pass refuses what it overwrote
(``mutation.note_inplace_write``).

Cost: one pass over the recorded array nodes (compact float nodes are skipped: their inputs are
floats, or the int index of ``v[i]``, whose rule reads only ``v``'s shape), and one copy per array
kept. ``wg.grad`` and the other transforms that pull back at once pay nothing.
"""

import numpy as np

from wengert.engines.mutation import versions_by_box
from wengert.engines.saving import needs
from wengert.engines.scalar import SCALAR_TYPES

__all__ = ["keep_copies", "own_copy", "copy_constants", "immutable", "may_hold_arrays"]

_ndarray = np.ndarray


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


class _Copier:
    """The caller's memory met so far (``{id(owner): owner}``) and the copies made (by the id of the
    array copied, which is kept alive here so that its id stays its own)."""

    __slots__ = ("callers", "copies")

    def __init__(self, leaves=()):
        self.callers = {}
        self.copies = {}
        for v in leaves:
            if isinstance(v, _ndarray):
                self.note(v)

    def note(self, a):
        """Count ``a``'s memory as the caller's (unless nothing can write into it)."""
        owner = _owner(a)
        key = id(owner)
        if key not in self.callers and not immutable(a):
            self.callers[key] = owner

    def callers_memory(self, a):
        """Whether array ``a`` lies in memory noted as the caller's."""
        owner = _owner(a)
        return self.callers.get(id(owner)) is owner

    def copy(self, a):
        key = id(a)
        kept = self.copies.get(key)
        if kept is None:
            kept = self.copies[key] = (a, a.copy())
        return kept[1]

    def note_all(self, x):
        """Count the memory of every array in ``x`` (an array, or a tuple or list of them) as the caller's."""
        if isinstance(x, _ndarray):
            self.note(x)
        elif type(x) is tuple or type(x) is list:
            for p in x:
                self.note_all(p)

    def replaced(self, x):
        """``x`` (an argument) with the arrays in it that lie in the caller's memory copied; ``x``
        itself when there are none."""
        if isinstance(x, _ndarray):
            return self.copy(x) if self.callers_memory(x) else x
        t = type(x)
        if t is tuple or t is list:  # an index (v[rows, cols]), a sequence of arrays (concatenate)
            parts = [self.replaced(p) for p in x]
            if any(p is not q for p, q in zip(parts, x)):
                return t(parts)
        return x


def may_hold_arrays(x):
    """Whether ``x`` is a NumPy array, or a tuple or list holding one."""
    t = type(x)
    return t is _ndarray or ((t is tuple or t is list) and any(map(may_hold_arrays, x))) or \
        (t is not float and isinstance(x, _ndarray))


def _reads(prim, parents):
    """What ``prim``'s rules read (``saving.needs``): argument indices and maybe "out", or True: all."""
    keep = needs(prim, parents)
    return True if keep is None else keep


def _protect_node(node, copier):
    """Replace in ``node`` (a recorded array node) the caller's arrays its rules read by copies."""
    prim = node._prim
    args = node._args
    if prim is None or type(args) is not tuple:
        return
    parents = node._parents
    keep = None
    new = None
    i = -1
    for a in args:
        i += 1
        if not may_hold_arrays(a):
            continue
        if parents[i] is None:  # a constant: the caller's array (or one the function made)
            copier.note_all(a)
        if keep is None:
            keep = _reads(prim, parents)
        if keep is not True and i not in keep:
            continue
        b = copier.replaced(a)
        if b is not a:
            if new is None:
                new = list(args)
            new[i] = b
    if new is not None:
        node._args = tuple(new)
    kwargs = node._kwargs
    if kwargs:
        changed = {}
        for k, v in kwargs.items():
            copier.note_all(v)
            changed[k] = copier.replaced(v)
        if any(changed[k] is not v for k, v in kwargs.items()):
            node._kwargs = changed
    out = node.value
    if isinstance(out, _ndarray) and copier.callers_memory(out):  # a view of the caller's array
        if keep is None:
            keep = _reads(prim, parents)
        if keep is True or "out" in keep:
            node.value = copier.copy(out)


def keep_copies(trace, leaves):
    """At the end of a forward pass on ``trace`` (which keeps its Wengert list): in its nodes, and
    the old versions of boxes assigned to (``mutation.py``'s log), replace the caller's arrays --
    ``leaves`` (the arguments' values), constants, and views of either -- that the rules read by
    copies."""
    copier = _Copier(leaves)
    scalar_types = SCALAR_TYPES
    for node in trace.entries:
        if type(node) in scalar_types:
            continue
        _protect_node(node, copier)
    log = versions_by_box(trace)
    if log:
        for versions in log.values():
            for _, old in versions:
                if type(old) not in scalar_types:
                    _protect_node(old, copier)


def copy_constants(prim, args, parents, kwargs):
    """``(args, kwargs)`` with the constant arrays (``parents[i]`` None) that ``prim``'s rules read
    copied: for a recording read back at any later time (a ``wg.Tape``), done at record time."""
    copier = None
    keep = None
    new = None
    i = -1
    for a in args:
        i += 1
        if parents[i] is not None or not may_hold_arrays(a):
            continue
        if keep is None:
            keep = _reads(prim, parents)
        if keep is not True and i not in keep:
            continue
        if copier is None:
            copier = _Copier()
        copier.note_all(a)
        b = copier.replaced(a)
        if b is not a:
            if new is None:
                new = list(args)
            new[i] = b
    if kwargs:
        copier = copier or _Copier()
        changed = {}
        for k, v in kwargs.items():
            copier.note_all(v)
            changed[k] = copier.replaced(v)
        if any(changed[k] is not v for k, v in kwargs.items()):
            kwargs = changed
    return (args if new is None else tuple(new)), kwargs
