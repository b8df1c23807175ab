"""wengert.nn against PyTorch (float64) on the odd shapes and settings the other files leave out:
batch and channel 1, momentum=None batch norm over several steps, affine=False, recurrent layers
with every flag, attention masks of each kind, losses with class weights, ignore_index and label
smoothing, optimisers with amsgrad/maximize over several steps; arguments that are not supported
are refused by name. PyTorch is imported inside each test (CI runs this file without it)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert import nn, optim
from wengert.api.tree import tree_flatten
from wengert.nn import functional as F

TOL = dict(rtol=1e-9, atol=1e-10)


def _torch():
    torch = pytest.importorskip("torch")
    return torch


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _leaves(x)]
    return [] if out is None else [out]


def _plain(x):
    return x.value if isinstance(x, wg.Tensor) else np.asarray(x)


def _build(name, args, kwargs, seed=0):
    """(torch module, wengert module) with the same random weights and running statistics, loaded
    into wengert's from PyTorch's state_dict (whose names and shapes must be wengert's)."""
    torch = _torch()
    torch.manual_seed(seed)
    tm = getattr(torch.nn, name)(*args, **kwargs).double()
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for key, t in tm.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, t.shape) if "running_var" in key
                                         else rng.normal(0, 0.5, t.shape)))
    wm = getattr(nn, name)(*args, **kwargs, dtype=np.float64)
    state = {k: v.numpy() for k, v in tm.state_dict().items()}
    ours = wm.state_dict(layout="torch")
    assert list(ours) == list(state)
    assert {k: v.shape for k, v in ours.items()} == {k: tuple(v.shape) for k, v in state.items()}
    wm.load_state_dict(state)
    return tm, wm


def _compare_module(name, args, kwargs, inputs, train=True, call_kw=None, steps=1, seed=0):
    """Outputs, gradients with respect to every input and parameter, and buffers, step by step."""
    torch = _torch()
    call_kw = call_kw or {}
    tm, wm = _build(name, args, kwargs, seed)
    tm.train(train)
    wm.train(train)
    rng = np.random.default_rng(seed + 1)

    def to_torch(x):
        if isinstance(x, tuple):
            return tuple(to_torch(a) for a in x)
        return torch.tensor(x, requires_grad=True)

    for _ in range(steps):
        ts = [to_torch(x) for x in inputs]
        t_out = _leaves(tm(*ts, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                                   for k, v in call_kw.items()}))
        cots = [rng.normal(size=tuple(o.shape)) for o in t_out]
        sum((o * torch.tensor(c)).sum() for o, c in zip(t_out, cots)).backward()
        t_gp = {k: p.grad.numpy().copy() for k, p in tm.named_parameters()}
        tm.zero_grad()

        def loss(params, *xs):
            outs = _leaves(nn.functional_call(wm, params, xs, call_kw))
            return sum(wnp.sum(o * c) for o, c in zip(outs, cots)), outs

        params = {k: p.value for k, p in wm.named_parameters()}
        (g_params, *g_inputs), w_out = wg.grad(loss, argnums=tuple(range(1 + len(inputs))),
                                               has_aux=True)(params, *inputs)
        assert len(w_out) == len(t_out)
        for got, want in zip(w_out, t_out):
            np.testing.assert_allclose(_plain(got), want.detach().numpy(), **TOL)
        for got, want in zip(tree_flatten(tuple(g_inputs))[0], _leaves(ts)):
            np.testing.assert_allclose(got, want.grad.numpy(), **TOL)
        assert sorted(g_params) == sorted(t_gp)
        for key, want in t_gp.items():
            np.testing.assert_allclose(g_params[key], want, err_msg=key, **TOL)
        for key, value in tm.state_dict().items():
            if "running" in key or "num_batches" in key:
                np.testing.assert_allclose(wm.state_dict()[key], value.numpy(), err_msg=key, **TOL)


# -- convolution -----------------------------------------------------------------------------------

def test_conv_transpose2d_refuses_an_output_too_small_as_torch():
    torch = _torch()
    x, w = np.ones((1, 1, 3, 3)), np.ones((1, 2, 1, 2))
    kw = dict(padding=(2, 0), output_padding=(1, 0), dilation=(2, 1))
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), **kw)
    with pytest.raises(ValueError, match=r"conv_transpose2d: .* spatial size \(0, 4\), which is too small"):
        F.conv_transpose2d(x, w, **kw)  # it gave an empty (1, 2, 0, 4) array
    with pytest.raises(ValueError, match=r"spatial size \(-3, 0\)"):
        F.conv_transpose2d(np.ones((1, 2, 1, 1)), np.ones((2, 1, 1, 4)), stride=(3, 1), padding=2,
                           dilation=(2, 1))


