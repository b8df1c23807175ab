"""Primitives: the rule table's entries and the one dispatch point every engine goes through.

A primitive wraps a NumPy implementation. It carries one VJP rule and one JVP rule per positional
argument::

    vjp rule:  rule(g, out, *args, **kwargs) -> cotangent contribution for that argument
    jvp rule:  rule(t, out, *args, **kwargs) -> tangent contribution of that argument to ``out``

``g`` is the output's cotangent, ``t`` the argument's tangent, ``out`` the primal result. Rules are
written with wengert's own functions, so they can be differentiated again and traced. ``None`` in
place of a rule means the argument is not differentiable; asking for a derivative through it raises
:class:`NoRuleError`. Calling a primitive with no traced argument costs one scan of the arguments
and then the plain implementation: this is the path rules themselves take in a first-order pass.

Python floats take fast paths: ``math``'s functions and Python's operators for values
(:func:`unary_function`, :func:`binary_function`), fused float VJPs (:func:`defvjp_float`), and
rules evaluated on plain floats. Their contract: the same value and derivative as the general
path on ``np.float64``, which NumPy's ufuncs take. Where Python refuses what NumPy answers with
inf or nan (``math.log(0.0)``, ``1.0 / 0.0``, ``0.0 ** -1.0``, ``math.exp(1000.0)``, a negative
base's fractional power), the float path raises ``ArithmeticError`` or ``ValueError``
(:data:`FLOAT_PATH_ERRORS`), and the same step is done again on ``np.float64``
(:func:`on_float64`): NumPy's value, NumPy's RuntimeWarning, and the result back as a Python
float. A ``try`` costs nothing until it raises, so the normal path pays nothing for this.
The one documented difference: Python's float arithmetic (``+``, ``-``, ``*``, ``/`` in an
operator's fast path or a rule) returns IEEE's inf or nan *silently* where NumPy warns
("overflow encountered", "invalid value encountered" in add, subtract, multiply, divide);
checking each result would cost the scalar hot path its speed. So does ``math.pow`` with an
infinite exponent (``0.0 ** -inf``, ``1e300 ** inf``: NumPy's value, without its divide-by-zero or
overflow warning). Values never differ.
tests/core/test_fast_paths.py checks every primitive with a Python-float path against the general path
at special points (+-0, +-1, negative, +-inf, nan, huge, tiny).
"""

import numpy as np
from numpy import float64 as _float64

from wengert.core import exits as _exits
from wengert.core.trace import BOX_TYPES, SYMBOLIC_TYPES, contains_box, unbox_all

__all__ = ["Primitive", "primitive", "defvjp", "defjvp", "defvjp_argnum", "defjvp_argnum",
           "defvjp_accumulate", "defvjp_inplace", "defvjp_float", "NoRuleError"]

FLOAT_PATH_ERRORS = (ArithmeticError, ValueError)
"""What a Python-float fast path raises where NumPy answers inf or nan (ZeroDivisionError,
OverflowError, math's "math domain error"): the step is then done again on np.float64."""


def on_float64(fun, args, kwargs, error):
    """``fun(*args, **kwargs)`` again with every Python float among ``args`` as ``np.float64``, after
    the float fast path raised ``error`` (one of :data:`FLOAT_PATH_ERRORS`); a float64 result comes
    back as a Python float. Re-raises ``error`` when no argument is a Python float (then it is not
    a fast path's refusal but a real error)."""
    if not any(type(a) is float for a in args):
        raise error
    out = fun(*[_float64(a) if type(a) is float else a for a in args], **(kwargs or {}))
    if type(out) is _float64:
        return float(out)
    return out


class NoRuleError(NotImplementedError):
    """A derivative was asked of a primitive argument that has no rule for that mode."""


