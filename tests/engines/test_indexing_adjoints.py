"""Indexing adjoints accumulated in place (issue 3, item 6): ``x[idx]``'s contribution goes into an
adjoint buffer the backward pass owns (``v_bar[i] += g``), in every engine that uses the backward pass;
higher-order passes keep the differentiable ``untake`` rule. Expected values are derived by hand."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.core.extend import defvjp_accumulate
from wengert.rules import indexing
from wengert.testing import check_grads

rng = np.random.default_rng(3)


def loop_sum(v):
    return sum(v[i] * v[i] for i in range(len(v)))


@pytest.fixture
def no_untake(monkeypatch):
    """Make the zero-filled adjoint ``untake`` unusable: a first-order pass must not need it."""
    def refuse(*args, **kwargs):
        raise AssertionError("untake called in a first-order backward pass")

    monkeypatch.setattr(indexing, "untake", refuse)


def test_loop_of_reads_gradient_without_untake(no_untake):
    v = rng.standard_normal(50)
    np.testing.assert_allclose(wg.grad(loop_sum)(v), 2 * v, rtol=1e-12)


def test_tensor_backward_and_tape_accumulate_in_place(no_untake):
    v = rng.standard_normal(7)
    t = wg.tensor(v, requires_grad=True)
    loop_sum(t).backward()
    np.testing.assert_allclose(t.grad.numpy(), 2 * v, rtol=1e-12)
    tape = wg.Tape()
    x = tape.var(v)
    np.testing.assert_allclose(loop_sum(x).grad().wrt(x), 2 * v, rtol=1e-12)


@pytest.mark.parametrize("idx", [np.array([1, 1, 3, 1]), (np.array([0, 0]), np.array([2, 2])),
                                 slice(1, None, 2), np.array([True, False, True, True]), (Ellipsis, 1)])
def test_every_kind_of_index_matches_a_dense_adjoint(idx, no_untake):
    x = rng.standard_normal((4, 3)) if type(idx) is tuple else rng.standard_normal(4)
    w = rng.standard_normal(np.shape(x[idx]))
    got = wg.grad(lambda x: wnp.sum(x[idx] * w))(x)
    expected = np.zeros_like(x)
    np.add.at(expected, idx, w)  # d/dx sum(x[idx] * w): w scattered, repeated indices adding up
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("reads_first", [True, False])
def test_indexed_and_dense_contributions_add_up_in_either_order(reads_first):
    v = rng.standard_normal(5)
    c = rng.standard_normal(5)

    def f(v):
        dense = wnp.sum(v * c)
        reads = v[0] * 3.0 + v[4] * v[4] + wnp.sum(v[np.array([1, 1])])
        return reads + dense if reads_first else dense + reads

    expected = c + np.array([3.0, 2.0, 0.0, 0.0, 2 * v[4]])
    np.testing.assert_allclose(wg.grad(f)(v), expected, rtol=1e-12)


def test_seed_and_user_arrays_are_never_written(no_untake):
    v = rng.standard_normal(4)
    v_copy = v.copy()
    seed = np.ones(4)
    _, back = wg.vjp(lambda v: v + v[0], v)  # add's rule hands the seed itself to v's adjoint
    (g,) = back(seed)
    np.testing.assert_allclose(g, [5.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(seed, np.ones(4))
    np.testing.assert_array_equal(v, v_copy)


def test_float32_keeps_its_dtype(no_untake):
    v = rng.standard_normal(6).astype(np.float32)
    g = wg.grad(lambda v: v[2] * v[3] + v[2])(v)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, [0, 0, v[3] + 1, v[2], 0, 0], rtol=1e-6)


def test_second_order_uses_the_differentiable_rule():
    v = rng.standard_normal(6)
    hess = wg.hessian(lambda v: sum(v[i] ** 3 for i in range(len(v))))(v)
    np.testing.assert_allclose(hess, np.diag(6 * v), rtol=1e-10)
    c = np.array([2.0, -1.0, 0.5])

    def f(x):  # g of x[0] is plain in the inner pass, the others traced: buffers mix with boxes
        return x[0] * c[0] + x[1] ** 2 * x[2] + wnp.sum(x ** 2) + x[2] * c[2]

    x = rng.standard_normal(3)
    expected = 2 * np.eye(3)
    expected[1, 1] += 2 * x[2]
    expected[1, 2] += 2 * x[1]
    expected[2, 1] += 2 * x[1]
    np.testing.assert_allclose(wg.hessian(f)(x), expected, rtol=1e-10)
    check_grads(f, x, order=2)


def test_accumulate_rule_requires_an_ordinary_rule():
    p = wg.primitive(lambda x: x * 2.0)
    with pytest.raises(TypeError, match="no ordinary VJP rule"):
        defvjp_accumulate(p, lambda buf, g, out, x: None)


def test_custom_primitive_accumulate_rule_is_used_first_order_only():
    calls = []

    def double_first(x):
        return 2.0 * x[0]

    p = wg.primitive(double_first)
    wg.defvjp(p, lambda g, out, x: indexing.untake(2.0 * g, 0, np.shape(x)))
    wg.defjvp(p, lambda t, out, x: 2.0 * t[0])

    def accumulate(buffer, g, out, x):
        calls.append(1)
        buffer[0] += 2.0 * g

    defvjp_accumulate(p, accumulate)
    x = rng.standard_normal(3)
    np.testing.assert_allclose(wg.grad(lambda x: p(x) * p(x))(x), [8 * x[0], 0, 0])
    assert len(calls) == 2
    np.testing.assert_allclose(wg.hessian(lambda x: p(x) * p(x))(x)[0], [8.0, 0, 0])
