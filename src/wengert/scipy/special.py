"""wengert.scipy.special: scipy.special's functions with derivatives (``import wengert.scipy.special``).

Most are primitives of ``wengert.rules.special``; ``logsumexp``, ``softmax``, ``log_softmax`` and
``multigammaln`` are composed from primitives. Derivatives with respect to integer orders
(``polygamma``'s ``n``, ``jn``/``yn``'s ``n``), Bessel orders ``v`` and the shape parameters of
``gammainc``/``gammaincc``/``betainc`` are not defined: asking for them raises ``NoRuleError``
naming the argument (as in HIPS autograd). On a traced value, ``scipy.special.erf(x)`` itself
dispatches here too (through ``__array_ufunc__``); a scipy.special ufunc without a rule raises
``UnsupportedNumpyFunction`` naming it.
"""

import math

import numpy as np

import wengert.numpy as wnp
from wengert.core.trace import is_symbolic, unbox_all
from wengert.rules.broadcasting import dtype_of, shape_of
from wengert.rules.elementwise import absolute, exp, log
from wengert.rules.special import (
    beta,
    betainc,
    betaln,
    digamma,
    erf,
    erfc,
    erfcinv,
    erfinv,
    expit,
    gamma,
    gammainc,
    gammaincc,
    gammaln,
    i0,
    i1,
    iv,
    j0,
    j1,
    jn,
    jv,
    log_ndtr,
    logit,
    ndtr,
    ndtri,
    polygamma,
    psi,
    rgamma,
    stdtr,
    xlog1py,
    xlogy,
    y0,
    y1,
    yn,
)
from wengert.rules.special_scaled import gammasgn, ive

__all__ = [
    "erf", "erfc", "erfinv", "erfcinv", "gamma", "gammaln", "digamma", "psi", "polygamma",
    "gammainc", "gammaincc", "beta", "betaln", "betainc", "expit", "logit", "logsumexp", "softmax",
    "log_softmax", "xlogy", "xlog1py", "i0", "i1", "iv", "j0", "j1", "jn", "jv", "y0", "y1", "yn",
    "rgamma", "multigammaln", "ndtr", "log_ndtr", "ndtri", "stdtr", "ive", "gammasgn",
]


def _reduced_shape(shape, axis, keepdims):
    return np.sum(np.zeros(shape, dtype=bool), axis=axis, keepdims=keepdims).shape


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """scipy.special.logsumexp: log(sum(b * exp(a))) over ``axis``, computed stably.

    The maximum is subtracted as a constant (it cancels in the derivative), so the gradient is
    the softmax of ``a`` (times ``b``), as in SciPy's and JAX's conventions. With
    ``return_sign=True`` it returns ``(log|s|, sign(s))``; the sign carries no derivative.
    """
    if b is not None:
        full = np.broadcast_shapes(shape_of(a), shape_of(b))
        a, b = wnp.broadcast_to(a, full), wnp.broadcast_to(b, full)
    if isinstance(axis, list):
        axis = tuple(axis)
    av = unbox_all(a)
    if is_symbolic(av):  # traced: the shift is computed by the program (its derivative cancels exactly)
        shift = wnp.max(av, axis=axis, keepdims=True) if np.size(av) else np.zeros((1,) * np.ndim(av))
        shift = wnp.where(wnp.isfinite(shift), shift, 0.0)
    else:
        av = np.asarray(av)
        av = av if av.dtype.kind == "f" else av.astype(float)  # float32 stays float32
        shift = np.max(av, axis=axis, keepdims=True) if av.size else np.zeros((1,) * av.ndim)
        shift = np.where(np.isfinite(shift), shift, 0.0)
    terms = exp(a - shift)
    if b is not None:
        terms = terms * b
    s = wnp.sum(terms, axis=axis, keepdims=True)
    if return_sign:
        sgn = np.sign(unbox_all(s))
        s = absolute(s)
    with np.errstate(divide="ignore"):  # log(0) = -inf, as in SciPy
        out = log(s) + shift
    target = _reduced_shape(np.shape(av), axis, keepdims)
    if shape_of(out) != target:
        out = wnp.reshape(out, target)
    if return_sign:
        return out, np.reshape(sgn, target)
    return out


def softmax(x, axis=None):
    """scipy.special.softmax: exp(x - logsumexp(x, axis)), along ``axis`` (all axes if None)."""
    return exp(log_softmax(x, axis=axis))


def log_softmax(x, axis=None):
    """scipy.special.log_softmax: x - logsumexp(x, axis, keepdims=True)."""
    return x - logsumexp(x, axis=axis, keepdims=True)


def multigammaln(a, d):
    """scipy.special.multigammaln: log of the multivariate gamma function of dimension ``d``.

    Composed as d(d-1)/4 log(pi) + sum_j gammaln(a - j/2), j = 0..d-1; differentiable in ``a``.
    Raises SciPy's ValueError when some ``a <= (d-1)/2``.
    """
    d = int(d)
    if not is_symbolic(a) and np.any(np.asarray(unbox_all(a)) <= 0.5 * (d - 1)):  # traced: no check
        raise ValueError(f"condition a ({float(np.min(unbox_all(a))):f}) > 0.5 * (d-1) "
                         f"({0.5 * (d - 1):f}) not met")
    real = dtype_of(a) if dtype_of(a).kind == "f" else np.dtype(float)
    shifted = wnp.expand_dims(a, -1) - 0.5 * np.arange(d, dtype=real)
    return d * (d - 1) * 0.25 * math.log(math.pi) + wnp.sum(gammaln(shifted), axis=-1)
