"""The advice in the refusal of a NumPy function that has no derivative works when followed.

For the functions refused with "if no derivative is wanted" (``np.unique`` and the ``unique_*``
family, the ``histogram`` family, the set operations, ``frexp``, ``trim_zeros``, ``asarray_chkfinite``,
``require``, the ``save*`` functions) the advice is ``wg.stop_gradient(x)``: a plain NumPy array, inside
a transform and on an eager tensor alike. ``x.detach()`` is a Tensor, refused the same way, so the
messages must not advise it."""

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import wengert as wg
from wengert.numpy import _classification as table

X0 = np.array([3.0, 1.0, 2.0, 2.0, 0.0, -1.5])

# one function per family, and how to call it on a plain array
FAMILIES = {
    "unique": lambda a: np.unique(a),
    "unique_counts": lambda a: tuple(np.unique_counts(a)),
    "histogram": lambda a: np.histogram(a, bins=3),
    "histogram_bin_edges": lambda a: np.histogram_bin_edges(a, bins=4),
    "intersect1d": lambda a: np.intersect1d(a, a[:3]),
    "setdiff1d": lambda a: np.setdiff1d(a, a[:2]),
    "frexp": lambda a: np.frexp(a),
    "trim_zeros": lambda a: np.trim_zeros(a),
    "asarray_chkfinite": lambda a: np.asarray_chkfinite(a),
    "require": lambda a: np.require(a, requirements="C"),
    "save": lambda a: np.save(io.BytesIO(), a),
    "savetxt": lambda a: np.savetxt(io.StringIO(), a),
}


def _same(ours, theirs):
    if isinstance(theirs, tuple):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
    elif theirs is None:
        assert ours is None
    else:
        assert type(ours) is type(theirs)
        np.testing.assert_array_equal(ours, theirs)


def _refused(call, x):
    with pytest.raises(wg.UnsupportedNumpyFunction) as info:
        call(x)
    message = str(info.value)
    assert "wg.stop_gradient(x)" in message, message
    assert "call it on x.detach()" not in message and "pass x.detach()" not in message, message
    return message


@pytest.mark.parametrize("name", FAMILIES)
def test_the_advice_works_inside_a_transform(name):
    call, seen = FAMILIES[name], []

    def loss(x):
        message = _refused(call, x)
        assert f"numpy.{name} " in message, message
        seen.append(call(wg.stop_gradient(x)))  # the advice, followed
        return (x ** 2).sum()

    np.testing.assert_allclose(wg.grad(loss)(X0.copy()), 2 * X0)
    _same(seen[0], call(X0.copy()))


@pytest.mark.parametrize("name", FAMILIES)
def test_the_advice_works_on_an_eager_tensor(name):
    call = FAMILIES[name]
    w = wg.tensor(X0, requires_grad=True)
    _refused(call, w)
    _same(call(wg.stop_gradient(w)), call(X0.copy()))
    _same(call(wg.stop_gradient((w * 2.0).sum() * w)), call(X0 * 2.0 * X0.sum()))


def test_why_the_advice_is_not_detach():
    w = wg.tensor(X0, requires_grad=True)
    with pytest.raises(wg.UnsupportedNumpyFunction):
        np.unique(w.detach())  # a Tensor, refused the same
    with pytest.raises(wg.UnsupportedNumpyFunction):
        wg.grad(lambda x: np.unique(x.detach()).sum() * x.sum())(X0.copy())


def test_frexps_advice_gives_the_mantissas_derivative():
    def mantissa(x):
        e = np.frexp(wg.stop_gradient(x))[1]
        return x / 2.0 ** e

    x = np.array([0.3, 5.0, -12.0, 1024.5])
    np.testing.assert_allclose(wg.grad(lambda x: mantissa(x).sum())(x), 2.0 ** -np.frexp(x)[1])
    np.testing.assert_array_equal(mantissa(x), np.frexp(x)[0])


@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, st.integers(1, 8), elements=st.sampled_from([0.0, 1.0, -2.0, 3.5])))
def test_unique_and_trim_zeros_on_stop_gradient_are_numpys(x):
    def loss(v):
        np.testing.assert_array_equal(np.unique(wg.stop_gradient(v)), np.unique(x))
        np.testing.assert_array_equal(np.trim_zeros(wg.stop_gradient(v)), np.trim_zeros(x))
        return (v * 3.0).sum()

    np.testing.assert_allclose(wg.grad(loss)(x.copy()), np.full_like(x, 3.0))


def test_no_refusal_advises_detach():
    for name in table.names("numpy", table.UNSUPPORTED):
        message = str(table.unsupported(name))
        assert "x.detach()" not in message.replace("x.detach() is still a Tensor", ""), (name, message)
        assert message.count("wg.stop_gradient(x)") <= 2, (name, message)
