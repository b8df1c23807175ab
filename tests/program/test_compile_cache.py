"""wg.compile's arguments as jax.jit takes them (static_argnums/static_argnames, Python ints traced
unless static), its bounded cache that keeps no caller data, and pickling (also wg.source_grad)."""

import functools
import gc
import pickle
import tracemalloc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.core.errors import TracingError


def scaled_sum(x, i):
    return wnp.sum(wnp.sin(x) * x) * i + x[i]


def blocks(x, n, scale=1.0):
    return wnp.sum(x.reshape(n, -1), axis=0) * scale


def partial_sum(x, n):
    return sum(x[k] * x[k] for k in range(n))


def power_sum(x, *, p):
    return wnp.sum(x ** p)


@wg.compile(static_argnums=1)
def decorated(x, n):
    return wnp.sum(x[:n] ** 2)


def module_loss(x, a):
    return wnp.sum(wnp.sin(x) * a)


# -- static_argnums / static_argnames ------------------------------------------------------------------

@pytest.mark.parametrize("options", [dict(static_argnums=1), dict(static_argnums=(1,)),
                                     dict(static_argnums=[1]), dict(static_argnums=-2),
                                     dict(static_argnames="n"), dict(static_argnames=("n",)),
                                     dict(static_argnums=(1, 2))],
                         ids=lambda o: repr(o))
def test_static_arguments_trace_once_per_value(options):
    x = np.arange(6.0)
    f = wg.compile(blocks, **options)
    for n in (2, 3, 2, 3, 6):
        np.testing.assert_allclose(f(x, n, 2.0), blocks(x, n, 2.0))
    np.testing.assert_allclose(f(x, n=2, scale=2.0), blocks(x, 2, 2.0))  # by name: the same static value
    assert f.cache_info().misses == 3


def test_static_keyword_only_argument_and_grad():
    x = np.linspace(0.5, 1.5, 4)
    f = wg.compile(power_sum, static_argnames="p")
    for p in (2, 3, 2):
        assert f(x, p=p) == pytest.approx(float(np.sum(x ** p)))
        np.testing.assert_allclose(f.grad()(x, p=p), p * x ** (p - 1))
    assert f.cache_info().misses == 2


def test_decorator_factory_and_partial_spellings():
    x = np.arange(5.0)
    assert decorated(x, 3) == pytest.approx(5.0) and decorated(x, 4) == pytest.approx(14.0)
    assert decorated.cache_info().misses >= 2
    jit_like = functools.partial(wg.compile, static_argnums=1)
    g = jit_like(blocks)
    np.testing.assert_allclose(g(np.arange(6.0), 3), blocks(np.arange(6.0), 3))
    np.testing.assert_allclose(decorated.grad()(x, 2), [0.0, 2.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("options, message", [
    (dict(static_argnums=3), "static_argnums=(3,) but blocks accepts only 3 positional arguments"),
    (dict(static_argnums=-4), "static_argnums=(-4,) but blocks accepts only 3 positional arguments"),
    (dict(static_argnames="m"),
     "names 'm', which is not a parameter of blocks (its parameters: x, n, scale)"),
    (dict(static_argnums="n"), "static_argnums: expected int"),
])
def test_static_argument_errors_name_the_function_and_parameter(options, message):
    with pytest.raises((ValueError, TypeError), match=message.replace("(", r"\(").replace(")", r"\)")):
        wg.compile(blocks, **options)


def test_unhashable_static_value_is_refused():
    f = wg.compile(lambda x, shape: x * 2.0, static_argnums=1)
    with pytest.raises(ValueError, match="static argument 1 is a list, which is not hashable"):
        f(np.ones(2), [1, 2])


def test_cache_size_must_be_positive():
    with pytest.raises(ValueError, match=r"wg.compile\(blocks\): cache_size=0"):
        wg.compile(blocks, cache_size=0)


# -- the int rule -----------------------------------------------------------------------------------------

def test_a_loop_counter_traces_once():
    x = np.linspace(-1.0, 1.0, 5)
    f = wg.compile(scaled_sum)
    g = wg.compile(scaled_sum).grad()
    for i in range(-5, 5):
        assert f(x, i) == pytest.approx(scaled_sum(x, i), rel=1e-14)
        np.testing.assert_allclose(g(x, i), wg.grad(scaled_sum)(x, i), rtol=1e-13)
    assert f.cache_info().misses == 1 and g.cache_info().misses == 1
    assert f.cache_info().hits == 9


@pytest.mark.parametrize("fun, line", [
    (partial_sum, "range(n)"),
    (blocks, "reshape's result depends on it"),
    (lambda x, n: wnp.zeros(n) + x[0], "expected a sequence of integers"),
    (lambda x, n: x[:n], "Using as a Python index"),
    (lambda x, n: x * 2.0 if n > 1 else x, "Python control flow"),
])
def test_an_int_that_decides_a_shape_or_range_is_refused_naming_it(fun, line):
    f = wg.compile(fun)
    traced = r"the int argument `n` \(position 1\) is a traced value, as under jax.jit"
    with pytest.raises(TracingError, match=traced) as info:
        f(np.arange(6.0), 2)
    assert "static_argnums=1) (or static_argnames='n')" in str(info.value)
    assert line in str(info.value)
    static = wg.compile(fun, static_argnums=1)
    np.testing.assert_allclose(static(np.arange(6.0), 2), fun(np.arange(6.0), 2))


def test_ints_in_a_pytree_are_traced_and_huge_ints_static():
    f = wg.compile(lambda d: d["x"] * d["k"])
    for k in (1, 2, 3):
        np.testing.assert_allclose(f({"x": np.ones(2), "k": k}), [k, k])
    assert f.cache_info().misses == 1
    g = wg.compile(lambda x, k: x * float(k % 7))  # float() of an int beyond int64: static, allowed
    assert g(np.ones(1), 2 ** 70)[0] == pytest.approx(float(2 ** 70 % 7))


def test_bools_stay_static():
    f = wg.compile(lambda x, flag: x * 2.0 if flag else x)
    assert f(1.5, True) == 3.0 and f(1.5, False) == 1.5
    assert f.cache_info().misses == 2


def test_matches_jax_jit_static_argnums():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax_traces = []

    def jax_f(x, n, i):
        jax_traces.append(n)  # a side effect runs once per trace
        return jnp.sum(x.reshape(n, -1), axis=0)[i] * i

    def wg_f(x, n, i):
        return wnp.sum(x.reshape(n, -1), axis=0)[i] * i

    jf = jax.jit(jax_f, static_argnums=1)
    wf = wg.compile(wg_f, static_argnums=1)
    x = np.arange(12.0)
    for n, i in [(2, 0), (2, 1), (3, 1), (4, 2), (3, 0), (2, 1)]:
        np.testing.assert_allclose(wf(x, n, i), np.asarray(jf(jnp.asarray(x), n, i)), rtol=1e-6)
    assert wf.cache_info().misses == len(jax_traces) == 3  # one per static value; the int i traced by both
    with pytest.raises(Exception):  # both refuse an int that decides a shape unless it is static  # noqa: B017
        jax.jit(jax_f)(jnp.asarray(x), 2, 0)
    with pytest.raises(TracingError, match="static_argnums=1"):
        wg.compile(wg_f)(x, 2, 0)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(-4, 3), st.sampled_from([1, 2, 4]), st.sampled_from([4, 8])),
                min_size=1, max_size=12))
