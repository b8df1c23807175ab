"""Complex helpers for the linalg and fft rules: ``conj`` and ``real`` as primitives, and ``adjoint``.

Rules follow the conjugate-linear convention that ``wengert.testing.check_grads`` checks: the
cotangent of a linear map ``A``'s input is ``A^H g`` (the conjugate transpose applied to the output's
cotangent), so that for a real loss ``L`` the cotangent of ``z`` is ``dL/dRe(z) + i dL/dIm(z)``
(PyTorch's ``.grad``; JAX's and HIPS autograd's ``grad`` return its conjugate, their VJPs being
``A^T g``: converting is ``g -> conj(vjp(conj(g)))``). A real input's cotangent is the
real part of that (:func:`real_like`). Both helpers are no-ops on real values (no node recorded).
"""

import numpy as np

from wengert.ops import broadcasting, shape
from wengert.primitive import Primitive, defjvp, defvjp

__all__ = ["conj", "real", "is_complex", "real_like", "adjoint", "mT"]


def is_complex(x):
    """Whether ``x`` (array, scalar or traced value) has a complex dtype."""
    return broadcasting.dtype_of(x).kind == "c"


conj_values = Primitive(np.conj, name="cplx.conj")
defvjp(conj_values, lambda g, out, x: conj_values(g))
defjvp(conj_values, lambda t, out, x: conj_values(t))


def _real_vjp(g, out, x):
    return g


real_part = Primitive(np.real, name="cplx.real")
defvjp(real_part, _real_vjp)
defjvp(real_part, lambda t, out, x: real_part(t))


def conj(x):
    """numpy.conj; the identity (nothing recorded) on real values."""
    return conj_values(x) if is_complex(x) else x


def real(x):
    """numpy.real; the identity (nothing recorded) on real values."""
    return real_part(x) if is_complex(x) else x


def real_like(c, x):
    """Cotangent ``c`` for argument ``x``: its real part when ``x`` is real (see module docs)."""
    return real(c) if not is_complex(x) and is_complex(c) else c


def mT(x):
    """Swap the last two axes."""
    n = len(broadcasting.shape_of(x))
    if type(x) is np.ndarray:
        return x.swapaxes(-1, -2)
    return shape.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def adjoint(x):
    """The conjugate transpose over the last two axes (``x^H``)."""
    return conj(mT(x))
