"""The seed documents' worked examples, with their numbers."""

import math

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

# -- first seed: z = x * y + sin(x) at (0.5, 4.2) ---------------------------------------------
Z = 2.579425538604203
DZDX = 5.077582561890373
DZDY = 0.5


def seed1(x, y):
    return x * y + wnp.sin(x)


def test_seed1_explicit_tape():
    tape = wg.Tape()
    x = tape.var(0.5)
    y = tape.var(4.2)
    z = x * y + wnp.sin(x)
    g = z.grad()
    assert z.value == Z
    assert g.wrt(x) == DZDX
    assert g.wrt(y) == DZDY
    assert len(tape) == 3
    assert str(tape) == "x = 0.5\ny = 4.2\na = x * y\nb = sin(x)\nz = a + b"


def test_seed1_reverse_mode():
    z, (gx, gy) = wg.value_and_grad(seed1, argnums=(0, 1))(0.5, 4.2)
    assert (z, gx, gy) == (Z, DZDX, DZDY)
    assert type(gx) is float and type(gy) is float
    cz, (cx, cy) = wg.compile(seed1).value_and_grad(argnums=(0, 1))(0.5, 4.2)  # the compiled program
    assert (cz, cx, cy) == pytest.approx((Z, DZDX, DZDY), rel=1e-15)


def test_seed1_forward_mode_program_b():
    # Seeding dx = 1, dy = 0 gives dz/dx; dx = 0, dy = 1 gives dz/dy.
    assert wg.jvp(seed1, (0.5, 4.2), (1.0, 0.0)) == (Z, DZDX)
    assert wg.jvp(seed1, (0.5, 4.2), (0.0, 1.0)) == (Z, DZDY)


def test_seed1_tensor_backward():
    x = wg.tensor(0.5, requires_grad=True)
    y = wg.tensor(4.2, requires_grad=True)
    z = x * y + wnp.sin(x)
    z.backward()
    assert z.item() == Z
    assert x.grad.item() == DZDX and y.grad.item() == DZDY


def test_seed1_same_tape_serves_another_output():
    tape = wg.Tape()
    x = tape.var(0.5)
    y = tape.var(4.2)
    z = 2 * x + wnp.sin(x)
    v = 4 * x + wnp.cos(x)
    assert z.grad().wrt(x) == pytest.approx(2 + math.cos(0.5))
    assert v.grad().wrt(x) == pytest.approx(4 - math.sin(0.5))
    assert z.grad().wrt(y) == 0.0  # z does not depend on y


# -- second seed: y = ln(x1) + x1 x2 - sin(x2) at (2, 5) ----------------------------------------


def seed2(x1, x2):
    return wnp.log(x1) + x1 * x2 - wnp.sin(x2)


def test_seed2_values_and_gradient():
    y, (g1, g2) = wg.value_and_grad(seed2, argnums=(0, 1))(2.0, 5.0)
    assert y == pytest.approx(11.652071455223084, abs=1e-12)
    assert str(y).startswith("11.652071")
    assert g1 == pytest.approx(5.5, abs=1e-15)
    assert g2 == pytest.approx(2 - math.cos(5.0), abs=1e-15)
    assert str(g2).startswith("1.716337")


def test_seed2_all_engines_agree():
    rev = wg.grad(seed2, argnums=(0, 1))(2.0, 5.0)
    fwd = (wg.jvp(seed2, (2.0, 5.0), (1.0, 0.0))[1], wg.jvp(seed2, (2.0, 5.0), (0.0, 1.0))[1])
    tape = wg.Tape()
    a, b = tape.var(2.0), tape.var(5.0)
    g = seed2(a, b).grad()
    assert rev == pytest.approx(fwd, abs=1e-15)
    assert (g.wrt(a), g.wrt(b)) == pytest.approx(rev, abs=1e-15)
    # the program transformer: the compiled adjoint program, and the tangent program seeded both ways
    assert wg.compile(seed2).grad((0, 1))(2.0, 5.0) == pytest.approx(rev, abs=1e-15)
    tangent_program = wg.Program.from_trace(seed2, 2.0, 5.0).jvp()
    program_fwd = tuple(tangent_program(2.0, 5.0, seed)[1] for seed in ((1.0, 0.0), (0.0, 1.0)))
    assert program_fwd == pytest.approx(rev, abs=1e-15)


