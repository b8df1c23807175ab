"""Checkpointed loops at the speed of their step: ``wg.iterate``'s step traced ONCE to a program (its
forward function and its VJP function, generated Python), which every later evaluation of the loop
runs instead of the step under a substitution trace or a fresh tape.

Contract. The program is traced from step 0, after that step ran as usual (discovering the values
the step closes over: the chain's slots, which become the program's inputs after the state). It is
used only when it cannot change a result: every state leaf is a float (an int leaf would become a
constant), the step drew no random number (a program would repeat the draw), tracing succeeds
(Python control flow on a traced value, a function without a rule, ... make the loop run as before,
silently: the step is then traced never again for this loop), and the program gives step 0's values
again (to rounding). Its evaluations are counted by ``Stats`` as the step's; the step's Python runs
one more time (the trace), as under ``jax.jit``. A sweep whose values are traced by an outer
transform (``grad`` of ``grad``, ``jvp``) runs the step as before, so that the outer trace records it.

The tracing itself lives with the program transformation (``wengert.program.checkpoint_steps``),
which hands it here (:func:`provide`): this layer does not import the program layer.
"""

import numpy as np

from wengert.api.checkpointing import schedules as sched
from wengert.api.randomness import check_same
from wengert.core.trace import BOX_TYPES

__all__ = ["provide", "StepProgram", "build", "reverse_sweep", "Pullback", "MIN_STEPS", "MAX_STATE_SIZE"]

_TRACER = []
"""The one function tracing a step: ``trace(run, examples) -> (forward, vjp)`` (see :func:`provide`)."""

_LOOP = []
"""The function making a loop one statement of a program being traced (``wengert.program.loop_node``):
``loop(step, x0, n, policy, snapshots, name) -> the final state``, or None where it does not."""

_CHECKPOINT = []
"""Likewise for ``wg.checkpoint``: ``checkpoint(fun, args, kwargs, name) -> its result``, or None."""

MIN_STEPS = 32
"""Loops shorter than this run their step as before: tracing costs a few milliseconds."""

MAX_STATE_SIZE = 4096
"""States of more elements run their step as before: there the step's own work outweighs the
interpreter's, and tracing would hold a step's intermediates twice over (its own and its adjoint's
examples), which the memory bound of a checkpointed loop does not allow for."""


def provide(tracer=None, loop=None, checkpoint=None):
    """Install ``tracer(run, examples) -> (forward, vjp)``: ``forward(*examples)`` returns ``run``'s
    outputs (one value, or a tuple of them), ``vjp(*examples, *cotangents)`` the outputs then one
    cotangent per input (called by ``wengert.program.checkpoint_steps`` at import); ``loop`` and
    ``checkpoint`` (see :data:`_LOOP`, :data:`_CHECKPOINT`; by ``wengert.program.loop_node``)."""
    if tracer is not None:
        _TRACER[:] = [tracer]
    if loop is not None:
        _LOOP[:] = [loop]
    if checkpoint is not None:
        _CHECKPOINT[:] = [checkpoint]


class StepProgram:
    """A step's forward and VJP functions: inputs the state's leaves then ``slots`` (the float slots
    the step reads, in the order it first reads them)."""

    __slots__ = ("forward", "vjp", "slots", "n_x", "floats")

    def __init__(self, forward, vjp, slots, in_plain):
        self.forward = forward
        self.vjp = vjp
        self.slots = slots
        self.n_x = len(in_plain)
        self.floats = tuple(type(v) is float for v in in_plain)  # leaves given back as Python floats

    def slot_values(self, leaves, source):
        """The slots' values from ``source``, or None where a leaf or a slot is traced by an outer
        transform (which must record the step: the program's plain Python would not)."""
        for v in leaves:
            if type(v) in BOX_TYPES:
                return None
        values = [source(s) for s in self.slots]
        for v in values:
            if type(v) in BOX_TYPES:
                return None
        return values

    def advance(self, leaves, k, slot_values):
        """The state ``k`` steps after ``leaves`` (a list)."""
        sched._note_evaluations(k)
        forward = self.forward
        if self.n_x == 1:
            x = leaves[0]
            if slot_values:
                for _ in range(k):
                    x = forward(x, *slot_values)
            else:
                for _ in range(k):
                    x = forward(x)
            return [x]
        for _ in range(k):
            leaves = forward(*leaves, *slot_values)
        return list(leaves)

    def pullback(self, leaves, slot_values, cts, note=True):
        """One step reversed from the state ``leaves``: ``(input cotangents, {slot: cotangent})`` for
        the output cotangents ``cts`` (None: zero); ``note``: counted by ``Stats`` (not when the step's
        value was, by :meth:`advance`)."""
        if note:
            sched._note_evaluations(1)
        cts = [_zero_like(x) if c is None else c for c, x in zip(cts, leaves)]
        got = self.vjp(*leaves, *slot_values, *cts)
        n = self.n_x
        ct_in = [_as_float(c) if f else c for c, f in zip(got[n:2 * n], self.floats)]
        return ct_in, dict(zip(self.slots, got[2 * n:]))

    def finish(self, leaves):
        """The leaves that were Python floats as Python floats again (the program may return NumPy
        scalars)."""
        return [_as_float(v) if f else v for v, f in zip(leaves, self.floats)]


