"""Every failure the fuzzer found, as a regular test: fixed ones here with their minimal program,
pending ones (``known.KNOWN_BROKEN``) as strict expected failures until their fix is merged."""

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest

import wengert as wg

from . import known

_PENDING = pytest.mark.xfail(strict=True, reason="known broken; once this passes, remove the entry from "
                                                  "tests/fuzz/known.py (WENGERT_FUZZ_ENABLE=all runs it)")


@pytest.mark.parametrize("entry", [pytest.param(k, id=k.key, marks=() if known.enabled(k) else _PENDING)
                                   for k in known.KNOWN_BROKEN])
def test_known_broken_reproducer(entry):
    entry.reproducer()


@pytest.mark.parametrize("entry", [pytest.param(k, id=k.key) for k in known.FIXED])
def test_fixed_reproducer(entry):
    entry.reproducer()


def test_known_entries_are_described():
    from .checks import CHECKS

    keys = [k.key for k in known.KNOWN_BROKEN + known.FIXED]
    assert len(keys) == len(set(keys))
    for k in known.KNOWN_BROKEN:
        assert k.description and k.area and k.skips <= set(CHECKS), k.key


# -- fixed ------------------------------------------------------------------------------------------

_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")


def _sinc_derivatives(x):
    """d/dx and d2/dx2 of sinc at the float ``x``, from its Taylor series in 60-digit decimals."""
    with localcontext() as ctx:
        ctx.prec = 60
        x = Decimal(float(x))
        d1 = sum((-1) ** k * 2 * k * _PI ** (2 * k) * x ** (2 * k - 1) / math.factorial(2 * k + 1)
                 for k in range(1, 60))
        d2 = sum((-1) ** k * 2 * k * (2 * k - 1) * _PI ** (2 * k) * x ** (2 * k - 2)
                 / math.factorial(2 * k + 1) for k in range(1, 60))
        return float(d1), float(d2)


SINC_POINTS = [1e-5, -0.0099, 0.0099, 0.0101, -0.011, 0.05, 0.2, 0.299, 0.301, 0.5, 0.9]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sinc_derivative_keeps_its_digits(dtype):
    """Found by the fuzzer: sinc's derivative, (cos(pi x) - sinc x) / x, cancels near 0 and lost
    about a thousand units of rounding around |x| = 0.01 in float32 (and float64)."""
    x = np.array(SINC_POINTS, dtype=dtype)
    want = np.array([_sinc_derivatives(v) for v in x])
    eps = np.finfo(dtype).eps
    engines = {
        "tape": wg.elementwise_grad(np.sinc)(x),
        "dual numbers": wg.jvp(np.sinc, (x,), (np.ones_like(x),))[1],
        "compile": wg.compile(lambda v: np.sum(np.sinc(v))).grad()(x),
    }
    for name, got in engines.items():
        assert got.dtype == dtype, name
        rel = np.abs(got - want[:, 0]) / np.abs(want[:, 0])
        assert np.all(rel <= 4 * eps), (name, rel / eps)
    second = np.array([wg.grad(wg.grad(np.sinc))(v) for v in x])
    rel = np.abs(second - want[:, 1]) / np.abs(want[:, 1])
    assert np.all(rel <= 16 * eps), rel / eps


@pytest.mark.parametrize("fun", [np.maximum, np.minimum])
@pytest.mark.parametrize("x", [1.0, 2.0, 3.0])
def test_maximum_of_floats_under_an_array_operation(fun, x):
    """Found by the fuzzer: the in-place VJP of maximum/minimum (the cotangent a 0-d array, the
    arguments Python floats) called ``.any()`` on a Python bool."""
    def f(x):
        return np.sum(fun(x, 2.0)[None] * 3.0)

    big = fun is np.maximum
    want = 1.5 if x == 2.0 else 3.0 * ((x > 2.0) == big)
    assert wg.grad(f)(x) == want
    assert wg.grad(f)(np.float64(x)) == want
    assert wg.jvp(f, (x,), (1.0,))[1] == want


@pytest.mark.parametrize("fun", [np.maximum, np.minimum])
def test_inplace_tie_rules_equal_the_ordinary_ones(fun):
    """Every in-place VJP rule of maximum/minimum equals its ordinary rule, for Python floats,
    NumPy scalars, 0-d arrays and broadcast arrays, ties included."""
    from wengert.rules import elementwise

    prim = getattr(elementwise, fun.__name__).primitive
    cases = [(1.0, 2.0), (2.0, 2.0), (np.float64(3.0), 2.0), (np.array(2.0), np.array(2.0)),
             (np.array([1.0, 2.0, 3.0]), 2.0), (np.array([[1.0], [2.0]]), np.array([2.0, 0.5]))]
    for x, y in cases:
        out = fun(x, y)
        for i, (rule, inplace) in enumerate(zip(prim.vjps, prim.vjp_inplace)):
            g = np.full(np.shape(out), 3.0)
            want = np.asarray(rule(g.copy(), out, x, y), dtype=float)
            got = inplace(g, out, x, y)
            assert got is not None
            np.testing.assert_array_equal(np.broadcast_to(want, np.shape(got)), got, err_msg=f"{x}, {y}, {i}")


@pytest.mark.parametrize("x", [0.5, -0.5, np.float64(0.5), np.array(0.5)])
def test_a_float_result_indexes_as_a_numpy_scalar(x):
    """Found by the fuzzer: ``np.abs(x)[None]`` for a float x is NumPy's ``array([0.5])``; on the
    tape ``np.abs`` returns a Python float (wengert's scalar), which could not be indexed."""
    def f(x):
        return np.sum(np.abs(np.sin(x))[None] * np.array([2.0, 3.0])[:, None]) + np.sin(x)[...]

    slope = 5.0 * np.sign(np.sin(x)) * np.cos(x) + np.cos(x)
    assert wg.grad(f)(x) == pytest.approx(slope, rel=1e-14)
    assert wg.jvp(f, (x,), (1.0,))[1] == pytest.approx(slope, rel=1e-14)
    assert wg.hessian(f)(x) == pytest.approx(-np.sin(x) * (5.0 * np.sign(np.sin(x)) + 1), rel=1e-14)
    with pytest.raises(IndexError, match="invalid index to scalar"):  # as NumPy's scalars
        wg.grad(lambda x: np.abs(x)[0])(x)
    z = 0.5 + 1j
    assert wg.grad(lambda z: np.sum(np.real(np.square(z)[None])))(z) == 1 + 2j  # 2x + 2iy, as JAX
