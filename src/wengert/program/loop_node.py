"""``wg.iterate`` met by the program tracer (``wg.compile``, ``Program.from_trace``): ONE statement for
the whole loop, whatever its number of steps, instead of the loop unrolled into the program.

Contract. Where a program is being traced and the loop's state or the values its step closes over
are symbols of that program, the step is traced once, to a forward program and its VJP program
(``checkpoint_steps``, as ``wg.iterate`` itself does at run time: ``api/checkpointing/fast.py``), and
the loop becomes the statement ``iterate_<step>(x, *params)``: inputs the state's leaves then the
float values the step reads besides its state (``params``, in the order it first reads them),
output the final state (several leaves packed into one vector and cut apart by statements after
it). Its implementation runs the step's program n times; its VJP rule records one statement
``iterate_<step>_vjp(x_bar, x_n, x, *params)`` (all the inputs' cotangents, packed) that runs the
checkpointed reverse sweep: ``checkpoint="all"`` keeps every state, ``"binomial"`` and ``"ctz"``
follow their schedules (``wengert.checkpointing``), keeping that many states and recomputing the
rest. The program's size and its compilation time do not depend on n; neither statement's
example is computed by running the loop while tracing (the first step's state stands in: examples
only give shapes and dtypes). Generated source calls both through their implementations, supplied
by wengert (named in the module's head); the Numba backend calls their Numba versions instead
(``native_loop``: the step's programs and the schedule compiled; likewise ``wg.checkpoint``'s), or
runs the program as Python with a ``NativeFallbackWarning`` saying why.

``wg.checkpoint(fun)(*args)`` likewise becomes ``checkpoint_<fun>(*args, *params)``, running ``fun``'s
program, and ``checkpoint_<fun>_vjp(...)``, running its VJP program (which recomputes ``fun``'s
values from the inputs instead of reading the forward pass's).

Where this cannot be done -- an int or complex leaf, a step drawing random numbers, a step that
cannot be traced (Python control flow on a traced value), a value closed over that is traced by
another differentiation or is an integer symbol, ``until=`` -- the loop is traced as before,
step by step. Second derivatives of the statement inside a program (``wg.compile(wg.hessian(f))``)
and forward mode (``Program.jvp``) are refused with an error naming the loop.
"""

import re

import numpy as np

from wengert.api.checkpointing import fast
from wengert.api.checkpointing import schedules as sched
from wengert.api.checkpointing.packing import _like, _pack
from wengert.api.checkpointing.recompute import Chain
from wengert.api.randomness import sources_of
from wengert.api.tree import tree_flatten, tree_unflatten
from wengert.core.extend import defjvp_argnum, defvjp_argnum
from wengert.core.primitive import Primitive
from wengert.core.trace import BOX_TYPES
from wengert.engines.reverse import is_inexact
from wengert.program.native_loop import checkpoint_kernel, loop_kernel
from wengert.program.tracing import TRACING, Symbol, TracingError
from wengert.rules import shape as shape_ops

__all__ = ["loop_statement", "checkpoint_statement"]


def _example(box):
    return box.example if type(box) is Symbol else box


def _float_leaf(v):
    return type(v) is float or (isinstance(v, np.ndarray) and v.dtype.kind == "f")


def loop_statement(step, x0, n, policy, snapshots, name):
    """``wg.iterate(step, x0, n, checkpoint=policy)`` as one statement of the program being traced:
    the final state, or None where the loop must be traced as before (module docs)."""
    if not TRACING[0] or n < 1:
        return None
    leaves, treedef = tree_flatten(x0)
    if any(type(v) in BOX_TYPES and type(v) is not Symbol for v in leaves):
        return None
    examples = [_example(v) for v in leaves]
    if not examples or not all(_float_leaf(v) for v in examples):
        return None
    sources = sources_of(step, (), None, f"wg.iterate({name})")
    before = sources.capture()
    chain = Chain(step, name, "iterate", examples, treedef, sources=sources)
    chain.n = n

    def slot_example(s):
        return _example(chain.slot_boxes[s])

    try:
        x1, out_def = chain.evaluate(0, list(chain.in_plain), slot_example, note=False)
        chain.check_state(0, x1, out_def)
        boxes = chain.slot_boxes
        if any(type(b) is not Symbol or not is_inexact(b.example) for b in boxes):
            return None  # traced by another differentiation, or an int symbol the program would freeze
        if not boxes and not any(type(v) is Symbol for v in leaves):
            return None  # nothing traced: the loop computes a constant, as before
        chain.slot_plain = [_example(b) for b in boxes]
        chain.slot_float = [True] * len(boxes)
        program = fast.build(chain, examples, x1, chain.slot_float, chain.slot_plain, force=True)
    finally:
        sources.restore(before)
    if program is None:
        return None
    loop = _Loop(program, n, policy, snapshots, name, examples)
    args = list(leaves) + [boxes[s] for s in program.slots]
    loop.param_like = tuple(_like(_example(b)) for b in args[len(leaves):])
    loop.stand_in = _pack(program.finish(list(x1)))
    try:
        packed = loop.primitive(*args)
    finally:
        loop.stand_in = None
    return tree_unflatten(treedef, _cut(packed, loop.like))


