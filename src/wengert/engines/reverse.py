"""Reverse mode, recording: a primitive call on recorded values becomes a graph node.

A recorded value (a ``Tensor`` or a tape's ``Var``) *is* its graph node: it keeps the primitive
that made it, the arguments the VJP rules need (those its ``saves`` fact names, where it declares
one: ``wengert.engines.saving``; its own trace's boxes replaced by their values,
boxes of lower traces left in place so the rules' arithmetic is recorded there: grad of grad),
and its parents. Nodes are ordered by creation (``_id``, or the trace's Wengert list
``entries``): a node is always made after its parents. The backward pass that reads them is in
``wengert.engines.backward``.

The commonest scalar steps (``x[i]`` with an int ``i``; ``+``, ``-`` and ``*`` on recorded floats
and float constants) are recorded by the node's own methods, skipping the primitive's entry point
and ``apply2``; they make the same nodes. :func:`record` fills every tuple-keeping node, on every
path; only ``leaf`` fills a leaf, which has no primitive (``_NODE_SLOTS`` in mutation.py lists the
slots). On a trace that keeps its Wengert list (the transforms'), a recorded Python float is a
:class:`ScalarNode` instead (:func:`record_scalar`): its inputs in two slots and no tuples, 80 bytes
against a ``Node``'s 232 with its tuples; the backward pass reads its inputs directly.
"""

from weakref import ref as _weakref

import numpy as np

from wengert.core.primitive import FLOAT_PATH_ERRORS, explained
from wengert.core.trace import BOX_TYPES, Trace, gc_paused  # noqa: F401 - gc_paused: imported from here too
from wengert.engines import saving
from wengert.engines.accumulation import FREED  # noqa: F401 - imported from here too
from wengert.engines.backward import backward_pass  # noqa: F401 - imported from here too
from wengert.engines.box import ArrayBox
from wengert.engines.collector import trace_started
from wengert.engines.kept import PLAIN, constants_kept, may_hold_arrays
from wengert.engines.mutation import array_of, node_ids, note_view, view_of_buffer
from wengert.engines.saving import saved_args, sweep
from wengert.engines.scalar import FREED_INPUT, SCALAR_TYPES, UNARY, split_input
from wengert.rules import elementwise as ew
from wengert.rules.indexing import getitem as _getitem

__all__ = ["Node", "NodeMethods", "ScalarNode", "ReverseTrace", "RECORDED_TYPES", "UNARY", "FREED_INPUT",
           "backward_pass", "is_inexact", "record", "record_scalar"]

"""Creation order of graph nodes: parents always have smaller ids than their children."""

_new = object.__new__
_INEXACT = frozenset("fc")
_float64 = np.float64
_ndarray = np.ndarray
_GETITEM = _getitem.primitive
_add = ew.add
_mul = ew.multiply
_sub = ew.subtract
_ADD = ew.add.primitive
_MUL = ew.multiply.primitive
_SUB = ew.subtract.primitive


def is_inexact(x):
    """Whether ``x`` is float or complex: only such values carry derivatives."""
    t = type(x)
    if t is float or t is complex:
        return True
    try:
        return x.dtype.kind in _INEXACT
    except AttributeError:
        return False


RECORDED_TYPES = set()
"""Every class of recorded values (:class:`NodeMethods`' subclasses: nodes, tensors, tape variables)."""


