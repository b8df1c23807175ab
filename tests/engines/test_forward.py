"""Forward mode (dual numbers) and higher order: jvp, jacfwd, jacrev, hessian, hvp, nesting."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

A = np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]])


def f(x):
    return wnp.tanh(A @ x) * wnp.exp(-x[0])


def scalar_f(x):
    return wnp.sum(wnp.sin(x) ** 2 * wnp.exp(x[::-1]))


X = np.array([0.2, -0.4, 0.7])


def test_jvp_matches_jacobian_product():
    v = np.array([1.0, -2.0, 0.5])
    out, t = wg.jvp(f, (X,), (v,))
    np.testing.assert_allclose(out, np.tanh(A @ X) * np.exp(-X[0]))
    np.testing.assert_allclose(t, wg.jacrev(f)(X) @ v, rtol=1e-13)


def test_jacfwd_equals_jacrev():
    J1, J2 = wg.jacfwd(f)(X), wg.jacrev(f)(X)
    assert J1.shape == (2, 3) and wg.jacobian is wg.jacrev
    np.testing.assert_allclose(J1, J2, rtol=1e-13)
    eps = 1e-6
    fd = np.stack([(f(X + eps * e) - f(X - eps * e)) / (2 * eps) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(J1, fd, rtol=1e-7, atol=1e-9)


def test_jacobian_shapes_follow_out_then_in():
    g = lambda M: M[:, :2] * 2.0
    M = np.ones((3, 4))
    assert wg.jacrev(g)(M).shape == (3, 2, 3, 4)
    assert wg.jacfwd(g)(M).shape == (3, 2, 3, 4)
    np.testing.assert_array_equal(wg.jacrev(g)(M), wg.jacfwd(g)(M))


def test_hessian_forward_over_reverse_and_hvp():
    H = wg.hessian(scalar_f)(X)
    assert H.shape == (3, 3)
    np.testing.assert_allclose(H, H.T, rtol=1e-12)
    eps = 1e-5
    gr = wg.grad(scalar_f)
    fd = np.stack([(gr(X + eps * e) - gr(X - eps * e)) / (2 * eps) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(H, fd, rtol=1e-7, atol=1e-9)
    v = np.array([0.3, 1.0, -2.0])
    np.testing.assert_allclose(wg.hvp(scalar_f, (X,), (v,)), H @ v, rtol=1e-12)


def test_hvp_with_several_arguments():
    g = lambda x, y: wnp.sum(x * x * y)
    hx, hy = wg.hvp(g, (np.array([1.0, 2.0]), 3.0), (np.array([1.0, 0.0]), 1.0))
    # H = [[2y, 0, 2x0], [0, 2y, 2x1], [2x0, 2x1, 0]] applied to (1, 0, 1)
    np.testing.assert_allclose(hx, [2 * 3.0 + 2 * 1.0, 2 * 2.0])
    assert hy == pytest.approx(2 * 1.0)


@pytest.mark.parametrize("x", [-2.0, 0.0, 0.7, 3.0])
@pytest.mark.parametrize("outer", ["grad", "jvp"])
@pytest.mark.parametrize("inner", ["grad", "jvp"])
def test_no_perturbation_confusion(x, outer, inner):
    """d/dx [x * d/dy (x + y)] = 1 everywhere, in every combination of modes."""

    def d(fun, mode):
        if mode == "grad":
            return wg.grad(fun)
        return lambda v: wg.jvp(fun, (v,), (1.0,))[1]

    def outer_fun(x):
        return x * d(lambda y: x + y, inner)(1.0)

    assert d(outer_fun, outer)(x) == 1.0


def test_third_derivative_all_mode_orders():
    f3 = lambda x: wnp.sin(x) * x
    expected = -3 * np.sin(0.4) - 0.4 * np.cos(0.4)
    j = lambda fun: (lambda v: wg.jvp(fun, (v,), (1.0,))[1])
    assert wg.grad(wg.grad(wg.grad(f3)))(0.4) == pytest.approx(expected, rel=1e-14)
    assert j(j(j(f3)))(0.4) == pytest.approx(expected, rel=1e-14)
    assert j(wg.grad(j(f3)))(0.4) == pytest.approx(expected, rel=1e-14)


def test_jvp_of_constant_output_is_zero():
    out, t = wg.jvp(lambda x: np.ones(2), (np.ones(2),), (np.ones(2),))
    np.testing.assert_array_equal(t, np.zeros(2))


def test_jvp_pytrees():
    out, t = wg.jvp(lambda p: {"s": p["a"] * p["b"]}, ({"a": 2.0, "b": 3.0},), ({"a": 1.0, "b": 0.0},))
    assert out == {"s": 6.0} and t == {"s": 3.0}
