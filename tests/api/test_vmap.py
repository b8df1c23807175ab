"""``wg.vmap``: JAX's semantics (in_axes/out_axes as ints, None or pytrees), nesting, composition with
the other transforms in both orders, per-example gradients, and errors that name the argument and
both sizes. The rule-by-rule check is ``tests/rules/test_batching.py``."""

import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.engines.batching import NoBatchingRuleWarning

rng = np.random.default_rng(3)
X = rng.standard_normal((5, 3))
Y = rng.standard_normal((5, 3))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoBatchingRuleWarning)
        yield


def f(x):
    return wnp.sum(wnp.sin(x) * x ** 2) + x[0] * wnp.exp(x[-1])


def test_vmap_equals_a_loop_and_keeps_the_example_shape_visible():
    seen = []

    def g(x):
        seen.append(x.shape)
        return f(x)

    np.testing.assert_allclose(wg.vmap(g)(X), [f(x) for x in X], rtol=1e-14)
    assert seen == [(3,)]  # the function is called once, on one example's view


def test_in_axes_none_and_closures_are_the_same_for_every_example():
    W = rng.standard_normal((3, 3))
    got = wg.vmap(lambda x, b: wnp.tanh(W @ x + b), in_axes=(0, None))(X, 0.5)
    np.testing.assert_allclose(got, [np.tanh(W @ x + 0.5) for x in X], rtol=1e-14)


def test_axes_other_than_zero():
    got = wg.vmap(lambda x, y: x * y + wnp.cos(x), in_axes=(1, 0), out_axes=1)(X.T, Y)
    np.testing.assert_allclose(got, (X * Y + np.cos(X)).T, rtol=1e-14)
    got = wg.vmap(lambda x: wnp.sum(x ** 2), in_axes=-1)(X.T)
    np.testing.assert_allclose(got, np.sum(X ** 2, axis=1), rtol=1e-14)


def test_pytrees_in_and_out():
    params = {"w": X, "b": (Y, 2.0)}

    def g(p):
        return {"s": wnp.sum(p["w"] * p["b"][0]) + p["b"][1], "v": p["w"] * 2.0}

    out = wg.vmap(g, in_axes=({"w": 0, "b": (0, None)},), out_axes={"s": 0, "v": 1})(params)
    np.testing.assert_allclose(out["s"], np.sum(X * Y, axis=1) + 2.0, rtol=1e-14)
    np.testing.assert_allclose(out["v"], (2.0 * X).T, rtol=1e-14)


def test_an_unbatched_result_is_repeated_or_kept():
    out = wg.vmap(lambda x: (x * 2.0, 3.0))(X)
    np.testing.assert_allclose(out[1], np.full(5, 3.0))
    out = wg.vmap(lambda x: (x * 2.0, 3.0), out_axes=(0, None))(X)
    assert out[1] == 3.0


def test_nesting():
    Z = rng.standard_normal((4, 5, 3))
    got = wg.vmap(wg.vmap(f))(Z)
    np.testing.assert_allclose(got, [[f(z) for z in zz] for zz in Z], rtol=1e-14)
    got = wg.vmap(wg.vmap(lambda x, y: x * y, in_axes=(None, 0)), in_axes=(0, None))(X[:, 0], Y[:, 0])
    np.testing.assert_allclose(got, np.outer(X[:, 0], Y[:, 0]), rtol=1e-14)


def test_per_example_gradients_of_a_model():
    W1, W2 = rng.standard_normal((4, 3)), rng.standard_normal((2, 4))
    labels = np.array([0, 1, 1, 0, 1])

    def loss(params, x, label):
        a, b = params
        z = b @ wnp.tanh(a @ x)
        return wnp.log(wnp.sum(wnp.exp(z))) - z[label]

    per = wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))((W1, W2), X, labels)
    loop = [wg.grad(loss)((W1, W2), x, k) for x, k in zip(X, labels)]
    for i in range(2):
        assert per[i].shape == (5,) + (W1, W2)[i].shape
        np.testing.assert_allclose(per[i], [g[i] for g in loop], rtol=1e-12)


def test_grad_of_a_function_that_calls_vmap():
    W = rng.standard_normal((3, 3))

    def total(W):
        return wnp.sum(wg.vmap(lambda x: wnp.tanh(W @ x))(X) ** 2)

    want = wg.grad(lambda W: sum(wnp.sum(wnp.tanh(W @ x) ** 2) for x in X))(W)
    np.testing.assert_allclose(wg.grad(total)(W), want, rtol=1e-12)


