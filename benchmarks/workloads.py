"""The core workloads: a 10,000-step scalar chain, a tiny two-layer network and a
784-512-512-10 MLP (float32 and float64), each with a hand-written gradient and one version per library.
"""

import math

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from benchmarks import batching, indexing, peers, recurrent
from benchmarks.harness import Impl, Target, Workload

__all__ = ["scalar_chain", "tiny_network", "mlp", "all_workloads", "WORKLOAD_NAMES",
           "chain_by_hand", "tiny_by_hand", "mlp_by_hand"]

WORKLOAD_NAMES = ("scalar-chain", "tiny-network", "mlp-float32", "mlp-float64",
                  "nn-epoch-demo", "nn-epoch-784",  # these two: benchmarks/nn_workloads.py
                  recurrent.NAME,
                  indexing.NAME,
                  "source-loop",  # benchmarks/source.py
                  *batching.NAMES,
                  "cnn-lenet", "cnn-per-example")  # these two: benchmarks/cnn.py


def _as_float(v):
    return float(np.asarray(v))


# -- 1. scalar chain -----------------------------------------------------------------------------

def chain_forward(sin, x, y, steps):
    """z = x; ``steps`` times z = z*y + 0.5*sin(z): four recorded operations per step."""
    z = x
    for _ in range(steps):
        z = z * y + 0.5 * sin(z)
    return z


def chain_by_hand(x, y, steps):
    """The chain and its gradient with respect to (x, y) on Python floats: a forward loop keeping
    every z, then a backward loop."""
    sin, cos = math.sin, math.cos
    zs = [0.0] * steps
    z = x
    for i in range(steps):
        zs[i] = z
        z = z * y + 0.5 * sin(z)
    gz, gy = 1.0, 0.0
    for zi in reversed(zs):
        gy += gz * zi
        gz *= y + 0.5 * cos(zi)
    return z, (gz, gy)


def scalar_chain(steps=10_000, jax_steps=250, rounds=9, x=0.3, y=0.9):
    """Workload 1. JAX eager (about 0.4 ms per operation) runs a ``jax_steps`` chain instead,
    checked against the hand-written chain of that length and compared per operation."""

    def hand_impl():
        return Impl(lambda: chain_by_hand(x, y, steps), lambda out: (out[0], list(out[1])))

    def wengert_impl():
        g = wg.grad(lambda a, b: chain_forward(wnp.sin, a, b, steps), argnums=(0, 1))
        return Impl(lambda: g(x, y), lambda out: (None, list(out)))

    def torch_impl():
        torch = peers.load_torch()

        def run():
            a = torch.tensor(x, dtype=torch.float64, requires_grad=True)
            b = torch.tensor(y, dtype=torch.float64, requires_grad=True)
            z = chain_forward(torch.sin, a, b, steps)
            z.backward()
            return z, a.grad, b.grad

        return Impl(run, lambda out: (out[0].item(), [out[1].item(), out[2].item()]))

    def autograd_impl():
        autograd, anp = peers.load_autograd()
        g = autograd.grad(lambda a, b: chain_forward(anp.sin, a, b, steps), argnum=(0, 1))
        return Impl(lambda: g(x, y), lambda out: (None, [_as_float(v) for v in out]))

    def jax_impl():
        jax, jnp = peers.load_jax()
        n = min(steps, jax_steps)
        g = jax.grad(lambda a, b: chain_forward(jnp.sin, a, b, n), argnums=(0, 1))
        note = f"shorter chain: {n:,} steps ({4 * n:,} ops)" if n != steps else ""
        return Impl(lambda: jax.block_until_ready(g(x, y)),
                    lambda out: (None, [_as_float(v) for v in out]),
                    reference=lambda: chain_by_hand(x, y, n), ops=4 * n, note=note)

    return Workload(
        name="scalar-chain",
        title=f"scalar chain: {steps:,} steps of z = z*y + 0.5*sin(z), {4 * steps:,} operations",
        description=(f"Gradient w.r.t. (x, y) at x={x}, y={y}, on Python floats (0-d float64 tensors for "
                     f"PyTorch). Over a long chain d/dx underflows to 0 (each step multiplies it by about "
                     f"0.47), so there only d/dy checks much; the shorter JAX chain checks both."),
        params=("x", "y"), rtol=1e-6, reference=lambda: chain_by_hand(x, y, steps),
        factories={"hand": hand_impl, "wengert": wengert_impl, "torch": torch_impl, "jax": jax_impl,
                   "autograd": autograd_impl},
        rounds=rounds, sample_s=0.0, max_calls=1, ops=4 * steps,
        targets=[Target("wengert at least 5x faster than PyTorch", "torch", 5.0)],
    )


