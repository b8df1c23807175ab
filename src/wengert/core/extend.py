"""The extension API: how a primitive and its derivatives are defined, in one place.

Five things are all a new primitive needs (``docs/adding-a-primitive.md`` walks through them):

1. :func:`primitive` makes a function a primitive: wengert differentiates it by its rules, not by
   its body.
2. :func:`defvjp` gives it reverse-mode rules, one per positional argument.
3. :func:`defjvp` gives it forward-mode rules, one per positional argument.
4. :func:`elementwise` defines an elementwise function by its partial derivatives alone: one
   expression per argument yields the VJP (``g * d``), the JVP (``t * d``) and the fused rule for
   Python floats.
5. :func:`facts` records what the program transformer may rely on: linear in which arguments,
   always a fresh buffer, how generated code spells it.

Rules are written with wengert's own functions (``wengert.numpy``), so that they can be
differentiated again and traced.
"""

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

__all__ = ["primitive", "defvjp", "defjvp", "elementwise", "facts", "Primitive", "NoRuleError",
           "defvjp_argnum", "defjvp_argnum", "defvjp_accumulate", "defvjp_inplace", "defvjp_float",
           "nondiff_primitive"]


def primitive(fun=None, *, name=None):
    """Make ``fun`` a primitive: wengert will differentiate it by its rules, not by its body.

    Like ``autograd.extend.primitive`` and ``jax.custom_vjp``. Use as ``wg.primitive(f)`` or as a
    decorator; then give rules with :func:`defvjp` and :func:`defjvp`. A rule may return an
    output-shaped result for a broadcast argument: it is summed back to the argument's shape (and
    a tangent broadcast to the output's), as for NumPy's own broadcasting functions. Anything else
    of the wrong shape, or not an array or a number, is an error naming the primitive and argument.
    Traced values must be positional arguments of their own: one inside a list, tuple or dict
    argument (or a keyword argument) is refused, since the rules are given per positional argument.
    """
    if fun is None:
        return lambda f: primitive(f, name=name)
    unbroadcast, broadcast_tangent = BROADCASTING
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
    """``rule`` of user primitive ``prim``, with its result checked (kind and shape) on every call."""
    def checked(g_or_t, out, *args, **kwargs):
        result = rule(g_or_t, out, *args, **kwargs)
        _check_result(prim, mode, argnum, result, args, out)
        return result
    checked.__name__ = checked.__qualname__ = getattr(rule, "__name__", "rule")
    checked.__wrapped__ = rule
    return checked


def _checked_argnum(prim, mode, rule):
    def checked(argnum, g, out, *args, **kwargs):
        result = rule(argnum, g, out, *args, **kwargs)
        _check_result(prim, mode, argnum, result, args, out)
        return result
    checked.__name__ = checked.__qualname__ = getattr(rule, "__name__", "rule")
    checked.__wrapped__ = rule
    return checked


_NUMBERS = (float, int, complex, np.ndarray, np.number)


def _shape(x):
    x = unbox_all(x)
    return tuple(x.shape) if hasattr(x, "shape") else ()


def _check_result(prim, mode, argnum, result, args, out):
    """A VJP result must have the argument's shape (or the output's, for an argument broadcast to it);
    a JVP result the output's shape (or one that broadcasts to it). Both must be arrays or numbers."""
    definer = "defvjp" if mode == "VJP" else "defjvp"
    head = f"wg.{definer}: the {mode} rule of primitive '{prim.__name__}' for argument {argnum}"
    if type(result) not in BOX_TYPES and not isinstance(result, _NUMBERS):
        if result is None:
            fix = ("return zeros (wnp.zeros_like(x)) for an argument without effect, or give None in place "
                   f"of the rule in wg.{definer} to mark the argument as not differentiable")
        else:
            fix = "return a NumPy array or a number (computed with wengert.numpy functions)"
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


def _check_prim(prim, definer):
    if not isinstance(prim, Primitive):
        raise TypeError(
            f"wg.{definer} expects a primitive made by wg.primitive(fun), got {prim!r}; "
            f"wrap the function first: f = wg.primitive(f)"
        )


def _check_rules(prim, rules, definer):
    for i, rule in enumerate(rules):
        if rule is not None and not callable(rule):
            raise TypeError(
                f"wg.{definer}({prim.__name__}, ...): rule for argument {i} must be a function "
                f"or None, got {rule!r}"
            )


def _as_primitive(prim):
    """The Primitive behind ``prim`` (a Primitive, or a fast function made from one)."""
    return getattr(prim, "primitive", prim)


