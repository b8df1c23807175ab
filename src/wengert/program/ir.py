"""The IR: straight-line code in SSA/ANF form (a Wengert list as a program), and its SSA notation.

Every :class:`Statement` applies one primitive of the rule table (``wengert.rules``) to variables and
constants and assigns its result to a fresh :class:`Variable`: no compound expressions, every
variable assigned once; a statement prints in SSA notation (``v1 = log(v_1)``,
:func:`pretty_statement`). A ``Program`` (``wengert.program.program``) has named inputs, such
statements and outputs.
"""

from types import MappingProxyType

import numpy as np

from wengert.core.primitive import Primitive
from wengert.rules.elementwise import add
from wengert.rules.indexing import getitem, index_add

__all__ = ["Variable", "Statement", "var_name", "map_vars", "vars_in", "placeholder", "zero_of", "dup",
           "renamed", "binary", "NO_KWARGS", "pretty_statement", "pretty_value", "index_expr", "uniform"]


def _dup_impl(x, n=2):
    """``(x, x, ...)``: one value, ``n`` uses (explicit duplication: every variable used once)."""
    return (x,) * n


dup = Primitive(_dup_impl, name="dup")
"""Explicit duplication, inserted by ``passes.explicit_dup``; its adjoint is ``+``."""


_FLOAT64 = np.dtype(np.float64)

NO_KWARGS = MappingProxyType({})
"""The keyword arguments of a statement that has none: one shared, read-only empty mapping (a long
program's statements mostly have none; a dict each would be a tracked object each)."""


class Variable:
    """One SSA variable: a name, and the shape, dtype and kind (``"float"`` for a Python float,
    ``"scalar"`` for a NumPy scalar, ``"array"`` for an ndarray) of the values it holds."""

    __slots__ = ("name", "shape", "dtype", "kind")

    def __init__(self, name, shape, dtype, kind):
        self.name = name
        self.shape = shape if type(shape) is tuple else tuple(shape)
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.kind = kind

    @classmethod
    def like(cls, name, value):
        """A variable named ``name`` holding values like ``value``."""
        if type(value) is float:
            return cls(name, (), _FLOAT64, "float")
        if isinstance(value, np.ndarray):
            return cls(name, value.shape, value.dtype, "array")
        if isinstance(value, np.generic):
            return cls(name, (), value.dtype, "scalar")
        if isinstance(value, (bool, int, complex)):
            return cls(name, (), np.result_type(value), type(value).__name__)
        raise TypeError(f"a traced program's values must be arrays or numbers, got {type(value).__name__}")

    def describe(self):
        """``float64[3,4]``, or ``float`` for a Python float."""
        if self.kind == "float":
            return "float"
        return f"{self.dtype.name}[{','.join(str(n) for n in self.shape)}]"

    def __repr__(self):
        return self.name


def renamed(var, name):
    """``Variable(name, var.shape, var.dtype, var.kind)``, made field by field (passes make many)."""
    v = _new_variable(Variable)
    v.name, v.shape, v.dtype, v.kind = name, var.shape, var.dtype, var.kind
    return v


def binary(out, prim, x, y):
    """``Statement((out,), prim, (x, y))``, made field by field (passes make many)."""
    s = _new_statement(Statement)
    s.outs, s.prim, s.args, s.kwargs, s.inplace = (out,), prim, (x, y), NO_KWARGS, False
    s._uses = s.args if type(x) is Variable and type(y) is Variable else None
    return s


def var_name(k):
    """The naming: v_1 for v_{-1}, v0, v1, ..."""
    return f"v_{-k}" if k < 0 else f"v{k}"


def placeholder(var):
    """A value of ``var``'s shape, dtype and kind (ones; zeros for integers and booleans, which
    are then valid indices): what abstract evaluation computes on instead of data."""
    fill = 1 if var.dtype.kind in "fc" else 0
    if var.kind == "float":
        return 1.0
    if var.kind in ("int", "bool", "complex"):
        return {"int": 0, "bool": False, "complex": 1.0 + 0j}[var.kind]
    if var.kind == "scalar":
        return var.dtype.type(fill)
    return np.full(var.shape, fill, dtype=var.dtype)


def zero_of(var):
    """The zero of ``var``'s kind, shape and dtype."""
    if var.kind == "float":
        return 0.0
    if var.kind != "array":
        return var.dtype.type(0)
    return np.zeros(var.shape, var.dtype)


_CONTAINERS = (tuple, list, dict)


def map_vars(obj, f):
    """``obj`` (an argument: a constant, a Variable, or tuples/lists/dicts/slices of them) with
    every Variable ``v`` replaced by ``f(v)``."""
    t = type(obj)
    if t is Variable:
        return f(obj)
    if t is tuple or t is list:
        return t([f(o) if type(o) is Variable else (map_vars(o, f) if type(o) in _CONTAINERS else o)
                  for o in obj])
    if t is dict:
        return {k: map_vars(v, f) for k, v in obj.items()}
    return obj


def vars_in(obj, found=None):
    """The Variables in ``obj`` (see :func:`map_vars`), in order, with repeats."""
    found = [] if found is None else found
    t = type(obj)
    if t is Variable:
        found.append(obj)
    elif t is tuple or t is list:
        for o in obj:
            if type(o) is Variable:
                found.append(o)
            elif type(o) in _CONTAINERS:
                vars_in(o, found)
    elif t is dict:
        for o in obj.values():
            vars_in(o, found)
    return found


