"""Systematic-test cases for NumPy code brought over unchanged: numerical-analysis helpers
(gradient, interp, convolve, correlate, polynomials), copysign, real_if_close, and the keyword and
calling forms of existing functions (where=/initial=, order='F', einsum's sublists and diagonals)."""

import numpy as np

import wengert.numpy as wnp
from tests.support.rule_helpers import R

_XP = np.array([-1.0, -0.3, 0.4, 1.2])
_MASK = np.array([True, False, True])
_KNOTS_AWAY = np.array([-1.5, -0.6, 0.1, 0.9, 1.4])  # outside, inside and beyond the knots, none on one

COMPOSED = {
    "gradient": [(wnp.gradient, (R(5),)),
                 (lambda f: wnp.gradient(f, 0.5, axis=1, edge_order=2), (R(2, 4),)),
                 (lambda f: wnp.gradient(f, np.array([0.0, 0.3, 1.0, 1.4]), edge_order=2), (R(4),)),
                 (lambda f: wnp.gradient(f)[1], (R(3, 2),))],
    "interp": [(lambda x, fp: wnp.interp(x, _XP, fp), (_KNOTS_AWAY, R(4))),
               (lambda fp: wnp.interp(0.2, _XP, fp, left=0.0), (R(4),)),
               (lambda x, xp: wnp.interp(x, xp, np.array([0.5, 1.0, -1.0, 2.0])),
                (np.array([-0.2, 0.3]), _XP))],
    "convolve": [(wnp.convolve, (R(5), R(3))), (lambda a, v: wnp.convolve(a, v, "same"), (R(2), R(4))),
                 (lambda a, v: wnp.convolve(a, v, "valid"), (R(5), R(2)))],
    "correlate": [(wnp.correlate, (R(5), R(3))), (lambda a, v: wnp.correlate(a, v, "full"), (R(3), R(4))),
                  (lambda a, v: wnp.correlate(a, v, "same"), (R(4), R(4)))],
    "polyval": [(wnp.polyval, (R(4), R(3))), (wnp.polyval, (R(2), R()))],
    "polyfit": [(lambda x, y: wnp.polyfit(x, y, 2), (np.linspace(-1, 1, 6) + 0.05 * R(6), R(6))),
                (lambda y, w: wnp.polyfit(np.linspace(0, 1, 5), y, 1, w=w), (R(5, 2), R(5, lo=0.5)))],
    "vander": [(wnp.vander, (R(3),)), (lambda x: wnp.vander(x, 4, increasing=True),
                                        (np.array([0.0, 0.5, -1.0]),))],
    "copysign": [(wnp.copysign, (R(4), R(4))), (lambda x: wnp.copysign(x, -1.0), (R(2, 2),))],
    # a real argument: the result's dtype is then known without the data (the complex cases, whose
    # dtype the data decides, are in tests/numpy/test_dropin.py)
    "real_if_close": [(wnp.real_if_close, (R(3),)),
                      (lambda x: wnp.real_if_close(x * 2.0, tol=10), (R(2, 2),))],
    "sum(where=, initial=)": [(lambda x: wnp.sum(x, where=_MASK, initial=0.5), (R(3),)),
                              (lambda x: wnp.sum(x, axis=0, where=np.array([[1], [0]], bool)), (R(2, 3),))],
    "prod(where=, initial=)": [(lambda x: wnp.prod(x, axis=1, where=_MASK, initial=2.0),
                                (R(2, 3),))],
    "max(where=, initial=)": [(lambda x: wnp.max(x, axis=1, where=_MASK, initial=-5.0),
                               (R(2, 3),)),
                              (lambda x: wnp.max(x, initial=3.0) + wnp.max(x, initial=-3.0), (R(4),))],
    "min(where=, initial=)": [(lambda x: wnp.min(x, where=x > -2, initial=5.0), (R(2, 2),))],
    "reshape(order='F')": [(lambda x: wnp.reshape(x, (3, 2), order="F"), (R(2, 3),)),
                           (lambda x: wnp.ravel(x, order="F"), (R(2, 3, 2),)),
                           (lambda x: x.reshape((4, 3), order="F"), (R(3, 2, 2),))],
    "einsum (sublists)": [(lambda a, b: wnp.einsum(a, [0, 1], b, [1, 2]), (R(2, 3), R(3, 2))),
                          (lambda a, b: wnp.einsum(a, [Ellipsis, 0], b, [0], [Ellipsis]), (R(2, 3), R(3)))],
    "einsum (repeated subscripts)": [(lambda a: wnp.einsum("ii->i", a), (R(3, 3),)),
                                     (lambda a: wnp.einsum("ii", a), (R(3, 3),)),
                                     (lambda a, b: wnp.einsum("iij,jk->ik", a, b), (R(2, 2, 3), R(3, 2))),
                                     (lambda a: wnp.einsum("ijij->ij", a), (R(2, 3, 2, 3),))],
}
