"""wengert's transforms on Dask arrays computed by a real cluster: a ``dask.distributed.LocalCluster`` of
two worker processes with a memory limit each, started once for the module. Every transform's result is
a lazy Dask array, equal to the NumPy result on the same data; differentiating computes nothing, and
computing the result is one compute (counted by a scheduler that forwards to the cluster's client)."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    try:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           memory_limit="400MB", dashboard_address=None, timeout="60s")
    except (OSError, TimeoutError, RuntimeError) as e:  # no worker processes on this machine
        pytest.skip(f"dask.distributed could not start a LocalCluster of 2 worker processes: {e}")
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


class CountingScheduler:
    """A ``scheduler=`` for Dask that counts the graphs it is given and has the cluster compute them."""

    def __init__(self, client):
        self.client = client
        self.computes = 0

    def __call__(self, dsk, keys, **kwargs):
        self.computes += 1
        return self.client.get(dsk, keys, **kwargs)


rng = np.random.default_rng(7)
X = rng.standard_normal((600, 4))
Y = (rng.random(600) < 0.4).astype(float)
W = rng.standard_normal(4)


def loss(w, x, y):
    """L2-regularised logistic regression: mean(log(1 + e^z) - y z) + 0.01 |w|^2, z = x w."""
    z = x @ w
    return wnp.mean(wnp.logaddexp(0.0, z) - y * z) + 0.01 * wnp.sum(w * w)


def dask_data():
    return da.from_array(X, chunks=(150, 4)), da.from_array(Y, chunks=150)


def check_lazy_then_one_compute(client, differentiate, want):
    """``differentiate()`` computes nothing and returns Dask arrays (a tuple of them or one); computing
    them together is one compute on the cluster, equal to ``want``."""
    counter = CountingScheduler(client)
    with dask.config.set(scheduler=counter):
        got = differentiate()
        leaves = got if isinstance(got, tuple) else (got,)
        assert all(isinstance(g, da.Array) for g in leaves), [type(g) for g in leaves]
        assert counter.computes == 0, "differentiating computed a Dask array"
        values = dask.compute(*leaves)
    assert counter.computes == 1
    wants = want if isinstance(want, tuple) else (want,)
    for v, w in zip(values, wants):
        np.testing.assert_allclose(v, w, rtol=1e-10, atol=1e-13)


def test_grad(client):
    x, y = dask_data()
    check_lazy_then_one_compute(client, lambda: wg.grad(loss)(W, x, y), wg.grad(loss)(W, X, Y))


def test_grad_with_respect_to_the_data(client):
    x, y = dask_data()
    check_lazy_then_one_compute(client, lambda: wg.grad(loss, argnums=(0, 1))(W, x, y),
                                wg.grad(loss, argnums=(0, 1))(W, X, Y))


def test_value_and_grad(client):
    x, y = dask_data()
    check_lazy_then_one_compute(client, lambda: wg.value_and_grad(loss)(W, x, y),
                                wg.value_and_grad(loss)(W, X, Y))


def test_vjp_and_jvp(client):
    x, y = dask_data()
    f = lambda w, x: wnp.tanh(x @ w) * y  # noqa: E731 - a vector output, y closed over (a Dask array)
    u = rng.standard_normal(600)
    t = rng.standard_normal(4)
    want_vjp = wg.vjp(lambda w, x: wnp.tanh(x @ w) * Y, W, X)[1](u)
    check_lazy_then_one_compute(client, lambda: wg.vjp(f, W, x)[1](da.from_array(u, chunks=150)), want_vjp)
    want_jvp = wg.jvp(lambda w: wnp.tanh(X @ w) * Y, (W,), (t,))
    check_lazy_then_one_compute(client, lambda: wg.jvp(lambda w: f(w, x), (W,), (t,)), want_jvp)


def test_hessian(client):
    x, y = dask_data()
    check_lazy_then_one_compute(client, lambda: wg.hessian(loss)(W, x, y), wg.hessian(loss)(W, X, Y))


def per_example_loss(w, xi, yi):
    z = wnp.sum(xi * w)
    return wnp.logaddexp(0.0, z) - yi * z


def test_vmap_of_per_example_gradients(client):
    x, y = dask_data()
    per_example = wg.vmap(wg.grad(per_example_loss), in_axes=(None, 0, 0))
    check_lazy_then_one_compute(client, lambda: per_example(W, x, y), per_example(W, X, Y))


def test_tensor_backward(client):
    """``Tensor.backward()`` with a NumPy leaf and Dask data: the forward and backward passes stay lazy,
    and the leaf's ``.grad`` is a Dask array, computed once when asked for."""
    x, y = dask_data()
    counter = CountingScheduler(client)
    with dask.config.set(scheduler=counter):
        w = wg.tensor(W, requires_grad=True)
        out = loss(w, x, y)
        assert isinstance(out.value, da.Array) and counter.computes == 0  # the forward pass stays lazy
        out.backward()
        assert counter.computes == 0
        assert isinstance(w.grad.value, da.Array)
        got = w.grad.value.compute()
    assert counter.computes == 1
    np.testing.assert_allclose(got, wg.grad(loss)(W, X, Y), rtol=1e-10)


def test_grad_with_respect_to_a_python_float(client):
    """A Python float argument whose gradient depends on Dask data gets a lazy 0-d Dask array, not a
    float (which would compute it)."""
    x, y = dask_data()

    def scaled(a, x, y):
        return loss(W * a, x, y)

    check_lazy_then_one_compute(client, lambda: wg.grad(scaled)(0.5, x, y), wg.grad(scaled)(0.5, X, Y))
