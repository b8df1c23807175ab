"""What the transforms say when they are misused: each message names the function and the fault."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def mul(x, y):
    return x * y


# -- argnums: checked in one place, for every transform ---------------------------------------------

TRANSFORMS = {
    "grad": lambda f, a: wg.grad(f, argnums=a),
    "value_and_grad": lambda f, a: wg.value_and_grad(f, argnums=a),
    "elementwise_grad": lambda f, a: wg.elementwise_grad(f, argnums=a),
    "jacrev": lambda f, a: wg.jacrev(f, argnums=a),
    "jacfwd": lambda f, a: wg.jacfwd(f, argnums=a),
    "hessian": lambda f, a: wg.hessian(f, argnums=a),
}


@pytest.mark.parametrize("name", TRANSFORMS)
@pytest.mark.parametrize("argnums, shown", [(0.0, r"0\.0 \(float\)"), ("x", r"'x' \(str\)"),
                                            ((0, 1.0), r"1\.0 \(float\)"), (True, r"True \(bool\)"),
                                            (None, r"None \(NoneType\)")])
def test_argnums_of_the_wrong_type_names_the_value(name, argnums, shown):
    msg = rf"mul, argnums=.*argnums must be an int or a tuple of ints.*{shown}"
    with pytest.raises(TypeError, match=msg):
        TRANSFORMS[name](mul, argnums)  # refused when the transform is made, before any call


@pytest.mark.parametrize("name", TRANSFORMS)
@pytest.mark.parametrize("argnums, shown", [((0, 0), "0 twice"), ((0, -2), "0 and -2"),
                                            ((1, -1), "1 and -1")])
def test_repeated_argnums_are_refused_naming_the_argument(name, argnums, shown):
    k = argnums[0]
    with pytest.raises(ValueError, match=rf"mul, argnums=.*argnums names argument {k} more than once "
                                         rf"\({shown}\)"):
        TRANSFORMS[name](mul, argnums)(1.0, 2.0)


@pytest.mark.parametrize("name", TRANSFORMS)
def test_argnums_out_of_range_names_the_arity(name):
    with pytest.raises(ValueError, match=r"argument 2 asked for, but the function was called with 2 "
                                         r"positional argument\(s\)"):
        TRANSFORMS[name](mul, (0, 2))(1.0, 2.0)


def test_compiled_and_source_gradients_check_argnums_alike():
    with pytest.raises(ValueError, match=r"argnums names argument 0 more than once \(0 twice\)"):
        wg.compile(mul).grad(argnums=(0, 0))(1.0, 2.0)
    with pytest.raises(ValueError, match=r"argnums names argument 1 more than once \(1 and -1\)"):
        wg.compile(mul).value_and_grad(argnums=(1, -1))(1.0, 2.0)
    with pytest.raises(TypeError, match=r"argnums must be an int or a tuple of ints, got 'x' \(str\)"):
        wg.compile(mul).grad(argnums="x")(1.0, 2.0)
    with pytest.raises(ValueError, match=r"source_grad\(mul, argnums=\(0, 0\)\): argnums names argument 0"):
        wg.source_grad(mul, argnums=(0, 0))(1.0, 2.0)
    with pytest.raises(TypeError, match=r"source_grad\(mul, argnums=0\.5\): argnums must be an int"):
        wg.source_grad(mul, argnums=0.5)(1.0, 2.0)
    with pytest.raises(ValueError, match=r"argument 3 asked for, but it takes 2 positional"):
        wg.source_grad(mul, argnums=3)(1.0, 2.0)


def test_argnums_as_numpy_integers_and_lists_still_work():
    assert wg.grad(mul, argnums=np.int64(1))(3.0, 2.0) == 3.0
    assert wg.grad(mul, argnums=[1, 0])(3.0, 2.0) == (3.0, 2.0)


# -- what the function returns ---------------------------------------------------------------------


def forgot_return(x):
    x * 2.0


def test_a_function_returning_none_is_named():
    for transform in (wg.grad, wg.elementwise_grad, wg.jacrev, wg.jacfwd):
        with pytest.raises(TypeError, match=r"forgot_return\): the function returned None; it must return "
                                            r".*Is a return statement missing\?"):
            transform(forgot_return)(1.0)
    with pytest.raises(TypeError, match=r"wg.vjp\(forgot_return\): the function returned None"):
        wg.vjp(forgot_return, 1.0)
    with pytest.raises(TypeError, match=r"wg.jvp\(forgot_return\): the function returned None"):
        wg.jvp(forgot_return, (1.0,), (1.0,))


def test_a_function_returning_a_string_is_named():
    def label(x):
        return "loss"

    with pytest.raises(TypeError, match=r"wg.grad\(label\): the function returned a string \('loss'\); "
                                        r"it must return a float scalar"):
        wg.grad(label)(1.0)
    with pytest.raises(TypeError, match=r"wg.jacrev\(<lambda>\): the function returned a string \('s'\)"):
        wg.jacrev(lambda x: {"a": x, "b": "s"})(1.0)


def test_integer_outputs_of_a_jacobian_are_named():
    with pytest.raises(TypeError, match=r"wg.jacrev\(<lambda>\): output leaf 1 is int64, not float"):
        wg.jacrev(lambda x: (x, wnp.argmax(x)))(np.ones(3))
    with pytest.raises(TypeError, match=r"wg.jacfwd\(<lambda>\): output leaf 0 is int64"):
        wg.jacfwd(lambda x: wnp.argmax(x))(np.ones(3))


def test_transforms_over_tape_variables_nest():
    """A Tape made before the transform lies below it: its variables, as arguments or closures, are
    constants of the inner function, and the derivative comes back recorded on the tape (nesting, as
    grad of grad). The error for the other order (a Tape made inside) is tested in core/test_exits.py."""
    tape = wg.Tape()
    w = tape.var(2.0)
    v = tape.var(np.array([1.0, 2.0, 3.0]))
    g = wg.grad(lambda x: x * w)(3.0)  # d(x w)/dx = w
    assert g.value == 2.0 and g.grad().wrt(w) == 1.0
    g = wg.grad(lambda x: x * x * w)(w)  # 2 x w at x = w: 2 w**2
    assert g.value == 8.0 and g.grad().wrt(w) == 8.0
    J = wg.jacrev(lambda x: x * v)(np.ones(3))
    np.testing.assert_allclose(J.value, np.diag([1.0, 2.0, 3.0]))
    J = wg.jacfwd(lambda x: x * 2.0)(v)
    np.testing.assert_allclose(J, 2.0 * np.eye(3))  # constant: a plain array
    y, t = wg.jvp(lambda x: x * x, (w,), (1.0,))
    assert y.value == 4.0 and t.value == 4.0 and t.grad().wrt(w) == 2.0
