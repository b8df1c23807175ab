"""Rendering a Program: SSA notation (``print``), plain NumPy source, a compiled function.

The source is one Python module: ``import`` lines, module-level constants (``c0 = np.zeros(...)``,
made once when the module is executed, never written into), small helper functions for the few
primitives NumPy has no one-call spelling for, and ``def name(inputs): ... return outputs``.
Python floats are computed with ``math`` (far cheaper than NumPy's scalar path); where ``math``
raises and NumPy would return nan or inf, the function runs again in a NumPy-only variant.
Primitives NumPy cannot spell (``linalg.*``, ``fft.*``, SciPy's special functions, ``index_update``)
are called through their implementation, which the source imports from the wengert module that
defines it (``prim_linalg_det = _wengert_rules_linalg.det.fun``); only a primitive defined outside
wengert's modules, or a constant no source can spell (a Python function), is supplied in the
namespace instead: such a source names it in a comment and is not self-contained.
"""

import importlib
import re

import numpy as np

from wengert.program.ir import (
    Statement,
    Variable,
    dup,
    index_expr,
    pretty_statement,
    pretty_value,
    uniform,
    vars_in,
)
from wengert.program.liveness import (
    deletions,
    has_arrays,
    negated_sums,
    read_through,
    scaled_adds,
    with_deletions,
)
from wengert.program.passes import in_place_ufunc, use_counts
from wengert.program.rendering import (
    float_literal,
    helper_sources,
    numpy_name,
    reserved_names,
    source_value,
    sparse_adds,
)
from wengert.rules import loaded_families
from wengert.rules.broadcasting import astype, reshape
from wengert.rules.broadcasting import sum as sum_
from wengert.rules.elementwise import add, masked, multiply, where
from wengert.rules.indexing import getitem, index_add
from wengert.rules.reductions import amax, amin, prod
from wengert.rules.shape import concatenate, stack, transpose

__all__ = ["pretty", "to_source", "compile_program", "Module", "module_head",
           "statement_source", "expression_source", "param_names"]

_GETITEM, _ADD = getitem.primitive, add.primitive
_REDUCE = {sum_: "add", prod: "multiply", amax: "maximum", amin: "minimum"}  # their ufuncs' reduce
_METHODS = (sum_, prod, amax, amin, reshape, transpose)  # of arrays, by the primitive's (NumPy's) name


# -- SSA notation -------------------------------------------------------------------------

def _signature(program, annotate):
    names = param_names(program)
    parts = []
    for var, name in zip(program.inputs, names):
        parts.append(f"{name}: {var.describe()}" if annotate else name)
    return names, ", ".join(parts)


def pretty(program):
    """The whole program: signature with shapes, input bindings, statements, return."""
    names, sig = _signature(program, annotate=True)
    lines = [f"def {program.name}({sig}):"]
    lines += [f"    {v.name} = {n}" for v, n in zip(program.inputs, names) if v.name != n]
    lines += [f"    {pretty_statement(s)}" for s in program.statements]
    outs = [pretty_value(o) for o in program.outputs]
    lines.append(f"    return {', '.join(outs) if outs else 'None'}")
    return "\n".join(lines)


# -- NumPy source ----------------------------------------------------------------------------------

def module_head(mod):
    """The lines before a generated function: imports, bound NumPy names, helpers and constants
    (``mod`` is the :class:`Module` its statements were rendered with)."""
    if mod.math:
        head = [f"from math import {', '.join(sorted(mod.math))}", "", "import numpy as np"]
    else:
        head = ["import numpy as np"]
    if mod.bound:
        paths = sorted(mod.bound)
        head.append(f"{', '.join(mod.bound[p] for p in paths)} = {', '.join('np.' + p for p in paths)}")
    for m in sorted({m for m, _ in mod.imports.values()}):
        package, leaf = m.rsplit(".", 1)
        head.append(f"from {package} import {leaf} as _{m.replace('.', '_')}")
    for ref in sorted(mod.imports):
        m, path = mod.imports[ref]
        head.append(f"{ref} = _{m.replace('.', '_')}.{path}")
    supplied = sorted(set(mod.foreign) - set(mod.imports))
    if supplied:
        head.append("# supplied by wengert (primitives without a NumPy spelling): " + ", ".join(supplied))
    head += ["", ""] if mod.helpers else [""]
    for text in helper_sources(mod.helpers):
        head += [text, "", ""]
    for name, value in mod.constants:
        if isinstance(value, np.ndarray) and value.size > _MAX_LITERAL and uniform(value) is None:
            mod.foreign[name] = value
            head.append(f"# {name}: a {value.dtype.name}{list(value.shape)} array captured by the function, "
                        f"supplied by wengert (too large to write out)")
            continue
        try:
            head.append(f"{name} = {source_value(value, None)}")
        except TypeError:
            mod.foreign[name] = value
            head.append(f"# {name}: a constant supplied by wengert ({type(value).__name__})")
    if mod.constants:
        head.append("")
    return head


