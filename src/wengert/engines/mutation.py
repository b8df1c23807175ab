"""Assignment on traced values: ``x[i] = v``, ``x[mask] = 0``, ``x += y``, ``x *= 2`` inside a
differentiated function, and the check that protects the backward pass from in-place writes.

Nothing is written in place while a derivative is being recorded. The new value is a functional
update (``index_update``, or ``x + y`` cast back to x's dtype, as NumPy's in-place operators do),
recorded like any other operation, and the box the user holds is *rebound* to it: its slots now hold
the new node, and its former contents move to a fresh object, the old version. So every alias of
``x`` sees the new value, the caller's arrays are never modified, and the old version's saved
values stay intact -- a backward pass can never read an overwritten value through a traced box.
Memory is O(1) per write, not a buffer: the old version's array is dropped from the graph where no
rule reads it (``index_update``'s rules read only the index and shapes; a rule that reads the buffer,
``y * y`` recorded before the write, holds the array in its own arguments, and no later write changes
that array), so n element writes keep one buffer and n small nodes (:func:`_release_overwritten`).

Operations recorded *before* the assignment still point at the box object; they meant its old
version. Each trace keeps a log ``box -> [(stamp, old version), ...]`` (stamp: where the new node
stands in the trace's order), and the backward pass redirects such references to the version that
was current when they were recorded (``resolve_tape`` for traces with a Wengert list,
``resolve_parents`` while walking an eager graph). A mutated leaf answers for its original value.
Costs: nothing unless a trace saw an assignment; then one extra scan of the nodes per backward pass.

Where a value *is* overwritten in place -- an eager ``Tensor`` updated under ``no_grad()`` or without
``requires_grad`` (an optimizer step, ``c[0] = 5``) -- :func:`note_inplace_write` stamps the array,
and a later backward pass that still needs the array's old contents raises an error naming the
operation (PyTorch's version counters), instead of returning a wrong gradient.
"""

import bisect
import itertools
import threading
import weakref

import numpy as np

from wengert.core.errors import TracingError
from wengert.core.trace import BOX_TYPES, SYMBOLIC_TYPES, unbox_all
from wengert.engines.saving import Unsaved, needs
from wengert.engines.views import VIEWERS, Retake, laid_out_as_view, note_viewer, same_key, views_of
from wengert.rules import shape as shape_ops
from wengert.rules.indexing import index_add, index_update

__all__ = ["assign", "add_at", "augmented_assign", "note_view", "mark_view", "array_of", "rebind",
           "resolve_tape", "resolve_parents", "note_inplace_write", "note_inplace_writes",
           "check_inplace_writes", "leaf_aliases", "versions_by_box"]

node_ids = itertools.count()
"""The clock of eager recording: eager nodes (``Tensor``) are numbered by it, and assignments are
stamped by it (traces with a Wengert list use positions in the list instead)."""

_NODE_SLOTS = ("value", "_trace", "_prim", "_args", "_kwargs", "_parents", "_id", "requires_grad")


def assign(box, idx, v):
    """``box[idx] = v``: rebind ``box`` to ``index_update(box, idx, v)``."""
    _check_writable(box, "x[...] = ...")
    idx = unbox_all(idx)
    mark = getattr(v, "_view", None)  # Python's y[k] op= r: t = y[k]; t op= r; y[k] = t (t holds y[k])
    same = v if mark is not None and mark[0] is box and same_key(mark[2], (idx,)) else None
    _write(box, lambda: index_update(box, idx, v), "x[...] = ...", same)


def add_at(box, idx, v):
    """``np.add.at(box, idx, v)``: rebind ``box`` to ``index_add(box, idx, v)`` (repeated indices add up)."""
    _check_writable(box, "numpy.add.at")
    idx = unbox_all(idx)
    _write(box, lambda: index_add(box, idx, v), "numpy.add.at")


# -- views: a write into one writes through to the array it views, as NumPy's does --------------------

def array_of(x):
    """The array beneath every level of boxing of ``x`` (a batch's whole array, a symbol's example)."""
    while type(x) in BOX_TYPES:
        x = x.example if hasattr(type(x), "variable") else x.value
    return x


