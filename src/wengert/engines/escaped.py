"""Writes through the NumPy array of an eager tensor: ``a = c.numpy()``, then ``a[0] = 5.0``.

``Tensor.numpy()`` and ``np.asarray(tensor)`` share the tensor's memory, as in PyTorch, so a write
into the array changes the tensor. An in-place write through the tensor itself (``c[0] = 5.0``, an
optimizer's step) is stamped (``mutation.note_inplace_write``) and a backward pass that still needs
what it overwrote is refused; a write through the NumPy array is invisible to the tensor, and
PyTorch's version counter misses it too, so its backward pass silently reads the new values. Here
it is caught the same way as a write through the tensor.

How: the array handed out is a new view of the tensor's memory (:func:`hand_out`), registered here
with a copy of what it held while it or any view of it lives. Where a write through it matters, its
contents are compared with the copy, and a difference is stamped as an in-place write at that moment
(:func:`notice_writes`) -- before an eager operation reads memory a live view shares (so an
operation recorded after the write reads the new values as usual), as a backward pass starts (so one
recorded before it is refused), and when the view is dropped. Cost: a copy of the array as it is
handed out; while the view lives, one comparison per eager operation that reads its memory and one
per backward pass; nothing once it is gone (``print(w.detach().numpy())`` drops it at once).
"""

import threading
import weakref

import numpy as np

from wengert.engines.kept import _same_bytes
from wengert.engines.mutation import _buffer, note_inplace_write

__all__ = ["LIVE", "hand_out", "shared", "notice_writes", "notice_writes_into"]

LIVE = {}
"""``id(holder) -> (weakref to what the array handed out views, an inner view of the same memory, the
copy)``: an entry lives as long as any view of the array handed out."""

_LOCK = threading.Lock()

WHAT = "a write through the array that numpy() (or np.asarray) returned"


def hand_out(array):
    """A view of ``array`` (an eager tensor's writeable value) that the caller may write into, noted
    so that such a write is stamped as an in-place write of the tensor."""
    holder = _Holder(array)
    view = np.asarray(holder)  # its base, and every view of it's (a[1:], a.T), is the holder
    inner = array.view()
    key = id(holder)
    ref = weakref.ref(holder, lambda ref, key=key: _dropped(key, ref))
    with _LOCK:
        LIVE[key] = (ref, inner, inner.copy())
    return view


class _Holder:
    """What a handed-out array views, so that views of *it* (``c.numpy()[:2]``) keep it alive too
    (NumPy gives a view of a view the owner of the memory as its base: an ndarray would die with the
    first view)."""

    __slots__ = ("__array_interface__", "array", "__weakref__")

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def shared(array):
    """``array`` (a tensor's value) as handed to the caller: a writeable array through :func:`hand_out`."""
    if type(array) is np.ndarray and array.flags.writeable:
        return hand_out(array)
    return array


def _dropped(key, ref):
    with _LOCK:
        entry = LIVE.get(key)
        if entry is None or entry[0] is not ref:
            return
        del LIVE[key]
    if not _same_bytes(entry[2], entry[1]):
        note_inplace_write(entry[1], WHAT)


def notice_writes(buffers=None):
    """Stamp every write made through a live view since it was handed out or last looked at (only
    through those viewing one of ``buffers``, ids of the arrays owning the memory, if given)."""
    with _LOCK:
        entries = list(LIVE.items())
    for key, (ref, inner, copy) in entries:
        if buffers is not None and id(_buffer(inner)) not in buffers:
            continue
        if not _same_bytes(copy, inner):
            note_inplace_write(inner, WHAT)
            with _LOCK:
                if key in LIVE and LIVE[key][0] is ref:
                    LIVE[key] = (ref, inner, inner.copy())


def notice_writes_into(values):
    """:func:`notice_writes`, where one of ``values`` (arrays an operation is about to read) shares
    memory with a live view."""
    buffers = {id(_buffer(v)) for v in values if type(v) is np.ndarray}
    if not buffers:
        return
    notice_writes(buffers)
