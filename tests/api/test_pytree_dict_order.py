"""Pytrees order a dict's leaves by sorted key, as JAX does: flattening, structure comparison,
``tree_unflatten``, ``tree_ravel`` and every transform taking pytrees, checked against
``jax.tree_util`` / ``jax.flatten_util.ravel_pytree`` / ``jax.grad``..., and the functional
optimisers against HIPS autograd's. ``OrderedDict`` keeps its insertion order, ``defaultdict`` is
sorted and keeps its factory (JAX's rules for both); keys that cannot be sorted are an error."""

import random
from collections import OrderedDict, defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import wengert as wg
import wengert.numpy as wnp
from wengert import optim

rng = np.random.default_rng(31)
A, B, C = rng.standard_normal(3), rng.standard_normal((2, 2)), rng.standard_normal(2)


@pytest.fixture
def jax():
    jax = pytest.importorskip("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", before)


def same_tree(ours, theirs, rtol=1e-12):
    """Same types, same keys in the same order, same leaves (shape and value)."""
    if isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs), (ours, theirs)
        for k in theirs:
            same_tree(ours[k], theirs[k], rtol)
    elif isinstance(theirs, (tuple, list)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs):
            same_tree(a, b, rtol)
    else:
        assert np.shape(ours) == np.shape(theirs)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=1e-13)


# -- flattening, structures, unflattening -------------------------------------------------------------


def test_a_dicts_leaves_come_by_sorted_key_like_jax(jax):
    tree = {"b": B, "a": [A, {"z": 1.0, "y": C}]}
    leaves, _ = wg.tree_flatten(tree)
    theirs = jax.tree_util.tree_leaves(tree)
    assert [id(x) for x in leaves] == [id(x) for x in theirs]
    assert leaves[0] is A and leaves[1] is C and leaves[3] is B


def test_same_keys_in_another_order_are_the_same_structure():
    one, other = {"a": A, "b": {"c": C, "d": 2.0}}, {"b": {"d": 3.0, "c": C}, "a": A}
    assert wg.tree_flatten(one)[1] == wg.tree_flatten(other)[1]
    out = wg.tree_map(lambda x, y: x - y, one, other)
    same_tree(out, {"a": A * 0, "b": {"c": C * 0, "d": -1.0}})


def test_tree_unflatten_of_a_dict_structure_sorts_the_keys_like_jax(jax):
    tree = {"b": 1.0, "a": 2.0, "c": {"y": 3.0, "x": 4.0}}
    ours = wg.tree_unflatten(wg.tree_flatten(tree)[1], [10.0, 20.0, 30.0, 40.0])
    theirs = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(tree), [10.0, 20.0, 30.0, 40.0])
    same_tree(ours, theirs)
    assert list(ours) == ["a", "b", "c"] and ours == {"a": 10.0, "b": 20.0, "c": {"x": 30.0, "y": 40.0}}


def test_tree_map_over_dicts_in_another_order_agrees_with_jax(jax):
    one, other = {"b": B, "a": A}, {"a": 2 * A, "b": 3 * B}
    same_tree(wg.tree_map(lambda x, y: x * y, one, other),
              jax.tree_util.tree_map(lambda x, y: np.asarray(x * y), one, other))


def test_an_ordered_dict_keeps_its_order_which_is_part_of_its_structure(jax):
    od = OrderedDict([("b", B), ("a", A)])
    leaves, treedef = wg.tree_flatten(od)
    assert leaves[0] is B and leaves[1] is A
    assert [id(x) for x in leaves] == [id(x) for x in jax.tree_util.tree_leaves(od)]
    back = wg.tree_unflatten(treedef, [1.0, 2.0])
    assert type(back) is OrderedDict and list(back.items()) == [("b", 1.0), ("a", 2.0)]
    # another order, or a plain dict, is another structure, as in JAX
    other = OrderedDict([("a", A), ("b", B)])
    assert wg.tree_flatten(other)[1] != treedef
    assert (jax.tree_util.tree_structure(other) == jax.tree_util.tree_structure(od)) is False
    assert wg.tree_flatten(dict(od))[1] != treedef
    with pytest.raises(ValueError, match=r"structures differ: OrderedDict\(\{'b': \*, 'a': \*\}\)"):
        wg.tree_map(lambda x, y: x, od, other)


