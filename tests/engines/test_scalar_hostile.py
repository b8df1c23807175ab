"""Hostile inputs for the compact scalar nodes (``ScalarNode``, ``ScalarTensor``, the float hot path of the
backward pass): constants of every kind beside recorded floats, a node used as both inputs, special
values, reads ``v[i]`` around assignments, higher order, checkpointing, long chains and random
programs. Each gradient is compared with PyTorch (or JAX) and with the eager ``Tensor`` API, whose
nodes keep argument tuples; the smooth cases with finite differences too. Where NumPy would not give
the value the differentiated program computes (writes through views, floats assigned into), the
transform must refuse with an error saying what to do."""

import math

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.testing import check_grads

try:  # the peers are in the bench extra: without them the comparisons with them are skipped
    import torch
except ImportError:
    torch = None
else:
    torch.set_num_threads(1)
try:
    import jax
except ImportError:
    jax = jnp = None
else:
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
needs_torch = pytest.mark.skipif(torch is None, reason="compares with PyTorch (the bench extra)")
needs_jax = pytest.mark.skipif(jax is None, reason="compares with JAX (the bench extra)")


def _same(got, want, rtol=1e-12, atol=1e-14):
    """Equal to rounding, nan where nan, and infinities of the same sign."""
    got = np.asarray(got, dtype=float)
    want = np.asarray(want, dtype=float)
    return got.shape == want.shape and bool(np.all(np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
                                                   | (got == want)))


def _torch_grad(fun, x):
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    fun(t).backward()
    return t.grad.numpy().copy() if t.grad.ndim else float(t.grad)


def _eager_grad(fun, x):
    t = wg.tensor(np.array(x, dtype=float) if np.ndim(x) else float(x), requires_grad=True)
    fun(t).backward()
    return np.zeros(np.shape(x)) if t.grad is None else np.asarray(t.grad.value, dtype=float)


# -- constants of every kind, beside a recorded float -------------------------------------------------

class _Float(float):
    """A float subclass: not ``type(c) is float``, so it must leave the float path, not break it."""


_CONSTANTS = {
    "float": 1.75,
    "negative zero": -0.0,
    "np.float64": np.float64(1.75),
    "np.float32": np.float32(1.75),
    "0-d array": np.array(1.75),
    "int": 3,
    "bool": True,
    "float subclass": _Float(1.75),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(_CONSTANTS))
def test_every_kind_of_constant_on_either_side(name):
    c = _CONSTANTS[name]

    def f(x):  # +, -, *, / and ** with the constant on either side, and x recorded first (x * 1.0)
        y = x * 1.0
        return ((y * c + c * y) * (y + c) - (c + y) * (y - c) + (c - y) * y + y / (c + 2.0)
                + (y * y) ** (c + 1.0))

    ct = float(c)

    def ft(x):
        y = x * 1.0
        return ((y * ct + ct * y) * (y + ct) - (ct + y) * (y - ct) + (ct - y) * y + y / (ct + 2.0)
                + (y * y) ** (ct + 1.0))

    x = 0.6
    got = wg.grad(f)(x)
    assert type(got) is float
    rtol = 1e-6 if name == "np.float32" else 1e-12  # float32 constants promote the result's rounding
    assert _same(got, _torch_grad(ft, x), rtol=rtol)
    assert _same(got, _eager_grad(f, x), rtol=rtol)
    if name != "np.float32":  # (float32 rounding is far above the finite differences' step)
        check_grads(f, x, modes=("rev",), order=1)


# -- one node as both inputs ----------------------------------------------------------------------------

_ALIASED = {
    "x * x": (lambda x: x * x, lambda x: x * x),
    "x + x": (lambda x: (x + x) * x, lambda x: (x + x) * x),
    "x - x": (lambda x: (x - x) * x + x, lambda x: (x - x) * x + x),
    "x / x": (lambda x: (x / x) * x, lambda x: (x / x) * x),
    "x ** x": (lambda x: x ** x, lambda x: x ** x),
    "hypot(x, x)": (lambda x: wnp.hypot(x, x), lambda x: torch.hypot(x, x)),
    "arctan2(x, x)": (lambda x: wnp.arctan2(x, x) * x, lambda x: torch.atan2(x, x) * x),
    "maximum(x, x)": (lambda x: wnp.maximum(x, x) * x, lambda x: torch.maximum(x, x) * x),
    "reused 200 times": (lambda x: sum((x * k for k in range(200)), 0.0) * x,
                         lambda x: sum((x * k for k in range(200)), 0.0) * x),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(_ALIASED))
