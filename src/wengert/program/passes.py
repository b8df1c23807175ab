"""Passes: each a small function from Program to Program (the input program is left unchanged).

- ``eliminate_dead_code``: keep only what the outputs need (pruning).
- ``eliminate_common_subexpressions``: one statement per distinct (primitive, arguments).
- ``fold_constants``: evaluate statements on constants; drop ``x * 1``, ``x + 0``, ``x ** 0``, and the zeros
  that linear operations carry (as JAX's symbolic zeros do, ``0 * x`` is taken as 0 even where x
  is inf or nan): the seeds' ones and zeros of an adjoint program disappear.
- ``explicit_dup``: every variable used once, through ``dup``.
- ``elide_broadcasts``: no ``broadcast_to`` copy where the operation using it broadcasts anyway.
- ``accumulate_in_place``: ``a = a + b`` becomes ``a += b``, and ``a + untake(e, i)`` (either order; of
  a's shape) ``a[i] += e``, where ``a`` is a buffer this program allocated and uses nowhere else; likewise any
  elementwise ufunc writes into such an argument of its result's shape (``a *= 2``, ``np.exp(a, out=a)``).

The algebraic rewrites (``-(-x)``, distributivity, sums of scalar multiples) are in ``algebra``.
Passes recognise a primitive by its facts (``wengert.core.extend.facts``) or by identity, never by name.
"""

import numpy as np

from wengert.program.ir import Statement, Variable, dup, map_vars, zero_of
from wengert.program.liveness import has_arrays
from wengert.program.rendering import numpy_name
from wengert.rules.broadcasting import broadcast_to, reshape
from wengert.rules.elementwise import add, negative
from wengert.rules.indexing import index_add, untake
from wengert.rules.shape import transpose

_RESHAPING = (reshape, transpose)
"""Their result is a writable view of their argument or a copy (not broadcast_to's read-only view)."""

__all__ = ["use_counts", "eliminate_dead_code", "eliminate_common_subexpressions", "fold_constants",
           "explicit_dup", "accumulate_in_place", "elide_broadcasts"]


def use_counts(program):
    """How many times each Variable is read (by statements and as an output). Computed once per
    program (``eliminate_dead_code`` and ``algebra.factor_products`` hand theirs on): the dict is
    shared, read it only (copy it to change it)."""
    counts = program._counts
    if counts is not None:
        return counts
    counts = {}
    get = counts.get
    for s in program.statements:
        uses = s._uses  # s.uses(), once computed (the common case: a long program's every statement)
        for v in uses if uses is not None else s.uses():
            counts[v] = get(v, 0) + 1
    for o in program.outputs:
        if type(o) is Variable:
            counts[o] = counts.get(o, 0) + 1
    program._counts = counts
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
    """Only the statements the outputs depend on, in their order. The result's ``use_counts`` are
    counted on the way (the live variables are those read)."""
    counts = {}  # the variables read so far (by the statements kept and the outputs): the live ones
    get = counts.get
    for o in program.outputs:
        if type(o) is Variable:
            counts[o] = get(o, 0) + 1
    kept = []
    for s in reversed(program.statements):
        outs = s.outs
        if outs[0] in counts or (len(outs) > 1 and any([o in counts for o in outs])):
            kept.append(s)
            uses = s._uses  # s.uses(), once computed
            for v in uses if uses is not None else s.uses():
                counts[v] = get(v, 0) + 1
    kept.reverse()
    result = program.with_statements(kept, census=program._census)  # a subset: its census holds
    result._counts = counts
    return result


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
    """What statement ``s`` simplifies to (a Variable or a constant), or None, by its primitive's
    facts (``wengert.core.extend.facts``: ``linear``, ``linear_jointly``, ``units``, ...)."""
    prim, args, out = s.prim, s.args, s.outs[0]
    if prim is dup:
        return None
    if not s.uses():
        with np.errstate(all="ignore"):
            value = prim.fun(*args, **s.kwargs)
        return value if not isinstance(value, tuple) else None
    for i in prim.linear:
        if i < len(args) and _is_const(args[i], 0):  # a zero makes zero
            return zero_of(out)
    joint = prim.linear_jointly
    if joint and all(i < len(args) and _is_const(args[i], 0) for i in joint):  # where(c, 0, 0)
        return zero_of(out)
    if prim.constants is not None:  # x ** 0: ones
        for i, (c, value) in prim.constants.items():
            if i < len(args) and _is_const(args[i], c):
                return filled(out, value)
    x = None if prim.units is None else _other_if(prim.units, args, out)  # x * 1, x + 0, x ** 1
    if x is not None:
        return x
    if prim.identity_if_unchanged and args and _same_type(args[0], out):  # reshape to x's own shape
        return args[0]
    if prim.shape_only and out.kind == "array":  # zeros_like(x): a constant of x's shape
        value = prim.fun(*map_vars(args, _placeholder), **map_vars(s.kwargs, _placeholder))
        return value if type(value) is np.ndarray and value.shape == out.shape else None
    return None


def filled(var, value):
    """``value`` in every element, of ``var``'s kind, shape and dtype (as :func:`ir.zero_of` for 0)."""
    if var.kind == "float":
        return float(value)
    if var.kind != "array":
        return var.dtype.type(value)
    return np.full(var.shape, value, var.dtype)


def _placeholder(v):
    return np.zeros(v.shape, v.dtype)