def note_view(box, out, prim, args, kwargs, trace, values=None):
    """Called by an engine for its result ``box`` of ``prim(*args, **kwargs)`` whose array ``out`` is a
    NumPy view (``out.base is not None``); ``args`` as the engine received them (boxes of ``trace``
    where traced), ``values`` their arrays where ``unbox_all`` cannot give them (a program's symbols'
    examples). If ``out`` shares memory with argument 0, a box of ``trace``, and ``prim`` declares
    ``updates_view``, ``box`` is marked a view of it: a later write into ``box`` writes through
    (:func:`_write`). A view of anything else is marked unfollowable: a write into it is refused."""
    for i, a in enumerate(args):
        value = array_of(a if values is None else values[i])
        if type(value) is np.ndarray and np.may_share_memory(out, value):
            if type(a) not in BOX_TYPES or a._trace is not trace:
                why = _NO_UPDATE if i != 0 or prim.updates_view is None else _NOT_TRACED
                box._view = (None, prim, i, why)
                return
            if i != 0 or prim.updates_view is None:  # not written through, but taken again (Retake)
                mark_view(box, a, Retake(prim, prim.__name__, i, tuple(args)), kwargs)
            else:
                box._view = (a, prim, tuple(args[1:]), kwargs or None)
                note_viewer(a, box)
            return


def mark_view(box, base, retake, kwargs=None):
    """Mark ``box`` a view of ``base`` that a write cannot go through (refused, naming ``retake``) but
    that is taken again, ``retake(base)``, when ``base`` is written, as NumPy's views see the write."""
    box._view = (base, retake, (), kwargs or None)
    note_viewer(base, box)


def view_of_buffer(trace, prim, args, kwargs, out):
    """A view ``out`` (an inexact array) of a buffer of ``trace`` that carries no derivative (its
    ``lift``: ``np.zeros_like(x)``), as such a buffer marked a view of it, so that a write into it
    writes through (``t = y[0:2]; t += v``); None for anything else, which stays a plain value."""
    a = args[0] if args else None
    if type(a) not in BOX_TYPES or a._trace is not trace or prim.updates_view is None:
        return None
    array = array_of(out)  # beneath a lower level's box, where nested
    if (type(array) is not np.ndarray or array.base is None or array.dtype.kind not in "fc"
            or trace.constant(out) is not out):
        return None
    box = trace.lift(out)
    note_view(box, array, prim, args, kwargs, trace)
    mark = getattr(box, "_view", None)
    return box if mark is not None and mark[0] is a else None


def _view_again(base, prim, rest, kwargs):
    return prim(base, *rest, **(kwargs or _NO_KWARGS))


def _refresh_views(x, written, what):
    """After a write that rebound the boxes in ``written`` (ids: a box and the arrays it views, up to
    ``x``), take every other live view of them again from its base, as NumPy's views see the write;
    and so on down views of views."""
    for v in views_of(x):
        if id(v) not in written:
            mark = v._view
            rebind(v, _recorded(v, lambda mark=mark: _view_again(*mark)), what)
            v._view = mark
        _refresh_views(v, written, what)


def _write(box, compute, what, unchanged=None):
    """Rebind ``box`` to ``compute()`` (its new value, recorded); if ``box`` is a view of another
    traced array (:func:`note_view`), write the new value through to that array as well, by its
    primitive's ``updates_view`` fact, and so on up a view of a view. The two stay views of each other
    (``box`` keeps its mark), so every later write goes through too. Other views of the arrays written
    are taken again (:func:`_refresh_views`), but ``unchanged``, a view that holds what was written."""
    link = box
    while link is not None:  # the whole chain is checked before anything is rebound
        mark = getattr(link, "_view", None)
        if mark is None:
            break
        base, prim, i, reason = mark
        link = base
        if base is None or prim.updates_view is None:
            if base is not None:  # a Retake
                i, reason = prim.position, _NO_UPDATE
            value = array_of(box)
            readonly = getattr(prim, "readonly", False) or (
                type(value) is np.ndarray and not value.flags.writeable)
            raise (ValueError if readonly else TypeError)(
                f"{what} into a traced array of shape {np.shape(value)} that is a view of argument {i} "
                f"of '{prim.__name__}'{' (NumPy: assignment destination is read-only)' if readonly else ''}"
                f": NumPy would write through to that argument as well, and "
                + reason.format(name=prim.__name__) + ", so the write cannot be followed. Copy the view "
                "first (w = w.copy()), or write into the original array.")
    _write_chain(box, compute, what)
    written = {id(box), id(unchanged)}
    root = box
    while getattr(root, "_view", None) is not None:
        root = root._view[0]
        written.add(id(root))
    if VIEWERS:
        _refresh_views(root, written, what)


