"""Hostile tests of what the reverse tape keeps (``wengert.engines.saving``): arrays big enough to be
left out (``MIN_BYTES``), outputs released by the sweep, the assignment log, and every transform that
reads a recording again (second order, ``vmap``, recomputation, pullbacks called twice).

Each program is run with the saving on (``MIN_BYTES`` as shipped, and 0: every array left out and
every releasable output released) and off (everything kept); the results must agree, and the
gradients are checked against finite differences and, where installed, PyTorch and JAX.
"""

import contextlib
import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from tests.rules.test_rule_table import CASES, COMPOSED
from wengert.engines import saving
from wengert.testing import check_grads

try:
    from wengert.scipy import integrate  # noqa: F401 - odeint joins the rule table
except ModuleNotFoundError:  # pragma: no cover - SciPy is in the test extra; its families are left out
    pass

N = 1000  # 8000 bytes of float64: above MIN_BYTES, so arguments are left out and outputs released
RNG = np.random.default_rng(20261126)
X = RNG.uniform(0.5, 1.5, N)
W = RNG.uniform(0.5, 1.5, N)


@contextlib.contextmanager
def min_bytes(n):
    old = saving.MIN_BYTES
    saving.MIN_BYTES = n
    try:
        yield
    finally:
        saving.MIN_BYTES = old


KEEP_ALL = 1 << 62
MODES = {"shipped": saving.MIN_BYTES, "everything-left-out": 0}


def _flat(tree):
    return np.concatenate([np.ravel(np.asarray(leaf, dtype=complex)) for leaf in wg.tree_flatten(tree)[0]])


def same_as_everything_kept(thunk, rtol=1e-10, atol=1e-10, leaves_out=True):
    """``thunk()`` with the saving on (both thresholds) equals ``thunk()`` with everything kept;
    returns the latter. Also checks that the saving did leave something out (``leaves_out``; under
    ``vmap`` the tape records batches, which it keeps whole)."""
    with min_bytes(KEEP_ALL):
        want = thunk()
    made = [0]
    real_init = saving.Unsaved.__init__

    def counting(self, *args):
        made[0] += 1
        real_init(self, *args)

    for label, n in MODES.items():
        saving.Unsaved.__init__ = counting
        try:
            with min_bytes(n):
                got = thunk()
        finally:
            saving.Unsaved.__init__ = real_init
        np.testing.assert_allclose(_flat(got), _flat(want), rtol=rtol, atol=atol, err_msg=label)
    assert made[0] > 0 or not leaves_out, "nothing was left out: the test does not exercise the saving"
    return want


# -- assignment inside transforms that keep no graph (vmap, checkpoint's recomputation) --------------

def _step_assigning(s):
    s = s * 1.0
    s[:100] = wnp.sin(s[100:200]) * W[:100]
    s += wnp.cos(s) * 0.5
    s *= 0.9
    return s


def _step_plain(s):
    head = wnp.sin(s[100:200]) * W[:100]
    s = wnp.concatenate([head, s[100:]])
    s = s + wnp.cos(s) * 0.5
    return s * 0.9


@pytest.mark.parametrize("policy", ["all", "binomial", "ctz"])
def test_assignment_inside_iterate_steps(policy):
    def f(x, step):
        return wnp.sum(wg.iterate(step, x, 4, checkpoint=policy) ** 2)

    got = same_as_everything_kept(lambda: wg.grad(f)(X * 0.1, _step_assigning))
    np.testing.assert_allclose(got, wg.grad(f)(X * 0.1, _step_plain), rtol=1e-12)
    second = same_as_everything_kept(
        lambda: wg.grad(lambda x: wnp.sum(wg.grad(f)(x, _step_assigning) ** 2))(X * 0.1))
    np.testing.assert_allclose(
        second, wg.grad(lambda x: wnp.sum(wg.grad(f)(x, _step_plain) ** 2))(X * 0.1), rtol=1e-10)


