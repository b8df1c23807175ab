"""Complex parts: real, imag, conj -- the non-holomorphic primitives every complex rule builds on.

Convention (HIPS autograd's and JAX's): cotangents are *not* conjugated. A holomorphic ``f`` has
VJP ``g * f'(z)`` and JVP ``t * f'(z)``; for a real-valued ``f`` of ``z = x + iy``, ``grad`` gives
``df/dx - i df/dy`` (the conjugate of the steepest-ascent direction). Under that convention the
VJP of ``real`` is ``g`` itself, that of ``imag`` is ``-1j * g`` and that of ``conj`` is ``conj(g)``.
See docs/complex.md.
"""

import numpy as np

from wengert.core.extend import defjvp, defvjp
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting
from wengert.rules.broadcasting import real

__all__ = ["real", "imag", "conj", "conjugate", "is_complex"]


def is_complex(x):
    """Whether ``x`` (array, scalar or traced value) has a complex dtype."""
    return broadcasting.dtype_of(x).kind == "c"


def _imag_impl(x):
    """numpy.imag (zeros for a real input)."""
    return np.imag(x)


def _imag_vjp(g, out, x):
    if not is_complex(x):
        return g * 0.0  # imag of a real array is constant zero
    return g * (-1j)


def _imag_jvp(t, out, x):
    return imag(t)


imag = Primitive(_imag_impl, name="imag")
defvjp(imag, _imag_vjp)
defjvp(imag, _imag_jvp)


def _conj_impl(x):
    """numpy.conjugate."""
    return np.conjugate(x)


conj = Primitive(_conj_impl, name="conjugate")
defvjp(conj, lambda g, out, x: conj(g))
defjvp(conj, lambda t, out, x: conj(t))
conjugate = conj
