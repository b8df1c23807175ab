"""What the fuzzer found: pending (``KNOWN_BROKEN``) and fixed (``FIXED``) (``FOUND.md`` has the story).

Each entry names the programs it affects and the checks to leave out on them, so the fuzz tests stay
green while the fix is pending, and carries a minimal reproducer that ``test_found.py`` runs as an
expected failure (strict: once fixed, the test fails until the entry is removed).
``WENGERT_FUZZ_ENABLE=all`` (or a comma-separated list of keys) re-enables entries: their checks run
on every program and their reproducers must pass.
"""

import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

import wengert as wg


@dataclass(frozen=True)
class Known:
    key: str
    area: str
    description: str
    applies: Callable  # Program -> bool
    skips: frozenset  # names of checks.CHECKS left out where it applies
    reproducer: Callable  # () -> None, asserts the right answer


def enabled(known):
    wanted = os.environ.get("WENGERT_FUZZ_ENABLE", "")
    return wanted == "all" or known.key in wanted.split(",")


def skipped(program):
    """The checks to leave out on ``program``: those of the entries that apply and are not enabled."""
    out = set()
    for k in KNOWN_BROKEN:
        if not enabled(k) and k.applies(program):
            out |= k.skips
    return frozenset(out)


# -- the reproducers --------------------------------------------------------------------------------

def _max_of_float():
    def f(x):
        return np.max(x) * 2.0

    assert wg.grad(f)(1.5) == 2.0
    assert wg.compile(f).grad()(1.5) == 2.0
    assert wg.source_grad(f)(1.5) == 2.0


def _source_grad_of_det():
    def f(a):
        return np.linalg.det(a + 3.0 * np.eye(3))

    a = np.arange(9.0).reshape(3, 3) / 10
    np.testing.assert_allclose(wg.source_grad(f)(a), wg.grad(f)(a), rtol=1e-12)


def _index_0d_result():
    def f(x):
        return np.sum(np.sin(x)[None])

    x = np.array(0.3)
    np.testing.assert_allclose(wg.compile(f)(x), np.sin(0.3))
    np.testing.assert_allclose(wg.source_grad(f)(x), np.cos(0.3))


def _var_method():
    def f(x):
        return x.var()

    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(wg.compile(f).grad()(x), wg.grad(f)(x), rtol=1e-12)
    np.testing.assert_allclose(wg.source_grad(f)(x), wg.grad(f)(x), rtol=1e-12)


def _jacobian_of_pytree():
    def f(p):
        return np.sum(p["w"] * p["b"])

    p = {"w": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])}
    for jac in (wg.jacfwd, wg.jacrev):
        got = jac(f)(p)
        assert set(got) == {"w", "b"}
        np.testing.assert_allclose(got["w"], p["b"])


def _hessian_of_several():
    def f(x, y):
        return np.sum(np.sin(x) * y ** 2)

    x, y = np.array([0.5, 1.0, 1.5]), np.array([[2.0], [3.0]])
    h = wg.hessian(f, (0, 1))(x, y)
    assert [[np.shape(b) for b in row] for row in h] == [[(3, 3), (3, 2, 1)], [(2, 1, 3), (2, 1, 2, 1)]]
    np.testing.assert_allclose(h[0][1], np.cos(x)[:, None, None] * 2 * y[None])


_F32_LINALG = {"linalg:det", "linalg:slogdet", "linalg:cholesky", "linalg:eigvalsh", "linalg:qr",
               "linalg:svdvals", "linalg:eigh"}


