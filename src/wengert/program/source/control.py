"""Structured control flow for programs built from source: ``If`` and ``Loop`` nodes around the IR's
straight-line ``Statement``s, and the Python code written for them.

A block is a list of nodes: ``Statement`` (one primitive, SSA), :class:`Assign` (``a, b = x, y``:
the copies that carry values into and out of loops and branches), :class:`If` (structured, with
phi outputs: each arm ends by giving its value of every output), :class:`Loop` (``for`` over a
range, ``while``, or the reverse pass's ``repeat n times``, with its loop-carried variables
explicit: ``headers`` hold them during an iteration, ``inits`` enter, ``body_outs`` leave each
iteration, ``outs`` hold them after the loop), and :class:`Push`/:class:`Pop` (the reverse pass's
stack). Variables are SSA within one execution of a block; loop headers are the only names bound
again, once per iteration, in the loop's own update. Their Python source is written by
``source.codegen``; ``source.SourceProgram`` holds a block built from a function's source.
"""

import numpy as np

from wengert.program.ir import Statement, Variable, vars_in

__all__ = ["TransformError", "Assign", "Zeros", "If", "Loop", "Push", "Pop", "reads", "defined", "all_names"]


class TransformError(TypeError):
    """A construct outside the subset of Python that the source transformation supports (``try``
    around traced computations, generators, ``global``, ``return`` inside a loop, ...). The tape (``wg.grad``)
    follows such code as it runs."""


class Assign:
    """``targets = values`` (simultaneously)."""

    __slots__ = ("targets", "values")

    def __init__(self, targets, values):
        self.targets = list(targets)
        self.values = list(values)


