"""Convolutional workloads: a LeNet-5-like CNN on 1x28x28 images, float32, batch 64.

    conv 1->6 5x5, ReLU, max-pool 2 -> conv 6->16 5x5, ReLU, max-pool 2 -> 256-120-84-10, ReLU between

- ``cnn-lenet``: the loss and the gradient of its ten parameters (forward + backward), wengert's
  ``wg.grad`` against PyTorch eager (``loss.backward()``), single-threaded.
- ``cnn-per-example``: the 64 per-example gradients, ``wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))``
  against ``torch.func.vmap(torch.func.grad(loss))`` and a loop of ``wg.grad`` ("wengert tape").

The reference is PyTorch in float64 where PyTorch is installed (an independent implementation),
otherwise wengert's own float64 gradient (and a loop of ``wg.grad`` for the per-example workload).
"""

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from benchmarks import peers
from benchmarks.harness import Impl, Target, Workload
from wengert import nn
from wengert.nn import functional as F

__all__ = ["CNN_WORKLOAD_NAMES", "cnn_workloads", "lenet_params", "lenet", "lenet_torch"]

CNN_WORKLOAD_NAMES = ("cnn-lenet", "cnn-per-example")
NAMES = ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias",
         "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias")


def lenet_params(dtype=np.float32, seed=0):
    """PyTorch-style initial parameters, as a dict by NAMES (Linear weights as (in, out))."""
    rng = np.random.default_rng(seed)
    shapes = [(6, 1, 5, 5), (6,), (16, 6, 5, 5), (16,), (256, 120), (120,), (120, 84), (84,), (84, 10), (10,)]
    fans = [25, 25, 150, 150, 256, 256, 120, 120, 84, 84]
    return {n: (rng.uniform(-1, 1, s) / np.sqrt(f)).astype(dtype) for n, s, f in zip(NAMES, shapes, fans)}


def lenet(p, x):
    """The CNN's logits, with wengert.nn.functional (any wengert transform)."""
    h = F.max_pool2d(nn.relu(F.conv2d(x, p["conv1.weight"], p["conv1.bias"])), 2)
    h = F.max_pool2d(nn.relu(F.conv2d(h, p["conv2.weight"], p["conv2.bias"])), 2)
    h = wnp.reshape(h, (wnp.shape(h)[0], -1))
    h = nn.relu(h @ p["fc1.weight"] + p["fc1.bias"])
    h = nn.relu(h @ p["fc2.weight"] + p["fc2.bias"])
    return h @ p["fc3.weight"] + p["fc3.bias"]


def lenet_torch(torch, p, x):
    """The same network in PyTorch (the same layouts)."""
    tf = torch.nn.functional
    h = tf.max_pool2d(torch.relu(tf.conv2d(x, p["conv1.weight"], p["conv1.bias"])), 2)
    h = tf.max_pool2d(torch.relu(tf.conv2d(h, p["conv2.weight"], p["conv2.bias"])), 2)
    h = h.reshape(h.shape[0], -1)
    h = torch.relu(h @ p["fc1.weight"] + p["fc1.bias"])
    h = torch.relu(h @ p["fc2.weight"] + p["fc2.bias"])
    return h @ p["fc3.weight"] + p["fc3.bias"]


def _data(batch, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, size=batch)


def _loss(p, x, y):
    return nn.cross_entropy(lenet(p, x), y)


def _example_loss(p, x, y):
    return nn.cross_entropy(lenet(p, x[None]), y[None])


def _torch_reference(params, X, y, per_example):
    """(loss, gradients) in float64 by PyTorch, or None without it."""
    try:
        torch = peers.load_torch()
    except peers.PeerUnavailable:
        return None
    p = {k: torch.tensor(v.astype(np.float64)) for k, v in params.items()}
    Xt, yt = torch.tensor(X.astype(np.float64)), torch.tensor(y)

    def loss(p, x, y):
        return torch.nn.functional.cross_entropy(lenet_torch(torch, p, x), y)

    if per_example:
        g = torch.func.vmap(torch.func.grad(lambda p, x, y: loss(p, x[None], y[None])),
                            in_dims=(None, 0, 0))(p, Xt, yt)
        return None, [g[k].numpy().astype(np.float32) for k in NAMES]
    value, g = torch.func.grad_and_value(loss)(p, Xt, yt)[::-1]
    return float(value), [g[k].numpy().astype(np.float32) for k in NAMES]


