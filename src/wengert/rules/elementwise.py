"""Elementwise primitives (NumPy's ufuncs), each defined once by its partial derivatives.

``elementwise(np_fun, d_0, d_1, ..., float_fun=...)`` (``wengert.core.extend``) takes, per argument,
the derivative of the output with respect to that argument, ``d_i(out, *args)``: from it come the
VJP ``g * d_i``, the JVP ``t * d_i`` and the fused rule for Python floats (the same expression with
``math``'s functions). Binary functions broadcast; their cotangents are summed back to each
argument's shape in one place (``broadcasting.unbroadcast``). Python floats stay Python floats:
``float_fun`` computes them (NumPy's scalar path costs far more), falling back to NumPy where
``math`` or Python's operators raise (``log(-1.0)`` and ``1.0 / 0.0`` are nan and inf with a
warning, as in NumPy); see ``wengert.core.primitive`` for that contract.

Functions that select rather than scale (``maximum``, ``where``, ``clip``) and ``absolute`` (not
holomorphic) give rules of their own; a rule linear in ``g`` that is also linear in ``t`` serves as
both the VJP and the JVP. ``logaddexp`` has its own derivative for stability: ``exp(x - out)``
never overflows where the composed ``log(exp(x) + exp(y))`` would.
"""

import math
import operator

import numpy as np

from wengert.core.extend import defbatch, defjvp, defvjp, elementwise, facts, with_float_path
from wengert.core.primitive import Primitive, binary_function
from wengert.core.trace import is_symbolic, unbox_all
from wengert.rules import broadcasting
from wengert.rules import complex as complex_parts

__all__ = [
    "add", "subtract", "multiply", "true_divide", "divide", "power", "negative", "positive",
    "maximum", "minimum", "arctan2", "hypot", "absolute", "abs", "sign", "sqrt", "cbrt", "exp",
    "exp2", "log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan", "arcsin", "arccos",
    "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "square", "reciprocal",
    "floor", "ceil", "rint", "trunc", "where", "clip", "tie_select", "masked", "zeros_of",
    "logaddexp", "logaddexp2", "sinc", "round_",
]

_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _both(prim, *rules):
    """Rules linear in the cotangent that are the same map on tangents: the VJP and the JVP."""
    defvjp(prim, *rules)
    defjvp(prim, *rules)
    return prim


def _binary(np_fun, op):
    """NumPy's ufunc, with the Python operator for two Python floats (the comparisons use it)."""
    return with_float_path(np_fun, op, 2)


def zeros_of(x):
    """Zeros shaped like ``x`` (traced or not), as a constant: no derivative flows through it."""
    x = unbox_all(x)
    if type(x) is float:
        return 0.0
    if broadcasting.foreign(x):
        return np.zeros_like(x)
    return np.zeros(np.shape(x), dtype=np.result_type(x))


def _zero_rule(g, out, *args, **kwargs):
    return zeros_of(g)


# -- arithmetic ------------------------------------------------------------------------------------

# units and negations (``x + 0``, ``x * 1``, ``0 - x``, ``-1 * x``): what constant folding drops
add = elementwise(np.add, 1.0, 1.0, float_fun=operator.add, operator="+", units={0: 0, 1: 0})
subtract = elementwise(np.subtract, 1.0, -1.0, float_fun=operator.sub, operator="-", units={1: 0},
                       negates={0: 0})
multiply = elementwise(np.multiply, lambda out, x, y: y, lambda out, x, y: x, float_fun=operator.mul,
                       operator="*", linear=(0, 1), units={0: 1, 1: 1}, negates={0: -1, 1: -1})
true_divide = elementwise(np.true_divide, lambda out, x, y: 1.0 / y, lambda out, x, y: -out / y,
                          float_fun=operator.truediv, name="true_divide", operator="/", linear=(0,),
                          units={1: 1})
divide = true_divide
negative = elementwise(np.negative, -1.0, float_fun=operator.neg, operator="-", linear=(0,))
positive = elementwise(np.positive, 1.0, float_fun=operator.pos, operator="+", linear=(0,))


def _pow_dx(x, y):
    """d(x**y)/dx = y * x**(y-1), written so that y == 0 gives 0 rather than 0 * inf."""
    if type(y) is float or type(y) is int or type(y) is complex:  # a Python number stays weak
        if y == 0:
            return 0.0
        if type(x) is float and type(y) is not complex:  # math.pow raises where ** would give complex
            return y * math.pow(x, y - 1)
        return y * x ** (y - 1)
    return where(y == 0, 0.0, y * x ** where(y == 0, 1.0, y - 1))  # 0, not 0 * inf, at x = inf


