"""How primitives and constants are spelled: in SSA notation and in NumPy source.

A primitive says how generated code writes it, by its facts (``wengert.core.extend.facts``): an
``operator`` (``a + b``), a ``math_name`` for Python floats (``math.asin``), or a ``helper``, a
function of NumPy alone whose source the generated module includes (``untake``, ``tie_select``,
...). Otherwise a primitive whose implementation is NumPy's function, or one of the rule table's
own with NumPy's name, is ``np.<name>(...)`` (:func:`numpy_name`): the rule table uses NumPy's
names and signatures. Helpers are the real functions' source (:func:`helper_sources`), with the
plain functions they call (:func:`register_helper`: ``masked``, ...).
"""

import dis
import inspect
import re
import textwrap

import numpy as np

from wengert.core.primitive import Primitive
from wengert.program.ir import Variable, uniform
from wengert.rules import loaded_families
from wengert.rules.elementwise import masked
from wengert.rules.indexing import may_repeat

__all__ = ["numpy_name", "register_helper", "helpers", "helper_sources", "helper_source", "reserved_names",
           "source_value", "float_literal", "sparse_adds"]


def numpy_name(prim):
    """``prim``'s name when generated code may call it as ``np.<name>``, else None: NumPy's function
    of that name is the implementation (or what it wraps), or ``prim`` is defined in a module of
    ``wengert.rules`` (whose primitives take NumPy's names and signatures)."""
    name = prim.__name__
    fun = getattr(np, name, None) if name.isidentifier() else None
    if fun is None:
        return None
    impl = prim.fun
    if impl is fun or getattr(impl, "__wrapped__", None) is fun \
            or (getattr(impl, "__module__", None) or "").startswith("wengert.rules."):
        return name
    return None


_REGISTERED = {}
"""Plain helpers by name: functions of NumPy alone that helpers or generated code call."""

_CACHE = {}
"""What :func:`helpers` and :func:`reserved_names` found in the rule table (emptied when a helper
is registered or a family added)."""


def register_helper(fun, name=None):
    """Let generated code include and call ``fun``, a function of NumPy (and other helpers) alone, by
    ``name`` (its own by default). Returns ``fun``."""
    _REGISTERED[name or fun.__name__] = fun
    _CACHE.clear()
    return fun


register_helper(masked)  # where(c, x, 0) is written masked(x, c); tie_select calls it
register_helper(may_repeat)  # untake and index_add call it


def _survey():
    """The helpers and ``math`` names of the rule table's primitives (cached)."""
    loaded = loaded_families()
    if _CACHE.get("families") != len(loaded):  # a family imported or registered since: survey again
        found, math_names = {}, {"pow"}
        for module in loaded:
            for value in vars(module).values():
                prim = getattr(value, "primitive", value)
                if isinstance(prim, Primitive):
                    if prim.helper is not None:
                        found.setdefault(prim.__name__, prim.helper)
                    if prim.adds_scaled is not None:  # buf += s * prim(*args) (liveness.scaled_adds)
                        found.setdefault(prim.adds_scaled.__name__, prim.adds_scaled)
                    if prim.math_name is not None:
                        math_names.add(prim.math_name)
        found.update(_REGISTERED)
        _CACHE.update(families=len(loaded), helpers=found, math=frozenset(math_names))
    return _CACHE


def helpers():
    """``{name: function}``: the registered helpers and every rule-table primitive's ``helper`` (under
    the primitive's name)."""
    return dict(_survey()["helpers"])


def reserved_names():
    """Names generated code may define or import at module level: helpers and ``math`` functions."""
    survey = _survey()
    return set(survey["helpers"]) | survey["math"]


def helper_source(name, fun):
    """The source of ``fun``, dedented, its ``def`` line naming it ``name``."""
    text = textwrap.dedent(inspect.getsource(fun)).strip()
    own = fun.__name__
    if own != name:
        text = re.sub(rf"^def {re.escape(own)}\(", f"def {name}(", text, count=1, flags=re.M)
    return text


def _globals_read(code):
    """The global names ``code`` (and the functions nested in it) reads."""
    found = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if inspect.iscode(const):
            found |= _globals_read(const)
    return found


def helper_sources(used):
    """The sources of the helpers ``used`` (``{name: function}``) and of the helpers they call, in
    name order."""
    known = helpers()
    found, todo = {}, list(used.items())
    while todo:
        name, fun = todo.pop()
        if name in found:
            continue
        found[name] = fun
        todo += [(n, known[n]) for n in _globals_read(fun.__code__) if n in known and n not in found]
    return [helper_source(name, found[name]) for name in sorted(found)]


def float_literal(x):
    """Python source for float ``x`` (``float('nan')``, ``float('inf')`` for those)."""
    if x != x:
        return "float('nan')"
    if x in _INFINITIES:
        return "float('inf')" if x > 0 else "-float('inf')"
    return repr(float(x))


_INFINITIES = (float("inf"), float("-inf"))


def _dtype_source(dt):
    dt = np.dtype(dt)
    return f"np.{dt.name}" if isinstance(getattr(np, dt.name, None), type) else f"np.dtype({dt.str!r})"


def _scalar_text(v, source):
    if isinstance(v, float):
        return float_literal(v) if source else repr(v)
    return repr(v)


def source_value(x, hoist):
    """Python source for a constant; arrays go through ``hoist`` (returning a module-level name)
    when it is given, else are written out. Unrenderable values are hoisted too."""
    t = type(x)
    if t is Variable:
        return x.name
    if t is float:
        return float_literal(x)
    if t in (int, bool, str, type(None)):
        return repr(x)
    if t is complex:
        return f"complex({float_literal(x.real)}, {float_literal(x.imag)})"
    if isinstance(x, np.ndarray):
        if hoist is not None:
            return hoist(x)
        return _array_source(x)
    if isinstance(x, np.generic):
        item = x.item()
        if x.dtype == np.float64:  # a Python float gives the same results with float64 operands
            return float_literal(item)
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


_MAX_SPARSE = 3
"""A constant added in place with at most this many nonzero entries is added entry by entry
(``buf[2, 0] += -1.0``, as the one-hot cotangent of ``pred[label]``): cheaper than an array add."""


def sparse_adds(buf, c):
    """``buf[i, j] += v`` lines adding the constant array ``c`` to ``buf`` (exactly the same values but
    for the sign of a zero entry of ``buf``), or None when ``c`` is not sparse enough or not of
    ``buf``'s shape and float dtype."""
    if not isinstance(c, np.ndarray) or c.shape != buf.shape or c.dtype != buf.dtype or c.dtype.kind != "f" \
            or not c.ndim:
        return None
    where = np.flatnonzero(c)
    if len(where) > _MAX_SPARSE or len(where) >= c.size or not np.isfinite(c.flat[where]).all():
        return None
    lines = []
    for k in where:
        index = ", ".join(str(int(i)) for i in np.unravel_index(int(k), c.shape))
        lines.append(f"{buf.name}[{index}] += {float(c.flat[k])!r}")
    return lines
