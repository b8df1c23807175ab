"""Generated code's fused accumulations give the unfused statements' values at every cotangent.

``liveness.scaled_adds`` writes ``w = f(*args); m = g * w; buf += m`` (``g`` a scalar) as one call of
``f``'s ``adds_scaled`` fact (``add_chosen`` for a max's weights), made whatever ``g`` is. Here every
primitive declaring that fact is read from the rule table, the rule-table primitives whose VJP rules
call it (``max``, ``min``) are found by walking those rules' code, and the fused forms -- the helper as
called, as generated code includes its source, its Numba version run as NumPy, and whole compiled
gradients -- are checked against the unfused statements (compiled with the fusion switched off), the
tape and JAX: at cotangents nan, +-inf, +-0.0 and subnormal, and at inputs with ties, nan and
infinities. Equal means equal values, nan where nan; the sign of a zero aside (adding ``g * 0`` is
adding nothing, ``add``'s unit fact, as the passes read it everywhere).
"""

import inspect
import types
import warnings
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import wengert as wg
import wengert.numpy as wnp
from tests.rules.test_rule_table import CASES
from wengert.core.primitive import Primitive
from wengert.program import codegen, rendering
from wengert.program.native_helpers import NATIVE_HELPERS
from wengert.rules import families, rule_table

TINY = 5e-324  # the smallest subnormal double
COTANGENTS = (np.nan, np.inf, -np.inf, 0.0, -0.0, TINY, -TINY, 1.5, -2.0, 1e308)
SPECIAL = (np.nan, np.inf, -np.inf, 0.0, -0.0)


def _adds_scaled():
    """Every primitive of the rule families declaring ``adds_scaled``, by name."""
    found = {}
    for module in families():
        for value in vars(module).values():
            prim = getattr(value, "primitive", value)
            if isinstance(prim, Primitive) and prim.adds_scaled is not None:
                found[prim.__name__] = prim
    return found


ADDS_SCALED = _adds_scaled()


def _reaches(fun, target, seen):
    """Whether function ``fun`` names the primitive ``target``, itself or through the functions (of its
    module, its closure, its nested functions) that it names."""
    if id(fun) in seen or not isinstance(fun, types.FunctionType):
        return False
    seen.add(id(fun))
    codes, named = [fun.__code__], [c.cell_contents for c in fun.__closure__ or ()]
    while codes:
        code = codes.pop()
        codes += [c for c in code.co_consts if inspect.iscode(c)]
        named += [fun.__globals__[n] for n in code.co_names if n in fun.__globals__]
    for value in named:
        if getattr(value, "primitive", value) is target or _reaches(value, target, seen):
            return True
    return False


def _vjp_rules(prim):
    rules = [*prim.vjps, prim.vjp_argnum, prim.vjp_joint, prim.vjp_accumulate, prim.vjp_inplace]
    return [r for r in rules if r is not None]


def producers(target):
    """The rule-table primitives whose VJP rules call ``target``: names with cases in ``CASES``."""
    return sorted(name for name, prim in rule_table().items()
                  if name in CASES and any(_reaches(r, target, set()) for r in _vjp_rules(prim)))


def _float_cases(name):
    """``name``'s rule-table cases of one real float array argument."""
    return [(fun, args[0]) for fun, args in CASES[name]
            if len(args) == 1 and isinstance(args[0], np.ndarray) and args[0].dtype.kind == "f"]


def variants(x):
    """``x`` and copies of it with ties (few values), a nan, infinities, all maxima tied, signed zeros."""
    rng = np.random.default_rng(x.size)
    out = [x, np.round(x * 1.5), np.full_like(x, 2.0), np.where(x > 0, 0.0, -0.0)]
    for v in SPECIAL:
        y = x.copy()
        y.flat[rng.integers(x.size)] = v
        out.append(y)
    y = x.copy()
    y.flat[:2] = [np.inf, np.inf] if x.size > 1 else [np.inf]
    return out + [y, np.full_like(x, np.nan), np.full_like(x, -np.inf)]


def calls_of(target, fun, x):
    """The calls ``(args, kwargs)`` of ``target`` that the tape's gradient of ``sum(fun(x))`` makes."""
    found, original = [], target.fun

    def recording(*args, **kwargs):
        found.append((args, kwargs))
        return original(*args, **kwargs)

    target.fun = recording
    try:
        with np.errstate(all="ignore"):
            out, pull = wg.vjp(fun, x)
            pull(np.ones_like(out))
    finally:
        target.fun = original
    return found