# -- losses ----------------------------------------------------------------------------------------

def _cross_entropy_vs_torch(x, y, reduction, kw):
    """wengert's cross_entropy (classes last) against PyTorch's (classes on axis 1): value and the
    gradients with respect to the logits (and the class weights, for probability targets)."""
    torch = _torch()
    TF = torch.nn.functional
    prob = y.dtype.kind == "f"
    tx = torch.tensor(np.moveaxis(x, -1, 1) if x.ndim > 2 else x, requires_grad=True)
    ty = torch.tensor(np.moveaxis(y, -1, 1) if prob and y.ndim > 2 else y)
    tkw = dict(kw)
    if "weight" in kw:
        tkw["weight"] = torch.tensor(kw["weight"], requires_grad=prob)  # PyTorch: no gradient otherwise
    want = TF.cross_entropy(tx, ty, reduction=reduction, **tkw)
    cot = np.cos(np.arange(want.numel())).reshape(tuple(want.shape))
    (want * torch.tensor(cot)).sum().backward()
    want_value = want.detach().numpy()  # (N, d1, ...) for reduction='none', as ours

    def loss(x, w):
        weight = {"weight": w} if w is not None else {}
        return nn.cross_entropy(x, y, reduction=reduction, **{**kw, **weight})

    np.testing.assert_allclose(loss(x, kw.get("weight")), want_value, equal_nan=True, **TOL)
    argnums = (0, 1) if prob and "weight" in kw else (0,)
    grads = wg.grad(lambda x, w: wnp.sum(loss(x, w) * cot), argnums=argnums)(x, kw.get("weight"))
    want_gx = tx.grad.numpy()
    np.testing.assert_allclose(grads[0], np.moveaxis(want_gx, 1, -1) if x.ndim > 2 else want_gx, **TOL)
    if len(argnums) == 2:
        np.testing.assert_allclose(grads[1], tkw["weight"].grad.numpy(), **TOL)


CE_CASES = [  # labels kind, logits shape, reduction, keyword arguments
    ("int", (5, 3), "mean", dict(weight=[0.2, 1.0, 3.0])),
    ("int", (5, 3), "sum", dict(weight=[0.2, 1.0, 3.0], ignore_index=1)),
    ("int", (6, 4), "mean", dict(ignore_index=-1)),          # ignored labels leave the mean's count
    ("int", (6, 4), "mean", dict(weight=[1.0, 0.5, 2.0, 0.1], ignore_index=2)),  # NLL's weighted mean
    ("int", (6, 4), "none", dict(weight=[1.0, 0.5, 2.0, 0.1], ignore_index=-100, label_smoothing=0.2)),
    ("int", (6, 4), "mean", dict(label_smoothing=0.3)),
    ("int", (6, 4), "mean", dict(weight=[1.0, 0.5, 2.0, 0.1], label_smoothing=0.3, ignore_index=0)),
    ("int", (1, 1), "mean", dict(label_smoothing=1.0)),        # batch 1, class 1
    ("int", (2, 3, 4), "mean", dict(weight=[1.0, 0.5, 2.0, 0.1], ignore_index=3)),  # (N, d, C)
    ("prob", (5, 3), "mean", dict(weight=[0.2, 1.0, 3.0])),   # probabilities: mean over rows
    ("prob", (5, 3), "sum", dict(label_smoothing=0.4)),
    ("prob", (2, 3, 4), "none", dict(weight=[1.0, 0.5, 2.0, 0.1], label_smoothing=0.1)),
]


@pytest.mark.parametrize("kind,shape,reduction,kw", CE_CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in
                                                                 enumerate(CE_CASES)])
def test_cross_entropy_with_weights_ignore_index_and_smoothing_matches_torch(kind, shape, reduction, kw):
    rng = np.random.default_rng(len(shape) + len(kw))
    x = rng.normal(size=shape)
    kw = {k: np.asarray(v) if k == "weight" else v for k, v in kw.items()}
    if kind == "int":
        y = rng.integers(0, shape[-1], shape[:-1])
        if "ignore_index" in kw:
            y[..., 0] = kw["ignore_index"]
    else:
        y = rng.random(shape)
        y /= y.sum(-1, keepdims=True)
    _cross_entropy_vs_torch(x, y, reduction, kw)


def test_every_label_ignored_gives_nan_and_a_zero_gradient_as_torch():
    x, y = np.random.default_rng(0).normal(size=(2, 3)), np.array([-100, -100])
    for kw in ({}, {"label_smoothing": 0.2}, {"weight": np.array([1.0, 2.0, 3.0])}):
        _cross_entropy_vs_torch(x, y, "mean", kw)
        assert np.isnan(nn.cross_entropy(x, y, **kw))
        assert np.array_equal(wg.grad(lambda x: nn.cross_entropy(x, y, **kw))(x), np.zeros((2, 3)))


