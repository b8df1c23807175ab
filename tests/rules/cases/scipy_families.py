"""Rule-table cases for the SciPy families (special functions, scipy linalg, signal, odeint) and
the composed functions of ``wengert.scipy``. Empty when SciPy is not installed (the families are
then left out of the rule table too)."""

import numpy as np

from tests.support.rule_helpers import R, binary, unary

try:
    import scipy  # noqa: F401
except ModuleNotFoundError:  # pragma: no cover - SciPy is in the test extra
    CASES, COMPOSED = {}, {}
else:
    import wengert.numpy as wnp
    from wengert.rules import scipy_linalg, signal
    from wengert.rules import special as S
    from wengert.scipy import _odeint as integrate
    from wengert.scipy import linalg as wsl
    from wengert.scipy import special as wss
    from wengert.scipy import stats

    def _spd(n, seed):
        m = np.random.default_rng(seed).uniform(-1, 1, (n, n))
        return m @ m.T + n * np.eye(n)

    def _lower(n, seed):
        return np.tril(np.random.default_rng(seed).uniform(-1, 1, (n, n))) + 2.0 * np.eye(n)

    def _decay(y, t, k, A):
        return -k * y + wnp.tanh(A @ y) * t

    _ODE_T = np.array([0.0, 0.4, 1.0])
    _ODE_OPTS = dict(rtol=1e-10, atol=1e-10, hmax=0.02)  # hmax: steps that do not jump under FD

    CASES = {
        "erf": unary(S.erf),
        "erfc": unary(S.erfc),
        "erfinv": unary(S.erfinv, -0.8, 0.8),
        "erfcinv": unary(S.erfcinv, 0.2, 1.8),
        "ndtr": unary(S.ndtr, -2.0, 2.0),
        "log_ndtr": unary(S.log_ndtr, -4.0, 2.0),
        "ndtri": unary(S.ndtri, 0.1, 0.9),
        "polygamma": [(lambda x: S.polygamma(1, x), (R(3, lo=0.5, hi=2.0),)),
                      (lambda x: S.polygamma(np.array([0, 1, 2]), x), (R(2, 3, lo=0.5, hi=2.0),)),
                      (lambda x: S.polygamma(0, x), (R(lo=0.5, hi=2.0),))],
        "digamma": unary(S.digamma, 0.5, 2.5),
        "gamma": unary(S.gamma, 0.5, 2.5) + [(S.gamma, (np.array([-0.5, -1.5]),))],
        "gammaln": unary(S.gammaln, 0.5, 2.5),
        "rgamma": unary(S.rgamma, 0.5, 2.5),
        "gammainc": [(lambda x: S.gammainc(2.5, x), (R(3, lo=0.3, hi=2.0),)),
                     (lambda x: S.gammainc(np.array([0.7, 1.0, 3.0]), x), (R(2, 3, lo=0.3, hi=2.0),))],
        "gammaincc": [(lambda x: S.gammaincc(1.5, x), (R(3, lo=0.3, hi=2.0),)),
                      (lambda x: S.gammaincc(np.array([[0.7], [2.0]]), x), (R(lo=0.3, hi=2.0),))],
        "beta": binary(S.beta, lo=0.5, hi=2.0),
        "betaln": binary(S.betaln, lo=0.5, hi=2.0),
        "betainc": [(lambda x: S.betainc(2.0, 3.0, x), (R(3, lo=0.1, hi=0.9),)),
                    (lambda x: S.betainc(np.array([0.5, 2.0]), 1.5, x), (R(3, 2, lo=0.1, hi=0.9),))],
        "stdtr": [(lambda t: S.stdtr(3.5, t), (R(3, lo=-2.0, hi=2.0),)),
                  (lambda t: S.stdtr(np.array([1.0, 10.0]), t), (R(lo=-2.0, hi=2.0),))],
        "expit": unary(S.expit, -3.0, 3.0),
        "logit": unary(S.logit, 0.1, 0.9),
        "xlogy": binary(S.xlogy, lo=0.5, hi=2.0) + [(lambda y: S.xlogy(0.0, y), (R(3, lo=0.5, hi=2.0),))],
        "xlog1py": binary(S.xlog1py, lo=0.1, hi=1.0),
        "iv": [(lambda x: S.iv(1.5, x), (R(3, lo=0.5, hi=2.0),)),
               (lambda x: S.iv(np.array([0.0, 1.0, 2.5]), x), (R(2, 3, lo=0.5, hi=2.0),))],
        "jv": [(lambda x: S.jv(2.5, x), (R(3, lo=0.5, hi=3.0),)),
               (lambda x: S.jn(np.array([0, 1, 3]), x), (R(2, 3, lo=0.5, hi=3.0),))],
        "yn": [(lambda x: S.yn(1, x), (R(3, lo=0.5, hi=3.0),)),
               (lambda x: S.yn(np.array([0, 2]), x), (R(3, 2, lo=0.5, hi=3.0),))],
        "i0": unary(S.i0, -2.0, 2.0),
        "i1": unary(S.i1, -2.0, 2.0),
        "j0": unary(S.j0, -3.0, 3.0),
        "j1": unary(S.j1, -3.0, 3.0),
        "y0": unary(S.y0, 0.5, 3.0),
        "y1": unary(S.y1, 0.5, 3.0),
        "scipy_solve_triangular": [
            (lambda a, b: scipy_linalg.solve_triangular(a, b, lower=True), (_lower(3, 1), R(3, 2))),
            (lambda a, b: scipy_linalg.solve_triangular(a, b, lower=False), (_lower(3, 2).T, R(3))),
            (lambda a, b: scipy_linalg.solve_triangular(a, b, trans=1, lower=True), (_lower(3, 3), R(3))),
            (lambda a, b: scipy_linalg.solve_triangular(a, b, trans=1, lower=False, unit_diagonal=True),
             (_lower(3, 4).T, R(3, 2))),
        ],
        "cholesky_lower": [(scipy_linalg.cholesky_lower, (_spd(3, 5),)),
                           (scipy_linalg.cholesky_lower, (_spd(1, 6),))],
        "solve_sylvester": [(scipy_linalg.solve_sylvester, (_spd(3, 7), _spd(2, 8), R(3, 2)))],
        "expm": [(scipy_linalg.expm, (R(3, 3),)), (scipy_linalg.expm, (R(1, 1),))],
        "sqrtm": [(scipy_linalg.sqrtm, (_spd(3, 9),))],
        "scipy_convolve": [
            (lambda a, b: signal.convolve(a, b), (R(5), R(3))),
            (lambda a, b: signal.convolve(a, b, mode="valid"), (R(3), R(5))),
            (lambda a, b: signal.convolve(a, b, mode="same"), (R(4), R(3))),
            (lambda a, b: signal.convolve(a, b, mode="same"), (R(3, 4), R(2, 3))),
            (lambda a, b: signal.convolve(a, b, mode="valid"), (R(2, 3, 4), R(2, 2, 2))),
        ],
        "odeint": [
            (lambda y0, t, k, A: integrate.odeint(_decay, y0, t, k, A, **_ODE_OPTS),
             (np.array([1.0, -0.5]), _ODE_T, 0.7, R(2, 2))),
        ],
    }

    COMPOSED = {
        "scipy.special.logsumexp": [
            (wss.logsumexp, (R(2, 3),)),
            (lambda a: wss.logsumexp(a, axis=1, keepdims=True), (R(2, 3),)),
            (lambda a, b: wss.logsumexp(a, axis=0, b=b), (R(2, 3), R(3, lo=0.5, hi=1.0))),
        ],
        "scipy.special.softmax": [(lambda x: wss.softmax(x, axis=-1), (R(2, 3),))],
        "scipy.special.log_softmax": [(lambda x: wss.log_softmax(x, axis=0), (R(3, 2),))],
        "scipy.special.multigammaln": [(lambda a: wss.multigammaln(a, 3), (R(2, lo=1.5, hi=3.0),))],
        "scipy.linalg.cho_solve": [
            (lambda a, b: wsl.cho_solve(wsl.cho_factor(a), b), (_spd(3, 10), R(3))),
            (lambda a, b: wsl.cho_solve(wsl.cho_factor(a, lower=True), b), (_spd(3, 11), R(3, 2))),
        ],
        "scipy.linalg.block_diag": [(lambda a, b, c: wsl.block_diag(a, b, c), (R(2, 2), R(3), R()))],
        "scipy.stats.norm": [
            (lambda x, m, s: stats.norm.logpdf(x, m, s), (R(3), R(), R(lo=0.5, hi=2.0))),
            (lambda x, m, s: stats.norm.cdf(x, m, s), (R(3), R(), R(lo=0.5, hi=2.0))),
            (lambda x, m, s: stats.norm.logcdf(x, loc=m, scale=s), (R(3), R(), R(lo=0.5, hi=2.0))),
            (lambda x, m, s: stats.norm.logsf(x, loc=m, scale=s), (R(3), R(), R(lo=0.5, hi=2.0))),
            (lambda q, m, s: stats.norm.ppf(q, m, s), (R(3, lo=0.1, hi=0.9), R(), R(lo=0.5, hi=2.0))),
        ],
        "scipy.stats.t": [
            (lambda x, df, s: stats.t.logpdf(x, df, 0.2, s), (R(3), R(lo=1.0, hi=5.0), R(lo=0.5, hi=2.0))),
            (lambda x, m, s: stats.t.cdf(x, 2.5, m, s), (R(3), R(), R(lo=0.5, hi=2.0))),
            (lambda x, m, s: stats.t.sf(x, 2.5, m, s), (R(3), R(), R(lo=0.5, hi=2.0))),
        ],
        "scipy.stats.gamma": [
            (lambda x, a, s: stats.gamma.logpdf(x, a, 0.1, s),
             (R(3, lo=0.5, hi=2.0), R(lo=1.5, hi=3.0), R(lo=0.5, hi=2.0))),
            (lambda x, s: stats.gamma.cdf(x, 2.0, scale=s), (R(3, lo=0.5, hi=2.0), R(lo=0.5, hi=2.0))),
            (lambda x, s: stats.gamma.logsf(x, 2.0, scale=s), (R(3, lo=0.5, hi=2.0), R(lo=0.5, hi=2.0))),
        ],
        "scipy.stats.beta": [
            (lambda x, a, b: stats.beta.logpdf(x, a, b), (R(3, lo=0.1, hi=0.9), R(lo=1.5, hi=3.0),
                                                           R(lo=1.5, hi=3.0))),
            (lambda x: stats.beta.cdf(x, 2.0, 3.0), (R(3, lo=0.1, hi=0.9),)),
            (lambda x: stats.beta.sf(x, 2.0, 3.0), (R(3, lo=0.1, hi=0.9),)),
        ],
        "scipy.stats.chi2": [
            (lambda x, df: stats.chi2.logpdf(x, df), (R(3, lo=0.5, hi=3.0), R(lo=2.5, hi=5.0))),
            (lambda x: stats.chi2.cdf(x, 3.0), (R(3, lo=0.5, hi=3.0),)),
            (lambda x: stats.chi2.logsf(x, 3.0), (R(3, lo=0.5, hi=3.0),)),
        ],
        "scipy.stats.poisson": [
            (lambda mu: stats.poisson.logpmf(np.array([0, 1, 4]), mu), (R(lo=0.5, hi=3.0),)),
            (lambda mu: stats.poisson.cdf(np.array([0, 2, 5]), mu), (R(3, lo=0.5, hi=3.0),)),
            (lambda mu: stats.poisson.logsf(np.array([0, 2, 5]), mu), (R(3, lo=0.5, hi=3.0),)),
        ],
        "scipy.stats.dirichlet": [
            # x with K - 1 components (the last is 1 - their sum), so perturbations stay on the simplex
            (stats.dirichlet.logpdf, (np.array([0.2, 0.3]), R(3, lo=1.0, hi=3.0))),
            (stats.dirichlet.logpdf, (np.array([[0.2, 0.4], [0.3, 0.1]]), R(3, lo=1.0, hi=3.0))),
            (lambda alpha: stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), alpha), (R(3, lo=1.0, hi=3.0),)),
        ],
        "scipy.stats.multivariate_normal": [
            (stats.multivariate_normal.logpdf, (R(4, 3), R(3), _spd(3, 12))),
            (stats.multivariate_normal.logpdf, (R(3), R(3), R(3, lo=0.5, hi=2.0))),
        ],
    }
