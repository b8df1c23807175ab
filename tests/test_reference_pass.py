"""The fast backward pass (``reverse.backward_pass``) against the reference pass
(``wengert.reference``) on every case of the systematic rule test, first and second order; on random
programs (the fuzz generator); on assignment programs, several outputs, ``Tape`` and ``Tensor``.

Both passes run the same recording; only the pass that reads it differs, so they must agree to
rounding (the fast pass adds in another order, in place)."""

import contextlib
import importlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import given

import wengert as wg
import wengert.numpy as wnp
from fuzz import profiles
from fuzz.generator import programs
from test_rule_table import CASE_LIST, CASES, COMPOSED, COMPOSED_LIST
from wengert.ops import elementwise
from wengert.ops.indexing import getitem
from wengert.reference import reference_backward_pass
from wengert.tree import tree_flatten, tree_unflatten

_USERS = tuple(importlib.import_module(f"wengert.{name}") for name in ("transforms", "tensor", "tape"))
"""The modules that call ``backward_pass``."""


def _reference(seeds, retain_graph=True, keep_all=False, tape=None):
    """``backward_pass``'s signature and results, computed by the reference pass."""
    adjoints = reference_backward_pass(seeds, tape)
    return adjoints, (tape if tape is not None else list(adjoints))


@contextlib.contextmanager
def reference_pass():
    """Every backward pass run inside (nested ones too) is the reference pass."""
    with contextlib.ExitStack() as stack:
        for module in _USERS:
            stack.enter_context(mock.patch.object(module, "backward_pass", _reference))
        yield


def _random_like(tree, rng):
    leaves, treedef = tree_flatten(tree)
    out = []
    for x in leaves:
        x = np.asarray(getattr(x, "value", x))
        r = rng.standard_normal(x.shape)
        if x.dtype.kind == "c":
            r = r + 1j * rng.standard_normal(x.shape)
        r = r.astype(x.dtype) if x.dtype.kind in "fc" else r
        out.append(float(r) if x.ndim == 0 and x.dtype == np.float64 else r)
    return tree_unflatten(treedef, out)


def _assert_same(fast, ref, what):
    """Equal to rounding: same structure and shapes, values within a few ulps of the largest."""
    f_leaves, f_def = tree_flatten(fast)
    r_leaves, r_def = tree_flatten(ref)
    assert f_def == r_def, f"{what}: structure {f_def} against the reference's {r_def}"
    for k, (f, r) in enumerate(zip(f_leaves, r_leaves)):
        f, r = np.asarray(f), np.asarray(r)
        assert f.shape == r.shape, f"{what} leaf {k}: shape {f.shape} against the reference's {r.shape}"
        single = np.float32 in (f.dtype.type, r.dtype.type) or np.complex64 in (f.dtype.type, r.dtype.type)
        rtol = 1e-5 if single else 1e-11
        scale = max(np.max(np.abs(r), initial=0.0), np.max(np.abs(f), initial=0.0), 1e-300)
        np.testing.assert_allclose(f, r, rtol=rtol, atol=rtol * scale,
                                   err_msg=f"{what} leaf {k}: fast pass against reference pass")


def _both(compute):
    """``compute()`` with the fast pass, then with the reference pass."""
    fast = compute()
    with reference_pass():
        ref = compute()
    return fast, ref


def compare_vjps(fun, args, order):
    """The fast pass's VJPs of ``fun`` at ``args`` equal the reference pass's, to ``order``."""
    rng = np.random.default_rng(0)
    u = _random_like(fun(*args), rng)

    def first(*xs):
        return wg.vjp(fun, *xs)[1](u)

    _assert_same(*_both(lambda: first(*args)), f"vjp({getattr(fun, '__name__', fun)})")
    if order > 1:
        u2 = _random_like(first(*args), rng)
        fast, ref = _both(lambda: wg.vjp(first, *args)[1](u2))
        _assert_same(fast, ref, f"vjp(vjp({getattr(fun, '__name__', fun)}))")


# -- every rule case, as the systematic test enumerates them ---------------------------------------

@pytest.mark.parametrize("name,i", CASE_LIST)
def test_primitive_rules_agree_with_the_reference_pass(name, i):
    fun, args = CASES[name][i]
    compare_vjps(fun, args, order=2)  # the systematic test checks every case to second order


@pytest.mark.parametrize("name,i", COMPOSED_LIST)
def test_composed_functions_agree_with_the_reference_pass(name, i):
    fun, args = COMPOSED[name][i]
    compare_vjps(fun, args, order=2)


# -- the comparison can fail: rules that only the fast pass uses, broken on purpose ----------------