@pytest.mark.parametrize("recorded", [False, True], ids=["leaf", "recorded"])
def test_one_node_as_both_inputs(name, recorded):
    fun, fun_torch = _ALIASED[name]

    def f(x):
        return fun(x * 1.0 if recorded else x)

    def ft(x):
        return fun_torch(x * 1.0 if recorded else x)

    x = 0.7
    got = wg.grad(f)(x)
    assert _same(got, _torch_grad(ft, x))
    assert _same(got, _eager_grad(f, x))
    check_grads(f, x, modes=("rev",), order=2)


# -- special values: what the float path does where math refuses ------------------------------------

_SPECIAL = {  # name -> (wengert, PyTorch, x): each must give PyTorch's inf, nan or finite value
    "1 / x at 0": (lambda x: 1.0 / x, lambda x: 1.0 / x, 0.0),
    "x / 0": (lambda x: x / 0.0, lambda x: x / 0.0, 0.7),
    "x ** -1 at 0": (lambda x: x ** -1.0, lambda x: x ** -1.0, 0.0),
    "x ** 0.5 at -0.7": (lambda x: x ** 0.5, lambda x: x ** 0.5, -0.7),
    "x ** 3.0 at -0.7": (lambda x: x ** 3.0, lambda x: x ** 3.0, -0.7),
    "x ** 0 at 0": (lambda x: x ** 0.0, lambda x: x ** 0.0, 0.0),
    "(-2) ** x": (lambda x: (-2.0) ** x, lambda x: (-2.0) ** x, 3.0),
    "0 ** x": (lambda x: 0.0 ** x, lambda x: 0.0 ** x, 2.0),
    "log at 0": (lambda x: wnp.log(x), lambda x: torch.log(x), 0.0),
    "sqrt at 0": (lambda x: wnp.sqrt(x), lambda x: torch.sqrt(x), 0.0),
    "sqrt at -0.0": (lambda x: wnp.sqrt(x), lambda x: torch.sqrt(x), -0.0),
    "sqrt at -1": (lambda x: wnp.sqrt(x), lambda x: torch.sqrt(x), -1.0),
    "exp overflowing": (lambda x: wnp.exp(x) * 0.5, lambda x: torch.exp(x) * 0.5, 1000.0),
    "arcsin at 1": (lambda x: wnp.arcsin(x), lambda x: torch.asin(x), 1.0),
    "arctanh at 1": (lambda x: wnp.arctanh(x), lambda x: torch.atanh(x), 1.0),
    "reciprocal at 0": (lambda x: wnp.reciprocal(x), lambda x: torch.reciprocal(x), 0.0),
    "x * nan": (lambda x: x * math.nan, lambda x: x * math.nan, 0.7),
    "x * inf": (lambda x: x * math.inf, lambda x: x * math.inf, 0.7),
    "overflowing product": (lambda x: x * 1e308 * 10.0, lambda x: x * 1e308 * 10.0, 0.7),
    "subnormal product": (lambda x: x * 1e-308 * 1e-10, lambda x: x * 1e-308 * 1e-10, 0.7),
    "x ** 2.5 at 1e200": (lambda x: x ** 2.5, lambda x: x ** 2.5, 1e200),
    "abs at 0": (lambda x: abs(x * 1.0), lambda x: abs(x * 1.0), 0.0),
    "abs at -0.7": (lambda x: abs(x) * x, lambda x: abs(x) * x, -0.7),
    "% 1.0": (lambda x: (x * 3.0) % 1.0, lambda x: torch.remainder(x * 3.0, 1.0), 0.7),
    "5.0 % x": (lambda x: 5.0 % x, lambda x: torch.remainder(torch.tensor(5.0, dtype=torch.float64), x), 0.7),
    "max(x, c)": (lambda x: max(x, 0.5) * x, lambda x: torch.maximum(x, torch.tensor(0.5)) * x, 0.7),
    "where(x > c)": (lambda x: wnp.where(x * 2.0 > 0.5, wnp.sin(x), 3.0 * x),
                     lambda x: torch.where(x * 2.0 > 0.5, torch.sin(x), 3.0 * x), 0.1),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(_SPECIAL))
