"""Random small programs on the Numba backend against the Python backend, the tape and JAX (slow group:
tests/conftest.py SLOW_PATHS; each program is compiled once, about a second, and Hypothesis varies
only the inputs).

A program is ``reduce(outer(binary(first(x), second(y))))`` with its four parts drawn, once, from the
lists below; each part is written for an array module ``m`` (``wengert.numpy`` or ``jax.numpy``).
Compared: the value and the gradient in both arguments of ``wg.compile(f, backend="numba")`` and
``wg.compile(wg.grad(f, argnums=(0, 1)), backend="numba")`` with the Python backend's (nan where it
has nan, inf where it has inf, the rest to rounding: Numba adds in order, NumPy pairwise; same type,
dtype and shape, a float64 scalar given back as a Python float), at inputs with nan, inf, signed
zeros and huge entries; at finite inputs with the tape's and JAX's (float64)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import wengert as wg
import wengert.numpy as wnp

UNARY = {
    "sin": lambda m, a: m.sin(a),
    "exp": lambda m, a: m.exp(a * 0.5),
    "tanh": lambda m, a: m.tanh(a),
    "square": lambda m, a: a * a,
    "abs": lambda m, a: m.abs(a),
    "sqrt": lambda m, a: m.sqrt(m.abs(a) + 1.0),
    "log1p": lambda m, a: m.log1p(a * a),
    "relu": lambda m, a: m.maximum(a, 0.0),
    "clip": lambda m, a: m.clip(a, -1.0, 1.0),
    "where": lambda m, a: m.where(a > 0, a, 0.5 * a),
    "cumsum": lambda m, a: m.cumsum(a, axis=-1),
    "transpose": lambda m, a: a.T * 2.0 - a,
    "ratio": lambda m, a: a / (1.0 + a * a),
    "centred": lambda m, a: a - m.max(a, axis=-1, keepdims=True),
    "cube": lambda m, a: a ** 3,
    "arctan": lambda m, a: m.arctan(a),
}
BINARY = {
    "add": lambda m, a, b: a + b,
    "mul": lambda m, a, b: a * b,
    "maximum": lambda m, a, b: m.maximum(a, b),
    "sub_row": lambda m, a, b: a - b[0],
    "matmul": lambda m, a, b: a @ b,
    "hypot": lambda m, a, b: m.sqrt(a * a + b * b + 1.0),
}
REDUCE = {
    "sum": lambda m, a: m.sum(a),
    "max0": lambda m, a: m.sum(m.max(a, axis=0)),
    "mean_sq": lambda m, a: m.mean(a * a),
    "prod_row": lambda m, a: m.prod(a[1]),
    "sum_axis": lambda m, a: m.sum(m.sum(a, axis=1) * m.sum(a, axis=0)),
    "min": lambda m, a: m.min(a) + m.sum(a) * 0.25,
}

_rng = np.random.default_rng(2026)
PROGRAMS = [(str(_rng.choice(list(UNARY))), str(_rng.choice(list(UNARY))), str(_rng.choice(list(BINARY))),
             str(_rng.choice(list(UNARY))), str(_rng.choice(list(REDUCE)))) for _ in range(14)]
"""Which parts each program has (a fixed draw: the same programs in every run)."""


def _function(parts, m):
    first, second, binary, outer, reduce = parts

    def f(x, y):
        return REDUCE[reduce](m, UNARY[outer](m, BINARY[binary](m, UNARY[first](m, x), UNARY[second](m, y))))
    f.__name__ = "_".join(parts)
    return f


_BUILT = {}


def _built(k):
    """Program ``k``'s function, its compiled value and gradient on both backends, built (at a first call)
    once, and the fallback warnings of that build."""
    if k not in _BUILT:
        f = _function(PROGRAMS[k], wnp)
        grad = wg.grad(f, argnums=(0, 1))
        compiled = {be: (wg.compile(f, backend=be), wg.compile(grad, backend=be))
                    for be in ("python", "numba")}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", wg.NativeFallbackWarning)
            for function in compiled["numba"]:
                function(np.ones((3, 3)), np.ones((3, 3)))
        said = [str(w.message) for w in caught if w.category is wg.NativeFallbackWarning]
        _BUILT[k] = (f, compiled, said)
    return _BUILT[k]


def _agree(got, want):
    """``got`` (Numba's) is ``want`` (the Python backend's): type, dtype, shape, nan and inf where it
    has them, the rest to rounding."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for a, b in zip(got, want):
            _agree(a, b)
        return
    boxed = type(want) is np.float64 and type(got) is float
    assert type(got) is type(want) or boxed, (type(got), type(want))
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-11, atol=1e-300)


_EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e200, -1e200, 5e-324, 1.0, -1.0]
_entry = st.one_of(st.floats(-3, 3), st.sampled_from(_EDGES))
_finite = st.floats(-2, 2).filter(lambda v: abs(v) > 1e-3 and abs(abs(v) - 1) > 1e-3)
"""Away from kinks where conventions differ: clip's derivative at its bound is 1 here and in PyTorch,
0.5 in JAX (a min of a max); abs and where at 0. The comparison with the Python backend has them."""


@settings(max_examples=60, deadline=None)
@given(st.integers(0, len(PROGRAMS) - 1), hnp.arrays(np.float64, (3, 3), elements=_entry),
       hnp.arrays(np.float64, (3, 3), elements=_entry))
def test_random_programs_on_numba_give_the_python_backends_values_and_gradients(k, x, y):
    pytest.importorskip("numba")
    _, compiled, _ = _built(k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for which in (0, 1):
            _agree(compiled["numba"][which](x, y), compiled["python"][which](x, y))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, len(PROGRAMS) - 1), hnp.arrays(np.float64, (3, 3), elements=_finite),
       hnp.arrays(np.float64, (3, 3), elements=_finite))
def test_random_programs_on_numba_give_the_tapes_and_jaxs_gradients(k, x, y):
    pytest.importorskip("numba")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f, compiled, _ = _built(k)
    got = compiled["numba"][1](x, y)
    for a, b in zip(got, wg.grad(f, argnums=(0, 1))(x, y)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    want = jax.grad(_function(PROGRAMS[k], jax.numpy), argnums=(0, 1))(x, y)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-9, atol=1e-12)


def test_the_programs_run_natively():
    """The comparisons above are of machine code: the programs run natively, but where a gradient sums
    with ``keepdims=True`` (``prod``'s), which Numba's ``sum`` does not take (docs/compiling.md)."""
    pytest.importorskip("numba")
    native = 0
    for k in range(len(PROGRAMS)):
        said = _built(k)[2]
        assert all("keepdims=True" in m for m in said), said
        native += not said
    assert native >= len(PROGRAMS) - 3