class NodeMethods(ArrayBox):
    """The operators of recorded values (both layouts below): the commonest scalar steps recorded
    right here (see module docs), anything else as every box does."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        RECORDED_TYPES.add(cls)

    # Two recorded Python floats of one trace (a scalar loop's arithmetic): recorded right here,
    # without the primitive's entry and apply2 (their checks are the ones below). Anything else
    # goes there as before. (+ and * written out, not through _float_binary: its call costs a
    # loop of reads v[i] * v[i] about 9%.)
    def __add__(self, other):
        if type(other) in RECORDED_TYPES:
            x = self.value
            y = other.value
            if type(x) is float and type(y) is float:
                trace = self._trace
                if (other._trace is trace and trace.records_inline and self.requires_grad
                        and other.requires_grad):
                    return record_scalar(trace, _ADD, x + y, self, other)
        elif type(other) is float:  # x + 1.0
            node = _float_binary(_ADD, self, other, False)
            if node is not None:
                return node
        return _add(self, other)

    def __radd__(self, other):  # 1.0 + x, and sum()'s start value 0
        if type(other) is int and type(self.value) is float:
            other = float(other)
        if type(other) is float:
            node = _float_binary(_ADD, self, other, True)
            if node is not None:
                return node
        return _add(other, self)

    def __sub__(self, other):
        if type(self.value) is float:
            node = _float_binary(_SUB, self, other, False)
            if node is not None:
                return node
        return _sub(self, other)

    def __rsub__(self, other):
        if type(other) is float and type(self.value) is float:
            node = _float_binary(_SUB, self, other, True)
            if node is not None:
                return node
        return _sub(other, self)

    def __mul__(self, other):
        if type(other) in RECORDED_TYPES:
            x = self.value
            y = other.value
            if type(x) is float and type(y) is float:
                trace = self._trace
                if (other._trace is trace and trace.records_inline and self.requires_grad
                        and other.requires_grad):
                    return record_scalar(trace, _MUL, x * y, self, other)
        elif type(other) is float:  # x * 2.0
            node = _float_binary(_MUL, self, other, False)
            if node is not None:
                return node
        return _mul(self, other)

    def __rmul__(self, other):  # a float constant times a recorded float (0.5 * sin(z))
        if type(other) is float:
            y = self.value
            if type(y) is float:
                trace = self._trace
                if trace.records_inline and self.requires_grad:
                    return record_scalar(trace, _MUL, other * y, other, self)
        return _mul(other, self)

    def __getitem__(self, idx):
        # v[i], a Python int i, on a recorded array (a loop's reads): recorded right here, apply2's
        # work for getitem without its generic checks and calls (about a third of a read's cost);
        # a float64 element is a Python float, as getitem's implementation makes it. Anything else
        # as every box does.
        if type(idx) is int:
            trace = self._trace
            v = self.value
            if type(v) is np.ndarray and trace.records_inline and self.requires_grad:
                out = v[idx]
                if type(out) is _float64:
                    out = float(out)
                elif type(out) is np.ndarray:  # a row: a view, marked by the generic path
                    return trace.apply2(_GETITEM, self, idx)
                elif not is_inexact(out):
                    return out  # the trace's constant (records_inline: the plain value)
                return record_scalar(trace, _GETITEM, out, self, idx)
            return trace.apply2(_GETITEM, self, idx)
        return ArrayBox.__getitem__(self, idx)


class Node(NodeMethods):
    """A recorded value: primal ``value`` plus what the backward pass needs (see module docs).

    ``_parents`` is aligned with ``_args``: the parent node for a differentiated argument, None
    for a constant. Leaves have ``_prim is None``. ``Tensor`` (PyTorch habits) and ``Var`` (the
    explicit tape) are its two public kinds.
    """

    __slots__ = ("value", "_trace", "_prim", "_args", "_kwargs", "_parents", "_id",
                 "requires_grad", "_view", "__weakref__")  # kinds add theirs (Tensor: _grad; Var: name)
    # _view: set only on a view of another node's array (mutation.note_view)

    # No __init__: nodes are made with ``trace.box_type()`` (about 25 ns less than object.__new__,
    # which an __init__ would force) and filled by ``record`` (operations) or ``make`` (leaves).

    @classmethod
    def make(cls, value, trace, prim, args, kwargs, parents, requires_grad):
        """A new node of this kind (``args`` unboxed, ``parents`` aligned with them), not recorded
        in its trace's list: a leaf or a constant."""
        return _new(cls)._fill(value, trace, prim, args, kwargs, parents, requires_grad)

    def _fill(self, value, trace, prim, args, kwargs, parents, requires_grad):
        self.value = value
        self._trace = trace
        self._prim = prim
        self._args = args
        self._kwargs = kwargs
        self._parents = parents
        self._id = next(node_ids)
        self.requires_grad = requires_grad
        return self


