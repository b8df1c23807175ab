"""``wg.compile(f).grad().grad()`` is the second derivative (it once re-derived ``f`` and returned the
first derivative again, silently); checked against ``wg.grad`` nested, finite differences and JAX."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp


def f(x):
    return x ** 3 + wnp.sin(x) * x


def h(x, y):
    return x ** 2 * y ** 3 + wnp.exp(x * y)


def _central(fun, x, eps=1e-5):
    return (fun(x + eps) - fun(x - eps)) / (2 * eps)


def test_second_and_third_derivatives_are_not_the_first():
    x = 1.5
    first = wg.compile(f).grad()
    second = wg.compile(f).grad().grad()
    third = wg.compile(f).grad().grad().grad()
    assert second(x) != pytest.approx(first(x))
    assert second(x) == pytest.approx(wg.grad(wg.grad(f))(x), rel=1e-12)
    assert third(x) == pytest.approx(wg.grad(wg.grad(wg.grad(f)))(x), rel=1e-12)
    assert second(x) == pytest.approx(_central(lambda t: float(wg.grad(f)(t)), x), rel=1e-6)


def test_mixed_partials_by_argnums():
    x, y = 0.7, -0.4
    exact = 2 * x * 3 * y ** 2 + np.exp(x * y) * (1 + x * y)  # d/dx d/dy h
    assert wg.compile(h).grad(1).grad(0)(x, y) == pytest.approx(exact, rel=1e-12)
    assert wg.compile(h).grad(0).grad(1)(x, y) == pytest.approx(exact, rel=1e-12)
    value, second = wg.compile(h).grad(1).value_and_grad(1)(x, y)
    assert value == pytest.approx(wg.grad(h, 1)(x, y), rel=1e-12)
    assert second == pytest.approx(x ** 2 * 6 * y + x * x * np.exp(x * y), rel=1e-12)


def test_a_pair_is_refused_with_what_to_write_instead():
    with pytest.raises(TypeError, match=r"value_and_grad\(\)\.grad\(\): the function returns a pair.*"
                                        r"\.grad\(\)\.grad\(\)"):
        wg.compile(f).value_and_grad().grad()


def test_the_gradient_of_a_vector_gradient_is_refused_as_wg_grad_refuses_it():
    with pytest.raises(TypeError, match="one scalar"):
        wg.compile(lambda x: wnp.sum(x ** 3)).grad().grad()(np.array([1.0, 2.0]))


_SECOND = wg.compile(f).grad().grad()


@settings(max_examples=25, deadline=None)
@given(st.floats(-3, 3))
def test_second_derivative_matches_jax(x):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    expected = jax.grad(jax.grad(lambda t: t ** 3 + jnp.sin(t) * t))(x)
    assert _SECOND(x) == pytest.approx(float(expected), rel=1e-10, abs=1e-12)
