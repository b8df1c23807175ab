"""Functional updates of loop-carried arrays written in place (linearity: each adjoint is used once).

``out[i] = e`` in a loop is a functional update: ``out2 = index_update(out, i, e)``, a copy of the
array per iteration. When the carried array ``out`` is read by nothing else in the body but scalar
reads ``out[j]`` before the update, and the updated array ``out2`` by nothing but the loop's carry
(and neither is kept for the reverse pass), the old value is dead once updated: the update is
written ``out[i] = e`` in place, the loop copying the array once before it starts. The reverse
loop's ``x_bar = index_update(c, i, 0.0)`` (the adjoint of the update) is rewritten the same way.
"""

from wengert.program.ir import Statement, Variable, vars_in
from wengert.program.source.control import Assign, If, Loop, reads, scalar_index
from wengert.rules.elementwise import add
from wengert.rules.indexing import getitem, index_add, index_update, untake

__all__ = ["update_in_place"]

_UPDATES = (index_update, index_add)


def update_in_place(nodes):
    """A copy of the block with eligible functional updates in loops made in place."""
    out = []
    for n in nodes:
        if type(n) is If:
            new = If(n.cond, update_in_place(n.then), update_in_place(n.orelse), n.outs, n.then_vals,
                     n.else_vals, n.lineno)
            new.push_then, new.push_else = n.push_then, n.push_else
            n = new
        elif type(n) is Loop:
            n = n.copy(body=update_in_place(n.body))
            _loop(n)
        out.append(n)
    return out


def _carried(loop):
    """(carried Variable, its value at the end of an iteration) pairs, and whether the last pair
    comes from the body's final Assign (the reverse loops carry adjoints that way)."""
    if loop.kind != "repeat":
        return list(zip(loop.headers, loop.body_outs))
    last = loop.body[-1] if loop.body else None
    if type(last) is Assign:
        return list(zip(last.targets, last.values))
    return []


def _loop(loop):
    body = loop.body
    final = body[-1] if loop.kind == "repeat" and body and type(body[-1]) is Assign else None
    protected = set(loop.push) | {v for v in [loop.brk, loop.cond] if type(v) is Variable}
    protected.update(reads(loop.cond_block))
    for h, o in _carried(loop):
        if type(h) is not Variable or type(o) is not Variable or h.kind != "array" or o is h:
            continue
        if h in protected or o in protected:
            continue
        plan = _plan(body, h, o, final)
        if plan is None:
            continue
        for k, stmt in plan:
            body[k] = stmt
        loop.fresh.append(h)


def _plan(body, h, o, final):
    """The rewrites making the update of ``h`` (ending as ``o``) in place, or None."""
    at = None
    for k, n in enumerate(body):
        if n is final or h not in reads([n]):
            continue
        if type(n) is not Statement:
            return None
        if n.prim in _UPDATES and not n.inplace and n.args[0] is h and h not in _vars(n.args[1:]) \
                and at is None and n.out.shape == h.shape:
            at = k
        elif not (at is None and n.prim is getitem.primitive and n.args[0] is h
                  and n.out.kind in ("float", "scalar") and h not in _vars(n.args[1:])):
            return None
    if at is None:
        return None
    s = body[at]
    if s.prim is index_add and not scalar_index(s.args[1]):
        return None
    plan = [(at, Statement(s.outs, s.prim, s.args, s.kwargs, inplace=True))]
    owned = s.out
    while owned is not o:
        step = _scatter_add(body, owned, final)
        if step is None:
            return None
        plan += step[0]
        owned = step[1]
    if any(o in reads([n]) for n in body if n is not final):
        return None
    return plan


def _scatter_add(body, owned, final):
    """``b = owned + untake(g, idx, shape)`` (the adjoint of a read ``x[idx]``), where nothing else
    reads ``owned`` or the untake, as ``owned[idx] += g``: (rewrites, b), or None."""
    readers = [k for k, n in enumerate(body) if n is not final and owned in reads([n])]
    if len(readers) != 1 or type(body[readers[0]]) is not Statement:
        return None
    k = readers[0]
    s = body[k]
    if s.prim is not add.primitive or s.inplace or len(s.args) != 2 or s.args[0] is not owned:
        return None
    c = s.args[1]
    src = next((j for j, n in enumerate(body[:k]) if type(n) is Statement and n.outs == (c,)), None)
    if type(c) is not Variable or src is None or body[src].prim is not untake \
            or s.out.shape != owned.shape or c.shape != owned.shape:  # idx indexes an array of c's shape
        return None
    if sum(1 for n in body if n is not final and c in reads([n])) != 1:
        return None
    g, idx, _shape = body[src].args
    if not scalar_index(idx) or owned in _vars([g, idx]):
        return None
    return [(src, Assign([], [])), (k, Statement((s.out,), index_add, (owned, idx, g), inplace=True))], s.out


def _vars(obj):
    return vars_in(obj)