def test_special_values_agree_with_pytorch(name):
    fun, fun_torch, x = _SPECIAL[name]
    with np.errstate(all="ignore"):
        got = wg.grad(fun)(x)
        eager = _eager_grad(fun, x)
    want = _torch_grad(fun_torch, x)
    assert _same(got, want), (got, want)
    assert _same(got, eager), (got, eager)


# -- reads v[i] -------------------------------------------------------------------------------------------

V = np.array([0.3, -0.7, 1.1, 0.2])


def _clone(v):
    """PyTorch's and plain NumPy's arrays are copied (finite differences must not write into their
    input); a traced one is not: assignments rebind its box, the caller's array is never written."""
    if isinstance(v, torch.Tensor):
        return v.clone()
    return v.copy() if type(v) is np.ndarray else v


def _set(v, i, value):
    """``v[i] = value``: in place for wengert (a recorded functional update), out of place for PyTorch."""
    if isinstance(v, torch.Tensor):
        return v.index_put((torch.tensor([i]),), value.reshape(1))
    v[i] = value
    return v


def _reads_negative(v):
    return v[-1] * v[-4] + v[0] * v[3] * v[-2]


def _reads_one_element_often(v):
    total = 0.0
    for _ in range(60):
        total = total + v[1] * v[1]
    return total * v[2]


def _reads_of_a_slice(v):
    w = v[1:]
    return w[0] * v[1] * w[-1] + w[1]


def _reads_of_rows(v):
    m = v.reshape((2, 2))
    return m[1][0] * m[0][1] + m[1, 1] * m[-1][-1]


def _reads_of_stacked_floats(v):
    x, y = v[0], v[1]
    s = (wnp.stack if not isinstance(v, torch.Tensor) else torch.stack)([x * x, y * 2.0, x * y])
    return s[0] * s[2] + s[1] * s[-1]


def _reads_around_assignments(v):
    v = _clone(v)
    acc = 0.0
    for k in range(6):
        a = v[k % 4]
        v = _set(v, k % 4, a * 2.0 + v[(k + 1) % 4])
        acc = acc + a * v[k % 4] + v[-1]
    return acc


def _reads_around_augmented_assignments(v):
    v = _clone(v)
    a = v[2]
    v = v + 1.0 if isinstance(v, torch.Tensor) else v.__iadd__(1.0)
    b = v[2]
    v = v * v if isinstance(v, torch.Tensor) else v.__imul__(v)
    return a * b + v[2] + v[0]


_READS = [_reads_negative, _reads_one_element_often, _reads_of_a_slice, _reads_of_rows,
          _reads_of_stacked_floats, _reads_around_assignments, _reads_around_augmented_assignments]


@needs_torch
@pytest.mark.parametrize("fun", _READS, ids=lambda f: f.__name__[1:])
def test_reads_agree_with_pytorch(fun):
    got = wg.grad(fun)(V.copy())
    assert _same(got, _torch_grad(fun, V.copy()))
    check_grads(fun, V.copy(), modes=("rev",), order=1)
    if "assignments" not in fun.__name__:  # (eager leaves refuse assignment, as PyTorch's)
        assert _same(got, _eager_grad(fun, V.copy()))


# -- higher order, vmap, checkpointing: against JAX -----------------------------------------------------



def _chain(np_):
    def f(x, w):
        for _ in range(4):
            x = np_.sin(x * w + 0.3) * 1.5 - x * x / 3.0 + w
        return x * x
    return f


def _pairs(v):
    s = 0.0
    for i in range(3):
        s = s + v[i] * v[i + 1] * 2.0 + v[-i - 1] * v[i] * v[i]
    return s


@needs_jax
def test_higher_order_through_scalar_chains_matches_jax():
    f, fj = _chain(wnp), _chain(jnp)
    x, w = 0.4, 0.7
    assert _same(wg.grad(wg.grad(f))(x, w), jax.grad(jax.grad(fj))(x, w))
    assert _same(wg.grad(wg.grad(wg.grad(f)))(x, w), jax.grad(jax.grad(jax.grad(fj)))(x, w))
    assert _same(np.array(wg.hessian(f, argnums=(0, 1))(x, w), dtype=float).reshape(2, 2),
                 np.array(jax.hessian(fj, argnums=(0, 1))(x, w)).reshape(2, 2))
    assert _same(wg.jvp(wg.grad(f), (x, w), (1.0, 0.5))[1], jax.jvp(jax.grad(fj), (x, w), (1.0, 0.5))[1])
    assert _same(wg.grad(lambda a: wg.jvp(lambda y: f(y, w), (a,), (1.0,))[1])(x),
                 jax.grad(lambda a: jax.jvp(lambda y: fj(y, w), (a,), (1.0,))[1])(x))


