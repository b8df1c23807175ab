"""wg.compile: one trace per input signature, cached; compiled derivatives; what runs is visible."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def loss(params, x, label):
    W, b = params["W"], params["b"]
    z = wnp.tanh(x @ W + b)
    return wnp.sum(z ** 2) - z[label]


def data(n=3, dtype=np.float64):
    rng = np.random.default_rng(0)
    params = {"W": rng.standard_normal((n, 4)).astype(dtype), "b": rng.standard_normal(4).astype(dtype)}
    return params, rng.standard_normal(n).astype(dtype)


def test_traces_once_per_signature():
    f = wg.compile(loss)
    params, x = data()
    assert f(params, x, 1) == pytest.approx(loss(params, x, 1), rel=1e-14)
    f(params, x * 2.0, 1)
    assert f.cache_info() == (1, 1, 1)  # same shapes, dtypes, structure and label: no retrace
    assert f(params, x, 2) == pytest.approx(loss(params, x, 2), rel=1e-14)  # an int is traced (jax.jit)
    assert f.cache_info() == (2, 1, 1)
    params5, x5 = data(5)
    f(params5, x5, 1)  # different shapes
    params32, x32 = data(3, np.float32)
    assert f(params32, x32, 1).dtype == np.float32  # different dtypes
    f({"W": params["W"], "b": params["b"], "extra": 1.0}, x, 1)  # a different structure
    assert f.cache_info() == (2, 4, 4)


def test_compiled_grad_and_value_and_grad_match_the_tape():
    params, x = data()
    g = wg.compile(loss).grad(0)(params, x, 2)
    want = wg.grad(loss)(params, x, 2)
    assert set(g) == {"W", "b"}
    for k in g:
        np.testing.assert_allclose(g[k], want[k], rtol=1e-13)
    value, (gp, gx) = wg.compile(loss).value_and_grad((0, 1))(params, x, 2)
    want_value, (want_p, want_x) = wg.value_and_grad(loss, (0, 1))(params, x, 2)
    assert value == pytest.approx(want_value, rel=1e-14)
    np.testing.assert_allclose(gx, want_x, rtol=1e-13)
    np.testing.assert_allclose(gp["W"], want_p["W"], rtol=1e-13)


def test_program_and_source_show_what_runs():
    params, x = data()
    f = wg.compile(loss)
    program = f.program(params, x, 0)
    assert isinstance(program, wg.Program)
    assert str(program).startswith("def loss(params_0: float64[3,4], params_1: float64[4], x: float64[3], "
                                   "label: int64[]):")  # a Python int is a traced input (jax.jit's rule)
    source = f.grad(0).source(params, x, 0)
    assert source.startswith("import numpy as np")
    assert "def loss_grad(params_0, params_1, x, label):" in source
    bound = [line.split(" = ") for line in source.splitlines() if "np.tanh" in line]  # bound once,
    assert len(bound) == 1 and "np_tanh" in bound[0][0].split(", ") and "np_tanh(" in source  # called by name


def test_scalar_functions_return_python_floats():
    f = wg.compile(lambda x, y: x * y + wnp.sin(x))
    assert type(f(0.5, 4.2)) is float
    gx, gy = f.grad((0, 1))(0.5, 4.2)
    assert (gx, gy) == wg.grad(lambda x, y: x * y + wnp.sin(x), (0, 1))(0.5, 4.2)


def test_math_domain_errors_fall_back_to_numpy():
    f = wg.compile(lambda x: wnp.log(x) + wnp.sqrt(x))
    with np.errstate(invalid="ignore"):
        assert np.isnan(f(-1.0))
    assert f(4.0) == pytest.approx(np.log(4.0) + 2.0)


def test_traced_arguments_run_the_function_under_the_tape():
    f = wg.compile(lambda x: wnp.sum(wnp.sin(x) ** 2))
    x = np.linspace(0, 1, 4)
    np.testing.assert_allclose(wg.grad(f)(x), 2 * np.sin(x) * np.cos(x), rtol=1e-14)
    np.testing.assert_allclose(wg.hessian(f)(x), wg.hessian(lambda x: wnp.sum(wnp.sin(x) ** 2))(x),
                               rtol=1e-14)
    assert f.cache_info().misses == 0


def test_second_derivative_of_a_compiled_gradient():
    def f(x):
        return wnp.sum(x ** 3)

    g = wg.compile(lambda x, v: wnp.sum(wg.compile(f).grad(0)(x) * v))
    x, v = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, -1.0])
    np.testing.assert_allclose(g.grad(0)(x, v), 6 * x * v, rtol=1e-14)


def test_grad_needs_a_scalar_and_float_arguments():
    with pytest.raises(TypeError, match="one scalar.*shape \\(3,\\)"):
        wg.compile(lambda x: x * 2.0).grad()(np.ones(3))
    with pytest.raises(TypeError, match="int64"):
        wg.compile(lambda x: wnp.sum(x)).grad()(np.arange(3))


def test_compile_is_not_the_builtin_inside_the_package():
    import builtins

    import wengert.program.compiled as module

    assert wg.compile is module.compile_function and "compile" not in vars(module)
    # the generated source is made into a function by Python's own compile, which the name must not hide
    assert vars(module).get("compile", builtins.compile) is builtins.compile
    assert wg.compile(lambda x: x * 2.0)(3.0) == 6.0


def test_the_readme_example_source():
    def f(x1, x2):
        v1 = wnp.log(x1)
        v2 = x1 * x2
        v3 = wnp.sin(x2)
        v4 = v1 + v2
        return v4 - v3

    source = wg.compile(f).value_and_grad((0, 1)).source(2.0, 5.0)
    body = source.split("def f_value_and_grad(x1, x2):\n")[1].splitlines()
    assert body == ["    v_1 = x1", "    v0 = x2", "    v5 = log(v_1) + v_1 * v0 - sin(v0)",
                    "    v0_bar2 = v_1 - cos(v0)", "    v_1_bar2 = v0 + 1.0 / v_1",
                    "    return (v5, v_1_bar2, v0_bar2)"]


def test_large_constant_arrays_are_passed_not_written_out():
    def f(x):
        W = np.linspace(-1.0, 1.0, 2000).reshape(40, 50)  # a constant of the program (a captured
        return wnp.sum(wnp.tanh(x @ W))  # array is an input: test_captured.py)

    x = np.linspace(0.0, 1.0, 40)
    compiled = wg.compile(f).grad()
    assert "too large to write out" in compiled.source(x) and len(compiled.source(x)) < 5000
    np.testing.assert_allclose(compiled(x), wg.grad(f)(x), rtol=1e-13)


def test_primitives_spelled_in_numpy_are_numpy_functions_of_their_name():
    from wengert.program.rendering import numpy_name
    from wengert.rules import rule_table

    table = rule_table()
    spelled = {name for name, prim in table.items() if numpy_name(prim) is not None}
    assert {"sin", "maximum", "sum", "where", "reshape", "cumsum", "fmod"} <= spelled
    # SciPy's i0 is not NumPy's; linalg's and the nn family's have no NumPy function of their name
    assert not spelled & {"i0", "linalg.inv", "relu", "log_softmax", "index_update"}
    for name in spelled:
        assert callable(getattr(np, name)), name
