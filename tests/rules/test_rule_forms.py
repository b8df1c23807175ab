"""One form per reverse rule: every primitive states its reverse rule once.

A primitive's reverse rule is given per argument (``defvjp(prim, r0, r1)``), once for all arguments
(``variadic=``) or jointly, every argument's share in one call (``joint=``); the engines derive the
other forms from the one given (``Primitive.vjp_rule`` takes a joint rule's share). A primitive
stating a joint rule beside per-argument rules would have one derivative written twice, and the two
could disagree unseen: the table is scanned for that, against a short named list of exceptions.
The faster forms (``vjp_accumulate``, ``vjp_inplace``, ``float_vjp``) are not second statements but
fast paths, each checked against the ordinary rule on the rule table's cases (``test_saves.py``'s
``_contributions``, ``tests/core/test_float_vjp.py``, ``tests/engines/test_reference_pass.py``).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.core.extend import defjvp, defvjp, primitive
from wengert.core.primitive import NoRuleError, Primitive
from wengert.rules import rule_table
from wengert.rules import shape as shape_rules

BOTH_FORMS = {}
"""Primitives allowed a joint reverse rule beside per-argument ones, by name, with the reason (none
today: concatenate, stack, lstm_cell and lstm_sequence state only their joint rule)."""


def _forms(prim):
    """The forms in which ``prim`` states its reverse rule."""
    found = []
    if any(r is not None for r in prim.vjps):
        found.append("per-argument (vjps)")
    if prim.vjp_argnum is not None:
        found.append("one for all (vjp_argnum)")
    if prim.vjp_joint is not None:
        found.append("joint (vjp_joint)")
    return found


def test_no_primitive_states_its_reverse_rule_in_two_forms():
    twice = {name: _forms(p) for name, p in rule_table().items() if len(_forms(p)) > 1}
    unexplained = {name: forms for name, forms in twice.items() if name not in BOTH_FORMS}
    assert not unexplained, f"reverse rule stated in more than one form: {unexplained}"
    stale = set(BOTH_FORMS) - set(twice)
    assert not stale, f"listed in BOTH_FORMS but stating one form now (remove them): {sorted(stale)}"


def test_the_scan_sees_a_second_form():
    """The check above can fail: a primitive given per-argument rules and a joint rule is found."""
    p = Primitive(lambda a, b: a + b, name="twice_stated")
    defvjp(p, lambda g, out, a, b: g, lambda g, out, a, b: g)
    p.vjp_joint = lambda needed, g, out, a, b: [g, g]  # what the old concatenate did
    assert _forms(p) == ["per-argument (vjps)", "joint (vjp_joint)"]


def test_the_joint_rule_is_the_only_reverse_rule_of_the_joining_primitives():
    for prim in (shape_rules.concatenate, shape_rules.stack):
        assert _forms(prim) == ["joint (vjp_joint)"], prim
        assert prim.vjp_extra is True and prim.vjp_missing == frozenset()


def test_a_later_defvjp_replaces_the_form_given_before():
    p = Primitive(lambda a, b: a * b, name="restated")
    defvjp(p, joint=lambda needed, g, out, a, b: [g * b if needed[0] else None, g * a if needed[1] else None])
    assert _forms(p) == ["joint (vjp_joint)"]
    defvjp(p, lambda g, out, a, b: g * b, None)
    assert _forms(p) == ["per-argument (vjps)"]
    assert p.vjp_extra is None
    with pytest.raises(NoRuleError, match="'restated' has no VJP \\(reverse-mode\\) rule for its argument 1"):
        p.vjp_rule(1)
    defvjp(p, joint=lambda needed, g, out, a, b: [g * b, g * a])
    assert _forms(p) == ["joint (vjp_joint)"] and p.vjps == ()


def _user_product():
    """A user primitive ``a * b`` whose reverse rule is joint, counting the joint rule's calls."""
    calls = []

    @primitive
    def product(a, b):
        return a * b

    def joint(needed, g, out, a, b):
        calls.append(list(needed))
        return [g * b if needed[0] else None, g * a if needed[1] else None]

    defvjp(product, joint=joint)
    defjvp(product, lambda t, out, a, b: t * b, lambda t, out, a, b: a * t)
    return product, calls


