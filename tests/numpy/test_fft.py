"""wengert.numpy.fft: values against NumPy, NumPy's errors, and the VJPs of the real transforms
against their dense Jacobians built from NumPy alone (odd and even lengths).

Complex convention (HIPS autograd's and JAX's, ``wengert.rules.complex``): a cotangent pairs with a
tangent by ``Re(sum(u * t))``, so the VJP of a complex-linear map ``J`` is ``J^T u``."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
import wengert.numpy.fft as wfft
from wengert.rules import complex as cplx
from wengert.testing import check_grads

rng = np.random.default_rng(5)
X = rng.standard_normal((4, 6))
Z = X + 1j * rng.standard_normal((4, 6))

CALLS = [
    ("fft", dict()), ("fft", dict(n=9, axis=0, norm="ortho")), ("fft", dict(n=3)),
    ("ifft", dict(norm="forward")), ("ifft", dict(n=8, axis=-2)),
    ("fft2", dict()), ("fft2", dict(s=(3, 7))), ("ifft2", dict(norm="ortho")),
    ("fftn", dict(axes=(1,))), ("fftn", dict(s=(5, 2), axes=(0, 1))), ("ifftn", dict(s=(2, 2), axes=(1, 0))),
    ("rfft", dict()), ("rfft", dict(n=7)), ("rfft", dict(n=4, axis=0, norm="forward")),
    ("irfft", dict()), ("irfft", dict(n=11)), ("irfft", dict(n=4, axis=0, norm="ortho")),
    ("rfft2", dict()), ("rfft2", dict(s=(5, 5))), ("irfft2", dict()), ("irfft2", dict(s=(3, 7))),
    ("rfftn", dict(axes=(1, 0))), ("irfftn", dict(s=(4, 9), axes=(0, 1), norm="forward")),
    ("fftshift", dict()), ("fftshift", dict(axes=0)), ("ifftshift", dict(axes=(1,))),
]


@pytest.mark.parametrize("name,kwargs", CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CALLS)])
def test_values_match_numpy(name, kwargs):
    for a in (X, Z):
        if name.startswith("rfft") and a is Z:
            continue  # NumPy refuses complex input there (tested below)
        np.testing.assert_allclose(getattr(wfft, name)(a, **kwargs), getattr(np.fft, name)(a, **kwargs),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call", [
    lambda m: m.fft(X, norm="unitary"), lambda m: m.ifft(X, n=0), lambda m: m.fft(X, axis=2),
    lambda m: m.rfft(Z), lambda m: m.irfft(X, n=-1), lambda m: m.fftn(X, s=(0, 2), axes=(0, 1)),
    lambda m: m.irfftn(Z, axes=(0, 3)), lambda m: m.rfft2(X, norm="bad"), lambda m: m.fftshift(X, axes=3),
], ids=["norm", "n0", "axis", "rfft-complex", "irfft-n", "fftn-s", "irfftn-axes", "rfft2-norm", "shift-axis"])
def test_bad_arguments_raise_numpys_errors(call):
    with pytest.raises(Exception) as theirs:
        call(np.fft)
    with pytest.raises(type(theirs.value)) as ours:
        call(wfft)
    assert str(ours.value) == str(theirs.value)


def _basis(n):
    return np.eye(n)


@pytest.mark.parametrize("n,m", [(8, None), (7, None), (6, 9), (9, 4), (1, None), (2, None)])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_rfft_vjp_is_transpose_of_dense_jacobian(n, m, norm):
    jac = np.stack([np.fft.rfft(e, n=m, norm=norm) for e in _basis(n)], axis=1)  # complex (bins, n)
    g = rng.standard_normal(jac.shape[0]) + 1j * rng.standard_normal(jac.shape[0])
    _, back = wg.vjp(lambda x: wfft.rfft(x, n=m, norm=norm), rng.standard_normal(n))
    np.testing.assert_allclose(back(g)[0], np.real(jac.T @ g), atol=1e-12)  # real input: real part


@pytest.mark.parametrize("bins,n", [(5, None), (5, 9), (4, 6), (4, 7), (3, 10), (6, 3), (1, 1), (2, 2)])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_irfft_vjp_is_transpose_of_dense_jacobian(bins, n, norm):
    # irfft is real-linear in its complex input y: columns for Re(y) and Im(y); a cotangent c of y
    # pairs as Re(sum(c * dy)) = Re(c) . dRe(y) - Im(c) . dIm(y)
    j_re = np.stack([np.fft.irfft(e, n=n, norm=norm) for e in _basis(bins)], axis=1)
    j_im = np.stack([np.fft.irfft(1j * e, n=n, norm=norm) for e in _basis(bins)], axis=1)
    g = rng.standard_normal(j_re.shape[0])
    y = rng.standard_normal(bins) + 1j * rng.standard_normal(bins)
    _, back = wg.vjp(lambda v: wfft.irfft(v, n=n, norm=norm), y)
    np.testing.assert_allclose(back(g)[0], j_re.T @ g - 1j * (j_im.T @ g), atol=1e-12)


def _abs2(z):
    return cplx.real_of(z) ** 2 + cplx.real_of(z * -1j) ** 2


def test_parseval_gradient():
    # sum |fft(x)|^2 = n sum x^2, so the gradient is 2 n x (a real loss of complex intermediates)
    x = rng.standard_normal(7)
    g = wg.grad(lambda v: wnp.sum(_abs2(wfft.fft(v))))(x)
    np.testing.assert_allclose(g, 14 * x, rtol=1e-12)
    y = rng.standard_normal((3, 4))
    g = wg.grad(lambda v: wnp.sum(_abs2(wfft.fft2(v, norm="ortho"))))(y)
    np.testing.assert_allclose(g, 2 * y, rtol=1e-12)


def test_real_losses_of_complex_intermediates_match_finite_differences():
    w = rng.standard_normal(4)
    x = rng.standard_normal(6)
    check_grads(lambda v: wnp.sum(cplx.real_of(wfft.rfft(v)) * w), x)
    check_grads(lambda v: wnp.sum(cplx.real_of(wfft.ifft(wfft.fft(v) * np.arange(6.0))) ** 2), x)
    check_grads(lambda v: wnp.sum(wfft.irfft(wfft.fftshift(wfft.rfft(v, n=8)), n=5) ** 2), x)
    check_grads(lambda v: wnp.sum(_abs2(wfft.rfft(v)) * w), x)


def test_float32_stays_single_precision():
    x = rng.standard_normal(8).astype(np.float32)
    assert wfft.rfft(x).dtype == np.fft.rfft(x).dtype
    assert wg.grad(lambda v: wnp.sum(cplx.real_of(wfft.rfft(v))))(x).dtype == np.float32
