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


# -- a traced int index: the adjoint of x[i, j] added into the cotangent's own buffer -----------------

def _body(source):
    """The generated function alone, without the helpers' definitions."""
    return source[source.rindex("\ndef "):]


def softmax_cross_entropy(W1, W2, x, label):
    """The tiny network of benchmarks/workloads.py: logsumexp(W2 @ (W1 @ x)) - pred[label, 0]."""
    import wengert.numpy as wnp
    pred = W2 @ (W1 @ x)
    m = wnp.max(pred)
    return m + wnp.log(wnp.sum(wnp.exp(pred - m))) - pred[label, 0]


def softmax_cross_entropy_by_hand(W1, W2, x, label):
    h = W1 @ x
    pred = W2 @ h
    e = np.exp(pred - pred.max())
    dpred = e / e.sum()
    dpred[label, 0] -= 1.0
    return (W2.T @ dpred) @ x.T, dpred @ h.T


def test_a_traced_label_is_subtracted_in_place_for_every_value():
    """``untake(-1.0, (label, 0)) + softmax`` is ``softmax[label, 0] += -1.0``: no zeros filled and no
    array added (the hand-written form), one program for every label, each label's gradient right."""
    rng = np.random.default_rng(3)
    W1, W2, x = rng.standard_normal((6, 5)), rng.standard_normal((4, 6)), rng.standard_normal((5, 1))
    g = wg.compile(softmax_cross_entropy).grad((0, 1))
    source = _body(g.source(W1, W2, x, 0))
    assert "untake(" not in source and "np.add.at" not in source and "[v0, 0] += -1.0" in source
    for label in range(4):
        got, tape = g(W1, W2, x, label), wg.grad(softmax_cross_entropy, (0, 1))(W1, W2, x, label)
        for a, b, c in zip(got, tape, softmax_cross_entropy_by_hand(W1, W2, x, label)):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(a, c, rtol=1e-13, atol=1e-15)
    assert g.cache_info().misses == 1


def test_a_traced_label_gradient_equals_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(4)
    W1, W2, x = rng.standard_normal((6, 5)), rng.standard_normal((4, 6)), rng.standard_normal((5, 1))

    def jf(a, b, xx, label):
        pred = b @ (a @ xx)
        m = jnp.max(pred)
        return m + jnp.log(jnp.sum(jnp.exp(pred - m))) - pred[label, 0]

    g = wg.compile(softmax_cross_entropy).grad((0, 1))
    for label in (0, 3):
        for a, b in zip(g(W1, W2, x, label), jax.grad(jf, (0, 1))(W1, W2, x, label)):
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-15)


def _indexed_twice(x, w, i, j):
    return np.sum(x * x * w) + 3.0 * x[i, j] - x[i, 0]


_INDEXED_TWICE = wg.compile(_indexed_twice).grad()  # one trace per shape and dtype, shared by the examples


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.integers(1, 4), m=st.integers(1, 3), dtype=st.sampled_from([np.float32, np.float64]),
       data=st.data())
def test_traced_int_indices_add_in_place_as_the_tape_does(n, m, dtype, data):
    """``x[i, j]`` with traced ints (0-d int arrays too) added into an owned buffer: where ``j == 0`` both
    terms land on one element. The compiled gradient equals the tape's and the formula."""
    i, j = data.draw(st.integers(-n, n - 1)), data.draw(st.integers(-m, m - 1))
    as_array = data.draw(st.booleans())
    rng = np.random.default_rng(n * 10 + m)
    x, w = rng.standard_normal((n, m)).astype(dtype), rng.standard_normal((n, m)).astype(dtype)
    ii, jj = (np.array(i), np.array(j)) if as_array else (i, j)
    got = _INDEXED_TWICE(x, w, ii, jj)
    want = 2 * x * w
    want[i, j] += 3.0
    want[i, 0] -= 1.0
    assert got.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(got, wg.grad(_indexed_twice)(x, w, ii, jj), rtol=tol, atol=tol)
    assert "np.add.at" not in _body(_INDEXED_TWICE.source(x, w, ii, jj))


def test_an_integer_array_index_still_adds_repeats_twice():
    """An index that can repeat (an int array argument) keeps ``np.add.at`` (``a[[0, 0]] += e`` adds once)."""
    def f(x, w, y, idx):
        return np.sum(np.exp(x) * w) + np.sum(x[idx] * y)

    x, w, y, idx = np.arange(4.0), np.full(4, 0.5), np.array([1.0, 2.0, 3.0]), np.array([0, 0, 3])
    g = wg.compile(f).grad()
    assert "np.add.at(" in _body(g.source(x, w, y, idx))
    np.testing.assert_allclose(g(x, w, y, idx), np.exp(x) * w + [3.0, 0.0, 0.0, 3.0], rtol=1e-15)
    np.testing.assert_allclose(g(x, w, y, idx), wg.grad(f)(x, w, y, idx), rtol=1e-15)


def test_an_untake_added_first_goes_into_the_other_buffer():
    """The pass: ``untake(e, i) + a`` with ``a`` an owned buffer becomes ``a[i] += e`` (the untake is
    gone), as ``a + untake(e, i)`` does."""
    def f(x, w, i):
        return -x[i] + np.sum(np.exp(x) * w)

    x, w = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    p = P.accumulate_in_place(pipeline.simplify(Program.from_trace(f, x, w, np.int64(1)).grad(0)))
    assert not any(s.prim.__name__ == "untake" for s in p.statements), p.source
    assert any(s.prim.__name__ == "index_add" and s.inplace for s in p.statements), p.source
    want = np.exp(x) * w
    want[1] -= 1.0
    np.testing.assert_allclose(p(x, w, np.int64(1)), want, rtol=1e-15)
