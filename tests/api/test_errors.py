"""Bad input: every error names what went wrong in the user's terms."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def test_shape_mismatch_names_operation_and_shapes():
    with pytest.raises(ValueError, match=r"^add of arrays with shapes \(3,\), \(4,\): operands could"):
        wg.grad(lambda x: wnp.sum(x + np.ones(4)))(np.ones(3))
    with pytest.raises(ValueError, match=r"^matmul of arrays with shapes \(2, 3\), \(4, 2\)"):
        wg.grad(lambda x: wnp.sum(x @ np.ones((4, 2))))(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"^multiply of arrays with shapes \(2,\), \(3,\)"):
        wg.jvp(lambda x: x * np.ones(3), (np.ones(2),), (np.ones(2),))
    with pytest.raises(ValueError, match=r"^add of arrays with shapes \(2,\), \(3,\)"):
        wnp.add(np.ones(2), np.ones(3))
    t = wg.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match=r"^subtract of arrays with shapes \(2,\), \(5,\)"):
        t - np.ones(5)


def test_grad_of_non_scalar_names_the_shape():
    with pytest.raises(TypeError, match=r"must return a scalar.*shape \(3,\)"):
        wg.grad(lambda x: x * 2)(np.ones(3))
    with pytest.raises(TypeError, match="has_aux"):
        wg.grad(lambda x: (x, x))(1.0)


def test_argnums_out_of_range_names_the_argument():
    with pytest.raises(ValueError, match=r"argnums=2.*argument 2.*2 positional"):
        wg.grad(lambda x, y: x * y, argnums=2)(1.0, 2.0)
    with pytest.raises(ValueError, match="argument 5"):
        wg.jacrev(lambda x: x, argnums=5)(np.ones(2))


def test_integer_argument_is_a_clear_error():
    with pytest.raises(TypeError, match=r"argument 0 is int.*float"):
        wg.grad(lambda x: x * 2.0)(3)
    with pytest.raises(TypeError, match=r"argument 1 is dtype int64"):
        wg.grad(lambda x, n: wnp.sum(x * n), argnums=1)(1.0, np.arange(3))
    with pytest.raises(TypeError, match=r"bool"):
        wg.jvp(lambda b: b, (np.array([True]),), (np.array([1.0]),))


def test_integer_output_is_a_clear_error():
    with pytest.raises(TypeError, match="not float"):
        wg.grad(lambda x: wnp.argmax(x))(np.ones(3))


def test_jvp_argument_errors():
    with pytest.raises(TypeError, match="tuples"):
        wg.jvp(wnp.sin, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"tangent of argument 0 has shape \(2,\), the primal \(3,\)"):
        wg.jvp(wnp.sin, (np.ones(3),), (np.ones(2),))


def test_vjp_cotangent_errors():
    _, back = wg.vjp(lambda x: x * 2, np.ones(3))
    with pytest.raises(ValueError, match=r"shape \(2,\).*\(3,\)"):
        back(np.ones(2))
    with pytest.raises(ValueError, match="structure"):
        back((np.ones(3), np.ones(3)))


def test_backward_inside_transform_is_an_error():
    def f(x):
        y = x * 2
        y.backward()
        return y

    with pytest.raises(RuntimeError, match="inside a transform"):
        wg.grad(f)(1.0)


def test_backward_on_constant_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        wg.tensor(1.0).backward()


def test_assignment_into_recorded_tensor_is_an_error():
    x = wg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="assignment"):
        x[0] = 2.0
    t = wg.tensor(np.ones(3))
    t[0] = 2.0  # nothing recorded: fine
    assert t.tolist() == [2.0, 1.0, 1.0]


def test_no_bare_key_or_index_errors_from_internals():
    with pytest.raises(np.exceptions.AxisError):
        wg.grad(lambda x: wnp.sum(wnp.sum(x, axis=3)))(np.ones((2, 2)))
    with pytest.raises(IndexError):  # NumPy's own message for a bad index
        wg.grad(lambda x: x[5])(np.ones(3))


def test_a_float_subclass_argument_is_refused_by_what_it_is():
    class Meters(float):
        pass

    for transform in (wg.grad, wg.value_and_grad):
        with pytest.raises(TypeError, match=r"argument 0 is a Meters, a subclass of float.*float\(x\)"):
            transform(lambda x: x * x)(Meters(2.0))
    assert wg.grad(lambda x: x * x)(float(Meters(2.0))) == 4.0
