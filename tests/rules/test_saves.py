"""Each primitive's ``saves`` declaration (what its VJP rules read) checked against its rules.

The tape keeps of a node only what its primitive declares (``wengert.engines.saving``); what it does
not keep is an ``Unsaved``, which refuses every use but its shape and dtype. Every rule-table
primitive declares ``saves`` (but those in ``UNDECLARED``, each with its reason), and has its VJP
rules (ordinary, in-place, accumulate and joint ones) run on the rule table's own sample calls, once
with everything and once with what the tape would keep, for each argument differentiated alone and
all together: a rule that reads what it did not declare raises, and the two results must agree. A
deliberately wrong declaration is caught the same way.
"""

import gc
import tracemalloc

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.rules.test_facts import _traced_calls
from tests.rules.test_rule_table import CASES, COMPOSED
from wengert.core.extend import defvjp, facts, primitive
from wengert.core.primitive import NoRuleError
from wengert.engines import saving
from wengert.engines.saving import Unsaved, UnsavedValueError, needs, saved_args
from wengert.rules import determinant as dt
from wengert.rules import linalg as la
from wengert.rules import rule_table

try:
    from wengert.scipy import integrate  # noqa: F401 - odeint joins the rule table
except ModuleNotFoundError:  # pragma: no cover - SciPy is in the test extra; its families are left out
    HAVE_SCIPY = False
else:
    HAVE_SCIPY = True


@pytest.fixture(autouse=True)
def every_array_is_pruned(monkeypatch):
    """Small arrays are kept whatever the declaration (``MIN_BYTES``): here every one is checked."""
    monkeypatch.setattr(saving, "MIN_BYTES", 0)


DECLARED = {name: prim for name, prim in rule_table().items() if prim.saves is not None}

UNDECLARED = {
    "odeint": "its rules read everything (func, y0, t, out and each of its variadic args) through the "
              "adjoint ODE, and a declaration cannot list every one of any number of arguments",
}
"""Primitives deliberately left without a ``saves`` declaration (the tape keeps everything), and why."""


def _inexact(x):
    return isinstance(x, (float, complex, np.ndarray, np.floating, np.complexfloating)) \
        and np.asarray(x).dtype.kind in "fc"


def _cotangent(out, rng):
    if type(out) is float:
        return float(rng.standard_normal())
    out = np.asarray(out)
    g = rng.standard_normal(out.shape)
    if out.dtype.kind == "c":
        g = g + 1j * rng.standard_normal(out.shape)
    return g.astype(out.dtype)


def _complex(*shape, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)


def _complex_square(*shape, seed):
    """Well-conditioned complex square matrices, distinct eigenvalues: n/2 I plus a small random part."""
    return np.eye(shape[-1]) * shape[-1] * 0.5 + 0.3 * _complex(*shape, seed=seed)


def _hermitian_pd(*shape, seed):
    m = _complex_square(*shape, seed=seed)
    return m + np.conj(np.swapaxes(m, -1, -2)) + shape[-1] * np.eye(shape[-1])


