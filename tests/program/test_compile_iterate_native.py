"""wg.iterate inside wg.compile(f, backend="numba"): the loop statement runs as Numba machine code
(program/native_loop.py) with the Python backend's values, the tape's gradients and O(snapshots)
memory; a loop Numba cannot compile falls back with a NativeFallbackWarning naming the primitive.

The schedule's generator is checked against wengert.checkpointing's schedules in plain Python (no
Numba); the compiled tests share their kernels (module-level caches), the Hypothesis test calls ONE
compiled driver over many loop lengths and snapshot budgets."""

import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences
from wengert.api.checkpointing.schedules import _simulate, binomial_tuples, ctz
from wengert.program.native_loop import SCHEDULES, snapshot_slots

KINDS = {"advance": 0, "snapshot": 1, "restore": 2, "reverse": 3}
NAMES = {v: k for k, v in KINDS.items()}


def _coded(actions):
    return [(KINDS[a[0]], int(a[1]), int(a[2]), int(a[3])) for a in actions]


def _actions(policy, n, s):
    return [tuple(int(v) for v in a) for a in SCHEDULES[policy](n, s)]


# -- the schedules, in plain Python ------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 33, 64, 100, 257])
def test_the_generator_gives_the_binomial_and_ctz_schedules(n):
    for s in (1, 2, 3, 4, 7, 12, 300):
        assert _actions("binomial", n, s) == _coded(binomial_tuples(n, s)), (n, s)
    assert _actions("ctz", n, 0) == _coded(ctz(n))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 40), st.sampled_from(["all", "binomial", "ctz"]))
def test_property_every_schedule_is_valid_and_within_its_slots(n, s, policy):
    actions = _actions(policy, n, s)
    counts = _simulate([(NAMES[k], p, steps, slot) for k, p, steps, slot in actions], n)  # raises if wrong
    assert max(a[3] for a in actions) < snapshot_slots(policy, n, s)  # the driver's preallocated rows
    if policy == "binomial":
        assert actions == _coded(binomial_tuples(n, s))
        assert snapshot_slots(policy, n, s) <= s
    elif policy == "all":
        assert counts["advances"] == n - 1  # each state computed once, kept
    else:
        assert snapshot_slots(policy, n, s) <= n.bit_length() + 2


def test_memory_is_the_snapshots_whatever_n():
    assert snapshot_slots("binomial", 10**9, 20) == 20
    assert snapshot_slots("ctz", 10**9, 0) == (10**9).bit_length() + 2
    assert snapshot_slots("binomial", 3, 20) == 3
    assert snapshot_slots("all", 1000, 5) == 999


# -- compiled loops ----------------------------------------------------------------------------------

