"""Per-example gradients of convolutional networks by ``wg.vmap(wg.grad(loss))``: equal to a loop of
``wg.grad`` and to ``torch.func.vmap(torch.func.grad)`` across stride, padding, dilation and groups, in
float32 and float64; and the convolution's weight-gradient form (a kernel larger than its output, which
the batched weight gradient reaches as a grouped convolution) against a direct loop."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.nn.test_conv import _loop_conv as loop_conv
from wengert import nn
from wengert.engines.batching import NoBatchingRuleWarning
from wengert.nn import functional as F
from wengert.rules import convolution as cv

# (stride, padding, dilation, groups) of the second convolution; the first is 1 -> 4 channels, 3x3
VARIANTS = {
    "plain": ((1, 1), (0, 0), (1, 1), 1),
    "stride": ((2, 1), (0, 0), (1, 1), 1),
    "padding": ((1, 1), (1, 2), (1, 1), 1),
    "dilation": ((1, 1), (0, 0), (2, 1), 1),
    "groups": ((1, 2), (1, 0), (1, 1), 2),
}
TOLERANCE = {np.float32: dict(rtol=2e-4, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _params(dtype, groups, seed=3):
    rng = np.random.default_rng(seed)
    p = {"w1": rng.standard_normal((4, 1, 3, 3)), "b1": rng.standard_normal(4),
         "w2": rng.standard_normal((6, 4 // groups, 2, 3)) * 0.5, "b2": rng.standard_normal(6)}
    return {k: v.astype(dtype) for k, v in p.items()}


def _forward(p, x, variant):
    stride, padding, dilation, groups = VARIANTS[variant]
    h = F.max_pool2d(nn.relu(F.conv2d(x, p["w1"], p["b1"], padding=1)), 2)
    h = nn.relu(F.conv2d(h, p["w2"], p["b2"], stride=stride, padding=padding, dilation=dilation,
                         groups=groups))
    return wnp.sum(wnp.reshape(h, (wnp.shape(h)[0], 6, -1)), axis=-1)   # (N, 6) logits


def _torch_forward(torch, p, x, variant):
    stride, padding, dilation, groups = VARIANTS[variant]
    tf = torch.nn.functional
    h = tf.max_pool2d(torch.relu(tf.conv2d(x, p["w1"], p["b1"], padding=1)), 2)
    h = torch.relu(tf.conv2d(h, p["w2"], p["b2"], stride=stride, padding=padding, dilation=dilation,
                             groups=groups))
    return h.reshape(h.shape[0], 6, -1).sum(-1)


def _data(dtype, batch=4, seed=8):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, 1, 10, 10)).astype(dtype), rng.integers(0, 6, size=batch)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_per_example_gradients_equal_a_loop_of_grad(variant, dtype):
    params, (xs, ys) = _params(dtype, VARIANTS[variant][3]), _data(dtype)

    def loss(p, x, y):
        return nn.cross_entropy(_forward(p, x[None], variant), y[None])

    with warnings.catch_warnings():
        warnings.simplefilter("error", NoBatchingRuleWarning)   # every primitive batches
        per_example = wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
    for i in range(len(xs)):
        one = wg.grad(loss)(params, xs[i], ys[i])
        for k in params:
            assert per_example[k].dtype == dtype, (k, per_example[k].dtype)
            np.testing.assert_allclose(per_example[k][i], one[k], err_msg=f"{k}[{i}]", **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_per_example_gradients_equal_torch_func(variant, dtype):
    torch = pytest.importorskip("torch")
    params, (xs, ys) = _params(dtype, VARIANTS[variant][3]), _data(dtype)

    def loss(p, x, y):
        return nn.cross_entropy(_forward(p, x[None], variant), y[None])

    def torch_loss(p, x, y):
        return torch.nn.functional.cross_entropy(_torch_forward(torch, p, x[None], variant), y[None])

    ours = wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
    theirs = torch.func.vmap(torch.func.grad(torch_loss), in_dims=(None, 0, 0))(
        {k: torch.tensor(v) for k, v in params.items()}, torch.tensor(xs), torch.tensor(ys))
    for k in params:
        np.testing.assert_allclose(ours[k], theirs[k].numpy(), err_msg=k, **TOLERANCE[dtype])


def _loop_conv(x, w, stride, pads, dilation, groups):
    """The convolution by its definition (``test_conv``'s loop), in float64."""
    return loop_conv(x.astype(np.float64), w.astype(np.float64), stride, pads, dilation, groups)


@st.composite
def _large_kernel(draw):
    """A convolution whose kernel has more elements than its output (the weight-gradient form)."""
    d = draw(st.sampled_from([1, 2]))
    groups, cg, og, n = (draw(st.integers(1, 3)) for _ in range(4))
    out = tuple(draw(st.integers(1, 3)) for _ in range(d))
    kernel = tuple(draw(st.integers(o + 1, o + 4)) for o in out)
    stride = tuple(draw(st.integers(1, 2)) for _ in range(d))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(d))
    pads = tuple((draw(st.integers(0, 1)), draw(st.integers(0, 1))) for _ in range(d))
    size = tuple((o - 1) * s + (k - 1) * dl + 1 - lo - hi
                 for o, s, k, dl, (lo, hi) in zip(out, stride, kernel, dilation, pads))
    dtypes = draw(st.sampled_from([(np.float64, np.float64), (np.float32, np.float32),
                                   (np.float32, np.float64)]))
    return d, groups, cg, og, n, kernel, stride, dilation, pads, size, dtypes, draw(st.integers(0, 2 ** 16))


