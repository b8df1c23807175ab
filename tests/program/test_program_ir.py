"""The Program IR on the second seed's example: tracing, printing, source, adjoints in reverse order,
dup, forward mode, second derivatives; and the errors of lazy tracing."""

import math

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.program import Program, TracingError
from wengert.program.passes import explicit_dup

Y = math.log(2.0) + 10.0 - math.sin(5.0)  # 11.652071...
DY_DX1 = 1 / 2.0 + 5.0  # 5.5
DY_DX2 = 2.0 - math.cos(5.0)  # 1.716337...


def seed(x1, x2):
    """y = ln(x1) + x1 x2 - sin(x2), one statement per line as the seed writes it."""
    v1 = wnp.log(x1)
    v2 = x1 * x2
    v3 = wnp.sin(x2)
    v4 = v1 + v2
    return v4 - v3


FORWARD = """\
def seed(x1: float, x2: float):
    v_1 = x1
    v0 = x2
    v1 = log(v_1)
    v2 = v_1 * v0
    v3 = sin(v0)
    v4 = v1 + v2
    v5 = v4 - v3
    return v5"""


def test_seed_prints_five_forward_statements():
    p = Program.from_trace(seed, 2.0, 5.0)
    assert len(p.statements) == 5
    assert str(p) == FORWARD
    assert p(2.0, 5.0) == pytest.approx(Y, rel=1e-15)
    assert Y == pytest.approx(11.652071455223084)


def test_seed_source_is_plain_python():
    source = Program.from_trace(seed, 2.0, 5.0).source
    assert "import numpy as np" in source and "wengert" not in source
    namespace = {}
    exec(source, namespace)
    assert namespace["seed"](2.0, 5.0) == pytest.approx(Y, rel=1e-15)


def test_seed_vjp_has_the_seeds_structure():
    vjp = Program.from_trace(seed, 2.0, 5.0).vjp()
    lines = str(vjp).splitlines()
    body = [line.strip() for line in lines[1:-1]]
    assert lines[0] == "def seed_vjp(x1: float, x2: float, v5_bar: float):"
    assert body[2:7] == [line.strip() for line in FORWARD.splitlines()[3:8]]  # forward statements first
    reverse = body[7:]
    # then the adjoints, in reverse order of the statements they belong to
    assert reverse[0] == "v3_bar = -v5_bar"  # v5 = v4 - v3 (v4_bar is v5_bar itself)
    assert reverse[1].endswith("= cos(v0)") and reverse[2].startswith("v0_bar = v3_bar * ")  # v3 = sin(v0)
    assert reverse[3] == "v_1_bar = v5_bar * v0"  # v2 = v_1 * v0
    accumulations = [line for line in reverse if "_bar2 = " in line]
    assert len(accumulations) == 2  # v0 and v_1 are each used twice
    assert reverse[-1].startswith("v_1_bar2 = v_1_bar + ")  # v1 = log(v_1): the last adjoint
    assert lines[-1] == "    return v5, v_1_bar2, v0_bar2"
    y, (g1, g2) = vjp(2.0, 5.0, 1.0)
    assert y == pytest.approx(Y, rel=1e-15)
    assert g1 == pytest.approx(DY_DX1, rel=1e-15) and g2 == pytest.approx(DY_DX2, rel=1e-15)
    assert g2 == pytest.approx(1.716337814536774)


def test_seed_gradient_program():
    g = Program.from_trace(seed, 2.0, 5.0).grad((0, 1))
    assert g(2.0, 5.0) == (pytest.approx(5.5, rel=1e-15), pytest.approx(DY_DX2, rel=1e-15))
    assert "1.0 *" not in str(g)  # the seed cotangent 1.0 was folded away
    assert "v0_bar2 = v_1 - v6" in str(g)  # -1.0 * cos(v0) is a negation, and v_1 + (-v6) a subtraction
    assert not any(s.prim.__name__ in ("log", "sin") for s in g.statements)  # y itself is not needed