def _other_if(constants, args, out):
    """The other argument ``x`` of a two-argument statement whose argument ``i`` is ``constants[i]``
    (and ``x`` of the result's type), else None."""
    if constants and len(args) == 2:
        for i, c in constants.items():
            if i < 2 and _is_const(args[i], c) and _same_type(args[1 - i], out):
                return args[1 - i]
    return None


def _negated(s):
    """``x`` when statement ``s`` computes ``-x`` by its ``negates`` fact (``0 - x``, ``-1 * x``)."""
    negates = s.prim.negates
    return None if negates is None else _other_if(negates, s.args, s.outs[0])


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
    """Mark accumulations into owned, once-used buffers as in place, and elementwise results written
    into such an argument (see module docs). An in-place statement's result has the name of the
    buffer it is written into: written as a plain assignment (``a = a * b``) it is still right."""
    if not has_arrays(program):  # only arrays are buffers
        return program
    counts = dict(use_counts(program))  # changed below
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
        elif s.prim in _RESHAPING and out.kind == "array" and s.args[0] in owned \
                and counts.get(s.args[0]) == 1:
            owned.add(out)  # a view (or copy) of an owned buffer read nowhere else: as good as owned
        if s.prim is add.primitive and not s.kwargs:
            done = _in_place_add(s, counts, owned, producer, dropped, look)
        elif out.kind == "array" and not s.kwargs and len(s.outs) == 1 and s.prim.fresh:
            done = _in_place_ufunc(s, counts, owned)
        else:
            done = None
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


def in_place_ufunc(prim):
    """NumPy's ufunc computing ``prim`` (generated code calls it by NumPy's name), or None: what
    generated code may call with ``out=`` to write the result into an argument's buffer."""
    known = prim.__dict__.get("_ufunc_memo")  # kept on the primitive (see codegen._spelled)
    if known is None or known[0] is not prim.fun:  # looked up once per implementation
        name = numpy_name(prim) if prim.helper is None else None
        fun = getattr(np, name, None) if name is not None else None
        known = prim._ufunc_memo = (prim.fun, fun if isinstance(fun, np.ufunc) and fun.nout == 1 else None)
    return known[1]


def _in_place_ufunc(s, counts, owned):
    """``y = f(a, b)`` (``f`` elementwise, NumPy's ufunc) written into the buffer of an argument ``a``
    that is owned, read only here and of ``y``'s shape and dtype (``a *= b``, ``np.exp(a, out=a)``): one
    buffer fewer to allocate and fill. The first such argument; None if there is none."""
    out = s.outs[0]
    if in_place_ufunc(s.prim) is None:
        return None
    for a in s.args:
        if _buffer_ok(a, out, counts, owned):
            into = Variable(a.name, out.shape, out.dtype, out.kind)
            return Statement((into,), s.prim, s.args, inplace=True)
    return None


def _in_place_add(s, counts, owned, producer, dropped, look):
    out = s.out
    pairs = ((s.args[0], s.args[1]), (s.args[1], s.args[0]))
    if _added_at(producer, s.args[0], s.args[1]):
        pairs = pairs[::-1]  # untake(e, i) + a: a[i] += e where a can take it (no zeros filled and added)
    for a, b in pairs:
        if not _buffer_ok(a, out, counts, owned):
            continue
        renamed = Variable(a.name, out.shape, out.dtype, out.kind)
        if _added_at(producer, b, a):
            u = producer[b]
            # a + untake(e, i) reads only e and i; the untake goes when no use is left (v[i] * v[i]: two).
            # Only an untake of a's shape: one that broadcasts in the sum (an elided broadcast_to of
            # sum(keepdims=True)'s cotangent) has i index another array, and stays a + untake.
            counts[b] -= 1
            dropped.add(b)
            e, idx = map_vars(u.args[0], look), map_vars(u.args[1], look)
            return Statement((renamed,), index_add, (a, idx, e), inplace=True)
        return Statement((renamed,), s.prim, (a, b), inplace=True)
    return None


def _added_at(producer, b, a):
    """Whether ``b`` is ``untake(e, i)`` of ``a``'s shape, ``e`` a variable or a number that ``a[i] += e``
    adds as ``a + b`` does (cast to ``a``'s dtype within its kind)."""
    u = producer.get(b) if type(b) is Variable else None
    if u is None or u.prim is not untake or type(a) is not Variable or b.shape != a.shape:
        return False
    e = u.args[0]
    if type(e) is Variable:
        dtype = e.dtype
    elif type(e) in (float, int, complex) or isinstance(e, np.number):
        dtype = np.result_type(e)
    else:
        return False
    return np.can_cast(dtype, a.dtype, "same_kind")


def _shape(x):
    return x.shape if type(x) is Variable else np.shape(x)


def elide_broadcasts(program):
    """Drop ``broadcast_to(x, s)`` when every use is a broadcasting elementwise primitive that
    reaches shape ``s`` anyway: NumPy broadcasts inside the operation, without the copy."""
    if broadcast_to not in program.census()[0]:
        return program
    users = {}
    for s in program.statements:
        for v in s.uses():
            users.setdefault(v, []).append(s)
    outputs = {o for o in program.outputs if type(o) is Variable}
    alias = {}
    for s in program.statements:
        if s.prim is not broadcast_to or s.out in outputs or type(s.args[0]) is not Variable:
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
