"""SciPy code brought over unchanged: module paths as HIPS autograd has them, and the functions
added for it, checked against SciPy's values, finite differences and a peer (JAX)."""

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
from tests.support.examples import load_example
from wengert.testing import check_grads

scipy = pytest.importorskip("scipy")
import scipy.stats as sst  # noqa: E402

from wengert.scipy import stats  # noqa: E402

rng = np.random.default_rng(5)
COV = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.7]])


@pytest.mark.parametrize("name", stats.__all__)
def test_each_distribution_is_a_submodule(name):
    module = importlib.import_module(f"wengert.scipy.stats.{name}")
    assert getattr(stats, name) is module
    for fname in module.__all__:
        assert callable(getattr(module, fname))


def test_multivariate_normal_as_autograd_imports_it():
    import wengert.scipy.stats.multivariate_normal as mvn

    x, mean = rng.standard_normal(3), rng.standard_normal(3)
    np.testing.assert_allclose(mvn.logpdf(x, mean, COV), sst.multivariate_normal.logpdf(x, mean, COV))
    np.testing.assert_allclose(mvn.pdf(x, mean, COV), sst.multivariate_normal.pdf(x, mean, COV))


@pytest.mark.parametrize("cov", [COV, np.array([0.5, 2.0]), 1.7, np.array([[3.0]])],
                         ids=["matrix", "variances", "scalar", "1x1"])
def test_multivariate_normal_entropy_equals_scipys(cov):
    dim = np.shape(cov)[0] if np.ndim(cov) else 1
    theirs = sst.multivariate_normal.entropy(np.zeros(dim), cov if np.ndim(cov) != 1 else np.diag(cov))
    np.testing.assert_allclose(stats.multivariate_normal.entropy(np.zeros(dim), cov), theirs, rtol=1e-13)


def test_multivariate_normal_entropy_gradient():
    f = lambda c: stats.multivariate_normal.entropy(None, c @ c.T + np.eye(3))
    check_grads(f, rng.standard_normal((3, 3)))
    # d/dC (log det C) / 2 = C^{-1} / 2, for a symmetric C
    g = wg.grad(lambda c: stats.multivariate_normal.entropy(None, c))(COV)
    np.testing.assert_allclose((g + g.T) / 2, np.linalg.inv(COV) / 2, rtol=1e-12)
    check_grads(lambda v: stats.multivariate_normal.entropy(None, v), np.array([0.5, 2.0]))


def test_multivariate_normal_entropy_gradient_equals_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def peer(c):  # JAX has no entropy: the formula, with its slogdet
        return 0.5 * (3 * (1 + np.log(2 * np.pi)) + jnp.linalg.slogdet(c)[1])

    ours = wg.grad(lambda c: stats.multivariate_normal.entropy(None, c))(COV)
    np.testing.assert_allclose(ours, np.asarray(jax.grad(peer)(COV)), rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_entropy_is_scipys_for_random_covariances(dim, seed):
    a = np.random.default_rng(seed).standard_normal((dim, dim))
    cov = a @ a.T + 0.5 * np.eye(dim)
    np.testing.assert_allclose(stats.multivariate_normal.entropy(np.zeros(dim), cov),
                               sst.multivariate_normal.entropy(np.zeros(dim), cov), rtol=1e-12)


# -- examples/scipy_minimize.py: scipy.optimize.minimize(fun, x0, jac=True) with wg.value_and_grad --



def test_minimize_example_converges_to_scipys_own_optimum(capsys):
    import scipy.optimize

    example = load_example("scipy_minimize.py")
    params, result = example.main(["--samples", "120"])
    assert result.success and "iterations" in capsys.readouterr().out
    x, y = example.make_data(120, 5, np.random.default_rng(0))
    flat, unravel = wg.tree_ravel(params)
    # the optimum's gradient vanishes, and SciPy's finite-difference run finds the same point
    g = wg.grad(lambda v: example.negative_log_likelihood(unravel(v), x, y))(flat)
    assert np.max(np.abs(g)) < 1e-4
    plain = scipy.optimize.minimize(lambda v: float(example.negative_log_likelihood(unravel(v), x, y)),
                                    np.zeros_like(flat), method="L-BFGS-B")
    np.testing.assert_allclose(flat, plain.x, atol=1e-3)


def test_value_and_grad_on_flat_vectors_equals_autograds():
    autograd = pytest.importorskip("autograd")
    import autograd.numpy as anp

    example = load_example("scipy_minimize.py")
    x, y = example.make_data(30, 3, np.random.default_rng(1))
    v = np.random.default_rng(2).standard_normal(4)
    loss = lambda m: lambda v: m.sum(m.logaddexp(0.0, -(2.0 * y - 1.0) * (x @ v[:3] + v[3]))) / 30
    ours = wg.value_and_grad(loss(wg.numpy))(v)
    theirs = autograd.value_and_grad(loss(anp))(v)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-14)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-13)


# -- special.ive, special.gammasgn, linalg.solve_banded, signal.convolve along axes ---------------

