"""Adjoints of indexed and joined arrays in derivative programs: ``a[i] += e`` only into a buffer of
the indexed array's own shape (``passes.accumulate_in_place``, the source transform's in-place
accumulation), and concatenate's VJP telling apart concatenations that begin with the same piece.

Each program is checked against the tape (``wg.grad``), central differences and JAX; the arrays
the derivative does not flow to are passed as arguments, as the fuzzer's programs pass them.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
from wengert.program import Program, pipeline
from wengert.program import passes as P


def central_grad(f, args, argnum, eps=1e-6):
    """Central differences of ``f`` with respect to argument ``argnum`` (float64)."""
    x = np.array(args[argnum], dtype=np.float64)
    out = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[k] += eps
        lo[k] -= eps
        a_hi, a_lo = list(args), list(args)
        a_hi[argnum], a_lo[argnum] = hi, lo
        out[k] = (f(*a_hi) - f(*a_lo)) / (2 * eps)
    return out


def strided_keepdims(x0, C0, C1):
    v0 = np.abs(x0)
    v1 = np.sum(x0, keepdims=True)
    v2 = v1[::2]
    return np.sum(v0 * C0) + np.sum(v2 * C1)


def sorted_column_sums(x, w1, w2):
    return np.sum(np.abs(np.sort(np.sum(x, axis=0, keepdims=True), axis=-1)) * w1) + \
        np.sum(np.maximum(-1.5, x) * w2)


def equal_pieces(x, c):
    v = x - x
    return np.sum(np.concatenate([v, v])) + np.sum(np.concatenate([v, c[:2]]))


def shared_first_piece(x, a, b, w1, w2):
    return np.sum(np.concatenate([x, a, b]) * w1) + np.sum(np.concatenate([x, b, a]) * w2)


def first_element_of_keepdims(x, w):
    s = np.sum(x, axis=-1, keepdims=True)
    return np.sum(x * w) + np.sum(s[:, :1] * 3.0) + np.sum(s[-1:] ** 2)


_X = np.array([0.1257302210933933, -0.1321048632913019, 0.6404226504432821])
_M = np.array([[0.5, -1.0, 2.0], [0.25, 1.5, -0.5]])
CASES = {
    "strided-keepdims": (strided_keepdims, (_X, np.array([0.13, -0.13, 0.64]), np.array([0.35])), (0, 1, 2)),
    "sorted-column-sums": (sorted_column_sums, (_M, np.array([[1.0, 2.0, 3.0]]),
                                                np.array([[1.0, -1.0, 0.5], [2.0, 0.0, 1.0]])), (0, 1, 2)),
    "equal-pieces": (equal_pieces, (np.arange(3.0), np.array([1.0, 2.0, 3.0])), (0, 1)),
    "shared-first-piece": (shared_first_piece, (np.arange(3.0), np.array([1.0]), np.array([3.0, 4.0]),
                                                np.arange(6.0), np.arange(6.0) * 10), (0, 1, 2)),
    "first-of-keepdims": (first_element_of_keepdims, (_M, _M[::-1] * 2.0), (0, 1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("engine", ["compile", "source"])
def test_gradient_equals_the_tape_and_finite_differences(name, engine):
    f, args, argnums = CASES[name]
    want = wg.grad(f, argnums)(*args)
    got = wg.compile(f).grad(argnums)(*args) if engine == "compile" else wg.source_grad(f, argnums)(*args)
    for k, i in enumerate(argnums):
        np.testing.assert_allclose(want[k], central_grad(f, args, i), rtol=1e-7, atol=1e-8)
        assert np.shape(got[k]) == np.shape(args[i])
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-15)


def test_the_strided_keepdims_gradient_by_hand():
    x0, C0, C1 = CASES["strided-keepdims"][1]
    # d/dx of sum(|x| * C0) is sign(x) * C0; of sum(x) * C1[0] (v1[::2] is v1), C1[0] everywhere
    np.testing.assert_allclose(wg.compile(strided_keepdims).grad(0)(x0, C0, C1), np.sign(x0) * C0 + C1[0],
                               rtol=1e-15)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_equals_jax(name):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    f, args, argnums = CASES[name]
    jf = {"strided-keepdims": lambda x0, C0, C1: jnp.sum(jnp.abs(x0) * C0)
          + jnp.sum(jnp.sum(x0, keepdims=True)[::2] * C1),
          "sorted-column-sums": lambda x, w1, w2: jnp.sum(jnp.abs(jnp.sort(jnp.sum(x, axis=0, keepdims=True),
                                                                         axis=-1)) * w1)
          + jnp.sum(jnp.maximum(-1.5, x) * w2),
          "equal-pieces": lambda x, c: jnp.sum(jnp.concatenate([x - x, x - x]))
          + jnp.sum(jnp.concatenate([x - x, c[:2]])),
          "shared-first-piece": lambda x, a, b, w1, w2: jnp.sum(jnp.concatenate([x, a, b]) * w1)
          + jnp.sum(jnp.concatenate([x, b, a]) * w2),
          "first-of-keepdims": lambda x, w: jnp.sum(x * w)
          + jnp.sum(jnp.sum(x, axis=-1, keepdims=True)[:, :1] * 3.0)
          + jnp.sum(jnp.sum(x, axis=-1, keepdims=True)[-1:] ** 2)}[name]
    want = jax.grad(jf, argnums)(*args)
    got = wg.compile(f).grad(argnums)(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12, atol=1e-15)


def test_an_untake_that_broadcasts_is_added_whole():
    """The pass itself: the cotangent of ``sum(x, keepdims=True)[::2]`` is an untake of shape (1,),
    broadcast to x's (3,) in the sum (its broadcast_to elided): it may not become ``a[::2] += e``."""
    f, args, _ = CASES["strided-keepdims"]
    g = P.elide_broadcasts(pipeline.simplify(Program.from_trace(f, *args).grad(0)))
    h = P.accumulate_in_place(g)
    for s in h.statements:
        if s.prim.__name__ == "index_add" and s.inplace:
            assert s.args[0].shape == s.out.shape
    np.testing.assert_array_equal(h(*args), g(*args))
    np.testing.assert_allclose(h(*args), wg.grad(f)(*args), rtol=1e-15)


