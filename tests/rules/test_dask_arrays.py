"""The systematic rule-table test again, on Dask arrays: every case of ``tests/rules/test_rule_table.py``
(primitives and composed functions) differentiated in reverse (VJP) and forward (JVP) mode with its
arrays chunked by ``dask.array``, the cotangents and tangents too. A case passes when each result is a
lazy Dask array equal to the NumPy result and differentiating computed nothing (counted by a scheduler
callback). Dask stands here for any NEP-18 array library (CuPy: ``make test-gpu``).

The few primitives that cannot stay lazy are listed in ``EAGER_ON_DASK`` with the reason and what they
do instead (compute, or refuse with an error naming the primitive); their cases assert exactly that,
and fail once the primitive stays lazy, so that the list only shrinks. Their results are never wrong:
every case that returns compares equal to NumPy.
"""

import warnings

import numpy as np
import pytest

from tests.rules.test_rule_table import CASES, COMPOSED
from tests.support.rule_helpers import R

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
Callback = pytest.importorskip("dask.callbacks").Callback

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402

LAZY, COMPUTES, REFUSED = "lazy", "computes", "refused"


class ComputeCounter(Callback):
    """Counts the graphs Dask computes (``_start`` runs once per compute) while it is active."""

    def __init__(self):
        super().__init__()
        self.computes = 0

    def _start(self, dsk):
        self.computes += 1


