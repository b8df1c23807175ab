"""Products on the Numba backend: a gradient whose product codegen writes into a dying buffer
(``c = np.matmul(a, b, out=c)``; Numba has no ``np.matmul``) runs natively as ``c = a @ b``
(native_build._matmuls), with the Python backend's numbers. It fell back to Python with a warning."""

import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def cubed_product(a, b):
    return wnp.sum((a @ b) ** 3)


def cubed_ratio(a, b):  # the module binds np.matmul among other names, on one line
    p = ((a - wnp.max(a, axis=-1, keepdims=True)) @ (b / (1.0 + b * b))) ** 3
    return wnp.sum(wnp.sum(p, axis=1) * wnp.sum(p, axis=0))


@pytest.mark.parametrize("f", [cubed_product, cubed_ratio])
def test_the_gradient_of_a_product_into_a_dying_buffer_runs_natively(f, tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("WENGERT_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))  # square: the product fits a dying buffer
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        value = wg.compile(f, backend="numba")(a, b)
        got = wg.compile(f, backend="numba").grad()(a, b)
    np.testing.assert_allclose(value, wg.compile(f)(a, b), rtol=1e-13)
    want = wg.compile(f).grad()(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13)
    np.testing.assert_allclose(got, wg.grad(f)(a, b), rtol=1e-13)
