"""Differentially private SGD (Abadi et al. 2016) with a small CNN on scikit-learn's digits.

Each step takes the gradient of every example's loss separately -- ``wg.vmap(wg.grad(loss))``, one
batched pass through the convolutions, not a loop -- clips each to an L2 norm of at most ``--clip``,
sums them, adds Gaussian noise of standard deviation ``--noise * --clip`` and divides by the batch
size. Before training, the per-example gradients are checked against a loop of ``wg.grad``. (The
privacy budget epsilon is not accounted for here: use an accountant such as Opacus's or
TensorFlow Privacy's for the noise multiplier, sampling rate and steps below.)

    python examples/dp_sgd.py [--steps 800] [--batch 64] [--clip 1.0] [--noise 1.1] [--lr 0.5]
"""

import argparse
import time

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from wengert import nn


class SmallCNN(nn.Module):
    """conv 3x3 (1->8), ReLU, max-pool 2, then a linear layer 128->10, for (N, 1, 8, 8) digits."""

    def __init__(self, rng=None):
        super().__init__()
        rng = np.random.default_rng(rng)
        self.conv = nn.Conv2d(1, 8, 3, padding=1, rng=rng)
        self.fc = nn.Linear(8 * 4 * 4, 10, rng=rng)

    def forward(self, x):
        h = nn.functional.max_pool2d(nn.relu(self.conv(x)), 2)
        return self.fc(wnp.reshape(h, (wnp.shape(h)[0], -1)))


def load_digits(seed=0):
    """Digits as (N, 1, 8, 8) float32 images in [0, 1], split 80/20."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    X, y = sklearn_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    return train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)


def per_example_gradients(model, params, X, y):
    """Every example's gradient, stacked on axis 0 of each parameter, by ``vmap`` of ``grad``."""
    def loss(p, x, label):  # one example
        return nn.cross_entropy(model.apply(p, x[None]), label[None])
    return wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))(params, X, y)


def per_example_gradients_by_loop(model, params, X, y):
    """The same, one ``wg.grad`` per example (the reference)."""
    def loss(p, x, label):
        return nn.cross_entropy(model.apply(p, x), label)
    each = [wg.grad(loss)(params, X[i:i + 1], y[i:i + 1]) for i in range(len(X))]
    return wg.tree_map(lambda *gs: np.stack(gs), *each)


def clipped_noisy_mean(grads, clip, noise, rng):
    """DP-SGD's update direction: each example's gradient scaled to an L2 norm of at most ``clip``
    (over all parameters together), summed, plus N(0, (noise * clip)^2) per coordinate, over the batch
    size. Returns (direction, the per-example norms before clipping)."""
    leaves = wg.tree_flatten(grads)[0]
    batch = leaves[0].shape[0]
    norms = np.sqrt(sum(np.sum(g.reshape(batch, -1).astype(np.float64) ** 2, axis=1) for g in leaves))
    scale = np.minimum(1.0, clip / np.maximum(norms, 1e-12))

    def combine(g):
        s = scale.reshape((batch,) + (1,) * (g.ndim - 1)).astype(g.dtype)
        total = np.sum(g * s, axis=0)
        return ((total + rng.normal(0.0, noise * clip, size=total.shape)) / batch).astype(g.dtype)

    return wg.tree_map(combine, grads), norms


def accuracy(model, params, X, y):
    return float((np.asarray(model.apply(params, X)).argmax(axis=1) == y).mean())


def train(steps=800, batch=64, clip=1.0, noise=1.1, lr=0.5, seed=0, report_every=100, log=print):
    """DP-SGD on the digits; returns a dict of results (losses, accuracies, the check against a loop)."""
    Xtr, Xte, ytr, yte = load_digits(seed)
    rng = np.random.default_rng(seed)
    model = SmallCNN(rng=seed)
    params = model.parameters_tree()

    check = per_example_gradients(model, params, Xtr[:8], ytr[:8])
    loop = per_example_gradients_by_loop(model, params, Xtr[:8], ytr[:8])
    pairs = zip(wg.tree_flatten(check)[0], wg.tree_flatten(loop)[0])
    error = max(float(np.max(np.abs(a - b))) for a, b in pairs)
    scale = max(float(np.max(np.abs(b))) for b in wg.tree_flatten(loop)[0])
    log(f"per-example gradients by vmap(grad) vs a loop of wg.grad: largest difference {error:.2e} "
        f"(largest gradient {scale:.2e})")

    losses = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        idx = rng.choice(len(Xtr), size=batch, replace=False)
        grads = per_example_gradients(model, params, Xtr[idx], ytr[idx])
        direction, norms = clipped_noisy_mean(grads, clip, noise, rng)
        params = wg.tree_map(lambda p, d: p - lr * d, params, direction)
        losses.append(float(nn.cross_entropy(model.apply(params, Xtr[idx]), ytr[idx])))
        if step % report_every == 0 or step == steps:
            log(f"step {step:5d}  loss {np.mean(losses[-report_every:]):.4f}  "
                f"median per-example norm {np.median(norms):.3f}  ({time.perf_counter() - start:.1f} s)")
    result = dict(first=float(np.mean(losses[:10])), last=float(np.mean(losses[-10:])), check_error=error,
                  check_scale=scale, train_acc=accuracy(model, params, Xtr, ytr),
                  test_acc=accuracy(model, params, Xte, yte), params=params, losses=losses)
    log(f"test accuracy {result['test_acc']:.2%}, train accuracy {result['train_acc']:.2%} after {steps} "
        f"steps of batch {batch} (clip {clip}, noise multiplier {noise})")
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--clip", type=float, default=1.0, help="per-example L2 norm bound C")
    parser.add_argument("--noise", type=float, default=1.1, help="noise multiplier sigma (std sigma * C)")
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    return train(args.steps, args.batch, args.clip, args.noise, args.lr, args.seed,
                 report_every=max(1, min(100, args.steps // 8)))


if __name__ == "__main__":
    main()
