"""Rule-table cases for the wengert.scipy names that no other case file reaches by name
(``tests/numpy/test_classification.py`` requires one per wrapped SciPy name). Empty without SciPy."""

import numpy as np

from tests.support.rule_helpers import R

try:
    import scipy  # noqa: F401
except ModuleNotFoundError:  # pragma: no cover - SciPy is in the test extra
    COMPOSED = {}
else:
    from wengert.scipy import linalg as wsl

    def _spd(a):
        return a @ a.T + 3.0 * np.eye(3, dtype=a.dtype)  # in the argument's precision

    COMPOSED = {
        "scipy.linalg.cholesky": [(lambda a: wsl.cholesky(_spd(a)), (R(3, 3),)),
                                  (lambda a: wsl.cholesky(_spd(a), lower=True), (R(3, 3),))],
        "scipy.linalg.cho_factor": [
            (lambda a, b: wsl.cho_solve(wsl.cho_factor(_spd(a)), b), (R(3, 3), R(3))),
            (lambda a, b: wsl.cho_solve(wsl.cho_factor(_spd(a), lower=True), b), (R(3, 3), R(3, 2))),
        ],
    }
