"""wengert.scipy: values against SciPy, derivatives against hand derivations and SciPy's own
derivative functions, errors, and the optional dependency. (Every primitive's derivatives against
finite differences are checked by the rule-table test, ``tests/rules/cases/scipy_families.py``.)"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

scipy = pytest.importorskip("scipy")
import scipy.linalg as sla  # noqa: E402
import scipy.signal as ssig  # noqa: E402
import scipy.special as sps  # noqa: E402
import scipy.stats as sst  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402
from wengert.core.primitive import NoRuleError  # noqa: E402
from wengert.numpy._dispatch import UnsupportedNumpyFunction  # noqa: E402
from wengert.scipy import integrate, linalg, signal, special, stats  # noqa: E402
from wengert.testing import check_grads  # noqa: E402

rng = np.random.default_rng(7)
X = np.array([0.3, 0.7, 1.9])

UNARY = ["erf", "erfc", "gamma", "gammaln", "digamma", "psi", "expit", "i0", "i1", "j0", "j1", "y0",
         "y1", "rgamma", "ndtr", "log_ndtr"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_values_match_scipy(name):
    np.testing.assert_allclose(getattr(special, name)(X), getattr(sps, name)(X), rtol=1e-13)


def test_more_values_match_scipy():
    p = np.array([0.1, 0.5, 0.8])
    np.testing.assert_allclose(special.erfinv(p), sps.erfinv(p))
    np.testing.assert_allclose(special.erfcinv(p), sps.erfcinv(p))
    np.testing.assert_allclose(special.logit(p), sps.logit(p))
    np.testing.assert_allclose(special.ndtri(p), sps.ndtri(p))
    np.testing.assert_allclose(special.polygamma(2, X), sps.polygamma(2, X))
    np.testing.assert_allclose(special.gammainc(1.5, X), sps.gammainc(1.5, X))
    np.testing.assert_allclose(special.gammaincc(1.5, X), sps.gammaincc(1.5, X))
    np.testing.assert_allclose(special.beta(X, 2.5), sps.beta(X, 2.5))
    np.testing.assert_allclose(special.betaln(X, 2.5), sps.betaln(X, 2.5))
    np.testing.assert_allclose(special.xlogy(np.array([0.0, 1.0, 2.0]), X), sps.xlogy([0.0, 1.0, 2.0], X))
    np.testing.assert_allclose(special.xlog1py(2.0, X), sps.xlog1py(2.0, X))
    np.testing.assert_allclose(special.iv(1.5, X), sps.iv(1.5, X))
    np.testing.assert_allclose(special.jn(2, X), sps.jn(2, X))
    np.testing.assert_allclose(special.yn(2, X), sps.yn(2, X))
    np.testing.assert_allclose(special.multigammaln(np.array([3.0, 4.5]), 3),
                               sps.multigammaln(np.array([3.0, 4.5]), 3))


def test_derivatives_match_hand_derivations():
    # d erf = 2/sqrt(pi) e^{-x^2};  d gammaln = digamma;  d J0 = -J1;  d/dx gammainc(a, x) = density.
    np.testing.assert_allclose(wg.elementwise_grad(special.erf)(X), 2 / np.sqrt(np.pi) * np.exp(-X * X))
    np.testing.assert_allclose(wg.elementwise_grad(special.gammaln)(X), sps.digamma(X))
    np.testing.assert_allclose(wg.elementwise_grad(special.j0)(X), -sps.j1(X))
    np.testing.assert_allclose(wg.elementwise_grad(lambda x: special.gammainc(2.0, x))(X), X * np.exp(-X))
    np.testing.assert_allclose(wg.elementwise_grad(special.i0)(X), sps.i1(X))
    np.testing.assert_allclose(wg.elementwise_grad(special.expit)(X), sps.expit(X) * sps.expit(-X))


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 1), False)])
def test_logsumexp_matches_scipy(axis, keepdims):
    a = rng.normal(size=(3, 4))
    b = rng.uniform(0.5, 1.0, size=(4,))
    np.testing.assert_allclose(special.logsumexp(a, axis=axis, keepdims=keepdims),
                               sps.logsumexp(a, axis=axis, keepdims=keepdims))
    np.testing.assert_allclose(special.logsumexp(a, axis=axis, b=b, keepdims=keepdims),
                               sps.logsumexp(a, axis=axis, b=b, keepdims=keepdims))


def test_logsumexp_extremes_and_sign():
    a = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]])
    np.testing.assert_allclose(special.logsumexp(a, axis=1), sps.logsumexp(a, axis=1))
    g = wg.grad(lambda x: special.logsumexp(x))(np.array([1000.0, 1000.0]))
    np.testing.assert_allclose(g, [0.5, 0.5])
    b = np.array([1.0, -2.0, 0.5])
    a = np.array([0.1, 0.2, 0.3])
    ours, sign = special.logsumexp(a, b=b, return_sign=True)
    theirs, their_sign = sps.logsumexp(a, b=b, return_sign=True)
    np.testing.assert_allclose(ours, theirs)
    assert sign == their_sign


def test_shape_parameter_derivatives_raise_naming_the_argument():
    with pytest.raises(NoRuleError, match="gammainc.*argument 0"):
        wg.grad(lambda a: special.gammainc(a, 1.0))(2.0)
    with pytest.raises(NoRuleError, match="iv.*argument 0"):
        wg.grad(lambda v: special.iv(v, 1.0))(1.5)
    with pytest.raises(NoRuleError, match="stdtr.*argument 0"):
        wg.grad(lambda df: stats.t.cdf(0.3, df))(3.0)
    with pytest.raises(ValueError, match="condition a"):
        special.multigammaln(0.5, 3)


def test_scipy_ufuncs_on_traced_values_dispatch():
    f = lambda x: np.sum(sps.erf(x) * sps.gammaln(x) + sps.xlogy(x, x))  # noqa: E731
    g = wg.grad(f)(X)
    expected = (2 / np.sqrt(np.pi) * np.exp(-X * X) * sps.gammaln(X) + sps.erf(X) * sps.digamma(X)
                + np.log(X) + 1.0)
    np.testing.assert_allclose(g, expected)
    check_grads(f, X, modes=("fwd", "rev"), order=2)


def test_scipy_ufunc_without_rule_is_named():
    with pytest.raises(UnsupportedNumpyFunction, match=r"scipy\.special\.kv was called"):
        wg.grad(lambda x: np.sum(sps.kv(1.0, x)))(X)


@pytest.mark.parametrize("call,name", [
    (lambda x: sps.logsumexp(x), "scipy.special.logsumexp"),
    (lambda x: sla.expm(x), "scipy.linalg.expm"),
    (lambda x: sla.solve_triangular(x, np.ones(2)), "scipy.linalg.solve_triangular"),
    (lambda x: ssig.convolve(x, np.ones((2, 2))), "scipy.signal.convolve"),
], ids=["logsumexp", "expm", "solve_triangular", "convolve"])
def test_scipy_function_on_traced_value_is_named(call, name):
    with pytest.raises(UnsupportedNumpyFunction, match=rf"{name} was called on a traced.*wengert\.scipy"):
        wg.grad(lambda x: wnp.sum(call(x)))(np.eye(2))


# -- stats ---------------------------------------------------------------------------------------

CONT = [
    ("norm", (0.3, 1.7), lambda u: 3 * u - 1),
    ("t", (3.5, 0.3, 1.7), lambda u: 3 * u - 1),
    ("gamma", (2.5, 0.1, 1.7), lambda u: 3 * u - 0.5),
    ("chi2", (3.5, 0.1, 1.7), lambda u: 3 * u - 0.5),
    ("beta", (2.5, 1.5, 0.1, 0.9), lambda u: 1.6 * u - 0.3),
]


@pytest.mark.parametrize("name,params,make", CONT, ids=[c[0] for c in CONT])
@pytest.mark.parametrize("fn", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"])
def test_continuous_stats_match_scipy(name, params, make, fn):
    x = make(np.linspace(0.05, 0.95, 7))  # inside and outside the support
    with np.errstate(divide="ignore"):
        ours = getattr(getattr(stats, name), fn)(x, *params)
    np.testing.assert_allclose(ours, getattr(getattr(sst, name), fn)(x, *params), rtol=1e-10)


def test_norm_quantiles_match_scipy():
    q = np.array([0.05, 0.5, 0.9])
    np.testing.assert_allclose(stats.norm.ppf(q, 0.3, 2.0), sst.norm.ppf(q, 0.3, 2.0))
    np.testing.assert_allclose(stats.norm.isf(q, 0.3, 2.0), sst.norm.isf(q, 0.3, 2.0))
    # d ppf / dq = 1 / pdf(ppf(q))
    np.testing.assert_allclose(wg.elementwise_grad(stats.norm.ppf)(q), 1 / sst.norm.pdf(sst.norm.ppf(q)))


def test_discrete_and_multivariate_stats_match_scipy():
    k = np.array([-1, 0, 1, 2.5, 3, 7])
    with np.errstate(divide="ignore"):
        for fn in ("pmf", "logpmf", "cdf", "logcdf", "sf", "logsf"):
            np.testing.assert_allclose(getattr(stats.poisson, fn)(k, 2.5), getattr(sst.poisson, fn)(k, 2.5))
    x = rng.dirichlet([1, 2, 3], size=4).T
    alpha = np.array([1.5, 2.0, 3.0])
    np.testing.assert_allclose(stats.dirichlet.logpdf(x, alpha), sst.dirichlet.logpdf(x, alpha))
    np.testing.assert_allclose(stats.dirichlet.pdf(x[:2], alpha), sst.dirichlet.pdf(x[:2], alpha))
    m = rng.uniform(-1, 1, (3, 3))
    cov = m @ m.T + np.eye(3)
    mean = rng.uniform(size=3)
    y = rng.normal(size=(2, 2, 3))
    for args in [(y, mean, cov), (y[0, 0], mean, cov), (y, mean, np.array([1.0, 2.0, 3.0])),
                 (y[:, 0, 0], 0.5, 2.0)]:
        np.testing.assert_allclose(stats.multivariate_normal.logpdf(*args),
                                   sst.multivariate_normal.logpdf(*args))
    np.testing.assert_allclose(stats.multivariate_normal.pdf(y, mean, cov),
                               sst.multivariate_normal.pdf(y, mean, cov))


def test_stats_gradients_match_hand_derivations():
    x, loc, scale = 0.7, -0.2, 1.3
    z = (x - loc) / scale
    g = wg.grad(stats.norm.logpdf, argnums=(0, 1, 2))(x, loc, scale)
    np.testing.assert_allclose(g, [-z / scale, z / scale, -1 / scale + z * z / scale])
    # d/dmu log Poisson(k; mu) = k / mu - 1;  d/dmu cdf(k; mu) = -pmf(k; mu)
    np.testing.assert_allclose(wg.grad(lambda mu: stats.poisson.logpmf(3, mu))(2.0), 3 / 2.0 - 1)
    np.testing.assert_allclose(wg.grad(lambda mu: stats.poisson.cdf(3, mu))(2.0), -sst.poisson.pmf(3, 2.0))
    # gradient of the Gaussian log-density in the mean: cov^-1 (x - mean)
    m = rng.uniform(-1, 1, (3, 3))
    cov = m @ m.T + np.eye(3)
    x, mean = rng.normal(size=3), rng.normal(size=3)
    np.testing.assert_allclose(wg.grad(stats.multivariate_normal.logpdf, argnums=1)(x, mean, cov),
                               np.linalg.solve(cov, x - mean))
    # ... and its Hessian (forward over reverse, through the Cholesky rules): -cov^-1
    np.testing.assert_allclose(wg.hessian(lambda m: stats.multivariate_normal.logpdf(x, m, cov))(mean),
                               -np.linalg.inv(cov), atol=1e-12)


def test_stats_errors():
    with pytest.raises(TypeError, match="'k' is discrete"):
        wg.grad(lambda k: stats.poisson.logpmf(k, 2.0))(3.0)
    with pytest.raises(ValueError, match="normal simplex"):
        stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.6]), np.ones(3))
    with pytest.raises(NotImplementedError, match="allow_singular"):
        stats.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), np.eye(2), allow_singular=True)
    with pytest.raises(NotImplementedError, match="numerical integration"):
        stats.multivariate_normal.cdf(np.zeros(2), np.zeros(2), np.eye(2))


# -- linalg --------------------------------------------------------------------------------------


def _spd(n):
    m = rng.uniform(-1, 1, (n, n))
    return m @ m.T + n * np.eye(n)


@pytest.mark.parametrize("trans", [0, 1, "T", 2])
@pytest.mark.parametrize("lower", [True, False])
def test_solve_triangular_matches_scipy(trans, lower):
    a = np.tril(rng.uniform(-1, 1, (4, 4))) + 2 * np.eye(4)
    a = a if lower else a.T
    b = rng.normal(size=(4, 2))
    for unit in (False, True):
        options = dict(trans=trans, lower=lower, unit_diagonal=unit)
        np.testing.assert_allclose(linalg.solve_triangular(a, b, **options),
                                   sla.solve_triangular(a, b, **options))


def test_linalg_values_match_scipy():
    s = _spd(4)
    b = rng.normal(size=4)
    for lower in (True, False):
        np.testing.assert_allclose(linalg.cholesky(s, lower=lower), sla.cholesky(s, lower=lower))
        np.testing.assert_allclose(linalg.cho_solve(linalg.cho_factor(s, lower=lower), b),
                                   sla.cho_solve(sla.cho_factor(s, lower=lower), b))
    np.testing.assert_allclose(linalg.cho_solve(sla.cho_factor(s), b), np.linalg.solve(s, b))
    a = rng.normal(size=(3, 3))
    np.testing.assert_allclose(linalg.expm(a), sla.expm(a))
    np.testing.assert_allclose(linalg.sqrtm(s), sla.sqrtm(s))
    q = rng.normal(size=(4, 3))
    b3 = _spd(3)
    np.testing.assert_allclose(linalg.solve_sylvester(s, b3, q), sla.solve_sylvester(s, b3, q))
    blocks = (np.ones((2, 2)), [1.0, 2.0, 3.0], 4.0, np.ones((0, 2)))
    np.testing.assert_allclose(linalg.block_diag(*blocks), sla.block_diag(*blocks))


def test_expm_derivative_is_scipys_frechet_derivative():
    a, e = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    _, tangent = wg.jvp(linalg.expm, (a,), (e,))
    np.testing.assert_allclose(tangent, sla.expm_frechet(a, e, compute_expm=False), rtol=1e-10)


def test_sqrtm_derivative_solves_the_sylvester_equation():
    s, e = _spd(3), rng.normal(size=(3, 3))
    root, tangent = wg.jvp(linalg.sqrtm, (s,), (e,))
    np.testing.assert_allclose(root @ tangent + tangent @ root, e, atol=1e-12)


def test_cholesky_gradient_is_symmetric_and_matches_logdet():
    s = _spd(3)
    g = wg.grad(lambda a: 2 * wnp.sum(wnp.log(linalg.cholesky(a, lower=True)[np.arange(3), np.arange(3)])))(s)
    np.testing.assert_allclose(g, np.linalg.inv(s), rtol=1e-10)  # d logdet = inv(S) for symmetric S


def test_linalg_errors():
    with pytest.raises(ValueError, match="trans"):
        linalg.solve_triangular(np.eye(2), np.ones(2), trans="X")
    with pytest.raises(ValueError, match="square 2-D"):
        linalg.expm(np.ones((2, 3)))


# -- signal --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "valid", "same"])
@pytest.mark.parametrize("s1,s2", [((7,), (3,)), ((3,), (6,)), ((4, 5), (2, 3)), ((3, 4, 2), (2, 2, 2))])
def test_convolve_matches_scipy(mode, s1, s2):
    a, b = rng.normal(size=s1), rng.normal(size=s2)
    np.testing.assert_allclose(signal.convolve(a, b, mode=mode), ssig.convolve(a, b, mode=mode), atol=1e-12)


def test_convolve_gradient_is_a_correlation():
    a, b = rng.normal(size=6), rng.normal(size=3)
    g = rng.normal(size=8)
    _, back = wg.vjp(signal.convolve, a, b)
    np.testing.assert_allclose(back(g)[0], np.correlate(g, b, mode="valid"))
    with pytest.raises(ValueError, match="mode"):
        signal.convolve(a, b, mode="circular")


# -- integrate -------------------------------------------------------------------------------------

OPTS = dict(rtol=1e-11, atol=1e-12)


def _decay(y, t, k):
    return -k * y


def test_odeint_matches_closed_form_and_its_derivatives():
    t = np.array([0.0, 0.5, 1.2, 2.0])
    y0, k = np.array([1.0, -2.0]), 0.8
    out = integrate.odeint(_decay, y0, t, args=(k,), **OPTS)
    np.testing.assert_allclose(out, y0 * np.exp(-k * t)[:, None], rtol=1e-8)
    loss = lambda y0, t, k: wnp.sum(integrate.odeint(_decay, y0, t, args=(k,), **OPTS))  # noqa: E731
    g_y0, g_t, g_k = wg.grad(loss, argnums=(0, 1, 2))(y0, t, k)
    decay = np.exp(-k * (t - t[0]))
    np.testing.assert_allclose(g_y0, np.full(2, decay.sum()), rtol=1e-7)
    np.testing.assert_allclose(g_k, np.sum(-(t - t[0]) * decay) * y0.sum(), rtol=1e-7)
    expected_t = -k * y0.sum() * decay
    expected_t[0] = k * y0.sum() * decay[1:].sum()  # moving the start shifts every later value
    np.testing.assert_allclose(g_t, expected_t, rtol=1e-7)
    _, tangent = wg.jvp(lambda k: integrate.odeint(_decay, y0, t, args=(k,), **OPTS), (k,), (1.0,))
    np.testing.assert_allclose(tangent, -(t * np.exp(-k * t))[:, None] * y0, rtol=1e-7, atol=1e-12)


def test_odeint_second_derivative_matches_closed_form():
    t = np.array([0.0, 1.5])
    f = lambda k: integrate.odeint(_decay, np.array([2.0]), t, args=(k,), **OPTS)[1, 0]  # noqa: E731
    np.testing.assert_allclose(wg.grad(wg.grad(f))(0.6), 2.0 * 1.5 ** 2 * np.exp(-0.6 * 1.5), rtol=1e-6)


def test_odeint_with_non_float_args():
    # y' = -k y^n, n = 2 (an int): y(1) = 1 / (1 / y0 + k)
    f = lambda y, t, k, n: -k * y ** n  # noqa: E731
    t = np.array([0.0, 1.0])
    end = lambda y0, k: integrate.odeint(f, y0, t, args=(k, 2), **OPTS)[-1, 0]  # noqa: E731
    g_y0, g_k = wg.grad(end, argnums=(0, 1))(np.array([1.0]), 0.5)
    np.testing.assert_allclose(g_k, -1 / 1.5 ** 2, rtol=1e-7)
    np.testing.assert_allclose(g_y0, [1 / 1.5 ** 2], rtol=1e-7)


def test_odeint_tfirst_and_unsupported_options():
    t = np.array([0.0, 1.0])
    out = integrate.odeint(lambda t, y: -y, 1.0, t, tfirst=True, **OPTS)
    np.testing.assert_allclose(out[:, 0], np.exp(-t), rtol=1e-8)
    with pytest.raises(NotImplementedError, match="full_output"):
        integrate.odeint(_decay, np.ones(1), t, args=(1.0,), full_output=1)


# -- the optional dependency ---------------------------------------------------------------------------


def test_without_scipy_wengert_works_and_wengert_scipy_says_how_to_install():
    code = textwrap.dedent("""
        import sys

        class NoScipy:
            def find_spec(self, name, path=None, target=None):
                if name == "scipy" or name.startswith("scipy."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, NoScipy())
        import numpy as np
        import wengert as wg
        from wengert.rules import rule_table
        assert "erf" not in rule_table() and "sin" in rule_table()
        assert wg.grad(lambda x: np.sum(np.sin(x)))(np.zeros(2)).tolist() == [1.0, 1.0]
        try:
            import wengert.scipy
        except ImportError as e:
            print(e)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "needs SciPy" in result.stdout and "pip install scipy" in result.stdout
