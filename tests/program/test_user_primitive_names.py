"""A user's primitive may bear any name, a built-in's included: ``wg.compile`` and ``wg.source_grad``
know the rule table's primitives by identity and by their facts (``wengert.core.extend.facts``),
never by name, so a primitive named ``multiply`` computing ``x * c + 1`` is not folded away as
``x * 1`` (it was: 1.5 instead of 4.5), nor one named ``sum`` called with an ``axis`` it lacks.

Each program is checked against its plain call, the tape (``wg.grad``) and central differences.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.rules import rule_table

X = np.array([0.5, -1.0, 2.0])


def central_grad(f, x, eps=1e-6):
    out = np.zeros_like(x)
    for k in range(x.size):
        hi, lo = x.copy(), x.copy()
        hi[k] += eps
        lo[k] -= eps
        out[k] = (f(hi) - f(lo)) / (2 * eps)
    return out


# -- bodies a user's primitive may have, each with its rules ------------------------------------------

def affine(name):
    """``x * c + 1``: with c = 1 it looks like ``multiply(x, 1)`` to a pass that reads names."""
    p = wg.primitive(lambda x, c: x * c + 1.0, name=name)
    wg.defvjp(p, lambda g, out, x, c: g * c, None)
    wg.defjvp(p, lambda t, out, x, c: t * c, None)
    return p


def twice_plus(name):
    """``2x + y``: with y = 0 it looks like ``add(x, 0)``."""
    p = wg.primitive(lambda x, y: 2.0 * x + y, name=name)
    wg.defvjp(p, lambda g, out, x, y: 2.0 * g, lambda g, out, x, y: g)
    wg.defjvp(p, lambda t, out, x, y: 2.0 * t, lambda t, out, x, y: t)
    return p


def tripled(name):
    """``3x``: twice applied it looks like ``-(-x)``, or a sum of a negation."""
    p = wg.primitive(lambda x: 3.0 * x, name=name)
    wg.defvjp(p, lambda g, out, x: 3.0 * g)
    wg.defjvp(p, lambda t, out, x: 3.0 * t)
    return p


def reversed_doubled(name):
    """``2 x[::-1]``: twice applied it looks like a transpose of a transpose."""
    p = wg.primitive(lambda x: 2.0 * x[::-1], name=name)
    wg.defvjp(p, lambda g, out, x: 2.0 * g[::-1])
    wg.defjvp(p, lambda t, out, x: 2.0 * t[::-1])
    return p


def summed_twice(name):
    """``2 sum(x)``, with no ``axis`` keyword: a pass factoring sums would call it with one."""
    p = wg.primitive(lambda x: 2.0 * np.sum(x), name=name)
    wg.defvjp(p, lambda g, out, x: 2.0 * g * wnp.ones_like(x))
    wg.defjvp(p, lambda t, out, x: 2.0 * wnp.sum(t))
    return p


def both_plus_one(name):
    """``x + y + 1`` of three arguments, the first ignored: with x = y = 0 it looks like
    ``where(c, 0, 0)``."""
    p = wg.primitive(lambda c, x, y: x + y + 1.0, name=name)
    wg.defvjp(p, None, lambda g, out, c, x, y: g, lambda g, out, c, x, y: g)
    wg.defjvp(p, None, lambda t, out, c, x, y: t, lambda t, out, c, x, y: t)
    return p


def _check(f, x=X):
    """Compiled value and gradient, and source_grad, against the plain call and the tape."""
    value, want = f(x), wg.grad(f)(x)
    np.testing.assert_allclose(want, central_grad(f, x), rtol=1e-6, atol=1e-8)
    compiled = wg.compile(f)
    np.testing.assert_allclose(compiled(x), value, rtol=1e-13)
    np.testing.assert_allclose(compiled.grad(0)(x), want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(wg.source_grad(f)(x), want, rtol=1e-13, atol=1e-15)


# -- the cases ---------------------------------------------------------------------------------

def test_a_primitive_named_multiply_is_not_folded_as_x_times_one():
    multiply = affine("multiply")

    def f(x):
        return wnp.sum(multiply(x, 1.0))

    assert f(X) == 4.5
    assert wg.compile(f)(X) == 4.5  # was 1.5: the body compiled to sum(x)
    _check(f)


@pytest.mark.parametrize("name", ["add", "subtract"])
def test_a_primitive_named_add_is_not_folded_as_x_plus_zero(name):
    p = twice_plus(name)

    def f(x):
        return wnp.sum(p(x, 0.0) * x)

    _check(f)


def test_a_primitive_named_negative_is_no_negation():
    negative = tripled("negative")

    def f(x):
        return wnp.sum(negative(negative(x)) * x) + wnp.sum(negative(x))

    _check(f)


def test_a_primitive_named_transpose_is_no_transpose():
    transpose = reversed_doubled("transpose")
    w = np.array([1.0, -2.0, 0.5])

    def f(x):
        return wnp.sum(transpose(transpose(x)) * w)

    _check(f)


def test_a_primitive_named_where_is_no_choice():
    where = both_plus_one("where")

    def f(x):
        return wnp.sum(where(x > 0, 0.0 * x, 0.0 * x) * x)

    _check(f)


def test_a_primitive_named_sum_is_called_as_defined():
    """A user's ``sum`` has no ``axis`` keyword (a pass gave it one: TypeError)."""
    sum_ = summed_twice("sum")

    def f(x):
        return sum_(-x) + sum_(x * 3.0)

    _check(f)


@pytest.mark.parametrize("name", ["broadcast_to", "reshape", "astype"])
def test_a_primitive_named_as_a_shape_change_is_not_dropped(name):
    p = affine(name)  # the result has x's shape and dtype: a pass reading names dropped it

    def f(x):
        return wnp.sum(p(x, 2.0) * x)

    _check(f)


@pytest.mark.parametrize("name", ["zeros_like", "ones_like"])
def test_a_primitive_named_as_a_constant_maker_reads_its_argument(name):
    p = tripled(name)

    def f(x):
        return wnp.sum(p(x) * x)

    _check(f)


# -- random built-in names, random bodies ---------------------------------------------------------

NAMES = sorted(rule_table()) + ["dup", "zeros_like", "ones_like", "chooser_weights"]
BODIES = {"affine": affine, "twice_plus": twice_plus, "tripled": tripled, "reversed": reversed_doubled}
UNITS = [0.0, 1.0, -1.0, 2.0]  # what constant folding folds by


def _step(kind, prim, c):
    if kind == "affine":
        return lambda v: prim(v, c)
    if kind == "twice_plus":
        return lambda v: prim(v, c)
    return prim


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(sorted(BODIES)), st.sampled_from(NAMES), st.sampled_from(UNITS)),
                min_size=1, max_size=4),
       st.sampled_from(NAMES), st.sampled_from(UNITS))
def test_user_primitives_with_built_in_names_keep_their_meaning(steps, sum_name, c):
    """A chain of user primitives named after built-ins, called with the constants folding looks for,
    ending in a user ``sum``: compiled and source-transformed, the program means what its call does."""
    chain = [_step(kind, BODIES[kind](name), k) for kind, name, k in steps]
    total = summed_twice(sum_name)
    w = np.array([1.0, -2.0, 0.5])

    def f(x):
        v = x
        for step in chain:
            v = step(v)
        return total(v * w) + wnp.sum(v * c)

    _check(f)
