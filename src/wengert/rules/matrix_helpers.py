"""Matrix helpers for the linear-algebra rules, written with wengert's own functions so that the rules
built on them differentiate again: identity and triangle masks in the argument's dtype, diagonals,
row and column views, eigen- and singular-value gaps, the errors a rule raises where a derivative is
undefined, and one LAPACK call per decomposition (a memo shared by a decomposition's primitives).
"""

import hashlib
import weakref

import numpy as np

from wengert.core.trace import is_symbolic, unbox_all
from wengert.rules import broadcasting, products, reductions, shape
from wengert.rules.complex import conj_of, is_complex, real_of

matmul = products.matmul
_shape = broadcasting.shape_of


# -- helpers (wengert functions only, so that the rules differentiate again) -------------------------


class UndefinedDerivativeError(ValueError):
    """Eigen- or singular vectors were differentiated where they have no derivative."""


class SingularDerivativeError(np.linalg.LinAlgError):
    """A linear-algebra derivative does not exist, or is not unique, at this (singular or
    defective) matrix; the message names the NumPy function, the shape, and what to do instead."""


_ADVICE = ("Differentiate at a matrix away from it (e.g. add a small multiple of the identity), "
           "or reformulate with a function whose derivative exists there")


def mT(x):
    """Swap the last two axes."""
    n = len(broadcasting.shape_of(x))
    if type(x) is np.ndarray:
        return x.swapaxes(-1, -2)
    return shape.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def adjoint(x):
    """The conjugate transpose over the last two axes (``x^H``)."""
    return conj_of(mT(x))


def name_singular_errors(prim, what):
    """Wrap ``prim``'s rules so that a ``LinAlgError`` raised while differentiating names the
    user's function ``what`` (``numpy.linalg.<what>``) and the matrix's shape, not an inner solve;
    and fit each gradient to its argument's dtype."""
    def wrap(rule):
        if rule is None or getattr(rule, "names_singular_errors", False):
            return rule

        def named(c, out, *args, **kwargs):
            try:
                return rule(c, out, *args, **kwargs)
            except SingularDerivativeError:
                raise
            except np.linalg.LinAlgError as e:
                shapes = " and ".join(str(_shape(a)) for a in args if _shape(a))
                raise SingularDerivativeError(
                    f"{what}: its derivative at this input (shape {shapes}) needs a matrix that is "
                    f"singular ({e}), so it does not exist or is not unique there. {_ADVICE}.") from e

        named.__name__ = getattr(rule, "__name__", "rule")
        named.names_singular_errors = True
        return named

    prim.vjps = tuple(wrap(r) for r in prim.vjps)
    prim.jvps = tuple(wrap(r) for r in prim.jvps)
    if prim.grad_post is None:  # a gradient has its argument's dtype (float32 stays float32)
        prim.grad_post = broadcasting.unbroadcast
    return prim


def nan_if_undefined(jvp_rule):
    """Forward mode computes every result's tangent, used or not: where the vectors have no
    derivative their tangent is NaN (an error only in reverse mode, where it is asked for)."""
    def rule(t, out, *args, **kwargs):
        try:
            return jvp_rule(t, out, *args, **kwargs)
        except UndefinedDerivativeError:
            return broadcasting.filled_like(out, _shape(out), broadcasting.dtype_of(out), np.nan)

    rule.__name__ = jvp_rule.__name__
    return rule


def size_of(x):
    return _shape(x)[-1]


_REAL = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


def real_dtype(like):
    """The real dtype of ``like`` (float32 for float32 and complex64): constants a rule mixes in
    have it, so that single precision stays single."""
    dt = broadcasting.dtype_of(like)
    if dt.kind == "f":
        return dt
    return _REAL.get(dt, np.dtype(np.float64))


def identity_like(n, like):
    return np.eye(n, dtype=real_dtype(like))


def tril(n, k, like):
    """The 0/1 lower-triangle mask (below diagonal ``k``) in ``like``'s real dtype."""
    return np.tri(n, n, k, dtype=real_dtype(like))


def col(v):
    """(..., n) -> (..., n, 1)."""
    return shape.reshape(v, _shape(v) + (1,))


def row(v):
    """(..., n) -> (..., 1, n)."""
    s = _shape(v)
    return shape.reshape(v, s[:-1] + (1, s[-1]))


def scalar_to_matrix(c):
    """(...) -> (..., 1, 1), to scale stacked matrices."""
    return shape.reshape(c, _shape(c) + (1, 1))


def diag_embed(v):
    """(..., n) -> (..., n, n) with ``v`` on the diagonal."""
    return col(v) * identity_like(size_of(v), v)


def diag_part(x):
    """(..., n, n) -> (..., n), the diagonal."""
    return reductions.sum(x * identity_like(size_of(x), x), axis=-1)


def trace_of(x):
    return reductions.sum(diag_part(x), axis=-1)


def zeros_like_matrix(x):
    return broadcasting.filled_like(x, _shape(x), broadcasting.dtype_of(x))


def imag_diag(x):
    """``i * Im(diag(x))`` as a diagonal matrix (zero, and nothing recorded, for real ``x``)."""
    if not is_complex(x):
        return 0.0
    return diag_embed(real_of(diag_part(x) * -1j) * 1j)


