"""A reverse loop's scalar adjoints factored by their cotangents (``program/source/factor.py``): the
gradient equals the tape's, finite differences and JAX's on loops with several carried values,
subtractions, negations, branches, nested and ``while`` loops, array reads and accumulators, and on
random loop programs; the chain's cotangent is multiplied once per step, and reaches 0 where the
hand-written adjoint's does (the traced order held it at the smallest subnormal). Also the call path
on Python floats (the last program, its captured values still guarded) and names of the user's that
equal a helper's (``cos``, ``masked``, the Numba support functions)."""

import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences, function_from_text

STEPS = 40


def chain(a, b):
    z = a
    for _ in range(STEPS):
        z = z * b + 0.5 * wnp.sin(z)
    return z


def coupled(a, b):
    z, w = a, b
    for _ in range(12):
        z, w = z * w - 0.3 * wnp.cos(w), -(w * 0.9) + z * 0.1 - a
    return z * w


def branchy(a, b):
    z = a
    for k in range(10):
        if z > 0.5:
            z = z * b - 0.1
        else:
            z = z + b * wnp.sin(z)
        z = z - (-z) * 0.05
    return z


def nested(a, b):
    z = a
    for _ in range(4):
        for _ in range(3):
            z = z * b + wnp.sin(z) * a
        z = z - 0.2 * b
    return z


def whiled(a, b):
    z, k = a, 0
    while k < 9:
        z = z * b + 0.25 * wnp.sin(z * a)
        k = k + 1
    return z


V = np.linspace(-0.8, 1.1, 7)


def over_array(v):
    s, t = 0.0, 1.0
    for i in range(v.shape[0]):
        s = s * 0.9 + wnp.sin(v[i]) * t
        t = t - s * v[i] * 0.1
    return s + t


SCALAR = (chain, coupled, branchy, nested, whiled)


def _check(f, args, rtol=1e-11):
    got = wg.source_grad(f, argnums=tuple(range(len(args))))(*args)
    tape = wg.grad(f, argnums=tuple(range(len(args))))(*args)
    np.testing.assert_allclose(got, tape, rtol=rtol, atol=1e-13)
    for k, g in enumerate(got):
        def along(x, k=k):
            return f(*[x if j == k else a for j, a in enumerate(args)])
        np.testing.assert_allclose(g, finite_differences(along, args[k]), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f", SCALAR, ids=[f.__name__ for f in SCALAR])
def test_gradient_equals_the_tapes_and_finite_differences(f):
    _check(f, (0.3, 0.7))
    _check(f, (-0.4, 1.05))


def test_array_reads_and_an_accumulator():
    np.testing.assert_allclose(wg.source_grad(over_array)(V), wg.grad(over_array)(V), rtol=1e-12)
    np.testing.assert_allclose(wg.source_grad(over_array)(V), finite_differences(over_array, V), rtol=1e-6)


def test_jax_agrees():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jax_chain(a, b):
        return jax.lax.fori_loop(0, STEPS, lambda _, z: z * b + 0.5 * jnp.sin(z), a)

    def jax_coupled(a, b):
        def step(_, zw):
            z, w = zw
            return z * w - 0.3 * jnp.cos(w), -(w * 0.9) + z * 0.1 - a
        z, w = jax.lax.fori_loop(0, 12, step, (a, b))
        return z * w

    for ours, theirs in ((chain, jax_chain), (coupled, jax_coupled)):
        want = jax.grad(theirs, argnums=(0, 1))(0.3, 0.7)
        np.testing.assert_allclose(wg.source_grad(ours, argnums=(0, 1))(0.3, 0.7), [float(w) for w in want],
                                   rtol=1e-12)


def _reverse_loop(text):
    """The lines of the last reverse loop's body (``for ... in range(n - 1, -1, -1):``)."""
    lines = text.splitlines()
    start = max(k for k, line in enumerate(lines) if re.search(r"in range\(\w+ - 1, -1, -1\):", line))
    pad = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1:]:
        if len(line) - len(line.lstrip()) <= pad:
            break
        body.append(line.strip())
    return body


