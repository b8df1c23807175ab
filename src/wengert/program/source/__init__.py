"""The source transformer: a Python function's *source* (``ast``) to a structured program, with
``if``/``for``/``while`` kept as control flow, and its derivatives (``wg.source_grad``,
``wg.source_jvp``, ``Program.from_source``; docs/source.md). The tracing compiler (the rest of
``wengert.program``) records one run of the function instead.

Its modules, bottom to top (each imports only those before it, and the tracing compiler's modules it builds
on: ``ir``, ``rendering``, ``codegen``, ``tracing``, ``captures``, ``adjoint``): ``control`` (the
``If``/``Loop``/``Push``/``Pop`` nodes around the IR's statements), ``codegen`` (their Python source),
``inplace`` (loop-carried arrays updated in place), ``checkpoint`` (checkpointed loops), ``recompute`` (what a
reverse loop reads again or stores), ``factor`` (a reverse loop's adjoints factored by their cotangents),
``values`` and ``builder`` (what the interpreter records on), ``conversions`` (``np.asarray``,
``np.array`` of traced values), ``parse`` (reading the function), ``nested``
(nested defs, lambdas, comprehensions), ``scope`` (the names an expression sees), ``loops`` and
``interpreter`` (the body on symbols), ``adjoint`` (reverse and forward mode), ``program``
(``SourceProgram``, ``from_source``), ``api`` (``source_grad``, ``source_jvp``, cached per signature).
This ``__init__`` imports nothing.
"""
