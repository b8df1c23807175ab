"""Elementwise primitives (NumPy's ufuncs): implementation, VJP and JVP side by side.

Binary and ternary functions broadcast; their rules are written for same-shaped arguments and the
primitive's ``grad_post``/``tangent_post`` (``broadcasting.unbroadcast`` / ``broadcast_tangent``)
sum cotangents back to each argument's shape, the one place broadcasting's adjoint lives.
Python floats stay Python floats: ``math`` is used for them (NumPy's scalar path costs far more),
falling back to NumPy where ``math`` or Python's operators raise (``log(-1.0)`` and ``1.0 / 0.0`` are
nan and inf with a warning, as in NumPy); see ``wengert.core.primitive`` for that contract.
"""

import math
import operator

import numpy as np

from wengert.core.extend import defjvp, defvjp, defvjp_float, defvjp_inplace
from wengert.core.primitive import FLOAT_PATH_ERRORS, Primitive, binary_function, unary_function
from wengert.core.trace import unbox_all
from wengert.rules import complex as complex_parts
from wengert.rules.broadcasting import broadcast_tangent, unbroadcast

__all__ = [
    "add", "subtract", "multiply", "true_divide", "divide", "power", "negative", "positive",
    "maximum", "minimum", "arctan2", "hypot", "absolute", "abs", "sign", "sqrt", "cbrt", "exp",
    "exp2", "log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan", "arcsin", "arccos",
    "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "square", "reciprocal",
    "floor", "ceil", "rint", "trunc", "where", "clip", "tie_select",
]


def _unary(np_fun, math_fun=None):
    """NumPy's ufunc, with ``math``'s version for Python floats (same values, far cheaper)."""
    if math_fun is None:
        return np_fun

    def impl(x):
        if type(x) is float:
            try:
                return math_fun(x)
            except FLOAT_PATH_ERRORS:  # math refuses (log(0.0), exp(1000.0)): NumPy's inf or nan
                return float(np_fun(x))
        return np_fun(x)

    impl.__name__ = np_fun.__name__
    impl.__doc__ = f"numpy.{np_fun.__name__}, elementwise."
    impl.float_fun = math_fun
    return impl


def _binary(np_fun, op=None):
    """NumPy's ufunc, with the Python operator for two Python floats."""
    if op is None:
        return np_fun

    def impl(x, y):
        if type(x) is float and type(y) is float:
            try:
                return op(x, y)
            except FLOAT_PATH_ERRORS:  # 1.0 / 0.0, 0.0 ** -1.0: NumPy's inf or nan, and its warning
                return np_fun(x, y).item()
        return np_fun(x, y)

    impl.__name__ = np_fun.__name__
    impl.__doc__ = f"numpy.{np_fun.__name__}, elementwise with broadcasting."
    impl.float_op = op
    return impl


def _unary_prim(impl, name):
    return unary_function(Primitive(impl, name=name), getattr(impl, "float_fun", None))


def _binary_prim(impl, name):
    prim = Primitive(impl, name=name, grad_post=unbroadcast, tangent_post=broadcast_tangent)
    return binary_function(prim, getattr(impl, "float_op", None))


def _broadcasting_prim(impl, name):
    return Primitive(impl, name=name, grad_post=unbroadcast, tangent_post=broadcast_tangent)


def _zeros(x):
    """Zero with ``x``'s shape and dtype: the derivative of a piecewise-constant function."""
    if type(x) is float:
        return 0.0
    return np.zeros(np.shape(x), dtype=np.result_type(x))


def _zero_rule(g, out, *args, **kwargs):
    return zeros_of(g)


# -- arithmetic ------------------------------------------------------------------------------

add = _binary_prim(_binary(np.add, operator.add), "add")
defvjp(add, lambda g, out, x, y: g, lambda g, out, x, y: g)
defjvp(add, lambda t, out, x, y: t, lambda t, out, x, y: t)
defvjp_float(add, lambda g, out, x, y: (g, g))