def test_the_chains_cotangent_is_multiplied_once_for_each_value_it_flows_to():
    body = _reverse_loop(wg.source_grad(chain, argnums=(0, 1)).source)
    reading = [line for line in body if re.search(r"\bz_bar\b", line.partition("=")[2])]
    assert len(reading) == 2, body  # z_bar * (b + 0.5 cos z) for z, z_bar * z for b


def _hand_adjoint(x, y, steps):
    """The chain's forward loop keeping z, then its adjoint by hand (as benchmarks/native_floors.py)."""
    zs, z = [], x
    for _ in range(steps):
        zs.append(z)
        z = z * y + 0.5 * math.sin(z)
    gz, gy = 1.0, 0.0
    for z in reversed(zs):
        gy += gz * z
        gz *= y + 0.5 * math.cos(z)
    return gz, gy


def test_an_underflowing_cotangent_reaches_zero_as_the_hand_written_adjoints_does():
    def long_chain(a, b):
        z = a
        for _ in range(2_000):
            z = z * b + 0.5 * wnp.sin(z)
        return z

    got = wg.source_grad(long_chain, argnums=(0, 1))(0.3, 0.9)
    want = _hand_adjoint(0.3, 0.9, 2_000)
    assert want[0] == 0.0
    assert got[0] == 0.0  # not 5e-324, where subnormal arithmetic held it (tens of times slower)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-13)


# -- random loop programs ---------------------------------------------------------------------------

def _function(text):
    """The function ``f`` of the source ``text``, from a file (source_grad reads the source)."""
    return function_from_text(text, "factor_case")


_TERMS = ["z", "w", "a", "b", "0.5", "np.sin(z)", "np.cos(w)", "(z * w)", "(-z)", "(w - z)", "v[i]"]


@st.composite
def loop_programs(draw):
    """A loop over range(5) carrying z and w, each step a random mix of +, -, unary -, * of the
    carried values, the parameters, constants and sines, sometimes a branch or a nested loop."""
    def expr():
        terms = [draw(st.sampled_from(_TERMS)) for _ in range(draw(st.integers(1, 3)))]
        ops = [draw(st.sampled_from([" + ", " - ", " * "])) for _ in terms[1:]]
        text = terms[0] + "".join(o + t for o, t in zip(ops, terms[1:]))
        return f"0.3 * ({text})" if draw(st.booleans()) else text

    lines = ["def f(a, b, v):", "    z, w = a, b", "    for i in range(5):"]
    pad = "        "
    if draw(st.booleans()):
        lines.append(f"{pad}for _ in range(2):")
        pad += "    "
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(["z", "w"]))
        if draw(st.integers(0, 3)) == 0:
            lines += [f"{pad}if {target} > 0.2:", f"{pad}    {target} = {expr()}", f"{pad}else:",
                      f"{pad}    {target} = {expr()}"]
        else:
            lines.append(f"{pad}{target} = {expr()}")
        lines.append(f"{pad}{target} = np.tanh({target})")  # bounded: no overflow over the steps
    lines.append("    return z * 0.7 + w")
    return "\n".join(lines) + "\n"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=loop_programs(), a=st.floats(-1.0, 1.0), b=st.floats(-1.0, 1.0))
def test_random_loop_programs_match_the_tape(text, a, b):
    f = _function(text)
    v = np.linspace(-0.5, 0.5, 5)
    got = wg.source_grad(f, argnums=(0, 1, 2))(a, b, v)
    want = wg.grad(f, argnums=(0, 1, 2))(a, b, v)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=text)


def test_random_programs_are_factored():
    # the generator reaches the pass: a weight of primal values multiplies a carried cotangent
    f = _function("def f(a, b, v):\n    z, w = a, b\n    for i in range(5):\n        z = z * w - np.sin(z)\n"
                   "        z = np.tanh(z)\n    return z * 0.7 + w\n")
    text = wg.source_grad(f, argnums=(0, 1)).program(0.3, 0.5, np.zeros(5)).source
    assert any(re.fullmatch(r"w\d* = .*", line) for line in _reverse_loop(text)), text


