"""More elementwise primitives: logaddexp, logaddexp2, sinc, and round (zero derivative).

``logaddexp`` has its own rule for stability: its partials ``exp(x - out)`` never overflow, where
the composed ``log(exp(x) + exp(y))`` would. Binary ones broadcast like the ufuncs in
``elementwise`` (their ``grad_post`` sums cotangents back to each argument's shape).
"""

import math

import numpy as np

from wengert.core.extend import defjvp, defvjp
from wengert.core.primitive import Primitive
from wengert.core.trace import is_symbolic, unbox_all
from wengert.rules.elementwise import (
    _broadcasting_prim,
    _zero_rule,
    cos,
    exp,
    exp2,
    where,
)

__all__ = ["logaddexp", "logaddexp2", "sinc", "round_"]

logaddexp = _broadcasting_prim(np.logaddexp, "logaddexp")
defvjp(logaddexp, lambda g, out, x, y: g * exp(x - out), lambda g, out, x, y: g * exp(y - out))
defjvp(logaddexp, lambda t, out, x, y: t * exp(x - out), lambda t, out, x, y: t * exp(y - out))

logaddexp2 = _broadcasting_prim(np.logaddexp2, "logaddexp2")
defvjp(logaddexp2, lambda g, out, x, y: g * exp2(x - out), lambda g, out, x, y: g * exp2(y - out))
defjvp(logaddexp2, lambda t, out, x, y: t * exp2(x - out), lambda t, out, x, y: t * exp2(y - out))


SINC_SERIES_BELOW = 0.3
"""|x| under which sinc's derivative is taken from its Taylor series (see ``_sinc_d``)."""

_SINC_D_COEFFS = tuple((-1) ** k * 2 * k * math.pi ** (2 * k) / math.factorial(2 * k + 1)
                       for k in range(1, 12))
"""d sinc / dx = sum over k >= 1 of c_k x^(2k-1), c_k = (-1)^k 2k pi^(2k) / (2k+1)!."""


def _sinc_d(out, x):
    """d sinc / dx = (cos(pi x) - sinc(x)) / x.

    The difference cancels near 0 (it is about (pi x)^2 / 3): with eps the dtype's rounding unit
    its relative error is about eps / (3 x^2), a thousand units at |x| = 0.01 in float32 and float64
    alike. Below ``SINC_SERIES_BELOW`` (where that falls to a few units) the Taylor series is used
    instead, to 11 terms, which is exact to float64 rounding there (the first term left out is under
    1e-19 of the sum), and differentiable again.
    """
    small = abs(unbox_all(x)) < SINC_SERIES_BELOW
    traced = is_symbolic(small)  # a traced program takes the general form (its data is not known)
    if not traced and not np.any(small):
        return (cos(math.pi * x) - out) / x
    x2 = x * x
    series = _SINC_D_COEFFS[-1]
    for c in reversed(_SINC_D_COEFFS[:-1]):
        series = series * x2 + c
    series = series * x
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
