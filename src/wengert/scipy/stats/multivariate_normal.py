"""wengert.scipy.stats.multivariate_normal: the functions of scipy.stats.multivariate_normal, as a
module as well (``import wengert.scipy.stats.multivariate_normal as mvn``, HIPS autograd's form;
``from wengert.scipy.stats import multivariate_normal`` gives the same module)."""

from wengert.scipy.stats._distributions import export
from wengert.scipy.stats._distributions import multivariate_normal as _distribution

__all__ = export(_distribution, globals(), ["cdf", "entropy", "logcdf", "logpdf", "pdf"])
