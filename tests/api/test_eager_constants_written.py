"""Eager tensors beside the caller's own arrays, and the caller writing into either afterwards.

``w * arr`` records an operation whose backward pass reads ``arr``; a later ``arr[0] = 5.0`` used to
change what it read, and ``backward()`` gave the derivative at the new numbers. The caller's arrays
and lists an operation's rules read are copied as it is recorded (``engines.kept``); a tensor's own
memory is not copied: a write into it -- through the tensor, or through the array ``numpy()`` handed
out (``engines.escaped``) -- is stamped, and a backward pass that needs what it overwrote refuses.

The reference is each function run by NumPy on plain arrays and differentiated by central differences,
and PyTorch's ``backward()`` of the same code with ``torch.tensor(arr)`` (a copy, made where the
operation runs) where PyTorch is installed.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.engines import escaped

W0 = np.array([0.4, -0.3, 0.8])


def times_array(w, xp):
    a = np.array([2.0, 8.0, 18.0])
    y = xp.sum(w * xp.asarray(a) if xp is not wnp else w * a)
    a[0] = 5.0
    return y + xp.sum(w * (a if xp is wnp else xp.asarray(a)))


def array_times(w, xp):
    a = np.array([2.0, 8.0, 18.0])
    y = xp.sum((xp.asarray(a) if xp is not wnp else a) * w * w)
    a *= -1.0
    return y


def times_list(w, xp):
    a = [2.0, 8.0, 18.0]
    y = xp.sum(w * (xp.asarray(a) if xp is not wnp else a))
    a[0] = 5.0
    return y


def matmul_array(w, xp):
    m = np.array([[2.0, 8.0, 18.0], [1.0, -1.0, 0.5]])
    y = xp.sum(xp.tanh((xp.asarray(m) if xp is not wnp else m) @ w))
    m[:] = 0.0
    return y


def squared_difference(w, xp):
    a = np.array([2.0, 8.0, 18.0])
    y = xp.sum((w - (xp.asarray(a) if xp is not wnp else a)) ** 2)
    a.fill(1.0)
    return y


def buffer_refilled(w, xp):
    rows = np.array([[0.3, -1.2, 0.7], [1.5, 0.2, -0.4], [-0.6, 0.9, 1.1]])
    tmp = np.empty(3)
    s = 0.0
    for r in rows:
        tmp[:] = r
        s = s + xp.sum(xp.sin(w * (xp.asarray(tmp) if xp is not wnp else tmp)))
    return s


FUNCTIONS = [times_array, array_times, times_list, matmul_array, squared_difference, buffer_refilled]


def _numpy_gradient(f, w, h=1e-6):
    g = np.zeros_like(w)
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = h
        g[i] = (float(f(w + e, wnp)) - float(f(w - e, wnp))) / (2 * h)
    return g


def _eager_gradient(f, w):
    t = wg.tensor(w.copy(), requires_grad=True)
    f(t, wnp).backward()
    return np.asarray(t.grad)


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_backward_reads_the_values_the_operation_read(f):
    np.testing.assert_allclose(_eager_gradient(f, W0), _numpy_gradient(f, W0), rtol=1e-6, atol=1e-8)


def test_the_reported_case():
    w = wg.tensor(np.array([0.4, -0.3, 0.8]), requires_grad=True)
    arr = np.array([2.0, -2.4, 14.4])
    z = wnp.sum(w * w * arr)
    arr[0] = 5.0
    z.backward()
    np.testing.assert_allclose(np.asarray(w.grad), [1.6, 1.44, 23.04], rtol=1e-14)


@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_backward_matches_pytorch(f):
    torch = pytest.importorskip("torch")

    class TorchNumpy:  # the pieces of NumPy's namespace the functions use, on torch tensors
        sum = staticmethod(torch.sum)
        sin = staticmethod(torch.sin)
        tanh = staticmethod(torch.tanh)

        @staticmethod
        def asarray(a):
            return torch.tensor(np.asarray(a, dtype=np.float64))  # a copy, as the operation runs

    t = torch.tensor(W0.copy(), requires_grad=True)
    f(t, TorchNumpy).backward()
    np.testing.assert_allclose(_eager_gradient(f, W0), t.grad.numpy(), rtol=1e-13, atol=1e-15)


def test_a_keyword_array_written_after_use():
    w = wg.tensor(W0.copy(), requires_grad=True)
    mask = np.array([True, True, False])
    y = wnp.sum(w * w, where=mask)
    mask[:] = [False, True, True]
    y.backward()
    np.testing.assert_allclose(np.asarray(w.grad), [0.8, -0.6, 0.0], rtol=1e-14)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=3, max_size=3), st.lists(st.floats(-3, 3), min_size=3, max_size=3),
       st.lists(st.floats(-3, 3), min_size=3, max_size=3))
def test_random_constants_overwritten_after_use(w, before, after):
    w = np.array(w)
    a = np.array(before)
    t = wg.tensor(w.copy(), requires_grad=True)
    y = wnp.sum(wnp.sin(t * a) * a)
    a[:] = after
    y.backward()
    expected = np.cos(w * np.array(before)) * np.array(before) ** 2
    np.testing.assert_allclose(np.asarray(t.grad), expected, rtol=1e-12, atol=1e-14)


# -- a tensor's own memory, written through the array numpy() handed out ------------------------------

def _setup():
    w = wg.tensor(W0.copy(), requires_grad=True)
    c = wg.tensor(np.array([2.0, 8.0, 18.0]))
    return w, c


REFUSED = "modified by an in-place operation"


def test_a_write_through_numpy_after_the_operation_is_refused():
    w, c = _setup()
    y = wnp.sum(w * c)
    c.numpy()[0] = 5.0
    with pytest.raises(RuntimeError, match=REFUSED):
        y.backward()


def test_a_write_through_a_kept_array_after_the_operation_is_refused():
    w, c = _setup()
    a = c.numpy()
    y = wnp.sum(w * c)
    a[0] = 5.0
    with pytest.raises(RuntimeError, match="numpy()"):
        y.backward()


def test_a_write_through_np_asarray_is_refused():
    w, c = _setup()
    y = wnp.sum(w * c)
    np.asarray(c)[1] = 0.0
    with pytest.raises(RuntimeError, match=REFUSED):
        y.backward()


def test_a_write_into_a_parameter_through_detach_numpy_is_refused():
    w, _ = _setup()
    y = wnp.sum(w * w)
    w.detach().numpy()[:] = 0.0  # PyTorch's version counter misses this one and answers with zeros
    with pytest.raises(RuntimeError, match=REFUSED):
        y.backward()


def test_a_write_before_the_operation_is_read_as_usual():
    w, c = _setup()
    a = c.numpy()
    a[0] = 5.0  # the view is still alive when the operation reads c
    y = wnp.sum(w * c)
    y.backward()
    np.testing.assert_allclose(np.asarray(w.grad), [5.0, 8.0, 18.0])
    assert np.asarray(c)[0] == 5.0  # the write reached the tensor, as in PyTorch


def test_reading_numpy_between_forward_and_backward_is_no_write():
    w, c = _setup()
    y = wnp.sum(w * w * c)
    kept = c.numpy()
    print(w.detach().numpy(), kept.sum())
    y.backward()
    np.testing.assert_allclose(np.asarray(w.grad), 2 * W0 * [2.0, 8.0, 18.0])
    del kept


def test_the_views_are_forgotten_once_dropped():
    _, c = _setup()
    before = len(escaped.LIVE)
    a = c.numpy()
    assert len(escaped.LIVE) == before + 1 and np.shares_memory(a, np.asarray(c))
    del a
    assert len(escaped.LIVE) == before


def test_a_copy_asked_for_is_not_watched():
    _, c = _setup()
    before = len(escaped.LIVE)
    a = np.array(c, copy=True)
    a[0] = 9.0
    assert len(escaped.LIVE) == before and np.asarray(c)[0] == 2.0


def test_numpy_of_a_tensor_requiring_grad_is_still_refused():
    w, _ = _setup()
    with pytest.raises(RuntimeError, match="detach"):
        w.numpy()


@pytest.mark.parametrize("part", [lambda a: a[:2], lambda a: a.reshape(3, 1), lambda a: a[::-1]],
                         ids=["slice", "reshape", "reversed"])
def test_a_write_through_a_view_of_the_array_handed_out_is_refused(part):
    w, c = _setup()
    a = part(c.numpy())  # the array numpy() returned is gone; its view remains
    y = wnp.sum(w * c)
    a[0] = 5.0
    with pytest.raises(RuntimeError, match=REFUSED):
        y.backward()


def test_the_array_handed_out_is_an_ordinary_writeable_array():
    _, c = _setup()
    a = c.numpy()
    assert type(a) is np.ndarray and a.flags.writeable and a.dtype == np.float64
    a *= 2.0
    np.testing.assert_array_equal(np.asarray(c), [4.0, 16.0, 36.0])
