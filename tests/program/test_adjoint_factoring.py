"""The adjoint sweep factors ``g * b + g * c`` as ``g * (b + c)`` for Python floats while it records them
(``algebra.factor_recent``): the derivatives stay those of the tape and of finite differences on
random scalar programs (shared values, cotangents read by several rules, second derivatives), and
the scalar chain's adjoint comes out factored already (``factor_products`` has nothing left)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.program import Program, pipeline
from wengert.program.ir import Variable
from wengert.program.replay import IDENTITY, _record, scaled_part
from wengert.program.tracing import ProgramBuilder
from wengert.rules.elementwise import add, multiply, sin, subtract, true_divide

OPS = ("mul", "add", "sub", "sin", "cos", "scale", "neg", "square", "muladd")


def _apply(op, a, b, c):
    if op == "mul":
        return a * b
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "sin":
        return wnp.sin(a)
    if op == "cos":
        return wnp.cos(a)
    if op == "scale":
        return c * a
    if op == "neg":
        return -a
    if op == "square":
        return a * a  # one cotangent read by both of a rule's arguments
    return a * b + c * wnp.sin(a)  # the chain's step: two products of one cotangent


def _program(steps):
    def f(x, y):
        values = [x, y]
        for op, i, j, c in steps:
            values.append(_apply(op, values[i % len(values)], values[j % len(values)], c))
        total = values[-1]
        for v in values[2:-1:2]:  # several outputs summed: cotangents accumulated from several uses
            total = total + v
        return total

    return f


STEPS = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 9), st.integers(0, 9),
                           st.sampled_from([0.5, -1.0, 2.0, 1.0])), min_size=1, max_size=9)
FLOATS = st.floats(-1.5, 1.5, allow_nan=False)


def _finite_differences(f, x, y, h=1e-6):
    return ((f(x + h, y) - f(x - h, y)) / (2 * h), (f(x, y + h) - f(x, y - h)) / (2 * h))


@settings(max_examples=30, deadline=None)
@given(STEPS, FLOATS, FLOATS)
def test_factored_adjoints_of_random_scalar_programs_are_the_tapes(steps, x, y):
    f = _program(steps)
    g = Program.from_trace(f, x, y).grad((0, 1))
    tape = wg.grad(f, argnums=(0, 1))(x, y)
    for program in (g, pipeline.lower(g)):
        np.testing.assert_allclose(program(x, y), tape, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(wg.compile(f).grad((0, 1))(x, y), tape, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tape, _finite_differences(f, x, y), rtol=1e-5, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(STEPS, FLOATS)
def test_second_derivatives_of_random_scalar_programs_are_the_tapes(steps, x):
    f = _program(steps)
    g = lambda v: f(v, 0.75)  # noqa: E731
    d2 = wg.grad(wg.grad(g))
    np.testing.assert_allclose(wg.compile(d2)(x), d2(x), rtol=1e-9, atol=1e-10)


def _chain(steps):
    def f(a, b):
        z = a
        for _ in range(steps):
            z = z * b + 0.5 * wnp.sin(z)
        return z

    return f


def test_the_chains_adjoint_is_recorded_factored():
    # a step is 4 forward statements and 6 adjoint ones: cos(z), 0.5 * that, + y, g * that for z,
    # g * z and the sum for y (no g * y, g * 0.5 and product of those to take apart later)
    sizes = [len(Program.from_trace(_chain(n), 0.3, 0.9).grad((0, 1)).statements) for n in (6, 8)]
    assert sizes[1] - sizes[0] == 2 * (4 + 6)
    g = Program.from_trace(_chain(6), 0.3, 0.9).grad((0, 1))
    np.testing.assert_allclose(g(0.3, 0.9), wg.grad(_chain(6), argnums=(0, 1))(0.3, 0.9), rtol=1e-12)


def test_a_cotangent_read_again_is_never_consumed():
    # t = u * u reads t's cotangent twice; u's cotangent is then a product of it read by both
    def f(x, y):
        u = x * y
        t = u * u
        return t * x + 0.5 * wnp.sin(t)

    x, y = 0.7, -1.3
    got = wg.compile(f).grad((0, 1))(x, y)
    np.testing.assert_allclose(got, wg.grad(f, argnums=(0, 1))(x, y), rtol=1e-12)
    want = (3 * x * x * y * y + 0.5 * math.cos(x * x * y * y) * 2 * x * y * y,
            2 * x ** 3 * y + 0.5 * math.cos(x * x * y * y) * 2 * x * x * y)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _recorded(prim, i):
    builder = ProgramBuilder()
    g, out, x, y = [builder.symbol(Variable(n, (), np.float64, "float"), 0.7) for n in "goxy"]
    inputs = (g, out, x) if prim is sin.primitive else (g, out, x, y)
    return _record(builder, inputs, lambda: prim.vjp_rule(i)(*inputs), ())[1]


@pytest.mark.parametrize("op, i, steps", [(multiply, 0, 0), (multiply, 1, 0), (sin, 0, 1)],
                         ids=["x*y for x", "x*y for y", "sin"])
def test_a_rule_ending_in_g_times_w_is_a_scaling_rule(op, i, steps):
    form = scaled_part(_recorded(op.primitive, i))
    assert form is not None and form is not IDENTITY and len(form.steps) == steps


def test_adds_rule_is_the_identity_and_a_negation_no_scaling():
    assert scaled_part(_recorded(add.primitive, 0)) is IDENTITY
    assert scaled_part(_recorded(subtract.primitive, 1)) is None  # -g: no product last
    assert len(scaled_part(_recorded(true_divide.primitive, 0)).steps) == 1  # g * (1 / y)
