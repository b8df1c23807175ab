"""Each pass on its own: what it removes or rewrites, and that the program computes the same."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.program import Program, pipeline
from wengert.program import passes as P
from wengert.program.ir import Variable
from wengert.program.replay import _Ref, _Replay, _replayed
from wengert.program.tracing import ProgramBuilder
from wengert.rules.elementwise import multiply, negative


def names(program):
    return [s.prim.__name__ for s in program.statements]


def test_dead_code_keeps_only_what_the_loss_needs_bignet_smallnet():
    def step(data, W_big, W_small):
        result = wnp.tanh(data @ W_big) @ W_big.T  # BigNet(data): traced, but nothing needs it
        loss = wnp.sum(wnp.tanh(data @ W_small) ** 2)  # SmallNet(data)
        del result
        return loss

    args = (np.ones((4, 3)), np.ones((3, 3)), np.full((3, 2), 0.1))
    p = Program.from_trace(step, *args)
    assert len(p.statements) == 8
    pruned = P.eliminate_dead_code(p)
    assert names(pruned) == ["matmul", "tanh", "power", "sum"]
    w_big = p.inputs[1]
    assert all(w_big not in s.uses() for s in pruned.statements)
    assert pruned(*args) == p(*args)


def test_common_subexpressions_are_computed_once():
    p = Program.from_trace(lambda x: wnp.sin(x) * wnp.sin(x) + wnp.exp(2.0 * x) * wnp.exp(2.0 * x), 0.3)
    assert names(p).count("sin") == 2 and names(p).count("exp") == 2
    q = P.eliminate_common_subexpressions(p)
    assert names(q).count("sin") == 1 and names(q).count("exp") == 1 and names(q).count("multiply") == 3
    assert q(0.3) == p(0.3)


def test_constant_folding_drops_ones_and_zeros():
    p = Program.from_trace(lambda x: x * 1.0 + 0.0 * wnp.exp(x) - 0.0, np.arange(3.0))
    q = P.eliminate_dead_code(P.fold_constants(p))
    assert q.statements == [] and q.outputs == [q.inputs[0]]
    np.testing.assert_array_equal(q(np.arange(3.0)), p(np.arange(3.0)))


def test_constant_folding_of_shape_only_constructors():
    p = Program.from_trace(lambda x: x + np.ones_like(x) * 2.0 + np.zeros_like(x), np.arange(3.0))
    assert "ones_like" in names(p)
    q = pipeline.simplify(p)
    assert names(q) == ["add"] and isinstance(q.statements[0].args[1], np.ndarray)
    np.testing.assert_array_equal(q(np.arange(3.0)), [2.0, 3.0, 4.0])


def test_constant_folding_removes_the_seeds_ones_from_a_gradient():
    def f(x, y):
        return wnp.sum(x * y)

    x, y = np.arange(3.0), np.array([2.0, -1.0, 0.5])
    raw = Program.from_trace(f, x, y)
    vjp = raw.vjp()  # a symbolic seed: the adjoint statements stay
    assert "multiply" in names(vjp)
    grad = raw.grad(0)  # seed 1.0: broadcast ones times y is y itself
    assert grad.statements == [] and grad.outputs == [grad.inputs[1]]
    np.testing.assert_array_equal(grad(x, y), y)
    assert grad(x, y) is not y  # a copy: the caller may write into the gradient


@pytest.mark.parametrize("c", [0.5, 1.0, -1.0, 0.0, -0.0, 2.0, float("nan")],
                         ids=["half", "one", "minus_one", "zero", "minus_zero", "two", "nan"])
def test_fold_and_merge_is_folding_then_common_subexpressions_on_float_factors(c):
    """``fold_and_merge`` (one sweep, with a shortcut for a Variable times a float) leaves what
    folding and then merging leave, on products by each float the folding rules treat apart."""
    def f(x):
        y = wnp.sin(x)
        return c * y + y * c + (c * y) * c + wnp.cos(x) * 3.0

    x = 0.3
    p = Program.from_trace(f, x)
    one_sweep = P.eliminate_dead_code(pipeline.fold_and_merge(p))
    two = P.eliminate_dead_code(P.eliminate_common_subexpressions(P.fold_constants(p)))
    assert [str(s) for s in one_sweep.statements] == [str(s) for s in two.statements]
    assert str(one_sweep.outputs) == str(two.outputs)
    np.testing.assert_equal(one_sweep(x), p(x))
    if c == 0.5:
        assert names(p).count("multiply") == 5 and names(one_sweep).count("multiply") == 4  # c * y once


def test_explicit_dup_makes_every_use_count_one():
    def f(x):
        return x * x + wnp.sin(x) * x

    p = Program.from_trace(f, 0.7)
    assert P.use_counts(p)[p.inputs[0]] == 4
    d = P.explicit_dup(p)
    assert set(P.use_counts(d).values()) == {1}
    assert names(d)[0] == "dup" and len(d.statements[0].outs) == 4
    assert d(0.7) == p(0.7)
    assert d.grad()(0.7) == p.grad()(0.7)


def test_in_place_accumulation_of_indexed_adjoints():
    def f(x):
        return x[0] * x[1] + x[2] ** 2 + x[1:4].sum()

    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    g = pipeline.simplify(Program.from_trace(f, x).grad())
    assert names(g).count("untake") == 3 and "index_add" not in names(g)  # x[1:4]'s is a constant
    h = P.accumulate_in_place(g)
    assert names(h).count("untake") == 1 and names(h).count("index_add") == 2
    text = str(h)
    assert "] += " in text and "untake" in text
    assert "] += " in h.source
    kept = x.copy()
    np.testing.assert_array_equal(h(x), [2.0, 2.0, 7.0, 1.0, 0.0])
    np.testing.assert_array_equal(x, kept)


def test_in_place_accumulation_of_dense_adjoints_only_into_owned_buffers():
    def f(W, x):
        return wnp.sum(wnp.tanh(W @ x) + W @ x)

    W, x = np.arange(6.0).reshape(2, 3) / 6, np.ones(3)
    g = pipeline.simplify(Program.from_trace(f, W, x).grad((0, 1)))
    h = P.accumulate_in_place(g)
    assert " += " in str(h)
    assert any(s.inplace for s in h.statements)
    W0, x0 = W.copy(), x.copy()
    for a, b in zip(h(W, x), g(W, x)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(W, W0)
    np.testing.assert_array_equal(x, x0)


def test_no_in_place_into_inputs_or_buffers_read_twice():
    p = Program.from_trace(lambda x, y: (x + y) * (x + y + 1.0) + x, np.ones(2), np.ones(2))
    q = P.accumulate_in_place(p)
    first_add = q.statements[0]
    assert not first_add.inplace  # x and y are the caller's arrays
    # "+ 1.0", the product and the final "+ x" write into buffers the program made and reads once
    assert [s.prim.__name__ for s in q.statements if s.inplace] == ["add", "multiply", "add"]
    assert str(q).splitlines()[-4:] == ["    v2 += 1.0", "    v1 *= v2", "    v1 += v_1", "    return v1"]
    np.testing.assert_array_equal(q(np.ones(2), np.ones(2)), p(np.ones(2), np.ones(2)))


def test_elide_broadcasts():
    def f(x):
        return wnp.sum(wnp.exp(x)) * 2.0

    g = Program.from_trace(f, np.ones((3, 2))).vjp()
    assert "broadcast_to" in names(g)
    h = P.elide_broadcasts(g)
    assert "broadcast_to" not in names(h)
    for a, b in zip(h(np.ones((3, 2)), 1.5)[1], g(np.ones((3, 2)), 1.5)[1]):
        np.testing.assert_array_equal(a, b)


def test_optimize_keeps_values():
    def f(W, b, x):
        h = wnp.maximum(x @ W + b, 0.0)
        return wnp.mean(h * h) + wnp.sum(h[0])

    args = (np.linspace(-1, 1, 12).reshape(3, 4), np.linspace(0, 1, 4), np.linspace(-2, 2, 6).reshape(2, 3))
    g = Program.from_trace(f, *args).value_and_grad((0, 1, 2))
    o = pipeline.optimize(g)
    value, grads = o(*args)
    want_value, want_grads = g(*args)
    assert value == want_value
    for a, b in zip(grads, want_grads):
        np.testing.assert_array_equal(a, b)


def test_two_broadcasts_into_one_sum_are_not_both_dropped():
    """Each broadcast_to alone may be left to the add's own broadcasting, but not both at once:
    the adjoint of x reduced twice along axis 0 had the reduced shape (found by the fuzzer)."""
    def f(x):
        return np.sum(np.sin(np.sum(x, axis=0))) + np.sum(np.cos(np.sum(x, axis=0) * 2.0))

    x = np.arange(6.0).reshape(2, 3) / 10
    got = wg.compile(f).grad()(x)
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, wg.grad(f)(x), rtol=1e-12)


def test_a_replayed_rule_picks_its_arguments_whatever_their_number():
    """Adjoint rules are recorded once and replayed (``replay._Replay``): each recorded statement
    takes its arguments back from the replay's constants, inputs and earlier results, also when
    it has none or one."""
    meta = ((), np.dtype(np.float64), "float", 1.0)
    steps = ((negative.primitive, (), {"x": _Ref(0)}, (meta,), False),  # keyword argument only
             (negative.primitive, (_Ref(1),), None, (meta,), False),  # one argument
             (multiply.primitive, (2.0, _Ref(2)), None, (meta,), False))  # a constant and a result
    replay = _Replay(steps, _Ref(3))
    builder = ProgramBuilder()
    x = Variable("x", (), np.float64, "float")
    out = _replayed(builder, replay, (x,), builder.symbol)
    first, second, third = builder.statements
    assert first.args == () and first.kwargs == {"x": x}
    assert second.args == (first.outs[0],) and third.args == (2.0, second.outs[0])
    assert out.variable is third.outs[0]


def test_constant_folding_of_a_power_of_zero():
    """``x ** 0`` is ones (NumPy's ``nan ** 0`` is 1 too), by ``power``'s ``constants`` fact: the
    second derivative of a square leaves one in every Hessian."""
    def f(x):
        return wnp.sum(x ** 0 * wnp.sin(x)) + wnp.power(x[0], 0)

    x = np.array([0.5, np.nan, -np.inf])
    p = Program.from_trace(f, x)
    assert names(p).count("power") == 2
    q = pipeline.simplify(p)
    assert "power" not in names(q)
    with np.errstate(invalid="ignore"):  # sin(-inf)
        np.testing.assert_array_equal(q(x), p(x))
    h = wg.compile(wg.hessian(lambda v: wnp.sum((1.0 - v) ** 2 + v ** 3)))
    assert "**" not in h.source(np.arange(3.0)).split("def ")[-1]  # 2 * (1 - v) ** 0 folded
    np.testing.assert_allclose(h(np.arange(3.0)), wg.hessian(lambda v: wnp.sum((1.0 - v) ** 2 + v ** 3))(
        np.arange(3.0)), rtol=1e-12)


def test_census_is_what_the_statements_apply():
    """``Program.census`` (the passes' first test): the primitives applied and whether an array is made;
    passes that hand it on hand on a superset."""
    def f(x, y):
        return wnp.sum(wnp.sin(x) * y) * 2.0 + wnp.sum(x * y) * 3.0

    args = (np.arange(3.0), np.array([2.0, -1.0, 0.5]))
    g = Program.from_trace(f, *args).grad((0, 1))
    for q in (g, pipeline.lower(g), P.eliminate_dead_code(g)):
        prims, arrays = q.census()
        assert {s.prim for s in q.statements} <= prims
        assert arrays or not any(o.kind == "array" for s in q.statements for o in s.outs)
    assert Program.from_trace(lambda a: a * 2.0, 1.5).census()[1] is False


def test_elementwise_results_are_written_into_dying_buffers():
    """An elementwise ufunc's result goes into an argument's buffer the program made, reads only
    there, of the result's shape and dtype: never the caller's arrays, a buffer read again, or one
    of another shape or dtype (what broadcasting or a cast would need)."""
    def f(x, y):
        a = wnp.exp(x * 2.0)  # x * 2.0 is the program's, read once: exp writes into it
        b = 3.0 - a  # a's buffer (subtract's second argument)
        c = b * y[:, None]  # b is (3,), c (3, 3): a new buffer
        d = wnp.sin(b)  # b is read twice (here and by c): a new buffer
        return c + d + wnp.astype(x, np.float32) * np.float32(2.0)  # a float32 copy of x: its own

    x, y = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, -3.0])
    q = P.accumulate_in_place(Program.from_trace(f, x, y))
    written = [s.prim.__name__ for s in q.statements if s.inplace]
    assert written == ["exp", "subtract", "add", "multiply", "add"]
    assert not any(q.statements[k].inplace for k in (0, 4, 5))  # x * 2.0, b * y[:, None], sin(b)
    source = q.source
    assert "v1 = np_exp(v1, out=v1)" in source and "v1 = np_subtract(3.0, v1, out=v1)" in source
    x0, y0 = x.copy(), y.copy()
    np.testing.assert_array_equal(q(x, y), f(x, y))
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)
