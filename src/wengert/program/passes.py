"""Passes: each a small function from Program to Program (the input program is left unchanged).

- ``eliminate_dead_code``: keep only what the outputs need (pruning).
- ``eliminate_common_subexpressions``: one statement per distinct (primitive, arguments).
- ``fold_constants``: evaluate statements on constants; drop ``x * 1``, ``x + 0``, and the zeros
  that linear operations carry (as JAX's symbolic zeros do, ``0 * x`` is taken as 0 even where x
  is inf or nan): the seeds' ones and zeros of an adjoint program disappear.
- ``explicit_dup``: every variable used once, through ``dup``.
- ``elide_broadcasts``: no ``broadcast_to`` copy where the operation using it broadcasts anyway.
- ``accumulate_in_place``: ``a = a + b`` becomes ``a += b``, and ``a + untake(e, i)`` (of a's shape)
  ``a[i] += e``, where ``a`` is a buffer this program allocated and uses nowhere else.
"""

import numpy as np

from wengert.program.ir import Statement, Variable, binary, dup, map_vars, renamed, zero_of
from wengert.program.liveness import has_arrays
from wengert.rules.elementwise import add, multiply, negative, subtract, true_divide
from wengert.rules.indexing import index_add, untake

__all__ = ["use_counts", "eliminate_dead_code", "eliminate_common_subexpressions", "fold_constants",
           "explicit_dup", "accumulate_in_place", "elide_broadcasts", "factor_sums", "rewrite_algebra",
           "factor_products"]


def use_counts(program):
    """How many times each Variable is read (by statements and as an output)."""
    counts = {}
    get = counts.get
    for s in program.statements:
        uses = s._uses  # s.uses(), once computed (the common case: a long program's every statement)
        for v in uses if uses is not None else s.uses():
            counts[v] = get(v, 0) + 1
    for o in program.outputs:
        if type(o) is Variable:
            counts[o] = counts.get(o, 0) + 1
    return counts


def _substituted(program, statements, alias):
    """The program with ``statements``, every Variable ``v`` read as ``alias.get(v, v)``."""
    def look(v):
        while v in alias:
            v = alias[v]
            if type(v) is not Variable:
                break
        return v

    stmts = [_rewritten(s, alias, look) for s in statements]
    outputs = [look(o) if type(o) is Variable else o for o in program.outputs]
    return program.with_statements(stmts, outputs)


def _rewritten(s, alias, look):
    """``s`` with its arguments read through ``look`` -- ``s`` itself when none is in ``alias``
    (most statements: rebuilding every one would make the passes several times slower)."""
    if not alias:
        return s
    for a in s.args:
        t = type(a)
        if (t is Variable and a in alias) or t is tuple or t is list or t is dict:
            return s.replaced(look)
    return s.replaced(look) if s.kwargs else s


def eliminate_dead_code(program):
    """Only the statements the outputs depend on, in their order."""
    live = {o for o in program.outputs if type(o) is Variable}
    kept = []
    for s in reversed(program.statements):
        outs = s.outs
        if outs[0] in live or (len(outs) > 1 and any(o in live for o in outs)):
            kept.append(s)
            uses = s._uses  # s.uses(), once computed
            live.update(uses if uses is not None else s.uses())
    kept.reverse()
    return program.with_statements(kept)


def _key(x):
    t = type(x)
    if t is Variable:
        return ("var", id(x))
    if t is float:
        return ("float", repr(x))
    if t is tuple or t is list:
        return (t.__name__,) + tuple(_key(v) for v in x)
    if t is dict:
        return ("dict",) + tuple((k, _key(v)) for k, v in x.items())
    if t is slice:
        return ("slice", _key(x.start), _key(x.stop), _key(x.step))
    if isinstance(x, np.ndarray):
        if x.size <= 4096:
            return ("array", x.shape, x.dtype.str, x.tobytes())
        return ("id", id(x))
    try:
        hash(x)
    except TypeError:
        return ("id", id(x))
    return (type(x).__name__, x)


def eliminate_common_subexpressions(program):
    """A statement repeating an earlier one (same primitive, same arguments) is dropped and its
    result read from the earlier one."""
    seen, alias, kept = {}, {}, []
    for s in program.statements:
        s = _rewritten(s, alias, lambda v: alias.get(v, v))
        if s.prim is dup or len(s.outs) != 1:
            kept.append(s)
            continue
        key = (id(s.prim), _key(s.args), _key(s.kwargs))
        if key in seen:
            alias[s.out] = seen[key]
        else:
            seen[key] = s.out
            kept.append(s)
    return _substituted(program, kept, alias)


