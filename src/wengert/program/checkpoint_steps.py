"""A checkpointed loop's step as generated Python (``wengert.api.checkpointing.fast``): the step is
traced once to a program, optimized as ``wg.compile`` optimizes, and its VJP program derived from it;
both are handed to the loop as plain functions of flat inputs. Imported by ``wengert.program``'s
``__init__``, it installs itself there (``fast.provide``): ``fast`` is in the layer below, which
does not import this one. The other checkpointing code: see ``wengert.api.checkpointing``."""

from wengert.api.checkpointing import fast
from wengert.program.pipeline import lower, optimize
from wengert.program.program import Program

__all__ = ["trace_step"]


def trace_step(run, examples):
    """``(forward, vjp)`` of ``run(*examples)``: ``forward(*inputs)`` its outputs (one value or a
    tuple), ``vjp(*inputs, *cotangents)`` the outputs followed by one cotangent per input. Each
    function's ``program`` is its Program (``native_loop`` compiles a loop's step with Numba from it)."""
    program = Program.from_trace(run, *examples)
    built = optimize(program), lower(program.vjp())
    del program
    for p in built:  # as wg.compile's cache: the inputs' examples kept, not every intermediate's
        p.examples = {v: p.examples[v] for v in p.inputs if v in p.examples}
    forward, vjp = built[0].function, built[1].function
    forward.program, vjp.program = built
    return forward, vjp


fast.provide(trace_step)
