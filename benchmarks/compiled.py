"""The compiled workloads: ``wg.compile``'s generated gradient on the scalar chain and the tiny
network, against hand-written code, wengert's tape, PyTorch eager and ``jax.jit``. The one-time
trace+compile time of wengert and JAX is measured once and shown in the note column.
"""

import time

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from benchmarks import peers
from benchmarks import workloads as W
from benchmarks.harness import Impl, Target, Workload

__all__ = ["COMPILED_NAMES", "compiled_scalar_chain", "compiled_tiny_network", "compiled_workloads"]

COMPILED_NAMES = ("compiled-scalar-chain", "compiled-tiny-network")


def _first_call(fun, *args):
    """``fun(*args)`` once (the trace and compilation happen there), and the seconds it took."""
    start = time.perf_counter()
    out = fun(*args)
    return out, time.perf_counter() - start


def _seconds(s):
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.1f} s"


def compiled_scalar_chain(steps=10_000, jit_steps=500, rounds=9, x=0.3, y=0.9):
    """The chain's gradient by wg.compile. ``jax.jit`` of the unrolled chain compiles in time that
    grows faster than the chain (about 26 s for 1,000 steps here), so it runs ``jit_steps`` steps,
    checked against the hand-written chain of that length and compared per operation."""
    base = W.scalar_chain(steps=steps, rounds=rounds, x=x, y=y)

    def compiled_impl():
        g = wg.compile(lambda a, b: W.chain_forward(wnp.sin, a, b, steps)).grad((0, 1))
        _, build = _first_call(g, x, y)
        return Impl(lambda: g(x, y), lambda out: (None, list(out)),
                    note=f"wg.compile, trace+compile {_seconds(build)}")

    def jit_impl():
        jax, jnp = peers.load_jax()
        n = min(steps, jit_steps)
        g = jax.jit(jax.grad(lambda a, b: W.chain_forward(jnp.sin, a, b, n), argnums=(0, 1)))
        _, build = _first_call(lambda: jax.block_until_ready(g(x, y)))
        return Impl(lambda: jax.block_until_ready(g(x, y)),
                    lambda out: (None, [float(np.asarray(v)) for v in out]),
                    reference=lambda: W.chain_by_hand(x, y, n), ops=4 * n,
                    note=f"{n:,} steps; jax.jit, trace+compile {_seconds(build)}")

    return Workload(
        name="compiled-scalar-chain",
        title=f"compiled scalar chain: {steps:,} steps of z = z*y + 0.5*sin(z), {4 * steps:,} operations",
        description="Gradient w.r.t. (x, y) by wg.compile(f).grad((0, 1)): straight-line generated "
                    "Python on floats, traced once. 'tape' is wg.grad on the same chain.",
        params=("x", "y"), rtol=1e-6, reference=base.reference,
        factories={"hand": base.factories["hand"], "wengert": compiled_impl,
                   "tape": base.factories["wengert"], "torch": base.factories["torch"], "jit": jit_impl},
        rounds=rounds, sample_s=0.0, max_calls=1, ops=4 * steps,
        targets=[Target("compiled gradient within 2x of hand-written Python", "hand", 2.0, kind="within")],
    )


def compiled_tiny_network(rounds=41, seed=0):
    """The tiny network, value and gradient by wg.compile."""
    base = W.tiny_network(rounds=rounds, seed=seed)
    W1, W2, x, label = W.tiny_data(seed)

    def compiled_impl():
        vg = wg.compile(lambda a, b, xx, lab: W.tiny_loss(wnp, a, b, xx, lab)).value_and_grad((0, 1))
        _, build = _first_call(vg, W1, W2, x, label)
        return Impl(lambda: vg(W1, W2, x, label), lambda out: (out[0], list(out[1])),
                    note=f"wg.compile, trace+compile {_seconds(build)}")

    def jit_impl():
        jax, jnp = peers.load_jax()
        loss = lambda a, b, xx, lab: W.tiny_loss(jnp, a, b, xx, lab)
        vg = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)), static_argnums=3)
        a, b, xj = jnp.asarray(W1), jnp.asarray(W2), jnp.asarray(x)
        _, build = _first_call(lambda: jax.block_until_ready(vg(a, b, xj, label)))
        return Impl(lambda: jax.block_until_ready(vg(a, b, xj, label)),
                    lambda out: (float(np.asarray(out[0])), [np.asarray(g) for g in out[1]]),
                    note=f"jax.jit, trace+compile {_seconds(build)}")

    return Workload(
        name="compiled-tiny-network",
        title="compiled tiny network: x (20,1), W1 (20,20), W2 (10,20), softmax cross-entropy, float64",
        description="loss = logsumexp(W2 @ W1 @ x) - pred[label]; value and gradient w.r.t. (W1, W2) by "
                    "wg.compile(loss).value_and_grad((0, 1)); 'tape' is wg.value_and_grad.",
        params=("W1", "W2"), rtol=1e-6, reference=base.reference,
        factories={"hand": base.factories["hand"], "wengert": compiled_impl,
                   "tape": base.factories["wengert"], "torch": base.factories["torch"], "jit": jit_impl},
        rounds=rounds, sample_s=0.02, max_calls=2000,
        targets=[Target("compiled forward+backward within 1.5x of hand-written NumPy", "hand", 1.5,
                        kind="within")],
    )


def compiled_workloads(quick=False):
    """The two compiled workloads (``quick``: a short chain and few rounds, for smoke-testing)."""
    if quick:
        return [compiled_scalar_chain(steps=500, jit_steps=50, rounds=3), compiled_tiny_network(rounds=3)]
    return [compiled_scalar_chain(), compiled_tiny_network()]
