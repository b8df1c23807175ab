"""Every engine against the others on the same programs (DESIGN.md): each case of the systematic
rule-table test (``CASES`` and ``COMPOSED`` of ``tests/rules/test_rule_table.py``, with every merged
``tests/rules/cases/`` family) is run through the program transformer and compared with the tape and
the dual numbers:

- ``wg.compile(f)(*args)`` equals ``f(*args)``;
- ``wg.compile(h).grad(all)`` equals ``wg.grad(h, all)`` (the tape), where ``h`` reduces ``f``'s
  output(s) to a real scalar with fixed random weights, ``Re(sum(w * f(x)))``;
- the JVP program (``Program.from_trace(f).jvp()``) equals ``wg.jvp`` (dual numbers);
- the generated gradient source runs in a fresh namespace: it imports what it needs itself.

Only the float (and complex) arguments are differentiated: the others (index arrays, integers) are
closed over, as constants of the traced programs. Agreement is to rounding: 1e-10 relative to the
largest entry of the reference (``close``)."""

import functools

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.rules import test_rule_table
from wengert.api.tree import tree_flatten
from wengert.program import Program
from wengert.program.tracing import TracingError

RTOL = 1e-10

_LSTSQ = ("lstsq returns its rank, and residuals whose shape depends on that rank: data, which a "
          "traced program cannot branch on")
EXCLUDED = {f"composed:linalg.lstsq-{i}": _LSTSQ for i in range(3)}
"""Cases the program transformer cannot run, ``"table:name-i" -> reason``; each one is checked to
raise a clear ``TracingError`` naming the function (``test_excluded_cases_raise_a_clear_error``)."""

SOURCE_EXCLUDED = {
    "primitive:odeint-0": "odeint's vector field is a Python function (the user's, and the adjoint "
                          "system wengert builds around it): no source can spell it, so the compiled "
                          "function is given it by wengert, and the source names it in a comment",
}
"""Cases whose generated source cannot run on its own (its values and derivatives are checked all
the same); ``test_sources_that_need_wengert_say_so`` checks that the source says what it lacks."""

TABLES = {"primitive": test_rule_table.CASES, "composed": test_rule_table.COMPOSED}
ALL = [(table, name, i) for table, cases in TABLES.items() for name in sorted(cases)
       for i in range(len(cases[name]))]
IDS = [f"{table}:{name}-{i}" for table, name, i in ALL]
PARAMS = [pytest.param(table, name, i, id=key) for (table, name, i), key in zip(ALL, IDS)
          if key not in EXCLUDED]


def close(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-300)
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= RTOL * scale, f"{what}: off by {err:.3g} (scale {scale:.3g})\n{got}\n{want}"


def close_trees(got, want, what):
    got_leaves, got_tree = tree_flatten(got)
    want_leaves, want_tree = tree_flatten(want)
    assert got_tree == want_tree, f"{what}: structure {got_tree}, expected {want_tree}"
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        close(g, w, f"{what}[{k}]")


def _differentiable(a):
    leaves = tree_flatten(a)[0]
    return bool(leaves) and all(
        isinstance(x, (float, complex, np.ndarray, np.generic)) and not isinstance(x, bool)
        and np.asarray(x).dtype.kind in "fc" for x in leaves)