class ScalarNode(NodeMethods):
    """A recorded Python float in 80 bytes, on a trace that keeps its Wengert list (its order is the
    list's): a :class:`Node` keeps an arguments tuple and a parents tuple beside its ten slots, which
    for a scalar step is three times the float it records.

    Its at most two inputs ``_x`` and ``_y`` are each either a node of the trace (a differentiated
    argument: the parent, whose ``value`` is the argument) or a constant (a Python float, or the int
    index of ``v[i]``); ``_y`` is :data:`UNARY` for a one-argument primitive. ``_args``, ``_parents``
    and ``_kwargs`` read (and ``release`` and the assignment log's redirection write) it as a
    :class:`Node`'s; the backward pass reads the inputs directly. A parent's value is its argument
    because a float is immutable and an array node's value changes only by ``rebind``, whose old
    version the pass points its children at (``mutation.resolve_tape``) before reading them; an array
    parent's output is never released while a scalar node refers to it (``saving``: the references
    counted are the tuples' only). The only parent holding an array is ``v``'s in ``v[i]``, whose rule
    reads just its shape: ``engines.kept`` skips scalar nodes when it copies the caller's arrays.
    """

    __slots__ = ("value", "_trace", "_prim", "_x", "_y", "__weakref__")
    requires_grad = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        SCALAR_TYPES.add(cls)

    @property
    def _args(self):
        x = self._x
        y = self._y
        if y is FREED_INPUT:
            return FREED
        ax = split_input(x)[1]
        if y is UNARY:
            return (ax,)
        return (ax, split_input(y)[1])

    @_args.setter
    def _args(self, args):
        if args is not FREED:
            raise TypeError("wengert: a scalar node's arguments are its inputs; only release() sets them")
        self._x = self._y = FREED_INPUT

    @property
    def _parents(self):
        y = self._y
        if y is FREED_INPUT:
            return ()
        if y is UNARY:
            return (self._x,)
        return (split_input(self._x)[0], split_input(y)[0])

    @_parents.setter
    def _parents(self, parents):
        # release() (): already freed by _args. The assignment log's redirection: each parent
        # replaced by another version of itself (None stays None).
        if self._y is FREED_INPUT or not parents:
            return
        for slot, new in zip(("_x", "_y"), parents):
            old = getattr(self, slot)
            if new is None:
                if not (type(old) is float or type(old) is int):
                    setattr(self, slot, old.value)  # no longer differentiated: its value, a constant
            else:
                setattr(self, slot, new)

    @property
    def _kwargs(self):
        return None

    @_kwargs.setter
    def _kwargs(self, kwargs):
        if kwargs is not None:
            raise TypeError("wengert: a scalar node has no keyword arguments")


SCALAR_TYPES.add(ScalarNode)


def _float_binary(prim, box, other, reflected):
    """``box op other`` (``other op box`` when ``reflected``) for a recorded float ``box`` and a
    Python float or another recorded float ``other`` of its trace: recorded here with the
    operator (``prim.float_fun``: +, - or *, which never raise on floats), as apply2 would record
    it. None for anything else (the caller takes the primitive's entry point)."""
    x = box.value
    if type(x) is not float:
        return None
    trace = box._trace
    if not (trace.records_inline and box.requires_grad):
        return None
    if type(other) is float:
        y = other
    elif (type(other) in RECORDED_TYPES and other._trace is trace and other.requires_grad
          and type(other.value) is float):
        y = other.value
    else:
        return None
    if reflected:
        return record_scalar(trace, prim, prim.float_fun(y, x), other, box)
    return record_scalar(trace, prim, prim.float_fun(x, y), box, other)


