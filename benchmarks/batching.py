"""Batched derivatives (``wg.vmap``): a full Hessian, a full Jacobian, and per-example gradients.

- ``hessian-rosenbrock``: the Hessian of the Rosenbrock function at n = 100, against
  ``torch.func.hessian``, ``jax.jit(jax.hessian)``, HIPS autograd's ``hessian`` and the formula.
- ``jacobian-map``: the Jacobian of ``x -> tanh(W x) + x**2 / 2`` from R^100 to R^100, by ``wg.jacrev``
  (one batched backward pass) and ``wg.jacfwd``, against one VJP of the same map (the goal: at most
  three VJPs' time) and the peers' ``jacrev``.
- ``per-example-grads``: the gradient of each of 128 examples' losses for an MLP 784-512-512-10 in
  float32, by ``wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))`` and the same compiled (``wg.compile`` of
  it, on the Python and the Numba backend), against ``torch.func.vmap(grad)``, a
  loop of ``wg.grad`` that stacks the gradients, a PyTorch loop that discards each one (less memory
  traffic: a reference point, not a peer), and the per-example formula by hand.
"""

import importlib
import time
import warnings

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from benchmarks import peers
from benchmarks.harness import Impl, Target, Workload

__all__ = ["NAMES", "workloads", "rosenbrock_hessian_by_hand", "per_example_by_hand"]

NAMES = ("hessian-rosenbrock", "jacobian-map", "per-example-grads")


def _rosen(lib, x):
    return lib.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian_by_hand(x):
    """The Rosenbrock function's Hessian, tridiagonal, from its formula."""
    n = len(x)
    h = np.zeros((n, n))
    i = np.arange(n - 1)
    h[i, i] += 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    h[i + 1, i + 1] += 200.0
    h[i, i + 1] = h[i + 1, i] = -400.0 * x[:-1]
    return h


def hessian_rosenbrock(n=100, rounds=21):
    x = np.linspace(-1.2, 1.2, n)

    def hand_impl():
        return Impl(lambda: rosenbrock_hessian_by_hand(x), lambda h: (None, [h]))

    def wengert_impl():
        h = wg.hessian(lambda v: _rosen(wnp, v))
        return Impl(lambda: h(x), lambda h: (None, [np.asarray(h)]))

    def torch_impl():
        torch = peers.load_torch()
        from torch.func import hessian

        xt = torch.tensor(x)
        h = hessian(lambda v: _rosen(torch, v))
        return Impl(lambda: h(xt), lambda h: (None, [h.numpy()]), note="torch.func.hessian")

    def jit_impl():
        jax, jnp = peers.load_jax()
        h = jax.jit(jax.hessian(lambda v: _rosen(jnp, v)))
        xj = jnp.asarray(x)
        return Impl(lambda: jax.block_until_ready(h(xj)), lambda h: (None, [np.asarray(h)]))

    def autograd_impl():
        autograd, anp = peers.load_autograd()
        h = autograd.hessian(lambda v: _rosen(anp, v))
        return Impl(lambda: h(x), lambda h: (None, [h]))

    return Workload(
        name="hessian-rosenbrock", title=f"full Hessian of the Rosenbrock function, n = {n}",
        description="wg.hessian is jacfwd(jacrev(f)): one recording, then forward and backward passes "
                    "batched over the basis vectors (wg.vmap's engine), not one pass per vector.",
        params=("H",), rtol=1e-9, reference=lambda: (None, [rosenbrock_hessian_by_hand(x)]),
        factories={"hand": hand_impl, "wengert": wengert_impl, "torch": torch_impl, "jit": jit_impl,
                   "autograd": autograd_impl},
        rounds=rounds, sample_s=0.05, max_calls=100,
        targets=[Target("wengert within 0.5x of torch.func.hessian", "torch", 0.5, kind="within"),
                 Target("wengert within 10x of jax.jit(jax.hessian)", "jit", 10.0, kind="within")])


def _field(lib, W, x):
    return lib.tanh(W @ x) + 0.5 * x ** 2


