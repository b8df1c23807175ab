"""SciPy's special functions (``scipy.special`` ufuncs): implementation, VJP and JVP side by side.

Every rule is written with these primitives and ``elementwise`` ones, so second derivatives work
(the derivative of ``erf`` is an ``exp``, of ``digamma`` a ``polygamma``, of a Bessel function a
combination of Bessel functions of neighbouring orders). Integer orders (``polygamma``'s ``n``,
``jn``'s ``n``) and the shape parameter of the incomplete gamma and beta functions are not
differentiable: asking for those derivatives raises :class:`NoRuleError` naming the argument, as
HIPS autograd does. Needs SciPy (the rule table skips this family when it is not installed).
"""

import math

import scipy.special as sp

from wengert.core.extend import defjvp, defvjp, facts
from wengert.core.primitive import Primitive, unary_function
from wengert.rules.broadcasting import broadcast_tangent, dtype_of, unbroadcast
from wengert.rules.elementwise import exp, log, log1p
from wengert.rules.shape import astype

__all__ = [
    "erf", "erfc", "erfinv", "erfcinv", "gamma", "gammaln", "digamma", "psi", "polygamma",
    "gammainc", "gammaincc", "beta", "betaln", "betainc", "expit", "logit", "xlogy", "xlog1py",
    "i0", "i1", "iv", "j0", "j1", "jn", "jv", "y0", "y1", "yn", "rgamma", "ndtr", "log_ndtr",
    "ndtri", "stdtr", "UFUNCS",
]

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _fit_tangent(t, out):
    """``tangent_post``: the tangent has its value's shape and float dtype (a rule through a
    function SciPy computes only in double, as ``polygamma`` in digamma's, stays single)."""
    t = broadcast_tangent(t, out)
    want = dtype_of(out)
    if want.kind == "f" and type(t) is not float and dtype_of(t) != want:
        t = astype(t, want)
    return t


def _unary(ufunc, name=None):
    """A one-argument primitive named after the scipy.special ufunc (derivatives in its dtype)."""
    prim = Primitive(ufunc, name=name or ufunc.__name__, grad_post=unbroadcast, tangent_post=_fit_tangent)
    return unary_function(facts(prim, broadcasts=True, fresh=True))


def _broadcasting(ufunc, name=None):
    """A primitive of several broadcasting arguments (cotangents summed back to each shape)."""
    prim = Primitive(ufunc, name=name or ufunc.__name__, grad_post=unbroadcast, tangent_post=_fit_tangent)
    return facts(prim, broadcasts=True, fresh=True)


def _both(prim, *rules, saves):
    """Give ``prim`` the same rule for its VJP and its JVP (rules that scale g or t elementwise), and
    declare what the VJP rules read (``saves``: the tape keeps only that, ``wengert.engines.saving``)."""
    defvjp(prim, *rules)
    defjvp(prim, *rules)
    facts(prim, saves=saves)


# -- error function ------------------------------------------------------------------------------

erf = _unary(sp.erf)
_both(erf, lambda g, out, x: g * (2.0 / _SQRT_PI) * exp(-x * x), saves=(0,))

erfc = _unary(sp.erfc)
_both(erfc, lambda g, out, x: g * (-2.0 / _SQRT_PI) * exp(-x * x), saves=(0,))

erfinv = _unary(sp.erfinv)
_both(erfinv, lambda g, out, x: g * (_SQRT_PI / 2.0) * exp(out * out), saves=("out",))

erfcinv = _unary(sp.erfcinv)
_both(erfcinv, lambda g, out, x: g * (-_SQRT_PI / 2.0) * exp(out * out), saves=("out",))

ndtr = _unary(sp.ndtr)
_both(ndtr, lambda g, out, x: g * exp(-0.5 * x * x) / _SQRT_2PI, saves=(0,))

log_ndtr = _unary(sp.log_ndtr)
# d log Phi(x) = phi(x) / Phi(x), written as exp(log phi - log Phi): stable far in the left tail.
_both(log_ndtr, lambda g, out, x: g * exp(-0.5 * x * x - math.log(_SQRT_2PI) - out), saves=("out", 0))

ndtri = _unary(sp.ndtri)
_both(ndtri, lambda g, out, x: g * _SQRT_2PI * exp(0.5 * out * out), saves=("out",))

# -- gamma family ----------------------------------------------------------------------------------

polygamma = _broadcasting(sp.polygamma, "polygamma")
_both(polygamma, None, lambda g, out, n, x: g * polygamma(n + 1, x), saves=(0, 1))

digamma = _unary(sp.digamma, "digamma")
_both(digamma, lambda g, out, x: g * polygamma(1, x), saves=(0,))
psi = digamma

gamma = _unary(sp.gamma)
_both(gamma, lambda g, out, x: g * out * digamma(x), saves=("out", 0))

gammaln = _unary(sp.gammaln)
_both(gammaln, lambda g, out, x: g * digamma(x), saves=(0,))

rgamma = _unary(sp.rgamma)
_both(rgamma, lambda g, out, x: -g * out * digamma(x), saves=("out", 0))


def _gamma_density(a, x):
    """x**(a-1) e**-x / Gamma(a): the derivative of the regularised lower incomplete gamma in x."""
    return exp(xlogy(a - 1.0, x) - x - gammaln(a))  # xlogy: a == 1 at x == 0 gives e^0, not nan