def _write_chain(box, compute, what):
    view = getattr(box, "_view", None)
    rebind(box, _recorded(box, compute), what)
    # A box without a graph took every slot of its new value, its mark too: the mark is box's own
    # (the new value of a reshaped array's base is a reshape of the view: not a view of it).
    box._view = view
    if view is not None:
        base, prim, rest, kwargs = view
        _write_chain(base, lambda: prim.updates_view(base, box, *rest, **(kwargs or _NO_KWARGS)), what)
        if not laid_out_as_view(array_of(box), prim, array_of(base), rest, kwargs):  # x[::-1]: strides
            rebind(box, _recorded(box, lambda: _view_again(*view)), what)  # NumPy's, for later reshapes
            box._view = view


_NO_KWARGS = {}


def _check_writable(box, what):
    """Refuse item assignment into a Python float recorded by a transform: Python refuses item
    assignment on a float, and the transforms' compact float nodes (``ScalarNode``) have no array to
    update. (Writes into views are checked by :func:`_write`.)"""
    value = getattr(box, "value", None)
    if type(value) is float and getattr(getattr(box, "_trace", None), "scalar_type", None) is not None:
        raise TypeError(
            f"{what}: the traced value is a Python float, and a float does not support item assignment "
            f"(as in Python). Rebind the name instead (x = v), or make it an array first "
            f"(x = wnp.reshape(x, (1,))).")


_NO_UPDATE = "'{name}' declares no way to write a view of it back (the updates_view fact of wg.facts)"
_NOT_TRACED = "that argument is not traced by the transform that traces the view"


def augmented_assign(box, fun, other, symbol):
    """``box op= other`` (``symbol`` like "+="), NumPy's rules: the result keeps box's shape and dtype."""
    if type(unbox_all(box)) is float:  # a Python float is immutable: ``s += x`` is ``s = s + x``
        return fun(box, other)
    _check_writable(box, f"'{symbol}'")

    def compute():
        new = fun(box, other)
        shape, new_shape = box.shape, _shape(new)
        if new_shape != shape:
            raise ValueError(f"{symbol}: non-broadcastable output operand with shape {shape} doesn't match "
                             f"the broadcast shape {new_shape}")
        want, have = box.dtype, _dtype(new)
        if have != want:
            if not np.can_cast(have, want, casting="same_kind"):
                raise TypeError(f"{symbol}: cannot cast the result from {have!r} to {want!r} with casting "
                                f"rule 'same_kind' (NumPy's rule for in-place operators)")
            new = shape_ops.astype(new, want)
        return new

    _write(box, compute, f"'{symbol}'")
    return box


def _shape(x):
    return np.shape(unbox_all(x))


def _dtype(x):
    x = unbox_all(x)
    return np.dtype(np.float64) if type(x) is float else np.result_type(x)


def _recorded(box, compute):
    """``compute()``, and whether box is *fresh*: the new value's node is the only one recorded on box's
    trace since box was made, so nothing else refers to box's current version."""
    trace = box._trace
    entries = getattr(trace, "entries", None)
    if entries is not None:
        before = len(entries)
        latest = before > 0 and entries[-1] is box
        new = compute()
        return new, latest and len(entries) == before + 1 and entries[-1] is new
    if hasattr(box, "_id") and box._prim is not None:
        probe = next(node_ids)
        new = compute()
        return new, box._id == probe - 1 and getattr(new, "_id", None) == probe + 1
    return compute(), False


