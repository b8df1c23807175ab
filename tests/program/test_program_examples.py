"""source_grad and source_jvp run derivative rules on the real arguments (or on generic stand-ins
where those fail), never on placeholder ones; what they accept besides a def, and what they refuse."""

import functools
import sys

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences as _fd


def arccos_of(a):
    return np.arccos(a)


def det_of(a):
    return np.linalg.det(a)


def inv_sum(a):
    return np.sum(np.linalg.inv(a))


def cholesky_sum(a):
    return np.sum(np.linalg.cholesky(a))


@pytest.mark.parametrize("fun, x", [
    (arccos_of, 0.3), (arccos_of, -0.7), (arccos_of, np.array([0.1, -0.4])),
    (det_of, 3 * np.eye(2)), (det_of, np.array([[2.0, 1.0], [0.5, 3.0]])),
    (inv_sum, 3 * np.eye(2)), (cholesky_sum, np.array([[4.0, 1.0], [1.0, 3.0]])),
], ids=["arccos", "arccos-neg", "arccos-array", "det-3I", "det", "inv-3I", "cholesky"])
def test_rules_run_on_the_arguments(fun, x):
    want = wg.grad(lambda a: wnp.sum(fun(a)))(x)
    got = wg.source_grad(lambda a: wnp.sum(fun(a)))(x)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(got, _fd(lambda a: np.sum(fun(a)), x), rtol=1e-5, atol=1e-7)
    value, tangent = wg.source_jvp(fun)((x,), (np.ones_like(x),))
    np.testing.assert_allclose(tangent, wg.jvp(fun, (x,), (np.ones_like(x),))[1])


def test_arccos_program_before_any_call():
    assert "def arccos_of_grad(a)" in wg.source_grad(arccos_of).source  # built on floats, at 1.0


@pytest.mark.parametrize("fun", [lambda x: np.max(x) * 2.0, lambda x: np.min(x) * 2.0,
                                 lambda x: wnp.sum(wg.numpy.exp(x) - np.max(x))],
                         ids=["max", "min", "exp-max"])
@pytest.mark.parametrize("x", [3.0, np.float64(3.0), np.array(3.0), np.array([1.0, 3.0])],
                         ids=["float", "float64", "0d", "1d"])
def test_max_min_of_a_python_float(fun, x):
    want = wg.grad(fun)(x)
    np.testing.assert_allclose(wg.compile(fun).grad()(x), want)
    np.testing.assert_allclose(wg.source_grad(fun)(x), want)


def scaled(x, scale=2.0, shift=1.0):
    return wnp.sum(x * x * scale) + shift


def test_lambda_partial_and_compiled():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(wg.source_grad(lambda a: wnp.sum(a * a * 3.0))(x), 6 * x)
    np.testing.assert_allclose(wg.source_grad(functools.partial(scaled, scale=5.0))(x), 10 * x)
    np.testing.assert_allclose(wg.source_grad(scaled)(x), 4 * x)  # defaults
    np.testing.assert_allclose(wg.source_grad(scaled)(x, 3.0), 6 * x)
    np.testing.assert_allclose(wg.source_grad(wg.compile(scaled))(x), 4 * x)


def test_lambda_errors_cite_its_file_and_line():
    h = lambda x: {y for y in x}  # noqa: E731
    line = sys._getframe().f_lineno - 1
    with pytest.raises(wg.TransformError, match=rf"set comprehension at {__file__}, line {line} "):
        wg.source_grad(h)(1.0)


@pytest.mark.parametrize("fun, kind", [(np.arccos, "ufunc"), (abs, "builtin"), (np.linalg.det, "function"),
                                       (wg.compile(scaled).grad(), "compiled derivative")],
                         ids=["ufunc", "builtin", "numpy-function", "compiled-grad"])
def test_what_has_no_source_is_refused_saying_what_to_use(fun, kind):
    with pytest.raises(wg.TransformError, match=kind) as info:
        wg.source_grad(fun)(0.5)
    assert "wg.grad" in str(info.value) or "wg.compile(f).grad()" in str(info.value)


@pytest.mark.parametrize("make, name, remedy", [(wg.source_jvp, "source_jvp", "wg.jvp"),
                                                (wg.source_grad, "source_grad", "wg.grad")])
@pytest.mark.parametrize("arg", [{"a": 1.0}, (1.0, 2.0), [1.0]], ids=["dict", "tuple", "list"])
def test_a_pytree_argument_is_refused_by_the_right_name(make, name, remedy, arg):
    def first(d):
        return d

    call = (lambda d: d((arg,), (arg,))) if name == "source_jvp" else (lambda d: d(arg))
    with pytest.raises(TypeError, match=rf"{name}\(first\): argument 0 is a {type(arg).__name__}.*{remedy}"):
        call(make(first))


def var_method(x):
    return x.var() + x.std() * x.mean()


def index_of_a_0d_result(x):
    return np.sum(np.sin(x)[None]) + np.exp(x)[...] * np.cos(x)[()]


@pytest.mark.parametrize("fun, x", [(var_method, np.array([0.5, -1.0, 2.0])),
                                    (index_of_a_0d_result, np.array(0.3))], ids=["var-method", "index-0d"])
def test_array_methods_and_0d_results(fun, x):
    want = wg.grad(fun)(x)
    np.testing.assert_allclose(want, _fd(fun, x), rtol=1e-6)
    np.testing.assert_allclose(wg.compile(fun).grad()(x), want, rtol=1e-12)
    np.testing.assert_allclose(wg.source_grad(fun)(x), want, rtol=1e-12)
    assert float(wg.compile(fun)(x)) == pytest.approx(float(fun(x)))