class Module:
    """What a source needs besides its statements: imports, constants, helpers, foreign primitives."""

    def __init__(self, reserved):
        self.reserved = set(reserved)
        self.math = set()
        self.constants = []  # (name, value)
        self._const_ids = {}
        self.helpers = {}  # name -> the function whose source the module includes (rendering.helper_sources)
        self.foreign = {}  # name -> implementation
        self.imports = {}  # name -> the import line that defines it (primitives without a NumPy spelling)
        self.inline = {}  # Variable -> (expression, precedence, depth): single-use float temporaries
        self.negated = {}  # Variable -> Variable: the result of -x, read only by a sum
        self.bound = {}  # "exp", "add.reduce" -> the module-level name bound to np.exp, np.add.reduce

    def use_helper(self, fun, name=None):
        """Include helper ``fun`` (under ``name``, its own by default) in the module; returns the name."""
        name = name or fun.__name__
        self.helpers[name] = fun
        return name

    def np_attr(self, path):
        """A module-level name for ``np.<path>``, bound once when the module runs: no attribute
        look-up per call (``np.add.reduce`` is two, and makes a bound method each time)."""
        name = self.bound.get(path)
        if name is None:
            name = "np_" + path.replace(".", "_")
            while name in self.reserved:
                name = "_" + name
            self.reserved.add(name)
            self.bound[path] = name
        return name

    def constant(self, value):
        key = id(value)
        if key not in self._const_ids:
            name = f"c{len(self.constants)}"
            while name in self.reserved:
                name = "_" + name
            self._const_ids[key] = name
            self.constants.append((name, value))
        return self._const_ids[key]

    def value(self, x):
        if type(x) is Variable:
            inlined = self.inline.get(x)
            return x.name if inlined is None else inlined[0]
        return source_value(x, self.constant)

    def precedence(self, x):
        if type(x) is Variable:
            inlined = self.inline.get(x)
            return _ATOM if inlined is None else inlined[1]
        if isinstance(x, (int, float, np.generic)) and not isinstance(x, bool) and x < 0:
            return _UNARY
        return _ATOM

    def operand(self, x, parent, strict):
        """``x`` as an operand of an operator of precedence ``parent``; ``strict``: equal precedence
        needs parentheses too (right operands, so that evaluation order is kept exactly)."""
        if type(x) is Variable:
            inlined = self.inline.get(x)
            if inlined is None:
                return x.name
            text, p = inlined[0], inlined[1]
        else:
            text, p = source_value(x, self.constant), self.precedence(x)
        return f"({text})" if p < parent or (strict and p == parent) else text



def param_names(program, defined=None):
    """The user's names for the inputs, made unique and kept clear of every other name used
    (``defined``: the names of the statements' results, when known already)."""
    if defined is None:
        defined = _defined_names(program)
    own = {v.name for v in program.inputs}
    other = reserved_names() | {"np", "math"}

    def taken(n):  # in defined | own | other, without copying defined (a name per statement)
        return n in defined or n in own or n in other

    names, given = [], set()
    for var, name in zip(program.inputs, program.input_names):
        if not name.isidentifier() or name in given or (taken(name) and name != var.name):
            base = name if name.isidentifier() else "arg"
            name = base + "_"
            while taken(name) or name in given:
                name += "_"
        names.append(name)
        given.add(name)
    return names


def _defined_names(program):
    """The names of the statements' results."""
    return {v.name for s in program.statements for v in s.outs}


_PRECEDENCE = {"**": 7, "*": 5, "/": 5, "@": 5, "+": 4, "-": 4,
               "==": 2, "!=": 2, "<": 2, "<=": 2, ">": 2, ">=": 2}
_ATOM, _UNARY = 100, 6


