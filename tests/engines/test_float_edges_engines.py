"""Python floats at the edges of their functions give NumPy's answer in every engine.

Python refuses what NumPy answers with inf or nan (``1.0 / 0.0``, ``math.log(0.0)``) and answers
``(-1.0) ** 0.5`` with a complex number where NumPy says nan. wengert follows NumPy for floats
everywhere: the tape's fast paths, ``wg.compile``'s generated code (which runs on ``math`` and
Python's operators) and ``wg.source_grad``/``source_jvp`` all redo such a step on ``np.float64``.
Each engine is compared with the tape on a 0-d float64 array, which never takes a float path.
"""

import warnings

import numpy as np
import pytest

import wengert as wg


def quotient(a):
    return a / (a - 1.0)


def root(a):
    return a ** 0.5


def inverse(a):
    return a ** -1.0


def log_times_root(a):
    return np.log(a) * np.sqrt(a)


def entropy(a):
    return a * np.log(a)


def arcsine(a):
    return np.arcsin(a) + np.arctanh(a)


def exponential(a):
    return np.exp(a) * 2.0


def hypotenuse(a):
    return np.hypot(a, 0.0) + np.arctan2(a, 0.0)


EDGES = [(quotient, 1.0), (root, -1.0), (root, 0.0), (inverse, 0.0), (log_times_root, 0.0),
         (entropy, 0.0), (arcsine, 1.0), (exponential, 1000.0), (hypotenuse, 0.0)]

ENGINES = {
    "grad": lambda f, x: wg.grad(f)(x),
    "value_and_grad": lambda f, x: wg.value_and_grad(f)(x),
    "jvp": lambda f, x: wg.jvp(f, (x,), (1.0,)),
    "compile": lambda f, x: wg.compile(f)(x),
    "compile.grad": lambda f, x: wg.compile(f).grad()(x),
    "source_grad": lambda f, x: wg.source_grad(f)(x),
    "source_jvp": lambda f, x: wg.source_jvp(f)((x,), (1.0,)),
}


def _reference(engine, f, x):
    """The same engine's answer on a 0-d float64 array: NumPy's arithmetic throughout."""
    oracle = {"compile": "value", "compile.grad": "grad", "source_grad": "grad", "source_jvp": "jvp"}
    engine = oracle.get(engine, engine)  # the tape on arrays stands for the program engines
    if engine == "value":
        return f(np.array(x))
    return ENGINES[engine](f, np.array(x))


def _same(a, b):
    a, b = np.atleast_1d(np.asarray(a, dtype=complex)), np.atleast_1d(np.asarray(b, dtype=complex))
    assert a.shape == b.shape
    assert np.all(np.isreal(a)), f"a complex result {a} on a real float input"
    np.testing.assert_allclose(a.real, b.real, rtol=1e-12, atol=0, equal_nan=True)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("f, x", EDGES, ids=[f"{f.__name__}({x})" for f, x in EDGES])
def test_every_engine_gives_numpys_answer_at_the_edges(engine, f, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = _reference(engine, f, x)
        got = ENGINES[engine](f, x)
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e)
    else:
        _same(got, expected)


def test_the_numpy_answer_keeps_numpys_warning():
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        assert wg.compile(quotient)(1.0) == np.inf
    with pytest.warns(RuntimeWarning, match="invalid value"):
        assert np.isnan(wg.source_grad(root)(-1.0))


def scalar_indexed(x):
    s = x[0] * x[2]  # a Python float inside the tape; np.float64 in NumPy, which indexes like a 0-d array
    return np.sum(s[None] ** 2) + s[()] * s[...]


@pytest.mark.parametrize("engine", ["grad", "jvp", "hessian", "compile.grad", "source_grad"])
def test_a_scalar_element_indexes_as_numpys_float64(engine):
    x = np.array([1.5, -0.5, 2.0])
    s = x[0] * x[2]
    expected = 4.0 * s * np.array([x[2], 0.0, x[0]])  # d(2 s^2)
    if engine == "jvp":
        t = np.array([0.3, 1.0, -0.7])
        np.testing.assert_allclose(wg.jvp(scalar_indexed, (x,), (t,))[1], expected @ t, rtol=1e-13)
    elif engine == "hessian":
        grad_s = np.array([x[2], 0.0, x[0]])
        cross = np.zeros((3, 3))
        cross[0, 2] = cross[2, 0] = 1.0
        expected_h = 4.0 * (np.outer(grad_s, grad_s) + s * cross)
        np.testing.assert_allclose(wg.hessian(scalar_indexed)(x), expected_h, rtol=1e-13)
    else:
        np.testing.assert_allclose(ENGINES[engine](scalar_indexed, x), expected, rtol=1e-13)