subtract = _binary_prim(_binary(np.subtract, operator.sub), "subtract")
defvjp(subtract, lambda g, out, x, y: g, lambda g, out, x, y: -g)
defjvp(subtract, lambda t, out, x, y: t, lambda t, out, x, y: -t)
defvjp_float(subtract, lambda g, out, x, y: (g, -g))

multiply = _binary_prim(_binary(np.multiply, operator.mul), "multiply")
defvjp(multiply, lambda g, out, x, y: g * y, lambda g, out, x, y: g * x)
defjvp(multiply, lambda t, out, x, y: t * y, lambda t, out, x, y: x * t)
defvjp_float(multiply, lambda g, out, x, y: (g * y, g * x))

true_divide = _binary_prim(_binary(np.true_divide, operator.truediv), "true_divide")
defvjp(true_divide, lambda g, out, x, y: g / y, lambda g, out, x, y: -g * out / y)
defjvp(true_divide, lambda t, out, x, y: t / y, lambda t, out, x, y: -t * out / y)
defvjp_float(true_divide, lambda g, out, x, y: (g / y, -g * out / y))
divide = true_divide

negative = _unary_prim(operator.neg, "negative")
defvjp(negative, lambda g, out, x: -g)
defjvp(negative, lambda t, out, x: -t)
defvjp_float(negative, lambda g, out, x: -g)

positive = _unary_prim(operator.pos, "positive")
defvjp(positive, lambda g, out, x: g)
defjvp(positive, lambda t, out, x: t)


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


def _pow_float_vjp(g, out, x, y):
    """Both contributions of x**y on Python floats; math raises where NumPy gives inf or nan
    (0 ** -1, a negative base's fractional power, the log of a negative base)."""
    dx = 0.0 if y == 0.0 else y * math.pow(x, y - 1.0)
    dy = 0.0 if x == 0.0 else math.log(x) * out
    return g * dx, g * dy


# math.pow, not Python's **: for a negative base and a fractional exponent ** returns a complex
# number, math.pow raises, and NumPy's nan (with its warning) is computed instead. math.pow is C's
# pow, as NumPy's loop over arrays; NumPy's float64 scalars take x ** 0.5 as sqrt(x), which differs
# at x = -inf (nan, not inf) and -0.0 (-0.0, not 0.0): there the float path gives the arrays' answer.
power = _binary_prim(_binary(np.power, math.pow), "power")
defvjp(power, lambda g, out, x, y: g * _pow_dx(x, y), lambda g, out, x, y: g * _pow_dy(out, x))
defjvp(power, lambda t, out, x, y: t * _pow_dx(x, y), lambda t, out, x, y: t * _pow_dy(out, x))
defvjp_float(power, _pow_float_vjp)


def masked(a, mask):
    """``a`` where ``mask``, exactly 0 elsewhere: ``np.where(mask, a, 0)``, computed as a product.

    On an irregular mask ``np.where`` is about ten times slower than a multiplication (it
    branches per element); the product is exact except that 0 * inf is nan, so when ``a`` holds
    inf or nan the result is recomputed with ``np.where``.
    """
    with np.errstate(invalid="ignore"):
        out = np.multiply(a, mask)
    if out.dtype.kind in "fc" and not np.isfinite(out).all():
        out = np.where(mask, a, np.zeros((), out.dtype))
    return out


def _tie_select_impl(g, x, y):
    """``g`` where x > y, ``g / 2`` where x == y, 0 elsewhere (in the broadcast shape)."""
    out = masked(g, x > y)
    ties = x == y
    if ties.any() if type(ties) is np.ndarray else ties:  # the method: np.any's wrapper costs more
        out = np.where(ties, 0.5 * np.asarray(g), out)
    return out


# The cotangent (or tangent) that max(x, y) passes to x: ties split it equally, as in HIPS autograd
# and JAX. Linear in g; the selection is piecewise constant in x and y, so they enter as constants.
tie_select = Primitive(_tie_select_impl, name="tie_select", grad_post=unbroadcast,
                       tangent_post=broadcast_tangent)
defvjp(tie_select, lambda gg, out, g, x, y: tie_select(gg, x, y))
defjvp(tie_select, lambda t, out, g, x, y: tie_select(t, x, y))


