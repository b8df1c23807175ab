"""Every fact a primitive declares (``wengert.core.extend.facts``), checked numerically: the program
transformer relies on them (``passes`` folds zeros through linear primitives, adds in place into fresh
buffers, drops broadcasts before broadcasting ones; ``codegen`` writes operators, ``math`` functions
and helpers), so a wrong fact makes a wrong program.

The inputs are the rule table's own cases (``tests/rules/test_rule_table.py``): each case is traced
into a program, whose statements are run one by one on the case's values; the calls of the primitive
under test are its samples. Primitives without derivatives (not in the rule table) that declare facts
have their samples here (``NONDIFF_SAMPLES``).
"""

import builtins
import copy
import math

import numpy as np
import pytest

from tests.rules.test_rule_table import CASES
from tests.support.rule_helpers import R
from wengert.api.tree import tree_flatten
from wengert.core.extend import defvjp, facts, primitive
from wengert.core.primitive import Primitive
from wengert.program import Program, codegen, passes, pipeline, rendering
from wengert.program.ir import Variable, map_vars
from wengert.rules import families, nondiff, reductions, rule_table

NONDIFF_SAMPLES = {
    **{p.__name__: [((R(3), R(3)), {}), ((R(2, 3), R(3)), {}), ((R(), R()), {}), ((R(2, 1), 0.25), {})]
       for p in (nondiff.equal, nondiff.not_equal, nondiff.less, nondiff.less_equal, nondiff.greater,
                 nondiff.greater_equal)},
    "chooser_weights": [((1.0, np.array([1.0, 0.5, 1.0]), None, False), {}),
                        ((np.array([2.0, 3.0]), np.array([[2.0, 3.0], [1.0, 3.0]]), 0, False), {}),
                        ((np.array([[2.0], [3.0]]), np.array([[2.0, 2.0], [1.0, 3.0]]), -1, True), {}),
                        ((np.float64(0.5), 0.5, None, False), {}),
                        ((3.0, np.array([[1.0, 3.0], [3.0, -2.0]]), None, True), {})],
    "positive_mask": [((R(2, 3),), {}), ((R(),), {})],
    "one_hot": [((np.array([0, 2]), (2, 3), np.float64), {})],
    **{p.__name__: [((R(3),), {}), ((R(2, 3),), {}), ((R(),), {}), ((np.arange(4),), {}),
                    ((R(2),), {"dtype": np.float32})] for p in (nondiff.zeros_like, nondiff.ones_like)},
    "stop_gradient": [((R(3),), {}), ((R(2, 3),), {}), ((R(),), {}), ((np.arange(4),), {}), ((0.5,), {})],
}


def _with_facts():
    """Every primitive declaring a fact: the rule table, and the others of the rule families."""
    found = dict(rule_table())
    for module in families():
        for value in vars(module).values():
            prim = getattr(value, "primitive", value)
            if isinstance(prim, Primitive) and prim.nondiff and _declares(prim):
                found.setdefault(prim.__name__, prim)
    return {name: prim for name, prim in found.items() if _declares(prim)}


def _declares(prim):
    return any(getattr(prim, fact) for fact in ALGEBRA + ("linear", "fresh", "broadcasts", "operator",
                                                            "math_name", "helper"))


ALGEBRA = ("units", "negates", "linear_jointly", "identity_if_unchanged", "shape_only", "constants",
           "adds_scaled")
"""The facts programs are rewritten by: constant folding (``passes._fold``, ``passes._negated``), and
in-place accumulation by a function of the primitive's own (``liveness.scaled_adds``)."""


PRIMS = _with_facts()
_CALLS = {}


