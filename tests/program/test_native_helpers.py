"""The Numba versions of generated code's helpers (``tie_select``, ``chooser_weights``, ``masked``,
``add_chosen``): run as NumPy, equal to the Python helpers bit for bit on ties, infinities, all-false
masks and every axis form; compiled, the gradients of ``maximum``, ``minimum``, ``max``, ``min`` and
``where(mask, x, 0)`` run natively and equal the Python backend's (one Numba compilation, shared)."""

import os
import warnings

os.environ.setdefault("NUMBA_OPT", "0")  # a third of the compile time; no fast-math either way: same floats

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import wengert as wg
import wengert.numpy as wnp
from wengert.program import native_helpers
from wengert.program.native import native_fact
from wengert.rules import elementwise, reductions

TIES = st.sampled_from([-1.0, 0.0, 1.0, 2.0])  # few values: many ties
SHAPES = [(5,), (3, 4), (2, 3, 4)]


def _same(got, want):
    """Equal values (nan where nan, and the sign of zero aside) in the same dtype."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def _axes(ndim):
    """Every axis form a max takes on ``ndim`` axes: None, each int (negative too), pairs as tuples."""
    forms = [None] + list(range(ndim)) + [-1]
    forms += [(a, b) for a in range(ndim) for b in range(a + 1, ndim)] + [tuple(range(ndim))]
    return forms


# -- as NumPy: the same values as the Python helpers --------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from(SHAPES), st.sampled_from([np.float64, np.float32]), st.booleans())
def test_chooser_weights_equal_the_python_helper_on_ties_for_every_axis(data, shape, dtype, use_min):
    x = data.draw(hnp.arrays(dtype, shape, elements=TIES | st.just(np.nan)))  # a nan: no element is the max
    for axis in _axes(len(shape)):
        for keepdims in (False, True):
            out = (np.min if use_min else np.max)(x, axis=axis, keepdims=keepdims)
            want = reductions.chooser_weights.helper(out, x, axis, keepdims)
            _same(native_helpers.chooser_weights_native(out, x, axis, keepdims), want)


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from(SHAPES), st.sampled_from([np.float64, np.float32]))
def test_extremes_over_axes_equal_numpy_with_nan_and_ties(data, shape, dtype):
    x = data.draw(hnp.arrays(dtype, shape, elements=st.sampled_from([-1.0, 0.0, 2.0, np.inf, np.nan])))
    for axis in _axes(len(shape)):
        for largest, reduce in ((True, np.max), (False, np.min)):
            _same(native_helpers.extremes_native(x, axis, largest), np.ravel(reduce(x, axis=axis)))


def test_chooser_weights_split_repeated_maxima_equally():
    x = np.array([[2.0, 1.0, 2.0], [0.0, 0.0, 0.0]])
    _same(native_helpers.chooser_weights_native(np.max(x, axis=1), x, 1, False),
          [[0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    _same(native_helpers.chooser_weights_native(2.0, x, None, False), [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])


def test_chooser_weights_refuse_maxima_of_another_shape():
    with pytest.raises(ValueError, match="chooser_weights: the maxima do not have the reduced shape of x"):
        native_helpers.chooser_weights_native(np.zeros(3), np.zeros((3, 4)), 0, False)


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from([((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((4,), ())]),
       st.sampled_from([np.float64, np.float32]))
def test_tie_select_equals_the_python_helper(data, shapes, dtype):
    x = data.draw(hnp.arrays(np.float64, shapes[0], elements=TIES))
    y = data.draw(hnp.arrays(np.float64, shapes[1], elements=TIES))
    out_shape = np.broadcast_shapes(*shapes)
    g = data.draw(hnp.arrays(dtype, out_shape, elements=st.sampled_from([-3.0, 0.5, 7.0, np.inf, -np.inf])))
    for args in [(g, x, y), (g, y, x), (g, x, x), (g, x, 1.0)]:
        _same(native_helpers.tie_select_native(*args), elementwise.tie_select.helper(*args))


def test_tie_select_halves_at_ties_and_keeps_infinite_cotangents_out_of_the_others():
    g = np.array([4.0, np.inf, -np.inf, 6.0])
    x, y = np.array([1.0, 0.0, 2.0, 3.0]), np.array([1.0, 1.0, 2.0, 0.0])
    _same(native_helpers.tie_select_native(g, x, y), [2.0, 0.0, -np.inf, 6.0])
    _same(native_helpers.tie_select_native(g, x, x), g / 2)  # maximum(x, x): half to each


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from([((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), (3, 1))]),
       st.sampled_from([np.float64, np.float32]))
def test_masked_equals_the_python_helper_on_all_false_masks_and_infinities(data, shapes, dtype):
    a = data.draw(hnp.arrays(dtype, shapes[0], elements=st.sampled_from([-2.0, 0.0, 3.5, np.inf, np.nan])))
    mask = data.draw(hnp.arrays(np.bool_, shapes[1]))
    for m in (mask, np.zeros_like(mask), np.ones_like(mask)):
        _same(native_helpers.masked_native(a, m), elementwise.masked(a, m))


@settings(max_examples=30, deadline=None)
@given(st.data(), st.sampled_from(SHAPES),
       st.sampled_from([0.0, -0.0, 1.5, -2.0, np.nan, np.inf, -np.inf, 5e-324]), st.booleans())
def test_add_chosen_equals_the_python_helper(data, shape, g, use_min):
    x = data.draw(hnp.arrays(np.float64, shape, elements=TIES | st.just(np.nan)))
    for axis in (None, 0, -1):
        for keepdims in (False, True):
            top = (np.min if use_min else np.max)(x, axis=axis, keepdims=keepdims)
            want, got = np.ones_like(x), np.ones_like(x)
            reductions.add_chosen(want, g, top, x, axis, keepdims)
            native_helpers.add_chosen_native(got, g, top, x, axis, keepdims)
            _same(got, want)


def test_the_primitives_with_a_numba_helper_count_as_native():
    pytest.importorskip("numba")
    for prim in (elementwise.tie_select, reductions.chooser_weights):
        native, how = native_fact(prim)
        assert native and "its Numba version" in how, how


# -- compiled: one program whose gradient calls every helper ------------------------------------------

def _loss(x, y, m, v):
    """maximum/minimum (ties between x and y, and x with itself), max/min over all axes and over one (with
    and without keepdims), and a where(mask, ., 0): their gradients call tie_select, chooser_weights, masked
    and add_chosen, their values ``native_helpers.extremes_native``."""
    total = wnp.sum(wnp.maximum(x, y) * v) + wnp.sum(wnp.minimum(x, 1.0)) + wnp.sum(wnp.maximum(x, x))
    total = total + wnp.max(x) * 2.0 + wnp.min(x * y) + wnp.sum(wnp.max(x, axis=1) * v[0])
    total = total + wnp.sum(wnp.min(x, axis=0, keepdims=True) * v)
    total = total + wnp.sum(wnp.max(x, axis=-1, keepdims=True))
    total = total + wnp.max(x) * wnp.min(y)  # x's cotangent accumulated at its maxima: add_chosen
    return total + wnp.sum(wnp.where(m, x * y, 0.0))


SHAPE = (4, 3)


@pytest.fixture(scope="module")
def compiled_pair(tmp_path_factory):
    """The Python and the Numba backend's value-and-gradient of ``_loss``, compiled once."""
    pytest.importorskip("numba")
    mp = pytest.MonkeyPatch()
    mp.setenv("WENGERT_CACHE_DIR", str(tmp_path_factory.mktemp("wengert-cache")))
    python = wg.compile(_loss).value_and_grad((0, 1))
    native = wg.compile(_loss, backend="numba").value_and_grad((0, 1))
    yield python, native
    mp.undo()