def test_nll_loss_matches_torch_with_weights_and_ignore_index():
    torch = _torch()
    rng = np.random.default_rng(5)
    log_probs, y, w = rng.normal(size=(7, 4)), rng.integers(0, 4, 7), rng.uniform(0.1, 2.0, 4)
    y[2] = 1
    for reduction in ("mean", "sum", "none"):
        t_lp = torch.tensor(log_probs, requires_grad=True)
        want = torch.nn.functional.nll_loss(t_lp, torch.tensor(y), torch.tensor(w), ignore_index=1,
                                            reduction=reduction)
        want.sum().backward()
        got = nn.nll_loss(log_probs, y, w, ignore_index=1, reduction=reduction)
        np.testing.assert_allclose(got, want.detach().numpy(), **TOL)
        g = wg.grad(lambda a: wnp.sum(nn.nll_loss(a, y, w, ignore_index=1, reduction=reduction)))(log_probs)
        np.testing.assert_allclose(g, t_lp.grad.numpy(), **TOL)


def test_cross_entropy_options_are_checked_by_name():
    x, y = np.zeros((2, 3)), np.array([0, 2])
    with pytest.raises(ValueError, match=r"cross_entropy: weight must have shape \(3,\), one per class, "
                                         r"got \(2,\)"):
        nn.cross_entropy(x, y, weight=np.ones(2))
    with pytest.raises(ValueError, match=r"cross_entropy: label_smoothing must lie in \[0, 1\], got 1.5"):
        nn.cross_entropy(x, y, label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"nll_loss: reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        nn.nll_loss(x, y, reduction="avg")
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        nn.cross_entropy(x, np.array([0, 5]), ignore_index=-1)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.sampled_from(["mean", "sum", "none"]), st.booleans(),
       st.sampled_from([0.0, 0.1, 1.0]), st.sampled_from([None, -100, 0]), st.integers(0, 2 ** 16))
def test_cross_entropy_property_matches_torch(n, classes, reduction, weighted, smoothing, ignore, seed):
    _torch()
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(n, classes)), rng.integers(0, classes, n)
    kw = {"label_smoothing": smoothing}
    if weighted:
        kw["weight"] = rng.uniform(0.1, 2.0, classes)
    if ignore is not None:
        kw["ignore_index"] = ignore
        y[rng.random(n) < 0.3] = ignore
    _cross_entropy_vs_torch(x, y, reduction, kw)


# -- optimisers ------------------------------------------------------------------------------------

OPTIMISERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.5, weight_decay=0.2, maximize=True)),
    ("SGD", dict(lr=0.1, maximize=True)),
    ("Adam", dict(lr=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.1, maximize=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.1, amsgrad=True, maximize=True, weight_decay=0.2, betas=(0.5, 0.7), eps=1e-3)),
    ("AdamW", dict(lr=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.1, amsgrad=True, maximize=True, weight_decay=0.3)),
]


@pytest.mark.parametrize("name,kw", OPTIMISERS, ids=[f"{n}-{'-'.join(kw)}" for n, kw in OPTIMISERS])
def test_optimiser_steps_match_torch_optim(name, kw):
    torch = _torch()
    rng = np.random.default_rng(6)
    start, grads = rng.normal(size=(3, 2)), rng.normal(size=(7, 3, 2))
    grads[4] *= 0.01  # a small gradient: amsgrad keeps the larger second moment of the earlier steps
    tp = torch.nn.Parameter(torch.tensor(start))
    wp = nn.Parameter(start.copy())
    t_opt, w_opt = getattr(torch.optim, name)([tp], **kw), getattr(optim, name)([wp], **kw)
    for g in grads:
        tp.grad = torch.tensor(g)
        wp.grad = g.copy()
        t_opt.step()
        w_opt.step()
        np.testing.assert_allclose(wp.value, tp.detach().numpy(), rtol=1e-12, atol=1e-14)
    if kw.get("amsgrad"):
        assert "max_exp_avg_sq" in w_opt.state_dict()["state"][0]


def test_plain_sgd_maximize_on_embedding_rows_climbs():
    emb = nn.Embedding(4, 2, rng=0, dtype=np.float64)
    before = emb.weight.value.copy()
    opt = optim.SGD(emb.parameters(), lr=0.5, maximize=True)
    wnp.sum(emb(np.array([1, 1, 3]))).backward()
    opt.step()
    np.testing.assert_allclose(emb.weight.value - before, 0.5 * np.array([[0, 0], [2, 2], [0, 0], [1, 1]]))


# -- Embedding -------------------------------------------------------------------------------------

