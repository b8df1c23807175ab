"""The determinant and its relatives: ``det``, ``slogdet`` (sign and log|det|) and the adjugate.

``det``'s derivative is the adjugate, ``d det(A)[E] = tr(adj(A) E)``, which exists everywhere,
singular matrices included (``adj(A) = det(A) inv(A)`` only where ``A`` is invertible). So the
adjugate is a primitive, computed stably from the SVD ``A = U diag(s) Vh``::

    adj(A) = det(U) det(Vh) V diag(p) U^H,     p_i = prod_{j != i} s_j

and so is its derivative ``adjugate_jvp(A, E) = d adj(A)[E]``. With ``B = U^H E V``::

    d adj(A)[E] = det(U) det(Vh) V D U^H,      D = diag(P b) - P * B,   b = diag(B)

where ``P_ik = prod_{l not in {i, k}} s_l`` (zero diagonal): the derivative of the adjugate of a
diagonal matrix, written without dividing by any singular value. Both are exact at rank ``n - 1``
and ``n - 2``, so ``det``'s first and second derivatives are. The adjugate is a polynomial, and
its derivative is self-transposed in the sense ``<G, d adj(A)[E]> = <d adj(A^T)[G], E>``, which
gives both VJPs. The next order (``det``'s third derivative) is written with ``inv(A)`` and is
refused, with :class:`~wengert.rules.linalg.SingularDerivativeError`, at a singular matrix.

``slogdet`` at a singular matrix gives ``(0, -inf)`` as NumPy does; its derivatives there are
``adj(A) / 0``: infinities and NaNs, as JAX gives (no error).
"""

import numpy as np

from wengert.core.extend import defbatch, defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.core.trace import is_symbolic, unbox_all
from wengert.rules import matrix_helpers as mh
from wengert.rules import reductions
from wengert.rules.complex import conj_of, is_complex, real_like, real_of, transposed
from wengert.rules.linalg import SingularDerivativeError, inv, matmul, name_singular_errors
from wengert.rules.matrix_helpers import adjoint, mT

__all__ = ["det", "slogdet_sign", "slogdet_logabs", "adjugate", "adjugate_jvp"]


# -- the adjugate, from the SVD --------------------------------------------------------------------


