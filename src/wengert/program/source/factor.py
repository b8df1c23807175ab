"""Factoring a reverse loop's scalar adjoints by their cotangents (statement-level preaccumulation),
for the store-all reverse pass of ``source.adjoint``.

Each step of a reverse sweep is linear in the cotangents it carries. Traced rule by rule, a step of
``z = z * b + 0.5 * sin(z)`` reads ``z_bar`` three times (``z_bar * 0.5 * cos(z) + z_bar * b``); the
hand-written adjoint multiplies it once, by the step's local derivative: ``z_bar * (b + 0.5 * cos(z))``.
This pass rewrites a reverse loop's body into that form. Every float64 scalar adjoint made by
``+``, ``-``, unary ``-`` and ``*`` by a value that is not a cotangent is kept as a *linear form*,
``source * weight``: the *source* a cotangent of the sweep that is not such a form itself, the weight
a product and sum of primal values computed where the original statement stood. Forms of the same
source add up (their weights add); a sum of two sources' forms is not a form (each written out, the
sum kept as it was: distributing it over several cotangents would be forward mode's work, a step's
whole Jacobian). A form is written out (``z_bar3 = z_bar * w2``) only where a value is read by
anything else (another kind of statement, a branch, a nested loop, the loop's carried adjoints, after
the loop), or, read by several statements, where it is made (then it is a source itself). A body
that comes out with more statements than it had is left as it was.

Why the value is the same (to rounding): the rewrite uses only the distributive and associative laws;
each weight reads the same primal values at the same place; and a form is written out before any
statement writes one of its sources (a nested loop's accumulator, the carried adjoint), so that its
sources still hold the values the original statements read. Why it matters: one multiplication per
cotangent and step instead of one per rule shortens the loop-carried chain, and a cotangent that
underflows reaches 0 as the hand-written loop's does, where the traced order could hold it at the
smallest subnormal for every later step (subnormal arithmetic runs tens of times slower).
"""

import numpy as np

from wengert.program.ir import Statement, Variable
from wengert.program.source.control import Assign, If, Loop, reads
from wengert.program.source.recompute import all_defined
from wengert.rules import elementwise as ew

__all__ = ["factor_reverse_loops", "factored"]

_ADD, _SUB, _MUL, _NEG = (f.primitive for f in (ew.add, ew.subtract, ew.multiply, ew.negative))
_FLOAT64 = np.dtype(np.float64)


class _Cycle(Exception):
    """Two forms read each other's variable as a source: the body is left as it was."""


def _number(a):
    return isinstance(a, (int, float)) and not isinstance(a, bool)


def _float_var(v):
    return type(v) is Variable and v.kind in ("float", "scalar") and v.shape == () and v.dtype == _FLOAT64


def _new(name, *operands):
    """A float64 scalar variable for the result of ``operands``: a NumPy scalar where one is, as NumPy
    and Python's arithmetic make it, else a Python float."""
    scalar = any(type(a) is Variable and a.kind == "scalar" for a in operands)
    return Variable(name, (), _FLOAT64, "scalar" if scalar else "float")