@needs_jax
def test_vmap_and_grad_of_scalar_reads_match_jax():
    f, fj = _chain(wnp), _chain(jnp)
    xs = np.linspace(-1.0, 1.0, 5)
    assert _same(wg.vmap(wg.grad(f), in_axes=(0, None))(xs, 0.7),
                 jax.vmap(jax.grad(fj), in_axes=(0, None))(xs, 0.7))
    assert _same(wg.grad(lambda w: wnp.sum(wg.vmap(lambda x: f(x, w))(xs)))(0.7),
                 jax.grad(lambda w: jnp.sum(jax.vmap(lambda x: fj(x, w))(xs)))(0.7))
    vs = np.random.default_rng(0).standard_normal((5, 4))
    assert _same(wg.vmap(wg.grad(_pairs))(vs), jax.vmap(jax.grad(_pairs))(vs))
    assert _same(wg.hessian(_pairs)(vs[0]), jax.hessian(_pairs)(vs[0]))
    assert _same(wg.jacfwd(wg.grad(_pairs))(vs[0]), jax.hessian(_pairs)(vs[0]))


@needs_jax
def test_inner_gradients_closing_over_outer_floats_match_jax():
    def outer(w, np_, grad):
        v = np_.array([0.1, 0.2, 0.3]) * w
        g = grad(lambda u: u[0] * u[1] * w + u[2] * np_.sin(u[0] * w))(v)
        h = grad(lambda x: np_.sin(x * w) * w + x * 2.0 * w)(0.3)
        return np_.sum(g * g) * h

    assert _same(wg.grad(lambda w: outer(w, wnp, wg.grad))(0.8),
                 jax.grad(lambda w: outer(w, jnp, jax.grad))(0.8))


@needs_jax
@pytest.mark.parametrize("checkpoint", ["binomial", "ctz"])
def test_checkpointed_scalar_states_and_closed_over_weights_match_jax(checkpoint):
    def f(x, w):
        options = {"snapshots": 3} if checkpoint == "binomial" else {}
        return wg.iterate(lambda s: wnp.tanh(s * w + 0.1) * 1.1 + 0.01 * s, x, 37,
                          checkpoint=checkpoint, **options)

    def fj(x, w):
        for _ in range(37):
            x = jnp.tanh(x * w + 0.1) * 1.1 + 0.01 * x
        return x

    assert _same(wg.grad(f, argnums=(0, 1))(0.3, 0.9), jax.grad(fj, argnums=(0, 1))(0.3, 0.9))
    assert _same(wg.grad(wg.grad(f, argnums=1), argnums=1)(0.3, 0.9),
                 jax.grad(jax.grad(fj, argnums=1), argnums=1)(0.3, 0.9))


@needs_jax
def test_checkpoint_and_compile_of_scalar_functions_match_jax():
    def g(x, w):
        return wg.checkpoint(lambda a, b: wnp.sin(a * b) * a + b * 2.0)(x, w) * x

    def gj(x, w):
        return (jnp.sin(x * w) * x + w * 2.0) * x

    assert _same(wg.grad(g, argnums=(0, 1))(0.3, 0.9), jax.grad(gj, argnums=(0, 1))(0.3, 0.9))
    assert _same(wg.grad(wg.grad(g))(0.3, 0.9), jax.grad(jax.grad(gj))(0.3, 0.9))

    def h(x, y, np_):
        a = x * y + 2.0
        b = a * a - x / y
        return np_.sin(b) * 0.5 + b * x

    want = jax.grad(lambda x, y: h(x, y, jnp), argnums=(0, 1))(0.3, 0.7)
    grad = wg.grad(lambda x, y: h(x, y, wnp), argnums=(0, 1))
    assert _same(grad(0.3, 0.7), want)
    assert _same(wg.compile(grad)(0.3, 0.7), want)


# -- long chains, released as the pass goes, and repeated passes ---------------------------------------

