"""wg.compile's fast paths: the per-signature dispatcher, the in-function math fallback, and the
passes added for speed (each on a small program: statement count and values)."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.program import Program
from wengert.program import algebra as A
from wengert.program import passes as P


def test_dispatcher_checks_shape_dtype_and_static_values():
    f = wg.compile(lambda x, k, s: wnp.sum(x * s) + k)
    a, b = np.arange(3.0), np.arange(4.0)
    assert f(a, 2, 0.5) == pytest.approx(3.5)  # traced
    assert f(a, 2, 1.5) == pytest.approx(6.5)  # the dispatcher: same signature
    assert f(b, 2, 1.0) == pytest.approx(8.0)  # another shape: traced
    assert f(a, 2, 1.0) == pytest.approx(5.0)  # back to the first: no new trace
    assert f(a, 3, 1.0) == pytest.approx(6.0)  # another int: traced values, no new trace (jax.jit)
    assert f(a.astype(np.float32), 3, 1.0) == pytest.approx(6.0)  # another dtype: traced
    assert f(a, True, 1.0) == pytest.approx(4.0)  # a bool is not the int 1: static, its own signature
    assert f(a, 2, 1.0) == pytest.approx(5.0)
    assert f(a[::-1].copy(), 2, 1.0) == pytest.approx(5.0)
    assert f(a, 2.5, 1.0) == pytest.approx(5.5)  # a float where an int was: its own signature
    assert f.cache_info() == (5, 5, 5)
    g = wg.compile(lambda x, k, s: wnp.sum(x * s) + k, static_argnums=1)
    assert g(a, 2, 1.0) == pytest.approx(5.0) and g(a, 2, 2.0) == pytest.approx(8.0)  # the dispatcher
    assert g(a, 3, 1.0) == pytest.approx(6.0)  # another static value: traced
    assert g(a, 2, 0.0) == pytest.approx(2.0)  # back to the first (the slow path finds it)
    assert g.cache_info() == (2, 2, 2)


def test_dispatcher_with_one_argument_and_with_trees():
    f = wg.compile(lambda x: x * 2.0)
    np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])
    g = wg.compile(lambda d: {"y": d["x"] + 1.0})
    assert g({"x": np.zeros(2)})["y"].tolist() == [1.0, 1.0]
    assert g({"x": np.zeros(2)})["y"].tolist() == [1.0, 1.0]
    with pytest.raises(TypeError):
        f()
    assert f.cache_info().hits == 1 and g.cache_info().hits == 1


def test_math_fallback_runs_inside_the_function():
    f = wg.compile(lambda x: wnp.log(x) * 2.0)
    assert f(1.0) == 0.0
    program = f.program(1.0)
    assert program.function.__name__ == program.name  # no wrapper around the generated function
    with np.errstate(invalid="ignore"):
        assert np.isnan(f(-1.0))
    assert f(np.e) == pytest.approx(2.0)


def names(program):
    return [s.prim.__name__ for s in program.statements]


def test_factor_sums_pulls_scalars_out_of_a_sum():
    # sum(-(c * exp(x))) with c = 1 / sum(exp(x)): the product and negation become scalar operations,
    # and the sum of exp(x) is read from the one computed already
    def f(x):
        e = wnp.exp(x)
        c = 1.0 / wnp.sum(e)
        return wnp.sum(-(c * e)) + c

    x = np.array([0.5, -1.0, 2.0, 0.25])
    p = Program.from_trace(f, x)
    assert names(p).count("sum") == 2 and names(p).count("negative") == 1
    q = A.factor_sums(p)
    assert names(q).count("sum") == 1 and len(q.statements) == len(p.statements) - 1
    assert all(s.out.kind != "array" for s in q.statements if s.prim.__name__ in ("multiply", "negative"))
    e = np.exp(x)
    want = -1.0 + 1.0 / e.sum()  # independent: sum(-(e / s)) = -1
    assert q(x) == pytest.approx(want, rel=1e-14) and p(x) == pytest.approx(want, rel=1e-14)


def test_factor_sums_where_the_product_is_used_only_there():
    p = Program.from_trace(lambda x, c: wnp.sum(c * wnp.sin(x), axis=(0, 1)),
                           np.ones((2, 3)), np.float64(3.0))
    q = A.factor_sums(p)
    assert names(q) == ["sin", "sum", "multiply"] and q.statements[-1].out.kind != "array"
    x = np.arange(6.0).reshape(2, 3)
    assert q(x, np.float64(3.0)) == pytest.approx(3.0 * np.sin(x).sum(), rel=1e-14)


def test_factor_sums_leaves_other_sums_alone():
    for fun in (lambda x, c: wnp.sum(c * x, axis=0),  # not over all axes
                lambda x, c: wnp.sum(x * x),  # no scalar factor
                lambda x, c: wnp.sum(c * x) + wnp.sum(c * x * 2.0) + wnp.sum(-(c * x)) * 0.0 + (c * x)[0, 0]):
        p = P.eliminate_common_subexpressions(Program.from_trace(fun, np.ones((2, 3)), np.float64(3.0)))
        assert A.factor_sums(p) is p


def test_add_chosen_skips_a_zero_cotangent_and_shares_ties():
    from wengert.program.rendering import helper_source
    from wengert.rules.reductions import add_chosen

    namespace = {"np": np}
    exec(helper_source("add_chosen", add_chosen), namespace)  # noqa: S102 - as generated code has it
    add_chosen = namespace["add_chosen"]
    x = np.array([[1.0, 3.0], [3.0, -2.0]])
    buf = np.array([[0.5, -0.0], [1.0, 2.0]])
    add_chosen(buf, 0.0, 3.0, x)
    assert buf.tolist() == [[0.5, 0.0], [1.0, 2.0]] and np.signbit(buf[0, 1])  # untouched
    add_chosen(buf, 4.0, 3.0, x)
    assert buf.tolist() == [[0.5, 2.0], [3.0, 2.0]]  # two maxima share it
    add_chosen(buf, np.float64(1.0), -2.0, x)
    assert buf.tolist() == [[0.5, 2.0], [3.0, 3.0]]
    f = wg.compile(lambda x, y: wnp.sum(x * x) + y * wnp.max(x)).grad(0)
    np.testing.assert_array_equal(f(x, 0.0), 2.0 * x)
    np.testing.assert_array_equal(f(x, 2.0), 2.0 * x + [[0.0, 1.0], [1.0, 0.0]])
    def logsumexp(x):
        m = wnp.max(x)
        return m + wnp.log(wnp.sum(wnp.exp(x - m)))

    g = wg.compile(logsumexp).grad(0)
    assert "add_chosen(" in g.source(x)  # the shift's cotangent 1 - sum(softmax): 0 or a rounding error
    for z in (x, np.array([[0.1, 0.7], [0.7, -3.0]]), np.linspace(-1.0, 2.0, 7).reshape(7, 1)):
        np.testing.assert_allclose(g(z), np.exp(z) / np.exp(z).sum(), rtol=1e-14, atol=1e-16)


def test_a_zero_cotangent_of_the_maximum_adds_nothing_unless_a_maximum_is_nan():
    """Generated code calls ``add_chosen`` whatever the max's cotangent (no ``if g:`` around it): at 0 it
    adds nothing (returning at once) where the weights are finite, and nan everywhere where no element
    equals a nan maximum (0 * nan), as the tape; the gradient is the tape's and the formula's."""
    x = np.array([[1.0, 3.0], [3.0, -2.0]])
    ties = np.array([[0.0, 0.5], [0.5, 0.0]])
    cases = [(lambda x, y: y * wnp.max(x) + wnp.sum(x * x), lambda x: 2.0 * x),
             (lambda x, y: wnp.max(x) * (y * 3.0) + wnp.sum(wnp.sin(x)), np.cos)]
    for k, (f, rest) in enumerate(cases):
        g = wg.compile(f).grad(0)
        body = g.source(x, 1.0).split("def ")[-1]
        assert "    add_chosen(" in body and "    if " not in body, body
        for y in (0.0, -0.0, 2.0, -1.0 / 3.0):
            want = rest(x) + (y if k == 0 else y * 3.0) * ties
            np.testing.assert_allclose(g(x, y), want, rtol=1e-15, atol=1e-15)
            np.testing.assert_allclose(g(x, y), wg.grad(f)(x, y), rtol=1e-15, atol=1e-15)
        z = np.array([[1.0, np.nan], [3.0, -2.0]])
        with np.errstate(invalid="ignore"):
            assert np.isnan(g(z, 0.0)).all() and np.isnan(wg.grad(f)(z, 0.0)).all()


def _add_positive(buf, s, x):
    """``buf += s * (x > 0)``, at the positive elements alone."""
    where = x > 0
    buf[where] += s


def test_a_users_weights_are_added_in_place_by_their_adds_scaled_fact():
    """``liveness.scaled_adds`` reads the fact, not a particular primitive: a user's weights primitive
    declaring ``adds_scaled`` is fused like ``chooser_weights`` (its function called in generated code,
    no dense array of weights), with the gradient the tape gives."""
    from wengert.core.extend import nondiff_primitive

    positive = wg.facts(nondiff_primitive(lambda x: (x > 0).astype(x.dtype), name="positive_weights"),
                        adds_scaled=_add_positive)
    relu_total = wg.primitive(lambda x: np.sum(np.maximum(x, 0.0)), name="relu_total")
    wg.defvjp(relu_total, lambda g, out, x: g * positive(x))

    def f(x, y):  # relu_total's contribution to x's adjoint comes last: added into the buffer
        return y * relu_total(x) + wnp.sum(x * x)

    x = np.array([[1.0, -3.0], [0.5, -2.0]])
    g = wg.compile(f).grad(0)
    assert "_add_positive(" in g.source(x, 2.0) and "positive_weights" not in g.source(x, 2.0)
    for y in (2.0, 0.0, -1.5):
        np.testing.assert_array_equal(g(x, y), wg.grad(f)(x, y))
        np.testing.assert_array_equal(g(x, y), 2.0 * x + y * (x > 0))


def test_results_of_every_structure_come_back_through_the_dispatcher():
    from collections import namedtuple

    Pair = namedtuple("Pair", ["a", "b"])
    x = np.array([1.0, 2.0])
    cases = [
        (lambda x: (x * 2.0,), lambda r: r[0].tolist() == [2.0, 4.0] and type(r) is tuple and len(r) == 1),
        (lambda x: [x + 1.0, (x[0], None)], lambda r: r[0].tolist() == [2.0, 3.0] and r[1] == (1.0, None)),
        # keys sorted, as JAX gives them back
        (lambda x: {"s": wnp.sum(x), "a": [x[1]]},
         lambda r: r == {"s": 3.0, "a": [2.0]} and list(r) == ["a", "s"]),
        (lambda x: {3: wnp.sum(x), 1: [x[1]]}, lambda r: r == {3: 3.0, 1: [2.0]} and list(r) == [1, 3]),
        (lambda x: {(1, 2): x[0]}, lambda r: r == {(1, 2): 1.0}),  # a key no literal spells here
        (lambda x: Pair(x[0], {"b": x[1]}), lambda r: type(r) is Pair and r == (1.0, {"b": 2.0})),
        (lambda x: ((x[0],),), lambda r: r == ((1.0,),)),
    ]
    for fun, ok in cases:
        f = wg.compile(fun)
        assert ok(f(x)) and ok(f(x)) and f.cache_info() == (1, 1, 1)
    vg = wg.compile(lambda d: wnp.sum(d["w"] ** 2)).value_and_grad()
    for _ in range(2):
        value, grad = vg({"w": x})
        assert value == 5.0 and list(grad) == ["w"] and grad["w"].tolist() == [2.0, 4.0]


def test_rewrite_algebra_negations():
    def f(a, b):
        return -(-a) + (-b) * 1.0 + (-(a * b) + b) - (-a)

    a, b = np.array([1.5, -2.0, 0.25]), np.array([0.5, 3.0, -1.0])
    p = P.fold_constants(Program.from_trace(f, a, b))
    q = A.rewrite_algebra(p)
    assert names(p).count("negative") == 5 and "negative" not in names(q)
    assert len(q.statements) == len(p.statements) - 5
    want = a - b + (b - a * b) + a  # by hand
    np.testing.assert_allclose(q(a, b), want, rtol=1e-15)
    np.testing.assert_allclose(p(a, b), want, rtol=1e-15)


def test_rewrite_algebra_transposes_and_reciprocals():
    x = np.arange(24.0).reshape(2, 3, 4)
    p = Program.from_trace(lambda x: wnp.transpose(x.T, (2, 1, 0)) + 1.0, x)
    q = A.rewrite_algebra(p)
    assert names(q) == ["add"] and q.statements[0].args[0] is q.inputs[0]
    np.testing.assert_array_equal(q(x), x + 1.0)
    p = Program.from_trace(lambda x: wnp.transpose(wnp.transpose(x, (1, 0, 2)), (0, 2, 1)) * 2.0, x)
    q = A.rewrite_algebra(p)
    assert names(q) == ["transpose", "multiply"] and q.statements[0].args[1] == (1, 2, 0)
    np.testing.assert_array_equal(q(x), 2.0 * np.transpose(x, (1, 2, 0)))
    s = np.float64(3.0)
    p = Program.from_trace(lambda x, s: (1.0 / s) * x + (1.0 / wnp.sum(x)) * x[0], x, s)
    q = A.rewrite_algebra(p)
    assert names(p).count("true_divide") == 2 and names(q).count("true_divide") == 2
    assert "multiply" not in names(q) and len(q.statements) == len(p.statements) - 2
    np.testing.assert_allclose(q(x, s), x / 3.0 + x[0] / x.sum(), rtol=1e-15)
    r = Program.from_trace(lambda x, s: (1.0 / s) * x + 1.0 / s, x, s)  # 1 / s used twice: kept
    assert A.rewrite_algebra(P.eliminate_common_subexpressions(r)).statements[1].prim.__name__ == "multiply"


def test_factor_products_uses_distributivity():
    def f(g, y, z, w):
        return (g * 0.5 * wnp.cos(z) + g * y) - (w * z - y * w) + g * y * 2.0

    args = (0.75, -1.5, 0.3, 2.0)
    p = Program.from_trace(f, *args)
    q = A.factor_products(p)
    assert names(p).count("multiply") == 7 and names(q).count("multiply") == 5
    assert len(q.statements) == len(p.statements) - 2
    g, y, z, w = args
    assert q(*args) == pytest.approx(g * (0.5 * np.cos(z) + y) - w * (z - y) + 2.0 * g * y, rel=1e-15)


def test_factor_products_leaves_shared_and_broadcast_products_alone():
    x, v, s = np.arange(3.0), np.array([1.0, -2.0, 0.5]), np.float64(2.0)
    for fun in (lambda x, v, s: x * v + x * s,  # s broadcasts: another shape
                lambda x, v, s: (x * v + x * 2.0) * (x * v),  # x * v used twice
                lambda x, v, s: x * v + v * 3.0 * s):  # no common factor of the result's type
        p = P.eliminate_common_subexpressions(Program.from_trace(fun, x, v, s))
        assert A.factor_products(p) is p
    p = Program.from_trace(lambda x, v, s: x * v - x * x, x, v, s)
    q = A.factor_products(p)
    assert names(q) == ["subtract", "multiply"]
    np.testing.assert_allclose(q(x, v, s), x * v - x * x, rtol=1e-15)


def test_sparse_constants_are_added_entry_by_entry():
    x = np.arange(6.0).reshape(2, 3)
    g = wg.compile(lambda x: wnp.sum(wnp.sin(x)) - 2.0 * x[1, 2] + x[0, 0]).grad()
    source = g.source(x)
    assert "[1, 2] += -2.0" in source and "[0, 0] += 1.0" in source
    want = np.cos(x)
    want[1, 2] -= 2.0
    want[0, 0] += 1.0
    np.testing.assert_allclose(g(x), want, rtol=1e-15)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(g(x32), want.astype(np.float32), rtol=1e-6)
    dense = wg.compile(lambda x: wnp.sum(wnp.sin(x) * np.arange(1.0, 7.0).reshape(2, 3)) - x[1, 2]).grad()
    assert "[1, 2] += -1.0" in dense.source(x)
    w = np.linspace(1.0, 2.0, 6).reshape(2, 3)  # a constant made inside (a captured w is an input)
    many = wg.compile(lambda x: wnp.sum(wnp.sin(x)) + wnp.sum(np.linspace(1.0, 2.0, 6).reshape(2, 3) * x))
    many = many.grad()
    assert "+= c0" in many.source(x) and "[0, 0] +=" not in many.source(x)
    np.testing.assert_allclose(many(x), np.cos(x) + w, rtol=1e-15)
