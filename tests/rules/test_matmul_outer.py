"""matmul's fast path for stacked outer products (contracted length 1, as in per-example weight
gradients): the same bits, dtype and shape as numpy.matmul, broadcasting included."""

import numpy as np
import pytest

from wengert.rules.products import matmul


@pytest.mark.parametrize("sa,sb", [((3, 4, 1), (3, 1, 5)), ((2, 3, 4, 1), (3, 1, 2)), ((1, 4, 1), (5, 1, 2)),
                                   ((3, 4, 2), (3, 2, 5))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, bool, np.complex128])
def test_stacked_outer_products_equal_numpy_matmul(sa, sb, dtype):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(sa) * 3).astype(dtype), (rng.standard_normal(sb) * 3).astype(dtype)
    got, want = matmul(a, b), np.matmul(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
