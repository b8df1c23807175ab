"""wengert.scipy.stats.norm: the functions of scipy.stats.norm, as a module as well
(``import wengert.scipy.stats.norm``, HIPS autograd's form; ``from wengert.scipy.stats import
norm`` gives the same module)."""

from wengert.scipy.stats._distributions import norm as _distribution

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

cdf = _distribution.cdf
isf = _distribution.isf
logcdf = _distribution.logcdf
logpdf = _distribution.logpdf
logsf = _distribution.logsf
pdf = _distribution.pdf
ppf = _distribution.ppf
sf = _distribution.sf
