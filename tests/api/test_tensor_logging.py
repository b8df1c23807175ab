"""PyTorch's logging habits on eager tensors -- ``float(loss)``, ``int(t)``, ``f"{loss:.3f}"`` -- work
(without the derivative, as ``.item()``); inside a transform they are refused as before; a traced
value prints as ``Traced(..., by wg.grad)``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg


def _loss(value):
    w = wg.tensor(np.array([value, 2.0]), requires_grad=True)
    return w, (w * w).sum() / 3.0


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")  # torch's own warning
@settings(max_examples=40, deadline=None)
@given(st.floats(-1e3, 1e3, allow_nan=False), st.sampled_from(["", ".3f", ".2e", "8.4g", "+.1f"]))
def test_float_int_and_format_as_torch(value, spec):
    torch = pytest.importorskip("torch")
    w, loss = _loss(value)
    t = torch.tensor([value, 2.0], dtype=torch.float64, requires_grad=True)
    theirs = (t * t).sum() / 3.0
    assert float(loss) == float(theirs)
    assert int(loss) == int(theirs)
    assert format(loss, spec) == format(theirs, spec)
    assert f"{loss:{spec}}" == f"{theirs:{spec}}"
    loss.backward()  # the graph is intact: the number was taken without touching it
    theirs.backward()
    np.testing.assert_allclose(w.grad.numpy(), t.grad.numpy())


def test_float_and_format_without_torch():
    w, loss = _loss(1.0)
    assert float(loss) == 5.0 / 3.0 and int(loss) == 1
    assert f"{loss:.3f}" == "1.667" and f"{loss}" == repr(5.0 / 3.0)
    assert float(wg.tensor([2.5], requires_grad=True)) == 2.5  # one element, as torch
    with pytest.raises(TypeError, match="unsupported format string"):
        format(w, ".3f")  # more than one element: as torch
    assert f"{w}" == str(w)


def test_a_store_into_a_plain_array_is_still_refused():
    w, loss = _loss(1.0)
    buf = np.zeros(2)
    with pytest.raises((wg.ExitError, ValueError)) as info:
        buf[0] = loss  # float() here would silently drop the derivative of what buf computes
    error = info.value if isinstance(info.value, wg.ExitError) else info.value.__cause__  # NumPy restates it
    assert isinstance(error, wg.ExitError) and "Storing into a plain NumPy array" in str(error), error


def test_inside_a_transform_they_are_still_refused():
    w = wg.tensor(3.0, requires_grad=True)
    for conversion in (float, int, lambda v: format(v, ".3f")):
        for make in (lambda x: x, lambda x: x * w, lambda x: wg.numpy.sum(x)):
            with pytest.raises(wg.ExitError, match="applied to a value traced by a reverse-mode"):
                wg.grad(lambda x: conversion(make(x)) * x)(1.5)
    with pytest.raises(wg.ExitError):
        wg.grad(lambda x: float(wg.numpy.sum(x)) * x.sum())(np.ones(2))


def test_a_traced_value_prints_with_its_transform():
    seen = []

    def f(x):
        seen.append((repr(x), f"{x}", repr(x * 2.0)))
        return wg.numpy.sum(x ** 2)

    wg.grad(f)(np.array([1.0, 1.0]))
    wg.vjp(f, np.array([1.0, 1.0]))
    wg.jacrev(f)(np.array([1.0, 1.0]))
    wg.grad(f)(1.5)
    assert seen[0] == ("Traced(array([1., 1.]), by wg.grad)",) * 2 + ("Traced(array([2., 2.]), by wg.grad)",)
    assert seen[1][0] == "Traced(array([1., 1.]), by wg.vjp)" and seen[2][0].endswith("by wg.jacrev)")
    assert seen[3][0] == "Traced(1.5, by wg.grad)"
    assert all("level" not in r for s in seen for r in s)