def test_a_defaultdict_is_sorted_and_keeps_its_factory(jax):
    dd = defaultdict(list, {"b": B, "a": A})
    leaves, treedef = wg.tree_flatten(dd)
    assert [id(x) for x in leaves] == [id(x) for x in jax.tree_util.tree_leaves(dd)]
    back = wg.tree_unflatten(treedef, [1.0, 2.0])
    assert type(back) is defaultdict and back.default_factory is list and list(back) == ["a", "b"]
    assert back == {"a": 1.0, "b": 2.0}
    assert treedef != wg.tree_flatten(dict(dd))[1]
    assert treedef != wg.tree_flatten(defaultdict(set, dd))[1]
    assert treedef == wg.tree_flatten(defaultdict(list, {"a": 0.0, "b": 1.0}))[1]
    g = wg.grad(lambda d: wnp.sum(d["a"] * 2.0) + wnp.sum(d["b"] ** 2))(dd)
    assert type(g) is defaultdict and g.default_factory is list
    same_tree(dict(g), {"a": 2.0 * np.ones(3), "b": 2 * B})


def test_keys_that_cannot_be_sorted_are_an_error_saying_what_to_do(jax):
    tree = {1: A, "a": B}
    with pytest.raises(ValueError, match=r"keys of a dict cannot be sorted \(1, 'a'; types int, str\).*"
                                         r"keys of one type.*or an OrderedDict"):
        wg.tree_flatten(tree)
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):  # JAX refuses too
        jax.tree_util.tree_flatten(tree)
    with pytest.raises(ValueError, match="cannot be sorted"):
        wg.grad(lambda d: wnp.sum(d[1]))(tree)
    # an OrderedDict is the way out: its leaves keep its order
    od = OrderedDict(tree)
    g = wg.grad(lambda d: wnp.sum(d[1] * 3.0) + wnp.sum(d["a"]))(od)
    assert list(g) == [1, "a"]
    same_tree(g[1], 3.0 * np.ones(3))


# -- tree_ravel is ravel_pytree ---------------------------------------------------------------------


def test_tree_ravel_is_ravel_pytree_for_dicts_in_any_order(jax):
    from jax.flatten_util import ravel_pytree

    for tree in ({"b": B, "a": A}, {"a": A, "b": B}, {"w": {"z": C, "y": [A, 2.5]}, "v": (B,)}):
        ours, unravel = wg.tree_ravel(tree)
        theirs, _ = ravel_pytree(tree)
        np.testing.assert_array_equal(ours, np.asarray(theirs))
        same_tree(unravel(ours), jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(tree),
                                                              jax.tree_util.tree_leaves(tree)))


@pytest.mark.parametrize("dtypes", [(np.float32, np.float64), (np.int64, np.float64),
                                    (np.float16, np.float32), (np.int32, np.int64),
                                    (np.complex64, np.float32), (np.bool_, np.float64)],
                         ids=lambda d: "+".join(np.dtype(t).name for t in d))
# unravel casts a piece of the complex vector back to its real leaf's dtype, as JAX's does
@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
def test_tree_ravel_with_mixed_dtypes_is_ravel_pytree(jax, dtypes):
    from jax.flatten_util import ravel_pytree

    tree = {"z": np.arange(3).astype(dtypes[0]), "a": (np.arange(4) % 2 + 1.0).astype(dtypes[1])}
    ours, unravel = wg.tree_ravel(tree)
    theirs, their_unravel = ravel_pytree(tree)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, np.asarray(theirs))
    back, their_back = unravel(ours), their_unravel(theirs)
    for k in tree:
        assert back[k].dtype == tree[k].dtype == their_back[k].dtype
        np.testing.assert_array_equal(back[k], tree[k])


