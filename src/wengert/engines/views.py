"""Which boxes view which (``mutation.note_view`` marks them): a registry, so that a write into an
array, or through one view of it, can take its other live views again (``mutation._refresh_views``),
as NumPy's views see the write; the basic-index comparison that Python's ``y[k] op= r`` needs; and
:class:`Retake`, the mark of a view that a write cannot go through but that a write into its base must
reach (NumPy's read-only views, a view of an argument other than the first, a wengert.numpy
composition that NumPy makes a view). Both boxes are held weakly, keyed by id (a box's == is
elementwise, so no WeakKeyDictionary)."""

import weakref

import numpy as np

from wengert.core.trace import unbox_all

__all__ = ["note_viewer", "views_of", "same_key", "VIEWERS", "Retake", "laid_out_as_view"]


_KEY_ATOMS = (int, slice, type(None), type(Ellipsis), bool)


def same_key(a, b):
    """Whether index tuples ``a`` and ``b`` are the same basic index (ints, slices, None, Ellipsis)."""
    if a is b:
        return True
    if type(a) is tuple and type(b) is tuple and len(a) == len(b):
        return all(x is y or (type(x) in _KEY_ATOMS and type(x) is type(y) and x == y) or
                   (type(x) is tuple and same_key(x, y)) for x, y in zip(a, b))
    return False


VIEWERS = {}
"""id(base) -> (weakref to base, [weakrefs to the boxes marked views of it]): what a write into base, or
through another view of it, must refresh (:func:`_refresh_views`). Keyed by id, holding both weakly
(a box's == is elementwise, so no WeakKeyDictionary)."""


def note_viewer(base, view):
    key = id(base)
    entry = VIEWERS.get(key)
    if entry is None or entry[0]() is not base:
        entry = VIEWERS[key] = (weakref.ref(base, lambda _, key=key: VIEWERS.pop(key, None)), [])
    views = entry[1]
    if len(views) >= 16 and not len(views) & (len(views) - 1):  # at powers of two: forget the dead
        views[:] = [r for r in views if r() is not None]
    views.append(weakref.ref(view))


def views_of(base):
    entry = VIEWERS.get(id(base))
    if entry is None or entry[0]() is not base:
        return ()
    return [v for v in (r() for r in entry[1]) if v is not None and getattr(v, "_view", None) is not None
            and v._view[0] is base]


class Retake:
    """How to take a view again from its base after the base is written, where a write into the view
    itself cannot be followed (no ``updates_view``): ``fun(*args)`` with the base as argument
    ``position``. ``readonly``: NumPy's view is read-only (``numpy.diagonal``), so a write into it is
    NumPy's ValueError. ``numpy_fun``: NumPy's own function of the base's array, whose layout (strides)
    the traced array's may not have (a small broadcast is filled). Stands in a view's mark where the
    primitive would (``mark[1]``)."""

    updates_view = None

    def __init__(self, fun, name, position=0, args=(), readonly=False, numpy_fun=None):
        self.fun, self.__name__, self.position, self.args, self.readonly = fun, name, position, args, readonly
        self.numpy_fun = numpy_fun

    def __call__(self, base, **kwargs):
        args = list(self.args) or [base]
        args[self.position] = base
        return self.fun(*args, **kwargs)


def laid_out_as_view(array, prim, base, rest, kwargs):
    """Whether ``array``, the new value of a view just written (a new buffer, in NumPy's 'K' order),
    has the strides of the view NumPy keeps, ``prim`` of ``base``'s array: where it has not (a
    reversed or strided slice), a later ``reshape``/``ravel`` would be a view where NumPy's is a copy."""
    if type(array) is not np.ndarray or type(base) is not np.ndarray:
        return True
    try:
        view = prim.fun(base, *unbox_all(rest), **(kwargs or {}))
    except Exception:  # noqa: BLE001 - a view this check cannot take again: leave it as it is
        return True
    return type(view) is not np.ndarray or view.strides == array.strides
