"""The Numba backend (``backend="numba"``): straight-line and array programs of ``wg.compile``, loops,
ifs and in-place adjoints of ``wg.source_grad``, against the Python backend and JAX; the fallback
warning, the errors, the disk cache. Each test compiles one or two programs (0.1-1 s each)."""

import importlib
import os
import sys
import warnings

os.environ.setdefault("NUMBA_OPT", "0")  # a third of the compile time; no fast-math either way: same floats

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.program import native_build


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("WENGERT_CACHE_DIR", str(tmp_path))


def _native(compiled):
    """Whether the last program of ``compiled`` (a wg.compile or source_grad function) runs on Numba."""
    numba = importlib.import_module("numba")
    if hasattr(compiled, "_last"):
        function = compiled._last.function
    else:
        function = [e for entries in compiled._cache.values() for e in entries][-1].function
    return isinstance(getattr(function, "func", function), numba.core.dispatcher.Dispatcher)


def chain(x, y):
    """A scalar chain: 60 operations on Python floats."""
    for k in range(10):
        x = np.sin(x) * y + 0.1 * k
        y = np.exp(-x * x) + y / (1.0 + x * x)
    return x * y


def sumsq(v):
    s = 0.0
    for i in range(v.shape[0]):
        s = s + v[i] * v[i]
    return s


def branchy(x, y):
    z = 0.0
    if x > 0.5:
        z = x * y
    else:
        z = np.sin(x) + y
    while z < 10.0:
        z = z * 1.5 + x
    return z


def squares_weighted(x):
    buf = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        buf[i] = x[i] * x[i]
    return np.sum(buf * x)


def layer(W, x):
    h = np.tanh(W @ x)
    return np.sum(h * h) + np.sum(np.exp(-x) * x)


def test_scalar_chain_is_native_and_equal_to_python():
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        native = wg.compile(chain, backend="numba").value_and_grad((0, 1))
        got = native(0.3, 0.7)
    assert _native(native)
    want = wg.compile(chain).value_and_grad((0, 1))(0.3, 0.7)
    np.testing.assert_allclose([got[0], *got[1]], [want[0], *want[1]], rtol=1e-13)
    assert type(got[0]) is float


def test_array_program_is_native_and_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(0)
    W, x = rng.normal(size=(4, 3)), rng.normal(size=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        native = wg.compile(layer, backend="numba").grad((0, 1))
        gW, gx = native(W, x)
    assert _native(native)
    jnp = jax.numpy
    want = jax.grad(lambda W, x: jnp.sum(jnp.tanh(W @ x) ** 2) + jnp.sum(jnp.exp(-x) * x), (0, 1))(W, x)
    np.testing.assert_allclose(gW, want[0], rtol=1e-12)
    np.testing.assert_allclose(gx, want[1], rtol=1e-12)


def test_loop_with_in_place_adjoints_is_native():
    v = np.linspace(0.1, 1.0, 7)
    native = wg.source_grad(squares_weighted, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        got = native(v)
    assert _native(native)
    assert "+=" in native.source  # the adjoint is accumulated in place, v_bar[i] += ...
    np.testing.assert_allclose(got, wg.source_grad(squares_weighted)(v), rtol=1e-14)
    np.testing.assert_allclose(got, 3 * v * v, rtol=1e-14)


@pytest.mark.parametrize("args", [(0.7, 0.3), (0.2, 0.3)], ids=["then", "else"])
def test_if_and_while_are_native(args):
    native = wg.source_grad(branchy, (0, 1), backend="numba")
    got = native(*args)
    assert _native(native)
    np.testing.assert_allclose(got, wg.source_grad(branchy, (0, 1))(*args), rtol=1e-14)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)

    def branchy_jax(x, y):  # the same function in jax.numpy (jax.grad follows Python control flow)
        z = x * y if x > 0.5 else jax.numpy.sin(x) + y
        while z < 10.0:
            z = z * 1.5 + x
        return z

    np.testing.assert_allclose(got, jax.grad(branchy_jax, (0, 1))(*args), rtol=1e-12)


_SUMSQ = {}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=5, max_size=5))
def test_values_follow_the_python_backend_on_any_input(values):
    """One compiled program (compiled at the first example) on varying inputs."""
    if not _SUMSQ:
        _SUMSQ["numba"] = wg.source_grad(sumsq, backend="numba")
        _SUMSQ["python"] = wg.source_grad(sumsq)
    v = np.array(values)
    np.testing.assert_allclose(_SUMSQ["numba"](v), _SUMSQ["python"](v), rtol=1e-15, atol=0)
    assert _native(_SUMSQ["numba"])


def test_a_primitive_numba_lacks_falls_back_once_with_its_name():
    def f(a, b):
        return wnp.sum(wnp.einsum("ij,jk->ik", a, b))

    a, b = np.ones((2, 3)), np.arange(6.0).reshape(3, 2)
    cf = wg.compile(f, backend="numba").grad()
    with pytest.warns(wg.NativeFallbackWarning, match=r"primitive einsum \(Numba has no np.einsum\)"):
        got = cf(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)  # warned once per program
        cf(a, b)
    np.testing.assert_allclose(got, wg.compile(f).grad()(a, b))


