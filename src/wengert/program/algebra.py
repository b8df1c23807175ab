"""The algebraic rewrites, each a function from Program to Program (the input left unchanged), which
save operations where the algebra of particular primitives allows, recognised by identity:

- ``rewrite_algebra``: ``-(-x)``, ``a + (-b)``, a transpose of a transpose, ``(1 / s) * x``, the
  negation of a product moved to its smaller factor;
- ``factor_sums``: ``sum(c * x)`` as ``c * sum(x)``;
- ``factor_products``: ``g * b + g * c`` as ``g * (b + c)``.
"""

import numpy as np

from wengert.program.ir import Statement, Variable, binary, renamed
from wengert.program.passes import _is_const, _rewritten, _same_type, eliminate_dead_code, use_counts
from wengert.rules.broadcasting import sum as sum_
from wengert.rules.elementwise import add, multiply, negative, subtract, true_divide
from wengert.rules.shape import transpose

__all__ = ["factor_sums", "rewrite_algebra", "factor_products"]

_ADD, _MUL, _NEG, _DIV = add.primitive, multiply.primitive, negative.primitive, true_divide.primitive


def _full_sum(s):
    """The summed Variable when ``s`` sums all of an array's axes to a 0-d result, else None."""
    if s.prim is not sum_ or s.inplace or type(s.args[0]) is not Variable:
        return None
    x = s.args[0]
    kw = dict(s.kwargs)
    if len(s.args) > 1:
        kw["axis"] = s.args[1]
    if len(s.args) > 2 or set(kw) - {"axis", "keepdims"} or kw.get("keepdims", False) is not False:
        return None
    if x.kind != "array" or s.out.shape != () or not _all_axes(kw.get("axis"), len(x.shape)):
        return None
    return x


def _all_axes(axis, ndim):
    if axis is None:
        return True
    try:
        axes = (int(axis),) if np.ndim(axis) == 0 else tuple(int(a) for a in axis)
    except TypeError:
        return False
    return sorted(a % ndim for a in axes) == list(range(ndim)) if ndim else True


def _scalar_factor(s, y):
    """For ``s`` computing ``-y`` or ``c * y`` / ``y * c`` (``c`` 0-d, of y's dtype, y an array of the
    result's shape): ``(None, y)`` or ``(c, y)``; else None."""
    if s.kwargs or len(s.outs) != 1 or s.out.dtype.kind not in "fc":
        return None
    if s.prim is _NEG and len(s.args) == 1:
        return None, s.args[0]
    if s.prim is not _MUL or len(s.args) != 2:
        return None
    for c, x in ((s.args[0], s.args[1]), (s.args[1], s.args[0])):
        if type(x) is not Variable or x.kind != "array" or x.shape != s.out.shape or x.dtype != s.out.dtype:
            continue
        if type(c) is Variable:
            ok = c.shape == () and c.dtype == x.dtype and c.kind != "array"
        else:
            ok = isinstance(c, (float, np.floating, np.complexfloating)) and np.result_type(c) == x.dtype
        if ok:
            return c, x
    return None


def factor_sums(program):
    """``sum(c * x)`` becomes ``c * sum(x)`` and ``sum(-x)`` becomes ``-sum(x)`` (``c`` a 0-d value, the
    sum over all axes): scalar operations instead of array ones. Done where every array in between
    is used only there (they then disappear), or where ``sum(x)`` is computed already (it is then
    read, not computed again: the cotangent ``-sum(p / s)`` of a softmax's shift becomes
    ``-(1/s) * s``). Equal up to rounding (the sum of the products against the product of the sum)."""
    if sum_ not in program.census()[0]:
        return program
    counts = use_counts(program)
    producer = {o: s for s in program.statements for o in s.outs}
    sums = {}  # array Variable -> the Variable holding its full sum (computed earlier)
    stmts, changed = [], False
    for s in program.statements:
        x = _full_sum(s)
        if x is None:
            stmts.append(s)
            continue
        chain, y, single = [], x, True
        while y in producer:
            found = _scalar_factor(producer[y], y)
            if found is None:
                break
            single = single and counts.get(y, 0) == 1
            chain.append((found[0], producer[y].prim))
            y = found[1]
        if not chain or (y not in sums and not single) or y.dtype != s.out.dtype:
            if not chain:
                sums.setdefault(x, s.out)
            stmts.append(s)
            continue
        changed = True
        if y in sums:
            cur = sums[y]
        else:
            cur = Variable(f"{s.out.name}_s", (), s.out.dtype, s.out.kind)
            stmts.append(Statement((cur,), s.prim, (y,), {"axis": None}))
            sums[y] = cur
        for k, (c, prim) in enumerate(reversed(chain)):
            last = k == len(chain) - 1
            out = s.out if last else Variable(f"{s.out.name}_f{k}", (), s.out.dtype, s.out.kind)
            stmts.append(Statement((out,), prim, (cur,) if c is None else (c, cur)))
            cur = out
    if not changed:
        return program
    return eliminate_dead_code(program.with_statements(stmts))


