"""The extension API: how a primitive and its derivatives are defined, in one place. Six things are
all a new primitive needs (``docs/adding-a-primitive.md`` walks through them): :func:`primitive`
(differentiate a function by its rules, not its body), :func:`defvjp` and :func:`defjvp` (reverse-
and forward-mode rules, one per positional argument), :func:`defbatch` (``vmap``'s rule),
:func:`elementwise` (an elementwise function by its partial derivatives alone: VJP, JVP and the
fused rule for floats from one expression each), and :func:`facts` (what the program transformer
may rely on). Rules are written with wengert's own functions, so they can be differentiated again."""

import linecache
import types

import numpy as np

from wengert.core import exits as _exits
from wengert.core.primitive import (
    _ALL_MISSING,
    BROADCASTING,
    FLOAT_PATH_ERRORS,
    NoRuleError,
    Primitive,
    binary_function,
    unary_function,
)
from wengert.core.trace import BOX_TYPES, contains_box, unbox_all

__all__ = ["primitive", "defvjp", "defjvp", "defbatch", "elementwise", "facts", "Primitive", "NoRuleError",
           "defvjp_argnum", "defjvp_argnum", "defvjp_accumulate", "defvjp_inplace", "defvjp_float",
           "nondiff_primitive"]


def primitive(fun=None, *, name=None):
    """Make ``fun`` a primitive: wengert will differentiate it by its rules (:func:`defvjp`,
    :func:`defjvp`), not by its body, as ``autograd.extend.primitive`` and ``jax.custom_vjp``. Use as
    ``wg.primitive(f)`` or as a decorator. Its arguments broadcast: a rule may return an output-shaped
    result, summed back to a broadcast argument's shape; other wrong shapes or kinds are errors naming
    the primitive and argument. Traced values must be positional arguments of their own.
    """
    if fun is None:
        return lambda f: primitive(f, name=name)
    unbroadcast, broadcast_tangent = BROADCASTING  # broadcasting's adjoint, but no elementwise fact
    return UserPrimitive(fun, name=name, grad_post=unbroadcast, tangent_post=broadcast_tangent)


class UserPrimitive(Primitive):
    """A primitive made by :func:`primitive`: its calls and its rules' results are checked. (The rule
    table's own primitives are plain :class:`Primitive` objects and skip these checks.)"""

    def __call__(self, *args, **kwargs):
        for i, a in enumerate(args):
            t = type(a)
            if (t is list or t is tuple or t is dict) and contains_box(a):
                self._refuse_nested(f"argument {i} is a {t.__name__} holding a traced value")
        for k, v in kwargs.items():
            if contains_box(v):
                self._refuse_nested(f"keyword argument '{k}' holds a traced value")
        return Primitive.__call__(self, *args, **kwargs)

    def _refuse_nested(self, what):
        raise TypeError(
            f"wg.primitive '{self.__name__}': {what}{_exits.where()}. Its rules are given per positional "
            f"argument (wg.defvjp({self.__name__}, rule_for_arg0, rule_for_arg1, ...)), so that value would "
            f"be differentiated through the body of '{self.__name__}' instead of by its rule. Pass each "
            f"traced value as a positional argument of its own, e.g. {self.__name__}(x, a, b) rather than "
            f"{self.__name__}(x, (a, b)).")


def _checked(prim, mode, argnum, rule):
    """``rule`` of user primitive ``prim`` with its result checked (kind and shape) on every call; for
    ``argnum`` None, a variadic rule ``rule(argnum, g, out, *args)``; "joint": ``rule(needed, g, ...)``."""
    if not isinstance(prim, UserPrimitive):
        return rule

    def checked(*rule_args, **kwargs):
        result = rule(*rule_args, **kwargs)
        i, (out, *args) = (argnum, rule_args[1:]) if type(argnum) is int else (rule_args[0], rule_args[2:])
        if argnum == "joint" and mode == "JVP":  # one tangent, from the tangents given (not None)
            given = ", ".join(str(j) for j, t in enumerate(i) if t is not None)
            return _check_result(prim, mode, given, result, rule_args[2:], rule_args[1]) or result
        for j in [i] if argnum != "joint" else [j for j, need in enumerate(i) if need]:  # joint: a list
            _check_result(prim, mode, j, result if argnum != "joint" else result[j], args, out)
        return result
    checked.__name__ = checked.__qualname__ = getattr(rule, "__name__", "rule")
    checked.__wrapped__ = rule
    return checked


