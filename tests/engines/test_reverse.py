"""Reverse mode: grad, value_and_grad, vjp, elementwise_grad; pytrees; the backward pass's cost
properties (iterative, memory released, in-place accumulation that never touches user arrays)."""

import gc
import sys
import tracemalloc
import weakref
from collections import namedtuple

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.testing import check_grads


def test_grad_of_array_function_matches_formula():
    A = np.arange(6.0).reshape(2, 3) / 5
    f = lambda x: wnp.sum(wnp.tanh(A @ x) ** 2)
    x = np.array([0.1, -0.2, 0.3])
    t = np.tanh(A @ x)
    np.testing.assert_allclose(wg.grad(f)(x), A.T @ (2 * t * (1 - t**2)), rtol=1e-14)


def test_argnums_tuple_and_negative():
    f = lambda a, b, c: a * b + c
    assert wg.grad(f, argnums=(0, 2))(2.0, 3.0, 4.0) == (3.0, 1.0)
    assert wg.grad(f, argnums=-2)(2.0, 3.0, 4.0) == 2.0


def test_pytree_arguments_give_gradients_of_the_same_structure():
    Pair = namedtuple("Pair", "w b")

    def loss(params, x):
        h = wnp.tanh(params["layers"][0].w @ x + params["layers"][0].b)
        return wnp.sum(h * params["scale"]) + 0.0 * wnp.sum(params["unused"])

    params = {"layers": [Pair(np.ones((2, 3)), np.zeros(2))], "scale": 2.0, "unused": np.ones(4)}
    g = wg.grad(loss)(params, np.array([0.1, 0.2, 0.3]))
    assert set(g) == {"layers", "scale", "unused"}
    assert isinstance(g["layers"], list) and isinstance(g["layers"][0], Pair)
    assert g["layers"][0].w.shape == (2, 3) and type(g["scale"]) is float
    np.testing.assert_array_equal(g["unused"], np.zeros(4))
    check_grads(lambda w, b: loss({"layers": [Pair(w, b)], "scale": 2.0, "unused": np.ones(4)},
                                  np.array([0.1, 0.2, 0.3])), np.ones((2, 3)), np.zeros(2))


def test_unreached_argument_gets_zero_gradient():
    assert wg.grad(lambda x, y: x * 2.0, argnums=1)(1.0, 3.0) == 0.0
    np.testing.assert_array_equal(wg.grad(lambda x: 5.0)(np.ones(3)), np.zeros(3))


def test_has_aux_and_value_and_grad():
    f = lambda x: (wnp.sum(x**2), {"norm": wnp.sqrt(wnp.sum(x**2))})
    (val, aux), g = wg.value_and_grad(f, has_aux=True)(np.array([3.0, 4.0]))
    assert val == 25.0 and aux["norm"] == 5.0
    np.testing.assert_array_equal(g, [6.0, 8.0])
    g2, aux2 = wg.grad(f, has_aux=True)(np.array([3.0, 4.0]))
    np.testing.assert_array_equal(g2, g)


def test_vjp_with_pytree_output_and_repeated_calls():
    f = lambda x, y: {"a": x * y, "b": (wnp.sin(x), y)}
    out, back = wg.vjp(f, np.array([1.0, 2.0]), 3.0)
    assert out["b"][1] == 3.0
    ct = {"a": np.array([1.0, 1.0]), "b": (np.array([0.0, 1.0]), 2.0)}
    gx1, gy1 = back(ct)
    gx2, gy2 = back(ct)
    np.testing.assert_allclose(gx1, [3.0, 3.0 + np.cos(2.0)])
    assert gy1 == pytest.approx(3.0 + 2.0) and gy2 == gy1
    np.testing.assert_array_equal(gx1, gx2)


def test_elementwise_grad():
    x = np.linspace(-1, 1, 7)
    np.testing.assert_allclose(wg.elementwise_grad(wnp.tanh)(x), 1 - np.tanh(x) ** 2, rtol=1e-14)


