"""Max-pooling's backward pass (``pool_index`` + ``window_scatter``): the fast paths for windows that
tile the grid (stride == kernel, no dilation: one contiguous copy of the windows) and for disjoint
windows (a scatter that writes instead of summing) against the general path, against a direct loop
over windows, and against ``torch.nn.functional.max_pool2d``'s gradient; ties, -inf and nan inputs,
padding, float32 and float64, second order and ``wg.vmap``."""

import contextlib
import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.nn import functional as F
from wengert.rules import convolution as cv
from wengert.testing import check_grads


@contextlib.contextmanager
def _general_path():
    """Within: pool_index reads tiling windows through the general strided views, and window_scatter
    sums (np.bincount) even where the windows are disjoint."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cv, "_tiles", lambda xp, kernel, out_sp: list(
            cv._offset_views(xp, kernel, kernel, (1,) * len(kernel), out_sp)))
        scatter = cv._window_scatter_impl
        mp.setattr(cv.window_scatter, "fun", lambda g, index, padding, size, unique=False:
                   scatter(g, index, padding, size))
        yield


def _pool_grad(x, cot, kernel, stride, padding, dilation):
    with np.errstate(invalid="ignore"):  # the loss of -inf or nan inputs is nan; its gradient is finite
        return wg.grad(lambda a: wnp.sum(cv.max_pool(a, kernel, stride, padding, dilation) * cot))(x)


def _loop_grad(x, cot, kernel, stride, padding, dilation):
    """The gradient by a loop over windows: each window's cotangent goes to the first position whose
    value is strictly greater than all before it (as the rule: a nan stops later positions moving it)."""
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(padding), constant_values=-np.inf)
    gx = np.zeros(xp.shape)  # sums in float64, as the general scatter (np.bincount)
    for nco in np.ndindex(*cot.shape):
        n, c, out = nco[0], nco[1], nco[2:]
        best, at = None, None
        for off in np.ndindex(*kernel):
            pos = (n, c) + tuple(o * s + k * dl for o, s, k, dl in zip(out, stride, off, dilation))
            v = xp[pos]
            if best is None or v > best:
                best, at = v, pos
            elif np.isnan(v):
                best = v
        gx[at] += cot[nco]
    crop = tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape[2:], padding))
    return gx[(slice(None), slice(None)) + crop]


def _with_specials(rng, shape, dtype, ties, special):
    x = rng.integers(0, 3, shape).astype(dtype) if ties else rng.standard_normal(shape).astype(dtype)
    if special is not None:
        x[rng.random(shape) < 0.25] = special
    return x


GEOMETRIES = [  # x shape, kernel, stride, padding pairs, dilation
    ((2, 3, 8, 8), (2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1)),        # LeNet's: tiles
    ((2, 2, 7, 9), (2, 3), (2, 3), ((1, 1), (1, 1)), (1, 1)),        # tiles over a padded grid, cropped
    ((1, 2, 9), (3,), (3,), ((1, 1),), (1,)),                        # 1-d tiles
    ((2, 2, 7, 7), (2, 2), (3, 3), ((0, 0), (0, 0)), (1, 1)),        # disjoint with gaps
    ((1, 2, 9, 8), (2, 2), (3, 2), ((0, 0), (0, 0)), (2, 1)),        # disjoint, dilated
    ((2, 2, 7, 7), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),        # overlapping
    ((1, 3, 6, 6), (2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1)),        # overlapping, stride 1
]
IDS = ["tiles", "tiles-padded", "tiles-1d", "gaps", "gaps-dilated", "overlap", "overlap-stride1"]
DTYPES = [pytest.param(np.float32, id="float32"), pytest.param(np.float64, id="float64")]
VALUES = [pytest.param(False, None, id="distinct"), pytest.param(True, None, id="ties"),
          pytest.param(True, -np.inf, id="ties-neginf"), pytest.param(False, np.nan, id="nan")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ties,special", VALUES)
@pytest.mark.parametrize("xs,kernel,stride,padding,dilation", GEOMETRIES, ids=IDS)
def test_fast_paths_equal_the_general_path_and_a_loop(xs, kernel, stride, padding, dilation, ties, special,
                                                     dtype):
    rng = np.random.default_rng(7)
    x = _with_specials(rng, xs, dtype, ties, special)
    out_sp = cv._pool_out_shape(x, kernel, stride, padding, dilation)
    cot = rng.standard_normal(xs[:2] + out_sp).astype(dtype)
    fast_index = cv.pool_index(x, kernel, stride, padding, dilation)
    fast = _pool_grad(x, cot, kernel, stride, padding, dilation)
    with _general_path():
        general_index = cv.pool_index(x, kernel, stride, padding, dilation)
        general = _pool_grad(x, cot, kernel, stride, padding, dilation)
    np.testing.assert_array_equal(fast_index, general_index)
    assert fast.dtype == general.dtype == dtype and fast.shape == x.shape
    np.testing.assert_array_equal(fast, general)
    np.testing.assert_array_equal(fast, _loop_grad(x, cot, kernel, stride, padding, dilation).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ties,special", VALUES[:3])
@pytest.mark.parametrize("xs,kw", [
    ((2, 3, 8, 8), dict(kernel_size=2)),
    ((2, 2, 7, 9), dict(kernel_size=(2, 3), padding=1)),
    ((2, 2, 7, 7), dict(kernel_size=2, stride=3)),
    ((1, 2, 9, 8), dict(kernel_size=2, stride=(3, 2), dilation=(2, 1))),
    ((2, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 3, 6, 6), dict(kernel_size=2, stride=1)),
    ((1, 2, 7, 7), dict(kernel_size=2, ceil_mode=True)),
], ids=["tiles", "tiles-padded", "gaps", "gaps-dilated", "overlap", "overlap-stride1", "ceil"])
def test_max_pool2d_gradient_matches_torch(xs, kw, ties, special, dtype):
    """PyTorch also sends a tie's gradient to the first maximum. (Not compared: nan inputs, where PyTorch
    picks the window's last nan and wengert keeps the first maximum before the first nan, and windows
    entirely -inf that reach into the padding, where PyTorch picks the first position inside the input.)"""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    x = _with_specials(rng, xs, dtype, ties, special)
    if special is not None:  # keep one finite value in each row pair, so no window is entirely -inf
        x[..., ::2, ::2] = rng.integers(0, 3, x[..., ::2, ::2].shape)
    t = torch.tensor(x, requires_grad=True)
    want = torch.nn.functional.max_pool2d(t, **kw)
    cot = rng.standard_normal(tuple(want.shape)).astype(dtype)
    (want * torch.tensor(cot)).sum().backward()
    got = wg.grad(lambda a: wnp.sum(F.max_pool2d(a, **kw) * cot))(x)
    np.testing.assert_array_equal(F.max_pool2d(x, **kw), want.detach().numpy())
    assert got.dtype == dtype
    # overlapping windows sum (PyTorch in the dtype, wengert in float64 then rounded): to rounding
    np.testing.assert_allclose(got, t.grad.numpy(), rtol=0, atol=1e-6 if dtype == np.float32 else 1e-15)


def test_disjoint_windows_scatter_without_bincount_and_overlapping_ones_sum(monkeypatch):
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8))
    calls = []
    bincount = np.bincount
    monkeypatch.setattr(np, "bincount", lambda *a, **k: calls.append(1) or bincount(*a, **k))
    wg.grad(lambda a: wnp.sum(F.max_pool2d(a, 2) ** 2))(x)
    wg.grad(lambda a: wnp.sum(F.max_pool2d(a, 2, stride=3) ** 2))(x)
    assert calls == []
    wg.grad(lambda a: wnp.sum(F.max_pool2d(a, 3, stride=2) ** 2))(x)
    assert calls == [1]


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=2, stride=3, padding=1),
                                dict(kernel_size=3, stride=2, padding=1)], ids=["tiles", "gaps", "overlap"])
def test_second_order_passes_finite_differences(kw):
    rng = np.random.default_rng(5)
    x = rng.permutation(2 * 2 * 6 * 6).reshape(2, 2, 6, 6) * 0.1   # distinct: no kink within eps
    w = rng.standard_normal((2, 2, 1, 1))

    def f(a):
        return wnp.sum(wnp.sin(F.max_pool2d(a * w, **kw)) ** 2)

    check_grads(f, x, modes=("fwd", "rev"), order=2)
    # the VJP of the VJP: the gradient of the gradient's norm, against the general path
    hvp = wg.grad(lambda a: wnp.sum(wg.grad(f)(a) ** 2))
    fast = hvp(x)
    with _general_path():
        np.testing.assert_array_equal(fast, hvp(x))


def test_per_example_gradients_through_tiles_equal_a_loop():
    rng = np.random.default_rng(2)
    xs = rng.integers(0, 3, (4, 2, 6, 6)).astype(np.float32)    # ties
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)

    def loss(w, x):
        return wnp.sum(F.max_pool2d(F.conv2d(x[None], w), 2) ** 2)

    got = wg.vmap(wg.grad(loss), in_axes=(None, 0))(w, xs)
    want = np.stack([wg.grad(loss)(w, x) for x in xs])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_property_random_geometries_equal_the_loop_and_the_general_path(data):
    d = data.draw(st.sampled_from([1, 2]), label="spatial axes")
    kernel = tuple(data.draw(st.integers(1, 3), label="kernel") for _ in range(d))
    tile = data.draw(st.booleans(), label="stride == kernel")
    stride = kernel if tile else tuple(data.draw(st.integers(1, 4), label="stride") for _ in range(d))
    dilation = (1,) * d if tile else tuple(data.draw(st.integers(1, 2), label="dilation") for _ in range(d))
    padding = tuple((data.draw(st.integers(0, k // 2)), data.draw(st.integers(0, k // 2))) for k in kernel)
    size = tuple(data.draw(st.integers(1, 7), label="size") for _ in range(d))
    assume(all(s + lo + hi >= (k - 1) * dl + 1
               for s, (lo, hi), k, dl in zip(size, padding, kernel, dilation)))
    xs = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))) + size
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    special = data.draw(st.sampled_from([None, -np.inf, np.nan]), label="special")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    x = _with_specials(rng, xs, dtype, ties=True, special=special)
    cot = rng.standard_normal(xs[:2] + cv._pool_out_shape(x, kernel, stride, padding, dilation)).astype(dtype)
    fast = _pool_grad(x, cot, kernel, stride, padding, dilation)
    assert fast.dtype == dtype
    np.testing.assert_array_equal(fast, _loop_grad(x, cot, kernel, stride, padding, dilation).astype(dtype))
    with _general_path():
        np.testing.assert_array_equal(fast, _pool_grad(x, cot, kernel, stride, padding, dilation))


def test_window_scatter_unique_equals_the_sum_where_positions_are_distinct():
    rng = np.random.default_rng(4)
    for kernel, pads in itertools.product([(2, 2), (3, 2)], [((0, 0), (0, 0)), ((1, 0), (0, 1))]):
        x = rng.standard_normal((2, 3, 7, 6))
        index = cv.pool_index(x, kernel, kernel, pads, (1, 1))
        g = rng.standard_normal(index.shape)
        np.testing.assert_array_equal(cv.window_scatter(g, index, pads, (7, 6), unique=True),
                                      cv.window_scatter(g, index, pads, (7, 6)))
