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
