"""One form per rule: every primitive states its reverse rule once, and its forward rule once.

A primitive's reverse rule is given per argument (``defvjp(prim, r0, r1)``), once for all arguments
(``variadic=``) or jointly, every argument's share in one call (``joint=``); the engines derive the
other forms from the one given (``Primitive.vjp_rule`` takes a joint rule's share). A primitive
stating a joint rule beside per-argument rules would have one derivative written twice, and the two
could disagree unseen: the table is scanned for that, against a short named list of exceptions.
The faster forms (``vjp_accumulate``, ``vjp_inplace``, ``float_vjp``) are not second statements but
fast paths, each checked against the ordinary rule on the rule table's cases (``test_saves.py``'s
``_contributions``, ``tests/core/test_float_vjp.py``, ``tests/engines/test_reference_pass.py``).

Forward rules likewise: per argument (``defjvp(prim, r0, r1)``), one for all (``variadic=``) or jointly,
the tangent from every argument's in one call (``joint=``, which ``Primitive.jvp_rule`` gives one
argument's tangent alone where an engine asks for that); a later ``defjvp`` replaces the earlier form.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.core.extend import defjvp, defvjp, primitive
from wengert.core.primitive import NoRuleError, Primitive
from wengert.program import Program
from wengert.rules import recurrent, rule_table
from wengert.rules import shape as shape_rules

BOTH_FORMS = {}
"""Primitives allowed a joint reverse rule beside per-argument ones, by name, with the reason (none
today: concatenate, stack, lstm_cell and lstm_sequence state only their joint rule)."""

BOTH_FORWARD_FORMS = {}
"""Primitives allowed a joint forward rule beside per-argument ones, by name, with the reason (none)."""


def _forms(prim, rule="vjp"):
    """The forms in which ``prim`` states its reverse (``"vjp"``) or forward (``"jvp"``) rule."""
    found = []
    if any(r is not None for r in getattr(prim, f"{rule}s")):
        found.append(f"per-argument ({rule}s)")
    if getattr(prim, f"{rule}_argnum") is not None:
        found.append(f"one for all ({rule}_argnum)")
    if getattr(prim, f"{rule}_joint") is not None:
        found.append(f"joint ({rule}_joint)")
    return found


@pytest.mark.parametrize("rule", ["vjp", "jvp"])
def test_no_primitive_states_a_rule_in_two_forms(rule):
    allowed = {"vjp": BOTH_FORMS, "jvp": BOTH_FORWARD_FORMS}[rule]
    twice = {name: _forms(p, rule) for name, p in rule_table().items() if len(_forms(p, rule)) > 1}
    unexplained = {name: forms for name, forms in twice.items() if name not in allowed}
    assert not unexplained, f"{rule} rule stated in more than one form: {unexplained}"
    stale = set(allowed) - set(twice)
    assert not stale, f"listed as allowed two {rule} forms but stating one now (remove them): {sorted(stale)}"


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


# -- forward rules: one form each -------------------------------------------------------------------

def test_the_forward_scan_sees_a_second_form():
    """The check above can fail: per-argument forward rules beside a joint one are found."""
    p = Primitive(lambda a, b: a + b, name="twice_stated_forward")
    defjvp(p, lambda t, out, a, b: t, lambda t, out, a, b: t)
    p.jvp_joint = lambda tangents, out, a, b: sum(t for t in tangents if t is not None)  # the old concatenate
    assert _forms(p, "jvp") == ["per-argument (jvps)", "joint (jvp_joint)"]


@pytest.mark.parametrize("prim", [shape_rules.concatenate, shape_rules.stack, recurrent.lstm_cell,
                                  recurrent.lstm_sequence], ids=lambda p: p.__name__)
def test_the_joint_forward_rule_is_the_only_forward_rule_of(prim):
    assert _forms(prim, "jvp") == ["joint (jvp_joint)"]


def test_a_later_defjvp_replaces_the_forward_form_given_before():
    p = Primitive(lambda a, b: a * b, name="restated_forward")
    defjvp(p, joint=lambda tangents, out, a, b: 0.0)
    defjvp(p, lambda t, out, a, b: t * b, None)
    assert _forms(p, "jvp") == ["per-argument (jvps)"]
    no_rule = "'restated_forward' has no JVP \\(forward-mode\\) rule for its argument 1"
    with pytest.raises(NoRuleError, match=no_rule):
        p.jvp_rule(1)
    defjvp(p, variadic=lambda i, t, out, a, b: t * (b if i == 0 else a))
    assert _forms(p, "jvp") == ["one for all (jvp_argnum)"]
    defjvp(p, joint=lambda tangents, out, a, b: 0.0)
    assert _forms(p, "jvp") == ["joint (jvp_joint)"] and p.jvps == () and p.jvp_argnum is None


def _user_forward_product():
    """A user primitive ``a * b`` whose forward rule is joint, recording the tangents each call gets."""
    calls = []

    @primitive
    def product(a, b):
        return a * b

    def joint(tangents, out, a, b):
        calls.append([t is not None for t in tangents])
        ta, tb = tangents
        if ta is None:
            return a * tb
        return ta * b if tb is None else ta * b + a * tb

    defjvp(product, joint=joint)
    defvjp(product, lambda g, out, a, b: g * b, lambda g, out, a, b: g * a)
    return product, calls


def test_a_user_primitive_with_a_joint_forward_rule_differentiates_through_every_engine():
    product, calls = _user_forward_product()
    a, b = np.array([0.5, -1.0, 2.0]), np.array([3.0, 0.25, -2.0])
    ta, tb = np.array([1.0, 2.0, -1.0]), np.array([0.5, 0.0, 3.0])

    def f(a, b):
        return wnp.sum(product(a, b) ** 2)

    _, got = wg.jvp(f, (a, b), (ta, tb))
    assert calls == [[True, True]]  # one call for both tangents
    np.testing.assert_allclose(got, np.sum(2 * a * b * (ta * b + a * tb)), rtol=1e-14)
    _, got_b = wg.jvp(lambda b: f(a, b), (b,), (tb,))
    assert calls[-1] == [False, True]
    np.testing.assert_allclose(got_b, np.sum(2 * a * b * a * tb), rtol=1e-14)
    np.testing.assert_allclose(wg.jacfwd(lambda a: product(a, b))(a), np.diag(b), rtol=1e-14)
    program = Program.from_trace(f, a, b)  # the program transformer: each argument's tangent alone
    out, t = program.jvp()(a, b, (ta, tb))
    np.testing.assert_allclose(t, np.sum(2 * a * b * (ta * b + a * tb)), rtol=1e-14)
    hess = wg.jacfwd(wg.grad(lambda a: f(a, b)))(a)  # forward over reverse: the joint rule again
    np.testing.assert_allclose(hess, np.diag(2 * b * b), rtol=1e-14)


def test_a_user_joint_forward_rule_with_a_wrong_shape_is_refused_by_name():
    @primitive
    def scaled_jvp(a, b):
        return a * b

    defjvp(scaled_jvp, joint=lambda tangents, out, a, b: wnp.sum(tangents[0]) * wnp.ones(4))
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    wrong = "JVP rule of primitive 'scaled_jvp' for argument 0 returned shape \\(4,\\)"
    with pytest.raises(ValueError, match=wrong):
        wg.jvp(lambda a: scaled_jvp(a, b), (a,), (a,))
    with pytest.raises(ValueError, match="for argument 0, 1 returned shape"):
        wg.jvp(scaled_jvp, (a, b), (a, b))
    defjvp(scaled_jvp, joint=lambda tangents, out, a, b: None)
    with pytest.raises(TypeError, match="JVP rule of primitive 'scaled_jvp' for argument 1 returned None"):
        wg.jvp(lambda b: scaled_jvp(a, b), (b,), (b,))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.integers(0, 1), st.booleans(),
       st.lists(st.booleans(), min_size=4, max_size=4))
def test_joined_pieces_have_one_tangent_in_every_engine(lengths, axis, use_stack, tangent_given):
    """Concatenating or stacking pieces, some constant (no tangent): dual numbers (the joint rule, one
    call, None for the constants), the program transformer's forward program (each argument's tangent
    alone, by ``jvp_rule``, summed) and the formula agree."""
    rng = np.random.default_rng(len(lengths) * 11 + axis)
    n = max(lengths)
    xs = [rng.normal(size=(2, n if use_stack else k)) for k in lengths]
    moving = [i for i, g in enumerate(tangent_given[:len(xs)]) if g] or [0]
    ts = {i: rng.normal(size=xs[i].shape) for i in moving}

    def f(*pieces):
        full = list(xs)
        for i, p in zip(moving, pieces):
            full[i] = p
        return wnp.stack(full, axis=axis) if use_stack else wnp.concatenate(full, axis=1)

    every = [ts.get(i, np.zeros_like(x)) for i, x in enumerate(xs)]
    want = np.stack(every, axis=axis) if use_stack else np.concatenate(every, axis=1)
    primals, tangents = tuple(xs[i] for i in moving), tuple(ts[i] for i in moving)
    _, dual = wg.jvp(f, primals, tangents)
    np.testing.assert_array_equal(dual, want)
    _, programmed = Program.from_trace(f, *primals).jvp()(*primals, tangents)
    np.testing.assert_array_equal(programmed, want)


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


# -- getitem: one reverse rule (untake), and the forms the engines take of it --------------------------

INDICES = [2, -1, slice(1, 4), (slice(None), 1), np.array([0, 2, 0, 3]), [1, 1, 1], (np.array([0, 1, 1]), 2),
           np.array([True, False, True, False, True]), Ellipsis, (None, 3)]


@pytest.mark.parametrize("idx", INDICES, ids=repr)
def test_getitems_accumulate_form_and_index_add_equal_untake(idx):
    """``x[idx]``'s cotangent ``untake(g, idx, x.shape)`` added to an adjoint ``a``, three ways: the rule
    (``a + untake``), the tape's accumulate form (``vjp_accumulate``, in place into ``a``) and the
    program transformer's ``index_add(a, idx, g)``; repeated indices add up in all three."""
    from wengert.rules.indexing import getitem, index_add, untake

    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 4)) if not (type(idx) is np.ndarray and idx.dtype == bool) else rng.normal(size=5)
    out = x[idx]
    g, a = rng.normal(size=np.shape(out)), rng.normal(size=x.shape)
    want = a + untake(g, idx, x.shape)
    buffer = a.copy()
    getitem.primitive.vjp_accumulate[0](buffer, g, out, x, idx)
    np.testing.assert_allclose(buffer, want, rtol=1e-15, atol=1e-15)  # repeats: added one by one
    np.testing.assert_allclose(index_add(a, idx, g), want, rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(untake(g, idx, x.shape), getitem.primitive.vjp_rule(0)(g, out, x, idx))


def test_float_reads_gather_as_getitems_accumulate_form():
    """The backward pass's gathering of float reads ``v[i]`` (``_into_reads``: ``acc[i] += c`` into a list)
    is getitem's accumulate form with a list for its buffer: the rule, run on a list, gives what the pass
    gives, and both what the reference pass (the table's ``untake``) gives."""
    from wengert.api import transforms
    from wengert.engines import reference
    from wengert.rules.indexing import getitem

    rng = np.random.default_rng(5)
    v = rng.normal(size=6)
    reads = [(int(i), float(c)) for i, c in zip(rng.integers(0, 6, size=20), rng.normal(size=20))]
    gathered = [0.0] * len(v)
    for i, c in reads:
        getitem.primitive.vjp_accumulate[0](gathered, c, v[i], v, i)

    def f(v):
        return sum(c * v[i] for i, c in reads)

    np.testing.assert_allclose(wg.grad(f)(v), gathered, rtol=1e-13)
    saved, transforms.backward_pass = transforms.backward_pass, reference.backward_pass
    try:
        np.testing.assert_allclose(wg.grad(f)(v), gathered, rtol=1e-13)
    finally:
        transforms.backward_pass = saved


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
