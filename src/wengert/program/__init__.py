"""Program transformation: the SSA Wengert-list IR, lazy tracing, adjoint generation, ``compile``.

Two subsystems share the IR. The *tracing compiler*: ``Program.from_trace(fun, *args)`` records what
``fun`` does as a straight-line program; its ``grad``/``vjp``/``jvp`` are new programs traced from
the same rules the tape uses; passes (``wengert.program.passes``, run in order by
``wengert.program.pipeline``) simplify them; ``compile_function`` (``wg.compile``) caches the
generated Python per input signature. The *source transformer* (``wengert.program.source``):
``Program.from_source`` and ``wg.source_grad`` read a function's source, keeping its loops and
branches.

The modules build on each other in this order, each importing only those before it: ``ir`` (``Statement``,
``Variable``, their SSA notation), ``rendering``, ``liveness``, ``passes``, ``algebra``, ``band_kernel`` (the
assembling statement's Numba version), ``band_values``, ``bands`` (batched derivative programs on the
diagonals of their basis arrays), ``diagonal_products`` (``eye @ A`` as a scaling of ``A``), ``pipeline``,
``codegen``, ``dot``, ``tracing``, ``captures`` (what a function reads besides its arguments), ``replay``
(a rule's statements recorded once, replayed), ``adjoint``, ``compiled_args`` (static arguments, traced
ints, pickling); then the source transformer
(``wengert.program.source``, its modules listed in its ``__init__``): ``source.control`` (``If``/``Loop``
nodes), ``source.codegen``, ``source.inplace``, ``source.checkpoint``, ``source.recompute``,
``source.factor`` (reverse loops' adjoints factored by their cotangents), ``source.values``,
``source.builder``, ``source.conversions`` (``np.asarray``/``np.array`` of traced values), ``source.parse``,
``source.nested``, ``source.scope``,
``source.loops``, ``source.interpreter``, ``source.adjoint``, ``source.program`` (``SourceProgram``,
``from_source``); ``program`` (``Program``, whose methods call ``tracing``, ``source.program``, ``adjoint``,
``codegen`` and ``dot`` directly); ``native_helpers``, ``native``, ``native_types`` (Numba's result
types against NumPy's), ``native_build`` (the Numba backend), ``native_loop``
(``wg.iterate``'s loop statement on Numba);
``checkpoint_steps`` (``wg.iterate``'s step as a program); ``loop_node`` (``wg.iterate`` and
``wg.checkpoint`` in a traced program: one statement); ``compiled_source`` (``wg.compile``'s programs built
from source where the trace refuses), ``compiled``; ``source.api`` (``wg.source_grad``, ``wg.source_jvp``).
This ``__init__`` is the top; importing it installs ``checkpoint_steps``'s tracer in ``wg.iterate`` (which
lives in the layer below).
"""

from wengert.program import checkpoint_steps, loop_node  # noqa: F401  (install wg.iterate's traced step and loop)
from wengert.program.ir import Statement, Variable
from wengert.program.program import Program
from wengert.program.tracing import Symbol, TracingError

__all__ = ["Program", "Statement", "Variable", "Symbol", "TracingError"]