# -- third seed: the example network (x (20,1), W1 (20,20), W2 (10,20), softmax CE) --------------


def network_inputs():
    rng = np.random.default_rng(3)
    return rng.standard_normal((20, 1)), rng.standard_normal((20, 20)) * 0.3, \
        rng.standard_normal((10, 20)) * 0.3, 7


def softmax_cross_entropy(pred, label):
    m = wnp.max(pred)
    return m + wnp.log(wnp.sum(wnp.exp(pred - m))) - pred[label, 0]


def network_loss(W1, W2, x, label):
    h = wnp.matmul(W1, x)
    pred = wnp.matmul(W2, h)
    return softmax_cross_entropy(pred, label)


def test_seed3_network_against_handwritten_backward():
    x, W1, W2, label = network_inputs()
    h = W1 @ x
    pred = W2 @ h
    p = np.exp(pred - pred.max())
    p /= p.sum()
    dpred = p.copy()
    dpred[label, 0] -= 1
    dW2 = dpred @ h.T
    dW1 = (W2.T @ dpred) @ x.T
    loss, (gW1, gW2) = wg.value_and_grad(network_loss, argnums=(0, 1))(W1, W2, x, label)
    assert loss == pytest.approx(-np.log(p[label, 0]), rel=1e-13)
    np.testing.assert_allclose(gW1, dW1, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gW2, dW2, rtol=1e-12, atol=1e-14)
    closs, (cW1, cW2) = wg.compile(network_loss).value_and_grad((0, 1))(W1, W2, x, label)
    assert closs == pytest.approx(-np.log(p[label, 0]), rel=1e-13)
    np.testing.assert_allclose(cW1, dW1, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cW2, dW2, rtol=1e-12, atol=1e-14)


def test_seed3_network_with_tensors_and_backward():
    x, W1, W2, label = network_inputs()
    tW1 = wg.tensor(W1, requires_grad=True)
    tW2 = wg.tensor(W2, requires_grad=True)
    loss = softmax_cross_entropy(tW2 @ (tW1 @ x), label)
    loss.backward()
    g1, g2 = wg.grad(network_loss, argnums=(0, 1))(W1, W2, x, label)
    np.testing.assert_allclose(tW1.grad.numpy(), g1, rtol=1e-13)
    np.testing.assert_allclose(tW2.grad.numpy(), g2, rtol=1e-13)


def test_seed3_bignet_is_pruned():
    """loss = SmallNet(data) while result = BigNet(data) was also computed: backward() runs only
    SmallNet's VJPs (PyTorch's pruning), never BigNet's."""
    calls = []

    @wg.primitive
    def big_layer(W, x):
        return np.tanh(W @ x)

    wg.defvjp(big_layer, lambda g, out, W, x: calls.append("big") or (g * (1 - out**2)) @ x.T,
              lambda g, out, W, x: calls.append("big") or W.T @ (g * (1 - out**2)))

    @wg.primitive
    def small_layer(W, x):
        return W @ x

    wg.defvjp(small_layer, lambda g, out, W, x: calls.append("small") or g @ x.T,
              lambda g, out, W, x: calls.append("small") or W.T @ g)

    x, W1, W2, _ = network_inputs()
    data = wg.tensor(x, requires_grad=True)
    Wbig = wg.tensor(W1, requires_grad=True)
    Wsmall = wg.tensor(W2, requires_grad=True)
    result = big_layer(Wbig, big_layer(Wbig, data))  # BigNet(data)
    loss = wnp.sum(small_layer(Wsmall, data))  # SmallNet(data)
    loss.backward()
    assert calls == ["small", "small"]
    assert Wbig.grad is None and Wsmall.grad is not None
    assert result.requires_grad  # BigNet was recorded, just never differentiated