EMBEDDING = [dict(padding_idx=2), dict(padding_idx=-1), dict(scale_grad_by_freq=True, sparse=False),
             dict(padding_idx=0, scale_grad_by_freq=True, sparse=False), dict(max_norm=1.0),
             dict(max_norm=0.5, norm_type=1.0, padding_idx=1, sparse=False)]


@pytest.mark.parametrize("kw", EMBEDDING, ids=["-".join(f"{k}={v}" for k, v in kw.items())
                                               for kw in EMBEDDING])
def test_embedding_options_match_torch_eagerly_and_functionally(kw):
    torch = _torch()
    torch.manual_seed(0)
    te = torch.nn.Embedding(5, 3, **kw).double()
    ours = nn.Embedding(5, 3, dtype=np.float64, **kw)
    if "padding_idx" in kw:
        assert not ours.weight.value[kw["padding_idx"]].any()  # the padding row starts at zero
    start = te.weight.detach().numpy().copy()
    ours.weight.value[...] = start
    idx = np.array([[0, 2, 2], [4, 1, 2]])
    cot = np.random.default_rng(7).normal(size=(2, 3, 3))
    (te(torch.tensor(idx)) * torch.tensor(cot)).sum().backward()
    want = te.weight.grad.to_dense().numpy()
    out = ours(idx)
    wnp.sum(out * cot).backward()
    grad = ours.weight.grad
    np.testing.assert_allclose(out.value, te(torch.tensor(idx)).detach().numpy(), **TOL)
    dense = grad.to_dense() if isinstance(grad, nn.SparseRows) else grad.value
    np.testing.assert_allclose(dense, want, **TOL)
    np.testing.assert_allclose(ours.weight.value, te.weight.detach().numpy(), **TOL)  # max_norm's rescaling
    assert isinstance(grad, nn.SparseRows) == kw.get("sparse", True)
    if "max_norm" not in kw:
        fresh = nn.Embedding(5, 3, dtype=np.float64, **kw)
        g = wg.grad(lambda p: wnp.sum(nn.functional_call(fresh, p, (idx,)) * cot))({"weight": start})
        np.testing.assert_allclose(g["weight"], want, **TOL)


