"""Recomputation: the engine behind ``wg.checkpoint`` and ``wg.iterate`` (``checkpointing/transforms.py``).

A checkpointed computation runs the user's function on plain values and records ONE node for the
whole of it. The node's VJP runs it again, this time recording it, and backpropagates through the
recording. Three difficulties, and how they are met:

- **Closed-over traced values** (weights). The function is run under a *substitution trace*, newer
  than every trace alive, whose boxes hold the function's inputs. A primitive call that involves
  one of its boxes reaches it first (highest level); there, any box of an older trace is a value the
  function closed over. The first run gives each such box a *slot*, in order of first sight; the
  node takes the slots as extra arguments, so the outer derivative sends their cotangents back
  through the usual graph. Later runs substitute, in the same order, the slot's value in the node's
  arguments (a leaf of the recording). An operation on closed-over values alone (``w * 2``) does
  not involve the function's inputs: the outer trace records it as usual, a new box each run, which
  is why the order of first sight, and not identity, names the slots (the function must run the
  same operations each time, as every checkpointing scheme assumes).
- **Levels.** The node is a primitive call, so every trace involved (an outer ``grad`` of a
  ``grad``, ``jvp``, eager tensors) unboxes its own values and records its own node, exactly as for
  ``sin``; the VJP and JVP rules compute with whatever the node holds -- plain arrays, or the boxes
  of older traces, which then record the recomputation: second derivatives are correct.

- **Random numbers** (``randomness.py``). The chain holds the states of the function's random
  sources at x_0 (``rng0``) and each snapshot keeps those it was reached with, so every
  recomputation draws what the first run drew; the backward pass leaves the states as it found
  them. A function that drew nothing drops its sources after the first run. Each recomputed step's
  output is compared with the value it must reproduce (the node's output, or the state the
  previously reversed step started from): a draw that could not be replayed raises instead of
  giving the gradient of other numbers.

Multiple float outputs are packed into one vector (the node has one output) and cut apart again
(``packing.py``). A ``wg.iterate`` loop whose step can be traced runs it, after step 0, as a program
and its VJP program instead (``fast.py``): the same values to rounding, at the step's own speed.
"""

import numpy as np

from wengert.api.checkpointing import captured as captures
from wengert.api.checkpointing import fast
from wengert.api.checkpointing import schedules as sched
from wengert.api.checkpointing.packing import _fix, _like, _pack, _unpack, _unpack_cotangent
from wengert.api.checkpointing.sharing import _layout, shared
from wengert.api.randomness import check_same
from wengert.api.tensor import ScalarTensor, Tensor
from wengert.api.transforms import jvp
from wengert.api.tree import describe, tree_flatten, tree_unflatten
from wengert.core.extend import defjvp_argnum, defvjp_argnum
from wengert.core.primitive import Primitive
from wengert.core.trace import BOX_TYPES, Trace, register_box, unbox_all
from wengert.engines.box import ArrayBox
from wengert.engines.kept import _Copier
from wengert.engines.mutation import array_of, note_view
from wengert.engines.reverse import ReverseTrace, backward_pass, gc_paused, is_inexact

__all__ = ["Chain", "node_primitive"]


@register_box
class _Held(ArrayBox):
    """A value inside a checkpointed function: an input, or computed from the inputs."""

    # _view: set on a view of another value (mutation.note_view)
    __slots__ = ("value", "_trace", "_view", "__weakref__")

    def __init__(self, value, trace):
        self.value = value
        self._trace = trace

    def __repr__(self):
        return f"<value inside a checkpointed function: {self.value!r}>"


class _Substitution(Trace):
    """Runs a function on values it holds; boxes of older traces (closed-over values) are replaced
    by ``resolve(box)``."""

    __slots__ = ("resolve",)

    def constant(self, value):
        return value

    def lift(self, value):
        """``value`` held by this trace: a buffer that traced values can be stored into."""
        return _Held(value, self)

    def apply(self, prim, args, kwargs):
        vals = list(args)
        for i, a in enumerate(args):
            if type(a) in BOX_TYPES:
                vals[i] = a.value if a._trace is self else self.resolve(a)
        out = prim(*vals, **kwargs)
        if type(out) in BOX_TYPES or is_inexact(out):
            held = _Held(out, self)
            array = array_of(out)  # beneath the recording's box, when recomputed to differentiate
            if type(array) is np.ndarray and array.base is not None:  # a view: of an argument's?
                note_view(held, array, prim, args, kwargs, self, vals)
            return held
        return out


