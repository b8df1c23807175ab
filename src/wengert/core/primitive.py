"""Primitives: the rule table's entries and the one dispatch point every engine goes through.

A primitive wraps an implementation and carries its rules (:class:`Primitive` lists its slots,
``wengert.core.extend`` sets them). A call with no traced argument costs one scan and the implementation.

Python floats take fast paths (``math``'s functions, Python's operators, fused float rules) with one
contract: the general path's value and derivative on ``np.float64``. Where Python refuses what NumPy
answers with inf or nan (``math.log(0.0)``, ``1.0 / 0.0``, a negative base's fractional power) the
fast path raises one of :data:`FLOAT_PATH_ERRORS` and the step is redone on ``np.float64``
(:func:`on_float64`): NumPy's value and warning. One difference: Python's ``+ - * /`` give inf or nan
without NumPy's warning. tests/core/test_fast_paths.py checks every float path at special points.
"""

from numpy import float64 as _float64

from wengert.core.trace import BOX_TYPES, SYMBOLIC_TYPES, unbox_all

__all__ = ["Primitive", "NoRuleError", "unary_function", "binary_function", "FLOAT_PATH_ERRORS", "on_float64"]

FLOAT_PATH_ERRORS = (ArithmeticError, ValueError)
"""What a Python-float fast path raises where NumPy answers inf or nan (ZeroDivisionError,
OverflowError, math's "math domain error"): the step is then done again on np.float64."""


def on_float64(fun, args, kwargs, error):
    """``fun(*args, **kwargs)`` again with every Python float (or int) in ``args`` as ``np.float64``, after
    the float fast path raised ``error`` (one of :data:`FLOAT_PATH_ERRORS`); a float64 result comes
    back as a Python float. Re-raises ``error`` when no argument is a Python float (then it is not
    a fast path's refusal but a real error)."""
    if not any(type(a) is float or type(a) is int for a in args):  # an int: a count (mean's, of 0)
        raise error
    out = fun(*[_float64(a) if type(a) is float or type(a) is int else a for a in args], **(kwargs or {}))
    if type(out) is _float64:
        return float(out)
    return out


class NoRuleError(NotImplementedError):
    """A derivative was asked of a primitive argument that has no rule for ``mode`` ("vjp", "jvp")."""

    def __init__(self, message, mode=None):
        super().__init__(message)
        self.mode = mode