_NUMBERS = (float, int, complex, np.ndarray, np.number)


def _an_array(x):  # a number, or an array of NumPy or of another library (Dask, CuPy: NEP-18, array API)
    return isinstance(x, _NUMBERS) or (hasattr(x, "shape") and hasattr(x, "dtype") and (
        hasattr(type(x), "__array_function__") or hasattr(type(x), "__array_namespace__")))


def _shape(x):
    x = unbox_all(x)
    return tuple(x.shape) if hasattr(x, "shape") else ()


def _check_result(prim, mode, argnum, result, args, out):
    """A VJP result must have the argument's shape (or the output's, for an argument broadcast to it);
    a JVP result the output's shape (or one that broadcasts to it); both arrays (any library's) or numbers."""
    definer = "defvjp" if mode == "VJP" else "defjvp"
    head = f"wg.{definer}: the {mode} rule of primitive '{prim.__name__}' for argument {argnum}"
    if type(result) not in BOX_TYPES and not _an_array(result):
        if result is None:
            fix = ("return zeros (wnp.zeros_like(x)) for an argument without effect, or give None in place "
                   f"of the rule in wg.{definer} to mark the argument as not differentiable")
        else:
            fix = "return an array or a number (computed with wengert.numpy functions)"
        got = "None" if result is None else f"{type(result).__name__} {result!r:.60}"
        raise TypeError(f"{head} returned {got}; {fix}.")
    got, out_shape = _shape(result), _shape(out)
    if mode == "VJP":
        want = _shape(args[argnum]) if argnum < len(args) else None
        if want is None or got == want or (got == out_shape and _broadcasts(want, out_shape)):
            return
        hint = " (wnp.broadcast_to(c, wnp.shape(x)) repeats a scalar c)" if got == () else ""
        raise ValueError(f"{head} returned shape {got}, but the argument has shape {want} (the output has "
                         f"shape {out_shape}): a VJP rule returns the cotangent of its argument, of the "
                         f"argument's shape{hint}.")
    if _broadcasts(got, out_shape):
        return
    raise ValueError(f"{head} returned shape {got}, but the output has shape {out_shape}: a JVP rule returns "
                     f"the output's tangent, of the output's shape.")


def _broadcasts(shape, to):
    try:
        return np.broadcast_shapes(shape, to) == to
    except ValueError:
        return False


def _as_primitive(prim, definer):
    """The Primitive behind ``prim`` (a Primitive, or a fast entry point made from one)."""
    prim = getattr(prim, "primitive", prim)
    if not isinstance(prim, Primitive):
        raise TypeError(f"wg.{definer} expects a primitive made by wg.primitive(fun), got {prim!r}; "
                        f"wrap the function first: f = wg.primitive(f)")
    return prim


def _rules(prim, rules, definer, mode=None):
    """``rules`` checked to be functions or None (and, for a user's primitive, their results checked)."""
    for i, rule in enumerate(rules):
        if rule is not None and not callable(rule):
            raise TypeError(f"wg.{definer}({prim.__name__}, ...): rule for argument {i} must be a function "
                            f"or None, got {rule!r}")
    if mode is not None:
        rules = [None if r is None else _checked(prim, mode, i, r) for i, r in enumerate(rules)]
    return tuple(rules)