COMPLEX_LINALG = {
    "linalg.inv": [(la.inv, (_complex_square(2, 3, 3, seed=1),))],
    "linalg.solve": [(la.solve, (_complex_square(3, 3, seed=2), _complex(3, 2, seed=3)))],
    "linalg.cholesky": [(la.cholesky, (_hermitian_pd(3, 3, seed=4),))],
    "linalg.eigh_values": [(la.eigh_values, (_hermitian_pd(2, 3, 3, seed=5),))],
    "linalg.eigh_vectors": [(la.eigh_vectors, (_hermitian_pd(3, 3, seed=6),))],
    "linalg.eigvals": [(la.eigvals, (_complex_square(3, 3, seed=7),))],
    "linalg.eig_vectors": [(la.eig_vectors, (_complex_square(3, 3, seed=8),))],
    "linalg.svd_values": [(la.svd_values, (_complex(4, 3, seed=9),))],
    "linalg.svd_u": [(la.svd_u, (_complex(4, 3, seed=10),))],
    "linalg.svd_vh": [(la.svd_vh, (_complex(4, 3, seed=11),))],
    "linalg.qr_q": [(la.qr_q, (_complex(4, 3, seed=12),))],
    "linalg.qr_r": [(la.qr_r, (_complex(4, 3, seed=13),))],
    "linalg.pinv": [(la.pinv, (_complex(4, 3, seed=14),))],
    "linalg.det": [(dt.det, (_complex_square(2, 3, 3, seed=15),))],
    "linalg.adjugate": [(dt.adjugate, (_complex_square(3, 3, seed=16),))],
    "linalg.adjugate_jvp": [(dt.adjugate_jvp, (_complex_square(3, 3, seed=17), _complex(3, 3, seed=18)))],
    "linalg.slogdet_logabs": [(dt.slogdet_logabs, (_complex_square(2, 3, 3, seed=19),))],
    "linalg.slogdet_sign": [(dt.slogdet_sign, (_complex_square(2, 3, 3, seed=20),))],
}
"""Complex calls of the linear-algebra primitives, whose rules take other paths on complex matrices
(``slogdet``'s sign reads its output and the matrix only then); the rule table's cases are real."""


def _samples(name):
    """``name``'s calls in the rule table's cases, their complex versions and :data:`COMPLEX_LINALG`."""
    prim = rule_table()[name]
    found = []
    cases = CASES.get(name, []) + COMPOSED.get(f"{name} complex", []) + COMPLEX_LINALG.get(name, [])
    for fun, args in cases:
        try:
            found += _traced_calls(prim, fun, args)
        except Exception:  # noqa: BLE001 - a case the program tracer cannot take: the others serve
            continue
    return found


def _contributions(prim, args, kwargs, out, g, mask, full_out):
    """Each differentiated argument's contribution by every kind of VJP rule ``prim`` has."""
    found = []
    for j, differentiated in enumerate(mask):
        if not differentiated:
            continue
        rule = prim.vjp_rule(j)
        c = rule(g, out, *args, **kwargs)
        if prim.grad_post is not None:
            c = prim.grad_post(c, args[j])
        found.append(c)
        inplace = prim.vjp_inplace
        if inplace and j < len(inplace) and inplace[j] is not None and type(g) is np.ndarray:
            found.append(inplace[j](g.copy(), out, *args, **kwargs))
        accumulate = prim.vjp_accumulate
        if accumulate and j < len(accumulate) and accumulate[j] is not None and type(g) is np.ndarray:
            buf = np.zeros(args[j].shape, dtype=np.result_type(g, np.asarray(full_out)))
            accumulate[j](buf, g, out, *args, **kwargs)
            found.append(buf)
    joint = prim.vjp_joint  # every argument's contribution in one call (concatenate), beside its shares
    if joint is not None:
        for c, arg, differentiated in zip(joint(list(mask), g, out, *args, **kwargs), args, mask):
            if differentiated:
                found.append(c if prim.grad_post is None or type(c) is float else prim.grad_post(c, arg))
    return found


def _keeps_every_array(prim, args, kwargs):
    """Whether the declaration keeps, for every argument differentiated, every value of this call
    that the tape could leave out (arrays; numbers and options are always kept): then there is
    nothing to check on it."""
    kept = needs(prim, (object(),) * len(args))
    if kept is None:
        return True
    with np.errstate(all="ignore"):
        out = prim.fun(*args, **kwargs)
    arrays = {i for i, a in enumerate(args) if type(a) is np.ndarray}
    if type(out) is np.ndarray:
        arrays.add("out")
    return arrays <= kept


def _has_rule(prim, j):
    try:
        prim.vjp_rule(j)
    except NoRuleError:
        return False
    return True


def _value(x):
    """An argument that holds numbers (not an option such as an axis, a string or a dtype)."""
    return isinstance(x, (float, complex, np.ndarray, np.number))


