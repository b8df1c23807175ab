"""wengert.scipy.stats.poisson: the functions of scipy.stats.poisson, as a module as well
(``import wengert.scipy.stats.poisson``, HIPS autograd's form; ``from wengert.scipy.stats import
poisson`` gives the same module)."""

from wengert.scipy.stats._distributions import poisson as _distribution

__all__ = ["cdf", "logcdf", "logpmf", "logsf", "pmf", "sf"]

cdf = _distribution.cdf
logcdf = _distribution.logcdf
logpmf = _distribution.logpmf
logsf = _distribution.logsf
pmf = _distribution.pmf
sf = _distribution.sf
