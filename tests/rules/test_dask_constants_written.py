"""A Dask array written after an operation read it (``y[mask] = v`` replaces the graph of the object
itself): the recording holds the array as it was when the operation ran (its own lazy ``copy()``), as
for NumPy arrays (tests/api/test_constants_written_inside.py). The reference is the same function on
NumPy arrays, differentiated by central differences."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

da = pytest.importorskip("dask.array")

DATA = np.array([[0.3, -1.2, 0.7], [1.5, 0.2, -0.4], [-0.6, 0.9, 1.1]])
W0 = np.array([0.4, -0.3, 0.8])


def masked_write(lib, w):
    y = lib.ones(3)
    z = w * y
    y[y > 0] = 3.0
    return wnp.sum(z * z + y * w)


def slice_write(lib, w):
    y = lib.asarray(DATA[0]) + 0.0
    z = wnp.sin(w * y)
    y[:2] = lib.asarray(DATA[1, :2])
    return wnp.sum(z) + wnp.sum(w * y)


def buffer_loop(lib, w):
    tmp = lib.zeros(3)
    s = 0.0
    for t in range(3):
        tmp[:] = lib.asarray(DATA[t])
        s = s + wnp.sum(wnp.sin(w * tmp))
    return s


def index_write(lib, w):
    y = lib.asarray(DATA[2]) + 0.0
    z = wnp.exp(w * y)
    y[1] = -5.0
    return wnp.sum(z * y)


FUNCTIONS = [masked_write, slice_write, buffer_loop, index_write]


def _numpy_gradient(f, w, h=1e-6):
    g = np.zeros_like(w)
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = h
        g[i] = (float(f(np, w + e)) - float(f(np, w - e))) / (2 * h)
    return g


def _dask_lib():
    class Lib:  # the NumPy names the functions use, made as Dask arrays
        ones = staticmethod(lambda n: da.ones(n, chunks=n))
        zeros = staticmethod(lambda n: da.zeros(n, chunks=n))
        asarray = staticmethod(lambda a: da.from_array(np.asarray(a), chunks=-1))
    return Lib


@pytest.mark.parametrize("engine", ["grad", "vjp", "jacrev"])
@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_a_dask_constant_written_after_it_was_read(engine, f):
    lib = _dask_lib()
    expected = _numpy_gradient(f, W0)
    fun = lambda w: f(lib, w)  # noqa: E731
    if engine == "grad":
        got = wg.grad(fun)(W0.copy())
    elif engine == "vjp":
        value, pullback = wg.vjp(fun, W0.copy())
        np.testing.assert_allclose(np.asarray(value), f(np, W0.copy()), rtol=1e-12)
        got = pullback(1.0)[0]
    else:
        got = wg.jacrev(fun)(W0.copy())
    np.testing.assert_allclose(np.asarray(got, dtype=float), expected, rtol=1e-6, atol=1e-7)


def test_the_copy_computes_nothing():
    from wengert.engines import kept

    def boom(block):
        raise AssertionError("the copy computed the array")

    y = da.ones((4, 4), chunks=2).map_blocks(boom, dtype=float)
    c = kept._kept_value({}, y)
    assert isinstance(c, da.Array) and c is not y
