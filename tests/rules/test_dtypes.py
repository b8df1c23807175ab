"""float32 stays float32: every case of the systematic rule table, run in single precision.

Each case of ``test_rule_table`` (the primitives and the composed functions, every family) is run
with its float64 inputs cast to float32 (complex128 to complex64, Python floats to ``np.float32``).
Then, for every output and every input:

- the value is single precision, unless the case is listed: in ``PROMOTED_BY_THE_CASE`` (it mixes in
  a float64 constant) or in ``DOUBLE_IN_NUMPY`` (NumPy or SciPy itself returns double there, as a
  test here checks); a listed case that turns single fails, so the lists stay true;
- the VJP (the gradient) has the dtype of its input, and the JVP tangent the dtype of its output,
  always: a derivative never changes the precision the user chose;
- the second derivative (forward over reverse) has its input's dtype too;
- value, VJP and JVP agree with the float64 run to single-precision tolerance.
"""

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as stats
from scipy.integrate import odeint

from tests.rules.test_rule_table import CASES, COMPOSED
from wengert.api.transforms import jvp, vjp
from wengert.api.tree import tree_flatten, tree_unflatten

SINGLE = {np.dtype(np.float64): np.float32, np.dtype(np.complex128): np.complex64}

X32 = np.array([0.5, 1.25, 2.0], dtype=np.float32)

PROMOTED_BY_THE_CASE = {
    # case id -> the float64 constant the case itself mixes in (NumPy promotes: a double value is right)
    "astype-0": "casts to float64",
    "astype complex-0": "casts to complex128",
    "broadcast_to complex-0": "multiplies by np.ones((2, 3)), float64",
    "fft.roundtrip-0": "multiplies by np.arange(4.0), float64",
    "full_like-0": "fills like np.zeros((2, 2)), float64",
    "gammainc-1": "a float64 array of shape parameters",
    "gammaincc-1": "a float64 array of shape parameters",
    "betainc-1": "a float64 array of parameters",
    "iv-1": "a float64 array of orders",
    "ive-1": "a float64 array of orders",
    "scipy.stats.multivariate_normal.entropy-0": "a float64 identity added",
    "jv-1": "a float64 array of orders",
    "stdtr-1": "a float64 array of degrees of freedom",
    "linalg.adjugate_jvp-2": "a float64 matrix",
    "scipy.stats.dirichlet-2": "a float64 x",
}

DOUBLE_IN_NUMPY = {
    # case id -> NumPy's or SciPy's own call on float32 input, which returns double: wengert's value
    # follows it (its derivatives still have their argument's and value's dtypes)
    "diff-2": lambda: np.diff(X32, prepend=0.5),
    "fft.fftfreq-0": lambda: np.fft.fftfreq(5, X32[0]),
    "fft.rfftfreq-0": lambda: np.fft.rfftfreq(6, X32[0]),
    "float_power-0": lambda: np.float_power(X32, X32),
    "quantile-0": lambda: np.quantile(X32, [0.3, 0.5]),
    "gammainc-0": lambda: sp.gammainc(2.5, X32),
    "gammaincc-0": lambda: sp.gammaincc(1.5, X32),
    "polygamma-0": lambda: sp.polygamma(1, X32),
    "polygamma-1": lambda: sp.polygamma(np.array([0, 1, 2]), X32),
    "polygamma-2": lambda: sp.polygamma(0, X32[0]),
    "yn-0": lambda: sp.yn(1, X32),
    "yn-1": lambda: sp.yn(np.array([0, 2]), X32[:, None]),
    "xlogy-6": lambda: sp.xlogy(0.0, X32),
    "odeint-0": lambda: odeint(lambda y, t: -y, X32[:1], X32),
    "scipy.stats.chi2-1": lambda: stats.chi2.cdf(X32, 3.0),
    "scipy.stats.chi2-2": lambda: stats.chi2.logsf(X32, 3.0),
    "scipy.stats.gamma-1": lambda: stats.gamma.cdf(X32, 2.0, scale=X32[0]),
    "scipy.stats.gamma-2": lambda: stats.gamma.logsf(X32, 2.0, scale=X32[0]),
    "scipy.stats.poisson-0": lambda: stats.poisson.logpmf(np.array([0, 1, 4]), X32[1]),
    "scipy.stats.poisson-1": lambda: stats.poisson.cdf(np.array([0, 2, 5]), X32),
    "scipy.stats.poisson-2": lambda: stats.poisson.logsf(np.array([0, 2, 5]), X32),
    "interp-0": lambda: np.interp(X32, X32[:2] * 0 + [0, 1], X32[:2]),
    "interp-1": lambda: np.interp(0.2, [0.0, 1.0], X32[:2]),
    "interp-2": lambda: np.interp(X32[:2], [0.0, 1.0], [0.5, 1.0]),
    "polyfit-0": lambda: np.polyfit(X32[:3], X32[:3] ** 2, 1),
    "polyfit-1": lambda: np.polyfit(np.linspace(0, 1, 3), X32[:3], 1, w=X32[:3] ** 2 + 1),
}
WIDENED_VALUE = set(PROMOTED_BY_THE_CASE) | set(DOUBLE_IN_NUMPY)


