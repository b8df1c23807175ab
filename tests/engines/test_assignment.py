"""Assignment on traced arrays (issue 3, item 7): ``x[i] = v``, ``x[mask] = 0``, ``x += y``, ``x *= 2``
inside differentiated functions, checked against finite differences and against the equivalent
functional program, in reverse and forward mode and under ``Tensor.backward()``; in-place writes that
would corrupt a later backward pass are errors. Also the functional ``x.at[idx]`` updates."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.testing import check_grads

rng = np.random.default_rng(7)


def mutating(x):
    y = x * x
    x[0] = 5.0
    x[x > 0.5] = 0.0
    x += y
    x *= 2
    x[1] += x[2] * 3  # getitem, += on the element, then assignment
    x[np.array([3, 3])] -= 1.0  # repeated index: one subtraction, as in NumPy
    return wnp.sum(x * y)


def functional(x):
    y = x * x
    x = x.at[0].set(5.0)
    x = wnp.where(x > 0.5, 0.0, x)
    x = (x + y) * 2
    x = x.at[1].set(x[1] + x[2] * 3)
    x = x.at[3].set(x[3] - 1.0)
    return wnp.sum(x * y)


def numpy_version(x):
    x = x.copy()
    y = x * x
    x[0] = 5.0
    x[x > 0.5] = 0.0
    x += y
    x *= 2
    x[1] += x[2] * 3
    x[np.array([3, 3])] -= 1.0
    return np.sum(x * y)


X = rng.standard_normal(5)


def test_values_match_numpy_and_arguments_are_untouched():
    x = X.copy()
    value, g = wg.value_and_grad(mutating)(x)
    np.testing.assert_array_equal(x, X)
    np.testing.assert_allclose(value, numpy_version(X), rtol=1e-12)
    np.testing.assert_allclose(g, wg.grad(functional)(X), rtol=1e-12)


def test_forward_and_reverse_agree_with_finite_differences_to_second_order():
    check_grads(lambda x: mutating(x.copy()), X, order=2)  # the copy: NumPy would mutate the caller's x
    np.testing.assert_allclose(wg.jvp(mutating, (X,), (np.ones(5),))[1],
                               wg.jvp(functional, (X,), (np.ones(5),))[1], rtol=1e-12)


def test_second_derivatives_in_every_composition():
    expected = wg.hessian(functional)(X)
    for hessian in (wg.hessian, lambda f: wg.jacfwd(wg.grad(f)), lambda f: wg.jacrev(wg.grad(f))):
        np.testing.assert_allclose(hessian(mutating)(X), expected, rtol=1e-10)


def test_tensor_backward_matches_functional_program():
    w = wg.tensor(X, requires_grad=True)
    u = w * 1.0
    mutating(u).backward()
    np.testing.assert_allclose(w.grad.numpy(), wg.grad(functional)(X), rtol=1e-12)


def test_overwritten_values_drop_out_and_aliases_see_the_change():
    def f(x):
        alias = x
        x[1:3] = 0.0
        return wnp.sum(alias * np.arange(1.0, 6.0))

    np.testing.assert_allclose(wg.grad(f)(X), [1.0, 0.0, 0.0, 4.0, 5.0])


def test_copy_is_independent():
    def f(x):
        y = x.copy()
        y[0] = 0.0
        return wnp.sum(x) + wnp.sum(y * 10.0)

    np.testing.assert_allclose(wg.grad(f)(X), [1.0, 11.0, 11.0, 11.0, 11.0])


def test_loop_of_writes_matches_finite_differences():
    def running(x):
        for i in range(1, len(x)):
            x[i] = x[i - 1] * 0.5 + wnp.sin(x[i])
        return wnp.sum(x ** 2)

    check_grads(lambda x: running(x.copy()), rng.standard_normal(6), order=2)


def test_explicit_tape_sees_old_and_new_values():
    tape = wg.Tape()
    a = tape.var(np.array([1.0, 2.0, 3.0]))
    b = a * a
    a[0] = 10.0
    c = wnp.sum(a * b)
    # c = 10 * a0**2 + a1**3 + a2**3 in terms of the original a
    np.testing.assert_allclose(c.grad().wrt(a), [20.0, 12.0, 27.0])
    np.testing.assert_allclose(a.value, [10.0, 2.0, 3.0])
    lines = str(tape).splitlines()  # b read the old version; the assignment made the new a
    old = lines[0].split(" = ")[0]
    assert lines[1:3] == [f"b = {old} * {old}", f"a = index_update({old}, 0, 10.0)"]


def test_np_add_at_on_a_traced_array():
    def f(x):
        np.add.at(x, np.array([0, 0, 1]), x[2])
        return wnp.sum(x * x)

    x = np.array([0.0, 1.0, 2.0])  # x becomes [4, 3, 2]
    np.testing.assert_allclose(wg.grad(f)(x), [8.0, 6.0, 4.0 + 2 * 2 * 4.0 + 2 * 3.0])


def test_numpy_rules_for_in_place_operators():
    def widen(x):
        x += np.ones((2, 3))
        return wnp.sum(x)

    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        wg.grad(widen)(np.ones(3))

    def to_complex(x):
        x *= 1j
        return wnp.sum(x)

    with pytest.raises(TypeError, match="same_kind"):
        wg.grad(to_complex)(np.ones(3))

    def float32(x):
        x *= np.float64(2.0)
        assert x.dtype == np.float32
        return wnp.sum(x)

    np.testing.assert_allclose(wg.grad(float32)(np.ones(3, dtype=np.float32)), [2.0, 2.0, 2.0])


def test_writing_an_inner_transforms_value_into_an_outer_array_is_refused():
    def outer(x):
        def inner(v):
            x[0] = v
            return wnp.sum(x)

        return wg.jvp(inner, (1.0,), (1.0,))[1] * x[1]

    with pytest.raises(TypeError, match="inner transform's value into an outer one's array"):
        wg.grad(outer)(np.ones(3))


# -- eager tensors: PyTorch's rules ------------------------------------------------------------------

def test_leaf_that_requires_grad_refuses_assignment():
    w = wg.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        w[0] = 2.0
    with pytest.raises(RuntimeError, match="x = x \\* y"):
        w *= 2.0


def test_constant_tensor_receiving_a_differentiable_value_is_recorded():
    w = wg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    buf = wg.tensor(np.zeros(3))
    buf[1] = w[0] * w[2]
    wnp.sum(buf * buf).backward()
    np.testing.assert_allclose(w.grad.numpy(), [2 * 3.0 * 3.0, 0.0, 2 * 3.0 * 1.0])


def test_eager_buffer_filled_inside_grad_joins_its_trace():
    def f(x):
        b = wg.tensor(np.zeros(3))
        b[1] = x[0] * 2.0
        b[2] = x[1]
        return wnp.sum(b * b) + x[2]

    np.testing.assert_allclose(np.asarray(wg.grad(f)(np.array([1.0, 2.0, 3.0]))), [8.0, 4.0, 1.0])


def test_in_place_write_of_a_saved_value_is_an_error_naming_the_operation():
    w = wg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    c = wg.tensor(np.ones(3))
    y = wnp.sum(w * c)
    c[0] = 5.0  # multiply saved c's array
    with pytest.raises(RuntimeError, match="'multiply'.*modified by an in-place operation"):
        y.backward()

    h = wnp.exp(w)
    z = wnp.sum(h * 2.0)
    with wg.no_grad():
        h -= 1.0  # exp's rule needs its output (and multiply saved it too)
    with pytest.raises(RuntimeError, match="'(exp|multiply)'.*'-=' on a tensor"):
        z.backward()


def test_in_place_updates_before_use_or_after_backward_are_fine():
    w = wg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = wg.tensor(np.ones(2))
    c[0] = 3.0  # before it is used: nothing saved the old contents
    for _ in range(3):  # an optimizer loop: update after backward
        w.grad = None
        wnp.sum(w * w * c).backward()
        with wg.no_grad():
            w -= 0.1 * w.grad
    np.testing.assert_allclose(w.detach().numpy(), [1.0 * 0.4 ** 3, 2.0 * 0.8 ** 3])


# -- x.at[idx]: functional updates -----------------------------------------------------------------

def test_at_methods_return_new_values_and_match_numpy():
    idx = np.array([2, 0])
    v = np.array([10.0, 20.0])

    def check(method, expected):
        got = wg.grad(lambda x: (method(x), wnp.sum(x))[1])(X)  # x itself stays unchanged
        np.testing.assert_allclose(got, np.ones(5))
        out, _ = wg.vjp(method, X)
        np.testing.assert_allclose(out, expected)

    e = X.copy()
    e[idx] = v
    check(lambda x: x.at[idx].set(v), e)
    e = X.copy()
    np.add.at(e, np.array([1, 1]), v)
    check(lambda x: x.at[np.array([1, 1])].add(v), e)
    e = X.copy()
    e[idx] *= v
    check(lambda x: x.at[idx].multiply(v), e)
    e = X.copy()
    e[idx] /= v
    check(lambda x: x.at[idx].divide(v), e)
    check(lambda x: x.at[1:3].get(), X[1:3])


def test_repeated_indices_set_keeps_last_and_multiply_is_refused():
    x = np.zeros(3)
    v = np.array([1.0, 2.0, 3.0])
    g = wg.grad(lambda v: wnp.sum(wnp.index_update(x, np.array([0, 1, 0]), v) * np.array([5.0, 7.0, 0.0])))(v)
    np.testing.assert_allclose(g, [0.0, 7.0, 5.0])  # NumPy keeps the last write to x[0]
    with pytest.raises(ValueError, match="more than once"):
        wg.grad(lambda x: wnp.sum(x.at[np.array([0, 0])].multiply(2.0)))(np.ones(3))


def test_augmented_assignment_on_a_traced_python_float_rebinds_the_name_only():
    """``s += x`` on a float is ``s = s + x`` (floats are immutable): an alias keeps the old value,
    and no version is logged (a loop of n such updates must not cost O(n) per step)."""
    seen = {}

    def f(x):
        s = x * 1.0
        alias = s
        s += x
        s *= 3.0
        seen["mutations"] = getattr(s._trace, "mutations", None)
        return s + 10.0 * alias

    g = wg.grad(f)(2.0)
    assert g == pytest.approx(3.0 * 2 + 10.0)
    assert not seen["mutations"]


def test_mutation_versions_are_found_in_stamp_order():
    from wengert.engines.mutation import _version

    versions = [(3, "a"), (7, "b"), (12, "c")]
    assert [_version(versions, k) for k in (0, 3, 6, 7, 11, 12, 20)] == ["a", "b", "b", "c", "c", None, None]
