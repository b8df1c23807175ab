"""The systematic Jacobian test: for every case of the rule table, ``wg.jacrev`` equals the Jacobian
built one output element at a time from ``wg.vjp`` (one cotangent per output basis vector), and
``wg.jacfwd`` the one built one input element at a time from ``wg.jvp``, whole (the basis as a
diagonal batch, kept diagonal through elementwise steps and matrix products) and in chunks (dense
batches). The structured basis must change nothing: not the values, not where a 0 * inf makes a nan.
"""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.rules.test_batching import LIST, REFUSED, TABLE, _quiet  # noqa: F401 - its autouse fixture
from wengert.api.tree import tree_flatten


def _real_leaves(out):
    return [o for o in tree_flatten(out)[0] if np.dtype(getattr(o, "dtype", type(o))).kind == "f"]


def _restricted(fun, args, nums):
    """``fun`` of the arguments ``nums`` alone, the others fixed, returning its real float leaves."""
    def f(*xs):
        full = list(args)
        for j, x in zip(nums, xs):
            full[j] = x
        return tuple(_real_leaves(fun(*full)))
    return f


def _by_vjps(f, xs):
    """Per output leaf and argument, the Jacobian block, one ``wg.vjp`` per output element."""
    outs, pull = wg.vjp(f, *xs)
    blocks = []
    for i, o in enumerate(outs):
        o = np.asarray(o)
        rows = [[] for _ in xs]
        for e in range(o.size):
            ct = [np.zeros(np.shape(p)) for p in outs]
            ct[i] = np.zeros(o.shape)
            ct[i].reshape(-1)[e] = 1.0
            ct = tuple(c if np.ndim(p) else float(c) for c, p in zip(ct, outs))
            gs = pull(ct)
            for k, gk in enumerate(gs):
                rows[k].append(np.asarray(gk))
        blocks.append([np.array(r).reshape(o.shape + np.shape(x)) for r, x in zip(rows, xs)])
    return blocks


def _by_jvps(f, xs):
    """The same blocks, one ``wg.jvp`` per input element."""
    outs = f(*xs)
    blocks = [[None] * len(xs) for _ in outs]
    for k, x in enumerate(xs):
        cols = []
        for e in range(np.size(x)):
            t = [np.zeros(np.shape(v)) for v in xs]
            t[k].reshape(-1)[e] = 1.0
            t = tuple(tk if np.ndim(v) else float(tk) for tk, v in zip(t, xs))
            cols.append([np.asarray(c) for c in wg.jvp(f, tuple(xs), t)[1]])
        for i, o in enumerate(outs):
            shape = np.shape(o)
            stacked = np.array([c[i] for c in cols]).reshape((np.size(x),) + shape)
            blocks[i][k] = np.moveaxis(stacked, 0, -1).reshape(shape + np.shape(x))
    return blocks


def _same(got, want, what):
    got = tree_flatten(got)[0]
    want = [b for per_out in want for b in per_out]
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-300, err_msg=what)


def _case(name, i):
    """Case ``i`` of ``name`` as a function of its real float arguments alone, and those arguments."""
    fun, args = TABLE[name][i]
    nums = tuple(j for j, a in enumerate(args)
                 if type(a) is float or (isinstance(a, np.ndarray) and a.dtype.kind == "f"))
    if not nums or name in REFUSED or not _real_leaves(fun(*args)):
        pytest.skip("no real float argument or result")
    return _restricted(fun, args, nums), tuple(args[j] for j in nums)


@pytest.mark.parametrize("name,i", LIST)
def test_jacobians_equal_one_pass_per_basis_vector(name, i):
    f, xs = _case(name, i)
    argnums = tuple(range(len(xs)))
    rows, cols = _by_vjps(f, xs), _by_jvps(f, xs)
    sizes = [int(np.size(o)) for o in f(*xs)] + [int(np.size(x)) for x in xs]
    for chunk in sorted({None, max(1, max(sizes) - 1)}, key=str):  # whole (diagonal), then in chunks
        _same(wg.jacrev(f, argnums=argnums, chunk_size=chunk)(*xs), rows, f"jacrev chunk_size={chunk}")
        _same(wg.jacfwd(f, argnums=argnums, chunk_size=chunk)(*xs), cols, f"jacfwd chunk_size={chunk}")


@pytest.mark.parametrize("name,i", LIST)
def test_hessians_equal_one_tangent_of_the_gradient_per_basis_vector(name, i):
    f, xs = _case(name, i)

    def loss(*v):  # a fixed weighting of every output element
        return sum(wnp.sum(o * (np.cos(np.arange(np.size(o))).reshape(np.shape(o)) + 0.5)) for o in f(*v))

    argnums = tuple(range(len(xs)))
    grads = wg.grad(loss, argnums=argnums)
    want = _by_jvps(lambda *v: tuple(grads(*v)), xs)
    _same(wg.hessian(loss, argnums=argnums)(*xs), want, "hessian")


INF = np.array([1.0, np.inf, -2.0, np.nan])
M = np.arange(16.0).reshape(4, 4) / 7.0
M_INF = M.copy()
M_INF[2, 1] = np.inf
EDGES = {
    "times a factor with inf and nan": lambda x: x * INF,
    "a factor on the left": lambda x: INF * wnp.sin(x),
    "divided by zero": lambda x: wnp.sin(x) / np.array([1.0, 0.0, 2.0, 3.0]),
    "zero divided": lambda x: np.array([1.0, 0.0, 2.0, 3.0]) / wnp.exp(x),
    "matrix with inf, on the left": lambda x: M_INF @ wnp.tanh(x),
    "matrix with inf, on the right": lambda x: wnp.tanh(x) @ M_INF,
    "finite matrix then elementwise": lambda x: wnp.tanh(M @ x) + 0.5 * x ** 2 - wnp.cos(x) * x,
    "dot with inf": lambda x: wnp.reshape(wnp.sin(x) @ INF, (1,)),
    "sum of diagonal and dense": lambda x: x * 3.0 - M @ x + (-x) - x / 2.0,
    "a scalar factor inf": lambda x: wnp.sin(x) * np.inf,
    "float32 factor": lambda x: x * np.float32(3.0) + x * np.arange(4, dtype=np.float32),
}


@pytest.mark.parametrize("what", sorted(EDGES))
def test_structured_basis_gives_what_one_pass_per_vector_gives(what):
    f = EDGES[what]
    x = np.array([0.3, -0.7, 1.1, 0.2])
    g = lambda v: (f(v),)  # noqa: E731
    _same((wg.jacrev(g)(x),), _by_vjps(g, (x,)), "jacrev")
    _same((wg.jacfwd(g)(x),), _by_jvps(g, (x,)), "jacfwd")
    _same((wg.jacrev(g, chunk_size=3)(x),), _by_vjps(g, (x,)), "jacrev in chunks")