def _cut(packed, like):
    """``packed`` cut into values shaped as ``like`` (the packing of ``packing._pack``)."""
    if len(like) == 1:
        return [packed]
    parts, start = [], 0
    for v in like:
        size = int(np.prod(np.shape(v)))
        if type(v) is float:
            part = packed[start]
        else:
            part = shape_ops.reshape(packed[start:start + size], np.shape(v))
        dtype = np.result_type(v)
        parts.append(part if np.result_type(_example(part)) == dtype else part.astype(dtype))
        start += size
    return parts


def _part(packed, k, like):
    """Part ``k`` of ``packed``, a vector of the values shaped as ``like`` one after another."""
    if len(like) == 1:
        return packed
    start = sum(int(np.prod(np.shape(v))) for v in like[:k])
    if type(like[k]) is float:  # a scalar again, not a 0-d array
        part = packed[start]
        return part if type(part) in BOX_TYPES else float(part)
    size = int(np.prod(np.shape(like[k])))
    return shape_ops.reshape(packed[start:start + size], np.shape(like[k]))


class _Node:
    """A statement standing for a whole computation (``kind`` ``"iterate"`` or ``"checkpoint"``): its
    primitive, whose implementation is ``forward``, and its reverse sweep's, ``reverse``."""

    __slots__ = ("kind", "name", "like", "in_like", "stand_in", "primitive", "reverse_primitive",
                 "__weakref__")

    def __init__(self, kind, name, like):
        self.kind, self.name = kind, name
        self.like = tuple(like)  # the outputs' leaves: shapes and dtypes
        self.in_like = None  # the inputs' shapes and dtypes, at the first VJP
        self.stand_in = None  # the example the tracer gets, instead of running the computation
        ident = re.sub(r"\W", "_", name).strip("_") or "f"  # <lambda>: iterate_lambda
        self.primitive = Primitive(self.forward, name=f"{kind}_{ident}")
        self.reverse_primitive = Primitive(self.reverse, name=f"{kind}_{ident}_vjp")
        defvjp_argnum(self.primitive, self._vjp)
        defjvp_argnum(self.primitive, self._no_jvp)
        defvjp_argnum(self.reverse_primitive, self._no_second)

    def forward(self, *vals):  # pragma: no cover - abstract
        raise NotImplementedError

    def reverse(self, g, out, *vals):  # pragma: no cover - abstract
        raise NotImplementedError

    def _zeros(self):
        like = self.in_like
        return _pack([v if type(v) is float else np.zeros(np.shape(v), np.result_type(v)) for v in like])

    def _vjp(self, argnum, g, out, *vals):
        if self.in_like is None:
            self.in_like = tuple(_like(v.example if type(v) is Symbol else v) for v in vals)
        symbolic = any(type(v) is Symbol for v in (g, out, *vals))
        self.stand_in = True if symbolic else None  # the tracer's example: zeros, not the sweep
        try:
            packed = self.reverse_primitive(g, out, *vals)  # one statement (CSE merges the arguments')
        finally:
            self.stand_in = None
        return _part(packed, argnum, self.in_like)

    def _no_jvp(self, argnum, t, out, *vals):
        raise TracingError(f"wg.{self.kind}({self.name}) inside a traced program has no forward-mode "
                           f"derivative (Program.jvp, wg.compile of wg.jvp); differentiate it in reverse "
                           f"mode, or call wg.jvp without wg.compile")

    def _no_second(self, argnum, g, out, *vals):
        raise TracingError(f"wg.{self.kind}({self.name}) inside a traced program: its reverse sweep has no "
                           f"derivative of its own (a second derivative, wg.compile(wg.hessian(f))); "
                           f"compute it without wg.compile (wg.hessian(f)), which differentiates "
                           f"{self.name} twice")