def _contributions_or_error(prim, args, kwargs, out, g, mask, full_out):
    try:
        return _contributions(prim, args, kwargs, out, g, mask, full_out), None
    except UnsavedValueError:
        raise
    except Exception as e:  # noqa: BLE001 - the rule refuses this input: compared below
        return None, e


def check_declaration(prim, args, kwargs, rng, differentiated=None):
    """Run ``prim``'s VJP rules with what the tape keeps, against the rules with everything; the
    number of (argument mask) combinations checked where something was left out. Where a rule
    refuses the input with everything (``det``'s third derivative at a singular matrix), it must
    refuse it the same way with what is kept. ``differentiated`` (a set) collects the arguments
    whose rules ran (they gave a result) on this call."""
    with np.errstate(all="ignore"):
        out = prim.fun(*args, **kwargs)
    if not _inexact(out):
        return 0
    inexact = [_inexact(a) and _has_rule(prim, j) for j, a in enumerate(args)]
    masks = [tuple(k == j for k in range(len(args))) for j in range(len(args)) if inexact[j]]
    if sum(inexact) > 1:
        masks.append(tuple(inexact))
    checked = 0
    for mask in masks:
        parents = tuple(object() if m else None for m in mask)
        kept, keep_out = saved_args(prim, args, parents)
        kept_out = out if keep_out or type(out) is not np.ndarray else Unsaved(out, prim, "output")
        g = _cotangent(out, rng)
        with np.errstate(all="ignore"):
            want, refused = _contributions_or_error(prim, args, kwargs, out, g, mask, out)
            if refused is not None:
                with pytest.raises(type(refused)):
                    _contributions(prim, kept, kwargs, kept_out, g, mask, out)
                continue
            got = _contributions(prim, kept, kwargs, kept_out, g, mask, out)
        for w, h in zip(want, got):
            if w is None or h is None:  # an in-place rule that declined
                assert w is None and h is None
                continue
            np.testing.assert_allclose(np.asarray(h), np.asarray(w), rtol=1e-12, atol=1e-12, equal_nan=True)
        checked += kept is not args or kept_out is not out
        if differentiated is not None:
            differentiated.update(j for j, m in enumerate(mask) if m)
    return checked


def test_some_primitives_declare_what_they_save():
    assert {"multiply", "sin", "exp", "sum", "matmul", "getitem"} <= set(DECLARED)


def test_every_primitive_declares_what_it_saves():
    table = rule_table()
    undeclared = sorted(name for name, prim in table.items() if prim.saves is None)
    missing = [name for name in undeclared if name not in UNDECLARED]
    assert not missing, (f"primitives without a saves declaration: {missing}; declare what their VJP rules "
                         f"read with facts(prim, saves=...), or list them in UNDECLARED with the reason")
    stale = sorted(name for name in UNDECLARED if (name not in table and HAVE_SCIPY)
                   or (name in table and table[name].saves is not None))
    assert not stale, f"UNDECLARED lists {stale}, which now declare saves (or are gone): remove them"


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_declared_saves_cover_what_the_rules_read(name):
    rng = np.random.default_rng(0)
    samples = _samples(name)
    assert samples, f"no sample call of {name}: give it a rule-table case that traces"
    prim = DECLARED[name]
    differentiated = set()
    checked = sum(check_declaration(prim, args, kwargs, rng, differentiated) for args, kwargs in samples)
    nothing_to_leave_out = all(_keeps_every_array(prim, args, kwargs) for args, kwargs in samples)
    assert checked or nothing_to_leave_out, f"no sample of {name} had anything left out: not exercised"
    with_rules = {j for args, _ in samples for j, a in enumerate(args) if _value(a) and _has_rule(prim, j)}
    missed = sorted(with_rules - differentiated)
    assert not missed, f"no sample of {name} differentiates argument(s) {missed}: give it a case that does"


