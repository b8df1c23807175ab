"""Normalisation, recurrent and attention layers without PyTorch: NumPy references (Hypothesis over
shapes and values), finite differences to second order, buffers and ``state_dict``, train/eval,
``clip_grad_norm_``, and every error by its message."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert import nn
from wengert.nn import functional as F
from wengert.rules.recurrent import lstm_cell, lstm_sequence
from wengert.testing import check_grads

SETTINGS = settings(max_examples=25, deadline=None)


def _plain(x):
    return x.value if isinstance(x, wg.Tensor) else np.asarray(x)


# -- NumPy references ------------------------------------------------------------------------------

def np_norm(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def np_sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def np_lstm(proj, h, c, w_hh):
    H = h.shape[-1]
    out = []
    for t in range(proj.shape[0]):
        a = proj[t] + h @ w_hh.T
        i, f, g, o = np_sigmoid(a[..., :H]), np_sigmoid(a[..., H:2 * H]), np.tanh(a[..., 2 * H:3 * H]), \
            np_sigmoid(a[..., 3 * H:])
        c = f * c + i * g
        h = o * np.tanh(c)
        out.append(np.concatenate([h, c], axis=-1))
    return np.stack(out)


def np_gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    H = h.shape[-1]
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    r = np_sigmoid(gi[..., :H] + gh[..., :H])
    z = np_sigmoid(gi[..., H:2 * H] + gh[..., H:2 * H])
    n = np.tanh(gi[..., 2 * H:] + r * gh[..., 2 * H:])
    return (1 - z) * n + z * h


def np_attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ v


shapes = st.tuples(st.integers(2, 4), st.integers(1, 3), st.integers(1, 4))
seeds = st.integers(0, 2**16)


@SETTINGS
@given(shapes, seeds, st.sampled_from([1e-5, 1e-2]))
def test_norms_match_numpy(shape, seed, eps):
    rng = np.random.default_rng(seed)
    N, C, L = shape
    x = rng.normal(size=(N, 2 * C, L)) * 3 + 1
    w, b = rng.normal(size=2 * C), rng.normal(size=2 * C)
    want = np_norm(x, (0, 2), eps) * w[:, None] + b[:, None]
    np.testing.assert_allclose(F.batch_norm(x, None, None, w, b, training=True, eps=eps), want, rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(F.layer_norm(x, (2 * C, L), eps=eps), np_norm(x, (1, 2), eps), rtol=1e-10,
                               atol=1e-10)
    grouped = np_norm(x.reshape(N, 2, -1), (2,), eps).reshape(x.shape) * w[:, None] + b[:, None]
    np.testing.assert_allclose(F.group_norm(x, 2, w, b, eps=eps), grouped, rtol=1e-10, atol=1e-10)


@SETTINGS
@given(shapes, seeds)
def test_lstm_sequence_and_cell_match_numpy(shape, seed):
    L, B, H = shape
    rng = np.random.default_rng(seed)
    proj, h0, c0 = rng.normal(size=(L, B, 4 * H)), rng.normal(size=(B, H)), rng.normal(size=(B, H))
    w_hh = rng.normal(size=(4 * H, H))
    want = np_lstm(proj, h0, c0, w_hh)
    np.testing.assert_allclose(lstm_sequence(proj, h0, c0, w_hh), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lstm_cell(proj[0] + h0 @ w_hh.T, c0), want[0], rtol=1e-12, atol=1e-12)
    f32 = lstm_sequence(*(a.astype(np.float32) for a in (proj, h0, c0, w_hh)))
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, want, rtol=1e-4, atol=1e-4)


@SETTINGS
@given(shapes, seeds)
def test_gru_cell_and_attention_match_numpy(shape, seed):
    L, B, H = shape
    rng = np.random.default_rng(seed)
    cell = nn.GRUCell(L, H, dtype=np.float64, rng=seed)
    x, h = rng.normal(size=(B, L)), rng.normal(size=(B, H))
    want = np_gru_cell(x, h, *(p.value for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)))
    np.testing.assert_allclose(_plain(cell(x, h)), want, rtol=1e-12, atol=1e-12)
    q, k, v = rng.normal(size=(B, L, H)), rng.normal(size=(B, L + 1, H)), rng.normal(size=(B, L + 1, 2))
    mask = rng.random((L, L + 1)) < 0.6
    mask[:, 0] = True
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               np_attention(q, k, v, mask), rtol=1e-12, atol=1e-12)


# -- finite differences, to second order -----------------------------------------------------------

R = np.random.default_rng(7)


@pytest.mark.parametrize("name,fun,args", [
    ("batch_norm-train", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     (R.normal(size=(4, 3, 2)), R.normal(size=3), R.normal(size=3))),
    ("layer_norm", lambda x, w: F.layer_norm(x, (3,), w), (R.normal(size=(2, 3)), R.normal(size=3))),
    ("group_norm", lambda x: F.group_norm(x, 2), (R.normal(size=(2, 4, 2)),)),
    ("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     (R.normal(size=(3, 2)), R.normal(size=(3, 2)), R.normal(size=(3, 2)))),
    ("lstm_sequence", lstm_sequence, (R.normal(size=(3, 2, 4)), R.normal(size=(2, 1)), R.normal(size=(2, 1)),
                                      R.normal(size=(4, 1)))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_finite_differences(name, fun, args):
    check_grads(fun, *args)


def test_lstm_layer_gradients_match_composed_cells():
    """nn.LSTM (one lstm_sequence node per layer) against the same steps as LSTMCell calls."""
    lstm = nn.LSTM(3, 4, num_layers=1, dtype=np.float64, rng=0)
    cell = nn.LSTMCell(3, 4, dtype=np.float64)
    cell.load_state_dict({k[:-3]: v for k, v in lstm.state_dict().items()})
    x = np.random.default_rng(1).normal(size=(5, 2, 3))

    def by_layer(p):
        out, (h, c) = nn.functional_call(lstm, p, x)
        return wnp.sum(wnp.sin(out)) + wnp.sum(h * c)

    def by_cells(p):
        h = c = np.zeros((2, 4))
        total = 0.0
        for t in range(5):
            h, c = nn.functional_call(cell, {k[:-3]: v for k, v in p.items()}, (x[t], (h, c)))
            total = total + wnp.sum(wnp.sin(h))
        return total + wnp.sum(h * c)

    params = {k: p.value for k, p in lstm.named_parameters()}
    got, want = wg.grad(by_layer)(params), wg.grad(by_cells)(params)
    for k in params:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-13, err_msg=k)
    hvp = wg.jvp(wg.grad(by_layer), (params,), ({k: np.ones_like(v) for k, v in params.items()},))[1]
    hvp_cells = wg.jvp(wg.grad(by_cells), (params,), ({k: np.ones_like(v) for k, v in params.items()},))[1]
    for k in params:
        np.testing.assert_allclose(hvp[k], hvp_cells[k], rtol=1e-10, atol=1e-12, err_msg=k)


# -- buffers, state_dict, modes --------------------------------------------------------------------

def test_batch_norm_buffers_modes_and_state_dict():
    bn = nn.BatchNorm1d(3)
    assert [k for k in bn.state_dict()] == ["weight", "bias", "running_mean", "running_var",
                                           "num_batches_tracked"]
    assert [k for k, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    x = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32) * 2 + 5
    bn(x)
    np.testing.assert_allclose(bn.running_mean, 0.1 * x.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(bn.running_var, 0.9 + 0.1 * x.var(axis=0, ddof=1), rtol=1e-5)
    assert int(bn.num_batches_tracked) == 1
    model = nn.Sequential(nn.Linear(3, 3), bn)
    model.eval()
    assert not bn.training
    before = bn.running_mean.copy()
    y = _plain(model(x))
    np.testing.assert_array_equal(bn.running_mean, before)  # eval: no update
    lin = _plain(model[0](x))
    np.testing.assert_allclose(y, (lin - before) / np.sqrt(bn.running_var + 1e-5), rtol=1e-5, atol=1e-5)
    state = model.state_dict()
    fresh = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)).load_state_dict(state)
    np.testing.assert_array_equal(fresh[1].running_var, bn.running_var)
    assert fresh[1].running_var is not state["1.running_var"]


def test_running_statistics_are_not_differentiated_under_grad():
    bn = nn.BatchNorm1d(2, dtype=np.float64)
    x = np.random.default_rng(0).normal(size=(5, 2))
    g = wg.grad(lambda p, x: wnp.sum(nn.functional_call(bn, p, x) ** 3), argnums=1)(
        {k: p.value for k, p in bn.named_parameters()}, x)
    assert type(bn.running_mean) is np.ndarray and bn.num_batches_tracked == 1
    check_grads(lambda x: F.batch_norm(x, None, None, training=True) ** 3, x)
    assert g.shape == x.shape


def test_training_batch_norm_under_vmap_is_refused_eval_works():
    bn = nn.BatchNorm1d(2, dtype=np.float64)
    xs = np.random.default_rng(0).normal(size=(3, 4, 2))
    with pytest.raises(ValueError, match="batch_norm: training mode updates the running statistics, which "
                                         "cannot be done under wg.vmap"):
        wg.vmap(lambda x: bn(x))(xs)
    assert int(bn.num_batches_tracked) == 0
    bn.eval()
    out = wg.vmap(lambda x: bn(x))(xs)
    np.testing.assert_allclose(_plain(out), xs / np.sqrt(1 + 1e-5), rtol=1e-12)
    free = nn.BatchNorm1d(2, track_running_stats=False, dtype=np.float64)
    per_example = wg.vmap(lambda x: free(x))(xs)
    want = np.stack([np_norm(x, (0,), 1e-5) for x in xs])
    np.testing.assert_allclose(_plain(per_example), want, rtol=1e-10)


def test_load_state_dict_is_all_or_nothing_and_names_what_is_wrong():
    model = nn.Sequential(nn.LSTM(3, 4), nn.BatchNorm1d(4))
    state = model.state_dict()
    before = {k: v.copy() for k, v in state.items()}
    bad = dict(state)
    bad["0.weight_ih_l0"] = np.zeros((16, 3))  # fine
    bad["1.running_var"] = np.zeros(5)        # wrong: checked before anything is written
    with pytest.raises(ValueError, match=r"BatchNorm1d '1', key '1.running_var': expected shape \(4,\), "
                                         r"given \(5,\)"):
        model.load_state_dict(bad)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    partial = {k: v for k, v in state.items() if k != "1.num_batches_tracked"}
    with pytest.raises(KeyError, match=r"missing keys \['1.num_batches_tracked'\], "
                                       r"unexpected keys \['extra'\]"):
        model.load_state_dict({**partial, "extra": 1})
    model.load_state_dict({"1.running_mean": np.ones(4)}, strict=False)
    np.testing.assert_array_equal(model[1].running_mean, np.ones(4))
    with pytest.raises(ValueError, match="layout must be 'auto', 'wengert' or 'torch'"):
        model.load_state_dict(state, layout="jax")


def test_square_linear_needs_the_layout_said():
    a = nn.Linear(3, 3, rng=0)
    torch_like = {"weight": a.weight.value.T.copy(), "bias": a.bias.value.copy()}
    b = nn.Linear(3, 3, rng=1).load_state_dict(torch_like, layout="torch")
    np.testing.assert_array_equal(b.weight.value, a.weight.value)
    assert b.state_dict(layout="torch")["weight"].tolist() == torch_like["weight"].tolist()


def test_clip_grad_norm_scales_in_place_and_returns_the_norm():
    model = nn.Sequential(nn.Linear(3, 4, dtype=np.float64), nn.Linear(4, 2, dtype=np.float64))
    x = np.random.default_rng(0).normal(size=(5, 3))
    wnp.sum(model(x) ** 2).backward()
    grads = [p.grad.value.copy() for p in model.parameters()]
    total = np.sqrt(sum(float((g ** 2).sum()) for g in grads))
    got = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    assert np.isclose(got, total)
    for p, g in zip(model.parameters(), grads):
        np.testing.assert_allclose(p.grad.value, g * 0.5 / (total + 1e-6))
    assert np.isclose(nn.utils.clip_grad_norm_(model.parameters(), 100.0, norm_type="inf"),
                      max(np.abs(g).max() for g in grads) * 0.5 / (total + 1e-6))
    emb = nn.Embedding(5, 2, dtype=np.float64)
    wnp.sum(emb(np.array([1, 1, 3])) * 10.0).backward()
    norm = nn.utils.clip_grad_norm_([emb.weight], 1.0)
    assert np.isclose(norm, np.sqrt(2 * 20.0 ** 2 + 2 * 10.0 ** 2))
    assert np.isclose(np.sqrt((emb.weight.grad.value ** 2).sum()), 1.0, rtol=1e-5)


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    grads = [rng.normal(size=(3, 2)), rng.normal(size=4)]
    for norm_type in (2.0, 1.0, float("inf")):
        ps = [nn.Parameter(np.zeros_like(g)) for g in grads]
        for p, g in zip(ps, grads):
            p._accumulate_grad(g)
        tps = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
        for p, g in zip(tps, grads):
            p.grad = torch.tensor(g)
        want = torch.nn.utils.clip_grad_norm_(tps, 0.7, norm_type=norm_type)
        got = nn.utils.clip_grad_norm_(ps, 0.7, norm_type=norm_type)
        assert np.isclose(got, float(want), rtol=1e-12)
        for p, t in zip(ps, tps):
            np.testing.assert_allclose(p.grad.value, t.grad.numpy(), rtol=1e-12)


# -- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("layer,x,message", [
    (nn.BatchNorm2d(3), np.zeros((2, 3, 4)), r"BatchNorm2d: expected 4-D input \(N, C, H, W\), got input of "
                                             r"shape \(2, 3, 4\)"),
    (nn.BatchNorm1d(3), np.zeros((2, 4)), r"BatchNorm1d\(3\): input has 4 channels on axis 1 \(shape "
                                          r"\(2, 4\)\), expected 3"),
    (nn.LayerNorm(5), np.zeros((2, 4)), r"LayerNorm\(\(5,\)\): input of shape \(2, 4\) must end in \(5,\)"),
    (nn.GroupNorm(2, 4), np.zeros((2, 3, 5)), r"GroupNorm\(2, 4\): expected input \(N, 4, \*\), got shape"),
    (nn.LSTMCell(3, 4), np.zeros((2, 5)), r"LSTMCell\(3, 4\): expected input of shape \(batch, 3\) or "
                                          r"\(3,\), got \(2, 5\)"),
    (nn.LSTM(3, 4), np.zeros((2, 5, 2)), r"LSTM\(3, 4\): expected input of shape \(L, N, 3\) or \(L, 3\), "
                                         r"got \(2, 5, 2\)"),
    (nn.Flatten(2, 1), np.zeros((2, 3)), r"Flatten\(start_dim=2, end_dim=1\): input of shape \(2, 3\) has "
                                         r"no such range"),
])
def test_bad_input_names_the_layer_and_shapes(layer, x, message):
    with pytest.raises(ValueError, match=message):
        layer(x)


def test_more_bad_input():
    with pytest.raises(ValueError, match=r"LSTMCell: c must have shape \(2, 4\) for input of shape \(2, 3\), "
                                         r"got \(2, 5\)"):
        nn.LSTMCell(3, 4)(np.zeros((2, 3)), (np.zeros((2, 4)), np.zeros((2, 5))))
    with pytest.raises(ValueError, match=r"GRU: initial state must have shape \(2, 5, 4\), got \(1, 5, 4\)"):
        nn.GRU(3, 4, num_layers=2)(np.zeros((6, 5, 3)), np.zeros((1, 5, 4)))
    with pytest.raises(ValueError, match=r"LSTM: initial state must have shape \(4, 5, 4\), got \(2, 5, 4\)"):
        nn.LSTM(3, 4, num_layers=2, bidirectional=True)(np.zeros((6, 5, 3)), (np.zeros((2, 5, 4)),) * 2)
    with pytest.raises(ValueError, match="embed_dim=6 must be divisible by num_heads=4"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(2, 3\), got \(3,\)"):
        nn.MultiheadAttention(4, 2)(np.zeros((5, 2, 4)), np.zeros((3, 2, 4)), np.zeros((3, 2, 4)),
                                    key_padding_mask=np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="batch_norm: expected more than 1 value per channel when training"):
        nn.BatchNorm1d(3)(np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"lstm_cell: gates must have shape \(..., 4\*H\) and the cell state "
                                         r"\(..., H\); got gates of shape \(2, 7\)"):
        lstm_cell(np.zeros((2, 7)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="give attn_mask or is_causal=True, not both"):
        F.scaled_dot_product_attention(np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((2, 2)),
                                       attn_mask=np.ones((2, 2), bool), is_causal=True)


def test_layers_flatten_softmax_and_unbatched_sequences():
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    assert _plain(nn.Flatten()(x)).shape == (2, 12) and _plain(nn.Flatten(0, 1)(x)).shape == (6, 4)
    np.testing.assert_allclose(_plain(nn.Softmax(dim=1)(x)).sum(axis=1), 1.0)
    np.testing.assert_allclose(np.exp(_plain(nn.LogSoftmax(dim=-1)(x))).sum(axis=-1), 1.0)
    lstm = nn.LSTM(4, 5, num_layers=2, dtype=np.float64)
    out, (h, c) = lstm(x[0])
    out_b, (h_b, c_b) = lstm(x[0][:, None])
    assert _plain(out).shape == (3, 5) and _plain(h).shape == (2, 5)
    np.testing.assert_allclose(_plain(out), _plain(out_b)[:, 0], rtol=1e-12)
    np.testing.assert_allclose(_plain(c), _plain(c_b)[:, 0], rtol=1e-12)


def test_lstm_first_order_fast_path_equals_the_differentiable_rule():
    """The first backward pass uses the kept activations (plain NumPy); a second one through the
    same graph recomputes them with the differentiable rule: the gradients agree."""
    lstm = nn.LSTM(3, 4, dtype=np.float64, rng=2)
    x = np.random.default_rng(1).normal(size=(6, 2, 3))
    out, (h, c) = lstm(x)
    loss = wnp.sum(wnp.sin(out)) + wnp.sum(h * c)
    loss.backward(retain_graph=True)
    first = {k: p.grad.value.copy() for k, p in lstm.named_parameters()}
    loss.backward()
    for k, p in lstm.named_parameters():
        np.testing.assert_allclose(p.grad.value, 2 * first[k], rtol=1e-12, atol=1e-14, err_msg=k)