class Statement:
    """``outs = prim(*args, **kwargs)``; ``inplace`` marks an accumulation that the code generator
    may write as ``a += b`` (set by ``passes.accumulate_in_place`` only)."""

    __slots__ = ("outs", "prim", "args", "kwargs", "inplace", "_uses")

    def __init__(self, outs, prim, args, kwargs=None, inplace=False):
        self.outs = tuple(outs)
        self.prim = prim
        self.args = tuple(args)
        self.kwargs = dict(kwargs) if kwargs else NO_KWARGS
        self.inplace = inplace
        self._uses = None

    @property
    def out(self):
        """The single output (every primitive but ``dup`` has one)."""
        return self.outs[0]

    def uses(self):
        """The Variables this statement reads, with repeats (a statement is never changed: passes
        make new ones, so this is computed once)."""
        if self._uses is None:
            args = self.args
            if not self.kwargs and all([type(a) is Variable for a in args]):
                self._uses = args  # the common case: no tuple of its own (fewer objects to collect)
            else:
                found = vars_in(args)
                self._uses = tuple(vars_in(self.kwargs, found) if self.kwargs else found)
        return self._uses

    def replaced(self, f, outs=None):
        """A copy with every argument Variable ``v`` replaced by ``f(v)``."""
        return Statement(self.outs if outs is None else outs, self.prim, map_vars(self.args, f),
                         map_vars(self.kwargs, f) if self.kwargs else None, self.inplace)

    def __repr__(self):
        return pretty_statement(self)


_new_variable, _new_statement = Variable.__new__, Statement.__new__


# -- SSA notation ------------------------------------------------------------------------------

_GETITEM, _ADD = getitem.primitive, add.primitive

def pretty_statement(stmt):
    """``v2 = v_1 * v0``: one statement in SSA notation."""
    name = stmt.prim.__name__
    args = [pretty_value(a) for a in stmt.args]
    outs = ", ".join(o.name for o in stmt.outs)
    if len(stmt.outs) > 1:
        outs = f"({outs})"
    if stmt.inplace and stmt.prim is _ADD:
        return f"{stmt.args[0].name} += {args[1]}"
    if stmt.inplace and stmt.prim.operator is not None and len(args) == 2 and stmt.prim is not index_add \
            and type(stmt.args[0]) is Variable and stmt.args[0].name == stmt.outs[0].name:
        return f"{outs} {stmt.prim.operator}= {args[1]}"
    if stmt.inplace and stmt.prim is index_add:
        return f"{stmt.args[0].name}[{index_expr(stmt.args[1], pretty_value)}] += {args[2]}"
    if stmt.prim is dup:
        return f"{outs} = dup({args[0]})"
    op = stmt.prim.operator
    if op is not None and len(args) == 2 and not stmt.kwargs:
        rhs = f"{args[0]} {op} {args[1]}"
    elif op is not None and len(args) == 1 and not stmt.kwargs:
        rhs = f"{op}{args[0]}"
    elif stmt.prim is _GETITEM:
        rhs = f"{args[0]}[{index_expr(stmt.args[1], pretty_value)}]"
    else:
        parts = args + [f"{k}={pretty_value(v)}" for k, v in stmt.kwargs.items()]
        rhs = f"{name}({', '.join(parts)})"
    return f"{outs} = {rhs}"


def pretty_value(x):
    """A constant or Variable in SSA notation (arrays summarised)."""
    t = type(x)
    if t is Variable:
        return x.name
    if t is float:
        return repr(x)
    if isinstance(x, np.ndarray):
        u = uniform(x)
        shape = ",".join(str(n) for n in x.shape)
        if u is not None and x.ndim:
            kind = {0: "zeros", 1: "ones"}.get(u)
            return f"{kind}({shape})" if kind else f"full(({shape}), {u!r})"
        if x.size <= 6:
            return f"array({x.tolist()!r})"
        return f"array<{x.dtype.name}[{shape}]>"
    if isinstance(x, np.generic):
        return repr(x.item())
    if t is tuple:
        inner = ", ".join(pretty_value(v) for v in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if t is list:
        return "[" + ", ".join(pretty_value(v) for v in x) + "]"
    if t is slice:
        return index_expr(x, pretty_value)
    if x is Ellipsis:
        return "..."
    if isinstance(x, np.dtype):
        return x.name
    return repr(x)


def index_expr(idx, render):
    """``idx`` as it is written between brackets: ``1:3, None, ...``."""
    def part(p):
        if type(p) is slice:
            start = "" if p.start is None else render(p.start)
            stop = "" if p.stop is None else render(p.stop)
            return f"{start}:{stop}" if p.step is None else f"{start}:{stop}:{render(p.step)}"
        if p is Ellipsis:
            return "..."
        if p is None:
            return "None"
        return render(p)

    if type(idx) is tuple:
        if not idx:
            return "()"
        inner = ", ".join(part(p) for p in idx)
        return inner + "," if len(idx) == 1 else inner
    return part(idx)


def uniform(a):
    """The one value every element of ``a`` has, or None."""
    if a.size == 0 or a.dtype.kind not in "biufc":
        return None
    first = a.flat[0]
    if a.size <= 1 or (a == first).all():
        return first.item()
    return None
