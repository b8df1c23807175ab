"""The explicit tape of the first seed: a list you hold, read backwards by Grad objects."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def test_len_iteration_and_entries():
    tape = wg.Tape()
    x = tape.var(0.5, name="x")
    y = tape.var(4.2, name="y")
    z = x * y + wnp.sin(x)
    entries = list(tape)
    assert len(tape) == 3
    assert [e.operation for e in entries] == ["multiply", "sin", "add"]
    assert entries[0].inputs == (x, y) or (entries[0].inputs[0] is x and entries[0].inputs[1] is y)
    assert entries[2].output is z
    assert entries[1].inputs[0] is x


def test_listing_with_constants_and_keywords():
    tape = wg.Tape()
    v = tape.var(np.array([1.0, 2.0]), name="v")
    s = wnp.sum(v * 2.0, axis=0)
    assert tape.listing({id(s): "s"}) == "v = <array (2,) float64>\na = v * 2.0\ns = sum(a, axis=0)"


def test_grad_is_separate_from_the_tape():
    tape = wg.Tape()
    x, y = tape.var(1.5), tape.var(-0.5)
    a = x * y
    b = wnp.exp(a)
    c = a * a
    gb, gc = b.grad(), c.grad()
    assert gb.wrt(x) == pytest.approx(np.exp(-0.75) * -0.5)
    assert gc.wrt(y) == pytest.approx(2 * (-0.75) * 1.5)
    assert gb.wrt(x) == b.grad().wrt(x)  # reading again gives the same
    assert gc.wrt(a) == pytest.approx(-1.5)  # adjoints of intermediates too


def test_tape_vars_are_their_own_type():
    tape = wg.Tape()
    x = tape.var(2.0)
    assert isinstance(x, wg.Var) and not isinstance(x, wg.Tensor)
    assert (x * x).grad().wrt(x) == 4.0  # a Var's grad is the tape's method, not Tensor's attribute


def test_integer_values_become_float_vars():
    tape = wg.Tape()
    x = tape.var(3)
    assert type(x.value) is float
    assert (x * x).grad().wrt(x) == 6.0


def test_wrt_needs_a_var():
    tape = wg.Tape()
    x = tape.var(1.0)
    with pytest.raises(TypeError, match="Var"):
        (x * 2).grad().wrt(1.0)


def test_tape_vars_inside_grad_transform_are_constants_there():
    tape = wg.Tape()
    w = tape.var(2.0)
    assert wg.grad(lambda x: x * w)(3.0).value == 2.0  # d/dx (x w) = w, itself a Var of the tape
