"""Python-float fast paths against the general path, at special points.

Python floats take fast paths (``math``'s functions, Python's operators, fused float VJPs, rules
evaluated on plain floats); NumPy's ufuncs on ``np.float64`` are the general path. Every primitive
with a Python-float path -- found in the rule table, so a new one is covered without editing this
file -- is run at special points (+-0, +-1, negative, +-inf, nan, huge, tiny), alone and in pairs,
through both paths, comparing the value, the first derivative (reverse and forward mode), the
second derivative, and the warnings and exceptions. The one allowed difference is listed in
``ALLOWED_MISSING_WARNINGS`` (documented in ``wengert.core.primitive``'s docstring).
"""

import math
import re
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.core.primitive import Primitive
from wengert.rules import families

SPECIAL = (0.0, -0.0, 1.0, -1.0, -2.5, 0.5, 2.0, math.inf, -math.inf, math.nan,
           1e300, -1e300, 1e-300, 5e-324)
"""Zeros, ones, a negative, a fraction, infinities, nan, huge, tiny (and subnormal)."""

ARITHMETIC = {"add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "square",
              "reciprocal"}
ALLOWED_MISSING_WARNINGS = {("overflow", op) for op in ARITHMETIC} | {
    ("invalid value", op) for op in ARITHMETIC}
"""The documented difference: Python's float arithmetic (+, -, *, /, // in an operator's fast path
or in a rule) gives IEEE's inf or nan without NumPy's RuntimeWarning ("overflow encountered in
multiply", "invalid value encountered in subtract"). A float path may *omit* only these warnings,
and only where its own arithmetic is Python's (every rule; the values of the ARITHMETIC
primitives); it may never add a warning, nor differ in value or exception."""



def _allowed_for_power(name, args):
    """And one more: ``math.pow`` with an infinite exponent gives NumPy's value (inf or 0) without
    the divide-by-zero or overflow warning NumPy adds at ``0 ** -inf`` and ``1e300 ** inf``
    (catching those would need a test on every power of two floats)."""
    if name == "power" and math.isinf(args[1]):
        return {("divide by zero", "power"), ("overflow", "power")}
    return set()

NUMPY_DISAGREES_WITH_ITSELF = {("power", -math.inf, 0.5)}
"""Points where NumPy's float64 scalars and its arrays give different values: ``np.power`` takes
``x ** 0.5`` on scalars as ``sqrt(x)`` (nan at -inf, with a warning), on arrays as C's ``pow``
(inf). The float path (``math.pow``) gives the arrays' value; it is compared with the 1-element
array there, and its derivatives (the same on both paths) without the warnings."""


# -- discovery ---------------------------------------------------------------------------------

def _entry_points():
    """Every primitive of the rule families (differentiable or not), mapped to its entry point
    (the fast function made from it where there is one, which is what users reach)."""
    found = {}
    for module in families():
        for value in vars(module).values():
            prim = getattr(value, "primitive", value)
            if isinstance(prim, Primitive):
                if prim not in found or value is not prim:
                    found[prim] = value
    return found


def _arity(prim):
    return max(len(prim.vjps), len(prim.jvps)) or None


