"""Hostile tests of what the reverse tape keeps (``wengert.engines.saving``): arrays big enough to be
left out (``MIN_BYTES``), outputs released by the sweep, the assignment log, and every transform that
reads a recording again (second order, ``vmap``, recomputation, pullbacks called twice).

Each program is run with the saving on (``MIN_BYTES`` as shipped, and 0: every array left out and
every releasable output released) and off (everything kept); the results must agree, and the
gradients are checked against finite differences and, where installed, PyTorch and JAX.
"""

import contextlib

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.engines import saving
from wengert.testing import check_grads

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


def same_as_everything_kept(thunk, rtol=1e-10, atol=1e-10):
    """``thunk()`` with the saving on (both thresholds) equals ``thunk()`` with everything kept;
    returns the latter. Also checks that the saving did leave something out."""
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
    assert made[0] > 0, "nothing was left out: the test does not exercise the saving"
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
    per_example = wg.vmap(wg.grad(lambda s: wnp.sum(_step_assigning(s) ** 2)))(batch)
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
