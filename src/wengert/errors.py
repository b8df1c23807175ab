"""Every exception and warning that wengert raises at its users, by a public name.

These are the very classes the library raises (not copies), so ``except wengert.errors.ExitError``
-- or ``except wg.ExitError``: the common ones are also on ``wengert`` itself -- catches what a
transform raises, and ``warnings.filterwarnings("ignore", category=wg.NoBatchingRuleWarning)`` filters
what ``wg.vmap`` warns. Each message names the function, the shape, or your file and line, and says
what to write instead; ``docs/errors.md`` lists what each means.

- :class:`ExitError` (a ``TypeError``): a traced value was about to become a plain Python number or
  NumPy array (``float(x)``, ``np.asarray(x)``, ``buf[i] = x``), which would drop its derivative.
- :class:`UnsupportedNumpyFunction` (a ``TypeError``): a NumPy (or SciPy) function without a derivative
  rule was called on a traced value.
- :class:`TracingError` (a ``TypeError``): a construct a symbolic trace cannot record (``wg.compile``:
  data-dependent control flow, a conversion, an in-place write it cannot follow).
- :class:`TransformError` (a ``TypeError``): Python outside the subset that the source transformation
  (``wg.compile``, ``wg.source_grad``) supports.
- :class:`NoRuleError` (a ``NotImplementedError``): a derivative was asked of a primitive argument that
  has no rule for that mode.
- :class:`DataDependentShapeError` (an ``IndexError``): a result whose shape depends on the data
  (``x[mask]``, ``np.nonzero``) was asked for inside ``wg.vmap``.
- :class:`UndefinedDerivativeError` (a ``ValueError``) and :class:`SingularDerivativeError` (a
  ``numpy.linalg.LinAlgError``): a linear-algebra derivative that does not exist at this matrix.
- :class:`UnsavedValueError` (a ``RuntimeError``): a user rule read a value its ``saves=`` declaration
  says it does not read.
- :class:`GradientCheckError` (an ``AssertionError``): ``wengert.testing.check_grads`` found a derivative
  that disagrees with finite differences.
- :class:`NoBatchingRuleWarning` (a ``UserWarning``): a primitive without a batching rule ran once per
  example under ``wg.vmap`` (correct, but slower).
- :class:`NativeFallbackWarning` (a ``UserWarning``): a program asked to run on Numba (``backend="numba"``)
  runs as Python, because of the primitive the message names (the same values, slower).
"""

from wengert.core.errors import TracingError
from wengert.core.exits import ExitError
from wengert.core.primitive import NoRuleError
from wengert.engines.batching import NoBatchingRuleWarning
from wengert.engines.saving import UnsavedValueError
from wengert.numpy._classification import UnsupportedNumpyFunction
from wengert.program.native import NativeFallbackWarning
from wengert.program.source.control import TransformError
from wengert.rules.batched_indexing import DataDependentShapeError
from wengert.rules.matrix_helpers import SingularDerivativeError, UndefinedDerivativeError
from wengert.testing import GradientCheckError

__all__ = [
    "ExitError", "UnsupportedNumpyFunction", "TracingError", "TransformError", "NoRuleError",
    "DataDependentShapeError", "UndefinedDerivativeError", "SingularDerivativeError", "UnsavedValueError",
    "GradientCheckError", "NoBatchingRuleWarning", "NativeFallbackWarning",
]
