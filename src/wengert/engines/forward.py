"""Forward mode: dual numbers. A ``Dual`` carries a primal value and its tangent.

Forward mode with dual numbers, run alongside the program: each primitive's JVP rules turn the
arguments' tangents into the result's tangent, in program order. Arguments that carry no tangent
contribute nothing (symbolic zeros: no rule is called for them).
"""

import operator

import numpy as np

from wengert.core.primitive import FLOAT_PATH_ERRORS, on_float64
from wengert.core.trace import BOX_TYPES, Trace, register_box
from wengert.engines.box import ArrayBox
from wengert.engines.mutation import array_of, note_view, view_of_buffer
from wengert.engines.reverse import is_inexact

__all__ = ["Dual", "ForwardTrace"]


def _tangent(prim, argnum, t, out, args, kwargs):
    """The tangent of ``out`` contributed by the tangent ``t`` of argument ``argnum``, by ``prim``'s rule."""
    rule = prim.jvp_rule(argnum)
    try:
        d = rule(t, out, *args, **kwargs)
    except FLOAT_PATH_ERRORS as e:  # Python floats refused (1.0 / 0.0): on np.float64, as NumPy
        d = on_float64(rule, (t, out, *args), kwargs, e)
    if prim.tangent_post is not None:
        d = prim.tangent_post(d, out)
    return d


@register_box
class Dual(ArrayBox):
    """A value with a tangent, on one forward-mode trace."""

    __slots__ = ("value", "tangent", "_trace", "_view", "__weakref__")  # _view: a view of a Dual's array
    forward_mode = True

    def __init__(self, value, tangent, trace):
        self.value = value
        self.tangent = tangent
        self._trace = trace

    def _kind(self):
        return "a value traced by wg.jvp (forward mode)"

    def __repr__(self):
        return f"Dual({self.value!r}, tangent={self.tangent!r}, level={self._trace.level})"

    # Conversions: refused (ArrayBox's), but for a Dual that carries no derivative (tangent None: a
    # buffer made by ForwardTrace.lift that nothing traced was stored into), its value's own.
    def __float__(self):
        return ArrayBox.__float__(self) if self.tangent is not None else float(self.value)

    def __int__(self):
        return ArrayBox.__int__(self) if self.tangent is not None else int(self.value)

    def __complex__(self):
        return ArrayBox.__complex__(self) if self.tangent is not None else complex(self.value)

    def __index__(self):
        return ArrayBox.__index__(self) if self.tangent is not None else operator.index(self.value)

    def item(self, *args):
        return ArrayBox.item(self) if self.tangent is not None else np.asarray(self.value).item(*args)

    def tolist(self):
        return ArrayBox.tolist(self) if self.tangent is not None else np.asarray(self.value).tolist()

    def __array__(self, dtype=None, copy=None):
        if self.tangent is not None:
            ArrayBox.__array__(self, dtype, copy)
        return np.array(self.value, dtype=dtype, copy=copy)


class ForwardTrace(Trace):
    """One forward-mode sweep (``wg.jvp``). A Dual an operation made whose array is a view of an
    argument's is marked so (``mutation.note_view``): a write into it writes through."""

    __slots__ = ()

    def constant(self, value):
        return value

    def lift(self, value):
        """``value`` as a Dual that carries no derivative (tangent None, a symbolic zero: operations
        on it alone give constants): a buffer that traced values can be stored into."""
        return Dual(value, None, self)

    def apply(self, prim, args, kwargs):
        unboxed = list(args)
        tangents = []
        for i, a in enumerate(args):
            if type(a) in BOX_TYPES and a._trace is self:
                unboxed[i] = a.value
                if a.tangent is not None:
                    tangents.append((i, a.tangent))
        out = prim(*unboxed, **kwargs)
        if not tangents or not is_inexact(out):
            if not tangents and (type(out) is np.ndarray or type(out) in BOX_TYPES):
                held = view_of_buffer(self, prim, args, kwargs, out)
                if held is not None:
                    return held
            return out
        if prim.jvp_joint is not None:  # the rule given for all arguments at once (concatenate's)
            given = [None] * len(args)
            for i, t in tangents:
                given[i] = t
            t_out = prim.jvp_joint(given, out, *unboxed, **kwargs)
            if prim.tangent_post is not None:
                t_out = prim.tangent_post(t_out, out)
        else:
            t_out = None
            for i, t in tangents:
                d = _tangent(prim, i, t, out, unboxed, kwargs)
                t_out = d if t_out is None else t_out + d
        dual = Dual(out, t_out, self)
        array = array_of(out)  # beneath a lower level's box, where nested
        if type(array) is np.ndarray and array.base is not None:  # a view: of an argument? (mutation.py)
            note_view(dual, array, prim, args, kwargs, self)
        return dual