def expression_source(stmt, mod, safe):
    """The right-hand side of ``stmt`` as source, and its operator precedence (``safe``: NumPy only,
    no ``math`` for Python floats)."""
    prim = stmt.prim
    op = prim.operator
    if op is not None and op != "**" and not stmt.kwargs:  # the common case first: a + b, -a
        args = stmt.args
        if len(args) == 2:
            p = _PRECEDENCE[op]
            x, y = args  # mod.operand's work, inline for Variables and Python floats (the commonest)
            tx, ty = type(x), type(y)
            if (tx is Variable or tx is float) and (ty is Variable or ty is float):
                inline = mod.inline
                left = inline.get(x) if tx is Variable else (float_literal(x), _UNARY if x < 0 else _ATOM)
                right = inline.get(y) if ty is Variable else (float_literal(y), _UNARY if y < 0 else _ATOM)
                left = x.name if left is None else \
                    f"({left[0]})" if left[1] < p or (p == 2 and left[1] == p) else left[0]
                right = y.name if right is None else f"({right[0]})" if right[1] <= p else right[0]
                return f"{left} {op} {right}", p
            left = mod.operand(x, p, strict=p == 2)
            return f"{left} {op} {mod.operand(y, p, strict=True)}", p
        if len(args) == 1:
            return f"{op}{mod.operand(args[0], _UNARY, strict=False)}", _UNARY
    elif op is None and not safe and not stmt.kwargs and prim.math_name is not None \
            and _spelled(prim) and stmt.outs[0].kind == "float":  # sin(x) on a Python float
        fn = prim.math_name
        if fn != "abs":  # a builtin
            mod.math.add(fn)
        if len(stmt.args) == 1 and type(stmt.args[0]) is Variable:  # mod.value, inline
            inlined = mod.inline.get(stmt.args[0])
            return f"{fn}({stmt.args[0].name if inlined is None else inlined[0]})", _ATOM
        return f"{fn}({', '.join([mod.value(x) for x in stmt.args])})", _ATOM
    name = prim.__name__
    a = [mod.value(x) for x in stmt.args]
    kw = "".join(f", {k}={mod.value(v)}" for k, v in stmt.kwargs.items())
    out = stmt.outs[0]
    if prim is dup:
        return ", ".join([a[0]] * len(stmt.outs)), 0
    op = prim.operator
    if op is None and not _spelled(prim):
        return f"{_foreign(prim, mod)}({', '.join(a)}{kw})", _ATOM
    # Python floats, and NumPy float64 scalars (math returns a float of the same value: NumPy's
    # scalar path costs twenty times more), go through math.
    as_float = not safe and (out.kind == "float" or (out.kind == "scalar" and out.dtype == np.float64))
    if op == "**" and as_float and not _integral(stmt.args[1]):
        # Python's x ** y is complex for a negative x and a fractional y, where NumPy's is nan;
        # math.pow raises there instead, and the NumPy variant gives nan (see _source)
        mod.math.add("pow")
        return f"pow({a[0]}, {a[1]})", _ATOM
    if op is not None and len(a) == 2 and not kw:
        p = _PRECEDENCE[op]
        left = mod.operand(stmt.args[0], p, strict=op == "**" or p == 2)
        right = mod.operand(stmt.args[1], p, strict=op != "**")
        return f"{left} {op} {right}", p
    if op is not None and len(a) == 1 and not kw:
        return f"{op}{mod.operand(stmt.args[0], _UNARY, strict=False)}", _UNARY
    return _call(stmt, name, a, kw, mod, as_float), _ATOM


def _spelled(prim):
    """Whether generated code can write ``prim`` other than by calling its implementation: a
    helper, indexing, or NumPy's function of its name (looked up once per implementation; a
    primitive's facts may be given after its first use). Kept on the primitive, as the other
    lookups below: a table keyed by primitives would keep every primitive a compilation made
    (a banded Hessian's holds its dense program) for the whole process."""
    if prim.helper is not None or prim is _GETITEM:
        return True
    known = prim.__dict__.get("_spelled_memo")
    if known is None or known[0] is not prim.fun:
        known = prim._spelled_memo = (prim.fun, numpy_name(prim) is not None)
    return known[1]


def _integral(y):
    """Whether exponent ``y`` is a constant integer (then Python's ** is real: no complex results)."""
    return isinstance(y, (int, float, np.integer, np.floating)) and not isinstance(y, bool) \
        and float(y).is_integer()


