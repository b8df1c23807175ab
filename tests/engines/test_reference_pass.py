"""The fast backward pass against the reference one (``wengert.engines.reference``), on every case of
the rule table, to second order; on random programs (Hypothesis); and on what changes how a pass
walks the graph: assignments, several outputs, eager tensors.

Each comparison runs the same function twice, once through each pass (the reference pass is swapped
in where the transforms, ``Tensor.backward`` and ``Tape`` call the backward pass), so both read
fresh graphs. The passes must agree to rounding: the fast one fuses rules and accumulates in place,
which may reorder a few floating-point additions, nothing more.
"""

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import wengert as wg
import wengert.numpy as wnp
from tests.rules import test_rule_table as table
from wengert.api import tape as tape_module
from wengert.api import tensor as tensor_module
from wengert.api import transforms
from wengert.api.tree import tree_flatten
from wengert.engines import reference
from wengert.engines import reverse as fast

RTOL, ATOL = 1e-10, 1e-12


@contextlib.contextmanager
def reference_pass():
    """Run every backward pass of the transforms, ``Tensor.backward`` and ``Tape`` by the reference."""
    saved = [(m, m.backward_pass) for m in (transforms, tensor_module, tape_module)]
    for m, _ in saved:
        m.backward_pass = reference.backward_pass
    try:
        yield
    finally:
        for m, f in saved:
            m.backward_pass = f


def both(compute):
    """``compute()`` through the fast pass and through the reference pass: ``(fast, reference)``,
    each a result or the exception it raised."""
    out = []
    for use_reference in (False, True):
        with reference_pass() if use_reference else contextlib.nullcontext():
            try:
                out.append(compute())
            except Exception as e:  # noqa: BLE001 - compared below: both must refuse alike
                out.append(e)
    return out


def assert_agree(got_fast, got_reference, what):
    if isinstance(got_fast, Exception) or isinstance(got_reference, Exception):
        assert type(got_fast) is type(got_reference), \
            f"{what}: fast {got_fast!r}, reference {got_reference!r}"
        return
    fast_leaves, reference_leaves = tree_flatten(got_fast)[0], tree_flatten(got_reference)[0]
    assert len(fast_leaves) == len(reference_leaves), what
    for a, b in zip(fast_leaves, reference_leaves):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, \
            f"{what}: {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
        scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL * scale, err_msg=what)


def _inexact(x):
    return isinstance(x, (float, complex)) or (hasattr(x, "dtype") and np.dtype(x.dtype).kind in "fc")


def _weights(value, rng):
    """Random weights shaped like ``value`` (complex for a complex value)."""
    shape = np.shape(value)
    w = rng.standard_normal(shape)
    if np.iscomplexobj(value):
        w = w + 1j * rng.standard_normal(shape)
    return w


def _scalarized(fun, args):
    """A real scalar of the case's arguments: its outputs, weighted by fixed random constants."""
    rng = np.random.default_rng(0)
    outs = fun(*args)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    weights = [_weights(o, rng) for o in outs]

    def loss(*xs):
        ys = fun(*xs)
        ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
        return sum(wnp.sum(wnp.real(y * w)) for y, w in zip(ys, weights))

    return loss


def _case(cases, name, i):
    fun, args = cases[name][i]
    argnums = tuple(k for k, a in enumerate(args) if _inexact(a))
    return fun, args, argnums


def _check_case(cases, name, i):
    fun, args, argnums = _case(cases, name, i)
    if not argnums:
        pytest.skip("no float argument")
    loss = _scalarized(fun, args)
    first = both(lambda: wg.grad(loss, argnums)(*args))
    assert_agree(*first, f"{name}[{i}] gradient")
    if isinstance(first[0], Exception):
        return
    rng = np.random.default_rng(1)
    directions = [_weights(args[k], rng) for k in argnums]

    def along(*xs):
        gs = wg.grad(loss, argnums)(*xs)
        return sum(wnp.sum(wnp.real(g * wnp.conj(v))) for g, v in zip(gs, directions))

    assert_agree(*both(lambda: wg.grad(along, argnums)(*args)), f"{name}[{i}] second order")


@pytest.mark.parametrize("name,i", table.CASE_LIST)
def test_every_rule_case(name, i):
    _check_case(table.CASES, name, i)


