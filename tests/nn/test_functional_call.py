"""``nn.functional_call``: a module computed with given parameters, and with it per-example gradients
of a module in one line (``vmap(grad(loss), in_axes=(None, 0, 0))``), as ``torch.func``."""

import warnings

import numpy as np
import pytest

import wengert as wg
from wengert import nn
from wengert.api.tree import tree_flatten
from wengert.engines.batching import NoBatchingRuleWarning


def _model_and_data():
    rng = np.random.default_rng(0)
    model = nn.MLP([20, 16, 5], rng=0)
    X = rng.standard_normal((8, 20)).astype(np.float32)
    y = rng.integers(0, 5, 8)
    return model, X, y


def test_functional_call_uses_the_given_parameters_not_the_modules():
    model, X, _ = _model_and_data()
    params = {k: 2.0 * v for k, v in tree_flatten_named(model.parameters_tree())}
    np.testing.assert_allclose(nn.functional_call(model, params, X), model.apply(params, X), rtol=1e-6)
    assert not np.allclose(nn.functional_call(model, params, (X,)), model(X).value)
    with pytest.raises(KeyError, match="missing"):
        nn.functional_call(model, {"0.weight": params["0.weight"]}, X)


def tree_flatten_named(tree, prefix=""):
    for k, v in tree.items():
        name = f"{prefix}.{k}" if prefix else k
        yield from (tree_flatten_named(v, name) if isinstance(v, dict) else [(name, v)])


def test_per_example_gradients_of_a_module_in_one_batched_pass():
    model, X, y = _model_and_data()
    params = model.parameters_tree()

    def loss(p, x, label):
        return nn.cross_entropy(nn.functional_call(model, p, x[None]), label[None])

    with warnings.catch_warnings():
        warnings.simplefilter("error", NoBatchingRuleWarning)  # every primitive here has a batching rule
        per = wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))(params, X, y)
    loop = [wg.grad(loss)(params, x, k) for x, k in zip(X, y)]
    leaves = tree_flatten(per)[0]
    for i, leaf in enumerate(leaves):
        want = np.stack([tree_flatten(g)[0][i] for g in loop])
        np.testing.assert_allclose(leaf, want, rtol=1e-4, atol=1e-6)
    # DP-SGD's first step: each example's gradient norm, clipped to 1
    norms = np.sqrt(sum(np.sum(leaf.reshape(len(X), -1) ** 2, axis=1) for leaf in leaves))
    assert norms.shape == (8,) and np.all(norms > 0)