def _traced_calls(prim, fun, args):
    """The calls ``(args, kwargs)`` of ``prim`` that ``fun(*args)`` makes, with their values."""
    program = Program.from_trace(fun, *args)
    leaves, _ = tree_flatten(tuple(args))
    env = {slot: leaf for slot, leaf in zip(program.in_leaves, leaves) if type(slot) is Variable}
    found = []
    for s in program.statements:
        call_args = map_vars(s.args, env.__getitem__)
        call_kwargs = map_vars(s.kwargs, env.__getitem__)
        with np.errstate(all="ignore"):
            value = s.prim.fun(*call_args, **call_kwargs)
        if s.prim is prim:
            found.append((tuple(call_args), dict(call_kwargs)))
        if len(s.outs) == 1:
            env[s.out] = value
        else:
            env.update(zip(s.outs, value))
    return found


def calls(name):
    """Sample calls of primitive ``name``, from its rule-table cases (or ``NONDIFF_SAMPLES``)."""
    if name not in _CALLS:
        prim = PRIMS[name]
        found = list(NONDIFF_SAMPLES.get(name, []))
        for fun, args in CASES.get(name, []):
            try:
                found += _traced_calls(prim, fun, args)
            except Exception:  # noqa: BLE001 - a case the program tracer cannot take: the others serve
                continue
        assert found, f"no sample call of {name}: give it a rule-table case that traces"
        _CALLS[name] = found
    return _CALLS[name]


def _names(fact):
    return sorted(name for name, prim in PRIMS.items() if getattr(prim, fact))


def _close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, want)


def _numeric(x):
    return isinstance(x, (float, complex, np.ndarray, np.floating, np.complexfloating)) \
        and np.asarray(x).dtype.kind in "fc"


def _replaced(args, i, value):
    return args[:i] + (value,) + args[i + 1:]


# -- linear ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", _names("linear"))
def test_linear_arguments_scale_and_add(name):
    prim = PRIMS[name]
    rng = np.random.default_rng(0)
    checked = 0
    for args, kwargs in calls(name):
        base = prim.fun(*args, **kwargs)
        for i in prim.linear:
            x = args[i]
            if not _numeric(x):
                continue
            a = -0.75
            _close(prim.fun(*_replaced(args, i, a * x), **kwargs), a * np.asarray(base))
            y = rng.uniform(-1.0, 1.0, np.shape(x)).astype(np.asarray(x).dtype)
            if type(x) is float:
                y = float(y)
            if np.asarray(x).dtype.kind == "c":
                y = y + 1j * rng.uniform(-1.0, 1.0, np.shape(x))
            fy = prim.fun(*_replaced(args, i, y), **kwargs)
            _close(prim.fun(*_replaced(args, i, x + y), **kwargs), np.asarray(base) + np.asarray(fy))
            _close(prim.fun(*_replaced(args, i, 0.0 * x), **kwargs), np.zeros_like(np.asarray(base)))
            checked += 1
    assert checked, f"{name}: no sample with a numeric argument {prim.linear}"


# -- the algebra constant folding reads: units, negations, joint linearity, identities, shapes ------

def _filled(like, value):
    """``value`` as a scalar, and as an array of ``like``'s shape and dtype (``passes._is_const``
    takes both)."""
    if not _numeric(like) or np.ndim(like) == 0:
        return [value]
    return [value, np.full(np.shape(like), value, dtype=np.asarray(like).dtype)]


def check_units(prim, samples, fact="units"):
    """``f(x, u) == x`` for each ``{i: u}`` of ``units`` (``-x`` for ``negates``), at each sample's
    other argument, exactly (the fold replaces the statement by ``x``); returns how many were checked."""
    checked = 0
    for args, kwargs in samples:
        if len(args) != 2:
            continue
        for i, u in getattr(prim, fact).items():
            x = args[1 - i]
            if not _numeric(x):
                continue
            for unit in _filled(args[i], u):
                with np.errstate(all="ignore"):
                    out = np.asarray(prim.fun(*_replaced(args, i, unit), **kwargs))
                want = np.asarray(x) if fact == "units" else -np.asarray(x)
                assert out.shape == np.broadcast_shapes(np.shape(x), np.shape(unit)), prim.__name__
                np.testing.assert_array_equal(out, np.broadcast_to(want, out.shape),
                                              err_msg=f"{prim.__name__}: {fact}[{i}] = {u!r}")
                checked += 1
    return checked


