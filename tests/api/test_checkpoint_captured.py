"""A recomputing node (``wg.checkpoint``, ``wg.iterate``) reads the arrays its function captures when
the backward pass runs it again: a write into one after its first run -- by the caller before a later
pullback, or by the differentiated function itself before ``wg.grad`` pulls back -- is refused, naming
the array; without a write the backward pass gives the derivative at the first run's values."""

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
    with pytest.raises(RuntimeError, match=r"the array W that <lambda> reads was written after <lambda> ran"):
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


def test_a_write_inside_the_differentiated_function_is_refused():
    # wg.grad pulls back at once, but the function it differentiates may write into the captured array
    # after the block ran: a permutation keeps the block's value, so only the copy tells
    buf = np.array([1.0, 2.0, 3.0])

    def f(v):
        z = wg.checkpoint(lambda u: wnp.sum(u * buf))(v)
        buf[:] = buf[::-1].copy()
        return z

    with pytest.raises(RuntimeError, match="the array buf that <lambda> reads was written after"):
        wg.grad(f)(np.ones(3))


@pytest.mark.parametrize("policy", ["binomial", "ctz"])
def test_a_write_after_a_checkpointed_loop_inside_grad_is_refused(policy):
    A = np.array([[0.9, 0.1], [-0.2, 0.8]])

    def f(v):
        z = wnp.sum(wg.iterate(lambda s: wnp.tanh(A @ s), v, 6, checkpoint=policy))
        A[0, 0] = 0.1
        return z

    with pytest.raises(RuntimeError, match=r"wg\.iterate\(<lambda>\): the array A"):
        wg.grad(f)(np.array([1.0, 0.5]))


def test_without_a_write_grad_of_a_block_is_exact_and_copies_each_captured_array(monkeypatch):
    import wengert.engines.kept as kept
    W = np.array([1.0, 2.0, 3.0])
    x = np.array([0.2, 0.1, -0.3])
    copied = []
    real = kept._frozen_copy
    monkeypatch.setattr(kept, "_frozen_copy", lambda a: copied.append(a) or real(a))
    g = wg.grad(lambda v: wg.checkpoint(lambda u: wnp.sum(wnp.sin(u * W)))(v))(x)
    assert np.allclose(g, _expected(x, W))
    assert any(a is W for a in copied)


def test_a_negative_zero_written_over_zero_counts_as_a_write():
    # np.arctan2 tells -0.0 from 0.0: its derivative at (0, -0.0) is another value's
    D = np.array([0.0, 1.0])

    def f(v):
        z = wg.checkpoint(lambda u: wnp.sum(wnp.arctan2(u, D)))(v)
        D[0] = -0.0
        return z

    with pytest.raises(RuntimeError, match="the array D that"):
        wg.grad(f)(np.array([0.5, 0.25]))


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
        with pytest.raises(RuntimeError, match="written after <lambda> ran"):
            pb(1.0)
    else:
        assert np.allclose(pb(1.0)[0], expected)


def _bn_loss(bn, W, checkpointed):
    def loss(x):
        h = x
        for _ in range(3):
            block = lambda u: wnp.tanh(bn(u) @ W)  # noqa: E731
            h = wg.checkpoint(block)(h) if checkpointed else block(h)
        return wnp.sum(h * h)
    return loss


def test_a_block_that_writes_what_it_captures_is_not_refused():
    # a training-mode BatchNorm shared by three checkpointed calls writes its running statistics in
    # each: the block's own writes (its output does not read them) are no write after it ran
    from wengert import nn
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4))
    W = rng.standard_normal((4, 4)) * 0.5
    got = wg.grad(_bn_loss(nn.BatchNorm1d(4), W, True))(x)
    want = wg.grad(_bn_loss(nn.BatchNorm1d(4), W, False))(x)
    got, want = np.asarray(wg.stop_gradient(got)), np.asarray(wg.stop_gradient(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_running_statistics_an_eval_block_reads_written_after_it_are_refused():
    from wengert import nn
    bn = nn.BatchNorm1d(3)
    bn.eval()

    def f(v):
        z = wg.checkpoint(lambda u: wnp.sum(bn(u) * np.arange(3.0)))(v)
        bn.running_mean[:] = bn.running_mean[::-1] + 1.0
        return z

    with pytest.raises(RuntimeError, match="running_mean"):
        wg.grad(f)(np.ones((2, 3)))
