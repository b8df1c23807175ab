"""examples/dp_sgd.py, run small: per-example gradients by vmap(grad) equal a loop of wg.grad (and
PyTorch's torch.func, where installed), clipping and noise do what DP-SGD says, and the loss falls."""

import numpy as np
import pytest

import wengert as wg
from tests.support.examples import load_example

dp = load_example("dp_sgd.py")


def _batch(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, size=n)


def test_a_short_run_learns_and_its_check_passes(capsys):
    result = dp.main(["--steps", "60", "--batch", "16"])
    out = capsys.readouterr().out
    assert "vmap(grad) vs a loop of wg.grad" in out and "test accuracy" in out
    assert result["check_error"] <= 1e-5 * result["check_scale"]
    assert result["last"] < result["first"] - 0.3


def test_per_example_gradients_equal_a_loop_in_float64():
    model = dp.SmallCNN(rng=1)
    params = wg.tree_map(lambda p: p.astype(np.float64), model.parameters_tree())
    X, y = _batch()
    got = dp.per_example_gradients(model, params, X.astype(np.float64), y)
    want = dp.per_example_gradients_by_loop(model, params, X.astype(np.float64), y)
    for a, b in zip(wg.tree_flatten(got)[0], wg.tree_flatten(want)[0]):
        assert a.shape[0] == len(X)
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)


def test_per_example_gradients_match_torch_func():
    torch = pytest.importorskip("torch")
    model = dp.SmallCNN(rng=2)
    params = wg.tree_map(lambda p: p.astype(np.float64), model.parameters_tree())
    X, y = _batch()
    got = dp.per_example_gradients(model, params, X.astype(np.float64), y)
    tp = {k: torch.tensor(v) for k, v in (("cw", params["conv"]["weight"]), ("cb", params["conv"]["bias"]),
                                          ("fw", params["fc"]["weight"]), ("fb", params["fc"]["bias"]))}

    def loss(p, x, label):
        h = torch.nn.functional.conv2d(x[None], p["cw"], p["cb"], padding=1)
        h = torch.nn.functional.max_pool2d(torch.relu(h), 2).reshape(1, -1)
        return torch.nn.functional.cross_entropy(h @ p["fw"] + p["fb"], label[None])

    per_example = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))
    want = per_example(tp, torch.tensor(X.astype(np.float64)), torch.tensor(y))
    for ours, theirs in ((got["conv"]["weight"], "cw"), (got["conv"]["bias"], "cb"),
                         (got["fc"]["weight"], "fw"), (got["fc"]["bias"], "fb")):
        np.testing.assert_allclose(ours, want[theirs].numpy(), rtol=1e-10, atol=1e-13)


def test_clipping_bounds_each_example_and_the_noise_has_the_stated_scale():
    rng = np.random.default_rng(0)
    grads = {"a": rng.normal(size=(4, 3)) * np.array([[0.1], [1.0], [5.0], [20.0]]),
             "b": rng.normal(size=(4,))}
    norms_by_hand = np.sqrt((grads["a"] ** 2).sum(1) + grads["b"] ** 2)
    clip = 2.0
    direction, norms = dp.clipped_noisy_mean(grads, clip, 0.0, rng)
    np.testing.assert_allclose(norms, norms_by_hand, rtol=1e-12)
    scale = np.minimum(1.0, clip / norms_by_hand)
    np.testing.assert_allclose(direction["a"], (grads["a"] * scale[:, None]).sum(0) / 4, rtol=1e-12)
    np.testing.assert_allclose(direction["b"], (grads["b"] * scale).sum() / 4, rtol=1e-12)
    # with noise: the difference from the noiseless direction is N(0, (noise * clip / batch)^2)
    big = {"w": np.zeros((4, 20000))}
    noisy, _ = dp.clipped_noisy_mean(big, clip, 1.5, np.random.default_rng(1))
    np.testing.assert_allclose(noisy["w"].std(), 1.5 * clip / 4, rtol=0.03)
