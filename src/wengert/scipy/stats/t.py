"""wengert.scipy.stats.t: the functions of scipy.stats.t, as a module as well
(``import wengert.scipy.stats.t``, HIPS autograd's form; ``from wengert.scipy.stats import
t`` gives the same module)."""

from wengert.scipy.stats._distributions import export
from wengert.scipy.stats._distributions import t as _distribution

__all__ = export(_distribution, globals(), ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"])
