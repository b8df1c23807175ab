"""Rule-table cases for the SciPy functions added for code written against SciPy and HIPS autograd:
``ive``, ``gammasgn`` (primitives), ``solve_banded``, ``convolve`` along chosen axes and
``multivariate_normal.entropy`` (composed). Empty without SciPy."""

import numpy as np

from tests.support.rule_helpers import R

try:
    import scipy  # noqa: F401
except ModuleNotFoundError:  # pragma: no cover - SciPy is in the test extra
    CASES, COMPOSED = {}, {}
else:
    from wengert.rules import special_scaled as S
    from wengert.scipy import linalg as wsl
    from wengert.scipy import signal as wss
    from wengert.scipy import stats

    def _banded(lower, upper, n):
        ab = R(lower + upper + 1, n)
        ab[upper] += 4.0  # a dominant diagonal: well conditioned
        return ab

    CASES = {
        "ive": [(lambda z: S.ive(1.5, z), (R(3, lo=0.5, hi=3.0),)),
                (lambda z: S.ive(np.array([0.0, 1.0, 2.0]), z), (R(2, 3, lo=-3.0, hi=-0.5),)),
                (lambda z: S.ive(0.0, z), (R(lo=0.5, hi=2.0),))],
        "gammasgn": [(S.gammasgn, (np.array([-2.5, -1.5, -0.5, 0.5, 3.2]),)), (S.gammasgn, (2.5,))],
    }
    COMPOSED = {
        "scipy.linalg.solve_banded": [
            (lambda ab, b: wsl.solve_banded((1, 2), ab, b), (_banded(1, 2, 5), R(5))),
            (lambda ab, b: wsl.solve_banded((0, 0), ab, b), (_banded(0, 0, 3), R(3, 2)))],
        "scipy.signal.convolve (axes)": [
            (lambda x, w: wss.convolve(x, w, axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode="valid"),
             (R(2, 2, 4, 3), R(2, 3, 2, 2))),
            (lambda a, v: wss.convolve(a, v, "same", axes=([1], [0])), (R(2, 5), R(3))),
            (lambda a, v: wss.convolve(a, v, axes=([0], [1])), (R(2, 3), R(4, 3)))],
        "scipy.stats.multivariate_normal.entropy": [
            (lambda c: stats.multivariate_normal.entropy(None, c @ c.T + np.eye(2)), (R(2, 2),)),
            (lambda v: stats.multivariate_normal.entropy(np.zeros(3), v), (R(3, lo=0.5, hi=2.0),))],
    }
