"""Indexing inside ``wg.vmap`` (issue 27, items 10, 11 and 15), with ``jax.vmap`` as the oracle.

- A batched integer index -- into an unbatched table (an embedding lookup), a batched one, as one
  part of a tuple index, negative, 2-d, mapped over another axis -- is one gather: values and
  derivatives as ``jax.vmap`` gives them, and no per-example loop.
- A plain NumPy array indexed by a batched index (closed over, ``in_axes=None``, ``np.take``) cannot
  be seen by NumPy's indexing: the function runs once per example, with a warning that says how to
  make it one call.
- A result whose shape depends on the data (a batched boolean mask's selection, ``nonzero``,
  ``flatnonzero``, ``argwhere``, ``np.where(c)``) is refused before anything runs; a mask the same for
  every example selects a fixed shape and works.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.engines.batching import NoBatchingRuleWarning

W = np.arange(20.0).reshape(5, 4) / 7.0 - 1.0
IDX = np.array([0, 3, 4, 3, 1, 0])


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax, jax.numpy


def _one_call():
    """A context in which a per-example loop (NoBatchingRuleWarning) is an error."""
    cm = warnings.catch_warnings()
    cm.__enter__()
    warnings.simplefilter("error", NoBatchingRuleWarning)
    return cm


# -- item 11: an embedding lookup --------------------------------------------------------------------

def test_embedding_lookup_through_plain_numpy_indexing_matches_jax():
    """``W[i]`` with a plain ``W`` (an argument with in_axes=None, or closed over) and ``np.take``:
    NumPy's indexing runs once per example, warned once, with the values jax.vmap gives."""
    jax, jnp = _jax()
    expected = np.asarray(jax.vmap(lambda w, i: w[i], in_axes=(None, 0))(jnp.asarray(W), IDX))
    np.testing.assert_array_equal(expected, W[IDX])
    for f, args, axes in ((lambda w, i: w[i], (W, IDX), (None, 0)),
                          (lambda i: W[i], (IDX,), 0),
                          (lambda i: np.take(W, i, axis=0), (IDX,), 0),
                          (lambda w, i: np.take(w, i, axis=0), (W, IDX), (None, 0))):
        with pytest.warns(NoBatchingRuleWarning, match=r"a plain NumPy array is indexed by an index "
                          r"batched by wg.vmap.*runs once per example \(6 calls here\).*"
                          r"wnp.take\(W, i, axis=0\)"):
            got = wg.vmap(f, in_axes=axes)(*args)
        np.testing.assert_array_equal(got, expected)


def test_embedding_lookup_on_a_traced_table_is_one_gather():
    """``wnp.take`` and ``W[i]`` on a table that ``wg.grad`` traces run in one call; gradient,
    jacrev and jacfwd equal JAX's (repeated indices add up)."""
    jax, jnp = _jax()
    C = np.linspace(-1.0, 2.0, IDX.size * W.shape[1]).reshape(IDX.size, W.shape[1])

    def ours(w):
        return wnp.sum(wg.vmap(lambda i: w[i])(IDX) * C)

    def ours_arg(w):
        return wnp.sum(wg.vmap(lambda w, i: w[i], in_axes=(None, 0))(w, IDX) * C)

    def ours_take(w):
        return wnp.sum(wg.vmap(lambda i: wnp.take(w, i, axis=0))(IDX) * C)

    def theirs(w):
        return jnp.sum(jax.vmap(lambda i: w[i])(IDX) * C)

    expected = np.asarray(jax.grad(theirs)(W))
    cm = _one_call()
    try:
        for f in (ours, ours_arg, ours_take):
            np.testing.assert_allclose(wg.grad(f)(W), expected, rtol=1e-14)
        lookup = lambda w: wg.vmap(lambda i: w[i])(IDX)  # noqa: E731
        jlookup = lambda w: jax.vmap(lambda i: w[i])(IDX)  # noqa: E731
        for ours_jac, their_jac in ((wg.jacrev, jax.jacrev), (wg.jacfwd, jax.jacfwd)):
            np.testing.assert_array_equal(ours_jac(lookup)(W), np.asarray(their_jac(jlookup)(jnp.asarray(W))))
    finally:
        cm.__exit__(None, None, None)


