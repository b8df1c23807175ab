"""``wg.vmap``'s results are the caller's own: they never share memory with its arguments (nor are
they views of a closed-over array), like the stacked results of a Python loop, and writing into
them changes nothing else. Checked for identity, views, ``in_axes``/``out_axes`` moves, pytrees of
results, nested vmap, vmap of grad, closed-over and unmapped results, and by a Hypothesis test
over shapes and axes against a loop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp

rng = np.random.default_rng(17)
X = rng.standard_normal((4, 3))
W = rng.standard_normal((2, 2))


def owned(out, *others):
    """Every array leaf of ``out`` is writable and shares no memory with ``others``; writing into it
    leaves ``others`` unchanged."""
    for leaf in wg.tree_flatten(out)[0]:
        if not isinstance(leaf, np.ndarray):
            continue
        assert leaf.flags.writeable
        for a in others:
            assert not np.shares_memory(leaf, a), (leaf.shape, a.shape)
    before = [a.copy() for a in others]
    for leaf in wg.tree_flatten(out)[0]:
        if isinstance(leaf, np.ndarray) and leaf.size:
            leaf[...] = 12345.0
    for a, b in zip(others, before):
        np.testing.assert_array_equal(a, b)
    return True


def test_the_identity_hands_back_a_copy_not_the_argument():
    x = X.copy()
    out = wg.vmap(lambda x: x)(x)
    assert out is not x
    np.testing.assert_array_equal(out, X)
    assert owned(out, x)


@pytest.mark.parametrize("fun,loop", [
    (lambda x: x[0], lambda x: x[0]),
    (lambda x: x[1:], lambda x: x[1:]),
    (lambda x: x.reshape(3, 1), lambda x: x.reshape(3, 1)),
    (lambda x: wnp.transpose(x[None]), lambda x: x[None].T),
], ids=["index", "slice", "reshape", "transpose"])
def test_a_view_of_an_argument_is_copied(fun, loop):
    x = X.copy()
    out = wg.vmap(fun)(x)
    np.testing.assert_array_equal(out, np.stack([loop(r) for r in X]))
    assert owned(out, x)


def test_in_axes_and_out_axes_moves_are_copied():
    x = X.copy()
    out = wg.vmap(lambda c: c, in_axes=1, out_axes=1)(x)  # a transpose of a transpose: x's memory
    np.testing.assert_array_equal(out, X)
    assert owned(out, x)
    out = wg.vmap(lambda r: r, in_axes=0, out_axes=1)(x)  # X.T's memory
    np.testing.assert_array_equal(out, X.T)
    assert owned(out, x)


def test_an_argument_given_as_a_view_of_a_bigger_array():
    big = rng.standard_normal((8, 3))
    out = wg.vmap(lambda r: r[::-1])(big[::2])
    np.testing.assert_array_equal(out, big[::2, ::-1])
    assert owned(out, big)


def test_pytrees_of_results_each_owned():
    x, y = X.copy(), rng.standard_normal(4)
    out = wg.vmap(lambda a, b: (a, {"v": a[1:], "s": b, "fresh": a * b}, [b * 2.0]))(x, y)
    np.testing.assert_array_equal(out[0], X)
    np.testing.assert_array_equal(out[1]["fresh"], X * y[:, None])
    assert owned(out, x, y)


def test_unmapped_arguments_and_out_axes_none():
    x, w = X.copy(), W.copy()
    out = wg.vmap(lambda a, b: (a, b), in_axes=(0, None))(x, w)
    np.testing.assert_array_equal(out[1], np.stack([W] * 4))
    assert owned(out, x, w)
    out = wg.vmap(lambda a, b: b, in_axes=(0, None), out_axes=None)(x, w)
    np.testing.assert_array_equal(out, W)
    assert out is not w and owned(out, x, w)


@pytest.mark.parametrize("shape", [(2, 2), (70, 70)], ids=["small", "large"])  # filled / broadcast
def test_a_closed_over_array_comes_back_repeated_in_a_new_array_as_in_jax(shape):
    w = rng.standard_normal(shape)
    kept = w.copy()
    out = wg.vmap(lambda x: w)(X)
    assert out.shape == (4,) + shape
    np.testing.assert_array_equal(out, np.stack([kept] * 4))
    assert owned(out, w)
    out = wg.vmap(lambda x: w, out_axes=None)(X)
    assert out is not w and owned(out, w)
    out = wg.vmap(lambda x: (w[0], x), out_axes=(1, 0))(X)
    np.testing.assert_array_equal(out[0], np.stack([kept[0]] * 4, axis=1))
    assert owned(out, w, X.copy())


def test_a_closed_over_result_agrees_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    ours = wg.vmap(lambda x: (W, x[0] * W), out_axes=(1, 0))(X)
    theirs = jax.vmap(lambda x: (W, x[0] * W), out_axes=(1, 0))(X)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-15)


def test_nested_vmap():
    x, y = X.copy(), rng.standard_normal((5, 2))
    out = wg.vmap(wg.vmap(lambda e: e))(x)
    np.testing.assert_array_equal(out, X)
    assert owned(out, x)
    out = wg.vmap(lambda r: wg.vmap(lambda s: r)(y))(x)  # inner: unmapped; outer: x's rows
    np.testing.assert_array_equal(out, np.broadcast_to(X[:, None, :], (4, 5, 3)))
    assert owned(out, x, y)
    out = wg.vmap(lambda r: wg.vmap(lambda s: (s, r[0]))(y))(x)
    np.testing.assert_array_equal(out[0], np.broadcast_to(y, (4, 5, 2)))
    assert owned(out, x, y)


def test_vmap_of_grad():
    x, y = X.copy(), rng.standard_normal((4, 3))
    g = wg.vmap(wg.grad(lambda a, b: wnp.sum(a * b)))(x, y)  # the gradient is b itself
    np.testing.assert_array_equal(g, y)
    assert owned(g, x, y)
    g = wg.vmap(wg.grad(lambda a: wnp.sum(a)))(x)
    np.testing.assert_array_equal(g, np.ones_like(X))
    assert owned(g, x)


def test_grad_through_vmap_is_unchanged():
    g = wg.grad(lambda a: wnp.sum(wg.vmap(lambda r: r[::-1])(a) * X))(X)
    np.testing.assert_allclose(g, X[:, ::-1], rtol=1e-15)
    h = wg.hessian(lambda a: wnp.sum(wg.vmap(lambda r: r)(a) ** 3))(X[0])
    np.testing.assert_allclose(h, np.diag(6 * X[0]), rtol=1e-14)


def test_a_fresh_result_is_not_copied():
    made = []

    def f(x):
        out = x * 2.0
        made.append(out)
        return out
    result = wg.vmap(f)(X)
    assert result is made[0].value  # the batched computation's own array, handed back as it is


# -- random shapes and axes against a Python loop -----------------------------------------------------

_FUNS = {
    "identity": (0, lambda x: x),
    "first": (1, lambda x: x[0]),
    "transpose": (0, lambda x: x.T),
    "reshape": (0, lambda x: x.reshape(-1)),
    "double": (0, lambda x: x * 2.0),
    "closed": (0, lambda x: W),
    "pair": (1, lambda x: (x, x[..., ::-1])),
}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.sampled_from(sorted(_FUNS)), st.data())
def test_no_result_shares_memory_and_values_are_a_loops(shape, name, data):
    min_example_dims, fun = _FUNS[name]
    if len(shape) - 1 < min_example_dims:
        shape = shape + [2]
    x = np.arange(float(np.prod(shape))).reshape(shape)
    in_axis = data.draw(st.integers(-len(shape), len(shape) - 1), "in_axis")
    examples = [np.take(x, i, axis=in_axis) for i in range(x.shape[in_axis])]
    looped = [fun(e) for e in examples]
    leaves0 = wg.tree_flatten(looped[0])[0]
    out_axes = [data.draw(st.integers(-np.ndim(leaf) - 1, np.ndim(leaf)), "out_axis") for leaf in leaves0]
    spec = wg.tree_unflatten(wg.tree_flatten(looped[0])[1], out_axes)
    kept = x.copy()
    out = wg.vmap(fun, in_axes=in_axis, out_axes=spec)(x)
    for k, leaf in enumerate(wg.tree_flatten(out)[0]):
        want = np.stack([wg.tree_flatten(r)[0][k] for r in looped], axis=out_axes[k])
        np.testing.assert_array_equal(leaf, want)
    assert owned(out, x, W)
    np.testing.assert_array_equal(x, kept)