def _broken_sin_float_vjp(g, out, x):
    return 2.0 * g  # not cos(x) * g


def _broken_getitem_accumulate(buf, g, out, x, idx):
    buf[idx] += 2 * g  # twice the contribution


@pytest.mark.parametrize("prim,attribute,broken,fun,x", [
    (elementwise.sin.primitive, "float_vjp", _broken_sin_float_vjp, lambda x: wnp.sin(x) * x, 0.7),
    (getitem.primitive, "vjp_accumulate", (_broken_getitem_accumulate,),
     lambda v: v[1] * v[1] + v[0], np.array([0.3, 0.5, 0.9])),
])
def test_a_fast_path_rule_broken_on_purpose_is_caught(prim, attribute, broken, fun, x):
    compare_vjps(fun, (x,), order=1)  # intact, they agree
    with mock.patch.object(prim, attribute, broken):
        with pytest.raises(AssertionError, match="fast pass against reference pass"):
            compare_vjps(fun, (x,), order=1)


def test_an_ordinary_rule_broken_on_purpose_changes_the_reference_too():
    """The reference reads the same rule table: a wrong ordinary rule is the rule test's to find,
    and both passes must still agree (they read the same rules)."""
    prim = elementwise.cos.primitive
    with mock.patch.object(prim, "vjps", (lambda g, out, x: 3.0 * g,)):
        compare_vjps(wnp.cos, (np.array([0.1, 0.2]),), order=1)
        assert wg.grad(lambda x: wnp.sum(wnp.cos(x)))(np.array([0.1, 0.2]))[0] == 3.0


# -- random programs -------------------------------------------------------------------------------

@profiles.current()
@given(programs(max_steps=8))
def test_random_programs_agree_with_the_reference_pass(program):
    f, f_vec, args, argnums = program.f, program.f_vec, program.args, program.argnums
    with np.errstate(all="ignore"):
        _assert_same(*_both(lambda: wg.grad(f, argnums)(*args)), "wg.grad(f)")
        out = f_vec(*args)
        u = _random_like(out, np.random.default_rng(1))
        _assert_same(*_both(lambda: wg.vjp(f_vec, *args)[1](u)), "wg.vjp(f_vec)")
        if program.dtype is np.float64:  # second order: the VJP of the gradient
            grad_f = wg.grad(f, argnums)
            u2 = _random_like(grad_f(*args), np.random.default_rng(2))
            _assert_same(*_both(lambda: wg.vjp(grad_f, *args)[1](u2)), "wg.vjp(wg.grad(f))")


# -- assignment, several outputs, Tape and Tensor --------------------------------------------------

def mutating(x, y):
    z = x * y
    x[0] = 5.0
    x[x > 0.5] = 0.0
    x += z
    x *= 2
    x[1] += x[2] * 3
    x[np.array([3, 3])] -= y[0]
    y[1:3] = x[0:2] * y[3]
    return wnp.sum(x * z) + wnp.sum(wnp.sin(y))


def scalar_loop(v):
    s = 0.0
    for i in range(len(v)):
        s = s + v[i] * v[i] + 0.5 * wnp.sin(v[i])
    return s


@pytest.mark.parametrize("fun", [mutating, scalar_loop])
def test_assignment_and_loops_agree_to_second_order(fun):
    rng = np.random.default_rng(3)
    args = (rng.standard_normal(5), rng.standard_normal(5))[:fun.__code__.co_argcount]
    compare_vjps(lambda *xs: fun(*[x.copy() if isinstance(x, np.ndarray) else x for x in xs]), args, order=2)


def test_several_outputs_agree():
    def f(x, y):
        a = wnp.sin(x) * y
        return {"a": a, "b": wnp.sum(a * x), "c": (x[1] * 2.0, wnp.exp(y))}

    rng = np.random.default_rng(4)
    compare_vjps(f, (rng.standard_normal(3), rng.standard_normal(3)), order=2)


def test_tape_adjoints_of_every_variable_agree():
    def run():
        tape = wg.Tape()
        x = tape.var(0.5)
        y = tape.var(np.array([4.2, -1.0]))
        z = wnp.sum(wnp.sin(x * y) + y * y) * x
        grads = z.grad()
        return [grads.wrt(x), grads.wrt(y)]

    _assert_same(*_both(run), "Var.grad")


def test_tensor_backward_agrees_with_mutation_of_a_constant_tensor():
    def run():
        w = wg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
        buf = wg.tensor(np.zeros(3))
        buf[1] = w[0] * w[2]
        buf[2] = wnp.sin(w[1])
        (wnp.sum(buf * buf) + w[0]).backward()
        return w.grad.numpy()

    _assert_same(*_both(run), "Tensor.backward")