def _special(prim, rules, definer):
    """Accumulate or in-place forms of VJP rules: each needs the ordinary rule beside it."""
    rules = _rules(prim, rules, definer)
    for i, rule in enumerate(rules):
        if rule is not None and i in prim.vjp_missing:
            raise TypeError(f"wg.{definer}({prim.__name__}, ...): argument {i} has no ordinary VJP rule; "
                            f"give one with wg.defvjp first")
    return rules if any(r is not None for r in rules) else None


def defvjp(prim, *rules, variadic=None, joint=None, accumulate=None, inplace=None, floats=None):
    """Give ``prim`` one VJP rule per positional argument: ``rule(g, out, *args, **kwargs)`` returns
    the argument's share of the output's cotangent ``g``; None marks an argument not differentiable.

    Or, instead: ``variadic=rule(argnum, g, out, *args)``, one rule for every argument; ``joint=rule(
    needed, g, out, *args)``, every argument's share in one call (a list, None where not ``needed``).
    Faster forms computing what those compute (``docs/adding-a-primitive.md``): ``accumulate=(rule, ...)``,
    ``rule(buffer, g, out, *args)`` adds the contribution into ``buffer``, the argument's adjoint, in
    place (``buffer[idx] += g``: O(len(g)) for ``x[idx]``; first-order passes only); ``inplace=(rule,
    ...)``, the contribution computed in ``g``'s memory (or None to decline) when nothing else refers to
    ``g``; ``floats=rule(g, out, x[, y])``, every contribution at once on Python floats, raising
    ``ArithmeticError`` or ``ValueError`` where its answer would not be NumPy's (``math.pow``, not ``**``).
    """
    prim = _as_primitive(prim, "defvjp")
    if variadic is not None or joint is not None:
        prim.vjp_argnum = None if variadic is None else _checked(prim, "VJP", None, variadic)
        prim.vjp_joint = None if joint is None else _checked(prim, "VJP", "joint", joint)
        prim.vjps, prim.vjp_missing = (), frozenset()
    elif rules or (accumulate, inplace, floats) == (None, None, None):
        prim.vjps = _rules(prim, rules, "defvjp", "VJP")
        prim.vjp_argnum = prim.vjp_joint = None
        prim.vjp_missing = _ALL_MISSING.difference(i for i, r in enumerate(rules) if r is not None)
    if accumulate is not None:
        prim.vjp_accumulate = _special(prim, accumulate, "defvjp")
    if inplace is not None:
        prim.vjp_inplace = _special(prim, inplace, "defvjp")
    if floats is not None:
        prim.float_vjp = _rules(prim, (floats,), "defvjp")[0]
    extra = (prim.vjp_accumulate, prim.vjp_argnum, prim.vjp_joint, prim.vjp_inplace) != (None,) * 4
    prim.vjp_extra = True if extra else None  # the backward pass's one test for more than ``vjps``
    return prim


def defjvp(prim, *rules, variadic=None, joint=None):
    """Give ``prim`` one JVP rule per positional argument: ``rule(t, out, *args, **kwargs)`` returns
    the output's tangent contributed by the argument's tangent ``t``; None marks an argument not
    differentiable. ``variadic=rule``: one rule for every argument, ``rule(argnum, t, out, *args)``;
    ``joint=rule(tangents, out, *args)``: the output's tangent from all at once (None where absent)."""
    prim = _as_primitive(prim, "defjvp" if variadic is None else "defjvp_argnum")
    prim.jvp_argnum = None if variadic is None else _checked(prim, "JVP", None, variadic)
    prim.jvp_joint = None if joint is None else _checked(prim, "JVP", "joint", joint)  # one form: the last
    prim.jvps = () if variadic is not None or joint is not None else _rules(prim, rules, "defjvp", "JVP")
    return prim


def defbatch(prim, rule):
    """Give ``prim`` a batching rule for ``wg.vmap`` (JAX's ``primitive_batchers[prim] = rule``):
    ``rule(prim, values, batched, kwargs)`` gets the positional arguments, a batched one (``batched[i]``)
    with every example on axis 0, and returns every example's result, batch on axis 0; or
    ``NotImplemented`` to decline (each example then runs alone; ``docs/adding-a-primitive.md``)."""
    prim = _as_primitive(prim, "defbatch")
    prim.batch = _rules(prim, (rule,), "defbatch")[0]  # None: no rule (the loop, or the elementwise rule)
    return prim