class Zeros:
    """A fresh buffer of zeros (``np.zeros(shape, dtype)``), for accumulators written in place."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    def source(self):
        kind = "" if self.dtype == np.float64 else f", dtype=np.{self.dtype.name}"
        return f"np.zeros({self.shape!r}{kind})"


class If:
    """``if cond: then else: orelse``, ending with ``outs = then_vals`` / ``outs = else_vals``.
    ``push_then``/``push_else``: what each arm pushes for the reverse pass (set by the adjoint)."""

    __slots__ = ("cond", "then", "orelse", "outs", "then_vals", "else_vals", "push_then", "push_else",
                 "lineno")

    def __init__(self, cond, then, orelse, outs=(), then_vals=(), else_vals=(), lineno=None):
        self.cond = cond
        self.then = list(then)
        self.orelse = list(orelse)
        self.outs = list(outs)
        self.then_vals = list(then_vals)
        self.else_vals = list(else_vals)
        self.push_then = []
        self.push_else = []
        self.lineno = lineno


class Loop:
    """A loop: ``kind`` is ``"for"`` (``index`` over ``range(*bounds)``), ``"while"`` (``cond_block``
    computes ``cond`` before each iteration) or ``"repeat"`` (``count`` times: the reverse loop).
    ``brk``: the body's break flag (a bool Variable, True, or None). ``count``: a Variable counting
    the iterations run (set by the adjoint, which needs the trip count); ``push``: what each
    iteration pushes on the stack for the reverse pass; ``stores``: ``(value, buffer)`` pairs, what
    each iteration stores at its number in a buffer of the trip count (``source.recompute``). A
    ``"repeat"`` loop with an ``index`` counts it down from ``count - 1`` to 0."""

    __slots__ = ("kind", "index", "bounds", "cond_block", "cond", "headers", "inits", "body",
                 "body_outs", "outs", "brk", "count", "push", "lineno", "fresh", "where",
                 "checkpoint", "stores")

    def __init__(self, kind, body, headers=(), inits=(), body_outs=(), outs=(), *, index=None, bounds=(),
                 cond_block=(), cond=None, brk=None, count=None, lineno=None):
        self.kind = kind
        self.index = index
        self.bounds = tuple(bounds)
        self.cond_block = list(cond_block)
        self.cond = cond
        self.headers = list(headers)
        self.inits = list(inits)
        self.body = list(body)
        self.body_outs = list(body_outs)
        self.outs = list(outs)
        self.brk = brk
        self.count = count
        self.push = []
        self.stores = []
        self.lineno = lineno
        self.fresh = []  # carried arrays updated in place: copied once, before the loop
        self.where = None  # "file, line N" of the loop in the user's source, for error messages
        self.checkpoint = None  # (policy, snapshots) from wg.checkpointed(...) around its range

    def copy(self, **changes):
        new = Loop(self.kind, self.body, self.headers, self.inits, self.body_outs, self.outs,
                   index=self.index, bounds=self.bounds, cond_block=self.cond_block, cond=self.cond,
                   brk=self.brk, count=self.count, lineno=self.lineno)
        new.push = list(self.push)
        new.stores = list(self.stores)
        new.fresh = list(self.fresh)
        new.where = self.where
        new.checkpoint = self.checkpoint
        for k, v in changes.items():
            setattr(new, k, v)
        return new


class Push:
    """``stack.append(values)``: what one iteration (or arm) leaves for the reverse pass."""

    __slots__ = ("vars",)

    def __init__(self, variables):
        self.vars = list(variables)


class Pop:
    """``values = stack.pop()``."""

    __slots__ = ("vars",)

    def __init__(self, variables):
        self.vars = list(variables)


# -- what a block reads and defines ----------------------------------------------------------------

def reads(nodes, found=None):
    """Every Variable a block reads (recursively, with repeats)."""
    found = [] if found is None else found
    for n in nodes:
        t = type(n)
        if t is Statement:
            found.extend(n.uses())
        elif t is Assign:
            vars_in(n.values, found)
        elif t is If:
            vars_in([n.cond] + n.then_vals + n.else_vals, found)
            reads(n.then, found)
            reads(n.orelse, found)
            found.extend(n.push_then + n.push_else)
        elif t is Loop:
            vars_in(list(n.bounds) + n.inits + n.body_outs + [n.cond, n.brk, n.count], found)
            reads(n.cond_block, found)
            reads(n.body, found)
            found.extend(n.push)
            found.extend(v for v, _ in n.stores)
        elif t is Push:
            found.extend(n.vars)
        elif hasattr(n, "node_reads"):  # checkpointed loops (source/checkpoint.py)
            n.node_reads(found)
    return found


def defined(nodes):
    """The Variables a block binds at its own level (not inside nested loops' and arms' scopes)."""
    out = []
    for n in nodes:
        t = type(n)
        if t is Statement:
            out.extend(n.outs)
        elif t is Assign:
            out.extend(n.targets)
        elif t is If:
            out.extend(n.outs)
        elif t is Loop:
            out.extend(n.outs)
            if n.count is not None:
                out.append(n.count)
            out.extend(b for _, b in n.stores)
        elif t is Pop:
            out.extend(n.vars)
        elif hasattr(n, "node_defined"):
            out.extend(n.node_defined())
    return out


def all_names(nodes, found=None):
    """Every Variable name bound anywhere in a block."""
    found = set() if found is None else found
    for n in nodes:
        found.update(v.name for v in defined([n]))
        if type(n) is If:
            all_names(n.then, found)
            all_names(n.orelse, found)
        elif type(n) is Loop:
            found.update(v.name for v in n.headers)
            if n.index is not None:
                found.add(n.index.name)
            all_names(n.cond_block, found)
            all_names(n.body, found)
        elif hasattr(n, "node_names"):
            n.node_names(found)
    return found


def scalar_index(idx):
    """Whether ``idx`` picks one element or a slice (no repeated positions: ``a[idx] += g`` is exact)."""
    parts = idx if type(idx) is tuple else (idx,)
    for p in parts:
        if type(p) is Variable:
            if p.shape != () or p.dtype.kind not in "iu":
                return False
        elif not (isinstance(p, (int, np.integer, slice)) or p is None or p is Ellipsis):
            return False
    return True
