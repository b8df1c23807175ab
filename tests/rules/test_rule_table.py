"""The systematic test: every primitive in the rule table, both modes, to second order, on several
shapes including broadcasting. A primitive without an entry in CASES fails the suite.

Families beyond the core keep their cases in ``tests/rules/cases/<family>.py``, each defining a
``CASES`` dict in the same form (``name -> [(function, args), ...]``) and, optionally, ``COMPOSED``
for functions built from primitives; both are merged here."""

import importlib
import pathlib

import numpy as np
import pytest

import wengert.numpy as wnp
from tests.support.rule_helpers import R, away, binary, distinct_pair, unary
from wengert.rules import broadcasting, elementwise, indexing, products, reductions, rule_table, shape
from wengert.testing import check_grads

E = elementwise
CASES = {
    "add": binary(E.add),
    "subtract": binary(E.subtract),
    "multiply": binary(E.multiply),
    "true_divide": binary(E.true_divide, lo2=0.5, hi2=2.0),
    "power": binary(E.power, lo=0.5, hi=2.0) + [(lambda x: E.power(x, 3), (R(3),)),
                                                 (lambda y: E.power(2.0, y), (R(3),))],
    "negative": unary(E.negative),
    "positive": unary(E.positive),
    "maximum": [(E.maximum, distinct_pair(a, b)) for a, b in [((3,), (3,)), ((2, 3), (3,)), ((), ())]],
    "minimum": [(E.minimum, distinct_pair(a, b)) for a, b in [((3,), (3,)), ((2, 3), (3,)), ((), ())]],
    "arctan2": binary(E.arctan2, lo=0.2, hi=1.0),
    "hypot": binary(E.hypot, lo=0.2, hi=1.0),
    "absolute": unary(E.absolute, make=away),
    "sign": unary(E.sign, make=away),
    "sqrt": unary(E.sqrt, 0.5, 2.0),
    "cbrt": unary(E.cbrt, 0.5, 2.0),
    "exp": unary(E.exp),
    "exp2": unary(E.exp2),
    "log": unary(E.log, 0.5, 2.0),
    "log2": unary(E.log2, 0.5, 2.0),
    "log10": unary(E.log10, 0.5, 2.0),
    "log1p": unary(E.log1p, -0.5, 1.0),
    "expm1": unary(E.expm1),
    "sin": unary(E.sin),
    "cos": unary(E.cos),
    "tan": unary(E.tan),
    "arcsin": unary(E.arcsin, -0.8, 0.8),
    "arccos": unary(E.arccos, -0.8, 0.8),
    "arctan": unary(E.arctan),
    "sinh": unary(E.sinh),
    "cosh": unary(E.cosh),
    "tanh": unary(E.tanh),
    "arcsinh": unary(E.arcsinh),
    "arccosh": unary(E.arccosh, 1.5, 3.0),
    "arctanh": unary(E.arctanh, -0.8, 0.8),
    "square": unary(E.square),
    "reciprocal": unary(E.reciprocal, 0.5, 2.0),
    "floor": unary(E.floor, make=away),
    "ceil": unary(E.ceil, make=away),
    "rint": unary(E.rint, make=away),
    "trunc": unary(E.trunc, make=away),
    "tie_select": [
        (lambda g: E.tie_select(g, np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 1.0])), (R(3),)),
        (lambda g: E.tie_select(g, np.array([[1.0], [0.0]]), 0.0), (R(2, 3),)),
    ],
    "where": [
        (lambda x, y: E.where(np.array([True, False, True]), x, y), (R(3), R(3))),
        (lambda x, y: E.where(np.array([[True], [False]]), x, y), (R(2, 3), R(3))),
        (lambda x: E.where(np.array([True, False]), x, 0.0), (R(2),)),
    ],
    "clip": [
        (lambda a: E.clip(a, -0.5, 0.5), (np.array([-0.9, -0.2, 0.3, 0.8]),)),
        (lambda a, lo, hi: E.clip(a, lo, hi), (np.array([-0.9, -0.2, 0.3, 0.8]), -0.5, np.full(4, 0.5))),
        (lambda a: E.clip(a, None, 0.0), (np.array([-0.9, 0.3]),)),
    ],
    "broadcast_to": [
        (lambda x: broadcasting.broadcast_to(x, (2, 3)), (R(3),)),
        (lambda x: broadcasting.broadcast_to(x, (4, 2, 3)), (R(2, 1),)),
        (lambda x: broadcasting.broadcast_to(x, (3,)), (R(),)),
    ],
    "sum": [
        (lambda x: reductions.sum(x), (R(2, 3),)),
        (lambda x: reductions.sum(x, axis=0), (R(2, 3),)),
        (lambda x: reductions.sum(x, axis=(0, 2), keepdims=True), (R(2, 3, 2),)),
        (lambda x: reductions.sum(x, axis=-1), (R(4),)),
    ],
    "prod": [
        (lambda x: reductions.prod(x), (R(2, 3, lo=0.5, hi=1.5),)),
        (lambda x: reductions.prod(x, axis=1, keepdims=True), (R(2, 3, lo=0.5, hi=1.5),)),
        (lambda x: reductions.prod(x, axis=0), (np.array([[0.0, 2.0], [3.0, 0.5]]),)),
        (lambda x: reductions.prod(x, axis=0), (np.array([[0.0, 2.0], [0.0, 0.5], [3.0, 0.0]]),)),
        (lambda x: reductions.prod(x), (np.array([0.0, 2.0, 0.0, 0.5, 0.0]),)),
    ],
    "max": [
        (lambda x: reductions.amax(x), (R(2, 3),)),
        (lambda x: reductions.amax(x, axis=0), (R(2, 3),)),
        (lambda x: reductions.amax(x, axis=1, keepdims=True), (R(3, 4),)),
    ],
    "min": [
        (lambda x: reductions.amin(x), (R(2, 3),)),
        (lambda x: reductions.amin(x, axis=(0, 1)), (R(2, 3, 2),)),
    ],
    "reshape": [
        (lambda x: shape.reshape(x, (3, 2)), (R(2, 3),)),
        (lambda x: shape.reshape(x, (-1,)), (R(2, 2, 2),)),
        (lambda x: shape.reshape(x, (1, 1)), (R(),)),
    ],
    "transpose": [
        (lambda x: shape.transpose(x), (R(2, 3),)),
        (lambda x: shape.transpose(x, (1, 2, 0)), (R(2, 3, 4),)),
    ],
    "astype": [
        (lambda x: shape.astype(x, np.float64) * 2.0, (R(3),)),
    ],
    "concatenate": [
        (lambda a, b: shape.concatenate(a, b, axis=0), (R(2, 3), R(1, 3))),
        (lambda a, b, c: shape.concatenate(a, b, c, axis=1), (R(2, 1), R(2, 2), R(2, 3))),
    ],
    "stack": [
        (lambda a, b: shape.stack(a, b, axis=0), (R(2, 3), R(2, 3))),
        (lambda a, b, c: shape.stack(a, b, c, axis=-1), (R(2), R(2), R(2))),
        (lambda a, b: shape.stack(a, b, axis=0) * 2.0, (R(), R())),
    ],
    "repeat": [
        (lambda x: shape.repeat(x, 2), (R(2, 2),)),
        (lambda x: shape.repeat(x, [1, 0, 2], axis=0), (R(3, 2),)),
        (lambda x: shape.repeat(x, 3, axis=-1), (R(2, 2),)),
    ],
    "sum_repeats": [
        (lambda g: shape.sum_repeats(g, 2, 0, 3), (R(6, 2),)),
        (lambda g: shape.sum_repeats(g, np.array([1, 0, 2]), 1, 3), (R(2, 3),)),
    ],
    "getitem": [
        (lambda x: indexing.getitem(x, 1), (R(3),)),
        (lambda x: indexing.getitem(x, (slice(None), slice(0, 2))), (R(2, 3),)),
        (lambda x: indexing.getitem(x, (Ellipsis, None, 0)), (R(2, 3),)),
        (lambda x: indexing.getitem(x, np.array([0, 2, 0, 0])), (R(3),)),
        (lambda x: indexing.getitem(x, (np.array([0, 1, 1]), np.array([2, 0, 2]))), (R(2, 3),)),
        (lambda x: indexing.getitem(x, np.array([[True, False, True], [False, True, True]])), (R(2, 3),)),
    ],
    "untake": [
        (lambda g: indexing.untake(g, np.array([0, 2, 0]), (4,)), (R(3),)),
        (lambda g: indexing.untake(g, (slice(None), 1), (2, 3)), (R(2),)),
    ],
    "matmul": [
        (products.matmul, (R(2, 3), R(3, 4))),
        (products.matmul, (R(3), R(3))),
        (products.matmul, (R(2, 3), R(3))),
        (products.matmul, (R(3), R(3, 2))),
        (products.matmul, (R(4, 2, 3), R(3, 2))),
        (products.matmul, (R(2, 1, 2, 3), R(3, 3, 2))),
        (products.matmul, (R(3), R(2, 3, 4))),
    ],
    "tensordot": [
        (lambda a, b: products.tensordot(a, b, 1), (R(2, 3), R(3, 4))),
        (lambda a, b: products.tensordot(a, b, ([0, 2], [2, 0])), (R(2, 3, 4), R(4, 5, 2))),
        (lambda a, b: products.tensordot(a, b, 0), (R(2), R(3))),
        (lambda a, b: products.tensordot(a, b, 2), (R(2, 3, 4), R(3, 4))),
    ],
    "einsum": [
        (lambda a, b: products.einsum("ij,jk->ik", a, b), (R(2, 3), R(3, 4))),
        (lambda a, b: products.einsum("ij,ij->i", a, b), (R(2, 3), R(2, 3))),
        (lambda a: products.einsum("ijk->", a), (R(2, 3, 2),)),
        (lambda a, b: products.einsum("i,j", a, b), (R(2), R(3))),
        (lambda a, b: products.einsum("...ij,...jk->...ik", a, b), (R(5, 2, 3), R(3, 4))),
        (lambda a, b, c: products.einsum("ab,bc,cd->ad", a, b, c), (R(2, 3), R(3, 2), R(2, 2))),
        (lambda a, b: products.einsum("ij,k->ik", a, b), (R(2, 3), R(4))),
    ],
}