def jacobian_map(n=100, rounds=21):
    rng = np.random.default_rng(0)
    W = rng.standard_normal((n, n)) / np.sqrt(n)
    x = rng.standard_normal(n)
    u = rng.standard_normal(n)
    t = np.tanh(W @ x)
    jac = (1.0 - t ** 2)[:, None] * W + np.diag(x)
    vjp_by_hand = W.T @ ((1.0 - t ** 2) * u) + x * u

    def hand_impl():
        def run():
            t = np.tanh(W @ x)
            return (1.0 - t ** 2)[:, None] * W + np.diag(x)
        return Impl(run, lambda j: (None, [j]))

    def wengert_impl():
        j = wg.jacrev(lambda v: _field(wnp, W, v))
        return Impl(lambda: j(x), lambda j: (None, [np.asarray(j)]), note="wg.jacrev")

    def tape_impl():
        j = wg.jacfwd(lambda v: _field(wnp, W, v))
        return Impl(lambda: j(x), lambda j: (None, [np.asarray(j)]), note="wg.jacfwd")

    def vjp_impl():
        def run():
            _, pull = wg.vjp(lambda v: _field(wnp, W, v), x)
            return pull(u)
        return Impl(run, lambda g: (None, [np.asarray(g[0] if isinstance(g, tuple) else g)]),
                    reference=lambda: (None, [vjp_by_hand]), note="one wg.vjp (record and pull back)")

    def torch_impl():
        torch = peers.load_torch()
        from torch.func import jacrev

        Wt, xt = torch.tensor(W), torch.tensor(x)
        j = jacrev(lambda v: _field(torch, Wt, v))
        return Impl(lambda: j(xt), lambda j: (None, [j.numpy()]), note="torch.func.jacrev")

    def jit_impl():
        jax, jnp = peers.load_jax()
        Wj, xj = jnp.asarray(W), jnp.asarray(x)
        j = jax.jit(jax.jacrev(lambda v: _field(jnp, Wj, v)))
        return Impl(lambda: jax.block_until_ready(j(xj)), lambda j: (None, [np.asarray(j)]))

    def autograd_impl():
        autograd, anp = peers.load_autograd()
        j = autograd.jacobian(lambda v: _field(anp, W, v))
        return Impl(lambda: j(x), lambda j: (None, [j]))

    return Workload(
        name="jacobian-map", title=f"full Jacobian of x -> tanh(W x) + x**2 / 2, R^{n} -> R^{n}",
        description="wg.jacrev: one recording and one backward pass batched over the output's basis; "
                    "the 'vjp' row is one VJP of the same map, the unit of the target.",
        params=("J",), rtol=1e-10, reference=lambda: (None, [jac]),
        factories={"hand": hand_impl, "wengert": wengert_impl, "jacfwd": tape_impl, "vjp": vjp_impl,
                   "torch": torch_impl, "jit": jit_impl, "autograd": autograd_impl},
        rounds=rounds, sample_s=0.05, max_calls=200,
        targets=[Target("wg.jacrev within 3x of one VJP", "vjp", 3.0, kind="within")])


# -- per-example gradients --------------------------------------------------------------------------

