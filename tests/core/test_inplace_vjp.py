"""In-place VJP rules (``defvjp_inplace``): used only on a cotangent nothing else refers to, so
they never change a user's array, a seed, or a cotangent another rule still needs."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.core.extend import defvjp_inplace


def _scaling_primitive(log):
    """scale(x) = 3 x, whose in-place rule records each call and multiplies g in place."""
    scale = wg.primitive(lambda x: 3.0 * x)
    wg.defvjp(scale, lambda g, out, x: 3.0 * g)

    def into(g, out, x):
        log.append(g)
        g *= 3.0
        return g

    defvjp_inplace(scale, into)
    return scale


def test_inplace_rule_runs_on_a_cotangent_the_pass_alone_holds():
    log = []
    scale = _scaling_primitive(log)
    x = np.array([1.0, -2.0, 0.5])
    g = wg.grad(lambda x: wnp.sum(scale(x) * x))(x)  # scale's cotangent x is a fresh product g * x
    np.testing.assert_allclose(g, 6.0 * x)
    assert len(log) == 1


def test_inplace_rule_never_writes_into_a_user_cotangent():
    log = []
    scale = _scaling_primitive(log)
    x = np.array([1.0, -2.0, 0.5])
    ct = np.array([1.0, 2.0, 3.0])
    _, back = wg.vjp(scale, x)
    (g,) = back(ct)
    np.testing.assert_allclose(g, 3.0 * np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(ct, [1.0, 2.0, 3.0])  # the user's array is untouched
    assert log == []  # the seed is the user's: the ordinary rule ran


def test_inplace_rule_skips_a_cotangent_shared_with_another_rule():
    """add passes one cotangent object to both of its arguments: the first scale node to read it
    must not overwrite it (the second still needs it); the second may."""
    log = []
    scale = _scaling_primitive(log)
    x = np.array([1.0, -2.0, 0.5])
    w = np.array([2.0, 1.0, -1.0])
    g = wg.grad(lambda x: wnp.sum((scale(x) + scale(x * x)) * w))(x)
    np.testing.assert_allclose(g, 3.0 * w + 6.0 * x * w)
    assert len(log) == 1


def test_relu_backward_in_place_matches_the_hand_derivative_and_leaves_inputs_alone():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5))
    x[0, 0] = 0.0  # a tie: half the cotangent, as HIPS autograd and JAX
    w = rng.standard_normal((6, 5))
    x0, w0 = x.copy(), w.copy()
    g = wg.grad(lambda x: wnp.sum(wnp.maximum(x * w, 0) * w))(x)
    want = np.where(x * w > 0, w * w, 0.0)
    want[0, 0] = 0.5 * w[0, 0] ** 2
    np.testing.assert_allclose(g, want)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(w, w0)


def test_relu_backward_with_an_infinite_cotangent_stays_exact():
    """0 * inf would be nan: the in-place rule declines and the ordinary one gives exact zeros."""
    x = np.array([-1.0, 2.0, -3.0])
    big = np.array([np.inf, 1.0, np.inf])
    with np.errstate(invalid="ignore"):  # the loss itself is nan (0 * inf)
        g = wg.grad(lambda x: wnp.sum(wnp.maximum(x, 0) * big))(x)
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0])


def test_defvjp_inplace_needs_an_ordinary_rule_first():
    p = wg.primitive(lambda x: x)
    with pytest.raises(TypeError, match="has no ordinary VJP rule"):
        defvjp_inplace(p, lambda g, out, x: g)