class Primitive:
    """A function whose derivatives are given by rules rather than by tracing its body.

    The backward pass (``reverse.backward_pass``) applies ``vjp_rule(i)`` and ``grad_post``
    inline, for speed; forward mode goes through :meth:`jvp`.

    ``grad_post(contribution, arg)`` and ``tangent_post(tangent, out)`` are optional per-family
    adjustments applied to every rule's result, e.g. summing a broadcast cotangent back to the
    argument's shape; they are the one place such bookkeeping lives.

    ``vjp_accumulate`` (see :func:`defvjp_accumulate`) holds optional in-place forms of the VJP
    rules, ``rule(buffer, g, out, *args, **kwargs)`` adding the contribution into an adjoint
    buffer the backward pass owns (``x[idx]``: ``buffer[idx] += g``, O(len(g)) instead of a
    zero-filled array of x's size). ``vjp_inplace`` (see :func:`defvjp_inplace`) holds optional
    forms of the VJP rules that may overwrite the cotangent. ``vjp_extra`` is None unless the VJP
    needs more than the per-argument tuple ``vjps`` (one rule for all arguments, accumulate or
    in-place rules): the backward pass tests only it on its hot path. ``float_vjp`` (see
    :func:`defvjp_float`) is an optional fused form of the VJP rules for Python floats, and
    ``float_fun`` an optional implementation for Python floats (``math.sin``, ``operator.mul``;
    set by :func:`unary_function` and :func:`binary_function`) that the recording hot path
    calls directly.
    """

    def __init__(self, fun, name=None, grad_post=None, tangent_post=None, nondiff=False):
        self.fun = fun
        self.__name__ = name or getattr(fun, "__name__", "primitive")
        self.__qualname__ = self.__name__
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun
        self.vjps = ()
        self.jvps = ()
        self.vjp_argnum = None
        self.jvp_argnum = None
        self.grad_post = grad_post
        self.tangent_post = tangent_post
        self.nondiff = nondiff
        self.vjp_missing = _ALL_MISSING  # argnums without a VJP rule, checked when recording
        self.vjp_accumulate = None
        self.vjp_inplace = None
        self.vjp_extra = None
        self.float_vjp = None
        self.float_fun = None

    def __call__(self, *args, **kwargs):
        top = None
        for a in args:
            if type(a) in BOX_TYPES:
                t = a._trace
                if top is None or t.level > top.level:
                    top = t
        if top is None:
            sym = _nested_symbol(args)
            if sym is not None:
                return sym._trace.apply(self, args, kwargs)
            try:
                return self.fun(*args, **kwargs)
            except ValueError as e:
                raise explained(self, args, e) from e
        if self.nondiff:
            args, kwargs = [unbox_all(a) for a in args], unbox_all(kwargs)
            for a in args:
                if type(a) in BOX_TYPES:  # a symbol (unbox_all stops there): its program records the call
                    return a._trace.apply(self, tuple(args), kwargs)
            return top.constant(self.fun(*args, **kwargs))
        if len(args) == 1:
            return top.apply1(self, args[0], kwargs)
        return top.apply(self, args, kwargs)

    def __repr__(self):
        return f"<wengert primitive {self.__name__}>"

    # -- rules -------------------------------------------------------------------------------
    def vjp_rule(self, argnum):
        """The VJP rule for positional argument ``argnum``, or raise :class:`NoRuleError`."""
        if self.vjp_argnum is not None:
            return _ArgnumRule(self.vjp_argnum, argnum)
        rules = self.vjps
        rule = rules[argnum] if argnum < len(rules) else None
        if rule is None:
            raise NoRuleError(_missing(self, "VJP (reverse-mode)", argnum, "defvjp"))
        return rule

    def jvp_rule(self, argnum):
        """The JVP rule for positional argument ``argnum``, or raise :class:`NoRuleError`."""
        if self.jvp_argnum is not None:
            return _ArgnumRule(self.jvp_argnum, argnum)
        rules = self.jvps
        rule = rules[argnum] if argnum < len(rules) else None
        if rule is None:
            raise NoRuleError(_missing(self, "JVP (forward-mode)", argnum, "defjvp"))
        return rule

    def jvp(self, argnum, t, out, args, kwargs):
        """Tangent of ``out`` contributed by the tangent ``t`` of argument ``argnum``."""
        rule = self.jvp_rule(argnum)
        try:
            d = rule(t, out, *args, **kwargs)
        except FLOAT_PATH_ERRORS as e:  # Python floats refused (1.0 / 0.0): on np.float64, as NumPy
            d = on_float64(rule, (t, out, *args), kwargs, e)
        if self.tangent_post is not None:
            d = self.tangent_post(d, out)
        return d


def explained(prim, args, error):
    """``error`` (NumPy's ValueError) restated with the operation's name and its arguments' shapes."""
    shapes = []
    for a in args:
        a = unbox_all(a)
        if hasattr(a, "shape") or isinstance(a, (float, int, complex, list)):
            shapes.append(str(tuple(getattr(a, "shape", ()) if not isinstance(a, list) else (len(a),))))
    return type(error)(f"{prim.__name__} of arrays with shapes {', '.join(shapes)}: {error}")