def _check(pair, x, y, m):
    python, native = pair
    v = np.linspace(0.5, 1.5, SHAPE[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.NativeFallbackWarning)
        got = native(x, y, m, v)
    want = python(x, y, m, v)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=0)


def test_the_gradients_of_extremes_and_masks_run_natively(compiled_pair):
    numba = pytest.importorskip("numba")
    x = np.array([[2.0, 1.0, 2.0], [0.0, 2.0, -1.0], [1.0, 1.0, 1.0], [-1.0, 0.0, 2.0]])
    _check(compiled_pair, x, x.T[::-1].reshape(SHAPE).copy(), np.zeros(SHAPE, bool))  # an all-false mask
    function = [e for entries in compiled_pair[1]._cache.values() for e in entries][-1].function
    assert isinstance(getattr(function, "func", function), numba.core.dispatcher.Dispatcher)


def test_the_fused_accumulation_at_the_maxima_runs_natively(compiled_pair):
    x = np.array([[2.0, 1.0, 2.0], [0.0, 2.0, -1.0], [1.0, 1.0, 1.0], [-1.0, 0.0, 2.0]])
    python = compiled_pair[0]
    assert "add_chosen(" in python.source(x, x, np.zeros(SHAPE, bool), np.ones(SHAPE[1]))
    _check(compiled_pair, x, x + 1.0, np.ones(SHAPE, bool))