def test_per_example_gradient_of_a_lookup_matches_jax():
    """``vmap(grad(...))`` with the batched index inside the differentiated function."""
    jax, jnp = _jax()
    cm = _one_call()
    try:
        for ours_f, their_f in ((lambda w, i: wnp.sum(w[i] ** 2), lambda w, i: jnp.sum(w[i] ** 2)),
                                (lambda w, i: w[i, 1] ** 3, lambda w, i: w[i, 1] ** 3),
                                (lambda w, i: wnp.sum(w[:, i]) * wnp.sum(w[i, :]),
                                 lambda w, i: jnp.sum(w[:, i]) * jnp.sum(w[i, :]))):
            idx = IDX % 4
            got = wg.vmap(wg.grad(ours_f), in_axes=(None, 0))(W, idx)
            expected = jax.vmap(jax.grad(their_f), in_axes=(None, 0))(jnp.asarray(W), idx)
            np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-14)
    finally:
        cm.__exit__(None, None, None)


def test_a_plain_table_beside_a_differentiated_argument():
    """The per-example run keeps the derivative of the other arguments."""
    jax, jnp = _jax()
    X = np.linspace(0.5, 2.0, IDX.size * 4).reshape(IDX.size, 4)

    def ours(x):
        return wnp.sum(wg.vmap(lambda xi, i: wnp.sin(xi) * W[i])(x, IDX))

    with pytest.warns(NoBatchingRuleWarning):
        got = wg.grad(ours)(X)
    table = jnp.asarray(W)  # a NumPy array indexed by a tracer is refused by JAX
    expected = jax.grad(lambda x: jnp.sum(jax.vmap(lambda xi, i: jnp.sin(xi) * table[i])(x, IDX)))(X)
    np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-14)


# the index forms: (function, table shape, index shape per example, index in_axes)
_FORMS = {
    "x[i]": (lambda x, i: x[i], (5, 4), (), 0),
    "x[i] negative": (lambda x, i: x[i - 5], (5, 4), (), 0),
    "x[i] 2-d index": (lambda x, i: x[i], (5, 4), (2, 3), 0),
    "x[i] in_axes=1": (lambda x, i: x[i], (5, 4), (3,), 1),
    "x[i, 1]": (lambda x, i: x[i, 1], (5, 4), (), 0),
    "x[1, i]": (lambda x, i: x[1, i % 4], (5, 4), (2,), 0),
    "x[:, i]": (lambda x, i: x[:, i % 4], (5, 4), (3,), 0),
    "x[..., i]": (lambda x, i: x[..., i % 4], (2, 5, 4), (), 0),
    "x[i, :, j]": (lambda x, i: x[i, :, np.array([1, 0])], (5, 3, 2), (2,), 0),
    "x[None, i]": (lambda x, i: x[None, i], (5, 4), (2,), 0),
    "x[i, i % 4]": (lambda x, i: x[i, i % 4], (5, 4), (3,), 0),
    "x[i][:, None, ::2]": (lambda x, i: x[i][:, None, ::2], (5, 4), (2,), 0),
    "x[mask, i]": (lambda x, i: x[np.array([True, False, True, True, False]), i % 4], (5, 4), (), 0),
}


def _index(shape, rng, size, in_axis):
    batch = (size,) + shape
    i = rng.integers(0, 5, size=batch)
    return np.moveaxis(i, 0, in_axis) if in_axis else i


@pytest.mark.parametrize("form", sorted(_FORMS))
@pytest.mark.parametrize("table", ["batched", "unbatched"])
def test_index_forms_match_jax_in_value_and_gradient(form, table):
    """Every form on a batched table and on one table for every example (traced by wg.grad):
    values and the gradient of a weighted sum equal jax.vmap's, in one call."""
    jax, jnp = _jax()
    f, shape, index_shape, in_axis = _FORMS[form]
    rng = np.random.default_rng(len(form))
    size = 3
    I = _index(index_shape, rng, size, in_axis)  # noqa: E741
    X = rng.normal(size=((size,) + shape) if table == "batched" else shape)
    x_axis = 0 if table == "batched" else None
    expected = np.asarray(jax.vmap(f, in_axes=(x_axis, in_axis))(jnp.asarray(X), I))
    C = rng.normal(size=expected.shape)
    cm = _one_call()
    try:
        if table == "batched":
            np.testing.assert_array_equal(wg.vmap(f, in_axes=(0, in_axis))(X, I), expected)
        grad = wg.grad(lambda x: wnp.sum(wg.vmap(f, in_axes=(x_axis, in_axis))(x, I) * C))(X)
        their_grad = jax.grad(lambda x: jnp.sum(jax.vmap(f, in_axes=(x_axis, in_axis))(x, I) * C))(X)
        np.testing.assert_allclose(grad, np.asarray(their_grad), rtol=1e-13, atol=1e-15)
        values = wg.vjp(lambda x: wg.vmap(f, in_axes=(x_axis, in_axis))(x, I), X)[0]
        np.testing.assert_array_equal(values, expected)
    finally:
        cm.__exit__(None, None, None)


