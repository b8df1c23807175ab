"""More of NumPy's elementwise functions: complex parts (``real``, ``imag``, ``conj``, ``angle``),
``logaddexp``/``logaddexp2``/``sinc`` (rules in ``wengert/rules/elementwise.py``), ``round``/``fix``
(derivative zero), unit conversions, and the NaN-aware ``fmax``/``fmin``/``nan_to_num``.

The complex convention (HIPS autograd's and JAX's) is explained in docs/complex.md.
"""

import math
from typing import Any

import numpy as np

from wengert.core.extend import defbatch, nondiff_primitive
from wengert.core.trace import BOX_TYPES, is_symbolic, unbox_all
from wengert.numpy import _functions as F
from wengert.numpy._layout import numpy_view
from wengert.rules import broadcasting, elementwise
from wengert.rules import complex as complex_parts
from wengert.rules import shape as shape_ops

_E = elementwise


def real(val) -> Any:
    """numpy.real: a view of a complex ``val``; a real ``val`` itself, as NumPy's."""
    if type(val) in BOX_TYPES and broadcasting.dtype_of(val).kind != "c":
        return val
    return complex_parts.real(val)


def imag(val) -> Any:
    """numpy.imag: a view of a complex ``val``; of a real one, zeros that are read-only, as NumPy's."""
    out = complex_parts.imag(val)
    if broadcasting.dtype_of(val).kind != "c":
        return numpy_view(out, val, complex_parts.imag, "imag", readonly=True)
    return out


def conjugate(x) -> Any:
    """numpy.conjugate (numpy.conj)."""
    return complex_parts.conj(x)


conj = conjugate


def angle(z, deg=False) -> Any:
    """numpy.angle (composed: arctan2(imag, real); its derivative is undefined at 0)."""
    a = _E.arctan2(complex_parts.imag(z), complex_parts.real(z))
    return a * (180.0 / math.pi) if deg else a


def deg2rad(x) -> Any:
    """numpy.deg2rad (numpy.radians)."""
    return x * (math.pi / 180.0)


def rad2deg(x) -> Any:
    """numpy.rad2deg (numpy.degrees)."""
    return x * (180.0 / math.pi)


radians = deg2rad
degrees = rad2deg


def round(a, decimals=0, out=None) -> Any:  # noqa: A001 - NumPy's name
    """numpy.round (numpy.around): derivative zero, as floor/ceil/rint."""
    F._no_out("round", out)
    return elementwise.round_(a, decimals)


around = round


def fix(x, out=None) -> Any:
    """numpy.fix (round towards zero): derivative zero."""
    F._no_out("fix", out)
    return _E.trunc(x)


def logaddexp(x1, x2) -> Any:
    """numpy.logaddexp: log(exp(x1) + exp(x2)), with its own stable rule."""
    return elementwise.logaddexp(x1, x2)


def logaddexp2(x1, x2) -> Any:
    """numpy.logaddexp2: log2(2**x1 + 2**x2)."""
    return elementwise.logaddexp2(x1, x2)


def sinc(x) -> Any:
    """numpy.sinc: sin(pi x) / (pi x), 1 at 0."""
    return elementwise.sinc(x)


def fmax(x1, x2) -> Any:
    """numpy.fmax: maximum that ignores NaN (the gradient goes to the value chosen; ties split)."""
    n1, n2 = np.isnan(unbox_all(x1)), np.isnan(unbox_all(x2))
    return _E.maximum(_E.where(n1, x2, x1), _E.where(n2, x1, x2))


def fmin(x1, x2) -> Any:
    """numpy.fmin: minimum that ignores NaN."""
    n1, n2 = np.isnan(unbox_all(x1)), np.isnan(unbox_all(x2))
    return _E.minimum(_E.where(n1, x2, x1), _E.where(n2, x1, x2))


def fabs(x) -> Any:
    """numpy.fabs (real inputs)."""
    return _E.absolute(x)


def float_power(x1, x2) -> Any:
    """numpy.float_power: power computed in float64 (complex128 for complex inputs)."""
    def up(v):
        if type(v) is float:
            return v
        return shape_ops.astype(v, np.complex128 if complex_parts.is_complex(v) else np.float64)
    return _E.power(up(x1), up(x2))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None) -> Any:
    """numpy.nan_to_num: replaced entries get derivative zero."""
    v = unbox_all(x)
    v = v if is_symbolic(v) else np.asarray(v)  # a program's symbol: the masks below are recorded
    if v.dtype.kind not in "fc":
        return x
    if v.dtype.kind == "c":
        re = nan_to_num(complex_parts.real(x), nan=nan, posinf=posinf, neginf=neginf)
        im = nan_to_num(complex_parts.imag(x), nan=nan, posinf=posinf, neginf=neginf)
        return re + 1j * im
    info = np.finfo(v.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = _E.where(np.isnan(v), nan, x)
    out = _E.where(np.isposinf(v), hi, out)
    return _E.where(np.isneginf(v), lo, out)


# -- results without a derivative -----------------------------------------------------------------

iscomplex = nondiff_primitive(np.iscomplex)
isreal = nondiff_primitive(np.isreal)
iscomplexobj = nondiff_primitive(np.iscomplexobj)
isrealobj = nondiff_primitive(np.isrealobj)
isposinf = nondiff_primitive(np.isposinf)
isneginf = nondiff_primitive(np.isneginf)
defbatch(isposinf, broadcasting.batch_unary)
defbatch(isneginf, broadcasting.batch_unary)