# The same, by the names HIPS autograd's users know (and the rule table uses for its special forms).
def defvjp_argnum(prim, rule):
    """``defvjp(prim, variadic=rule)``."""
    return defvjp(prim, variadic=rule)


def defjvp_argnum(prim, rule):
    """``defjvp(prim, variadic=rule)``."""
    return defjvp(prim, variadic=rule)


def defvjp_accumulate(prim, *rules):
    """``defvjp(prim, accumulate=rules)``."""
    return defvjp(prim, accumulate=rules)


def defvjp_inplace(prim, *rules):
    """``defvjp(prim, inplace=rules)``."""
    return defvjp(prim, inplace=rules)


def defvjp_float(prim, rule):
    """``defvjp(prim, floats=rule)``."""
    return defvjp(prim, floats=rule)


def nondiff_primitive(fun, name=None):
    """A function whose result carries no derivative (comparisons, argmax, shape queries): traced
    arguments are unboxed, and the result is a constant at every level."""
    return Primitive(fun, name=name, nondiff=True)


# -- elementwise functions: one derivative expression per argument --------------------------------

def elementwise(np_fun, *derivatives, name=None, float_fun=None, **known):
    """An elementwise primitive defined by its partial derivatives: ``derivatives[i](out, *args)`` is
    d out / d args[i], elementwise, written with wengert's functions (``sin``: ``lambda out, x: cos(x)``);
    a number is a constant derivative, None an argument that is not differentiable. From each come the
    VJP ``g * d`` and the JVP ``t * d``; with ``float_fun`` (``math.sin``, ``operator.add``: the
    function on Python floats) also one fused rule for floats, the same expressions with ``math``'s
    functions. Two- and three-argument functions broadcast. ``known``: :func:`facts` (the result is
    always fresh). Returns the function to call (``.primitive`` is the primitive). This fits functions
    whose derivative is a multiplier (holomorphic ones, for complex numbers); others give rules.
    """
    n = len(derivatives)
    name = name or np_fun.__name__
    impl = with_float_path(np_fun, float_fun, n)
    prim = Primitive(impl, name=name, broadcasts=n > 1)
    prim.derivatives = derivatives
    defvjp(prim, *[_times(d) for d in derivatives])
    defjvp(prim, *[_times(d) for d in derivatives])
    if float_fun is not None and n <= 2 and all(d is not None for d in derivatives):
        prim.float_vjp = _fused_on_first_use(prim)
    if float_fun is not None and getattr(float_fun, "__module__", None) in ("math", "builtins"):
        known.setdefault("math_name", float_fun.__name__)
    known.setdefault("fresh", True)
    facts(prim, **known)
    if n == 1:
        return unary_function(prim, float_fun)
    if n == 2:
        return binary_function(prim, float_fun)
    return prim


def with_float_path(np_fun, float_fun, n):
    """``np_fun``, with ``float_fun`` for Python floats (NumPy's scalar path costs far more),
    falling back to NumPy where ``float_fun`` raises (``math.log(0.0)``: NumPy's -inf and warning)."""
    if float_fun is None:
        return np_fun
    if n == 1:
        def impl(x):
            if type(x) is float:
                try:
                    return float_fun(x)
                except FLOAT_PATH_ERRORS:
                    return float(np_fun(x))
            return np_fun(x)
    else:
        if n != 2:
            raise TypeError(f"elementwise: float_fun is for functions of one or two arguments, not {n}")
        scalars = (float, np.float64) if getattr(float_fun, "__module__", "") == "_operator" else (float,)

        def impl(x, y):  # Python's operators on float64 scalars are NumPy's own scalar arithmetic
            tx, ty = type(x), type(y)
            if tx in scalars and ty in scalars:
                if tx is not float or ty is not float:
                    return float_fun(x, y)
                try:
                    return float_fun(x, y)
                except FLOAT_PATH_ERRORS:
                    return np_fun(x, y).item()
            return np_fun(x, y)
    impl.__name__, impl.__wrapped__ = getattr(np_fun, "__name__", "elementwise"), np_fun
    impl.__doc__ = f"numpy.{impl.__name__}, elementwise."
    return impl


