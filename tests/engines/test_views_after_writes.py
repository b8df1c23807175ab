"""A view taken before its base is written sees the write, as NumPy's and PyTorch's views do: a write
into an array, or into one view of it, refreshes the other live views (siblings, views of views) in
value and in derivative, under every transform."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences as _fd

V = np.array([0.5, -1.0, 2.0, 0.25, 1.5, -0.75])


def base_then_view(v):
    y = v * 1.5
    w = wnp.reshape(y, (2, 3))
    y[0] = v[1] ** 2
    return wnp.sum(w * w)


def siblings(v):
    y = v * 1.5
    a = y[:3]
    b = y[1:4]
    a *= v[3:]
    return wnp.sum(b * b)


def views_of_views(v):
    y = v * 1.5
    m = wnp.reshape(y, (2, 3))
    c = m.T[1]
    r = y[2:5]
    r += v[:3]
    return wnp.sum(c * c) + wnp.sum(m * v.reshape(2, 3))


def repeated_writes(v):
    y = v * 1.0
    w = y[::2]
    for k in range(3):
        y[k + 1] *= v[k]
        w += 0.5 * w[0]
    return wnp.sum(y * w[1])


CASES = [base_then_view, siblings, views_of_views, repeated_writes]


def _close(a, b, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=rtol, atol=atol)


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_every_transform_sees_the_write_through_the_older_view(f):
    want, dwant = f(V.copy()), _fd(f, V.copy())  # NumPy runs the program on plain arrays
    value, g = wg.value_and_grad(f)(V.copy())
    _close(value, want, rtol=1e-13)
    _close(g, dwant)
    _close(wg.vjp(f, V.copy())[1](1.0)[0], dwant)
    _close(wg.jvp(f, (V.copy(),), (np.ones(6),))[1], dwant.sum())
    _close(wg.vmap(wg.grad(f))(np.stack([V, -V]))[0], dwant)
    _close(wg.compile(f)(V.copy()), want, rtol=1e-13)
    _close(wg.compile(f).grad(0)(V.copy()), dwant)
    _close(wg.grad(wg.checkpoint(f))(V.copy()), dwant)
    h = wg.hessian(f)(V.copy())
    fd_h = np.stack([_fd(lambda x, i=i: wg.grad(f)(x)[i], V.copy()) for i in range(6)])
    _close(h, fd_h, rtol=1e-4, atol=1e-5)
    x = wg.tensor(V.copy(), requires_grad=True)
    y = f(x)
    y.backward()
    _close(y.item(), want, rtol=1e-13)
    _close(x.grad.value, dwant)


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_pytorch_views_agree(f):
    torch = pytest.importorskip("torch")  # the same programs on torch's tensors, whose views share storage
    def torch_program(v):
        if f is base_then_view:
            y = v * 1.5
            w = y.reshape(2, 3)
            y[0] = v[1] ** 2
            return (w * w).sum()
        if f is siblings:
            y = v * 1.5
            a, b = y[:3], y[1:4]
            a *= v[3:]
            return (b * b).sum()
        if f is views_of_views:
            y = v * 1.5
            m = y.reshape(2, 3)
            c = m.T[1]
            r = y[2:5]
            r += v[:3]
            return (c * c).sum() + (m * v.reshape(2, 3)).sum()
        y = v * 1.0
        w = y[::2]
        for k in range(3):
            y[k + 1] *= v[k]
            w += 0.5 * w[0].clone()
        return (y * w[1]).sum()

    t = torch.tensor(V, dtype=torch.float64, requires_grad=True)
    out = torch_program(t)
    out.backward()
    _close(wg.grad(f)(V.copy()), t.grad.numpy(), rtol=1e-12, atol=1e-13)
    _close(f(V.copy()), out.item(), rtol=1e-13)


@settings(max_examples=40, deadline=None)
@given(a=st.tuples(st.integers(0, 4), st.integers(1, 3)), b=st.tuples(st.integers(0, 4), st.integers(1, 3)),
       op=st.sampled_from(["=", "+=", "*="]), scale=st.floats(-2, 2))
def test_random_overlapping_views(a, b, op, scale):
    (sa, la), (sb, lb) = a, b
    la, lb = min(la, 6 - sa), min(lb, 6 - sb)

    def f(v):
        y = v * 1.5
        p = y[sa:sa + la]
        q = y[sb:sb + lb]
        r = v[:la] * scale
        if op == "=":
            p[...] = r
        elif op == "+=":
            p += r
        else:
            p *= r
        return wnp.sum(q * q * wnp.arange(1.0, lb + 1)) + wnp.sum(y * v)

    _close(wg.value_and_grad(f)(V.copy())[0], f(V.copy()), rtol=1e-12)
    _close(wg.grad(f)(V.copy()), _fd(f, V.copy()), atol=1e-6)
    _close(wg.jvp(f, (V.copy(),), (V.copy(),))[1], _fd(f, V.copy()) @ V, atol=1e-6)