def test_assignment_inside_checkpoint():
    def f(x, step):
        return wnp.sum(wg.checkpoint(step)(x) ** 2)

    got = same_as_everything_kept(lambda: wg.grad(f)(X, _step_assigning))
    np.testing.assert_allclose(got, wg.grad(f)(X, _step_plain), rtol=1e-12)
    check_grads(lambda x: f(x, _step_assigning), X, modes=("rev",), order=1)


def test_assignment_inside_vmap():
    batch = np.stack([X, W, X * W])
    got = wg.vmap(_step_assigning)(batch)
    np.testing.assert_allclose(got, np.stack([_step_plain(b) for b in batch]), rtol=1e-14)
    g = same_as_everything_kept(
        lambda: wg.grad(lambda b: wnp.sum(wg.vmap(_step_assigning)(b) ** 2))(batch))
    np.testing.assert_allclose(g, wg.grad(lambda b: wnp.sum(wg.vmap(_step_plain)(b) ** 2))(batch),
                               rtol=1e-12)
    per_example = same_as_everything_kept(
        lambda: wg.vmap(wg.grad(lambda s: wnp.sum(_step_assigning(s) ** 2)))(batch), leaves_out=False)
    np.testing.assert_allclose(per_example, g, rtol=1e-12)


# -- values that outlive their transform ---------------------------------------------------------------

def test_a_value_leaked_out_of_grad_still_computes():
    # A traced value kept past the end of wg.grad (stored from inside the function) goes on being
    # recorded on its finished trace, without the Wengert list: the release of outputs, whose
    # reference counts assume that list, must stop there, or a value the user holds is released.
    leaked = []

    def f(x):
        h = x * W
        for _ in range(40):  # more releasable outputs than a sweep waits for
            h = h * W
        leaked.append(h)
        return wnp.sum(h)

    wg.grad(f)(X)
    z = leaked.pop()
    want = X * W ** 41
    for _ in range(80):
        z = z * 1.01
        want = want * 1.01
    np.testing.assert_allclose(wg.stop_gradient(z), want, rtol=1e-12)


# -- the whole rule table through the transforms, every array left out --------------------------------

def _inexact(a):
    return isinstance(a, (float, complex, np.ndarray)) and np.asarray(a).dtype.kind in "fc"


def _squares(tree):
    """Sum of |leaf|^2 over the float and complex leaves of ``tree`` (others are ignored)."""
    total = 0.0
    for leaf in wg.tree_flatten(tree)[0]:
        kind = np.result_type(wg.stop_gradient(leaf)).kind
        if kind == "c":
            total = total + wnp.sum(wnp.real(leaf * wnp.conj(leaf)))
        elif kind == "f":
            total = total + wnp.sum(leaf * leaf)
    return total


def _transforms(fun, args):
    """Gradient-of-(sum of squares) programs over ``fun``'s case, each reading a recording again in
    its own way: first order, reverse over reverse, forward over reverse, vmap of grad, reverse over
    forward, and a second order across two different arguments."""
    nums = tuple(j for j, a in enumerate(args) if _inexact(a))
    if not nums:
        return {}

    def loss(*a):
        return _squares(fun(*a))

    def with_args(sub):
        full = list(args)
        for j, v in zip(nums, sub):
            full[j] = v
        return full

    def grad_norm(*a):
        return _squares(wg.grad(loss, argnums=nums)(*a))

    def fwd_over_rev():
        tangents = tuple(args[j] * 0.37 + 0.1 for j in nums)
        return wg.jvp(lambda *sub: wg.grad(loss, argnums=nums)(*with_args(sub)),
                      tuple(args[j] for j in nums), tangents)

    def vmap_of_grad():
        j = nums[0]
        batch = np.stack([np.asarray(args[j]), np.asarray(args[j]) * 0.9 + 0.05])

        def one(v):
            full = list(args)
            full[j] = v
            return wg.grad(loss, argnums=j)(*full)
        return wg.vmap(one)(batch)

    def rev_over_fwd():
        tangents = tuple(np.ones_like(args[j]) if type(args[j]) is not float else 1.0 for j in nums)
        return wg.grad(lambda *sub: wg.jvp(lambda *s: loss(*with_args(s)), sub, tangents)[1],
                       argnums=tuple(range(len(nums))))(*[args[j] for j in nums])

    found = {"grad": lambda: wg.grad(loss, argnums=nums)(*args),
             "grad of grad": lambda: wg.grad(grad_norm, argnums=nums)(*args),
             "jvp of grad": fwd_over_rev, "vmap of grad": vmap_of_grad, "grad of jvp": rev_over_fwd}
    if len(nums) > 1:
        j, k = nums[:2]
        found["grad of grad, another argument"] = lambda: wg.grad(
            lambda *a: _squares(wg.grad(loss, argnums=j)(*a)), argnums=k)(*args)
    return found


