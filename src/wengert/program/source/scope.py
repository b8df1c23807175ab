"""The names an expression of the function being transformed sees: its variables, closure and
globals, with ``math`` sent to ``wengert.numpy``, NumPy functions taking lists of traced values,
and the user's other functions interpreted inline (by an interpreter of the caller's kind)."""

import ast
import copy
import inspect
import itertools
import math
import types

import numpy as np

import wengert.numpy as wnp
from wengert.program.ir import Statement
from wengert.program.source.control import TransformError
from wengert.program.source.conversions import CONVERSIONS, conversion_of
from wengert.program.source.nested import LOCAL_PREFIX, resolve
from wengert.program.source.parse import TAPE, is_user_function
from wengert.program.source.values import each_symbol
from wengert.program.tracing import Symbol, TracingError
from wengert.rules.broadcasting import astype

__all__ = ["Scope", "DropsDerivative", "int_calls"]

_MATH = {"sin": wnp.sin, "cos": wnp.cos, "tan": wnp.tan, "exp": wnp.exp, "log": wnp.log, "sqrt": wnp.sqrt,
         "tanh": wnp.tanh, "sinh": wnp.sinh, "cosh": wnp.cosh, "asin": wnp.arcsin, "acos": wnp.arccos,
         "atan": wnp.arctan, "atan2": wnp.arctan2, "log1p": wnp.log1p, "expm1": wnp.expm1,
         "fabs": wnp.abs, "pow": wnp.power, "hypot": wnp.hypot, "log10": wnp.log10, "log2": wnp.log2}


class _MathShim:
    """``math`` with its functions sent to ``wengert.numpy`` (they accept symbols)."""

    def __getattr__(self, name):
        if name in _MATH:
            return _MATH[name]
        return getattr(math, name)


class _ListArguments:
    """A NumPy (or ``wengert.numpy``) function whose list and tuple arguments holding traced values
    (``np.mean([a, b])``, ``np.dot([1.0, a], x)``) are first stacked into one array, as NumPy
    reads such a list; other attributes (``np.add.reduce``) are the function's own."""

    __slots__ = ("fun",)

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args, **kwargs):
        return self.fun(*[_stacked(a) for a in args], **kwargs)

    def __getattr__(self, name):
        return getattr(self.fun, name)


def _stacked(a):
    if type(a) is not list and type(a) is not tuple:
        return a
    found = []
    each_symbol(a, found.append)
    if not any(s.variable.dtype.kind in "fc" for s in found):
        return a
    try:
        return wnp.array(a)
    except (ValueError, TypeError):  # ragged, or arrays of different shapes: the function reports it
        return a


class _ArrayModule:
    """``numpy`` or ``wengert.numpy`` (and their submodules) as the function being transformed sees
    them: their functions take lists of traced values (see :class:`_ListArguments`)."""

    __slots__ = ("module",)

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        value = getattr(self.module, name)
        if name in CONVERSIONS and self.module is np:  # np.asarray(x) of a traced x: source.conversions
            return conversion_of(value)
        if isinstance(value, types.ModuleType):
            return _ArrayModule(value)
        if isinstance(value, type) or not callable(value):
            return value
        return _ListArguments(value)


_ARRAY_MODULES = frozenset((id(np), id(wnp)))


class Scope(dict):
    """The names an expression sees: the interpreter's variables, then the closure, then globals,
    then builtins, as Python looks them up (user functions wrapped to be interpreted inline,
    ``math`` sent to ``wengert.numpy``)."""

    def __init__(self, interp):
        super().__init__()
        self.interp = interp

    def __missing__(self, name):
        it = self.interp
        if name.startswith(LOCAL_PREFIX):
            return resolve(it, name)  # a lambda or comprehension of the expression (source.nested)
        if name in it.env:
            return it.env[name]
        in_closure = name in it.closure
        if in_closure:
            value = it.closure[name]
        elif name in it.fun.__globals__:
            value = it.fun.__globals__[name]
        elif name == INT_CALL:  # int(...) as a call (int_calls); a user's own int wins, as in Python
            try:
                return self["int"]
            except KeyError:
                return _int  # the builtin, taking a traced 0-d value too
        else:
            raise KeyError(name)  # eval looks in the builtins (or raises NameError)
        if value is math:
            return _MathShim()
        if id(value) in _ARRAY_MODULES:
            return _ArrayModule(value)
        if is_user_function(value):
            return _UserCall(it, value)
        conversion = conversion_of(value)  # asarray imported from numpy by name
        if conversion is not None:
            return conversion
        if in_closure:  # a closure cell wins over a global of the same name, as in Python
            return value
        raise KeyError(name)  # eval reads the global itself


