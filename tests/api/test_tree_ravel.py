"""wg.tree_ravel: a pytree as one vector and back (jax.flatten_util.ravel_pytree, autograd's flatten)."""

from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import wengert as wg
import wengert.numpy as wnp
from wengert.testing import check_grads

Pair = namedtuple("Pair", "w b")
rng = np.random.default_rng(2)
TREE = {"layer": [Pair(rng.standard_normal((2, 3)), rng.standard_normal(3))], "scale": 1.5,
        "none": None, "t": (np.float64(0.25), rng.standard_normal((1, 2)))}


def _loss(p):
    (layer,) = p["layer"]
    return wnp.sum(wnp.tanh(layer.w) * layer.b) * p["scale"] + wnp.sum(p["t"][1] ** 2) * p["t"][0]


def test_round_trip_keeps_structure_shapes_and_types():
    flat, unravel = wg.tree_ravel(TREE)
    assert flat.shape == (6 + 3 + 1 + 1 + 2,)
    back = unravel(flat)
    assert wg.tree_flatten(back)[1] == wg.tree_flatten(TREE)[1]
    assert type(back["scale"]) is float and isinstance(back["layer"][0], Pair)
    for a, b in zip(wg.tree_flatten(back)[0], wg.tree_flatten(TREE)[0]):
        np.testing.assert_array_equal(a, b)
        assert np.shape(a) == np.shape(b)


def test_gradient_through_unravel_is_the_tree_gradient_raveled():
    flat, unravel = wg.tree_ravel(TREE)
    g_flat = wg.grad(lambda v: _loss(unravel(v)))(flat)
    g_tree = wg.grad(_loss)(TREE)
    np.testing.assert_allclose(g_flat, wg.tree_ravel(g_tree)[0], rtol=1e-14)
    check_grads(lambda v: _loss(unravel(v)), flat)
    check_grads(lambda p: wnp.sum(wg.tree_ravel(p)[0] ** 3), {"a": rng.standard_normal(3), "b": 0.5})


def test_same_as_jax_ravel_pytree():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    from jax.flatten_util import ravel_pytree

    tree = {"a": rng.standard_normal((2, 2)), "b": [rng.standard_normal(3), np.float64(2.0)]}
    ours, _ = wg.tree_ravel(tree)
    theirs, _ = ravel_pytree(tree)
    np.testing.assert_array_equal(ours, np.asarray(theirs))


def test_dtypes_and_errors():
    flat, unravel = wg.tree_ravel({"i": np.arange(3), "f": np.ones(2, np.float32)})
    assert flat.dtype == np.float64
    back = unravel(flat)
    assert back["i"].dtype == np.arange(3).dtype and back["f"].dtype == np.float32
    assert wg.tree_ravel({})[0].shape == (0,)
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        unravel(np.zeros(4))


@settings(max_examples=40, deadline=None)
@given(st.lists(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
                           elements=st.floats(-5, 5)), max_size=4))
def test_round_trip_and_vjp_for_random_trees(leaves):
    tree = {"leaves": leaves, "pair": tuple(leaves[:2])}
    flat, unravel = wg.tree_ravel(tree)
    for a, b in zip(wg.tree_flatten(unravel(flat))[0], wg.tree_flatten(tree)[0]):
        np.testing.assert_array_equal(a, b)
    if flat.size:
        g = wg.grad(lambda v: wnp.sum(wnp.sin(wg.tree_ravel(unravel(v))[0])))(flat)
        np.testing.assert_allclose(g, np.cos(flat), rtol=1e-14)