def _float32_linalg():
    m = (4.0 * np.eye(3) + np.arange(9.0).reshape(3, 3) / 10).astype(np.float32)
    funs = {"det": np.linalg.det, "slogdet": lambda a: np.linalg.slogdet(a)[1],
            "cholesky": lambda a: np.linalg.cholesky(a @ a.T),
            "eigvalsh": lambda a: np.linalg.eigvalsh(a + a.T),
            "qr": lambda a: np.linalg.qr(a)[1], "svdvals": lambda a: np.linalg.svd(a, compute_uv=False),
            "eigh": lambda a: np.linalg.eigh(a + a.T)[0]}
    wrong = {}
    for name, fun in funs.items():
        _, t = wg.jvp(fun, (m,), (np.ones_like(m),))
        g = wg.grad(lambda a: np.sum(fun(a)))(m)
        if np.result_type(t) != np.float32 or g.dtype != np.float32:
            wrong[name] = (np.result_type(t).name, g.dtype.name)
    assert not wrong, f"(tangent, gradient) dtypes of float32 inputs: {wrong}"


def _source_list_append():
    def f(x):
        acc = []
        for i in range(3):
            acc.append(x[i] ** 2)
        return np.sum(np.stack(acc)) + acc[-1]

    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(wg.source_grad(f)(x), [2.0, 4.0, 12.0])


def _selects_pytree(p):
    nums = (p.argnums,) if isinstance(p.argnums, int) else p.argnums
    return any(isinstance(p.args[i], (dict, tuple)) for i in nums)


_PLACEHOLDER_OPS = {"linalg:det", "linalg:slogdet", "linalg:solve", "linalg:cholesky", "linalg:qr"}


_PLACEHOLDER_UNARY = {"unary:arccos", "unary:arcsin", "unary:arctanh"}


def _two_sums():
    def f(x):
        return np.sum(np.sin(np.sum(x, axis=0))) + np.sum(np.cos(np.sum(x, axis=0) * 2.0))

    x = np.arange(6.0).reshape(2, 3) / 10
    got = wg.compile(f).grad()(x)
    assert got.shape == (2, 3), got.shape
    np.testing.assert_allclose(got, wg.grad(f)(x), rtol=1e-12)


def _reductions_over_axes(p):
    body = p.source.split("def f(")[1].split("def f_vec(")[0]
    lines = body.splitlines()
    return sum(1 for line in lines if ("sum(" in line and "axis=" in line) or "einsum(" in line) >= 2


def _strided_keepdims():
    def f(x0, C0, C1):
        v1 = np.sum(x0, keepdims=True)
        return np.sum(np.abs(x0) * C0) + np.sum(v1[::2] * C1)

    args = (np.array([0.126, -0.132, 0.64]), np.array([0.13, -0.13, 0.64]), np.array([0.35]))
    want = np.sign(args[0]) * args[1] + 0.35
    np.testing.assert_allclose(wg.grad(f)(*args), want, rtol=1e-15)
    np.testing.assert_allclose(wg.compile(f).grad(0)(*args), want, rtol=1e-15)


def _concat_shared_first():
    def f(x, c):
        v = x - x
        return np.sum(np.concatenate([v, v])) + np.sum(np.concatenate([v, c[:2]])) + np.sum(x)

    x, c = np.arange(3.0), np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(wg.compile(f).grad(0)(x, c), np.ones(3))


def _composites(prefix):
    return lambda p: any(feature.startswith(f"composite:{prefix}") for feature in p.features)


KNOWN_BROKEN = [
]

