"""The systematic batching test: for every case of the rule table, ``wg.vmap`` of the function equals
the function applied to each example and stacked -- the values, with the batch on axis 0 and on
axis -1, per-example gradients (reverse mode run on batched values), per-example tangents (forward
mode), second derivatives, and the gradient of a function that calls ``vmap`` (reverse mode
through batched primitives). Primitives without a batching rule run once per example (a warning
says so); either way the answer must be the loop's."""

import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.rules.test_rule_table import CASES, COMPOSED
from wengert.api.tree import tree_flatten, tree_unflatten
from wengert.core.errors import TracingError
from wengert.engines.batching import NoBatchingRuleWarning

TABLE = {**{f"rule:{k}": v for k, v in CASES.items()}, **{f"composed:{k}": v for k, v in COMPOSED.items()}}
LIST = [pytest.param(name, i, id=f"{name}-{i}") for name in sorted(TABLE) for i in range(len(TABLE[name]))]
EXAMPLES = 2
REFUSED = {"composed:linalg.lstsq"}
"""Functions whose result's shape depends on the data: refused under vmap with an error saying why."""
RTOL, ATOL = 1e-9, 1e-12


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoBatchingRuleWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _mappable(a):
    return type(a) is float or (isinstance(a, np.ndarray) and a.dtype.kind in "fc")


def _examples(args):
    """``EXAMPLES`` argument tuples near ``args`` (relative changes of 1e-3: inside every domain the
    cases are built for), and which arguments vary (floats and float arrays)."""
    rng = np.random.default_rng(7)
    mapped = [_mappable(a) for a in args]
    out = []
    for k in range(EXAMPLES):
        ex = []
        for a, m in zip(args, mapped):
            if m and k:
                noise = rng.uniform(-1e-3, 1e-3, size=np.shape(a))
                a = a * (1.0 + noise) if type(a) is not float else a * (1.0 + float(noise))
            ex.append(a)
        out.append(tuple(ex))
    return out, mapped


def _stack(examples, mapped, axis):
    return [np.stack([np.asarray(ex[j]) for ex in examples], axis=axis) if m else examples[0][j]
            for j, m in enumerate(mapped)]


def _same(got, want, what):
    g_leaves, g_def = tree_flatten(got)
    w_leaves, w_def = tree_flatten(want)
    assert g_def == w_def, f"{what}: structure {g_def} != {w_def}"
    for g, w in zip(g_leaves, w_leaves):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=RTOL, atol=ATOL, err_msg=what)


def _stacked_results(results, axis):
    leaves = [tree_flatten(r)[0] for r in results]
    treedef = tree_flatten(results[0])[1]
    return tree_unflatten(treedef, [np.stack([np.asarray(ls[k]) for ls in leaves], axis=axis)
                                    for k in range(len(leaves[0]))])


def _inexact_leaves(out):
    return [o for o in tree_flatten(out)[0] if np.dtype(getattr(o, "dtype", type(o))).kind in "fc"]


def _scalarized(fun):
    """``sum(real(out) * c)`` over the result's float leaves, ``c`` fixed: a loss to differentiate."""
    def loss(*args):
        total = 0.0
        for o in _inexact_leaves(fun(*args)):
            shape = tuple(getattr(o, "shape", ()))
            c = np.cos(np.arange(int(np.prod(shape)))).reshape(shape) + 0.5
            total = total + wnp.sum(wnp.real(o) * c)
        return total
    return loss


@pytest.mark.parametrize("name,i", LIST)
def test_vmap_equals_the_loop(name, i):
    fun, args = TABLE[name][i]
    examples, mapped = _examples(args)
    if not any(mapped):
        pytest.skip("no float argument to map over")
    for axis in (0, -1):
        in_axes = tuple(axis if m else None for m in mapped)
        try:
            got = wg.vmap(fun, in_axes=in_axes, out_axes=axis)(*_stack(examples, mapped, axis))
        except TracingError as e:  # a refusal must say so, name vmap, and say what to do instead
            assert name in REFUSED and "wg.vmap" in str(e), e
            return
        want = _stacked_results([fun(*ex) for ex in examples], axis)
        _same(got, want, f"vmap over axis {axis}")
    # each float argument batched alone, the others the same for every example (rules that line
    # up a batched argument with unbatched ones)
    for j in [j for j, m in enumerate(mapped) if m] if sum(mapped) > 1 else []:
        alone = [k == j for k in range(len(args))]
        batch = [np.stack([np.asarray(ex[j]) for ex in examples]) if k == j else a
                 for k, a in enumerate(args)]
        got = wg.vmap(fun, in_axes=tuple(0 if m else None for m in alone))(*batch)
        want = _stacked_results([fun(*[ex[k] if k == j else a for k, a in enumerate(args)])
                                 for ex in examples], 0)
        _same(got, want, f"vmap over argument {j} alone")


@pytest.mark.parametrize("name,i", LIST)
def test_vmap_of_derivatives_equals_the_loop(name, i):
    fun, args = TABLE[name][i]
    examples, mapped = _examples(args)
    if not any(mapped) or not _inexact_leaves(fun(*args)) or name in REFUSED:
        pytest.skip("nothing to differentiate, or refused under vmap (checked above)")
    nums = tuple(j for j, m in enumerate(mapped) if m)
    in_axes = tuple(0 if m else None for m in mapped)
    batch = _stack(examples, mapped, 0)
    loss = _scalarized(fun)

    # reverse mode on batched values: per-example gradients
    grad = wg.grad(loss, argnums=nums)
    _same(wg.vmap(grad, in_axes=in_axes)(*batch), _stacked_results([grad(*ex) for ex in examples], 0),
          "vmap(grad)")

    # forward mode on batched values: per-example tangents
    tangents = [np.cos(np.arange(np.size(args[j]))).reshape(np.shape(args[j])) + 0.25 for j in nums]
    tangents = [float(t) if type(args[j]) is float else t for t, j in zip(tangents, nums)]

    def tangent_of(f):
        """The tangent of ``f`` (a function of all the arguments) along ``tangents`` in the mapped ones."""
        def along(*a):
            def restricted(*xs):
                full = list(a)
                for j, x in zip(nums, xs):
                    full[j] = x
                return f(*full)
            return wg.jvp(restricted, tuple(a[j] for j in nums), tuple(tangents))[1]
        return along

    tangent = tangent_of(loss)
    _same(wg.vmap(tangent, in_axes=in_axes)(*batch), np.array([tangent(*ex) for ex in examples]),
          "vmap(jvp)")

    # second order: the gradient's tangent (a Hessian-vector product) per example
    hvp = tangent_of(grad)
    _same(wg.vmap(hvp, in_axes=in_axes)(*batch), _stacked_results([hvp(*ex) for ex in examples], 0),
          "vmap(hvp)")

    # reverse mode through batched primitives: the gradient of a sum over the batch
    def batch_loss(*b):
        return wnp.sum(wg.vmap(loss, in_axes=in_axes)(*b))

    _same(wg.grad(batch_loss, argnums=nums)(*batch), _stacked_results([grad(*ex) for ex in examples], 0),
          "grad(vmap)")