def _pow_dy(out, x):
    """d(x**y)/dy = log(x) * x**y, taken as 0 where x == 0 (its limit from the right)."""
    if type(x) is float:
        return 0.0 if x == 0 else log(x) * out
    return where(x == 0, 0.0, log(where(x == 0, 1.0, x)) * out)


# math.pow, not Python's **: for a negative base and a fractional exponent ** returns a complex
# number, math.pow raises, and NumPy's nan (with its warning) is computed instead. math.pow is C's
# pow, as NumPy's loop over arrays; NumPy's float64 scalars take x ** 0.5 as sqrt(x), which differs
# at x = -inf (nan, not inf) and -0.0 (-0.0, not 0.0): there the float path gives the arrays' answer.
power = elementwise(np.power, lambda out, x, y: _pow_dx(x, y), lambda out, x, y: _pow_dy(out, x),
                    float_fun=math.pow, operator="**", units={1: 1})

arctan2 = elementwise(np.arctan2, lambda out, y, x: x / (x * x + y * y),
                      lambda out, y, x: -y / (x * x + y * y), float_fun=math.atan2)
hypot = elementwise(np.hypot, lambda out, x, y: x / out, lambda out, x, y: y / out, float_fun=math.hypot)
def _logaddexp_dx(out, x, y):
    """d logaddexp(x, y) / dx: exp(x - out); on another library's array 1 / (1 + exp(y - x)), which does
    not read ``out``, so that a lazy gradient (Dask) need not compute the forward value too."""
    if type(out) is not float and broadcasting.foreign(unbox_all(out)):
        return 1.0 / (1.0 + exp(y - x))
    return exp(x - out)


def _logaddexp_dy(out, x, y):
    """d logaddexp(x, y) / dy, as :func:`_logaddexp_dx`."""
    if type(out) is not float and broadcasting.foreign(unbox_all(out)):
        return 1.0 / (1.0 + exp(x - y))
    return exp(y - out)


logaddexp = elementwise(np.logaddexp, _logaddexp_dx, _logaddexp_dy)
logaddexp2 = elementwise(np.logaddexp2, lambda out, x, y: exp2(x - out), lambda out, x, y: exp2(y - out))

# -- one-argument functions --------------------------------------------------------------------------

sqrt = elementwise(np.sqrt, lambda out, x: 0.5 / out, float_fun=math.sqrt)
cbrt = elementwise(np.cbrt, lambda out, x: 1.0 / (3.0 * out * out))
exp = elementwise(np.exp, lambda out, x: out, float_fun=math.exp)
exp2 = elementwise(np.exp2, lambda out, x: out * _LN2)
log = elementwise(np.log, lambda out, x: 1.0 / x, float_fun=math.log)
log2 = elementwise(np.log2, lambda out, x: 1.0 / (x * _LN2), float_fun=math.log2)
log10 = elementwise(np.log10, lambda out, x: 1.0 / (x * _LN10), float_fun=math.log10)
log1p = elementwise(np.log1p, lambda out, x: 1.0 / (1.0 + x), float_fun=math.log1p)
expm1 = elementwise(np.expm1, lambda out, x: out + 1.0, float_fun=math.expm1)
sin = elementwise(np.sin, lambda out, x: cos(x), float_fun=math.sin)
cos = elementwise(np.cos, lambda out, x: -sin(x), float_fun=math.cos)
tan = elementwise(np.tan, lambda out, x: 1.0 + out * out, float_fun=math.tan)
arcsin = elementwise(np.arcsin, lambda out, x: 1.0 / sqrt(1.0 - x * x), float_fun=math.asin)
arccos = elementwise(np.arccos, lambda out, x: -1.0 / sqrt(1.0 - x * x), float_fun=math.acos)
arctan = elementwise(np.arctan, lambda out, x: 1.0 / (1.0 + x * x), float_fun=math.atan)
sinh = elementwise(np.sinh, lambda out, x: cosh(x), float_fun=math.sinh)
cosh = elementwise(np.cosh, lambda out, x: sinh(x), float_fun=math.cosh)
tanh = elementwise(np.tanh, lambda out, x: 1.0 - out * out, float_fun=math.tanh)
arcsinh = elementwise(np.arcsinh, lambda out, x: 1.0 / sqrt(x * x + 1.0), float_fun=math.asinh)
arctanh = elementwise(np.arctanh, lambda out, x: 1.0 / (1.0 - x * x), float_fun=math.atanh)
square = elementwise(np.square, lambda out, x: 2.0 * x, float_fun=lambda x: x * x)
reciprocal = elementwise(np.reciprocal, lambda out, x: -out * out, float_fun=lambda x: 1.0 / x)