def _is_const(x, value):
    t = type(x)
    if t is float or t is int:  # the common cases first (bool is neither)
        return x == value
    if t is Variable or isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (int, float, np.number)):
        return x == value
    if isinstance(x, np.ndarray) and x.dtype.kind in "iufc" and x.size:
        return bool((x == value).all())
    return False


def _same_type(a, out):
    """Whether Variable ``a`` may stand for ``out`` (same shape and dtype; floats stay floats)."""
    return (type(a) is Variable and a.shape == out.shape and (a.dtype is out.dtype or a.dtype == out.dtype)
            and (a.kind == out.kind or "float" not in (a.kind, out.kind)))


def _fold(s):
    """What statement ``s`` simplifies to (a Variable or a constant), or None."""
    name, args, out = s.prim.__name__, s.args, s.outs[0]
    if s.prim is dup:
        return None
    if not s.uses():
        with np.errstate(all="ignore"):
            value = s.prim.fun(*args, **s.kwargs)
        return value if not isinstance(value, tuple) else None
    for i in s.prim.linear:
        if i < len(args) and _is_const(args[i], 0):  # a zero makes zero
            return zero_of(out)
    if name == "multiply":  # each rule below is for one name: none of the later ones applies
        for x, c in ((args[0], args[1]), (args[1], args[0])):
            if _is_const(c, 1) and _same_type(x, out):
                return x
        return None
    if name in ("add", "subtract") and _is_const(args[1], 0) and _same_type(args[0], out):
        return args[0]
    if name == "add":
        return args[1] if _is_const(args[0], 0) and _same_type(args[1], out) else None
    if name in ("true_divide", "power") and _is_const(args[1], 1) and _same_type(args[0], out):
        return args[0]
    if name in ("broadcast_to", "reshape", "astype") and _same_type(args[0], out):
        return args[0]
    if name == "where" and _is_const(args[1], 0) and _is_const(args[2], 0):
        return zero_of(out)
    if name in ("zeros_like", "ones_like") and out.kind == "array":  # only the shape is read
        return np.zeros(out.shape, out.dtype) if name == "zeros_like" else np.ones(out.shape, out.dtype)
    return None


def _negated(s):
    """``x`` when statement ``s`` computes ``0 - x``, ``-1 * x`` or ``x * -1`` (of x's type)."""
    name, args = s.prim.__name__, s.args
    if name == "subtract" and _is_const(args[0], 0) and _same_type(args[1], s.out):
        return args[1]
    if name == "multiply":
        for x, c in ((args[0], args[1]), (args[1], args[0])):
            if _is_const(c, -1) and _same_type(x, s.out):
                return x
    return None


def fold_constants(program):
    """Replace statements that simplify (see module docs) by their value or their argument."""
    alias, kept = {}, []

    def look(v):
        while type(v) is Variable and v in alias:
            v = alias[v]
        return v

    for s in program.statements:
        s = _rewritten(s, alias, look)
        negated = _negated(s)
        if negated is not None:
            s = Statement(s.outs, negative.primitive, (negated,))
        folded = _fold(s)
        if folded is None:
            kept.append(s)
        else:
            alias[s.out] = folded
    stmts = kept
    outputs = [look(o) if type(o) is Variable else o for o in program.outputs]
    return program.with_statements(stmts, outputs)


def explicit_dup(program):
    """Insert ``(v_1, v_2, ...) = dup(v)`` after the definition of every variable read more than
    once, and give each read its own copy: afterwards every variable is used exactly once."""
    counts = use_counts(program)
    copies = {}

    def dup_after(v):
        n = counts.get(v, 0)
        if n <= 1:
            return []
        outs = [Variable(f"{v.name}_{k + 1}", v.shape, v.dtype, v.kind) for k in range(n)]
        copies[v] = iter(outs)
        return [Statement(outs, dup, (v, n))]

    def take(v):
        it = copies.get(v)
        return next(it) if it is not None else v

    stmts = []
    for v in program.inputs:
        stmts += dup_after(v)
    for s in program.statements:
        stmts.append(s.replaced(take))
        for o in s.outs:
            stmts += dup_after(o)
    outputs = [take(o) if type(o) is Variable else o for o in program.outputs]
    return program.with_statements(stmts, outputs)


