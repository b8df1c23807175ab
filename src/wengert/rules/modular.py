"""Modular arithmetic: ``remainder`` (``x % y``, ``np.mod``), ``fmod`` and ``floor_divide`` (``x // y``).

``remainder(x, y) = x - floor(x / y) * y`` has slope 1 in ``x`` and ``-floor(x / y)`` in ``y``;
``fmod(x, y) = x - trunc(x / y) * y`` has slope 1 and ``-trunc(x / y)``, as in PyTorch and JAX.
Both jump where ``x / y`` crosses an integer; there, as for ``floor``, the one-sided slope is taken.
The quotient in a rule is computed from the same NumPy operation as the value (``floor_divide``
is consistent with ``remainder``), so value and derivative never disagree about which side of a
jump a point lies on. ``floor_divide`` is integer-valued and carries no derivative.

Python floats take Python's ``%`` and ``//`` (NumPy's values, far cheaper); where Python raises
(``x % 0.0``) NumPy's answer is returned, ``nan`` or ``inf`` with NumPy's warning.
"""

import math
import operator

import numpy as np
from numpy import float64 as _float64

from wengert.core.extend import defbatch, defjvp, defvjp, facts, nondiff_primitive
from wengert.core.primitive import Primitive, binary_function
from wengert.rules.broadcasting import batch_elementwise, broadcast_tangent, unbroadcast
from wengert.rules.elementwise import rint

__all__ = ["remainder", "mod", "fmod", "floor_divide", "divmod_"]


def _with_numpy_fallback(np_fun, float_op):
    """``np_fun`` on arrays; ``float_op`` on two Python floats, NumPy's value where it raises."""

    def on_floats(x, y):
        try:
            out = float_op(x, y)
        except (ZeroDivisionError, ValueError, OverflowError):
            return float(np_fun(_float64(x), y))
        if out != out and x == x and y == y:  # inf % 1.0: Python's nan is silent, NumPy warns
            return float(np_fun(_float64(x), y))
        return out

    def impl(x, y):
        if type(x) is float and type(y) is float:
            return on_floats(x, y)
        return np_fun(x, y)

    impl.__name__ = np_fun.__name__
    impl.__doc__ = f"numpy.{np_fun.__name__}, elementwise with broadcasting."
    impl.float_op = on_floats
    return impl


def _broadcasting_binary(impl, name):
    prim = Primitive(impl, name=name, grad_post=unbroadcast, tangent_post=broadcast_tangent)
    return binary_function(facts(prim, broadcasts=True, fresh=True), impl.float_op)


floor_divide = nondiff_primitive(_with_numpy_fallback(np.floor_divide, operator.floordiv), "floor_divide")
defbatch(floor_divide, batch_elementwise)
_floor_quotient = floor_divide.fun.float_op


def _trunc_quotient(x, y, out):
    """trunc(x / y) as fmod rounded it: (x - fmod(x, y)) / y is an integer up to rounding."""
    return rint((x - out) / y)


def _trunc_quotient_float(x, y, out):
    """The same for Python floats (NumPy's rint: inf and nan pass through, as on arrays)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(np.rint(np.true_divide(x - out, y)))


remainder = _broadcasting_binary(_with_numpy_fallback(np.remainder, operator.mod), "remainder")
_remainder_rules = (lambda g, out, x, y: g, lambda g, out, x, y: -g * floor_divide(x, y))  # g or t alike
defvjp(remainder, *_remainder_rules, floats=lambda g, out, x, y: (g, -g * _floor_quotient(x, y)))
defjvp(remainder, *_remainder_rules)
facts(remainder, saves={0: (), 1: (0, 1)})  # what its VJPs read (wengert.engines.saving)
mod = remainder

fmod = _broadcasting_binary(_with_numpy_fallback(np.fmod, math.fmod), "fmod")
_fmod_rules = (lambda g, out, x, y: g, lambda g, out, x, y: -g * _trunc_quotient(x, y, out))
defvjp(fmod, *_fmod_rules, floats=lambda g, out, x, y: (g, -g * _trunc_quotient_float(x, y, out)))
defjvp(fmod, *_fmod_rules)
facts(fmod, saves={0: (), 1: ("out", 0, 1)})


def divmod_(x, y):
    """numpy.divmod: ``(floor_divide(x, y), remainder(x, y))``; only the remainder has a derivative."""
    return floor_divide(x, y), remainder(x, y)