def _merge_case_modules():
    for path in sorted((pathlib.Path(__file__).parent / "cases").glob("[!_]*.py")):
        module = importlib.import_module(f"tests.rules.cases.{path.stem}")
        for table, extra in ((CASES, getattr(module, "CASES", {})),
                             (COMPOSED, getattr(module, "COMPOSED", {}))):
            clash = set(table) & set(extra)
            if clash:
                raise ValueError(f"{path.name} repeats cases already defined: {sorted(clash)}")
            table.update(extra)


COMPOSED = {
    "mean": [(lambda x: wnp.mean(x, axis=0), (R(3, 2),)), (wnp.mean, (R(4),))],
    "var": [(lambda x: wnp.var(x, axis=1, ddof=1), (R(2, 4),)), (wnp.var, (R(5),))],
    "std": [(lambda x: wnp.std(x, axis=0, keepdims=True), (R(4, 2),))],
    "dot": [(wnp.dot, (R(2, 3), R(3))), (wnp.dot, (R(2, 3, 4), R(3, 4, 2))), (wnp.dot, (R(), R(3)))],
    "inner": [(wnp.inner, (R(2, 3), R(4, 3)))],
    "outer": [(wnp.outer, (R(3), R(2, 2)))],
    "expand_dims": [(lambda x: wnp.expand_dims(x, (0, 2)), (R(2, 3),))],
    "squeeze": [(lambda x: wnp.squeeze(x, 1), (R(2, 1, 3),))],
    "swapaxes": [(lambda x: wnp.swapaxes(x, 0, 2), (R(2, 3, 4),))],
    "moveaxis": [(lambda x: wnp.moveaxis(x, 0, -1), (R(2, 3, 4),))],
    "stack": [(lambda a, b: wnp.stack([a, b], axis=1), (R(2, 3), R(2, 3)))],
    "split": [(lambda x: wnp.split(x, 2, axis=1)[1], (R(2, 4),))],
    "tile": [(lambda x: wnp.tile(x, (2, 1, 3)), (R(2, 3),)), (lambda x: wnp.tile(x, 2), (R(3),))],
    "flip": [(lambda x: wnp.flip(x, 0), (R(3, 2),)), (wnp.flip, (R(2, 3),))],
    "ravel": [(wnp.ravel, (R(2, 3),))],
    "array": [(lambda x, y: wnp.array([[x, y], [y, x]]), (R(), R()))],
    "hstack": [(lambda a, b: wnp.hstack([a, b]), (R(2), R(3)))],
    "vstack": [(lambda a, b: wnp.vstack([a, b]), (R(3), R(2, 3)))],
}
_merge_case_modules()
CASE_LIST = [pytest.param(name, i, id=f"{name}-{i}") for name in sorted(CASES)
             for i in range(len(CASES[name]))]