# Found by the fuzzer and fixed since: their reproducers run as regular tests (test_found.py).
FIXED = [
    Known("max-of-float", "program (rendering.py: the generated chooser_weights)",
          "compile/source_grad of np.max or np.min of a 0-d value (a Python float; np.sin of a 0-d array): "
          "AttributeError 'float' object has no attribute 'dtype'",
          lambda p: bool({"reduce-0d:max", "reduce-0d:min"} & p.features),
          frozenset({"compile", "source"}), _max_of_float),
    Known("source-placeholders", "program (source_grad builds rules on placeholder ones)",
          "source_grad of np.linalg.det/slogdet/solve/cholesky/qr: LinAlgError 'Singular matrix' at any "
          "input; of np.arccos/arcsin/arctanh of a float: ZeroDivisionError",
          lambda p: bool(_PLACEHOLDER_OPS & p.features)
          or (bool(_PLACEHOLDER_UNARY & p.features) and "arg:float" in p.features),
          frozenset({"source"}), _source_grad_of_det),
    Known("index-0d-result", "program (a 0-d array's elementwise result becomes a Python float)",
          "compile/source_grad of np.sin(x)[None] (or .reshape, np.expand_dims...) for a 0-d array x: "
          "TypeError 'float' object is not subscriptable",
          lambda p: any(feature.startswith("0d:") for feature in p.features),
          frozenset({"value", "compile", "source"}), _index_0d_result),
    Known("jacobian-pytree", "transforms (pytree arguments of jacfwd/jacrev)",
          "wg.jacfwd/wg.jacrev of a function of a dict or tuple of arrays: TypeError 'arguments and results "
          "must be single arrays'",
          _selects_pytree, frozenset({"jacfwd", "jacrev"}), _jacobian_of_pytree),
    Known("hessian-argnums", "transforms (hessian and jacfwd of several arguments)",
          "wg.hessian(f, argnums=(0, 1)) and wg.jacfwd(wg.grad(f, (0, 1)), (0, 1)) with arguments of "
          "different shapes: ValueError 'inhomogeneous shape'; the blocks must nest as jax.hessian's",
          lambda p: not isinstance(p.argnums, int), frozenset({"hessian"}), _hessian_of_several),
    Known("float32-linalg", "linalg (float32 in, float64 out)",
          "float32 JVP tangents of det, slogdet, cholesky, eigvalsh, qr, svd(compute_uv=False), eigh come "
          "back float64; the float32 gradient of qr too",
          lambda p: p.dtype is np.float32 and bool(_F32_LINALG & p.features), frozenset({"dtype"}),
          _float32_linalg),
    Known("source-list-append", "program (source_grad of lists appended to in a loop)",
          "source_grad of a loop that appends to a list, then np.stack/sum/acc[-1]: a gradient of zeros "
          "(silently wrong)",
          lambda p: any(feature.startswith("control:append") for feature in p.features),
          frozenset({"source"}),
          _source_list_append),
    Known("compile-broadcast-merge", "program (passes: two adjoints broadcast back from reductions, added)",
          "wg.compile(f).grad() where x is reduced twice, np.sum(x, axis=0) (or einsum('ij->j')) in two "
          "places: the gradient has the reduced shape (1, 3), not x's (2, 3) (silently wrong shape)",
          _reductions_over_axes, frozenset({"compile"}), _two_sums),
    Known("var-method", "program (tracing.py: the traced value's slot 'var' hides ndarray.var)",
          "compile/source_grad of x.var(): TypeError 'Variable' object is not callable",
          lambda p: "method:var" in p.features, frozenset({"value", "compile", "source"}), _var_method),
    Known("compile-indexed-broadcast", "program (passes.accumulate_in_place: a[i] += e into a buffer of "
          "another shape)",
          "wg.compile(f).grad(0) of np.sum(np.abs(x) * C0) + np.sum(np.sum(x, keepdims=True)[::2] * C1): "
          "the (1,)-shaped adjoint of the indexed sum added as x_bar[::2] += e into x's (3,)-shaped "
          "buffer (silently wrong)",
          _composites("keepdims-index"),
          frozenset({"compile"}), _strided_keepdims),
    Known("concat-shared-first", "rules (shape.py: concatenate's VJP offsets, cached by the first piece)",
          "compile/source_grad of two concatenations beginning with the same array, the other pieces of "
          "other lengths: ValueError 'broadcast_to ... from shape (2,) into shape (3,)', or slices of the "
          "wrong concatenation's offsets",
          _composites("concat-shared"), frozenset({"compile", "source"}), _concat_shared_first),
]