def test_forward_mode_and_second_order_inside_and_outside():
    t = np.ones(3)
    got = wg.vmap(lambda x: wg.jvp(f, (x,), (t,))[1])(X)
    np.testing.assert_allclose(got, [wg.jvp(f, (x,), (t,))[1] for x in X], rtol=1e-12)
    got = wg.vmap(wg.hessian(f))(X)
    np.testing.assert_allclose(got, [wg.hessian(f)(x) for x in X], rtol=1e-12)
    outer = wg.jvp(lambda A: wg.vmap(f)(A), (X,), (Y,))[1]
    np.testing.assert_allclose(outer, [wg.jvp(f, (x,), (y,))[1] for x, y in zip(X, Y)], rtol=1e-12)


def test_data_dependent_branches_are_refused_with_the_way_out():
    with pytest.raises(TypeError, match="wnp.where"):
        wg.vmap(lambda x: x if x[0] > 0 else -x)(X)


def test_a_primitive_without_a_batching_rule_warns_once_and_loops():
    @wg.primitive
    def twice(x):
        return 2.0 * x

    wg.defvjp(twice, lambda g, out, x: 2.0 * g)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = wg.vmap(twice)(X)
        wg.vmap(twice)(X)
    np.testing.assert_allclose(got, 2.0 * X)
    named = [w for w in caught
             if issubclass(w.category, NoBatchingRuleWarning) and "'twice'" in str(w.message)]
    assert len(named) == 1


@pytest.mark.parametrize("call, message", [
    (lambda: wg.vmap(lambda x, y: x + y)(X, Y[:4]), "argument 0 has 5 examples, argument 1 has 4"),
    (lambda: wg.vmap(lambda x: x, in_axes=2)(X),
     "in_axes 2 is out of range for argument 0, of shape (5, 3)"),
    (lambda: wg.vmap(lambda x, y: x, in_axes=(0,))(X, Y), "one entry per argument (2 given)"),
    (lambda: wg.vmap(lambda p: p[0], in_axes=((0, 0, 0),))((X, Y)),
     "does not match the argument's structure"),
    (lambda: wg.vmap(lambda x: x, out_axes=None)(X), "out_axes is None for result 0"),
    (lambda: wg.vmap(lambda x: x, out_axes=2)(X), "out_axes 2 is out of range for result 0"),
    (lambda: wg.vmap(lambda x: x, in_axes=None)(X), "no argument is mapped"),
    (lambda: wg.vmap(lambda x: x, in_axes=0.5)(X), "in_axes must be ints, None"),
])
def test_bad_input_names_what_is_wrong(call, message):
    with pytest.raises((ValueError, TypeError)) as e:
        call()
    assert message in str(e.value)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                  elements=st.floats(-2, 2)),
       st.integers(min_value=-1, max_value=0))
def test_property_vmap_of_grad_equals_the_loop_on_any_shape(x, axis):
    def g(v):
        return wnp.sum(wnp.tanh(v) * v + wnp.exp(-v * v))

    got = wg.vmap(wg.grad(g), in_axes=axis, out_axes=axis)(x)
    want = np.stack([wg.grad(g)(v) for v in np.moveaxis(x, axis, 0)], axis=axis)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_against_jax_vmap():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def g(lib, x, w):
        return lib.sum(lib.tanh(w @ x) ** 2) + lib.max(x)

    W = rng.standard_normal((4, 3))
    ours = wg.vmap(wg.grad(lambda x, w: g(wnp, x, w)), in_axes=(0, None))(X, W)
    theirs = jax.vmap(jax.grad(lambda x, w: g(jnp, x, w)), in_axes=(0, None))(X, W)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12)


