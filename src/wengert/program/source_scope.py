"""The names an expression of the function being transformed sees: its variables, closure and
globals, with ``math`` sent to ``wengert.numpy``, NumPy functions taking lists of traced values,
and the user's other functions interpreted inline (by an interpreter of the caller's kind)."""

import inspect
import math
import types

import numpy as np

import wengert.numpy as wnp
from wengert.program.control import TransformError
from wengert.program.source_parse import TAPE, is_user_function
from wengert.program.source_values import each_symbol

__all__ = ["Scope"]

_MATH = {"sin": wnp.sin, "cos": wnp.cos, "tan": wnp.tan, "exp": wnp.exp, "log": wnp.log, "sqrt": wnp.sqrt,
         "tanh": wnp.tanh, "sinh": wnp.sinh, "cosh": wnp.cosh, "asin": wnp.arcsin, "acos": wnp.arccos,
         "atan": wnp.arctan, "atan2": wnp.arctan2, "log1p": wnp.log1p, "expm1": wnp.expm1,
         "fabs": wnp.abs, "pow": wnp.power, "hypot": wnp.hypot, "log10": wnp.log10, "log2": wnp.log2}


class _MathShim:
    """``math`` with its functions sent to ``wengert.numpy`` (they accept symbols)."""

    def __getattr__(self, name):
        if name in _MATH:
            return _MATH[name]
        return getattr(math, name)


class _ListArguments:
    """A NumPy (or ``wengert.numpy``) function whose list and tuple arguments holding traced values
    (``np.mean([a, b])``, ``np.dot([1.0, a], x)``) are first stacked into one array, as NumPy
    reads such a list; other attributes (``np.add.reduce``) are the function's own."""

    __slots__ = ("fun",)

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args, **kwargs):
        return self.fun(*[_stacked(a) for a in args], **kwargs)

    def __getattr__(self, name):
        return getattr(self.fun, name)


def _stacked(a):
    if type(a) is not list and type(a) is not tuple:
        return a
    found = []
    each_symbol(a, found.append)
    if not any(s.variable.dtype.kind in "fc" for s in found):
        return a
    try:
        return wnp.array(a)
    except (ValueError, TypeError):  # ragged, or arrays of different shapes: the function reports it
        return a


class _ArrayModule:
    """``numpy`` or ``wengert.numpy`` (and their submodules) as the function being transformed sees
    them: their functions take lists of traced values (see :class:`_ListArguments`)."""

    __slots__ = ("module",)

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        value = getattr(self.module, name)
        if isinstance(value, types.ModuleType):
            return _ArrayModule(value)
        if isinstance(value, type) or not callable(value):
            return value
        return _ListArguments(value)


_ARRAY_MODULES = frozenset((id(np), id(wnp)))


class Scope(dict):
    """The names an expression sees: the interpreter's variables, then the closure, then globals,
    then builtins, as Python looks them up (user functions wrapped to be interpreted inline,
    ``math`` sent to ``wengert.numpy``)."""

    def __init__(self, interp):
        super().__init__()
        self.interp = interp

    def __missing__(self, name):
        it = self.interp
        if name in it.env:
            return it.env[name]
        in_closure = name in it.closure
        if in_closure:
            value = it.closure[name]
        elif name in it.fun.__globals__:
            value = it.fun.__globals__[name]
        else:
            raise KeyError(name)  # eval looks in the builtins (or raises NameError)
        if value is math:
            return _MathShim()
        if id(value) in _ARRAY_MODULES:
            return _ArrayModule(value)
        if is_user_function(value):
            return _UserCall(it, value)
        if in_closure:  # a closure cell wins over a global of the same name, as in Python
            return value
        raise KeyError(name)  # eval reads the global itself


class _UserCall:
    """A user function called from the function being transformed: interpreted inline."""

    def __init__(self, caller, fun):
        self.caller = caller
        self.fun = fun

    def __call__(self, *args, **kwargs):
        depth = self.caller.depth + 1
        if depth > 20:
            raise TransformError(f"recursion through {self.fun.__name__} (calls nested more than 20 deep) is "
                                 f"outside the subset the source transformation supports. {TAPE}")
        sub = type(self.caller)(self.fun, self.caller.builder, depth)  # an interpreter like the caller
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"calling {self.fun.__name__}: {e}") from None
        bound.apply_defaults()
        sub.env.update(bound.arguments)
        return sub.run_function()
