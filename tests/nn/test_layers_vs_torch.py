"""Every layer of issue 31 (normalisation, recurrent, attention, Flatten/Softmax/LogSoftmax) against
PyTorch's same layer with the same weights, loaded with ``load_state_dict`` from PyTorch's own
``state_dict``: values, and gradients with respect to the inputs and every parameter, in float32
and float64; per-example gradients under ``wg.vmap`` and gradients through ``wg.checkpoint``.
PyTorch is imported inside each test (CI runs these files without it)."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert import nn
from wengert.api.tree import tree_flatten

# name -> (torch constructor, wengert constructor, input shapes, call keyword arguments, train mode)
CASES = {
    "BatchNorm1d-2d-train": ("BatchNorm1d", (3,), {}, [(5, 3)], True),
    "BatchNorm1d-3d-train": ("BatchNorm1d", (3,), {}, [(4, 3, 5)], True),
    "BatchNorm1d-eval": ("BatchNorm1d", (3,), {}, [(4, 3, 5)], False),
    "BatchNorm2d-train": ("BatchNorm2d", (3,), {"momentum": 0.3}, [(4, 3, 2, 3)], True),
    "BatchNorm2d-eval": ("BatchNorm2d", (3,), {}, [(4, 3, 2, 3)], False),
    "BatchNorm1d-no-affine": ("BatchNorm1d", (3,), {"affine": False}, [(6, 3)], True),
    "LayerNorm": ("LayerNorm", ((5,),), {}, [(4, 3, 5)], True),
    "LayerNorm-2axes": ("LayerNorm", ([3, 5],), {"eps": 1e-3}, [(4, 3, 5)], True),
    "GroupNorm": ("GroupNorm", (2, 4), {}, [(3, 4, 5)], True),
    "RNNCell": ("RNNCell", (3, 4), {}, [(5, 3), (5, 4)], True),
    "RNNCell-relu": ("RNNCell", (3, 4), {"nonlinearity": "relu"}, [(5, 3), (5, 4)], True),
    "LSTMCell": ("LSTMCell", (3, 4), {}, [(5, 3), (5, 4), (5, 4)], True),
    "GRUCell": ("GRUCell", (3, 4), {}, [(5, 3), (5, 4)], True),
    "GRUCell-unbatched": ("GRUCell", (3, 4), {}, [(3,)], True),
    "LSTM": ("LSTM", (3, 4), {}, [(6, 2, 3)], True),
    "LSTM-2layers-batch-first": ("LSTM", (3, 4), {"num_layers": 2, "batch_first": True},
                                 [(2, 6, 3), (2, 2, 4), (2, 2, 4)], True),
    "LSTM-unbatched-no-bias": ("LSTM", (3, 4), {"bias": False}, [(5, 3)], True),
    "GRU": ("GRU", (3, 4), {"num_layers": 2}, [(6, 2, 3), (2, 2, 4)], True),
    "GRU-batch-first": ("GRU", (3, 4), {"batch_first": True}, [(2, 6, 3)], True),
    "MultiheadAttention": ("MultiheadAttention", (8, 2), {}, [(5, 3, 8), (4, 3, 8), (4, 3, 8)], True),
    "MultiheadAttention-batch-first": ("MultiheadAttention", (8, 4), {"batch_first": True},
                                       [(3, 5, 8), (3, 5, 8), (3, 5, 8)], True),
    "Flatten": ("Flatten", (), {}, [(2, 3, 4)], True),
    "Softmax": ("Softmax", (1,), {}, [(2, 3, 4)], True),
    "LogSoftmax": ("LogSoftmax", (-1,), {}, [(2, 3, 4)], True),
}

DTYPES = {"float32": (np.float32, 2e-4), "float64": (np.float64, 1e-10)}


def _plain(x):
    return x.value if isinstance(x, wg.Tensor) else np.asarray(x)


def _torch():
    return pytest.importorskip("torch")


def _build(name, args, kwargs, dtype, train, seed=0):
    """(torch module, wengert module) with the same random weights (and running statistics)."""
    torch = _torch()
    torch.manual_seed(seed)
    tm = getattr(torch.nn, name)(*args, **kwargs).to(torch.float64 if dtype == np.float64 else torch.float32)
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for key, t in tm.state_dict().items():
            if t.is_floating_point():
                value = rng.uniform(0.5, 1.5, t.shape) if "running_var" in key \
                    else rng.normal(0, 0.5, t.shape)
                t.copy_(torch.from_numpy(value))
    tm.train(train)
    wm = getattr(nn, name)(*args, **{**kwargs, **_dtype_kw(name, dtype)})
    wm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    wm.train(train)
    return tm, wm


def _dtype_kw(name, dtype):
    return {} if name in ("Flatten", "Softmax", "LogSoftmax") else {"dtype": dtype}


def _inputs(name, shapes, dtype, seed=1):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=s).astype(dtype) for s in shapes]
    if name in ("LSTM", "GRU") and len(xs) > 1:  # (x, h0) or (x, (h0, c0))
        return [xs[0], xs[1] if len(xs) == 2 else (xs[1], xs[2])]
    if name == "LSTMCell" and len(xs) == 3:
        return [xs[0], (xs[1], xs[2])]
    return xs


def _weights_for(outputs, seed=2):
    rng = np.random.default_rng(seed)
    return [None if leaf is None else rng.normal(size=np.shape(leaf)) for leaf in outputs]


def _torch_leaves(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _torch_leaves(o)]
    return [out]


def _torch_run(tm, inputs, dtype):
    torch = _torch()

    def conv(x):
        if isinstance(x, tuple):
            return tuple(conv(a) for a in x)
        return torch.tensor(x, requires_grad=True)

    ts = [conv(x) for x in inputs]
    out = _torch_leaves(tm(*ts))
    weights = _weights_for([o.detach().numpy() if o is not None else None for o in out])
    loss = sum((o * torch.tensor(w, dtype=o.dtype)).sum() for o, w in zip(out, weights) if o is not None)
    loss.backward()
    grads_in = [t.grad.numpy() for t in _torch_leaves(ts)]
    grads_p = {k: p.grad.numpy() for k, p in tm.named_parameters()}
    return [o.detach().numpy() if o is not None else None for o in out], weights, grads_in, grads_p


def _wg_loss(wm, weights):
    def loss(params, *inputs):
        out = nn.functional_call(wm, params, inputs)
        leaves = [o for o in tree_flatten(out)[0]] if isinstance(out, tuple) else [out]
        return sum(wnp.sum(o * w.astype(np.result_type(o))) for o, w in zip(leaves, weights) if w is not None)
    return loss


def _params(wm):
    return {k: p.value for k, p in wm.named_parameters()}


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_layer_matches_torch_values_and_gradients(case, dtype_name):
    torch = _torch()
    name, args, kwargs, shapes, train = CASES[case]
    dtype, tol = DTYPES[dtype_name]
    tm, wm = _build(name, args, kwargs, dtype, train)
    inputs = _inputs(name, shapes, dtype)
    t_out, weights, t_gin, t_gp = _torch_run(tm, inputs, dtype)

    w_out = wm(*inputs)
    w_leaves = tree_flatten(w_out)[0] if isinstance(w_out, tuple) else [w_out]
    for got, want in zip(w_leaves, [o for o in t_out if o is not None]):
        assert _plain(got).dtype == dtype
        np.testing.assert_allclose(_plain(got), want, rtol=tol, atol=tol)
    for key, value in tm.state_dict().items():  # running statistics updated as PyTorch's
        if "running" in key or "num_batches" in key:
            np.testing.assert_allclose(wm.state_dict()[key], value.numpy(), rtol=tol, atol=tol)

    _, wm2 = _build(name, args, kwargs, dtype, train)
    params = _params(wm2)
    n_in = len(tree_flatten(tuple(inputs))[0])
    argnums = tuple(range(1 + len(inputs)))
    g_params, *g_inputs = wg.grad(_wg_loss(wm2, weights), argnums=argnums)(params, *inputs)
    g_inputs = tree_flatten(tuple(g_inputs))[0]
    assert len(g_inputs) == n_in
    for got, want in zip(g_inputs, t_gin):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol * 10, atol=tol * 10)
    assert sorted(g_params) == sorted(t_gp)
    for key, want in t_gp.items():
        assert g_params[key].dtype == dtype, key
        np.testing.assert_allclose(g_params[key], want, rtol=tol * 10, atol=tol * 10, err_msg=key)
    del torch


VMAP_CASES = ["BatchNorm1d-eval", "LayerNorm", "GroupNorm", "RNNCell", "LSTMCell", "GRUCell", "LSTM",
              "GRU-batch-first", "MultiheadAttention-batch-first"]


def _one_example(name, kwargs, x):
    """The first input as a batch of one (batch axis 1 for sequence-first recurrent layers)."""
    axis = 1 if name in ("LSTM", "GRU", "MultiheadAttention") and not kwargs.get("batch_first") else 0
    return axis


@pytest.mark.parametrize("case", VMAP_CASES)
def test_per_example_gradients_under_vmap_match_torch(case):
    torch = _torch()
    name, args, kwargs, shapes, train = CASES[case]
    dtype = np.float64
    tm, wm = _build(name, args, kwargs, dtype, train)
    x = _inputs(name, shapes[:1], dtype)[0]
    axis = _one_example(name, kwargs, x)
    extra = [] if name != "MultiheadAttention" else None
    weights = _weights_for([np.expand_dims(np.take(x, 0, axis), axis)] if name in ("Softmax", "Flatten")
                           else [None])

    def loss(params, xi):
        xb = wnp.expand_dims(xi, axis)
        if name == "MultiheadAttention":
            out = nn.functional_call(wm, params, (xb, xb, xb))[0]
        else:
            out = nn.functional_call(wm, params, (xb,))
        out = out[0] if isinstance(out, tuple) else out
        return wnp.sum(wnp.tanh(out))

    per_example = wg.vmap(wg.grad(loss), in_axes=(None, axis))(_params(wm), x)
    for i in range(np.shape(x)[axis]):
        tm.zero_grad()
        xb = torch.tensor(np.expand_dims(np.take(x, i, axis), axis))
        out = tm(xb, xb, xb)[0] if name == "MultiheadAttention" else tm(xb)
        out = out[0] if isinstance(out, tuple) else out
        torch.tanh(out).sum().backward()
        for key, p in tm.named_parameters():
            np.testing.assert_allclose(per_example[key][i], p.grad.numpy(), rtol=1e-9, atol=1e-11,
                                       err_msg=key)
    del extra, weights


@pytest.mark.parametrize("case", ["BatchNorm2d-train", "LayerNorm", "LSTM-2layers-batch-first", "GRU",
                                  "MultiheadAttention", "LSTMCell"])
def test_gradients_through_checkpoint_match_torch(case):
    name, args, kwargs, shapes, train = CASES[case]
    dtype = np.float64
    tm, wm = _build(name, args, kwargs, dtype, train)
    inputs = _inputs(name, shapes, dtype)
    _, weights, t_gin, t_gp = _torch_run(tm, inputs, dtype)
    _, wm2 = _build(name, args, kwargs, dtype, train)
    block = wg.checkpoint(_wg_loss(wm2, weights))
    g_params, g_x = wg.grad(block, argnums=(0, 1))(_params(wm2), *inputs)
    np.testing.assert_allclose(tree_flatten(g_x)[0][0], t_gin[0], rtol=1e-9, atol=1e-11)
    for key, want in t_gp.items():
        np.testing.assert_allclose(g_params[key], want, rtol=1e-9, atol=1e-11, err_msg=key)


def test_multihead_attention_masks_match_torch():
    torch = _torch()
    tm, wm = _build("MultiheadAttention", (8, 2), {"batch_first": True}, np.float64, True)
    rng = np.random.default_rng(3)
    q, kv = rng.normal(size=(3, 4, 8)), rng.normal(size=(3, 5, 8))
    attn_mask = rng.random((4, 5)) < 0.3
    attn_mask[:, 0] = False
    padding = np.zeros((3, 5), dtype=bool)
    padding[1, 3:] = True
    float_mask = rng.normal(size=(6, 4, 5))
    for kw in ({"attn_mask": attn_mask}, {"key_padding_mask": padding},
               {"attn_mask": attn_mask, "key_padding_mask": padding, "average_attn_weights": False},
               {"attn_mask": float_mask}):
        t_out, t_w = tm(torch.tensor(q), torch.tensor(kv), torch.tensor(kv),
                        **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
        w_out, w_w = wm(q, kv, kv, **kw)
        np.testing.assert_allclose(_plain(w_out), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(_plain(w_w), t_w.detach().numpy(), rtol=1e-10, atol=1e-12)
    out, weights = wm(q, kv, kv, need_weights=False)
    assert weights is None


def test_functional_forms_match_torch():
    torch = _torch()
    TF = torch.nn.functional
    F = nn.functional
    rng = np.random.default_rng(4)
    x, w, b = rng.normal(size=(4, 3, 5)), rng.normal(size=3), rng.normal(size=3)
    rm, rv = rng.normal(size=3), rng.uniform(0.5, 2, size=3)
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    for training in (True, False):
        got = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.2, eps=1e-4)
        want = TF.batch_norm(torch.tensor(x), trm, trv, torch.tensor(w), torch.tensor(b), training=training,
                             momentum=0.2, eps=1e-4)
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rm, trm.numpy(), rtol=1e-12)
        np.testing.assert_allclose(rv, trv.numpy(), rtol=1e-12)
    np.testing.assert_allclose(F.layer_norm(x, (3, 5)), TF.layer_norm(torch.tensor(x), (3, 5)).numpy(),
                               rtol=1e-12, atol=1e-12)
    want = TF.group_norm(torch.tensor(x), 3, torch.tensor(w), torch.tensor(b)).numpy()
    np.testing.assert_allclose(F.group_norm(x, 3, w, b), want, rtol=1e-12, atol=1e-12)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 6))
    mask = rng.random((3, 5)) > 0.3
    mask[:, 0] = True
    for kw in ({}, {"attn_mask": mask}, {"attn_mask": rng.normal(size=(3, 5))}, {"scale": 0.3}):
        got = F.scaled_dot_product_attention(q, k, v, **kw)
        want = TF.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)),
                                               **{a: torch.tensor(m) if isinstance(m, np.ndarray) else m
                                                  for a, m in kw.items()})
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)
    qc = rng.normal(size=(2, 5, 4))
    want = TF.scaled_dot_product_attention(*map(torch.tensor, (qc, k, v)), is_causal=True).numpy()
    np.testing.assert_allclose(F.scaled_dot_product_attention(qc, k, v, is_causal=True), want,
                               rtol=1e-12, atol=1e-12)


def test_linear_loads_torch_state_dict_transposed_and_saves_it_back():
    torch = _torch()
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 5),
                             torch.nn.LayerNorm(5)).double()
    wm = nn.Sequential(nn.Linear(3, 5, dtype=np.float64), nn.ReLU(), nn.Linear(5, 5, dtype=np.float64),
                       nn.LayerNorm(5, dtype=np.float64))
    state = {k: v.numpy() for k, v in tm.state_dict().items()}
    wm.load_state_dict(state)  # the (5, 3) weight shows it is PyTorch's layout: both are transposed
    x = np.random.default_rng(0).normal(size=(4, 3))
    np.testing.assert_allclose(wm(x).value, tm(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    back = wm.state_dict(layout="torch")
    assert list(back) == list(state)
    for k in state:
        np.testing.assert_array_equal(back[k], state[k])
    tm.load_state_dict({k: torch.from_numpy(v) for k, v in back.items()})