def test_a_user_primitive_with_a_joint_rule_differentiates_through_every_engine():
    product, calls = _user_product()
    a, b = np.array([0.5, -1.0, 2.0]), np.array([3.0, 0.25, -2.0])

    def f(a, b):
        return wnp.sum(product(a, b) ** 2)

    want = (2 * a * b * b, 2 * a * b * a)  # d/da (ab)^2 and d/db
    got = wg.grad(f, argnums=(0, 1))(a, b)
    assert calls == [[True, True]]  # the tape: one call for both arguments
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-14)
    np.testing.assert_allclose(wg.grad(f, argnums=1)(a, b), want[1], rtol=1e-14)
    assert calls[-1] == [False, True]  # only the argument asked for
    compiled = wg.compile(f).grad((0, 1))(a, b)  # the program transformer: each argument's share
    np.testing.assert_allclose(compiled[0], want[0], rtol=1e-14)
    np.testing.assert_allclose(compiled[1], want[1], rtol=1e-14)
    hess = wg.hessian(lambda a: f(a, b))(a)  # the rule, differentiated again
    np.testing.assert_allclose(hess, np.diag(2 * b * b), rtol=1e-14)


def test_a_user_joint_rule_with_a_wrong_share_is_refused_by_name():
    @primitive
    def scaled(a, b):
        return a * b

    defvjp(scaled, joint=lambda needed, g, out, a, b: [g * b, wnp.sum(g * a)])  # b's share: a scalar
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    np.testing.assert_allclose(wg.grad(lambda a: wnp.sum(scaled(a, b)))(a), b)  # a's share is right
    wrong = "VJP rule of primitive 'scaled' for argument 1 returned shape \\(\\)"
    with pytest.raises(ValueError, match=wrong):
        wg.grad(lambda b: wnp.sum(scaled(a, b)))(b)
    defvjp(scaled, joint=lambda needed, g, out, a, b: [None, g * a])  # a's share missing
    with pytest.raises(TypeError, match="VJP rule of primitive 'scaled' for argument 0 returned None"):
        wg.grad(lambda a: wnp.sum(scaled(a, b)))(a)


def test_a_joint_share_equals_the_joint_rule_on_the_rule_table():
    """Each argument's share, as the program transformer asks for it, is the joint rule's entry."""
    rng = np.random.default_rng(0)
    pieces = (rng.normal(size=(2, 3)), rng.normal(size=(1, 3)), rng.normal(size=(4, 3)))
    out = shape_rules.concatenate(*pieces, axis=0)
    g = rng.normal(size=out.shape)
    cs = shape_rules.concatenate.vjp_joint([True] * 3, g, out, *pieces, axis=0)
    for i in range(3):
        share = shape_rules.concatenate.vjp_rule(i)(g, out, *pieces, axis=0)
        np.testing.assert_array_equal(share, cs[i])
    np.testing.assert_array_equal(np.concatenate(cs, axis=0), g)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=5), st.integers(0, 1), st.booleans())
def test_joined_pieces_differentiate_alike_on_the_tape_and_compiled(lengths, axis, use_stack):
    """Concatenating or stacking pieces of random sizes: the tape (joint rule) and ``wg.compile``
    (each argument's share, derived from it) give the same gradient as the formula."""
    rng = np.random.default_rng(len(lengths) * 7 + axis)
    n = max(lengths) if use_stack else None
    xs = [rng.normal(size=(2, n if use_stack else k)) for k in lengths]
    w = rng.normal(size=np.stack(xs, axis=axis).shape if use_stack else np.concatenate(xs, axis=1).shape)

    def f(*xs):
        joined = wnp.stack(xs, axis=axis) if use_stack else wnp.concatenate(xs, axis=1)
        return wnp.sum(wnp.sin(joined) * w)

    argnums = tuple(range(len(xs)))
    taped = wg.grad(f, argnums=argnums)(*xs)
    compiled = wg.compile(f).grad(argnums)(*xs)
    weights = ([np.take(w, i, axis=axis) for i in range(len(xs))] if use_stack
               else np.split(w, np.cumsum(lengths)[:-1], axis=1))
    for x, wi, t, c in zip(xs, weights, taped, compiled):
        np.testing.assert_allclose(t, np.cos(x) * wi, rtol=1e-13)
        np.testing.assert_allclose(c, np.cos(x) * wi, rtol=1e-13)


