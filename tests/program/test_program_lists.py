"""Lists (nested lists, tuples) of traced values given to wengert.numpy functions inside wg.compile
and wg.source_grad become one stacked array in the program: never a dropped derivative."""

import re

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences as _fd

X = np.array([0.5, -1.5])

CASES = {
    "sum-list": (lambda a: wnp.sum([1.0, a * a, 2.0]), 3.0),
    "sum-tuple": (lambda a: wnp.sum((a, 2.0 * a)), 3.0),
    "sum-nested": (lambda a: wnp.sum([[a, 1.0], [2.0, a * a]]), 3.0),
    "array": (lambda a: wnp.sum(wnp.array([a, a * a, 1.0]) ** 2), 2.0),
    "array-nested": (lambda a: wnp.sum(wnp.array([[a, 1.0], [2.0, a * a]]) ** 2), 2.0),
    "stack": (lambda a: wnp.sum(wnp.stack([a, wnp.sin(a)]) ** 2), X),
    "matmul-list": (lambda x: [1.0, 2.0] @ x, X),
    "matmul-list-of-symbols": (lambda x: wnp.matmul([x[0], x[1]], x), X),
    "prod-list": (lambda a: wnp.prod([a, a, 2.0]), 3.0),
    "max-list": (lambda a: wnp.max([a, 2.0 * a, 1.0]), 3.0),
}

# NumPy-signature wrappers that read a list's shape before any primitive sees it: source_grad stacks
# such lists first (it sees the call); a traced program (wg.compile) runs the user's NumPy calls as
# they are, and gives the right derivative or raises, never a wrong one.
FRONT_END = {
    "mean": (lambda a: wnp.mean([a, a * a]), 3.0),
    "sum-axis0": (lambda a: wnp.sum(wnp.sum([a, 2.0 * a], axis=0)), X),
    "dot-list": (lambda x: wnp.dot([1.0, 2.0], x), X),
    "np-dot-list": (lambda x: np.dot([1.0, 2.0], x), X),
    "np-mean-list": (lambda a: np.mean([a, a * a]), 3.0),
    "dot-nested": (lambda x: wnp.sum(wnp.dot([[x[0], 1.0], [2.0, x[1]]], x)), X),
}

WANT = {"mean": 3.5, "sum-axis0": np.array([3.0, 3.0]), "dot-list": np.array([1.0, 2.0]),
        "np-dot-list": np.array([1.0, 2.0]), "np-mean-list": 3.5, "dot-nested": np.array([3.0, -2.0])}


@pytest.mark.parametrize("name", list(CASES))
def test_lists_of_traced_values(name):
    f, x = CASES[name]
    compiled = wg.compile(f)
    want = _fd(lambda v: float(compiled(v if np.ndim(x) else float(v))), x)
    np.testing.assert_allclose(compiled.grad()(x), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(wg.source_grad(f)(x), want, rtol=1e-6, atol=1e-8)
    assert float(compiled(x)) == pytest.approx(float(np.sum(np.asarray(_plain(f, x)))))


def _plain(f, x):
    try:
        return f(x)
    except (TypeError, AttributeError, ValueError):  # the front end's own gaps: compare with the tape's value
        return wg.value_and_grad(f)(x)[0]


@pytest.mark.parametrize("name", list(FRONT_END))
def test_source_grad_stacks_list_arguments_of_numpy_functions(name):
    f, x = FRONT_END[name]
    np.testing.assert_allclose(wg.source_grad(f)(x), WANT[name], rtol=1e-12)


@pytest.mark.parametrize("name", list(FRONT_END))
def test_compile_is_right_or_refuses(name):
    f, x = FRONT_END[name]
    try:
        got = wg.compile(f).grad()(x)
    except (TypeError, ValueError, AttributeError):
        return
    np.testing.assert_allclose(got, WANT[name], rtol=1e-12)


def test_the_compiled_list_is_one_stacked_array():
    c = wg.compile(lambda a: wnp.sum([1.0, a * a, 2.0]))
    assert c.grad()(3.0) == 6.0
    assert "[1.0" not in c.grad().source(3.0)  # no list of variables left in the program


def test_numpy_reduction_of_a_list_in_compile_is_built_from_source_keeping_the_remedy():
    # the trace refuses np.mean of a list (with the remedy); wg.compile builds it from source instead
    cf = wg.compile(lambda a: np.mean([a, a * a])).grad()
    assert cf(3.0) == 0.5 * (1.0 + 2 * 3.0)
    assert re.search(r"np.mean\(wnp.stack\(\[a, b\]\)\)", cf.program(3.0).refusal)
