"""Users' primitives (wg.primitive + wg.defvjp/wg.defjvp) cannot silently give a wrong derivative:
a traced value their rules cannot see is refused, and a rule's result of the wrong kind or shape is
an error naming the primitive, the argument and the shapes."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def _affine():
    @wg.primitive
    def affine(x, pair):
        a, b = pair
        return x * a + b

    wg.defvjp(affine, lambda g, out, x, pair: g * pair[0], None)
    wg.defjvp(affine, lambda t, out, x, pair: t * pair[0], None)
    return affine


@pytest.mark.parametrize("transform", [
    lambda f: wg.grad(f)(3.0),
    lambda f: wg.jvp(f, (3.0,), (1.0,)),
    lambda f: wg.compile(f).grad()(3.0),
], ids=["grad", "jvp", "compile"])
@pytest.mark.parametrize("call, what", [
    (lambda affine, t: affine(1.0, (t, 2.0)), "argument 1 is a tuple"),
    (lambda affine, t: affine(t, [t, 2.0]), "argument 1 is a list"),
    (lambda affine, t: affine(t, pair=(t, 2.0)), "keyword argument 'pair'"),
], ids=["only nested", "nested and positional", "keyword"])
def test_traced_value_inside_a_container_argument_is_refused(call, what, transform):
    affine = _affine()
    with pytest.raises(TypeError) as info:
        transform(lambda t: call(affine, t))
    message = str(info.value)
    assert "wg.primitive 'affine'" in message and what in message, message
    assert "test_custom_primitives.py, line" in message, message


def test_constants_inside_a_container_argument_are_fine():
    affine = _affine()
    assert wg.grad(lambda t: affine(t, (3.0, 2.0)))(1.0) == 3.0
    assert wg.jvp(lambda t: affine(t, (3.0, 2.0)), (1.0,), (1.0,)) == (5.0, 3.0)


def _square(vjp=None, jvp=None):
    @wg.primitive
    def square(x):
        return x * x

    if vjp is not None:
        wg.defvjp(square, vjp)
    if jvp is not None:
        wg.defjvp(square, jvp)
    return square


@pytest.mark.parametrize("mode", ["vjp", "jvp"])
def test_rule_of_the_wrong_shape_names_primitive_argument_and_shapes(mode):
    wrong = _square(**{mode: lambda g, out, x: np.ones(4)})
    x = np.ones(3)
    with pytest.raises(ValueError) as info:
        if mode == "vjp":
            wg.grad(lambda x: wnp.sum(wrong(x)))(x)
        else:
            wg.jvp(wrong, (x,), (x,))
    message = str(info.value)
    assert f"{mode.upper()} rule of primitive 'square' for argument 0" in message
    assert "shape (4,)" in message and "shape (3,)" in message


@pytest.mark.parametrize("result, says", [("abc", "returned str 'abc'"), (None, "returned None"),
                                          ([1.0, 2.0, 3.0], "returned list")])
@pytest.mark.parametrize("mode", ["vjp", "jvp"])
def test_rule_returning_a_non_array_is_rejected(mode, result, says):
    wrong = _square(**{mode: lambda g, out, x: result})
    x = np.ones(3)
    with pytest.raises(TypeError) as info:
        if mode == "vjp":
            wg.grad(lambda x: wnp.sum(wrong(x)))(x)
        else:
            wg.jvp(wrong, (x,), (x,))
    message = str(info.value)
    assert f"primitive 'square' for argument 0 {says}" in message, message


def test_broadcast_argument_may_get_an_output_shaped_cotangent():
    @wg.primitive
    def scale(x, s):
        return x * s

    wg.defvjp(scale, lambda g, out, x, s: g * s, lambda g, out, x, s: g * x)  # the second: x's shape
    wg.defjvp(scale, lambda t, out, x, s: t * s, lambda t, out, x, s: t * x)
    x = np.array([1.0, 2.0, 3.0])
    assert wg.grad(lambda s: wnp.sum(scale(x, s)))(2.0) == 6.0
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(scale(x, 2.0)))(x), [2.0, 2.0, 2.0])
    assert wg.jvp(lambda s: wnp.sum(scale(x, s)), (2.0,), (1.0,))[1] == 6.0


def test_right_rules_still_give_second_derivatives():
    square = _square(vjp=lambda g, out, x: 2.0 * g * x, jvp=lambda t, out, x: 2.0 * t * x)
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(square(x)))(x), 2 * x)
    np.testing.assert_allclose(wg.hessian(lambda x: wnp.sum(square(x)))(x), 2 * np.eye(2))
    np.testing.assert_allclose(wg.compile(lambda x: wnp.sum(square(x))).grad()(x), 2 * x)


def test_argnum_rules_are_checked_too():
    @wg.primitive
    def total(*xs):
        return sum(xs)

    wg.defvjp_argnum(total, lambda argnum, g, out, *xs: np.ones(5))
    with pytest.raises(ValueError, match="primitive 'total' for argument 1 returned shape"):
        wg.grad(lambda a, b: wnp.sum(total(a, b)), argnums=1)(np.ones(2), np.ones(2))
