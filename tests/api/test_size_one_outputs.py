"""wg.grad of a function whose output has size one but shape (1,) or (1, 1): a scalar, as in HIPS
autograd and PyTorch (JAX refuses it); larger outputs are still refused."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.testing import check_grads

X = np.array([0.3, -1.2, 2.0])


@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 1, 1)])
def test_size_one_output_is_a_scalar(shape):
    f = lambda x: wnp.reshape(wnp.sum(wnp.sin(x) * x), shape)
    np.testing.assert_allclose(wg.grad(f)(X), np.sin(X) + X * np.cos(X), rtol=1e-14)
    value, g = wg.value_and_grad(f)(X)
    assert np.shape(value) == shape
    np.testing.assert_allclose(g, wg.grad(lambda x: wnp.sum(wnp.sin(x) * x))(X))
    check_grads(lambda x: wnp.reshape(f(x), ()), X)


def test_a_matrix_vector_product_of_size_one_as_autograd_users_write_it():
    w = np.array([[0.5], [1.5], [-1.0]])
    loss = lambda x: wnp.dot(x[None, :], w) ** 2  # shape (1, 1)
    np.testing.assert_allclose(wg.grad(loss)(X), 2 * (X @ w)[0] * w[:, 0], rtol=1e-14)


def test_same_as_autograd():
    ag = pytest.importorskip("autograd")
    import autograd.numpy as anp

    f = lambda m: lambda x: m.reshape(m.sum(m.tanh(x) ** 2), (1, 1))
    np.testing.assert_allclose(wg.grad(f(wnp))(X), ag.grad(f(anp))(X), rtol=1e-14)


def test_larger_outputs_are_still_refused():
    with pytest.raises(TypeError, match=r"must return a scalar.*shape \(2, 1\)"):
        wg.grad(lambda x: wnp.reshape(x[:2], (2, 1)))(X)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 4))
def test_any_number_of_unit_axes(ndim):
    shape = (1,) * ndim
    g = wg.grad(lambda x: wnp.reshape(wnp.sum(x ** 3), shape))(X)
    np.testing.assert_allclose(g, 3 * X ** 2, rtol=1e-14)