def _wengert_reference(params, X, y, per_example):
    p64 = {k: v.astype(np.float64) for k, v in params.items()}
    X64 = X.astype(np.float64)
    if per_example:  # a loop of wg.grad: no vmap
        each = [wg.grad(_example_loss)(p64, X64[i], y[i]) for i in range(len(X))]
        return None, [np.stack([e[k] for e in each]) for k in NAMES]
    value, g = wg.value_and_grad(_loss)(p64, X64, y)
    return float(value), [g[k] for k in NAMES]


def _reference(params, X, y, per_example):
    return _torch_reference(params, X, y, per_example) or _wengert_reference(params, X, y, per_example)


def cnn_lenet(batch=64, rounds=21):
    """Forward + backward of the LeNet-like CNN."""
    params, (X, y) = lenet_params(), _data(batch)

    def wengert_impl():
        grad = wg.value_and_grad(_loss)
        return Impl(lambda: grad(params, X, y), lambda out: (out[0], [out[1][k] for k in NAMES]))

    def torch_impl():
        torch = peers.load_torch()
        p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
        Xt, yt = torch.tensor(X), torch.tensor(y)

        def run():
            for t in p.values():
                t.grad = None
            loss = torch.nn.functional.cross_entropy(lenet_torch(torch, p, Xt), yt)
            loss.backward()
            return loss

        return Impl(run, lambda out: (out.item(), [p[k].grad.numpy() for k in NAMES]))

    return Workload(
        name="cnn-lenet", title=f"LeNet-5-like CNN, batch {batch}, 1x28x28, forward + backward, float32",
        description="conv(1->6, 5x5) ReLU maxpool2, conv(6->16, 5x5) ReLU maxpool2, 256-120-84-10; "
                    "wengert.nn.functional on the convolution primitives (im2col + one batched matmul).",
        params=NAMES, rtol=2e-3, reference=lambda: _reference(params, X, y, False),
        factories={"wengert": wengert_impl, "torch": torch_impl},
        rounds=rounds, sample_s=0.1, max_calls=20,
        targets=[Target("wengert within 3x of PyTorch eager (aiming at 2x)", "torch", 3.0, kind="within")])


def cnn_per_example(batch=64, rounds=15):
    """Per-example gradients of the LeNet-like CNN."""
    params, (X, y) = lenet_params(), _data(batch)

    def extract(out):
        return None, [out[k] for k in NAMES]

    def wengert_impl():
        per_example = wg.vmap(wg.grad(_example_loss), in_axes=(None, 0, 0))
        return Impl(lambda: per_example(params, X, y), extract)

    def tape_impl():
        def run():
            each = [wg.grad(_example_loss)(params, X[i], y[i]) for i in range(len(X))]
            return {k: np.stack([e[k] for e in each]) for k in NAMES}
        return Impl(run, extract)

    def torch_impl():
        torch = peers.load_torch()
        p = {k: torch.tensor(v) for k, v in params.items()}
        Xt, yt = torch.tensor(X), torch.tensor(y)

        def loss(p, x, y):
            return torch.nn.functional.cross_entropy(lenet_torch(torch, p, x[None]), y[None])

        per_example = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))
        return Impl(lambda: per_example(p, Xt, yt), lambda out: (None, [out[k].numpy() for k in NAMES]))

    return Workload(
        name="cnn-per-example", title=f"per-example gradients of the LeNet-like CNN, batch {batch}, float32",
        description="wg.vmap(wg.grad(loss)): the batch folds into the convolutions' N or groups (one call "
                    "per convolution for the whole batch).",
        params=NAMES, rtol=2e-3, reference=lambda: _reference(params, X, y, True),
        factories={"wengert": wengert_impl, "grad-loop": tape_impl, "torch": torch_impl},
        rounds=rounds, sample_s=0.2, max_calls=10,
        targets=[Target("wengert within 1.5x of torch.func vmap(grad)", "torch", 1.5, kind="within"),
                 Target("wengert faster than a loop of wg.grad", "grad-loop", 1.0)])


def cnn_workloads(quick=False):
    """The two CNN workloads (``quick``: batch 4, few rounds)."""
    if quick:
        return [cnn_lenet(batch=4, rounds=2), cnn_per_example(batch=4, rounds=2)]
    return [cnn_lenet(), cnn_per_example()]
