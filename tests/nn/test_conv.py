"""Convolution and pooling: functions and layers against PyTorch (same weights: values and gradients,
float32 and float64), per-example gradients under ``wg.vmap(wg.grad)``, ``wg.checkpoint``, second
order, finite differences, and a Hypothesis property test against direct NumPy loops (no PyTorch)."""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert import nn
from wengert.engines.batching import NoBatchingRuleWarning
from wengert.nn import functional as F
from wengert.rules import convolution as cv
from wengert.testing import check_grads

TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _rand(rng, shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


def _torch_grads(torch_fun, arrays):
    """torch_fun(*tensors) and the gradients of sum(out * cot) with respect to each array."""
    import torch

    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = torch_fun(*ts)
    cot = np.cos(np.arange(out.numel()).reshape(out.shape)).astype(arrays[0].dtype)
    (out * torch.tensor(cot)).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in ts], cot


def _compare(ours, theirs, arrays, dtype):
    """Values and gradients of ``ours`` (wengert) and ``theirs`` (torch) on ``arrays``."""
    want, want_grads, cot = _torch_grads(theirs, arrays)
    got = ours(*arrays)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **TOL[dtype])
    grads = wg.grad(lambda *a: wnp.sum(ours(*a) * cot), argnums=tuple(range(len(arrays))))(*arrays)
    for g, w, a in zip(grads, want_grads, arrays):
        assert g.dtype == dtype and g.shape == a.shape
        np.testing.assert_allclose(g, w, **TOL[dtype])


DTYPES = [pytest.param(np.float32, id="float32"), pytest.param(np.float64, id="float64")]

