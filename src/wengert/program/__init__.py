"""Program transformation: the SSA Wengert-list IR, lazy tracing, adjoint generation, ``compile``.

``Program.from_trace(fun, *args)`` records what ``fun`` does as a straight-line program; its
``grad``/``vjp``/``jvp`` are new programs traced from the same rules the tape uses; passes
(``wengert.program.passes``) simplify them; ``compile_function`` (``wg.compile``) caches the
generated Python per input signature.
"""

from wengert.program.ir import Program, Statement, Variable
from wengert.program.tracing import Symbol, TracingError

__all__ = ["Program", "Statement", "Variable", "Symbol", "TracingError"]