TABLE = {name: cases for name, cases in {**CASES, **{f"composed {n}": c for n, c in COMPOSED.items()}}.items()
         if any(_inexact(a) for _, args in cases for a in args)}  # (integer-valued functions: no gradient)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_rule_table_cases_through_every_transform_with_everything_left_out(name):
    """Every case of the systematic test, each transform of :func:`_transforms`, with every array left
    out and every releasable output released (``MIN_BYTES`` 0, as if each were big), against the
    same with everything kept. Where keeping everything refuses the program, so must the saving."""
    checked = 0
    for fun, args in TABLE[name]:
        for label, thunk in _transforms(fun, args).items():
            with min_bytes(KEEP_ALL), np.errstate(all="ignore"):
                try:
                    want = thunk()
                except Exception as e:  # noqa: BLE001 - refused with everything kept: compared below
                    refused = e
                else:
                    refused = None
            with min_bytes(0), np.errstate(all="ignore"):
                if refused is not None:
                    with pytest.raises(type(refused)):
                        thunk()
                    continue
                got = thunk()
            np.testing.assert_allclose(_flat(got), _flat(want), rtol=1e-10, atol=1e-12, equal_nan=True,
                                       err_msg=f"{name}: {label} of {getattr(fun, '__name__', fun)}")
            checked += 1
    assert checked, f"{name}: no transform of its cases could be computed"


# -- programs: against everything kept, finite differences, and JAX / PyTorch -------------------------

def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def _long_chain(xp, x, w, *, held=None, assign=None):
    """120 steps, each a product (whose output its rule does not read: released once only the graph
    refers to it, more than a sweep waits for), with some outputs held until the end, some read
    element by element (scalar nodes), some assigned to after being read (``assign``)."""
    s = x
    kept = []
    for k in range(120):
        t = s * w
        if k % 7 == 0:
            kept.append(t)
        if k % 11 == 0:
            kept.append(t[3] * t[4] + t[5])
        if assign is not None and k % 13 == 0:
            t = assign(t, k)
            if k % 7 == 0:  # NumPy's semantics: the value held is the array assigned to
                kept[-2 if k % 11 == 0 else -1] = t
        s = xp.sin(t) * 0.9 + x * 0.1
    total = xp.sum(s ** 2)
    for v in kept:
        total = total + xp.sum(v) * 0.001
    return total


def _assign_traced(t, k):
    t[0:10] = t[10:20] * 2.0
    if k % 2:
        t += 0.01 * t[::-1]
    return t


def _assign_jax(t, k):
    t = t.at[0:10].set(t[10:20] * 2.0)
    if k % 2:
        t = t + 0.01 * t[::-1]
    return t


