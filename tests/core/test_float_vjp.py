"""Fused float VJPs (``defvjp_float``): the backward pass's shortcut for Python floats must give
exactly what the ordinary per-argument rules give, and must be the one used on floats only."""

import math
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.core.extend import defvjp_float
from wengert.rules import rule_table

FUSED = {name: prim for name, prim in rule_table().items() if prim.float_vjp is not None}
POINTS = [0.3, 0.71, 1.4, 2.2]


def _inside(prim, args):
    """Whether ``args`` lie in ``prim``'s domain: a finite value and finite derivatives (arcsin's
    domain is [-1, 1], arccosh's [1, inf): each fused rule is checked where it is defined)."""
    with np.errstate(all="ignore"):
        arrays = [np.float64(a) for a in args]
        out = prim.fun(*arrays)
        ds = [rule(np.float64(1.0), out, *arrays) for rule in prim.vjps]
    return bool(np.isfinite(out) and np.all(np.isfinite(ds)))


def test_the_common_scalar_primitives_have_fused_rules():
    assert {"add", "subtract", "multiply", "true_divide", "power", "sin", "cos", "exp", "log"} <= set(FUSED)


def _arity(prim):
    return 2 if len(prim.vjps) == 2 else 1


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_rule_equals_the_ordinary_rules(name):
    prim = FUSED[name]
    for x in POINTS:
        for g in (1.0, -0.37):
            args = (x, POINTS[-1] - x / 2) if _arity(prim) == 2 else (x,)
            if not _inside(prim, args):
                continue
            out = prim.fun(*args)
            fused = prim.float_vjp(g, out, *args)
            fused = fused if _arity(prim) == 2 else (fused,)
            ordinary = tuple(rule(g, out, *args) for rule in prim.vjps)
            assert all(type(c) is float for c in fused), (name, fused)
            assert fused == pytest.approx(ordinary, rel=1e-15, abs=0), (name, args)


@pytest.mark.parametrize("name", sorted(FUSED))
def test_gradient_on_floats_equals_gradient_on_zero_d_arrays(name):
    """Floats take the fused rule, 0-d arrays the ordinary ones (and broadcasting's bookkeeping)."""
    prim = FUSED[name]
    if _arity(prim) == 2:
        def f(x, y):
            return prim(prim(x, y), y) * x
        args = (0.6, 0.8)
    else:
        def f(x, y):
            return prim(prim(x) * y) * x
        args = next(a for a in [(1.6, 0.8), (0.6, 0.8), (0.3, 0.5), (2.5, 1.5)] if _inside(prim, (a[0],))
                    and _inside(prim, (prim.fun(a[0]) * a[1],)))
    on_floats = wg.grad(f, argnums=(0, 1))(*args)
    on_arrays = wg.grad(f, argnums=(0, 1))(*(np.array(a) for a in args))
    assert all(type(c) is float and math.isfinite(c) for c in on_floats)
    np.testing.assert_allclose(on_floats, [float(c) for c in on_arrays], rtol=1e-14)


def test_where_math_raises_the_ordinary_rules_answer():
    """sin(inf): math.cos raises in the fused rule; the ordinary rule gives NumPy's nan, as arrays do."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        on_float = wg.grad(wnp.sin)(math.inf)
        on_array = wg.grad(wnp.sin)(np.array(math.inf))
    assert math.isnan(on_float) and np.isnan(on_array)


def test_fused_rule_is_used_for_floats_only():
    """A primitive whose fused rule deliberately differs shows which one each path calls."""
    twice = wg.primitive(lambda x: 2.0 * x)
    wg.defvjp(twice, lambda g, out, x: 2.0 * g)
    defvjp_float(twice, lambda g, out, x: 3.0 * g)  # wrong on purpose
    assert wg.grad(twice)(1.5) == 3.0
    assert float(wg.grad(twice)(np.array(1.5))) == 2.0
    # grad of grad: the inner pass's cotangent of twice is traced (it is x), so it takes the ordinary
    # rule, 2.0 * x; the outer pass is on floats again: d/dx (2.0 * x + twice(x)) = 2.0 + 3.0
    assert wg.grad(wg.grad(lambda x: twice(x) * x))(1.5) == 5.0


def test_defvjp_float_refuses_what_is_not_a_primitive_or_a_rule():
    with pytest.raises(TypeError, match="expects a primitive"):
        defvjp_float(math.sin, lambda g, out, x: g)
    with pytest.raises(TypeError, match="must be a function"):
        defvjp_float(wg.primitive(lambda x: x), 3.0)


def test_a_users_elementwise_function_gets_a_fused_rule_whatever_its_derivative_looks_like():
    """One-line derivatives are written inline into the fused rule; others (several lines, default
    arguments, closures) are called from it. Either way it computes what the ordinary rule does."""
    scale = 3.0

    def several_lines(out, x):
        s = math.cos(x)
        return s * scale

    cases = [
        wg.elementwise(np.sin, lambda out, x: wnp.cos(x) * 3.0, float_fun=math.sin, name="one_line"),
        wg.elementwise(np.sin, lambda out, x, c=3.0: wnp.cos(x) * c, float_fun=math.sin, name="defaults"),
        wg.elementwise(np.sin, lambda out, x: wnp.cos(x) * scale, float_fun=math.sin, name="closure"),
        wg.elementwise(np.sin, several_lines, float_fun=math.sin, name="several_lines"),
    ]
    for f in cases:
        assert wg.grad(lambda x, f=f: f(x) * 2.0)(0.4) == pytest.approx(6.0 * math.cos(0.4), rel=1e-15)
        prim = f.primitive
        assert prim.float_vjp(1.5, math.sin(0.4), 0.4) == pytest.approx(1.5 * 3.0 * math.cos(0.4), rel=1e-15)


def test_a_derivative_whose_source_changed_since_import_is_called_not_inlined(tmp_path, monkeypatch):
    """The fused rule writes a one-line derivative inline only when its source text still compiles
    to its code: a file edited after import must not put other code in the rule."""
    import importlib
    import linecache

    (tmp_path / "edited_derivative.py").write_text("import numpy as np\nd = lambda out, x: np.cos(x) * 3.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("edited_derivative")
    (tmp_path / "edited_derivative.py").write_text("import numpy as np\nd = lambda out, x: np.cos(x) * 5.0\n")
    linecache.clearcache()
    f = wg.elementwise(np.sin, module.d, float_fun=math.sin, name="edited")
    assert f.primitive.float_vjp(1.0, math.sin(0.4), 0.4) == pytest.approx(3.0 * math.cos(0.4), rel=1e-15)


def test_derivatives_from_two_modules_keep_their_own_names(tmp_path, monkeypatch):
    """``scale`` means 2 in one module and 7 in the other: merged into one scope, one would be wrong."""
    import importlib

    for name, k in (("deriv_two", 2.0), ("deriv_seven", 7.0)):
        (tmp_path / f"{name}.py").write_text(f"scale = {k}\nd = lambda out, x, y: scale * y\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    two, seven = (importlib.import_module(n) for n in ("deriv_two", "deriv_seven"))
    f = wg.elementwise(np.multiply, two.d, seven.d, float_fun=lambda x, y: x * y, name="mixed")
    assert f.primitive.float_vjp(1.0, 6.0, 2.0, 3.0) == (2.0 * 3.0, 7.0 * 3.0)