def _wrongly_declared():
    """x * x whose VJP reads x, declared as reading nothing."""
    prim = primitive(lambda x: np.asarray(x) * np.asarray(x))
    defvjp(prim, lambda g, out, x: 2.0 * g * x)
    return facts(prim, saves=())


def test_a_wrong_declaration_is_caught_by_the_check():
    prim = _wrongly_declared()
    with pytest.raises(UnsavedValueError, match="declares it does not read"):
        check_declaration(prim, (np.arange(3.0),), {}, np.random.default_rng(0))


def test_a_wrong_declaration_fails_loudly_in_grad():
    prim = _wrongly_declared()
    with pytest.raises(UnsavedValueError, match="saves="):
        wg.grad(lambda x: wnp.sum(prim(x)))(np.arange(3.0))


def test_an_undeclared_user_primitive_keeps_everything():
    prim = primitive(lambda x: np.asarray(x) * np.asarray(x))
    defvjp(prim, lambda g, out, x: 2.0 * g * x)
    x = np.arange(3.0)
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(prim(x)))(x), 2.0 * x)


def test_unknown_names_in_a_declaration_are_refused():
    prim = facts(primitive(lambda x, y: x * y), saves=("z",))
    defvjp(prim, lambda g, out, x, y: g * y, lambda g, out, x, y: g * x)
    with pytest.raises(ValueError, match="'z' is neither"):
        saved_args(prim, (np.ones(2), np.ones(2)), (object(), None))


def test_names_stand_for_positional_parameters():
    def scaled(x, factor):
        return x * factor
    prim = facts(primitive(scaled), saves={"x": ("factor",), "factor": ("x",)})
    kept, keep_out = saved_args(prim, (np.ones(2), np.full(2, 3.0)), (object(), None))
    assert type(kept[0]) is Unsaved and type(kept[1]) is np.ndarray and not keep_out


# -- the recording releases what is not saved ---------------------------------------------------------

def _chain(x, steps, held=None):
    for _ in range(steps):
        s = wnp.sin(x)
        if held is not None:
            held.append(s)
        x = 0.9 * s + 0.1 * x
    return x


def _peak_states(fun, x):
    gc.collect()
    tracemalloc.start()
    try:
        wg.grad(fun)(x)
        return tracemalloc.get_traced_memory()[1] / x.nbytes
    finally:
        tracemalloc.stop()


def test_the_tape_keeps_about_one_state_per_step_of_a_sine_chain():
    x = np.linspace(0.0, 1.0, 20_000)
    steps = 64  # the rule reads x for sin; 0.9 * s, 0.1 * x and + read no array
    assert _peak_states(lambda x: wnp.sum(_chain(x, steps)), x) < 1.6 * steps


def test_values_the_function_still_holds_are_not_released():
    x = np.linspace(0.0, 1.0, 7)
    steps = 80  # more than the sweep's first batch

    def f(x):
        held = []
        y = _chain(x, steps, held)
        return wnp.sum(y) + sum(wnp.sum(s * s) for s in held)  # every intermediate used afterwards

    def f_np(x):
        total = 0.0
        for _ in range(steps):
            s = np.sin(x)
            total += np.sum(s * s)
            x = 0.9 * s + 0.1 * x
        return np.sum(x) + total

    g = wg.grad(f)(x)
    eps = 1e-6
    fd = np.array([(f_np(x + eps * e) - f_np(x - eps * e)) / (2 * eps) for e in np.eye(len(x))])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_second_order_through_a_pruned_tape():
    x = np.linspace(0.1, 0.9, 5)
    v = np.linspace(1.0, 2.0, 5)
    steps = 40

    def first(x):
        return wg.grad(lambda y: wnp.sum(_chain(y, steps)))(x)

    hvp = wg.grad(lambda x: wnp.sum(first(x) * v))(x)
    eps = 1e-5
    fd = (first(x + eps * v) - first(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hvp, fd, rtol=1e-5, atol=1e-8)
