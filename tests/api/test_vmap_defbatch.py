"""``wg.defbatch``: a user's primitive with a batching rule runs under ``wg.vmap`` in one call for the
whole batch (no ``NoBatchingRuleWarning``, the rule called once), equal to the loop over examples
and to JAX, under derivatives too; a rule that declines falls back to the loop, and a rule whose
result lacks the batch axis, a non-primitive and a non-function are refused by name."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.engines import batching
from wengert.engines.batching import NoBatchingRuleWarning


def _softplus(name, rule=None):
    """softplus(x) * c (``c`` broadcasting against x) as a user primitive, with ``rule`` as its batching
    rule; returns the primitive and the list of the ``batched`` flags of each call of the rule."""
    prim = wg.primitive(lambda x, c: np.logaddexp(0.0, x) * c, name=name)
    wg.defvjp(prim, lambda g, out, x, c: g * c / (1.0 + wnp.exp(-x)),
              lambda g, out, x, c: g * wnp.logaddexp(0.0, x))
    wg.defjvp(prim, lambda t, out, x, c: t * c / (1.0 + wnp.exp(-x)),
              lambda t, out, x, c: t * wnp.logaddexp(0.0, x))
    calls = []

    def batch_rule(p, values, batched, kwargs):
        calls.append(tuple(batched))
        if rule is not None:
            return rule(p, values, batched, kwargs)
        x, c = values  # elementwise: line the example axes up behind the batch axis
        if batched[1] and not batched[0]:
            x = wnp.broadcast_to(x, wnp.shape(c)[:1] + wnp.shape(x))
        if batched[1] and wnp.ndim(c) < wnp.ndim(x):
            c = wnp.reshape(c, wnp.shape(c)[:1] + (1,) * (wnp.ndim(x) - wnp.ndim(c)) + wnp.shape(c)[1:])
        return p(x, c)

    wg.defbatch(prim, batch_rule)
    return prim, calls


def _strict_vmap(fun, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoBatchingRuleWarning)
        return wg.vmap(fun, **kw)(*args)


def test_a_user_primitive_with_a_rule_batches_in_one_call():
    prim, calls = _softplus("softplus_one_call")
    x = np.linspace(-2.0, 2.0, 12).reshape(4, 3)
    got = _strict_vmap(lambda r: prim(r, 2.0), x)
    assert calls == [(True, False)]
    np.testing.assert_allclose(got, np.stack([prim(r, 2.0) for r in x]), rtol=1e-15)


def test_the_rule_sees_which_arguments_are_batched():
    prim, calls = _softplus("softplus_flags")
    x, c = np.linspace(-1.0, 1.0, 3), np.array([[1.0, 2.0, 3.0], [0.5, 0.25, 4.0]])
    got = _strict_vmap(prim, x, c, in_axes=(None, 0))
    assert calls == [(False, True)]
    np.testing.assert_allclose(got, np.stack([prim(x, ci) for ci in c]), rtol=1e-15)


def test_derivatives_of_a_batched_user_primitive_equal_the_loop():
    prim, calls = _softplus("softplus_derivatives")
    x = np.linspace(-2.0, 2.0, 12).reshape(4, 3)
    f = lambda r: wnp.sum(prim(r, np.array([1.0, -2.0, 0.5])) ** 2)
    per_example = np.stack([wg.grad(f)(r) for r in x])
    np.testing.assert_allclose(_strict_vmap(wg.grad(f), x), per_example, rtol=1e-13)
    np.testing.assert_allclose(wg.grad(lambda b: wnp.sum(wg.vmap(f)(b)))(x), per_example, rtol=1e-13)
    assert calls  # the primal under vmap went through the rule


def test_vmap_of_grad_of_a_user_primitive_equals_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    prim, _ = _softplus("softplus_jax")
    x = np.linspace(-2.0, 2.0, 15).reshape(5, 3)
    f = lambda r: wnp.sum(prim(r, 1.5) * r)
    want = jax.vmap(jax.grad(lambda r: jnp.sum(jnp.logaddexp(0.0, r) * 1.5 * r)))(x)
    np.testing.assert_allclose(_strict_vmap(wg.grad(f), x), np.asarray(want), rtol=1e-13)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 4), shape=st.lists(st.integers(1, 3), max_size=2), seed=st.integers(0, 2**16))
def test_batched_user_primitive_equals_the_loop_on_random_shapes(batch, shape, seed):
    prim, calls = _softplus(f"softplus_random_{batch}_{len(shape)}")
    rng = np.random.default_rng(seed)
    x, c = rng.standard_normal((batch, *shape)), rng.standard_normal(shape[-1:])
    got = _strict_vmap(lambda r: prim(r, c), x)
    np.testing.assert_allclose(got, np.stack([prim(r, c) for r in x]).reshape(got.shape), rtol=1e-14)
    assert len(calls) == 1


def test_a_rule_that_declines_runs_each_example_and_warns_by_name():
    prim, calls = _softplus("softplus_declines", rule=lambda p, values, batched, kwargs: NotImplemented)
    x = np.linspace(-2.0, 2.0, 6).reshape(3, 2)
    batching._WARNED.discard("softplus_declines")
    with pytest.warns(NoBatchingRuleWarning, match="'softplus_declines' has no batching rule, so it runs "
                                                   "once per example"):
        got = wg.vmap(lambda r: prim(r, 1.0))(x)
    assert calls == [(True, False)]
    np.testing.assert_allclose(got, np.stack([prim(r, 1.0) for r in x]), rtol=1e-15)


def test_a_rule_without_the_batch_axis_is_refused_by_name():
    prim, _ = _softplus("softplus_no_batch", rule=lambda p, values, batched, kwargs: p(values[0][0], 1.0))
    with pytest.raises(ValueError, match=r"wg.vmap: the batching rule of 'softplus_no_batch' returned shape "
                                         r"\(2,\), but a batch of 3 examples must be on axis 0"):
        wg.vmap(lambda r: prim(r, 1.0))(np.ones((3, 2)))


def test_defbatch_refuses_a_function_that_is_not_a_primitive():
    with pytest.raises(TypeError, match=r"wg.defbatch expects a primitive made by wg.primitive\(fun\)"):
        wg.defbatch(np.sin, lambda p, values, batched, kwargs: p(*values))


def test_defbatch_refuses_a_rule_that_is_not_a_function():
    prim = wg.primitive(np.sin)
    with pytest.raises(TypeError, match=r"wg.defbatch\(sin, ...\): rule for argument 0 must be a function"):
        wg.defbatch(prim, "batch_axis_0")


def test_without_a_rule_a_user_primitive_runs_once_per_example():
    """The default defbatch replaces: the loop, with its warning."""
    prim = wg.primitive(lambda x: np.sin(x), name="sine_without_rule")
    batching._WARNED.discard("sine_without_rule")
    with pytest.warns(NoBatchingRuleWarning, match="'sine_without_rule' has no batching rule"):
        wg.vmap(prim)(np.ones((2, 3)))