def test_property_calls_match_the_plain_function_and_trace_once_per_static_signature(calls):
    def f(x, i, n):
        return wnp.sum(wnp.cos(x.reshape(n, -1)), axis=0)[i % (x.size // n) - 1] * i

    c = wg.compile(f, static_argnums=2)
    for i, n, size in calls:
        x = np.linspace(0.1, 1.0, size)
        assert c(x, i, n) == pytest.approx(float(f(x, i, n)), rel=1e-13, abs=1e-15)
    # traces: one per distinct (static n, shape of x); the traced int i never adds one
    assert c.cache_info().misses == len({(n, size) for _, n, size in calls})


# -- the cache ---------------------------------------------------------------------------------------

def test_the_cache_is_lru_and_bounded():
    f = wg.compile(lambda x: x * 2.0, cache_size=2)
    a, b, c = np.ones(1), np.ones(2), np.ones(3)
    for x in (a, b, a, c):  # c evicts b, the least recently used (a was used by the dispatcher)
        np.testing.assert_allclose(f(x), 2.0 * x)
    info = f.cache_info()
    assert (info.misses, info.currsize, info.maxsize) == (3, 2, 2)
    f(a)
    assert f.cache_info().misses == 3
    f(b)  # evicted: traced again
    assert f.cache_info().misses == 4 and f.cache_info().currsize == 2
    for x in (a, b, c, a, c, b):  # the dispatcher of an evicted entry is not used
        np.testing.assert_allclose(f(x), 2.0 * x)
    assert wg.compile(lambda x: x).cache_info().maxsize == 64
    assert wg.compile(lambda x: x, cache_size=None).cache_info().maxsize is None


def _freed_after_del(make_and_call):
    x = np.random.default_rng(0).standard_normal(20_000)
    ref = weakref.ref(x)
    keep = make_and_call(x)
    del x
    gc.collect()
    return ref() is None, keep


@pytest.mark.parametrize("make", [
    lambda: wg.compile(module_loss),
    lambda: wg.compile(module_loss).grad(),
    lambda: wg.compile(module_loss).value_and_grad((0, 1)),
    lambda: wg.source_grad(module_loss),
    lambda: wg.compile(scaled_sum),
], ids=["compile", "compile.grad", "value_and_grad", "source_grad", "compile-int"])
def test_the_cache_keeps_no_input_array(make):
    f = make()

    def call(x):
        f(x, 2) if f.__name__ == "scaled_sum" else f(x, 2.0)
        return f

    freed, keep = _freed_after_del(call)
    assert freed
    assert keep is f  # while the compiled function, and its cache, is alive


def _rosenbrock(x):
    return wnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.parametrize("make", [
    lambda: wg.compile(wg.hessian(_rosenbrock)),  # makes a primitive of its own (banded_dense)
    lambda: wg.compile(wg.jacfwd(wg.grad(_rosenbrock))),
    lambda: wg.compile(_rosenbrock).grad(),
], ids=["hessian", "jacfwd-grad", "grad"])
def test_a_dropped_compiled_function_leaves_no_primitive_it_made_alive(make):
    """A compilation may make primitives of its own (a banded Hessian's assembling statement holds
    its dense program and an n x n array); nothing may keep them once the compiled function is
    gone (lookups about a primitive are kept on it, not in tables keyed by primitives)."""
    from wengert.core.primitive import Primitive

    def alive():
        return {id(o) for o in gc.get_objects() if issubclass(type(o), Primitive)}  # (no proxy)

    x = np.linspace(-1.0, 1.0, 30)
    gc.collect()
    before = alive()
    f = make()
    f(x)
    made = alive() - before
    del f
    gc.collect()
    assert not (alive() & made)


def reads_global(x):
    return wnp.sum(GLOBAL_W * x)


GLOBAL_W = np.ones(1000)


def test_the_cache_keeps_no_captured_array_after_it_is_rebound():
    global GLOBAL_W
    saved, x = GLOBAL_W, np.ones(1000)
    GLOBAL_W = np.ones(1000)
    try:
        ref = weakref.ref(GLOBAL_W)
        compiled, sg = wg.compile(reads_global), wg.source_grad(reads_global)
        assert compiled(x) == 1000.0 and sg(x)[0] == 1.0
        GLOBAL_W = np.full(1000, 2.0)
        gc.collect()
        assert ref() is None
        assert compiled(x) == 2000.0 and sg(x)[0] == 2.0
    finally:
        GLOBAL_W = saved


def test_source_grad_keeps_no_intermediate():
    def g(x, a):
        y = wnp.sin(x) * a
        z = y * y + x
        return wnp.sum(z * x)

    sg = wg.source_grad(g)
    x = np.ones(200_000)  # 1.6 MB; the build's intermediates would be several times that
    tracemalloc.start()
    try:
        sg(x, 2.0)
        del x
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 400_000  # less than a quarter of one input array: the programs only


# -- pickling ----------------------------------------------------------------------------------------

def test_compiled_functions_pickle_by_reference():
    x = np.linspace(0.1, 1.0, 4)
    f = wg.compile(module_loss, cache_size=5)
    f(x, 2.0)
    for obj in (f, f.grad((0, 1)), decorated.grad(), wg.compile(blocks, static_argnames="n")):
        loaded = pickle.loads(pickle.dumps(obj))
        assert type(loaded) is type(obj) and loaded.cache_info().misses == 0  # compiled again on use
    assert pickle.loads(pickle.dumps(f))(x, 2.0) == pytest.approx(float(module_loss(x, 2.0)))
    assert pickle.loads(pickle.dumps(f)).cache_info().maxsize == 5
    assert pickle.loads(pickle.dumps(decorated)) is decorated
    np.testing.assert_allclose(pickle.loads(pickle.dumps(decorated.grad()))(x, 2), 2 * x * (np.arange(4) < 2))
    loaded = pickle.loads(pickle.dumps(wg.compile(blocks, static_argnames="n")))
    np.testing.assert_allclose(loaded(np.arange(6.0), 3), blocks(np.arange(6.0), 3))


@pytest.mark.parametrize("make", [lambda: wg.compile(lambda x: x), lambda: wg.compile(wg.grad(module_loss)),
                                  lambda: wg.source_grad(lambda x: x * x)],
                         ids=["lambda", "grad", "source_grad"])
def test_pickling_a_local_function_is_refused_naming_wg_compile(make):
    with pytest.raises(pickle.PicklingError, match=r"cannot pickle .*(wg.compile|wg.source_grad).*Define the "
                                                   r"function at module level") as info:
        pickle.dumps(make())
    assert "impl" not in str(info.value).split("and ")[0]  # the message names what the user compiled


@pytest.mark.parametrize("transform", [wg.hessian, wg.grad])
def test_pickling_a_compiled_transform_is_refused_naming_the_transform(transform):
    """``wg.compile(wg.hessian(f))`` holds a wrapper named as ``f``: pickling it by reference would load
    ``f`` itself, a different function; refused, and the message says why (not that ``f`` is unreachable)."""
    with pytest.raises(pickle.PicklingError,
                       match=r"is a transform of .*module_loss .*not that function itself"):
        pickle.dumps(wg.compile(transform(module_loss)))


def test_source_grad_pickles_by_reference():
    x = np.linspace(0.1, 1.0, 4)
    sg = wg.source_grad(module_loss, argnums=(0, 1))
    loaded = pickle.loads(pickle.dumps(sg))
    for a, b in zip(loaded(x, 2.0), sg(x, 2.0)):
        np.testing.assert_allclose(a, b)