def rebind(box, result, what):
    """Make ``box`` hold ``new`` (from :func:`_recorded`), keeping its old version for the graph."""
    new, fresh = result

    if not hasattr(type(box), "_parents"):  # a box of a transform that keeps no graph
        if type(new) is type(box) and new._trace is box._trace:
            # box now is the update (a program's symbol its variable; a dual number its value and
            # tangent; vmap's batch, a value inside wg.checkpoint or wg.iterate's recomputation)
            _take_slots(box, new)
            return
    if type(box) in SYMBOLIC_TYPES and hasattr(type(box), "variable"):  # a program's symbol
        raise TracingError(f"{what} on the traced value {box.variable.name} with a value traced by another "
                           f"differentiation ({type(new).__name__}): pass that value as an argument instead")

    if getattr(type(box), "forward_mode", False):  # a Dual number given a value of another trace
        _refuse_nesting(box, new, what)
        box.value = new
        box.tangent = None  # a constant now: a symbolic zero (wengert.engines.forward)
        return
    if not hasattr(type(box), "_parents"):
        raise TypeError(
            f"{what}: the new value ({type(new).__name__}) is not of the kind of the array it is written "
            f"into ({type(box).__name__}, traced by {type(box._trace).__name__}), so the assignment cannot "
            f"be followed. Build a new array instead: x = x.at[idx].set(v), or wnp.where(...)")
    trace = box._trace
    cls = type(box)
    pending = getattr(trace, "pending", None)
    if pending:  # the graph's references to box change: box (and new, whose value box takes) stay
        pending.pop(id(box), None)
        if type(new) is cls:
            pending.pop(id(new), None)
    old = object.__new__(cls)
    for slot in _NODE_SLOTS:
        if hasattr(box, slot):
            setattr(old, slot, getattr(box, slot))
    entries = getattr(trace, "entries", None)
    if type(new) is cls:
        new._parents = tuple(old if p is box else p for p in new._parents)
        for slot in _NODE_SLOTS:
            if hasattr(new, slot):
                setattr(box, slot, getattr(new, slot))
            elif hasattr(box, slot):
                delattr(box, slot)
        new_entries = getattr(new._trace, "entries", None)
        if new_entries and new_entries[-1] is new:  # box stands for the new node in its trace's list
            new_entries[-1] = box
        if new._trace is not trace:  # e.g. an eager tensor given a value traced by wg.grad
            stamp = _now(entries)
        elif entries is not None:
            stamp = len(entries) - 1
            if fresh:  # box's former entry is the one before: it is the old version now
                entries[-2] = old
        else:
            stamp = new._id
    else:
        _refuse_nesting(box, new, what)
        box.value = new
        box._prim = box._args = box._kwargs = None
        box._parents = ()
        box.requires_grad = False
        stamp = _now(entries)
    _release_overwritten(old, box)
    if old.requires_grad and not fresh:  # old may have children, or be a leaf: log the version
        log = trace.mutations
        if log is None:
            with _LOG_LOCK:  # the eager trace is shared by threads: one log, whoever makes it
                log = trace.mutations
                if log is None:
                    log = trace.mutations = {}
        key = id(box)
        entry = log.get(key)
        if entry is None or entry[0]() is not box:
            # keyed by id, holding box weakly (a box's == is elementwise, so no WeakKeyDictionary)
            entry = log[key] = (weakref.ref(box, lambda _, log=log, key=key: log.pop(key, None)), [])
        entry[1].append((stamp, old))


def _release_overwritten(old, box):
    """Drop the references to the array of ``old``, the version a write just replaced, that no rule
    reads: ``old``'s own (its rules do not read ``"out"``, by its primitive's ``saves`` fact) and that
    of ``box``'s new node (the update's argument, which ``index_update``'s rules read only the shape
    of). A node recorded earlier that reads the array keeps it in its own arguments, and a later write
    makes a new array, so nothing can see it change. Without this each write would keep a whole
    buffer alive: n element writes into n elements, n^2 memory. A leaf keeps its value (the caller's
    array, which a mutated leaf answers for); so does an array under :data:`RELEASE_BYTES`, and every
    version on a trace that ``lists_values`` (``wg.Tape``, whose entries show them). A value of
    a lower level's box (grad of grad, a batch of ``wg.vmap``) is released too, so that the lower
    level can release its node's array (``saving.sweep``)."""
    prim = old._prim
    if prim is None:
        return
    value = old.value
    t = type(value)
    if t is np.ndarray:
        if value.nbytes < RELEASE_BYTES:
            return
    else:
        if t not in BOX_TYPES or hasattr(t, "variable") or type(array_of(value)) is not np.ndarray:
            return  # (a box of a lower level -- grad of grad, a batch -- not a program's symbol)
    if getattr(old._trace, "lists_values", False):
        return
    keep = needs(prim, old._parents)
    if keep is not None and "out" not in keep:
        old.value = Unsaved(value, prim, "output")
    args = box._args
    if type(args) is tuple and box._prim is not None and box._prim.vjp_accumulate is None:
        # (an accumulate rule is given up for an opaque argument, a batch: the argument stays)
        for i, a in enumerate(args):
            if a is value:
                keep = needs(box._prim, box._parents)
                if keep is not None and i not in keep:
                    box._args = args[:i] + (Unsaved(value, box._prim, f"argument {i}"),) + args[i + 1:]
                return