import scipy.linalg as sla  # noqa: E402
import scipy.signal as ssig  # noqa: E402
import scipy.special as ssp  # noqa: E402

from wengert.scipy import linalg as wsl  # noqa: E402
from wengert.scipy import signal as wsig  # noqa: E402
from wengert.scipy import special as wsp  # noqa: E402


def test_ive_values_gradient_and_plain_scipy_dispatch():
    z = np.array([-4.0, -0.5, 0.7, 3.0, 400.0])  # 400: iv overflows, ive does not
    for v in (0.0, 1.0, 2.0):
        np.testing.assert_allclose(wsp.ive(v, z), ssp.ive(v, z), rtol=1e-14)
        slope = wg.grad(lambda z, v=v: wsp.ive(v, z).sum())(z)
        h = 1e-6 * np.maximum(1.0, np.abs(z))
        np.testing.assert_allclose(slope, (ssp.ive(v, z + h) - ssp.ive(v, z - h)) / (2 * h), rtol=1e-6)
    assert np.isfinite(wg.grad(lambda z: wsp.ive(1.0, z))(400.0))
    # scipy.special.ive itself, on a traced value, dispatches to the rule
    np.testing.assert_allclose(wg.grad(lambda z: ssp.ive(1.0, z).sum())(z),
                               wg.grad(lambda z: wsp.ive(1.0, z).sum())(z))


def test_ive_gradient_equals_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.scipy.special as jsp

    z = np.array([-2.0, 0.3, 1.7, 25.0])
    for v, peer in ((0.0, jsp.i0e), (1.0, jsp.i1e)):
        ours = wg.grad(lambda z, v=v: wsp.ive(v, z).sum())(z)
        theirs = np.asarray(jax.grad(lambda z, peer=peer: peer(z).sum())(z))
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_gammasgn_values_and_zero_gradient():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 3.2])
    np.testing.assert_array_equal(wsp.gammasgn(x), ssp.gammasgn(x))
    np.testing.assert_array_equal(wg.grad(lambda x: (wsp.gammasgn(x) * x).sum())(x), ssp.gammasgn(x))
    # gamma = gammasgn * exp(gammaln): the composition's gradient is gamma's (digamma * gamma)
    g = wg.grad(lambda x: (wsp.gammasgn(x) * np.exp(wsp.gammaln(x))).sum())(x)
    np.testing.assert_allclose(g, ssp.digamma(x) * ssp.gamma(x), rtol=1e-12)


def _banded(lower, upper, n, seed):
    ab = np.random.default_rng(seed).standard_normal((lower + upper + 1, n))
    ab[upper] += 5.0
    return ab


def test_solve_banded_equals_scipy_and_the_dense_gradient():
    ab, b = _banded(2, 1, 6, 0), rng.standard_normal((6, 2))
    np.testing.assert_allclose(wsl.solve_banded((2, 1), ab, b), sla.solve_banded((2, 1), ab, b), rtol=1e-12)
    check_grads(lambda ab, b: wsl.solve_banded((2, 1), ab, b), ab, b)
    # the gradient with respect to ab is the dense solve's gradient read on the band
    n = 6
    dense = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if 0 <= 1 + i - j < 4:
                dense[i, j] = ab[1 + i - j, j]
    g_dense = wg.grad(lambda a: wg.numpy.sum(wg.numpy.linalg.solve(a, b) ** 2))(dense)
    g_ab = wg.grad(lambda ab: wg.numpy.sum(wsl.solve_banded((2, 1), ab, b) ** 2))(ab)
    for i in range(n):
        for j in range(n):
            if 0 <= 1 + i - j < 4:
                np.testing.assert_allclose(g_ab[1 + i - j, j], g_dense[i, j], rtol=1e-10)
    assert g_ab[0, 0] == 0.0  # outside the matrix: never read
    with pytest.raises(ValueError, match="l\\+u\\+1"):
        wsl.solve_banded((1, 1), ab, b)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2), st.integers(0, 2), st.integers(3, 6), st.integers(0, 1000))
def test_solve_banded_is_scipys_for_random_bands(lower, upper, n, seed):
    ab, b = _banded(lower, upper, n, seed), np.random.default_rng(seed + 1).standard_normal(n)
    np.testing.assert_allclose(wsl.solve_banded((lower, upper), ab, b),
                               sla.solve_banded((lower, upper), ab, b), rtol=1e-10, atol=1e-12)


