"""Checkpointing: every code path that trades recomputation for memory, listed here.

Public: ``wg.checkpoint`` and ``wg.iterate`` (on the tape, under every transform), ``wg.checkpointed``
and ``source_grad(f, checkpoint=...)`` (in programs built from source), ``wengert.checkpointing``
(the schedules as data, and ``Stats``). docs/checkpointing.md is the user's page.

- ``schedules`` -- the schedules as data (CTZ, Griewank's binomial), ``Stats``, the policy names.
  Pure Python, no engine: both paths below follow them, and ``wengert/checkpointing.py``
  re-exports them.
- On the tape: ``transforms`` (``wg.checkpoint``, ``wg.iterate``), the engine ``recompute`` (one
  recomputing node per call; ``packing``, ``sharing`` and ``captured`` serve it), and ``fast``
  (a loop's step run as a traced program and its VJP program).
- The traced step itself: ``wengert.program.checkpoint_steps`` (the program layer, above this one)
  hands its tracer to ``fast.provide`` when ``wengert.program`` is imported, as engines register
  themselves with the core.
- In programs built from source: ``wengert.program.source.checkpoint`` (``wg.checkpointed``, the
  snapshots in the forward loop and the reverse sweep over a schedule, as generated code).
"""