def _times(d):
    """The rule ``g * d(out, *args)`` (VJP) or ``t * d(out, *args)`` (JVP) for a partial derivative."""
    if d is None:
        return None
    if callable(d):
        def rule(g, out, *args):
            return g * d(out, *args)
        rule.__name__ = rule.__qualname__ = f"times_{getattr(d, '__name__', 'partial')}"
        return rule
    special = {0: _zero, 1: _identity, -1: _negated}  # exact zeros, not g * 0 (nan where g is inf)
    return special.get(d, lambda g, out, *args: g * d)


def _zero(g, out, *args):
    g = unbox_all(g)
    return 0.0 if type(g) is float else np.zeros(np.shape(g), dtype=np.result_type(g))


_identity = lambda g, out, *args: g  # noqa: E731 - a derivative of 1
_negated = lambda g, out, *args: -g  # noqa: E731 - a derivative of -1


def _fused_on_first_use(prim):
    """``prim``'s fused float rule, built on first call (derivatives may name later functions)."""
    def build(g, out, *args):
        prim.float_vjp = _fused(prim.derivatives)
        return prim.float_vjp(g, out, *args)
    return build


def _fused(derivatives):
    """Every argument's contribution on Python floats, ``g * d``, written inline (one call) if it can."""
    same_module = len({id(d.__globals__) for d in derivatives if callable(d)}) <= 1  # one scope to merge
    inlined = [_inline(d) if callable(d) and same_module else None for d in derivatives]
    params = next((f[0] for f in inlined if f is not None), ["out", "x", "y"][:len(derivatives) + 1])
    texts, scope = [], {}
    for d, found in zip(derivatives, inlined):
        found = found if callable(d) else (params, "0.0" if d == 0 else repr(float(d)), {})
        if found is None or found[0] != params or len(params) != len(derivatives) + 1:
            break
        texts.append("0.0" if found[1] == "0.0" else f"g * ({found[1]})")
        scope.update(found[2])
    else:
        body = texts[0] if len(texts) == 1 else f"({', '.join(texts)})"
        return eval(f"lambda g, {', '.join(params)}: {body}", scope)  # noqa: S307 - our own source
    parts = [_on_floats(d) if callable(d) else (lambda out, *args, c=float(d): c) for d in derivatives]
    if len(parts) == 1:
        return lambda g, out, x, d=parts[0]: g * d(out, x)
    return lambda g, out, x, y, d0=parts[0], d1=parts[1]: (g * d0(out, x, y), g * d1(out, x, y))


def _inline(d):
    """``(parameter names, the body's source, the globals it reads on floats)`` of a one-line lambda
    ``d`` whose source text compiles to ``d``'s own code (a file edited since, or anything unusual:
    None, and ``d`` is called instead)."""
    code, lines = d.__code__, linecache.getlines(d.__code__.co_filename)
    spans = [p for p in code.co_positions() if p[0] is not None and p[3] > p[2]]
    if not lines or not spans or code.co_freevars or d.__defaults__ or code.co_flags & 0x0C \
            or len({p[0] for p in spans} | {p[1] for p in spans}) != 1:  # 0x0C: *args, **kwargs
        return None
    params = list(code.co_varnames[:code.co_argcount])
    body = lines[spans[0][0] - 1][min(p[2] for p in spans):max(p[3] for p in spans)]
    try:
        outer = compile(f"lambda {', '.join(params)}: {body}", "<derivative>", "eval")
    except SyntaxError:
        return None
    probe = [c for c in outer.co_consts if isinstance(c, types.CodeType)]
    same = probe and (probe[0].co_code, probe[0].co_consts, probe[0].co_names) == (
        code.co_code, code.co_consts, code.co_names)
    return (params, body, _on_floats(d).__globals__) if same else None


