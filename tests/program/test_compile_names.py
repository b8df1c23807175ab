"""A compiled function is named after the function it compiles, and that name can be one the generated
module imports or defines (``wg.compile(np.sin)`` is a function ``sin`` whose body calls ``math.sin``):
the generated function then takes another name, and never calls itself. Every NumPy ufunc that has a
``math`` namesake is compiled and differentiated, on floats and arrays, against NumPy and ``wg.grad``."""

import math

import numpy as np
import pytest

import wengert as wg
from wengert.program.rendering import reserved_names

UFUNCS = sorted(n for n in dir(math) if isinstance(getattr(np, n, None), np.ufunc) and getattr(np, n).nin == 1
                and getattr(np, n).nout == 1
                and n not in ("isnan", "isinf", "isfinite", "floor", "ceil", "trunc", "signbit"))


def test_the_enumeration_is_not_empty():
    assert {"sin", "cos", "exp", "log", "tanh", "sqrt"} <= set(UFUNCS)
    assert {"sin", "exp"} <= reserved_names()  # the names the generated module may import


@pytest.mark.parametrize("name", UFUNCS)
def test_a_ufunc_named_like_its_math_namesake_compiles(name):
    f = getattr(np, name)
    x = 0.3 if name not in ("acosh", "cosh") else 1.3
    assert wg.compile(f)(x) == pytest.approx(f(x), rel=1e-15)
    assert wg.compile(f).grad()(x) == pytest.approx(wg.grad(f)(x), rel=1e-14)
    v = np.full(3, x)
    np.testing.assert_allclose(wg.compile(f)(v), f(v), rtol=1e-15)


def test_a_user_function_named_like_a_helper_or_np():
    def np_(x):  # the generated module's own names, as a user function's name
        return np.sin(x) * 2.0

    for fname in ("np", "math", "sin", "v0"):
        np_.__name__ = fname
        assert wg.compile(np_)(0.5) == pytest.approx(2 * math.sin(0.5), rel=1e-15)
        assert wg.compile(np_).grad()(0.5) == pytest.approx(2 * math.cos(0.5), rel=1e-15)