# -- transforms ---------------------------------------------------------------------------------------


def _loss(m):
    def loss(p):
        return m.sum(m.sin(p["w"]) * p["b"][0]) + p["b"][1] ** 2 * m.sum(p["a"] ** 3)
    return loss


def test_grad_of_a_dict_argument_in_any_order_agrees_with_jax(jax):
    jnp = jax.numpy
    for p in ({"w": B, "b": (A[:2], 1.5), "a": C}, {"a": C, "b": (A[:2], 1.5), "w": B}):
        same_tree(wg.grad(_loss(wnp))(p), jax.grad(_loss(jnp))(p))


def test_jvp_tangents_and_vjp_cotangents_in_another_order_agree_with_jax(jax):
    jnp = jax.numpy
    p = {"w": B, "b": (A[:2], 1.5), "a": C}
    t = {"b": (C, 0.5), "a": A[:2], "w": -B}  # another insertion order
    ours = wg.jvp(_loss(wnp), (p,), (t,))
    theirs = jax.jvp(_loss(jnp), (p,), (t,))
    same_tree(ours, tuple(theirs))

    def f(p):
        return {"y": p["a"] * 2.0, "x": wnp.sin(p["w"])}
    out, back = wg.vjp(f, p)
    assert list(out) == ["x", "y"]
    ct = {"y": A[:2], "x": B}  # the output's keys, inserted the other way
    (g,) = back(ct)
    _, their_back = jax.vjp(lambda p: {"y": p["a"] * 2.0, "x": jnp.sin(p["w"])}, p)
    same_tree(g, their_back(ct)[0])


def test_vmap_in_axes_given_as_a_dict_in_another_order_maps_by_key(jax):
    jnp = jax.numpy
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((3, 4))
    arg = {"x": X, "y": Y}
    axes = {"y": 1, "x": 0}  # by key: y's batch axis is 1 (a positional reading would swap them)

    def f(m):
        return lambda d: {"s": m.sin(d["x"]) * d["y"], "c": d["x"].sum()}
    ours = wg.vmap(f(wnp), in_axes=(axes,), out_axes={"s": 1, "c": 0})(arg)
    theirs = jax.vmap(f(jnp), in_axes=(axes,), out_axes={"s": 1, "c": 0})(arg)
    same_tree(ours, theirs)
    loop = np.stack([np.sin(X[i]) * Y[:, i] for i in range(4)], axis=1)
    np.testing.assert_allclose(ours["s"], loop, rtol=1e-14)


def test_vmap_in_axes_as_an_ordered_dict_must_have_the_arguments_order():
    arg = OrderedDict([("x", A), ("y", C)])
    out = wg.vmap(lambda d: d["x"][0] + d["y"], in_axes=(OrderedDict([("x", None), ("y", 0)]),))(arg)
    np.testing.assert_allclose(out, A[0] + C)
    with pytest.raises(ValueError, match="in_axes for argument 0 .* does not match"):
        wg.vmap(lambda d: d["y"], in_axes=(OrderedDict([("y", 0), ("x", None)]),))(arg)


def test_jacobians_and_hessian_of_dicts_come_back_with_jaxs_key_order(jax):
    jnp = jax.numpy
    p = {"w": C, "a": A[:2]}

    def f(m):
        return lambda p: {"y": m.sin(p["w"]) * p["a"], "x": m.sum(p["a"] ** 2 * p["w"])}
    for ours_t, theirs_t in ((wg.jacrev, jax.jacrev), (wg.jacfwd, jax.jacfwd)):
        same_tree(ours_t(f(wnp))(p), theirs_t(f(jnp))(p))
    same_tree(wg.hessian(lambda p: f(wnp)(p)["x"])(p), jax.hessian(lambda p: f(jnp)(p)["x"])(p))