CONV2D = [  # x shape, weight shape, keyword arguments
    ((2, 3, 7, 6), (4, 3, 3, 3), {}),
    ((2, 3, 8, 8), (4, 3, 3, 2), dict(stride=2, padding=1)),
    ((1, 4, 9, 7), (6, 2, 3, 3), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)),
    ((2, 2, 6, 6), (2, 2, 2, 3), dict(padding="same", dilation=2)),
    ((2, 3, 6, 5), (3, 3, 3, 3), dict(padding="valid", stride=3)),
    ((1, 4, 5, 5), (4, 1, 3, 3), dict(groups=4, padding=1)),  # depthwise
    ((3, 7, 7), (2, 3, 4, 4), dict(padding="same")),            # no batch axis, even kernel
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # PyTorch's note on even kernels
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,kw", CONV2D)
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_matches_torch(xs, ws, kw, bias, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    arrays = [_rand(rng, xs, dtype), _rand(rng, ws, dtype)] + ([_rand(rng, ws[:1], dtype)] if bias else [])
    _compare(lambda *a: F.conv2d(*a, **kw), lambda *t: torch.nn.functional.conv2d(*t, **kw), arrays, dtype)


CONV1D = [((2, 3, 9), (4, 3, 3), {}),
          ((2, 4, 11), (6, 2, 4), dict(stride=2, padding=3, dilation=2, groups=2)),
          ((1, 2, 6), (3, 2, 4), dict(padding="same")), ((2, 5), (3, 2, 2), dict(stride=2))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,kw", CONV1D)
def test_conv1d_matches_torch(xs, ws, kw, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    arrays = [_rand(rng, xs, dtype), _rand(rng, ws, dtype), _rand(rng, ws[:1], dtype)]
    _compare(lambda *a: F.conv1d(*a, **kw), lambda *t: torch.nn.functional.conv1d(*t, **kw), arrays, dtype)


CONV_T = [
    ((2, 3, 4, 4), (3, 2, 3, 3), {}),
    ((2, 3, 4, 5), (3, 2, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 3, 4), (4, 3, 2, 3), dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 2), groups=2)),
    ((2, 2, 4, 3), (2, 2, 3, 2), dict(stride=2, dilation=2, output_padding=1)),
    ((2, 5, 5), (2, 3, 4, 4), dict(stride=2, padding=1)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,kw", CONV_T)
def test_conv_transpose2d_matches_torch(xs, ws, kw, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    out = ws[1] * kw.get("groups", 1)
    arrays = [_rand(rng, xs, dtype), _rand(rng, ws, dtype), _rand(rng, (out,), dtype)]
    _compare(lambda *a: F.conv_transpose2d(*a, **kw),
             lambda *t: torch.nn.functional.conv_transpose2d(*t, **kw), arrays, dtype)


POOLS = [  # name, input shape, keyword arguments
    ("max_pool2d", (2, 3, 8, 8), dict(kernel_size=2)),
    ("max_pool2d", (2, 2, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
    ("max_pool2d", (1, 2, 9, 9), dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1))),
    ("max_pool2d", (1, 2, 7, 8), dict(kernel_size=2, ceil_mode=True)),
    ("max_pool2d", (1, 2, 8, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max_pool2d", (3, 6, 6), dict(kernel_size=2)),
    ("max_pool1d", (2, 3, 9), dict(kernel_size=3, stride=2, padding=1)),
    ("max_pool1d", (2, 3, 10), dict(kernel_size=2, dilation=3)),
    ("avg_pool2d", (2, 3, 8, 8), dict(kernel_size=2)),
    ("avg_pool2d", (2, 2, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool2d", (2, 2, 9, 7), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ("avg_pool2d", (1, 2, 6, 6), dict(kernel_size=(2, 3), divisor_override=5)),
    ("avg_pool1d", (2, 3, 9), dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool1d", (2, 3, 9), dict(kernel_size=4, padding=2, count_include_pad=False)),
    ("adaptive_avg_pool2d", (2, 3, 8, 8), dict(output_size=2)),
    ("adaptive_avg_pool2d", (2, 3, 7, 10), dict(output_size=(3, 4))),
    ("adaptive_avg_pool2d", (2, 3, 7, 10), dict(output_size=(None, 3))),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,xs,kw", POOLS, ids=[f"{p[0]}-{i}" for i, p in enumerate(POOLS)])
def test_pooling_matches_torch(name, xs, kw, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = (rng.permutation(np.prod(xs)).reshape(xs) / np.prod(xs)).astype(dtype)  # no ties in a window
    _compare(lambda a: getattr(F, name)(a, **kw), lambda t: getattr(torch.nn.functional, name)(t, **kw),
             [x], dtype)


def test_max_pool_gradient_goes_to_the_first_maximum_of_a_tie_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[[[1.0, 1.0, 0.0], [1.0, 0.5, 1.0], [0.0, 1.0, 1.0]]]])
    kw = dict(kernel_size=2, stride=1)
    _compare(lambda a: F.max_pool2d(a, **kw), lambda t: torch.nn.functional.max_pool2d(t, **kw), [x],
             np.float64)


# -- layers ---------------------------------------------------------------------------------------

LAYERS = [  # wengert/torch class name, constructor arguments, input shape
    ("Conv2d", (3, 4, 3), dict(stride=2, padding=1), (2, 3, 8, 8)),
    ("Conv2d", (4, 6, (3, 2)), dict(groups=2, dilation=(2, 1), bias=False), (2, 4, 9, 6)),
    ("Conv2d", (2, 3, 3), dict(padding="same"), (2, 2, 5, 5)),
    ("Conv1d", (3, 4, 3), dict(stride=2, padding=1), (2, 3, 10)),
    ("ConvTranspose2d", (4, 2, 3), dict(stride=2, padding=1, output_padding=1), (2, 4, 4, 4)),
    ("ConvTranspose2d", (4, 6, 2), dict(groups=2, bias=False), (1, 4, 3, 3)),
    ("MaxPool2d", (2,), {}, (2, 3, 6, 6)),
    ("MaxPool2d", (3,), dict(stride=2, padding=1), (2, 3, 7, 7)),
    ("MaxPool1d", (3,), dict(stride=1), (2, 3, 7)),
    ("AvgPool2d", (2,), dict(stride=1), (2, 3, 5, 5)),
    ("AvgPool1d", (3,), dict(padding=1), (2, 3, 7)),
    ("AdaptiveAvgPool2d", ((2, 3),), {}, (2, 3, 7, 8)),
]


def _pair(name, args, kw, dtype, seed=0):
    """The same layer in wengert and in PyTorch, with PyTorch's parameters copied into wengert's."""
    import torch

    ours = getattr(nn, name)(*args, **kw, **({"dtype": dtype, "rng": seed} if "Conv" in name else {}))
    theirs = getattr(torch.nn, name)(*args, **kw).to(torch.float64 if dtype == np.float64 else torch.float32)
    for pname, p in ours.named_parameters():
        p.value = getattr(theirs, pname).detach().numpy().copy()
    return ours, theirs


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,args,kw,xs", LAYERS, ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYERS)])
def test_layer_matches_torch_values_and_gradients(name, args, kw, xs, dtype):
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(name, args, kw, dtype)
    rng = np.random.default_rng(4)
    x = (rng.permutation(np.prod(xs)).reshape(xs) / np.prod(xs)).astype(dtype)
    xt = torch.tensor(x, requires_grad=True)
    out_t = theirs(xt)
    cot = np.sin(np.arange(out_t.numel())).reshape(out_t.shape).astype(dtype)
    (out_t * torch.tensor(cot)).sum().backward()

    names = [n for n, _ in ours.named_parameters()]
    assert names == [n for n, _ in theirs.named_parameters()]
    params = ours.parameters_tree()
    out = ours.apply(params, x)
    assert sorted(_flat(params)) == sorted(names)
    np.testing.assert_allclose(out, out_t.detach().numpy(), **TOL[dtype])
    gp, gx = wg.grad(lambda p, x: wnp.sum(ours.apply(p, x) * cot), argnums=(0, 1))(params, x)
    gp = _flat(gp)
    np.testing.assert_allclose(gx, xt.grad.numpy(), **TOL[dtype])
    assert gx.dtype == dtype
    for n in names:
        np.testing.assert_allclose(gp[n], getattr(theirs, n).grad.numpy(), **TOL[dtype], err_msg=n)

    if not names:
        return
    # the eager API: loss.backward() fills each parameter's .grad
    loss = wnp.sum(ours(x) * cot)
    ours.zero_grad()
    loss.backward()
    for n, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad, getattr(theirs, n).grad.numpy(), **TOL[dtype], err_msg=n)


@pytest.mark.parametrize("name,args,kw", [("Conv2d", (6, 64, 5), {}), ("Conv1d", (4, 64, 3), dict(groups=2)),
                                          ("ConvTranspose2d", (6, 64, 3), dict(groups=2))])
def test_default_initialisation_is_torchs(name, args, kw):
    """Both draw weight and bias from U(-b, b), b = 1 / sqrt(fan_in) with PyTorch's fan_in."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ours, theirs = getattr(nn, name)(*args, **kw, rng=0), getattr(torch.nn, name)(*args, **kw)
    fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(theirs.weight)
    bound = 1.0 / np.sqrt(fan_in)
    for n, p in ours.named_parameters():
        t = getattr(theirs, n).detach().numpy()
        assert p.value.shape == t.shape and p.value.dtype == t.dtype == np.float32
        for values in (p.value, t):  # samples of U(-b, b): within b, and reaching close to it
            assert bound * 0.9 < np.abs(values).max() <= bound


def test_layer_reprs_and_defaults_follow_torch():
    m = nn.Conv2d(3, 8, 3)
    assert (m.stride, m.padding, m.dilation, m.groups) == ((1, 1), (0, 0), (1, 1), 1)
    assert repr(m) == "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1))"
    assert nn.MaxPool2d(2).forward(np.zeros((1, 1, 4, 4))).shape == (1, 1, 2, 2)  # stride = kernel
    assert nn.ConvTranspose2d(2, 3, 2).weight.value.shape == (2, 3, 2, 2)


ERRORS = [
    (lambda: nn.Conv2d(3, 8, 3)(np.zeros((2, 4, 5, 5))),
     "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1)): expected an input of shape (N, 3, H, W) (3 channels), "
     "got shape (2, 4, 5, 5) with 4 channels"),
    (lambda: nn.Conv2d(3, 8, 3)(np.zeros((5, 5))), "expected an input of shape (N, 3, H, W) or without the "
                                                   "batch axis, got shape (5, 5)"),
    (lambda: nn.Conv1d(3, 8, 3)(np.zeros((2, 3, 5, 5))), "Conv1d(3, 8, kernel_size=(3,), stride=(1,)): "
                                                         "expected an input of shape (N, 3, L)"),
    (lambda: nn.Conv2d(3, 8, 3, groups=2), "Conv2d: groups=2 must divide in_channels=3 and out_channels=8"),
    (lambda: nn.Conv2d(3, 8, 3, padding_mode="mirror"), "Conv2d: padding_mode must be one of ['circular', "
                                                        "'reflect', 'replicate', 'zeros'], got 'mirror'"),
    (lambda: nn.ConvTranspose2d(3, 8, 3, padding_mode="reflect"),
     "ConvTranspose2d: only padding_mode='zeros'"),
    (lambda: nn.Conv1d(1, 1, 3, padding=4, padding_mode="reflect")(np.zeros((1, 1, 4))),
     "padding (4,) with padding_mode='reflect' must be smaller than the input's spatial size"),
    (lambda: nn.ConvTranspose2d(4, 2, 3)(np.zeros((1, 2, 3, 3))),
     "ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(1, 1)): expected an input of shape (N, 4, H, W) "
     "(4 channels)"),
    (lambda: nn.MaxPool2d(2)(np.zeros((2, 3, 4))), None),  # (C, H, W) is one example: accepted
    (lambda: nn.MaxPool2d(2)(np.zeros((4, 4))),
     "MaxPool2d(kernel_size=2, stride=None, padding=0, dilation=1, ceil_mode=False): expected an input of "
     "shape (N, C, H, W)"),
    (lambda: F.conv2d(np.zeros((1, 4, 5, 5)), np.zeros((6, 2, 3, 3))),
     "conv2d: input of shape (1, 4, 5, 5) has 4 channels, but weight of shape (6, 2, 3, 3) with groups=1 "
     "expects 2"),
    (lambda: F.conv2d(np.zeros((1, 4, 5, 5)), np.zeros((6, 2, 3, 3)), groups=3),
     "conv2d: groups=3 must divide the input's 4 channels and the weight's 6 output channels"),
    (lambda: F.conv2d(np.zeros((1, 2, 5, 5)), np.zeros((6, 2, 3))),
     "conv2d: weight must have shape (out_channels, in_channels / groups, kH, kW), got (6, 2, 3)"),
    (lambda: F.conv2d(np.zeros((1, 2, 5, 5)), np.zeros((6, 2, 3, 3)), padding="same", stride=2),
     "conv2d: padding='same' needs stride 1"),
    (lambda: F.conv2d(np.zeros((1, 2, 2, 5)), np.zeros((6, 2, 3, 3))),
     "conv: input of shape (1, 2, 2, 5) with padding ((0, 0), (0, 0)) is smaller than the kernel (3, 3)"),
    (lambda: F.conv2d(np.zeros((1, 2, 5, 5)), np.zeros((6, 2, 3, 3)), np.zeros(5)),
     "conv2d: bias must have shape (6,)"),
    (lambda: F.conv_transpose2d(np.zeros((1, 2, 3, 3)), np.zeros((2, 3, 3, 3)), stride=2, output_padding=2),
     "conv_transpose2d: output_padding (2, 2) must be smaller than stride (2, 2) or dilation (1, 1)"),
    (lambda: F.max_pool2d(np.zeros((1, 1, 4, 4)), 2, padding=2),
     "max_pool2d: padding (2, 2) must be at most half the kernel size (2, 2)"),
    (lambda: F.max_pool2d(np.zeros((1, 1, 4, 4)), 2, return_indices=True), "max_pool2d: return_indices=True"),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_bad_input_is_refused_by_name_and_shape(i):
    fun, message = ERRORS[i]
    if message is None:
        fun()
        return
    with pytest.raises((ValueError, NotImplementedError)) as info:
        fun()
    assert message in str(info.value)


# -- transforms: vmap (per-example gradients), checkpoint, second order ---------------------------

class SmallCNN(nn.Module):
    def __init__(self, dtype=np.float64, rng=0):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1, dtype=dtype, rng=rng)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=1, groups=2, dtype=dtype, rng=rng)
        self.fc = nn.Linear(6 * 2 * 2, 3, dtype=dtype, rng=rng)

    def forward(self, x):
        h = F.max_pool2d(nn.relu(self.conv1(x)), 2)
        h = F.avg_pool2d(nn.relu(self.conv2(h)), 2, stride=1)
        return self.fc(wnp.reshape(h, (wnp.shape(h)[0], -1)))


def _flat(tree, prefix=""):
    """A nested parameter tree as {"conv1.weight": array, ...}."""
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _torch_cnn(model):
    import torch

    def forward(p, x):
        h = torch.nn.functional.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=1)
        h = torch.nn.functional.max_pool2d(torch.relu(h), 2)
        h = torch.nn.functional.conv2d(h, p["conv2.weight"], p["conv2.bias"], groups=2)
        h = torch.nn.functional.avg_pool2d(torch.relu(h), 2, stride=1)
        return h.reshape(h.shape[0], -1) @ p["fc.weight"] + p["fc.bias"]

    return forward, {k: torch.tensor(v) for k, v in _flat(model.parameters_tree()).items()}


def _cnn_data(batch, seed=5):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, 1, 10, 10)), rng.integers(0, 3, size=batch)


def test_per_example_gradients_under_vmap_match_torch_func_and_a_loop():
    torch = pytest.importorskip("torch")
    model = SmallCNN()
    params = model.parameters_tree()
    xs, ys = _cnn_data(5)

    def loss(p, x, y):  # one example
        return nn.cross_entropy(model.apply(p, x[None]), y[None])

    with warnings.catch_warnings():
        warnings.simplefilter("error", NoBatchingRuleWarning)  # every primitive batches: no loop
        per_example = _flat(wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))(params, xs, ys))
    for i in range(len(xs)):
        one = _flat(wg.grad(loss)(params, xs[i], ys[i]))
        for k in one:
            np.testing.assert_allclose(per_example[k][i], one[k], rtol=1e-10, atol=1e-12)

    forward, tp = _torch_cnn(model)

    def torch_loss(p, x, y):
        return torch.nn.functional.cross_entropy(forward(p, x[None]), y[None])

    theirs = torch.func.vmap(torch.func.grad(torch_loss), in_dims=(None, 0, 0))(tp, torch.tensor(xs),
                                                                                torch.tensor(ys))
    for k in per_example:
        np.testing.assert_allclose(per_example[k], theirs[k].numpy(), rtol=1e-9, atol=1e-12, err_msg=k)


def test_per_example_gradients_do_not_loop_over_examples(monkeypatch):
    """Each convolution, pooling and scatter runs once for the whole batch, whatever its size."""
    model = SmallCNN()
    params = model.parameters_tree()
    counts = {}
    for prim in (cv.conv, cv.conv_transpose, cv.max_pool, cv.window_scatter):
        def counted(*a, _fun=prim.fun, _name=prim.__name__, **k):
            counts[_name] = counts.get(_name, 0) + 1
            return _fun(*a, **k)
        monkeypatch.setattr(prim, "fun", counted)

    def loss(p, x, y):
        return nn.cross_entropy(model.apply(p, x[None]), y[None])

    seen = []
    for batch in (2, 6):
        counts.clear()
        xs, ys = _cnn_data(batch)
        wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)
        seen.append(dict(counts))
    assert seen[0] == seen[1] and seen[0]["conv"] >= 4, seen


def test_checkpointed_cnn_blocks_give_the_same_gradients_as_torch():
    torch = pytest.importorskip("torch")
    model = SmallCNN()
    params = model.parameters_tree()
    xs, ys = _cnn_data(4)

    def loss(p, plain):
        block = model.apply if plain else wg.checkpoint(model.apply)
        return nn.cross_entropy(block(p, xs), ys)

    got = _flat(wg.grad(loss)(params, False))
    plain = _flat(wg.grad(loss)(params, True))
    forward, tp = _torch_cnn(model)
    for t in tp.values():
        t.requires_grad_(True)
    torch.nn.functional.cross_entropy(forward(tp, torch.tensor(xs)), torch.tensor(ys)).backward()
    for k in got:
        np.testing.assert_allclose(got[k], plain[k], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got[k], tp[k].grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=k)


def test_second_order_grad_of_the_gradient_norm_matches_torch():
    torch = pytest.importorskip("torch")
    model = SmallCNN()
    params = model.parameters_tree()
    xs, ys = _cnn_data(3)

    def grad_norm(p, x):
        g = wg.grad(lambda q: nn.cross_entropy(model.apply(q, x), ys))(p)
        return sum(wnp.sum(v * v) for v in _flat(g).values())

    got_p, got_x = wg.grad(grad_norm, argnums=(0, 1))(params, xs)
    got_p = _flat(got_p)
    forward, tp = _torch_cnn(model)
    for t in tp.values():
        t.requires_grad_(True)
    xt = torch.tensor(xs, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(forward(tp, xt), torch.tensor(ys))
    gs = torch.autograd.grad(loss, list(tp.values()), create_graph=True)
    sum((g * g).sum() for g in gs).backward()
    np.testing.assert_allclose(got_x, xt.grad.numpy(), rtol=1e-8, atol=1e-12)
    for k in got_p:
        np.testing.assert_allclose(got_p[k], tp[k].grad.numpy(), rtol=1e-8, atol=1e-12, err_msg=k)


def test_a_small_cnn_passes_finite_differences_to_second_order():
    model = SmallCNN()
    params = model.parameters_tree()
    xs, ys = _cnn_data(2)
    w1 = params["conv1"]["weight"]

    def loss(w, x):
        return nn.cross_entropy(model.apply({**params, "conv1": {**params["conv1"], "weight": w}}, x), ys)

    check_grads(loss, w1, xs, modes=("fwd", "rev"), order=2)


def test_float32_stays_float32_through_a_cnn_and_its_gradients():
    model = SmallCNN(dtype=np.float32)
    params = model.parameters_tree()
    xs, ys = _cnn_data(2)
    g = wg.grad(lambda p: nn.cross_entropy(model.apply(p, xs.astype(np.float32)), ys))(params)
    assert {v.dtype for v in _flat(g).values()} == {np.dtype(np.float32)}


def test_compiled_cnn_gradient_equals_the_tape():
    model = SmallCNN()
    params = model.parameters_tree()
    xs, ys = _cnn_data(3)

    def loss(p, x):
        return nn.cross_entropy(model.apply(p, x), ys)

    compiled = wg.compile(wg.grad(loss))
    got, want = _flat(compiled(params, xs)), _flat(wg.grad(loss)(params, xs))
    assert "prim_conv(" in compiled.source(params, xs)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-14)


# -- a property test against direct loops (no PyTorch) --------------------------------------------

def _loop_conv(x, w, stride, pads, dilation, groups):
    """Cross-correlation by its definition, one output element at a time."""
    d = w.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in pads])
    n, o = x.shape[0], w.shape[0]
    cg, og = w.shape[1], o // groups
    out_sp = [(xp.shape[2 + a] - dilation[a] * (w.shape[2 + a] - 1) - 1) // stride[a] + 1 for a in range(d)]
    out = np.zeros((n, o, *out_sp))
    for b, oc in itertools.product(range(n), range(o)):
        g = oc // og
        for pos in itertools.product(*map(range, out_sp)):
            for k in itertools.product(*map(range, w.shape[2:])):
                at = tuple(p * s + kk * dl for p, s, kk, dl in zip(pos, stride, k, dilation))
                out[(b, oc) + pos] += xp[(b, slice(g * cg, (g + 1) * cg)) + at] @ w[(oc, slice(None)) + k]
    return out


def _loop_conv_transpose(y, w, stride, pads, dilation, groups):
    """The transposed convolution by its definition: each input element adds a scaled kernel."""
    d = w.ndim - 2
    n, c = y.shape[:2]
    cig, cog = c // groups, w.shape[1]
    full = [(y.shape[2 + a] - 1) * stride[a] + dilation[a] * (w.shape[2 + a] - 1) + 1 for a in range(d)]
    big = np.zeros((n, cog * groups, *[f + max(-hi, 0) for f, (lo, hi) in zip(full, pads)]))
    for b, ic in itertools.product(range(n), range(c)):
        g = ic // cig
        for pos in itertools.product(*map(range, y.shape[2:])):
            for k in itertools.product(*map(range, w.shape[2:])):
                at = tuple(p * s + kk * dl for p, s, kk, dl in zip(pos, stride, k, dilation))
                big[(b, slice(g * cog, (g + 1) * cog)) + at] += y[(b, ic) + pos] * w[(ic, slice(None)) + k]
    return big[(slice(None), slice(None)) + tuple(slice(lo, f - hi) for f, (lo, hi) in zip(full, pads))]


def _loop_pool(x, kernel, stride, pads, dilation, reduce, fill):
    d = len(kernel)
    xp = np.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in pads], constant_values=fill)
    out_sp = [(xp.shape[2 + a] - dilation[a] * (kernel[a] - 1) - 1) // stride[a] + 1 for a in range(d)]
    out = np.zeros(x.shape[:2] + tuple(out_sp))
    for pos in itertools.product(*map(range, out_sp)):
        window = [xp[(slice(None), slice(None)) + tuple(p * s + kk * dl for p, s, kk, dl in
                                                       zip(pos, stride, k, dilation))]
                  for k in itertools.product(*map(range, kernel))]
        out[(slice(None), slice(None)) + pos] = reduce(np.stack(window), axis=0)
    return out


@st.composite
def _geometry(draw):
    d = draw(st.sampled_from([1, 2]))
    groups = draw(st.integers(1, 2))
    cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(d))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(d))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(d))
    pads = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(d))
    size = tuple(max(draw(st.integers(1, 7)), dl * (k - 1) + 1) for k, dl in zip(kernel, dilation))
    n = draw(st.integers(1, 2))
    seed = draw(st.integers(0, 2 ** 16))
    return d, groups, cg, og, kernel, stride, dilation, pads, size, n, seed


@settings(max_examples=40, deadline=None)
@given(_geometry())
def test_conv_conv_transpose_and_pooling_equal_direct_loops(geometry):
    d, groups, cg, og, kernel, stride, dilation, pads, size, n, seed = geometry
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, groups * cg) + size)
    w = rng.standard_normal((groups * og, cg) + kernel)
    kw = dict(stride=stride, padding=pads, dilation=dilation, groups=groups)
    got = cv.conv(x, w, **kw)
    np.testing.assert_allclose(got, _loop_conv(x, w, stride, pads, dilation, groups), rtol=1e-12, atol=1e-12)

    # conv_transpose (any output padding: a negative high pad appends zeros) and conv's adjoint identity
    pairs_t = tuple((lo, hi - 1) for lo, hi in pads)
    wt = rng.standard_normal((groups * cg, og) + kernel)
    got_t = cv.conv_transpose(x, wt, stride=stride, padding=pairs_t, dilation=dilation, groups=groups)
    np.testing.assert_allclose(got_t, _loop_conv_transpose(x, wt, stride, pairs_t, dilation, groups),
                               rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(got.shape)
    gx, gw = wg.vjp(lambda a, b: cv.conv(a, b, **kw), x, w)[1](g)
    np.testing.assert_allclose(np.sum(gx * x) + np.sum(gw * w), 2 * np.sum(g * got), rtol=1e-9)

    pool_pads = tuple((min(lo, k // 2), min(lo, k // 2)) for (lo, _), k in zip(pads, kernel))
    args = (kernel, stride, pool_pads, dilation)
    np.testing.assert_allclose(cv.max_pool(x, *args), _loop_pool(x, *args, np.max, -np.inf), rtol=1e-12)
    pool = F.avg_pool1d if d == 1 else F.avg_pool2d
    got_avg = pool(x, kernel, stride, [p for p, _ in pool_pads])
    want_avg = _loop_pool(x, kernel, stride, pool_pads, (1,) * d, np.mean, 0.0)
    np.testing.assert_allclose(got_avg, want_avg, rtol=1e-10, atol=1e-12)
    # count_include_pad=False: the mean over the window's input elements (padding filled with nan)
    got_valid = pool(x, kernel, stride, [p for p, _ in pool_pads], count_include_pad=False)
    want_valid = _loop_pool(x, kernel, stride, pool_pads, (1,) * d, np.nanmean, np.nan)
    np.testing.assert_allclose(got_valid, want_valid, rtol=1e-10, atol=1e-12)
    if d == 2:  # adaptive pooling: PyTorch's windows [floor(i H / h), ceil((i + 1) H / h))
        out_size = (seed % size[0] + 1, seed % size[1] + 1)
        want = np.zeros(x.shape[:2] + out_size)
        for i, j in itertools.product(range(out_size[0]), range(out_size[1])):
            r0, r1 = i * size[0] // out_size[0], -(-(i + 1) * size[0] // out_size[0])
            c0, c1 = j * size[1] // out_size[1], -(-(j + 1) * size[1] // out_size[1])
            want[:, :, i, j] = x[:, :, r0:r1, c0:c1].mean(axis=(2, 3))
        np.testing.assert_allclose(F.adaptive_avg_pool2d(x, out_size), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
@pytest.mark.parametrize("prim,groups", [(cv.conv, 1), (cv.conv, 2), (cv.conv_transpose, 2)])
def test_vmap_over_either_argument_equals_a_loop(prim, groups, in_axes):
    """The batch folds into N (input batched) or into the groups (weights batched); values, VJPs and
    JVPs equal one call per example."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 2, 4, 6, 5))                  # 3 examples of (2, 4, 6, 5)
    w = rng.standard_normal((3, 4, 4 // groups, 3, 2))         # (out, in / g, ...) or (in, out / g, ...)
    kw = dict(stride=(2, 1), padding=((1, 0), (1, 1)), dilation=(1, 2), groups=groups)
    args = [x if in_axes[0] == 0 else x[0], w if in_axes[1] == 0 else w[0]]

    def example(i):
        return [a[i] if ax == 0 else a for a, ax in zip(args, in_axes)]

    def f(a, b):
        return prim(a, b, **kw)

    with warnings.catch_warnings():
        warnings.simplefilter("error", NoBatchingRuleWarning)
        got = wg.vmap(f, in_axes=in_axes)(*args)
        cot = np.cos(np.arange(got.size)).reshape(got.shape)
        vjps = wg.vmap(lambda a, b, g: wg.vjp(f, a, b)[1](g), in_axes=in_axes + (0,))(*args, cot)
        jvps = wg.vmap(lambda a, b: wg.jvp(f, (a, b), (a, b))[1], in_axes=in_axes)(*args)
    for i in range(3):
        a, b = example(i)
        np.testing.assert_allclose(got[i], f(a, b), rtol=1e-12, atol=1e-12)
        for g, want in zip(vjps, wg.vjp(f, a, b)[1](cot[i])):
            np.testing.assert_allclose(g[i], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jvps[i], wg.jvp(f, (a, b), (a, b))[1], rtol=1e-12, atol=1e-12)


def test_max_pool_under_vmap_with_an_unbatched_tangent_equals_a_loop():
    xs = np.stack([np.random.default_rng(k).permutation(48).reshape(1, 3, 4, 4) * 0.1 for k in range(3)])
    t = np.linspace(-1, 1, 48).reshape(1, 3, 4, 4)

    def f(x):
        return wg.jvp(lambda a: F.max_pool2d(a, 2, stride=1), (x,), (t,))[1]

    got = wg.vmap(f)(xs)
    for i in range(3):
        np.testing.assert_allclose(got[i], f(xs[i]), rtol=1e-12)
