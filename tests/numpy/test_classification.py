"""Every public function of NumPy is classified in wengert.numpy._classification, and each class
keeps its promise: a differentiable name has rule-table cases, a zero-derivative name really has
zero slope, an integer-valued name returns no floats, and an unsupported name given a traced value
raises an error naming it (through wengert.numpy and through plain NumPy's dispatch)."""

import re
import types
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from tests.rules import test_rule_table
from wengert.numpy import _classification as table
from wengert.numpy._dispatch import UnsupportedNumpyFunction

MODULES = {"numpy": np, "numpy.linalg": np.linalg, "numpy.fft": np.fft}
OURS = {"numpy": wnp, "numpy.linalg": wnp.linalg, "numpy.fft": wnp.fft}


def public_functions(module):
    """NumPy's public callables: private names, submodules, classes and types (dtypes, errstate,
    vectorize, ...) and non-callable constants (pi, newaxis, ...) are left out, each explicitly."""
    found = []
    for name in dir(module):
        value = getattr(module, name)
        if name.startswith("_"):
            continue  # private
        if isinstance(value, types.ModuleType):
            continue  # submodule: numpy.linalg and numpy.fft are enumerated on their own
        if isinstance(value, type):
            continue  # classes and scalar types: np.float64, np.errstate, np.vectorize, ...
        if not callable(value):
            continue  # constants: np.pi, np.inf, np.newaxis, ...
        found.append(name)
    return found


@pytest.mark.parametrize("namespace", sorted(MODULES))
def test_every_public_numpy_function_is_classified(namespace):
    missing = [n for n in public_functions(MODULES[namespace]) if table.entry(namespace, n) is None]
    assert not missing, (f"{namespace} names not classified in wengert.numpy._classification "
                         f"(differentiable, zero derivative, integer-valued or unsupported): {missing}")


def test_the_table_classifies_only_functions_numpy_has_and_is_internally_consistent():
    for namespace, module in MODULES.items():
        for name, entry in table.TABLE[namespace].items():
            assert callable(getattr(module, name, None)), f"{namespace}.{name}: not in this NumPy"
            assert entry.kind in (table.DIFFERENTIABLE, table.ZERO, table.INTEGER, table.UNSUPPORTED)
            if entry.kind in (table.ZERO, table.UNSUPPORTED):
                assert entry.note, f"{namespace}.{name}: say why (zero) or what to do (unsupported)"
            if entry.alias_of is not None:
                target = table.entry(namespace, entry.alias_of)
                assert target is not None and target.kind == entry.kind and target.alias_of is None


@pytest.mark.parametrize("namespace", sorted(MODULES))
def test_supported_names_exist_in_wengert_and_unsupported_ones_say_what_to_do(namespace):
    ours = OURS[namespace]
    for name, entry in table.TABLE[namespace].items():
        if entry.kind != table.UNSUPPORTED or namespace == "numpy":
            assert callable(getattr(ours, name)), f"wengert {namespace}.{name}"
            if entry.alias_of is not None:
                assert getattr(ours, name) is getattr(ours, entry.alias_of)
        else:
            note = re.escape(entry.note)
            with pytest.raises(AttributeError, match=rf"{namespace}\.{name} has no .*{note}"):
                getattr(ours, name)


def test_every_classified_numpy_name_exists_and_unsupported_ones_serve_plain_values():
    """Code written for NumPy runs unchanged on plain values: every classified name of numpy is in
    wengert.numpy; the unsupported ones are NumPy's own functions, refusing traced values only."""
    assert set(table.PLAIN_VALUES_ONLY) == set(table.names("numpy", table.UNSUPPORTED))
    for name in table.PLAIN_VALUES_ONLY:
        assert getattr(wnp, name).__name__ == name
    np.testing.assert_array_equal(wnp.unique(np.array([2, 1, 2])), [1, 2])
    np.testing.assert_allclose(wnp.cov(np.array([[1.0, 2.0, 4.0]])), np.cov(np.array([[1.0, 2.0, 4.0]])))
    with wnp.errstate(divide="ignore"):
        assert wnp.geterr()["divide"] == "ignore"
    old = wnp.seterr(over="ignore")
    assert np.geterr()["over"] == "ignore"
    wnp.seterr(**old)
    with pytest.raises(UnsupportedNumpyFunction, match=r"numpy\.cov was called on a traced"):
        wg.grad(lambda x: wnp.sum(wnp.cov(x)))(np.array([[1.0, 2.0, 4.0]]))


def test_public_lists_are_the_tables():
    assert set(wnp.DIFFERENTIABLE) == {n for n in table.names("numpy", table.DIFFERENTIABLE)} | {
        "index_update", "index_add"}
    assert set(wnp.NOT_DIFFERENTIABLE) == set(table.names("numpy", table.ZERO, table.INTEGER))
    assert len(wnp.DIFFERENTIABLE) == len(set(wnp.DIFFERENTIABLE))
    assert set(wnp.linalg.DIFFERENTIABLE) == set(table.names("numpy.linalg", table.DIFFERENTIABLE))
    assert set(wnp.fft.__all__) == set(table.names("numpy.fft", table.DIFFERENTIABLE, table.ZERO,
                                                   table.INTEGER))


