"""Complex numbers: the parts (``real``, ``imag``, ``conj``, the non-holomorphic primitives every complex
rule builds on) and the helpers the linear-algebra and FFT rules use.

Convention (HIPS autograd's and JAX's): cotangents are *not* conjugated. A cotangent ``u`` pairs with
a tangent ``t`` as ``Re(sum(u * t))``, so a holomorphic ``f`` has VJP ``g * f'(z)`` and JVP
``t * f'(z)``, the VJP of a complex-linear map ``A`` is ``A^T g``, and for a real-valued ``f`` of
``z = x + iy``, ``grad`` gives ``df/dx - i df/dy`` (the conjugate of the steepest-ascent direction).
Under that convention the VJP of ``real`` is ``g`` itself, that of ``imag`` is ``-1j * g`` and that
of ``conj`` is ``conj(g)``. Several rules are easier to derive with the adjoint ``A^H g`` (PyTorch's
convention); :func:`transposed` turns such a rule into this convention by ``g -> conj(rule(conj(g)))``.
A real input's cotangent is the real part of the complex one (:func:`real_like`). ``conj_of`` and
``real_of`` record nothing on real values. See docs/complex.md.
"""

import numpy as np

from wengert.core.extend import defbatch, defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.rules import broadcasting
from wengert.rules.broadcasting import astype as shape_ops_astype
from wengert.rules.broadcasting import real

__all__ = ["real", "imag", "conj", "conjugate", "is_complex", "conj_of", "real_of", "complex_from",
           "real_like", "transposed"]


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
facts(imag, saves=())  # its VJP reads x's dtype only (wengert.engines.saving)


def _conj_impl(x):
    """numpy.conjugate."""
    return np.conjugate(x)


conj = Primitive(_conj_impl, name="conjugate")
defvjp(conj, lambda g, out, x: conj(g))  # conjugation is real-linear: the same map on tangents
defjvp(conj, *conj.vjps)
facts(conj, saves=())
conjugate = conj



def _complex_from_impl(re, im):
    """``re + 1j * im`` for real ``re`` and ``im`` (``jax.lax.complex``)."""
    return re + 1j * (im if hasattr(type(im), "__array_function__") else np.asarray(im))  # Dask stays lazy


complex_from = Primitive(_complex_from_impl, name="complex_from", broadcasts=True)
defvjp(complex_from, lambda g, out, re, im: real_of(g), lambda g, out, re, im: real_of(g * 1j))
defjvp(complex_from, lambda t, out, re, im: t + 0j, lambda t, out, re, im: t * 1j)
facts(complex_from, saves=())


def _update_real(x, new):
    """``x`` with its real part (a view of ``x``; ``x`` itself when real) replaced by ``new``."""
    if not is_complex(x):
        return new
    return shape_ops_astype(complex_from(new, imag(x)), broadcasting.dtype_of(x))


def _update_imag(x, new):
    """``x`` with its imaginary part (a view of a complex ``x``) replaced by ``new``."""
    return shape_ops_astype(complex_from(real(x), new), broadcasting.dtype_of(x))


facts(real, updates_view=_update_real)
facts(imag, updates_view=_update_imag)


def conj_of(x):
    """numpy.conj; the identity (nothing recorded) on real values."""
    return conj(x) if is_complex(x) else x


def real_of(x):
    """numpy.real; the identity (nothing recorded) on real values."""
    return real(x) if is_complex(x) else x


def real_like(c, x):
    """Cotangent ``c`` for argument ``x``: its real part when ``x`` is real (see module docs)."""
    return real_of(c) if not is_complex(x) and is_complex(c) else c


def transposed(adjoint_rule):
    """A VJP rule derived with the adjoint (``A^H g``), in this module's convention (``A^T g``)."""
    def rule(g, out, *args, **kwargs):
        return conj_of(adjoint_rule(conj_of(g), out, *args, **kwargs))

    rule.__name__ = rule.__qualname__ = adjoint_rule.__name__
    rule.__doc__ = adjoint_rule.__doc__
    return rule

defbatch(imag, broadcasting.batch_unary)
defbatch(conj, broadcasting.batch_unary)
