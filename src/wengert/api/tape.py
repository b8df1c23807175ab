"""The explicit tape: a Wengert list you hold, read backwards for gradients.

    tape = wg.Tape()
    x = tape.var(0.5); y = tape.var(4.2)
    z = x * y + wnp.sin(x)
    g = z.grad()            # a Grad, separate from the tape
    g.wrt(x), g.wrt(y)      # 5.077582561890373, 0.5

Every operation involving a tape's variables is appended to the tape in program order. The same
tape serves any number of outputs (``v.grad()``); ``len(tape)`` counts its operations, iterating
yields ``Entry(operation, inputs, output)``, and ``print(tape)`` lists it as a straight-line program.
The backward pass is the same one ``wg.grad`` and ``Tensor.backward`` use.
"""

import itertools
import string
import sys
from collections import namedtuple

import numpy as np

from wengert.core import exits as _exits
from wengert.core.trace import BOX_TYPES, register_box
from wengert.engines.kept import copy_constants, may_hold_arrays, own_copy
from wengert.engines.mutation import resolve_tape, versions_by_box
from wengert.engines.reverse import Node, ReverseTrace, backward_pass, is_inexact

__all__ = ["Tape", "Var", "Grad", "Entry"]

Entry = namedtuple("Entry", ["operation", "inputs", "output"])

@register_box
class Var(Node):
    """A variable on a :class:`Tape` : ``.value``, and ``.grad()``."""

    __slots__ = ("name",)  # what Tape.var was given

    def grad(self):
        """Read the tape backwards from this variable: a :class:`Grad` (d self / d every var)."""
        value = self.value
        if np.size(value) != 1:
            raise ValueError(f"Var.grad(): the variable must be a scalar, it has shape {self.shape}; "
                             f"sum it first, or use wg.vjp for a vector output")
        seed = 1.0 if type(value) is float else np.ones_like(value)
        adj, nodes = backward_pass([(self, seed)], keep_all=True, tape=self._trace.entries)
        return Grad(adj, nodes, self)

    def _kind(self):
        return "a wg.Tape variable"

    def __repr__(self):
        name = getattr(self, "name", None)
        name = f" {name}" if name else ""
        return f"Var{name}({self.value!r})"


class Grad:
    """Adjoints of every variable with respect to one output, kept apart from the tape so that one
    tape can serve several outputs."""

    def __init__(self, adjoints, nodes, output):
        self._adj = adjoints
        self._nodes = nodes  # keeps the ids in ``_adj`` valid
        self.output = output

    def wrt(self, var):
        """d output / d ``var`` (zero when the output does not depend on it)."""
        if not isinstance(var, Var):
            raise TypeError(f"Grad.wrt expects a Var of the tape, got {type(var).__name__}")
        g = self._adj.get(var)
        v = var.value
        if g is None:
            return 0.0 if type(v) is float else np.zeros_like(v)
        if type(v) is float:
            return float(g)
        return g


