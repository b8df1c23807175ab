"""What a reversed loop keeps for its reverse sweep, and what the sweep recomputes instead ("to be
recorded" analysis), for the store-all reverse pass of ``source.adjoint``.

The reverse sweep of an iteration reads some of the values that iteration computed. Each of them is

* **recomputed** where that is cheap and gives provably the same value: the induction variable of
  ``for i in range(a, b, s)`` (``i = a + k * s`` from the sweep's position k, running from the number
  of iterations run minus one down to 0, an iteration left by ``break`` included); a read ``x[idx]``
  (ints and constant slices: no fancy index, no copy) and scalar ``+ - *`` and comparisons, whose
  operands are recomputed or defined outside the loop (or branch). Why the operands are unchanged:
  the program is SSA -- a write (``x[j] = e``, ``x += e``, a write through a view) makes a new
  variable, it never changes ``x`` -- and the only writes in place (``source.inplace``) go to a
  loop's carried array after the loop copied it, when nothing in that loop's body but scalar reads
  before the write sees it: not to a variable defined outside the loop that a nested loop reads;
* **stored** by a ``for`` loop whose trip count is known when the program is generated, if a scalar:
  in a buffer of the trip count indexed by the iteration's number (``s_saved[n] = s``; a NumPy array
  on Numba, a list in Python), read back as ``s = s_saved[i]``;
* otherwise **pushed** on the stack (``stack.append``), as before.
"""

import numpy as np

from wengert.program.ir import Statement, Variable
from wengert.program.source.control import If, Loop, Pop, defined
from wengert.rules import elementwise as ew
from wengert.rules import nondiff
from wengert.rules.indexing import getitem

__all__ = ["recomputed", "reverse_loop", "all_defined"]


def _primitive(f):
    return getattr(f, "primitive", f)


_SCALAR_OPS = frozenset(_primitive(f) for f in (ew.add, ew.subtract, ew.multiply, ew.negative, nondiff.equal,
                                                 nondiff.not_equal, nondiff.less, nondiff.less_equal,
                                                 nondiff.greater, nondiff.greater_equal))


def all_defined(nodes, found=None):
    """Every Variable bound inside ``nodes``, at any depth (loop headers and indices included)."""
    found = set() if found is None else found
    for n in nodes:
        found.update(defined([n]))
        if type(n) is If:
            all_defined(n.then, found)
            all_defined(n.orelse, found)
        elif type(n) is Loop:
            found.update(n.headers)
            if n.index is not None:
                found.add(n.index)
            all_defined(n.cond_block, found)
            all_defined(n.body, found)
    return found


def _int_constant(c):
    return isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_))


def _basic_index(idx):
    """Whether ``x[idx]`` reads without copying: int scalars and slices of constants."""
    for p in idx if type(idx) is tuple else (idx,):
        if type(p) is Variable:
            if p.shape != () or p.dtype.kind not in "iu":
                return False
        elif type(p) is slice:
            if not all(e is None or _int_constant(e) for e in (p.start, p.stop, p.step)):
                return False
        elif not (_int_constant(p) or p is None or p is Ellipsis):
            return False
    return True


def _cheap(stmt):
    """Whether ``stmt`` is as cheap to run again as to keep its value."""
    if len(stmt.outs) != 1:
        return False
    if stmt.prim is getitem.primitive:
        return len(stmt.args) == 2 and _basic_index(stmt.args[1]) and not stmt.kwargs
    if stmt.prim in _SCALAR_OPS:
        return stmt.out.shape == () and all(np.shape(a) == () for a in stmt.args if type(a) is Variable) and \
            not any(isinstance(a, np.ndarray) for a in stmt.args)
    return False


def recomputed(body, need, inside, index=None):
    """``(statements, rest)``: the statements of ``body`` (a block's top level, in order) that recompute
    the values of ``need`` that can be recomputed, and the values of ``need`` that cannot. ``inside``:
    every Variable bound inside the loop or branch (any other is the same in the reverse sweep as in
    the forward one); ``index``: the loop's induction variable, which the sweep recomputes itself."""
    defs = {n.out: n for n in body if type(n) is Statement and len(n.outs) == 1}
    known = {}

    def can(v):
        if v is index or v not in inside:
            return True
        if v not in known:
            known[v] = False  # (SSA: no cycles; a guard all the same)
            s = defs.get(v)
            known[v] = s is not None and _cheap(s) and all(can(u) for u in s.uses())
        return known[v]

    chosen, todo = set(), [v for v in need if v is not index and can(v)]
    while todo:
        v = todo.pop()
        if v in chosen or v is index or v not in inside:
            continue
        chosen.add(v)
        todo.extend(defs[v].uses())
    statements = [Statement(n.outs, n.prim, n.args, n.kwargs) for n in body
                  if type(n) is Statement and n.outs[0] in chosen and len(n.outs) == 1]
    return statements, [v for v in need if v not in chosen and v is not index]


def _trip_count(loop):
    """The trip count of a ``for`` loop over a range known when generating (an upper bound if it
    may break), or None."""
    if loop.kind != "for" or not all(_int_constant(b) for b in loop.bounds):
        return None
    return len(range(*(int(b) for b in loop.bounds)))


def _storable(v):
    return v.shape == () and v.kind in ("float", "int", "bool", "scalar", "complex")


def reverse_loop(node, fwd_body, rev, need, count, fresh):
    """The reverse loop of the store-all loop ``node`` (its forward body ``fwd_body``, reverse body
    ``rev`` without its loads, ``need``: the loop's values that ``rev`` reads, ``count``: its
    iteration counter), and ``(push, stores)`` for the forward loop: the values pushed on the stack,
    and ``(value, buffer)`` pairs of the values stored by iteration number. ``rev`` is changed."""
    index = node.index if node.kind == "for" else None
    inside = all_defined(fwd_body) | set(node.headers) | ({index} if index is not None else set())
    again, rest = recomputed(fwd_body, need, inside, index)
    uses_index = index is not None and any(index in s.uses() for s in again) or index in need
    trip = _trip_count(node)
    stores = [(v, Variable(fresh(f"{v.name}_saved"), (trip,), v.dtype, "array"))
              for v in rest if trip is not None and _storable(v)]
    stored = {v for v, _ in stores}
    push = [v for v in rest if v not in stored]
    position, prefix = None, []
    if uses_index or stores:
        start, _stop, step = node.bounds if index is not None else (0, None, 1)
        if index is not None and _is(start, 0) and _is(step, 1):
            position = index  # for i in range(n - 1, -1, -1)
        else:
            position = Variable(fresh("k"), (), np.int64, "int")
            if uses_index:
                prefix += _index_of(position, start, step, index, fresh)
    loads = [Statement((v,), getitem.primitive, (buf, position)) for v, buf in stores]
    rev[:0] = ([Pop(push)] if push else []) + loads + prefix + again
    return Loop("repeat", rev, count=count, index=position, lineno=node.lineno), push, stores


def _is(b, value):
    return _int_constant(b) and int(b) == value


def _index_of(position, start, step, index, fresh):
    """Statements computing ``index = start + position * step``."""
    add, mul = _primitive(ew.add), _primitive(ew.multiply)
    if _is(start, 0):
        return [Statement((index,), mul, (position, step))]
    if _is(step, 1):
        return [Statement((index,), add, (start, position))]
    scaled = Variable(fresh("kstep"), (), np.int64, "int")
    return [Statement((scaled,), mul, (position, step)), Statement((index,), add, (start, scaled))]
