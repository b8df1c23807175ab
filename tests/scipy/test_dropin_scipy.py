"""SciPy code brought over unchanged: module paths as HIPS autograd has them, and the functions
added for it, checked against SciPy's values, finite differences and a peer (JAX)."""

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
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

def _load_minimize_example():
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "scipy_minimize.py"
    spec = importlib.util.spec_from_file_location("scipy_minimize", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_minimize_example_converges_to_scipys_own_optimum(capsys):
    import scipy.optimize

    example = _load_minimize_example()
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

    example = _load_minimize_example()
    x, y = example.make_data(30, 3, np.random.default_rng(1))
    v = np.random.default_rng(2).standard_normal(4)
    loss = lambda m: lambda v: m.sum(m.logaddexp(0.0, -(2.0 * y - 1.0) * (x @ v[:3] + v[3]))) / 30
    ours = wg.value_and_grad(loss(wg.numpy))(v)
    theirs = autograd.value_and_grad(loss(anp))(v)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-14)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-13)
