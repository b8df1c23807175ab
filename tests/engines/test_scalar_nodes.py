"""The compact scalar node (``ScalarNode``): the transforms record a Python float step in 80 bytes,
reading its arguments through its parents. It must give exactly what the tuple-keeping ``Node`` gives
(the eager ``Tensor`` API records those) on every primitive with a float path, with constants on
either side, after assignments to the arrays it read, after a non-retaining pass, and at higher order."""

import gc
import math
import sys
import tracemalloc

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.api.tensor import ScalarTensor, Tensor
from wengert.rules import rule_table
from wengert.testing import check_grads

FLOAT_PATH = {name: prim for name, prim in rule_table().items() if prim.float_fun is not None}
# points inside every domain met: arccosh needs >= 1, arcsin/arctanh (-1, 1), log > 0
UNARY_POINT = {"arccosh": 1.7}
BINARY_POINTS = (0.6, 0.35)


def _arity(prim):
    return 2 if len(prim.vjps) == 2 else 1


def _eager_grad(fun, *xs):
    """The same gradient by the eager Tensor API (its nodes keep argument and parent tuples)."""
    ts = [wg.tensor(x, requires_grad=True) for x in xs]
    fun(*ts).backward()
    return [0.0 if t.grad is None else float(t.grad.value) for t in ts]  # None: not reached, as PyTorch


def test_the_float_steps_are_recorded_compactly():
    kinds = []

    def f(x, v):
        y = wnp.sin(x * 1.5 + 0.25)
        kinds.extend([type(y), type(v[2]), type(v * 2.0)])
        return y * v[2]

    wg.grad(f, argnums=(0, 1))(0.3, np.linspace(0.0, 1.0, 5))
    assert kinds == [ScalarTensor, ScalarTensor, Tensor]
    assert isinstance(ScalarTensor.__new__(ScalarTensor), (Tensor, wg.Tensor))  # a Tensor to its users
    assert sys.getsizeof(ScalarTensor.__new__(ScalarTensor)) <= 80