def _call(stmt, name, a, kw, mod, as_float):
    fn = stmt.prim.math_name
    if as_float and fn is not None and not kw:
        if fn != "abs":  # a builtin
            mod.math.add(fn)
        return f"{fn}({', '.join(a)})"
    if stmt.prim is _GETITEM:
        x = stmt.args[0]
        if type(x) is Variable and x.kind in ("scalar", "float"):  # a Python float at run time: np.asarray
            return f"np.asarray({mod.value(x)})[{index_expr(stmt.args[1], mod.value)}]"
        return f"{mod.operand(x, _ATOM, strict=False)}[{index_expr(stmt.args[1], mod.value)}]"
    if stmt.prim.helper is not None:
        return f"{mod.use_helper(stmt.prim.helper, name)}({', '.join(a)}{kw})"
    prim = stmt.prim
    if prim is where and isinstance(stmt.args[2], (int, float)) and stmt.args[2] == 0 \
            and type(stmt.args[1]) is Variable and stmt.args[1].kind == "array":
        return f"{mod.use_helper(masked)}({a[1]}, {a[0]})"
    if prim is concatenate or prim is stack:  # NumPy's take the arrays as one sequence
        return f"np.{name}(({', '.join(a)},){kw})"
    if prim is astype:
        return f"np.asarray({a[0]}).astype({a[1]})"
    x = stmt.args[0] if stmt.args else None
    if prim is sum_ and x in mod.negated:
        inner = Statement(stmt.outs, stmt.prim, (mod.negated[x],) + stmt.args[1:], stmt.kwargs)
        return f"-{_call(inner, name, [mod.value(v) for v in inner.args], kw, mod, as_float)}"
    axes = stmt.args[1] if len(stmt.args) > 1 else stmt.kwargs.get("axes")
    if prim is transpose and type(x) is Variable and x.kind == "array" \
            and (axes is None or tuple(axes) == tuple(range(len(x.shape) - 1, -1, -1))):
        return f"{mod.operand(x, _ATOM, strict=False)}.T"
    if prim in _REDUCE and type(x) is Variable and x.kind == "array" \
            and not stmt.kwargs.get("keepdims") and _all_axes(stmt.kwargs.get("axis"), len(x.shape)):
        # half x.sum()'s cost, on small arrays
        return f"{mod.np_attr(_REDUCE[prim] + '.reduce')}({mod.value(x)}, None)"
    # methods of arrays only: a float64 scalar may be a Python float at run time (computed by math)
    if prim in _METHODS and type(x) is Variable \
            and x.kind == "array":
        kwargs = [f"{k}={mod.value(v)}" for k, v in stmt.kwargs.items()
                  if not (k == "keepdims" and v is False)]
        inner = ", ".join(a[1:] + kwargs)
        return f"{mod.operand(stmt.args[0], _ATOM, strict=False)}.{name}({inner})"
    if numpy_name(stmt.prim) is None:  # one of wengert's own without a NumPy spelling (index_update)
        return f"{_foreign(stmt.prim, mod)}({', '.join(a)}{kw})"
    return f"{mod.np_attr(name)}({', '.join(a)}{kw})"


def _foreign(prim, mod):
    """The source's name for ``prim``'s implementation, a primitive with no NumPy spelling: imported
    in the source from the wengert module that defines it (``prim_linalg_det = linalg.det.fun``,
    which may import SciPy), or, for a primitive defined outside wengert's modules, supplied by
    wengert when it compiles the source (named in a comment)."""
    ref = "prim_" + re.sub(r"\W", "_", prim.__name__)
    while ref in mod.reserved or (ref in mod.foreign and mod.foreign[ref] is not prim.fun):
        ref = "_" + ref  # another name, or another primitive of the same spelling
    if ref not in mod.foreign:
        mod.foreign[ref] = prim.fun
        where = _importable(prim)
        if where is not None:
            mod.imports[ref] = where
    return ref


def _importable(prim):
    """``(module, attribute path to the implementation)`` of a primitive defined in a module of
    ``wengert.rules`` (or importable by the implementation's own name), or None (kept on the
    primitive: see ``_spelled``)."""
    if "_location_memo" in prim.__dict__:
        return prim._location_memo
    found = None
    for module in loaded_families():
        for attr, value in vars(module).items():
            if value is prim:
                found = (module.__name__, f"{attr}.fun")
            elif found is None and getattr(value, "primitive", None) is prim:
                found = (module.__name__, f"{attr}.primitive.fun")
        if found:
            break
    if found is None:
        fun = prim.fun
        module, qual = getattr(fun, "__module__", None), getattr(fun, "__qualname__", "")
        if module and "." in module and qual.isidentifier():
            try:
                if getattr(importlib.import_module(module), qual) is fun:
                    found = (module, qual)
            except ImportError:
                pass
    prim._location_memo = found
    return found