def defvjp(prim, *rules, variadic=None, accumulate=None, inplace=None, floats=None):
    """Give ``prim`` one VJP rule per positional argument: ``rule(g, out, *args, **kwargs)`` returns
    the argument's share of the output's cotangent ``g``; None marks an argument not differentiable.

    Options, for variadic primitives and for speed (each also has a function of its own, named in
    parentheses, that the rule table uses):

    - ``variadic=rule``: one rule for every argument, ``rule(argnum, g, out, *args)`` (``defvjp_argnum``);
    - ``accumulate=(rule, ...)``: rules that add the contribution into a buffer in place
      (``defvjp_accumulate``);
    - ``inplace=(rule, ...)``: rules that may overwrite ``g`` (``defvjp_inplace``);
    - ``floats=rule``: one fused rule for Python floats (``defvjp_float``).
    """
    if variadic is not None:
        defvjp_argnum(prim, variadic)
    else:
        _set_vjps(prim, rules)
    if accumulate is not None:
        defvjp_accumulate(prim, *accumulate)
    if inplace is not None:
        defvjp_inplace(prim, *inplace)
    if floats is not None:
        defvjp_float(prim, floats)
    return _as_primitive(prim)


def _set_vjps(prim, rules):
    prim = _as_primitive(prim)
    _check_prim(prim, "defvjp")
    _check_rules(prim, rules, "defvjp")
    if isinstance(prim, UserPrimitive):
        rules = [None if r is None else _checked(prim, "VJP", i, r) for i, r in enumerate(rules)]
    prim.vjps = tuple(rules)
    prim.vjp_argnum = None
    _note_extra(prim)
    prim.vjp_missing = _ALL_MISSING.difference(i for i, r in enumerate(rules) if r is not None)
    return prim


def defjvp(prim, *rules, variadic=None):
    """Give ``prim`` one JVP rule per positional argument: ``rule(t, out, *args, **kwargs)`` returns
    the output's tangent contributed by the argument's tangent ``t``; None marks an argument not
    differentiable. ``variadic=rule``: one rule for every argument, ``rule(argnum, t, out, *args)``."""
    if variadic is not None:
        return defjvp_argnum(prim, variadic)
    prim = _as_primitive(prim)
    _check_prim(prim, "defjvp")
    _check_rules(prim, rules, "defjvp")
    if isinstance(prim, UserPrimitive):
        rules = [None if r is None else _checked(prim, "JVP", i, r) for i, r in enumerate(rules)]
    prim.jvps = tuple(rules)
    prim.jvp_argnum = None
    return prim


def defvjp_argnum(prim, rule):
    """One VJP rule for every argument (for variadic primitives): ``rule(argnum, g, out, *args)``."""
    prim = _as_primitive(prim)
    _check_prim(prim, "defvjp_argnum")
    if isinstance(prim, UserPrimitive):
        rule = _checked_argnum(prim, "VJP", rule)
    prim.vjp_argnum = rule
    prim.vjp_missing = frozenset()
    prim.vjp_extra = True
    return prim


def defvjp_accumulate(prim, *rules):
    """Give ``prim`` in-place forms of its VJP rules, one per positional argument (None: none).

    ``rule(buffer, g, out, *args, **kwargs)`` adds the argument's cotangent contribution into
    ``buffer`` -- an array of the argument's shape that the backward pass allocated and owns --
    in place, and returns nothing. A first-order backward pass uses it instead of the ordinary
    rule (which must exist too: higher-order passes, where ``g`` is itself traced, use that one
    so the result stays differentiable). The in-place ``v_bar[i] += e_bar``.
    """
    prim = _as_primitive(prim)
    _check_prim(prim, "defvjp_accumulate")
    _check_rules(prim, rules, "defvjp_accumulate")
    _require_ordinary_rules(prim, rules, "defvjp_accumulate", " (higher-order passes need it)")
    prim.vjp_accumulate = tuple(rules) if any(r is not None for r in rules) else None
    _note_extra(prim)
    return prim


def defvjp_float(prim, rule):
    """Give a one- or two-argument ``prim`` a fused VJP for Python floats (the scalar hot path).

    ``rule(g, out, x)`` returns x's contribution; ``rule(g, out, x, y)`` returns the pair of
    contributions ``(for x, for y)``. The backward pass calls it instead of the per-argument rules
    when ``g`` and every argument are Python floats, so nothing is traced and plain float
    arithmetic (``math``) is all it needs; one call instead of one per argument saves about a
    quarter of a recorded scalar operation's cost. It must compute what the ordinary rules compute
    (tests/core/test_float_vjp.py checks that). Where it raises ``ArithmeticError`` or ``ValueError``
    (``math`` refusing what NumPy answers with inf or nan) the ordinary rules are used, and where
    they raise too, they run again on ``np.float64`` (see the module's docstring). It must raise
    rather than return what NumPy would not (Python's ``**`` gives a complex number for a negative
    base's fractional power: use ``math.pow``, which raises).
    """
    prim = _as_primitive(prim)
    _check_prim(prim, "defvjp_float")
    _check_rules(prim, (rule,), "defvjp_float")
    prim.float_vjp = rule
    return prim