def test_long_chain_is_iterative_and_memory_is_released():
    """A chain of 1,000,000 operations: no RecursionError, and afterwards its nodes are gone."""
    n = 1_000_000
    leaked = []

    def f(x):
        z = x
        for _ in range(n // 2):
            z = z * 1.0000001
            z = z + 0.0
        leaked.append(weakref.ref(z))
        return z

    assert sys.getrecursionlimit() < n
    g = wg.grad(f)(1.0)
    assert g == pytest.approx(1.0000001 ** (n // 2), rel=1e-9)
    gc.collect()
    assert leaked[0]() is None  # the output node (and through it the whole chain) was freed


def test_graph_freed_without_the_cyclic_collector():
    """grad releases its recording itself: with the collector off, the nodes are gone on return
    (they and their trace form a cycle, which grad breaks; the collector would cost a rescan)."""
    leaked = []

    def f(x):
        y = wnp.sin(x) * x
        leaked.append(weakref.ref(y))
        return wnp.sum(y)

    was = gc.isenabled()
    gc.disable()
    try:
        g = wg.grad(f)(np.linspace(0.1, 1.0, 5))
        assert leaked[0]() is None
    finally:
        if was:
            gc.enable()
    x = np.linspace(0.1, 1.0, 5)
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x))


def test_intermediates_freed_after_grad_tracemalloc():
    x = np.ones(200_000)

    def f(x):
        for _ in range(10):
            x = wnp.sin(x) * 1.5
        return wnp.sum(x)

    wg.grad(f)(x)  # warm up
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    wg.grad(f)(x)
    gc.collect()
    after, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak - base > 20 * x.nbytes  # the intermediates did exist...
    assert after - base < x.nbytes  # ...and are gone, except for nothing bigger than one array


def test_user_arrays_are_never_mutated():
    x = np.array([1.0, 2.0, 3.0])
    seed = np.ones(3)
    x0, seed0 = x.copy(), seed.copy()

    def f(x):
        return x + x + x * x + x  # several contributions accumulate into x's adjoint

    out, back = wg.vjp(f, x)
    (g,) = back(seed)
    np.testing.assert_array_equal(g, 3 + 2 * x0)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(seed, seed0)
    # the identity contributions alias the seed; accumulation must not write into it
    (g2,) = back(seed)
    np.testing.assert_array_equal(g2, g)
    np.testing.assert_array_equal(seed, seed0)


def test_accumulation_happens_in_place_in_owned_buffers():
    """After the first sum the adjoint buffer is the engine's own, and later contributions are
    added into it (np.add with out=) rather than allocating a new array each time."""
    calls = []
    real_add = np.add

    class Spy:
        def __getattr__(self, name):
            return getattr(real_add, name)

        def __call__(self, *args, **kwargs):
            calls.append("out" in kwargs)
            return real_add(*args, **kwargs)

    import wengert.engines.accumulation as rev  # where the backward pass adds contributions

    x = np.ones(5)
    original = rev.np
    try:
        class NP:
            add = Spy()

            def __getattr__(self, name):
                return getattr(original, name)

        rev.np = NP()
        wg.grad(lambda x: wnp.sum(x * 1.0 + x * 2.0 + x * 3.0 + x * 4.0))(x)
    finally:
        rev.np = original
    assert calls.count(True) == 2  # contributions 3 and 4 were added in place


def test_float32_stays_float32():
    x = np.ones(3, dtype=np.float32)
    W = np.ones((2, 3), dtype=np.float32)
    g = wg.grad(lambda x: wnp.sum(wnp.tanh(W @ x) * 2.0))(x)
    assert g.dtype == np.float32
    g64const = wg.grad(lambda x: wnp.sum(x * np.ones(3)))(x)  # float64 constant mixed in
    assert g64const.dtype == np.float32


def test_nested_reverse_over_reverse():
    f = lambda x: wnp.sum(wnp.sin(x) * x)
    x = np.array([0.3, -1.2])
    h = wg.grad(lambda x: wnp.sum(wg.grad(f)(x)))(x)
    np.testing.assert_allclose(h, 2 * np.cos(x) - x * np.sin(x), rtol=1e-14)