class _Loop(_Node):
    """One loop's statement: its step's :class:`fast.StepProgram`, its length and policy."""

    __slots__ = ("program", "n", "policy", "snapshots", "param_like", "native")

    def __init__(self, program, n, policy, snapshots, name, examples):
        super().__init__("iterate", name, [_like(v) for v in examples])
        self.program, self.n, self.policy, self.snapshots = program, n, policy, snapshots
        self.param_like = ()  # the params' shapes and dtypes
        self.native = None  # native_loop's drivers, or why there are none: built at the first ask

    def numba_kernel(self, implementation):
        """``(module, name)`` of the Numba version of ``implementation`` (:meth:`forward` or
        :meth:`reverse`), or why there is none, in words (``native_build`` asks; ``native_loop``)."""
        return loop_kernel(self, implementation.__name__)

    def __repr__(self):
        return f"<wg.iterate({self.name}, n={self.n}, checkpoint={self.policy!r}) as one loop>"

    def forward(self, *vals):
        """The state after n steps from ``vals`` (the state's leaves, then the params), packed."""
        if self.stand_in is not None:
            return self.stand_in
        p = self.program
        k = p.n_x
        return _pack(p.finish(p.advance(list(vals[:k]), self.n, vals[k:])))

    def reverse(self, g, out, *vals):
        """Every input's cotangent (the state's leaves', then the params'), packed in one vector,
        for the cotangent ``g`` of the final state: the policy's reverse sweep."""
        if self.stand_in is not None:
            return self._zeros()
        p = self.program
        k = p.n_x
        x0, params = list(vals[:k]), vals[k:]
        ct = [np.asarray(c) if type(v) is not float else c for c, v in zip(_split(g, self.like), self.like)]
        if self.policy == "all":
            ct, acc = self._reverse_all(x0, params, ct)
        else:
            ct, acc = self._reverse_scheduled(x0, params, ct)
        grads = p.finish(ct) + [acc.get(s, 0.0) for s in p.slots]
        grads = [gr if type(v) is float else np.broadcast_to(gr, np.shape(v)).astype(np.result_type(v))
                 for gr, v in zip(grads, vals)]
        return _pack(grads)

    def _reverse_all(self, x0, params, ct):
        p = self.program
        k, vjp, forward = p.n_x, p.vjp, p.forward
        if k == 1:
            x = x0[0]
            states = [x0]
            for _ in range(self.n - 1):
                x = forward(x, *params)
                states.append((x,))
        else:
            states = [tuple(x0)]
            for _ in range(self.n - 1):
                states.append(forward(*states[-1], *params))
        acc = None
        for _ in range(self.n):
            got = vjp(*states.pop(), *params, *ct)
            ct = list(got[k:2 * k])
            acc = list(got[2 * k:]) if acc is None else [a + c for a, c in zip(acc, got[2 * k:])]
        sched._note_evaluations(2 * self.n - 1)
        return ct, dict(zip(p.slots, acc))

    def _reverse_scheduled(self, x0, params, ct):
        schedule = sched.binomial(self.n, self.snapshots) if self.policy == "binomial" else sched.ctz(self.n)
        run = _Run(self.program, schedule, x0)
        slots, current = [], x0
        for a in schedule.forward_sweep():
            if a.kind == "advance":
                current = self.program.advance(current, a.steps, params)
            elif a.kind == "snapshot":
                run.snap(slots, a.slot, a.position, current)
            else:
                current = slots[a.slot][1]
        return fast.reverse_sweep(run, list(params), slots, [current, None], ct)


def _split(g, like):
    if len(like) == 1:
        return [g]
    return [_part(g, k, like) for k in range(len(like))]


class _Run:
    """What ``fast.reverse_sweep`` reads of a ``recompute.Chain``: the step's program, the schedule,
    no random sources, and the snapshot list's keeping."""

    __slots__ = ("fast", "schedule", "in_plain", "sources")

    def __init__(self, program, schedule, x0):
        self.fast, self.schedule, self.in_plain, self.sources = program, schedule, x0, None

    def snap(self, slots, slot, position, state):
        del slots[slot:]
        slots.append((position, state, None))

    def drop(self, slots, position):
        while slots and slots[-1][0] >= position:
            slots.pop()