def defvjp_inplace(prim, *rules):
    """Give ``prim`` forms of its VJP rules that may overwrite the cotangent, one per positional
    argument (None: none).

    ``rule(g, out, *args, **kwargs)`` returns the argument's contribution like the ordinary rule,
    but may compute it in ``g``'s memory (and return ``g``), or return None to decline (the
    ordinary rule is used then). The backward pass calls it only when ``g`` is a plain array
    that nothing else refers to (it owns it, and has popped it off its adjoints) and exactly one
    argument takes a contribution, so ``g`` is not needed after the call: the
    linearity argument (a value used once can be updated in place). ReLU's backward, g * (x > 0),
    then needs no new array, as in a hand-written backward pass.
    """
    prim = _as_primitive(prim)
    _check_prim(prim, "defvjp_inplace")
    _check_rules(prim, rules, "defvjp_inplace")
    _require_ordinary_rules(prim, rules, "defvjp_inplace")
    prim.vjp_inplace = tuple(rules) if any(r is not None for r in rules) else None
    _note_extra(prim)
    return prim


def _require_ordinary_rules(prim, rules, definer, why=""):
    """A special form of a VJP rule (in place, accumulating) needs the ordinary rule beside it."""
    for i, rule in enumerate(rules):
        if rule is not None and i in prim.vjp_missing:
            raise TypeError(f"wg.{definer}({prim.__name__}, ...): argument {i} has no ordinary VJP rule; "
                            f"give one with wg.defvjp first{why}")


def _note_extra(prim):
    """Keep ``vjp_extra`` (the backward pass's one test for anything beyond ``vjps``) up to date."""
    extra = (prim.vjp_accumulate is not None or prim.vjp_argnum is not None
             or prim.vjp_inplace is not None)
    prim.vjp_extra = True if extra else None


def defjvp_argnum(prim, rule):
    """One JVP rule for every argument (for variadic primitives): ``rule(argnum, t, out, *args)``."""
    prim = _as_primitive(prim)
    _check_prim(prim, "defjvp_argnum")
    if isinstance(prim, UserPrimitive):
        rule = _checked_argnum(prim, "JVP", rule)
    prim.jvp_argnum = rule
    return prim


def nondiff_primitive(fun, name=None):
    """A function whose result carries no derivative (comparisons, argmax, shape queries).

    Traced arguments are unboxed; the result is a constant at every level.
    """
    return Primitive(fun, name=name, nondiff=True)



# -- elementwise functions: one derivative expression per argument --------------------------------

def elementwise(np_fun, *derivatives, name=None, float_fun=None, **known):
    """An elementwise primitive defined by its partial derivatives.

    ``derivatives[i](out, *args)`` is the derivative of the output with respect to argument ``i``,
    elementwise (``sin``: ``lambda out, x: cos(x)``), written with wengert's functions; a number
    stands for a constant derivative (``add``: ``1.0, 1.0``) and None for an argument that is not
    differentiable. From each the VJP ``g * d`` and the JVP ``t * d`` are made, and, when
    ``float_fun`` (``math.sin``, ``operator.add``) computes the function on Python floats, a fused
    rule for floats: the same expressions with wengert's functions replaced by their float forms
    (``math.cos``). Arguments of two- and three-argument functions broadcast as in NumPy.
    ``known`` holds facts (see :func:`facts`); an elementwise result is always a fresh buffer.
    Returns the function to call (its primitive is its ``.primitive``).

    This form fits functions whose derivative is a multiplier (holomorphic ones, for complex
    numbers); others (``absolute`` of a complex number) give their rules with :func:`defvjp`.
    """
    n = len(derivatives)
    name = name or np_fun.__name__
    impl = _float_path(np_fun, float_fun, n)
    prim = Primitive(impl, name=name, broadcasts=n > 1)
    prim.derivatives = derivatives
    _set_vjps(prim, [_times(d) for d in derivatives])
    defjvp(prim, *[_times(d) for d in derivatives])
    if float_fun is not None and n <= 2 and all(d is not None for d in derivatives):
        prim.float_vjp = _FusedFloatRule(prim)
    if float_fun is not None and getattr(float_fun, "__module__", None) in ("math", "builtins"):
        known.setdefault("math_name", float_fun.__name__)
    known.setdefault("fresh", True)
    facts(prim, **known)
    if n == 1:
        return unary_function(prim, float_fun)
    if n == 2:
        return binary_function(prim, float_fun)
    return prim