def accumulate_in_place(program):
    """Mark accumulations into owned, once-used buffers as in place (see module docs)."""
    if not has_arrays(program):  # only arrays are buffers
        return program
    counts = use_counts(program)
    producer = {o: s for s in program.statements for o in s.outs}
    owned = set()
    alias, stmts, dropped = {}, [], set()

    def look(v):
        return alias.get(v, v)

    for s in program.statements:
        s = _rewritten(s, alias, look)
        out = s.outs[0]
        if s.prim.fresh and out.kind == "array":  # a new buffer: this program owns it
            owned.add(out)
        if s.prim.__name__ == "add" and not s.kwargs:
            done = _in_place_add(s, counts, owned, producer, dropped, look)
            if done is not None:
                counts[done.out] = counts.get(out, 0)
                alias[out] = done.out
                owned.add(done.out)
                s = done
        stmts.append(s)
    outputs = [look(o) if type(o) is Variable else o for o in program.outputs]
    if dropped:  # an untake every use of which became ``a[i] += e`` is read no more
        stmts = [s for s in stmts if not (s.out in dropped and counts.get(s.out, 0) == 0)]
    return program.with_statements(stmts, outputs)


def _buffer_ok(a, out, counts, owned):
    """Arrays only: for immutable scalars ``a += b`` would only rebind a name."""
    if type(a) is not Variable or counts.get(a, 0) != 1 or a.shape != out.shape or a.dtype != out.dtype:
        return False
    return a in owned and out.kind == "array"


def _in_place_add(s, counts, owned, producer, dropped, look):
    out = s.out
    for a, b in ((s.args[0], s.args[1]), (s.args[1], s.args[0])):
        if not _buffer_ok(a, out, counts, owned):
            continue
        renamed = Variable(a.name, out.shape, out.dtype, out.kind)
        u = producer.get(b) if type(b) is Variable else None
        if (u is not None and u.prim is untake and type(u.args[0]) is Variable and b.shape == a.shape
                and np.can_cast(u.args[0].dtype, a.dtype, "same_kind")):
            # a + untake(e, i) reads only e and i; the untake goes when no use is left (v[i] * v[i]: two).
            # Only an untake of a's shape: one that broadcasts in the sum (an elided broadcast_to of
            # sum(keepdims=True)'s cotangent) has i index another array, and stays a + untake.
            counts[b] -= 1
            dropped.add(b)
            e, idx = map_vars(u.args[0], look), map_vars(u.args[1], look)
            return Statement((renamed,), index_add, (a, idx, e), inplace=True)
        return Statement((renamed,), s.prim, (a, b), inplace=True)
    return None


def _shape(x):
    return x.shape if type(x) is Variable else np.shape(x)


def elide_broadcasts(program):
    """Drop ``broadcast_to(x, s)`` when every use is a broadcasting elementwise primitive that
    reaches shape ``s`` anyway: NumPy broadcasts inside the operation, without the copy."""
    if not any(s.prim.__name__ == "broadcast_to" for s in program.statements):
        return program
    users = {}
    for s in program.statements:
        for v in s.uses():
            users.setdefault(v, []).append(s)
    outputs = {o for o in program.outputs if type(o) is Variable}
    alias = {}
    for s in program.statements:
        if s.prim.__name__ != "broadcast_to" or s.out in outputs or type(s.args[0]) is not Variable:
            continue
        x, b = s.args[0], s.out
        ok = True
        for u in users.get(b, []):
            if not u.prim.broadcasts or u.kwargs:
                ok = False
                break
            # with the broadcasts already dropped: two dropped at once may together lose the shape
            shapes = [x.shape if a is b else _shape(alias.get(a, a) if type(a) is Variable else a)
                      for a in u.args]
            try:
                ok = np.broadcast_shapes(*shapes) == u.out.shape
            except ValueError:
                ok = False
            if not ok:
                break
        if ok:
            alias[b] = x
    if not alias:
        return program
    return eliminate_dead_code(_substituted(program, program.statements, alias))


