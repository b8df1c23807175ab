"""Element writes into a traced buffer cost O(1) memory each, and stay right.

``y[i] = v`` on a traced ``y`` records a functional update and rebinds ``y`` (``engines.mutation``);
the overwritten version's array is dropped from the graph where no rule reads it. These tests check
the cost as a complexity (tracemalloc's peak for n writes against 4n writes: linear, not quadratic;
no timing) and that nothing a backward pass reads was dropped: buffers read by nonlinear operations
between writes, under every transform, against PyTorch, JAX's ``.at[].set/add/multiply`` and finite
differences, with Hypothesis choosing the sequence of writes and reads.
"""

import gc
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences as _fd_grad

# -- memory: n writes against 4n writes --------------------------------------------------------------

def _set_loop(x):
    y = x * 0.0
    for i in range(x.shape[0]):
        y[i] = x[i] * 2.0
    return wnp.sum(y * y)


def _augmented_loop(x):
    y = x * 1.0
    for i in range(x.shape[0]):
        y[i] += x[i]
        y[i] *= 1.5
        y[i] -= 0.5
    return wnp.sum(y)


def _through_a_view(x):
    y = x * 0.0
    r = y[1:]
    for i in range(x.shape[0] - 1):
        r[i] = x[i] * 2.0
    return wnp.sum(y * y)


def _recurrence(x):  # each write reads the element written before it
    y = x * 1.0
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * 0.5 + x[i]
    return wnp.sum(y)


def _small_buffer(x):  # a buffer under saving.MIN_BYTES, written many times over
    y = x[:400] * 0.0
    for i in range(x.shape[0]):
        y[i % 400] = y[i % 400] + x[i]
    return wnp.sum(y * y)


def _eager(x):
    t = wg.tensor(x, requires_grad=True)
    y = t * 0.0
    for i in range(x.shape[0]):
        y[i] = t[i] * 2.0
    (y * y).sum().backward()
    return t.grad


def _second_order(x):
    return wg.grad(lambda z: wnp.sum(wg.grad(_recurrence)(z) * z))(x)


def _batched(x):  # wg.vmap of wg.grad: the versions' values are batches
    return wg.vmap(wg.grad(_set_loop))(np.stack([x, 2.0 * x]))


def _peak(fun, n):
    x = np.linspace(0.0, 1.0, n)
    fun(x[:4])  # caches and first-call work, not counted
    gc.collect()
    tracemalloc.start()
    try:
        fun(x)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fun, n", [
    (wg.grad(_set_loop), 400), (wg.grad(_augmented_loop), 300), (wg.grad(_through_a_view), 400),
    (wg.grad(_recurrence), 400), (_eager, 400), (_second_order, 150), (_batched, 250),
], ids=["set", "augmented", "view", "recurrence", "eager-tensor", "grad-of-grad", "vmap-of-grad"])
def test_peak_memory_grows_linearly_with_the_number_of_element_writes(fun, n):
    # Quadratic growth (a buffer kept per write, as before) gives a ratio near 16; linear near 4.
    small, large = _peak(fun, n), _peak(fun, 4 * n)
    assert large / small < 7, f"peak {small:,} bytes for {n} writes, {large:,} for {4 * n}"


@pytest.mark.parametrize("loop, buffer", [(_set_loop, 2000), (_small_buffer, 400)], ids=["large", "small"])
def test_a_write_costs_less_than_half_a_buffer(loop, buffer):
    n = 2000
    per_write = _peak(wg.grad(loop), n) / n
    assert per_write < 8 * buffer / 2, f"{per_write:.0f} bytes per write into a buffer of {8 * buffer} bytes"


# -- a buffer read by a nonlinear operation, then written, then used ----------------------------------

