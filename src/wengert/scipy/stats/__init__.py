"""wengert.scipy.stats: densities and distribution functions of scipy.stats, differentiable.

``norm``, ``t``, ``gamma``, ``beta``, ``chi2``, ``poisson``, ``dirichlet`` and
``multivariate_normal`` offer ``pdf``/``logpdf`` (``pmf``/``logpmf`` for ``poisson``) and, but for
the last two, ``cdf``/``logcdf``/``sf``/``logsf`` (``norm`` also ``ppf``/``isf``,
``multivariate_normal`` ``entropy``), with SciPy's signatures, e.g. ``norm.logpdf(x, loc=0,
scale=1)``. Each is a submodule too, so ``import wengert.scipy.stats.multivariate_normal as mvn``
works as in HIPS autograd. Everything is composed from ``wengert.scipy.special`` primitives, so
every continuous argument is differentiable to any order, with these exceptions (asking raises
``NoRuleError`` naming the argument):

- the cdf/logcdf/sf/logsf of ``t`` in ``df``, of ``gamma`` and ``chi2`` in ``a``/``df``, of ``beta`` in
  ``a`` and ``b`` (derivatives of incomplete gamma/beta functions in their shape parameters);
- ``poisson``'s ``k`` is discrete (its cdf is differentiable in ``mu``);
- ``multivariate_normal`` has no ``cdf`` here (SciPy's is a numerical integral).

Outside a distribution's support the log-density is ``-inf`` (density 0) with a zero gradient.
"""

from wengert.scipy.stats import beta, chi2, dirichlet, gamma, multivariate_normal, norm, poisson, t

__all__ = ["norm", "t", "gamma", "beta", "chi2", "poisson", "dirichlet", "multivariate_normal"]