def test_explicit_dup_gives_every_variable_one_use_and_plus_as_its_adjoint():
    p = explicit_dup(Program.from_trace(seed, 2.0, 5.0))
    text = str(p)
    assert "(v_1_1, v_1_2) = dup(v_1)" in text and "(v0_1, v0_2) = dup(v0)" in text
    assert "v1 = log(v_1_1)" in text and "v2 = v_1_2 * v0_1" in text and "v3 = sin(v0_2)" in text
    vjp = p.vjp()
    text = str(vjp)
    assert "v_1_bar = v_1_1_bar + v_1_2_bar" in text and "v0_bar = v0_1_bar + v0_2_bar" in text
    y, (g1, g2) = vjp(2.0, 5.0, 1.0)
    assert (y, g1, g2) == (pytest.approx(Y), pytest.approx(DY_DX1), pytest.approx(DY_DX2))


def test_forward_mode_program():
    jvp = Program.from_trace(seed, 2.0, 5.0).jvp()
    assert "v1_dot = v_1_dot / v_1" in str(jvp)
    assert jvp(2.0, 5.0, (1.0, 0.0))[1] == pytest.approx(DY_DX1, rel=1e-15)
    assert jvp(2.0, 5.0, (0.0, 1.0))[1] == pytest.approx(DY_DX2, rel=1e-15)


def test_adjoint_of_the_adjoint():
    p = Program.from_trace(seed, 2.0, 5.0)
    d11 = p.grad(0).grad(0)  # d2y/dx1^2 = -1/x1^2
    d12 = p.grad(0).grad(1)  # d2y/dx1dx2 = 1
    d22 = p.grad(1).grad(1)  # d2y/dx2^2 = sin(x2)
    assert d11(2.0, 5.0) == pytest.approx(-0.25, rel=1e-15)
    assert d12(2.0, 5.0) == pytest.approx(1.0, rel=1e-15)
    assert d22(2.0, 5.0) == pytest.approx(math.sin(5.0), rel=1e-15)


def test_hessian_vector_product_of_an_array_program_matches_the_tape():
    def f(x):
        return wnp.sum(wnp.tanh(x) ** 2 * x[::-1])

    x = np.linspace(-1.0, 1.0, 5)
    v = np.cos(np.arange(5.0))
    hv = Program.from_trace(f, x).grad(0).vjp()(x, v)[1][0]
    np.testing.assert_allclose(hv, wg.hvp(f, (x,), (v,)), rtol=1e-12)


def test_shapes_and_dtypes_are_known_without_data():
    calls = []

    def f(W, x):
        calls.append(type(W).__name__)
        return wnp.tanh(W @ x).sum(axis=0)

    p = Program.from_trace(f, np.zeros((3, 4), np.float32), np.zeros((4, 2), np.float32))
    assert calls == ["Symbol"]  # run on symbols, not on the arrays
    assert [s.out.describe() for s in p.statements] == ["float32[3,2]", "float32[3,2]", "float32[2]"]
    assert str(p).startswith("def f(W: float32[3,4], x: float32[4,2]):")


def test_control_flow_on_shapes_and_constants_works():
    def f(x, n):
        for _ in range(n):
            x = x * 2.0 if x.shape[0] > 1 else x
        return wnp.sum(x)

    p = Program.from_trace(f, np.ones(3), 2)
    assert len(p.statements) == 3
    assert p(np.arange(3.0), 2) == 12.0


def test_data_dependent_if_names_the_line_and_the_remedies():
    def f(x):
        if x > 0:  # the line the error names
            return x
        return -x

    with pytest.raises(TracingError) as info:
        Program.from_trace(f, 1.0)
    message = str(info.value)
    assert "test_program_ir.py" in message and "if x > 0:" in message
    assert "Program.from_source" in message and "wg.grad" in message


def test_assignment_on_a_traced_array_is_a_functional_update():
    def f(x):
        y = x * 2.0
        y[0] = wnp.sin(x[1])  # index_update, as on the tape
        y += x  # augmented assignment rebinds the symbol
        y[y > 3.0] = 0.0  # a traced mask with a scalar: a where
        return wnp.sum(y * y)

    x = np.array([0.3, 1.2, 2.0])
    p = Program.from_trace(f, x)
    assert p(x) == pytest.approx(f(x.copy()), rel=1e-15)
    np.testing.assert_allclose(p.grad()(x), wg.grad(f)(x.copy()), rtol=1e-14)