def _read_write_read(x, w=None):
    """``y * y`` saves y, writes change y, and both versions are used. For PyTorch (``w``, its
    namespace) a saved element or buffer is copied first (``+ 0.0``): PyTorch refuses to differentiate
    through a saved tensor changed in place, where wengert, like JAX, keeps the value it read."""
    m = wnp if w is None else w
    snap = (lambda v: v) if w is None else (lambda v: v + 0.0)
    y = x * 1.0
    square = snap(y) * snap(y)  # saves y as it is now
    y[0] = m.sin(x[1])
    y[2] += x[0] * snap(y[1])
    y[1:3] *= 2.0
    cube = snap(y) * snap(y) * snap(y)  # reads the new y
    y[3] = snap(y[3]) * x[5]
    y[4] -= y[0]
    return m.sum(square * y) + m.sum(cube) + m.sum(m.exp(y) * x)


@pytest.mark.parametrize("size", [6, 700])  # below and above saving.MIN_BYTES: the two saving paths
def test_a_buffer_read_then_overwritten_gives_finite_differences(size):
    x = np.linspace(0.1, 1.2, size)
    want = _fd_grad(lambda v: float(_read_write_read(v)), x)
    np.testing.assert_allclose(wg.grad(_read_write_read)(x), want, rtol=1e-6, atol=1e-6)


def _torch_grad(f, x):
    torch = pytest.importorskip("torch")
    t = torch.tensor(x, requires_grad=True)
    f(t, torch).backward()
    return t.grad.numpy()


@pytest.mark.parametrize("size", [6, 700])
def test_a_buffer_read_then_overwritten_matches_pytorch_under_grad_and_on_tensors(size):
    x = np.linspace(0.1, 1.2, size)
    want = _torch_grad(_read_write_read, x)
    np.testing.assert_allclose(wg.grad(_read_write_read)(x), want, rtol=1e-12, atol=1e-12)
    t = wg.tensor(x, requires_grad=True)
    _read_write_read(t).backward()
    np.testing.assert_allclose(t.grad, want, rtol=1e-12, atol=1e-12)


def test_the_element_write_loop_matches_pytorch():
    x = np.linspace(-1.0, 1.0, 600)

    def f(v, m=None):
        y = v * 0.0
        for i in range(v.shape[0]):
            y[i] = v[i] * 2.0 + (y[i - 1] if i else 0.0) * 0.5
        return (y * y).sum()
    np.testing.assert_allclose(wg.grad(f)(x), _torch_grad(f, x), rtol=1e-12)


def _jax_program(jnp):
    def f(x):
        y = x * 1.0
        square = y * y
        y = y.at[0].set(jnp.sin(x[1]))
        y = y.at[2].add(x[0] * y[1])
        y = y.at[1:3].multiply(2.0)
        cube = y * y * y
        y = y.at[3].set(y[3] * x[5])
        y = y.at[4].add(-y[0])
        return jnp.sum(square * y) + jnp.sum(cube) + jnp.sum(jnp.exp(y) * x)
    return f


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax, jax.numpy


@pytest.mark.parametrize("size", [6, 700])
def test_second_order_forward_mode_vmap_compile_and_checkpoint_through_writes_match_jax(size):
    jax, jnp = _jax()
    fj = _jax_program(jnp)
    x = np.linspace(0.1, 1.2, size)
    t = np.cos(np.arange(size) * 1.0)
    want_grad = np.asarray(jax.grad(fj)(x))
    np.testing.assert_allclose(wg.compile(_read_write_read).grad(0)(x), want_grad, rtol=1e-12)
    np.testing.assert_allclose(wg.grad(wg.checkpoint(_read_write_read))(x), want_grad, rtol=1e-12)
    _, tangent = wg.jvp(_read_write_read, (x,), (t,))
    np.testing.assert_allclose(tangent, jax.jvp(fj, (x,), (t,))[1], rtol=1e-12)
    hvp = wg.grad(lambda v: wnp.sum(wg.grad(_read_write_read)(v) * t))(x)
    want_hvp = jax.grad(lambda v: jnp.sum(jax.grad(fj)(v) * t))(x)
    np.testing.assert_allclose(hvp, want_hvp, rtol=1e-10)
    xs = np.stack([x, 0.5 * x])
    np.testing.assert_allclose(wg.vmap(wg.grad(_read_write_read))(xs), jax.vmap(jax.grad(fj))(xs),
                               rtol=1e-12)
    if size == 6:
        np.testing.assert_allclose(wg.hessian(_read_write_read)(x), jax.hessian(fj)(x), rtol=1e-10)