def _tie_share(x, y, g):
    return tie_select(g, unbox_all(x), unbox_all(y))


def _tie_select_into(g, x, y):
    """``tie_select(g, x, y)`` computed in ``g``'s memory (an in-place VJP rule: the backward pass
    owns ``g`` and uses it once); None, to decline, where g holds inf or nan (0 * inf)."""
    x, y = unbox_all(x), unbox_all(y)
    if not np.isfinite(g).all():
        return None
    keep = x > y
    ties = x == y  # a Python bool where x and y are floats (g is then a 0-d array)
    if ties.any() if type(ties) is np.ndarray else ties:
        keep = np.where(ties, 0.5, keep)
    np.multiply(g, keep, out=g)
    return g


maximum = _binary_prim(np.maximum, "maximum")
defvjp(maximum, lambda g, out, x, y: _tie_share(x, y, g), lambda g, out, x, y: _tie_share(y, x, g))
defjvp(maximum, lambda t, out, x, y: _tie_share(x, y, t), lambda t, out, x, y: _tie_share(y, x, t))
defvjp_inplace(maximum, lambda g, out, x, y: _tie_select_into(g, x, y),
               lambda g, out, x, y: _tie_select_into(g, y, x))

minimum = _binary_prim(np.minimum, "minimum")
defvjp(minimum, lambda g, out, x, y: _tie_share(y, x, g), lambda g, out, x, y: _tie_share(x, y, g))
defjvp(minimum, lambda t, out, x, y: _tie_share(y, x, t), lambda t, out, x, y: _tie_share(x, y, t))
defvjp_inplace(minimum, lambda g, out, x, y: _tie_select_into(g, y, x),
               lambda g, out, x, y: _tie_select_into(g, x, y))

arctan2 = _binary_prim(_binary(np.arctan2, math.atan2), "arctan2")
defvjp(arctan2,
       lambda g, out, y, x: g * x / (x * x + y * y),
       lambda g, out, y, x: -g * y / (x * x + y * y))
defjvp(arctan2,
       lambda t, out, y, x: t * x / (x * x + y * y),
       lambda t, out, y, x: -t * y / (x * x + y * y))

hypot = _binary_prim(_binary(np.hypot, math.hypot), "hypot")
defvjp(hypot, lambda g, out, x, y: g * x / out, lambda g, out, x, y: g * y / out)
defjvp(hypot, lambda t, out, x, y: t * x / out, lambda t, out, x, y: t * y / out)

# -- unary functions ---------------------------------------------------------------------------

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


absolute = _unary_prim(_unary(np.absolute, abs), "absolute")
defvjp(absolute, _abs_vjp)
defjvp(absolute, _abs_jvp)
abs = absolute  # noqa: A001 - NumPy's name, public in wengert.numpy

sign = _unary_prim(np.sign, "sign")
defvjp(sign, _zero_rule)
defjvp(sign, _zero_rule)

sqrt = _unary_prim(_unary(np.sqrt, math.sqrt), "sqrt")
defvjp(sqrt, lambda g, out, x: g * 0.5 / out)
defjvp(sqrt, lambda t, out, x: t * 0.5 / out)
defvjp_float(sqrt, lambda g, out, x: g * 0.5 / out)

cbrt = _unary_prim(np.cbrt, "cbrt")
defvjp(cbrt, lambda g, out, x: g / (3.0 * out * out))
defjvp(cbrt, lambda t, out, x: t / (3.0 * out * out))

exp = _unary_prim(_unary(np.exp, math.exp), "exp")
defvjp(exp, lambda g, out, x: g * out)
defjvp(exp, lambda t, out, x: t * out)
defvjp_float(exp, lambda g, out, x: g * out)

exp2 = _unary_prim(np.exp2, "exp2")
defvjp(exp2, lambda g, out, x: g * out * math.log(2.0))
defjvp(exp2, lambda t, out, x: t * out * math.log(2.0))

log = _unary_prim(_unary(np.log, math.log), "log")
defvjp(log, lambda g, out, x: g / x)
defjvp(log, lambda t, out, x: t / x)
defvjp_float(log, lambda g, out, x: g / x)