class Case:
    """One case: ``fd`` is the function of its differentiable arguments ``dargs`` only (the others
    closed over); ``h`` is ``fd`` reduced to a real scalar with fixed random weights."""

    def __init__(self, table, name, i):
        fun, args = TABLES[table][name][i]
        self.key = f"{table}:{name}-{i}"
        self.slots = [k for k, a in enumerate(args) if _differentiable(a)]
        self.dargs = tuple(args[k] for k in self.slots)

        def fd(*dargs):
            full = list(args)
            for k, a in zip(self.slots, dargs):
                full[k] = a
            return fun(*full)

        self.fd = fd
        with np.errstate(all="ignore"):
            self.want = fd(*self.dargs)
        rng = np.random.default_rng(sum(map(ord, self.key)))
        leaves = tree_flatten(self.want)[0]
        self.weights = [rng.standard_normal(np.shape(x)) if np.asarray(x).dtype.kind in "fc" else None
                        for x in leaves]
        self.argnums = tuple(range(len(self.dargs)))

        def h(*dargs):
            total = 0.0
            for w, leaf in zip(self.weights, tree_flatten(fd(*dargs))[0]):
                if w is not None:
                    total = total + wnp.real(wnp.sum(w * leaf))
            return total

        self.h = h
        self.has_grad = bool(self.dargs) and any(w is not None for w in self.weights)

    @functools.cached_property
    def compiled_grad(self):
        return wg.compile(self.h).grad(self.argnums)

    @functools.cached_property
    def tape_grad(self):
        return wg.grad(self.h, self.argnums)(*self.dargs)

    def tangents(self):
        rng = np.random.default_rng(1 + sum(map(ord, self.key)))
        out = []
        for a in self.dargs:
            a = np.asarray(a)
            t = rng.standard_normal(a.shape)
            if a.dtype.kind == "c":
                t = t + 1j * rng.standard_normal(a.shape)
            t = t.astype(a.dtype)
            out.append(t.item() if isinstance(self.dargs[len(out)], (float, complex)) else t)
        return tuple(out)


@functools.lru_cache(maxsize=None)
def case(table, name, i):
    return Case(table, name, i)


def test_every_case_is_walked():
    assert len(ALL) == sum(len(v) for t in TABLES.values() for v in t.values())
    assert set(EXCLUDED) <= set(IDS), "exclusions name cases that no longer exist"
    assert len(PARAMS) + len(EXCLUDED) == len(ALL)


@pytest.mark.parametrize("table,name,i", PARAMS)
def test_compiled_value_equals_the_direct_call(table, name, i):
    c = case(table, name, i)
    with np.errstate(all="ignore"):
        got = wg.compile(c.fd)(*c.dargs)
    close_trees(got, c.want, "value")


@pytest.mark.parametrize("table,name,i", PARAMS)
def test_compiled_gradient_equals_the_tape(table, name, i):
    c = case(table, name, i)
    if not c.has_grad:
        pytest.skip("no differentiable argument or output")
    close_trees(c.compiled_grad(*c.dargs), c.tape_grad, "gradient")


@pytest.mark.parametrize("table,name,i", PARAMS)
def test_jvp_program_equals_dual_numbers(table, name, i):
    c = case(table, name, i)
    if not c.dargs:
        pytest.skip("no differentiable argument")
    tangents = c.tangents()
    out, t = Program.from_trace(c.fd, *c.dargs).jvp()(*c.dargs, tangents)
    want_out, want_t = wg.jvp(c.fd, c.dargs, tangents)
    close_trees(out, want_out, "JVP value")
    close_trees(t, want_t, "JVP tangent")


@pytest.mark.parametrize("table,name,i", [p for p in PARAMS if p.id not in SOURCE_EXCLUDED])
def test_generated_gradient_source_runs_on_its_own(table, name, i):
    c = case(table, name, i)
    if not c.has_grad:
        pytest.skip("no differentiable argument or output")
    source = c.compiled_grad.source(*c.dargs)
    program = c.compiled_grad.program(*c.dargs)
    assert "supplied by wengert" not in source, source
    namespace = {}
    exec(compile(source, f"<{c.key} gradient>", "exec"), namespace)  # noqa: S102 - a fresh namespace
    got = namespace[program.name](*program.flat_inputs(c.dargs))
    got = got if isinstance(got, tuple) else (got,)
    close_trees(got, tuple(tree_flatten(c.tape_grad)[0]), "gradient from the source alone")


def _split(key):
    table, rest = key.split(":")
    name, i = rest.rsplit("-", 1)
    return table, name, int(i)


