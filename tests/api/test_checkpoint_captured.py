"""A recomputing node (``wg.checkpoint``, ``wg.iterate``) reads the arrays its function captures when
the pullback runs: a write into one between the forward pass and a later pullback is refused, naming
the array; without a write the pullback gives the forward pass's derivative. ``wg.grad`` pulls back at
once and keeps no copies."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp

W_GLOBAL = np.array([1.0, 2.0, 3.0])


def _expected(x, W):
    return np.cos(x * W) * W


def test_a_closed_over_array_written_after_vjp_is_refused_by_name():
    W = np.array([1.0, 2.0, 3.0])
    x = np.ones(3)
    out, pb = wg.vjp(lambda v: wg.checkpoint(lambda u: wnp.sum(wnp.sin(u * W)))(v), x)
    W[:] = W[::-1].copy()  # the same sum of sines at x = 1: only the captured copy tells
    with pytest.raises(RuntimeError, match=r"the array W that <lambda> reads was written after the forward"):
        pb(1.0)


def test_a_global_array_written_after_vjp_is_refused_by_name():
    x = np.array([0.3, -0.2, 0.5])

    def block(u):
        return wnp.sum(wnp.sin(u * W_GLOBAL))

    out, pb = wg.vjp(lambda v: wg.checkpoint(block)(v), x)
    saved = W_GLOBAL.copy()
    try:
        W_GLOBAL[0] = 7.0
        with pytest.raises(RuntimeError, match="the array W_GLOBAL that block reads"):
            pb(1.0)
    finally:
        W_GLOBAL[:] = saved
    assert np.allclose(pb(1.0)[0], _expected(x, W_GLOBAL))  # restored: the values match again


def test_an_attribute_array_written_after_vjp_is_refused_by_its_path():
    class Model:
        def __init__(self):
            self.W = np.array([1.0, -1.0, 2.0])

        def __call__(self, u):
            return wnp.sum(wnp.sin(u * self.W))

    m = Model()
    x = np.array([0.1, 0.2, 0.3])
    _, pb = wg.vjp(lambda v: wg.checkpoint(m)(v), x)
    m.W *= 2.0
    with pytest.raises(RuntimeError, match=r"the array Model\.W that"):
        pb(1.0)


def test_without_a_write_the_later_pullback_is_the_forward_derivative():
    W = np.array([1.0, 2.0, 3.0])
    x = np.array([0.4, -0.1, 0.7])
    _, pb = wg.vjp(lambda v: wg.checkpoint(lambda u: wnp.sum(wnp.sin(u * W)))(v), x)
    assert np.allclose(pb(1.0)[0], _expected(x, W))
    W2 = W  # rebinding the name elsewhere is no write
    assert W2 is W


def test_iterate_refuses_a_captured_array_written_after_vjp():
    A = np.array([[0.9, 0.1], [-0.2, 0.8]])
    x = np.array([1.0, 0.5])
    _, pb = wg.vjp(lambda v: wnp.sum(wg.iterate(lambda s: wnp.tanh(A @ s), v, 8, checkpoint="binomial")), x)
    A[0, 0] = 0.1
    with pytest.raises(RuntimeError, match=r"wg\.iterate\(<lambda>\): the array A"):
        pb(1.0)


def test_an_integer_index_array_argument_written_after_vjp_is_refused():
    idx = np.array([2, 0])
    x = np.array([1.0, 2.0, 3.0])
    _, pb = wg.vjp(lambda v: wnp.sum(wg.checkpoint(lambda u, i: u[i] ** 2)(v, idx)), x)
    idx[0] = 1
    with pytest.raises(RuntimeError, match="argument 1"):
        pb(1.0)


def test_a_tape_keeps_copies_of_the_captured_arrays_too():
    W = np.array([1.0, 2.0, 3.0])
    tape = wg.Tape()
    x = tape.var(np.ones(3))
    y = wg.checkpoint(lambda u: wnp.sum(wnp.sin(u * W)))(x)
    W[:] = W[::-1].copy()
    with pytest.raises(RuntimeError, match="the array W that"):
        y.grad().wrt(x)


def test_grad_pulls_back_at_once_and_copies_nothing(monkeypatch):
    import wengert.engines.kept as kept
    copies = []
    real = kept._Copier.copy
    monkeypatch.setattr(kept._Copier, "copy", lambda self, a: copies.append(a) or real(self, a))
    W = np.array([1.0, 2.0, 3.0])
    x = np.array([0.2, 0.1, -0.3])
    g = wg.grad(lambda v: wg.checkpoint(lambda u: wnp.sum(wnp.sin(u * W)))(v))(x)
    assert np.allclose(g, _expected(x, W))
    assert copies == []


def test_a_read_only_captured_array_is_not_copied():
    W = np.array([1.0, 2.0, 3.0])
    W.flags.writeable = False
    x = np.array([0.2, 0.1, -0.3])
    _, pb = wg.vjp(lambda v: wg.checkpoint(lambda u: wnp.sum(wnp.sin(u * W)))(v), x)
    assert np.allclose(pb(1.0)[0], _expected(x, W))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=2, max_size=5), st.integers(0, 4), st.booleans())
def test_a_write_is_refused_and_no_write_is_exact(xs, k, write):
    x = np.array(xs)
    W = np.linspace(0.5, 1.5, len(xs))
    _, pb = wg.vjp(lambda v: wg.checkpoint(lambda u: wnp.sum(wnp.sin(u * W) * u))(v), x)
    expected = np.sin(x * W) + x * W * np.cos(x * W)
    if write:
        W[k % len(xs)] += 1.0
        with pytest.raises(RuntimeError, match="written after the forward pass"):
            pb(1.0)
    else:
        assert np.allclose(pb(1.0)[0], expected)