def record(trace, prim, out, args, parents, kwargs=None):
    """The node ``out = prim(*args, **kwargs)`` on ``trace``: ``args`` unboxed, ``parents`` aligned
    with them (the node of a differentiated argument, None for a constant). It takes its place in
    the trace's order: the next ``_id``, or the end of the trace's Wengert list."""
    # The fields are set here one by one, as Node._fill sets them, rather than by calling it: this runs
    # once per recorded operation, and the call (with an _id a list-keeping trace does not need) made
    # the tiny network's value and gradient 2-3% slower (63.3-65.2 against 64.6-66.2 us, A/B).
    node = trace.box_type()
    node.value = out
    node._trace = trace
    node._prim = prim
    node._args = args
    node._kwargs = kwargs
    node._parents = parents
    node.requires_grad = True
    entries = trace.entries
    if entries is None:
        node._id = next(node_ids)
    else:
        entries.append(node)
    return node


def record_scalar(trace, prim, out, x, y=UNARY):
    """:func:`record` for a scalar step (``x[i]``, and float arithmetic), with inputs as
    :class:`ScalarNode` takes them: ``x`` and ``y`` each a node of ``trace`` or a constant (a Python
    float, or an int index), ``y`` :data:`UNARY` for one argument. A float output on a trace with a
    ``scalar_type`` becomes one (the hottest recording: filled here); anything else a :class:`Node`."""
    cls = trace.scalar_type
    if cls is not None and type(out) is float:
        entries = trace.entries
        if entries is not None:  # (None once the transform's pass is over)
            node = cls()
            node.value = out
            node._trace = trace
            node._prim = prim
            node._x = x
            node._y = y
            entries.append(node)
            return node
    parent0, args0 = split_input(x)
    if y is UNARY:
        return record(trace, prim, out, (args0,), (parent0,))
    parent1, args1 = split_input(y)
    return record(trace, prim, out, (args0, args1), (parent0, parent1))


