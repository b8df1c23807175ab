"""wengert.scipy.stats.beta: the functions of scipy.stats.beta, as a module as well
(``import wengert.scipy.stats.beta``, HIPS autograd's form; ``from wengert.scipy.stats import
beta`` gives the same module)."""

from wengert.scipy.stats._distributions import beta as _distribution
from wengert.scipy.stats._distributions import export

__all__ = export(_distribution, globals(), ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"])