def _arccosh_d(x):
    """1 / sqrt(x^2 - 1); for complex x as 1 / (sqrt(x - 1) sqrt(x + 1)), the principal branch's."""
    if type(x) is not float and complex_parts.is_complex(x):
        return 1.0 / (sqrt(x - 1.0) * sqrt(x + 1.0))
    return 1.0 / sqrt(x * x - 1.0)


arccosh = elementwise(np.arccosh, lambda out, x: _arccosh_d(x), float_fun=math.acosh)


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
    # a traced program or a lazy array takes the general form (its data is not known, or not computed)
    traced = is_symbolic(small) or broadcasting.foreign(small)
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


sinc = elementwise(np.sinc, lambda out, x: _sinc_d(out, x))

# Piecewise-constant functions: derivative zero almost everywhere (as in NumPy-based AD tools).
sign = elementwise(np.sign, 0.0)
floor = elementwise(np.floor, 0.0)
ceil = elementwise(np.ceil, 0.0)
rint = elementwise(np.rint, 0.0)
trunc = elementwise(np.trunc, 0.0)


def _round_impl(a, decimals=0):
    """numpy.round (round half to even)."""
    return np.round(a, decimals)


round_ = _both(Primitive(_round_impl, name="round"), _zero_rule)
facts(round_, fresh=True)
defbatch(round_, broadcasting.batch_elementwise)


def _unit_conj(out, x):
    """conj(x) / |x| for complex x, 0 where x == 0 (written without sign(), whose rule is zero)."""
    return complex_parts.conj(x) / where(out == 0, 1.0, out)


def _abs_vjp(g, out, x):
    """g * d|x|/dx; for complex x, g * conj(x) / |x| (HIPS autograd's and JAX's convention)."""
    if type(x) is not float and complex_parts.is_complex(x):
        return g * _unit_conj(out, x)
    return g * sign(x)


def _abs_jvp(t, out, x):
    """The tangent of |x|: real(conj(x) t) / |x| for complex x, so it stays real."""
    if type(x) is not float and complex_parts.is_complex(x):
        return complex_parts.real(_unit_conj(out, x) * t)
    return t * sign(x)


absolute = elementwise(np.absolute, None, float_fun=abs)
defvjp(absolute, _abs_vjp)
defjvp(absolute, _abs_jvp)
abs = absolute  # noqa: A001 - NumPy's name, public in wengert.numpy

# -- selection: rules linear in g (or t) that pick where it goes ---------------------------------------

def masked(a, mask):
    """``a`` where ``mask``, exactly 0 elsewhere: ``np.where(mask, a, 0)``, computed as a product.

    On an irregular mask ``np.where`` is about ten times slower than a multiplication (it
    branches per element); the product is exact except that 0 * inf is nan, so when ``a`` holds
    inf or nan the result is recomputed with ``np.where``.
    """
    if type(a) is not np.ndarray and hasattr(type(a), "__array_function__"):  # Dask, CuPy: no test of
        return np.where(mask, a, 0)  # their data (NumPy alone here: generated code includes this)
    with np.errstate(invalid="ignore"):
        out = np.multiply(a, mask)
    if out.dtype.kind in "fc" and not np.isfinite(out).all():
        out = np.where(mask, a, np.zeros((), out.dtype))
    return out


def tie_select(g, x, y):
    """``g`` where x > y, ``g / 2`` where x == y, 0 elsewhere (in the broadcast shape)."""
    out = masked(g, x > y)
    ties = x == y
    if type(ties) is not np.ndarray and hasattr(type(ties), "__array_function__"):  # Dask, CuPy: no test
        return np.where(ties, 0.5 * g, out)  # of their data (NumPy alone: generated code includes this)
    if ties.any() if type(ties) is np.ndarray else ties:  # the method: np.any's wrapper costs more
        out = np.where(ties, 0.5 * np.asarray(g), out)
    return out


# The cotangent (or tangent) that max(x, y) passes to x: ties split it equally, as in HIPS autograd
# and JAX. Linear in g; the selection is piecewise constant in x and y, so they enter as constants.
tie_select = _both(Primitive(tie_select, name="tie_select", broadcasts=True),
                   lambda gg, out, g, x, y: tie_select(gg, x, y))
facts(tie_select, linear=(0,), fresh=True, helper=True)


def _tie_share(x, y, g):
    return tie_select(g, unbox_all(x), unbox_all(y))


def _tie_select_into(g, x, y):
    """``tie_select(g, x, y)`` computed in ``g``'s memory (an in-place VJP rule: the backward pass
    owns ``g`` and uses it once); None, to decline, where g holds inf or nan (0 * inf)."""
    x, y = unbox_all(x), unbox_all(y)
    if is_symbolic((x, y)):  # a program's symbols, a batch: g's memory cannot hold the result
        return None
    if not np.isfinite(g).all():
        return None
    keep = x > y
    ties = x == y  # a Python bool where x and y are floats (g is then a 0-d array)
    if ties.any() if type(ties) is np.ndarray else ties:
        keep = np.where(ties, 0.5, keep)
    np.multiply(g, keep, out=g)
    return g


