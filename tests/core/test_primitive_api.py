"""Users add primitives the way the built-in ones are defined: wg.primitive, wg.defvjp, wg.defjvp."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.rules import rule_table
from wengert.testing import check_grads


@wg.primitive
def logsumexp(x, axis=None):
    """A numerically stable log(sum(exp(x)))."""
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def _lse_vjp(g, out, x, axis=None):
    if axis is not None:
        g, out = wnp.expand_dims(g, axis), wnp.expand_dims(out, axis)
    return g * wnp.exp(x - out)


def _lse_jvp(t, out, x, axis=None):
    o = out if axis is None else wnp.expand_dims(out, axis)
    return wnp.sum(t * wnp.exp(x - o), axis=axis)


wg.defvjp(logsumexp, _lse_vjp)
wg.defjvp(logsumexp, _lse_jvp)


def test_user_primitive_both_modes_second_order():
    x = np.array([[0.1, 2.0, -1.0], [3.0, 0.5, 0.0]])
    check_grads(logsumexp, x)
    check_grads(lambda x: logsumexp(x, axis=1), x)


def test_user_primitive_keeps_name_and_doc():
    assert logsumexp.__name__ == "logsumexp" and "stable" in logsumexp.__doc__
    assert isinstance(logsumexp, wg.Primitive)
    assert "logsumexp" not in rule_table()  # users' primitives stay theirs


def test_missing_vjp_rule_names_primitive_and_argument():
    @wg.primitive
    def scaled(x, s):
        return x * s

    wg.defvjp(scaled, lambda g, out, x, s: g * s, None)
    assert wg.grad(scaled)(2.0, 3.0) == 3.0
    with pytest.raises(wg.NoRuleError, match=r"'scaled' has no VJP \(reverse-mode\) rule for its argument 1"):
        wg.grad(scaled, argnums=1)(2.0, 3.0)


def test_missing_jvp_rule_is_an_error():
    @wg.primitive
    def only_reverse(x):
        return x * 2

    wg.defvjp(only_reverse, lambda g, out, x: 2 * g)
    message = r"'only_reverse' has no JVP \(forward-mode\) rule for its argument 0"
    with pytest.raises(wg.NoRuleError, match=message):
        wg.jvp(only_reverse, (1.0,), (1.0,))


def test_primitive_without_any_rule():
    p = wg.primitive(np.cumsum)
    with pytest.raises(wg.NoRuleError, match="cumsum"):
        wg.grad(lambda x: wnp.sum(p(x)))(np.ones(3))


def test_defvjp_checks_its_arguments():
    with pytest.raises(TypeError, match="wg.primitive"):
        wg.defvjp(np.sin, lambda g, out, x: g)
    p = wg.primitive(np.sin)
    with pytest.raises(TypeError, match="rule for argument 0 must be a function"):
        wg.defvjp(p, 3)


def test_variadic_primitive_with_argnum_rule():
    @wg.primitive
    def weighted(*xs):
        return sum((i + 1) * x for i, x in enumerate(xs))

    wg.defvjp_argnum(weighted, lambda argnum, g, out, *xs: (argnum + 1) * g)
    wg.defjvp_argnum(weighted, lambda argnum, t, out, *xs: (argnum + 1) * t)
    assert wg.grad(weighted, argnums=(0, 1, 2))(1.0, 1.0, 1.0) == (1.0, 2.0, 3.0)
    check_grads(weighted, 1.0, 2.0, np.ones(2))


def test_rules_are_differentiable_so_user_primitives_get_hessians():
    H = wg.hessian(logsumexp)(np.array([0.0, 1.0, 2.0]))
    p = np.exp(np.array([0.0, 1.0, 2.0]) - logsumexp(np.array([0.0, 1.0, 2.0])))
    np.testing.assert_allclose(H, np.diag(p) - np.outer(p, p), rtol=1e-13, atol=1e-15)
