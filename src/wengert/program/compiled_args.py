"""``wg.compile``'s arguments, as ``jax.jit`` takes them: static ones, traced Python ints, pickling.

- ``static_argnums`` / ``static_argnames`` (ints, names or sequences; negative numbers count from
  the end; each filled in from the other through ``fun``'s signature) name the arguments whose
  *values* the trace specialises on: they must be hashable, a new value traces again, and they
  are constants of the program (kept in the cache's keys, as ``jax.jit`` keeps them).
- Every other Python ``int`` (bools excepted) is a *traced* value, a 0-d int64 input of the program,
  as ``jax.jit`` traces it: a loop counter ``cf(x, i)`` traces once. Where its value would decide a
  shape, a range, a slice or Python control flow the program cannot be right for other values, so
  the trace refuses it with a ``TracingError`` naming the argument and ``static_argnums=``
  (:func:`int_refusal`, :func:`shape_dependence`). Ints outside int64's range stay static.
- A compiled function pickles as a reference to the function it compiles (recompiled when
  loaded): :func:`by_reference` refuses a lambda or local function with a message naming
  ``wg.compile``, not an internal closure.
"""

import functools
import inspect
import pickle
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from wengert.api.tree import tree_flatten, tree_unflatten
from wengert.core.errors import TracingError
from wengert.core.trace import BOX_TYPES
from wengert.program.ir import map_vars, vars_in

__all__ = ["static_positions", "StaticArgs", "int_refusal", "shape_dependence", "by_reference", "signature",
           "flat_key", "arguments_to_trace", "with_statics_put_back", "positional_signature", "STATIC",
           "Traced", "INT64", "Compiled"]

INT64 = (-(2 ** 63), 2 ** 63 - 1)


class Compiled:
    """What ``wg.compile`` returns (``compiled.CompiledFunction``), as the modules below it see it:
    ``fun``, the function compiled, and ``transform``, the derivative taken (``"grad"``,
    ``"value_and_grad"``) or None. The source transformer reads ``fun``'s source instead."""

    fun: Callable[..., Any]
    transform: str | None


# -- the cache's keys ---------------------------------------------------------------------------------

def leaf_key(x):
    t = type(x)
    if t is np.ndarray:
        return (x.shape, x.dtype)
    if t is float:
        return float
    if t is int:  # traced (a 0-d int64 input), unless outside int64's range: then static
        return int if INT64[0] <= x <= INT64[1] else (int, x)
    if isinstance(x, np.generic):
        return (t, ())
    if t in BOX_TYPES:
        raise Traced
    try:
        hash(x)
    except TypeError:
        return ("unhashable", repr(x))
    return (t, x)


class Traced(Exception):
    """An argument is a value traced by another transform."""


class _Static:
    """The leaf standing for a static argument in a trace (whose function puts the value back)."""

    __slots__ = ()

    def __repr__(self):
        return "<static argument>"


STATIC = _Static()


def flat_key(args, static=()):
    """The cache key of arguments that are all arrays, floats and ints (the common case) besides the
    ``static`` positions (keyed by value), or None."""
    key = []
    for i, a in enumerate(args):
        t = type(a)
        if static and i in static:
            key.append((STATIC, t, a))
        elif t is np.ndarray:
            key.append(a.shape)
            key.append(a.dtype)
        elif t is float:
            key.append(float)
        elif t is int:
            key.append(int if INT64[0] <= a <= INT64[1] else (int, a))
        else:
            return None
    return tuple(key)


def signature(args, static=()):
    """The cache key of ``args`` (``static``: the static positions), and their leaves when they are
    not all plain leaves (a static argument is one leaf, ``STATIC``)."""
    key = flat_key(args, static)
    if key is not None:
        return key, None
    try:
        if static:
            fixed = tuple((STATIC, type(args[i]), args[i]) for i in sorted(static))
            args = tuple(STATIC if i in static else a for i, a in enumerate(args))
        else:
            fixed = ()
        leaves, tree = tree_flatten(args)
        return (tree,) + fixed + tuple(leaf_key(x) for x in leaves), leaves
    except Traced:
        return None, None


def arguments_to_trace(args, static):
    """The arguments a trace runs on: ``STATIC`` for the static ones, np.int64 for the traced Python
    ints; and ``{leaf index: argument position}`` of those ints."""
    args = tuple(STATIC if i in static else a for i, a in enumerate(args))
    ints, leaves, k = {}, [], 0
    for position, a in enumerate(args):
        for leaf in tree_flatten(a)[0]:
            if type(leaf) is int and INT64[0] <= leaf <= INT64[1]:
                ints[k] = position
                leaf = np.int64(leaf)
            leaves.append(leaf)
            k += 1
    if not ints:
        return args, ints
    return tree_unflatten(tree_flatten(args)[1], leaves), ints