# -- the call on Python floats -------------------------------------------------------------------------

def test_a_changed_closure_value_is_seen_by_the_next_call():
    steps = 3

    def f(a):
        z = a
        for _ in range(steps):
            z = z * 0.5 + wnp.sin(z)
        return z

    d = wg.source_grad(f)
    first = d(0.4)
    assert d(0.4) == first
    steps = 5  # noqa: F841 - read by f through its closure
    np.testing.assert_allclose(d(0.4), wg.grad(f)(0.4), rtol=1e-13)
    assert d(0.4) != first


def test_the_source_is_the_last_calls_after_floats_arrays_and_floats_again():
    def f(x):
        return wnp.sum(wnp.sin(x) * x)

    d = wg.source_grad(f)
    d(0.5)
    d(np.ones(3))
    assert d(0.5) == wg.grad(f)(0.5)
    assert "np.ones" not in d.source and "(3,)" not in d.source
    assert d(x=0.25) == wg.grad(f)(0.25)
    d.program(np.ones(2))
    assert "(2,)" in d.source
    d(0.5)
    assert "(2,)" not in d.source


# -- names of the user's that equal a helper's ----------------------------------------------------------

def shadowing(cos, masked):
    z = 0.0
    for _ in range(3):
        z = z + wnp.sin(cos) * masked + wnp.where(masked > 0.0, cos, 0.0)
    return z


def test_arguments_named_like_math_functions_and_helpers_do_not_hide_them():
    got = wg.source_grad(shadowing, argnums=(0, 1))(0.3, 2.0)
    np.testing.assert_allclose(got, wg.grad(shadowing, argnums=(0, 1))(0.3, 2.0), rtol=1e-13)
    np.testing.assert_allclose(got, [3 * (math.cos(0.3) * 2.0 + 1.0), 3 * math.sin(0.3)], rtol=1e-13)


def reduced_groups(extremes_native, reduced_groups, chooser_weights_native):
    """Named as ``native_helpers``' support functions, as are its arguments (and the program)."""
    top = wnp.max(extremes_native, axis=1)
    return wnp.sum(top * reduced_groups) + wnp.max(extremes_native) * chooser_weights_native


X = np.array([[2.0, 1.0, 2.0], [0.0, 3.0, -1.0]])


@pytest.fixture(scope="module")
def native_programs(tmp_path_factory):
    """The Numba programs of this file, compiled once: the chain's and the helpers' namesake's."""
    pytest.importorskip("numba")
    mp = pytest.MonkeyPatch()
    mp.setenv("WENGERT_CACHE_DIR", str(tmp_path_factory.mktemp("wengert-cache")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        chain_grad = wg.source_grad(chain, argnums=(0, 1), backend="numba")
        chain_grad(0.3, 0.7)
        namesake = wg.compile(reduced_groups, backend="numba").grad((0, 1, 2))
        namesake(X, 2.0, 3.0)
    yield chain_grad, namesake
    mp.undo()


def test_the_chain_runs_natively_and_equals_python(native_programs):
    numba = pytest.importorskip("numba")
    chain_grad = native_programs[0]
    for args in ((0.3, 0.7), (-0.4, 1.05), (0.3, 0.7)):  # the second call of a signature: the direct path
        np.testing.assert_allclose(chain_grad(*args), wg.source_grad(chain, argnums=(0, 1))(*args),
                                   rtol=1e-14)
    assert isinstance(chain_grad.program(0.3, 0.7).function, numba.core.dispatcher.Dispatcher)
    assert type(chain_grad(0.3, 0.7)) is tuple


def test_arguments_named_like_the_numba_support_functions(native_programs):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    got = native_programs[1](X, 2.0, 3.0)
    want = wg.grad(reduced_groups, argnums=(0, 1, 2))(X, 2.0, 3.0)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-14)

    def theirs(x, r, c):
        return jnp.sum(jnp.max(x, axis=1) * r) + jnp.max(x) * c

    for g, w in zip(got, jax.grad(theirs, argnums=(0, 1, 2))(X, 2.0, 3.0)):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-14)
