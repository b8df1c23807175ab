"""NumPy code brought over unchanged: values equal NumPy's, gradients equal JAX's (a peer), and
properties hold for generated inputs. Finite-difference checks of the same functions are in
tests/rules/cases/numpy_dropin.py."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import wengert as wg
import wengert.numpy as wnp
from wengert.core.errors import TracingError
from wengert.testing import check_grads

rng = np.random.default_rng(3)
X = rng.standard_normal(6)
M = rng.standard_normal((3, 4))
XP = np.array([-1.0, -0.3, 0.4, 1.2])
FP = np.array([0.5, -1.0, 2.0, 0.25])

VALUES = [
    ("gradient", lambda m: m.gradient(X)),
    ("gradient spacing, axis", lambda m: m.gradient(M, 0.3, axis=1)),
    ("gradient edge_order=2", lambda m: m.gradient(M, edge_order=2)),
    ("gradient coordinates", lambda m: m.gradient(X, np.cumsum(np.arange(1.0, 7.0)), edge_order=2)),
    ("gradient two points", lambda m: m.gradient(np.array([1.0, 3.0]))),
    ("interp", lambda m: m.interp(np.linspace(-2, 2, 9), XP, FP)),
    ("interp knots", lambda m: m.interp(XP, XP, FP, left=-7.0, right=7.0)),
    ("interp scalar", lambda m: m.interp(0.1, [0.0, 1.0], [1.0, 3.0])),
    ("convolve", lambda m: m.convolve(X, X[:3])),
    ("convolve short first", lambda m: m.convolve(X[:2], X)),
    ("convolve same", lambda m: m.convolve(X[:4], X[:3], "same")),
    ("convolve same longer v", lambda m: m.convolve(X[:3], X, "same")),
    ("convolve valid", lambda m: m.convolve(X[:2], X, "valid")),
    ("correlate", lambda m: m.correlate(X, X[:3])),
    ("correlate full longer v", lambda m: m.correlate(X[:3], X, "full")),
    ("correlate same longer v", lambda m: m.correlate(X[:2], X[:5], "same")),
    ("correlate complex", lambda m: m.correlate(X[:4] + 1j * X[2:], X[:2] - 2j, "full")),
    ("polyval", lambda m: m.polyval(X[:3], M)),
    ("polyval list", lambda m: m.polyval([1.0, -2.0, 0.5], 1.5)),
    ("polyfit", lambda m: m.polyfit(np.arange(6.0), X, 2)),
    ("polyfit 2-D, weights", lambda m: m.polyfit(np.arange(3.0), M, 1, w=np.array([1.0, 2.0, 0.5]))),
    ("vander", lambda m: m.vander(X[:3], 4)),
    ("vander increasing", lambda m: m.vander(np.array([0.0, 2.0]), increasing=True)),
    ("copysign", lambda m: m.copysign(X, X[::-1])),
    ("copysign -0.0", lambda m: m.copysign(np.array([1.0, -2.0, 0.0]), np.array([-0.0, 0.0, -1.0]))),
    ("real_if_close", lambda m: m.real_if_close(X + 1e-20j)),
    ("real_if_close stays complex", lambda m: m.real_if_close(X + 1e-3j)),
    ("sum where initial", lambda m: m.sum(M, axis=1, where=M > 0, initial=1.5)),
    ("prod where", lambda m: m.prod(M, axis=0, where=M > -0.5)),
    ("max where initial", lambda m: m.max(M, axis=0, where=M < 0.5, initial=-9.0)),
    ("max initial above", lambda m: m.max(M, initial=10.0)),
    ("min initial keepdims", lambda m: m.min(M, axis=1, initial=0.0, keepdims=True)),
    ("reshape F", lambda m: m.reshape(M, (2, 6), order="F")),
    ("reshape F 3-d", lambda m: m.reshape(M, (2, 3, 2), order="F")),
    ("ravel F", lambda m: m.ravel(M, order="F")),
    ("einsum sublist", lambda m: m.einsum(M, [0, 1], M, [2, 1], [0, 2])),
    ("einsum sublist implicit", lambda m: m.einsum(M, [0, 1], M, [0, 1])),
    ("einsum ii->i", lambda m: m.einsum("ii->i", M[:, :3])),
    ("einsum ii", lambda m: m.einsum("ii", M[:, :3])),
    ("einsum iij", lambda m: m.einsum("iij,j->i", np.stack([M[:, :3]] * 4, -1), X[:4])),
    ("einsum ellipsis ii", lambda m: m.einsum("...ii->...i", np.stack([M[:, :3]] * 2))),
]


@pytest.mark.parametrize("name,call", VALUES, ids=[v[0] for v in VALUES])
def test_values_equal_numpy(name, call):
    ours, theirs = call(wnp), call(np)
    assert np.shape(ours) == np.shape(theirs)
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-13)


def test_plain_numpy_calls_on_traced_values_dispatch_to_them():
    def f(x):
        return (np.sum(np.gradient(x) ** 2) + np.sum(np.interp([0.1, 0.5], XP, x))
                + np.sum(np.convolve(x, x)) + np.polyval(x, 0.3) + np.sum(np.copysign(x, -1.0))
                + np.sum(x, where=x > 0, initial=1.0) + np.einsum("i,i", x, x))

    check_grads(f, FP)


def test_errors_say_what_to_do():
    with pytest.raises(ValueError, match="specify 'initial'"):
        wnp.max(X, where=X > 0)
    with pytest.raises(NotImplementedError, match="period"):
        wnp.interp(X, XP, FP, period=2.0)
    with pytest.raises(ValueError, match="one-dimensional.*axes"):
        wnp.convolve(M, X)
    with pytest.raises(TypeError, match="spacings must be plain"):
        wg.grad(lambda h: wnp.sum(wnp.gradient(X, h)))(0.5)
    with pytest.raises(NotImplementedError, match="full= and cov="):
        wnp.polyfit(X, X, 1, cov=True)


# -- the peer: JAX's gradients of the same programs -------------------------------------------------

@pytest.fixture(scope="module")
def jnp():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy

    return jax.numpy


PEER = [
    ("gradient", lambda m, x: m.sum(m.sin(m.gradient(x, 0.7)))),
    ("interp fp and x", lambda m, x: m.sum(m.interp(x * 0.9, XP, x[:4] ** 2))),
    ("convolve", lambda m, x: m.sum(m.convolve(x, x[:3] ** 2, mode="same") ** 2)),
    ("correlate", lambda m, x: m.sum(m.correlate(x, m.cos(x[:2]), mode="full") ** 2)),
    ("polyval", lambda m, x: m.sum(m.polyval(x[:3], x))),
    ("polyfit", lambda m, x: m.sum(m.polyfit(m.arange(6.0), x, 2) ** 2)),
    ("copysign", lambda m, x: m.sum(m.copysign(x, x[::-1]) * x)),
    ("sum where initial", lambda m, x: m.sum(x ** 2, where=x > 0, initial=2.0)),
    ("max where initial", lambda m, x: m.max(x ** 2, where=x < 1, initial=-1.0)),
    ("reshape F", lambda m, x: m.sum(m.reshape(x, (2, 3), order="F") * m.arange(6.0).reshape(2, 3))),
    ("einsum ii", lambda m, x: m.einsum("ii", m.outer(x, m.sin(x)))),
    ("einsum ii->i", lambda m, x: m.sum(m.einsum("ii->i", m.outer(x, x)) ** 3)),
]


@pytest.mark.parametrize("name,f", PEER, ids=[p[0] for p in PEER])
def test_gradients_equal_jax(jnp, name, f):
    import jax

    ours = wg.grad(lambda x: f(wnp, x))(X)
    theirs = np.asarray(jax.grad(lambda x: f(jnp, x))(X))
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


# -- properties -------------------------------------------------------------------------------------

floats = st.floats(-10, 10, allow_nan=False, width=64)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=3, max_side=5),
                  elements=floats),
       st.integers(0, 2), st.sampled_from([1, 2]))
def test_gradient_is_numpys_and_linear(f, axis, edge_order):
    axis = axis % f.ndim
    np.testing.assert_allclose(wnp.gradient(f, axis=axis, edge_order=edge_order),
                               np.gradient(f, axis=axis, edge_order=edge_order), rtol=1e-12, atol=1e-9)
    cot = np.cos(np.arange(f.size, dtype=float)).reshape(f.shape)
    ours = wg.grad(lambda v: wnp.sum(wnp.gradient(v, axis=axis, edge_order=edge_order) * cot))(f)
    # linear: the VJP is the transpose, sum_i cot_i * gradient(e_j)_i
    basis = np.eye(f.size).reshape((f.size,) + f.shape)
    expected = [np.sum(cot * np.gradient(e, axis=axis, edge_order=edge_order)) for e in basis]
    np.testing.assert_allclose(ours.ravel(), expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 7), elements=floats),
       hnp.arrays(np.float64, st.integers(1, 7), elements=floats), st.sampled_from(["full", "same", "valid"]))
def test_convolve_and_correlate_are_numpys(a, v, mode):
    np.testing.assert_allclose(wnp.convolve(a, v, mode), np.convolve(a, v, mode), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(wnp.correlate(a, v, mode), np.correlate(a, v, mode), rtol=1e-12, atol=1e-9)
    # bilinear: the gradient in a is the correlation of the cotangent's pieces with v
    ga = wg.grad(lambda a_: wnp.sum(wnp.convolve(a_, v, mode)))(a)
    ea = [np.sum(np.convolve(e, v, mode)) for e in np.eye(len(a))]
    np.testing.assert_allclose(ga, ea, rtol=1e-12, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, st.integers(2, 6), elements=floats, unique=True),
       hnp.arrays(np.float64, st.integers(1, 5), elements=floats))
def test_interp_is_numpys_and_its_slope_is_the_segments(xp, x):
    xp = np.sort(xp)
    fp = np.sin(xp)
    np.testing.assert_allclose(wnp.interp(x, xp, fp), np.interp(x, xp, fp), rtol=1e-12, atol=1e-12)
    slopes = wg.grad(lambda x_: wnp.sum(wnp.interp(x_, xp, fp)))(x)
    i = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, len(xp) - 2)
    inside = (x >= xp[0]) & (x <= xp[-1])
    expected = np.where(inside, (fp[i + 1] - fp[i]) / (xp[i + 1] - xp[i]), 0.0)
    np.testing.assert_allclose(slopes, expected, rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=floats),
       st.sampled_from([True, False]), st.floats(-5, 5))
def test_masked_reductions_are_numpys(x, use_mask, initial):
    where = x > 0 if use_mask else True
    for fname in ("sum", "max", "min"):
        ours = getattr(wnp, fname)(x, axis=-1, where=where, initial=initial)
        np.testing.assert_allclose(ours, getattr(np, fname)(x, axis=-1, where=where, initial=initial))
    g = wg.grad(lambda v: wnp.sum(wnp.sum(v * v, axis=0, where=where, initial=initial)))(x)
    np.testing.assert_allclose(g, np.where(where, 2 * x, 0.0))


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), elements=floats))
def test_order_f_reshape_is_numpys_and_its_gradient_is_the_inverse_reshape(x):
    target = (x.size,) if x.ndim > 2 else (-1, 1)
    np.testing.assert_array_equal(wnp.reshape(x, target, order="F"), np.reshape(x, target, order="F"))
    w = np.arange(x.size, dtype=float).reshape(np.reshape(x, target, order="F").shape)
    g = wg.grad(lambda v: wnp.sum(wnp.reshape(v, target, order="F") * w))(x)
    np.testing.assert_array_equal(g, np.reshape(w, x.shape, order="F"))


def test_compiled_and_batched_gradients_equal_the_tapes():
    def f(x):
        return (wnp.sum(wnp.gradient(x) ** 2) + wnp.sum(wnp.convolve(x, x[:2]) ** 2) + wnp.polyval(x, 0.3)
                + wnp.sum(wnp.copysign(x, -1.0) * x) + wnp.sum(x, where=x > 0, initial=1.0)
                + wnp.sum(wnp.polyfit(np.arange(4.0), x, 1) ** 2) + wnp.einsum("ii", wnp.outer(x, x))
                + wnp.sum(wnp.reshape(x, (2, 2), order="F")[0] ** 3) + wnp.max(x, initial=0.5))

    x = FP
    tape = wg.grad(f)(x)
    np.testing.assert_allclose(wg.compile(wg.grad(f))(x), tape, rtol=1e-12)
    batch = np.stack([x, x[::-1]])
    batched = wg.vmap(wg.grad(f))(batch)
    np.testing.assert_allclose(batched[1], wg.grad(f)(x[::-1]), rtol=1e-12)
    np.testing.assert_allclose(batched[0], tape, rtol=1e-12)


def test_data_dependent_ones_refuse_programs_and_say_so():
    with pytest.raises(TracingError, match="real_if_close.*whether the result is real.*wg.grad"):
        wg.compile(wg.grad(lambda x: wnp.sum(wnp.real(wnp.real_if_close(x + 0j)))))(FP)


def test_interp_follows_the_data_in_programs_and_batches():
    x = np.array([-1.5, -0.6, 0.1, 0.9, 1.4])
    f = lambda x, fp: wnp.sum(wnp.interp(x, XP, fp) ** 2)
    tape = wg.grad(f, (0, 1))(x, FP)
    compiled = wg.compile(wg.grad(f, (0, 1)))(x, FP)
    for a, b in zip(compiled, tape):
        np.testing.assert_allclose(a, b, rtol=1e-14)
    batched = wg.vmap(wg.grad(f), in_axes=(0, None))(np.stack([x, x[::-1] * 0.9]), FP)
    np.testing.assert_allclose(batched[1], wg.grad(f)(x[::-1] * 0.9, FP), rtol=1e-14)


def test_numpy_random_is_importable_as_in_autograd():
    import importlib

    npr = importlib.import_module("wengert.numpy.random")
    assert wnp.random is npr is np.random  # NumPy's own module, under wengert's name too
    npr.seed(1)
    ours = npr.randn(3)
    np.random.seed(1)
    np.testing.assert_array_equal(ours, np.random.randn(3))
    assert set(npr.__all__) >= {"randn", "default_rng", "normal", "RandomState"}
    from wengert.numpy.random import default_rng

    assert default_rng is np.random.default_rng