@needs_torch
def test_a_long_scalar_chain_and_a_long_run_of_reads():
    steps = 20000

    def chain(x):
        for _ in range(steps):
            x = x * 0.99999 + 1e-6 * wnp.sin(x)
        return x

    x, d = 0.5, 1.0
    for _ in range(steps):  # the derivative by hand, forward
        d *= 0.99999 + 1e-6 * math.cos(x)
        x = x * 0.99999 + 1e-6 * math.sin(x)
    assert wg.grad(chain)(0.5) == pytest.approx(d, rel=1e-12)

    def reads(v):
        s = 0.0
        for i in range(steps):
            s = s * 0.9999 + v[i % 7] * v[(i * 3) % 7] * 1e-4
        return s

    v = np.linspace(0.1, 0.7, 7)
    t = torch.tensor(v, requires_grad=True)
    i = np.arange(steps)
    weights = torch.tensor(0.9999 ** (steps - 1 - i) * 1e-4)
    torch.sum(weights * t[torch.tensor(i % 7)] * t[torch.tensor((i * 3) % 7)]).backward()
    assert _same(wg.grad(reads)(v), t.grad.numpy(), rtol=1e-9)


@needs_torch
def test_a_vjp_function_called_twice_and_eager_backward_retained():
    def f(x, v):
        return wnp.sin(x * v[0]) * v[1] + x * x

    _, back = wg.vjp(f, 0.4, V[:2].copy())
    first, second = back(1.0), back(2.0)
    assert _same(second[0], 2.0 * first[0]) and _same(second[1], 2.0 * first[1])
    tx = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    tv = torch.tensor(V[:2], requires_grad=True)
    (torch.sin(tx * tv[0]) * tv[1] + tx * tx).backward()
    assert _same(first[0], tx.grad.item()) and _same(first[1], tv.grad.numpy())

    x, v = wg.tensor(0.5, requires_grad=True), wg.tensor(V[:2].copy(), requires_grad=True)
    y = x * v[0] + 2.0 * x * x + v[1] * 3.0 - 1.0
    y.backward(retain_graph=True)
    y.backward()
    assert _same(x.grad.value, 2 * (0.3 + 2.0)) and _same(v.grad.value, [1.0, 6.0])
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


# -- what NumPy would not compute: refused, never a silently different value -----------------------

def test_item_assignment_into_a_traced_float_is_refused_by_name():
    """A Python float has no items: ``s[()] = 3.0`` is a TypeError in Python. It used to reach the
    compact node's internal slots ("a scalar node's arguments are its inputs"), or for a float leaf
    silently rebind it to a constant (gradient 0)."""
    for fun in (lambda x: (x * 2.0).__setitem__((), 3.0),       # a compact node
                lambda x: x.__setitem__((), 3.0),                 # a float leaf
                lambda x: np.add.at(x * 2.0, (), 1.0)):           # numpy.add.at
        with pytest.raises(TypeError, match="float does not support item assignment"):
            wg.grad(lambda x, fun=fun: (fun(x), x * x)[1])(0.5)
    x = wg.tensor(np.array(0.5), requires_grad=True)  # a 0-d eager tensor stays assignable, as PyTorch's
    y = x * 2.0
    y[()] = x * x * 3.0
    y.backward()
    assert _same(x.grad.value, 3.0)


def test_round_of_a_traced_float():
    """``round(x)`` used to fail with "type Tensor doesn't define __round__ method"; with digits it is
    NumPy's round (derivative zero), without it an int, refused as ``int(x)`` is."""
    with pytest.raises(TypeError, match=r"round\(\) \(which returns an int\)"):
        wg.grad(lambda x: round(x * 1.0) + x)(0.55)
    got = wg.grad(lambda x: round(x * 3.0, 1) * x)(0.55)
    assert got == round(0.55 * 3.0, 1) == 1.7  # Python's rounding of the float 1.6500000000000001
    assert _same(wg.grad(lambda x: round(x * 3.0, 1) * x)(0.45), 1.4)
    assert _same(wg.grad(lambda v: wnp.sum(round(v * 3.0, 1) * v))(V.copy()), np.round(V * 3.0, 1))


def _write_into_slice(v):
    w = v[1:]
    w[0] = 5.0 * w[0]
    return v[1] * v[2]


def _augmented_write_into_slice(v):
    w = v[1:3]
    w += 1.0
    return v[1] * v[2]


def _write_into_reshape(v):
    w = wnp.reshape(v, (2, 2))
    w[0, 0] = 3.0 * v[1]
    return wnp.sum(v * v)


def _write_into_transpose_of_an_intermediate(v):
    u = wnp.reshape(v * 2.0, (2, 2))
    w = u.T
    w[0, 1] = 7.0 * v[3]
    return wnp.sum(u * u)