def _full_sum(s):
    """The summed Variable when ``s`` sums all of an array's axes to a 0-d result, else None."""
    if s.prim.__name__ != "sum" or s.inplace or type(s.args[0]) is not Variable:
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
    name = s.prim.__name__
    if s.kwargs or len(s.outs) != 1 or s.out.dtype.kind not in "fc":
        return None
    if name == "negative" and len(s.args) == 1:
        return None, s.args[0]
    if name != "multiply" or len(s.args) != 2:
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
    if not any(s.prim.__name__ == "sum" for s in program.statements):
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
    a transpose of a transpose is one transpose (none if they cancel); and ``(1 / s) * x`` is
    ``x / s`` where ``1 / s`` is used only there (one rounding instead of two)."""
    present = {s.prim.__name__ for s in program.statements}
    if not present & {"negative", "transpose", "true_divide"}:  # what every rewrite starts from
        return program
    counts = use_counts(program) if "true_divide" in present else {}
    producer = {}
    alias, stmts, changed = {}, [], False

    def look(v):
        while type(v) is Variable and v in alias:
            v = alias[v]
        return v

    def made_by(x, name):
        s = producer.get(x) if type(x) is Variable else None
        return s if s is not None and s.prim.__name__ == name and not s.kwargs and not s.inplace else None

    for s in program.statements:
        s = _rewritten(s, alias, look)
        name, args, out = s.prim.__name__, s.args, s.outs[0]
        new = None
        if len(s.outs) == 1 and not s.inplace and not s.kwargs:
            if name == "negative" and made_by(args[0], "negative") and _same_type(
                    made_by(args[0], "negative").args[0], out):
                alias[out] = made_by(args[0], "negative").args[0]
                changed = True
                continue
            if name == "add":
                for a, b in ((args[0], args[1]), (args[1], args[0])):
                    n = made_by(b, "negative")
                    if n is not None:
                        new = Statement((out,), subtract.primitive, (a, n.args[0]))
                        break
            elif name == "subtract" and made_by(args[1], "negative"):
                new = Statement((out,), add.primitive, (args[0], made_by(args[1], "negative").args[0]))
            elif name == "multiply":
                for r, x in ((args[0], args[1]), (args[1], args[0])):
                    d = made_by(r, "true_divide")
                    if d is not None and _is_const(d.args[0], 1) and counts.get(r, 0) == 1 and \
                            np.result_type(*(a.dtype if type(a) is Variable else a for a in
                                             (x, d.args[1]))) == out.dtype:
                        new = Statement((out,), true_divide.primitive, (x, d.args[1]))
                        break
        if name == "transpose" and len(s.outs) == 1:
            inner = producer.get(args[0]) if type(args[0]) is Variable else None
            if inner is not None and inner.prim.__name__ == "transpose" and not inner.inplace:
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
    found, todo, top = [], [x], True
    while todo:
        x = todo.pop()
        if type(x) is not Variable:
            if top or type(x) is not float or dtype.kind != "f":
                return None
            found.append(x)
            continue
        same = x.shape == shape and (x.dtype is dtype or x.dtype == dtype) \
            and (x.kind == kind or "float" not in (x.kind, kind))
        s = producer.get(x)
        if s is None or s.kwargs or s.inplace or counts.get(x, 0) != 1 or not same:
            if top or not same:
                return None
            found.append(x)
            continue
        top = False
        walked.append(x)
        todo += reversed(s.args)
    return found


def factor_products(program):
    """Distributivity: ``g * b + g * c`` becomes ``g * (b + c)`` (and likewise for ``-``, and for
    products of several factors: ``g * 0.5 * cos(z) + g * y`` is ``g * (0.5 * cos(z) + y)``), one
    multiplication less, where the products are used only there and every factor has the result's
    shape and type (no broadcasting), or is a Python float. Equal up to rounding."""
    if not any(s.prim.__name__ == "multiply" for s in program.statements):
        return program
    counts = use_counts(program)
    producer = {}  # Variable -> the multiplication computing it
    stmts, dead, fresh = [], set(), [0]
    mul, plus, minus = multiply.primitive, add.primitive, subtract.primitive

    def product(parts, like):
        cur = parts[0]
        for part in parts[1:]:
            fresh[0] += 1
            v = renamed(like, f"{like.name}_p{fresh[0]}")
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
                stmts.append(binary(inner, s.prim, product(rest_p, out), product(rest_q, out)))
                producer[inner] = stmts[-1]
                s = binary(out, mul, common, inner)
                producer[out] = s
                dead.update(walked)  # the products were read only by the sum they were taken from
        stmts.append(s)
    if not dead:
        return program
    return program.with_statements([s for s in stmts if s.outs[0] not in dead])