def _mlp_params(sizes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        params += [(rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype), np.zeros(n, dtype)]
    return params


def _example_loss(lib, params, x, target):
    """One example's softmax cross-entropy through tanh layers, its label one-hot (the same code in
    every library: indexing by a batched label is data-dependent for torch.func)."""
    h = x
    for k in range(0, len(params) - 2, 2):
        h = lib.tanh(h @ params[k] + params[k + 1])
    z = h @ params[-2] + params[-1]
    m = lib.max(z)
    return m + lib.log(lib.sum(lib.exp(z - m))) - lib.sum(z * target)


def per_example_by_hand(params, X, labels):
    """Every example's gradient at once: backpropagation with the batch kept apart (outer products
    per example instead of a sum over the batch)."""
    acts = [X]
    for k in range(0, len(params) - 2, 2):
        acts.append(np.tanh(acts[-1] @ params[k] + params[k + 1]))
    z = acts[-1] @ params[-2] + params[-1]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    delta = p / p.sum(axis=1, keepdims=True)
    delta[np.arange(len(X)), labels] -= 1.0
    grads = [None] * len(params)
    for k in range(len(params) - 2, -1, -2):
        grads[k] = acts[k // 2][:, :, None] * delta[:, None, :]
        grads[k + 1] = delta
        if k:
            delta = (delta @ params[k].T) * (1.0 - acts[k // 2] ** 2)
    return grads


def per_example_grads(sizes=(784, 512, 512, 10), batch=128, dtype=np.float32, rounds=7):
    params = _mlp_params(sizes, dtype)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((batch, sizes[0])).astype(dtype)
    labels = rng.integers(0, sizes[-1], batch)
    targets = np.eye(sizes[-1], dtype=dtype)[labels]
    names = [f"{'W' if k % 2 == 0 else 'b'}{k // 2 + 1}" for k in range(len(params))]

    def hand_impl():
        return Impl(lambda: per_example_by_hand(params, X, labels), lambda g: (None, list(g)))

    def wengert_impl():
        per = wg.vmap(wg.grad(lambda p, x, k: _example_loss(wnp, p, x, k)), in_axes=(None, 0, 0))
        return Impl(lambda: per(params, X, targets), lambda g: (None, [np.asarray(v) for v in g]),
                    note="wg.vmap(wg.grad(loss))")

    def compiled_impl(backend="python"):
        per = wg.compile(wg.vmap(wg.grad(lambda p, x, k: _example_loss(wnp, p, x, k)), in_axes=(None, 0, 0)),
                         backend=backend)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            per(params, X, targets)
        build = time.perf_counter() - start
        fell = [str(w.message) for w in caught if type(w.message).__name__.endswith("FallbackWarning")]
        spelled = "" if backend == "python" else f", backend={backend!r}"
        note = f"wg.compile(wg.vmap(wg.grad(loss)){spelled}), trace+compile {build:.1f} s"
        if fell:
            note += f"; fell back: {fell[0]}"
        return Impl(lambda: per(params, X, targets), lambda g: (None, [np.asarray(v) for v in g]), note=note)

    def compiled_numba_impl():
        try:
            importlib.import_module("numba")
        except ImportError:
            raise peers.PeerUnavailable("Numba is not installed") from None
        return compiled_impl("numba")

    def tape_impl():
        g = wg.grad(lambda p, x, k: _example_loss(wnp, p, x, k))

        def run():
            each = [g(params, x, k) for x, k in zip(X, targets)]
            return [np.stack([e[i] for e in each]) for i in range(len(params))]
        return Impl(run, lambda g: (None, g), note="a loop of wg.grad, stacked")

    def torch_impl():
        torch = peers.load_torch()
        from torch.func import grad, vmap

        pt = [torch.tensor(p) for p in params]
        Xt, lt = torch.tensor(X), torch.tensor(targets)
        per = vmap(grad(lambda p, x, k: _example_loss(torch, p, x, k)), in_dims=(None, 0, 0))
        return Impl(lambda: per(pt, Xt, lt), lambda g: (None, [v.numpy() for v in g]),
                    note="torch.func.vmap(grad(loss))")

    def torch_loop_impl():
        torch = peers.load_torch()
        pt = [torch.tensor(p, requires_grad=True) for p in params]
        Xt, lt = torch.tensor(X), torch.tensor(targets)

        def run():
            for x, k in zip(Xt, lt):
                for p in pt:
                    p.grad = None
                _example_loss(torch, pt, x, k).backward()
            return [p.grad.numpy() for p in pt]  # the last example's: the others are discarded
        return Impl(run, lambda g: (None, g), note="each example's gradient discarded (not stacked)",
                    reference=lambda: (None, [g[-1] for g in per_example_by_hand(params, X, labels)]))

    def jit_impl():
        jax, jnp = peers.load_jax()
        pj = [jnp.asarray(p) for p in params]
        Xj, lj = jnp.asarray(X), jnp.asarray(targets)
        loss = jax.grad(lambda p, x, k: _example_loss(jnp, p, x, k))
        per = jax.jit(jax.vmap(loss, in_axes=(None, 0, 0)))
        return Impl(lambda: jax.block_until_ready(per(pj, Xj, lj)),
                    lambda g: (None, [np.asarray(v) for v in g]))

    return Workload(
        name="per-example-grads",
        title=f"per-example gradients, MLP {'-'.join(map(str, sizes))}, batch {batch}, "
              f"{np.dtype(dtype).name}",
        description=f"The {batch} gradients of all {len(params)} parameters are "
                    f"{batch * sum(p.nbytes for p in params) / 1e6:.0f} MB: the work is memory-bound. Each "
                    "timed batch follows one untimed call of the same implementation: the first call after "
                    "another library's can wait 0.1-0.5 s for the kernel to find huge pages (NumPy asks for "
                    "them) in memory that library left fragmented.",
        settle=1,
        params=tuple(names), rtol=2e-3, reference=lambda: (None, per_example_by_hand(params, X, labels)),
        factories={"hand": hand_impl, "wengert": wengert_impl, "wg.compile": compiled_impl,
                   "compile-numba": compiled_numba_impl, "grad-loop": tape_impl, "torch": torch_impl,
                   "torch-loop": torch_loop_impl, "jit": jit_impl},
        rounds=rounds, sample_s=0.2, max_calls=5,
        targets=[Target("wengert within 1.5x of torch.func vmap(grad)", "torch", 1.5, kind="within"),
                 Target("wg.compile within 0.5x of torch.func vmap(grad)", "torch", 0.5, kind="within",
                        subject="wg.compile"),
                 Target("wengert faster than a loop of wg.grad that stacks", "grad-loop", 1.0)])


def workloads(quick=False):
    """The three batched workloads (``quick``: small sizes, few rounds)."""
    if quick:
        return [hessian_rosenbrock(n=20, rounds=3), jacobian_map(n=20, rounds=3),
                per_example_grads(sizes=(20, 16, 10), batch=8, rounds=3)]
    return [hessian_rosenbrock(), jacobian_map(), per_example_grads()]