@pytest.mark.parametrize("fun", [_write_into_slice, _augmented_write_into_slice, _write_into_reshape,
                                 _write_into_transpose_of_an_intermediate], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("transform", ["grad", "vjp", "eager", "jvp", "jacfwd", "vmap", "vmap-grad",
                                       "compile", "compile-grad", "checkpoint"])
def test_a_write_into_a_view_writes_through(fun, transform):
    """NumPy writes through a view into its base, and so does every transform, in value and derivative
    (``w[0] = 5 w[0]`` makes ``v[1] * v[2]`` five times larger: gradient [0, 5.5, -3.5, 0]). These
    writes used to be refused; before that, they silently updated the view alone."""
    want = fun(V.copy())  # NumPy's own run
    eps = 1e-6
    dwant = np.array([(fun(V + eps * e) - fun(V - eps * e)) / (2 * eps) for e in np.eye(4)])
    X = np.stack([V, 2.0 * V])
    if transform == "grad":
        got, dgot = wg.value_and_grad(fun)(V.copy())
    elif transform == "vjp":
        got, back = wg.vjp(fun, V.copy())
        dgot = back(1.0)[0]
    elif transform == "jvp":
        got, dgot = wg.jvp(fun, (V.copy(),), (np.array([0.0, 1.0, 0.0, 0.0]),))
        dwant = dwant[1]
    elif transform == "jacfwd":
        got, dgot = fun(V.copy()), wg.jacfwd(fun)(V.copy())
    elif transform == "vmap":
        got, want = wg.vmap(fun)(X.copy()), np.array([fun(x.copy()) for x in X])
        dgot = dwant
    elif transform == "vmap-grad":
        got, dgot = want, wg.vmap(wg.grad(fun))(X.copy())[0]
    elif transform == "compile":
        got, dgot = wg.compile(fun)(V.copy()), dwant
    elif transform == "compile-grad":
        got, dgot = want, wg.compile(fun).grad()(V.copy())
    elif transform == "checkpoint":
        got, dgot = wg.value_and_grad(wg.checkpoint(fun))(V.copy())
    else:
        x = wg.tensor(V.copy(), requires_grad=True)
        y = fun(x * 1.0)
        y.backward()
        got, dgot = y.item(), x.grad.value
    assert np.allclose(got, want, rtol=1e-13, atol=0)
    assert np.allclose(dgot, dwant, rtol=1e-7, atol=1e-8)


def test_writes_into_copies_and_fancy_index_results():
    def copied(v):
        w = v[1:].copy()
        w[0] = 5.0 * w[0]
        return v[1] * w[0] + w[1]

    def gathered(v):
        w = v[np.array([1, 2])]
        w[0] = 5.0 * w[0]
        return v[1] * w[0] + w[1]

    for fun in (copied, gathered):
        want = fun(V.copy())
        value, g = wg.value_and_grad(fun)(V.copy())
        assert _same(value, want)
        assert _same(g, [0.0, 10.0 * V[1], 1.0, 0.0])
        check_grads(fun, V.copy(), modes=("rev",), order=1)

    def same_array(v):  # wnp.asarray of a traced array is that array (its box): a write is seen by both
        w = wnp.asarray(v)
        w[0] = 7.0 * v[3]
        return wnp.sum(v * v)

    value, g = wg.value_and_grad(same_array)(V.copy())
    assert _same(value, same_array(V.copy()))
    assert _same(g, [0.0, 2 * V[1], 2 * V[2], 2 * V[3] + 98.0 * V[3]])


def test_a_value_kept_from_a_finished_inner_transform_is_refused():
    """Used in the outer function's output, an inner ``wg.grad``'s traced value (kept in a list) made
    every outer derivative silently zero (1.54 expected here)."""
    def outer(x):
        kept = []
        g = wg.grad(lambda y: (kept.append(y * x), y * y * x)[1])(0.7)
        return g * x + kept[0] * 1.0

    for transform in (wg.grad, wg.jacrev, wg.jacfwd, lambda f: lambda x: wg.jvp(f, (x,), (1.0,))):
        with pytest.raises(TypeError, match="already returned"):
            transform(outer)(0.3)

    def returned(x):  # the supported way: the inner transform returns it
        g, kept = wg.grad(lambda y: (y * y * x, y * x), has_aux=True)(0.7)
        return g * x + kept * 1.0

    assert wg.grad(returned)(0.3) == pytest.approx(2.8 * 0.3 + 0.7, rel=1e-14)


# -- random scalar programs with constants of several kinds, aliasing, reads and assignments ---------

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    given = None


def _step(name, s, t, c, v, k, np_):
    """One step of a random program on state ``s``, an earlier value ``t``, a constant ``c`` and an
    array ``v`` (for PyTorch ``np_`` is torch and assignments are out of place); returns (value, v)."""
    if name == "assign":
        v = _set(v, k % 4, s * c)
        return s + v[(k + 1) % 4], v
    if name == "augmented":
        if isinstance(v, torch.Tensor):
            v = v * 1.5
        else:
            v *= 1.5
        return s + v[k % 4] * v[(k + 2) % 4], v
    steps = {
        "mul": lambda: s * t, "add": lambda: s + t, "sub": lambda: t - s,
        "div": lambda: s / (2.0 + t * t), "const_div": lambda: c / (1.5 + s * s),
        "const_add": lambda: c + s, "add_const": lambda: s + c, "sub_const": lambda: s - c,
        "const_sub": lambda: c - s, "const_mul": lambda: c * s, "mul_const": lambda: s * c,
        "square": lambda: s * s, "double": lambda: s + s, "cancel": lambda: s - s + t,
        "ratio": lambda: (s * 1.0) / (s * 1.0 + 3.0), "int_power": lambda: s ** 2,
        "power_const": lambda: (s * s + 0.5) ** c, "const_power": lambda: 1.3 ** s,
        "power": lambda: (s * s + 0.5) ** (t * 0.3), "abs": lambda: abs(s) + t, "neg": lambda: -s,
        "sin": lambda: np_.sin(s), "tanh": lambda: np_.tanh(s * c + t), "exp": lambda: np_.exp(-s * s),
        "log": lambda: np_.log(1.0 + s * s), "sqrt": lambda: np_.sqrt(1.0 + s * s),
        "read": lambda: s + v[k % 4] * c, "read_negative": lambda: s * v[-(k % 4) - 1],
        "two_reads": lambda: v[k % 4] * v[(k + 1) % 4] + s,
    }
    return steps[name](), v


_NAMES = ["mul", "add", "sub", "div", "const_div", "const_add", "add_const", "sub_const", "const_sub",
          "const_mul", "mul_const", "square", "double", "cancel", "ratio", "int_power", "power_const",
          "const_power", "power", "abs", "neg", "sin", "tanh", "exp", "log", "sqrt", "read",
          "read_negative", "two_reads", "assign", "augmented"]


def _run(ops, x, y, v, np_):
    v = _clone(v)
    values = [x, y]
    for name, c, k in ops:
        value, v = _step(name, values[-1], values[k % len(values)], c, v, k, np_)
        values.append(value)
    return values[-1] + values[-2] * 0.5 + v[0] * v[3]


if given is not None:
    _constants = st.one_of(st.floats(-2.0, 2.0).filter(lambda c: abs(c) > 1e-2),
                           st.floats(-2.0, 2.0).filter(lambda c: abs(c) > 1e-2).map(np.float64),
                           st.sampled_from([-3, -1, 2, 3]))
    _programs = st.lists(st.tuples(st.sampled_from(_NAMES), _constants, st.integers(0, 40)),
                         min_size=1, max_size=15)

    @needs_torch
    @settings(max_examples=80, deadline=None)
    @given(_programs, st.floats(-1.5, 1.5), st.floats(-1.5, 1.5))
    def test_random_programs_with_mixed_constants_and_assignments_match_pytorch(ops, x, y):
        gx, gy, gv = wg.grad(lambda a, b, v: _run(ops, a, b, v, wnp), argnums=(0, 1, 2))(x, y, V.copy())
        got = np.array([gx, gy, *gv], dtype=float)
        tt = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, y, V)]
        out = _run(ops, *tt, torch)
        out.backward()
        want = np.array([0.0 if t.grad is None else float(t.grad) for t in tt[:2]] + list(tt[2].grad.numpy()))
        if np.all(np.isfinite(want)) and np.max(np.abs(want)) < 1e8:  # (a blown-up program compares nothing)
            assert got == pytest.approx(want, rel=1e-8, abs=1e-9)

    @needs_torch
    @settings(max_examples=30, deadline=None)
    @given(_programs, st.floats(-1.5, 1.5), st.floats(-1.5, 1.5))
    def test_random_programs_second_order_match_pytorch(ops, x, y):
        def inner(a, b):  # v traced by the inner grad, so that assignments into it are recorded there
            return wg.grad(lambda p, q: _run(ops, p, q, V + 0.0 * p, wnp), argnums=0)(a, b)

        got = np.array(wg.grad(inner, argnums=(0, 1))(x, y), dtype=float)
        tt = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, y)]
        # the same function as wengert's, V + 0 * p: where v reaches an inf, 0 * inf makes both nan
        out = _run(ops, tt[0], tt[1], torch.tensor(V) + 0.0 * tt[0], torch)
        (gx,) = torch.autograd.grad(out, tt[0], create_graph=True, allow_unused=True)
        if gx is None or not gx.requires_grad:
            want = np.zeros(2)
        else:
            want = np.array([0.0 if h is None else float(h)
                             for h in torch.autograd.grad(gx, tt, allow_unused=True)])
        if np.all(np.isfinite(want)) and np.max(np.abs(want)) < 1e8:
            assert got == pytest.approx(want, rel=1e-7, abs=1e-8)