def _float_result_on_floats(entry, arity):
    """Whether ``entry`` on Python floats returns a Python number (its implementation has a float
    branch): the array path would give a NumPy scalar."""
    for n in ((arity,) if arity else (1, 2)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = entry(*[0.5] * n)
        except Exception:  # noqa: BLE001 - needs other arguments: no float path to check
            continue
        return n if type(out) in (float, bool) else None
    return None


def _fast_paths():
    """{name: (entry point, arity, differentiable)} for every primitive with a Python-float path:
    a float implementation, a fused float VJP, or an implementation returning Python floats."""
    table = {}
    for prim, entry in _entry_points().items():
        arity = _arity(prim)
        declared = prim.float_fun is not None or prim.float_vjp is not None
        found = _float_result_on_floats(entry, arity)
        if declared or found:
            table[prim.__name__] = (entry, arity or found, not prim.nondiff)
    return table


FAST = _fast_paths()


def test_the_enumeration_finds_the_fast_paths():
    assert len(FAST) >= 20, sorted(FAST)
    assert {"add", "multiply", "true_divide", "power", "log", "sqrt", "arcsin", "arctan2", "hypot",
            "relu", "floor_divide"} <= set(FAST), sorted(FAST)


# -- running one computation on both paths -------------------------------------------------------

_WARNING = re.compile(r"(divide by zero|invalid value|overflow|underflow) encountered in (?:scalar )?(\w+)")


def _run(fun, *args):
    """(result or the exception's type, {(kind, operation) of each RuntimeWarning})."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fun(*args)
        except Exception as e:  # noqa: BLE001 - compared between the paths
            out = type(e)
    found = set()
    for w in caught:
        m = _WARNING.match(str(w.message))
        found.add((m.group(1), m.group(2)) if m else (w.category.__name__, str(w.message)))
    return out, found


def _flat(out):
    if isinstance(out, tuple):
        return [v for o in out for v in _flat(o)]
    return [out]


def _same_number(a, b):
    if isinstance(a, type) or isinstance(b, type):
        return a is b
    a, b = complex(a), complex(b)
    if a == b:
        return True
    both_nan = [math.isnan(u) and math.isnan(v) for u, v in ((a.real, b.real), (a.imag, b.imag))]
    return all(n or math.isclose(u, v, rel_tol=1e-13)
               for n, u, v in zip(both_nan, (a.real, a.imag), (b.real, b.imag)))


def _check(what, name, args, fast, general, arithmetic_allowed, floats=True, warnings_too=True):
    (f_out, f_warn), (g_out, g_warn) = fast, general
    where = f"{what} of {name} at {args}"
    if isinstance(g_out, type) or isinstance(f_out, type):
        assert f_out is g_out, f"{where}: float path gave {f_out!r}, general path {g_out!r}"
        return
    f_vals, g_vals = _flat(f_out), _flat(g_out)
    assert len(f_vals) == len(g_vals), where
    for f, g in zip(f_vals, g_vals):
        assert _same_number(f, g), f"{where}: float path {f!r}, general path {g!r}"
        if floats:
            assert isinstance(f, (float, bool)), f"{where}: the float path returned a {type(f).__name__}"
    if not warnings_too:
        return
    extra = f_warn - g_warn
    missing = g_warn - f_warn
    assert not extra, f"{where}: warnings only on the float path: {extra}"
    if missing:
        allowed = ALLOWED_MISSING_WARNINGS if arithmetic_allowed else set()
        allowed = allowed | _allowed_for_power(name, args)
        assert missing <= allowed, f"{where}: warnings missing on the float path: {missing - allowed}"


def _points(arity):
    if arity == 1:
        return [(x,) for x in SPECIAL]
    return [(x, y) for x in SPECIAL for y in SPECIAL]


def _as_arrays(args):
    return tuple(np.array(a) for a in args)


# -- the comparisons ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FAST))
def test_value_on_floats_equals_value_on_float64(name):
    entry, arity, _ = FAST[name]
    arithmetic = name in ARITHMETIC
    for args in _points(arity):
        fast = _run(entry, *args)
        if (name, *args) not in NUMPY_DISAGREES_WITH_ITSELF:
            _check("value", name, args, fast, _run(entry, *_as_arrays(args)), arithmetic)
        # the 1-element array path too (NumPy's ufunc loop rather than its scalar math)
        one = _run(lambda *a: tuple(float(v) for v in np.ravel(entry(*a))),
                   *(np.array([a]) for a in args))
        _check("value (1-element arrays)", name, args, fast, one, arithmetic)


def _partial(entry, args, i):
    """``entry`` as a function of its argument ``i`` alone, the others held at ``args``."""
    def f(v):
        return entry(*args[:i], v, *args[i + 1:])
    return f


DIFFERENTIABLE = sorted(n for n, (_, _, diff) in FAST.items() if diff)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_derivatives_on_floats_equal_derivatives_on_float64(name):
    """First derivative by reverse and forward mode, second by reverse-over-reverse and
    forward-over-reverse, each on floats and on 0-d arrays."""
    entry, arity, _ = FAST[name]
    argnums = tuple(range(arity))
    for args in _points(arity):
        arrays = _as_arrays(args)
        vg = wg.value_and_grad(entry, argnums=argnums)
        same = (name, *args) not in NUMPY_DISAGREES_WITH_ITSELF  # else the values differ, the slopes not
        if not same:
            vg = wg.grad(entry, argnums=argnums)
        _check("value and gradient", name, args, _run(vg, *args), _run(vg, *arrays), True,
               warnings_too=same)
        for i in argnums:
            for mode, make in (("jvp", lambda f: lambda v: wg.jvp(f, (v,), (1.0,))[0 if same else 1:]),
                               ("second derivative", lambda f: wg.grad(wg.grad(f))),
                               ("jvp of the gradient", lambda f: lambda v: wg.jvp(wg.grad(f), (v,), (1.0,)))):
                fast = _run(make(_partial(entry, args, i)), args[i])
                general = _run(make(_partial(entry, arrays, i)), arrays[i])
                _check(f"{mode} in argument {i}", name, args, fast, general, True, warnings_too=same)


# -- against JAX and PyTorch ----------------------------------------------------------------

def _x_log_x(x):
    return x * wnp.log(x)


NORMAL = tuple(p for p in SPECIAL if p == 0 or not math.isfinite(p) or abs(p) >= 2.2250738585072014e-308)
"""The special points but the subnormal one: XLA on a CPU flushes subnormals to zero."""


def _oracles(jnp):
    """(wengert's function, JAX's, arity) for the sample of functions the issue names."""
    return {"log": (wnp.log, jnp.log, 1), "sqrt": (wnp.sqrt, jnp.sqrt, 1),
            "arcsin": (wnp.arcsin, jnp.arcsin, 1), "arctanh": (wnp.arctanh, jnp.arctanh, 1),
            "x*log(x)": (_x_log_x, lambda x: x * jnp.log(x), 1),
            "reciprocal": (wnp.reciprocal, jnp.reciprocal, 1),
            "power": (wnp.power, jnp.power, 2), "arctan2": (wnp.arctan2, jnp.arctan2, 2),
            "hypot": (wnp.hypot, jnp.hypot, 2)}


def _convention(name, args):
    """Where wengert's derivative differs from JAX's on purpose (None where it must not)."""
    if name == "power" and (args[0] == 0 or args[1] == 0):
        # d(x**y)/dy at a zero base, and d(x**y)/dx at a zero exponent, are taken as 0 (their limit
        # for y > 0, and the slope of the constant x**0 = 1) on both paths; JAX gives nan there,
        # PyTorch -inf at a zero base with y < 0: no value is right where x**y is infinite.
        return "power at a zero base or exponent"
    if name == "hypot" and (args[0] == args[1] == 0
                            or any(not 1e-100 < abs(a) < 1e100 for a in args if a == a and a != 0)):
        # JAX's hypot rule gives nan at an infinite or a tiny argument, 1.06 at (1e300, 1e300) and
        # 0.5 at (0, 0); wengert's, x / hypot(x, y) as PyTorch's, gives 0, 1 and 0.71 there, nan
        # at (0, 0) (no derivative): see HYPOT_WHERE_JAX_DIFFERS.
        return "JAX's hypot rule"
    return None


@pytest.mark.parametrize("name", ["log", "sqrt", "arcsin", "arctanh", "x*log(x)", "reciprocal",
                                  "power", "arctan2", "hypot"])
def test_derivatives_at_special_points_match_jax(name):
    """At their edges these give JAX's inf or nan (and NumPy's value), not ZeroDivisionError or the
    real part of a complex number."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    ours, theirs, arity = _oracles(jax.numpy)[name]
    argnums = tuple(range(arity))
    points = [(x,) for x in NORMAL] if arity == 1 else [(x, y) for x in NORMAL for y in NORMAL]
    differ = []
    for args in points:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            a = wg.grad(ours, argnums=argnums)(*args)
            b = [float(v) for v in jax.grad(theirs, argnums=argnums)(*args)]
        assert all(type(v) is float for v in a), (name, args, a)
        if not all(_same_number(u, v) for u, v in zip(a, b)) and _convention(name, args) is None:
            differ.append((args, a, b))
    assert not differ, f"{name}: wengert and JAX differ at {differ}"


