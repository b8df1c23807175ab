"""More elementwise primitives: logaddexp, logaddexp2, sinc, and round (zero derivative).

``logaddexp`` has its own rule for stability: its partials ``exp(x - out)`` never overflow, where
the composed ``log(exp(x) + exp(y))`` would. Binary ones broadcast like the ufuncs in
``elementwise`` (their ``grad_post`` sums cotangents back to each argument's shape).
"""

import math

import numpy as np

from wengert.ops.elementwise import (
    _broadcasting_prim,
    _zero_rule,
    cos,
    exp,
    exp2,
    where,
)
from wengert.primitive import Primitive, defjvp, defvjp
from wengert.trace import is_symbolic, unbox_all

__all__ = ["logaddexp", "logaddexp2", "sinc", "round_"]

logaddexp = _broadcasting_prim(np.logaddexp, "logaddexp")
defvjp(logaddexp, lambda g, out, x, y: g * exp(x - out), lambda g, out, x, y: g * exp(y - out))
defjvp(logaddexp, lambda t, out, x, y: t * exp(x - out), lambda t, out, x, y: t * exp(y - out))

logaddexp2 = _broadcasting_prim(np.logaddexp2, "logaddexp2")
defvjp(logaddexp2, lambda g, out, x, y: g * exp2(x - out), lambda g, out, x, y: g * exp2(y - out))
defjvp(logaddexp2, lambda t, out, x, y: t * exp2(x - out), lambda t, out, x, y: t * exp2(y - out))


def _sinc_d(out, x):
    """d sinc / dx = (cos(pi x) - sinc(x)) / x.

    For |x| < 0.01 that difference cancels badly, so its Taylor series is used there,
    -pi^2 x / 3 + pi^4 x^3 / 30 - pi^6 x^5 / 840 (exact to rounding, and differentiable again).
    """
    small = abs(unbox_all(x)) < 0.01
    traced = is_symbolic(small)  # a traced program takes the general form (its data is not known)
    if not traced and not np.any(small):
        return (cos(math.pi * x) - out) / x
    p2 = math.pi ** 2
    x2 = x * x
    series = x * (-p2 / 3.0 + x2 * (p2 * p2 / 30.0 - x2 * (p2 * p2 * p2 / 840.0)))
    if not traced and np.all(small):
        return series
    return where(small, series, (cos(math.pi * x) - out) / where(small, 1.0, x))


sinc = Primitive(np.sinc, name="sinc")
defvjp(sinc, lambda g, out, x: g * _sinc_d(out, x))
defjvp(sinc, lambda t, out, x: t * _sinc_d(out, x))


def _round_impl(a, decimals=0):
    """numpy.round (round half to even)."""
    return np.round(a, decimals)


# Piecewise constant: derivative zero almost everywhere (as floor, ceil, rint, and in JAX/autograd).
round_ = Primitive(_round_impl, name="round")
defvjp(round_, _zero_rule)
defjvp(round_, _zero_rule)