def _all_axes(axis, ndim):
    """Whether a reduction over ``axis`` reduces every axis of an ``ndim``-d array."""
    if axis is None:
        return True
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return sorted(int(a) % ndim for a in axes) == list(range(ndim)) if ndim else True


_AUGMENTED = ("+", "-", "*", "/", "**")
_COMMUTATIVE = (_ADD, multiply.primitive)  # a + b and b + a are the same float, a * b and b * a too

def statement_source(stmt, mod, safe):
    """``stmt`` as one or more lines of source (``safe``: NumPy only)."""
    if stmt.inplace and stmt.prim is _ADD:
        lines = sparse_adds(stmt.args[0], stmt.args[1])
        if lines is not None:
            return "\n".join(lines) if lines else "pass"
        return f"{stmt.args[0].name} += {mod.value(stmt.args[1])}"
    if stmt.inplace and stmt.prim is index_add:
        buf, idx, e = stmt.args
        if _has_array(idx) or any(v.shape or v.dtype.kind not in "iu" for v in vars_in(idx)):
            return f"np.add.at({buf.name}, {mod.value(idx)}, {mod.value(e)})"  # a repeated index adds twice
        return f"{buf.name}[{index_expr(idx, mod.value)}] += {mod.value(e)}"
    if stmt.inplace and in_place_ufunc(stmt.prim) is not None:  # passes._in_place_ufunc
        name, args = stmt.outs[0].name, stmt.args
        op = stmt.prim.operator
        if op in _AUGMENTED and len(args) == 2 and type(args[0]) is Variable and args[0].name == name:
            return f"{name} {op}= {mod.operand(args[1], _PRECEDENCE[op], strict=True)}"
        if stmt.prim in _COMMUTATIVE and type(args[1]) is Variable and args[1].name == name:  # exactly
            return f"{name} {op}= {mod.operand(args[0], _PRECEDENCE[op], strict=True)}"
        fun = mod.np_attr(numpy_name(stmt.prim))
        return f"{name} = {fun}({', '.join(mod.value(a) for a in args)}, out={name})"  # by keyword: NumPy's
    outs = stmt.outs
    names = outs[0].name if len(outs) == 1 else ", ".join(o.name for o in outs)
    return f"{names} = {expression_source(stmt, mod, safe)[0]}"


def _has_array(idx):
    parts = idx if type(idx) is tuple else (idx,)
    return any(isinstance(p, (np.ndarray, list)) for p in parts)


_MAX_LITERAL = 1000
"""Constant arrays larger than this (and not uniform) are passed to the function, not written out."""

_MAX_INLINE_DEPTH = 8
"""Python floats used once are written into their one use (``a * b + c``, as by hand), to this
nesting depth: a name less to store and load per operation is a third of a scalar program's time."""


def to_source(program, safe=False):
    """The program as a Python module defining one function ``program.name`` (see module docs)."""
    return _source(program, safe)[0]


