"""Smoke test of benchmarks/iterate_native.py without Numba or peers: its ``wg.iterate`` form of the
Lorenz RK4 is the plain loop of benchmarks/native.py (value and gradient), at a tiny size."""

import numpy as np
import pytest

import wengert as wg
from benchmarks import iterate_native
from benchmarks.native import lorenz_rk4
from tests.benchmarks.peer_guard import no_peer_imports  # noqa: F401 - an autouse fixture


@pytest.mark.parametrize("policy", ["binomial", "ctz", "all"])
def test_the_iterated_lorenz_is_the_plain_loop(policy):
    f = iterate_native._iterated(policy, 25)
    params = iterate_native.PARAMS
    assert f(*params) == pytest.approx(lorenz_rk4(*params, 25), rel=1e-13)
    got = wg.compile(f).grad((0, 1, 2))(*params)
    np.testing.assert_allclose(got, wg.grad(lorenz_rk4, (0, 1, 2))(*params, 25), rtol=1e-10)
