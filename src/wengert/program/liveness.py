"""What a program keeps alive: buffers freed after their last read, and values computed again.

- :func:`rematerialize`: a pass. An adjoint program reads forward values long after the forward
  statements that made them; each one it reads keeps a buffer alive all that time. Where an
  array ``y = f(x)`` (``f`` a one-argument elementwise function: ``sin``, ``exp``, ...) is read
  again late, and ``x`` is still read at that point anyway, the late reads get ``f(x)`` computed
  again there instead: ``y`` dies after its early reads, and ``x``, kept for its own sake, is
  all that the adjoint keeps (as a hand-written adjoint of ``a sin(x) + 0.1 x`` keeps only ``x``).
- :func:`deletions`: for the code generator, after which statement each array buffer is read
  for the last time, so that the generated function can ``del`` it there.
- :func:`scaled_adds`, :func:`negated_sums`: for the code generator, array statements written
  without a buffer of their own (``buf += g * w`` by ``w``'s ``adds_scaled`` fact: a max's
  cotangent added at the maxima alone; ``-sum(x)``).
"""

import numpy as np

from wengert.program.ir import Statement, Variable
from wengert.rules.broadcasting import sum as sum_
from wengert.rules.elementwise import add, multiply, negative

__all__ = ["rematerialize", "deletions", "read_through", "with_deletions", "scaled_adds",
           "negated_sums", "has_arrays", "REMAT_MIN_SIZE", "REMAT_MIN_GAP"]

_ADD, _MUL, _NEG = add.primitive, multiply.primitive, negative.primitive

REMAT_MIN_SIZE = 4096
"""Only arrays of at least this many elements are computed again: below it the buffer costs less
than the time of computing it twice."""

REMAT_MIN_GAP = 8
"""...and only where at least this many statements separate the early reads from the late ones."""


def has_arrays(program):
    """Whether a statement of ``program`` computes an array (only arrays are buffers)."""
    return program.census()[1]


def _recomputable(s):
    """Whether ``s`` is ``y = f(x)`` for a one-argument elementwise ``f`` on an array ``x`` (cheap
    to compute again, and a function of ``x`` alone), of at least ``REMAT_MIN_SIZE`` elements."""
    if len(s.outs) != 1 or len(s.args) != 1 or s.kwargs or s.inplace or s.prim.math_name is None:
        return False
    x, y = s.args[0], s.outs[0]
    return (type(x) is Variable and x.kind == "array" and y.kind == "array" and x.shape == y.shape
            and int(np.prod(y.shape)) >= REMAT_MIN_SIZE)


def rematerialize(program):
    """The program with the late reads of cheap elementwise results computed again from their
    argument where the argument is alive there anyway (see the module docs); the program itself
    when there is nothing to do. Values are unchanged: the same function of the same buffer.

    A buffer read twice or more is never written in place (``passes.accumulate_in_place`` writes
    only into buffers read once), so ``x`` holds the same values at the late read as at ``y``'s
    definition."""
    if not program.census()[1]:  # only arrays are recomputed
        return program
    stmts = program.statements
    candidates = [k for k, s in enumerate(stmts) if s.prim.math_name is not None and _recomputable(s)]
    if not candidates:
        return program
    reads = {}
    for k, s in enumerate(stmts):
        for v in s.uses():
            reads.setdefault(v, []).append(k)
    end = len(stmts)
    for o in program.outputs:
        if type(o) is Variable:
            reads.setdefault(o, []).append(end)
    before = {}  # statement index -> [statements computing values again, to insert before it]
    renamed = {}  # statement index -> {y: its value computed again}
    made = set()
    names = {v.name for v in program.inputs} | {o.name for s in stmts for o in s.outs}
    for k in candidates:
        s = stmts[k]
        x, y = s.args[0], s.outs[0]
        ry, rx = reads.get(y, ()), reads.get(x, ())
        if len(ry) < 2 or x in made or not rx or ry[-1] == end:
            continue
        last_x, best, prev = rx[-1], None, k
        for j, u in enumerate(ry):
            if u > last_x:
                break
            if j and u - prev >= REMAT_MIN_GAP and (best is None or u - prev > best[0]):
                best = (u - prev, j)
            prev = u
        if best is None:
            continue
        late = ry[best[1]:]
        name, n = f"{y.name}_r", 2
        while name in names:
            name, n = f"{y.name}_r{n}", n + 1
        names.add(name)
        again = Variable(name, y.shape, y.dtype, y.kind)
        before.setdefault(late[0], []).append(Statement((again,), s.prim, (x,)))
        for u in late:
            renamed.setdefault(u, {})[y] = again
        made.add(y)
    if not before:
        return program
    out = []
    for k, s in enumerate(stmts):
        out += before.get(k, ())
        swap = renamed.get(k)
        out.append(s.replaced(lambda v, swap=swap: swap.get(v, v)) if swap else s)
    return program.with_statements(out)