def test_vmap_writes_into_arguments_and_new_arrays_still_work():
    def f(v):
        v[0] = 3.0 * v[1]  # into the argument (its batch is a view of the caller's stack)
        w = v * 2.0  # into a new array
        w[1] = w[2] * w[3]
        return wnp.sum(wnp.reshape(w, (2, 2)) * wnp.reshape(v, (2, 2)))

    xs = np.stack([V, 2.0 * V, -V])
    assert _same(wg.vmap(f)(xs.copy()), [f(x.copy()) for x in xs])
    assert _same(wg.vmap(wg.grad(f))(xs.copy()), [wg.grad(f)(x.copy()) for x in xs])


def test_compiled_and_checkpointed_writes_into_arguments_and_new_arrays_still_work():
    def f(v):
        v[0] = 3.0 * v[1]
        w = v * 2.0
        w[1] = w[2] * w[3]
        w += v
        return wnp.sum(w * v)

    want_value, want_grad = f(V.copy()), wg.grad(f)(V.copy())
    assert _same(wg.compile(f)(V.copy()), want_value)
    assert _same(wg.compile(f).grad()(V.copy()), want_grad)
    assert _same(wg.grad(wg.checkpoint(f))(V.copy()), want_grad)
    check_grads(f, V.copy(), modes=("rev",), order=1)