RELEASE_BYTES = 1024
"""A write into an array smaller than this keeps the overwritten array (at most this much per write,
about what the write's nodes take): releasing it costs a small write a fifth of its time."""


def _take_slots(box, new):
    """Make ``box`` hold what ``new`` holds, slot by slot (an unset slot stays unset: a diagonal
    batch's dense value is made only when asked for)."""
    for cls in type(box).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot in ("__weakref__", "__dict__"):
                continue
            try:
                value = object.__getattribute__(new, slot)
            except AttributeError:
                try:
                    object.__delattr__(box, slot)
                except AttributeError:
                    pass
                continue
            object.__setattr__(box, slot, value)


def versions_by_box(trace):
    """The trace's log as ``{box: [(stamp, old version), ...]}`` (None when nothing was assigned)."""
    log = getattr(trace, "mutations", None)
    if not log:
        return None
    out = {}
    for ref, versions in list(log.values()):
        box = ref()
        if box is not None:
            out[box] = versions
    return out or None


def _now(entries):
    """A stamp later than every node recorded so far (a position in ``entries``, or an eager id)."""
    if entries is not None:
        return len(entries)
    return next(node_ids)


def _refuse_nesting(box, new, what):
    if type(new) in BOX_TYPES:
        raise TypeError(
            f"{what}: the new value is traced by a transform that the array it is written into cannot "
            f"follow (an inner transform's value into an outer one's array, or a forward-mode value into "
            f"a reverse-mode tensor), so it could not carry the derivative. Build a new array instead: "
            f"x = x.at[idx].set(v), or wnp.where(...)")


def _version(versions, stamp):
    """The version of a mutated box that was current at ``stamp`` (versions are in stamp order)."""
    i = bisect.bisect_right(versions, stamp, key=_stamp)
    return versions[i][1] if i < len(versions) else None


def _stamp(version):
    return version[0]


def _current(log, q, stamp):
    """Parent ``q`` as it was at ``stamp`` (q itself when it was not assigned to since)."""
    if q is None or q not in log:
        return q
    v = _version(log[q], stamp)
    return q if v is None else v


def resolve_tape(entries, log):
    """Redirect, in a trace's Wengert list, every reference to a mutated box to the version current
    when it was made (entries themselves included). Returns the leaf aliases (see :func:`leaf_aliases`)."""
    for p, node in enumerate(entries):
        versions = log.get(node)
        if versions is not None:
            v = _version(versions, p)
            if v is not None:
                entries[p] = node = v
        parents = node._parents
        if any(q is not None and q in log for q in parents):
            node._parents = tuple(_current(log, q, p) for q in parents)
    return leaf_aliases(log)


def resolve_parents(node, log):
    """For an eager graph walk: point ``node``'s parents at the versions current when it was made."""
    parents = node._parents
    if any(q is not None and q in log for q in parents):
        stamp = node._id
        node._parents = tuple(_current(log, q, stamp) for q in parents)


def leaf_aliases(log):
    """``[(box, original leaf)]`` for every mutated box that started as a leaf."""
    out = []
    for box, versions in log.items():
        first = versions[0][1]
        if first._prim is None:
            out.append((box, first))
    return out


# -- in-place writes outside recording (eager tensors): version stamps --------------------------------

_LOG_LOCK = threading.Lock()

INPLACE_WRITES = {}
"""id(buffer) -> (weak reference to the buffer, {(first byte, last byte + 1): (stamp, description)}): the
in-place writes to eager tensors, by the array that owns the memory written (a view's base, to the
end of the chain) and the byte range written, so that a write through a view is seen by every array
that shares the memory it wrote (PyTorch's views share their base's version counter)."""


