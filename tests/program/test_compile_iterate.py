"""wg.compile of functions containing wg.iterate: the loop is ONE statement of the program (its size
does not depend on n), and its values and gradients are those of the uncompiled function."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences
from wengert.core.errors import TracingError

POLICIES = ["all", "binomial", "ctz"]


def decay(x, a, n, policy):
    return wg.iterate(lambda s: s - 0.1 * a * wnp.sin(s), x, n, checkpoint=policy)


def scalar_loss(x, a, n=40, policy="binomial"):
    return decay(x, a, n, policy) ** 2


def _fd(f, args, k):
    """Central finite difference of scalar f with respect to argument k (a float or an array)."""
    def along(v):
        moved = list(args)
        moved[k] = v if np.ndim(args[k]) else float(v)
        return f(*moved)
    return finite_differences(along, args[k])


def _statements(cf, *args):
    return len(cf.program(*args).statements)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("n", [0, 1, 2, 7, 40])
def test_scalar_state_value_and_gradients(policy, n):
    def f(x, a):
        return scalar_loss(x, a, n, policy)

    cf = wg.compile(f)
    assert cf(0.7, 1.3) == pytest.approx(f(0.7, 1.3), rel=1e-12)
    for k in (0, 1):
        expected = wg.grad(f, k)(0.7, 1.3)
        got = cf.grad(k)(0.7, 1.3)
        assert got == pytest.approx(expected, rel=1e-10, abs=1e-14)
        assert got == pytest.approx(float(_fd(f, (0.7, 1.3), k)), rel=1e-5, abs=1e-8)


def test_the_program_is_one_statement_whatever_n():
    sizes = {}
    for n in (50, 5000):
        def f(x, a, n=n):
            return scalar_loss(x, a, n, "binomial")

        cf = wg.compile(f)
        sizes[n] = (_statements(cf, 0.7, 1.3), _statements(cf.grad((0, 1)), 0.7, 1.3))
        names = [s.prim.__name__ for s in cf.grad((0, 1)).program(0.7, 1.3).statements]
        assert names.count("iterate_lambda_vjp") == 1, names  # one reverse sweep for both gradients
    assert sizes[50] == sizes[5000]
    assert sizes[50][1] < 20


def test_source_names_the_loop():
    cf = wg.compile(lambda x, a: scalar_loss(x, a, 100, "ctz"))
    text = cf.grad(1).source(0.7, 1.3)
    assert "iterate_lambda_vjp" in text and "supplied by wengert" in text
    assert text.count("sin") <= 2  # the step is not unrolled into the program


A = np.array([[0.5, -0.3, 0.1], [0.2, 0.4, -0.2], [-0.1, 0.3, 0.6]])


@pytest.mark.parametrize("policy", POLICIES)
def test_array_state_with_a_closed_over_argument(policy):
    def f(x, W):
        y = wg.iterate(lambda s: wnp.tanh(W @ s + 0.1), x, 25, checkpoint=policy)
        return wnp.sum(y * y)

    x = np.array([0.3, -0.2, 0.5])
    cf = wg.compile(f)
    assert cf(x, A) == pytest.approx(f(x, A), rel=1e-12)
    for k in (0, 1):
        got = cf.grad(k)(x, A)
        np.testing.assert_allclose(got, wg.grad(f, k)(x, A), rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(got, _fd(f, (x, A), k), rtol=1e-5, atol=1e-8)


W_GLOBAL = A.copy()


def _global_loss(x, c):
    y = wg.iterate(lambda s: wnp.tanh(W_GLOBAL @ s * c), x, 30, checkpoint="binomial")
    return wnp.sum(y)


def test_an_array_the_step_reads_from_a_global_is_read_at_each_call():
    global W_GLOBAL
    x = np.array([0.3, -0.2, 0.5])
    cf = wg.compile(_global_loss)
    first = cf.grad(1)(x, 0.9)
    np.testing.assert_allclose(first, wg.grad(_global_loss, 1)(x, 0.9), rtol=1e-10)
    saved = W_GLOBAL
    try:
        W_GLOBAL = 2 * A
        again = cf.grad(1)(x, 0.9)
        np.testing.assert_allclose(again, wg.grad(_global_loss, 1)(x, 0.9), rtol=1e-10)
        assert not np.allclose(first, again)
    finally:
        W_GLOBAL = saved


@pytest.mark.parametrize("policy", POLICIES)
def test_tuple_state_and_constant_start(policy):
    def f(k, c):  # a damped oscillator from a constant start: the gradient flows through the params only
        def step(state):
            pos, vel = state
            return pos + 0.05 * vel[0], vel - 0.05 * (k * pos + c * vel)

        pos, vel = wg.iterate(step, (1.0, np.array([0.0, 0.5])), 60, checkpoint=policy)
        return pos * pos + wnp.sum(vel * vel)

    cf = wg.compile(f)
    assert cf(2.0, 0.3) == pytest.approx(f(2.0, 0.3), rel=1e-12)
    got = cf.grad((0, 1))(2.0, 0.3)
    expected = wg.grad(f, (0, 1))(2.0, 0.3)
    for g, e, k in zip(got, expected, (0, 1)):
        assert g == pytest.approx(e, rel=1e-10)
        assert g == pytest.approx(float(_fd(f, (2.0, 0.3), k)), rel=1e-5)
    names = [s.prim.__name__ for s in cf.grad((0, 1)).program(2.0, 0.3).statements]
    assert names.count("iterate_step") == 1 and names.count("iterate_step_vjp") == 1


def test_value_and_grad_and_the_snapshots_option():
    def f(x, a):
        return wg.iterate(lambda s: s * wnp.cos(a * s), x, 33, checkpoint="binomial", snapshots=3) + a

    cf = wg.compile(f)
    value, grads = cf.value_and_grad((0, 1))(0.4, 0.8)
    ev, eg = wg.value_and_grad(f, (0, 1))(0.4, 0.8)
    assert value == pytest.approx(ev, rel=1e-12)
    np.testing.assert_allclose(grads, eg, rtol=1e-10)


def test_an_untraceable_step_is_traced_step_by_step_as_before():
    def f(x):  # Python control flow on the state: the step cannot become a program
        return wg.iterate(lambda s: s * 0.5 if s > 1.0 else s + 1.0, x, 5, checkpoint="binomial")

    with pytest.raises(TracingError, match="Python control flow"):
        wg.compile(f).grad()(3.0)


def test_a_second_derivative_is_refused_naming_the_loop():
    def f(x):
        return decay(x, 1.0, 10, "binomial")

    with pytest.raises(TracingError, match=r"wg.iterate\(<lambda>\).*second derivative"):
        wg.Program.from_trace(f, 0.3).grad().grad()


# backend="numba" (the loop natively, or falling back): tests/program/test_compile_iterate_native.py


def test_jax_fori_loop_with_checkpoint_agrees():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def f(x, W):
        y = wg.iterate(lambda s: wnp.tanh(W @ s + 0.1), x, 25, checkpoint="binomial")
        return wnp.sum(y * y)

    def fj(x, W):
        body = jax.checkpoint(lambda i, s: jnp.tanh(W @ s + 0.1))
        y = jax.lax.fori_loop(0, 25, body, x)
        return jnp.sum(y * y)

    x = np.array([0.3, -0.2, 0.5])
    got = wg.compile(f).grad((0, 1))(x, A)
    expected = jax.grad(fj, (0, 1))(x, A)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, np.asarray(e), rtol=1e-10)


_COMPILED = {}


def _compiled(n, policy):
    key = (n, policy)
    if key not in _COMPILED:
        def f(x, a):
            return scalar_loss(x, a, n, policy)

        _COMPILED[key] = (f, wg.compile(f).grad((0, 1)))
    return _COMPILED[key]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([0, 1, 3, 17, 64]), st.sampled_from(POLICIES),
       st.floats(-2, 2), st.floats(0.1, 3))
def test_property_compiled_gradients_equal_the_tape(n, policy, x, a):
    f, cf = _compiled(n, policy)
    got = cf(x, a)
    expected = wg.grad(f, (0, 1))(x, a)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


# -- wg.checkpoint ---------------------------------------------------------------------------------


def _block(h, W, b):
    return wnp.tanh(W @ h + b), wnp.sum(h * h)


def test_checkpoint_is_one_statement_with_the_tapes_gradients():
    def f(x, W, b):
        h, r = wg.checkpoint(_block)(x, W, b)
        h2, r2 = wg.checkpoint(_block)(h, W, b)
        return wnp.sum(h2) + r + 0.5 * r2

    x, b = np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.0, -0.1])
    cf = wg.compile(f)
    assert cf(x, A, b) == pytest.approx(f(x, A, b), rel=1e-12)
    got = cf.grad((0, 1, 2))(x, A, b)
    expected = wg.grad(f, (0, 1, 2))(x, A, b)
    for g, e, k in zip(got, expected, range(3)):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(g, _fd(f, (x, A, b), k), rtol=1e-5, atol=1e-8)
    names = [s.prim.__name__ for s in cf.grad((0, 1, 2)).program(x, A, b).statements]
    assert names.count("checkpoint_block") == 2 and names.count("checkpoint_block_vjp") == 2
    assert "tanh" not in names  # the block is not inlined


def test_checkpoint_of_a_closure_over_an_argument():
    def f(x, c):
        return wg.checkpoint(lambda v: wnp.sin(c * v) * c)(x) ** 2

    cf = wg.compile(f)
    for k in (0, 1):
        assert cf.grad(k)(0.4, 1.7) == pytest.approx(wg.grad(f, k)(0.4, 1.7), rel=1e-12)