def _same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    if not np.array_equal(got, want, equal_nan=True):  # (quick; -0.0 == 0.0) else NumPy's report
        np.testing.assert_array_equal(got, want, err_msg=str(what))


_FORMS = {}


def _fused_forms(prim):
    """``prim``'s ``adds_scaled`` function as called, as generated code runs its source, and its Numba
    version (run as NumPy) where it has one."""
    if prim not in _FORMS:
        _FORMS[prim] = _forms(prim.adds_scaled)
    return _FORMS[prim]


def _forms(fun):
    namespace = {"np": np}
    exec("\n\n\n".join(rendering.helper_sources({fun.__name__: fun})), namespace)  # noqa: S102
    forms = {"called": fun, "generated": namespace[fun.__name__]}
    if fun in NATIVE_HELPERS:
        forms["numba version"] = NATIVE_HELPERS[fun]
    return forms


def _check_helper(prim, args, kwargs, g, buf):
    with np.errstate(all="ignore"):
        want = buf + g * prim.fun(*args, **kwargs)  # the unfused statements
    for form, add in _fused_forms(prim).items():
        got = buf.copy()
        with np.errstate(all="ignore"):
            assert add(got, g, *args, **kwargs) is None
        _same(got, want, (prim.__name__, form, g, args))


# -- which primitives, which programs -------------------------------------------------------------

def test_the_fact_is_read_from_the_table_and_every_one_has_a_producer():
    assert ADDS_SCALED, "no primitive declares adds_scaled: liveness.scaled_adds fuses nothing"
    for name, prim in ADDS_SCALED.items():
        assert producers(prim), f"{name}: no rule-table primitive's VJP calls it (the walk lost it?)"
    assert producers(ADDS_SCALED["chooser_weights"]) == ["max", "min"]  # the walk itself, checked once


@pytest.mark.parametrize("name", sorted(ADDS_SCALED))
def test_the_fused_helper_equals_the_unfused_statements_at_special_cotangents(name):
    prim = ADDS_SCALED[name]
    rng = np.random.default_rng(0)
    checked = 0
    for producer in producers(prim):
        for fun, x in _float_cases(producer):
            for z in variants(x):
                for args, kwargs in calls_of(prim, fun, z):
                    shape = np.shape(prim.fun(*args, **kwargs))
                    special = np.resize(np.array([np.nan, np.inf, -0.0, 1.0, 0.0]), shape)
                    for buf in (rng.uniform(-1.0, 1.0, shape), special):
                        for g in COTANGENTS:
                            _check_helper(prim, args, kwargs, g, buf)
                            checked += 1
    assert checked > 500, checked


# -- compiled programs: fused against the same program unfused, the tape and JAX ------------------

def _loss(fun):
    """``c * sum(fun(x)) + sum(x * x)``: ``fun``'s cotangent ``c`` is added last into ``x``'s adjoint."""
    return lambda x, c: c * wnp.sum(fun(x)) + wnp.sum(x * x)


def _nothing_fused(program, counts):
    return {}


class Unfused:
    """A compiled function generated without ``liveness.scaled_adds`` (at every call: a call at a new
    shape traces and generates again)."""

    def __init__(self, compiled):
        self.compiled = compiled

    def __call__(self, *args):
        with mock.patch.object(codegen, "scaled_adds", _nothing_fused):
            return self.compiled(*args)

    def source(self, *args):
        with mock.patch.object(codegen, "scaled_adds", _nothing_fused):
            return self.compiled.source(*args)


def compiled(f, fused, **options):
    """``wg.compile(f, **options).grad(0)``, unfused (``Unfused``) unless ``fused``."""
    g = wg.compile(lambda x, c: f(x, c), **options).grad(0)  # a fresh function: nothing cached
    return g if fused else Unfused(g)


def fused_programs(prim):
    """(case id, loss, fused gradient, unfused gradient, x) for each producer case whose compiled gradient
    calls ``prim``'s ``adds_scaled`` function."""
    helper = prim.adds_scaled.__name__
    found = []
    for producer in producers(prim):
        for k, (fun, x) in enumerate(_float_cases(producer)):
            f = _loss(fun)
            fused, unfused = compiled(f, True), compiled(f, False)
            source, plain = fused.source(x, 1.0), unfused.source(x, 1.0)
            assert f"{helper}(" not in plain.split("def ")[-1], plain
            if f"{helper}(" in source.split("def ")[-1]:
                found.append((f"{producer}[{k}]", f, fused, unfused, x))
    return found


