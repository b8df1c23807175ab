"""An optimiser's step, and ``Module.load_state_dict``, write parameters in place: a backward pass
through a graph that saved a parameter's old value (``backward(retain_graph=True)``, step, then
``backward()`` again: the GAN pattern) must refuse, as PyTorch's version counters make it, instead of
differentiating at the new values. Where PyTorch does not refuse (the graph did not save the
parameter), the gradient is the forward pass's. Every case is run side by side with PyTorch."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert import nn, optim

P0 = np.array([0.5, -1.0, 2.0])
C = np.array([1.5, -0.5, 0.25])
W = np.array([[1.0, 2.0], [0.5, -1.0], [0.0, 3.0]])

OPTIMISERS = {
    "sgd": ("SGD", dict(lr=0.1)),
    "sgd-momentum": ("SGD", dict(lr=0.1, momentum=0.9)),
    "sgd-dampening": ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.3)),
    "sgd-nesterov": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    "sgd-weight-decay": ("SGD", dict(lr=0.1, weight_decay=0.01)),
    "adam": ("Adam", dict(lr=0.1)),
    "adam-weight-decay": ("Adam", dict(lr=0.1, weight_decay=0.01)),
    "adamw": ("AdamW", dict(lr=0.1)),
}

LOSSES = {  # name: the loss of a parameter p, written once for both libraries (xp: the numpy module)
    "p*p (saves p)": lambda p, xp, c, w: (p * p).sum(),
    "sin(p) (saves p)": lambda p, xp, c, w: xp.sin(p).sum(),
    "exp(p) (saves its output)": lambda p, xp, c, w: xp.exp(p).sum(),
    "p*c (saves c only)": lambda p, xp, c, w: (p * c).sum(),
    "p@W (saves W only)": lambda p, xp, c, w: (p @ w).sum(),
    "sum(p) (saves nothing)": lambda p, xp, c, w: p.sum(),
    "tanh(p)*p (saves both)": lambda p, xp, c, w: (xp.tanh(p) * p).sum(),
}


def _twice(backward_twice):
    """``(gradient, None)``, or ``(None, the RuntimeError raised)``."""
    try:
        return backward_twice(), None
    except RuntimeError as e:
        return None, e


def _wengert(opt_name, kw, loss_fn):
    p = wg.tensor(P0.copy(), requires_grad=True)
    opt = getattr(optim, opt_name)([p], **kw)

    def run():
        loss = loss_fn(p, wnp, C, W)
        loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad()
        loss.backward()
        return np.array(p.grad.value)

    return _twice(run)


def _torch(opt_name, kw, loss_fn):
    torch = pytest.importorskip("torch")
    p = torch.tensor(P0.copy(), requires_grad=True)
    opt = getattr(torch.optim, opt_name)([p], **kw)

    def run():
        loss = loss_fn(p, torch, torch.tensor(C), torch.tensor(W))
        loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad()
        loss.backward()
        return p.grad.detach().numpy().copy()

    return _twice(run)


@pytest.mark.parametrize("loss_name", list(LOSSES))
@pytest.mark.parametrize("opt_key", list(OPTIMISERS))
def test_a_step_between_two_backward_passes_matches_pytorch(opt_key, loss_name):
    torch_grad, torch_error = _torch(*OPTIMISERS[opt_key], LOSSES[loss_name])
    grad, error = _wengert(*OPTIMISERS[opt_key], LOSSES[loss_name])
    if torch_error is not None:
        assert error is not None, f"PyTorch refuses ({torch_error}); wengert gave {grad}"
        assert "modified by an in-place operation" in str(error)
        assert f"{OPTIMISERS[opt_key][0]}.step()" in str(error)  # the write is named
    else:
        assert error is None, f"PyTorch gives {torch_grad}; wengert refused: {error}"
        np.testing.assert_allclose(grad, torch_grad, rtol=1e-12)


@pytest.mark.parametrize("opt_key", list(OPTIMISERS))
def test_a_step_before_the_forward_pass_is_no_error(opt_key):
    """The ordinary training loop: the write happened before the graph was recorded."""
    name, kw = OPTIMISERS[opt_key]
    p = wg.tensor(P0.copy(), requires_grad=True)
    opt = getattr(optim, name)([p], **kw)
    for _ in range(3):
        at = p.value.copy()
        opt.zero_grad()
        loss = (wnp.sin(p) * p).sum()
        loss.backward()
        np.testing.assert_allclose(p.grad.value, np.sin(at) + at * np.cos(at), rtol=1e-14)
        opt.step()
        assert not np.array_equal(p.value, at)


def test_gan_pattern_two_models_two_optimisers():
    """The discriminator steps, then the generator's loss -- through the discriminator's old weights --
    is differentiated: refused in both libraries, naming the step."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    Wg, Wd, z = rng.standard_normal((3, 4)), rng.standard_normal((4, 1)), rng.standard_normal((5, 3))

    def run(lib, tensor, sigmoid, opt_cls):
        g = tensor(Wg.copy())
        d = tensor(Wd.copy())
        opt_d, opt_g = opt_cls([d], lr=0.01), opt_cls([g], lr=0.01)
        fake = lib.tanh(tensor(z, grad=False) @ g)
        score = sigmoid(fake @ d)
        loss_d = (score * score).mean()
        loss_g = ((1 - score) * (1 - score)).mean()
        loss_d.backward(retain_graph=True)
        opt_d.step()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()

    def torch_tensor(a, grad=True):
        return torch.tensor(a, requires_grad=grad)

    def wg_tensor(a, grad=True):
        return wg.tensor(a, requires_grad=grad)

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(torch, torch_tensor, torch.sigmoid, torch.optim.Adam)
    with pytest.raises(RuntimeError, match=r"modified by an in-place operation \(Adam.step\(\)"):
        run(wnp, wg_tensor, lambda v: 1 / (1 + wnp.exp(-v)), optim.Adam)


def test_load_state_dict_between_two_backward_passes():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4, 3)).astype(np.float32)

    model = nn.MLP([3, 5, 2], rng=0)
    saved = {k: v + 1.0 for k, v in model.state_dict().items()}
    loss = (model(X) ** 2).sum()
    loss.backward(retain_graph=True)
    model.load_state_dict(saved)
    with pytest.raises(RuntimeError, match="load_state_dict into"):
        loss.backward()

    tm = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    tsaved = {k: v + 1.0 for k, v in tm.state_dict().items()}
    tloss = (tm(torch.tensor(X)) ** 2).sum()
    tloss.backward(retain_graph=True)
    tm.load_state_dict(tsaved)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tloss.backward()


def test_load_state_dict_before_the_forward_pass_is_no_error():
    model = nn.MLP([3, 5, 2], rng=0)
    model.load_state_dict({k: v * 0.5 for k, v in model.state_dict().items()})
    loss = (model(np.ones((2, 3), dtype=np.float32)) ** 2).sum()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_a_python_float_parameter_keeps_the_forward_value():
    """A 0-d parameter held as a Python float is rebound by the step, not written: the graph keeps the
    old float, and the second pass gives the forward pass's gradient (PyTorch's 0-d tensor would
    refuse instead: either is allowed, a gradient at the new value is not)."""
    p = wg.tensor(0.5, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    loss = wnp.sin(p) * p
    loss.backward(retain_graph=True)
    first = float(p.grad.value)
    opt.step()
    opt.zero_grad()
    loss.backward()
    assert float(p.grad.value) == first == pytest.approx(np.cos(0.5) * 0.5 + np.sin(0.5))
    assert p.value == pytest.approx(0.5 - 0.1 * first)