def test_iterate_accepts_a_step_returning_its_dict_in_another_order():
    def step(s):
        return {"v": s["v"] * 0.5 + s["x"], "x": s["x"] * 0.9}  # inserted in the other order
    x0 = {"x": A, "v": C[:1] * np.ones(3)}
    out = wg.iterate(step, x0, 4)
    want = dict(x0)
    for _ in range(4):
        want = {"v": want["v"] * 0.5 + want["x"], "x": want["x"] * 0.9}
    same_tree(out, {"v": want["v"], "x": want["x"]})
    g = wg.grad(lambda x: wnp.sum(wg.iterate(step, {"x": x, "v": np.zeros(3)}, 3)["v"]))(A)
    np.testing.assert_allclose(g, (0.25 + 0.5 * 0.9 + 0.81) * np.ones(3), rtol=1e-13)


def test_compiled_functions_read_dict_arguments_by_key_in_any_order():
    f = wg.compile(lambda d: {"y": d["a"] * 2.0 - d["b"], "x": d["b"]})
    ours = f({"b": C, "a": A[:2]})
    same_tree(ours, {"x": C, "y": A[:2] * 2.0 - C})
    ours = f({"a": C, "b": A[:2]})  # the same signature, its keys inserted the other way
    same_tree(ours, {"x": A[:2], "y": C * 2.0 - A[:2]})
    g = wg.compile(lambda od: od["b"] * 2.0)  # an OrderedDict argument, order kept
    np.testing.assert_allclose(g(OrderedDict([("b", C), ("a", A[:2])])), 2.0 * C)


# -- functional optimisers: the gradient read by key --------------------------------------------------


def test_sgd_updates_the_entry_the_gradient_names_as_autograd_does():
    pytest.importorskip("autograd")
    from autograd.misc import optimizers as ag_opt

    x0 = {"a": np.zeros(2), "b": np.zeros(2)}

    def grad(p, i):
        return {"b": np.zeros(2), "a": np.ones(2)}  # inserted in the other order
    for name in ("sgd", "rmsprop", "adam"):
        ours = getattr(optim, name)(grad, x0, num_iters=3)
        theirs = getattr(ag_opt, name)(grad, x0, num_iters=3)
        assert np.all(ours["a"] < 0) and np.all(ours["b"] == 0), name
        for k in x0:
            np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-14)


def test_functional_optimisers_name_a_gradient_of_another_structure_or_shape():
    x0 = {"a": np.zeros(2), "b": np.zeros(3)}
    with pytest.raises(ValueError, match=r"sgd: grad\(params, 0\) returned a tree of structure "
                                         r"\{'a': \*, 'c': \*\}, the parameters are \{'a': \*, 'b': \*\}"):
        optim.sgd(lambda p, i: {"a": np.zeros(2), "c": np.zeros(3)}, x0, num_iters=1)
    # the same total size, split the other way: each leaf is checked, not only the total
    with pytest.raises(ValueError, match=r"adam: grad\(params, 0\) leaf 0 has shape \(3,\), its "
                                         r"parameter \(2,\)"):
        optim.adam(lambda p, i: {"a": np.zeros(3), "b": np.zeros(2)}, x0, num_iters=1)


# -- nn: state_dict keeps PyTorch's order; flattening it follows JAX ---------------------------------


def test_state_dict_keeps_pytorchs_order_while_its_leaves_come_sorted():
    nn = wg.nn
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(11)])
    names = list(model.state_dict())
    assert names[:4] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert names == [n for n, _ in model.named_parameters()]
    state = model.state_dict()
    leaves, _ = wg.tree_flatten(state)
    assert [id(x) for x in leaves] == [id(state[k]) for k in sorted(state)]
    # gradients with respect to the nested parameters tree are matched by name
    tree = model.parameters_tree()
    x = rng.standard_normal(2)

    def loss(p):
        return wnp.sum(nn.functional_call(model, p, x) ** 2)
    g = wg.grad(loss)(tree)
    assert list(g) == sorted(tree)
    eps, k = 1e-6, "10"
    bumped = {**tree, k: {**tree[k], "bias": tree[k]["bias"] + np.array([eps, 0.0])}}
    np.testing.assert_allclose(g[k]["bias"][0], (loss(bumped) - loss(tree)) / eps, rtol=1e-4)