gammainc = _broadcasting(sp.gammainc)
_both(gammainc, None, lambda g, out, a, x: g * _gamma_density(a, x), saves=(0, 1))

gammaincc = _broadcasting(sp.gammaincc)
_both(gammaincc, None, lambda g, out, a, x: -g * _gamma_density(a, x), saves=(0, 1))

beta = _broadcasting(sp.beta)
_both(beta,
      lambda g, out, a, b: g * out * (digamma(a) - digamma(a + b)),
      lambda g, out, a, b: g * out * (digamma(b) - digamma(a + b)),
      saves=("out", 0, 1))

betaln = _broadcasting(sp.betaln)
_both(betaln,
      lambda g, out, a, b: g * (digamma(a) - digamma(a + b)),
      lambda g, out, a, b: g * (digamma(b) - digamma(a + b)),
      saves=(0, 1))

betainc = _broadcasting(sp.betainc)
_both(betainc, None, None,
      lambda g, out, a, b, x: g * exp(xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - betaln(a, b)),
      saves=(0, 1, 2))

# Student's t distribution function: differentiable in t only (not in the degrees of freedom).
stdtr = _broadcasting(sp.stdtr)
_both(stdtr, None,
      lambda g, out, df, t: g * exp(gammaln(0.5 * (df + 1.0)) - gammaln(0.5 * df)
                                    - 0.5 * log(df * math.pi)
                                    - 0.5 * (df + 1.0) * log1p(t * t / df)),
      saves=(0, 1))

# -- logistic --------------------------------------------------------------------------------------

expit = _unary(sp.expit)
_both(expit, lambda g, out, x: g * out * (1.0 - out), saves=("out",))

logit = _unary(sp.logit)
_both(logit, lambda g, out, x: g / (x * (1.0 - x)), saves=(0,))

# -- x log y ---------------------------------------------------------------------------------------

xlogy = _broadcasting(sp.xlogy)
# d/dx is log(y) everywhere (also at x == 0, where the value is defined as 0); d/dy is x / y.
_both(xlogy, lambda g, out, x, y: g * log(y), lambda g, out, x, y: g * x / y,
      saves={0: (1,), 1: (0, 1)})

xlog1py = _broadcasting(sp.xlog1py)
_both(xlog1py, lambda g, out, x, y: g * log1p(y), lambda g, out, x, y: g * x / (1.0 + y),
      saves={0: (1,), 1: (0, 1)})

# -- Bessel functions ------------------------------------------------------------------------------
# d/dx I_v = (I_{v-1} + I_{v+1}) / 2;  d/dx J_v = (J_{v-1} - J_{v+1}) / 2, and Y_v likewise.
# The order v is not differentiable.

iv = _broadcasting(sp.iv)
_both(iv, None, lambda g, out, v, x: g * 0.5 * (iv(v - 1.0, x) + iv(v + 1.0, x)), saves=(0, 1))

jv = _broadcasting(sp.jv)
_both(jv, None, lambda g, out, v, x: g * 0.5 * (jv(v - 1.0, x) - jv(v + 1.0, x)), saves=(0, 1))
jn = jv  # scipy.special.jn is jv

yn = _broadcasting(sp.yn)
_both(yn, None, lambda g, out, n, x: g * 0.5 * (yn(n - 1, x) - yn(n + 1, x)), saves=(0, 1))

i0 = _unary(sp.i0)
_both(i0, lambda g, out, x: g * i1(x), saves=(0,))

i1 = _unary(sp.i1)
_both(i1, lambda g, out, x: g * 0.5 * (i0(x) + iv(2.0, x)), saves=(0,))

j0 = _unary(sp.j0)
_both(j0, lambda g, out, x: -g * j1(x), saves=(0,))

j1 = _unary(sp.j1)
_both(j1, lambda g, out, x: g * 0.5 * (j0(x) - jv(2.0, x)), saves=(0,))

y0 = _unary(sp.y0)
_both(y0, lambda g, out, x: -g * y1(x), saves=(0,))

y1 = _unary(sp.y1)
_both(y1, lambda g, out, x: g * 0.5 * (y0(x) - yn(2, x)), saves=(0,))

UFUNCS = {
    sp.erf: erf, sp.erfc: erfc, sp.erfinv: erfinv, sp.erfcinv: erfcinv, sp.ndtr: ndtr,
    sp.log_ndtr: log_ndtr, sp.ndtri: ndtri, sp.digamma: digamma,
    sp.gamma: gamma, sp.gammaln: gammaln, sp.rgamma: rgamma, sp.gammainc: gammainc,
    sp.gammaincc: gammaincc, sp.beta: beta, sp.betaln: betaln, sp.betainc: betainc,
    sp.stdtr: stdtr, sp.expit: expit, sp.logit: logit, sp.xlogy: xlogy, sp.xlog1py: xlog1py,
    sp.iv: iv, sp.jv: jv, sp.yn: yn, sp.i0: i0, sp.i1: i1, sp.j0: j0, sp.j1: j1, sp.y0: y0,
    sp.y1: y1,
}
"""scipy.special ufunc -> its wengert primitive: what ``scipy.special.erf(traced)`` dispatches to."""
