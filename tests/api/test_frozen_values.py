"""Values the graph still reads are handed out read-only: ``wg.stop_gradient`` of a traced array and
``wg.vjp``'s output and aux. Before, they were the graph's own arrays, and a write into one (``a += 1``)
silently changed the derivative; now NumPy refuses the write, and a copy is writeable."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

X = np.linspace(0.1, 1.0, 1000)  # big enough that the tape releases what its rules do not read


def _sin_squared_grad(x):
    return 2 * np.sin(x) * np.cos(x)


def test_stop_gradient_of_a_traced_array_is_read_only():
    seen = {}

    def f(x):
        h = wnp.sin(x)
        a = wg.stop_gradient(h)
        seen["writeable"] = a.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            a += 1
        b = np.array(a)  # a copy is the user's to write into
        b += 1
        return wnp.sum(h * h) + 0.0 * wnp.sum(b)

    np.testing.assert_allclose(wg.grad(f)(X), _sin_squared_grad(X), rtol=1e-12)
    assert seen["writeable"] is False


def test_stop_gradient_leaves_untraced_values_alone():
    x = X.copy()
    assert wg.stop_gradient(x) is x and x.flags.writeable
    assert wg.stop_gradient(1.5) == 1.5
    out = wg.stop_gradient({"a": x, "b": [2.0]})
    assert out["a"] is x and out["b"] == [2.0]


def test_vjp_output_and_aux_are_read_only_and_the_pullback_stays_right():
    def f(x):
        y = wnp.exp(x)  # exp's rule reads its output
        return y, {"y": y, "mine": X}

    y, back, aux = wg.vjp(f, X, has_aux=True)
    for arr in (y, aux["y"]):
        assert not arr.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            arr -= 1
    assert aux["mine"] is X  # not the graph's: untouched
    (g,) = back(np.ones_like(X))
    np.testing.assert_allclose(g, np.exp(X), rtol=1e-12)
    eps = 1e-6  # and against finite differences
    np.testing.assert_allclose(g[:5], (np.exp(X[:5] + eps) - np.exp(X[:5] - eps)) / (2 * eps), rtol=1e-7)


def test_vjp_matches_jax_after_a_refused_write():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    y, back = wg.vjp(lambda x: wnp.tanh(x) * x, X)
    with pytest.raises(ValueError):
        y *= 2
    _, jback = jax.vjp(lambda x: jax.numpy.tanh(x) * x, X)
    ct = np.cos(X)
    np.testing.assert_allclose(back(ct)[0], np.asarray(jback(ct)[0]), rtol=1e-12)


@pytest.mark.parametrize("how", ["iadd", "setitem", "zero_", "numpy"])
@pytest.mark.parametrize("attr", ["detach", "data"])
def test_a_value_detached_inside_a_transform_is_read_only(how, attr):
    """``h.detach()`` (and ``h.data``) inside ``wg.grad`` shared the graph's array: ``d += 1``,
    ``d[0:500] = 0``, ``d.zero_()`` or a write through ``np.asarray(d)`` changed the gradient of
    ``sum(h * h)`` by up to 1.75, silently."""
    def f(x):
        h = wnp.sin(x)
        d = h.detach() if attr == "detach" else h.data
        with pytest.raises(ValueError, match="read-only"):
            if how == "iadd":
                d += 1
            elif how == "setitem":
                d[0:500] = 0
            elif how == "zero_":
                d.zero_()
            else:
                a = np.asarray(d)
                a += 1
        return wnp.sum(h * h)

    np.testing.assert_allclose(wg.grad(f)(X), _sin_squared_grad(X), rtol=1e-12)


def test_an_eager_tensor_detached_stays_writeable_and_backward_checks_it():
    x = wg.tensor(X.copy(), requires_grad=True)
    h = wnp.sin(x)
    z = wnp.sum(h * h)
    d = h.detach()  # PyTorch's detach shares the storage; the write is caught by backward()
    d += 1
    with pytest.raises(RuntimeError):
        z.backward()
