"""Every built-in primitive batches without a per-example loop in every use the rule table covers.

Each case of ``tests/rules/test_rule_table.py`` runs under ``wg.vmap`` in three uses -- its first
float argument batched, every float argument batched, and per-example gradients (``vmap(grad)``,
whose backward pass runs the VJP rules on batched values) -- with ``NoBatchingRuleWarning`` as an
error, and its result compared with a Python loop over the examples. The primitives that still
run once per example are listed in ``LOOPS`` with the reason; their cases assert that they still
loop, so that the list only shrinks (``tests/rules/test_batching.py`` checks every case's values
and derivatives under ``vmap`` with the warning allowed).
"""

import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.rules.test_rule_table import CASES, COMPOSED
from wengert.api.tree import tree_flatten
from wengert.core.errors import TracingError
from wengert.engines import batching
from wengert.engines.batching import NoBatchingRuleWarning
from wengert.rules.scipy_linalg import SCIPY_BATCHES

TABLE = {**CASES, **{f"composed:{k}": v for k, v in COMPOSED.items()}}
USES = ("first", "every", "grad")

_SCIPY = ("SciPy's function takes one matrix (or signal) at a time in the SciPy versions wengert supports "
          "(solve_sylvester and sqrtm take stacks from SciPy 1.15 or later; convolve has no axes)")
LOOPS = {
    "sqrtm": _SCIPY, "solve_sylvester": _SCIPY, "scipy_convolve": _SCIPY,
    "odeint": "an ODE solve with adaptive steps: each example takes steps of its own",
    "lstm_sequence": "an LSTM layer's fused recurrence with weights that differ per example (batched "
                     "weights): one layer per example; batched inputs with shared weights are one call",
}
"""Primitive -> why it still runs once per example in some case of the table."""
if not SCIPY_BATCHES:
    LOOPS.update(dict.fromkeys(("cholesky_lower", "scipy_solve_triangular"), "SciPy < 1.15 takes one matrix"))

REFUSED = {"composed:linalg.lstsq"}
"""Whose result's shape depends on the data: refused under ``vmap`` (tests/rules/test_batching.py)."""


def _floats(args):
    return [j for j, a in enumerate(args)
            if type(a) is float or (isinstance(a, np.ndarray) and a.dtype.kind in "fc")]


def _loss(fun):
    def loss(*args):
        total = 0.0
        for o in tree_flatten(fun(*args))[0]:
            if np.dtype(getattr(o, "dtype", type(o))).kind in "fc":
                total = total + wnp.sum(wnp.real(o) * 0.75)
        return total
    return loss


def _use(fun, args, use):
    """``(function, which arguments are batched)`` for one use, or None where it does not apply."""
    floats = _floats(args)
    if not floats or (use == "every" and len(floats) < 2):
        return None
    mapped = floats if use == "every" else floats[:1]
    if use == "grad":
        return wg.grad(_loss(fun), argnums=tuple(mapped)), mapped
    return fun, mapped


_LOOPED = {}
"""(name, i, use) -> the primitives that ran once per example there (each case runs once)."""


def _run(name, i, use):
    """Run case ``i`` of ``name`` batched (2 examples) and compare with the loop; returns the names of
    the primitives that ran once per example."""
    if (name, i, use) in _LOOPED:
        return _LOOPED[name, i, use]
    fun, args = TABLE[name][i]
    fun, mapped = _use(fun, args, use)
    examples = [args, tuple(a * 1.001 if j in mapped else a for j, a in enumerate(args))]
    batch = [np.stack([np.asarray(ex[j]) for ex in examples]) if j in mapped else a
             for j, a in enumerate(args)]
    in_axes = tuple(0 if j in mapped else None for j in range(len(args)))
    looped = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("always", NoBatchingRuleWarning)
        batching._WARNED.clear()  # every case warns afresh
        got = wg.vmap(fun, in_axes=in_axes)(*batch)
    for w in caught:
        if issubclass(w.category, NoBatchingRuleWarning):
            looped.append(str(w.message).split("'")[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = [fun(*ex) for ex in examples]
    got_leaves = tree_flatten(got)[0]
    want_leaves = [tree_flatten(w)[0] for w in want]
    for k, g in enumerate(got_leaves):
        np.testing.assert_allclose(np.asarray(g), np.stack([np.asarray(w[k]) for w in want_leaves]),
                                   rtol=1e-9, atol=1e-12, err_msg=f"{name}-{i} ({use}): vmap != the loop")
    _LOOPED[name, i, use] = looped
    return looped


PARAMS = [pytest.param(name, i, use, id=f"{name}-{i}-{use}")
          for name in sorted(TABLE) if name not in REFUSED for i in range(len(TABLE[name])) for use in USES
          if _use(*TABLE[name][i], use) is not None]


@pytest.mark.parametrize("name,i,use", PARAMS)
def test_every_case_batches_without_a_loop(name, i, use):
    try:
        looped = _run(name, i, use)
    except TracingError as e:
        pytest.fail(f"{name}-{i} ({use}) refused under vmap: {e}")
    unlisted = sorted(set(looped) - set(LOOPS))
    assert not unlisted, f"{name}-{i} ({use}): {unlisted} ran once per example (NoBatchingRuleWarning)"


@pytest.mark.parametrize("prim", sorted(LOOPS))
def test_listed_loops_still_loop_somewhere(prim):
    """An entry of LOOPS whose primitive batches in every case is stale: remove it."""
    seen = any(prim in _run(*p.values) for p in PARAMS)
    assert seen, f"'{prim}' now batches in every case of the rule table: remove it from LOOPS"


def test_a_loop_is_reported_as_an_error_here():
    """The sweep's detector: a primitive without a batching rule is caught (the test can fail)."""
    prim = wg.primitive(lambda x: np.sin(x))
    wg.defvjp(prim, lambda g, out, x: g * wnp.cos(x))
    TABLE["user:sin"] = [(prim, (np.linspace(0.1, 0.5, 3),))]
    try:
        assert _run("user:sin", 0, "first") == ["<lambda>"]
    finally:
        del TABLE["user:sin"]
        _LOOPED.pop(("user:sin", 0, "first"), None)