def _silent_numba_build(build):
    """``build()`` where a NativeFallbackWarning is an error (the loop must run natively)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        return build()


def _loop_of(compiled, *args):
    """The loop statement (``loop_node._Loop``) of a compiled gradient."""
    program = compiled.program(*args)
    return next(s.prim.fun.__self__ for s in program.statements if s.prim.__name__.endswith("_vjp"))


def _decay(x, a, n, policy="binomial", snapshots=None):
    return wg.iterate(lambda s: s - 0.1 * a * wnp.sin(s), x, n, checkpoint=policy, snapshots=snapshots) ** 2


_DECAY = {}


def _decay_compiled():
    """One loop of the decay step compiled natively, and its drivers (shared by the tests below)."""
    if not _DECAY:
        pytest.importorskip("numba")

        def f(x, a):
            return _decay(x, a, 40, "binomial", 5)

        grad = _silent_numba_build(lambda: wg.compile(f, backend="numba").grad((0, 1)))
        _DECAY["f"], _DECAY["grad"] = f, grad
        _DECAY["value"] = (0.7, 1.3, grad(0.7, 1.3))
        _DECAY["drivers"] = sys.modules[_loop_of(grad, 0.7, 1.3).native[0]]
    return _DECAY


def test_a_compiled_loop_runs_natively_with_the_python_backends_numbers():
    d = _decay_compiled()
    x, a, got = d["value"]
    assert type(d["grad"]).__name__ == "CompiledFunction"
    assert _loop_of(d["grad"], x, a).native is not None and type(_loop_of(d["grad"], x, a).native) is tuple
    python = wg.compile(d["f"]).grad((0, 1))(x, a)
    np.testing.assert_allclose(got, python, rtol=1e-13, atol=0)
    np.testing.assert_allclose(got, wg.grad(d["f"], (0, 1))(x, a), rtol=1e-12)
    for k in (0, 1):
        fd = finite_differences(lambda v: d["f"](*[v if i == k else (x, a)[i] for i in range(2)]), (x, a)[k])
        assert got[k] == pytest.approx(float(fd), rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 12), st.floats(-2, 2), st.floats(0.1, 3))
def test_property_one_compiled_driver_over_n_and_the_snapshot_budget(n, s, x, a):
    """The drivers take n and the snapshots as arguments: one compiled kernel for every example."""
    policy = "binomial"
    drivers = _decay_compiled()["drivers"]
    want_x = wg.iterate(lambda v: v - 0.1 * a * np.sin(v), x, n)
    final = drivers.forward_sweep(n, x, 0.1 * a)  # the program's param: 0.1 * a, computed before the loop
    assert final == pytest.approx(want_x, rel=1e-13, abs=1e-300)
    grads = drivers.reverse_sweep(n, s, snapshot_slots(policy, n, s), 1.0, final, x, 0.1 * a)

    def f(x0, c):
        return wg.iterate(lambda v: v - c * wnp.sin(v), x0, n, checkpoint=policy, snapshots=s)

    want = wg.grad(f, (0, 1))(x, 0.1 * a)
    np.testing.assert_allclose(grads, want, rtol=1e-11, atol=1e-14)


_LORENZ = {}
DT = 0.01


def _lorenz_step(x, y, z, sigma, rho, beta):
    k1x, k1y, k1z = sigma * (y - x), x * (rho - z) - y, x * y - beta * z
    x2, y2, z2 = x + 0.5 * DT * k1x, y + 0.5 * DT * k1y, z + 0.5 * DT * k1z
    k2x, k2y, k2z = sigma * (y2 - x2), x2 * (rho - z2) - y2, x2 * y2 - beta * z2
    x3, y3, z3 = x + 0.5 * DT * k2x, y + 0.5 * DT * k2y, z + 0.5 * DT * k2z
    k3x, k3y, k3z = sigma * (y3 - x3), x3 * (rho - z3) - y3, x3 * y3 - beta * z3
    x4, y4, z4 = x + DT * k3x, y + DT * k3y, z + DT * k3z
    k4x, k4y, k4z = sigma * (y4 - x4), x4 * (rho - z4) - y4, x4 * y4 - beta * z4
    return (x + DT / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x),
            y + DT / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y),
            z + DT / 6.0 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z))


def _lorenz(policy, n=300):
    def f(sigma, rho, beta):
        x, y, z = wg.iterate(lambda state: _lorenz_step(*state, sigma, rho, beta), (1.0, 1.0, 1.0), n,
                             checkpoint=policy)
        return x + y + z
    return f


PARAMS = (10.0, 14.0, 8.0 / 3.0)


@pytest.mark.parametrize("policy", ["binomial", "ctz", "all"])
def test_the_lorenz_rk4_loop_compiled_natively(policy):
    pytest.importorskip("numba")
    f = _lorenz(policy)
    grad = _silent_numba_build(lambda: wg.compile(f, backend="numba").grad((0, 1, 2)))
    value = _silent_numba_build(lambda: wg.compile(f, backend="numba"))
    got = grad(*PARAMS)
    np.testing.assert_allclose(got, wg.compile(f).grad((0, 1, 2))(*PARAMS), rtol=1e-13, atol=0)
    np.testing.assert_allclose(got, wg.grad(f, (0, 1, 2))(*PARAMS), rtol=1e-11)
    assert value(*PARAMS) == pytest.approx(f(*PARAMS), rel=1e-14)
    fd = finite_differences(lambda r: f(PARAMS[0], float(r), PARAMS[2]), PARAMS[1])
    assert got[1] == pytest.approx(float(fd), rel=1e-5)


def test_the_lorenz_loop_agrees_with_jax_fori_loop_and_checkpoint():
    pytest.importorskip("numba")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f = _lorenz("binomial")
    grad = _silent_numba_build(lambda: wg.compile(f, backend="numba").grad((0, 1, 2)))

    def fj(sigma, rho, beta):
        body = jax.checkpoint(lambda _, state: _lorenz_step(*state, sigma, rho, beta))
        x, y, z = jax.lax.fori_loop(0, 300, body, (1.0, 1.0, 1.0))
        return x + y + z

    np.testing.assert_allclose(grad(*PARAMS), [float(g) for g in jax.grad(fj, (0, 1, 2))(*PARAMS)],
                               rtol=1e-10)


W = np.array([[0.5, -0.3, 0.1], [0.2, 0.4, -0.2], [-0.1, 0.3, 0.6]])


@pytest.mark.parametrize("policy", ["binomial", "ctz"])
def test_an_array_state_and_a_closed_over_matrix_run_natively(policy):
    pytest.importorskip("numba")

    def f(x, m):
        return wnp.sum(wg.iterate(lambda s: wnp.tanh(m @ s + 0.1), x, 60, checkpoint=policy) ** 2)

    x = np.array([0.3, -0.2, 0.5])
    grad = _silent_numba_build(lambda: wg.compile(f, backend="numba").grad((0, 1)))
    got = grad(x, W)
    python = wg.compile(f).grad((0, 1))(x, W)
    tape = wg.grad(f, (0, 1))(x, W)
    for g, p, t in zip(got, python, tape):
        np.testing.assert_allclose(g, p, rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(g, t, rtol=1e-11, atol=1e-15)


# -- falling back ------------------------------------------------------------------------------------

def test_a_step_numba_cannot_compile_falls_back_naming_the_primitive():
    pytest.importorskip("numba")

    def f(x, m):
        return wnp.sum(wg.iterate(lambda s: wnp.tanh(wnp.einsum("ij,j->i", m, s)), x, 20, checkpoint="ctz"))

    x = np.array([0.3, -0.2, 0.5])
    grad = wg.compile(f, backend="numba").grad((0, 1))
    with pytest.warns(wg.NativeFallbackWarning,
                      match=r"primitive iterate_lambda_vjp \(its step's forward program: primitive einsum "
                            r"\(Numba has no np.einsum\)\)"):
        got = grad(x, W)
    for g, e in zip(got, wg.compile(f).grad((0, 1))(x, W)):
        np.testing.assert_array_equal(g, e)


def test_a_float32_state_falls_back_saying_so():
    pytest.importorskip("numba")

    def f(x, c):
        return wnp.sum(wg.iterate(lambda s: s * c, x, 10, checkpoint="binomial"))

    x = np.array([0.5, 1.5], np.float32)
    with pytest.warns(wg.NativeFallbackWarning, match=r"iterate_lambda.*not a Python float or a float64"):
        got = wg.compile(f, backend="numba").grad((0, 1))(x, 0.9)
    for g, e in zip(got, wg.compile(f).grad((0, 1))(x, 0.9)):
        np.testing.assert_array_equal(g, e)


# -- wg.checkpoint -----------------------------------------------------------------------------------

def test_checkpointed_calls_run_natively_with_the_python_backends_numbers():
    pytest.importorskip("numba")
    b = np.array([0.1, 0.0, -0.1])

    def f(x, m):
        h = wg.checkpoint(lambda v, w: wnp.tanh(w @ v + b))(x, m)
        h2 = wg.checkpoint(lambda v, w: wnp.tanh(w @ v + b))(h, m)
        return wnp.sum(h2) + wg.checkpoint(lambda v: wnp.sum(v * v))(h2)  # a NumPy scalar's result

    x = np.array([0.3, -0.2, 0.5])
    grad = _silent_numba_build(lambda: wg.compile(f, backend="numba").grad((0, 1)))
    names = [s.prim.__name__ for s in grad.program(x, W).statements]
    assert names.count("checkpoint_lambda_vjp") == 3
    got = grad(x, W)
    for k, (g, p, t) in enumerate(zip(got, wg.compile(f).grad((0, 1))(x, W), wg.grad(f, (0, 1))(x, W))):
        np.testing.assert_allclose(g, p, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(g, t, rtol=1e-11, atol=1e-15)
        fd = finite_differences(lambda v: f(*[v if i == k else (x, W)[i] for i in range(2)]), (x, W)[k])
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)
    value = _silent_numba_build(lambda: wg.compile(f, backend="numba"))
    assert value(x, W) == pytest.approx(f(x, W), rel=1e-14)
