"""The systematic rule-table test on CuPy arrays (``make test-gpu``): every case of
``tests/rules/test_rule_table.py`` differentiated in both modes with its arrays, cotangents and tangents
on the GPU; each result must be a CuPy array equal to the NumPy result. Skipped without CuPy or a GPU.

Cases whose primitive is listed in ``tests/rules/test_dask_arrays.EAGER_ON_DASK`` (SciPy, np.linalg
routines, functions that call ``np.asarray``) may instead refuse, with an error, since CuPy refuses an
implicit copy to NumPy; a wrong number is never accepted.
"""

import warnings

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
try:
    GPUS = cp.cuda.runtime.getDeviceCount()
except Exception as e:  # noqa: BLE001 - CuPy installed but no driver or device
    pytest.skip(f"CuPy is installed but no GPU is usable: {e}", allow_module_level=True)
if not GPUS:
    pytest.skip("CuPy is installed but there is no GPU", allow_module_level=True)

import wengert as wg  # noqa: E402
from tests.rules.test_dask_arrays import EAGER_ON_DASK, TABLE, _leaves, _random_like  # noqa: E402


def to_gpu(a):
    if isinstance(a, (tuple, list)):
        return type(a)(to_gpu(p) for p in a)
    if type(a) in (float, complex) or (isinstance(a, np.ndarray) and a.dtype.kind in "fc"):
        return cp.asarray(a)
    return a


ALL_CASES = [pytest.param(name, i, id=f"{name}-{i}") for name in sorted(TABLE)
             for i in range(len(TABLE[name]))]


@pytest.mark.parametrize("name,i", ALL_CASES)
def test_differentiating_on_cupy_stays_on_the_gpu_and_equals_numpy(name, i):
    fun, args = TABLE[name][i]
    rng = np.random.default_rng(0)
    u = _random_like(fun(*args), rng)
    v = tuple(_random_like(a, rng) for a in args)
    want_rev = _leaves(wg.vjp(fun, *args)[1](u))
    want_fwd = _leaves(wg.jvp(fun, tuple(args), v)[1])
    gargs = tuple(to_gpu(a) for a in args)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got_rev = _leaves(wg.vjp(fun, *gargs)[1](to_gpu(u)))
            got_fwd = _leaves(wg.jvp(fun, gargs, tuple(to_gpu(t) for t in v))[1])
    except Exception as e:  # noqa: BLE001
        if name in EAGER_ON_DASK:  # listed: an error is the allowed outcome, never a wrong number
            return
        raise AssertionError(f"{name}-{i} on CuPy raised {type(e).__name__}: {e}") from e
    for mode, got, want in (("VJP", got_rev, want_rev), ("JVP", got_fwd, want_fwd)):
        for g, w, a in zip(got, want, gargs if mode == "VJP" else [cp.zeros(0)] * len(got)):
            if isinstance(a, cp.ndarray) and name not in EAGER_ON_DASK:
                assert isinstance(g, cp.ndarray), f"{name}-{i}: {mode} left the GPU ({type(g).__name__})"
            np.testing.assert_allclose(cp.asnumpy(g) if isinstance(g, cp.ndarray) else np.asarray(g),
                                       np.asarray(w), rtol=1e-9, atol=1e-12, err_msg=f"{mode} on CuPy")


def _written_after_use(xp, w):
    y = xp.ones(3)
    z = w * y
    y[y > 0] = 3.0
    tmp = xp.zeros(3)
    s = 0.0
    for t in range(3):
        tmp[:] = xp.asarray([0.3 * t, -1.2, 0.7 + t])
        s = s + wg.numpy.sum(wg.numpy.sin(w * tmp))
    return wg.numpy.sum(z * z + y * w) + s


@pytest.mark.parametrize("engine", ["grad", "vjp", "jacrev"])
def test_a_cupy_constant_written_after_it_was_read(engine):
    # the recording holds a CuPy constant by its copy() as it was read (engines.kept): a write into it
    # later in the function (a mask, a refilled buffer) changes no derivative
    import wengert.numpy  # noqa: F401
    w = np.array([0.4, -0.3, 0.8])
    h, want = 1e-6, np.zeros(3)
    for i in range(3):
        e = np.zeros(3)
        e[i] = h
        want[i] = (float(_written_after_use(np, w + e)) - float(_written_after_use(np, w - e))) / (2 * h)
    fun = lambda v: _written_after_use(cp, v)  # noqa: E731
    wc = cp.asarray(w)
    if engine == "grad":
        got = wg.grad(fun)(wc)
    elif engine == "vjp":
        got = wg.vjp(fun, wc)[1](1.0)[0]
    else:
        got = wg.jacrev(fun)(wc)
    np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-6, atol=1e-7)
