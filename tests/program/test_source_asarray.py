"""``np.array`` / ``np.asarray`` / ``np.asanyarray`` / ``np.ascontiguousarray`` of traced values in the
source front end (``source/conversions.py``), through ``wg.source_grad`` and ``wg.compile`` (whose trace
refuses them, so it builds the program from source).

NumPy runs these through ``__array__``, which every traced value refuses (the conversion would drop
the derivative); read from the source they are ``x`` itself (``asarray``), a copy (``array``), an
``astype`` (another dtype) or a stack (a list holding traced values). Each function's gradient is
checked against central finite differences of the plain NumPy function, and, where JAX runs the same
code written with ``jax.numpy`` (no in-place writes), against ``jax.grad`` (in the slow group: JAX's
first call of each operation costs a second). Copies are checked by
writing into the copy and reading the original, and the reverse; an in-place write into a name that
NumPy's ``asarray`` may alias with a live one is refused (never a stale value).
"""

import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.support.engines import finite_differences, function_from_text
from wengert.core.exits import ExitError
from wengert.program.source.control import TransformError

X = np.array([0.7, -1.3, 2.1])

# name -> the body of ``def f(x):`` (NumPy as ``np``; JAX runs the same text with ``np`` its numpy)
CASES = {
    "cast_sum": "return np.sum(np.array(x))",
    "asarray": "y = np.asarray(x)\n    return np.sum(np.sin(y) * x)",
    "asanyarray": "return np.sum(np.asanyarray(x) ** 3)",
    "ascontiguousarray_of_a_view": "y = np.ascontiguousarray(x[::2])\n    return np.sum(y * y * x[1])",
    "ascontiguousarray_of_0d": "a = np.sum(x * x)\n    b = np.ascontiguousarray(a)\n    "
                               "return np.sum(b * x[0]) + b.shape[0]",
    "array_copy_none": "y = np.array(x, copy=None)\n    return np.sum(y * np.cos(x))",
    "array_ndmin": "m = np.array(x, ndmin=2)\n    return np.sum(m.T @ m) + m.shape[0]",
    "asarray_of_0d": "a = np.sum(x * x)\n    b = np.asarray(a)\n    c = np.array(a)\n    "
                     "return b * c + np.asarray(a, dtype=np.float64)",
    "list_with_python_floats": "v = np.array([x[0] * x[1], 2.0, np.sin(x[2])])\n    "
                               "return np.sum(v * v) + v[1] * x[0]",
    "list_with_an_int": "v = np.array([x[0], 3, x[1] * x[2]])\n    return np.sum(v ** 2)",
    "tuple_asarray": "w = np.asarray((x[0], 0.5 * x[1]))\n    return np.prod(w + 1.0)",
    "nested_lists": "m = np.array([[x[0], 1.0], [x[1], x[2]]])\n    return np.sum(m @ m)",
    "list_of_arrays": "m = np.array([x, 2.0 * x, np.ones(3)])\n    return np.sum(np.sin(m) * m[1])",
    "asanyarray_list": "m = np.asanyarray([x[2], x[0]])\n    return np.sum(m * m * m)",
}


def _function(body):
    return function_from_text(f"def f(x):\n    {body}\n", tag="asarray")


def _jax_numpy(jnp):
    """``jax.numpy`` with NumPy's ``asanyarray`` and ``ascontiguousarray`` (which JAX lacks): ``asarray``,
    and ``asarray`` at least 1-d, as NumPy defines them."""
    ns = types.SimpleNamespace(**{k: getattr(jnp, k) for k in dir(jnp) if not k.startswith("__")})
    ns.asanyarray = jnp.asarray
    ns.ascontiguousarray = lambda a, dtype=None: jnp.atleast_1d(jnp.asarray(a, dtype))
    return ns


