"""How primitives and constants are spelled: in SSA notation and in NumPy source.

The tables here name the operators (``a + b``), ``math`` functions used for Python floats, and the
small helper functions the generated source defines for the primitives NumPy cannot spell in one
call (``untake``, ``tie_select``, ...). Everything else is ``np.<primitive name>(...)``: the
rule table uses NumPy's names and signatures.
"""

import re

import numpy as np

from wengert.program.ir import Variable

__all__ = ["OPERATORS", "UNARY_OPERATORS", "MATH_UNARY", "MATH_BINARY", "HELPERS", "KNOWN_FAMILIES",
           "pretty_value", "source_value", "index_expr", "uniform"]

OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "true_divide": "/", "power": "**",
             "matmul": "@", "equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=",
             "greater": ">", "greater_equal": ">="}
UNARY_OPERATORS = {"negative": "-", "positive": "+"}

MATH_UNARY = {"sqrt": "sqrt", "exp": "exp", "log": "log", "log2": "log2", "log10": "log10",
              "log1p": "log1p", "expm1": "expm1", "sin": "sin", "cos": "cos", "tan": "tan",
              "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
              "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "absolute": "abs"}
MATH_BINARY = {"arctan2": "atan2", "hypot": "hypot"}

KNOWN_FAMILIES = frozenset(f"wengert.rules.{m}" for m in (
    "elementwise", "broadcasting", "reductions", "shape", "indexing", "products", "nondiff", "modular",
)) | {"numpy", "builtins", "_operator", "operator", "wengert.program.ir", "wengert.core.extend"}
"""Modules whose primitives are spelled in NumPy; others are called through their implementation."""

HELPERS = {
    "masked": '''
def masked(a, mask):
    """a where mask, 0 elsewhere (a product: np.where branches per element and is slower)."""
    with np.errstate(invalid="ignore"):
        out = np.multiply(a, mask)
    if not np.isfinite(out).all():
        out = np.where(mask, a, np.zeros((), out.dtype))
    return out
''',
    "untake": '''
def untake(g, idx, shape):
    """Zeros of `shape` with g added at idx: the adjoint of x[idx]."""
    out = np.zeros(shape, dtype=np.result_type(g))
    parts = idx if type(idx) is tuple else (idx,)
    if any(isinstance(p, (list, np.ndarray)) and np.asarray(p).dtype.kind in "iu" for p in parts):
        np.add.at(out, idx, g)
    else:
        out[idx] = g
    return out
''',
    "tie_select": '''
def tie_select(g, x, y):
    """g where x > y, g / 2 where x == y, 0 elsewhere: what max(x, y) passes back to x."""
    out = masked(g, x > y)
    ties = x == y
    if np.any(ties):
        out = np.where(ties, 0.5 * np.asarray(g), out)
    return out
''',
    "chooser_weights": '''
def chooser_weights(out, x, axis, keepdims):
    """1/k on each of the k elements of x equal to its max (min) along axis, 0 elsewhere."""
    x = np.asarray(x)
    if axis is None:
        hit = x == out
        k = np.count_nonzero(hit)
        return hit.astype(x.dtype) if k == 1 else hit / np.asarray(k, x.dtype)
    hit = x == (out if keepdims else np.expand_dims(out, axis))
    return hit / hit.sum(axis=axis, keepdims=True).astype(x.dtype)
''',
    "add_chosen": '''
def add_chosen(buf, g, out, x):
    """buf += g * chooser_weights(out, x, None, False), in place: g shared by the maxima of x
    (nothing to add where g is 0)."""
    if g == 0:
        return
    x = np.asarray(x)
    where = (x == out).ravel().nonzero()[0]
    if len(where) == 1:
        buf.flat[where[0]] += g
    else:
        buf.flat[where] += g * (np.ones((), x.dtype) / len(where))
''',
    "sum_repeats": '''
def sum_repeats(g, repeats, axis, n):
    """The adjoint of np.repeat along axis: sum each run of repeated entries."""
    g = np.moveaxis(np.asarray(g), axis, 0)
    segment = np.repeat(np.arange(n), np.broadcast_to(repeats, (n,)))
    out = np.zeros((n,) + g.shape[1:], dtype=g.dtype)
    np.add.at(out, segment, g)
    return np.moveaxis(out, 0, axis)
''',
    "index_add": '''
def index_add(x, idx, v):
    """x with v added at idx, repeated indices adding up (a new array)."""
    out = np.array(x, copy=True)
    np.add.at(out, idx, v)
    return out
''',
}


def _float_literal(x):
    if x != x:
        return "float('nan')"
    if x in (float("inf"), float("-inf")):
        return "float('inf')" if x > 0 else "-float('inf')"
    return repr(float(x))


def _dtype_source(dt):
    dt = np.dtype(dt)
    return f"np.{dt.name}" if isinstance(getattr(np, dt.name, None), type) else f"np.dtype({dt.str!r})"


def uniform(a):
    """The one value every element of ``a`` has, or None."""
    if a.size == 0 or a.dtype.kind not in "biufc":
        return None
    first = a.flat[0]
    if a.size <= 1 or (a == first).all():
        return first.item()
    return None


def _scalar_text(v, source):
    if isinstance(v, float):
        return _float_literal(v) if source else repr(v)
    return repr(v)


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


def source_value(x, hoist):
    """Python source for a constant; arrays go through ``hoist`` (returning a module-level name)
    when it is given, else are written out. Unrenderable values are hoisted too."""
    t = type(x)
    if t is Variable:
        return x.name
    if t is float:
        return _float_literal(x)
    if t in (int, bool, str, type(None)):
        return repr(x)
    if t is complex:
        return f"complex({_float_literal(x.real)}, {_float_literal(x.imag)})"
    if isinstance(x, np.ndarray):
        if hoist is not None:
            return hoist(x)
        return _array_source(x)
    if isinstance(x, np.generic):
        item = x.item()
        if x.dtype == np.float64:  # a Python float gives the same results with float64 operands
            return _float_literal(item)
        return f"{_dtype_source(x.dtype)}({_scalar_text(item, True)})"
    if t is tuple:
        inner = ", ".join(source_value(v, hoist) for v in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if t is list:
        return "[" + ", ".join(source_value(v, hoist) for v in x) + "]"
    if t is dict:
        return "{" + ", ".join(f"{k!r}: {source_value(v, hoist)}" for k, v in x.items()) + "}"
    if t is slice:
        return f"slice({source_value(x.start, hoist)}, {source_value(x.stop, hoist)}, " \
               f"{source_value(x.step, hoist)})"
    if x is Ellipsis:
        return "..."
    if isinstance(x, np.dtype):
        return _dtype_source(x)
    if isinstance(x, type) and issubclass(x, (np.generic, float, int, complex, bool)):
        return _dtype_source(x) if issubclass(x, np.generic) else x.__name__
    if hoist is not None:
        return hoist(x)
    raise TypeError(f"cannot write the constant {x!r} as source")


def _array_source(a):
    dt = _dtype_source(a.dtype)
    u = uniform(a)
    if u is not None and a.ndim:
        if u == 0:
            return f"np.zeros({a.shape!r}, dtype={dt})"
        return f"np.full({a.shape!r}, {_scalar_text(u, True)}, dtype={dt})"
    text = repr(a.tolist())
    text = re.sub(r"\bnan\b", "np.nan", re.sub(r"\binf\b", "np.inf", text))
    if a.size == 0:
        return f"np.zeros({a.shape!r}, dtype={dt})"
    return f"np.array({text}, dtype={dt})"


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