log2 = _unary_prim(_unary(np.log2, math.log2), "log2")
defvjp(log2, lambda g, out, x: g / (x * math.log(2.0)))
defjvp(log2, lambda t, out, x: t / (x * math.log(2.0)))

log10 = _unary_prim(_unary(np.log10, math.log10), "log10")
defvjp(log10, lambda g, out, x: g / (x * math.log(10.0)))
defjvp(log10, lambda t, out, x: t / (x * math.log(10.0)))

log1p = _unary_prim(_unary(np.log1p, math.log1p), "log1p")
defvjp(log1p, lambda g, out, x: g / (1.0 + x))
defjvp(log1p, lambda t, out, x: t / (1.0 + x))
defvjp_float(log1p, lambda g, out, x: g / (1.0 + x))

expm1 = _unary_prim(_unary(np.expm1, math.expm1), "expm1")
defvjp(expm1, lambda g, out, x: g * (out + 1.0))
defjvp(expm1, lambda t, out, x: t * (out + 1.0))
defvjp_float(expm1, lambda g, out, x: g * (out + 1.0))

sin = _unary_prim(_unary(np.sin, math.sin), "sin")
defvjp(sin, lambda g, out, x: g * cos(x))
defjvp(sin, lambda t, out, x: t * cos(x))
defvjp_float(sin, lambda g, out, x: g * math.cos(x))

cos = _unary_prim(_unary(np.cos, math.cos), "cos")
defvjp(cos, lambda g, out, x: -g * sin(x))
defjvp(cos, lambda t, out, x: -t * sin(x))
defvjp_float(cos, lambda g, out, x: -g * math.sin(x))

tan = _unary_prim(_unary(np.tan, math.tan), "tan")
defvjp(tan, lambda g, out, x: g * (1.0 + out * out))
defjvp(tan, lambda t, out, x: t * (1.0 + out * out))
defvjp_float(tan, lambda g, out, x: g * (1.0 + out * out))

arcsin = _unary_prim(_unary(np.arcsin, math.asin), "arcsin")
defvjp(arcsin, lambda g, out, x: g / sqrt(1.0 - x * x))
defjvp(arcsin, lambda t, out, x: t / sqrt(1.0 - x * x))

arccos = _unary_prim(_unary(np.arccos, math.acos), "arccos")
defvjp(arccos, lambda g, out, x: -g / sqrt(1.0 - x * x))
defjvp(arccos, lambda t, out, x: -t / sqrt(1.0 - x * x))

arctan = _unary_prim(_unary(np.arctan, math.atan), "arctan")
defvjp(arctan, lambda g, out, x: g / (1.0 + x * x))
defjvp(arctan, lambda t, out, x: t / (1.0 + x * x))
defvjp_float(arctan, lambda g, out, x: g / (1.0 + x * x))

sinh = _unary_prim(_unary(np.sinh, math.sinh), "sinh")
defvjp(sinh, lambda g, out, x: g * cosh(x))
defjvp(sinh, lambda t, out, x: t * cosh(x))
defvjp_float(sinh, lambda g, out, x: g * math.cosh(x))

cosh = _unary_prim(_unary(np.cosh, math.cosh), "cosh")
defvjp(cosh, lambda g, out, x: g * sinh(x))
defjvp(cosh, lambda t, out, x: t * sinh(x))
defvjp_float(cosh, lambda g, out, x: g * math.sinh(x))

tanh = _unary_prim(_unary(np.tanh, math.tanh), "tanh")
defvjp(tanh, lambda g, out, x: g * (1.0 - out * out))
defjvp(tanh, lambda t, out, x: t * (1.0 - out * out))
defvjp_float(tanh, lambda g, out, x: g * (1.0 - out * out))

arcsinh = _unary_prim(_unary(np.arcsinh, math.asinh), "arcsinh")
defvjp(arcsinh, lambda g, out, x: g / sqrt(x * x + 1.0))
defjvp(arcsinh, lambda t, out, x: t / sqrt(x * x + 1.0))