@pytest.mark.parametrize("assign", [False, True], ids=["plain", "assigned"])
def test_a_long_chain_with_held_and_read_values(assign):
    jax = _jax()
    jnp = jax.numpy
    f = (lambda x: _long_chain(wnp, x, W, assign=_assign_traced)) if assign else \
        (lambda x: _long_chain(wnp, x, W))
    fj = (lambda x: _long_chain(jnp, x, jnp.asarray(W), assign=_assign_jax)) if assign else \
        (lambda x: _long_chain(jnp, x, jnp.asarray(W)))
    g = same_as_everything_kept(lambda: wg.grad(f)(X))
    np.testing.assert_allclose(g, np.asarray(jax.grad(fj)(X)), rtol=1e-9, atol=1e-12)
    hv = same_as_everything_kept(lambda: wg.hessian_vector_product(f)(X, W))
    np.testing.assert_allclose(hv, np.asarray(jax.jvp(jax.grad(fj), (X,), (W,))[1]), rtol=1e-8, atol=1e-10)
    twice = same_as_everything_kept(lambda: (lambda out: (out[1](1.0), out[1](-2.5)))(wg.vjp(f, X)))
    np.testing.assert_allclose(_flat(twice), np.concatenate([g, -2.5 * g]), rtol=1e-12)
    rows = same_as_everything_kept(lambda: wg.jacrev(lambda x: wnp.stack([f(x), f(x * 0.5)]))(X))
    np.testing.assert_allclose(rows[0], g, rtol=1e-12)