@pytest.mark.parametrize("form", ["x[i]", "x[i, 1]", "x[:, i]", "x[i, :, j]"])
def test_index_forms_forward_mode_and_per_example_jacobians(form):
    """jacfwd through the batched gather, and vmap(jacrev) with the index batched outside."""
    jax, jnp = _jax()
    f, shape, index_shape, in_axis = _FORMS[form]
    rng = np.random.default_rng(7)
    I = _index(index_shape, rng, 3, in_axis)  # noqa: E741
    X = rng.normal(size=(3,) + shape)
    cm = _one_call()
    try:
        got = wg.jacfwd(lambda x: wg.vmap(f)(x, I))(X)
        expected = jax.jacfwd(lambda x: jax.vmap(f)(x, I))(jnp.asarray(X))
        np.testing.assert_array_equal(got, np.asarray(expected))
        got = wg.vmap(wg.jacrev(f))(X, I)
        expected = jax.vmap(jax.jacrev(f))(jnp.asarray(X), I)
        np.testing.assert_array_equal(got, np.asarray(expected))
    finally:
        cm.__exit__(None, None, None)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_batched_indices_match_jax(data):
    """Hypothesis: a table of 1 to 3 axes, batched or not; a tuple index whose parts are a batched
    integer array, a constant integer array, an int, a slice or None; values and gradients."""
    jax, jnp = _jax()
    ndim = data.draw(st.integers(1, 3), label="ndim")
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim), label="shape"))
    size = data.draw(st.integers(1, 3), label="size")
    batched_table = data.draw(st.booleans(), label="batched table")
    n_parts = data.draw(st.integers(1, ndim), label="parts")
    index_shape = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2), label="index shape"))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    kinds = [data.draw(st.sampled_from(["batched", "array", "int", "slice", "none"]), label=f"part {k}")
             for k in range(n_parts)]
    if "batched" not in kinds:
        kinds[data.draw(st.integers(0, n_parts - 1), label="batched part")] = "batched"
    batched_parts, statics, axis = [], [], 0
    for kind in kinds:
        n = shape[axis] if axis < ndim else 1
        if kind == "batched":
            batched_parts.append(rng.integers(-n, n, size=(size,) + index_shape))
            statics.append(None)
        elif kind == "array":
            statics.append(rng.integers(-n, n, size=index_shape))
        elif kind == "int":
            statics.append(int(rng.integers(-n, n)))
        elif kind == "slice":
            statics.append(slice(None, None, data.draw(st.sampled_from([1, -1, 2]), label="step")))
        else:
            statics.append("newaxis")
        axis += kind != "none"

    def f(x, *batched):
        it = iter(batched)
        key = tuple(next(it) if s is None else (None if isinstance(s, str) else s) for s in statics)
        return x[key]

    X = rng.normal(size=((size,) + shape) if batched_table else shape)
    axes = (0 if batched_table else None,) + (0,) * len(batched_parts)
    expected = np.asarray(jax.vmap(f, in_axes=axes)(jnp.asarray(X), *batched_parts))
    C = rng.normal(size=expected.shape)
    cm = _one_call()
    try:
        got = wg.vjp(lambda x: wg.vmap(f, in_axes=axes)(x, *batched_parts), X)[0]
        np.testing.assert_array_equal(got, expected)
        grad = wg.grad(lambda x: wnp.sum(wg.vmap(f, in_axes=axes)(x, *batched_parts) * C))(X)
    finally:
        cm.__exit__(None, None, None)
    their_grad = jax.grad(lambda x: jnp.sum(jax.vmap(f, in_axes=axes)(x, *batched_parts) * C))(X)
    np.testing.assert_allclose(grad, np.asarray(their_grad), rtol=1e-13, atol=1e-15)


def test_plain_indexing_with_randomness_same_shares_the_draws():
    """randomness='same' holds when NumPy's indexing makes the function run once per example: every
    example sees the same draw."""
    with pytest.warns(NoBatchingRuleWarning):
        got = wg.vmap(lambda i: W[i] + np.random.rand(), randomness="same")(IDX)
    noise = got - W[IDX]
    np.testing.assert_allclose(noise, np.full_like(noise, noise[0, 0]), atol=1e-14)


def test_plain_indexing_after_a_draw_is_refused_with_randomness_error():
    """The default randomness='error' is kept: a draw before the plain indexing is refused."""
    state = np.random.get_state()
    with pytest.raises(RuntimeError, match=r"drew random numbers from .*randomness='error'"):
        wg.vmap(lambda i: np.random.rand() + W[i])(IDX)
    np.testing.assert_array_equal(np.random.get_state()[1], state[1])


# -- item 15: shapes that depend on the data ---------------------------------------------------------