def test_assignment_through_a_traced_mask_of_an_array_is_refused():
    def f(x):
        x[x > 0] = x[x > 0] * 2.0
        return x

    with pytest.raises(TracingError, match=r"traced boolean mask.*x\[x > 0\] = .*wnp.where"):
        Program.from_trace(f, np.ones(3))


def test_numpy_function_without_a_rule_is_named():
    with pytest.raises(TypeError, match=r"numpy.unwrap.*wg.primitive.*test_program_ir.py, line \d+"):
        Program.from_trace(lambda x: np.unwrap(x), np.ones(3))


def test_float_conversion_and_traced_boolean_masks_are_refused():
    with pytest.raises(TracingError, match="float()"):
        Program.from_trace(lambda x: float(x) * 2.0, 1.0)
    with pytest.raises(TracingError, match="boolean mask"):
        Program.from_trace(lambda x: x[x > 0], np.ones(3))


def test_missing_rule_names_the_primitive():
    step = wg.primitive(lambda x: np.floor(x) + 0.5, name="halfstep")
    p = Program.from_trace(lambda x: step(x) * 2.0, 1.5)
    assert p(1.5) == 3.0
    with pytest.raises(wg.NoRuleError, match="halfstep"):
        p.grad()


def test_user_primitive_runs_through_its_implementation():
    cube = wg.primitive(lambda x: x ** 3, name="cube")
    wg.defvjp(cube, lambda g, out, x: 3.0 * g * x * x)
    p = Program.from_trace(lambda x: wnp.sum(cube(x)), np.arange(3.0))
    np.testing.assert_allclose(p.grad()(np.arange(3.0)), 3.0 * np.arange(3.0) ** 2)
    assert "prim_cube" in p.source


def test_to_dot_draws_inputs_statements_and_outputs():
    dot = Program.from_trace(seed, 2.0, 5.0).to_dot()
    assert dot.startswith('digraph "seed" {') and dot.rstrip().endswith("}")
    assert '"s0" [label = "<f0> type: log | <f1> input: v_1 | <f2> output: v1" shape = "record"];' in dot
    assert '"v_1" -> "s0":f1;' in dot and '"s4":f2 -> "out0";' in dot
    assert dot.count('shape = "record"') == 5


def test_a_rule_that_cannot_be_traced_names_its_primitive():
    import math as m

    scaled = wg.primitive(lambda x: 2.0 * x, name="scaled")
    wg.defvjp(scaled, lambda g, out, x: m.copysign(2.0, float(g)) * abs(g))  # converts g to a float
    assert wg.grad(lambda x: scaled(x))(3.0) == 2.0  # fine on the tape, where g is a number
    with pytest.raises(TracingError, match=r"VJP rule of primitive 'scaled' for argument 0"):
        Program.from_trace(lambda x: scaled(x), 3.0).vjp()  # a symbolic cotangent


def test_pytree_outputs_static_arguments_and_their_vjp_and_jvp():
    def f(x, n):
        return {"a": x * n, "b": (wnp.sum(x), x[0])}

    x = np.arange(3.0)
    p = Program.from_trace(f, x, 2)
    assert str(p).startswith("def f(x: float64[3]):")  # n = 2 is part of the trace, not an input
    out = p(x, 2)
    np.testing.assert_array_equal(out["a"], [0.0, 2.0, 4.0])
    assert out["b"] == (3.0, 0.0)
    with pytest.raises(ValueError, match="static argument 2, called with 3"):
        p(x, 3)
    cotangent = {"a": np.ones(3), "b": (1.0, 2.0)}
    (_, (x_bar,)) = p.vjp()(x, 2, cotangent)
    np.testing.assert_array_equal(x_bar, wg.vjp(lambda x: f(x, 2), x)[1](cotangent)[0])
    _, tangent = p.jvp()(x, 2, (np.ones(3),))
    want = wg.jvp(lambda x: f(x, 2), (x,), (np.ones(3),))[1]
    np.testing.assert_array_equal(tangent["a"], want["a"])
    assert tangent["b"] == want["b"]
