"""wengert.scipy.stats.gamma: the functions of scipy.stats.gamma, as a module as well
(``import wengert.scipy.stats.gamma``, HIPS autograd's form; ``from wengert.scipy.stats import
gamma`` gives the same module)."""

from wengert.scipy.stats._distributions import export
from wengert.scipy.stats._distributions import gamma as _distribution

__all__ = export(_distribution, globals(), ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"])