X3 = np.array([[0.5, -1.0, 2.0], [1.0, 2.0, 3.0], [1.0, -2.0, 3.0]])


@pytest.mark.parametrize("f, what", [
    (lambda x: x[x > 0], r"x\[mask\] with a boolean mask batched by wg.vmap"),
    (lambda x: wnp.sum(x[x > 0]), r"x\[mask\] with a boolean mask batched by wg.vmap"),
    (lambda x: W[0, :3][x > 0], r"Indexing a plain NumPy array with a boolean mask batched by wg.vmap"),
    (lambda x: x[x > 0, None], r"x\[mask\] with a boolean mask batched by wg.vmap"),
    (lambda x: np.nonzero(x > 0), r"np.nonzero\(x\)"),
    (lambda x: np.where(x > 0), r"np.where\(x\) with one argument"),
    (lambda x: wnp.where(x > 0), r"np.where\(x\) with one argument"),
    (lambda x: np.flatnonzero(x), r"np.flatnonzero\(x\)"),
    (lambda x: np.argwhere(x > 0), r"np.argwhere\(x\)"),
], ids=["mask", "masked-sum", "plain-array-mask", "mask-newaxis", "nonzero", "where", "wnp.where",
        "flatnonzero", "argwhere"])
def test_data_dependent_shapes_are_refused_before_running(f, what):
    """Refused up front (no per-example run, no warning), naming the function, the count the shape
    depends on, and what to write instead -- as jax.vmap refuses them."""
    jax, jnp = _jax()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(IndexError, match=what + r".*result whose shape depends on the data \(the "
                           r"number of .*NonConcreteBooleanIndexError.*wnp.where\(mask, x, 0\)"):
            wg.vmap(f)(X3)
    with pytest.raises(Exception):  # noqa: B017 - JAX's errors vary by function; it refuses each
        jax.vmap(lambda x: f(x) if "wnp" not in what else jnp.where(x > 0))(jnp.asarray(X3))


def test_a_mask_the_same_for_every_example_selects_a_fixed_shape():
    """``x[mask]`` with a constant mask and a batched x is ``X[:, mask]``: values and gradient as JAX."""
    jax, jnp = _jax()
    mask = np.array([True, False, True])
    cm = _one_call()
    try:
        np.testing.assert_array_equal(wg.vmap(lambda x: x[mask])(X3), X3[:, mask])
        got = wg.grad(lambda X: wnp.sum(wg.vmap(lambda x: x[mask] ** 2)(X)))(X3)
    finally:
        cm.__exit__(None, None, None)
    expected = jax.grad(lambda X: jnp.sum(jax.vmap(lambda x: x[mask] ** 2)(X)))(X3)
    np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-15)


def test_where_with_a_mask_is_the_fixed_shape_alternative():
    """The advice of the refusal works: a masked sum with wnp.where, values and gradient as JAX."""
    jax, jnp = _jax()
    got = wg.grad(lambda X: wnp.sum(wg.vmap(lambda x: wnp.sum(wnp.where(x > 0, x, 0.0) ** 2))(X)))(X3)
    expected = jax.grad(lambda X: jnp.sum(jax.vmap(lambda x: jnp.sum(jnp.where(x > 0, x, 0.0) ** 2))(X)))(X3)
    np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-15)


# -- item 10: an in-place update of one element from another -------------------------------------------

def test_element_update_from_another_element_under_vmap():
    """``y[2] -= x[1]`` on a 1-d example: values, gradient and Jacobians as JAX's ``.at[2].add``."""
    jax, jnp = _jax()

    def ours(x):
        y = x * 1.5
        y[2] -= x[1]
        y[0] *= x[2]
        return y

    def theirs(x):
        y = x * 1.5
        y = y.at[2].add(-x[1])
        return y.at[0].multiply(x[2])

    X = np.linspace(-1.0, 2.0, 12).reshape(3, 4)
    before = X.copy()
    np.testing.assert_allclose(wg.vmap(ours)(X), np.asarray(jax.vmap(theirs)(X)), rtol=1e-15)
    np.testing.assert_array_equal(X, before)
    C = np.arange(12.0).reshape(3, 4)
    got = wg.grad(lambda X: wnp.sum(wg.vmap(ours)(X) * C))(X)
    expected = jax.grad(lambda X: jnp.sum(jax.vmap(theirs)(X) * C))(X)
    np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-15)
    np.testing.assert_allclose(wg.vmap(wg.jacrev(ours))(X), np.asarray(jax.vmap(jax.jacrev(theirs))(X)),
                               rtol=1e-15)
    np.testing.assert_allclose(wg.vmap(wg.jacfwd(ours))(X), np.asarray(jax.vmap(jax.jacfwd(theirs))(X)),
                               rtol=1e-15)