def test_embedding_sparse_false_gives_torchs_dense_adam():
    torch = _torch()
    torch.manual_seed(0)
    te, ours = torch.nn.Embedding(5, 3).double(), nn.Embedding(5, 3, sparse=False, dtype=np.float64)
    ours.weight.value[...] = te.weight.detach().numpy()
    t_opt, w_opt = torch.optim.Adam(te.parameters(), lr=0.1), optim.Adam(ours.parameters(), lr=0.1)
    for idx in ([0, 1, 1], [3, 0, 2], [4, 4, 4], [1, 2, 3]):  # rows left out still move (dense moments)
        t_opt.zero_grad()
        w_opt.zero_grad()
        te(torch.tensor(idx)).pow(2).sum().backward()
        wnp.sum(ours(np.array(idx)) ** 2).backward()
        t_opt.step()
        w_opt.step()
    np.testing.assert_allclose(ours.weight.value, te.weight.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_embedding_options_are_checked_by_name():
    with pytest.raises(ValueError, match=r"Embedding: padding_idx must lie in \[-4, 4\) for a table of "
                                         r"4 rows"):
        nn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(ValueError, match="Embedding: max_norm must be positive"):
        nn.Embedding(4, 2, max_norm=0.0)
    emb = nn.Embedding(4, 2, max_norm=1.0, dtype=np.float64)
    with pytest.raises(NotImplementedError, match=r"Embedding: max_norm rescales rows of the module's own "
                                                  r"table in place; with a weight given to apply\(\)"):
        wg.grad(lambda p: wnp.sum(emb.apply(p, np.array([1]))))(emb.parameters_tree())
    assert "padding_idx=3" in repr(nn.Embedding(4, 2, padding_idx=-1))


# -- convolution layers: padding modes, and a property over random geometry ------------------------

def _conv_layer_vs_torch(cls, cin, cout, kernel, x, kw):
    """A conv layer with PyTorch's weights: value and gradients w.r.t. input, weight and bias."""
    torch = _torch()
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(cin, cout, kernel, **kw).double()
    tx = torch.tensor(x, requires_grad=True)
    out = tm(tx)
    cot = np.cos(np.arange(out.numel())).reshape(tuple(out.shape))
    (out * torch.tensor(cot)).sum().backward()
    wm = getattr(nn, cls)(cin, cout, kernel, **kw, dtype=np.float64)
    wm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    np.testing.assert_allclose(wm(x).value, out.detach().numpy(), **TOL)
    gp, gx = wg.grad(lambda p, x: wnp.sum(nn.functional_call(wm, p, (x,)) * cot), argnums=(0, 1))(
        wm.parameters_tree(), x)
    np.testing.assert_allclose(gx, tx.grad.numpy(), **TOL)
    for key, p in tm.named_parameters():
        np.testing.assert_allclose(gp[key], p.grad.numpy(), err_msg=key, **TOL)


PAD_MODES = [  # layer, in, out, kernel, input shape, keyword arguments
    ("Conv2d", 2, 3, 3, (1, 2, 4, 5), dict(padding=1, padding_mode="reflect")),
    ("Conv2d", 2, 4, (2, 3), (2, 4, 5), dict(padding=(1, 2), padding_mode="replicate", groups=2)),
    ("Conv2d", 1, 1, 3, (1, 1, 3, 3), dict(padding=2, padding_mode="circular", dilation=2)),
    ("Conv2d", 2, 2, (2, 4), (1, 2, 5, 6), dict(padding="same", padding_mode="reflect", groups=2)),
    ("Conv1d", 1, 2, 4, (1, 1, 5), dict(padding=3, padding_mode="replicate", stride=2)),
    ("Conv1d", 3, 3, 3, (2, 3, 4), dict(padding=4, padding_mode="circular", groups=3)),  # depthwise
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("cls,cin,cout,kernel,shape,kw", PAD_MODES,
                         ids=[f"{c[0]}-{c[5]['padding_mode']}-{i}" for i, c in enumerate(PAD_MODES)])
def test_conv_padding_modes_match_torch(cls, cin, cout, kernel, shape, kw):
    x = np.random.default_rng(8).normal(size=shape)
    _conv_layer_vs_torch(cls, cin, cout, kernel, x, kw)
    assert f"padding_mode={kw['padding_mode']!r}" in repr(getattr(nn, cls)(cin, cout, kernel, **kw))


@st.composite
def _conv_geometry(draw):
    d = draw(st.integers(1, 2))
    ints = lambda lo, hi: tuple(draw(st.lists(st.integers(lo, hi), min_size=d, max_size=d)))  # noqa: E731
    groups = draw(st.integers(1, 2))
    kernel, dilation = ints(1, 3), ints(1, 2)
    mode = draw(st.sampled_from(["zeros", "reflect", "replicate", "circular"]))
    padding = draw(st.one_of(st.just("same"), st.integers(0, 2), st.just(None)))
    padding = ints(0, 2) if padding is None else padding
    stride = (1,) * d if padding == "same" else ints(1, 2)
    pads = [0 if padding == "same" else (padding if isinstance(padding, int) else padding[i])
            for i in range(d)]
    reach = [dl * (k - 1) for k, dl in zip(kernel, dilation)]
    smallest = [max(r + 1 - 2 * p, p + 1) for r, p in zip(reach, pads)]  # one output; reflect pad < size
    spatial = tuple(draw(st.integers(n, n + 3)) for n in smallest)
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, padding_mode=mode)
    return ("Conv1d" if d == 1 else "Conv2d"), cin, cout, kernel, batch + (cin,) + spatial, kw


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@settings(max_examples=30, deadline=None)
@given(_conv_geometry(), st.integers(0, 2 ** 16))
def test_conv_layer_property_matches_torch(geometry, seed):
    """Random geometry (batch 1 or none, channel 1, kernel larger than stride, dilation, groups,
    every padding and padding mode): values and gradients as PyTorch's."""
    _torch()
    cls, cin, cout, kernel, shape, kw = geometry
    _conv_layer_vs_torch(cls, cin, cout, kernel, np.random.default_rng(seed).normal(size=shape), kw)


AVG_CEIL = [  # input shape, keyword arguments: ceil_mode's last window hangs over the input's end
    ((1, 1, 7, 5), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((2, 2, 6, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=1, ceil_mode=True)),
    ((2, 2, 6, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=1, ceil_mode=True,
                        count_include_pad=False)),
    ((1, 3, 5, 5), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, divisor_override=7)),
    ((3, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),  # no batch axis
    ((1, 2, 9), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
    ((1, 1, 2, 5), dict(kernel_size=(3, 2), stride=(2, 1), ceil_mode=True)),  # one window, past the end
    ((1, 2, 1, 6), dict(kernel_size=(4, 3), stride=(2, 3), padding=1, ceil_mode=True,
                        count_include_pad=False)),
]


@pytest.mark.parametrize("shape,kw", AVG_CEIL, ids=[str(i) for i in range(len(AVG_CEIL))])
def test_avg_pool_ceil_mode_matches_torch(shape, kw):
    torch = _torch()
    two_d = len(shape) == 4
    ours, theirs = (F.avg_pool2d, torch.nn.functional.avg_pool2d) if two_d else \
        (F.avg_pool1d, torch.nn.functional.avg_pool1d)
    x = np.random.default_rng(9).normal(size=shape)
    tx = torch.tensor(x, requires_grad=True)
    out = theirs(tx, **kw)
    cot = np.cos(np.arange(out.numel())).reshape(tuple(out.shape))
    (out * torch.tensor(cot)).sum().backward()
    np.testing.assert_allclose(ours(x, **kw), out.detach().numpy(), **TOL)
    np.testing.assert_allclose(wg.grad(lambda a: wnp.sum(ours(a, **kw) * cot))(x), tx.grad.numpy(), **TOL)
    layer = (nn.AvgPool2d if two_d else nn.AvgPool1d)(**{k: v for k, v in kw.items()})
    np.testing.assert_allclose(layer(x), out.detach().numpy(), **TOL)


# -- normalisation, recurrent and attention layers on odd settings ---------------------------------

def _normal(*shape, seed=10):
    return np.random.default_rng(seed + len(shape)).normal(size=shape)


_MHA_INPUTS = [_normal(3, 2, 4), _normal(5, 2, 4), _normal(5, 2, 4, seed=12)]
_PER_HEAD_MASK = np.arange(60).reshape(4, 3, 5) % 4 == 1
MODULES = {  # id -> (layer, constructor arguments, keyword arguments, inputs, train, call keywords, steps)
    "BatchNorm1d-momentum-None-3-steps":
        ("BatchNorm1d", (3,), dict(momentum=None), [_normal(4, 3)], True, {}, 3),
    "BatchNorm1d-batch1-length2":
        ("BatchNorm1d", (3,), dict(momentum=None), [_normal(1, 3, 2)], True, {}, 2),
    "BatchNorm2d-no-affine-train":
        ("BatchNorm2d", (2,), dict(affine=False, momentum=0.0), [_normal(1, 2, 1, 3)], True, {}, 2),
    "BatchNorm2d-no-running-stats-eval":
        ("BatchNorm2d", (2,), dict(track_running_stats=False), [_normal(2, 2, 3, 1)], False, {}, 1),
    "BatchNorm1d-eval-momentum-None":
        ("BatchNorm1d", (3,), dict(momentum=None, affine=False), [_normal(2, 3)], False, {}, 1),
    "LayerNorm-no-affine":
        ("LayerNorm", ((2, 3),), dict(elementwise_affine=False), [_normal(1, 2, 3)], True, {}, 1),
    "LayerNorm-no-bias-size1": ("LayerNorm", (1,), dict(bias=False), [_normal(4, 1)], True, {}, 1),
    "GroupNorm-no-affine-instance":
        ("GroupNorm", (2, 2), dict(affine=False), [_normal(1, 2, 3)], True, {}, 1),
    "GroupNorm-one-group-2d-input": ("GroupNorm", (1, 3), {}, [_normal(2, 3)], True, {}, 1),
    "LSTM-3layers-h0-c0-batch1-eval-dropout":
        ("LSTM", (2, 3), dict(num_layers=3, dropout=0.4),
         [_normal(4, 1, 2), (_normal(3, 1, 3), _normal(3, 1, 3, seed=11))], False, {}, 1),
    "LSTM-batch-first-no-bias-h0":
        ("LSTM", (2, 3), dict(num_layers=2, batch_first=True, bias=False),
         [_normal(2, 4, 2), (_normal(2, 2, 3), _normal(2, 2, 3, seed=11))], True, {}, 1),
    "GRU-3layers-batch-first-h0-eval-dropout":
        ("GRU", (2, 3), dict(num_layers=3, batch_first=True, dropout=0.5),
         [_normal(1, 4, 2), _normal(3, 1, 3)], False, {}, 1),
    "GRU-unbatched-h0-no-bias":
        ("GRU", (2, 1), dict(num_layers=2, bias=False), [_normal(3, 2), _normal(2, 1)], True, {}, 1),
    "LSTM-length1-hidden1": ("LSTM", (1, 1), dict(num_layers=2), [_normal(1, 1, 1)], True, {}, 1),
    "LSTM-bidirectional-3layers-h0-c0":
        ("LSTM", (2, 3), dict(num_layers=3, bidirectional=True),
         [_normal(4, 2, 2), (_normal(6, 2, 3), _normal(6, 2, 3, seed=11))], True, {}, 1),
    "LSTM-bidirectional-batch-first-batch1-no-bias":
        ("LSTM", (2, 3), dict(num_layers=2, bidirectional=True, batch_first=True, bias=False),
         [_normal(1, 4, 2)], True, {}, 1),
    "GRU-bidirectional-2layers-h0-eval-dropout":
        ("GRU", (2, 3), dict(num_layers=2, bidirectional=True, dropout=0.3),
         [_normal(4, 2, 2), _normal(4, 2, 3)], False, {}, 1),
    "GRU-bidirectional-unbatched-h0":
        ("GRU", (2, 3), dict(bidirectional=True), [_normal(5, 2), _normal(2, 3)], True, {}, 1),
    "MHA-float-key-padding-and-bool-attn":
        ("MultiheadAttention", (4, 2), {}, _MHA_INPUTS, True,
         dict(attn_mask=np.array([[0, 1, 0, 0, 1]] * 3, bool), key_padding_mask=_normal(2, 5)), 1),
    "MHA-3d-bool-mask-per-head":
        ("MultiheadAttention", (4, 2), dict(bias=False), _MHA_INPUTS, True,
         dict(attn_mask=_PER_HEAD_MASK, average_attn_weights=False), 1),
    "MHA-unbatched-bool-key-padding":
        ("MultiheadAttention", (4, 4), dict(batch_first=True), [_normal(3, 4), _normal(5, 4), _normal(5, 4)],
         True, dict(key_padding_mask=np.array([0, 0, 1, 0, 1], bool)), 1),
    "MHA-kdim-vdim-batch-first-no-bias":
        ("MultiheadAttention", (4, 2), dict(kdim=3, vdim=5, batch_first=True, bias=False),
         [_normal(2, 3, 4), _normal(2, 5, 3), _normal(2, 5, 5)], True,
         dict(key_padding_mask=np.array([[0, 0, 1, 0, 0], [1, 0, 0, 0, 0]], bool)), 1),
    "MHA-kdim-vdim-unbatched-float-mask":
        ("MultiheadAttention", (4, 4), dict(kdim=6, vdim=2), [_normal(3, 4), _normal(5, 6), _normal(5, 2)],
         True, dict(attn_mask=_normal(3, 5)), 1),
    "MHA-no-weights-eval-dropout":
        ("MultiheadAttention", (4, 1), dict(dropout=0.5), _MHA_INPUTS, False, dict(need_weights=False), 1),
}


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("case", list(MODULES))
def test_layer_on_odd_settings_matches_torch(case):
    """Outputs, gradients (inputs and parameters) and running statistics, step after step."""
    name, args, kwargs, inputs, train, call_kw, steps = MODULES[case]
    _compare_module(name, args, kwargs, inputs, train=train, call_kw=call_kw, steps=steps)


BCE = [{}, {"pos_weight": [0.5, 2.0, 3.0]}, {"weight": [[0.0], [1.0], [2.5], [0.3]]},
       {"weight": [[0.0], [1.0], [2.5], [0.3]], "pos_weight": [0.5, 2.0, 3.0]}]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kw", BCE, ids=["plain", "pos_weight", "weight", "both"])
def test_binary_cross_entropy_with_logits_weights_match_torch(kw, reduction):
    torch = _torch()
    rng = np.random.default_rng(11)
    x, t = rng.normal(size=(4, 3)) * 30, rng.random((4, 3))  # far in both tails
    kw = {k: np.asarray(v) for k, v in kw.items()}
    tx, tt = torch.tensor(x, requires_grad=True), torch.tensor(t, requires_grad=True)
    want = torch.nn.functional.binary_cross_entropy_with_logits(
        tx, tt, reduction=reduction, **{k: torch.tensor(v) for k, v in kw.items()})
    want.sum().backward()

    def loss(x, t):
        return nn.binary_cross_entropy_with_logits(x, t, reduction=reduction, **kw)

    np.testing.assert_allclose(loss(x, t), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    gx, gt = wg.grad(lambda x, t: wnp.sum(loss(x, t)), argnums=(0, 1))(x, t)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(gt, tt.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,kw", [
    ((1, 1, 3, 3), dict(kernel_size=(3, 1), stride=3, dilation=2)),
    ((2, 1, 5), dict(kernel_size=4, stride=3, dilation=2)),
    ((1, 1, 8, 2), dict(kernel_size=(4, 3), stride=(1, 3), padding=(1, 0))),
])
def test_max_pool_ceil_mode_window_past_the_padding_matches_torch(shape, kw):
    """ceil_mode's only window may reach past the input and its padding (it was refused as smaller
    than the kernel, which PyTorch accepts)."""
    torch = _torch()
    ours, theirs = (F.max_pool2d, torch.nn.functional.max_pool2d) if len(shape) == 4 else \
        (F.max_pool1d, torch.nn.functional.max_pool1d)
    x = np.random.default_rng(12).permutation(np.prod(shape)).reshape(shape) / 10.0
    tx = torch.tensor(x, requires_grad=True)
    out = theirs(tx, ceil_mode=True, **kw)
    cot = np.cos(np.arange(out.numel())).reshape(tuple(out.shape))
    (out * torch.tensor(cot)).sum().backward()
    np.testing.assert_allclose(ours(x, ceil_mode=True, **kw), out.detach().numpy(), **TOL)
    g = wg.grad(lambda a: wnp.sum(ours(a, ceil_mode=True, **kw) * cot))(x)
    np.testing.assert_allclose(g, tx.grad.numpy(), **TOL)
    with pytest.raises(ValueError, match="is smaller than the kernel"):
        ours(x, ceil_mode=False, **kw)


def test_dropout_takes_torchs_positional_inplace_not_as_a_seed():
    with pytest.raises(ValueError, match=r"Dropout: inplace=True is not supported .* give a seed as rng="):
        nn.Dropout(0.5, True)  # it became rng=True: the same mask sequence for every such layer
    x = np.ones((3, 4))
    np.testing.assert_array_equal(nn.Dropout(1.0)(x), np.zeros((3, 4)))  # PyTorch allows p=1
    np.testing.assert_array_equal(nn.Dropout(1.0).eval()(x), x)
    with pytest.raises(ValueError, match=r"Dropout: p must be in \[0, 1\], got 1.5"):
        nn.Dropout(1.5)


def test_square_linear_weights_from_torch_load_transposed_or_are_refused():
    torch = _torch()
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4)).double()
    wm = nn.Sequential(nn.Linear(4, 4, dtype=np.float64), nn.Tanh(), nn.Linear(4, 4, dtype=np.float64))
    x = np.random.default_rng(13).normal(size=(3, 4))
    wm.load_state_dict(tm.state_dict())  # torch tensors: PyTorch's layout, transposed
    np.testing.assert_allclose(wm(x).value, tm(torch.tensor(x)).detach().numpy(), **TOL)
    as_numpy = {k: v.numpy() for k, v in tm.state_dict().items()}
    with pytest.raises(ValueError, match=r"load_state_dict: the Linear weights \['0.weight', '2.weight'\] "
                                         r"are square, so their layout cannot be told: pass layout='torch'"):
        wm.load_state_dict(as_numpy)  # it was taken as wengert's: every weight silently transposed
    fresh = nn.Sequential(nn.Linear(4, 4, dtype=np.float64), nn.Tanh(), nn.Linear(4, 4, dtype=np.float64))
    fresh.load_state_dict(wm.state_dict())  # wengert's own state_dict() is known to be wengert's
    np.testing.assert_array_equal(fresh(x).value, wm(x).value)
    fresh.load_state_dict(wm.state_dict(layout="torch"))
    np.testing.assert_array_equal(fresh(x).value, wm(x).value)
    fresh.load_state_dict(as_numpy, layout="torch")
    np.testing.assert_array_equal(fresh(x).value, wm(x).value)


@st.composite
def _norm_case(draw):
    kind = draw(st.sampled_from(["BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm"]))
    n, c = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    if kind == "BatchNorm1d":
        shape = (n, c) + tuple(draw(st.lists(st.integers(1, 3), max_size=1)))
    elif kind == "BatchNorm2d":
        shape = (n, c, draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    else:
        shape = (n, c) + tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    if kind.startswith("BatchNorm"):
        if int(np.prod(shape)) // c < 2:  # PyTorch refuses one value per channel while training
            shape = (n + 1,) + shape[1:]
        kw = dict(momentum=draw(st.sampled_from([None, 0.0, 0.3, 1.0])), affine=draw(st.booleans()),
                  track_running_stats=draw(st.booleans()))
        return kind, (c,), kw, shape, draw(st.booleans()), draw(st.integers(1, 3))
    if kind == "LayerNorm":
        k = draw(st.integers(1, len(shape)))
        kw = dict(elementwise_affine=draw(st.booleans()), bias=draw(st.booleans()))
        return kind, (shape[len(shape) - k:],), kw, shape, True, 1
    groups = draw(st.sampled_from([g for g in (1, 2, 3) if c % g == 0]))
    if n * (c // groups) * int(np.prod(shape[2:])) == 1:  # PyTorch's group_norm refuses it (wengert gives 0)
        shape = (2,) + shape[1:]
    return kind, (groups, c), dict(affine=draw(st.booleans())), shape, True, 1


@settings(max_examples=25, deadline=None)
@given(_norm_case(), st.integers(0, 2 ** 16))
def test_normalisation_property_matches_torch(case, seed):
    """Random shapes (batch and channel 1 among them) and settings, train or eval, over several steps:
    outputs, gradients and running statistics as PyTorch's."""
    _torch()
    name, args, kw, shape, train, steps = case
    x = np.random.default_rng(seed).normal(size=shape)
    _compare_module(name, args, kw, [x], train=train, steps=steps, seed=seed % 100)