def _arccosh_d(x):
    """1 / sqrt(x^2 - 1); for complex x as 1 / (sqrt(x - 1) sqrt(x + 1)), the principal branch's."""
    if type(x) is not float and complex_parts.is_complex(x):
        return 1.0 / (sqrt(x - 1.0) * sqrt(x + 1.0))
    return 1.0 / sqrt(x * x - 1.0)


arccosh = _unary_prim(_unary(np.arccosh, math.acosh), "arccosh")
defvjp(arccosh, lambda g, out, x: g * _arccosh_d(x))
defjvp(arccosh, lambda t, out, x: t * _arccosh_d(x))

arctanh = _unary_prim(_unary(np.arctanh, math.atanh), "arctanh")
defvjp(arctanh, lambda g, out, x: g / (1.0 - x * x))
defjvp(arctanh, lambda t, out, x: t / (1.0 - x * x))

square = _unary_prim(_unary(np.square, lambda x: x * x), "square")
defvjp(square, lambda g, out, x: g * 2.0 * x)
defjvp(square, lambda t, out, x: t * 2.0 * x)
defvjp_float(square, lambda g, out, x: g * 2.0 * x)

reciprocal = _unary_prim(_unary(np.reciprocal, lambda x: 1.0 / x), "reciprocal")
defvjp(reciprocal, lambda g, out, x: -g * out * out)
defjvp(reciprocal, lambda t, out, x: -t * out * out)
defvjp_float(reciprocal, lambda g, out, x: -g * out * out)

# Piecewise-constant functions: derivative zero almost everywhere (as in NumPy-based AD tools).
floor = _unary_prim(np.floor, "floor")
defvjp(floor, _zero_rule)
defjvp(floor, _zero_rule)

ceil = _unary_prim(np.ceil, "ceil")
defvjp(ceil, _zero_rule)
defjvp(ceil, _zero_rule)

rint = _unary_prim(np.rint, "rint")
defvjp(rint, _zero_rule)
defjvp(rint, _zero_rule)

trunc = _unary_prim(np.trunc, "trunc")
defvjp(trunc, _zero_rule)
defjvp(trunc, _zero_rule)

# -- selection ---------------------------------------------------------------------------------


def _where_impl(condition, x, y):
    """numpy.where (with a faster path for the rules' ``where(c, g, 0.0)``)."""
    if type(y) in (float, int) and y == 0 and isinstance(x, np.ndarray) and x.dtype.kind in "fc":
        return masked(x, condition)
    if type(x) in (float, int) and x == 0 and isinstance(y, np.ndarray) and y.dtype.kind in "fc":
        return masked(y, np.logical_not(condition))
    return np.where(condition, x, y)


where = _broadcasting_prim(_where_impl, "where")
defvjp(where, None, lambda g, out, c, x, y: where(c, g, 0.0), lambda g, out, c, x, y: where(c, 0.0, g))
defjvp(where, None, lambda t, out, c, x, y: where(c, t, 0.0), lambda t, out, c, x, y: where(c, 0.0, t))


def _clip_impl(a, a_min, a_max):
    return np.clip(a, a_min, a_max)


def _inside(a, a_min, a_max):
    """Where ``a`` passes through clip unchanged (bounds included, as PyTorch's clamp)."""
    if a_min is None:
        return a <= a_max
    if a_max is None:
        return a >= a_min
    return (a >= a_min) & (a <= a_max)


clip = _broadcasting_prim(_clip_impl, "clip")
defvjp(clip,
       lambda g, out, a, lo, hi: where(_inside(a, lo, hi), g, 0.0),
       lambda g, out, a, lo, hi: where(a < lo, g, 0.0),
       lambda g, out, a, lo, hi: where(a > hi, g, 0.0))
defjvp(clip,
       lambda t, out, a, lo, hi: where(_inside(a, lo, hi), t, 0.0),
       lambda t, out, a, lo, hi: where(a < lo, t, 0.0),
       lambda t, out, a, lo, hi: where(a > hi, t, 0.0))


def zeros_of(x):
    """Zeros shaped like ``x`` (traced or not), as a constant: no derivative flows through it."""
    return _zeros(unbox_all(x))
