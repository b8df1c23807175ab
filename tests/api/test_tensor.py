"""Tensors with PyTorch's habits: requires_grad, backward(), .grad accumulation, no_grad."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def test_backward_accumulates_and_resets():
    x = wg.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 7.0])
    x.grad = None
    (x * 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_backward_with_gradient_argument():
    x = wg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(np.array([1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 12.0])


def test_non_scalar_backward_without_gradient_is_an_error():
    x = wg.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"scalar outputs.*shape \(2, 3\)"):
        (x * 2).backward()


def test_second_backward_needs_retain_graph():
    x = wg.tensor(2.0, requires_grad=True)
    y = x * x
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.item() == 8.0
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_only_operations_involving_grad_tensors_are_recorded():
    x = wg.tensor([1.0, 2.0], requires_grad=True)
    c = wg.tensor([3.0, 4.0])
    d = c * 2.0
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    y = x * c
    assert y.requires_grad and y.grad_fn == "multiply"
    with wg.no_grad():
        z = x * 2.0
    assert not z.requires_grad
    assert wg.is_grad_enabled()


def test_no_grad_parameter_update_in_place():
    w = wg.tensor([1.0, 2.0], requires_grad=True)
    alias = w.value
    (w * w).sum().backward()
    with wg.no_grad():
        w -= 0.1 * w.grad
    assert w.value is alias  # updated in place, as in PyTorch
    np.testing.assert_allclose(w.numpy() if not w.requires_grad else w.detach().numpy(), [0.8, 1.6])
    with pytest.raises(RuntimeError, match="in-place"):
        w += 1.0


def test_detach_numpy_item_shape_dtype_T_indexing():
    x = wg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert x.shape == (2, 3) and x.dtype == np.float64 and x.T.shape == (3, 2)
    assert x[1, 2].item() == 5.0
    with pytest.raises(RuntimeError, match="detach"):
        x.numpy()
    np.testing.assert_array_equal(x.detach().numpy(), np.arange(6.0).reshape(2, 3))
    y = x[:, 1:] @ np.ones(2)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 1], [0, 1, 1]])


def test_requires_grad_only_for_floats():
    with pytest.raises(RuntimeError, match="floating point"):
        wg.tensor([1, 2], requires_grad=True)
    t = wg.tensor([1, 2])
    assert t.dtype.kind == "i"
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad_()


def test_comparisons_give_constant_tensors():
    x = wg.tensor([1.0, -2.0], requires_grad=True)
    m = x > 0
    assert not m.requires_grad and m.dtype == bool
    y = wnp.where(m, x, 0.0).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0])


def test_tensors_inside_grad_transform():
    w = wg.tensor([1.0, 2.0], requires_grad=True)
    g = wg.grad(lambda x: wnp.sum(w * x * x))(np.array([3.0, 4.0]))
    np.testing.assert_array_equal(g.value if isinstance(g, wg.Tensor) else g, [6.0, 16.0])
    assert w.grad is None


def test_float32_gradients():
    x = wg.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    (wnp.exp(x) * 2.0).sum().backward()
    assert x.grad.dtype == np.float32


def test_repr():
    assert repr(wg.tensor([1.0, 2.0], requires_grad=True)) == "tensor([1., 2.], requires_grad=True)"
    x = wg.tensor(1.5, requires_grad=True)
    assert "grad_fn=sin" in repr(wnp.sin(x))