def _zero(value):
    v = unbox_all(value)
    return 0.0 if type(v) is float else np.zeros(np.shape(v), np.result_type(v))


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def node_primitive(label):
    """The primitive of a checkpointed computation's node: ``prim(chain, *args)``. One per loop or per
    checkpointed function (not per call); the chain, its first argument, holds the rest."""
    prim = Primitive(_node_impl, name=label)
    defvjp_argnum(prim, _node_vjp)
    defjvp_argnum(prim, _node_jvp)
    return prim


def _node_impl(chain, *vals):
    return chain.impl(vals)


def _same_input(seen, given):
    """Whether the forward sweep's input ``seen`` is the node's ``given``: the same object, or equal
    values (``wg.vjp`` hands its nodes copies of the caller's arrays: ``engines.kept``; when the caller
    has written into ``seen`` since, the sweep starts again from ``given``, the forward pass's values)."""
    if seen is given:
        return True
    return (type(seen) is np.ndarray and type(given) is np.ndarray and seen.shape == given.shape
            and seen.dtype == given.dtype and np.array_equal(seen, given))


def _node_vjp(argnum, g, out, chain, *vals):
    return chain.vjp(argnum - 1, g, out, vals)


def _node_jvp(argnum, t, out, chain, *vals):
    return chain.jvp(argnum - 1, t, out, vals)