class _Factoring:
    def __init__(self, active, live, fresh):
        self.active = set(active)
        self.live = live
        self.fresh = fresh
        self.forms = {}  # variable not yet written -> {source: weight} (one source)
        self.out = []
        self.made = set()  # the weights' variables (dropped again where unread)
        self.busy = set()
        self.at = 0  # the position in the body of the node being rewritten
        self.last_read = {}  # variable -> the last position in the body that reads it
        self.readers = {}  # variable -> how many of the body's nodes read it

    # -- weights: primal arithmetic, emitted where the original statement stood --------------------
    def _weight(self, prim, args, fold):
        if all(_number(a) for a in args):
            return fold(*args)
        w = _new(self.fresh("w"), *args)
        self.out.append(Statement((w,), prim, args))
        self.made.add(w)
        return w

    def times(self, c, p):
        if _number(c) and c == 1:
            return p
        if _number(p) and p == 1:
            return c
        return self._weight(_MUL, (c, p), lambda x, y: x * y)

    def plus(self, c, d, sign):
        if sign > 0:
            return self._weight(_ADD, (c, d), lambda x, y: x + y)
        return self._weight(_SUB, (c, d), lambda x, y: x - y)

    def negated(self, c):
        return -c if _number(c) else self._weight(_NEG, (c,), lambda x: -x)

    # -- forms -------------------------------------------------------------------------------------
    def form(self, a):
        """``a``'s linear form, or None where ``a`` is primal (not a cotangent)."""
        if type(a) is not Variable:
            return None
        f = self.forms.get(a)
        if f is not None:
            return f
        return {a: 1.0} if a in self.active else None

    def linear(self, s):
        """``s``'s output as a linear form of its arguments' forms, or None (not a linear statement)."""
        if len(s.outs) != 1 or s.kwargs or not _float_var(s.out) or s.inplace:
            return None
        if not all(_float_var(a) or _number(a) for a in s.args):
            return None
        forms = [self.form(a) for a in s.args]
        if s.prim is _NEG and forms[0] is not None:
            return {k: self.negated(c) for k, c in forms[0].items()}
        if s.prim is _MUL and (forms[0] is None) != (forms[1] is None):
            f, p = (forms[0], s.args[1]) if forms[1] is None else (forms[1], s.args[0])
            return {k: self.times(c, p) for k, c in f.items()}
        if s.prim in (_ADD, _SUB) and forms[0] is not None and forms[1] is not None \
                and forms[0].keys() == forms[1].keys():  # one cotangent: never more work than the rules'
            ((k, c),), ((_, d),) = forms[0].items(), forms[1].items()
            return {k: self.plus(c, d, 1 if s.prim is _ADD else -1)}
        return None

    def write(self, v):
        """Emit ``v = source * weight`` from its form; first the forms that read ``v`` as a source."""
        self.before_writing([v])
        ((k, c),) = self.forms.pop(v).items()
        if not (_number(c) and c == 1):
            self.out.append(Statement((v,), _MUL, (k, c)))
        elif k is not v:
            self.out.append(Assign([v], [k]))

    def before_writing(self, written):
        """Write out every pending form with a source among ``written`` (they read its value now)."""
        written = set(written)
        self.busy |= written
        for u in [u for u, f in self.forms.items() if u not in written and written & f.keys()]:
            if u not in self.live and self.last_read.get(u, -1) < self.at:
                del self.forms[u]  # read by no one any more: dropped, not written
            elif u in self.busy:
                raise _Cycle()
            elif u in self.forms:
                self.write(u)
        self.busy -= written

    def node(self, n):
        if type(n) is Statement:
            f = self.linear(n)
            if f is not None:
                self.forms[n.out] = f  # written out later, where read (its sources stay as they are)
                self.active.add(n.out)
                if self.readers.get(n.out, 0) > 1:  # a form read twice would be multiplied twice
                    self.write(n.out)
                return
        read = reads([n])
        written = all_defined([n])
        for v in read:
            if v in self.forms:
                self.write(v)
        for v in written:  # a write in one arm of a branch keeps the other arm's value: written first
            if v in self.forms:
                self.write(v)
        self.before_writing(written)
        self.out.append(n)
        if any(v in self.active for v in read):
            self.active |= set(written)

    def finish(self):
        for v in [v for v in self.forms if v in self.live]:
            if v in self.forms:
                self.write(v)
        kept, used = [], set(self.live)
        for n in reversed(self.out):  # a weight no form read any more (its form was not needed)
            if type(n) is Statement and n.out in self.made and n.out not in used:
                continue
            kept.append(n)
            used.update(reads([n]))
        kept.reverse()
        return kept


def factored(body, active, live, fresh):
    """``body`` (a reverse loop's block) with its scalar adjoints factored by their cotangents (module
    docs); ``active``: the cotangents defined outside it (carried adjoints, accumulators); ``live``:
    the variables read after the body or by its next iteration; ``fresh``: the builder's new names."""
    f = _Factoring(active, live, fresh)
    for k, n in enumerate(body):
        read = set(reads([n]))
        f.last_read.update((v, k) for v in read)
        for v in read:
            f.readers[v] = f.readers.get(v, 0) + 1
    try:
        for k, n in enumerate(body):
            f.at = k
            f.node(n)
    except _Cycle:
        return body
    new = f.finish()
    return new if _arithmetic(new) <= _arithmetic(body) else body


def _arithmetic(nodes):
    return sum(type(n) is Statement for n in nodes)


def _read_before_written(body):
    seen, found = set(), set()
    for n in body:
        found |= {v for v in reads([n]) if v not in seen}
        seen |= all_defined([n])
    return found


def _reverse_loops(nodes):
    for n in nodes:
        if type(n) is Loop:
            if n.kind == "repeat":
                yield n
            yield from _reverse_loops(n.body)
        elif type(n) is If:
            yield from _reverse_loops(n.then)
            yield from _reverse_loops(n.orelse)


def factor_reverse_loops(nodes, outputs, active, fresh):
    """Factor the body of every reverse loop in ``nodes`` (a whole derivative program returning
    ``outputs``), in place; ``active``: the cotangents the reverse pass made."""
    for loop in list(_reverse_loops(nodes)):
        counts = {}
        for v in reads(nodes) + [o for o in outputs if type(o) is Variable]:
            counts[v] = counts.get(v, 0) + 1
        for v in reads(loop.body):
            counts[v] -= 1
        live = {v for v, k in counts.items() if k > 0} | _read_before_written(loop.body)
        loop.body = factored(loop.body, active, live, fresh)