@pytest.mark.parametrize("name,i", table.COMPOSED_LIST)
def test_every_composed_case(name, i):
    _check_case(table.COMPOSED, name, i)


def test_the_comparison_sees_a_wrong_rule(monkeypatch):
    """A rule the fast pass applies differently from the reference is caught: sin's VJP, doubled
    only where the fast pass reads it (its fused float rule)."""
    from wengert.rules import elementwise

    prim = elementwise.sin.primitive
    monkeypatch.setattr(prim, "float_vjp", lambda g, out, x: 2.0 * g * np.cos(x))
    got = both(lambda: wg.grad(lambda x: elementwise.sin(x) * 3.0)(0.7))
    with pytest.raises(AssertionError):
        assert_agree(*got, "sin with a wrong fused rule")


# -- random programs ----------------------------------------------------------------------------------

from tests.fuzz.generator import programs  # noqa: E402 - after the helpers this module defines

_SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=_SLOW)
@given(programs(dtypes=("float64", "complex128")))
def test_random_programs(prog):
    f, args, argnums = prog.f, prog.args, prog.argnums
    assert_agree(*both(lambda: wg.grad(f, argnums)(*args)), f"gradient of\n{prog.source}")


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=_SLOW)
@given(programs(families=("elementwise", "reductions", "shape", "products"), dtypes=("float64",),
                pytrees=False, max_steps=4))
def test_random_programs_second_order(prog):
    f, args, argnums = prog.f, prog.args, prog.argnums
    argnums = argnums if isinstance(argnums, tuple) else (argnums,)
    rng = np.random.default_rng(2)
    directions = [rng.standard_normal(np.shape(args[k])) for k in argnums]

    def along(*xs):
        gs = wg.grad(f, argnums)(*xs)
        return sum(wnp.sum(g * v) for g, v in zip(gs, directions))

    assert_agree(*both(lambda: wg.grad(along, argnums)(*args)), f"second order of\n{prog.source}")


# -- what changes the walk: assignments, several outputs, eager tensors, the explicit tape -----------------

def _assigning(x):
    y = wnp.zeros(4) + 1.0
    y[1] = x[0] * x[1]
    z = y * 2.0  # uses the version after the assignment
    y[2:] = wnp.sin(x[1:3])
    y += x[:4]
    return wnp.sum(y * z) + wnp.sum(y ** 2)


def _loop_of_reads(v):
    s = 0.0
    for i in range(len(v)):
        s = s + v[i] * v[i] + 0.5 * wnp.sin(v[i])
    return s


@pytest.mark.parametrize("fun", [_assigning, _loop_of_reads], ids=["assignment", "loop-of-reads"])
def test_assignments_and_reads(fun):
    x = np.random.default_rng(3).standard_normal(5)
    assert_agree(*both(lambda: wg.grad(fun)(x)), fun.__name__)
    assert_agree(*both(lambda: wg.hessian(fun)(x)), fun.__name__ + " hessian")


def test_several_outputs():
    def f(a, b):
        return wnp.tanh(a @ b), (wnp.sum(a * a), b[0] - a[:, 0])

    a, b = np.random.default_rng(4).standard_normal((2, 3, 3))
    cot = (np.ones((3, 3)), (2.0, np.arange(3.0)))
    assert_agree(*both(lambda: wg.vjp(f, a, b)[1](cot)), "vjp of several outputs")
    assert_agree(*both(lambda: wg.jacrev(lambda a: f(a, b)[0])(a)), "jacrev")


def test_eager_tensor_backward():
    def run():
        w = wg.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3), requires_grad=True)
        x = wg.tensor(np.arange(3.0), requires_grad=True)
        h = wnp.tanh(w @ x)
        h2 = h * h
        loss = h2.sum() + (w * w).sum()
        loss.backward()
        return w.grad, x.grad

    assert_agree(*both(run), "Tensor.backward")


def test_explicit_tape():
    def run():
        t = wg.Tape()
        x, y = t.var(0.5), t.var(4.2)
        z = x * y + wnp.sin(x) * wnp.exp(y / 10.0)
        g = z.grad()
        return g.wrt(x), g.wrt(y)

    assert_agree(*both(run), "Tape")


def test_the_reference_pass_is_the_one_swapped_in():
    with reference_pass():
        assert transforms.backward_pass is reference.backward_pass
    assert transforms.backward_pass is fast.backward_pass