class _ArgnumRule:
    """A rule given once for all arguments (``rule(argnum, g, out, *args)``), bound to one argnum."""

    __slots__ = ("rule", "argnum")

    def __init__(self, rule, argnum):
        self.rule = rule
        self.argnum = argnum

    def __call__(self, g, out, *args, **kwargs):
        return self.rule(self.argnum, g, out, *args, **kwargs)


def _missing(prim, mode, argnum, definer):
    return (
        f"wengert: primitive '{prim.__name__}' has no {mode} rule for its argument {argnum}. "
        f"Define one with wg.{definer}({prim.__name__}, ...), or do not differentiate with "
        f"respect to that argument (pass a constant there)."
    )


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


BROADCASTING = [None, None]
"""Broadcasting's adjoint and tangent rules, ``[unbroadcast, broadcast_tangent]``: rules themselves
(the cotangent of a broadcast argument is a sum), defined in ``wengert.rules.broadcasting``, which
puts them here when imported, for :func:`primitive` to give every user primitive."""


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


_ALL_MISSING = frozenset(range(256))


def _as_primitive(prim):
    """The Primitive behind ``prim`` (a Primitive, or a fast function made from one)."""
    return getattr(prim, "primitive", prim)


def defvjp(prim, *rules):
    """Give ``prim`` one VJP rule per positional argument: ``rule(g, out, *args, **kwargs)``."""
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


def defjvp(prim, *rules):
    """Give ``prim`` one JVP rule per positional argument: ``rule(t, out, *args, **kwargs)``."""
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


def unary_function(prim, float_fun=None):
    """A fast entry point for a one-argument primitive (the scalar hot path).

    Same behaviour as calling ``prim``; it skips the generic argument scan (a Python function of
    fixed arity costs a fraction of ``Primitive.__call__``'s ``*args, **kwargs``). With
    ``float_fun`` (e.g. ``math.sin``), Python floats are computed by it directly, falling back to
    the implementation on ``np.float64`` where it raises, as ``math`` does for ``log(-1.0)``
    (NumPy's nan and RuntimeWarning, returned as a Python float). ``float_fun`` must raise rather
    than return what NumPy would not.
    """
    fun = prim.fun
    prim.float_fun = float_fun

    if float_fun is None:
        def call(x):
            if type(x) in BOX_TYPES:
                return x._trace.apply1(prim, x)
            return fun(x)
    else:
        def call(x):  # the float branch repeats the implementation's, saving a call per operation
            if type(x) is float:
                try:
                    return float_fun(x)
                except FLOAT_PATH_ERRORS:
                    return float(fun(_float64(x)))
            if type(x) in BOX_TYPES:
                return x._trace.apply1(prim, x)
            return fun(x)

    return _named(call, prim)


def binary_function(prim, float_op=None):
    """A fast entry point for a two-argument primitive (see :func:`unary_function`); two Python
    floats go straight to ``float_op`` (e.g. ``operator.mul``) when given, and to the
    implementation on ``np.float64`` where it raises (``1.0 / 0.0``)."""
    fun = prim.fun
    prim.float_fun = float_op

    def call(x, y):
        if float_op is not None and type(x) is float and type(y) is float:
            try:
                return float_op(x, y)
            except FLOAT_PATH_ERRORS:
                return fun(_float64(x), _float64(y)).item()
        if type(x) in BOX_TYPES:
            t = x._trace
            if type(y) in BOX_TYPES and y._trace.level > t.level:
                t = y._trace
        elif type(y) in BOX_TYPES:
            t = y._trace
        else:
            sym = _nested_symbol((y,)) if type(y) is tuple else None
            if sym is not None:
                return sym._trace.apply(prim, (x, y), {})
            try:
                return fun(x, y)
            except ValueError as e:
                raise explained(prim, (x, y), e) from e
        return t.apply2(prim, x, y)

    return _named(call, prim)


def _nested_symbol(args):
    """A program tracer's symbol inside a tuple or list argument (an index ``x[i, j]`` with a traced
    ``i``, on an untraced ``x``), or None: the call is then recorded by the symbol's program."""
    if SYMBOLIC_TYPES:
        for a in args:
            if type(a) is tuple or type(a) is list:
                for x in a:
                    if type(x) in SYMBOLIC_TYPES:
                        return x
                    if type(x) is tuple or type(x) is list:  # nested lists: [[a, 1.0], [2.0, b]]
                        found = _nested_symbol((x,))
                        if found is not None:
                            return found
    return None


def _named(call, prim):
    call.__name__ = call.__qualname__ = prim.__name__
    call.__doc__ = prim.__doc__
    call.primitive = prim
    return call