@pytest.mark.parametrize("case", sorted(DOUBLE_IN_NUMPY))
def test_numpy_itself_computes_these_in_double(case):
    assert np.result_type(DOUBLE_IN_NUMPY[case]()) == np.float64


def _single(x):
    if type(x) is float:
        return np.float32(x)
    if type(x) is complex:
        return np.complex64(x)
    if isinstance(x, np.ndarray) and x.dtype in SINGLE:
        return x.astype(SINGLE[x.dtype])
    return x


def _leaves(tree):
    return tree_flatten(tree)[0]


def _dtype(x):
    return np.result_type(x) if not isinstance(x, (float, complex)) else np.dtype(type(x))


def _random_like(tree, rng, single):
    leaves, treedef = tree_flatten(tree)
    out = []
    for x in leaves:
        x = np.asarray(x)
        r = rng.standard_normal(x.shape)
        if x.dtype.kind == "c":
            r = r + 1j * rng.standard_normal(x.shape)
        if x.dtype.kind not in "fc":
            r = np.zeros(x.shape)
        r = r.astype(x.dtype) if single else r
        out.append(r)
    return tree_unflatten(treedef, out)


def _run(fun, args, single):
    rng = np.random.default_rng(0)
    args = tuple(_cast_tree(a) for a in args) if single else args
    v = tuple(_random_like(a, rng, single) for a in args)
    out, back = vjp(fun, *args)
    u = _random_like(out, rng, single)
    grads = back(u)
    _, tangent = jvp(fun, args, v)
    if single:  # second order: forward over reverse (a Hessian-vector product) keeps the dtype too
        _, second = jvp(lambda *xs: vjp(fun, *xs)[1](u), args, v)
        return args, out, grads, tangent, second
    return args, out, grads, tangent


def _cast_tree(a):
    leaves, treedef = tree_flatten(a)
    return tree_unflatten(treedef, [_single(x) for x in leaves])


def _close(got, want, what):
    got, want = np.asarray(got, dtype=np.result_type(want, np.float64)), np.asarray(want)
    beyond = np.abs(want) > np.finfo(np.float32).max  # e.g. nan_to_num's largest float64
    got, want = np.where(beyond, 0.0, got), np.where(beyond, 0.0, want)
    scale = max(np.max(np.abs(want), initial=0.0), 1.0)
    err = np.max(np.abs(got - want), initial=0.0)
    assert err <= 2e-3 * scale, (
        f"{what}: single precision differs from double by {err:.3g} (scale {scale:.3g})")


TABLES = {"CASES": CASES, "COMPOSED": COMPOSED}
ALL = [pytest.param(table, name, i, id=f"{name}-{i}")
       for table, cases in TABLES.items() for name in sorted(cases) for i in range(len(cases[name]))]


@pytest.mark.parametrize("table,name,i", ALL)
def test_single_precision_stays_single(table, name, i):
    fun, args = TABLES[table][name][i]
    case = f"{name}-{i}"
    args32, out32, grads32, tangent32, second32 = _run(fun, args, single=True)
    _, out64, grads64, tangent64 = _run(fun, args, single=False)
    bad = []
    doubles = [_dtype(o) in (np.float64, np.complex128, np.longdouble) for o in _leaves(out32)]
    if case in WIDENED_VALUE:
        assert any(doubles), f"{case} is listed as a double-precision value but now gives single: unlist it"
    else:
        bad.extend(f"value {k} is {_dtype(o)}" for k, o in enumerate(_leaves(out32)) if doubles[k])
    for k, (t, o) in enumerate(zip(_leaves(tangent32), _leaves(out32))):
        if _dtype(o).kind in "fc" and _dtype(t) != _dtype(o):
            bad.append(f"JVP tangent {k} is {_dtype(t)} for a {_dtype(o)} value")
    for k, (g, h, a) in enumerate(zip(_leaves(grads32), _leaves(second32), _leaves(args32))):
        if _dtype(a).kind in "fc" and _dtype(g) != _dtype(a):
            bad.append(f"VJP {k} is {_dtype(g)} for a {_dtype(a)} input")
        if _dtype(a).kind in "fc" and _dtype(h) != _dtype(a):
            bad.append(f"second derivative (JVP of the VJP) {k} is {_dtype(h)} for a {_dtype(a)} input")
    assert not bad, f"{case}: " + "; ".join(bad)
    for what, a, b in (("value", out32, out64), ("VJP", grads32, grads64), ("JVP", tangent32, tangent64)):
        for x, y in zip(_leaves(a), _leaves(b)):
            _close(x, y, f"{case} {what}")
