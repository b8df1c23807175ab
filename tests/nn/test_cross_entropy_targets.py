"""nn.cross_entropy with class probabilities (one-hot rows or soft targets) as PyTorch accepts them,
and the error for labels of neither kind saying what each kind of target needs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
from wengert import nn
from wengert.testing import check_grads

rng = np.random.default_rng(11)
LOGITS = rng.standard_normal((5, 4))
LABELS = np.array([0, 3, 1, 1, 2])
ONE_HOT = np.eye(4)[LABELS]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_one_hot_rows_give_the_integer_labels_loss(reduction):
    np.testing.assert_allclose(nn.cross_entropy(LOGITS, ONE_HOT, reduction),
                               nn.cross_entropy(LOGITS, LABELS, reduction), rtol=1e-14)
    np.testing.assert_allclose(wg.grad(lambda x: nn.cross_entropy(x, ONE_HOT, "sum"))(LOGITS),
                               wg.grad(lambda x: nn.cross_entropy(x, LABELS, "sum"))(LOGITS), rtol=1e-13)


def test_soft_targets_are_differentiable_in_both_arguments():
    soft = np.exp(rng.standard_normal((5, 4)))
    soft /= soft.sum(-1, keepdims=True)
    check_grads(lambda x, p: nn.cross_entropy(x, p), LOGITS, soft)


def test_same_as_pytorch():
    torch = pytest.importorskip("torch")
    soft = np.exp(rng.standard_normal((5, 4)))
    soft /= soft.sum(-1, keepdims=True)
    for target in (ONE_HOT, soft):
        t = torch.tensor(LOGITS, requires_grad=True)
        theirs = torch.nn.functional.cross_entropy(t, torch.tensor(target))
        theirs.backward()
        value, g = wg.value_and_grad(lambda x: nn.cross_entropy(x, target))(LOGITS)
        np.testing.assert_allclose(value, theirs.item(), rtol=1e-13)
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12)


def test_labels_of_neither_kind_say_what_each_needs():
    with pytest.raises(TypeError, match=r"integer class indices \(shape \(5,\)\) or class probabilities "
                                        r"such as one-hot rows \(shape \(5, 4\)\).*binary_cross_entropy"):
        nn.cross_entropy(LOGITS, ONE_HOT[:, :3])


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(2, 5), st.integers(0, 10_000))
def test_one_hot_equals_labels_for_random_shapes(n, classes, seed):
    r = np.random.default_rng(seed)
    logits, labels = r.standard_normal((n, classes)), r.integers(0, classes, n)
    np.testing.assert_allclose(nn.cross_entropy(logits, np.eye(classes)[labels]),
                               nn.cross_entropy(logits, labels), rtol=1e-12)


def test_linear_weight_layout_is_in_by_out_and_equals_torch_transposed():
    """The documented choice: weight (in, out), y = x @ W + b; PyTorch's layer with W.T agrees."""
    layer = nn.Linear(4, 3, rng=0, dtype=np.float64)
    assert layer.weight.shape == (4, 3) and "transpose" in nn.Linear.__doc__
    x = rng.standard_normal((2, 4))
    np.testing.assert_allclose(layer(x).detach().numpy(), x @ layer.weight.value + layer.bias.value)
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Linear(4, 3).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(layer.weight.value.T))
        theirs.bias.copy_(torch.tensor(layer.bias.value))
    np.testing.assert_allclose(layer(x).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-14)