def test_a_signature_numba_cannot_type_falls_back_naming_the_primitive():
    def f(x, y):  # a float reshaped: Numba has np.reshape, but not of a float (found when compiling)
        return wnp.reshape(x * y, (1, 1)) * 2.0

    cf = wg.compile(f, backend="numba")
    with pytest.warns(wg.NativeFallbackWarning, match=r"primitive reshape at `.*np_reshape\("):
        got = cf(0.5, 3.0)
    np.testing.assert_array_equal(got, wg.compile(f)(0.5, 3.0))


def test_captured_arrays_are_read_at_each_call():
    scale = np.array([1.0, 2.0, 3.0])
    g = globals()
    g["_SCALE"] = scale

    def f(x):
        return np.sum(_SCALE * x * x)  # noqa: F821 - a global set above

    try:
        cf = wg.compile(f, backend="numba").grad()
        x = np.ones(3)
        np.testing.assert_allclose(cf(x), 2 * scale)
        scale[:] = [5.0, 6.0, 7.0]
        np.testing.assert_allclose(cf(x), 2 * scale)
        assert _native(cf)
    finally:
        del g["_SCALE"]


def test_the_compiled_module_is_cached_on_disk(tmp_path):
    cf = wg.compile(sumsq_vector, backend="numba").grad()
    x = np.linspace(0.0, 1.0, 4)
    want = cf(x)
    files = list((tmp_path / "native").glob("w_*.py"))
    assert len(files) == 1
    assert list((tmp_path / "native" / "__pycache__").glob("*.nbi"))  # Numba's index of its machine code
    # another process: a fresh import of the same file loads the machine code instead of compiling
    name = f"wengert_native_{files[0].stem[2:]}"
    module = sys.modules.pop(name)
    try:
        again = wg.compile(sumsq_vector, backend="numba").grad()
        np.testing.assert_allclose(again(x), want)
        dispatcher = sys.modules[name].sumsq_vector_grad
        assert dispatcher.stats.cache_hits and not dispatcher.stats.cache_misses
    finally:
        sys.modules[name] = module


def test_a_change_of_the_native_helpers_gives_the_module_another_file(monkeypatch):
    """A module's machine code holds the implementations ``native_helpers.register_typing`` chose, which
    its text only names: the file's hash covers ``native_helpers``' source, so a Numba cache made with
    other implementations is never loaded."""
    numba = importlib.import_module("numba")
    text = "ANSWER = 42\n"
    first = native_build._import(text, numba)
    assert native_build._import(text, numba) is first
    original = native_build._typed_source()
    assert "def assign_slices(" in original
    monkeypatch.setattr(native_build, "_typed_source", lambda: original + "# changed\n")
    second = native_build._import(text, numba)
    assert second.__name__ != first.__name__ and second.__file__ != first.__file__ and second.ANSWER == 42


def sumsq_vector(x):
    return np.sum(x * x)


def test_unknown_backend_lists_the_choices():
    with pytest.raises(ValueError, match=r"wg.compile\(chain\): unknown backend 'numbaa'; the choices are "
                                         r"'python', 'numba'"):
        wg.compile(chain, backend="numbaa")
    with pytest.raises(ValueError, match=r"source_grad\(sumsq\): unknown backend 'C'"):
        wg.source_grad(sumsq, backend="C")


def test_without_numba_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    with pytest.raises(ImportError, match=r'wg.compile\(chain\): backend="numba" needs Numba, which is not '
                                          r'installed. Install it with pip install "wengert\[numba\]"'):
        wg.compile(chain, backend="numba")
    with pytest.raises(ImportError, match=r'pip install "wengert\[numba\]"'):
        wg.source_grad(sumsq, backend="numba")
    assert wg.compile(chain).grad()(0.3, 0.7) == wg.grad(chain)(0.3, 0.7)  # the Python backend needs none


def test_source_names_the_primitives_numba_cannot_run():
    program = wg.compile(lambda a: wnp.sum(wnp.linalg.det(a))).grad().program(np.eye(2) * 2.0)
    said = native_build.refusals(program)
    assert said and all(s.startswith("primitive linalg.") and "(a Python implementation)" in s for s in said)


def test_a_function_named_like_a_math_function_compiles_natively():
    # wg.compile(np.sin)'s program is named sin, the name of the math function its body calls
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        value = wg.compile(np.sin, backend="numba")(0.5)
        slope = wg.compile(np.sin, backend="numba").grad()(0.5)
    assert value == pytest.approx(np.sin(0.5), rel=1e-15) and slope == pytest.approx(np.cos(0.5), rel=1e-15)


def test_long_straight_line_programs_run_as_python_with_advice(monkeypatch):
    monkeypatch.setattr(native_build, "MAX_STRAIGHT_LINE", 20)  # Numba takes minutes at 2,000 statements

    def long_chain(x):
        for _ in range(10):
            x = np.sin(x) * 1.0001 + 0.1
        return x

    with pytest.warns(wg.NativeFallbackWarning, match=r"statements of straight-line code.*wg.source_grad"):
        got = wg.compile(long_chain, backend="numba").grad()(0.3)
    assert got == pytest.approx(wg.grad(long_chain)(0.3), rel=1e-14)
    with warnings.catch_warnings():  # the loop kept: native, whatever its trip count
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        assert wg.source_grad(long_chain, backend="numba")(0.3) == pytest.approx(got, rel=1e-13)
