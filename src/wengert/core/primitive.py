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

from numpy import float64 as _float64

from wengert.core.trace import BOX_TYPES, SYMBOLIC_TYPES, unbox_all

__all__ = ["Primitive", "NoRuleError", "unary_function", "binary_function", "FLOAT_PATH_ERRORS", "on_float64"]

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

    def __init__(self, fun, name=None, grad_post=None, tangent_post=None, nondiff=False, broadcasts=False):
        if broadcasts:  # NumPy's broadcasting of the positional arguments, and its adjoint
            grad_post, tangent_post = BROADCASTING
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
        # facts the program transformer reads (see wengert.core.extend.facts)
        self.linear = ()
        self.fresh = False
        self.broadcasts = broadcasts or (grad_post is not None and grad_post is BROADCASTING[0])
        self.operator = None
        self.math_name = None
        self.helper = None
        self.derivatives = None

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


BROADCASTING = [None, None]
"""Broadcasting's adjoint and tangent rules, ``[unbroadcast, broadcast_tangent]``: rules themselves
(the cotangent of a broadcast argument is a sum), defined in ``wengert.rules.broadcasting``, which
puts them here when imported, for :func:`primitive` to give every user primitive."""


_ALL_MISSING = frozenset(range(256))


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
