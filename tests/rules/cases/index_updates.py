"""Systematic-test cases of the functional index updates (``index_update``, ``index_add``) and of the
``x.at[idx]`` methods composed from them."""

import numpy as np

from tests.support.rule_helpers import R
from wengert.rules.indexing import IndexUpdates, index_add, index_update

MASK = np.array([[True, False, True], [False, True, True]])
REPEATED = np.array([0, 2, 0])


def _cases(update):
    return [
        (lambda x, v: update(x, 1, v), (R(3), R())),
        (lambda x, v: update(x, REPEATED, v), (R(4), R(3))),
        (lambda x, v: update(x, (slice(None), 1), v), (R(2, 3), R(2))),
        (lambda x, v: update(x, MASK, v), (R(2, 3), R())),
        (lambda x, v: update(x, slice(0, 2), v), (R(2, 3), R(3))),
        (lambda x, v: update(x, (np.array([0, 0, 1]), np.array([1, 1, 2])), v), (R(2, 3), R(3))),
        (lambda x: update(x, 0, 2.0) * x, (R(3),)),
    ]


CASES = {
    "index_update": _cases(index_update),
    "index_add": _cases(index_add),
}


def at(x):
    """``x.at`` for traced and plain arrays alike (finite differences call the function on plain ones)."""
    return IndexUpdates(x)


COMPOSED = {
    "at[].multiply": [(lambda x, v: at(x)[1:].multiply(v), (R(3), R(2))),
                      (lambda x, v: at(x)[np.array([2, 0])].multiply(v), (R(3), R()))],
    "at[].divide": [(lambda x, v: at(x)[0].divide(v), (R(3), R(lo=0.5, hi=2.0)))],
    "at[].get": [(lambda x: at(x)[1:, 0].get(), (R(3, 2),))],
}