HYPOT_WHERE_JAX_DIFFERS = {
    (0.0, 0.0): (math.nan, math.nan), (0.0, 1e-300): (0.0, 1.0), (1.0, math.inf): (0.0, math.nan),
    (math.inf, 1.0): (math.nan, 0.0), (1e300, 1e300): (math.sqrt(0.5), math.sqrt(0.5)),
}
"""wengert's hypot derivative where JAX's differs: PyTorch's values (x / hypot(x, y), 0 / 0 = nan
at the origin, inf / inf = nan at an infinite argument)."""


@pytest.mark.parametrize("args", sorted(HYPOT_WHERE_JAX_DIFFERS))
def test_hypot_where_jax_differs_matches_pytorch(args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ours = wg.grad(wnp.hypot, argnums=(0, 1))(*args)
        on_arrays = wg.grad(wnp.hypot, argnums=(0, 1))(*_as_arrays(args))
    for a, b, expected in zip(ours, on_arrays, HYPOT_WHERE_JAX_DIFFERS[args]):
        assert _same_number(a, expected) and _same_number(b, expected), (args, ours, on_arrays)


def test_a_negative_base_to_a_fractional_power_is_nan_as_in_numpy():
    with pytest.warns(RuntimeWarning, match="invalid value"):
        value = wnp.power(-1.0, 0.5)
    assert type(value) is float and math.isnan(value)
    with pytest.warns(RuntimeWarning, match="invalid value"):
        slope = wg.grad(lambda t: t ** 0.5)(-1.0)
    assert type(slope) is float and math.isnan(slope)


def test_division_by_zero_on_floats_is_numpys_inf_with_its_warning():
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        assert wg.grad(lambda t: t / 0.0)(1.0) == math.inf
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        assert wg.grad(lambda t: t * (t // 0.0))(1.0) == math.inf
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        assert wg.grad(lambda t: t ** -1.0)(0.0) == -math.inf
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        assert wg.grad(lambda t: t ** -1)(0.0) == -math.inf


def test_overflow_on_floats_is_numpys_inf_with_its_warning():
    """math.pow and math.exp raise OverflowError; the value is NumPy's inf, with its warning."""
    with pytest.warns(RuntimeWarning, match="overflow"):
        assert wnp.power(1e300, 2.0) == math.inf
    with pytest.warns(RuntimeWarning, match="overflow"):
        assert wg.value_and_grad(wnp.exp)(1000.0) == (math.inf, math.inf)
    with pytest.warns(RuntimeWarning, match="overflow"):
        assert wg.jvp(wnp.cosh, (1000.0,), (1.0,)) == (math.inf, math.inf)


# -- non-smooth points: ties and zeros ---------------------------------------------------------

TIES = [
    ("relu", lambda x: wg.nn.relu(x), (0.0,), (0.0,)),
    ("relu", lambda x: wg.nn.relu(x), (-0.0,), (0.0,)),
    ("abs", wnp.abs, (0.0,), (0.0,)),
    ("sign", wnp.sign, (0.0,), (0.0,)),
    ("maximum", wnp.maximum, (1.0, 1.0), (0.5, 0.5)),
    ("maximum", wnp.maximum, (0.0, -0.0), (0.5, 0.5)),
    ("minimum", wnp.minimum, (1.0, 1.0), (0.5, 0.5)),
    ("where", lambda x, y: wnp.where(x > y, x, y), (1.0, 1.0), (0.0, 1.0)),
    ("clip", lambda x: wnp.clip(x, 0.0, 1.0), (0.0,), (1.0,)),
    ("clip", lambda x: wnp.clip(x, 0.0, 1.0), (1.0,), (1.0,)),
]


@pytest.mark.parametrize("name, fun, args, expected", TIES, ids=[f"{t[0]}{t[2]}" for t in TIES])
def test_ties_and_zeros_agree_between_floats_and_arrays(name, fun, args, expected):
    argnums = tuple(range(len(args)))
    vg = wg.value_and_grad(fun, argnums=argnums)
    fast = _run(vg, *args)
    _check("value and gradient", name, args, fast, _run(vg, *_as_arrays(args)), False, floats=False)
    assert [float(d) for d in fast[0][1]] == list(expected)
    for i in argnums:
        tangent = _run(lambda v: wg.jvp(_partial(fun, args, i), (v,), (1.0,))[1], args[i])
        assert float(tangent[0]) == expected[i], (name, args, i, tangent)