_PROGRAMS = {}


def programs(name):
    if name not in _PROGRAMS:
        _PROGRAMS[name] = fused_programs(ADDS_SCALED[name])
    return _PROGRAMS[name]


@pytest.mark.parametrize("name", sorted(ADDS_SCALED))
def test_fused_programs_equal_unfused_programs_and_the_tape(name):
    found = programs(name)
    assert found, f"{name}: no rule-table case's compiled gradient fuses it"
    for case, f, fused, unfused, x in found:
        for z in variants(x):
            for c in COTANGENTS:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    want = unfused(z, c)
                    _same(fused(z, c), want, (case, z, c))
                    _same(wg.grad(f)(z, c), want, ("tape", case, z, c))


def _inputs(data, shape):
    """An array of few values (ties), maybe with one nan or infinity in it."""
    few = st.sampled_from([-1.0, -0.0, 0.0, 2.0])
    z = data.draw(hnp.arrays(np.float64, shape, elements=few | st.floats(-2, 2)))
    special = data.draw(st.sampled_from([None, np.nan, np.inf, -np.inf]))
    if special is not None:
        z.flat[data.draw(st.integers(0, z.size - 1))] = special
    return z


def _cotangent(data):
    return data.draw(st.sampled_from(COTANGENTS) | st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_fused_programs_equal_unfused_on_random_inputs(data):
    name = data.draw(st.sampled_from(sorted(ADDS_SCALED)))
    case, f, fused, unfused, x = data.draw(st.sampled_from(programs(name)))
    z, c = _inputs(data, x.shape), _cotangent(data)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = unfused(z, c)
        _same(fused(z, c), want, (case, z, c))
        _same(wg.grad(f)(z, c), want, ("tape", case, z, c))


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_fused_helpers_equal_unfused_statements_on_random_inputs(data):
    name = data.draw(st.sampled_from(sorted(ADDS_SCALED)))
    prim = ADDS_SCALED[name]
    fun, x = data.draw(st.sampled_from([case for p in producers(prim) for case in _float_cases(p)]))
    z, g = _inputs(data, x.shape), _cotangent(data)
    for args, kwargs in calls_of(prim, fun, z):
        shape = np.shape(prim.fun(*args, **kwargs))
        values = st.floats(-2, 2) | st.sampled_from([np.nan, np.inf, -0.0])
        _check_helper(prim, args, kwargs, g, data.draw(hnp.arrays(np.float64, shape, elements=values)))


def _jax_cases(jnp):
    return [(lambda x, c: wnp.max(x) * c + wnp.sum(x * x), lambda x, c: jnp.max(x) * c + jnp.sum(x * x)),
            (lambda x, c: wnp.min(x) * c + wnp.sum(wnp.sin(x)),
             lambda x, c: jnp.min(x) * c + jnp.sum(jnp.sin(x))),
            (lambda x, c: wnp.amax(x * c) + wnp.log(wnp.sum(wnp.exp(x - wnp.max(x)))),
             lambda x, c: jnp.max(x * c) + jnp.log(jnp.sum(jnp.exp(x - jnp.max(x)))))]


def test_compiled_gradients_of_max_programs_equal_jax_at_nan_and_infinite_cotangents():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    xs = [np.array([[1.0, 3.0], [3.0, -2.0]]), np.array([[1.0, np.nan], [0.5, 2.0]]),
          np.array([[np.inf, 1.0], [np.inf, -np.inf]])]
    for f, fj in _jax_cases(jnp):  # JAX run op by op: jit's XLA drops the nan of 0 * nan (a max at a nan)
        forms = {"compile(f).grad": wg.compile(f).grad(0), "compile(grad(f))": wg.compile(wg.grad(f)),
                 "tape": wg.grad(f)}
        assert "add_chosen(" in forms["compile(f).grad"].source(xs[0], 1.0)
        cs = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0])
        for x in xs:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                wants = np.asarray(jax.vmap(jax.grad(fj), in_axes=(None, 0))(jnp.asarray(x), jnp.asarray(cs)))
                for c, want in zip(cs, wants):
                    for form, g in forms.items():  # JAX rounds otherwise: nan and inf where JAX has them
                        np.testing.assert_allclose(g(x, float(c)), want, rtol=1e-13, atol=1e-15,
                                                   err_msg=f"{form} at x={x}, c={c}")