@pytest.mark.parametrize("chunk_size", [None, 1, 7, 100])
def test_jacobians_and_hessians_in_chunks_equal_the_whole(chunk_size):
    x = np.linspace(-1.0, 1.0, 12)

    def rosen(v):
        return wnp.sum(100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2)

    def field(v):
        return wnp.tanh(np.arange(36.0).reshape(3, 12) / 36.0 @ v) * v[:3]

    H = wg.hessian(rosen, chunk_size=chunk_size)(x)
    d = np.zeros((12, 12))  # Rosenbrock's Hessian, by hand
    i = np.arange(11)
    d[i, i] += 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    d[i + 1, i + 1] += 200.0
    d[i, i + 1] = d[i + 1, i] = -400.0 * x[:-1]
    np.testing.assert_allclose(H, d, rtol=1e-12, atol=1e-12)
    Jr = wg.jacrev(field, chunk_size=chunk_size)(x)
    Jf = wg.jacfwd(field, chunk_size=chunk_size)(x)
    eps, fd = 1e-6, np.empty((3, 12))
    for k in range(12):
        e = np.zeros(12)
        e[k] = eps
        fd[:, k] = (np.asarray(field(x + e)) - np.asarray(field(x - e))) / (2 * eps)
    np.testing.assert_allclose(Jr, fd, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(Jf, Jr, rtol=1e-13, atol=1e-15)


def test_chunk_size_must_be_positive():
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        wg.jacrev(wnp.sin, chunk_size=0)(np.ones(3))


def test_batched_integer_indices_pick_each_examples_own_entries():
    X3 = rng.standard_normal((4, 5, 3))
    rows, one = rng.integers(0, 5, (4, 2)), rng.integers(0, 5, 4)
    cases = [(lambda x, i: x[i], (X3, rows), (0, 0)), (lambda x, i: x[i], (X3, one), (0, 0)),
             (lambda x, i: wnp.take(x, i, axis=0), (X3[0], rows), (None, 0)),
             (lambda x, i: wnp.sum(x[i] ** 2), (X3, one), (0, 0))]
    for fun, args, axes in cases:
        def example(k):
            return [a[k] if ax == 0 else a for a, ax in zip(args, axes)]

        loss = wg.grad(lambda x, i: wnp.sum(wnp.sin(fun(x, i))))
        np.testing.assert_allclose(wg.vmap(fun, in_axes=axes)(*args), [fun(*example(k)) for k in range(4)])
        np.testing.assert_allclose(wg.vmap(loss, in_axes=axes)(*args), [loss(*example(k)) for k in range(4)])


def test_compiling_a_vmapped_function_generates_batched_code():
    W = rng.standard_normal((3, 3))

    def total(W, X):
        return wnp.sum(wg.vmap(lambda x: wnp.tanh(W @ x) ** 2)(X))

    compiled = wg.compile(total)
    np.testing.assert_allclose(compiled(W, X), total(W, X), rtol=1e-14)
    np.testing.assert_allclose(compiled.grad(0)(W, X), wg.grad(total)(W, X), rtol=1e-13)
    source = compiled.grad(0).source(W, X)
    assert source.count("@") == 2 and "for " not in source  # one product each way, for the whole batch
    per_example = wg.vmap(wg.grad(lambda W, x: wnp.sum(wnp.tanh(W @ x) ** 2)), in_axes=(None, 0))
    np.testing.assert_allclose(wg.compile(per_example)(W, X), per_example(W, X), rtol=1e-13)


def test_tensor_backward_inside_vmap():
    def g(x):
        v = wg.tensor(x, requires_grad=True)
        loss = wnp.sum(wnp.sin(v) * v)
        loss.backward()
        return v.grad

    np.testing.assert_allclose(wg.vmap(g)(X), [wg.grad(lambda x: wnp.sum(wnp.sin(x) * x))(x) for x in X],
                               rtol=1e-14)

    def with_seed(x):
        v = wg.tensor(x, requires_grad=True)
        (v * v).backward(gradient=np.arange(3.0))
        return v.grad

    np.testing.assert_allclose(wg.vmap(with_seed)(X), 2 * X * np.arange(3.0), rtol=1e-14)

    def not_scalar(x):
        v = wg.tensor(x, requires_grad=True)
        (v * v).backward()

    with pytest.raises(RuntimeError, match="each example has shape"):
        wg.vmap(not_scalar)(X)


def test_vjp_and_jacobians_inside_vmap():
    def f(x):
        return wnp.tanh(x) * x[::-1]

    got = wg.vmap(lambda x, u: wg.vjp(f, x)[1](u)[0])(X, Y)
    np.testing.assert_allclose(got, [wg.vjp(f, x)[1](u)[0] for x, u in zip(X, Y)], rtol=1e-14)
    for jac in (wg.jacrev, wg.jacfwd):
        np.testing.assert_allclose(wg.vmap(jac(f))(X), [jac(f)(x) for x in X], rtol=1e-13)


def test_a_data_dependent_shape_inside_vmap_is_refused_by_name():
    """A boolean mask's selection or ``nonzero`` has a shape of its own per example: the examples
    cannot be one batch (JAX refuses these too). It is refused before anything runs, naming the
    function, even where the counts happen to agree (tests/api/test_vmap_indexing.py has more)."""
    X = np.array([[0.5, -1.0, 2.0], [1.0, 2.0, 3.0]])
    same_counts = np.array([[0.5, -1.0, 2.0], [1.0, -2.0, 3.0]])
    for f, name in ((lambda v: v[v > 0], r"x\[mask\] with a boolean mask"),
                    (lambda v: np.nonzero(v > 0)[0], r"np.nonzero\(x\)"),
                    (lambda v: np.sum(v[v > 0]), r"x\[mask\] with a boolean mask")):
        for data in (X, same_counts):
            with warnings.catch_warnings(), pytest.raises(
                    IndexError, match=rf"{name}.*shape depends on the data.*wnp.where\(mask, x, 0\)"):
                warnings.simplefilter("error", NoBatchingRuleWarning)  # refused before any per-example run
                wg.vmap(f)(data)