def test_an_untake_of_the_buffer_shape_still_accumulates_in_place():
    def f(x, w):
        return np.sum(x[::2] * w) + np.sum(np.abs(x))

    x, w = np.array([0.5, -1.0, 2.0, 0.25]), np.array([3.0, 4.0])
    h = P.accumulate_in_place(pipeline.simplify(Program.from_trace(f, x, w).grad(0)))
    assert "[::2] += " in h.source
    np.testing.assert_allclose(h(x, w), wg.grad(f)(x, w), rtol=1e-15)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.integers(1, 4), m=st.integers(1, 3), axis=st.sampled_from([None, 0, -1]),
       index=st.sampled_from(["[::2]", "[:1]", "[-1:]", "[..., ::2]", "[0]", "[::-1]"]),
       seed=st.integers(0, 2 ** 16))
def test_indexed_reductions_with_keepdims_agree_across_engines(n, m, axis, index, seed):
    """``sum(x, axis, keepdims=True)`` indexed, plus a term in x of x's own shape, weights passed as
    arguments: compile and source_grad equal the tape, which equals central differences."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, m)) + np.sign(rng.standard_normal((n, m)))  # |x| >= ~1 rarely near 0
    x[np.abs(x) < 0.1] = 0.5
    s = np.sum(x, axis=axis, keepdims=True)
    w1, w2 = rng.standard_normal(x.shape), rng.standard_normal(np.shape(eval("s" + index, {"s": s})))  # noqa: S307
    ns = {"np": np}
    exec(f"def f(x, w1, w2):\n    return np.sum(np.abs(x) * w1) + "  # noqa: S102 - our own text
         f"np.sum(np.sum(x, axis={axis!r}, keepdims=True){index} * w2)\n", ns)
    f, args = ns["f"], (x, w1, w2)
    want = wg.grad(f)(*args)
    np.testing.assert_allclose(want, central_grad(f, args, 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(wg.compile(f).grad(0)(*args), want, rtol=1e-12, atol=1e-14)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(sizes=st.lists(st.integers(1, 3), min_size=2, max_size=4), seed=st.integers(0, 2 ** 16))
def test_concatenations_sharing_their_first_piece_agree_across_engines(sizes, seed):
    """Two concatenations of the same first piece and the other pieces in reverse order (of
    different lengths): each piece's cotangent is its own slice."""
    rng = np.random.default_rng(seed)
    pieces = [rng.standard_normal(k) for k in sizes]
    total = sum(sizes)
    w1, w2 = rng.standard_normal(total), rng.standard_normal(total)

    def f(w1, w2, *pieces):
        first, rest = pieces[0], list(pieces[1:])
        return np.sum(np.concatenate([first] + rest) * w1) + np.sum(np.concatenate([first] + rest[::-1]) * w2)

    argnums = tuple(range(2, 2 + len(pieces)))
    args = (w1, w2, *pieces)
    want = wg.grad(f, argnums)(*args)
    for k, i in enumerate(argnums):
        np.testing.assert_allclose(want[k], central_grad(f, args, i), rtol=1e-7, atol=1e-8)
    got = wg.compile(f).grad(argnums)(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)