# -- 2. tiny network -----------------------------------------------------------------------------

def tiny_data(seed=0):
    rng = np.random.default_rng(seed)
    W1 = rng.standard_normal((20, 20)) / math.sqrt(20)
    W2 = rng.standard_normal((10, 20)) / math.sqrt(20)
    x = rng.standard_normal((20, 1))
    label = int(rng.integers(10))
    return W1, W2, x, label


def tiny_loss(xp, W1, W2, x, label):
    """Softmax cross-entropy of pred = W2 @ (W1 @ x) at ``label``: logsumexp(pred) - pred[label]."""
    h = W1 @ x
    pred = W2 @ h
    m = xp.max(pred)
    return m + xp.log(xp.sum(xp.exp(pred - m))) - pred[label, 0]


def tiny_adjoint(W1, W2, x, label):
    """Softmax cross-entropy of W2 @ (W1 @ x) at ``label`` and its gradient w.r.t. (W1, W2), as a
    tuple: plain NumPy and ``math`` that Numba also compiles (benchmarks/native_floors.py)."""
    h = W1 @ x
    pred = W2 @ h
    m = pred.max()
    e = np.exp(pred - m)
    s = e.sum()
    loss = m + math.log(s) - pred[label, 0]
    dpred = e / s
    dpred[label, 0] -= 1.0
    return loss, (W2.T @ dpred) @ x.T, dpred @ h.T


def tiny_by_hand(W1, W2, x, label):
    loss, dW1, dW2 = tiny_adjoint(W1, W2, x, label)
    return loss, [dW1, dW2]


def tiny_network(rounds=41, seed=0):
    """Workload 2: forward and backward of a 20-20-10 linear network with a softmax loss."""
    W1, W2, x, label = tiny_data(seed)

    def hand_impl():
        return Impl(lambda: tiny_by_hand(W1, W2, x, label), lambda out: out)

    def wengert_impl():
        vg = wg.value_and_grad(lambda a, b, xx, lab: tiny_loss(wnp, a, b, xx, lab), argnums=(0, 1))
        return Impl(lambda: vg(W1, W2, x, label), lambda out: (out[0], list(out[1])))

    def torch_impl():
        torch = peers.load_torch()
        a = torch.tensor(W1, requires_grad=True)
        b = torch.tensor(W2, requires_grad=True)
        xt = torch.tensor(x)

        def run():
            a.grad = b.grad = None
            h = a @ xt
            pred = b @ h
            m = torch.max(pred)
            loss = m + torch.log(torch.sum(torch.exp(pred - m))) - pred[label, 0]
            loss.backward()
            return loss, a.grad, b.grad

        return Impl(run, lambda out: (out[0].item(), [out[1].numpy(), out[2].numpy()]))

    def autograd_impl():
        autograd, anp = peers.load_autograd()
        vg = autograd.value_and_grad(lambda a, b, xx, lab: tiny_loss(anp, a, b, xx, lab), argnum=(0, 1))
        return Impl(lambda: vg(W1, W2, x, label), lambda out: (out[0], list(out[1])))

    def jax_impl():
        jax, jnp = peers.load_jax()
        vg = jax.value_and_grad(lambda a, b, xx, lab: tiny_loss(jnp, a, b, xx, lab), argnums=(0, 1))
        a, b, xj = jnp.asarray(W1), jnp.asarray(W2), jnp.asarray(x)
        return Impl(lambda: jax.block_until_ready(vg(a, b, xj, label)),
                    lambda out: (_as_float(out[0]), [np.asarray(g) for g in out[1]]))

    return Workload(
        name="tiny-network",
        title="tiny network: x (20,1), W1 (20,20), W2 (10,20), softmax cross-entropy, float64",
        description="loss = logsumexp(W2 @ W1 @ x) - pred[label]; value and gradient w.r.t. (W1, W2).",
        params=("W1", "W2"), rtol=1e-6, reference=lambda: tiny_by_hand(W1, W2, x, label),
        factories={"hand": hand_impl, "wengert": wengert_impl, "torch": torch_impl, "jax": jax_impl,
                   "autograd": autograd_impl},
        rounds=rounds, sample_s=0.02, max_calls=2000,
        targets=[Target("wengert at least 2x faster than PyTorch", "torch", 2.0)],
    )


