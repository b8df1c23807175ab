"""Stores of traced values into buffers (issue 27, items 12 and 13).

- A store into a *plain* NumPy array (``y = np.zeros(3); y[0] = x[0]``) cannot carry the derivative:
  every box type, under every transform, gives the one ExitError naming the store, this file and the
  line, and what to write instead (an eager tensor has no transform boundary, so there NumPy's own
  "setting an array element with a sequence" stands, with that ExitError as its ``__cause__``).
- A buffer made from a traced array (``np.zeros_like(x)``, ``ones_like``, ``empty_like``,
  ``full_like``) takes traced stores, as ``torch.zeros_like`` does in PyTorch, under every transform;
  until something traced is stored into it, it behaves as the plain array it is.

Derivatives are checked against central finite differences, PyTorch (index assignment into
``torch.zeros_like``) and JAX (``.at[i].set``).
"""

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.nn as wnn
from tests.support.engines import finite_differences
from wengert.api.checkpointing.recompute import _Held
from wengert.core.exits import ExitError
from wengert.core.trace import BOX_TYPES

HERE = os.path.basename(__file__)
X0 = np.array([1.3, -0.7, 2.1, 0.4])


# -- item 12: a store into a plain array is refused the same way by every box type --------------------

def _line_of(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


def plain_store(x, seen=None):
    y = np.zeros(4)
    v = x[0] * 2.0 if np.ndim(x) else x  # a 0-d x is stored itself (an nn.Parameter)
    if seen is not None:
        seen.append(type(v))
    y[0] = v  # plain-store
    return np.sum(y) + np.sum(x)


def _eager(f, x):
    return f(wg.tensor(x, requires_grad=True))


def _tape(f, x):
    return f(wg.Tape().var(x))


def _parameter(f, x):
    return f(wnn.Parameter(x[0]))


TRANSFORMS = {
    "grad": lambda f, x: wg.grad(f)(x),
    "vjp": lambda f, x: wg.vjp(f, x),
    "jvp": lambda f, x: wg.jvp(f, (x,), (np.ones_like(x),)),
    "jacfwd": lambda f, x: wg.jacfwd(f)(x),
    "jacrev": lambda f, x: wg.jacrev(f)(x),
    "hessian": lambda f, x: wg.hessian(f)(x),
    "vmap": lambda f, x: wg.vmap(f)(np.stack([x, x + 1.0])),
    "checkpoint": lambda f, x: wg.grad(wg.checkpoint(f))(x),
}
EAGER = {"tensor": _eager, "tape": _tape, "parameter": _parameter}
COMPILED = {"compile": lambda f: wg.compile(f), "compile.grad": lambda f: wg.compile(f).grad()}
"""wg.compile's trace refuses the store as every transform does, then builds the program from source."""


def _assert_store_message(error):
    message = str(error)
    assert message.startswith("Storing into a plain NumPy array (buf[i] = x)"), message
    assert f"{HERE}, line {_line_of('# plain-store')}: `y[0] = v  # plain-store`" in message, message
    problem = "would drop its derivative" in message or "its own in each example" in message  # vmap
    assert problem and "np.zeros_like(x)" in message, message
    assert "wnp.index_update" in message and "wnp.stack" in message, message


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_a_store_into_a_plain_array_gives_the_same_error_under_every_transform(transform):
    with pytest.raises(ExitError) as info:
        TRANSFORMS[transform](plain_store, X0.copy())
    _assert_store_message(info.value)


@pytest.mark.parametrize("transform", COMPILED)
def test_wg_compile_builds_a_plain_store_from_source_and_keeps_the_traces_error(transform):
    compiled = COMPILED[transform](plain_store)
    if transform == "compile":
        np.testing.assert_array_equal(compiled(X0.copy()), plain_store(X0.copy()))
    else:  # wg.grad refuses the store: finite differences
        np.testing.assert_allclose(compiled(X0.copy()), finite_differences(plain_store, X0), rtol=1e-7)
    _assert_store_message(compiled.program(X0.copy()).refusal)


@pytest.mark.parametrize("engine", EAGER)
def test_a_store_into_a_plain_array_on_an_eager_value_shows_the_error_as_numpys_cause(engine):
    # no transform boundary to restate it at: NumPy's restatement, with the guard's error as its cause
    with pytest.raises(ValueError, match="setting an array element with a sequence") as info:
        EAGER[engine](plain_store, X0.copy())
    assert isinstance(info.value.__cause__, ExitError)
    _assert_store_message(info.value.__cause__)


def test_every_box_type_gives_the_store_error():
    """Each registered box type reaches the store in one of the runs below; a new box type fails here
    until it is added (and its store refused with the same message)."""
    import wengert.program  # noqa: F401 - registers the program tracer's symbols

    runs = {**TRANSFORMS, **EAGER}
    seen_by_run = {}
    for name, run in runs.items():
        seen = []
        with pytest.raises((ExitError, ValueError)) as info:
            run(lambda x, seen=seen: plain_store(x, seen), X0.copy())
        error = info.value if isinstance(info.value, ExitError) else info.value.__cause__
        assert isinstance(error, ExitError), (name, repr(info.value))
        _assert_store_message(error)
        seen_by_run[name] = set(seen)
    for name, make in COMPILED.items():  # refused by the trace, then built from source
        seen = []
        make(lambda x, seen=seen: plain_store(x, seen))(X0.copy())
        seen_by_run[name] = set(seen)
    covered = set().union(*seen_by_run.values())
    assert _Held in covered and wnn.Parameter in covered
    assert covered == BOX_TYPES, f"box types never stored: {BOX_TYPES - covered}"


# -- item 13: buffers made from a traced array take traced stores --------------------------------------

def writes(x):
    """Every write form into zeros_like / ones_like / empty_like / full_like buffers of a traced x."""
    y = np.zeros_like(x)
    for i in range(len(x)):
        y[i] = x[i] * x[i]  # integer index
    y[1:3] += np.sin(x[:2])  # slice, +=
    y[-1] -= x[0] * x[2]  # negative index, -=
    y[::2] *= x[1]  # strided slice, *=
    z = np.ones_like(x)
    z[2] = np.exp(x[3])
    z[:2] = x[2:]  # slice =
    e = np.empty_like(x)
    e[...] = x * 3.0
    f = np.full_like(x, 0.5)
    f[1] = x[0] ** 3
    return np.sum(y * z) + np.sum(e * f)


def writes_torch(torch, x):
    y = torch.zeros_like(x)
    for i in range(len(x)):
        y[i] = x[i] * x[i]
    y[1:3] += torch.sin(x[:2])
    y[-1] -= x[0] * x[2]
    y[::2] *= x[1]
    z = torch.ones_like(x)
    z[2] = torch.exp(x[3])
    z[:2] = x[2:]
    e = torch.empty_like(x)
    e[...] = x * 3.0
    f = torch.full_like(x, 0.5)
    f[1] = x[0] ** 3
    return torch.sum(y * z) + torch.sum(e * f)


def writes_jax(jnp, x):
    y = jnp.zeros_like(x)
    for i in range(len(x)):
        y = y.at[i].set(x[i] * x[i])
    y = y.at[1:3].add(jnp.sin(x[:2]))
    y = y.at[-1].add(-x[0] * x[2])
    y = y.at[::2].multiply(x[1])
    z = jnp.ones_like(x).at[2].set(jnp.exp(x[3])).at[:2].set(x[2:])
    e = jnp.empty_like(x).at[...].set(x * 3.0)
    f = jnp.full_like(x, 0.5).at[1].set(x[0] ** 3)
    return jnp.sum(y * z) + jnp.sum(e * f)


def _by_jvp(f, x):
    return np.array([wg.jvp(f, (x,), (e,))[1] for e in np.eye(len(x))])


def _by_tensor(f, x):
    t = wg.tensor(x, requires_grad=True)
    f(t).backward()
    return t.grad.value


GRADIENTS = {
    "grad": lambda f, x: wg.grad(f)(x),
    "vjp": lambda f, x: wg.vjp(f, x)[1](1.0)[0],
    "jvp": _by_jvp,
    "jacfwd": lambda f, x: wg.jacfwd(f)(x),
    "jacrev": lambda f, x: wg.jacrev(f)(x),
    "compile": lambda f, x: wg.compile(f).grad()(x),
    "compile(grad)": lambda f, x: wg.compile(wg.grad(f))(x),
    "source_grad": lambda f, x: wg.source_grad(f)(x),
    "checkpoint": lambda f, x: wg.grad(wg.checkpoint(f))(x),
    "tensor": _by_tensor,
    "vmap(grad)": lambda f, x: wg.vmap(wg.grad(f))(np.stack([x, x]))[1],
    "grad(vmap)": lambda f, x: wg.grad(lambda v: np.sum(wg.vmap(f)(v[None])))(x),
}


@pytest.mark.parametrize("engine", GRADIENTS)
def test_every_write_form_into_a_buffer_against_finite_differences(engine):
    x = X0.copy()
    got = GRADIENTS[engine](writes, x)
    np.testing.assert_allclose(got, finite_differences(writes, x), rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(x, X0)  # the caller's array is not written


def test_values_are_numpys():
    x = X0.copy()
    want = writes(x)  # plain NumPy: no transform
    assert wg.vmap(writes)(np.stack([x, x + 1.0]))[0] == pytest.approx(want, rel=1e-14)
    assert wg.compile(writes)(x) == pytest.approx(want, rel=1e-14)
    assert wg.jvp(writes, (x,), (x,))[0] == pytest.approx(want, rel=1e-14)
    assert float(_eager(writes, x).value) == pytest.approx(want, rel=1e-14)


def test_the_hessian_of_buffer_writes_against_jax_and_pytorch():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x = X0.copy()
    want = np.asarray(jax.hessian(lambda v: writes_jax(jax.numpy, v))(x))
    np.testing.assert_allclose(wg.hessian(writes)(x), want, rtol=1e-10)
    np.testing.assert_allclose(wg.jacfwd(wg.grad(writes))(x), want, rtol=1e-10)
    torch = pytest.importorskip("torch")
    t = torch.tensor(x)
    h = torch.autograd.functional.hessian(lambda v: writes_torch(torch, v), t).numpy()
    np.testing.assert_allclose(want, h, rtol=1e-10)


def test_the_gradient_against_pytorch_and_jax():
    x = X0.copy()
    got = wg.grad(writes)(x)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    np.testing.assert_allclose(got, np.asarray(jax.grad(lambda v: writes_jax(jax.numpy, v))(x)), rtol=1e-12)
    torch = pytest.importorskip("torch")
    t = torch.tensor(x, requires_grad=True)
    writes_torch(torch, t).backward()
    np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-12)


def tangent_style(x):
    """Google Tangent's pattern: a zeros_like buffer filled element by element in a loop."""
    y = np.zeros_like(x)
    for i in range(x.shape[0]):
        y[i] = x[i] * 2.0 + x[i - 1]
    return np.sum(y * y)


@pytest.mark.parametrize("engine", GRADIENTS)
def test_tangents_zeros_like_loop(engine):
    x = X0.copy()
    np.testing.assert_allclose(GRADIENTS[engine](tangent_style, x), finite_differences(tangent_style, x),
                               rtol=1e-6)


def test_a_matrix_buffer_under_vmap_and_jacobians():
    def f(m):
        out = np.zeros_like(m)
        out[0, :] = m[1, :] * m[0, :]
        out[:, 1] += m[:, 0]
        return out

    m = np.arange(1.0, 7.0).reshape(2, 3)
    jac = wg.jacfwd(f)(m)
    np.testing.assert_allclose(wg.jacrev(f)(m), jac, rtol=1e-12)
    fd = np.stack([(f(m + 1e-6 * e) - f(m - 1e-6 * e)) / 2e-6 for e in np.eye(6).reshape(6, 2, 3)], -1)
    np.testing.assert_allclose(jac, fd.reshape(2, 3, 2, 3), rtol=1e-6, atol=1e-8)
    batch = np.stack([m, m * 2.0])
    np.testing.assert_allclose(wg.vmap(f)(batch), np.stack([f(m), f(m * 2.0)]))


# -- an untouched buffer is the plain array it is ----------------------------------------------------

def reads_untouched(x):
    y = np.zeros_like(x)
    y[1] = 3.0  # a constant store keeps it constant
    assert float(y[1]) == 3.0 and y.tolist() == [0.0, 3.0, 0.0, 0.0]
    assert type(np.asarray(y)) is np.ndarray and y.item(1) == 3.0
    branch = 1.0 if y[1] > 0 else -1.0  # Python control flow on it
    total = math.fsum(y.tolist())  # a plain-Python consumer
    return np.sum(x * x) * branch + total


UNTOUCHED = {name: GRADIENTS[name] for name in ("grad", "vjp", "jvp", "jacfwd", "jacrev", "tensor")}


@pytest.mark.parametrize("engine", UNTOUCHED)
def test_a_buffer_nothing_traced_was_stored_into_converts_as_a_plain_array(engine):
    x = X0.copy()
    np.testing.assert_allclose(UNTOUCHED[engine](reads_untouched, x), 2.0 * x, rtol=1e-12)


def test_the_hessian_through_an_untouched_buffer():
    np.testing.assert_allclose(wg.hessian(reads_untouched)(X0.copy()), 2.0 * np.eye(4), rtol=1e-12)


def test_a_returned_untouched_buffer_has_a_zero_derivative():
    x = X0.copy()
    value, tangent = wg.jvp(lambda v: np.zeros_like(v), (x,), (x,))
    assert type(value) is np.ndarray and np.all(value == 0) and np.all(tangent == 0)
    np.testing.assert_array_equal(wg.jacrev(np.ones_like)(x), np.zeros((4, 4)))
    np.testing.assert_array_equal(wg.jacfwd(np.ones_like)(x), np.zeros((4, 4)))


def test_an_integer_buffer_stays_a_plain_array():
    def f(x):
        y = np.zeros_like(x, dtype=int)
        assert type(y) is np.ndarray
        y[0] = 7
        return np.sum(x) * y[0]

    np.testing.assert_allclose(wg.grad(f)(X0.copy()), 7.0 * np.ones(4))


def test_full_like_with_a_traced_fill_is_a_new_array():
    def f(x):
        y = np.full_like(x, x[0])
        y[1] = x[2] * 5.0  # a view of the fill would refuse this write (broadcast_to is read-only)
        return np.sum(y * y)

    x = X0.copy()
    np.testing.assert_allclose(wg.grad(f)(x), finite_differences(f, x), rtol=1e-6)
    np.testing.assert_allclose(_by_jvp(f, x), finite_differences(f, x), rtol=1e-6)


# -- property: shapes, indices and write forms chosen by Hypothesis -----------------------------------

@st.composite
def programs(draw):
    n = draw(st.integers(2, 6))
    ops = draw(st.lists(st.tuples(st.sampled_from(["=", "+=", "-=", "*="]),
                                  st.integers(0, n - 1), st.integers(0, n - 1),
                                  st.sampled_from(["int", "slice", "neg"])), min_size=1, max_size=6))
    x = np.array(draw(st.lists(st.floats(-2.0, 2.0), min_size=n, max_size=n)))
    return ops, x


def _program(ops, make, square, sin):
    def f(x):
        y = make(x)
        y[...] = x * 0.5  # traced from the start: see test_augmented_write_into_an_untouched_buffer
        for op, i, j, kind in ops:
            key = i if kind == "int" else (slice(min(i, j), max(i, j) + 1) if kind == "slice" else i - len(x))
            v = square(x[j]) + sin(x[i]) if kind != "slice" else x[key] * x[j]
            if op == "=":
                y[key] = v
            elif op == "+=":
                y[key] += v
            elif op == "-=":
                y[key] -= v
            else:
                y[key] *= v
        return (y * y).sum()
    return f


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_writes_into_a_buffer_match_finite_differences_and_pytorch(program):
    ops, x = program
    f = _program(ops, np.zeros_like, lambda v: v * v, np.sin)
    fd = finite_differences(f, x)
    np.testing.assert_allclose(wg.grad(f)(x), fd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_by_jvp(f, x), fd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wg.vmap(wg.grad(f))(x[None])[0], fd, rtol=1e-5, atol=1e-6)
    torch = pytest.importorskip("torch")
    t = torch.tensor(x, requires_grad=True)
    _program(ops, torch.zeros_like, lambda v: v * v, torch.sin)(t).backward()
    np.testing.assert_allclose(wg.grad(f)(x), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_augmented_write_into_an_untouched_buffer():
    """``y[0:2] += v`` before anything traced was stored in y: Python reads the view ``t = y[0:2]``
    (a view of the buffer, marked so), adds in place, and assigns it back."""
    def f(x):
        y = np.zeros_like(x)
        y[0:2] += x[:2] * x[1]
        t = y[1:]
        t *= x[0]
        return np.sum(y * y)

    fd = finite_differences(f, X0.copy())
    np.testing.assert_allclose(wg.grad(f)(X0.copy()), fd, rtol=1e-6)
    np.testing.assert_allclose(wg.jacfwd(f)(X0.copy()), fd, rtol=1e-6)
    np.testing.assert_allclose(wg.vmap(wg.grad(f))(X0[None].copy())[0], fd, rtol=1e-6)
    np.testing.assert_allclose(wg.compile(f).grad(0)(X0.copy()), fd, rtol=1e-6)
    np.testing.assert_allclose(wg.hessian(f)(X0.copy()), wg.jacfwd(wg.grad(f))(X0.copy()), rtol=1e-10)
