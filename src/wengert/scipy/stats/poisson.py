"""wengert.scipy.stats.poisson: the functions of scipy.stats.poisson, as a module as well
(``import wengert.scipy.stats.poisson``, HIPS autograd's form; ``from wengert.scipy.stats import
poisson`` gives the same module)."""

from wengert.scipy.stats._distributions import export
from wengert.scipy.stats._distributions import poisson as _distribution

__all__ = export(_distribution, globals(), ["cdf", "logcdf", "logpmf", "logsf", "pmf", "sf"])
