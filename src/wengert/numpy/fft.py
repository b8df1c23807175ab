"""wengert.numpy.fft: NumPy's discrete Fourier transforms, differentiable (``numpy.fft``).

Same signatures as NumPy (``n``/``s`` resize by cropping or zero-padding, ``axis``/``axes``,
``norm``). Arguments are checked by NumPy itself on a one-element array first, so a bad ``norm``,
``n`` or ``axis`` raises NumPy's own error. Complex inputs and outputs follow the
convention of ``wengert.rules.complex`` (cotangent ``A^H g``); a real input gets a real gradient.
"""

from typing import Any

import numpy as np

from wengert.core.trace import BOX_TYPES
from wengert.numpy import _classification as _table
from wengert.rules import broadcasting, indexing
from wengert.rules import fft as ops

DIFFERENTIABLE = _table.names("numpy.fft", _table.DIFFERENTIABLE)  # the classification's
NOT_DIFFERENTIABLE = _table.names("numpy.fft", _table.INTEGER, _table.ZERO)
__all__ = DIFFERENTIABLE + NOT_DIFFERENTIABLE


def __getattr__(name):
    raise _table.missing_attribute("numpy.fft", name)  # unsupported names: the table says what to do

fftfreq = np.fft.fftfreq  # NumPy's own: differentiable in the sample spacing d (its arithmetic on d is ours)
rfftfreq = np.fft.rfftfreq


def _array(a):
    return a if type(a) in BOX_TYPES or isinstance(a, np.ndarray) else np.asarray(a)


def _check(np_fun, a, dtype=complex, **kwargs):
    """Let NumPy validate the arguments on a tiny array of ``a``'s rank (its errors, its words);
    valid sizes in ``n``/``s`` are replaced by 1 so that the check stays cheap."""
    if kwargs.get("n") is not None:
        kwargs["n"] = _cheap([kwargs["n"]])[0]
    if kwargs.get("s") is not None:
        kwargs["s"] = _cheap(kwargs["s"])
    np_fun(np.zeros((2,) * len(broadcasting.shape_of(a)), dtype=dtype), **kwargs)


def _cheap(sizes):
    return [n if isinstance(n, (int, np.integer)) and n < 1 else 1 for n in sizes]


def _resize(x, axis, n):
    """Crop or zero-pad ``x`` along ``axis`` to length ``n`` (NumPy's ``n`` and ``s``)."""
    have = broadcasting.shape_of(x)[axis]
    if n < have:
        index = [slice(None)] * len(broadcasting.shape_of(x))
        index[axis] = slice(0, n)
        return indexing.getitem(x, tuple(index))
    return ops.pad_axis(x, axis, n)


def _axes_and_sizes(a, s, axes):
    """NumPy's defaults: all axes (or the last len(s)), sizes from the input; axes made >= 0."""
    ndim = len(broadcasting.shape_of(a))
    if axes is None:
        axes = tuple(range(ndim)) if s is None else tuple(range(ndim - len(s), ndim))
    axes = tuple(int(ax) % ndim for ax in axes)
    if s is None:
        s = [broadcasting.shape_of(a)[ax] for ax in axes]
    return axes, list(s)


def _complex_n(a, s, axes, norm, forward):
    axes, s = _axes_and_sizes(a, s, axes)
    for ax, n in zip(axes, s):
        a = _resize(a, ax, n)
    return ops.c2c(a, axes, norm, forward)


def fft(a, n=None, axis=-1, norm=None) -> Any:
    """numpy.fft.fft."""
    a = _array(a)
    _check(np.fft.fft, a, n=n, axis=axis, norm=norm)
    return _complex_n(a, None if n is None else [n], (axis,), norm, True)


def ifft(a, n=None, axis=-1, norm=None) -> Any:
    """numpy.fft.ifft."""
    a = _array(a)
    _check(np.fft.ifft, a, n=n, axis=axis, norm=norm)
    return _complex_n(a, None if n is None else [n], (axis,), norm, False)