# -- differentiable: every name reaches the systematic rule-table test --------------------------------

COVERED = set(test_rule_table.CASES) | set(test_rule_table.COMPOSED)
PREFIX = {"numpy": "", "numpy.linalg": "linalg.", "numpy.fft": "fft."}


def _covered(namespace, name):
    target = table.entry(namespace, name).alias_of or name
    fun = getattr(OURS[namespace], target)
    prim_name = getattr(getattr(fun, "primitive", fun), "__name__", None)
    return bool({PREFIX[namespace] + target, prim_name, PREFIX[namespace] + str(prim_name)} & COVERED)


@pytest.mark.parametrize("namespace", sorted(MODULES))
def test_every_differentiable_name_is_in_the_rule_table_tests(namespace):
    missing = [n for n in table.names(namespace, table.DIFFERENTIABLE) if not _covered(namespace, n)]
    assert not missing, (f"differentiable {namespace} names with no case in tests/rules/test_rule_table.py "
                         f"or tests/rules/cases/*.py: {missing}")


# -- zero derivative: the slope is zero at random points ----------------------------------------------

rng = np.random.default_rng(7)


def _away(n=5):
    """Values away from integers and from 0 (where rounding functions jump)."""
    return rng.integers(-4, 4, n) + rng.uniform(0.2, 0.8, n)


ZERO_SAMPLES = {
    # name -> (function of (module, *float arrays), float arrays): differentiated in every argument
    "floor": (lambda m, x: m.floor(x), (_away(),)),
    "ceil": (lambda m, x: m.ceil(x), (_away(),)),
    "rint": (lambda m, x: m.rint(x), (_away(),)),
    "trunc": (lambda m, x: m.trunc(x), (_away(),)),
    "fix": (lambda m, x: m.fix(x), (_away(),)),
    "round": (lambda m, x: m.round(x, 1), (_away() / 10 + 0.003,)),
    "around": (lambda m, x: m.around(x), (_away(),)),
    "sign": (lambda m, x: m.sign(x), (_away(),)),
    "floor_divide": (lambda m, x, y: m.floor_divide(x, y), (_away() * 3, rng.uniform(0.9, 1.1, 5))),
    "heaviside": (lambda m, x, h: m.heaviside(x, h), (_away(), rng.uniform(0, 1, 5))),
    "spacing": (lambda m, x: m.spacing(x), (rng.uniform(1.1, 1.9, 5),)),
    "zeros_like": (lambda m, x: m.zeros_like(x), (_away(),)),
    "ones_like": (lambda m, x: m.ones_like(x), (_away(),)),
    "empty_like": (lambda m, x: m.empty_like(x).shape == x.shape, (_away(),)),
}
"""Names whose arguments are only integers and shapes (zeros, eye, hanning, ...) have no float to
perturb; their reason must say they are constants built from them."""


def _numeric_slopes(fun, args, h=1e-6):
    slopes = []
    for i, a in enumerate(args):
        for j in range(a.size):
            up, down = [x.copy() for x in args], [x.copy() for x in args]
            up[i].flat[j] += h
            down[i].flat[j] -= h
            slopes.append((np.asarray(fun(np, *up), float) - np.asarray(fun(np, *down), float)) / (2 * h))
    return np.array(slopes)


@pytest.mark.parametrize("name", table.names("numpy", table.ZERO))
def test_zero_derivative_names_have_zero_slope(name):
    if name not in ZERO_SAMPLES:
        assert table.entry("numpy", name).note.startswith("a constant built from integers"), (
            f"numpy.{name} is classified as having a zero derivative: add a sample to ZERO_SAMPLES")
        return
    fun, args = ZERO_SAMPLES[name]
    assert np.all(_numeric_slopes(fun, args) == 0), f"numpy.{name} has a slope: it is not zero-derivative"
    argnums = tuple(range(len(args)))
    grads = wg.grad(lambda *a: wnp.sum(wnp.asarray(fun(wnp, *a), dtype=float)), argnums)(*args)
    assert all(np.all(np.asarray(g) == 0) for g in grads)
    if name != "empty_like":
        np.testing.assert_array_equal(fun(wnp, *args), fun(np, *args))


def test_a_function_with_a_slope_would_fail_the_zero_slope_check():
    assert np.any(_numeric_slopes(lambda m, x, y: m.remainder(x, y), (_away() * 3, np.full(5, 1.0))) != 0)


# -- integer-valued: no float comes out ---------------------------------------------------------------

def _takes_floats(ufunc):
    return any(t.split("->")[0] == "d" * ufunc.nin for t in ufunc.types)


INTEGER_UFUNCS = [n for n in table.names("numpy", table.INTEGER)
                  if isinstance(getattr(np, n, None), np.ufunc) and _takes_floats(getattr(np, n))]


