"""The distributions of ``wengert.scipy.stats`` (see the package's docstring for what each offers and
which arguments are not differentiable), and :func:`export`, which makes each one a submodule too."""

import math

import numpy as np

import wengert.numpy as wnp
from wengert.core.trace import contains_box, is_symbolic, unbox_all
from wengert.rules import broadcasting, indexing, scipy_linalg
from wengert.rules import special as sp
from wengert.rules.elementwise import exp, log, log1p, where

__all__ = ["norm", "t", "gamma", "beta", "chi2", "poisson", "dirichlet", "multivariate_normal", "export"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _value(x):
    """The values of ``x``, for support masks; a program tracer's symbol stays one (the masks are
    then recorded statements)."""
    if is_symbolic(x):
        return unbox_all(x)
    v = np.asarray(unbox_all(x))
    return v if v.dtype.kind == "f" else v.astype(float)


def _standardize(x, loc, scale):
    return (x - loc) / scale


class _Distribution:
    """A namespace of functions, like a frozen-free scipy.stats distribution object."""

    name = ""

    def __repr__(self):
        return f"<wengert.scipy.stats.{self.name}>"

    def pdf(self, *args, **kwargs):
        """The density: exp(logpdf)."""
        return exp(self.logpdf(*args, **kwargs))

    def logcdf(self, *args, **kwargs):
        """log(cdf), as log1p(-sf) where the cdf is close to 1 (accurate in both tails)."""
        return _log_of_complement(self.cdf(*args, **kwargs), self.sf(*args, **kwargs))

    def logsf(self, *args, **kwargs):
        """log(sf), the log survival function, as log1p(-cdf) where the sf is close to 1."""
        return _log_of_complement(self.sf(*args, **kwargs), self.cdf(*args, **kwargs))


def _log_of_complement(p, q):
    """log(p) for p = 1 - q: log1p(-q) where q < 1/2, log(p) elsewhere. Each branch sees only
    inputs it is used at, so the other's cotangent (0) never meets an infinite derivative."""
    small = _value(q) < 0.5
    with np.errstate(divide="ignore"):
        return where(small, log1p(-where(small, q, 0.0)), log(where(small, 1.0, p)))


class _Norm(_Distribution):
    name = "norm"

    def logpdf(self, x, loc=0.0, scale=1.0):
        """scipy.stats.norm.logpdf."""
        z = _standardize(x, loc, scale)
        return -0.5 * z * z - _LOG_SQRT_2PI - log(scale)

    def cdf(self, x, loc=0.0, scale=1.0):
        """scipy.stats.norm.cdf (through special.ndtr)."""
        return sp.ndtr(_standardize(x, loc, scale))

    def logcdf(self, x, loc=0.0, scale=1.0):
        """scipy.stats.norm.logcdf (through special.log_ndtr: accurate far in the left tail)."""
        return sp.log_ndtr(_standardize(x, loc, scale))

    def sf(self, x, loc=0.0, scale=1.0):
        """scipy.stats.norm.sf: 1 - cdf, computed as ndtr(-z)."""
        return sp.ndtr(-_standardize(x, loc, scale))

    def logsf(self, x, loc=0.0, scale=1.0):
        """scipy.stats.norm.logsf: log_ndtr(-z)."""
        return sp.log_ndtr(-_standardize(x, loc, scale))

    def ppf(self, q, loc=0.0, scale=1.0):
        """scipy.stats.norm.ppf: loc + scale * ndtri(q)."""
        return loc + scale * sp.ndtri(q)

    def isf(self, q, loc=0.0, scale=1.0):
        """scipy.stats.norm.isf: loc - scale * ndtri(q)."""
        return loc - scale * sp.ndtri(q)


class _T(_Distribution):
    name = "t"

    def logpdf(self, x, df, loc=0.0, scale=1.0):
        """scipy.stats.t.logpdf."""
        z = _standardize(x, loc, scale)
        half = 0.5 * (df + 1.0)
        return (sp.gammaln(half) - sp.gammaln(0.5 * df) - 0.5 * log(df * math.pi)
                - half * log1p(z * z / df) - log(scale))

    def cdf(self, x, df, loc=0.0, scale=1.0):
        """scipy.stats.t.cdf (special.stdtr; not differentiable in df)."""
        return sp.stdtr(df, _standardize(x, loc, scale))

    def sf(self, x, df, loc=0.0, scale=1.0):
        """scipy.stats.t.sf (not differentiable in df)."""
        return sp.stdtr(df, -_standardize(x, loc, scale))


def _support(condition, z, inside):
    """``z`` where ``condition``, ``inside`` (a harmless point) elsewhere, as a constant mask."""
    return where(condition, z, inside)


class _Gamma(_Distribution):
    name = "gamma"

    def logpdf(self, x, a, loc=0.0, scale=1.0):
        """scipy.stats.gamma.logpdf (-inf for x < loc)."""
        z = _standardize(x, loc, scale)
        inside = _value(z) >= 0
        zs = _support(inside, z, 1.0)
        val = sp.xlogy(a - 1.0, zs) - zs - sp.gammaln(a) - log(scale)
        return where(inside, val, -np.inf)

    def cdf(self, x, a, loc=0.0, scale=1.0):
        """scipy.stats.gamma.cdf (special.gammainc; not differentiable in a)."""
        z = _standardize(x, loc, scale)
        inside = _value(z) > 0
        return where(inside, sp.gammainc(a, _support(inside, z, 1.0)), 0.0)

    def sf(self, x, a, loc=0.0, scale=1.0):
        """scipy.stats.gamma.sf (special.gammaincc; not differentiable in a)."""
        z = _standardize(x, loc, scale)
        inside = _value(z) > 0
        return where(inside, sp.gammaincc(a, _support(inside, z, 1.0)), 1.0)


class _Chi2(_Distribution):
    name = "chi2"

    def logpdf(self, x, df, loc=0.0, scale=1.0):
        """scipy.stats.chi2.logpdf: the gamma density with a = df / 2 and twice the scale."""
        return gamma.logpdf(x, 0.5 * df, loc, 2.0 * scale)

    def cdf(self, x, df, loc=0.0, scale=1.0):
        """scipy.stats.chi2.cdf (not differentiable in df)."""
        return gamma.cdf(x, 0.5 * df, loc, 2.0 * scale)

    def sf(self, x, df, loc=0.0, scale=1.0):
        """scipy.stats.chi2.sf (not differentiable in df)."""
        return gamma.sf(x, 0.5 * df, loc, 2.0 * scale)


class _Beta(_Distribution):
    name = "beta"

    def logpdf(self, x, a, b, loc=0.0, scale=1.0):
        """scipy.stats.beta.logpdf (-inf outside [loc, loc + scale])."""
        z = _standardize(x, loc, scale)
        zv = _value(z)
        inside = (zv >= 0) & (zv <= 1)
        zs = _support(inside, z, 0.5)
        val = sp.xlogy(a - 1.0, zs) + sp.xlog1py(b - 1.0, -zs) - sp.betaln(a, b) - log(scale)
        return where(inside, val, -np.inf)

    def cdf(self, x, a, b, loc=0.0, scale=1.0):
        """scipy.stats.beta.cdf (special.betainc; not differentiable in a and b)."""
        z = _standardize(x, loc, scale)
        zv = _value(z)
        inside = (zv > 0) & (zv < 1)
        return where(inside, sp.betainc(a, b, _support(inside, z, 0.5)), _outside(zv, 1.0, 0.0))

    def sf(self, x, a, b, loc=0.0, scale=1.0):
        """scipy.stats.beta.sf: I(1 - z; b, a) (not differentiable in a and b)."""
        z = _standardize(x, loc, scale)
        zv = _value(z)
        inside = (zv > 0) & (zv < 1)
        return where(inside, sp.betainc(b, a, 1.0 - _support(inside, z, 0.5)), _outside(zv, 0.0, 1.0))


def _outside(zv, above, below):
    """``above`` where ``zv >= 1``, else ``below``, in ``zv``'s float dtype (float32 stays single)."""
    if is_symbolic(zv):
        return np.where(zv >= 1, above, below)
    return np.where(zv >= 1, above, below).astype(zv.dtype)


def _discrete(fname, **values):
    """The discrete arguments' values; a traced one is an error (it has no derivative)."""
    for name, v in values.items():
        if contains_box(v):
            raise TypeError(f"wengert.scipy.stats.{fname}: '{name}' is discrete and has no derivative; "
                            f"pass it as a plain array (wg.stop_gradient(k)) and differentiate with respect "
                            f"to mu")
    return [_value(v) for v in values.values()]


class _Poisson(_Distribution):
    name = "poisson"

    def logpmf(self, k, mu, loc=0):
        """scipy.stats.poisson.logpmf: k log(mu) - log(k!) - mu (-inf off the integers >= 0)."""
        k, loc = _discrete("poisson.logpmf", k=k, loc=loc)
        k = k - loc
        inside = (k >= 0) & (k == np.floor(k))
        ks = np.where(inside, k, 0.0)
        val = sp.xlogy(ks, mu) - sp.gammaln(ks + 1.0) - mu
        return where(inside, val, -np.inf)

    def pmf(self, k, mu, loc=0):
        """scipy.stats.poisson.pmf."""
        return exp(self.logpmf(k, mu, loc))

    def cdf(self, k, mu, loc=0):
        """scipy.stats.poisson.cdf: Q(floor(k) + 1, mu), differentiable in mu."""
        k, loc = _discrete("poisson.cdf", k=k, loc=loc)
        k = np.floor(k - loc)
        inside = k >= 0
        return where(inside, sp.gammaincc(np.where(inside, k, 0.0) + 1.0, mu), 0.0)

    def sf(self, k, mu, loc=0):
        """scipy.stats.poisson.sf: P(floor(k) + 1, mu), differentiable in mu."""
        k, loc = _discrete("poisson.sf", k=k, loc=loc)
        k = np.floor(k - loc)
        inside = k >= 0
        return where(inside, sp.gammainc(np.where(inside, k, 0.0) + 1.0, mu), 1.0)


class _Dirichlet(_Distribution):
    name = "dirichlet"

    def logpdf(self, x, alpha):
        """scipy.stats.dirichlet.logpdf: components along x's first axis (K or K - 1 of them)."""
        k = broadcasting.shape_of(alpha)
        if len(k) != 1:
            raise ValueError("Parameter vector 'a' must be one dimensional, but a.shape = %s." % (k,))
        xs = broadcasting.shape_of(x)
        if xs[0] == k[0] - 1:
            last = 1.0 - wnp.sum(x, axis=0, keepdims=True)
            x = wnp.concatenate([x, last], axis=0)
            xs = broadcasting.shape_of(x)
        elif xs[0] != k[0]:
            raise ValueError(f"Vector 'x' must have either the same number of entries as, or one "
                             f"entry fewer than, parameter vector 'a', but alpha.shape = {k} "
                             f"and x.shape = {xs}.")
        xv = _value(x)
        if is_symbolic(xv):  # a traced program cannot check its data
            pass
        elif np.any(xv < 0) or np.any(xv > 1):
            raise ValueError("Each entry in 'x' must be greater than or equal to zero and "
                             "less than or equal to one.")
        # SciPy's tolerance, widened to single precision's rounding (SciPy sums in double)
        tol = 10e-10 if is_symbolic(xv) or xv.dtype.itemsize >= 8 else 10 * k[0] * np.finfo(xv.dtype).eps
        if not is_symbolic(xv) and np.any(np.abs(xv.sum(axis=0) - 1.0) > tol):
            raise ValueError("The input vector 'x' must lie within the normal simplex. but "
                             f"np.sum(x, 0) = {xv.sum(axis=0)}.")
        a = wnp.reshape(alpha, k + (1,) * (len(xs) - 1))
        log_norm = wnp.sum(sp.gammaln(alpha)) - sp.gammaln(wnp.sum(alpha))
        return wnp.sum(sp.xlogy(a - 1.0, x), axis=0) - log_norm


class _MultivariateNormal(_Distribution):
    name = "multivariate_normal"

    def logpdf(self, x, mean=None, cov=1, allow_singular=False):
        """scipy.stats.multivariate_normal.logpdf (x's last axis the components; cov positive
        definite: scalar, vector of variances, or matrix; its symmetric part is used)."""
        if allow_singular:
            raise NotImplementedError("wengert.scipy.stats.multivariate_normal: allow_singular=True "
                                      "is not supported (the density uses a Cholesky factor)")
        ms = broadcasting.shape_of(mean) if mean is not None else None
        cs = broadcasting.shape_of(cov)
        dim = ms[0] if ms else (cs[0] if cs else 1)
        floats = [broadcasting.dtype_of(v) for v in (x, mean, cov) if v is not None]
        real = np.result_type(*[d for d in floats if d.kind == "f"] or [np.float64])  # float32 stays
        if mean is None:
            mean = np.zeros(dim, dtype=real)
        elif not ms:
            mean = wnp.reshape(mean, (1,))
        if len(cs) == 0:
            cov = cov * np.eye(dim, dtype=real)
        elif len(cs) == 1:
            cov = wnp.reshape(cov, (dim, 1)) * np.eye(dim, dtype=real)
        xs = broadcasting.shape_of(x)
        if len(xs) == 0:
            x = wnp.reshape(x, (1,))
        elif len(xs) == 1 and dim == 1:
            x = wnp.reshape(x, (xs[0], 1))
        batch = broadcasting.shape_of(x)[:-1]
        points = wnp.reshape(x - mean, (-1, dim))
        chol = scipy_linalg.cholesky_lower(cov)
        z = scipy_linalg.solve_triangular(chol, wnp.transpose(points), lower=True)
        maha = wnp.sum(z * z, axis=0)
        diag = indexing.getitem(chol, (np.arange(dim), np.arange(dim)))
        logdet = 2.0 * wnp.sum(log(diag))
        out = -0.5 * (dim * math.log(2.0 * math.pi) + logdet + maha)
        out = wnp.reshape(out, batch)
        return out if len(batch) != 1 or batch[0] != 1 else wnp.reshape(out, ())

    def cdf(self, *args, **kwargs):
        """Not provided: SciPy's multivariate normal cdf is a numerical integral with no rule."""
        raise NotImplementedError(
            "wengert.scipy.stats.multivariate_normal.cdf is not available (SciPy computes it by "
            "numerical integration, which has no derivative rule); use scipy.stats on plain arrays")

    logcdf = cdf

    def entropy(self, mean=None, cov=1, allow_singular=False):
        """scipy.stats.multivariate_normal.entropy: (d log(2 pi e) + log det cov) / 2, differentiable
        in ``cov`` (``mean`` does not change it)."""
        if allow_singular:
            raise NotImplementedError("wengert.scipy.stats.multivariate_normal.entropy: "
                                      "allow_singular=True is not supported (it uses a Cholesky factor)")
        cs = broadcasting.shape_of(cov)
        ms = broadcasting.shape_of(mean) if mean is not None else None
        dim = cs[0] if cs else (ms[0] if ms else 1)
        if len(cs) == 0:
            logdet = dim * log(cov)
        elif len(cs) == 1:
            logdet = wnp.sum(log(cov))
        else:
            chol = scipy_linalg.cholesky_lower(cov)
            logdet = 2.0 * wnp.sum(log(indexing.getitem(chol, (np.arange(dim), np.arange(dim)))))
        return 0.5 * (dim * (1.0 + math.log(2.0 * math.pi)) + logdet)


norm = _Norm()
t = _T()
gamma = _Gamma()
beta = _Beta()
chi2 = _Chi2()
poisson = _Poisson()
dirichlet = _Dirichlet()
multivariate_normal = _MultivariateNormal()


def export(distribution, namespace, names):
    """Make a distribution's submodule (``wengert.scipy.stats.beta``, HIPS autograd's form): its
    functions ``names`` (``pdf``, ``logpdf``, ...) bound in the module's ``namespace``; returns the
    names, the module's ``__all__``."""
    namespace.update({n: getattr(distribution, n) for n in names})
    return list(names)
