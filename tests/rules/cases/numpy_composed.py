"""Systematic-test cases for the NumPy breadth of issue 3: the new primitives (cumsum, logaddexp,
logaddexp2, sinc, round) and the functions composed from primitives in wengert.numpy."""

import numpy as np

import wengert.numpy as wnp
from tests.support.rule_helpers import R, away, binary, unary
from wengert.rules import cumulative, elementwise

M = elementwise


def _distinct(*shape):
    """Values whose pairwise gaps are at least 0.1 (sorting has kinks at ties)."""
    n = int(np.prod(shape))
    return (np.random.default_rng(n).permutation(n) * 0.1 + 0.05 * R(n)).reshape(shape)


CASES = {
    "cumsum": [
        (lambda x: cumulative.cumsum(x, 0), (R(4),)),
        (lambda x: cumulative.cumsum(x, 1), (R(2, 3),)),
        (lambda x: cumulative.cumsum(x, 0), (R(3, 2),)),
    ],
    "logaddexp": binary(M.logaddexp, -2.0, 2.0),
    "logaddexp2": binary(M.logaddexp2, -2.0, 2.0),
    "sinc": unary(M.sinc, -2.0, 2.0) + [(M.sinc, (np.array([0.0, 0.5, 0.003, -0.02]),)), (M.sinc, (0.0,))],
    "round": unary(M.round_, make=away) + [(lambda x: M.round_(x, 1), (np.array([0.123, -2.26]),))],
}