class Tape(ReverseTrace):
    """A Wengert list: the operations performed on its variables, in order."""

    __slots__ = ("entries",)
    lists_values = True  # its entries show every value: a write keeps the array it overwrote (mutation.py)

    def __init__(self):
        super().__init__(Var)
        self.entries = []  # ReverseTrace.apply appends every recorded node here

    def var(self, value, name=None):
        """A new independent variable on this tape, holding a copy of an array ``value`` (as
        ``torch.tensor`` copies; a read-only array that views no writeable memory is kept as it is)."""
        if type(value) in BOX_TYPES:
            eager_constant = value._trace.level == 0 and getattr(value, "requires_grad", True) is False
            if not eager_constant or type(value.value) in BOX_TYPES:
                _refuse_mixing("tape.var", value)
            value = value.value  # an eager tensor that records nothing: its data
        if not is_inexact(value):
            value = float(value) if np.ndim(value) == 0 else np.asarray(value, dtype=float)
        v = self.leaf(own_copy(value))
        v.name = name
        return v

    def apply(self, prim, args, kwargs):
        # the general path (apply1/apply2 come here with anything but this tape's own variables, and
        # with arrays among the arguments): the constant arrays its rules read are copied now, since
        # the tape may be read back at any later time, after the caller wrote into them
        parents = []
        for a in args:
            if type(a) in BOX_TYPES:
                if a._trace is not self:
                    _refuse_mixing(prim.__name__, a)
                parents.append(a if a.requires_grad else None)
            else:
                parents.append(None)
        args, kwargs = copy_constants(prim, tuple(args), parents, kwargs)
        return ReverseTrace.apply(self, prim, args, kwargs or {})

    def apply1(self, prim, x, kwargs=None):
        if kwargs and any(map(may_hold_arrays, kwargs.values())):
            return self.apply(prim, (x,), kwargs)
        return ReverseTrace.apply1(self, prim, x, kwargs)

    def apply2(self, prim, x, y):
        tx = type(x)
        ty = type(y)
        if ((tx is not float and tx not in BOX_TYPES and may_hold_arrays(x))
                or (ty is not float and ty not in BOX_TYPES and may_hold_arrays(y))):
            return self.apply(prim, (x, y), {})
        return ReverseTrace.apply2(self, prim, x, y)

    def __len__(self):
        return len(self.entries)

    def __iter__(self):
        for node in self.entries:
            yield Entry(node._prim.__name__, _inputs(node), node)

    def listing(self, names=None):
        """The tape as a straight-line program (``names`` maps variables to their names)."""
        log = versions_by_box(self)
        if log:  # variables were assigned to: show each use with the version it read
            resolve_tape(self.entries, log)
        names = dict(names or {})
        taken = set(names.values())
        fresh = (n for n in _name_supply() if n not in taken)
        lines = []
        inputs = {}
        for node in self.entries:
            for p in node._parents:
                if p is not None and p._prim is None and id(p) not in inputs:
                    inputs[id(p)] = p
                    if id(p) not in names:
                        names[id(p)] = getattr(p, "name", None) or next(fresh)
        inputs = list(inputs.values())
        for p in inputs:
            lines.append(f"{names[id(p)]} = {_short(p.value)}")
        for node in self.entries:
            names.setdefault(id(node), getattr(node, "name", None) or next(fresh))
            lines.append(f"{names[id(node)]} = {_expression(node, names)}")
        return "\n".join(lines)

    def __str__(self):
        return self.listing(_caller_names(self))

    def __repr__(self):
        return f"<Tape: {len(self)} operations>"


def _refuse_mixing(operation, other):
    """A Tape records only its own variables: a value of another engine reaching it is an error."""
    if isinstance(other, Var):
        kind, engines = "a variable of another wg.Tape", "Two Tapes are separate engines"
    else:
        kind, engines = other._kind(), "A Tape is an engine separate from wg.grad, wg.jvp and eager tensors"
    given = "" if operation == "tape.var" else "a wg.Tape variable and "
    raise TypeError(
        f"{operation} was given {given}{kind}{_exits.where()}. {engines}: a Tape records "
        f"only its own variables, so the derivative would be lost. Use one "
        f"engine: make every input a variable of the one tape (tape.var(...)) and read z.grad().wrt(v), or "
        f"write the function without a Tape and differentiate it with wg.grad.")


def _inputs(node):
    return tuple(a if p is None else p for a, p in zip(node._args, node._parents))


def _name_supply():
    letters = [c for c in string.ascii_lowercase if c not in "xyz"]
    yield from letters
    for k in itertools.count(1):
        for c in letters:
            yield f"{c}{k}"


def _short(value):
    if type(value) is float:
        return repr(value)
    a = np.asarray(value)
    return repr(a.item()) if a.ndim == 0 else f"<array {a.shape} {a.dtype}>"


def _expression(node, names):
    args = [names.get(id(a), None) if isinstance(a, Var) else None for a in _inputs(node)]
    shown = [n if n is not None else _short(a) for n, a in zip(args, _inputs(node))]
    symbol = node._prim.operator  # the primitive's fact (wengert.core.extend.facts): "+", "@", ...
    if symbol is not None and len(shown) == 2:
        return f"{shown[0]} {symbol} {shown[1]}"
    if symbol is not None and len(shown) == 1:
        return f"{symbol}{shown[0]}"
    kw = [f"{k}={v!r}" for k, v in (node._kwargs or {}).items() if v is not None and v is not False]
    return f"{node._prim.__name__}({', '.join(shown + kw)})"


def _caller_names(tape):
    """Names the calling code gives to this tape's variables (for ``print(tape)``)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("wengert"):
        frame = frame.f_back
    names = {}
    if frame is None:
        return names
    for name, value in frame.f_locals.items():
        if isinstance(value, Var) and value._trace is tape and not name.startswith("_"):
            names.setdefault(id(value), name)
    return names
