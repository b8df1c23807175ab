"""Captured arrays follow Python through transforms and partials: ``wg.compile(wg.vmap(wg.grad(f)))``
reads ``f``'s globals at each call as ``wg.compile(f)`` does. The capture scan followed one
``functools.wraps`` level only, so ``f``'s captured arrays were constants of the program under two
transforms (vmap of grad, jacrev of vmap), under one transform of a bound method or a callable object,
and under ``functools.partial``: the compiled result kept the values of the first call, silently."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

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


def _stack_of(names, fun):
    """``fun`` under the transforms ``names``, innermost first (a scalar function for ``grad``)."""
    for name in names:
        if name == "grad":
            inner = fun
            fun = wg.grad(lambda x, inner=inner: wnp.sum(inner(x)))
        else:
            fun = getattr(wg, name)(fun)
    return fun


@settings(max_examples=12, deadline=None)
@given(names=st.lists(st.sampled_from(["grad", "vmap", "jacrev", "jacfwd"]), min_size=1, max_size=3),
       new_w=arrays(np.float64, 3, elements=st.floats(-2, 2)))
def test_any_stack_of_transforms_reads_the_global_at_each_call(names, new_w):
    """Whatever the transforms around ``_vector`` (which reads the global ``W``), the compiled stack
    equals the eager one after ``W`` changes in place, without tracing again."""
    fun = _stack_of(names, _vector)
    x = np.broadcast_to(_X, (2,) * names.count("vmap") + (3,)) * np.linspace(0.5, 1.5, 3)  # a batch per vmap
    saved = W.copy()
    try:
        compiled = wg.compile(fun)
        compiled(x)
        W[:] = new_w
        np.testing.assert_allclose(compiled(x), fun(x), rtol=1e-12, atol=1e-12)
        assert compiled.cache_info().misses == 1
    finally:
        W[:] = saved


_DEFAULT_W = np.array([1.0, 2.0, 3.0])


def _with_default_array(x, w=_DEFAULT_W):
    return wnp.sum(wnp.sin(x * w))


def _with_default_function(x, fn=_vector):
    return wnp.sum(wnp.sin(fn(x)))


def _with_keyword_only_default(x, *, w=_DEFAULT_W):
    return wnp.sum(wnp.sin(x * w))


@pytest.mark.parametrize("fun", [_with_default_array, _with_default_function, _with_keyword_only_default],
                         ids=["array", "function", "keyword-only"])
@pytest.mark.parametrize("transform", [None, "grad", "hessian", "jacrev"])
def test_default_arguments_are_read_at_each_call(fun, transform, fresh_w):
    """A default argument is evaluated once, when ``def`` runs, but Python reads its object at each
    call: an array default written in place, or a function default reading a global that changed,
    gives the new value. The compiled program kept the first call's values (silently)."""
    run = fun if transform is None else getattr(wg, transform)(fun)
    compiled = wg.compile(run)
    saved = _DEFAULT_W.copy()
    try:
        np.testing.assert_allclose(compiled(_X), run(_X), rtol=1e-13)
        _DEFAULT_W[:] = [0.5, -1.0, 4.0]
        W[:] = [2.0, 0.25, -3.0]
        np.testing.assert_allclose(compiled(_X), run(_X), rtol=1e-13)
        # an array default is a constant of the program, guarded by its contents: a write traces again;
        # a function default's global is an input of the program, read at each call
        assert compiled.cache_info().misses == (1 if fun is _with_default_function else 2)
    finally:
        _DEFAULT_W[:] = saved
    assert fun.__defaults__ is None or fun.__defaults__[0] is (_DEFAULT_W if fun is not _with_default_function
                                                               else _vector)  # put back after tracing
    assert fun.__kwdefaults__ is None or fun.__kwdefaults__["w"] is _DEFAULT_W


@pytest.mark.parametrize("fun", [_with_default_array, _with_default_function], ids=["array", "function"])
def test_source_grad_reads_default_arguments_at_each_call(fun, fresh_w):
    """The source front end took the defaults' values before the captured arrays were put in their
    places, so an array default was a constant of the derivative program (silently stale)."""
    derivative = wg.source_grad(fun)
    saved = _DEFAULT_W.copy()
    try:
        np.testing.assert_allclose(derivative(_X), wg.grad(fun)(_X), rtol=1e-13)
        _DEFAULT_W[:] = [0.5, -1.0, 4.0]
        W[:] = [2.0, 0.25, -3.0]
        np.testing.assert_allclose(derivative(_X), wg.grad(fun)(_X), rtol=1e-13)
    finally:
        _DEFAULT_W[:] = saved
