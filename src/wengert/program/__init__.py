"""Program transformation: the SSA Wengert-list IR, lazy tracing, adjoint generation, ``compile``.

``Program.from_trace(fun, *args)`` records what ``fun`` does as a straight-line program; its
``grad``/``vjp``/``jvp`` are new programs traced from the same rules the tape uses; passes
(``wengert.program.passes``, run in order by ``wengert.program.pipeline``) simplify them;
``compile_function`` (``wg.compile``) caches the generated Python per input signature.

The modules build on each other in this order, each importing only those before it: ``ir``
(``Program``, ``Statement``, ``Variable``), ``rendering``, ``liveness``, ``passes``, ``algebra``,
``pipeline``, ``codegen``, ``dot``, ``tracing``, ``captures`` (what a function reads besides its
arguments), ``adjoint``, ``checkpoint_steps`` (``wg.iterate``'s step as a program),
``compiled_args`` (static arguments, traced ints, pickling); then the source front end:
``control`` (``If``/``Loop`` nodes), ``control_codegen``; ``native_helpers``, ``native``,
``native_build`` (the Numba backend); ``source_inplace``, ``source_checkpoint``, ``source_values``,
``source_builder``, ``source_parse``, ``source_nested`` (nested functions, comprehensions),
``source_scope``, ``source_loops``, ``source_interpreter``, ``source_adjoint``; ``compiled_source``
(``wg.compile``'s programs built from source where the trace refuses), ``compiled``; ``source``
(``SourceProgram``, ``from_source``), ``source_api``. This ``__init__`` is the top: it hands
``Program`` the functions its methods call (printing, source, tracing, derivatives), which live above the IR.
"""

from wengert.program import adjoint, checkpoint_steps, codegen, dot, source, tracing  # noqa: F401
from wengert.program.ir import Program, Statement, Variable, provide
from wengert.program.tracing import Symbol, TracingError

__all__ = ["Program", "Statement", "Variable", "Symbol", "TracingError"]

provide(pretty=codegen.pretty, pretty_statement=codegen.pretty_statement, to_source=codegen.to_source,
        compile_program=codegen.compile_program, to_dot=dot.to_dot, trace_program=tracing.trace_program,
        vjp_program=adjoint.vjp_program, grad_program=adjoint.grad_program, jvp_program=adjoint.jvp_program,
        from_source=source.from_source)