def _axes(s):
    """The permutation a ``transpose`` statement applies (None reverses), or None if unknown."""
    axes = s.args[1] if len(s.args) > 1 else s.kwargs.get("axes")
    if set(s.kwargs) - {"axes"} or type(s.args[0]) is not Variable:
        return None
    n = len(s.args[0].shape)
    if axes is None:
        return tuple(range(n - 1, -1, -1))
    try:
        return tuple(int(a) % n for a in axes)
    except TypeError:
        return None


def rewrite_algebra(program):
    """Identities that save an operation, exact in floating point but for the last one:
    ``-(-x)`` is ``x``; ``a + (-b)`` and ``(-b) + a`` are ``a - b``; ``a - (-b)`` is ``a + b``;
    ``(-a) * x`` is ``a * (-x)`` where ``x`` is a constant or has fewer elements than ``a``;
    a transpose of a transpose is one transpose (none if they cancel); and ``(1 / s) * x`` is
    ``x / s`` where ``1 / s`` is used only there (one rounding instead of two)."""
    present = program.census()[0]
    if not present & {_NEG, transpose, _DIV}:  # what every rewrite starts from
        return program
    counts = use_counts(program) if present & {_DIV, _NEG} else {}
    producer = {}
    alias, stmts, changed = {}, [], False

    def look(v):
        while type(v) is Variable and v in alias:
            v = alias[v]
        return v

    def made_by(x, prim):
        s = producer.get(x) if type(x) is Variable else None
        return s if s is not None and s.prim is prim and not s.kwargs and not s.inplace else None

    for s in program.statements:
        s = _rewritten(s, alias, look)
        prim, args, out = s.prim, s.args, s.outs[0]
        new = None
        if len(s.outs) == 1 and not s.inplace and not s.kwargs:
            if prim is _NEG and made_by(args[0], _NEG) and _same_type(made_by(args[0], _NEG).args[0], out):
                alias[out] = made_by(args[0], _NEG).args[0]
                changed = True
                continue
            if prim is _ADD:
                for a, b in ((args[0], args[1]), (args[1], args[0])):
                    n = made_by(b, _NEG)
                    if n is not None:
                        new = Statement((out,), subtract.primitive, (a, n.args[0]))
                        break
            elif prim is subtract.primitive and made_by(args[1], _NEG):
                new = Statement((out,), _ADD, (args[0], made_by(args[1], _NEG).args[0]))
            elif prim is _MUL:
                for r, x in ((args[0], args[1]), (args[1], args[0])):
                    d = made_by(r, _DIV)
                    if d is not None and _is_const(d.args[0], 1) and counts.get(r, 0) == 1 and \
                            np.result_type(*(a.dtype if type(a) is Variable else a for a in
                                             (x, d.args[1]))) == out.dtype:
                        new = Statement((out,), _DIV, (x, d.args[1]))
                        break
                if new is None and out.dtype.kind in "fc":
                    new = _negation_moved(s, made_by, counts, stmts, producer)
        if prim is transpose and len(s.outs) == 1:
            inner = producer.get(args[0]) if type(args[0]) is Variable else None
            if inner is not None and inner.prim is transpose and not inner.inplace:
                p1, p2 = _axes(inner), _axes(s)
                if p1 is not None and p2 is not None:
                    composed = tuple(p1[j] for j in p2)
                    x = inner.args[0]
                    if composed == tuple(range(len(composed))) and _same_type(x, out):
                        alias[out] = x
                        changed = True
                        continue
                    new = Statement((out,), s.prim, (x, composed))
        if new is not None:
            s, changed = new, True
        for o in s.outs:
            producer[o] = s
        stmts.append(s)
    if not changed:
        return program
    outputs = [look(o) if type(o) is Variable else o for o in program.outputs]
    return eliminate_dead_code(program.with_statements(stmts, outputs))


def _size(x):
    return int(np.prod(x.shape)) if type(x) is Variable else int(np.size(x))


def _negation_moved(s, made_by, counts, stmts, producer):
    """For ``out = (-a) * x`` (either order; ``-a`` used only there): ``a * (-x)``, exactly equal, with
    the negation on the smaller operand: a constant (negated now) or a Variable of fewer elements
    (a statement added to ``stmts``). None when neither applies."""
    out = s.outs[0]
    for k in (0, 1):
        r, x = s.args[k], s.args[1 - k]
        n = made_by(r, _NEG)
        if n is None or counts.get(r, 0) != 1 or type(n.args[0]) is not Variable:
            continue
        a = n.args[0]
        if type(x) is Variable:
            if _size(x) >= _size(a) or x.dtype.kind not in "fc":
                continue
            neg = renamed(x, f"{x.name}_neg")
            stmts.append(Statement((neg,), _NEG, (x,)))
            producer[neg] = stmts[-1]
        elif isinstance(x, (float, complex, np.floating, np.complexfloating)) or (
                isinstance(x, np.ndarray) and x.dtype.kind in "fc"):
            neg = -x
        else:
            continue
        return Statement((out,), _MUL, (a, neg) if k == 0 else (neg, a))
    return None


