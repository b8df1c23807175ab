"""wengert.optim against PyTorch's documented update rules: hand-computed steps, and an independent
NumPy transcription of the pseudo-code in torch.optim's documentation run side by side."""

import math

import numpy as np
import pytest

import wengert as wg
from wengert import nn, optim

rng = np.random.default_rng(3)


def param(value):
    return nn.Parameter(np.array(value, dtype=np.float64))


def run(opt_cls, grads, p0, **kw):
    """Apply ``opt_cls`` to one parameter starting at p0 with the given gradient sequence."""
    p = param(p0)
    opt = opt_cls([p], **kw)
    for g in grads:
        opt.zero_grad()
        p.grad = np.array(g, dtype=np.float64)
        opt.step()
    return p.value


# -- hand-computed steps (scalars written as 1-element arrays) -----------------------------------

def test_sgd_by_hand():
    assert run(optim.SGD, [[1.0]], [1.0], lr=0.1) == pytest.approx(0.9)
    # momentum 0.9: b1 = 1, p = 0.9; b2 = 0.9 + 1 = 1.9, p = 0.9 - 0.19
    assert run(optim.SGD, [[1.0], [1.0]], [1.0], lr=0.1, momentum=0.9) == pytest.approx(0.71)
    # Nesterov: g1 = 1 + 0.9 * 1 = 1.9 -> 0.81; b2 = 1.9, g2 = 1 + 0.9 * 1.9 = 2.71 -> 0.539
    assert run(optim.SGD, [[1.0], [1.0]], [1.0], lr=0.1, momentum=0.9, nesterov=True) == pytest.approx(0.539)
    # weight decay 0.5 at p = 2: g = 1 + 1 = 2 -> 2 - 0.2
    assert run(optim.SGD, [[1.0]], [2.0], lr=0.1, weight_decay=0.5) == pytest.approx(1.8)
    # dampening 0.5: b1 = g = 1 (no dampening at the first step); b2 = 0.9 + 0.5 * 1 = 1.4
    assert run(optim.SGD, [[1.0], [1.0]], [1.0], lr=0.1, momentum=0.9, dampening=0.5) == pytest.approx(0.76)


def test_adam_and_adamw_by_hand():
    # first step: m_hat = g, v_hat = g^2, so p -= lr * g / (|g| + eps)
    assert run(optim.Adam, [[0.5]], [1.0], lr=0.1) == pytest.approx(1.0 - 0.1 * 0.5 / (0.5 + 1e-8), abs=1e-15)
    # second step with g = 0.5 then -1: m = 0.1*0.9*0.5 ... computed term by term
    b1, b2, lr = 0.9, 0.999, 0.1
    m1, v1 = 0.05, 0.00025
    p1 = 1.0 - lr * (m1 / (1 - b1)) / (math.sqrt(v1 / (1 - b2)) + 1e-8)
    m2, v2 = b1 * m1 + 0.1 * -1.0, b2 * v1 + 0.001 * 1.0
    p2 = p1 - lr * (m2 / (1 - b1 ** 2)) / (math.sqrt(v2 / (1 - b2 ** 2)) + 1e-8)
    assert run(optim.Adam, [[0.5], [-1.0]], [1.0], lr=lr) == pytest.approx(p2, abs=1e-14)
    # AdamW decays the parameter first: p = 2 (1 - 0.1 * 0.5) = 1.9, then the Adam step of 0.1
    assert run(optim.AdamW, [[3.0]], [2.0], lr=0.1, weight_decay=0.5) == pytest.approx(1.8, abs=1e-8)
    # Adam's (coupled) weight decay enters the gradient instead: g = 3 + 0.5 * 2 = 4, step still lr
    assert run(optim.Adam, [[3.0]], [2.0], lr=0.1, weight_decay=0.5) == pytest.approx(1.9, abs=1e-8)


# -- an independent transcription of torch.optim's documented algorithms ---------------------------

def ref_sgd(p, grads, lr, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0):
    p = p.copy()
    b = None
    for t, g in enumerate(grads, start=1):
        if weight_decay != 0:
            g = g + weight_decay * p
        if momentum != 0:
            b = g if t == 1 else momentum * b + (1 - dampening) * g
            g = g + momentum * b if nesterov else b
        p = p - lr * g
    return p