def _buffer(array):
    """The array that owns ``array``'s memory (``array`` itself, or its base's base ...)."""
    while type(array.base) is np.ndarray:
        array = array.base
    return array


def _byte_range(array):
    """``(first, last + 1)``: the bytes ``array``'s elements lie in (gaps of a strided view included)."""
    first = last = array.__array_interface__["data"][0]
    for n, step in zip(array.shape, array.strides):
        if n == 0:
            return first, first
        if step < 0:
            first += step * (n - 1)
        else:
            last += step * (n - 1)
    return first, last + array.itemsize


def note_inplace_write(array, what):
    """Record that ``array`` was just overwritten in place by ``what`` (an eager, unrecorded update)."""
    note_inplace_writes((array,), what)


def note_inplace_writes(arrays, what):
    """:func:`note_inplace_write` for several arrays that one update wrote (an optimizer's step): one
    stamp, one lock."""
    stamp = next(node_ids)
    with _LOG_LOCK:
        for array in arrays:
            if type(array) is not np.ndarray:
                continue
            buffer = _buffer(array)
            key = id(buffer)
            entry = INPLACE_WRITES.get(key)
            if entry is None or entry[0]() is not buffer:
                forget = lambda ref, key=key: _forget_write(key, ref)  # noqa: E731
                entry = INPLACE_WRITES[key] = (weakref.ref(buffer, forget), {})
            # one entry per range: a loop's writes replace it. An array owning its memory: all of it (a
            # range that overlaps any view), without __array_interface__ (a few us: optimizer steps)
            span = _ALL_OF_IT if array.base is None and array.size else _byte_range(array)
            entry[1][span] = (stamp, what)
        NEWEST_WRITE[0] = stamp


_ALL_OF_IT = (-1, float("inf"))

NEWEST_WRITE = [-1]
"""The stamp of the newest write noted: a backward pass whose nodes were all made after it has nothing
to check (a training loop's: its optimizer stepped before the forward pass)."""


def _forget_write(key, ref):
    """An overwritten buffer is gone: drop its entry, unless the id already names a newer buffer's."""
    entry = INPLACE_WRITES.get(key)
    if entry is not None and entry[0] is ref:
        INPLACE_WRITES.pop(key, None)


def check_inplace_writes(order):
    """Raise if a node in ``order`` (eager, newest first) saved an array overwritten after it was
    made, directly or through any array sharing its memory."""
    if not order:
        return
    k = len(order) - 1
    while k >= 0 and order[k]._prim is None:  # leaves save nothing (parameters made long ago)
        k -= 1
    if k < 0:
        return
    oldest = order[k]._id
    if NEWEST_WRITE[0] < oldest:
        return
    relevant = {}
    for key, (ref, writes) in list(INPLACE_WRITES.items()):
        buffer = ref()
        if buffer is None:
            INPLACE_WRITES.pop(key, None)  # its own callback, in another thread, may have run first
            continue
        late = [(span, stamp, what) for span, (stamp, what) in list(writes.items()) if stamp > oldest]
        if late:
            relevant[key] = (buffer, late)
    if not relevant:
        return
    for node in order:
        prim = node._prim
        args = node._args
        if prim is None or type(args) is not tuple:
            continue
        reads = needs(prim, node._parents)
        if reads is None:  # no declaration: its rules may read anything
            saved = args + (node.value,)
        else:  # only what its rules read (as PyTorch's saved tensors: sum(p) then a write is no error)
            saved = tuple(a for i, a in enumerate(args) if i in reads)
            if "out" in reads:
                saved += (node.value,)
        for a in saved:
            if type(a) is not np.ndarray:
                continue
            buffer = _buffer(a)
            hit = relevant.get(id(buffer))
            if hit is None or hit[0] is not buffer:
                continue
            lo, hi = _byte_range(a)
            for (first, last), stamp, what in hit[1]:
                if node._id < stamp and first < hi and lo < last:
                    raise RuntimeError(
                        f"one of the values saved to differentiate '{prim.__name__}' (an array of shape "
                        f"{a.shape}) was modified by an in-place operation ({what}) after "
                        f"'{prim.__name__}' used it; its gradient could be wrong, so none is computed. Do "
                        f"the in-place update after backward(), or on a copy (x = x.copy()).")
