"""Systematic-test cases for ``wengert.ops.accumulate`` (index_add)."""

import numpy as np

from rule_helpers import R
from wengert.ops.accumulate import index_add

CASES = {
    "index_add": [
        (lambda b, e: index_add(b, e, (slice(1, 3),)), (R(4, 2), R(2, 2))),
        (lambda b, e: index_add(b, e, (np.array([0, 2, 0]),)), (R(3), R(3))),
        (lambda b, e: index_add(b, e, (1, 0)), (R(2, 3), R())),
    ],
}
