"""SciPy linear algebra primitives: triangular solves, Cholesky, Sylvester, expm, sqrtm.

Rules are written with these primitives, ``products.matmul`` and ``shape``/``indexing`` ones, so
they differentiate again. Matrices are 2-D (``solve_triangular``'s right-hand side may be 1-D or
2-D); under ``vmap`` (SciPy 1.15 or later) ``expm``, ``cholesky_lower`` and ``solve_triangular``
also take stacks of matrices, right-hand sides as columns, and their rules work on stacks too.
Derivations, with ``X`` the result:

- ``solve_triangular``: X = op(A)^-1 B, so B_bar = op(A)^-T G and A_bar = -B_bar X^T (or its
  transpose when op is the transpose), restricted to the triangle that is read (the diagonal left
  out with ``unit_diagonal``).
- ``cholesky_lower`` reads the symmetric part (A + A^T)/2 (so every direction of A has a defined
  derivative, as in JAX): L_dot = L Phi(L^-1 S_dot L^-T), Phi = lower triangle with half diagonal.
- ``solve_sylvester`` (A X + X B = Q): X_dot = S(Q_dot - A_dot X - X B_dot), whose adjoint is a
  Sylvester solve with A^T, B^T.
- ``expm``: its Frechet derivative L(A, E) is the top-right block of expm([[A, E], [0, A]])
  (Mathias's formula), and the adjoint of L(A, .) is L(A^T, .).
- ``sqrtm``: X X = A gives X X_dot + X_dot X = A_dot, a Sylvester equation.
"""

import numpy as np
import scipy
import scipy.linalg as sla

from wengert.core.extend import defbatch, defjvp, defvjp, facts
from wengert.core.primitive import Primitive
from wengert.core.trace import is_symbolic, unbox_all
from wengert.rules import broadcasting, indexing, products, shape
from wengert.rules import matrix_helpers as mh
from wengert.rules.elementwise import add, multiply
from wengert.rules.linalg import SingularDerivativeError, name_singular_errors

__all__ = ["solve_triangular", "cholesky_lower", "solve_sylvester", "expm", "sqrtm", "frechet_expm"]


def _mT(x):
    """The transpose of a matrix, or of each matrix of a stack (a batch of ``vmap``)."""
    n = len(broadcasting.shape_of(x))
    return shape.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _sym(x):
    return multiply(add(x, _mT(x)), 0.5)


def _n(a):
    return broadcasting.shape_of(a)[-1]


# -- solve_triangular ------------------------------------------------------------------------------


def _solve_triangular_impl(a, b, trans=0, lower=False, unit_diagonal=False):
    """scipy.linalg.solve_triangular (``trans`` 0 or 1, real matrices)."""
    return sla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


def _real_dtype(like):
    dt = broadcasting.dtype_of(like)
    return dt if dt.kind == "f" else np.dtype(np.float64)


def _triangle(n, lower, unit_diagonal, like):
    """The 0/1 mask of the entries solve_triangular reads (in ``like``'s dtype)."""
    mask = np.tri(n, dtype=_real_dtype(like))
    mask = mask if lower else mask.T.copy()
    if unit_diagonal:
        np.fill_diagonal(mask, 0.0)
    return mask


def _outer(u, v):
    """u v^T for vectors, u @ v^T for matrices (the A-cotangent of a solve)."""
    if len(broadcasting.shape_of(u)) == 1:
        n, m = _n(u), _n(v)
        return shape.reshape(u, (n, 1)) * shape.reshape(v, (1, m))
    return products.matmul(u, _mT(v))


def _st_vjp_b(g, out, a, b, trans=0, lower=False, unit_diagonal=False):
    return solve_triangular(a, g, trans=1 - trans, lower=lower, unit_diagonal=unit_diagonal)


def _st_vjp_a(g, out, a, b, trans=0, lower=False, unit_diagonal=False):
    gb = solve_triangular(a, g, trans=1 - trans, lower=lower, unit_diagonal=unit_diagonal)
    ga = _outer(out, gb) if trans else _outer(gb, out)
    return -ga * _triangle(_n(a), lower, unit_diagonal, ga)