def _float_path(np_fun, float_fun, n):
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
        def impl(*args):
            if all(type(a) is float for a in args):
                try:
                    return float_fun(*args)
                except FLOAT_PATH_ERRORS:
                    return np_fun(*args).item()
            return np_fun(*args)
    impl.__name__ = getattr(np_fun, "__name__", "elementwise")
    impl.__doc__ = f"numpy.{impl.__name__}, elementwise."
    impl.__wrapped__ = np_fun
    return impl


def _times(d):
    """The rule ``g * d(out, *args)`` (VJP) or ``t * d(out, *args)`` (JVP) for a partial derivative."""
    if d is None:
        return None
    if callable(d):
        def rule(g, out, *args):
            return g * d(out, *args)
        rule.__name__ = rule.__qualname__ = f"times_{getattr(d, '__name__', 'partial')}"
        rule.partial = d
        return rule
    if d == 1:
        return _identity
    if d == -1:
        return _negated
    return lambda g, out, *args: g * d


def _identity(g, out, *args):
    return g


def _negated(g, out, *args):
    return -g


class _FusedFloatRule:
    """The fused rule for Python floats of an :func:`elementwise` primitive, built on first use (the
    derivative expressions may name functions defined after it): ``g * d(out, x)``, or the pair
    ``(g * d0(out, x, y), g * d1(out, x, y))``, with each wengert function the expressions name
    replaced by its float form."""

    __slots__ = ("prim",)

    def __init__(self, prim):
        self.prim = prim

    def __call__(self, g, out, *args):
        rule = _fused(self.prim.derivatives)
        self.prim.float_vjp = rule
        return rule(g, out, *args)


def _fused(derivatives):
    ds = [_on_floats(d) if callable(d) else _constant(float(d)) for d in derivatives]
    if len(ds) == 1:
        (d,) = ds

        def fused(g, out, x):
            return g * d(out, x)
    else:
        d0, d1 = ds

        def fused(g, out, x, y):
            return g * d0(out, x, y), g * d1(out, x, y)
    return fused


def _constant(c):
    return lambda out, *args: c


def _on_floats(d):
    """``d`` with the wengert functions among its global names bound to their float forms
    (``cos`` -> ``math.cos``): on Python floats it computes the same, a call shorter."""
    code = getattr(d, "__code__", None)
    if code is None:
        return d
    scope = d.__globals__
    swaps = {}
    for name in code.co_names:
        prim = getattr(scope.get(name), "primitive", None)
        if isinstance(prim, Primitive) and prim.float_fun is not None:
            swaps[name] = prim.float_fun
    if not swaps:
        return d
    return types.FunctionType(code, {**scope, **swaps}, d.__name__, d.__defaults__, d.__closure__)


# -- facts the program transformer relies on ----------------------------------------------------

_FACTS = ("linear", "fresh", "broadcasts", "operator", "math_name", "helper")


def facts(prim, *, linear=None, fresh=None, broadcasts=None, operator=None, math_name=None, helper=None):
    """Record facts about ``prim`` that passes, renderers and code generators read from it:

    - ``linear``: the positional arguments in which the result is linear, the others held fixed
      (``multiply``: ``(0, 1)``; ``true_divide``: ``(0,)``): a zero there makes the result zero;
    - ``fresh``: its array result is always a new buffer, never a view of an argument;
    - ``broadcasts``: its positional arguments broadcast against each other, as NumPy's ufuncs';
    - ``operator``: the Python operator generated code writes for it (``"+"``; ``"-"`` for a
      one-argument negation);
    - ``math_name``: the ``math`` function generated code calls on Python floats (``"asin"``);
    - ``helper``: a function of NumPy alone that generated code includes by its source and calls
      (for a primitive NumPy cannot write in one call); by default the primitive's implementation.

    Returns ``prim``. ``tests/rules/test_facts.py`` checks every declared fact numerically.
    """
    prim = _as_primitive(prim)
    given = dict(linear=linear, fresh=fresh, broadcasts=broadcasts, operator=operator,
                 math_name=math_name, helper=helper)
    if linear is not None:
        given["linear"] = tuple(linear)
    if helper is True:
        given["helper"] = prim.fun
    for key, value in given.items():
        if value is not None:
            setattr(prim, key, value)
    return prim
