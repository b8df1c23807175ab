"""wengert.scipy.stats.t: the functions of scipy.stats.t, as a module as well
(``import wengert.scipy.stats.t``, HIPS autograd's form; ``from wengert.scipy.stats import
t`` gives the same module)."""

from wengert.scipy.stats._distributions import t as _distribution

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]

cdf = _distribution.cdf
logcdf = _distribution.logcdf
logpdf = _distribution.logpdf
logsf = _distribution.logsf
pdf = _distribution.pdf
sf = _distribution.sf
