"""wengert.scipy.stats.norm: the functions of scipy.stats.norm, as a module as well
(``import wengert.scipy.stats.norm``, HIPS autograd's form; ``from wengert.scipy.stats import
norm`` gives the same module)."""

from wengert.scipy.stats._distributions import export
from wengert.scipy.stats._distributions import norm as _distribution

__all__ = export(_distribution, globals(), ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"])