def checkpoint_statement(fun, args, kwargs, name):
    """``wg.checkpoint(fun)(*args, **kwargs)`` as one statement of the program being traced, its VJP
    one more (which recomputes ``fun``'s values from its inputs: ``fun``'s VJP program): the result,
    or None where the call must be traced as before (module docs)."""
    if not TRACING[0]:
        return None
    leaves, treedef = tree_flatten(tuple(args))
    if any(type(v) in BOX_TYPES and type(v) is not Symbol for v in leaves):
        return None
    examples = [_example(v) for v in leaves]
    floats = [_float_leaf(v) for v in examples]
    if any(type(v) is Symbol and not f for v, f in zip(leaves, floats)):
        return None  # an int symbol: the program would freeze its example
    sources = sources_of(fun, (), None, f"wg.checkpoint({name})")
    before = sources.capture()
    chain = Chain(fun, name, "checkpoint", examples, treedef, kwargs)

    def slot_example(s):
        return _example(chain.slot_boxes[s])

    try:
        outs, out_def = chain.evaluate(0, list(chain.in_plain), slot_example, note=False)
        boxes = chain.slot_boxes
        if any(type(b) is not Symbol or not is_inexact(b.example) for b in boxes):
            return None
        if not boxes and not any(type(v) is Symbol for v in leaves):
            return None
        if not outs or not all(_float_leaf(v) or isinstance(v, np.floating) for v in outs):
            return None
        if sources.changed(before):
            return None  # fun drew random numbers: the program would repeat them
        positions = [i for i, f in enumerate(floats) if f]
        n_in = len(positions)

        def run(*values):
            state = list(examples)
            for i, v in zip(positions, values):
                state[i] = v
            given = values[n_in:]
            got, _ = chain.evaluate(0, state, given.__getitem__, note=False)
            return got[0] if len(got) == 1 else tuple(got)

        inputs = [examples[i] for i in positions] + [b.example for b in boxes]
        try:
            forward, vjp = fast._TRACER[0](run, inputs)
        except Exception:  # noqa: BLE001 - whatever tracing refuses: traced as before
            return None
    finally:
        sources.restore(before)
    node = _Checkpointed(forward, vjp, [_like(v) for v in outs], name)
    node.inputs_like = tuple(_like(v) for v in inputs)
    node.stand_in = _pack(list(outs))
    try:
        packed = node.primitive(*[leaves[i] for i in positions], *boxes)
    finally:
        node.stand_in = None
    return tree_unflatten(out_def, _cut(packed, node.like))


class _Checkpointed(_Node):
    """One ``wg.checkpoint`` call's statement: ``fun``'s forward and VJP programs."""

    __slots__ = ("forward_program", "vjp_program", "inputs_like", "native")

    def __init__(self, forward, vjp, like, name):
        super().__init__("checkpoint", name, like)
        self.forward_program, self.vjp_program = forward, vjp
        self.inputs_like = ()  # the inputs' shapes and dtypes
        self.native = None  # native_loop's calls, or why there are none: built at the first ask

    def numba_kernel(self, implementation):
        """``(module, name)`` of the Numba version of ``implementation`` (:meth:`forward` or
        :meth:`reverse`), or why there is none, in words (``native_build`` asks; ``native_loop``)."""
        return checkpoint_kernel(self, implementation.__name__)

    def forward(self, *vals):
        """``fun``'s outputs, packed."""
        if self.stand_in is not None:
            return self.stand_in
        got = self.forward_program(*vals)
        return _pack([got] if len(self.like) == 1 else list(got))

    def reverse(self, g, out, *vals):
        """Every input's cotangent, packed: ``fun`` run again by its VJP program."""
        if self.stand_in is not None:
            return self._zeros()
        got = self.vjp_program(*vals, *_split(g, self.like))
        cts = got[len(self.like):]
        return _pack([c if type(v) is float else np.broadcast_to(c, np.shape(v)).astype(np.result_type(v))
                      for c, v in zip(cts, vals)])


fast.provide(loop=loop_statement, checkpoint=checkpoint_statement)
