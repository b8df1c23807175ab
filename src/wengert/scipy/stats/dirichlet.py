"""wengert.scipy.stats.dirichlet: the functions of scipy.stats.dirichlet, as a module as well
(``import wengert.scipy.stats.dirichlet``, HIPS autograd's form; ``from wengert.scipy.stats import
dirichlet`` gives the same module)."""

from wengert.scipy.stats._distributions import dirichlet as _distribution
from wengert.scipy.stats._distributions import export

__all__ = export(_distribution, globals(), ["logpdf", "pdf"])