def _on_floats(d, memo=None):
    """``d`` with wengert's functions among its globals bound to their float forms (``cos`` -> ``math.cos``),
    the module's helpers too: on floats the same, and where ``math`` refuses it raises (then the
    backward pass takes the ordinary rules for the arguments that need them, on NumPy's terms)."""
    memo = {} if memo is None else memo
    if d in memo:
        return memo[d]
    code = getattr(d, "__code__", None)
    memo[d] = d
    if code is None:
        return d
    scope = d.__globals__
    swaps = {}
    for name in code.co_names:
        value = scope.get(name)
        prim = getattr(value, "primitive", None)
        if isinstance(prim, Primitive) and prim.float_fun is not None:
            swaps[name] = prim.float_fun
        elif type(value) is types.FunctionType and value.__module__ == d.__module__:
            swaps[name] = _on_floats(value, memo)
    if all(swaps[k] is scope[k] for k in swaps):
        return d
    memo[d] = types.FunctionType(code, {**scope, **swaps}, d.__name__, d.__defaults__, d.__closure__)
    return memo[d]


# -- facts the program transformer relies on ----------------------------------------------------

def facts(prim, *, linear=None, fresh=None, broadcasts=None, operator=None, math_name=None, helper=None,
          saves=None, updates_view=None, units=None, negates=None, linear_jointly=None, shape_only=None,
          identity_if_unchanged=None, constants=None, adds_scaled=None):
    """Record facts about ``prim`` that passes, renderers and code generators read from it:
    - ``linear``: the positional arguments the result is linear in, others fixed (``true_divide``: ``(0,)``);
      ``linear_jointly``: arguments it is linear in taken together (``where``: ``(1, 2)``);
    - ``units``: ``{argument: u}``, where ``u`` there makes the result the other argument (``x * 1``:
      ``multiply``'s ``{0: 1, 1: 1}``); ``negates``: likewise its negation (``subtract``: ``{0: 0}``);
    - ``constants``: ``{argument: (c, value)}``, where ``c`` there makes every element ``value`` (``x ** 0``);
    - ``identity_if_unchanged``: the result is the first argument where it has its shape and dtype
      (``reshape``); ``shape_only``: it reads its arguments' shapes and dtypes, not values (``zeros_like``);
    - ``fresh``: its array result is always a new buffer, never a view of an argument; ``updates_view``:
      ``(x, new, *args) -> x`` with that view replaced by ``new`` (a write into a view writes through);
    - ``broadcasts``: elementwise with NumPy's broadcasting, ``f(broadcast_to(x, s), y) == f(x, y)``
      where the result has shape ``s`` (``matmul`` broadcasts batch axes but is not elementwise);
    - ``operator``, ``math_name``: the Python operator (``"+"``; ``"-"`` negates) and ``math`` function on
      Python floats (``"asin"``) generated code writes for it;
    - ``helper``: a function of NumPy alone that generated code includes by its source and calls
      (for a primitive NumPy cannot write in one call); ``True``: the primitive's implementation;
      ``adds_scaled``: ``buf += s * prim(*args)`` in place, every scalar ``s``: 0, nan (``chooser_weights``);
    - ``saves``: what its VJP rules read (``"out"``, argument indices or names), the tape keeps only
      that: ``(0,)``, or per argument ``{0: (1,), 1: (0,)}``.
    Returns ``prim``. The test suite checks every declared fact numerically."""
    prim = _as_primitive(prim, "facts")
    given = dict(locals(), linear=None if linear is None else tuple(linear),  # every keyword above
                 helper=prim.fun if helper is True else helper)
    for key, value in given.items():
        if value is not None and key != "prim":
            setattr(prim, key, value)
    return prim