def check_negates(prim, samples):
    return check_units(prim, samples, "negates")


def check_constants(prim, samples):
    """``f(..., c, ...)`` is ``value`` in every element for each ``{i: (c, value)}`` of ``constants``, at
    each sample's other arguments and at nan, inf and -inf there, exactly (the fold replaces the
    statement by the constant); returns how many were checked."""
    checked = 0
    for args, kwargs in samples:
        for i, (c, value) in prim.constants.items():
            if i >= len(args):
                continue
            for const in _filled(args[i], c):
                others = [args] + [tuple(np.full(np.shape(a), bad) if _numeric(a) and k != i else a
                                         for k, a in enumerate(args)) for bad in (np.nan, np.inf, -np.inf)]
                for other in others:
                    with np.errstate(all="ignore"):
                        out = np.asarray(prim.fun(*_replaced(other, i, const), **kwargs))
                    want = np.asarray(prim.fun(*_replaced(args, i, const), **kwargs))
                    assert out.shape == want.shape, prim.__name__
                    np.testing.assert_array_equal(out, np.full(out.shape, value),
                                                  err_msg=f"{prim.__name__}: constants[{i}] = {(c, value)!r}")
                    checked += 1
    return checked


def check_linear_jointly(prim, samples):
    """The result scales and adds with the ``linear_jointly`` arguments taken together."""
    rng = np.random.default_rng(1)
    checked = 0
    for args, kwargs in samples:
        joint = prim.linear_jointly
        if not all(i < len(args) and _numeric(args[i]) for i in joint):
            continue
        base = np.asarray(prim.fun(*args, **kwargs))
        scaled, other, summed, zeros = list(args), list(args), list(args), list(args)
        for i in joint:
            x = np.asarray(args[i])
            y = rng.uniform(-1.0, 1.0, x.shape).astype(x.dtype)
            scaled[i], other[i], summed[i], zeros[i] = -0.75 * x, y, x + y, 0.0 * x
        _close(prim.fun(*scaled, **kwargs), -0.75 * base)
        _close(prim.fun(*summed, **kwargs), base + np.asarray(prim.fun(*other, **kwargs)))
        _close(prim.fun(*zeros, **kwargs), np.zeros_like(base))
        checked += 1
    return checked


def check_identity_if_unchanged(prim, samples):
    """Where the result has the first argument's shape and dtype it is that argument: applied again
    to its own result (which has the result's shape and dtype), the result comes back unchanged."""
    checked = 0
    for args, kwargs in samples:
        if not args or not _numeric(args[0]):
            continue
        out = prim.fun(*args, **kwargs)
        pairs = [(args[0], out), (out, prim.fun(out, *args[1:], **kwargs))]
        for x, y in pairs:
            x, y = np.asarray(x), np.asarray(y)
            if x.shape == y.shape and x.dtype == y.dtype:
                np.testing.assert_array_equal(y, x, err_msg=f"{prim.__name__} changed its argument")
                checked += 1
    return checked


def check_shape_only(prim, samples):
    """Other values of the same shapes and dtypes give the same result."""
    rng = np.random.default_rng(2)
    checked = 0
    for args, kwargs in samples:
        out = prim.fun(*args, **kwargs)
        other = tuple(rng.uniform(-3.0, 3.0, np.shape(a)).astype(np.asarray(a).dtype) if _numeric(a)
                      or isinstance(a, np.ndarray) else a for a in args)
        np.testing.assert_array_equal(prim.fun(*other, **kwargs), out, err_msg=f"{prim.__name__} read values")
        checked += 1
    return checked