@pytest.mark.parametrize("name", INTEGER_UFUNCS)
def test_integer_valued_ufuncs_return_no_floats_on_traced_values(name):
    ufunc, seen = getattr(np, name), []

    def f(v):
        out = ufunc(*(v,) * ufunc.nin)  # plain NumPy, dispatched on the traced value
        seen.append(out)
        return wnp.sum(v * v)

    wg.grad(f)(np.array([0.5, np.inf, -2.0]))
    assert not hasattr(seen[0], "_trace"), "a constant, not a traced value"
    assert np.asarray(seen[0]).dtype.kind in "biu", (name, np.asarray(seen[0]).dtype)
    np.testing.assert_array_equal(seen[0], ufunc(*(np.array([0.5, np.inf, -2.0]),) * ufunc.nin))


@pytest.mark.parametrize("name,call", [
    ("result_type", np.result_type), ("isscalar", np.isscalar), ("all", lambda x: np.all(x > 0)),
    ("any", lambda x: np.any(x > 1)), ("isin", lambda x: np.isin(x, [0.5])), ("argwhere", np.argwhere),
    ("array_equiv", lambda x: np.array_equiv(x, x)), ("searchsorted", lambda x: np.searchsorted(x, 1.0)),
    ("count_nonzero", np.count_nonzero), ("lexsort", lambda x: np.lexsort((x, -x))),
])
def test_integer_valued_functions_read_traced_values_by_value(name, call):
    x, seen = np.array([0.5, 1.5, 2.5]), []

    def f(v):
        seen.append(call(v))  # plain NumPy, dispatched on the traced value
        return wnp.sum(v * v)

    np.testing.assert_array_equal(wg.grad(f)(x), 2 * x)
    assert not hasattr(seen[0], "_trace")
    np.testing.assert_array_equal(seen[0], call(x))


# -- unsupported: a traced value raises an error that names the function ---------------------------

def _dispatches(fun):
    """Whether NumPy hands a call with a traced argument to wengert (ufuncs and NEP-18 functions)."""
    return isinstance(fun, np.ufunc) or hasattr(fun, "_implementation")


UNSUPPORTED_DISPATCHED = [pytest.param(ns, n, id=f"{ns}.{n}") for ns in sorted(MODULES)
                          for n in table.names(ns, table.UNSUPPORTED)
                          if _dispatches(getattr(MODULES[ns], n, None))]


@pytest.mark.parametrize("namespace,name", UNSUPPORTED_DISPATCHED)
def test_unsupported_numpy_function_on_a_traced_value_raises_naming_it(namespace, name):
    fun = getattr(MODULES[namespace], name)
    x = np.array([0.5, 1.5, 2.5])
    for nargs in (1, 2, 3, 4):  # the first arity that NumPy's dispatcher accepts
        def f(v, nargs=nargs):
            fun(*([v] * nargs))
            return wnp.sum(v)

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                wg.grad(f)(x)
        except UnsupportedNumpyFunction as e:
            message = str(e)
            assert f"{namespace}.{name} was called on a traced wengert value" in message
            note = table.entry(namespace, name).note
            assert note in message, "the error says what to write instead"
            return
        except TypeError:
            continue
    pytest.fail(f"{namespace}.{name} on a traced value raised no UnsupportedNumpyFunction")


def test_unsupported_constructors_refuse_traced_arguments_and_serve_plain_ones():
    for name in ("arange", "geomspace"):
        np.testing.assert_array_equal(getattr(wnp, name)(1.0, 4.0), getattr(np, name)(1.0, 4.0))
        with pytest.raises(UnsupportedNumpyFunction, match=rf"numpy\.{name}.*linspace"):
            wg.grad(lambda a, name=name: wnp.sum(getattr(wnp, name)(a, 4.0)))(1.0)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix
@pytest.mark.parametrize("name,call", [
    ("kaiser", lambda x: np.kaiser(4, x[0])),
    ("asarray_chkfinite", np.asarray_chkfinite),
    ("require", np.require),
    ("asmatrix", np.asmatrix),
])
def test_numpy_functions_that_do_not_dispatch_are_named_too(name, call):
    """NumPy converts the traced value itself (no NEP-18 dispatch): the error still names the function."""
    assert not _dispatches(getattr(np, name))
    with pytest.raises(UnsupportedNumpyFunction, match=rf"numpy\.{name} was called on a traced") as info:
        wg.grad(lambda x: wnp.sum(call(x)))(np.array([0.5, 1.5]))
    assert table.entry("numpy", name).note in str(info.value)


def test_every_wrapped_scipy_name_is_in_the_rule_table_tests():
    """The SciPy names wengert wraps are all differentiable: each reaches the systematic test."""
    pytest.importorskip("scipy")
    from wengert.scipy import integrate, linalg, signal, special, stats

    missing = []
    for module in (special, linalg, stats, signal, integrate):
        short = module.__name__.rsplit(".", 1)[1]
        for name in module.__all__:
            fun = getattr(module, name)
            prim_name = str(getattr(getattr(fun, "primitive", fun), "__name__", ""))
            if not {name, f"scipy.{short}.{name}", f"scipy_{name}", prim_name} & COVERED:
                missing.append(f"scipy.{short}.{name}")
    assert not missing, f"wrapped SciPy names with no case in the rule-table tests: {missing}"
