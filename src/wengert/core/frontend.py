"""The NumPy front end, as the layers below it see it.

Traced values answer NumPy's protocols (``np.sin(x)``, ``np.sum(x)``) and ndarray's methods
(``x.sum(axis=0)``, ``x.T``) with ``wengert.numpy``'s functions. That front end sits above the engines
that define traced values, so it is not imported by them: when ``wengert.numpy`` has defined its
names it installs itself here (``import wengert`` imports it), and the engines call through this
module -- one attribute lookup per call.
"""

numpy = None
"""The ``wengert.numpy`` module, once imported."""

protocols = None
"""The module answering ``__array_ufunc__``/``__array_function__``/``__array__``
(``wengert.numpy._dispatch``), once imported."""


def install(numpy_module, protocols_module):
    """Called once by ``wengert.numpy`` when it has defined its names."""
    global numpy, protocols
    numpy, protocols = numpy_module, protocols_module
