"""The reverse engine's inline recording (``Node.__getitem__`` for ``x[int]``, ``__add__``/``__mul__``/
``__rmul__`` on two recorded floats) and the backward pass's inline read accumulate: the same graph and
the same derivatives as the generic path, which still handles every other case.

Expected values are hand derivations of the programs below.
"""

import numpy as np
import pytest

import wengert as wg


def squares(v):
    return sum(v[i] * v[i] for i in range(len(v)))


def test_loop_of_reads_float64_negative_indices_and_rows():
    v = np.random.default_rng(3).standard_normal(6)
    both_ends = wg.grad(lambda v: sum(v[i] * v[i] for i in range(-len(v), len(v))))(v)
    np.testing.assert_allclose(both_ends, 4 * v)
    m = np.arange(6.0).reshape(2, 3)
    rows = wg.grad(lambda m: sum((m[i] * m[i]).sum() for i in range(2)))(m)
    np.testing.assert_allclose(rows, 2 * m)


def test_float32_reads_keep_their_dtype():
    v = np.linspace(-1, 1, 5, dtype=np.float32)
    g = wg.grad(squares)(v)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * v, rtol=1e-6)


def test_second_derivatives_through_reads_and_inline_products():
    v = np.array([0.3, -1.2, 2.0])
    h = wg.hessian(lambda v: sum(v[i] * v[i] * v[i] for i in range(3)))(v)
    np.testing.assert_allclose(h, np.diag(6 * v))
    # x * y with x and y on different traces (grad of grad) goes the generic way
    d2 = wg.grad(lambda x: wg.grad(lambda y: x * y * y)(2.0))(3.0)  # d/dx (2 x y) at y = 2
    assert d2 == pytest.approx(4.0)


def test_constant_times_float_and_tape_listing():
    tape = wg.Tape()
    v = tape.var(np.array([1.5, -2.0]))
    z = 0.5 * (v[0] * v[1]) + v[1]
    assert [e.operation for e in tape] == ["getitem", "getitem", "multiply", "multiply", "getitem", "add"]
    np.testing.assert_allclose(z.grad().wrt(v), [0.5 * -2.0, 0.5 * 1.5 + 1.0])


def test_eager_tensors_honour_no_grad_and_backward_accumulates():
    v = np.array([1.0, 2.0, 3.0])
    t = wg.tensor(v, requires_grad=True)
    with wg.no_grad():
        r = t[1] * t[2]
    assert not r.requires_grad
    s = squares(t) + 2.0 * t[0]
    s.backward()
    np.testing.assert_allclose(t.grad.numpy(), 2 * v + np.array([2.0, 0.0, 0.0]))


def test_second_backward_after_release_is_refused():
    t = wg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    s = squares(t)
    s.backward(retain_graph=False)
    with pytest.raises(RuntimeError, match="second time"):
        s.backward()


def test_float_contributions_to_reads_go_straight_into_the_buffer():
    # a read's adjoint from * or + is added into v's buffer directly once the buffer exists; before
    # that, and from any other consumer, it takes the ordinary way: every mix sums to the same
    v = np.array([0.7, -1.3, 2.1, 0.4])

    def mixed(v):
        r = v[1]
        s = r * r + (r * v).sum()  # r is read by a float product and by an array product
        return s + sum(v[i] * v[i] for i in range(4)) + v.sum()

    g = wg.grad(mixed)(v)
    expected = 2 * v + 1.0 + v[1]
    expected[1] += 2 * v[1] + v.sum()
    np.testing.assert_allclose(g, expected)
    wg.testing.check_grads(mixed, v, order=1)
    # repeated indices, and the buffer made by the last read (the first one the backward pass meets)
    rep = wg.grad(lambda v: v[0] + v[0] * v[2] + v[0] + v[3])(v)
    np.testing.assert_allclose(rep, [2.0 + v[2], 0.0, v[0], 1.0])


def test_tape_keeps_the_adjoints_of_reads():
    # keep_all (Var.grad): the reads' own adjoints stay visible, so nothing bypasses them
    tape = wg.Tape()
    v = tape.var(np.array([1.5, -2.0, 3.0]))
    a, b = v[0], v[1]
    z = a * b + a + v[2] * v[2]
    g = z.grad()
    assert g.wrt(a) == pytest.approx(-2.0 + 1.0)
    assert g.wrt(b) == pytest.approx(1.5)
    np.testing.assert_allclose(g.wrt(v), [-1.0, 1.5, 6.0])


def test_float_constants_and_differences_are_recorded_inline():
    # x * c, x + c, c + x (and sum()'s start 0), x - y, x - c, c - x on recorded floats: the same
    # values and derivatives as the generic path, to second order
    def f(x, y):
        return sum([x * 2.0, 3.0 + x, x + 0.5, x - y, y - 4.0, 1.5 - x * y])

    x, y = 0.7, -1.3
    assert f(x, y) == pytest.approx(2 * x + (3 + x) + (x + 0.5) + (x - y) + (y - 4) + (1.5 - x * y))
    value, (gx, gy) = wg.value_and_grad(f, argnums=(0, 1))(x, y)
    assert value == f(x, y)
    assert gx == pytest.approx(2 + 1 + 1 + 1 - y)
    assert gy == pytest.approx(-1 + 1 - x)
    h = wg.hessian(lambda v: f(v[0], v[1]))(np.array([x, y]))
    np.testing.assert_allclose(h, [[0.0, -1.0], [-1.0, 0.0]], atol=1e-12)
    wg.testing.check_grads(lambda x: x - 2.0 * x * x + (1.0 - x), 0.3, order=2)


def test_float_reads_of_an_intermediate_array_reach_it_before_its_own_step():
    # reads of w = v * 3 gather their float contributions per w, which must reach w's adjoint
    # before w's own rule runs; int and tuple indices, and an array use of w, mix
    v = np.array([0.5, -1.0, 2.0])
    m = np.arange(6.0).reshape(2, 3)

    def f(v):
        w = v * 3.0
        return sum(w[i] * w[i] for i in range(3)) + w[(1,)] * 2.0 + (w * v).sum()

    g = wg.grad(f)(v)
    np.testing.assert_allclose(g, 18 * v + np.array([0.0, 6.0, 0.0]) + 6 * v)
    wg.testing.check_grads(f, v, order=2)
    gm = wg.grad(lambda m: sum(m[0][j] * m[1][j] for j in range(3)) + m[1, 2] * m[1, 2])(m)
    np.testing.assert_allclose(gm, [m[1], m[0] + np.array([0.0, 0.0, 2 * m[1, 2]])])