def deletions(reads, defined, keep):
    """``{i: [names]}``: the array buffers to delete after the ``i``-th generated statement, the
    last to read or define them. ``reads[i]`` and ``defined[i]`` are the Variables the ``i``-th
    statement reads and defines; names in ``keep`` (inputs, outputs) are never deleted. Buffers
    written in place keep their name (``a += b``), so liveness is by name."""
    last = {}
    for i, (r, d) in enumerate(zip(reads, defined)):
        for v in r:
            if v.kind == "array":
                last[v.name] = i
        for v in d:
            if v.kind == "array":
                last[v.name] = i
    found = {}
    for name, i in last.items():
        if name not in keep:
            found.setdefault(i, []).append(name)
    for names in found.values():
        names.sort()
    return found


def read_through(s, within, negated):
    """The Variables statement ``s`` reads as the code generator writes it: through the expressions
    written into it (``within``: an inlined temporary -> what it reads) and the negations written
    as ``-sum(x)`` (``negated``: the negation's result -> x)."""
    found = []
    for v in s.uses():
        if v in within:
            found += within[v]
        elif v in negated:
            found.append(negated[v])
        else:
            found.append(v)
    return found


def with_deletions(body, ends, dels):
    """``body`` (lines of a function's body) with ``del`` lines after the statements that read a
    buffer last (``ends[i]``: the body's length after the ``i``-th statement's lines; ``dels``:
    :func:`deletions`): memory held only as long as it is read."""
    if not dels:
        return body
    out, start = [], 0
    for i, end in enumerate(ends):
        out += body[start:end]
        start = end
        names = dels.get(i)
        if names:
            out.append(f"    del {', '.join(names)}")
    out += body[start:]
    return out


def scaled_adds(program, counts):
    """In-place accumulation ``buf += g * w``, ``g`` a scalar and ``w = f(*args)`` read only there, where
    ``f`` declares ``adds_scaled`` (``wengert.facts``): the three statements (and the dense ``w``:
    ``chooser_weights``', a max's cotangent, nearly all 0) written as one call ``adds_scaled(buf, g,
    *args)`` (the maxima updated alone), made whatever ``g`` is: the function gives those statements' values
    at every ``g`` (0 times a nan weight is nan, a nan ``g`` times a weight 0 too), the sign of a zero aside.
    Returns {statement: (function, arguments), or None to skip}."""
    producer = {st.outs[0]: st for st in program.statements}
    fused = {}
    for st in program.statements:
        if not (st.inplace and st.prim is _ADD) or type(st.args[1]) is not Variable:
            continue
        m = producer.get(st.args[1])
        if m is None or m.prim is not _MUL or counts.get(m.out) != 1:
            continue
        g, w = m.args if type(m.args[1]) is Variable and m.args[1] in producer else m.args[::-1]
        c = producer.get(w) if type(w) is Variable else None
        if (c is None or c.prim.adds_scaled is None or counts.get(w) != 1 or c.kwargs or len(c.outs) != 1
                or np.shape(g) != () or type(g) is not Variable or w.shape != st.args[0].shape):
            continue
        fused[c] = fused[m] = None
        fused[st] = (c.prim.adds_scaled, (st.args[0], g, *c.args))
    return fused


def negated_sums(program, counts):
    """``sum(-x)`` as ``-sum(x)`` (exactly equal: one negation of the sum instead of one per element):
    {negation statement: its argument} for negations read only by a sum."""
    readers = {}
    for st in program.statements:
        for v in st.uses():
            readers[v] = st
    found = {}
    for st in program.statements:
        if st.prim is _NEG and counts.get(st.out) == 1 and st.out.kind == "array":
            r = readers.get(st.out)
            if r is not None and r.prim is sum_ and r.args[0] is st.out and not r.inplace:
                found[st] = st.args[0]
    return found