INT_CALL = "__wg_int"
"""The name :func:`int_calls` gives the builtin ``int`` where it is called (``dtype=int`` stays Python's)."""


def int_calls(tree):
    """``tree`` (an ``ast.Expression``) with each call ``int(...)`` calling :data:`INT_CALL` (a copy: the
    parsed source is never changed), so that only a call meets :func:`_int`."""
    def is_int_call(n):
        return type(n) is ast.Call and type(n.func) is ast.Name and n.func.id == "int"

    if not any(is_int_call(n) for n in ast.walk(tree)):
        return tree
    tree = copy.deepcopy(tree)
    for n in ast.walk(tree):
        if is_int_call(n):
            n.func = ast.copy_location(ast.Name(INT_CALL, ast.Load()), n.func)
    return tree


def _int(x=0, *args, **kwargs):
    """``int(x)`` as the function reads it: of a traced 0-d number that carries no derivative (an integer,
    a comparison, ``wg.stop_gradient``'s result, or made from those), that number truncated toward zero as
    a traced int64 (``range(int(wg.stop_gradient(a)))`` loops a count decided at run time); of one that
    carries a derivative, the refusal the tape gives (``int()`` would drop it; PyTorch's ``int(t)`` drops
    it silently); otherwise Python's ``int``."""
    if type(x) is not Symbol or args or kwargs or x.variable.shape != () or \
            x.variable.dtype.kind not in "biuf":
        return int(x, *args, **kwargs)
    if not _no_derivative(x):
        raise DropsDerivative("int()")
    if x.variable.dtype.kind == "f":
        x = wnp.trunc(x)
    return x if x.variable.dtype == np.int64 else astype(x, np.dtype(np.int64))


class DropsDerivative(TracingError):
    """``int()`` of a traced number that carries a derivative (the interpreter says where)."""


def _no_derivative(x):
    """Whether symbol ``x`` carries no derivative by construction: an integer or bool, a primitive's result
    that has none (``stop_gradient``, comparisons), or made by statements of the enclosing blocks from
    those and constants. A function's input, a captured array or a control-flow node's output counts
    as carrying one (the refusal's advice, ``int(wg.stop_gradient(x))``, then applies)."""
    made = {}
    for block in getattr(x._trace, "_blocks", (x._trace.statements,)):
        for st in block:
            if type(st) is Statement:
                made.update(dict.fromkeys(st.outs, st))
    seen = {}

    def inactive(var):
        if var.dtype.kind in "biu":
            return True
        if var not in seen:
            seen[var] = False  # a cycle cannot happen in SSA; False is the safe answer meanwhile
            st = made.get(var)
            seen[var] = st is not None and (st.prim.nondiff or all(inactive(v) for v in st.uses()))
        return seen[var]

    return inactive(x.variable)


class _UserCall:
    """A user function called from the function being transformed: interpreted inline."""

    def __init__(self, caller, fun):
        self.caller = caller
        self.fun = fun

    def __call__(self, *args, **kwargs):
        depth = self.caller.depth + 1
        if depth > 20:
            raise TransformError(f"recursion through {self.fun.__name__} (calls nested more than 20 deep) is "
                                 f"outside the subset the source transformation supports. {TAPE}")
        sub = type(self.caller)(self.fun, self.caller.builder, depth)  # an interpreter like the caller
        sub.caller = self.caller
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"calling {self.fun.__name__}: {e}") from None
        bound.apply_defaults()
        sub.env.update(bound.arguments)
        return sub.run_function()


def _chain(value):
    """``value`` and the traced arrays it is a view of (``mutation.note_view``'s marks), nearest first."""
    out = [value]
    view = getattr(value, "_view", None)
    while view is not None and view[0] is not None:
        out.append(view[0])
        view = getattr(view[0], "_view", None)
    return out


_LOADS = {}  # id of a parsed function's node -> (its node, name -> [Name nodes loading it], parents)


def _loads(parsed):
    got = _LOADS.get(id(parsed.node))
    if got is None or got[0] is not parsed.node:
        loads, parents = {}, {}
        for parent in ast.walk(parsed.node):
            for child in ast.iter_child_nodes(parent):
                parents[id(child)] = parent
                if type(child) is ast.Name and type(child.ctx) is ast.Load:
                    loads.setdefault(child.id, []).append(child)
        got = _LOADS[id(parsed.node)] = (parsed.node, loads, parents)
    return got