def fftn(a, s=None, axes=None, norm=None) -> Any:
    """numpy.fft.fftn."""
    a = _array(a)
    _check(np.fft.fftn, a, s=s, axes=axes, norm=norm)
    return _complex_n(a, s, axes, norm, True)


def ifftn(a, s=None, axes=None, norm=None) -> Any:
    """numpy.fft.ifftn."""
    a = _array(a)
    _check(np.fft.ifftn, a, s=s, axes=axes, norm=norm)
    return _complex_n(a, s, axes, norm, False)


def fft2(a, s=None, axes=(-2, -1), norm=None) -> Any:
    """numpy.fft.fft2."""
    a = _array(a)
    _check(np.fft.fft2, a, s=s, axes=axes, norm=norm)
    return _complex_n(a, s, axes, norm, True)


def ifft2(a, s=None, axes=(-2, -1), norm=None) -> Any:
    """numpy.fft.ifft2."""
    a = _array(a)
    _check(np.fft.ifft2, a, s=s, axes=axes, norm=norm)
    return _complex_n(a, s, axes, norm, False)


def rfftn(a, s=None, axes=None, norm=None) -> Any:
    """numpy.fft.rfftn (real input only, as in NumPy)."""
    a = _array(a)
    _check(np.fft.rfftn, a, s=s, dtype=broadcasting.dtype_of(a), axes=axes, norm=norm)
    return _real_n(a, s, axes, norm)


def _real_n(a, s, axes, norm):
    axes, s = _axes_and_sizes(a, s, axes)
    for ax, n in zip(axes, s):
        a = _resize(a, ax, n)
    return ops.r2c(a, axes, norm)


def irfftn(a, s=None, axes=None, norm=None) -> Any:
    """numpy.fft.irfftn (reads the half spectrum, as NumPy does)."""
    a = _array(a)
    _check(np.fft.irfftn, a, s=s, axes=axes, norm=norm)
    return _inverse_real_n(a, s, axes, norm)


def _inverse_real_n(a, s, axes, norm):
    axes, sizes = _axes_and_sizes(a, s, axes)
    if s is None:
        sizes[-1] = 2 * (sizes[-1] - 1)
    if sizes[-1] < 1:
        raise ValueError(f"Invalid number of data points ({sizes[-1]}) specified")
    for ax, n in zip(axes[:-1], sizes[:-1]):
        a = _resize(a, ax, n)
    a = _resize(a, axes[-1], sizes[-1] // 2 + 1)
    return ops.c2r(a, sizes[-1], axes, norm)


def rfft(a, n=None, axis=-1, norm=None) -> Any:
    """numpy.fft.rfft (real input only, as in NumPy)."""
    a = _array(a)
    _check(np.fft.rfft, a, dtype=broadcasting.dtype_of(a), n=n, axis=axis, norm=norm)
    return _real_n(a, None if n is None else [n], (axis,), norm)


def irfft(a, n=None, axis=-1, norm=None) -> Any:
    """numpy.fft.irfft."""
    a = _array(a)
    _check(np.fft.irfft, a, n=n, axis=axis, norm=norm)
    return _inverse_real_n(a, None if n is None else [n], (axis,), norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None) -> Any:
    """numpy.fft.rfft2."""
    return rfftn(a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None) -> Any:
    """numpy.fft.irfft2."""
    return irfftn(a, s, axes, norm)


def _shift(prim, x, axes):
    x = _array(x)
    ndim = len(broadcasting.shape_of(x))
    if axes is None:
        axes = tuple(range(ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    np.fft.fftshift(np.zeros((1,) * ndim), axes)  # NumPy's error for a bad axis
    return prim(x, tuple(axes))


def fftshift(x, axes=None) -> Any:
    """numpy.fft.fftshift."""
    return _shift(ops.fftshift, x, axes)


def ifftshift(x, axes=None) -> Any:
    """numpy.fft.ifftshift."""
    return _shift(ops.ifftshift, x, axes)
