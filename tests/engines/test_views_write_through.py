"""A write into a view writes through to the array it views, in value and derivative, as NumPy writes.

Every write form (``=``, ``+=``, ``-=``, ``*=``, ``/=``, and Python's one-line ``y[a:b] += v``) into
every kind of view (a slice, a row picked by an integer, a reshape, a transpose, a view of a view, a
real part) is run under every transform. The reference is the same function run by NumPy on plain
arrays (its values) and central finite differences of it (its derivative); PyTorch, where installed,
differentiates the same programs as a second oracle.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp

V = np.array([0.5, -1.0, 2.0, 0.25, 1.5, -0.75])


# -- the views: each takes the 6-vector y and returns a view of it with at least two elements ------

def _slice(y):
    return y[1:4]


def _row(y):  # an integer index into a 2-d array: a view of one row
    return wnp.reshape(y, (2, 3))[1]


def _reshape(y):
    return wnp.reshape(y, (3, 2))


def _transpose(y):
    return wnp.reshape(y, (2, 3)).T


def _view_of_view(y):
    return wnp.reshape(y, (3, 2))[1:].T[1]


def _strided(y):
    return y[::-2]


VIEWS = [_slice, _row, _reshape, _transpose, _view_of_view, _strided]


def _rhs(v, w):
    """A right-hand side that depends on the argument, shaped like the view ``w``."""
    return wnp.sin(v[0] * v[5]) + 0.5 * v[2] * np.ones(np.shape(w))


def _apply(form, w, r):
    """``w`` written by ``r`` in the given form (for wengert's values and PyTorch's tensors alike)."""
    if form == "=":
        w[...] = r
    elif form == "[0]=":
        w[0] = r[0]
    elif form == "+=":
        w += r
    elif form == "-=":
        w -= r
    elif form == "*=":
        w *= r
    elif form == "/=":
        w /= r * r + 3.0
    return w


def _write(form):
    def write(w, v):
        return _apply(form, w, _rhs(v, w))
    return write


FORMS = ["=", "[0]=", "+=", "-=", "*=", "/="]


def _program(view, form):
    write = _write(form)

    def f(v):
        y = v * 1.5 - 0.25
        w = view(y)
        write(w, v)
        # read the base and the view after the write, so a missed write-through shows in both
        return wnp.sum(y * y * wnp.arange(1.0, 7.0)) + wnp.sum(wnp.cos(w))
    f.__name__ = f"{view.__name__[1:]}{form}"
    return f


CASES = [_program(view, form) for view in VIEWS for form in FORMS]


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def _close(a, b, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=rtol, atol=atol)


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_reverse_forward_and_eager_follow_numpy(f):
    want = f(V.copy())  # NumPy itself runs the program on plain arrays
    dwant = _fd(f, V.copy())
    value, g = wg.value_and_grad(f)(V.copy())
    _close(value, want, rtol=1e-13)
    _close(g, dwant)
    out, pullback = wg.vjp(f, V.copy())
    _close(out, want, rtol=1e-13)
    _close(pullback(1.0)[0], dwant)
    primal, tangent = wg.jvp(f, (V.copy(),), (np.ones(6),))
    _close(primal, want, rtol=1e-13)
    _close(tangent, dwant.sum())
    _close(wg.jacfwd(f)(V.copy()), dwant)
    x = wg.tensor(V.copy(), requires_grad=True)
    y = f(x)
    y.backward()
    _close(y.item(), want, rtol=1e-13)
    _close(x.grad.value, dwant)


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_second_order_follows_finite_differences(f):
    """The Hessian (forward over reverse, through the write) against finite differences of the
    gradient, and reverse over reverse against forward over reverse."""
    h = wg.hessian(f)(V.copy())
    g = wg.grad(f)
    _close(h, np.stack([(g(V + 1e-5 * e) - g(V - 1e-5 * e)) / 2e-5 for e in np.eye(6)]), rtol=1e-4, atol=1e-5)
    _close(wg.jacrev(wg.grad(f))(V.copy()), h, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_batched_compiled_and_checkpointed_follow_numpy(f):
    X = np.stack([V, 0.5 * V[::-1], V ** 2])
    want = np.array([f(x.copy()) for x in X])
    dwant = np.stack([_fd(f, x.copy()) for x in X])
    _close(wg.vmap(f)(X.copy()), want, rtol=1e-13)
    _close(wg.vmap(wg.grad(f))(X.copy()), dwant)
    compiled = wg.compile(f)
    _close(compiled(V.copy()), want[0], rtol=1e-13)
    _close(compiled.grad(0)(V.copy()), dwant[0])
    _close(wg.grad(wg.checkpoint(f))(V.copy()), dwant[0])


def test_the_one_line_forms_python_splits_in_three():
    """``y[1:3] += v`` is ``t = y[1:3]; t += v; y[1:3] = t`` to Python; ``y[:, [1, 0]] += 1`` picks
    a copy (an integer-array index) and assigns it back."""
    def f(v):
        y = v * 2.0
        y[:2] += v[2:4] ** 2
        y[1:3] *= 2.0
        y[3:] -= wnp.sin(v[:3])
        y[::2] /= 1.5 + v[1::2] ** 2
        m = wnp.reshape(y, (2, 3)) * 1.0
        m[:, [2, 0]] += v[:2, None] * 3.0  # a broadcast right-hand side; NumPy's copy and write back
        m[1] *= m[0]
        return wnp.sum(m * m) + wnp.sum(y)

    want, dwant = f(V.copy()), _fd(f, V.copy())
    for transform in (wg.grad, lambda f: wg.compile(f).grad(0), lambda f: wg.grad(wg.checkpoint(f))):
        _close(transform(f)(V.copy()), dwant)
    _close(wg.value_and_grad(f)(V.copy())[0], want, rtol=1e-13)
    _close(wg.jvp(f, (V.copy(),), (V.copy(),))[1], dwant @ V)


def test_an_integer_array_index_is_a_copy_with_repeats_as_numpy():
    """``y[[0, 0, 2]] += 1`` adds once to y[0] (the picked copy is assigned back, the last write
    wins), as NumPy does; ``np.add.at`` adds twice."""
    def f(v):
        y = v * 1.0
        y[[0, 0, 2]] += v[1] * 3.0
        return wnp.sum(y * y)

    want, dwant = f(V.copy()), _fd(f, V.copy())
    value, g = wg.value_and_grad(f)(V.copy())
    _close(value, want, rtol=1e-13)
    _close(g, dwant)


def test_the_real_part_of_a_complex_array_is_a_view():
    def f(v):
        z = v * (1.0 + 2.0j)
        r = wnp.real(z)
        r *= 3.0
        im = wnp.imag(z)
        im += v ** 2
        return wnp.sum(wnp.abs(z) ** 2)

    _close(wg.grad(f)(V.copy()), _fd(f, V.copy()))
    _close(wg.value_and_grad(f)(V.copy())[0], f(V.copy()), rtol=1e-13)


def test_the_argument_itself_is_written_through_its_view_not_the_callers_array():
    """A view of an argument writes into the argument as the function sees it; the caller's array is
    never modified (wengert's transforms work on their own versions of the arguments)."""
    def f(v):
        w = v[2:]
        w *= v[0]
        return wnp.sum(v * v)

    x = V.copy()
    g = wg.grad(f)(x)
    assert np.array_equal(x, V)
    _close(g, _fd(lambda v: f(v.copy()), V.copy()))
    _close(wg.jvp(f, (V.copy(),), (np.ones(6),))[1], _fd(lambda v: f(v.copy()), V.copy()).sum())


def test_writes_into_views_of_a_leaf_tensor_are_refused_as_pytorch_refuses_them():
    x = wg.tensor(V.copy(), requires_grad=True)
    w = x[1:3]
    with pytest.raises(RuntimeError, match="into a view of a leaf tensor that requires grad"):
        w += 1.0
    with pytest.raises(RuntimeError, match="into a view of a leaf tensor that requires grad"):
        x.reshape(2, 3)[0, 1] = 2.0
    with wg.no_grad():  # an update of the leaf itself, as an optimiser makes it
        w = x[1:3]
        w += 1.0
    assert np.array_equal(x.value, V + np.array([0, 1, 1, 0, 0, 0]))


def test_views_that_cannot_be_written_back_are_refused_by_name():
    """``broadcast_to``'s view is read-only in NumPy (a write raises there too); a primitive that
    makes a view without declaring how to write it back refuses writes, naming itself."""
    def broadcast(v):
        b = wnp.broadcast_to(v[:3], (2000, 3))  # NumPy's read-only view (small ones are filled copies)
        b[0, 0] = 1.0
        return wnp.sum(b)

    with pytest.raises(ValueError, match=r"view of argument 0 of 'broadcast_to' \(NumPy: assignment "
                                         r"destination is read-only\)"):
        wg.grad(broadcast)(V.copy())

    def diagonal_by_einsum(v):
        d = wnp.einsum("ii->i", wnp.reshape(v[:4] * 1.0, (2, 2)))
        d += 1.0
        return wnp.sum(d)

    if not np.shares_memory(d := np.einsum("ii->i", e := np.eye(2)), e) or not d.flags.writeable:
        pytest.skip("this NumPy's einsum copies")
    with pytest.raises(TypeError, match="'einsum' declares no way to write a view of it back"):
        wg.grad(diagonal_by_einsum)(V.copy())

    def slice_of_the_diagonal(v):  # refused before anything is rebound: the chain is checked first
        d = wnp.einsum("ii->i", wnp.reshape(v[:4] * 1.0, (2, 2)))
        e = d[0:1]
        e += 1.0
        return wnp.sum(d)

    with pytest.raises(TypeError, match="'einsum' declares no way to write a view of it back"):
        wg.grad(slice_of_the_diagonal)(V.copy())


@settings(max_examples=40, deadline=None)
@given(view=st.sampled_from(VIEWS), form=st.sampled_from(FORMS),
       scale=st.floats(-2.0, 2.0).filter(lambda s: abs(s) > 0.1),
       transform=st.sampled_from(["grad", "jvp", "vmap", "compile", "eager"]))
def test_random_views_writes_and_inputs(view, form, scale, transform):
    f = _program(view, form)
    x = V * scale
    dwant = _fd(f, x.copy())
    if transform == "grad":
        got = wg.grad(f)(x.copy())
    elif transform == "jvp":
        got = wg.jacfwd(f)(x.copy())
    elif transform == "vmap":
        got = wg.vmap(wg.grad(f))(x[None].copy())[0]
    elif transform == "compile":
        got = wg.compile(f).grad(0)(x.copy())
    else:
        t = wg.tensor(x.copy(), requires_grad=True)
        f(t).backward()
        got = t.grad.value
    _close(got, dwant, rtol=1e-5, atol=1e-6)


def test_pytorch_differentiates_the_same_writes():
    torch = pytest.importorskip("torch")

    def torch_view(view, y):
        if view is _slice:
            return y[1:4]
        if view is _row:
            return y.reshape(2, 3)[1]
        if view is _reshape:
            return y.reshape(3, 2)
        if view is _transpose:
            return y.reshape(2, 3).T
        if view is _view_of_view:
            return y.reshape(3, 2)[1:].T[1]
        return None  # PyTorch has no negative strides

    for view in VIEWS:
        for form in FORMS:
            f = _program(view, form)
            x = torch.tensor(V.copy(), requires_grad=True)
            y = x * 1.5 - 0.25
            w = torch_view(view, y)
            if w is None:
                continue
            r = torch.sin(x[0] * x[5]) + 0.5 * x[2] * torch.ones(w.shape, dtype=torch.float64)
            w = _apply(form, w, r)
            out = (y * y * torch.arange(1.0, 7.0, dtype=torch.float64)).sum() + torch.cos(w).sum()
            out.backward()
            _close(wg.grad(f)(V.copy()), x.grad.numpy(), rtol=1e-12, atol=1e-13)