def check_adds_scaled(prim, samples):
    """``adds_scaled(buf, s, *args)`` adds ``s * f(*args)`` into ``buf`` in place, for every scalar ``s``
    (0, -0.0, nan, infinities, a subnormal: generated code calls it whatever ``s`` is, and ``0 * w`` is nan
    where ``w`` is), as called and as its source runs in generated code; returns how many were checked."""
    rng = np.random.default_rng(3)
    fun = prim.adds_scaled
    generated = _exec_helpers({fun.__name__: fun})[fun.__name__]
    checked = 0
    no_max = ((np.nan, np.array([[1.0, np.nan]]), None, False), {})  # no element equals the max
    extra = [no_max] if prim is reductions.chooser_weights else []
    for args, kwargs in list(samples) + extra:
        with np.errstate(all="ignore"):
            w = np.asarray(prim.fun(*args, **kwargs))
        if w.dtype.kind not in "fc" or kwargs:
            continue
        for scale in (2.5, np.float64(-1.0), 1.0, 0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324):
            buf = rng.uniform(-1.0, 1.0, w.shape).astype(w.dtype)
            with np.errstate(all="ignore"):
                want = buf + scale * w
            for add in (fun, generated):
                got = buf.copy()
                with np.errstate(all="ignore"):
                    assert add(got, scale, *copy.deepcopy(args)) is None, f"{prim.__name__}: returns nothing"
                _close(got, want)
                checked += 1
    return checked


CHECKS = {"units": check_units, "negates": check_negates, "linear_jointly": check_linear_jointly,
          "identity_if_unchanged": check_identity_if_unchanged, "shape_only": check_shape_only,
          "constants": check_constants, "adds_scaled": check_adds_scaled}


@pytest.mark.parametrize("fact, name", [(fact, name) for fact in ALGEBRA for name in _names(fact)])
def test_algebraic_facts_hold(fact, name):
    assert CHECKS[fact](PRIMS[name], calls(name)), f"{name}: no sample the {fact} fact applies to"


def test_the_algebra_folding_relies_on_is_declared():
    """What the passes once matched by name, now declared (a primitive losing a fact would silently
    stop folding; one gaining a wrong one would miscompile, which the checks above catch)."""
    assert PRIMS["multiply"].units == {0: 1, 1: 1} and PRIMS["multiply"].negates == {0: -1, 1: -1}
    assert PRIMS["add"].units == {0: 0, 1: 0} and PRIMS["subtract"].negates == {0: 0}
    assert PRIMS["true_divide"].units == PRIMS["power"].units == {1: 1}
    assert PRIMS["where"].linear_jointly == (1, 2)
    assert PRIMS["power"].constants == {1: (0, 1)}
    assert _names("identity_if_unchanged") == ["astype", "broadcast_to", "reshape"]
    assert _names("shape_only") == ["ones_like", "zeros_like"]
    assert _names("adds_scaled") == ["chooser_weights"]


def _user(fun, **known):
    prim = primitive(fun, name="wrong")
    return facts(prim, **known)


def _add_positive_part(buf, s, x):
    """``buf += s * (x > 0)``: not ``s * maximum(x, 0)`` (a wrong ``adds_scaled`` fact)."""
    buf += s * (x > 0)


_X, _Y = np.array([[0.5, -1.0, 2.0], [0.25, 1.5, -3.0]]), np.array([2.0, -0.5, 3.0])
WRONG_FACTS = {
    "units": (_user(lambda x, y: x + 2.0 * y, units={0: 0}), [((_X, _Y), {})]),  # 0 + 2y is not y
    "negates": (_user(lambda x, y: x - y, negates={1: 0}), [((_X, _Y), {})]),  # x - 0 is not -x
    "linear_jointly": (_user(lambda x, y: x * y, linear_jointly=(0, 1)), [((_X, _Y), {})]),
    "identity_if_unchanged": (_user(lambda x: np.transpose(x), identity_if_unchanged=True),
                              [((_X[:, :2], ), {})]),  # a square matrix keeps its shape, not its values
    "shape_only": (_user(lambda x: np.zeros_like(x) + x[..., :1], shape_only=True), [((_X,), {})]),
    "constants": (_user(lambda x, y: x * y + 1.0, constants={1: (0, 1)}), [((_X, _Y), {})]),  # nan * 0
    "adds_scaled": (_user(lambda x: np.maximum(x, 0.0), adds_scaled=_add_positive_part), [((_X,), {})]),
}