# -- 3. MLP --------------------------------------------------------------------------------------

MLP_PARAMS = ("W1", "b1", "W2", "b2", "W3", "b3")


def mlp_data(dtype, sizes=(784, 512, 512, 10), batch=128, seed=0):
    """He-initialised weights, small random biases, normal inputs and random integer labels."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        params.append((rng.standard_normal((fan_in, fan_out)) * math.sqrt(2.0 / fan_in)).astype(dtype))
        params.append((0.1 * rng.standard_normal(fan_out)).astype(dtype))
    X = rng.standard_normal((batch, sizes[0])).astype(dtype)
    labels = rng.integers(0, sizes[-1], size=batch)
    return tuple(params), X, labels


def mlp_loss(xp, params, X, labels, rows):
    """Mean softmax cross-entropy of a ReLU MLP; ``params`` is (W1, b1, W2, b2, ...)."""
    n = len(params) // 2
    h = X
    for i in range(n):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n - 1:
            h = xp.maximum(h, 0)
    m = xp.max(h, axis=1, keepdims=True)
    lse = m + xp.log(xp.sum(xp.exp(h - m), axis=1, keepdims=True))
    return xp.mean(lse[:, 0] - h[rows, labels])


def mlp_by_hand(params, X, labels, rows):
    """Value and gradients of ``mlp_loss`` written out in NumPy (in place where it saves memory)."""
    Ws, bs = params[0::2], params[1::2]
    acts = [X]
    h = X
    for W, b in zip(Ws[:-1], bs[:-1]):
        h = h @ W
        h += b
        np.maximum(h, 0, out=h)
        acts.append(h)
    logits = h @ Ws[-1]
    logits += bs[-1]
    batch = X.shape[0]
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(axis=1, keepdims=True)
    loss = np.mean(m[:, 0] + np.log(s[:, 0]) - logits[rows, labels])
    d = e
    d /= s
    d[rows, labels] -= 1
    d *= 1.0 / batch
    grads = [None] * len(params)
    for i in range(len(Ws) - 1, -1, -1):
        a = acts[i]
        grads[2 * i] = a.T @ d
        grads[2 * i + 1] = d.sum(axis=0)
        if i:
            d = d @ Ws[i].T
            np.multiply(d, a > 0, out=d)  # ReLU: a is the layer's output, positive where it passed
    return loss, grads


def mlp(dtype=np.float64, sizes=(784, 512, 512, 10), batch=128, rounds=31, seed=0):
    """Workload 3: value and gradient of all six parameters of a ReLU MLP, in ``dtype``."""
    dtype = np.dtype(dtype)
    params, X, labels = mlp_data(dtype, sizes, batch, seed)
    rows = np.arange(batch)
    names = tuple(f"{p}{i // 2 + 1}" for i, p in enumerate(["W", "b"] * (len(sizes) - 1)))

    def hand_impl():
        return Impl(lambda: mlp_by_hand(params, X, labels, rows), lambda out: out)

    def wengert_impl():
        vg = wg.value_and_grad(lambda p, xx, lab, r: mlp_loss(wnp, p, xx, lab, r), argnums=0)
        return Impl(lambda: vg(params, X, labels, rows), lambda out: (out[0], list(out[1])))

    def torch_impl():
        torch = peers.load_torch()
        ps = [torch.tensor(p, requires_grad=True) for p in params]
        Xt, lt, rt = torch.tensor(X), torch.tensor(labels), torch.tensor(rows)
        n = len(ps) // 2

        def run():
            for p in ps:
                p.grad = None
            h = Xt
            for i in range(n):
                h = h @ ps[2 * i] + ps[2 * i + 1]
                if i < n - 1:
                    h = torch.relu(h)
            m = torch.amax(h, dim=1, keepdim=True)
            lse = m + torch.log(torch.sum(torch.exp(h - m), dim=1, keepdim=True))
            loss = torch.mean(lse[:, 0] - h[rt, lt])
            loss.backward()
            return loss, [p.grad for p in ps]

        return Impl(run, lambda out: (out[0].item(), [g.numpy() for g in out[1]]))

    def autograd_impl():
        autograd, anp = peers.load_autograd()
        vg = autograd.value_and_grad(lambda p, xx, lab, r: mlp_loss(anp, p, xx, lab, r), argnum=0)
        return Impl(lambda: vg(params, X, labels, rows), lambda out: (out[0], list(out[1])))

    def jax_impl():
        jax, jnp = peers.load_jax()
        vg = jax.value_and_grad(lambda p, xx, lab, r: mlp_loss(jnp, p, xx, lab, r), argnums=0)
        pj = tuple(jnp.asarray(p) for p in params)
        Xj, lj, rj = jnp.asarray(X), jnp.asarray(labels), jnp.asarray(rows)
        return Impl(lambda: jax.block_until_ready(vg(pj, Xj, lj, rj)),
                    lambda out: (_as_float(out[0]), [np.asarray(g) for g in out[1]]))

    shape = "-".join(str(s) for s in sizes)
    return Workload(
        name=f"mlp-{dtype.name}",
        title=f"MLP {shape}, batch {batch}, ReLU, softmax cross-entropy, {dtype.name}",
        description=f"Value and gradient of all {len(params)} parameters ({', '.join(names)}).",
        params=names, rtol=1e-3 if dtype == np.float32 else 1e-6,
        reference=lambda: mlp_by_hand(params, X, labels, rows),
        factories={"hand": hand_impl, "wengert": wengert_impl, "torch": torch_impl, "jax": jax_impl,
                   "autograd": autograd_impl},
        rounds=rounds, sample_s=0.06, max_calls=50,
        targets=[Target("wengert within 1.1x of hand-written NumPy", "hand", 1.1, kind="within"),
                 Target("wengert faster than PyTorch", "torch", 1.0)],
    )


def all_workloads(quick=False):
    """The four core workloads (``quick``: small sizes and few rounds, for smoke-testing)."""
    from benchmarks import source as source_loops
    from benchmarks.cnn import cnn_workloads
    from benchmarks.nn_workloads import nn_workloads  # it imports this module

    if quick:
        small = dict(sizes=(64, 32, 32, 10), batch=16, rounds=3)
        return [scalar_chain(steps=500, jax_steps=50, rounds=3), tiny_network(rounds=3),
                mlp(np.float32, **small), mlp(np.float64, **small)] + nn_workloads(quick=True) \
            + [recurrent.lstm_workload(quick=True)] \
            + indexing.workloads(quick=True) + source_loops.workloads(quick=True) \
            + batching.workloads(quick=True) + cnn_workloads(quick=True)
    return ([scalar_chain(), tiny_network(), mlp(np.float32), mlp(np.float64)] + nn_workloads()
            + [recurrent.lstm_workload()]
            + indexing.workloads() + source_loops.workloads() + batching.workloads() + cnn_workloads())
