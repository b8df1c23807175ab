"""Complex helpers for the linalg and fft rules: ``conj`` and ``real`` (``wengert.rules.complex``'s
primitives, recording nothing on real values), ``complex_from``, ``adjoint``, and :func:`transposed`,
which states the rules' complex convention.

Complex derivatives follow HIPS autograd's and JAX's convention: a cotangent ``u`` pairs with a
tangent ``t`` as ``Re(sum(u * t))`` (no conjugation), so the VJP of a complex-linear map ``A`` is
``A^T g`` and ``grad`` of a real ``L`` of ``z`` is ``dL/dRe(z) - i dL/dIm(z)``. Several rules are
easier to derive with the adjoint ``A^H g`` (PyTorch's convention); :func:`transposed` turns such
a rule into this convention by ``g -> conj(rule(conj(g)))``. A real input's cotangent is the real
part of the complex one (:func:`real_like`). ``conj`` and ``real`` record nothing on real values.
"""

import numpy as np

from wengert.core.extend import defjvp, defvjp
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting, shape
from wengert.rules.complex import conj as conj_values
from wengert.rules.complex import real as real_part

__all__ = ["conj", "real", "complex_from", "is_complex", "real_like", "adjoint", "mT", "transposed"]


def is_complex(x):
    """Whether ``x`` (array, scalar or traced value) has a complex dtype."""
    return broadcasting.dtype_of(x).kind == "c"


def _complex_from_impl(re, im):
    """``re + 1j * im`` for real ``re`` and ``im`` (``jax.lax.complex``)."""
    return re + 1j * np.asarray(im)


complex_from = Primitive(_complex_from_impl, name="cplx.complex_from", grad_post=broadcasting.unbroadcast,
                         tangent_post=broadcasting.broadcast_tangent)
defvjp(complex_from, lambda g, out, re, im: real(g), lambda g, out, re, im: real(g * 1j))
defjvp(complex_from, lambda t, out, re, im: t + 0j, lambda t, out, re, im: t * 1j)


def conj(x):
    """numpy.conj; the identity (nothing recorded) on real values."""
    return conj_values(x) if is_complex(x) else x


def real(x):
    """numpy.real; the identity (nothing recorded) on real values."""
    return real_part(x) if is_complex(x) else x


def real_like(c, x):
    """Cotangent ``c`` for argument ``x``: its real part when ``x`` is real (see module docs)."""
    return real(c) if not is_complex(x) and is_complex(c) else c


def transposed(adjoint_rule):
    """A VJP rule derived with the adjoint (``A^H g``), in this module's convention (``A^T g``)."""
    def rule(g, out, *args, **kwargs):
        return conj(adjoint_rule(conj(g), out, *args, **kwargs))

    rule.__name__ = rule.__qualname__ = adjoint_rule.__name__
    rule.__doc__ = adjoint_rule.__doc__
    return rule


def mT(x):
    """Swap the last two axes."""
    n = len(broadcasting.shape_of(x))
    if type(x) is np.ndarray:
        return x.swapaxes(-1, -2)
    return shape.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def adjoint(x):
    """The conjugate transpose over the last two axes (``x^H``)."""
    return conj(mT(x))