def test_bytes_per_recorded_scalar_operation():
    """A scalar step costs its node, its float and its place in the list: at most 120 bytes."""
    steps = 3000

    def f(x):
        for _ in range(steps):
            x = wnp.sin(x * 1.0001 + 0.5)
        return x

    grad = wg.grad(f)
    grad(0.3)
    gc.collect()
    tracemalloc.start()
    try:
        grad(0.3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / (3 * steps) <= 120


@pytest.mark.parametrize("name", sorted(FLOAT_PATH))
def test_every_float_primitive_matches_the_tuple_node(name):
    prim = FLOAT_PATH[name]
    if _arity(prim) == 1:
        x0 = UNARY_POINT.get(name, 0.45)
        cases = [(lambda x: prim(x) * prim(x * 1.0) + 0.5 * x, (x0,))]
    else:
        a, b = BINARY_POINTS
        cases = [(lambda x, y: prim(x, y) * x, (a, b)),            # both differentiated
                 (lambda x, y: prim(x, 0.8) + prim(0.9, y), (a, b)),  # a constant on either side
                 (lambda x, y: prim(x * 1.0, y - 0.0), (a, b))]      # inputs recorded themselves
    for fun, xs in cases:
        got = wg.grad(fun, argnums=tuple(range(len(xs))))(*xs)
        want = _eager_grad(fun, *xs)
        assert [float(g) for g in got] == pytest.approx(want, rel=1e-14, abs=1e-300), name
        check_grads(fun, *xs, modes=("rev",), order=1)


def test_reads_see_the_version_they_read_after_an_assignment():
    """``v[i]`` keeps v's node, not its value: an assignment to v afterwards must not change what
    the read differentiates (the pass points it at v's old version)."""
    def f(x):
        v = wnp.stack([x, 2.0 * x, 3.0 * x])
        a = v[1]          # 2x
        v[1] = x * x      # v is rebound
        b = v[1]          # x^2
        v[0] = 5.0 * a
        return a * b + v[0] * 0.5   # 2x^3 + 5x

    x = 0.7
    assert wg.grad(f)(x) == pytest.approx(6 * x**2 + 5.0, rel=1e-14)
    check_grads(f, x, modes=("rev",), order=1)


def test_an_array_read_by_scalar_nodes_is_kept_until_the_pass():
    """sin's output is not saved by sin's rule; while a scalar node reads it (``u[i]``), the tape
    must not release it, and reads of many elements stay one scatter."""
    def f(x):
        total = 0.0
        u = wnp.sin(x)
        for i in range(0, x.shape[0], 7):
            total = total + u[i] * u[i]
        del u
        for _ in range(100):  # enough other array steps to make the tape sweep its candidates
            x = wnp.cos(x) * 0.5
        return total + wnp.sum(x)

    x = np.linspace(0.0, 2.0, 2000)
    g = wg.grad(f)(x)
    check_grads(f, x, modes=("rev",), order=1, atol=1e-6, rtol=1e-5)
    assert np.all(np.isfinite(g))


def test_second_order_through_scalar_chains():
    def f(x, w):
        for _ in range(5):
            x = wnp.tanh(x * w + 0.1) - x / 3.0
        return x

    hess = wg.hessian(f, argnums=(0, 1))(0.3, 0.7)
    eps = 1e-5

    def grad_at(x, w):
        return np.array([float(g) for g in wg.grad(f, argnums=(0, 1))(x, w)])

    fd = np.array([(grad_at(0.3 + eps, 0.7) - grad_at(0.3 - eps, 0.7)) / (2 * eps),
                   (grad_at(0.3, 0.7 + eps) - grad_at(0.3, 0.7 - eps)) / (2 * eps)])
    assert np.array(hess, dtype=float).reshape(2, 2) == pytest.approx(fd, rel=1e-6, abs=1e-8)
    check_grads(f, 0.3, 0.7, modes=("rev",), order=2)


def test_checkpointed_scalar_loop_releases_and_matches():
    """Checkpointing replays segments on traces that free each node after its step."""
    def step(x):
        return math.sin(1.0) * wnp.sin(x) + 0.5 * x

    def f(x):
        return wg.iterate(step, x, 64, checkpoint="binomial", snapshots=4)

    def plain(x):
        for _ in range(64):
            x = step(x)
        return x

    assert wg.grad(f)(0.4) == pytest.approx(wg.grad(plain)(0.4), rel=1e-13)
    assert wg.grad(plain)(0.4) == pytest.approx(_eager_grad(plain, 0.4)[0], rel=1e-14)


def test_a_scalar_node_refuses_other_argument_writes():
    seen = []

    def f(x):
        y = x * 2.0
        seen.append(y)
        return y

    wg.grad(f)(0.5)
    node = seen[0]
    with pytest.raises(TypeError, match="scalar node"):
        node._args = (1.0, 2.0)
    with pytest.raises(TypeError, match="keyword"):
        node._kwargs = {"a": 1}


# -- random scalar programs: compact nodes against tuple-keeping ones and against PyTorch -------------

_STEPS = {  # name -> (wengert step, torch step): a binary step reads the state and one earlier value
    "mul": (lambda s, t, c: s * t, lambda s, t, c: s * t),
    "add_const": (lambda s, t, c: s + c, lambda s, t, c: s + c),
    "const_sub": (lambda s, t, c: c - s, lambda s, t, c: c - s),
    "scale": (lambda s, t, c: c * s, lambda s, t, c: c * s),
    "div": (lambda s, t, c: s / (1.5 + t * t), lambda s, t, c: s / (1.5 + t * t)),
    "sin": (lambda s, t, c: wnp.sin(s), lambda s, t, c: __import__("torch").sin(s)),
    "tanh_mix": (lambda s, t, c: wnp.tanh(s * c + t), lambda s, t, c: __import__("torch").tanh(s * c + t)),
    "exp_small": (lambda s, t, c: wnp.exp(-s * s), lambda s, t, c: __import__("torch").exp(-s * s)),
    "combine": (lambda s, t, c: s + t * 0.5, lambda s, t, c: s + t * 0.5),
}


def _program(ops):
    """``ops`` [(step name, constant, which earlier value)] as a function of (x, y, v) for either
    library; "read" steps add ``c * v[k % 4]`` (a read of the array v, recorded as a compact node)."""
    def run(x, y, v, torch_steps=False):
        values = [x, y]
        for name, c, k in ops:
            if name == "read":
                values.append(values[-1] + v[k % 4] * c)
                continue
            step = _STEPS[name][1 if torch_steps else 0]
            values.append(step(values[-1], values[k % len(values)], c))
        return values[-1] * values[-2]
    return run


try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    given = None

if given is not None:
    _ops = st.lists(st.tuples(st.sampled_from(sorted(_STEPS) + ["read"]),
                              st.floats(-2.0, 2.0, allow_nan=False).filter(lambda c: abs(c) > 1e-3),
                              st.integers(0, 50)), min_size=1, max_size=25)

    @settings(max_examples=60, deadline=None)
    @given(_ops, st.floats(-1.5, 1.5), st.floats(-1.5, 1.5))
    def test_random_scalar_programs_match_tuple_nodes_and_pytorch(ops, x, y):
        run = _program(ops)
        v = np.array([0.3, -0.7, 1.1, 0.2])
        gx, gy, gv = wg.grad(run, argnums=(0, 1, 2))(x, y, v)
        got = [float(gx), float(gy), *np.asarray(gv, dtype=float)]
        ts = [wg.tensor(a, requires_grad=True) for a in (x, y, v)]
        run(*ts).backward()
        eager = [0.0 if t.grad is None else t.grad.value for t in ts]  # None: not reached, as PyTorch
        assert got == pytest.approx([float(eager[0]), float(eager[1]), *np.broadcast_to(eager[2], 4)],
                                    rel=1e-12, abs=1e-12)
        torch = pytest.importorskip("torch")
        tt = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, y, v)]
        out = run(*tt, torch_steps=True)
        if out.requires_grad:  # (a program of constants only has no graph in PyTorch)
            out.backward()
        want = [0.0 if t.grad is None else t.grad for t in tt]
        want = [float(want[0]), float(want[1]), *np.broadcast_to(np.asarray(want[2], dtype=float), 4)]
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