def _prod_but_one(s):
    """``p_i = prod_{j != i} s_j`` along the last axis, without division (prefix times suffix)."""
    ones = np.ones_like(s[..., :1])
    left = np.cumprod(np.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, s[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    return left * right


def _prod_but_two(s):
    """``P_ik = prod_{l not in {i, k}} s_l`` (..., n, n), zero on the diagonal."""
    n = s.shape[-1]
    rows = np.broadcast_to(s[..., None, :], s.shape + (n,)).copy()
    eye = np.eye(n, dtype=bool)
    rows[..., eye] = 1
    pairs = _prod_but_one(rows)
    pairs[..., eye] = 0
    return pairs


def _svd_frame(a):
    """U^H, s, V and the phase det(U) det(Vh) of ``a = U diag(s) Vh`` (one LAPACK call, shared)."""
    u, s, vh = mh.svd_factors(np.asarray(a), False)
    c = np.linalg.det(u) * np.linalg.det(vh)
    return np.conj(np.swapaxes(u, -1, -2)), s, np.conj(np.swapaxes(vh, -1, -2)), c[..., None, None]


def _adjugate_impl(a):
    """The adjugate (classical adjoint) of ``a``: ``det(a) inv(a)`` where ``a`` is invertible."""
    uh, s, v, c = _svd_frame(a)
    return c * np.matmul(v * _prod_but_one(s)[..., None, :], uh)


def _adjugate_jvp_impl(a, e):
    """``d adj(a)[e]``, the derivative of the adjugate at ``a`` in direction ``e``."""
    uh, s, v, c = _svd_frame(a)
    b = np.matmul(np.matmul(uh, e), v)
    pairs = _prod_but_two(s).astype(b.dtype, copy=False)
    d = -pairs * b
    n = s.shape[-1]
    diag = np.einsum("...ik,...kk->...i", pairs, b)
    d[..., np.arange(n), np.arange(n)] = diag
    return c * np.matmul(np.matmul(v, d), uh)


def _require_invertible(a, order_what):
    """Refuse, naming ``det``, where the formula through ``inv(a)`` does not hold (a singular ``a``)."""
    if is_symbolic(a):
        return
    raw = np.asarray(unbox_all(a))
    s = np.linalg.svd(raw, compute_uv=False)
    eps = np.finfo(raw.dtype).eps
    if np.any(s[..., -1] <= raw.shape[-1] * eps * s[..., 0]):
        raise SingularDerivativeError(
            f"det: the {order_what} of det (a second derivative of the adjugate) at a singular "
            f"{raw.shape[-2]}x{raw.shape[-1]} matrix (shape {raw.shape}) is not implemented: first "
            f"and second derivatives of det are exact there, higher ones only at invertible matrices. "
            f"Differentiate at an invertible matrix, or at most twice.")


def _trace_of_product(m, e):
    """``tr(m e)`` per matrix, as a (..., 1, 1) scale."""
    return mh.scalar_to_matrix(reductions.sum(m * mT(e), axis=(-2, -1)))


def _adjugate_jvp_vjp_a(g, out, a, e):
    """The gradient of ``<g, d adj(a)[e]>`` in ``a`` (``det``'s third derivative; invertible ``a``)."""
    _require_invertible(a, "third derivative")
    x, adj = inv(a), adjugate(a)
    xt = mT(x)
    at = mT(a)
    first = _trace_of_product(mT(g), x) * adjugate_jvp(at, mT(e))
    second = _trace_of_product(adj, e) * matmul(matmul(xt, g), xt)
    third = adjugate_jvp(at, matmul(matmul(g, xt), mT(e)))
    fourth = matmul(matmul(matmul(matmul(xt, mT(e)), mT(adj)), g), xt)
    return first - second - third + fourth


def _adjugate_jvp_jvp_a(t, out, a, e):
    """``d/da d adj(a)[e]`` in direction ``t`` (``det``'s third derivative; invertible ``a``)."""
    _require_invertible(a, "third derivative")
    x, adj = inv(a), adjugate(a)
    dx = -matmul(matmul(x, t), x)
    lt = adjugate_jvp(a, t)
    return (_trace_of_product(lt, e) * x + _trace_of_product(adj, e) * dx
            - matmul(matmul(lt, e), x) - matmul(matmul(adj, e), dx))


adjugate = Primitive(_adjugate_impl, name="linalg.adjugate")
defvjp(adjugate, lambda g, out, a: adjugate_jvp(mT(a), g))
defjvp(adjugate, lambda t, out, a: adjugate_jvp(a, t))

adjugate_jvp = Primitive(_adjugate_jvp_impl, name="linalg.adjugate_jvp")
defvjp(adjugate_jvp, _adjugate_jvp_vjp_a, lambda g, out, a, e: adjugate_jvp(mT(a), g))
defjvp(adjugate_jvp, _adjugate_jvp_jvp_a, lambda t, out, a, e: adjugate_jvp(a, t))


# -- det --------------------------------------------------------------------------------------------


det = Primitive(lambda a: np.linalg.det(a), name="linalg.det")
defvjp(det, lambda g, out, a: real_like(mh.scalar_to_matrix(g) * mT(adjugate(a)), a))
defjvp(det, lambda t, out, a: reductions.sum(mT(adjugate(a)) * t, axis=(-2, -1)))


# -- slogdet ----------------------------------------------------------------------------------------


def _inverse(a, singular):
    """``inv(a)``; where ``a`` is exactly singular, ``adj(a) / det(a)``: the infinities and NaNs
    JAX gives for slogdet's derivatives there (``inv`` would raise)."""
    if is_symbolic(singular) or not np.any(np.asarray(unbox_all(singular))):
        return inv(a)
    with np.errstate(divide="ignore", invalid="ignore"):
        return adjugate(a) / mh.scalar_to_matrix(det(a))


def _logabs_singular(out):
    """Where the matrix is exactly singular (log|det| is -inf; data, read off the primal value)."""
    out = unbox_all(out)
    return out == -np.inf if not is_symbolic(out) else out


slogdet_logabs = Primitive(lambda a: np.linalg.slogdet(a)[1], name="linalg.slogdet_logabs")
defvjp(slogdet_logabs,
       lambda g, out, a: real_like(mh.scalar_to_matrix(g) * mT(_inverse(a, _logabs_singular(out))), a))
defjvp(slogdet_logabs, lambda t, out, a: real_of(mh.trace_of(matmul(_inverse(a, _logabs_singular(out)), t))))


def _sign_singular(out):
    out = unbox_all(out)
    return out == 0 if not is_symbolic(out) else out


def _sign_vjp(g, out, a):
    if not is_complex(a):
        return mh.zeros_like_matrix(a)  # the sign of a real determinant is piecewise constant
    c = real_of(g * conj_of(out) * -1j)  # Im(g * conj_of(sign))
    return mh.scalar_to_matrix(c * 1j) * adjoint(_inverse(a, _sign_singular(out)))


def _sign_jvp(t, out, a):
    if not is_complex(out):
        return mh.zeros_like_matrix(out)
    return out * (real_of(mh.trace_of(matmul(_inverse(a, _sign_singular(out)), t)) * -1j) * 1j)


slogdet_sign = Primitive(lambda a: np.linalg.slogdet(a)[0], name="linalg.slogdet_sign")
defvjp(slogdet_sign, transposed(_sign_vjp))
defjvp(slogdet_sign, _sign_jvp)

for _prim in (adjugate, adjugate_jvp, det, slogdet_logabs, slogdet_sign):
    name_singular_errors(_prim, "det" if _prim in (adjugate, adjugate_jvp, det) else "slogdet")
del _prim

# -- what each VJP reads (the tape keeps only that: wengert.engines.saving) ------------------------------
facts(adjugate, saves=(0,))
facts(adjugate_jvp, saves={0: (0, 1), 1: (0,)})
facts(det, saves=(0,))
facts(slogdet_logabs, saves=("out", 0))
facts(slogdet_sign, saves=("out", 0))  # a real matrix's rule reads neither, a complex one's both

for _stacked in (adjugate, adjugate_jvp, det, slogdet_logabs, slogdet_sign):
    defbatch(_stacked, mh.batch_stacked)
