"""wengert.scipy.stats.chi2: the functions of scipy.stats.chi2, as a module as well
(``import wengert.scipy.stats.chi2``, HIPS autograd's form; ``from wengert.scipy.stats import
chi2`` gives the same module)."""

from wengert.scipy.stats._distributions import chi2 as _distribution
from wengert.scipy.stats._distributions import export

__all__ = export(_distribution, globals(), ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"])
