"""Discrete Fourier transforms: complex-to-complex, real-to-complex and complex-to-real, and the
fftshift pair. Each transform is linear, so its JVP is itself and its VJP its transpose (complex
convention of ``wengert.rules.complex``: ``A^T g``, no conjugation).

The n-point DFT matrix is symmetric, so the VJP of ``fft``/``ifft`` is the same transform with the
same ``norm``. ``rfft`` keeps the first ``n//2 + 1`` bins: its VJP zero-pads the cotangent to ``n``
bins, transforms, and keeps the real part. ``irfft`` reads only the half spectrum (the imaginary
parts of bin 0 and, for even ``n``, bin ``n/2`` are ignored) and counts every other bin twice (for
its conjugate twin); its VJP is the conjugate of ``rfft`` with the dual norm (``backward`` <->
``forward``, ``ortho`` itself), times those weights ``[1, 2, ..., 2, 1 or 2]``. Resizing (NumPy's
``n``/``s``) is done outside, by slicing or padding."""

import numpy as np

from wengert.core.extend import defbatch, defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, shape
from wengert.rules import complex as cplx

__all__ = ["c2c", "r2c", "c2r", "fftshift", "ifftshift", "DUAL_NORM"]

DUAL_NORM = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _c2c_impl(x, axes, norm, forward):
    """numpy.fft.fftn (``forward``) or ifftn over ``axes``, no resizing."""
    return (np.fft.fftn if forward else np.fft.ifftn)(x, axes=axes, norm=norm)


def _c2c_vjp(g, out, x, axes, norm, forward):
    return cplx.real_like(c2c(g, axes, norm, forward), x)


c2c = Primitive(_c2c_impl, name="fft.c2c", grad_post=broadcasting.unbroadcast)  # fits the dtype
defvjp(c2c, _c2c_vjp)
defjvp(c2c, lambda t, out, x, axes, norm, forward: c2c(t, axes, norm, forward))
facts(c2c, linear=(0,), fresh=True)
facts(c2c, saves=())  # what its VJP reads: shapes only (wengert.engines.saving)


def _r2c_impl(x, axes, norm):
    """numpy.fft.rfftn over ``axes`` (real input; the last axis keeps n//2 + 1 bins)."""
    return np.fft.rfftn(x, axes=axes, norm=norm)


def pad_axis(x, axis, n):
    """``x`` zero-padded at the end of ``axis`` to length ``n``."""
    s = list(broadcasting.shape_of(x))
    extra = n - s[axis]
    if extra <= 0:
        return x
    s[axis] = extra
    return shape.concatenate(x, broadcasting.filled_like(x, s, broadcasting.dtype_of(x)), axis=axis)


def _r2c_vjp(g, out, x, axes, norm):
    n = broadcasting.shape_of(x)[axes[-1]]
    full = pad_axis(g, axes[-1], n)
    return cplx.real_of(c2c(full, axes, norm, True))


r2c = Primitive(_r2c_impl, name="fft.r2c", grad_post=broadcasting.unbroadcast)
defvjp(r2c, _r2c_vjp)
defjvp(r2c, lambda t, out, x, axes, norm: r2c(t, axes, norm))
facts(r2c, linear=(0,), fresh=True)
facts(r2c, saves=())


def _c2r_impl(y, n, axes, norm):
    """numpy.fft.irfftn over ``axes``: ``y`` holds n//2 + 1 bins on the last axis, ``n`` points out."""
    s = [y.shape[a] for a in axes[:-1]] + [n]
    return np.fft.irfftn(y, s=s, axes=axes, norm=norm)


def hermitian_weights(n, ndim, axis, dtype=np.float64):
    """How often each of the n//2 + 1 half-spectrum bins counts in an n-point real signal."""
    w = np.full(n // 2 + 1, 2.0, dtype=dtype)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    s = [1] * ndim
    s[axis] = n // 2 + 1
    return w.reshape(s)


def _c2r_vjp(g, out, y, n, axes, norm):
    ndim = len(broadcasting.shape_of(y))
    r = cplx.conj_of(r2c(g, axes, DUAL_NORM[norm]))
    r = r * hermitian_weights(n, ndim, axes[-1] % ndim, np.zeros((), broadcasting.dtype_of(r)).real.dtype)
    return cplx.real_like(r, y)


c2r = Primitive(_c2r_impl, name="fft.c2r", grad_post=broadcasting.unbroadcast)
defvjp(c2r, _c2r_vjp)
defjvp(c2r, lambda t, out, y, n, axes, norm: c2r(t, n, axes, norm))
facts(c2r, linear=(0,), fresh=True)
facts(c2r, saves=())


fftshift = Primitive(lambda x, axes: np.fft.fftshift(x, axes), name="fft.fftshift")
ifftshift = Primitive(lambda x, axes: np.fft.ifftshift(x, axes), name="fft.ifftshift")
defvjp(fftshift, lambda g, out, x, axes: ifftshift(g, axes))
defjvp(fftshift, lambda t, out, x, axes: fftshift(t, axes))
defvjp(ifftshift, lambda g, out, x, axes: fftshift(g, axes))
defjvp(ifftshift, lambda t, out, x, axes: ifftshift(t, axes))
facts(fftshift, saves=())  # what their VJPs read: nothing but g and the axes (wengert.engines.saving)
facts(ifftshift, saves=())

for _along in (c2c, r2c, fftshift, ifftshift):
    defbatch(_along, broadcasting.batch_axes_argument(1, "axes"))
defbatch(c2r, broadcasting.batch_axes_argument(2, "axes"))
