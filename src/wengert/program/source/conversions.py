"""NumPy's array conversions of traced values as the source front end reads them. NumPy runs
``np.asarray(x)`` through ``x.__array__``, which a traced value refuses (the conversion would drop its
derivative); read from the source, each is the traced value NumPy's result would be:

- ``np.asarray(x)``, ``np.asanyarray(x)``, ``np.ascontiguousarray(x)``, ``np.asfortranarray(x)`` and
  ``np.array(x, copy=None or False)`` of a traced array: ``x`` itself (the result may share x's
  memory in NumPy, so an in-place write into one while the other is read later is refused, as for
  ``y = x``); with another dtype, ``x.astype(dtype)`` (a new array, as NumPy makes one);
- ``np.array(x)`` (``copy=True``, the default) and ``copy=True`` anywhere: a copy, a new value (a write
  into either leaves the other alone, as in NumPy);
- a list or tuple holding traced values (with numbers or arrays, nested): their stack, a new value.

The dtype and shape are NumPy's own, found by running the NumPy function on the values' examples
(which also raises NumPy's errors: a ragged list, ``copy=False`` where a copy is needed); ``ndmin``
and the at-least-1-d of ``ascontiguousarray`` reshape the result. Arguments holding no traced value
are NumPy's to convert."""

import numpy as np

import wengert.numpy as wnp
from wengert.program.source.control import TransformError
from wengert.program.source.values import each_symbol
from wengert.program.tracing import Symbol
from wengert.rules import nondiff
from wengert.rules.broadcasting import astype

__all__ = ["CONVERSIONS", "conversion_of"]

CONVERSIONS = ("array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray")
"""The NumPy functions read this way (``np.NAME`` or the function itself, imported by name)."""


def _examples(obj):
    """``obj`` with each Symbol replaced by its example (through lists and tuples)."""
    t = type(obj)
    if t is Symbol:
        return obj.example
    if t is list or t is tuple:
        return t(_examples(o) for o in obj)
    return obj


def _always_copies(copy):
    """Whether ``copy=`` asks for a new array whatever the argument (``True``, ``np._CopyMode.ALWAYS``)."""
    if copy is None or copy is False:
        return False
    try:
        return bool(copy)
    except ValueError:  # np._CopyMode.NEVER
        return False


class _Conversion:
    """``np.NAME`` taking traced values (the module docstring); NumPy's own for other arguments."""

    __slots__ = ("name", "fun")

    def __init__(self, name, fun):
        self.name = name
        self.fun = fun

    def __call__(self, obj, *args, **kwargs):
        found = []
        each_symbol(obj, found.append)
        if not found:
            return self.fun(obj, *args, **kwargs)
        expected = np.asarray(self.fun(_examples(obj), *args, **kwargs))  # NumPy's dtype, shape, errors
        if expected.dtype.kind not in "biufc":
            raise TransformError(f"np.{self.name}(...) of a traced value with dtype {expected.dtype}: a "
                                 f"program built from source carries numeric arrays only; convert to a "
                                 f"numeric dtype")
        if type(obj) is Symbol:
            out = obj
            if out.variable.dtype != expected.dtype:
                out = astype(out, expected.dtype)  # a new array, as NumPy's
            elif _always_copies(kwargs.get("copy", self.name == "array")):
                out = wnp.copy(out) if out.variable.dtype.kind != "b" else nondiff.logical_and(out, True)
        else:
            out = wnp.array(obj)  # a stack of the items: a new array
            if out.variable.dtype != expected.dtype:
                out = astype(out, expected.dtype)
        if out.variable.shape != expected.shape:  # ndmin=, ascontiguousarray of a 0-d value
            out = wnp.reshape(out, expected.shape)
        return out

    def __getattr__(self, name):
        return getattr(self.fun, name)

    def __repr__(self):
        return f"<np.{self.name}, reading traced values (wengert's source front end)>"


_BY_ID = {id(getattr(np, name)): name for name in CONVERSIONS}


def conversion_of(value):
    """The conversion standing for ``value`` when it is one of NumPy's (:data:`CONVERSIONS`), else None."""
    name = _BY_ID.get(id(value))
    if name is None or getattr(np, name) is not value:
        return None
    return _Conversion(name, value)