COMPOSED_LIST = [pytest.param(name, i, id=f"{name}-{i}") for name in sorted(COMPOSED)
                 for i in range(len(COMPOSED[name]))]


def test_every_primitive_has_cases():
    missing = sorted(set(rule_table()) - set(CASES))
    assert not missing, f"primitives without an entry in the systematic test: {missing}"
    unknown = sorted(set(CASES) - set(rule_table()))
    assert not unknown, f"entries for primitives that do not exist: {unknown}"


@pytest.mark.parametrize("name,i", CASE_LIST)
def test_primitive_gradients(name, i):
    fun, args = CASES[name][i]
    check_grads(fun, *args, modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("name,i", COMPOSED_LIST)
def test_composed_function_gradients(name, i):
    fun, args = COMPOSED[name][i]
    check_grads(fun, *args, modes=("fwd", "rev"), order=2)


def test_concatenations_of_many_pieces_differentiate_in_both_modes():
    # the joint tangent rule and the cached offsets: every piece gets its own slice, in both modes
    import wengert as wg

    x = np.linspace(0.1, 1.0, 300)

    def f(v):
        return wnp.sum(wnp.stack([v[i] * v[(i + 1) % 300] for i in range(300)]) ** 2)

    y = x * np.roll(x, -1)
    want = np.zeros(300)
    want += 2 * y * np.roll(x, -1)
    want += np.roll(2 * y * x, 1)
    np.testing.assert_allclose(wg.grad(f)(x), want, rtol=1e-12)
    t = np.cos(np.arange(300.0))
    np.testing.assert_allclose(wg.jvp(f, (x,), (t,))[1], want @ t, rtol=1e-12)
    a, b = R(2, 3), R(4, 3)
    check_grads(lambda a, b: shape.concatenate(a, b, a, axis=0), a, b, modes=("fwd", "rev"), order=2)


@pytest.mark.parametrize("build", ["stack", "array", "concatenate"])
def test_many_pieces_take_one_joint_rule_call_per_mode(build, monkeypatch):
    """Stacking or concatenating N traced pieces differentiates in time linear in N: the backward
    pass calls the joint rule once (not the per-argument rule N times, each given all N pieces),
    and forward mode the joint tangent rule once; the values still match the formula."""
    import wengert as wg

    prim = {"stack": shape.stack, "array": shape.stack, "concatenate": shape.concatenate}[build]
    calls = {"vjp": 0, "jvp": 0, "per-argument": 0}
    vjp_joint, jvp_joint, per_arg = prim.vjp_joint, prim.jvp_joint, prim.vjp_rule

    def counted(key, rule):
        def wrapped(*a, **k):
            calls[key] += 1
            return rule(*a, **k)
        return wrapped

    monkeypatch.setattr(prim, "vjp_joint", counted("vjp", vjp_joint))
    monkeypatch.setattr(prim, "jvp_joint", counted("jvp", jvp_joint))
    monkeypatch.setattr(prim, "vjp_rule", lambda i: counted("per-argument", per_arg(i)))
    n = 500
    x = np.linspace(0.1, 1.0, n)
    make = {"stack": lambda ps: wnp.stack(ps), "array": lambda ps: wnp.array(ps),
            "concatenate": lambda ps: wnp.concatenate([wnp.reshape(p, (1,)) for p in ps])}[build]

    def f(v):
        return wnp.sum(make([v[i] * v[i] for i in range(n)]) ** 2)

    np.testing.assert_allclose(wg.grad(f)(x), 4 * x ** 3, rtol=1e-12)
    t = np.cos(np.arange(float(n)))
    np.testing.assert_allclose(wg.jvp(f, (x,), (t,))[1], (4 * x ** 3) @ t, rtol=1e-12)
    assert calls == {"vjp": 1, "jvp": 1, "per-argument": 0}, calls
