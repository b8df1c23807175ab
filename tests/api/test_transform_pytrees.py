"""Every transform takes and gives pytrees with JAX's structure rules: checked against ``jax`` on
nested dict/tuple/list arguments and results, and written out explicitly for the main cases."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

rng = np.random.default_rng(12)
V = rng.standard_normal(3)
M = rng.standard_normal((2, 3))


@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def same_tree(ours, theirs, rtol=1e-10):
    """Equal structure (types, keys, order) and equal leaves, shape and value."""
    if isinstance(theirs, dict):
        assert type(ours) is dict and list(ours) == list(theirs), (ours, theirs)
        for k in theirs:
            same_tree(ours[k], theirs[k], rtol)
    elif isinstance(theirs, (tuple, list)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), (type(ours), type(theirs))
        for a, b in zip(ours, theirs):
            same_tree(a, b, rtol)
    else:
        assert not isinstance(ours, (dict, tuple, list)), ours
        assert np.shape(ours) == np.shape(theirs), (np.shape(ours), np.shape(theirs))
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=1e-12)


# -- the structures, written out ------------------------------------------------------------------


def test_jacobian_of_a_dict_output_is_a_dict_of_blocks():
    v = np.array([1.0, 2.0])
    for jac in (wg.jacfwd, wg.jacrev):
        J = jac(lambda v: {"p": 2 * v, "q": wnp.sum(v)})(v)
        assert type(J) is dict and list(J) == ["p", "q"]
        np.testing.assert_array_equal(J["p"], 2 * np.eye(2))
        np.testing.assert_array_equal(J["q"], [1.0, 1.0])


def test_hessian_with_two_argnums_nests_blocks_of_different_shapes():
    def f(x, y):
        return wnp.sum(x ** 2) * wnp.sum(y ** 3) + x[0] * y[1]

    x, y = np.array([1.0, 2.0]), np.array([0.5, -1.0, 2.0])
    H = wg.hessian(f, argnums=(0, 1))(x, y)
    assert type(H) is tuple and len(H) == 2 and all(type(row) is tuple and len(row) == 2 for row in H)
    assert [[b.shape for b in row] for row in H] == [[(2, 2), (2, 3)], [(3, 2), (3, 3)]]
    sx, sy = np.sum(x ** 2), np.sum(y ** 3)
    np.testing.assert_allclose(H[0][0], 2 * sy * np.eye(2))
    np.testing.assert_allclose(H[1][1], 6 * sx * np.diag(y))
    off = np.outer(2 * x, 3 * y ** 2)
    off[0, 1] += 1.0
    np.testing.assert_allclose(H[0][1], off)
    np.testing.assert_allclose(H[1][0], off.T)


def test_jacobian_of_a_pytree_argument_puts_the_input_structure_inside():
    p = {"w": M, "b": (V, 2.0)}

    def f(p):
        return (p["w"] @ p["b"][0] * p["b"][1], wnp.sum(p["w"]))

    for jac in (wg.jacfwd, wg.jacrev):
        J = jac(f)(p)
        assert type(J) is tuple and len(J) == 2
        for out_shape, block in zip([(2,), ()], J):
            # keys sorted, as jax.jacfwd/jacrev give them (pytrees follow JAX's dict order)
            assert type(block) is dict and list(block) == ["b", "w"] and type(block["b"]) is tuple
            assert block["w"].shape == out_shape + (2, 3)
            assert block["b"][0].shape == out_shape + (3,)
            assert np.shape(block["b"][1]) == out_shape
        np.testing.assert_allclose(J[0]["b"][1], M @ V)
        np.testing.assert_allclose(J[1]["w"], np.ones((2, 3)))
        np.testing.assert_allclose(J[1]["b"][0], np.zeros(3))


# -- against JAX ----------------------------------------------------------------------------------


def params(kind):
    if kind == "dict":
        return {"a": V, "b": {"c": M, "d": [0.7, V[:2]]}}
    if kind == "tuple":
        return (V, [M, (1.3,)])
    return V


def loss(m, p):
    leaves = [p] if not isinstance(p, (dict, tuple, list)) else None
    if isinstance(p, dict):
        leaves = [p["a"], p["b"]["c"], p["b"]["d"][0], p["b"]["d"][1]]
    elif isinstance(p, tuple):
        leaves = [p[0], p[1][0], p[1][1][0]]
    total = 0.0
    for k, leaf in enumerate(leaves):
        total = total + m.sum(m.sin(leaf) * (k + 1.5)) * m.sum(m.tanh(leaves[0]))
    return total


def vector(m, p):
    """A pytree-valued function of a pytree: a dict of a tuple and a list."""
    s = loss(m, p)
    first = p if not isinstance(p, (dict, tuple)) else (p["a"] if isinstance(p, dict) else p[0])
    return {"u": (m.sin(first) * s, s ** 2), "v": [m.exp(first[:2])]}


KINDS = ["array", "dict", "tuple"]


@pytest.mark.parametrize("kind", KINDS)
def test_grad_value_and_grad_vjp_jvp_against_jax(jax, kind):
    jnp = jax.numpy
    p = params(kind)
    same_tree(wg.grad(lambda p: loss(wnp, p))(p), jax.jit(jax.grad(lambda p: loss(jnp, p)))(p))
    (val, aux), g = wg.value_and_grad(lambda p: (loss(wnp, p), {"k": p}), has_aux=True)(p)
    (jval, jaux), jg = jax.jit(jax.value_and_grad(lambda p: (loss(jnp, p), {"k": p}), has_aux=True))(p)
    same_tree((val, aux, g), (jval, jaux, jg))
    out, back = wg.vjp(lambda p: vector(wnp, p), p)
    ct = wg.tree_map(lambda o: np.cos(np.arange(np.size(o)).reshape(np.shape(o))), out)
    jout, jct = jax.jit(lambda p, ct: (lambda o, b: (o, b(ct)))(*jax.vjp(lambda p: vector(jnp, p), p)))(p, ct)
    same_tree((out, back(ct)), (jout, jct))
    t = wg.tree_map(lambda x: np.full(np.shape(x), 0.3), p)
    same_tree(wg.jvp(lambda p: vector(wnp, p), (p,), (t,)),
              jax.jit(lambda p, t: jax.jvp(lambda p: vector(jnp, p), (p,), (t,)))(p, t))


@pytest.mark.parametrize("kind", KINDS)
def test_jacobians_and_hessians_against_jax(jax, kind):
    jnp = jax.numpy
    p = params(kind)
    jexpected = jax.jit(jax.jacrev(lambda p: vector(jnp, p)))(p)
    same_tree(wg.jacrev(lambda p: vector(wnp, p))(p), jexpected)
    same_tree(wg.jacfwd(lambda p: vector(wnp, p))(p), jexpected)
    same_tree(wg.hessian(lambda p: loss(wnp, p))(p), jax.jit(jax.hessian(lambda p: loss(jnp, p)))(p))


def test_several_argnums_and_pytree_outputs_against_jax(jax):
    jnp = jax.numpy

    def f(m, x, p, y):
        return {"s": m.sum(x * p["w"][0]) * y, "t": (x * y, m.sin(p["w"][1]))}

    x, p, y = V, {"w": (V[::-1], M)}, 0.8
    for argnums in [0, (2, 0, 1)]:
        for ours, theirs in [(wg.jacrev, jax.jacrev), (wg.jacfwd, jax.jacfwd)]:
            same_tree(ours(lambda *a: f(wnp, *a), argnums)(x, p, y),
                      jax.jit(theirs(lambda *a: f(jnp, *a), argnums))(x, p, y))
        scalar = (lambda m: lambda *a: m.sum(f(m, *a)["t"][0]) * f(m, *a)["s"])
        same_tree(wg.hessian(scalar(wnp), argnums)(x, p, y),
                  jax.jit(jax.hessian(scalar(jnp), argnums))(x, p, y))
        same_tree(wg.grad(scalar(wnp), argnums)(x, p, y), jax.jit(jax.grad(scalar(jnp), argnums))(x, p, y))


def test_has_aux_of_jacobians_and_hessian_against_jax(jax):
    jnp = jax.numpy

    def f(m):
        return lambda x: (m.sum(m.sin(x)) * x, {"n": m.sum(x)})

    for ours, theirs in [(wg.jacrev, jax.jacrev), (wg.jacfwd, jax.jacfwd)]:
        same_tree(ours(f(wnp), has_aux=True)(V), jax.jit(theirs(f(jnp), has_aux=True))(V))
    h = lambda m: lambda x: (m.sum(m.sin(x) ** 2), [x * 2])  # noqa: E731
    same_tree(wg.hessian(h(wnp), has_aux=True)(V), jax.jit(jax.hessian(h(jnp), has_aux=True))(V))


def test_hvp_of_pytrees_against_jax(jax):
    jnp = jax.numpy
    p = params("dict")
    t = wg.tree_map(lambda x: np.full(np.shape(x), 0.1), p)
    expected = jax.jit(lambda p, t: jax.jvp(jax.grad(lambda p: loss(jnp, p)), (p,), (t,))[1])(p, t)
    same_tree(wg.hvp(lambda p: loss(wnp, p), (p,), (t,)), expected)


def test_scalar_blocks_of_python_floats_are_arrays_of_shape_zero_dims(jax):
    for ours, theirs in [(wg.jacfwd, jax.jacfwd), (wg.jacrev, jax.jacrev), (wg.hessian, jax.hessian)]:
        same_tree(ours(lambda x: x ** 3)(2.0), jax.jit(theirs(lambda x: x ** 3))(2.0))


def test_empty_inputs_and_outputs_give_empty_blocks(jax):
    jnp = jax.numpy
    e = np.zeros(0)
    for ours, theirs in [(wg.jacrev, jax.jacrev), (wg.jacfwd, jax.jacfwd)]:
        same_tree(ours(lambda x, y: (x * 2, wnp.sum(y) * x[:0]), argnums=(0, 1))(V, e),
                  jax.jit(theirs(lambda x, y: (x * 2, jnp.sum(y) * x[:0]), argnums=(0, 1)))(V, e))


def test_nested_elementwise_grad_three_levels_against_jax(jax):
    x = np.linspace(-2.0, 2.0, 7)
    d = wg.elementwise_grad
    d1, d2, d3 = d(wnp.sin), d(d(wnp.sin)), d(d(d(wnp.sin)))
    jg, sin = jax.grad, jax.numpy.sin
    for ours, theirs in [(d1, jg(sin)), (d2, jg(jg(sin))), (d3, jg(jg(jg(sin))))]:
        np.testing.assert_allclose(ours(x), jax.jit(jax.vmap(theirs))(x), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(d3(x), -np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(d(d(lambda v: v ** 3))(x), 6 * x)
    assert d(d(wnp.sin))(0.5) == pytest.approx(-np.sin(0.5))


def test_jvp_gives_a_scalar_value_and_tangent_of_one_type():
    v, t = wg.jvp(lambda x: x ** 2, (3.0,), (1.0,))
    assert (v, t) == (9.0, 6.0) and type(v) is type(t) is float
    v, t = wg.jvp(lambda x: x ** 2, (np.float32(3.0),), (np.float32(1.0),))
    assert type(v) is type(t) is np.float32


def test_jacobian_of_an_output_traced_only_by_an_outer_transform_is_zero():
    for jac in (wg.jacrev, wg.jacfwd):
        outer = wg.grad(lambda y: wnp.sum(jac(lambda x: {"c": y * np.ones(3), "x": y * x})(np.ones(2))["c"]))
        assert outer(1.5) == 0.0
        assert wg.grad(lambda y: wnp.sum(jac(lambda x: y * x)(np.ones(2))))(1.5) == 2.0