def ref_adam(p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False):
    p = p.copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p - lr * weight_decay * p
        elif weight_decay != 0:
            g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g ** 2
        m_hat = m / (1 - betas[0] ** t)
        v_hat = v / (1 - betas[1] ** t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p


CONFIGS = [
    (optim.SGD, ref_sgd, dict(lr=0.05)),
    (optim.SGD, ref_sgd, dict(lr=0.05, momentum=0.8, weight_decay=0.1)),
    (optim.SGD, ref_sgd, dict(lr=0.05, momentum=0.8, nesterov=True)),
    (optim.SGD, ref_sgd, dict(lr=0.05, momentum=0.5, dampening=0.3)),
    (optim.Adam, ref_adam, dict(lr=0.01)),
    (optim.Adam, ref_adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (optim.AdamW, lambda p, g, **kw: ref_adam(p, g, decoupled=True, **kw), dict(lr=0.01, weight_decay=0.3)),
]


@pytest.mark.parametrize("opt_cls,ref,kw", CONFIGS, ids=lambda c: getattr(c, "__name__", None) or str(c))
def test_matches_the_documented_algorithm(opt_cls, ref, kw):
    p0 = rng.standard_normal((3, 2))
    grads = [rng.standard_normal((3, 2)) for _ in range(5)]
    if opt_cls is optim.AdamW:
        kw = dict(kw)
        expected = ref(p0, grads, lr=kw["lr"], weight_decay=kw["weight_decay"])
    else:
        expected = ref(p0, grads, **kw)
    np.testing.assert_allclose(run(opt_cls, grads, p0, **kw), expected, rtol=1e-12, atol=1e-14)


def test_state_dict_resumes_exactly():
    p0, grads = rng.standard_normal(4), [rng.standard_normal(4) for _ in range(4)]
    straight = run(optim.Adam, grads, p0, lr=0.1)
    p = param(p0)
    first = optim.Adam([p], lr=0.1)
    for g in grads[:2]:
        p.grad = g
        first.step()
    saved = first.state_dict()
    assert saved["param_groups"][0]["params"] == [0] and saved["state"][0]["step"] == 2
    second = optim.Adam([p], lr=0.5)
    second.load_state_dict(saved)
    assert second.param_groups[0]["lr"] == 0.1
    for g in grads[2:]:
        p.grad = g
        second.step()
    np.testing.assert_allclose(p.value, straight, rtol=1e-14)


def test_parameters_without_grad_are_skipped_and_zero_grad():
    a, b = param([1.0]), param([2.0])
    opt = optim.SGD([a, b], lr=1.0, momentum=0.9)
    a.grad = np.array([1.0])
    opt.step()
    assert a.value[0] == 0.0 and b.value[0] == 2.0
    opt.zero_grad(set_to_none=False)
    assert a.grad.value[0] == 0.0 and b.grad is None  # as PyTorch: only existing gradients are zeroed
    opt.zero_grad()
    assert a.grad is None


def test_sparse_adam_touches_only_the_rows_seen():
    emb = nn.Embedding(6, 2, rng=0, dtype=np.float64)
    before = emb.weight.value.copy()
    opt = optim.Adam(emb.parameters(), lr=0.1)
    emb(np.array([1, 4, 1])).sum().backward()
    opt.step()
    moved = np.any(emb.weight.value != before, axis=1)
    assert moved.tolist() == [False, True, False, False, True, False]
    # rows seen take Adam's first step: lr * sign(g), g = 2 for row 1 (seen twice), 1 for row 4
    np.testing.assert_allclose(emb.weight.value[[1, 4]], before[[1, 4]] - 0.1, atol=1e-8)
    assert np.all(opt.state[id(emb.weight)]["exp_avg"][[0, 2, 3, 5]] == 0)


def test_schedules():
    p = param([0.0])
    opt = optim.SGD([p], lr=1.0)
    step = optim.StepLR(opt, step_size=2, gamma=0.5)
    lrs = []
    for _ in range(5):
        lrs.append(opt.param_groups[0]["lr"])
        step.step()
    assert lrs == [1.0, 1.0, 0.5, 0.5, 0.25]
    opt = optim.SGD([p], lr=2.0)
    cosine = optim.CosineAnnealingLR(opt, T_max=4, eta_min=0.0)
    lrs = []
    for _ in range(6):
        lrs.append(cosine.get_last_lr()[0])
        cosine.step()
    expected = [2.0, 1.0 + math.sqrt(0.5), 1.0, 1.0 - math.sqrt(0.5), 0.0, 1.0 - math.sqrt(0.5)]
    np.testing.assert_allclose(lrs, expected, atol=1e-15)


def test_errors():
    with pytest.raises(TypeError, match="requires grad"):
        optim.SGD([wg.tensor(np.ones(2))], lr=0.1)
    with pytest.raises(ValueError, match="invalid learning rate"):
        optim.Adam([param([1.0])], lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([param([1.0])], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)


# -- functional optimisers over pytrees (autograd.misc.optimizers' signatures) ----------------------

def _tree_problem():
    import wengert.numpy as wnp

    rng = np.random.default_rng(4)
    target = {"w": rng.standard_normal((2, 3)), "b": [rng.standard_normal(3), 0.7]}

    def loss(p, i):
        return (wnp.sum((p["w"] - target["w"]) ** 2) + wnp.sum((p["b"][0] - target["b"][0]) ** 2)
                + (p["b"][1] - target["b"][1]) ** 2 * (1.0 + 0.001 * i))

    x0 = {"w": np.zeros((2, 3)), "b": [np.zeros(3), 0.0]}
    return loss, x0, target


FUNCTIONAL = [("sgd", {"step_size": 0.3, "mass": 0.5}), ("momentum", {"step_size": 0.05}),
              ("rmsprop", {"step_size": 0.05}), ("adam", {"step_size": 0.1})]


@pytest.mark.parametrize("name,kw", FUNCTIONAL, ids=[f[0] for f in FUNCTIONAL])
def test_functional_optimisers_descend_on_pytrees_with_a_callback(name, kw):
    loss, x0, target = _tree_problem()
    seen = []

    def callback(x, i, g):
        seen.append((i, float(loss(x, i))))
        assert isinstance(x["b"], list) and np.shape(g["w"]) == (2, 3)

    out = getattr(optim, name)(wg.grad(loss), x0, callback=callback, num_iters=150, **kw)
    assert [i for i, _ in seen] == list(range(150))
    assert isinstance(out["b"][1], float) and out["w"].shape == (2, 3)
    assert loss(out, 0) < 1e-2 * seen[0][1]


@pytest.mark.parametrize("name", ["sgd", "rmsprop", "adam"])
def test_functional_optimisers_take_the_same_steps_as_autograds(name):
    pytest.importorskip("autograd")
    import autograd
    import autograd.misc.optimizers as ag_opt
    import autograd.numpy as anp

    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 3))
    f = lambda m: lambda p, i: m.sum(m.tanh(m.dot(a, p["x"])) ** 2) + m.sum(p["y"] ** 4) * (1 + 0.01 * i)
    x0 = {"x": rng.standard_normal(3), "y": rng.standard_normal(2)}
    ours = getattr(optim, name)(wg.grad(f(wg.numpy)), x0, num_iters=25)
    theirs = getattr(ag_opt, name)(autograd.grad(f(anp)), x0, num_iters=25)
    for key in x0:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-12, atol=1e-14)


def test_momentum_is_pytorchs_heavy_ball():
    x, v, g_of = 1.0, 0.0, lambda x: 2 * x
    for _ in range(5):
        v = 0.9 * v + g_of(x)
        x = x - 0.1 * v
    out = optim.momentum(lambda p, i: 2 * p, np.array([1.0]), num_iters=5, step_size=0.1, mass=0.9)
    np.testing.assert_allclose(out, [x], rtol=1e-14)


def test_functional_optimiser_with_a_misshapen_gradient_says_so():
    with pytest.raises(ValueError, match="shaped like the parameters"):
        optim.adam(lambda p, i: np.zeros(2), np.zeros(3), num_iters=1)