class Chain:
    """A checkpointed computation: ``fun`` applied ``n`` times to a state given as leaves (once for
    ``wg.checkpoint``), its closed-over slots, the schedule that reverses it, and its node's rules.

    Slim by design: ``wg.checkpoint`` makes one per call, kept by the tape until the backward pass.
    What only discovery needs (the boxes of the slots and their ids) is dropped once the node is
    recorded; flags, structures and slot sequences are shared between chains (:func:`shared`)."""

    __slots__ = ("fun", "kwargs", "name", "kind", "in_def", "in_plain", "in_float", "slot_boxes",
                 "slot_plain", "slot_float", "slot_ids", "seq_first", "seq_other", "seq_count",
                 "schedule", "n", "forward_state", "precomputed", "held", "watchers", "layout",
                 "out_def", "out_float", "out_like", "cache", "sources", "rng0", "between", "captured",
                 "fast")

    def __init__(self, fun, name, kind, leaves, treedef, kwargs=None, sources=None, captured=None):
        self.fun = fun
        # the arrays fun reads besides its arguments, [(array, path)]; after keep_for_pullback,
        # [(array, the copy made then, path)] (engines.kept): a write in between is refused
        self.captured = captured or None
        self.sources = sources  # the random sources replayed (randomness.py), or None: none at all
        self.rng0 = sources.capture() if sources is not None else None  # their states at x_0
        self.between = None  # wg.iterate's until=, asked after each step (its draws are replayed too)
        self.kwargs = kwargs  # wg.checkpoint: fun(*args, **kwargs); wg.iterate: fun(state)
        self.name = name
        self.kind = kind
        self.in_def = shared(treedef)
        self.in_plain = tuple(unbox_all(v) for v in leaves)
        self.in_float = shared(tuple(is_inexact(v) for v in self.in_plain))
        self.slot_boxes, self.slot_plain, self.slot_float, self.slot_ids = [], [], [], {}
        # evaluation j -> the slots it met, in order of first sight: the first evaluation's sequence,
        # and the evaluations that differ from it (a loop's steps usually all meet the same slots)
        self.seq_first = None
        self.seq_other = None
        self.seq_count = 0
        self.schedule = None
        self.n = 1
        self.forward_state = None  # (vals, slots, current, back) kept by the forward sweep
        self.precomputed = None  # (vals, packed output) for the node's first, primal, call
        self.held = 0  # snapshots this chain holds (reported to Stats)
        self.watchers = sched._watching()
        self.layout = None
        self.cache = None
        self.fast = None  # the step's program (fast.py), once traced; False: the step runs as it is

    def __del__(self):
        if self.held:
            sched._note_snapshots(-self.held, self.watchers)

    # -- the sequences of slots ------------------------------------------------------------------
    def _sequence(self, j):
        if j >= self.seq_count:
            return None
        if self.seq_other is not None:
            seq = self.seq_other.get(j)
            if seq is not None:
                return seq
        return self.seq_first

    def _discovered(self, seq):
        seq = shared(seq)
        if self.seq_count == 0:
            self.seq_first = seq
        elif seq != self.seq_first:
            if self.seq_other is None:
                self.seq_other = {}
            self.seq_other[self.seq_count] = seq
        self.seq_count += 1

    # -- running the function ---------------------------------------------------------------------
    def evaluate(self, j, leaves, slot_value, note=True):
        """Evaluation ``j`` of the function on state ``leaves``: ``(output leaves, output treedef)``;
        ``note``: counted by ``Stats`` (not when it is traced to a program: ``fast.py``)."""
        if note:
            sched._note_evaluation()
        trace = _Substitution()
        seq = self._sequence(j)
        order, seen, keep = [], {}, []

        def resolve(box):
            k = id(box)
            if k in seen:
                return seen[k]
            keep.append(box)  # ids stay unique while this evaluation runs
            if seq is None:
                slot = self.slot_ids.get(k)
                if slot is None:
                    slot = self._new_slot(box)
            elif len(order) < len(seq):
                slot = seq[len(order)]
            else:
                raise self._nondeterministic(j)
            order.append(slot)
            v = seen[k] = slot_value(slot)
            return v

        trace.resolve = resolve
        held = [_Held(v, trace) if f else v for v, f in zip(leaves, self.in_float)]
        tree = tree_unflatten(self.in_def, held)
        del held
        if self.kwargs is None:
            out = self.fun(tree)
        else:
            out = self.fun(*tree, **self.kwargs)
        del tree
        out_leaves, out_def = tree_flatten(out)
        del out
        values = []
        for o in out_leaves:
            if type(o) in BOX_TYPES:
                o = o.value if o._trace is trace else resolve(o)
            values.append(o)
        if seq is None:
            self._discovered(tuple(order))
        elif len(order) != len(seq):
            raise self._nondeterministic(j)
        return values, out_def

    def _new_slot(self, box):
        slot = len(self.slot_boxes)
        plain = unbox_all(box)
        self.slot_ids[id(box)] = slot
        self.slot_boxes.append(box)
        self.slot_plain.append(plain)
        self.slot_float.append(is_inexact(plain))
        return slot

    def _nondeterministic(self, j):
        what = f"step {j} of " if self.kind == "iterate" else ""
        return RuntimeError(
            f"wg.{self.kind}({self.name}): recomputing {what}the function used different closed-over "
            f"traced values than its first run. Checkpointed functions must perform the same "
            f"operations every time they run (no state changing between runs; random draws are "
            f"replayed from NumPy's global state and the Generators the function reaches or is given "
            f"as generators=).")

    def record(self, j, leaves, source):
        """Evaluation ``j`` recorded on a fresh reverse trace: ``(output values, back)`` where
        ``back(cotangents)`` gives ``(input cotangents, {slot: cotangent})``. ``back`` is called once:
        it lets go of the recording (its intermediates) as it returns."""
        trace = ReverseTrace(Tensor, ScalarTensor)
        trace.entries = []
        inputs = [trace.leaf(v) if f else v for v, f in zip(leaves, self.in_float)]
        slot_leaves = {}

        def slot_value(slot):
            if not self.slot_float[slot]:
                return self.slot_plain[slot]
            leaf = slot_leaves.get(slot)
            if leaf is None:
                leaf = slot_leaves[slot] = trace.leaf(source(slot))
            return leaf

        with gc_paused():
            outs, out_def = self.evaluate(j, inputs, slot_value)
        values = [o.value if type(o) in BOX_TYPES and o._trace is trace else o for o in outs]

        def back(cts):
            seeds = [(o, c) for o, c in zip(outs, cts)
                     if c is not None and type(o) in BOX_TYPES and o._trace is trace]
            outs.clear()  # the output boxes reach every node of the recording
            adj = backward_pass(seeds, retain_graph=False, tape=trace.entries)[0] if seeds else {}
            del seeds
            trace.entries.clear()  # nodes and trace form a cycle, and the collector may be paused
            ct_in = [_fix(adj.get(x), x.value) if f else None for x, f in zip(inputs, self.in_float)]
            ct_slots = {s: _fix(adj.get(leaf), leaf.value) for s, leaf in slot_leaves.items()}
            inputs.clear()
            slot_leaves.clear()
            return ct_in, ct_slots

        return values, out_def, back

    def check_state(self, j, values, out_def):
        """Step ``j`` of ``wg.iterate`` must return a state like its input."""
        if out_def != self.in_def:
            raise ValueError(
                f"wg.iterate({self.name}): step {j} returned a state of structure {describe(out_def)}, "
                f"but the state is {describe(self.in_def)}; the step must return the same structure.")
        for i, (v, x) in enumerate(zip(values, self.in_plain)):
            v = unbox_all(v)
            if np.shape(v) != np.shape(x) or np.result_type(v) != np.result_type(x):
                raise ValueError(
                    f"wg.iterate({self.name}): step {j} changed state leaf {i} from shape "
                    f"{np.shape(x)} {np.result_type(x)} to {np.shape(v)} {np.result_type(v)}; the step "
                    f"must keep every leaf's shape and dtype (cast inside the step, or start from "
                    f"an x0 of that shape and dtype).")

    # -- snapshots --------------------------------------------------------------------------------
    def snap(self, slots, slot, position, state):
        """Keep x_position in ``slot``, with the random state it was reached with."""
        before = len(slots)
        del slots[slot:]
        slots.append((position, state, self.sources.capture() if self.sources is not None else None))
        self._held(len(slots) - before)

    def drop(self, slots, position):
        before = len(slots)
        while slots and slots[-1][0] >= position:
            slots.pop()
        self._held(len(slots) - before)

    def _held(self, delta):
        if delta:
            self.held += delta
            sched._note_snapshots(delta, self.watchers)

    def sweep_forward(self, leaves, source, replay=False):
        """The schedule's forward sweep from x_0 = ``leaves``, then step n-1 recorded.
        Returns ``(slots, x_(n-1), x_n values, back)``. ``replay``: a recomputation, from the random
        state the first run started from."""
        slots = []
        current = leaves
        if replay:
            self._restore_random(self.rng0)
        try:
            for a in self.schedule.forward_sweep():
                if a.kind == "advance":
                    current = self.advance_range(a.position, a.steps, current, source)
                elif a.kind == "snapshot":
                    self.snap(slots, a.slot, a.position, current)
                else:  # restore: not part of a forward sweep, but harmless
                    current = slots[a.slot][1]
                    self._restore_random(slots[a.slot][2])
            discovering = self.n - 1 >= self.seq_count
            slot_values = self.fast.slot_values(current, source) if self.fast else None
            if slot_values is not None:  # step n-1 by the program; its pullback later (fast.py)
                values, out_def = self.fast.finish(self.fast.advance(current, 1, slot_values)), self.in_def
                back = fast.Pullback(self.fast, current, slot_values)
            else:
                values, out_def, back = self.record(self.n - 1, current, source)
            if discovering and self.kind == "iterate":
                self.check_state(self.n - 1, values, out_def)
        except BaseException:
            self.drop(slots, 0)
            raise
        return slots, current, values, back

    def advance_range(self, j, k, current, source):
        """Steps j ... j+k-1 from state ``current``: by the step's program where there is one; after
        step 0, one is traced if it can be (``fast.py``)."""
        if self.fast is None and j == 0 and self.kind == "iterate" and k:
            x0, current = current, self.advance(0, current, source)
            j, k = 1, k - 1
            self.fast = fast.build(self, x0, current, self.slot_float, self.slot_plain) or False
        slot_values = self.fast.slot_values(current, source) if self.fast and k else None
        if slot_values is not None:
            return self.fast.advance(current, k, slot_values)
        for i in range(j, j + k):
            current = self.advance(i, current, source)
        return current

    def advance(self, j, leaves, source):
        discovering = j >= self.seq_count
        values, out_def = self.evaluate(j, leaves, lambda s: source(s) if self.slot_float[s]
                                        else self.slot_plain[s])
        if discovering and self.kind == "iterate":
            self.check_state(j, values, out_def)
        if self.between is not None:  # the online loop asked until(x_(j+1)) here: same draws again
            self.between(tree_unflatten(self.in_def, [unbox_all(v) for v in values]))
        return values

    # -- the node ------------------------------------------------------------------------------------
    def node_args(self, leaves):
        """The node's arguments after the chain itself: the float input leaves, then the float
        slots' boxes. Discovery is over: what only it needed is let go."""
        self.slot_float = shared(tuple(self.slot_float))
        self.slot_plain = tuple(self.slot_plain) if self.slot_plain else ()
        self.layout = _layout(self.in_float, self.slot_float)
        args = [leaves[i] for i in self.layout.x_args] + [self.slot_boxes[s] for s in self.layout.slot_args]
        self.slot_boxes = self.slot_ids = None
        return args

    def _leaves_from(self, vals):
        leaves = list(self.in_plain)
        for k, i in enumerate(self.layout.x_args):
            leaves[i] = vals[k]
        return leaves

    def _source(self, vals):
        arg_of_slot = self.layout.arg_of_slot
        return lambda s: vals[arg_of_slot[s]]

    def make_node(self, prim, args, out_values, out_def):
        """Record the node ``prim(self, *args)`` on every trace among ``args``; return the output
        pytree."""
        self.out_def = shared(out_def)
        plain = [unbox_all(v) for v in out_values]
        self.out_float = shared(tuple(is_inexact(v) for v in plain))
        floats = [v for v, f in zip(plain, self.out_float) if f]
        if not floats or not any(type(a) in BOX_TYPES for a in args):
            self._release()
            return tree_unflatten(out_def, out_values)
        self.out_like = tuple(_like(v) for v in floats)  # shapes and dtypes, without holding the values
        self.precomputed = ([unbox_all(a) for a in args], _pack(floats))
        del plain, floats
        out = prim(self, *args)
        self.precomputed = None
        parts = iter(_unpack(out, self.out_like))
        leaves = [next(parts) if f else v for v, f in zip(out_values, self.out_float)]
        return tree_unflatten(out_def, leaves)

    def _release(self):
        if self.forward_state is not None:
            self.drop(self.forward_state[1], 0)
            self.forward_state = None

    def impl(self, vals):
        pre = self.precomputed
        if pre is not None and len(pre[0]) == len(vals) and all(a is b for a, b in zip(pre[0], vals)):
            self.precomputed = None
            return pre[1]
        return self._output(vals)

    def _output(self, vals):
        """The packed float outputs, recomputed from the node's arguments (nothing recorded here),
        with the first run's random numbers; the random state is left as it was."""
        current, source = self._leaves_from(vals), self._source(vals)
        outer = self._capture_random()
        try:
            self._restore_random(self.rng0)
            current = self.advance_range(0, self.n, current, source)
        finally:
            self._restore_random(outer)
        return _pack([v for v, f in zip(current, self.out_float) if f])

    def jvp(self, argnum, t, out, vals):
        def f(v):
            return self._output(vals[:argnum] + (v,) + vals[argnum + 1:])

        primal, tangent = jvp(f, (vals[argnum],), (t,))
        self._check_same([primal], [out], self.n - 1)
        return tangent

    def vjp(self, argnum, g, out, vals):
        cache = self.cache
        if cache is None or cache[0] is not g or cache[1] is not out:
            cache = self.cache = (g, out, self._reverse(g, out, vals))
        if argnum == len(vals) - 1:
            self.cache = None  # the backward pass asks for the arguments in order
        return cache[2][argnum]

    # -- random state and the check of recomputed values ------------------------------------------
    def _capture_random(self):
        return self.sources.capture() if self.sources is not None else None

    def forward_done(self):
        """After the first run: a function that drew no random number from the sources has none to
        replay (its recomputations run the same operations on the same values)."""
        if self.sources is not None and not self.sources.changed(self.rng0):
            self.sources = self.rng0 = self.between = None

    def _restore_random(self, token):
        if self.sources is not None:
            self.sources.restore(token)

    def _check_same(self, recomputed, first, p):
        """Recomputed values (step ``p``'s outputs) must be the first run's: a random draw wengert
        could not replay, or a value read that changed, would otherwise give another gradient."""
        def what():
            step = f" step {p} of" if self.kind == "iterate" else ""
            return f"wg.{self.kind}({self.name}): recomputing{step} {self.name} in the backward pass"

        check_same([unbox_all(v) for v in recomputed], [unbox_all(v) for v in first], what)

    def keep_captured(self):
        """Before the first run: copies of what ``fun`` captures (``captured.py``: why, and when)."""
        self.captured = captures.keep(self.captured, _Copier())

    def first_run_done(self):
        self.forward_done()
        self.captured = captures.unwritten(self.captured)  # those ``fun`` wrote itself are let go

    def keep_for_pullback(self, copier):
        """At the end of a forward pass whose pullback runs later: copies (made already, but where
        the chain was made otherwise)."""
        self.captured = captures.keep(self.captured, copier)

    def _reverse(self, g, out, vals):
        """All the node's argument cotangents: the schedule's reverse sweep. The random state is
        replayed (each snapshot keeps the state it was reached with) and left as it was found."""
        captures.check(self.captured, f"wg.{self.kind}({self.name})", self.name)
        outer = self._capture_random()
        try:
            return self._reverse_sweep(g, out, vals)
        finally:
            self._restore_random(outer)

    def _reverse_sweep(self, g, out, vals):
        parts = iter(_unpack_cotangent(g, self.out_like))
        ct = [next(parts) if f else None for f in self.out_float]
        del parts
        source = self._source(vals)
        state = self.forward_state
        self.forward_state = None
        if state is not None and all(map(_same_input, state[0], vals)):
            _, slots, current, back = state
        else:
            if state is not None:
                self.drop(state[1], 0)
            slots, current, values, back = self.sweep_forward(self._leaves_from(vals), source, replay=True)
            self._check_same([_pack([unbox_all(v) for v, f in zip(values, self.out_float) if f])], [out],
                             self.n - 1)
            del values
        del state  # its recording and state would otherwise live through the whole sweep
        slot_values = self.fast.slot_values(current, source) if self.fast else None
        by_program = slot_values is not None and not any(type(c) in BOX_TYPES for c in ct)
        if not by_program and isinstance(back, fast.Pullback):
            back = None  # step n-1 is recorded again, where an outer trace sees it
        held = [current, back]  # handed over: the sweep lets go of x_(n-1) once it is reversed
        del current, back
        try:
            if by_program:
                ct, acc = fast.reverse_sweep(self, slot_values, slots, held, ct)
            else:
                ct, acc = self._reverse_steps(slots, held, ct, source)
        finally:
            self.drop(slots, 0)
        layout = self.layout
        grads = [ct[i] if ct[i] is not None else _zero(vals[k]) for k, i in enumerate(layout.x_args)]
        for s in layout.slot_args:
            c = acc.get(s)
            grads.append(c if c is not None else _zero(vals[layout.arg_of_slot[s]]))
        return grads

    def _reverse_steps(self, slots, held, ct, source):
        """The schedule's reverse sweep from ``held`` (``[x_(n-1), its recording or None]``, emptied),
        each step recorded on a tape: ``(x_0's cotangents, {slot: cotangent})``."""
        current, back = held
        held.clear()
        acc = {}
        after = None  # x_(p+1) when step p is reversed: its recomputation must give it again
        for a in self.schedule.reverse_sweep():
            if a.kind == "advance":
                current = self.advance_range(a.position, a.steps, current, source)
            elif a.kind == "snapshot":
                self.snap(slots, a.slot, a.position, current)
            elif a.kind == "restore":
                current = slots[a.slot][1]
                self._restore_random(slots[a.slot][2])
            else:
                if back is None:
                    values, _, back = self.record(a.position, current, source)
                    if after is not None:
                        self._check_same(values, after, a.position)
                    del values
                after = current
                current = None  # x_p: held by the recording until it is reversed, then by a slot
                ct, ct_slots = back(ct)
                back = None
                for s, c in ct_slots.items():
                    acc[s] = _add(acc.get(s), c)
                self.drop(slots, a.position)
        return ct, acc
