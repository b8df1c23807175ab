"""Threads: transforms, eager tensors and compiled functions running at once give the results they
give alone, and leave the cyclic garbage collector as they found it."""

import gc
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy.integrate import odeint

X = np.linspace(0.1, 0.9, 5)
W = np.arange(12.0).reshape(3, 4) / 10


def chain(x):
    z = x
    for _ in range(60):
        z = z * 0.9 + 0.1 * wnp.sin(z)
    return z


def loss(x):
    return wnp.sum(wnp.tanh(W @ x[:4]) ** 2) + wnp.sum(x ** 3)


def tensor_grad(x):
    t = wg.tensor(x, requires_grad=True)
    y = wnp.sum(wnp.tanh(wg.tensor(W) @ t[:4]) ** 2) + (t ** 3).sum()
    y.backward()
    return t.grad


def tensor_assign(x):
    """An eager tensor assigned into: its versions are logged on the eager trace, shared by threads."""
    t = wg.tensor(x, requires_grad=True)
    u = t * 1.0
    u[1] = u[0] * u[2]
    (u ** 2).sum().backward()
    return t.grad


def decay(y, t, k):
    return -k * y


def ode_grads(k):
    t = np.linspace(0.0, 1.0, 4)
    return wg.grad(lambda y0, k: wnp.sum(odeint(decay, y0, t, k)), argnums=(0, 1))(np.array([1.0, 2.0]), k)


compiled_grad = wg.compile(loss).grad()
block = wg.checkpoint(lambda x: wnp.tanh(W @ x[:4]) * wnp.sum(x))


def iterated(x):
    return wnp.sum(wg.iterate(lambda v: wnp.sin(v) * 0.9 + 0.1 * v, x, 9, checkpoint="binomial") ** 2)
compiled_shapes = wg.compile(lambda x, y: wnp.sum(wnp.sin(x) * x) * y).value_and_grad((0, 1))

JOBS = {
    "grad": lambda i: wg.grad(chain)(0.3 + 0.01 * i),
    "hessian": lambda i: wg.hessian(loss)(X + 0.01 * i),
    "Tensor.backward": lambda i: tensor_grad(X + 0.01 * i),
    "Tensor assignment": lambda i: tensor_assign(X + 0.01 * i),
    "checkpoint": lambda i: wg.grad(lambda x: wnp.sum(block(x) ** 2))(X + 0.01 * i),
    "iterate, binomial": lambda i: wg.grad(iterated)(X + 0.01 * i),
    "compile": lambda i: compiled_grad(X + 0.01 * i),
    "odeint": lambda i: ode_grads(0.5 + 0.1 * (i % 3)),
    # one compiled function called with three signatures at once: each call must run its own
    "compile, shapes": lambda i: compiled_shapes(np.linspace(0.0, 1.0, 2 + i % 3), 1.0 + i),
}


@pytest.fixture
def fast_switching():
    """Switch threads as often as the interpreter allows, so that interleavings are many."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def _close(a, b):
    for x, y in zip(wg.tree_flatten(a)[0], wg.tree_flatten(b)[0], strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("workers", [4, 8])
def test_transforms_tensors_and_compile_in_threads_match_one_thread(fast_switching, workers):
    assert gc.isenabled()
    tasks = [(name, i) for i in range(6) for name in JOBS]
    expected = {(name, i): JOBS[name](i) for name, i in tasks}
    start = threading.Barrier(workers)

    def run(chunk):
        start.wait()
        return [((name, i), JOBS[name](i)) for name, i in chunk]

    chunks = [tasks[k::workers] for k in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        results = [r for part in pool.map(run, chunks) for r in part]
    assert len(results) == len(tasks)
    for key, value in results:
        _close(value, expected[key])
    assert gc.isenabled()


def test_gc_pause_counts_across_threads(fast_switching):
    """Pauses opened and closed in any order, from many threads, leave the collector on."""
    from wengert.core.trace import gc_paused

    assert gc.isenabled()
    inside = threading.Barrier(4)

    def pause(k):
        with gc_paused():
            inside.wait()  # all four pauses open at once
            assert not gc.isenabled()
            with gc_paused():
                pass
        return k

    with ThreadPoolExecutor(4) as pool:
        assert sorted(pool.map(pause, range(4))) == [0, 1, 2, 3]
    assert gc.isenabled()


def test_gc_pause_keeps_a_collector_that_was_off_off():
    from wengert.core.trace import gc_paused

    gc.disable()
    try:
        with gc_paused():
            pass
        wg.grad(chain)(0.3)
        assert not gc.isenabled()
    finally:
        gc.enable()