def test_forward_mode_writes_into_arguments_and_new_arrays_still_work():
    """Forward mode refuses writes into views made by operations, not into its arguments (even one that
    is a view of the caller's array) nor into new arrays; tangents agree with reverse mode and NumPy."""
    base = np.arange(6.0) * 0.1 + 0.2

    def f(v):
        v[0] = 3.0 * v[1]  # into the argument
        w = v * 2.0
        w[1] = w[2] * w[3]  # into a new array
        return wnp.sum(w * v)

    primal = base[1:5]  # a view of the caller's array
    value, tangent = wg.jvp(f, (primal,), (np.ones(4),))
    assert _same(value, f(primal.copy()))
    assert _same(tangent, np.sum(wg.grad(f)(primal.copy())))
    assert _same(base, np.arange(6.0) * 0.1 + 0.2)  # the caller's array unchanged
    check_grads(f, primal.copy(), modes=("fwd", "rev"), order=1)


def test_a_value_kept_from_a_finished_transform_is_a_constant_to_a_later_one():
    """Kept from an earlier ``wg.grad`` and used in a new one, the value is a constant there (it does not
    depend on the new arguments); the gradient came back as a box of the finished trace, whose value was
    right, instead of a plain number or array."""
    kept = []
    wg.grad(lambda y: (kept.append(y * 2.0), y * y)[1])(1.5)
    wg.grad(lambda y: (kept.append(y * 2.0), wnp.sum(y))[1])(np.ones(3))
    scalar, array = kept
    g = wg.grad(lambda x: scalar * x * x)(3.0)
    assert type(g) is float and _same(g, 18.0)
    g = wg.grad(lambda x: wnp.sum(x * array))(np.ones(3))
    assert type(g) is np.ndarray and _same(g, [2.0, 2.0, 2.0])
    h = wg.grad(wg.grad(lambda x: x * x * x * scalar))(0.5)  # second order: 6 x * 3.0
    assert type(h) is float and _same(h, 9.0)