def _st_jvp_b(t, out, a, b, trans=0, lower=False, unit_diagonal=False):
    return solve_triangular(a, t, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


def _st_jvp_a(t, out, a, b, trans=0, lower=False, unit_diagonal=False):
    t = t * _triangle(_n(a), lower, unit_diagonal, t)
    rhs = -products.matmul(_mT(t) if trans else t, out)
    return solve_triangular(a, rhs, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


# Named apart from any NumPy-side triangular solve that wengert.numpy.linalg may define.
solve_triangular = Primitive(_solve_triangular_impl, name="scipy_solve_triangular")
defvjp(solve_triangular, _st_vjp_a, _st_vjp_b)
defjvp(solve_triangular, _st_jvp_a, _st_jvp_b)

# -- Cholesky --------------------------------------------------------------------------------------


def _cholesky_lower_impl(a):
    """The lower Cholesky factor of (a + a^T) / 2 (scipy.linalg.cholesky(..., lower=True))."""
    a = np.asarray(a)
    return sla.cholesky(0.5 * (a + np.swapaxes(a, -1, -2)), lower=True)  # a stack, under vmap


def _phi(x):
    """Lower triangle of x with its diagonal halved."""
    n = _n(x)
    dt = _real_dtype(x)
    return x * (np.tri(n, dtype=dt) - 0.5 * np.eye(n, dtype=dt))


def _cholesky_vjp(g, out, a):
    p = _phi(products.matmul(_mT(out), g))
    y = solve_triangular(out, p, trans=1, lower=True)            # L^-T P
    s = _mT(solve_triangular(out, _mT(y), trans=1, lower=True))  # L^-T P L^-1
    return _sym(s)


def _cholesky_jvp(t, out, a):
    z = solve_triangular(out, _sym(t), lower=True)               # L^-1 S_dot
    w = _mT(solve_triangular(out, _mT(z), lower=True))           # L^-1 S_dot L^-T
    return products.matmul(out, _phi(w))


cholesky_lower = Primitive(_cholesky_lower_impl, name="cholesky_lower")
defvjp(cholesky_lower, _cholesky_vjp)
defjvp(cholesky_lower, _cholesky_jvp)

# -- Sylvester equation ----------------------------------------------------------------------------


def _solve_sylvester_impl(a, b, q):
    """scipy.linalg.solve_sylvester: X with a X + X b = q."""
    return sla.solve_sylvester(a, b, q)


def _adjoint_solve(g, a, b):
    return solve_sylvester(_mT(a), _mT(b), g)


solve_sylvester = Primitive(_solve_sylvester_impl, name="solve_sylvester")
defvjp(solve_sylvester,
       lambda g, out, a, b, q: -products.matmul(_adjoint_solve(g, a, b), _mT(out)),
       lambda g, out, a, b, q: -products.matmul(_mT(out), _adjoint_solve(g, a, b)),
       lambda g, out, a, b, q: _adjoint_solve(g, a, b))
defjvp(solve_sylvester,
       lambda t, out, a, b, q: solve_sylvester(a, b, -products.matmul(t, out)),
       lambda t, out, a, b, q: solve_sylvester(a, b, -products.matmul(out, t)),
       lambda t, out, a, b, q: solve_sylvester(a, b, t))

# -- matrix exponential and square root ------------------------------------------------------------


def _expm_impl(a):
    """scipy.linalg.expm."""
    return sla.expm(a)


def frechet_expm(a, e):
    """The Frechet derivative of expm at ``a`` in direction ``e``: expm([[a, e], [0, a]])[:n, n:]."""
    n = _n(a)
    zero = np.zeros(tuple(broadcasting.shape_of(a)), dtype=broadcasting.dtype_of(a))  # (a stack's too)
    big = shape.concatenate(shape.concatenate(a, e, axis=-1), shape.concatenate(zero, a, axis=-1), axis=-2)
    return indexing.getitem(expm(big), (Ellipsis, slice(0, n), slice(n, 2 * n)))


expm = Primitive(_expm_impl, name="expm")
defvjp(expm, lambda g, out, a: frechet_expm(_mT(a), g))
defjvp(expm, lambda t, out, a: frechet_expm(a, t))


def _sqrtm_impl(a):
    """scipy.linalg.sqrtm (the principal square root)."""
    return sla.sqrtm(a)


def _check_sqrtm(out):
    """Refuse where ``X X_dot + X_dot X = A_dot`` has no unique solution: two eigenvalues of the
    square root X with ``l_i + l_j = 0`` (a zero eigenvalue of a singular A, where sqrt's slope is
    infinite); the Sylvester solve would return large meaningless numbers there."""
    if is_symbolic(out):
        return
    x = np.asarray(unbox_all(out))
    lam = np.linalg.eigvals(x)
    sums = np.abs(lam[:, None] + lam[None, :])
    scale = max(np.max(np.abs(lam), initial=0.0), np.max(np.abs(x), initial=0.0), np.finfo(float).tiny)
    if np.min(sums, initial=np.inf) <= 1e3 * np.finfo(x.dtype).eps * scale:
        raise SingularDerivativeError(
            f"sqrtm: the {x.shape[0]}x{x.shape[1]} matrix is singular (its square root has a zero "
            f"eigenvalue, or two that sum to zero), where the matrix square root has no derivative "
            f"(like sqrt at 0). Differentiate at a matrix away from it (e.g. add a small multiple "
            f"of the identity).")


def _sqrtm_vjp(g, out, a):
    _check_sqrtm(out)
    return solve_sylvester(_mT(out), _mT(out), g)


def _sqrtm_jvp(t, out, a):
    _check_sqrtm(out)
    return solve_sylvester(out, out, t)


sqrtm = Primitive(_sqrtm_impl, name="sqrtm")
defvjp(sqrtm, _sqrtm_vjp)
defjvp(sqrtm, _sqrtm_jvp)

_USER_NAMES = {solve_triangular: "scipy.linalg.solve_triangular", cholesky_lower: "scipy.linalg.cholesky",
               solve_sylvester: "scipy.linalg.solve_sylvester", expm: "scipy.linalg.expm",
               sqrtm: "scipy.linalg.sqrtm"}
for _prim, _what in _USER_NAMES.items():
    name_singular_errors(_prim, _what)
del _prim, _what

# -- what each VJP reads (the tape keeps only that: wengert.engines.saving) ------------------------------
facts(solve_triangular, saves={0: ("out", 0), 1: (0,)})
facts(cholesky_lower, saves=("out",))
facts(solve_sylvester, saves={0: ("out", 0, 1), 1: ("out", 0, 1), 2: (0, 1)})
facts(expm, saves=(0,))
facts(sqrtm, saves=("out",))


# -- batching rules (wengert.engines.batching) -------------------------------------------------------

SCIPY_BATCHES = tuple(int(p) for p in scipy.__version__.split(".")[:2]) >= (1, 15)
"""SciPy 1.15 made ``solve_triangular`` and ``cholesky`` take stacks of matrices (``expm`` took them
from 1.9); before it, those primitives run once per example under ``vmap``."""


def _batch_stacks(prim, values, batched, kwargs):
    """The batch as one more stack axis of the matrices (examples are single matrices here)."""
    if any(len(broadcasting.shape_of(v)) - b > 2 for v, b in zip(values, batched) if not isinstance(v, bool)):
        return NotImplemented
    return mh.batch_stacked(prim, values, batched, kwargs)


def _batch_solve_triangular(prim, values, batched, kwargs):
    """A stack of triangular solves; a right-hand side vector is made a column first (SciPy reads a
    stacked ``b`` as matrices) and the column's axis dropped from the result."""
    if not SCIPY_BATCHES:
        return NotImplemented
    b = values[1]
    dims = tuple(broadcasting.shape_of(b))
    if len(dims) - batched[1] != 1:
        return _batch_stacks(prim, values, batched, kwargs)
    out = _batch_stacks(prim, [values[0], shape.reshape(b, dims + (1,)), *values[2:]], batched, kwargs)
    return out if out is NotImplemented else shape.reshape(out, tuple(broadcasting.shape_of(out))[:-1])


def _batch_cholesky(prim, values, batched, kwargs):
    return _batch_stacks(prim, values, batched, kwargs) if SCIPY_BATCHES else NotImplemented


defbatch(expm, _batch_stacks)
defbatch(solve_triangular, _batch_solve_triangular)
defbatch(cholesky_lower, _batch_cholesky)
