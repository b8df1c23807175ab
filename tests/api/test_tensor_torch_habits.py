"""Tensor's PyTorch habits: elementwise methods, view/permute, clamp, dim=/keepdim= reductions and
retain_grad(). The behaviour tests stand alone; one test compares with PyTorch where installed."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import wengert as wg
from wengert.testing import check_grads

rng = np.random.default_rng(8)
X = rng.uniform(0.2, 2.0, (2, 3)) * np.array([1.0, -1.0, 1.0])


def _t(x=X):
    return wg.tensor(x.copy(), requires_grad=True)


ELEMENTWISE = {
    "exp": (lambda t: t.exp(), np.exp, np.exp),
    "log": (lambda t: t.abs().log(), lambda x: np.log(np.abs(x)), lambda x: 1 / x),
    "sqrt": (lambda t: t.abs().sqrt(), lambda x: np.sqrt(np.abs(x)),
             lambda x: np.sign(x) / (2 * np.sqrt(np.abs(x)))),
    "tanh": (lambda t: t.tanh(), np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    "abs": (lambda t: t.abs(), np.abs, np.sign),
    "pow": (lambda t: t.pow(3), lambda x: x ** 3, lambda x: 3 * x ** 2),
    "sigmoid": (lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x)),
                lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2),
    "relu": (lambda t: t.relu(), lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(float)),
    "clamp": (lambda t: t.clamp(min=-0.5, max=1.0), lambda x: np.clip(x, -0.5, 1.0),
              lambda x: ((x >= -0.5) & (x <= 1.0)).astype(float)),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_methods_values_and_backward(name):
    method, value, slope = ELEMENTWISE[name]
    t = _t()
    y = method(t)
    np.testing.assert_allclose(y.detach().numpy(), value(X), rtol=1e-14)
    y.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), slope(X), rtol=1e-13)
    # the methods of values traced by wg.grad (Tensors too; forward-mode values have NumPy's only)
    as_tensor = lambda x: x if isinstance(x, wg.Tensor) else wg.tensor(x)
    check_grads(lambda x: method(as_tensor(x)).sum(), X, modes=("rev",))


def test_sigmoid_is_stable_far_in_the_tails():
    t = wg.tensor(np.array([-800.0, 800.0]), requires_grad=True)
    y = t.sigmoid()
    assert np.all(np.isfinite(y.detach().numpy()))
    y.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 0.0])


def test_view_and_permute():
    t = _t()
    v = t.view(3, 2)
    assert v.shape == (3, 2) and t.view(-1).shape == (6,) and t.view((6, 1)).shape == (6, 1)
    p = t.reshape(1, 2, 3).permute(2, 0, 1)
    assert p.shape == (3, 1, 2)
    np.testing.assert_array_equal(p.detach().numpy(), np.transpose(X[None], (2, 0, 1)))
    (p * np.arange(6.0).reshape(3, 1, 2)).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.transpose(np.arange(6.0).reshape(3, 1, 2), (1, 2, 0))[0])
    with pytest.raises(TypeError, match="astype"):
        t.view(np.float32)


def test_reductions_take_dim_and_keepdim():
    t = _t()
    assert t.sum(dim=1).shape == (2,) and t.sum(dim=1, keepdim=True).shape == (2, 1)
    assert t.mean(dim=(0, 1)).shape == () and t.prod(dim=0, keepdim=True).shape == (1, 3)
    np.testing.assert_allclose(t.mean(dim=[0]).detach().numpy(), X.mean(axis=0))
    values, indices = t.max(dim=1)
    np.testing.assert_array_equal(values.detach().numpy(), X.max(axis=1))
    np.testing.assert_array_equal(indices, X.argmax(axis=1))
    low = t.min(dim=0, keepdim=True)
    assert low.values.shape == (1, 3) and low.indices.shape == (1, 3)
    assert t.max().shape == ()  # without dim: the value alone, as torch.max(x)
    with pytest.raises(TypeError, match="not both"):
        t.sum(axis=0, dim=0)


def test_retain_grad_keeps_an_intermediate_gradient():
    t = _t()
    h = t * 2.0
    h.retain_grad()
    y = (h.tanh() ** 2).sum()
    y.backward()
    hv = 2.0 * X
    np.testing.assert_allclose(h.grad.numpy(), 2 * np.tanh(hv) * (1 - np.tanh(hv) ** 2), rtol=1e-13)
    np.testing.assert_allclose(t.grad.numpy(), 2.0 * h.grad.numpy(), rtol=1e-13)
    assert (t * 3.0).grad is None  # not retained: no gradient kept
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        wg.tensor(X).retain_grad()


def test_same_as_pytorch():
    torch = pytest.importorskip("torch")

    def program(t, lib):
        h = t.view(3, 2).permute(1, 0)
        h.retain_grad()
        z = (h.exp() * h.sigmoid()).clamp(min=-1.0, max=2.5) + h.abs().sqrt() + h.relu().pow(2)
        z = z + h.tanh() + (h.abs() + 1).log()
        return (z.sum(dim=0, keepdim=True) * z.mean(dim=1, keepdim=True)).sum() + z.max(dim=1)[0].sum(), h

    ours_t = _t()
    ours, h = program(ours_t, None)
    ours.backward()
    theirs_t = torch.tensor(X.copy(), requires_grad=True)
    theirs, th = program(theirs_t, torch)
    theirs.backward()
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-13)
    np.testing.assert_allclose(ours_t.grad.numpy(), theirs_t.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(h.grad.numpy(), th.grad.numpy(), rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                  elements=st.floats(-3, 3)), st.booleans())
def test_dim_reductions_are_numpys_axis_reductions(x, keepdim):
    dim = x.ndim - 1
    t = wg.tensor(x, requires_grad=True)
    for name in ("sum", "mean", "prod"):
        np.testing.assert_allclose(getattr(t, name)(dim=dim, keepdim=keepdim).detach().numpy(),
                                   getattr(np, name)(x, axis=dim, keepdims=keepdim), rtol=1e-12)
    t.sum(dim=dim, keepdim=keepdim).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.ones_like(x))