@settings(max_examples=30, deadline=None)
@given(_large_kernel())
def test_a_kernel_larger_than_its_output_equals_a_direct_loop(case):
    d, groups, cg, og, n, kernel, stride, dilation, pads, size, (xdt, wdt), seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, groups * cg) + size).astype(xdt)
    w = rng.standard_normal((groups * og, cg) + kernel).astype(wdt)
    got = cv.conv(x, w, stride=stride, padding=pads, dilation=dilation, groups=groups)
    assert np.prod(kernel) > np.prod(got.shape[2:])
    assert got.dtype == np.result_type(x, w)
    tol = dict(rtol=1e-12, atol=1e-12) if got.dtype == np.float64 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _loop_conv(x, w, stride, pads, dilation, groups), **tol)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 2), st.integers(0, 1), st.integers(1, 2), st.integers(0, 2 ** 16))
def test_vmapped_weight_gradients_equal_a_loop_over_small_shapes(batch, groups, pad, dilation, seed):
    """The batched weight gradient (a grouped convolution with a kernel larger than its output)
    equals one ``wg.vjp`` per example."""
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((batch, 2, 2 * groups, 6, 5))
    ws = rng.standard_normal((batch, 2 * groups, 2, 2, 3))
    kw = dict(stride=(1, 1), padding=((pad, 0), (0, pad)), dilation=(dilation, 1), groups=groups)

    def weight_grad(x, w, g):
        return wg.vjp(lambda b: cv.conv(x, b, **kw), w)[1](g)[0]

    out_shape = cv.conv(xs[0], ws[0], **kw).shape
    gs = rng.standard_normal((batch,) + out_shape)
    got = wg.vmap(weight_grad)(xs, ws, gs)
    for i in range(batch):
        np.testing.assert_allclose(got[i], weight_grad(xs[i], ws[i], gs[i]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("block", [1, 15000, 1 << 19])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_convolution_in_cache_blocks_equals_a_direct_loop(monkeypatch, block, dtype):
    """Convolutions make their columns a block at a time (stride 1: of examples; a kernel larger than the
    output: of examples or of groups): one per block, a few, or all give the definition's values."""
    monkeypatch.setattr(cv, "_CACHE_BLOCK", block)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((5, 4, 7, 6)).astype(dtype)
    w = rng.standard_normal((6, 2, 3, 2)).astype(dtype)
    kw = dict(stride=(1, 1), padding=((1, 0), (2, 1)), dilation=(2, 1), groups=2)
    got = cv.conv(x, w, **kw)
    assert got.dtype == dtype
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _loop_conv(x, w, (1, 1), kw["padding"], kw["dilation"], 2), **tol)
    # the weight-gradient form (kernel larger than output) goes a block of examples or of groups at a time
    x2 = rng.standard_normal((5, 4, 6, 6)).astype(dtype)
    w2 = rng.standard_normal((4, 1, 5, 4)).astype(dtype)
    kw = dict(stride=(1, 2), padding=((0, 1), (1, 0)), dilation=(1, 1), groups=4)
    got = cv.conv(x2, w2, **kw)
    want = _loop_conv(x2, w2, (1, 2), kw["padding"], kw["dilation"], 4)
    assert got.dtype == dtype and np.prod(got.shape[2:]) < 20
    np.testing.assert_allclose(got, want, **tol)