def test_convolve_along_axes_equals_autograds():
    pytest.importorskip("autograd")
    import autograd
    import autograd.scipy.signal as ags

    x, w = rng.standard_normal((3, 2, 7, 6)), rng.standard_normal((2, 4, 3, 2))
    for mode in ("valid", "full"):
        kw = dict(axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode=mode)
        np.testing.assert_allclose(wsig.convolve(x, w, **kw), ags.convolve(x, w, **kw), rtol=1e-12)
        loss = lambda conv: lambda x, w: (conv(x, w, **kw) ** 2).sum()
        ours = wg.grad(loss(wsig.convolve), (0, 1))(x, w)
        theirs = (autograd.grad(loss(ags.convolve), 0)(x, w), autograd.grad(loss(ags.convolve), 1)(x, w))
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-11)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 3), st.sampled_from(["full", "valid", "same"]))
def test_convolve_along_one_axis_is_scipys_per_row(n1, n2, rows, mode):
    a = np.random.default_rng(n1 * 7 + n2).standard_normal((rows, n1))
    v = np.random.default_rng(n2).standard_normal(n2)
    ours = wsig.convolve(a, v, mode, axes=([1], [0]))
    theirs = np.stack([ssig.convolve(r, v, mode) for r in a])
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_odeint_with_a_closure_says_to_pass_parameters_through_args():
    from wengert.scipy.integrate import odeint

    t = np.linspace(0.0, 1.0, 3)
    with pytest.raises(TypeError, match=r"wengert\.scipy\.integrate\.odeint: the vector field .*returned a "
                                        r"traced value.*args=\(a,\)") as info:
        wg.grad(lambda a: odeint(lambda y, t: -a * y, np.ones(2), t).sum())(0.5)
    assert "Use its wengert.scipy version" not in str(info.value)
    # written as the message says, it works: d/da sum(exp(-a t)) = -sum(t exp(-a t)) per component
    g = wg.grad(lambda a: odeint(lambda y, t, a: -a * y, np.ones(2), t, args=(a,)).sum())(0.5)
    np.testing.assert_allclose(g, -2 * np.sum(t * np.exp(-0.5 * t)), rtol=1e-5)


def test_odeint_takes_pytrees_in_args_as_autograd_does():
    from wengert.scipy.integrate import odeint

    t = np.linspace(0.0, 0.5, 4)
    params = [(np.array([[-0.5, 0.2], [0.1, -0.3]]), np.array([0.05, -0.02]))]

    def field(y, t, params):
        (w, b), = params
        return wg.numpy.tanh(y @ w + b)

    def loss(params, tfirst=False):
        if tfirst:
            return odeint(lambda t, y, p: field(y, t, p), np.array([1.0, 0.5]), t, args=(params,),
                          tfirst=True).sum()
        return odeint(field, np.array([1.0, 0.5]), t, args=(params,)).sum()

    g = wg.grad(loss)(params)
    assert wg.tree_flatten(g)[1] == wg.tree_flatten(params)[1]
    np.testing.assert_allclose(wg.tree_ravel(wg.grad(lambda p: loss(p, True))(params))[0],
                               wg.tree_ravel(g)[0], rtol=1e-6)
    flat, unravel = wg.tree_ravel(params)
    check_grads(lambda v: loss(unravel(v)), flat, modes=("rev",), order=1, rtol=1e-4, atol=1e-6)


def test_import_wengert_leaves_scipy_unimported_until_a_scipy_ufunc_arrives():
    """SciPy costs about a second to import: ``import wengert`` must not pay it, and a
    scipy.special ufunc on a traced value still differentiates once the user imports SciPy."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, wengert as wg\n"
            "before = sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')\n"
            "import scipy.special as sp\n"
            "g = wg.grad(lambda x: np.sum(sp.erf(x)))(np.array([0.1, 0.5]))\n"
            "print(before, list(g))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    before, grads = out.split("] ")
    assert before == "["
    expected = 2 / np.sqrt(np.pi) * np.exp(-np.array([0.1, 0.5]) ** 2)
    np.testing.assert_allclose(eval(grads, {"np": np}), expected, rtol=1e-12)


def test_first_compiled_program_leaves_scipy_unimported_and_a_later_scipy_program_compiles():
    """``wg.compile`` and ``wg.source_grad`` look up the names generated code may use in the rule
    families imported so far: the first compiled program must not import SciPy (about a second),
    and a program using scipy.special built after SciPy is imported (the survey of names done
    before it) must compile and differentiate."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys, math, numpy as np, wengert as wg, wengert.numpy as wnp
        g = wg.compile(lambda x: wnp.sin(x) * x).grad()(0.5)
        h = wg.compile(lambda x: wnp.sum(wnp.exp(x) ** 2)).grad()(np.array([0.1, 0.2]))
        before = sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')
        import scipy.special as sp
        e = wg.compile(lambda x: np.sum(sp.erf(x) * sp.expit(x))).grad()(np.array([0.1, 0.5]))
        print(repr(before), '|', g, '|', list(h), '|', list(e))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    before, g, h, e = out.split(" | ")
    assert before == "[]"
    np.testing.assert_allclose(float(g), np.cos(0.5) * 0.5 + np.sin(0.5), rtol=1e-13)
    x = np.array([0.1, 0.2])
    np.testing.assert_allclose(eval(h, {"np": np}), 2 * np.exp(2 * x), rtol=1e-13)
    import scipy.special as sp
    x = np.array([0.1, 0.5])
    s = sp.expit(x)
    expected = 2 / np.sqrt(np.pi) * np.exp(-x ** 2) * s + sp.erf(x) * s * (1 - s)
    np.testing.assert_allclose(eval(e, {"np": np}), expected, rtol=1e-12)
