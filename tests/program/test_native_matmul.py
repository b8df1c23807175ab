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


def test_the_gradient_of_a_product_into_a_dying_buffer_runs_natively(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("WENGERT_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))  # square: the product fits a dying buffer
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        got = wg.compile(cubed_product, backend="numba").grad()(a, b)
    want = wg.compile(cubed_product).grad()(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13)
    np.testing.assert_allclose(got, wg.grad(cubed_product)(a, b), rtol=1e-13)