def test_pullbacks_aux_and_intermediates_outlive_the_recording():
    def f(x):
        h = wnp.exp(wnp.sin(x) * W)
        k = h * x
        return wnp.tanh(k) * W, (h, k)

    def pulled():
        y, back, aux = wg.vjp(f, X, has_aux=True)
        first = back(np.ones(N))
        return y, aux, first, back(W)
    y, (h, k), first, second = same_as_everything_kept(pulled)
    np.testing.assert_allclose(h, np.exp(np.sin(X) * W), rtol=1e-14)
    np.testing.assert_allclose(k, h * X, rtol=1e-14)
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    xt = torch.tensor(X, requires_grad=True)
    yt = torch.tanh(torch.exp(torch.sin(xt) * torch.tensor(W)) * xt) * torch.tensor(W)
    (want1,) = torch.autograd.grad(yt, xt, torch.ones(N), retain_graph=True)
    (want2,) = torch.autograd.grad(yt, xt, torch.tensor(W))
    np.testing.assert_allclose(first[0], want1.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(second[0], want2.numpy(), rtol=1e-12, atol=1e-14)

    def g(x):
        h = wnp.exp(wnp.sin(x))
        return wnp.sum(wnp.cos(h * x)), h
    (value, h), grad = same_as_everything_kept(lambda: wg.value_and_grad(g, has_aux=True)(X))
    np.testing.assert_allclose(h, np.exp(np.sin(X)), rtol=1e-14)
    check_grads(lambda x: g(x)[0], X, modes=("rev",), order=2)


def _eager(x, w):
    a = wg.tensor(x.copy(), requires_grad=True)
    b = wg.tensor(w.copy(), requires_grad=True)
    h = wnp.sin(a) * wnp.exp(a * b) + b
    y = wnp.sum(h * h) + wnp.sum(wnp.cumprod(a * 0.5 + 0.6)[::7] * b[:143])
    y.backward(retain_graph=True)
    first = (a.grad.copy(), b.grad.copy())
    y.backward()
    return first, (a.grad, b.grad)


def test_eager_tensors_backward_twice():
    first, second = same_as_everything_kept(lambda: _eager(X, W))
    np.testing.assert_allclose(second[0], 2 * first[0], rtol=1e-12)
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    a = torch.tensor(X, requires_grad=True)
    b = torch.tensor(W, requires_grad=True)
    h = torch.sin(a) * torch.exp(a * b) + b
    y = torch.sum(h * h) + torch.sum(torch.cumprod(a * 0.5 + 0.6, 0)[::7] * b[:143])
    y.backward()
    np.testing.assert_allclose(first[0], a.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(first[1], b.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("n", [511, 512, 513, 1023, 1024, 1025])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_sizes_around_the_threshold(n, dtype):
    # 512 float64, 1024 float32 and 256 complex128 elements are exactly MIN_BYTES
    x = (X[:n] + (1j * W[:n] if dtype is np.complex128 else 0)).astype(dtype)

    def f(x):
        y = wnp.tanh(x * x[::-1]) * wnp.cumsum(x) / (1.0 + wnp.exp(-x))
        y = wnp.sort(wnp.real(y)) + wnp.clip(wnp.real(x), 0.7, 1.2) * wnp.max(wnp.abs(x))
        return wnp.sum(y ** 2)

    with min_bytes(KEEP_ALL):
        want = wg.grad(f)(x)
        want_hv = wg.hessian_vector_product(f)(x, x)
    with min_bytes(saving.MIN_BYTES):
        np.testing.assert_allclose(wg.grad(f)(x), want, rtol=1e-12 if dtype is not np.float32 else 1e-6)
        np.testing.assert_allclose(wg.hessian_vector_product(f)(x, x), want_hv,
                                   rtol=1e-12 if dtype is not np.float32 else 1e-6)
    if dtype is np.float64:
        jax = _jax()
        jnp = jax.numpy

        def fj(x):
            y = jnp.tanh(x * x[::-1]) * jnp.cumsum(x) / (1.0 + jnp.exp(-x))
            y = jnp.sort(y) + jnp.clip(x, 0.7, 1.2) * jnp.max(jnp.abs(x))
            return jnp.sum(y ** 2)
        np.testing.assert_allclose(want, np.asarray(jax.grad(fj)(x)), rtol=1e-9)


def _aliasing(xp, x):
    a = x.reshape(20, 50)
    b = a.T
    c = xp.dot(a, b) + xp.dot(a, a.T)
    d = x[::2] * x[1::2] + x[:500] * x[:500]
    e = xp.broadcast_to(x[:50], (20, 50)) * a
    f = xp.squeeze(e[None]) * e + xp.ravel(a)[::-1].reshape(20, 50) * xp.transpose(b)
    return xp.sum(c ** 2) * 1e-4 + xp.sum(d ** 3) + xp.sum(f)


def test_views_and_the_same_array_as_several_arguments():
    jax = _jax()
    f = lambda x: _aliasing(wnp, x)  # noqa: E731
    fj = lambda x: _aliasing(jax.numpy, x)  # noqa: E731
    g = same_as_everything_kept(lambda: wg.grad(f)(X))
    np.testing.assert_allclose(g, np.asarray(jax.grad(fj)(X)), rtol=1e-10)
    hv = same_as_everything_kept(lambda: wg.hessian_vector_product(f)(X, W))
    np.testing.assert_allclose(hv, np.asarray(jax.jvp(jax.grad(fj), (X,), (W,))[1]), rtol=1e-9)
    per = same_as_everything_kept(lambda: wg.vmap(wg.grad(f))(np.stack([X, W])), leaves_out=False)
    np.testing.assert_allclose(per[1], np.asarray(jax.grad(fj)(W)), rtol=1e-10)


# -- random programs around the threshold ---------------------------------------------------------------

_UNARY = [lambda a: wnp.sin(a), lambda a: wnp.exp(0.1 * a), lambda a: wnp.tanh(a),
          lambda a: wnp.cumsum(a) * 0.01, lambda a: wnp.sort(a), lambda a: a[::-1],
          lambda a: wnp.abs(a) ** 1.5, lambda a: a / (1.0 + a * a),
          lambda a: wnp.clip(a, -0.5, 0.8), lambda a: wnp.log1p(a * a), lambda a: a - wnp.max(a),
          lambda a: wnp.cumprod(0.5 + 0.5 * wnp.tanh(a))]
_BINARY = [lambda a, b: a * b, lambda a, b: a + b, lambda a, b: wnp.maximum(a, b),
           lambda a, b: wnp.where(a > b, a, b * 0.5), lambda a, b: a * wnp.sum(b) * 0.001,
           lambda a, b: wnp.hypot(a, b), lambda a, b: wnp.arctan2(a, 1.0 + b * b)]


_VIEW = 5  # a[::-1]: a view, which may not be written into (NumPy would write through to a)


def _run(program, x, w, assign):
    values = [x, w]
    last_op = None
    for op, i, j, hold in program:
        a, b = values[i % len(values)], values[j % len(values)]
        v = _UNARY[op % len(_UNARY)](a) if op < len(_UNARY) else _BINARY[op % len(_BINARY)](a, b)
        u = values[-1]
        if assign and hold and len(values) > 2 and not isinstance(u, np.ndarray) and last_op != _VIEW:
            u[:7] = v[7:14] * 0.5  # a traced earlier value assigned to after being read
        values.append(v)
        last_op = op
    return sum(wnp.sum(v * v) for v in values[2:]) * 1e-3


_STEP = st.tuples(st.integers(0, len(_UNARY) + len(_BINARY) - 1), st.integers(0, 20), st.integers(0, 20),
                  st.booleans())


@settings(max_examples=25, deadline=None, derandomize=True)
@given(program=st.lists(_STEP, min_size=1, max_size=12), n=st.integers(500, 530), assign=st.booleans())
def test_random_programs_around_the_threshold(program, n, assign):
    x, w = X[:n] - 1.0, W[:n]
    f = lambda x, w: _run(program, x, w, assign)  # noqa: E731
    with min_bytes(KEEP_ALL), np.errstate(all="ignore"):
        want = wg.grad(f, argnums=(0, 1))(x, w)
        want_hv = wg.hessian_vector_product(lambda x: f(x, w))(x, w)
    for threshold in MODES.values():
        with min_bytes(threshold), np.errstate(all="ignore"):
            np.testing.assert_allclose(_flat(wg.grad(f, argnums=(0, 1))(x, w)), _flat(want),
                                       rtol=1e-12, atol=1e-14, equal_nan=True)
            np.testing.assert_allclose(wg.hessian_vector_product(lambda x: f(x, w))(x, w), want_hv,
                                       rtol=1e-12, atol=1e-14, equal_nan=True)


def test_copying_a_graph_with_values_left_out():
    # copy.deepcopy of what holds a recorded tensor (a model's cached activations) copies its graph;
    # a value the tape left out is a placeholder with nothing to copy, not a rule's misuse
    a = wg.tensor(X, requires_grad=True)
    y = (wnp.sin(a) + W) * 2.0  # add reads neither argument: W is left out
    assert any(type(arg) is saving.Unsaved for node in (y, *y._parents) if node is not None
               for arg in (node._args or ()))
    held = {"y": y, "a": a}
    for copier in (copy.deepcopy, copy.copy):
        copied = copier(held)
        np.testing.assert_array_equal(wg.stop_gradient(copied["y"]), (np.sin(X) + W) * 2.0)
    wnp.sum(y).backward()
    np.testing.assert_allclose(a.grad, 2.0 * np.cos(X), rtol=1e-14)


# -- eager tensors overwritten in place through a view -----------------------------------------------

def _overwrite(b, how):
    if how == "the tensor itself":
        b[0:10] = 5.0
    elif how == "a slice held":
        v = b[0:10]
        v += 1.0
    elif how == "a reshape held":
        v = b.reshape(10, 100)
        v[0, 0:10] = 5.0
    elif how == "a strided slice held":
        v = b[::2]
        v *= 3.0


@pytest.mark.parametrize("how", ["the tensor itself", "a slice held", "a reshape held",
                                 "a strided slice held"])
def test_an_overwrite_through_a_view_of_a_saved_array_is_refused(how):
    # PyTorch's version counters: a view shares its base's counter. Writing through a view of an
    # array that an operation saved must make backward() refuse, as writing to the array itself does.
    a = wg.tensor(X.copy(), requires_grad=True)
    b = a * 1.5
    c = wnp.sum(wnp.sin(b))  # sin keeps b's value
    with wg.no_grad():
        _overwrite(b, how)
    with pytest.raises(RuntimeError, match="'sin'.*modified by an in-place operation"):
        c.backward()


def test_an_overwrite_elsewhere_in_the_buffer_is_not_refused():
    a = wg.tensor(X.copy(), requires_grad=True)
    b = a * 1.5
    c = wnp.sum(wnp.sin(b[500:]))  # sin keeps the second half of b's buffer
    with wg.no_grad():
        v = b[0:10]
        v += 1.0  # the first half: nothing saved reads it
    c.backward()
    want = np.zeros(N)
    want[500:] = 1.5 * np.cos(1.5 * X[500:])
    np.testing.assert_allclose(a.grad, want, rtol=1e-14)