def with_statics_put_back(fun, args, static):
    """``fun`` taking ``STATIC`` at the static positions, where it is given their values in ``args``."""
    values = {i: args[i] for i in static}

    @functools.wraps(fun)  # __wrapped__: the parameters' names, and what fun captures
    def with_statics(*given):
        given = list(given)
        for i, v in values.items():
            given[i] = v
        return fun(*given)

    return with_statics


def positional_signature(names):
    """A signature of positional-only parameters named ``names`` (made distinct identifiers)."""
    kind, seen, params = inspect.Parameter.POSITIONAL_ONLY, set(), []
    for k, name in enumerate(names):
        name = name if name.isidentifier() and name not in seen else f"arg{k}"
        seen.add(name)
        params.append(inspect.Parameter(name, kind))
    return inspect.Signature(params)


# -- static arguments --------------------------------------------------------------------------------


def _as_tuple(value, kind, what):
    if value is None:
        return ()
    if isinstance(value, kind):
        return (value,)
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"{what}: expected {kind.__name__} or a sequence of them, got {value!r}") from None
    for item in items:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise TypeError(f"{what}: expected {kind.__name__} or a sequence of them, got {value!r}")
    return items


class StaticArgs:
    """The static arguments of ``fun``: ``positions(nargs)``, the non-negative positions for a call
    with ``nargs`` positional arguments, and ``names``, the keyword-only ones (given by name)."""

    def __init__(self, fun, static_argnums=None, static_argnames=None):
        name = getattr(fun, "__name__", repr(fun))
        where = f"wg.compile({name})"
        nums = _as_tuple(static_argnums, int, f"{where}: static_argnums")
        names = _as_tuple(static_argnames, str, f"{where}: static_argnames")
        self.argnums, self.argnames = nums, names
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):  # a builtin without a signature: positions only
            params = None
        positional = [p for p in params or () if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        varargs = params is None or any(p.kind is p.VAR_POSITIONAL for p in params)
        n = len(positional)
        fixed = set()
        for k in nums:
            if not varargs and not -n <= k < n:
                raise ValueError(f"{where}: static_argnums={nums} but {name} accepts only {n} positional "
                                 f"argument{'s' if n != 1 else ''} ({', '.join(p.name for p in positional)})")
            fixed.add(k + n if k < 0 and not varargs else k)
        by_name = {p.name: i for i, p in enumerate(positional) if p.kind is p.POSITIONAL_OR_KEYWORD}
        keyword_only = {p.name for p in params or () if p.kind is p.KEYWORD_ONLY}
        takes_kwargs = params is not None and any(p.kind is p.VAR_KEYWORD for p in params)
        unknown = [s for s in names if s not in by_name and s not in keyword_only and not takes_kwargs]
        if unknown and params is not None:
            raise ValueError(f"{where}: static_argnames={names} names {', '.join(map(repr, unknown))}, which "
                             f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'} of "
                             f"{name} (its parameters: {', '.join(p.name for p in params)})")
        fixed |= {by_name[s] for s in names if s in by_name}
        self._fixed = frozenset(k for k in fixed if k >= 0)
        self._negative = frozenset(k for k in fixed if k < 0)  # with *args: resolved per call
        self.names = frozenset(s for s in names if s not in by_name)  # keyword-only (or **kwargs)
        self._params = positional
        self._by_nargs = {}

    def __bool__(self):
        return bool(self._fixed or self._negative or self.names)

    def positions(self, nargs):
        """The static positions of a call with ``nargs`` positional arguments (a frozenset)."""
        found = self._by_nargs.get(nargs)
        if found is None:
            found = frozenset(k for k in self._fixed if k < nargs) | frozenset(
                k + nargs for k in self._negative if k + nargs >= 0)
            self._by_nargs[nargs] = found
        return found

    def describe(self, k):
        """``argument `n` (position 1)``."""
        name = self._params[k].name if k < len(self._params) else None
        return f"argument `{name}` (position {k})" if name else f"argument {k}"

    def remedy(self, k):
        """``static_argnums=1) (or static_argnames='n'`` for the message's ``wg.compile(f, ...)``."""
        name = self._params[k].name if k < len(self._params) else None
        by_name = f") (or static_argnames='{name}'" if name and self._params[k].kind is not \
            inspect.Parameter.POSITIONAL_ONLY else ""
        return f"static_argnums={k}{by_name}"


def static_positions(fun, static_argnums=None, static_argnames=None):
    """``StaticArgs`` of ``fun`` (validating them as ``jax.jit`` does)."""
    return StaticArgs(fun, static_argnums, static_argnames)


def check_hashable(value, k, where):
    """``value`` of the static argument at position ``k``, which must be hashable (``jax.jit``'s rule)."""
    try:
        hash(value)
    except TypeError as e:
        raise ValueError(f"{where}: static argument {k} is a {type(value).__name__}, which is not hashable "
                         f"({e}); static arguments are keys of the cache. Pass a tuple instead of a list, or "
                         f"make the argument traced (not static)") from None


def int_refusal(fun_name, static, ks, what):
    """The ``TracingError`` for traced int arguments ``ks`` whose value the program needs (``what``)."""
    args = " and ".join(static.describe(k) for k in ks)
    remedy = static.remedy(ks[0]) if len(ks) == 1 else f"static_argnums={tuple(ks)}"
    one = len(ks) == 1
    error = TracingError(
        f"wg.compile({fun_name}): the int {args} {'is a traced value' if one else 'are traced values'}, as "
        f"under jax.jit, and {fun_name} needs {'its value' if one else 'their values'} while tracing "
        f"({what}). Make {'it' if one else 'them'} static: wg.compile({fun_name}, {remedy}), which traces "
        f"once per value")
    error.int_arguments = tuple(ks)  # wg.compile then does not build the program from source instead
    return error


def shape_dependence(program, int_inputs):
    """The first ``(variable, statement)`` where a shape of ``program``'s values depends on the value
    of a traced int input (``int_inputs``): each is moved by +1 and -1 and the statements reading it,
    directly or through others, are evaluated again; a result of another shape means the program
    (whose shapes are fixed) would be wrong for other values. A statement that fails on the moved
    value (an index out of bounds) is not followed further. None where no shape moves."""
    examples = program.examples
    with np.errstate(all="ignore"):
        for var in int_inputs:
            base = examples.get(var)
            if base is None:
                continue
            for delta in (1, -1):
                moved = {var: base + delta}

                def value(v, moved=moved):
                    return moved[v] if v in moved else examples.get(v)

                for s in program.statements:
                    if not any(v in moved for v in vars_in((s.args, s.kwargs))):
                        continue
                    if any(examples.get(v) is None and v not in moved for v in vars_in((s.args, s.kwargs))):
                        continue
                    try:
                        out = s.prim.fun(*map_vars(s.args, value), **map_vars(s.kwargs or {}, value))
                    except Exception:  # noqa: BLE001 - not evaluable at the moved value: not followed
                        continue
                    for o, v in zip(s.outs, out if len(s.outs) > 1 else (out,)):
                        if tuple(np.shape(v)) != tuple(o.shape):
                            return var, s
                        moved[o] = v
    return None


def by_reference(fun, owner, what):
    """What pickles ``owner`` (a compiled function or source derivative of ``fun``): ``fun`` itself
    where pickle finds it by module and name, the module-level object that wraps it (a decorated
    function), or None where that object is ``owner`` itself (pickle it as a global). Raises
    ``PicklingError`` naming ``what`` for a lambda or a local function."""
    module, qualname = getattr(fun, "__module__", None), getattr(fun, "__qualname__", None)
    if not inspect.isfunction(fun):
        return fun  # a bound method, a functools.partial, a callable object: pickle's own rules
    found = _lookup(module, qualname)
    if found is owner:
        return None
    if found is fun or getattr(found, "fun", None) is fun:
        return found
    if "<" in (qualname or ""):
        why = "is a lambda or a function defined inside another function"
    elif found is not None and inspect.unwrap(fun) is found:  # wg.hessian(f), wg.grad(f): f's name, not f
        why = (f"is a transform of {module}.{qualname} (as wg.grad or wg.hessian makes), not that function "
               f"itself, so loading it would compile {qualname} instead")
    else:
        why = f"is not reachable as {module}.{qualname}"
    raise pickle.PicklingError(
        f"cannot pickle {what}: it pickles as a reference to the function it compiles (and compiles again "
        f"when loaded), and {qualname} {why}. Define the function at module level, or pickle what it "
        f"needs and call wg.compile / wg.source_grad after loading")


def _lookup(module, qualname):
    if not module or not qualname or "<" in qualname:
        return None
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj
