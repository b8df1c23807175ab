"""Nothing a later backward pass reads changes under it unnoticed (``wengert.engines.kept``).

``wg.vjp``'s pullback and a ``wg.Tape``'s ``.grad()`` run when the caller asks; a write into the
caller's arrays in between (the arguments, closed-over constants, views of them) used to change the
derivative silently (``x += 10`` after ``wg.vjp(lambda v: v * v, x)`` gave ``2 (x + 10)``). Now they
give the derivative at the values of the forward pass, as ``jax.vjp`` does. Eager tensors follow
PyTorch: an optimiser's step or ``load_state_dict`` between ``backward(retain_graph=True)`` and a
second ``backward()`` raises, as PyTorch's version counters do (``tests/test_optim.py`` has the rest).
"""

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.rules.test_saves import _cotangent, _has_rule, _inexact, _samples
from wengert.engines import kept
from wengert.rules import rule_table

X0 = np.array([0.5, -1.0, 2.0])


# -- the cases found -------------------------------------------------------------------------------

def test_argument_written_after_the_forward_pass():
    x = X0.copy()
    out, pullback = wg.vjp(lambda v: v * v, x)
    x += 10
    (g,) = pullback(np.ones(3))
    np.testing.assert_array_equal(g, 2 * X0)  # [1, -2, 4], not [21, 18, 24]
    np.testing.assert_array_equal(out, X0 * X0)


def test_argument_written_matches_jax():
    """JAX's semantics (its arrays are immutable). JAX itself is given a copy: on the CPU it may share
    a NumPy argument's memory, and its pullback then reads the write (seen with jax 0.10)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x = X0.copy()
    _, pullback = wg.vjp(lambda v: wnp.sin(v) * v, x)
    _, jax_pullback = jax.vjp(lambda v: jax.numpy.sin(v) * v, x.copy())
    x[...] = [7.0, 8.0, 9.0]
    np.testing.assert_allclose(pullback(np.ones(3))[0], np.asarray(jax_pullback(np.ones(3))[0]), rtol=1e-14)


def test_closed_over_matrix_zeroed_after_the_forward_pass():
    W = np.arange(9.0).reshape(3, 3) + 1.0
    _, pullback = wg.vjp(lambda v: v @ W, X0.copy())
    expected = W.sum(axis=1)  # d sum(v @ W) / dv
    W[...] = 0.0
    np.testing.assert_array_equal(pullback(np.ones(3))[0], expected)


def test_closed_over_index_array_written_after_the_forward_pass():
    idx = np.array([0, 2, 2])
    _, pullback = wg.vjp(lambda v: v[idx] ** 2, X0.copy())
    idx[...] = 1
    np.testing.assert_array_equal(pullback(np.ones(3))[0], [2 * X0[0], 0.0, 4 * X0[2]])


def test_closed_over_constant_in_an_index_tuple_and_a_sequence():
    rows, cols = np.array([0, 1]), np.array([1, 0])
    other = np.array([3.0, 4.0])
    A = np.arange(4.0).reshape(2, 2) + 1.0

    def f(a):
        picked = a[rows, cols]
        return wnp.sum(wnp.concatenate([picked * picked, other * picked]))

    expected = wg.grad(f)(A.copy())
    _, pullback = wg.vjp(f, A.copy())
    rows[...], cols[...], other[...] = [1, 1], [1, 1], [0.0, 0.0]
    np.testing.assert_array_equal(pullback(1.0)[0], expected)


def test_view_of_the_argument_taken_inside_the_function():
    x = np.linspace(0.1, 1.0, 6)
    f = lambda v: wnp.sum(wnp.sin(v[1:4]) * v.reshape(2, 3)[0]) + wnp.sum(v.T * v.T)  # noqa: E731
    expected = wg.grad(f)(x.copy())
    _, pullback = wg.vjp(f, x)
    x[...] = -5.0
    np.testing.assert_array_equal(pullback(1.0)[0], expected)


def test_argument_that_is_a_view_of_a_caller_array():
    base = np.linspace(0.1, 1.2, 12).reshape(3, 4)
    view = base[1:, ::2]  # strided, not contiguous
    expected = wg.grad(lambda v: wnp.sum(wnp.sin(v) * v))(view.copy())
    _, pullback = wg.vjp(lambda v: wnp.sum(wnp.sin(v) * v), view)
    base[...] = 3.0  # through the base, not the view passed
    np.testing.assert_array_equal(pullback(1.0)[0], expected)


def test_output_that_is_the_argument_itself():
    """``real`` of a real array returns that very array: the rules reading it get the forward value."""
    x = X0.copy()
    expected = wg.grad(lambda v: wnp.sum(wnp.sin(wnp.real(v))))(x.copy())
    _, pullback = wg.vjp(lambda v: wnp.sum(wnp.sin(wnp.real(v))), x)
    x[...] = 0.0
    np.testing.assert_array_equal(pullback(1.0)[0], expected)


def test_pytree_arguments_and_has_aux():
    params = {"w": X0.copy(), "b": np.array(0.3)}
    f = lambda p: (wnp.sum(wnp.tanh(p["w"] * p["b"]) * p["w"]), {"w": 2 * p["w"]})  # noqa: E731
    expected = wg.grad(lambda p: f(p)[0])(copy.deepcopy(params))
    _, pullback, aux = wg.vjp(f, params, has_aux=True)
    params["w"] += 1.0
    params["b"] *= -2.0
    got = pullback(1.0)[0]
    for key in params:
        np.testing.assert_array_equal(got[key], expected[key])
    np.testing.assert_array_equal(aux["w"], 2 * X0)


def test_pullback_called_twice_with_writes_between():
    x = X0.copy()
    _, pullback = wg.vjp(lambda v: wnp.sum(v ** 3), x)
    first = pullback(1.0)[0]
    x += 1.0
    second = pullback(1.0)[0]
    x *= 3.0
    np.testing.assert_array_equal(pullback(1.0)[0], first)
    np.testing.assert_array_equal(second, 3 * X0 ** 2)


def test_value_assigned_inside_the_function_keeps_the_old_version():
    """An assignment inside the function rebinds the box (the caller's array is not written); the node
    that read the old version keeps it, and the caller's writes afterwards change nothing."""
    x = X0.copy()

    def f(v):
        y = wnp.sin(v)
        v[0] = 5.0
        return wnp.sum(y * v)

    expected = wg.grad(f)(x.copy())
    _, pullback = wg.vjp(f, x)
    np.testing.assert_array_equal(x, X0)
    x[...] = 100.0
    np.testing.assert_array_equal(pullback(1.0)[0], expected)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.complex64])
def test_other_dtypes(dtype):
    x = (X0 + (1j * X0[::-1] if np.dtype(dtype).kind == "c" else 0)).astype(dtype)
    c = (np.array([1.5, -0.5, 2.0]) * (1 - 1j if np.dtype(dtype).kind == "c" else 1)).astype(dtype)
    f = lambda v: wnp.sin(v) * c  # noqa: E731
    ct = np.ones(3, dtype=dtype)
    expected = wg.vjp(f, x.copy())[1](ct)[0]
    _, pullback = wg.vjp(f, x)
    x[...] = 0
    c[...] = 0
    got = pullback(ct)[0]
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_float_arguments_and_a_scalar_chain_are_unaffected():
    def chain(a, b):
        z = a
        for _ in range(50):
            z = z * b + 0.5 * wnp.sin(z)
        return z

    expected = wg.grad(chain, argnums=(0, 1))(0.3, 0.9)
    _, pullback = wg.vjp(chain, 0.3, 0.9)
    assert pullback(1.0) == expected


def test_reads_of_an_array_in_a_scalar_loop():
    v = np.linspace(-1.0, 1.0, 7)
    f = lambda u: sum(u[i] * u[i] * float(i) for i in range(len(u)))  # noqa: E731
    expected = wg.grad(f)(v.copy())
    _, pullback = wg.vjp(f, v)
    v[...] = 9.0
    np.testing.assert_array_equal(pullback(1.0)[0], expected)


# -- what is not copied ------------------------------------------------------------------------------

def _saved_arrays(fun, *args):
    """The arrays the nodes of ``wg.vjp(fun, *args)``'s tape hold, after the forward pass."""
    from wengert.api import transforms

    trace = transforms._record(fun, args, "vjp", False, kept=True)[0]
    return [a for node in trace.entries for a in node._args if isinstance(a, np.ndarray)]


def test_read_only_arrays_are_not_copied():
    W = np.array([[0.0, 1.0], [2.0, 3.0]])  # owns its memory (a reshape would view a writeable one)
    W.flags.writeable = False
    x = np.array([1.0, 2.0])
    x.flags.writeable = False
    saved = _saved_arrays(lambda v: v @ W + wnp.sin(v), x)
    assert any(a is W for a in saved) and any(a is x for a in saved)
    W2 = np.arange(4.0).reshape(2, 2)
    W2.flags.writeable = False  # a read-only view of a writeable array: copied
    assert not any(a is W2 for a in _saved_arrays(lambda v: v @ W2, x))


def test_a_read_only_view_of_a_writeable_array_is_copied():
    base = np.arange(4.0).reshape(2, 2)
    W = base.view()
    W.flags.writeable = False
    _, pullback = wg.vjp(lambda v: v @ W, np.array([1.0, 2.0]))
    expected = W.sum(axis=1)
    base[...] = 0.0  # W itself refuses a write, its base does not
    np.testing.assert_array_equal(pullback(np.ones(2))[0], expected)


def test_arrays_the_rules_do_not_read_and_the_recordings_own_are_not_copied():
    W = np.arange(6.0).reshape(2, 3)
    x = np.array([1.0, 2.0])
    # x @ W with only x differentiated reads W (not x); exp reads its output, made by the tape
    saved = _saved_arrays(lambda v: wnp.exp(v @ W), x)
    assert not any(a is W for a in saved)  # W was read: copied
    assert any(a is x for a in saved)  # x is kept (small) but not read: left alone


def test_grad_and_elementwise_grad_copy_nothing(monkeypatch):
    from wengert.api import transforms

    def refuse(trace, leaves):
        raise AssertionError("keep_copies called by a transform that pulls back at once")

    monkeypatch.setattr(transforms, "keep_copies", refuse)
    assert wg.grad(lambda v: wnp.sum(v * v))(X0) is not None
    assert wg.elementwise_grad(wnp.sin)(X0) is not None
    assert wg.jacrev(wnp.sin)(X0) is not None
    with pytest.raises(AssertionError, match="keep_copies"):
        wg.vjp(wnp.sin, X0)


def test_dask_arrays_are_not_computed():
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    x = da.from_array(np.linspace(0.1, 1.0, 8), chunks=4)
    c = da.from_array(np.linspace(1.0, 2.0, 8), chunks=4)

    def refuse(*args, **kwargs):
        raise AssertionError("a Dask array was computed")

    with dask.config.set(scheduler=refuse):
        out, pullback = wg.vjp(lambda v: wnp.sin(v) * c, x)
        (g,) = pullback(da.ones(8, chunks=4))
    np.testing.assert_allclose(np.asarray(g), np.cos(np.linspace(0.1, 1.0, 8)) * np.linspace(1.0, 2.0, 8))


# -- every primitive of the rule table ----------------------------------------------------------------

def _arrays_in(x):
    if isinstance(x, np.ndarray):
        yield x
    elif isinstance(x, (tuple, list)):
        for part in x:
            yield from _arrays_in(part)


def _scramble(a):
    """Write new values into ``a`` in place (the kind of value it holds kept: indices stay indices)."""
    if not a.flags.writeable or a.size == 0:
        return
    if a.dtype.kind in "fc":
        a[...] = a * -1.7 + 0.3
    elif a.dtype.kind == "b":
        a[...] = ~a
    else:
        a[...] = a.ravel()[::-1].reshape(a.shape)


PRIMITIVES = sorted(name for name, prim in rule_table().items() if _samples(name))


@pytest.mark.parametrize("name", PRIMITIVES)
def test_every_primitive_through_vjp_with_its_arrays_written_after(name):
    """Each sample call of the primitive, its inexact arguments differentiated and the rest closed
    over; after the forward pass every array of the call is written in place. The pullback must give
    a fresh vjp's answer on untouched copies."""
    prim = rule_table()[name]
    rng = np.random.default_rng(0)
    checked = 0
    for args, kwargs in _samples(name):
        diff = [j for j, a in enumerate(args) if _inexact(a) and _has_rule(prim, j)]
        if not diff:
            continue

        def f(*chosen, args=args, kwargs=kwargs, diff=diff):
            full = list(args)
            for j, v in zip(diff, chosen):
                full[j] = v
            return prim(*full, **kwargs)

        fresh = copy.deepcopy((args, kwargs))
        try:
            with np.errstate(all="ignore"):
                out, fresh_pullback = wg.vjp(
                    lambda *c, fresh=fresh, diff=diff: f(*c, args=fresh[0], kwargs=fresh[1], diff=diff),
                    *[fresh[0][j] for j in diff])
        except Exception:  # noqa: BLE001 - a call the reverse mode refuses (checked elsewhere)
            continue
        if not _inexact(out):
            continue
        ct = _cotangent(out, rng)
        with np.errstate(all="ignore"):
            mine = copy.deepcopy((args, kwargs))
            _, pullback = wg.vjp(
                lambda *c, mine=mine, diff=diff: f(*c, args=mine[0], kwargs=mine[1], diff=diff),
                *[mine[0][j] for j in diff])
            for a in _arrays_in(list(mine[0]) + list(mine[1].values())):
                _scramble(a)
            try:
                expected = fresh_pullback(ct)
            except Exception as e:  # noqa: BLE001 - refused at these values (det's third derivative ...)
                with pytest.raises(type(e)):  # refused at the same values, not at the written ones
                    pullback(ct)
                continue
            got = pullback(ct)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-13, atol=0, equal_nan=True,
                                       err_msg=f"{name}{tuple(np.shape(a) for a in args)}")
        checked += 1
    if not checked:
        pytest.skip(f"{name}: no sample call with a differentiable argument")


# -- wg.Tape ---------------------------------------------------------------------------------------

def test_tape_var_copies_the_callers_array():
    a = X0.copy()
    tape = wg.Tape()
    v = tape.var(a)
    z = wnp.sum(v * v)
    a += 10
    np.testing.assert_array_equal(z.grad().wrt(v), 2 * X0)
    np.testing.assert_array_equal(v.value, X0)


def test_tape_var_keeps_a_read_only_array():
    a = X0.copy()
    a.flags.writeable = False
    assert wg.Tape().var(a).value is a


def test_tape_constants_are_copied_when_recorded():
    tape = wg.Tape()
    v = tape.var(X0.copy())
    W = 2.0 * np.eye(3)
    idx = np.array([0, 2])
    z1 = wnp.sum(wnp.sin(v @ W))
    W[...] = 5.0 * np.eye(3)  # a write between two recordings: the second reads the new value
    z2 = wnp.sum(wnp.sin(v @ W)) + wnp.sum(v[idx] ** 2)
    W[...] = 0.0
    idx[...] = 1
    np.testing.assert_allclose(z1.grad().wrt(v), 2 * np.cos(2 * X0), rtol=1e-14)
    expected = 5 * np.cos(5 * X0) + np.array([2 * X0[0], 0.0, 2 * X0[2]])
    np.testing.assert_allclose(z2.grad().wrt(v), expected, rtol=1e-14)


def test_tape_keyword_constant_is_copied():
    tape = wg.Tape()
    v = tape.var(np.array([[1.0, 2.0], [3.0, 4.0]]))
    w = np.array([0.25, 0.75])
    z = wnp.sum(wnp.average(v, axis=1, weights=w) ** 2)
    g = z.grad().wrt(v)
    w[...] = [1.0, 0.0]
    np.testing.assert_array_equal(z.grad().wrt(v), g)


# -- a property: random programs, random writes ------------------------------------------------------

_STEPS = ("sin", "square", "times_const", "matmul_const", "gather", "slice", "reshape", "transpose", "exp")


def _program(steps, x, const, M, idx):
    h = x
    for step in steps:
        if step == "sin":
            h = wnp.sin(h)
        elif step == "square":
            h = h * h
        elif step == "times_const":
            h = h * const
        elif step == "matmul_const":
            h = M @ h
        elif step == "gather":
            h = h[idx]
        elif step == "slice":
            h = wnp.concatenate([h[1:], h[:1]])
        elif step == "reshape":
            h = h.reshape(2, 2).T.reshape(4)
        elif step == "transpose":
            h = h.reshape(4, 1).T[0]
        else:
            h = wnp.exp(0.1 * h)
    return wnp.sum(h * x)


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.sampled_from(_STEPS), min_size=1, max_size=6),
       written=st.sets(st.sampled_from(("x", "const", "M", "idx", "base")), min_size=1),
       seed=st.integers(0, 1000), engine=st.sampled_from(("vjp", "tape")))
def test_random_programs_give_the_forward_time_answer_after_random_writes(steps, written, seed, engine):
    rng = np.random.default_rng(seed)
    base = rng.uniform(-1, 1, (2, 4))
    arrays = {"x": base[1], "const": rng.uniform(-1, 1, 4), "M": rng.uniform(-1, 1, (4, 4)),
              "idx": rng.integers(0, 4, 4)}
    frozen = copy.deepcopy(arrays)
    expected = wg.grad(lambda v: _program(steps, v, frozen["const"], frozen["M"], frozen["idx"]))(
        frozen["x"].copy())
    if engine == "vjp":
        _, pullback = wg.vjp(lambda v: _program(steps, v, arrays["const"], arrays["M"], arrays["idx"]),
                             arrays["x"])
    else:
        tape = wg.Tape()
        v = tape.var(arrays["x"])
        z = _program(steps, v, arrays["const"], arrays["M"], arrays["idx"])
    for name in written:
        if name == "base":
            base[...] = 7.0  # arrays["x"] is a view of it
        elif name == "idx":
            arrays["idx"][...] = (arrays["idx"] + 1) % 4
        else:
            arrays[name][...] = rng.uniform(-3, 3, arrays[name].shape)
    got = pullback(1.0)[0] if engine == "vjp" else z.grad().wrt(v)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


def test_immutable_says_what_can_change():
    a = np.arange(3.0)
    assert not kept.immutable(a)
    a.flags.writeable = False
    assert kept.immutable(a)
    b = np.arange(3.0)
    view = b[1:]
    view.flags.writeable = False
    assert not kept.immutable(view)  # its base is writeable
    assert kept.immutable(np.frombuffer(b"\0" * 16))  # bytes: immutable memory
    assert not kept.immutable(np.frombuffer(bytearray(16)))
    assert kept.immutable(1.5) and kept.immutable(np.float64(2.0))


@pytest.mark.parametrize("n", [1, 12])
def test_checkpointed_iteration_with_its_input_written_after(n):
    """``wg.iterate``'s node keeps the forward sweep's state for the pullback; it continues that state
    only when the node's input holds the values it started from (else it sweeps again from them)."""
    x = np.array([0.5, -1.0, 2.0, 0.3, 0.1])
    expected = wg.vjp(lambda v: wg.iterate(wnp.sin, v, n), x.copy())[1](np.ones(5))[0]
    _, pullback = wg.vjp(lambda v: wg.iterate(wnp.sin, v, n, checkpoint="binomial", snapshots=3), x)
    x[...] = 9.0
    np.testing.assert_allclose(pullback(np.ones(5))[0], expected, rtol=1e-14)