def test_state_dict_order_is_torchs():
    torch = pytest.importorskip("torch")
    ours = wg.nn.Sequential(wg.nn.Linear(2, 3), wg.nn.Tanh(), wg.nn.Linear(3, 1))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    assert list(ours.state_dict()) == list(theirs.state_dict())


# -- random trees with shuffled key order, against JAX ------------------------------------------------

_leaf = hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=2, max_side=3),
                   elements=st.floats(-2, 2))
_trees = st.recursive(
    _leaf,
    lambda kids: st.lists(kids, max_size=3) | st.lists(kids, max_size=3).map(tuple)
    | st.dictionaries(st.text("abcdef", min_size=1, max_size=2), kids, max_size=4),
    max_leaves=8)


def _shuffled(tree, rnd):
    """``tree`` with every dict rebuilt in a random insertion order."""
    if type(tree) is dict:
        keys = list(tree)
        rnd.shuffle(keys)
        return {k: _shuffled(tree[k], rnd) for k in keys}
    if type(tree) in (list, tuple):
        return type(tree)(_shuffled(c, rnd) for c in tree)
    return tree


def _weighted(m, flatten):
    """A loss that weighs each leaf by its position in ``flatten``'s order: it differs between two
    libraries unless they order the leaves alike."""
    def loss(tree):
        return sum((k + 1.0) * m.sum(m.sin(leaf)) for k, leaf in enumerate(flatten(tree)))
    return loss


@settings(max_examples=60, deadline=None)
@given(_trees, st.randoms(use_true_random=False))
def test_random_trees_in_shuffled_order_flatten_ravel_and_differentiate_as_in_jax(tree, rnd):
    jax = pytest.importorskip("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        _against_jax(jax, tree, _shuffled(tree, rnd))
    finally:
        jax.config.update("jax_enable_x64", before)


def _against_jax(jax, tree, other):
    from jax.flatten_util import ravel_pytree

    leaves, treedef = wg.tree_flatten(other)
    assert treedef == wg.tree_flatten(tree)[1]
    assert [id(x) for x in leaves] == [id(x) for x in jax.tree_util.tree_leaves(other)]
    same_tree(wg.tree_unflatten(treedef, leaves),
              jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(other), leaves))
    flat, unravel = wg.tree_ravel(other)
    np.testing.assert_array_equal(flat, np.asarray(ravel_pytree(other)[0]))
    same_tree(unravel(flat), _sorted_copy(other))
    if not leaves:
        return
    ours = wg.grad(_weighted(wnp, lambda t: wg.tree_flatten(t)[0]))(other)
    theirs = jax.grad(_weighted(jax.numpy, jax.tree_util.tree_leaves))(other)
    same_tree(ours, theirs)


def _sorted_copy(tree):
    if type(tree) is dict:
        return {k: _sorted_copy(tree[k]) for k in sorted(tree)}
    if type(tree) in (list, tuple):
        return type(tree)(_sorted_copy(c) for c in tree)
    return tree


def test_shuffled_helper_really_shuffles():
    tree = {k: 1.0 for k in "abcdefgh"}
    orders = {tuple(_shuffled(tree, random.Random(s))) for s in range(5)}
    assert len(orders) > 1


def test_misc_flatten_is_autograds_for_dicts_in_any_order():
    pytest.importorskip("autograd")
    from autograd.misc.flatten import flatten as ag_flatten

    from wengert.misc import flatten

    for tree in ({"w": B, "b": [A, 2.0], "a": {"z": C, "y": 0.5}},
                 {"a": {"y": 0.5, "z": C}, "w": B, "b": [A, 2.0]}):
        ours, unflatten = flatten(tree)
        theirs, _ = ag_flatten(tree)
        np.testing.assert_array_equal(ours, theirs)
        back = unflatten(ours)
        assert list(back) == ["a", "b", "w"] and list(back["a"]) == ["y", "z"]