def _as_float(v):
    return v if type(v) is float else float(v)


def _zero_like(x):
    return 0.0 if type(x) is float else np.zeros(np.shape(x), np.result_type(x))


def build(chain, x0, x1, slot_float, slot_plain, force=False):
    """The step of ``chain`` (a ``recompute.Chain`` of ``wg.iterate``, step 0 evaluated from ``x0`` to
    ``x1``) as a :class:`StepProgram`, or None where the loop must run its step as before (module
    docs). ``force``: whatever the loop's length and the state's size (a loop in a traced program)."""
    if not _TRACER or chain.between is not None or chain.seq_count != 1:
        return None
    if not force and (chain.n < MIN_STEPS or sum(np.size(v) for v in x0) > MAX_STATE_SIZE):
        return None
    if not all(type(v) is float or (isinstance(v, np.ndarray) and v.dtype.kind == "f") for v in x0):
        return None
    sources = chain.sources
    if sources is not None and sources.changed(chain.rng0):
        return None  # step 0 drew random numbers: each recomputation must draw them again
    slots = tuple(s for s in chain.seq_first if slot_float[s])
    values = dict(zip(slots, (slot_plain[s] for s in slots)))
    n_x = len(x0)

    def run(*args):
        given = dict(zip(slots, args[n_x:]))
        out, _ = chain.evaluate(0, list(args[:n_x]), lambda s: given[s] if s in given else slot_plain[s],
                                note=False)
        return out[0] if len(out) == 1 else tuple(out)

    before = sources.capture() if sources is not None else None
    examples = list(x0) + [values[s] for s in slots]
    try:
        forward, vjp = _TRACER[0](run, examples)
        again = forward(*examples)
    except Exception:  # noqa: BLE001 - whatever tracing refuses, the loop runs its step as before
        return None
    finally:
        if sources is not None and sources.changed(before):
            sources.restore(before)
            forward = None
    if forward is None:
        return None
    again = [again] if n_x == 1 else list(again)
    if any(np.shape(a) != np.shape(b) or np.result_type(a) != np.result_type(b) for a, b in zip(again, x1)):
        return None
    try:
        check_same(again, list(x1), lambda: "")
    except RuntimeError:
        return None
    chain.seq_count = chain.n  # every step reads the slots step 0 read: the program assumes it
    return StepProgram(forward, vjp, slots, x0)


class Pullback:
    """Step n-1's ``back`` after a forward sweep by the program: its evaluation is counted already."""

    __slots__ = ("program", "leaves", "slot_values")

    def __init__(self, program, leaves, slot_values):
        self.program, self.leaves, self.slot_values = program, leaves, slot_values

    def __call__(self, cts):
        return self.program.pullback(self.leaves, self.slot_values, cts, note=False)


def reverse_sweep(chain, slot_values, slots, held, ct):
    """``chain``'s reverse sweep (``Chain._reverse_steps``) by its step's program: from ``held``,
    ``[x_(n-1), its Pullback or None]`` (emptied), and the cotangents ``ct`` of x_n; returns x_0's
    cotangents and ``{slot: cotangent}``. Snapshots are taken and dropped as the schedule says."""
    program = chain.fast
    current, back = held
    held.clear()
    n = program.n_x
    vjp = program.vjp
    floats = program.floats
    ct = [_zero_like(x) if c is None else c for c, x in zip(ct, chain.in_plain)]
    acc = None
    counted = 0 if back is None else -1  # step n-1's evaluation was counted by the forward sweep
    del back
    restore = chain.sources is not None
    forward, single = program.forward, n == 1
    try:
        for kind, position, steps, slot in chain.schedule.reverse_tuples():
            if kind == "advance":
                counted += steps
                if single:  # the usual loop: one leaf, no list per step
                    x = current[0]
                    for _ in range(steps):
                        x = forward(x, *slot_values)
                    current = [x]
                else:
                    for _ in range(steps):
                        current = forward(*current, *slot_values)
            elif kind == "snapshot":
                chain.snap(slots, slot, position, current)
            elif kind == "restore":
                current = slots[slot][1]
                if restore:
                    chain._restore_random(slots[slot][2])
            else:
                counted += 1
                got = vjp(*current, *slot_values, *ct)
                current = None
                ct = got[n:2 * n]
                if acc is None:
                    acc = list(got[2 * n:])
                elif len(acc) == 1:
                    acc[0] = acc[0] + got[2 * n]
                else:
                    acc = [a + c for a, c in zip(acc, got[2 * n:])]
                if slots and slots[-1][0] >= position:
                    chain.drop(slots, position)
    finally:
        sched._note_evaluations(counted)
    ct = [_as_float(c) if f else c for c, f in zip(ct, floats)]
    return ct, dict(zip(program.slots, acc or ()))