def _extreme(np_fun, rules, inplace):
    """max or min: rules that pass g to the argument chosen (split at ties), and in-place forms of
    them that compute it in g's memory."""
    prim = _both(Primitive(np_fun, name=np_fun.__name__, broadcasts=True), *rules)
    defvjp(prim, *rules, inplace=inplace)
    facts(prim, fresh=True)
    return binary_function(prim)


maximum = _extreme(
    np.maximum,
    (lambda g, out, x, y: _tie_share(x, y, g), lambda g, out, x, y: _tie_share(y, x, g)),
    (lambda g, out, x, y: _tie_select_into(g, x, y), lambda g, out, x, y: _tie_select_into(g, y, x)))
minimum = _extreme(
    np.minimum,
    (lambda g, out, x, y: _tie_share(y, x, g), lambda g, out, x, y: _tie_share(x, y, g)),
    (lambda g, out, x, y: _tie_select_into(g, y, x), lambda g, out, x, y: _tie_select_into(g, x, y)))


def _where_impl(condition, x, y):
    """numpy.where (with a faster path for the rules' ``where(c, g, 0.0)``)."""
    if type(y) in (float, int) and y == 0 and isinstance(x, np.ndarray) and x.dtype.kind in "fc":
        return masked(x, condition)
    if type(x) in (float, int) and x == 0 and isinstance(y, np.ndarray) and y.dtype.kind in "fc":
        return masked(y, np.logical_not(condition))
    return np.where(condition, x, y)


where = _both(Primitive(_where_impl, name="where", broadcasts=True),
              None, lambda g, out, c, x, y: where(c, g, 0.0), lambda g, out, c, x, y: where(c, 0.0, g))
facts(where, fresh=True, linear_jointly=(1, 2))  # where(c, 0, 0) is 0


def _clip_impl(a, a_min, a_max):
    return np.clip(a, a_min, a_max)


def _inside(a, a_min, a_max):
    """Where ``a`` passes through clip unchanged (bounds included, as PyTorch's clamp)."""
    if a_min is None:
        return a <= a_max
    if a_max is None:
        return a >= a_min
    return (a >= a_min) & (a <= a_max)


clip = _both(Primitive(_clip_impl, name="clip", broadcasts=True),
             lambda g, out, a, lo, hi: where(_inside(a, lo, hi), g, 0.0),
             lambda g, out, a, lo, hi: where(a < lo, g, 0.0),
             lambda g, out, a, lo, hi: where(a > hi, g, 0.0))
facts(clip, fresh=True)

# -- what each VJP reads (the tape keeps only that: wengert.engines.saving) ------------------------------
facts(add, saves=())
facts(subtract, saves=())
facts(multiply, saves={0: (1,), 1: (0,)})
facts(true_divide, saves={0: (1,), 1: ("out", 1)})
facts(negative, saves=())
facts(positive, saves=())
facts(power, saves={0: (0, 1), 1: ("out", 0)}, constants={1: (0, 1)})  # x ** 0 is 1, at nan too
facts(hypot, saves={0: ("out", 0), 1: ("out", 1)})
facts(sqrt, saves=("out",))
facts(cbrt, saves=("out",))
facts(exp, saves=("out",))
facts(exp2, saves=("out",))
facts(expm1, saves=("out",))
facts(tan, saves=("out",))
facts(tanh, saves=("out",))
facts(reciprocal, saves=("out",))


def _declare_saves(saves, *prims):
    for prim in prims:
        facts(prim, saves=saves)


_declare_saves((0,), log, log2, log10, log1p, sin, cos, arcsin, arccos, arctan, sinh, cosh, arcsinh, arctanh,
               arccosh, square)
_declare_saves((), sign, floor, ceil, rint, trunc, round_)
facts(absolute, saves=("out", 0))
facts(maximum, saves=(0, 1))
facts(minimum, saves=(0, 1))
facts(where, saves=(0,))
facts(clip, saves=(0, 1, 2))
facts(tie_select, saves=(1, 2))  # g's rule reads the comparison's x and y
facts(arctan2, saves=(0, 1))
facts(sinc, saves=("out", 0))
facts(logaddexp2, saves={0: ("out", 0), 1: ("out", 1)})
# logaddexp's rule for another library's arrays reads x and y, not out (_logaddexp_dx): both kept
facts(logaddexp, saves=("out", 0, 1))