def triangle_mask(n, uplo, like):
    """The strictly lower (``L``) or upper (``U``) triangle plus half the diagonal."""
    m = tril(n, -1, like)
    m = m if uplo == "L" else m.T.copy()
    return m + 0.5 * identity_like(n, like)


def hermitian_from(t, uplo):
    """The Hermitian matrix a function reading only triangle ``uplo`` of its input sees in ``t``."""
    p = t * triangle_mask(size_of(t), uplo, t)
    return p + adjoint(p)


def to_triangle(g, uplo):
    """Adjoint of :func:`hermitian_from`: a cotangent for the Hermitian matrix, on ``uplo`` only."""
    return (g + adjoint(g)) * triangle_mask(size_of(g), uplo, g)


def gaps(w, what, gap_of):
    """``1 / (w_j - w_i)`` off the diagonal, 0 on it; raise if two values coincide."""
    d = row(w) - col(w) if gap_of is None else gap_of(w)
    n = np.shape(d)[-1]
    if is_symbolic((w, d)):  # a traced program cannot check its data: repeated values give inf there
        eye = identity_like(n, d)
        return (1.0 - eye) / (d + eye)
    raw = np.asarray(unbox_all(d))
    off = ~np.eye(n, dtype=bool)
    scale = max(np.max(np.abs(unbox_all(w)), initial=0.0), np.max(np.abs(raw), initial=0.0), 1e-300)
    if n > 1 and np.min(np.abs(raw[..., off])) <= 1e3 * np.finfo(float).eps * scale:
        kind = "singular " if gap_of is not None else "eigen"
        raise UndefinedDerivativeError(
            f"{what}: the derivative of the {kind}vectors is undefined where {kind}values repeat "
            f"(here two coincide to rounding). Differentiate the values instead, or a function that "
            f"does not depend on the choice of vectors within the repeated subspace.")
    eye = identity_like(n, d)
    return (1.0 - eye) / (d + eye)


# -- one LAPACK call per decomposition -------------------------------------------------------------

_LAST = {}
"""kind -> (weak reference to the array, fingerprint, result): the last decomposition of each kind."""


def factorised(kind, a, compute):
    """``compute(a)``, remembered for the very same array with the very same contents.

    A decomposition's several primitives (U, s and Vh; values and vectors) and then their rules
    ask for it again and again; the memo makes that one LAPACK call. The fingerprint (shape,
    dtype, a hash of the bytes) makes an array changed in place a different key; the results are
    read-only (they are shared), and an entry goes when its array does."""
    if type(a) is not np.ndarray or a.ndim < 2:
        return compute(a)
    digest = hashlib.blake2b(np.ascontiguousarray(a).view(np.uint8), digest_size=16).digest()
    fingerprint = (a.shape, a.dtype.str, digest)
    entry = _LAST.get(kind)
    if entry is not None and entry[0]() is a and entry[1] == fingerprint:
        return entry[2]
    result = tuple(compute(a))
    for r in result:
        r.flags.writeable = False

    def forget(ref, kind=kind):
        if _LAST.get(kind, (None,))[0] is ref:
            _LAST.pop(kind, None)  # another thread may have replaced or dropped it meanwhile

    _LAST[kind] = (weakref.ref(a, forget), fingerprint, result)
    return result


def svd_factors(a, full_matrices):
    return factorised(("svd", bool(full_matrices)), a, lambda x: np.linalg.svd(x, bool(full_matrices)))


def eigh_factors(a, UPLO):
    return factorised(("eigh", UPLO), a, lambda x: np.linalg.eigh(x, UPLO))


def eig_factors(a):
    return factorised("eig", a, np.linalg.eig)


def qr_factors(a, mode):
    return factorised(("qr", mode), a, lambda x: np.linalg.qr(x, mode))


def batch_stacked(prim, values, batched, kwargs):
    """Batching rule of a linear-algebra primitive on stacks of matrices (``(..., m, n)``, as NumPy's
    ``linalg`` takes them, stack axes broadcasting between arguments): the batch is one more stack
    axis, in front. A batched argument with fewer stack axes than another argument gets size-1 axes
    after its batch axis, so that the batch meets the batch (or an unbatched argument's broadcasting)
    and never a stack axis. Every array argument must be a matrix or a stack of them (a vector, with
    its own broadcasting, takes the loop)."""
    stacks = []
    for v, b in zip(values, batched):
        if isinstance(v, (str, type(None), bool)) or (not b and _shape(v) == ()):
            stacks.append(None)  # an option (UPLO, mode, rcond)
            continue
        n = len(_shape(v)) - b
        if n < 2:
            return NotImplemented
        stacks.append(n - 2)
    most = max((s for s in stacks if s is not None), default=0)
    values = list(values)
    for i, (v, b, s) in enumerate(zip(values, batched, stacks)):
        if b and s is not None and s < most:
            dims = tuple(_shape(v))
            values[i] = shape.reshape(v, dims[:1] + (1,) * (most - s) + dims[1:])
    return prim(*values, **kwargs)
