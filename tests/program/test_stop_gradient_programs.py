"""``wg.stop_gradient`` in programs: ``wg.compile``, ``wg.source_grad`` and the forward program from
source cut the derivative where the tape does.

A program's values are symbols, not the tape's boxes: ``wg.stop_gradient`` of a symbol records a
statement without derivative (``rules.nondiff.stop_gradient``). Before it did, it returned the symbol
itself and every program engine differentiated straight through it (``stop_gradient(a) * a`` gave
``2a``, not ``a``). Each function is checked against the tape, finite differences of the function
with the stopped value held fixed, and ``jax.lax.stop_gradient``.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences


def product(a):
    return wg.stop_gradient(a) * wnp.sin(a)


def in_a_branch(a):
    if a > 0:
        b = wg.stop_gradient(a) * a
    else:
        b = a * a
    return b


def in_a_loop(a):
    s = a
    for _ in range(3):
        s = s * wg.stop_gradient(s) + 0.1 * s
    return s


def normalised(v):
    return wnp.sum(v / wg.stop_gradient(wnp.sqrt(wnp.sum(v * v))))


def held_fixed(fun, a, monkeypatch):
    """Finite differences of ``fun`` at ``a`` with every ``wg.stop_gradient`` value held at its value at
    ``a``: the derivative the cut asks for, computed without wengert's derivatives."""
    values = []
    monkeypatch.setattr(wg, "stop_gradient", lambda x: values.append(np.array(x, dtype=float)) or x)
    fun(a)

    def replay(x):
        it = iter(values)
        monkeypatch.setattr(wg, "stop_gradient", lambda _: next(it))
        return fun(x)

    try:
        return finite_differences(replay, a)
    finally:
        monkeypatch.undo()


SCALARS = {"product": product, "in_a_branch": in_a_branch, "in_a_loop": in_a_loop}


@pytest.mark.parametrize("name", sorted(SCALARS))
@pytest.mark.parametrize("a", [0.7, -1.3])
def test_programs_cut_where_the_tape_cuts(name, a, monkeypatch):
    fun = SCALARS[name]
    expected = held_fixed(fun, a, monkeypatch)
    tape = wg.grad(fun)(a)
    np.testing.assert_allclose(tape, expected, rtol=1e-6)
    np.testing.assert_allclose(wg.source_grad(fun)(a), tape, rtol=1e-12)
    if name == "product":  # traced as it is; the others are read from source by wg.compile
        assert "stop_gradient" in wg.compile(fun).grad().source(a)
    np.testing.assert_allclose(wg.compile(fun).grad()(a), tape, rtol=1e-12)


def test_second_derivatives_and_forward_mode_cut_too():
    a = 0.7
    np.testing.assert_allclose(wg.compile(product).grad().grad()(a), wg.grad(wg.grad(product))(a), rtol=1e-12)
    np.testing.assert_allclose(wg.compile(wg.grad(product)).grad()(a), wg.grad(wg.grad(product))(a),
                               rtol=1e-12)
    np.testing.assert_allclose(wg.source_jvp(product)((a,), (1.0,)), wg.jvp(product, (a,), (1.0,)),
                               rtol=1e-12)


def test_hessian_and_per_example_gradients_of_a_program_cut():
    v = np.array([0.3, 0.5, -0.2])
    np.testing.assert_allclose(wg.compile(wg.hessian(normalised))(v), wg.hessian(normalised)(v), atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stop_gradient has a batching rule: no per-example loop
        np.testing.assert_allclose(wg.compile(wg.vmap(wg.grad(product)))(v), wg.vmap(wg.grad(product))(v),
                                   rtol=1e-12)


def test_the_same_derivatives_as_jax_stop_gradient():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    v = np.array([0.3, 0.5, -0.2])
    theirs = jax.grad(lambda v: jnp.sum(v / jax.lax.stop_gradient(jnp.sqrt(jnp.sum(v * v)))))(v)
    np.testing.assert_allclose(wg.compile(normalised).grad()(v), theirs, rtol=1e-12)
    np.testing.assert_allclose(wg.source_grad(normalised)(v), theirs, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.floats(-2.0, 2.0).filter(lambda a: abs(a) > 1e-3))
def test_compiled_and_source_gradients_equal_the_tape(a):
    for fun in SCALARS.values():
        tape = wg.grad(fun)(a)
        np.testing.assert_allclose(wg.compile(fun).grad()(a), tape, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(wg.source_grad(fun)(a), tape, rtol=1e-10, atol=1e-12)


def test_the_cut_runs_natively():
    pytest.importorskip("numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NativeFallbackWarning: the statement compiles
        got = wg.compile(product, backend="numba").grad()(0.7)
    np.testing.assert_allclose(got, wg.grad(product)(0.7), rtol=1e-12)