def test_a_nan_gives_the_python_backends_gradient(compiled_pair):
    x = np.array([[2.0, np.nan, 2.0], [0.0, 2.0, -1.0], [1.0, 1.0, 1.0], [-1.0, 0.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _check(compiled_pair, x, np.ones(SHAPE), np.ones(SHAPE, bool))


def test_nan_and_infinite_cotangents_at_the_maxima_give_the_tapes_gradient_natively(compiled_pair):
    """``max(x) * min(y)``: ``min(y)`` is the cotangent ``add_chosen`` adds at x's maxima: nan or infinite
    it is nan off them too (inf * 0), and 0 where a maximum is nan gives nan everywhere (0 * nan)."""
    x = np.array([[2.0, 1.0, 2.0], [0.0, 2.0, -1.0], [1.0, 1.0, 1.0], [-1.0, 0.0, 2.0]])
    m, v = np.ones(SHAPE, bool), np.linspace(0.5, 1.5, SHAPE[1])
    tape = wg.value_and_grad(_loss, argnums=(0, 1))
    for bad in (np.nan, -np.inf, 0.0):  # min(y): nan, -inf, 0
        y = np.ones(SHAPE)
        y[1, 2] = bad
        for z in (x, np.where(x == 0.0, np.nan, x)):
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                _check(compiled_pair, z, y, m)
                want = tape(z, y, m, v)
                for got, w in zip(compiled_pair[1](z, y, m, v)[1], want[1]):
                    np.testing.assert_allclose(got, w, rtol=1e-13, atol=0)
            assert np.isnan(want[1][0]).all() == (bad != bad or z is not x)  # (-inf: -inf at the maxima)


@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.float64, SHAPE, elements=TIES | st.just(np.nan)),
       hnp.arrays(np.float64, SHAPE, elements=TIES), hnp.arrays(np.bool_, SHAPE))
def test_native_gradients_equal_python_on_ties(compiled_pair, x, y, m):
    _check(compiled_pair, x, y, m)


def test_every_numba_version_takes_the_python_helpers_arguments():
    """Generated code calls a helper by the Python one's signature (``add_chosen`` gained ``axis`` and
    ``keepdims``, and its Numba version once lacked them: every call fell back)."""
    import inspect

    for python, native in native_helpers.NATIVE_HELPERS.items():
        names = [p.name for p in inspect.signature(python).parameters.values()]
        assert [p.name for p in inspect.signature(native).parameters.values()] == names, python.__name__