def _jax_function(body, jax):
    namespace = {"np": _jax_numpy(jax.numpy)}
    exec(f"def f(x):\n    {body}\n", namespace)  # noqa: S102 - the test's own text
    return namespace["f"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_conversions_differentiate_as_finite_differences(name):
    f = _function(CASES[name])
    want = finite_differences(f, X)
    np.testing.assert_allclose(wg.source_grad(f)(X), want, rtol=1e-6, atol=1e-8)
    compiled = wg.compile(f)
    np.testing.assert_allclose(compiled.grad()(X), want, rtol=1e-6, atol=1e-8)
    assert compiled(X) == f(X)  # the value NumPy computes, bit for bit
    assert compiled.program(X).refusal  # the trace refused: built from source


@pytest.mark.parametrize("name", sorted(CASES))
def test_conversions_differentiate_as_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    want = np.asarray(jax.grad(_jax_function(CASES[name], jax))(X))
    f = _function(CASES[name])
    np.testing.assert_allclose(wg.source_grad(f)(X), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(wg.compile(f).grad()(X), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(set(CASES) | {"write_into_the_copy", "write_into_the_original"}))
def test_forward_mode_reads_the_conversions_too(name):
    f = _function(CASES.get(name) or COPIES[name])
    t = np.array([0.3, -0.5, 1.1])
    value, tangent = wg.source_jvp(f)((X.copy(),), (t,))
    assert value == f(X.copy())
    np.testing.assert_allclose(tangent, finite_differences(f, X) @ t, rtol=1e-6, atol=1e-8)


def cast_sum_(x):  # from Google Tangent's test functions
    return np.sum(np.array(x))


def test_tangents_cast_sum_compiles_and_the_tape_still_refuses():
    compiled = wg.compile(cast_sum_)
    assert compiled(X) == np.sum(X)
    np.testing.assert_array_equal(compiled.grad()(X), np.ones(3))
    np.testing.assert_array_equal(wg.source_grad(cast_sum_)(X), np.ones(3))
    with pytest.raises(ExitError, match="would drop its derivative"):
        wg.grad(cast_sum_)(X)  # NumPy calls __array__: the tape cannot intercept np.array


def float32_round_trip(x):
    y = np.asarray(x, dtype=np.float32)
    z = np.array(y * y, dtype=np.float64)
    return np.sum(z * x)


def test_a_dtype_conversion_is_astype():
    g = wg.source_grad(float32_round_trip)
    assert "astype(np.float32)" in g.program(X).source
    # a cubic: central differences with a wide step are exact up to float32's rounding of y
    np.testing.assert_allclose(g(X), finite_differences(float32_round_trip, X, eps=1e-3), rtol=1e-4)
    np.testing.assert_allclose(wg.compile(float32_round_trip).grad()(X), g(X), rtol=1e-15)


def test_the_dtype_conversion_differentiates_as_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def float32_round_trip_jax(x):
        y = jnp.asarray(x, dtype=jnp.float32)
        z = jnp.array(y * y, dtype=jnp.float64)
        return jnp.sum(z * x)

    want = np.asarray(jax.grad(float32_round_trip_jax)(X))
    np.testing.assert_allclose(wg.source_grad(float32_round_trip)(X), want, rtol=1e-12)
    np.testing.assert_allclose(wg.compile(float32_round_trip).grad()(X), want, rtol=1e-12)


def test_the_program_reads_identity_copy_and_stack():
    same = _function("return np.sum(np.asarray(x) * np.ascontiguousarray(x))")
    text = wg.source_grad(same).program(X).source
    assert "x * x" in text  # asarray: x itself, no statement
    stacked = wg.source_grad(_function(CASES["list_with_python_floats"])).program(X).source
    assert "np.stack(" in stacked
    copied = wg.source_grad(cast_sum_).program(X).source
    assert "= +x" in copied  # the copy (np.positive, as ndarray.copy reads)


# -- copies and aliases: writes into one of two names -------------------------------------------------

COPIES = {
    "write_into_the_copy": "y = np.array(x)\n    y[0] = 5.0\n    y[1] += x[2]\n    return np.sum(x * y)",
    "write_into_the_original": "y = np.array(x)\n    x[1] = 3.0 * x[0]\n    x[2] *= 2.0\n    "
                               "return np.sum(x * y ** 2)",
    "copy_of_a_view": "v = x[1:]\n    y = np.array(v)\n    y[0] = 0.0\n    return np.sum(v * y) + np.sum(x)",
    "copy_written_in_a_loop": "y = np.array(x)\n    for i in range(3):\n        y[i] = y[i] * x[i]\n    "
                              "return np.sum(y) + np.sum(x * x)",
    "asarray_written_when_the_original_is_dead": "y = np.asarray(x)\n    y[0] = 5.0\n    "
                                                 "return np.sum(y * y)",
    "float32_copy_written": "y = np.asarray(x, dtype=np.float32)\n    y[0] = 1.0\n    "
                            "return np.sum(x * x) + np.sum(y * y)",
    "stacked_list_written": "v = np.array([x[0], x[1]])\n    v[0] = 2.0 * v[1]\n    "
                            "return np.sum(v * x[:2]) + x[0]",
}


@pytest.mark.parametrize("name", sorted(COPIES))
def test_copies_are_new_values(name):
    f = _function(COPIES[name])
    loose = "float32" in name
    want = finite_differences(f, X, eps=1e-3 if loose else 1e-6)
    tol = dict(rtol=1e-4, atol=1e-4) if loose else dict(rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(wg.source_grad(f)(X.copy()), want, **tol)
    compiled = wg.compile(f)
    np.testing.assert_allclose(compiled.grad()(X.copy()), want, **tol)
    assert compiled(X.copy()) == f(X.copy())


@pytest.mark.parametrize("body", [
    "y = np.asarray(x)\n    y[0] = 5.0\n    return np.sum(x * y)",
    "y = np.array(x, copy=False)\n    y[0] = 5.0\n    return np.sum(x * y)",
    "y = np.ascontiguousarray(x)\n    y += 1.0\n    return np.sum(x * y)",
])
def test_a_write_into_an_alias_of_a_live_name_is_refused(body):
    """NumPy's asarray shares x's memory: the write changes x too; the source front end refuses rather
    than give x its old value."""
    f = _function(body)
    with pytest.raises(TransformError, match="in-place write into 'y', while 'x' names the same array"):
        wg.source_grad(f)(X.copy())


def test_asarray_imported_by_name():
    f = function_from_text("from numpy import array as make, asarray\n\n\ndef f(x):\n    y = make(x)\n"
                           "    y[0] = 0.0\n    return np.sum(asarray(y) * x)\n", tag="asarray")
    np.testing.assert_allclose(wg.source_grad(f)(X.copy()), finite_differences(f, X), rtol=1e-6, atol=1e-8)


def test_numpys_errors_stand():
    f = _function("return np.sum(np.array([x, x[:2]]))")
    with pytest.raises(ValueError, match="inhomogeneous"):
        wg.source_grad(f)(X)
    g = _function("return np.sum(np.asarray(x, dtype=np.float32, copy=False))")
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
        with pytest.raises(ValueError, match="copy"):
            wg.source_grad(g)(X)


def test_wnp_array_of_a_traced_value_copies_on_the_tape():
    """wnp.array(x) of a tape value is a copy, as np.array(x): a write into it leaves x alone."""
    def f(x):
        y = wnp.array(x)
        y[0] = 5.0
        return wnp.sum(x * y)

    value, grad = wg.value_and_grad(f)(X.copy())
    assert value == f(X.copy())
    np.testing.assert_allclose(grad, finite_differences(f, X), rtol=1e-6, atol=1e-8)


def test_numba_runs_the_conversions_natively():
    numba = pytest.importorskip("numba")
    f = _function(COPIES["write_into_the_copy"])
    g = wg.source_grad(f, backend="numba")
    np.testing.assert_allclose(g(X.copy()), finite_differences(f, X), rtol=1e-6, atol=1e-8)
    assert isinstance(g.program(X).function, numba.core.dispatcher.Dispatcher)


# -- the refusals' messages: the tape refuses conversions too ---------------------------------------------


@pytest.mark.parametrize("body, what", [
    ("return np.sum(np.require(x))", "Converting to a NumPy array"),
    ("return np.float64(x[0]) * x[1]", "Converting to a NumPy array"),
    ("return float(x[0]) * x[1]", "float()"),
])
def test_a_conversion_the_source_front_end_refuses_is_not_sent_to_the_tape(body, what):
    f = _function(body)
    with pytest.raises(TransformError) as refused:
        wg.source_grad(f)(X)
    message = str(refused.value)
    assert what in message and "the tape (wg.grad) refuses it too" in message
    assert "handles it" not in message
    with pytest.raises(Exception) as compiled:  # the trace's refusal, then the source front end's
        wg.compile(f)(X)
    assert "handles it" not in str(compiled.value) and "refuses it too" in str(compiled.value)
    with pytest.raises((ExitError, TypeError)):  # and the tape does refuse it
        wg.grad(f)(X)


# -- random programs mixing the conversions -----------------------------------------------------------

# (the statement, whether v{k} is v{a} itself: NumPy returns the same array), writes marked "write"
_STEPS = [
    ("v{k} = np.asarray(v{a})", "same"),
    ("v{k} = np.array(v{a})", "new"),
    ("v{k} = np.asanyarray(v{a})", "same"),
    ("v{k} = np.ascontiguousarray(v{a})", "same"),
    ("v{k} = np.array([v{a}[0], 1.5, v{b}[2]])", "new"),
    ("v{k} = np.asarray((v{b}[1], v{a}[0] * v{b}[2], 0.5))", "new"),
    ("v{k} = np.sin(v{a}) * v{b}", "new"),
    ("v{k} = np.array([v{a}, v{b}])[1] + 1.0", "new"),
    ("v{a}[1] = v{b}[0] * 2.0", "write"),
    ("v{a}[2] += v{b}[1]", "write"),
    ("v{k} = v{a}", "same"),
]


@st.composite
def _programs(draw):
    """``(body, refused)``: a program on ``v0 = x`` and whether the source front end must refuse it: a
    write into a name while another name of the same array (``asarray``, ``v = w``) is read later
    (NumPy changes both; the source front end gives each name its own value, so it refuses)."""
    statements = []  # (text, names it reads, the name written in place or None)
    array_of = {"x": 0, "v0": 0}  # name -> which array it names (NumPy's memory)
    fresh = 1
    writes = []  # (statement index, the name written, the names of its array then)
    for k in range(1, draw(st.integers(2, 6)) + 1):
        text, kind = draw(st.sampled_from(_STEPS))
        bound = sorted(int(n[1:]) for n in array_of if n != "x")
        a, b = draw(st.sampled_from(bound)), draw(st.sampled_from(bound))
        reads = {f"v{a}", f"v{b}"} if "v{b}" in text else {f"v{a}"}
        if kind == "write":
            name = f"v{a}"
            writes.append((len(statements), name, {n for n, c in array_of.items() if c == array_of[name]}))
            array_of[name] = fresh  # the source front end's new value for the name
        else:
            array_of[f"v{k}"] = array_of[f"v{a}"] if kind == "same" else fresh
        fresh += 1
        statements.append((text.format(k=k, a=a, b=b), reads))
    last = max(int(n[1:]) for n in array_of if n != "x")
    statements.append((f"return np.sum(v{last} * v0) + np.sum(v0 * v0)", {f"v{last}", "v0"}))
    refused = False
    for i, name, sharing in writes:
        later = set().union(*(r for _, r in statements[i + 1:]))
        inside = statements[i][1]
        refused = refused or any(n != name and (n in later or n in inside) for n in sharing)
        if refused:
            break
    return "v0 = x\n    " + "\n    ".join(t for t, _ in statements), refused


@settings(max_examples=20, deadline=None)
@given(program=_programs())
def test_random_programs_with_conversions(program):
    """The gradient of NumPy's run (finite differences), or, exactly where a write goes into an array
    another live name holds too, a refusal (never the other name's stale value)."""
    body, refused = program
    f = _function(body)
    if refused:
        with pytest.raises(TransformError, match="in-place write into"):
            wg.source_grad(f)(X.copy())
        return
    want = finite_differences(f, X)
    np.testing.assert_allclose(wg.source_grad(f)(X.copy()), want, rtol=1e-6, atol=1e-7)
    compiled = wg.compile(f)
    assert compiled(X.copy()) == pytest.approx(f(X.copy()), rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(compiled.grad()(X.copy()), want, rtol=1e-6, atol=1e-7)