def _stores(stmt, name):
    t = type(stmt)
    targets = stmt.targets if t is ast.Assign else [stmt.target] if t is ast.AnnAssign else []
    return any(type(t) is ast.Name and t.id == name for target in targets for t in ast.walk(target))


def _read_later(frame, name):
    """Whether ``frame``'s function may read ``name`` after the statement now running: a load of it
    in a later statement, or anywhere in a loop around this one, unless this statement assigns it
    anew; in the statement itself, any load but a lone argument of a call (``y = step(y)``)."""
    stmt = frame.current
    if stmt is None:
        return True
    _, loads, parents = _loads(frame.parsed)
    found = loads.get(name, ())
    end = getattr(stmt, "end_lineno", None) or stmt.lineno
    inside = [n for n in found if stmt.lineno <= n.lineno <= end]
    if len(inside) > 1 or (inside and type(parents.get(id(inside[0]))) is not ast.Call):
        return True
    if _stores(stmt, name):
        return False
    if any(n.lineno > end for n in found):
        return True
    p = parents.get(id(stmt))
    while p is not None:
        if type(p) in (ast.For, ast.While) and any(p.lineno <= n.lineno <= p.end_lineno for n in found):
            return True
        p = parents.get(id(p))
    return False


def _live_names(interp, skip):
    """``(name, value)`` of every name bound in ``interp`` and the interpreters that called it inline
    (those their functions may still read), with the entries of lists, tuples and dicts bound there,
    but ``skip`` in ``interp`` itself."""
    frame = interp
    while frame is not None:
        for n, v in frame.env.items():
            if type(n) is not str or n.startswith("__") or (frame is interp and n == skip):
                continue
            if not _read_later(frame, n):
                continue
            where = "" if frame is interp else f" (in {frame.parsed.name})"
            yield n + where, v
            if isinstance(v, (list, tuple)):
                yield from ((f"{n}[{i}]{where}", e) for i, e in enumerate(v))
            elif isinstance(v, dict):
                yield from ((f"{n}[{k!r}]{where}", e) for k, e in v.items())
        frame = frame.caller


def _outer_read(interp):
    """``(name, value)`` of the arrays (plain or traced: a captured array is an input while the program
    is built) ``interp``'s function reads by name from its closure or its globals."""
    space = getattr(interp.fun, "__globals__", {})
    closure = getattr(interp, "closure", None) or {}
    for n in _loads(interp.parsed)[1]:
        if n in interp.env:
            continue
        if n in closure:
            v, where = closure[n], "a variable of an enclosing function"
        else:
            v, where = space.get(n), "a global"
        if isinstance(v, np.ndarray) or type(v) is Symbol:
            yield f"{n} ({where})", v


def _share(a, b):
    """Whether plain arrays ``a`` and ``b`` share memory (where that is too hard to tell: yes)."""
    try:
        return bool(np.shares_memory(a, b))
    except np.exceptions.TooHardError:
        return True


def refuse_shared_write(interp, name, value, node):
    """Refuse an in-place write into ``name`` (value ``value``) when another live name shares its memory
    (the same array, a view of it, an array it views, or a view of the same array): NumPy would change
    both, but the source front end gives each name its own value, so the other would be stale. For a
    plain array (a constant of the program) the memory is NumPy's own (``np.shares_memory``), and the
    arrays the function reads from its closure and globals count
    too."""
    if isinstance(value, np.ndarray):
        for other, v in itertools.chain(_live_names(interp, name), _outer_read(interp)):
            if isinstance(v, np.ndarray) and _share(v, value):
                _refuse_shared(interp, name, other, v is value, node)
        return
    if type(value) is not Symbol or not value.variable.shape:
        return  # a 0-d value is a number
    mine = _chain(value)
    for other, v in itertools.chain(_live_names(interp, name), _outer_read(interp)):
        if type(v) is not Symbol or not any(b is c for b in _chain(v) for c in mine):
            continue
        _refuse_shared(interp, name, other, v is value, node)


def _refuse_shared(interp, name, other, same, node):
    how = "names the same array" if same else "shares its memory (one is a view of the other, " \
        "or both view one array)"
    raise TransformError(
        f"at {interp.where(node)} (in {interp.parsed.name}): an in-place write into '{name}', while "
        f"'{other}' {how}: NumPy changes both, but the source transformation gives each name its own "
        f"value, so '{other}' would keep the old one. Write through one name (y[1:4] += v rather than "
        f"w = y[1:4]; w += v), make a copy first (w = y[1:4].copy(), np.array(x)), or differentiate "
        f"with wg.grad or wg.compile, which follow NumPy's views (but refuse np.asarray(x) of a traced "
        f"x: it would drop the derivative).")