@pytest.mark.parametrize("fact", ALGEBRA)
def test_a_wrong_algebraic_fact_is_caught(fact):
    prim, samples = WRONG_FACTS[fact]
    assert getattr(prim, fact)
    with pytest.raises(AssertionError):
        CHECKS[fact](prim, samples)


# -- fresh -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", _names("fresh"))
def test_fresh_results_share_no_memory(name):
    """A fresh result is the generated code's to write into (``passes`` adds in place into it): no view
    of an argument, and writeable (a read-only view of a private buffer was returned once)."""
    prim = PRIMS[name]
    for args, kwargs in calls(name):
        out = prim.fun(*args, **kwargs)
        if isinstance(out, np.ndarray) and out.ndim:
            assert out.flags.writeable, f"{name} returned a read-only array"
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, np.ndarray) and isinstance(out, np.ndarray):
                assert not np.shares_memory(out, a), f"{name} returned a view of an argument"


# -- broadcasts ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", _names("broadcasts"))
def test_broadcasting_arguments_broadcast_as_numpy(name):
    """The result's shape is the arguments' broadcast shape, and an argument broadcast beforehand (what
    ``passes.elide_broadcasts`` takes back) changes nothing."""
    prim = PRIMS[name]
    for args, kwargs in calls(name):
        with np.errstate(all="ignore"):
            out = prim.fun(*args, **kwargs)
        shapes = [np.shape(a) for a in args if a is not None]
        assert np.broadcast_shapes(*shapes) == np.shape(out), f"{name}{tuple(shapes)} -> {np.shape(out)}"
        for i, a in enumerate(args):
            if a is None or np.shape(a) == np.shape(out):
                continue
            with np.errstate(all="ignore"):
                again = prim.fun(*_replaced(args, i, np.broadcast_to(a, np.shape(out))), **kwargs)
            np.testing.assert_array_equal(again, out)


# -- operator and math_name ------------------------------------------------------------------------

def _operator(prim, operands):
    names = "ab"[:len(operands)]
    text = f"{prim.operator}a" if len(operands) == 1 else f"a {prim.operator} b"
    return eval(text, {}, dict(zip(names, operands)))  # noqa: S307 - the spelling generated code writes


def _floats(args):
    """The first element of each argument, as a Python float (None where one is not real)."""
    out = []
    for a in args:
        if not _numeric(a) or np.asarray(a).dtype.kind != "f" or not np.size(a):
            return None
        out.append(float(np.ravel(a)[0]))
    return out


@pytest.mark.parametrize("name", _names("operator"))
def test_operator_computes_the_primitive(name):
    prim = PRIMS[name]
    checked = 0
    for args, kwargs in calls(name):
        if kwargs or len(args) not in (1, 2):
            continue
        with np.errstate(all="ignore"):
            _close(_operator(prim, args), prim.fun(*args))
            floats = _floats(args)
            if floats is not None and prim.operator != "@":  # on Python floats, as generated code runs it
                _close(_operator(prim, floats), prim.fun(*[np.float64(f) for f in floats]))
        checked += 1
    assert checked