def _source(program, safe, fallback=None, defined=None, names=None):
    defined = _defined_names(program) if defined is None else defined
    names = param_names(program, defined) if names is None else names
    defined.update([v.name for v in program.inputs], names)  # ``defined`` is this call's own
    mod = Module(defined)
    outputs = {o for o in program.outputs if type(o) is Variable}
    body = [f"    {v.name} = {n}" for v, n in zip(program.inputs, names) if v.name != n]
    floats = [n for v, n in zip(program.inputs, names) if v.kind == "float"]
    if safe and floats:  # the NumPy-only variant: Python floats as np.float64, so that / and ** are NumPy's
        body = [f"    {', '.join(floats)} = {', '.join(f'np.float64({n})' for n in floats)}"] + body
    counts = use_counts(program)
    arrays = has_arrays(program)
    fused = scaled_adds(program, counts) if arrays else {}  # both rewrite arrays only
    for s, x in (negated_sums(program, counts) if arrays else {}).items():
        mod.negated[s.out] = x
        fused[s] = None
    reads, writes, ends, within = [], [], [], {}  # for the dels of dead buffers (arrays only)
    inline = mod.inline
    for s in program.statements:
        out = s.outs[0]
        if fused and s in fused:
            if fused[s] is not None:
                fun, args = fused[s]  # buf += g * w by w's adds_scaled fact (a max's cotangent), for every g:
                # called at g = 0 too (0 * w is nan where w is: add_chosen's weights at a nan maximum)
                body.append(f"    {mod.use_helper(fun)}({', '.join(mod.value(v) for v in args)})")
                if arrays:
                    reads.append(vars_in(args))
                    writes.append(())
                    ends.append(len(body))
            continue
        if (out.kind == "float" and len(s.outs) == 1 and not s.inplace and counts.get(out) == 1
                and s.prim is not dup and out not in outputs):
            depth = 0  # one more than the deepest inlined operand
            uses = s._uses  # s.uses(), once computed
            for v in uses if uses is not None else s.uses():
                inlined = inline.get(v)
                if inlined is not None and inlined[2] > depth:
                    depth = inlined[2]
            depth += 1
            if depth <= _MAX_INLINE_DEPTH:
                text, p = expression_source(s, mod, safe)
                mod.inline[out] = (text, p, depth)
                if arrays:
                    within[out] = read_through(s, within, mod.negated)
                continue
        text = statement_source(s, mod, safe)
        if "\n" in text:
            body += [f"    {line}" for line in text.split("\n")]
        else:
            body.append(f"    {text}")
        if arrays:
            reads.append(read_through(s, within, mod.negated))
            writes.append(s.outs)
            ends.append(len(body))
    if arrays:
        keep = {v.name for v in program.inputs} | {o.name for o in outputs} | set(names)
        body = with_deletions(body, ends, deletions(reads, writes, keep))
    outs = []
    inputs = set(program.inputs)
    for o in program.outputs:
        text = mod.value(o)
        # constants and the caller's own arrays are returned as copies: the caller may write into results
        shared = isinstance(o, np.ndarray) or (type(o) is Variable and o in inputs and o.kind == "array")
        outs.append(f"{text}.copy()" if shared else text)
    body.append(f"    return {outs[0]}" if len(outs) == 1 else f"    return ({', '.join(outs)})")
    head = module_head(mod)
    if fallback and (mod.math or floats or any(s.outs[0].kind == "float" for s in program.statements)):
        # Python refuses what NumPy answers with inf or nan (math's domain errors, 1.0 / 0.0, overflow):
        # the NumPy-only variant runs instead, giving NumPy's values and warnings
        rerun = ["    except (ArithmeticError, ValueError):",
                 f"        return {fallback}({', '.join(names)})"]
        body = ["    try:"] + ["    " + line for line in body] + rerun
    fname = program.name  # never a module-level name the body reads (wg.compile(np.sin) is named sin)
    while fname in ("np", "math") or fname in reserved_names() or fname in defined or fname in names:
        fname += "_"
    mod.function_name = fname
    text = "\n".join(head) + f"\n\ndef {fname}({', '.join(names)}):\n" + "\n".join(body) + "\n"
    return text, mod


def compile_program(program):
    """The program as a Python function of its flat inputs, made by ``exec`` of its source. Where the
    source uses ``math``, the function's body runs inside ``try``, and a ValueError or OverflowError
    (math's domain errors, where NumPy gives nan or inf) runs the NumPy-only variant instead (made
    on first need): no wrapper call per run."""
    def fallback(*args):
        return _compile_safe(program)(*args)

    return _compile(program, safe=False, fallback=fallback)


def _compile_safe(program):
    if not hasattr(program, "_safe_function"):
        program._safe_function = _compile(program, safe=True)
    return program._safe_function


def _compile(program, safe, fallback=None):
    ref = None
    defined = _defined_names(program)
    names = param_names(program, defined)
    if fallback is not None:
        ref = "_numpy_variant"
        while ref in defined or ref in names:
            ref = "_" + ref
    text, mod = _source(program, safe, ref, defined, names)
    namespace = {"__name__": f"wengert_program_{program.name}"}
    if ref is not None:
        namespace[ref] = fallback
    namespace.update(mod.foreign)
    code = compile(text, f"<wengert program {program.name}>", "exec")
    exec(code, namespace)  # noqa: S102 - the point: run the generated source
    fun = namespace[mod.function_name]
    fun.uses_math = bool(mod.math)
    return fun