@pytest.mark.parametrize("key", sorted(EXCLUDED))
def test_excluded_cases_raise_a_clear_error(key):
    c = case(*_split(key))
    function = c.key.split(":")[1].rsplit("-", 1)[0]
    for run in (lambda: wg.compile(c.fd)(*c.dargs), lambda: wg.compile(c.h).grad(c.argnums)(*c.dargs)):
        with pytest.raises(TracingError, match=f"{function}.*cannot be traced.*wg.grad"):
            run()
    np.testing.assert_allclose(wg.grad(c.h, c.argnums)(*c.dargs)[0], c.tape_grad[0])  # the tape can


@pytest.mark.parametrize("key", sorted(SOURCE_EXCLUDED))
def test_sources_that_need_wengert_say_so(key):
    c = case(*_split(key))
    source = c.compiled_grad.source(*c.dargs)
    program = c.compiled_grad.program(*c.dargs)
    supplied = [line for line in source.splitlines() if "supplied by wengert" in line]
    assert supplied, source
    with pytest.raises(NameError):  # what the comment names is all that is missing
        exec(source, namespace := {})  # noqa: S102
        namespace[program.name](*program.flat_inputs(c.dargs))
    close_trees(c.compiled_grad(*c.dargs), c.tape_grad, "gradient")


# -- the integration bugs that motivated this file, as plain regression tests ----------------------

def test_inverse_of_a_matrix_that_ones_would_make_singular():
    a = np.random.default_rng(0).standard_normal((4, 4)) + 4 * np.eye(4)
    f = lambda a: wnp.sum(wnp.linalg.inv(a))  # noqa: E731
    close(wg.compile(f).grad()(a), wg.grad(f)(a), "inv gradient")
    # independent: d sum(inv(A)) / dA = -inv(A).T @ ones @ inv(A).T
    inv = np.linalg.inv(a)
    close(wg.compile(f).grad()(a), -inv.T @ np.ones((4, 4)) @ inv.T, "inv gradient by hand")
    cached = wg.compile(f).program(a)  # keeps no caller data: deriving it again uses placeholders
    assert cached.examples == {}
    close(cached.grad()(a), -inv.T @ np.ones((4, 4)) @ inv.T, "gradient of the cached program")


def test_fft_in_generated_source_is_imported():
    f = lambda x: wnp.sum(wnp.abs(wnp.fft.rfft(x)) ** 2)  # noqa: E731
    x = np.random.default_rng(1).standard_normal(8)
    compiled = wg.compile(f).grad()
    close(compiled(x), wg.grad(f)(x), "rfft gradient")
    assert "from wengert.rules import fft as _wengert_rules_fft" in compiled.source(x)


def test_python_sum_of_indexed_elements():
    f = lambda v: sum(v[i] * v[i] for i in range(5))  # noqa: E731
    v = np.arange(5.0)
    close(wg.compile(f).grad()(v), 2 * v, "sum of squares gradient")


def test_a_full_factor_under_tracing_is_a_clear_error():
    a = np.random.default_rng(2).standard_normal((4, 3))
    f = lambda a: wnp.sum(wnp.linalg.qr(a, mode="complete").Q[:, :3] ** 3)  # noqa: E731
    assert np.all(np.isfinite(wg.grad(f)(a)))  # the tape checks the data, and can
    with pytest.raises(TracingError, match=r"linalg.qr_q.*qr: the extra columns.*mode='reduced'"):
        wg.compile(f).grad()(a)


def test_assignment_under_tracing_matches_the_tape():
    def f(x):
        y = x * 1.0
        y[1] = 3.0 * x[0]
        y[np.array([0, 2])] = y[np.array([2, 0])] ** 2
        y *= x
        y = y.at[np.array([0, 0])].add(x[2])  # functional updates, and np.add.at in place
        np.add.at(y, np.array([1, 1]), x[0])
        a, b, c = y  # iteration: the int-index fast path
        return wnp.sum(y * y) + a * b * c

    x = np.array([1.0, 2.0, 3.0])
    want_value, want_grad = wg.value_and_grad(f)(x.copy())  # .at needs a traced x: the tape's value
    close(wg.compile(f)(x), want_value, "value")
    close(wg.compile(f).grad()(x), want_grad, "gradient")
