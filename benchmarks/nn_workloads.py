"""Training-epoch workloads: one epoch of SGD on an MLP, built from ``wengert.nn`` and
``wengert.optim`` (``loss.backward(); opt.step()``), against the same model in hand-written NumPy
and in PyTorch eager (plain tensors in the same layout, ``x @ W + b``, ``torch.optim.SGD``).

- ``nn-epoch-demo``: the demo's MLP 64-256-10 on data of the digits' shape (1437 x 64, random
  values, 10 classes), batch 32: 45 steps.
- ``nn-epoch-784``: 784-512-512-10 on random data, batch 128, 10 steps.

Every call starts from the same initial parameters, so every implementation's final parameters
(and last loss) are compared with the hand-written epoch's.
"""

import numpy as np

from benchmarks import peers
from benchmarks.harness import Impl, Target, Workload
from benchmarks.workloads import mlp_by_hand, mlp_data

__all__ = ["nn_epoch", "NN_WORKLOAD_NAMES"]

NN_WORKLOAD_NAMES = ("nn-epoch-demo", "nn-epoch-784")


def _epoch_data(sizes, batch, steps, seed=0):
    params, _, _ = mlp_data(np.float32, sizes, batch, seed)
    rng = np.random.default_rng(seed + 1)
    X = rng.random((batch * steps, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], size=batch * steps)
    return params, X, y


def hand_epoch(params, X, y, batch, lr):
    """One SGD epoch with hand-written gradients; returns (last loss, final parameters)."""
    params = [p.copy() for p in params]
    rows = np.arange(batch)
    loss = None
    for i in range(0, len(X), batch):
        loss, grads = mlp_by_hand(params, X[i:i + batch], y[i:i + batch], rows)
        for p, g in zip(params, grads):
            p -= lr * g
    return float(loss), params


def nn_epoch(name, sizes, batch, steps, lr=0.05, rounds=15, seed=0):
    """One epoch of SGD (``steps`` minibatches of ``batch``) on a ReLU MLP of ``sizes``, float32."""
    init, X, y = _epoch_data(sizes, batch, steps, seed)
    n_layers = len(sizes) - 1
    names = tuple(f"{p}{i // 2 + 1}" for i, p in enumerate(["W", "b"] * n_layers))

    def hand_impl():
        return Impl(lambda: hand_epoch(init, X, y, batch, lr), lambda out: (out[0], out[1]))

    def wengert_impl():
        from wengert import nn, optim
        model = nn.MLP(list(sizes))
        params = model.parameters()
        opt = optim.SGD(params, lr=lr)

        def run():
            for p, value in zip(params, init):
                np.copyto(p.value, value)
            loss = None
            for i in range(0, len(X), batch):
                loss = nn.cross_entropy(model(X[i:i + batch]), y[i:i + batch])
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item(), [p.value.copy() for p in params]

        return Impl(run, lambda out: out)

    def torch_impl():
        torch = peers.load_torch()
        ps = [torch.tensor(p, requires_grad=True) for p in init]
        Xt, yt = torch.tensor(X), torch.tensor(y)
        opt = torch.optim.SGD(ps, lr=lr)

        def run():
            with torch.no_grad():
                for p, value in zip(ps, init):
                    p.copy_(torch.from_numpy(value))
            loss = None
            for i in range(0, len(X), batch):
                h = Xt[i:i + batch]
                for k in range(n_layers):
                    h = h @ ps[2 * k] + ps[2 * k + 1]
                    if k < n_layers - 1:
                        h = torch.relu(h)
                loss = torch.nn.functional.cross_entropy(h, yt[i:i + batch])
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item(), [p.detach().numpy().copy() for p in ps]

        return Impl(run, lambda out: out)

    shape = "-".join(str(s) for s in sizes)
    return Workload(
        name=name,
        title=f"one SGD epoch of an MLP {shape}: {steps} steps of batch {batch}, float32",
        description="nn.MLP + nn.cross_entropy + loss.backward() + optim.SGD.step(); final parameters "
                    "compared.",
        params=names, rtol=2e-3,
        reference=lambda: hand_epoch(init, X, y, batch, lr),
        factories={"hand": hand_impl, "wengert": wengert_impl, "torch": torch_impl},
        rounds=rounds, sample_s=0.1, max_calls=20,
        targets=[Target("wengert within 1.3x of PyTorch eager", "torch", 1.3, kind="within")],
    )


def nn_workloads(quick=False):
    """The two epoch workloads (``quick``: tiny sizes, for smoke-testing)."""
    if quick:
        return [nn_epoch("nn-epoch-demo", (16, 8, 10), 8, 3, rounds=3),
                nn_epoch("nn-epoch-784", (20, 12, 12, 10), 8, 2, rounds=3)]
    return [nn_epoch("nn-epoch-demo", (64, 256, 10), 32, 45),
            nn_epoch("nn-epoch-784", (784, 512, 512, 10), 128, 10)]
