"""Systematic-test cases for the linalg family (``wengert.rules.linalg``, ``wengert.rules.complex``) and
the composed functions of ``wengert.numpy.linalg``.

Inputs are well conditioned (``n I`` plus a small random part), with distinct eigen- and singular
values where vectors are differentiated; stacked matrices are included. ``eigh`` and ``cholesky``
are checked on symmetrised inputs (``x + x^T``) and on raw inputs (they read one triangle). Complex
inputs whose second derivative runs through complex matrix products are in ``tests/numpy/test_linalg.py``
(first order) until the core's products conjugate their rules."""

import numpy as np

import wengert.numpy.linalg as wla
from tests.support.rule_helpers import R
from wengert.rules import broadcasting
from wengert.rules import complex as cplx
from wengert.rules import determinant as dt
from wengert.rules import linalg as la
from wengert.rules import matrix_helpers as mh


def W(*shape):
    """Well-conditioned square matrices: n/2 I plus a small random part."""
    return np.eye(shape[-1]) * shape[-1] * 0.5 + 0.3 * R(*shape)


def SPD(*shape):
    return W(*shape) + 2.0 * np.eye(shape[-1])


def sym(f):
    return lambda x: f(x + mh.mT(x))


def symmetric_pd(f):
    return lambda x: f(x + mh.mT(x) + 4.0 * np.eye(x.shape[-1], dtype=broadcasting.dtype_of(x)))