@pytest.mark.parametrize("name", _names("math_name"))
def test_math_function_computes_the_primitive_on_floats(name):
    prim = PRIMS[name]
    fun = builtins.abs if prim.math_name == "abs" else getattr(math, prim.math_name)
    checked = 0
    for args, kwargs in calls(name):
        floats = _floats(args)
        if kwargs or floats is None:
            continue
        with np.errstate(all="ignore"):
            want = prim.fun(*[np.float64(f) for f in floats])
        np.testing.assert_allclose(fun(*floats), want, rtol=1e-14)
        checked += 1
    assert checked, f"{name}: no real sample"


# -- helper ----------------------------------------------------------------------------------------

def _exec_helpers(used):
    """The helpers' generated source, run in a namespace holding NumPy alone."""
    namespace = {"np": np}
    exec("\n\n\n".join(rendering.helper_sources(used)), namespace)  # noqa: S102 - as generated code does
    return namespace


@pytest.mark.parametrize("name", _names("helper"))
def test_helper_source_alone_computes_the_primitive(name):
    prim = PRIMS[name]
    helper = _exec_helpers({name: prim.helper})[name]
    for args, kwargs in calls(name):
        with np.errstate(all="ignore"):
            want = prim.fun(*copy.deepcopy(args), **kwargs)
            got = helper(*copy.deepcopy(args), **kwargs)
        _close(got, want)


def test_helpers_come_with_the_helpers_they_call():
    """``index_add`` calls ``may_repeat`` (and ``untake``, on a lazy array): all are included, in name
    order, the primitive's helper under the primitive's name."""
    sources = rendering.helper_sources({"index_add": PRIMS["index_add"].helper})
    assert [text.split("(")[0] for text in sources] == ["def index_add", "def may_repeat", "def untake"]
    assert rendering.helper_sources({"tie_select": PRIMS["tie_select"].helper})[0].startswith("def masked(")


def test_registered_helpers_run_on_numpy_alone():
    namespace = _exec_helpers(rendering.helpers())
    x = np.array([[1.0, 3.0], [3.0, -2.0]])
    buf = np.zeros_like(x)
    namespace["add_chosen"](buf, 2.0, 3.0, x)
    np.testing.assert_array_equal(buf, 2.0 * reductions.chooser_weights(3.0, x, None, False))
    np.testing.assert_array_equal(namespace["masked"](np.array([1.0, np.inf]), np.array([False, True])),
                                  [0.0, np.inf])
    assert namespace["may_repeat"]([0, 0]) and not namespace["may_repeat"](slice(0, 2))


# -- the facts are read from the primitives, nowhere else ------------------------------------------

def test_no_name_keyed_tables_remain():
    for module, tables in ((rendering, ("HELPERS", "OPERATORS", "UNARY_OPERATORS", "MATH_UNARY",
                                        "MATH_BINARY", "KNOWN_FAMILIES")),
                           (passes, ("_LINEAR", "_FRESH", "_BROADCASTING")),
                           (pipeline, ("_SHAPE_ONLY",))):
        for table in tables:
            assert not hasattr(module, table), f"{module.__name__}.{table}"


def test_a_users_primitive_is_written_by_its_facts():
    """Facts declared on a primitive of one's own decide how generated code writes it, as the rule
    table's: a helper is included by its source (dedented, renamed), an operator written."""
    def cube_impl(x):
        return x * x * x

    cube = primitive(cube_impl, name="cube")
    defvjp(cube, lambda g, out, x: 3.0 * g * x * x)
    times = primitive(lambda x, y: np.multiply(x, y), name="times")
    defvjp(times, lambda g, out, x, y: g * y, lambda g, out, x, y: g * x)
    assert "prim_cube" in codegen.to_source(Program.from_trace(cube, np.ones(2)))
    facts(cube, helper=True)
    facts(times, operator="*")
    program = Program.from_trace(lambda x: times(cube(x), x), np.ones(2))
    source = codegen.to_source(program)
    assert "def cube(x):\n    return x * x * x" in source and "prim_" not in source
    assert "= cube(" in source and "* x" in source
    np.testing.assert_allclose(program(np.array([2.0, -1.0])), [16.0, 1.0])
