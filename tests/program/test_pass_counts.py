"""The use counts that passes hand on (``eliminate_dead_code`` counts them on its way,
``algebra.factor_products`` updates its argument's) are those counted afresh, and the programs that
read them compute what the tape does."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.program import Program, algebra, passes, pipeline


def _fresh_counts(program):
    """``use_counts`` of a copy that carries none: counted from the statements."""
    copy = program.with_statements(program.statements)
    assert copy._counts is None
    return passes.use_counts(copy)


def _handed_on(program):
    assert program._counts is not None, "no use counts handed on"
    return program._counts


def test_dead_code_elimination_counts_the_reads_of_what_it_keeps():
    def f(x, y):
        a = x * y
        b = wnp.sin(a) * a  # a read twice
        unused = wnp.cos(b) * x  # dead: x is read once less
        del unused
        return b + x

    p = Program.from_trace(f, 0.3, 0.9)
    q = passes.eliminate_dead_code(p)
    assert len(q.statements) == len(p.statements) - 2
    counts = _handed_on(q)
    assert counts == _fresh_counts(q)
    x, a = q.inputs[0], q.statements[0].outs[0]
    assert counts[a] == 2 and counts[x] == 2  # a * y, and the output's b + x
    assert passes.use_counts(q) is counts  # counted once


def _factored(f, *args):
    p = passes.eliminate_dead_code(Program.from_trace(f, *args))
    q = algebra.factor_products(p)
    assert q is not p, "nothing factored"
    assert _handed_on(q) == _fresh_counts(q)
    np.testing.assert_allclose(q(*args), p(*args), rtol=1e-13)
    return q


def test_factor_products_hands_on_the_counts_of_what_it_wrote():
    q = _factored(lambda g, b, c: g * b + g * c, 0.3, 0.9, -1.7)
    assert sum(s.prim is algebra._MUL for s in q.statements) == 1


def test_factor_products_counts_a_common_factor_read_twice_on_one_side():
    # g * g * b + g * c: g (read three times) is read twice after, as g * ((g * b) + c)
    q = _factored(lambda g, b, c: g * g * b + g * c, 0.3, 0.9, -1.7)
    assert _handed_on(q)[q.inputs[0]] == 2


def test_factor_products_counts_a_factored_product_factored_again():
    # u = g*b + g*c becomes g * (b + c), a product read once, which w = u*h + k*h then takes apart
    def f(g, b, c, h, k):
        u = g * b + g * c
        return u * h + k * h

    q = _factored(f, 0.3, 0.9, -1.7, 1.1, 0.4)
    assert sum(s.prim is algebra._MUL for s in q.statements) <= 3


def test_factor_products_leaves_a_shared_product_and_its_counts():
    def f(g, b, c):
        u = g * b  # read twice: factoring it out of one sum would compute it again
        return (u + g * c) * u

    p = passes.eliminate_dead_code(Program.from_trace(f, 0.3, 0.9, 1.2))
    counts = _handed_on(p)
    assert algebra.factor_products(p) is p
    assert p._counts is counts and counts == _fresh_counts(p)


def test_factor_products_counts_two_rewrites_reading_one_product_of_the_inputs():
    q = _factored(lambda g, b: (g * b) + (g * b) * g, 0.3, 0.9)  # traced: g * b twice, not merged
    assert _handed_on(q)[q.inputs[0]] == 2


def _chain(shape):
    """Scalar programs whose gradients factor_products rewrites (sums of products with a shared
    factor), built from ``shape``: a list of (operation, left, right)."""
    def f(x, y):
        values = [x, y]
        for op, i, j in shape:
            a, b = values[i % len(values)], values[j % len(values)]
            if op == "mul":
                values.append(a * b)
            elif op == "muladd":
                values.append(a * b + a * y)
            elif op == "sin":
                values.append(a * y + 0.5 * wnp.sin(a))
            else:
                values.append(a - b * x)
        return values[-1] + values[2] * 0.25 if len(values) > 2 else x * y

    return f


SHAPES = st.lists(st.tuples(st.sampled_from(["mul", "muladd", "sin", "sub"]), st.integers(0, 9),
                            st.integers(0, 9)), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(SHAPES, st.floats(-1.2, 1.2), st.floats(-1.2, 1.2))
def test_counts_handed_on_through_the_pipeline_are_fresh_and_gradients_the_tapes(shape, x, y):
    f = _chain(shape)
    p = Program.from_trace(f, x, y)
    g = p.grad((0, 1))  # simplified: dead code eliminated last
    assert _handed_on(g) == _fresh_counts(g)
    lowered = pipeline.lower(g)
    if lowered._counts is not None:
        assert lowered._counts == _fresh_counts(lowered)
    got, want = lowered(x, y), wg.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(wg.compile(f).grad((0, 1))(x, y), want, rtol=1e-10, atol=1e-12)