class Primitive:
    """A function whose derivatives are given by rules rather than by tracing its body. Its slots,
    set here and by :func:`wengert.defvjp` and its kin (rules ``rule(g, out, *args, **kwargs)``):

    - ``fun``: the implementation; ``float_fun``: it on Python floats (the recording hot path calls it);
    - reverse rule, stated in ONE of three forms: ``vjps`` (one per argument, None: not differentiable),
      ``vjp_argnum`` (one for all, ``rule(argnum, g, ...)``) or ``vjp_joint`` (every argument's share in
      one call, ``rule(needed, g, ...)`` -> list, None where not needed; :meth:`vjp_rule` derives each
      argument's share from it); ``vjp_missing``: the argnums without a rule, checked when recording;
    - fast forms of the same rule: ``vjp_accumulate`` (add into the adjoint buffer the backward pass
      owns), ``vjp_inplace`` (in ``g``'s memory), ``float_vjp`` (all shares at once on Python floats);
      ``vjp_extra``: True when more than ``vjps`` is declared, the backward pass's one test;
    - forward rule, in ONE form likewise: ``jvps``, ``jvp_argnum`` or ``jvp_joint`` (the tangent from
      every argument's at once, ``rule(tangents, out, *args)``, None where absent; :meth:`jvp_rule` derives
      one argument's); ``grad_post(c, arg)``/``tangent_post(t, out)`` adjust every rule's result;
    - ``batch``: ``vmap``'s rule (``defbatch``); ``nondiff``: the result carries no derivative;
    - facts (``linear``, ``linear_jointly``, ``units``, ``negates``, ``identity_if_unchanged``,
      ``shape_only``, ``fresh``, ``updates_view``, ``broadcasts``, ``operator``, ``math_name``, ``helper``,
      ``saves``, ``constants``, ``adds_scaled``, ``derivatives``): documented at :func:`wengert.facts`.
    """

    def __init__(self, fun, name=None, grad_post=None, tangent_post=None, nondiff=False, broadcasts=False):
        if broadcasts:  # NumPy's broadcasting of the positional arguments, and its adjoint
            grad_post, tangent_post = BROADCASTING
        self.fun = fun
        self.__name__ = name or getattr(fun, "__name__", "primitive")
        self.__qualname__ = self.__name__
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__wrapped__ = fun
        self.vjps = self.jvps = ()
        self.vjp_argnum = self.jvp_argnum = self.vjp_joint = self.jvp_joint = self.batch = None
        self.grad_post, self.tangent_post = grad_post, tangent_post
        self.nondiff, self.vjp_missing = nondiff, _ALL_MISSING
        self.vjp_accumulate = self.vjp_inplace = self.vjp_extra = self.float_vjp = self.float_fun = None
        self.linear = self.linear_jointly = ()
        self.fresh = self.shape_only = self.identity_if_unchanged = False
        self.broadcasts = broadcasts  # elementwise broadcasting (grad_post alone may sum batch axes)
        self.operator = self.math_name = self.helper = self.derivatives = self.units = self.negates = None
        self.saves = self.updates_view = self.constants = self.adds_scaled = None  # saves None: all read

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
        """The VJP rule for positional argument ``argnum`` (a joint rule's share where that is the form
        given), or raise :class:`NoRuleError`."""
        if self.vjp_joint is not None:
            return _JointShare(self.vjp_joint, argnum)
        return _rule(self, self.vjps, self.vjp_argnum, argnum, "VJP (reverse-mode)", "defvjp")

    def jvp_rule(self, argnum):
        """The JVP rule for argument ``argnum`` (a joint rule's, given that tangent alone), or NoRuleError."""
        if self.jvp_joint is not None:
            return _JointTangent(self.jvp_joint, argnum)
        return _rule(self, self.jvps, self.jvp_argnum, argnum, "JVP (forward-mode)", "defjvp")


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
        self.rule, self.argnum = rule, argnum

    def __call__(self, g, out, *args, **kwargs):
        return self.rule(self.argnum, g, out, *args, **kwargs)


class _JointShare(_ArgnumRule):
    """Argument ``argnum``'s share of a joint rule ``rule(needed, g, out, *args)``."""

    def __call__(self, g, out, *args, **kwargs):
        return self.rule([i == self.argnum for i in range(len(args))], g, out, *args, **kwargs)[self.argnum]


class _JointTangent(_ArgnumRule):
    """Argument ``argnum``'s tangent alone, through a joint rule ``rule(tangents, out, *args)``."""

    def __call__(self, t, out, *args, **kwargs):
        return self.rule([t if i == self.argnum else None for i in range(len(args))], out, *args, **kwargs)


def _rule(prim, rules, variadic, argnum, mode, definer):
    """``prim``'s rule for argument ``argnum`` (one of ``rules``, or ``variadic`` bound to it)."""
    if variadic is not None:
        return _ArgnumRule(variadic, argnum)
    rule = rules[argnum] if argnum < len(rules) else None
    if rule is None:
        raise NoRuleError(f"wengert: primitive '{prim.__name__}' has no {mode} rule for its argument "
                          f"{argnum}. Define one with wg.{definer}({prim.__name__}, ...), or do not "
                          "differentiate with respect to that argument (pass a constant there).", definer[3:])
    return rule


BROADCASTING = [None, None]
"""``[unbroadcast, broadcast_tangent]``, broadcasting's adjoint and tangent rules: rules themselves,
put here by ``wengert.rules.broadcasting`` for primitives made with ``broadcasts=True``."""
_ALL_MISSING = frozenset(range(256))


def unary_function(prim, float_fun=None):
    """A fast entry point for a one-argument primitive (the scalar hot path): ``prim``'s behaviour
    without the generic argument scan; Python floats go to ``float_fun`` (``math.sin``), and to the
    implementation on ``np.float64`` where it raises (``log(-1.0)``: NumPy's nan and warning)."""
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
    call.__doc__, call.primitive = prim.__doc__, prim
    return call
