"""A constant array written by the function after an operation read it: every engine differentiates
the function as NumPy runs it.

A work buffer filled anew on each pass of a loop (``tmp[:] = data[t]``, then ``w * tmp``) used to
give ``wg.grad`` and its reverse-mode relatives every pass's derivative at the last pass's values,
and ``wg.compile`` both a wrong value and a wrong gradient where a plain ``y += 1.0`` followed
``x * y``: the recording held the array itself, and read it after the write. The recordings now
hold each constant as it was when the operation read it (``engines.kept``, ``tracing.ProgramBuilder``).

The table below writes into plain arrays in every way NumPy offers (augmented assignment, slice
assignment, ``np.copyto``, ``fill``, ``out=``, through a view or through the base, index arrays,
sequences, conditions, matrices, names sharing one array), and into Python lists of numbers, and
runs each function through every entry point. The reference is the function itself, run by NumPy
on plain arrays, differentiated by central differences. An entry point may refuse a function with
an error that says why; it may never return another number.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.core.errors import TracingError
from wengert.engines import kept

DATA = np.array([[0.3, -1.2, 0.7], [1.5, 0.2, -0.4], [-0.6, 0.9, 1.1], [0.25, -0.75, 0.5]])
W0 = np.array([0.4, -0.3, 0.8])


def buffer_loop(w):
    tmp = np.empty(3)
    s = 0.0
    for t in range(4):
        tmp[:] = DATA[t]
        s = s + wnp.sum(wnp.sin(w * tmp))
    return s


def augmented_after_use(w):
    y = np.ones(3)
    z = w * y
    y += 2.0
    return wnp.sum(z * z + y * w)


def copyto_after_use(w):
    buf = DATA[0].copy()
    z = wnp.exp(w * buf)
    np.copyto(buf, DATA[1])
    return wnp.sum(z) + wnp.sum(w * buf)


def fill_after_use(w):
    buf = np.full(3, 0.5)
    z = wnp.tanh(buf * w)
    buf.fill(-2.0)
    return wnp.sum(z * buf)


def out_argument_after_use(w):
    a = DATA[2].copy()
    z = wnp.sum(w ** 2 * a)
    np.multiply(a, 3.0, out=a)
    return z + wnp.sum(w * a)


def view_read_base_written(w):
    base = np.ones(4)
    z = w * base[1:]
    base[2] = 5.0
    return wnp.sum(z ** 2) + wnp.sum(w * base[:3])


def base_read_view_written(w):
    base = np.array([1.0, 2.0, 3.0, 4.0])
    z = wnp.sin(w * base[:3])
    view = base[1:]
    view *= -1.0
    return wnp.sum(z) + wnp.sum(w * base[:3])


def index_array_written(w):
    idx = np.array([0, 1, 1])
    z = w[idx]
    idx[:] = 2
    return wnp.sum(z ** 3) + wnp.sum(w[idx] ** 2)


def condition_written(w):
    mask = np.array([True, False, True])
    z = wnp.where(mask, w ** 2, wnp.sin(w))
    mask[:] = ~mask
    return wnp.sum(z) + wnp.sum(wnp.where(mask, w, 0.0))


def matrix_written(w):
    A = np.array([[1.0, 0.5, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, -1.0]])
    z = A @ w
    A *= 2.0
    return wnp.sum(z * z) + wnp.sum(A @ w)


def sequence_member_written(w):
    c = np.array([0.5, 1.5])
    z = wnp.concatenate([w * w, c * w[:2]])
    c[:] = [-3.0, 4.0]
    return wnp.sum(z ** 2) + wnp.sum(c * w[1:])


def same_array_two_names(w):
    y = np.zeros(3)
    alias = y
    z = w * y
    alias += 1.5
    return wnp.sum(z + y * w * w)


def view_written_then_read_through_base(w):
    base = np.zeros(3)
    view = base[1:]
    view += 1.0
    return wnp.sum(base * w * w)


def written_each_pass(w):
    acc = np.zeros(3)
    s = 0.0
    for t in range(3):
        acc += DATA[t]
        s = s + wnp.sum(wnp.cos(acc * w))
    return s


def list_item_written(w):
    # a Python list of numbers is written into as an array is
    factors = [1.0, 2.0, 3.0]
    z = w * factors
    factors[0] = 5.0
    return wnp.sum(z * z) + wnp.sum(wnp.multiply(w, factors))


def list_refilled_each_pass(w):
    row = [0.0, 0.0, 0.0]
    s = 0.0
    for t in range(3):
        row[:] = list(DATA[t])
        s = s + wnp.sum(wnp.sin(wnp.multiply(w, row)))
    return s


FUNCTIONS = [buffer_loop, augmented_after_use, copyto_after_use, fill_after_use, out_argument_after_use,
             view_read_base_written, base_read_view_written, index_array_written, condition_written,
             matrix_written, sequence_member_written, same_array_two_names,
             view_written_then_read_through_base, written_each_pass, list_item_written,
             list_refilled_each_pass]


def _numpy_gradient(f, w, h=1e-6):
    """Central differences of ``f`` run by NumPy on plain arrays (the reference)."""
    g = np.zeros_like(w)
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = h
        g[i] = (float(f(w + e)) - float(f(w - e))) / (2 * h)
    return g


def _grad_by(engine, f, w):
    if engine == "grad":
        return wg.grad(f)(w)
    if engine == "value_and_grad":
        value, g = wg.value_and_grad(f)(w)
        np.testing.assert_allclose(value, f(w.copy()), rtol=1e-13)
        return g
    if engine == "vjp":
        value, pullback = wg.vjp(f, w)
        np.testing.assert_allclose(value, f(w.copy()), rtol=1e-13)
        return pullback(1.0)[0]
    if engine == "jacrev":
        return wg.jacrev(f)(w)
    if engine == "jacfwd":
        return wg.jacfwd(f)(w)
    if engine == "compile":
        compiled = wg.compile(f)
        np.testing.assert_allclose(compiled(w), f(w.copy()), rtol=1e-13)
        np.testing.assert_allclose(compiled(w + 0.1), f(w + 0.1), rtol=1e-13)  # a second call: the same
        return compiled.grad()(w)
    if engine == "program":
        program = wg.Program.from_trace(f, w)
        np.testing.assert_allclose(program(w), f(w.copy()), rtol=1e-13)
        return program.grad()(w)
    if engine == "source_grad":
        return wg.source_grad(f)(w)
    raise AssertionError(engine)


ENGINES = ["grad", "value_and_grad", "vjp", "jacrev", "jacfwd", "compile", "program", "source_grad"]
REFUSALS = (TracingError, TypeError, ValueError, NotImplementedError)
"""What an entry point may raise instead of an answer (with a message saying why); never a wrong number."""


def _check(engine, f, w):
    expected = _numpy_gradient(f, w.copy())
    try:
        got = _grad_by(engine, f, w.copy())
    except REFUSALS as e:
        assert str(e), f"{engine} refused {f.__name__} without saying why"
        return False
    np.testing.assert_allclose(np.asarray(got, dtype=float), expected, rtol=1e-6, atol=1e-7,
                               err_msg=f"{engine} of {f.__name__}")
    return True


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("f", FUNCTIONS, ids=lambda f: f.__name__)
def test_a_constant_written_after_it_was_read(engine, f):
    _check(engine, f, W0)


@pytest.mark.parametrize("engine", ["grad", "vjp", "jacrev", "compile", "program"])
def test_the_buffer_loop_is_answered_not_refused(engine):
    """The commonest case, a work buffer filled anew on each pass, is differentiated by every
    engine that traces (not refused)."""
    assert _check(engine, buffer_loop, W0)


def test_the_buffer_loop_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def f(w):
        return sum(jnp.sum(jnp.sin(w * DATA[t])) for t in range(4))

    expected = np.asarray(jax.grad(f)(W0))
    for engine in ("grad", "vjp", "jacrev", "compile", "source_grad"):
        np.testing.assert_allclose(_grad_by(engine, buffer_loop, W0.copy()), expected, rtol=1e-13,
                                   err_msg=engine)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=12, max_size=12),
       st.lists(st.floats(-1, 1), min_size=3, max_size=3), st.sampled_from(["grad", "vjp", "compile"]))
def test_a_buffer_refilled_with_random_rows(rows, w, engine):
    data = np.array(rows).reshape(4, 3)

    def f(w):
        tmp = np.empty(3)
        s = 0.0
        for t in range(4):
            tmp[:] = data[t]
            s = s + wnp.sum(wnp.sin(w * tmp) * tmp)
        return s

    w = np.array(w)
    expected = sum(np.cos(w * data[t]) * data[t] * data[t] for t in range(4))
    np.testing.assert_allclose(_grad_by(engine, f, w), expected, rtol=1e-12, atol=1e-14)


# -- the copies ----------------------------------------------------------------------------------------

def test_an_unchanged_array_is_copied_once_and_a_changed_one_again():
    store = {}
    a = np.array([1.0, 2.0, 3.0])
    first = kept.kept_array(store, a)
    assert first is not a and not first.flags.writeable
    assert kept.kept_array(store, a) is first  # unchanged: the same copy
    a[0] = 7.0
    second = kept.kept_array(store, a)
    assert second is not first and second[0] == 7.0 and first[0] == 1.0


def test_the_sign_of_zero_and_nan_count_as_bytes():
    store = {}
    a = np.array([0.0, np.nan])
    first = kept.kept_array(store, a)
    assert kept.kept_array(store, a) is first  # nan equals itself, byte for byte
    a[0] = -0.0
    second = kept.kept_array(store, a)
    assert second is not first and np.signbit(second[0])


def test_a_read_only_constant_is_not_copied():
    a = np.array([1.0, 2.0])
    a.flags.writeable = False
    assert kept.kept_array({}, a) is a
    view = np.arange(3.0)[1:]
    view.flags.writeable = False  # a read-only view of writeable memory: its base may still change
    assert kept.kept_array({}, view) is not view


def test_eager_tensors_still_refuse_a_write_into_what_they_saved():
    w = wg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    c = wg.tensor(np.ones(3))
    y = wnp.sum(w * c)
    c[0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()