class ReverseTrace(Trace):
    """A reverse-mode recording. ``box_type`` is the class of its values (Tensor or Var);
    ``entries``, when a list, receives every recorded node in order (the explicit tape)."""

    __slots__ = ("box_type", "scalar_type", "entries", "mutations", "records_inline", "pending", "sweep_at",
                 "transform", "kept_constants")

    keeps_constants = True
    """Whether the constant arrays its rules read are copied as they are recorded (``engines.kept``);
    eager tensors instead stamp in-place writes and refuse what was overwritten, as PyTorch does."""

    def __init__(self, box_type, scalar_type=None):
        super().__init__()
        self.box_type = box_type
        # the class of its recorded floats (a ScalarNode kind), where it keeps its Wengert list
        self.scalar_type = scalar_type
        # Node's methods may record x[i], + and * themselves (constants are plain values). A slot,
        # not a class attribute: read on every recorded scalar step, and a slot reads faster.
        self.records_inline = True
        self.entries = None
        self.mutations = None  # assignments to its boxes (see mutation.py), logged when there are any
        trace_started()  # inside a pause, young cyclic garbage is collected where it pays
        self.pending = None  # {id(node): [children's references, prim, weakref]}: to release (saving.py)
        self.sweep_at = 32
        self.transform = None  # the transform that made it ("grad"), named in its values' repr
        self.kept_constants = None  # id -> the read-only copy of a constant array its rules read (kept.py)

    def leaf(self, value):
        """A value to differentiate with respect to."""
        node = self.box_type()  # Node.make(...), without its two calls: once per argument and call
        node.value = value
        node._trace = self
        node._prim = node._args = node._kwargs = None
        node._parents = ()
        node._id = next(node_ids)
        node.requires_grad = True
        return node

    def constant(self, value):
        """What a primitive returns when nothing of this trace is differentiated through it."""
        return value

    def lift(self, value):
        """``value`` as a box of this trace that carries no derivative (``requires_grad`` false, as
        an eager constant): a buffer that traced values can be stored into (``np.zeros_like(x)``)."""
        return self.box_type.make(value, self, None, None, None, (), False)

    def apply(self, prim, args, kwargs):
        unboxed = list(args)
        parents = [None] * len(unboxed)
        found = nested = False
        missing = prim.vjp_missing
        i = 0
        for a in args:
            if type(a) in BOX_TYPES:
                if a._trace is self:
                    v = a.value
                    unboxed[i] = v
                    if type(v) in BOX_TYPES:
                        nested = True
                    if a.requires_grad:
                        if i in missing:
                            prim.vjp_rule(i)  # raises NoRuleError naming prim and argument
                        parents[i] = a
                        found = True
                else:
                    nested = True
            i += 1
        if nested:
            out = prim(*unboxed, **kwargs)
        else:
            try:
                out = prim.fun(*unboxed, **kwargs)
            except ValueError as e:
                raise explained(prim, unboxed, e) from e
        if not found or (type(out) is not float and not is_inexact(out)):
            if not found and (type(out) is _ndarray or type(out) in BOX_TYPES):
                held = view_of_buffer(self, prim, args, kwargs, out)
                if held is not None:
                    return held
            return self.constant(out)
        return self._record_saving(prim, out, tuple(unboxed), tuple(parents), kwargs or None)

    # The two specialisations below do what ``apply`` does for the common case -- every box is
    # this trace's own, no nesting, no keywords -- and defer to ``apply`` for anything else.
    # apply2 unboxes x and y in two mirrored blocks rather than a loop: this is the per-operation
    # hot path.

    def apply1(self, prim, x, kwargs=None):
        v = x.value
        op = prim.float_fun
        if type(v) is float and op is not None and not kwargs and x.requires_grad:
            # sin(x) on a recorded float (a scalar loop's step): math's function, without the
            # implementation's wrapper, and the node filled right here
            try:
                out = op(v)
            except FLOAT_PATH_ERRORS:  # where math refuses, NumPy's answer, as a float
                out = float(prim.fun(_float64(v)))
            if type(out) is not float and not is_inexact(out):
                return self.constant(out)
            if 0 in prim.vjp_missing:
                prim.vjp_rule(0)  # raises NoRuleError naming prim and argument
            return record_scalar(self, prim, out, x)
        if type(v) in BOX_TYPES or not x.requires_grad:
            return self.apply(prim, (x,), kwargs or {})
        out = prim.fun(v, **kwargs) if kwargs else prim.fun(v)
        t = type(out)
        if t is not float and not (t is _ndarray and out.dtype.kind in _INEXACT) and not is_inexact(out):
            return self.constant(out)
        if 0 in prim.vjp_missing:
            prim.vjp_rule(0)  # raises NoRuleError naming prim and argument
        return self._record_saving(prim, out, (v,), (x,), kwargs or None)

    def apply2(self, prim, x, y):
        if type(x) in BOX_TYPES:
            if x._trace is not self or not x.requires_grad or type(x.value) in BOX_TYPES:
                return self.apply(prim, (x, y), {})
            vx = x.value
            px = x
        else:
            vx = x
            px = None
        if type(y) in BOX_TYPES:
            if y._trace is not self or not y.requires_grad or type(y.value) in BOX_TYPES:
                return self.apply(prim, (x, y), {})
            vy = y.value
            py = y
        else:
            vy = y
            py = None
        op = prim.float_fun
        if op is not None and type(vx) is float and type(vy) is float:
            try:
                out = op(vx, vy)  # the operator itself, without the implementation's wrapper
            except FLOAT_PATH_ERRORS:  # 1.0 / 0.0: NumPy's answer, as a float
                out = float(prim.fun(_float64(vx), _float64(vy)))
        else:
            try:
                out = prim.fun(vx, vy)
            except ValueError as e:
                raise explained(prim, (vx, vy), e) from e
        t = type(out)
        if t is not float and not (t is _ndarray and out.dtype.kind in _INEXACT) and not is_inexact(out):
            return self.constant(out)
        missing = prim.vjp_missing
        if missing:
            if px is not None and 0 in missing:
                prim.vjp_rule(0)
            if py is not None and 1 in missing:
                prim.vjp_rule(1)
        if t is float:
            # a ScalarNode: each input a float constant or a node whose value is not an array (its
            # rules would read the array through the node: engines.kept copies only tuples' arrays)
            if ((type(vx) is float or (px is not None and type(vx) is not _ndarray))
                    and (type(vy) is float or (py is not None and type(vy) is not _ndarray))):
                return record_scalar(self, prim, out, vx if px is None else px, vy if py is None else py)
            if px is None or py is None:  # a constant array its rules read: copied (engines.kept)
                return self._record_saving(prim, out, (vx, vy), (px, py))
            return record(self, prim, out, (vx, vy), (px, py))
        return self._record_saving(prim, out, (vx, vy), (px, py))

    def _note_view(self, node, out, prim, args, parents, kwargs):
        """``out`` may be a view (of an argument?), maybe beneath a lower level's box: note it."""
        array = array_of(out)
        if type(array) is _ndarray and array.base is not None:
            note_view(node, array, prim, [a if p is None else p for a, p in zip(args, parents)], kwargs, self)
        if self.pending and getattr(node, "_view", (None,))[0] is not None:
            self.pending.pop(id(node._view[0]), None)  # a write into node writes its base: keep it

    def _record_saving(self, prim, out, args, parents, kwargs=None):
        """:func:`record`, keeping of ``args`` only what ``prim``'s rules read (its ``saves`` fact), and
        on a trace that keeps its Wengert list, releasing outputs that only the graph refers to
        (``wengert.engines.saving``). Python-float steps and small arrays skip that: cheap to keep."""
        keep_out = True
        viewed = args
        if self.keeps_constants:
            # a constant array among the arguments: what the rules read of it, copied now, as the
            # function may write into it later (engines.kept); the cheap tests first
            i = -1
            for p in parents:
                i += 1
                if p is None:
                    t = type(args[i])
                    if t is _ndarray or (t not in PLAIN and may_hold_arrays(args[i])):
                        args, kwargs = constants_kept(self, prim, args, parents, kwargs)
                        break
            else:
                if kwargs:
                    for v in kwargs.values():
                        if type(v) not in PLAIN and may_hold_arrays(v):
                            args, kwargs = constants_kept(self, prim, args, parents, kwargs)
                            break
        if prim.saves is not None:
            # Only where the output or the first argument (a reduction's input) is a big array, or
            # traced at a lower level; not on an explicit Tape, which lists its entries' arguments.
            least = saving.MIN_BYTES
            a = args[0]
            t = type(a)
            if (((type(out) is _ndarray and out.nbytes >= least) or (t is _ndarray and a.nbytes >= least)
                 or t in BOX_TYPES) and (self.entries is None or type(self) is ReverseTrace)):
                args, keep_out = saved_args(prim, args, parents)
        node = record(self, prim, out, args, parents, kwargs)
        t = type(out)
        if (out.base is not None) if t is _ndarray else (t in BOX_TYPES):
            self._note_view(node, out, prim, viewed, parents, kwargs)
        pending = self.pending
        if pending:  # outputs waiting to be released: count the references this node holds
            for p in parents:
                if p is not None:
                    counts = pending.get(id(p))
                    if counts is not None:
                        counts[0] += 1
        if not keep_out and type(out) is _ndarray and out.nbytes >= saving.MIN_BYTES:
            if pending is None:  # decided at the first: wg.grad's traces keep their list
                releases = self.entries is not None and type(self) is ReverseTrace
                pending = self.pending = {} if releases else False
            if pending is not False:
                pending[id(node)] = [0, prim, _weakref(node)]
                if len(pending) >= self.sweep_at:
                    sweep(self)
        return node