# -- softmax_cross_entropy batches as itself (its batching rule no longer re-derives the function) ----

def test_softmax_cross_entropy_batches_by_calling_itself(monkeypatch):
    """Under ``wg.vmap`` the primitive is called once, keeping the batch axis (``kept``), and never
    rebuilt from ``log_softmax`` (the batching rule does not state the function a second time)."""
    from wengert.rules import nn as nn_ops

    calls = []
    prim = nn_ops.softmax_cross_entropy
    impl = prim.fun
    monkeypatch.setattr(prim, "fun", lambda *a, **k: calls.append(k.get("kept", 0)) or impl(*a, **k))
    monkeypatch.setattr(nn_ops.log_softmax, "fun", None)  # any use would raise
    rng = np.random.default_rng(1)
    x, labels = rng.normal(size=(5, 4, 3)), rng.integers(0, 3, size=(5, 4))
    got = wg.vmap(lambda x, y: prim(x, y))(x, labels)
    assert calls == [1]
    monkeypatch.undo()
    np.testing.assert_allclose(got, [prim(x[i], labels[i]) for i in range(5)], rtol=1e-14)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 4), st.lists(st.integers(1, 3), max_size=2), st.integers(2, 4), st.integers(0, 2))
def test_softmax_cross_entropy_under_vmap_matches_jax(batch, positions, classes, which):
    """Values, ``vmap(grad)``, ``grad`` of a weighted sum of ``vmap`` and ``jvp`` of ``vmap``, with
    logits, labels or both batched, against JAX's ``vmap`` of the same loss written with
    ``jax.nn.log_softmax``."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    from wengert.rules import nn as nn_ops

    rng = np.random.default_rng(batch * 100 + classes * 10 + which)
    shape = tuple(positions) + (classes,)
    x = rng.normal(size=((batch,) if which != 1 else ()) + shape)
    labels = rng.integers(0, classes, size=((batch,) if which != 0 else ()) + shape[:-1])
    axes = (0 if which != 1 else None, 0 if which != 0 else None)
    w = rng.normal(size=batch)

    def loss(x, y):
        return nn_ops.softmax_cross_entropy(x, y)

    def jloss(x, y):
        picked = jnp.take_along_axis(jax.nn.log_softmax(x), y[..., None], axis=-1)
        return -jnp.mean(picked)

    def vmapped(x):
        return wg.vmap(loss, in_axes=axes)(x, labels)

    want = jax.vmap(jloss, in_axes=axes)(x, labels)
    np.testing.assert_allclose(vmapped(x), want, rtol=1e-12)
    np.testing.assert_allclose(wg.vmap(wg.grad(loss), in_axes=axes)(x, labels),
                               jax.vmap(jax.grad(jloss), in_axes=axes)(x, labels), rtol=1e-12, atol=1e-15)
    jweighted = jax.grad(lambda x: jnp.sum(jax.vmap(jloss, in_axes=axes)(x, labels) * w))(x)
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(vmapped(x) * w))(x), jweighted, rtol=1e-12,
                               atol=1e-15)
    t = rng.normal(size=x.shape)
    np.testing.assert_allclose(wg.jvp(vmapped, (x,), (t,))[1],
                               jax.jvp(lambda x: jax.vmap(jloss, in_axes=axes)(x, labels), (x,), (t,))[1],
                               rtol=1e-12, atol=1e-15)