def _rank(n, r, seed):
    """An n x n matrix of rank r (a product of random n x r and r x n factors)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, r)) @ rng.uniform(-1, 1, (r, n))


SINGULAR = [_rank(3, 2, 1), _rank(4, 2, 2), np.stack([_rank(3, 2, 3), _rank(3, 1, 4)])]
"""Singular matrices of rank n - 1 and n - 2 (the stack: ranks 2 and 1 of 3), where det's first and
second derivatives exist (the adjugate and its derivative) though inv does not."""


def distinct_real_eigs(n):
    return np.diag(np.arange(1.0, n + 1)) + 0.15 * R(n, n)


CASES = {
    "complex_from": [(lambda a, b: cplx.real_of(cplx.complex_from(a, b) ** 2), (R(3), R(3))),
                     (lambda a, b: cplx.real_of(cplx.complex_from(a, b) * (1 - 2j)), (R(2, 3), R(3)))],
    "linalg.inv": [(la.inv, (W(3, 3),)), (la.inv, (W(2, 3, 3),)), (la.inv, (W(1, 1),))],
    "linalg.solve": [(la.solve, (W(3, 3), R(3, 2))), (la.solve, (W(2, 3, 3), R(3, 1))),
                     (la.solve, (W(3, 3), R(2, 3, 2)))],
    "linalg.det": [(dt.det, (W(3, 3),)), (dt.det, (W(2, 2, 2),)), (dt.det, (SINGULAR[0],)),
                   (dt.det, (SINGULAR[1],)), (dt.det, (SINGULAR[2],)), (dt.det, (W(1, 1),))],
    "linalg.adjugate": [(dt.adjugate, (W(3, 3),)), (dt.adjugate, (R(2, 4, 4),)), (dt.adjugate, (W(1, 1),))],
    "linalg.adjugate_jvp": [(dt.adjugate_jvp, (W(3, 3), R(3, 3))),
                            (dt.adjugate_jvp, (R(2, 3, 3), R(2, 3, 3))),
                            (lambda e: dt.adjugate_jvp(SINGULAR[1], e), (R(4, 4),))],
    "linalg.slogdet_logabs": [(dt.slogdet_logabs, (W(3, 3),)), (dt.slogdet_logabs, (-W(2, 2, 2),))],
    "linalg.slogdet_sign": [(dt.slogdet_sign, (W(3, 3),))],
    "linalg.cholesky": [(symmetric_pd(la.cholesky), (R(3, 3),)), (la.cholesky, (SPD(3, 3),)),
                        (symmetric_pd(la.cholesky), (R(2, 2, 2),))],
    "linalg.eigh_values": [(sym(la.eigh_values), (R(3, 3),)), (la.eigh_values, (R(3, 3),)),
                           (lambda a: la.eigh_values(a, "U"), (R(2, 3, 3),))],
    "linalg.eigh_vectors": [(sym(la.eigh_vectors), (R(3, 3),)),
                            (lambda a: la.eigh_vectors(a, "U"), (R(3, 3),)),
                            (sym(la.eigh_vectors), (R(2, 2, 2),))],
    "linalg.eigvals": [(la.eigvals, (distinct_real_eigs(3),)),
                       (la.eigvals, (np.stack([distinct_real_eigs(2)] * 2),))],
    "linalg.eig_vectors": [(la.eig_vectors, (distinct_real_eigs(3),))],
    "linalg.svd_values": [(la.svd_values, (R(4, 3),)), (la.svd_values, (R(2, 3),)),
                          (la.svd_values, (R(2, 3, 3),))],
    "linalg.svd_u": [(la.svd_u, (R(4, 3),)), (la.svd_u, (R(2, 3),)), (la.svd_u, (R(2, 3, 3),))],
    "linalg.svd_vh": [(la.svd_vh, (R(4, 3),)), (la.svd_vh, (R(2, 3),)),
                      (lambda a: la.svd_vh(a, True), (R(3, 3),))],
    "linalg.qr_q": [(la.qr_q, (R(4, 3),)), (la.qr_q, (R(3, 3),)), (la.qr_q, (R(2, 3, 2),))],
    "linalg.qr_r": [(la.qr_r, (R(4, 3),)), (la.qr_r, (R(3, 3),)), (la.qr_r, (R(2, 3, 2),))],
    "linalg.pinv": [(la.pinv, (R(4, 3),)), (la.pinv, (R(2, 3),)), (la.pinv, (W(2, 3, 3),))],
}

COMPOSED = {
    "linalg.solve_vector": [(wla.solve, (W(3, 3), R(3))), (wla.solve, (W(2, 3, 3), R(2, 3, 1)))],
    "linalg.slogdet": [(lambda a: wla.slogdet(a)[1] * wla.slogdet(a)[0], (-W(3, 3),))],
    "linalg.cholesky_upper": [(lambda a: wla.cholesky(a, upper=True), (SPD(3, 3),))],
    "linalg.eigh": [(lambda a: wla.eigh(a, UPLO="u").eigenvectors, (R(3, 3),)),
                    (sym(wla.eigvalsh), (R(3, 3),))],
    "linalg.eig": [(lambda a: wla.eig(a).eigenvectors * wla.eig(a).eigenvalues, (distinct_real_eigs(3),))],
    "linalg.svd": [(lambda a: wla.svd(a, full_matrices=False).U, (R(3, 2),)), (wla.svdvals, (R(2, 4),)),
                   (lambda a: wla.svd(a, hermitian=True).Vh, (sym(lambda x: x)(R(3, 3)),)),
                   (lambda a: wla.svd(a, compute_uv=False, hermitian=True), (R(2, 3, 3),))],
    "linalg.qr": [(lambda a: wla.qr(a).R, (R(2, 4),)), (lambda a: wla.qr(a).Q, (R(2, 4),)),
                  (lambda a: wla.qr(a, mode="complete").R, (R(4, 3),))],
    "linalg.norm": [
        (wla.norm, (R(2, 3),)), (lambda x: wla.norm(x, 1), (R(4),)), (lambda x: wla.norm(x, np.inf), (R(4),)),
        (lambda x: wla.norm(x, -np.inf), (R(4),)), (lambda x: wla.norm(x, 3), (R(4),)),
        (lambda x: wla.norm(x, -1.5), (R(4),)), (lambda x: wla.norm(x, 0) + wla.norm(x), (R(3),)),
        (lambda x: wla.norm(x, "fro"), (R(2, 3),)), (lambda x: wla.norm(x, "nuc"), (R(3, 2),)),
        (lambda x: wla.norm(x, 2), (R(3, 2),)), (lambda x: wla.norm(x, -2), (R(2, 3),)),
        (lambda x: wla.norm(x, 1), (R(3, 3),)), (lambda x: wla.norm(x, -1), (R(3, 3),)),
        (lambda x: wla.norm(x, np.inf), (R(3, 3),)), (lambda x: wla.norm(x, -np.inf), (R(3, 3),)),
        (lambda x: wla.norm(x, axis=1, keepdims=True), (R(2, 3),)),
        (lambda x: wla.norm(x, 1, axis=(2, 0)), (R(3, 2, 4),)),
        (lambda x: wla.norm(x, "nuc", axis=(0, 2), keepdims=True), (R(3, 2, 4),)),
    ],
    "linalg.vector_norm": [(wla.vector_norm, (R(2, 3),)),
                           (lambda x: wla.vector_norm(x, axis=(0, 2), ord=3, keepdims=True), (R(2, 3, 2),))],
    "linalg.matrix_norm": [(lambda x: wla.matrix_norm(x, ord=np.inf), (R(2, 3, 3),))],
    "linalg.matrix_power": [(lambda a: wla.matrix_power(a, 5), (W(3, 3) / 1.5,)),
                            (lambda a: wla.matrix_power(a, -2), (W(3, 3),)),
                            (lambda a: wla.matrix_power(a, 1), (W(2, 2),))],
    "linalg.lstsq": [(lambda a, b: wla.lstsq(a, b)[0], (R(5, 3), R(5))),
                     (lambda a, b: wla.lstsq(a, b)[1], (R(5, 3), R(5, 2))),
                     (lambda a, b: wla.lstsq(a, b)[0], (R(2, 3), R(2)))],
    "linalg.cond": [(wla.cond, (W(3, 3),)), (lambda a: wla.cond(a, "fro"), (W(3, 3),)),
                    (lambda a: wla.cond(a, -2), (R(2, 3),))],
    "linalg.multi_dot": [(lambda a, b, c: wla.multi_dot([a, b, c]), (R(3), R(3, 2), R(2, 4)))],
    "linalg.public_wrappers": [(wla.inv, (W(3, 3),)), (wla.det, (W(3, 3),)),
                               (wla.eigvals, (distinct_real_eigs(3),)),
                               (wla.pinv, (R(3, 2),)), (lambda a: wla.pinv(a, rtol=1e-10), (R(2, 3),)),
                               (wla.matrix_transpose, (R(2, 3, 4),)), (wla.cholesky, (SPD(2, 2),)),
                               (lambda a, b: wla.solve(a, b), (W(2, 2), R(2, 3)))],
    "linalg.tensorsolve": [(lambda a, b: wla.tensorsolve(a, b), (W(6, 6).reshape(2, 3, 6), R(2, 3))),
                           (lambda a, b: wla.tensorsolve(a, b, axes=(0,)),
                            (W(4, 4).reshape(2, 2, 2, 2), R(2, 2)))],
    "linalg.outer": [(wla.outer, (R(3), R(2)))],
    "linalg.vecdot": [(lambda a, b: wla.vecdot(a, b, axis=0), (R(3, 2), R(3, 1)))],
    "linalg.diagonal": [(lambda x: wla.diagonal(x, offset=1), (R(2, 3, 4),)), (wla.diagonal, (R(3, 2),))],
    "linalg.trace": [(lambda x: wla.trace(x, offset=-1), (R(2, 3, 3),))],
    "linalg.cross": [(wla.cross, (R(2, 3), R(3))),
                     (lambda a, b: wla.cross(a, b, axis=0), (R(3, 2), R(3, 2)))],
    "linalg.tensorinv": [(lambda a: wla.tensorinv(a, 1), (W(4, 4).reshape(4, 2, 2),))],
}
