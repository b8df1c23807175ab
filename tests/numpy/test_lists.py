"""Lists and tuples of traced values given to wengert.numpy functions work as in HIPS autograd: each
program is written once against a NumPy-like module, then run by autograd (the oracle), by every
wengert engine and by finite differences. A plain NumPy function that NumPy does not dispatch (it
converts the list itself) raises an error naming the wengert.numpy function to call instead."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import by_grad as _by_grad
from tests.support.engines import by_jvp as _by_jvp
from tests.support.engines import by_tape as _by_tape
from tests.support.engines import by_tensor as _by_tensor

X0 = np.array([1.3, -0.7, 2.1])

# name -> program(m, x), m being wengert.numpy or autograd.numpy
PROGRAMS = {
    "sum of [1, a*a, 2]": lambda m, x: m.sum([1.0, x[0] * x[0], 2.0]),
    "sum of (a, b)": lambda m, x: m.sum((x[0], x[1] * x[2])),
    "sum of [x0**2, x1]": lambda m, x: m.sum([x[0] ** 2, x[1]]),
    "sum of nested lists": lambda m, x: m.sum([[x[0], 2.0], [x[1] * x[2], 1.0]]),
    "sum of [vec, vec] over axis 0": lambda m, x: m.sum(m.sum([x, x * x], axis=0) ** 2),
    "mean of [a, b]": lambda m, x: m.mean([x[0], x[1] * x[2]]),
    "prod of [a, b, c]": lambda m, x: m.prod([x[0], x[1], x[2]]),
    "max of [a, b]": lambda m, x: m.max([x[0], x[2]]),
    "min of [a, b]": lambda m, x: m.min([x[0], x[2]]),
    "var of [a, b, c]": lambda m, x: m.var([x[0], x[1], 2.0 * x[2]]),
    "std of [a, b, c]": lambda m, x: m.std([x[0], x[1], 2.0 * x[2]]),
    "dot of a constant list": lambda m, x: m.dot([1.0, 2.0, 3.0], x),
    "dot with a constant list": lambda m, x: m.dot(x, [1.0, 2.0, 3.0]),
    "dot of a traced list": lambda m, x: m.dot([x[0], x[1]], [x[2], 3.0]),
    "list @ x": lambda m, x: [1.0, 2.0, 3.0] @ x,
    "x @ list": lambda m, x: x @ [1.0, 2.0, 3.0],
    "matmul of a nested list": lambda m, x: m.sum(m.matmul([[1.0, 2.0, 0.0], [3.0, 4.0, 1.0]], x) ** 2),
    "inner of lists": lambda m, x: m.inner([x[0], 1.0], [2.0, x[1]]),
    "outer of lists": lambda m, x: m.sum(m.outer([x[0], 1.0], [2.0, x[1]]) ** 2),
    "tensordot with a list": lambda m, x: m.tensordot([1.0, -2.0, 0.5], x, 1),
    "array of [a, b]": lambda m, x: m.sum(m.array([x[0], x[1] * x[2]]) ** 2),
    "array of nested lists": lambda m, x: m.sum(m.array([[x[0], 1.0], [x[1], x[2]]]) ** 3),
}


ENGINES = {"grad": _by_grad, "jvp": _by_jvp, "tape": _by_tape, "tensor": _by_tensor}


def _finite_differences(f, x, eps=1e-6):
    return np.array([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(len(x))])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", PROGRAMS)
def test_lists_of_traced_values_as_in_autograd(name, engine):
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    program = PROGRAMS[name]

    def f(x):
        return program(wnp, x)

    fd = _finite_differences(f, X0)
    try:
        want = autograd.grad(lambda x: program(anp, x))(X0)
    except TypeError:  # autograd's own dot of a constant list fails under NumPy 2: differences only
        np.testing.assert_allclose(ENGINES[engine](f, X0.copy()), fd, rtol=1e-6, atol=1e-8)
        return
    np.testing.assert_allclose(want, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ENGINES[engine](f, X0.copy()), want, rtol=1e-12, atol=1e-12)


def test_values_match_numpy():
    for name, program in PROGRAMS.items():
        np.testing.assert_allclose(program(wnp, X0), program(np, X0), rtol=1e-14, err_msg=name)


def test_compiled_sum_of_a_list():
    f = wg.compile(lambda a: wnp.sum([1.0, a * a, 2.0]))
    assert f(3.0) == 12.0
    assert f.grad()(3.0) == 6.0


@pytest.mark.parametrize("call, instead", [
    (lambda x: np.sum([1.0, x[0] * x[0], 2.0]), "wnp.sum("),
    (lambda x: np.mean([x[0], x[1]]), "wnp.mean("),
    (lambda x: np.max([x[0], x[1]]), "wnp.max("),
    (lambda x: np.prod([x[0], x[1]]), "wnp.prod("),
    (lambda x: np.linalg.norm([x[0], x[1]]), "wnp.linalg.norm("),
])
@pytest.mark.parametrize("engine", ENGINES)
def test_plain_numpy_given_a_list_names_the_wengert_function(call, instead, engine):
    with pytest.raises(TypeError) as info:
        ENGINES[engine](call, X0.copy())
    message = str(info.value)
    assert instead in message and "wnp.stack" in message and "test_lists.py, line" in message, message


def _total(result):
    if isinstance(result, (list, tuple)):
        return sum(wnp.sum(wnp.real(v)) for v in result)
    return wnp.sum(wnp.real(result))


def _takes_a_list_alone(name):
    """Whether wengert.numpy's ``name`` accepts a plain list of numbers as its only argument, with a
    float result (the others need more arguments, or answer with integers)."""
    try:
        with np.errstate(all="ignore"):  # arccosh of these: nan, which does not matter here
            out = _total(getattr(wnp, name)([0.3, 0.7, 0.5]))
    except Exception:  # noqa: BLE001 - any refusal means: not a one-list function
        return False
    return np.asarray(out).dtype.kind == "f"


ONE_LIST_FUNCTIONS = [n for n in wnp.DIFFERENTIABLE if _takes_a_list_alone(n)]


@pytest.mark.parametrize("name", ONE_LIST_FUNCTIONS)
def test_every_function_given_a_list_of_traced_values_is_right_or_refused(name):
    """Each wengert.numpy function that takes a list alone, given one holding traced values: the
    derivative matches finite differences, or the error says to stack the list and names the line."""
    fun = getattr(wnp, name)

    def f(x):
        return _total(fun([x[0], x[1] * x[2], 1.5]))

    try:
        g = wg.grad(f)(X0.copy())
    except TypeError as e:
        assert "wnp.stack" in str(e) and "test_lists.py, line" in str(e), str(e)
        return
    np.testing.assert_allclose(g, _finite_differences(f, X0), rtol=1e-6, atol=1e-8)


def test_the_reductions_and_constructors_take_lists():
    for name in ("sum", "prod", "max", "min", "mean", "var", "std", "array", "asarray", "stack"):
        assert name in ONE_LIST_FUNCTIONS
        g = wg.grad(lambda x: _total(getattr(wnp, name)([x[0], x[1] * x[2], 0.5])))(X0.copy())
        assert np.any(g != 0), name