def test_a_pullback_called_later_reads_the_values_of_its_forward_pass():
    jax, jnp = _jax()
    x = np.linspace(0.1, 1.2, 700)
    _, jax_pullback = jax.vjp(_jax_program(jnp), x.copy())
    _, pullback = wg.vjp(_read_write_read, x)
    x += 1.0  # the caller's array, written between the forward pass and the pullback
    np.testing.assert_allclose(pullback(2.0)[0], jax_pullback(2.0)[0], rtol=1e-12)
    np.testing.assert_allclose(pullback(1.0)[0], jax_pullback(1.0)[0], rtol=1e-12)  # twice: nothing freed


def test_an_explicit_tape_still_lists_the_values_a_write_overwrote():
    tape = wg.Tape()
    x = tape.var(np.linspace(0.0, 1.0, 300))
    y = x * 2.0
    y[0] = 5.0
    y[1] = x[2] * 3.0
    wnp.sum(y * y)
    doubled = next(e for e in tape if e.operation == "multiply")
    np.testing.assert_array_equal(doubled.output.value, np.linspace(0.0, 1.0, 300) * 2.0)


# -- random sequences of writes and reads, against JAX's .at[] ----------------------------------------

_KINDS = ("set", "add", "mul", "read", "square", "slice")


def _run(ops, x, m, functional):
    """The program ``ops`` on a buffer made from ``x``: writes (in place for wengert, ``.at[]`` for
    JAX when ``functional``) and nonlinear reads of the buffer as it is at that point."""
    n = x.shape[0]
    y = x * 0.5 + 1.0
    acc = 0.0
    for kind, i, j, c in ops:
        i %= n
        j %= n
        if kind == "set":
            v = x[j] * c
            y = y.at[i].set(v) if functional else _set(y, i, v)
        elif kind == "add":
            v = m.sin(x[j]) * c
            y = y.at[i].add(v) if functional else _iadd(y, i, v)
        elif kind == "mul":
            v = c + x[j]
            y = y.at[i].multiply(v) if functional else _imul(y, i, v)
        elif kind == "slice":
            lo, hi = min(i, j), max(i, j) + 1
            v = m.tanh(x[lo:hi]) * c
            y = y.at[lo:hi].set(v) if functional else _set(y, slice(lo, hi), v)
        elif kind == "read":
            acc = acc + y[i] * y[j] * c
        else:  # the whole buffer, read by a nonlinear rule that saves it, then written again later
            acc = acc + m.sum(m.sin(y) * y) * c
    return acc + m.sum(y * y)


def _set(y, i, v):
    y[i] = v
    return y


def _iadd(y, i, v):
    y[i] += v
    return y


def _imul(y, i, v):
    y[i] *= v
    return y


_OPS = st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 10**6), st.integers(0, 10**6),
                          st.sampled_from([-1.5, 0.5, 2.0])), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(ops=_OPS, size=st.sampled_from([5, 600]), eager=st.booleans())
def test_random_writes_and_reads_match_jax_at(ops, size, eager):
    jax, jnp = _jax()
    x = np.cos(np.arange(size) * 0.7)
    want_value, want_grad = jax.value_and_grad(lambda v: _run(ops, v, jnp, True))(x)
    if eager:
        t = wg.tensor(x, requires_grad=True)
        out = _run(ops, t, wnp, False)
        out.backward()
        value, grad = out.item(), t.grad
    else:
        value, grad = wg.value_and_grad(lambda v: _run(ops, v, wnp, False))(x)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-12)