def to_dask(a):
    """A float array (or Python float) as a Dask array cut into about two chunks per axis."""
    if isinstance(a, (tuple, list)):
        return type(a)(to_dask(p) for p in a)
    if type(a) in (float, complex):
        return da.from_array(np.asarray(a), chunks=())
    if isinstance(a, np.ndarray) and a.dtype.kind in "fc":
        return da.from_array(a, chunks=tuple(max(1, (n + 1) // 2) for n in a.shape))
    return a


def _random_like(x, rng):
    if isinstance(x, (tuple, list)):
        return type(x)(_random_like(p, rng) for p in x)
    r = rng.standard_normal(np.shape(x))
    if np.result_type(x).kind == "c":
        r = r + 1j * rng.standard_normal(np.shape(x))
    return r if np.ndim(x) else r.item()


def _leaves(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def outcome_on_dask(fun, args):
    """Differentiate ``fun`` at ``args`` on Dask, both modes: LAZY, COMPUTES (a compute while
    differentiating, or a NumPy result), or REFUSED (an error, returned with it); an AssertionError
    when a result differs from NumPy's, which no listed exception excuses."""
    rng = np.random.default_rng(0)
    u = _random_like(fun(*args), rng)
    v = tuple(_random_like(a, rng) for a in args)
    want_rev = _leaves(wg.vjp(fun, *args)[1](u))
    want_fwd = _leaves(wg.jvp(fun, tuple(args), v)[1])
    dargs = tuple(to_dask(a) for a in args)
    counter = ComputeCounter()
    try:
        with counter, dask.config.set(scheduler="sync"), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # Dask's "np.linalg.X is not implemented"
            got_rev = _leaves(wg.vjp(fun, *dargs)[1](to_dask(u)))
            got_fwd = _leaves(wg.jvp(fun, dargs, tuple(to_dask(t) for t in v))[1])
    except Exception as e:  # noqa: BLE001 - the outcome is reported, and checked by the caller
        return REFUSED, e
    lazy = counter.computes == 0 and all(isinstance(g, da.Array) for g in got_fwd) and all(
        isinstance(g, da.Array) for g, a in zip(got_rev, dargs) if isinstance(a, da.Array))
    got_rev, got_fwd = dask.compute(got_rev, got_fwd, scheduler="sync")
    for mode, got, want in (("VJP", got_rev, want_rev), ("JVP", got_fwd, want_fwd)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9, atol=1e-12,
                                       err_msg=f"{mode} on Dask differs from NumPy")
    return (LAZY if lazy else COMPUTES), counter.computes


def _names(*names):
    return names


_REASONS = {
    "the derivative is identically zero: the core's zero rule returns NumPy zeros (nothing computed)":
        (_names("floor", "ceil", "rint", "trunc", "sign", "composed:fix", "gammasgn"), {COMPUTES}),
    "SciPy computes on NumPy arrays: Dask computes the argument when SciPy converts it":
        (_names("digamma", "polygamma", "expm", "sqrtm", "solve_sylvester", "odeint", "scipy_convolve",
                "scipy_solve_triangular", "cholesky_lower", "softmax_cross_entropy",
                "composed:scipy.linalg.cho_factor", "composed:scipy.linalg.cho_solve",
                "composed:scipy.linalg.cholesky", "composed:scipy.special.log_softmax",
                "composed:scipy.special.logsumexp", "composed:scipy.special.multigammaln",
                "composed:scipy.special.softmax", "composed:scipy.stats.beta", "composed:scipy.stats.chi2",
                "composed:scipy.stats.dirichlet", "composed:scipy.stats.gamma",
                "composed:scipy.stats.multivariate_normal", "composed:scipy.stats.poisson",
                "composed:scipy.stats.multivariate_normal.entropy"),
         {LAZY, COMPUTES}),
    "np.linalg on Dask: Dask has 2-D, square-chunked inv/solve/cholesky/qr/svd only, and computes or "
    "refuses the rest (eig, eigh, det, pinv, slogdet)":
        (_names("linalg.adjugate", "linalg.adjugate_jvp", "linalg.cholesky", "linalg.det",
                "linalg.eig_vectors",
                "linalg.eigh_values", "linalg.eigh_vectors", "linalg.eigvals", "linalg.inv", "linalg.pinv",
                "linalg.qr_q", "linalg.qr_r", "linalg.slogdet_logabs", "linalg.slogdet_sign", "linalg.solve",
                "linalg.svd_u", "linalg.svd_values", "linalg.svd_vh", "composed:linalg.cholesky_upper",
                "composed:linalg.cond", "composed:linalg.eig", "composed:linalg.eigh",
                "composed:linalg.eigvalsh", "composed:linalg.lstsq", "composed:linalg.matrix_power",
                "composed:linalg.norm", "composed:linalg.public_wrappers", "composed:linalg.qr",
                "composed:linalg.slogdet", "composed:linalg.solve_vector", "composed:linalg.svd",
                "composed:linalg.svdvals", "composed:linalg.tensorinv", "composed:linalg.tensorsolve",
                "composed:polyfit"),
         {LAZY, COMPUTES, REFUSED}),
    "Dask's FFT needs one chunk along the transformed axis":
        (_names("fft.c2c", "fft.c2r", "fft.r2c", "composed:fft.fft", "composed:fft.fft2", "composed:fft.fftn",
                "composed:fft.ifft", "composed:fft.ifft2", "composed:fft.ifftn", "composed:fft.irfft",
                "composed:fft.irfft2", "composed:fft.irfftn", "composed:fft.rfft", "composed:fft.rfft2",
                "composed:fft.rfftn", "composed:fft.roundtrip"), {LAZY, REFUSED}),
    "Dask indexes with one integer array at most, has no boolean-mask shapes before computing, and "
    "assigns at most one integer-array axis (diagonals, take, sort, quantile are built on these)":
        (_names("getitem", "index_add", "index_update", "composed:at[].multiply", "composed:diag",
                "composed:diag complex", "composed:diagonal", "composed:linalg.diagonal",
                "composed:linalg.trace", "composed:trace", "composed:take", "composed:take complex",
                "composed:take_along_axis", "composed:sort", "composed:sort-free complex functions",
                "composed:quantile", "composed:median", "composed:nn.cross_entropy(none)",
                "composed:nn.cross_entropy(sum)", "composed:einsum (repeated subscripts)",
                "composed:scipy.linalg.solve_banded", "composed:convolve", "composed:correlate",
                "composed:scipy.signal.convolve (axes)"), {LAZY, COMPUTES, REFUSED}),
    "Dask's repeat takes one integer count and an axis; its reshape only merges or splits axes evenly":
        (_names("repeat", "sum_repeats", "reshape", "composed:reshape complex",
                "composed:reshape(order='F')"),
         {LAZY, REFUSED}),
    "the wengert.numpy function computes its argument (np.asarray on the data: nan-functions, "
    "average's weights, select, partition, percentile)":
        (_names("composed:average", "composed:average complex", "composed:average complex weights",
                "composed:nan_to_num", "composed:nancumprod", "composed:nancumsum", "composed:nanmax",
                "composed:nanmean", "composed:nanmean complex", "composed:nanmin", "composed:nanprod",
                "composed:nanstd", "composed:nansum", "composed:nansum complex", "composed:nanvar",
                "composed:partition", "composed:percentile", "composed:select", "composed:interp"),
         {LAZY, COMPUTES, REFUSED}),
    "convolution and pooling gather windows with NumPy's sliding_window_view and an im2col reshape, which "
    "Dask's reshape cannot do lazily (it only merges or splits axes evenly)":
        (_names("conv", "conv_transpose", "max_pool", "window_gather", "window_scatter",
                "composed:nn.avg_pool1d", "composed:nn.avg_pool2d",
                "composed:nn.conv1d", "composed:nn.conv2d", "composed:nn.conv_transpose2d",
                "composed:nn.max_pool2d"), {LAZY, COMPUTES, REFUSED}),
    "tie_select's case closes over NumPy x and y: the cotangent is multiplied by NumPy masks":
        (_names("tie_select"), {COMPUTES}),
}
EAGER_ON_DASK = {name: (reason, allowed) for reason, (names, allowed) in _REASONS.items() for name in names}
"""Primitives and composed functions that do not stay lazy on Dask: name -> (why, outcomes allowed)."""

def _user_primitives():
    """Users' primitives (``wg.primitive`` with ``wg.defvjp``/``wg.defjvp``, one rule variadic): their
    rules return arrays of the inputs' library (Dask's here, CuPy's in test_cupy_arrays), which the
    checks on users' rules accept; one broadcasts, so its rule's output-shaped result is summed back."""
    softplus = wg.primitive(lambda x: np.logaddexp(0.0, x), name="softplus")
    wg.defvjp(softplus, lambda g, out, x: g / (1.0 + wnp.exp(-x)))
    wg.defjvp(softplus, lambda t, out, x: t / (1.0 + wnp.exp(-x)))
    scaled_tanh = wg.primitive(lambda x, y: x * np.tanh(y), name="scaled_tanh")
    d_dx, d_dy = (lambda x, y: wnp.tanh(y)), (lambda x, y: x / wnp.cosh(y) ** 2)
    wg.defvjp(scaled_tanh, lambda g, out, x, y: g * d_dx(x, y), lambda g, out, x, y: g * d_dy(x, y))
    wg.defjvp(scaled_tanh, variadic=lambda i, t, out, x, y: t * (d_dy if i else d_dx)(x, y))
    return {"user:softplus": [(softplus, (R(3),)), (lambda x: softplus(x) * 2.0, (R(2, 3),))],
            "user:scaled_tanh": [(scaled_tanh, (R(2, 3), R(3))), (scaled_tanh, (R(3), R()))]}


TABLE = {**CASES, **{f"composed:{k}": v for k, v in COMPOSED.items()}, **_user_primitives()}
LAZY_CASES = [pytest.param(name, i, id=f"{name}-{i}") for name in sorted(TABLE) if name not in EAGER_ON_DASK
              for i in range(len(TABLE[name]))]


@pytest.mark.parametrize("name,i", LAZY_CASES)
def test_differentiating_on_dask_stays_lazy_and_equals_numpy(name, i):
    fun, args = TABLE[name][i]
    result, detail = outcome_on_dask(fun, args)
    if result == REFUSED:
        raise AssertionError(f"{name}-{i} on Dask raised {type(detail).__name__}: {detail}") from detail
    assert result == LAZY, f"{name}-{i}: {detail} computes while differentiating, or a NumPy result"


@pytest.mark.parametrize("name", sorted(EAGER_ON_DASK))
def test_listed_exceptions_behave_as_listed_and_are_still_exceptions(name):
    reason, allowed = EAGER_ON_DASK[name]
    assert name in TABLE, f"{name} is listed in EAGER_ON_DASK but has no cases"
    seen = set()
    for i, (fun, args) in enumerate(TABLE[name]):
        result, detail = outcome_on_dask(fun, args)
        if result == REFUSED:  # an error raised where the computation is set up, never a wrong number
            assert isinstance(detail, (NotImplementedError, ValueError, TypeError, AttributeError,
                                       IndexError)) and str(detail), f"{name}-{i}: {detail!r}"
        assert result in allowed, f"{name}-{i}: {result} ({detail}) where the list says {allowed}: {reason}"
        seen.add(result)
    assert seen != {LAZY}, f"{name} now stays lazy on Dask in every case: remove it from EAGER_ON_DASK"


def test_dask_cholesky_is_the_lower_factor():
    """Dask's np.linalg.cholesky returns the upper factor; wengert's is NumPy's lower one on Dask too."""
    import wengert.numpy.linalg as wla

    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 3))
    a = a @ a.T + 3 * np.eye(3)
    f = lambda m: (wla.cholesky(m) * np.arange(9.0).reshape(3, 3)).sum()
    got = wg.grad(f)(da.from_array(a, chunks=3))
    assert isinstance(got, da.Array)
    np.testing.assert_allclose(got.compute(), wg.grad(f)(a), rtol=1e-12)


def test_index_update_with_a_repeating_index_on_dask_is_refused_by_name():
    x = da.from_array(np.arange(4.0), chunks=2)
    with pytest.raises(NotImplementedError, match=r"index_update .* on a dask\.array\.core\.Array with an "
                                                  r"integer-array index"):
        wg.grad(lambda v: (v.at[np.array([0, 0])].set(1.0) * v).sum())(x)


def test_repeated_reads_of_a_dask_array_differentiate_lazily():
    """``x[idx]`` with repeated indices: its adjoint adds every read (a bincount on Dask), no compute."""
    v = np.linspace(1.0, 2.0, 5)
    idx = np.array([0, 3, 0, 0, 4])
    f = lambda x: (x[idx] ** 2).sum()
    counter = ComputeCounter()
    with counter, dask.config.set(scheduler="sync"):
        g = wg.grad(f)(da.from_array(v, chunks=2))
    assert isinstance(g, da.Array) and counter.computes == 0
    want = np.zeros(5)
    np.add.at(want, idx, 2 * v[idx])
    np.testing.assert_allclose(g.compute(scheduler="sync"), want, rtol=1e-14)


def test_a_user_primitive_differentiates_a_dask_array_lazily():
    """``wg.grad`` through a user's primitive on a Dask array: a Dask result, nothing computed until asked."""
    (softplus, _), _ = TABLE["user:softplus"]
    f = lambda x: wnp.sum(softplus(x) * x)
    v = np.linspace(-2.0, 2.0, 6)
    counter = ComputeCounter()
    with counter, dask.config.set(scheduler="sync"):
        g = wg.grad(f)(da.from_array(v, chunks=3))
    assert isinstance(g, da.Array) and counter.computes == 0
    np.testing.assert_allclose(g.compute(scheduler="sync"), wg.grad(f)(v), rtol=1e-14)


def test_a_user_rule_of_the_wrong_shape_on_dask_is_refused_by_name():
    summed = wg.primitive(lambda x: np.sin(x), name="sine_summed")
    wg.defvjp(summed, lambda g, out, x: wnp.sum(g * wnp.cos(x)))  # the sum: not x's shape
    with pytest.raises(ValueError, match=r"the VJP rule of primitive 'sine_summed' for argument 0 returned "
                                         r"shape \(\), but the argument has shape \(4,\)"):
        wg.grad(lambda x: wnp.sum(summed(x)))(da.from_array(np.arange(4.0), chunks=2))


def test_a_user_rule_returning_a_list_on_dask_is_refused_by_name():
    listed = wg.primitive(lambda x: np.sin(x), name="sine_listed")
    wg.defvjp(listed, lambda g, out, x: [1.0, 1.0, 1.0, 1.0])
    with pytest.raises(TypeError, match=r"the VJP rule of primitive 'sine_listed' for argument 0 returned "
                                        r"list .*; return an array or a number"):
        wg.grad(lambda x: wnp.sum(listed(x)))(da.from_array(np.arange(4.0), chunks=2))
