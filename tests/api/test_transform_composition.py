"""Transforms composed in pairs, on pytree arguments and results, against the same composition in
JAX: each composition is written once, over a namespace of transforms (wengert's or JAX's)."""

from types import SimpleNamespace

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

P = {"a": np.array([0.3, -0.7, 1.1]), "b": [np.array([0.5, 0.2]), 0.4]}
T = {"a": np.array([1.0, 0.5, -0.2]), "b": [np.array([-0.3, 0.8]), 0.6]}
X = np.array([0.2, -0.4, 0.9])


def f(m, p):
    """A scalar of a pytree."""
    a, (b, c) = p["a"], p["b"]
    return m.sum(m.sin(a) * a) * c + m.sum(m.exp(b) * m.sum(a ** 2)) + c ** 3 * m.sum(m.tanh(b))


def g(m, p):
    """A pytree (a tuple holding a dict) of a pytree."""
    a, (b, c) = p["a"], p["b"]
    return (m.sin(a) * c, {"r": m.sum(a[:2] * b) * b, "s": c ** 2 * m.sum(a)})


def _sum_leaves(m, tree):
    return sum(m.sum(leaf) for leaf in wg.tree_flatten(tree)[0])


def _sq_leaves(m, tree):
    return sum(m.sum(leaf ** 2) for leaf in wg.tree_flatten(tree)[0])


COMPOSITIONS = {
    "jacfwd(grad)": lambda t, p: t.jacfwd(t.grad(lambda q: f(t.np, q)))(p),
    "jacrev(grad)": lambda t, p: t.jacrev(t.grad(lambda q: f(t.np, q)))(p),
    "grad(grad . sum)": lambda t, p: t.grad(lambda q: _sq_leaves(t.np, t.grad(lambda r: f(t.np, r))(q)))(p),
    "hessian": lambda t, p: t.hessian(lambda q: f(t.np, q))(p),
    "jacrev(jacfwd)": lambda t, p: t.jacrev(t.jacfwd(lambda q: g(t.np, q)))(p),
    "jacfwd(jacrev)": lambda t, p: t.jacfwd(t.jacrev(lambda q: g(t.np, q)))(p),
    "grad(jacfwd)": lambda t, p: t.grad(lambda q: _sq_leaves(t.np, t.jacfwd(lambda r: g(t.np, r))(q)))(p),
    "jvp(grad)": lambda t, p: t.jvp(t.grad(lambda q: f(t.np, q)), (p,), (T,)),
    "hvp": lambda t, p: t.hvp(lambda q: f(t.np, q), (p,), (T,)),
    "vjp(jvp)": lambda t, p: t.vjp(lambda q: t.jvp(lambda r: g(t.np, r), (q,), (T,))[1], p)[1](
        g(np, P)),
    "jvp(vjp)": lambda t, p: t.jvp(lambda q: t.vjp(lambda r: g(t.np, r), q)[1](g(np, P))[0], (p,), (T,)),
    "grad(vjp)": lambda t, p: t.grad(lambda q: _sum_leaves(t.np, t.vjp(lambda r: g(t.np, r), q)[1](
        g(np, P))))(p),
    "jvp(jvp)": lambda t, p: t.jvp(lambda q: t.jvp(lambda r: g(t.np, r), (q,), (T,))[1], (p,), (T,)),
    "elementwise_grad(elementwise_grad)": lambda t, p: t.egrad(t.egrad(lambda x: t.np.sin(x) * x))(X),
    "jacfwd(elementwise_grad)": lambda t, p: t.jacfwd(t.egrad(lambda x: t.np.tanh(x) ** 2))(X),
}


def _ours():
    return SimpleNamespace(np=wnp, grad=wg.grad, jacfwd=wg.jacfwd, jacrev=wg.jacrev, hessian=wg.hessian,
                           jvp=wg.jvp, vjp=wg.vjp, hvp=wg.hvp, egrad=wg.elementwise_grad)


@pytest.fixture(scope="module")
def theirs():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax, SimpleNamespace(
        np=jax.numpy, grad=jax.grad, jacfwd=jax.jacfwd, jacrev=jax.jacrev, hessian=jax.hessian,
        jvp=jax.jvp, vjp=jax.vjp,
        hvp=lambda fun, primals, tangents: jax.jvp(jax.grad(fun), primals, tangents)[1],
        egrad=lambda fun: lambda x: _vjp_of_ones(jax, fun, x))


def _vjp_of_ones(jax, fun, x):
    """autograd's elementwise_grad, in JAX: the VJP with a cotangent of ones (it nests)."""
    out, back = jax.vjp(fun, x)
    return back(jax.numpy.ones_like(out))[0]


def same_tree(ours, expected):
    if isinstance(expected, dict):
        assert type(ours) is dict and list(ours) == list(expected)
        for k in expected:
            same_tree(ours[k], expected[k])
    elif isinstance(expected, (tuple, list)):
        assert type(ours) is type(expected) and len(ours) == len(expected), (type(ours), type(expected))
        for a, b in zip(ours, expected):
            same_tree(a, b)
    else:
        assert np.shape(ours) == np.shape(expected)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(expected), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", COMPOSITIONS)
def test_composition_matches_jax(theirs, name):
    jax, t = theirs
    comp = COMPOSITIONS[name]
    expected = jax.jit(lambda p: comp(t, p))(P)
    same_tree(comp(_ours(), P), expected)