COMPOSED = {
    "cumsum": [(wnp.cumsum, (R(2, 3),)), (lambda x: wnp.cumsum(x, axis=-1), (R(2, 3),))],
    "cumprod": [(wnp.cumprod, (R(5),)), (lambda x: wnp.cumprod(x, axis=0), (R(3, 2),)),
                (lambda x: wnp.cumprod(x, axis=1), (np.array([[2.0, 0.0, 3.0, 0.5, 0.0, 1.5]]),))],
    "cumulative_sum": [(lambda x: wnp.cumulative_sum(x, include_initial=True), (R(3),))],
    "cumulative_prod": [(lambda x: wnp.cumulative_prod(x, axis=1), (R(2, 3),))],
    "nancumsum": [(wnp.nancumsum, (np.array([1.0, np.nan, 0.5]),))],
    "nancumprod": [(wnp.nancumprod, (np.array([0.3, np.nan, 0.5]),))],
    "diff": [(wnp.diff, (R(5),)), (lambda x: wnp.diff(x, n=2, axis=0), (R(4, 2),)),
             (lambda x: wnp.diff(x, prepend=0.5, append=x[:, :1]), (R(2, 3),))],
    "ediff1d": [(lambda x: wnp.ediff1d(x, to_begin=x[0]), (R(4),))],
    "trapezoid": [(wnp.trapezoid, (R(5),)), (lambda y, x: wnp.trapezoid(y, x, axis=0), (R(4, 2), R(4)))],
    "nansum": [(lambda x: wnp.nansum(x, axis=0), (np.array([[1.0, np.nan], [0.5, 2.0]]),))],
    "nanprod": [(wnp.nanprod, (np.array([1.5, np.nan, 0.5]),))],
    "nanmax": [(lambda x: wnp.nanmax(x, axis=1), (np.array([[1.0, np.nan, 0.2], [0.5, 2.0, -1.0]]),))],
    "nanmin": [(wnp.nanmin, (np.array([1.0, np.nan, 0.2]),))],
    "nanmean": [(lambda x: wnp.nanmean(x, axis=0, keepdims=True), (np.array([[1.0, np.nan], [0.5, 2.0]]),))],
    "nanvar": [(lambda x: wnp.nanvar(x, ddof=1), (np.array([1.0, np.nan, 0.5, 2.0]),))],
    "nanstd": [(wnp.nanstd, (np.array([1.0, np.nan, 0.5, 2.0]),))],
    "ptp": [(lambda x: wnp.ptp(x, axis=0), (_distinct(3, 2),))],
    "average": [(lambda a, w: wnp.average(a, axis=1, weights=w), (R(2, 3), R(3, lo=0.5, hi=1.5))),
                (wnp.average, (R(2, 3),)),
                (lambda a, w: wnp.average(a, weights=w, returned=True)[0], (R(2, 2), R(2, 2, lo=0.5)))],
    "take_along_axis": [(lambda x: wnp.take_along_axis(x, np.array([[2, 0, 0]]), axis=1), (R(2, 3),))],
    "take": [(lambda x: wnp.take(x, [3, 0, 3]), (R(2, 2),)),
             (lambda x: wnp.take(x, np.array([[1, -1]]), axis=1), (R(2, 3),))],
    "sort": [(wnp.sort, (_distinct(2, 3),)), (lambda x: wnp.sort(x, axis=None), (_distinct(2, 2),))],
    "partition": [(lambda x: wnp.partition(x, 1), (_distinct(4),))],
    "quantile": [(lambda x: wnp.quantile(x, [0.3, 0.5], axis=0), (_distinct(4, 2),))],
    "percentile": [(lambda x: wnp.percentile(x, 40.0), (_distinct(5),))],
    "median": [(wnp.median, (_distinct(4),)),
               (lambda x: wnp.median(x, axis=1, keepdims=True), (_distinct(2, 3),))],
    "select": [(lambda a, b: wnp.select([a > 0.5, b < 0.0], [a, b * b], default=1.5), (R(4), R(4)))],
    "roll": [(lambda x: wnp.roll(x, 2), (R(2, 3),)),
             (lambda x: wnp.roll(x, (1, -1), axis=(0, 1)), (R(2, 3),))],
    "rot90": [(wnp.rot90, (R(2, 3),)), (lambda x: wnp.rot90(x, 3, axes=(1, 2)), (R(2, 3, 2),))],
    "pad": [(lambda x: wnp.pad(x, 1), (R(2, 3),)),
            (lambda x: wnp.pad(x, ((1, 0), (0, 2)), mode="reflect"), (R(3, 3),)),
            (lambda x: wnp.pad(x, 2, mode="wrap"), (R(3),)),
            (lambda x, c: wnp.pad(x, 1, constant_values=c), (R(2), R()))],
    "diagonal": [(wnp.diagonal, (R(3, 3),)), (lambda x: wnp.diagonal(x, -1, 1, 2), (R(2, 3, 3),))],
    "trace": [(wnp.trace, (R(3, 3),)), (lambda x: wnp.trace(x, 1), (R(2, 3),))],
    "diag": [(wnp.diag, (R(3),)), (lambda x: wnp.diag(x, -1), (R(2),)), (wnp.diag, (R(3, 3),))],
    "diagflat": [(wnp.diagflat, (R(2, 2),))],
    "tril": [(wnp.tril, (R(3, 3),)), (lambda x: wnp.tril(x, -1), (R(2, 3, 3),))],
    "triu": [(lambda x: wnp.triu(x, 1), (R(3, 4),))],
    "atleast_3d": [(wnp.atleast_3d, (R(3),))],
    "atleast_1d": [(lambda a, b: wnp.atleast_1d(a, b)[0] * wnp.atleast_1d(b), (R(), R(2)))],
    "atleast_2d": [(lambda a, b: wnp.atleast_2d(a, b)[0] @ wnp.atleast_2d(b).T, (R(3), R(2, 3)))],
    "fabs": [(wnp.fabs, (away(3),))],
    "full_like": [(lambda c: wnp.full_like(np.zeros((2, 2)), c), (R(),))],
    "meshgrid": [(lambda a, b: wnp.meshgrid(a, b)[0] * wnp.meshgrid(a, b, indexing="ij")[1].T, (R(2), R(3)))],
    "append": [(lambda a, b: wnp.append(a, b), (R(2, 2), R(3)))],
    "column_stack": [(lambda a, b: wnp.column_stack([a, b]), (R(3), R(3, 2)))],
    "dstack": [(lambda a, b: wnp.dstack([a, b]), (R(2, 2), R(2, 2)))],
    "vdot": [(wnp.vdot, (R(2, 2), R(4)))],
    "kron": [(wnp.kron, (R(2, 2), R(3, 1))), (wnp.kron, (R(2), R(2, 2)))],
    "cross": [(wnp.cross, (R(3), R(2, 3))), (lambda a, b: wnp.cross(a, b, axis=0), (R(3, 2), R(3, 2))),
              (wnp.cross, (R(2), R(3)))],
    "deg2rad": [(wnp.deg2rad, (R(3),))],
    "rad2deg": [(wnp.rad2deg, (R(3),))],
    "fix": [(wnp.fix, (away(3),))],
    "fmax": [(wnp.fmax, (np.array([1.0, np.nan, 0.2]), np.array([0.5, 2.0, np.nan])))],
    "fmin": [(wnp.fmin, (np.array([1.0, np.nan, 0.2]), np.array([0.5, 2.0, np.nan])))],
    "nan_to_num": [(wnp.nan_to_num, (np.array([1.0, np.nan, -np.inf, 0.3]),))],
    "float_power": [(wnp.float_power, (R(3, lo=0.5, hi=2.0), R(3)))],
}
