"""Captured arrays follow Python through transforms and partials: ``wg.compile(wg.vmap(wg.grad(f)))``
reads ``f``'s globals at each call as ``wg.compile(f)`` does. The capture scan followed one
``functools.wraps`` level only, so ``f``'s captured arrays were constants of the program under two
transforms (vmap of grad, jacrev of vmap), under one transform of a bound method or a callable object,
and under ``functools.partial``: the compiled result kept the values of the first call, silently."""

import functools

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

W = np.array([1.0, 2.0, 3.0])


def _loss(x):
    return wnp.sum(wnp.sin(x * W)) + wnp.sum(x ** 2 * W)


def _vector(x):
    return x * W


class _Model:
    def __init__(self):
        self.W = np.array([1.0, 2.0, 3.0])

    def __call__(self, x):
        return wnp.sum(wnp.sin(x * self.W))

    def loss(self, x):
        return wnp.sum(wnp.sin(x * self.W) ** 2)


def _scaled(x, s=1.0):
    return wnp.sum(wnp.tanh(x * W) * s)


_X = np.array([0.3, -0.2, 0.5])
_XS = np.array([[0.3, -0.2, 0.5], [0.1, 0.7, -0.4]])

# name -> (a transform of a function reading the global W, its argument)
GLOBAL_CASES = {
    "vmap(grad)": (lambda: wg.vmap(wg.grad(_loss)), _XS),
    "vmap(hessian)": (lambda: wg.vmap(wg.hessian(_loss)), _XS),
    "jacrev(vmap)": (lambda: wg.jacrev(wg.vmap(_vector)), _XS),
    "jacfwd(vmap)": (lambda: wg.jacfwd(wg.vmap(_vector)), _XS),
    "vmap(vmap(grad))": (lambda: wg.vmap(wg.vmap(wg.grad(_loss))), _XS[None]),
    "grad(grad) elementwise": (lambda: wg.vmap(wg.grad(wg.grad(lambda t: wnp.sum(wnp.sin(t * W[0]))))), _X),
    "grad(partial)": (lambda: wg.grad(functools.partial(_scaled, s=2.0)), _X),
    "partial": (lambda: functools.partial(_scaled, s=2.0), _X),
    "hessian(partial)": (lambda: wg.hessian(functools.partial(_scaled, s=2.0)), _X),
}


@pytest.fixture
def fresh_w():
    saved = W.copy()
    yield
    W[:] = saved


@pytest.mark.parametrize("case", list(GLOBAL_CASES))
def test_compiled_transform_sees_global_changed_in_place(case, fresh_w):
    make, x = GLOBAL_CASES[case]
    compiled = wg.compile(make())
    np.testing.assert_allclose(compiled(x), make()(x), rtol=1e-13)
    W[:] = [0.5, -1.0, 4.0]
    np.testing.assert_allclose(compiled(x), make()(x), rtol=1e-13)
    assert compiled.cache_info().misses == 1  # an input of the program, read at the call: no new trace


@pytest.mark.parametrize("transform", ["grad", "hessian", "jacrev", "jacfwd"])
@pytest.mark.parametrize("which", ["callable object", "bound method"])
def test_compiled_transform_of_object_sees_attribute_rebound(transform, which):
    model = _Model()
    fun = model if which == "callable object" else model.loss
    compiled = wg.compile(getattr(wg, transform)(fun))
    np.testing.assert_allclose(compiled(_X), getattr(wg, transform)(fun)(_X), rtol=1e-13)
    model.W = np.array([4.0, -2.0, 0.5])
    np.testing.assert_allclose(compiled(_X), getattr(wg, transform)(fun)(_X), rtol=1e-13)


def test_partial_bound_arrays_are_read_at_each_call():
    """A keyword bound by ``functools.partial`` is an input of the program; a positional one (its
    tuple cannot be replaced while tracing) is guarded by its contents: a change traces again."""
    s = np.array([1.0, 2.0, 3.0])
    b = np.array([0.5, 0.5, 0.5])

    def f(b, x, s):
        return wnp.sum(wnp.tanh(x * s) * b)

    part = functools.partial(f, b, s=s)
    compiled = wg.compile(wg.grad(part))
    np.testing.assert_allclose(compiled(_X), wg.grad(part)(_X), rtol=1e-13)
    s[:] = [3.0, -1.0, 0.25]
    np.testing.assert_allclose(compiled(_X), wg.grad(part)(_X), rtol=1e-13)
    assert compiled.cache_info().misses == 1
    b[:] = [2.0, 1.0, -1.0]
    np.testing.assert_allclose(compiled(_X), wg.grad(part)(_X), rtol=1e-13)
    assert compiled.cache_info().misses == 2


def test_compiled_vmap_of_grad_against_jax_after_global_change(fresh_w):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    compiled = wg.compile(wg.vmap(wg.hessian(_loss)))
    compiled(_XS)
    W[:] = [0.5, -1.0, 4.0]
    w = jnp.asarray(W.copy())
    expected = jax.vmap(jax.hessian(lambda x: jnp.sum(jnp.sin(x * w)) + jnp.sum(x ** 2 * w)))(_XS)
    np.testing.assert_allclose(compiled(_XS), np.asarray(expected), rtol=1e-12)


_MODEL = _Model()
_GRAD_OF_OBJECT = wg.grad(_MODEL)
_GRAD_OF_METHOD = wg.grad(_MODEL.loss)
_GRAD_OF_PARTIAL = wg.grad(functools.partial(_scaled, s=2.0))
_VMAP_OF_GRAD = wg.vmap(wg.grad(_loss))


@pytest.mark.parametrize("called", ["object", "method", "partial", "vmap"])
def test_transform_read_from_a_global_is_followed(called, fresh_w):
    """``f`` calls a global ``g = wg.grad(obj)``: what ``obj`` reads is captured by ``wg.compile(f)``."""
    inner = {"object": _GRAD_OF_OBJECT, "method": _GRAD_OF_METHOD, "partial": _GRAD_OF_PARTIAL,
             "vmap": _VMAP_OF_GRAD}[called]

    def f(x):
        return inner(x) * 2.0

    compiled = wg.compile(f)
    x = _XS if called == "vmap" else _X
    np.testing.assert_allclose(compiled(x), f(x), rtol=1e-13)
    saved = _MODEL.W
    try:
        _MODEL.W = np.array([4.0, -2.0, 0.5])
        W[:] = [0.5, -1.0, 4.0]
        np.testing.assert_allclose(compiled(x), f(x), rtol=1e-13)
    finally:
        _MODEL.W = saved