def _index(seq, x):
    """The first ``k`` where ``seq[k] is x``, or None."""
    for k, y in enumerate(seq):
        if y is x:
            return k
    return None


def _factors(x, out, producer, counts, walked):
    """The operands of the product tree ending in ``x``, left to right, through multiplications
    used once and of ``out``'s type; None if ``x`` is no such product or an operand is of another
    type than ``out`` but a Python float. The products passed through are appended to ``walked``."""
    shape, dtype, kind = out.shape, out.dtype, out.kind
    floats = kind == "float"  # then _same_as is x.kind == "float" (a Python float: (), float64)
    s = producer.get(x)
    if s is None or s.kwargs or s.inplace or counts.get(x, 0) != 1 \
            or not (x.kind == "float" if floats else _same_as(x, shape, dtype, kind)):
        return None  # not a product of out's type used only here
    walked.append(x)
    found = []
    todo = list(reversed(s.args))
    while todo:
        x = todo.pop()
        if type(x) is not Variable:
            if type(x) is not float or dtype.kind != "f":
                return None
            found.append(x)
            continue
        if not (x.kind == "float" if floats else _same_as(x, shape, dtype, kind)):
            return None
        s = producer.get(x)
        if s is None or s.kwargs or s.inplace or counts.get(x, 0) != 1:
            found.append(x)
            continue
        walked.append(x)
        todo += reversed(s.args)
    return found


def _same_as(x, shape, dtype, kind):
    """Whether Variable ``x`` has this shape and dtype (and is a Python float where ``kind`` is)."""
    return x.shape == shape and (x.dtype is dtype or x.dtype == dtype) \
        and (x.kind == kind or (x.kind != "float" and kind != "float"))


def factor_products(program):
    """Distributivity: ``g * b + g * c`` becomes ``g * (b + c)`` (and likewise for ``-``, and for
    products of several factors: ``g * 0.5 * cos(z) + g * y`` is ``g * (0.5 * cos(z) + y)``), one
    multiplication less, where the products are used only there and every factor has the result's
    shape and type (no broadcasting), or is a Python float. Equal up to rounding."""
    if _MUL not in program.census()[0]:
        return program
    counts = use_counts(program)
    producer = {}  # Variable -> the multiplication computing it
    stmts, dead, fresh, common_reads, made = [], set(), [0], {}, []
    mul, plus, minus = _MUL, _ADD, subtract.primitive

    def product(parts, like):
        cur = parts[0]
        for part in parts[1:]:
            fresh[0] += 1
            v = renamed(like, f"{like.name}_p{fresh[0]}")
            made.append(v)
            stmts.append(binary(v, mul, cur, part))
            producer[v] = stmts[-1]
            cur = v
        return cur

    for s in program.statements:
        prim = s.prim
        if prim is mul:
            producer[s.outs[0]] = s
        elif (prim is plus or prim is minus) and len(args := s.args) == 2 and type(args[0]) is Variable \
                and type(args[1]) is Variable and args[0] in producer and args[1] in producer \
                and not s.kwargs and not s.inplace:
            out = s.outs[0]  # a sum of two products (the cheap tests first)
            if out.kind not in ("float", "array", "scalar") or out.dtype.kind not in "fc":
                stmts.append(s)
                continue
            walked = []
            fp = _factors(args[0], out, producer, counts, walked)
            fq = _factors(args[1], out, producer, counts, walked) if fp else None
            common = None
            for i, v in enumerate(fp if fq else ()):  # the first Variable of fp in fq, and where
                j = _index(fq, v) if type(v) is Variable else None
                if j is not None:
                    common, rest_p, rest_q = v, fp[:i] + fp[i + 1:], fq[:j] + fq[j + 1:]
                    break
            if common is not None:
                inner = renamed(out, f"{out.name}_d")
                made.append(inner)
                stmts.append(binary(inner, s.prim, product(rest_p, out), product(rest_q, out)))
                producer[inner] = stmts[-1]
                s = binary(out, mul, common, inner)
                producer[out] = s
                dead.update(walked)  # the products were read only by the sum they were taken from
                common_reads[common] = common_reads.get(common, 0) + 1
        stmts.append(s)
    if not dead:
        return program
    # it applies only multiplications and the sums it rewrote, of the types of results it had
    result = program.with_statements([s for s in stmts if s.outs[0] not in dead], census=program.census())
    result._counts = _counts_after(counts, dead, common_reads, made)
    return result


def _counts_after(counts, dead, common_reads, made):
    """``use_counts`` of ``factor_products``' result from its argument's (``counts``, left unchanged):
    each rewrite reads the operands of the products it removes (``dead``) once each, as they did,
    but the common factor once instead of twice (``common_reads``: how many times each was the
    common one), and its new variables (``made``) once each."""
    after = dict(counts)
    for v in dead:
        del after[v]
    for v, n in common_reads.items():
        after[v] -= n
    for v in made:
        after[v] = 1
    return after
