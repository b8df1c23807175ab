"""Captured values follow Python (docs/program.md, "Captured values"): wg.compile and the source
transformation read captured arrays at each call and guard every other captured value, so that after
an in-place write or a rebinding they agree with the plain function and wg.grad."""

import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert.core.errors import TracingError

X = np.array([0.5, -1.0, 2.0])

W = np.ones(3)
SCALE = 1.0
c = 100.0  # a global of the same name as make_closure's parameter


def uses_globals(x):
    return np.sum(np.sin(x) * W) * SCALE


def _helper(x):
    return x * W


def calls_helper(x):
    return np.sum(_helper(x) ** 2) * SCALE


def make_closure(c):
    def f(x):
        return np.sum(x * c)
    return f


def _reset():
    global SCALE
    W[:] = 1.0
    SCALE = 1.0


@pytest.fixture(autouse=True)
def reset_globals():
    _reset()
    yield
    _reset()


def _agree(fun, compiled, compiled_grad, source_grad, x=X):
    np.testing.assert_allclose(compiled(x), fun(x), rtol=1e-13)
    expected = wg.grad(fun)(x)
    np.testing.assert_allclose(compiled_grad(x), expected, rtol=1e-13)
    np.testing.assert_allclose(source_grad(x), expected, rtol=1e-13)


@pytest.mark.parametrize("fun", [uses_globals, calls_helper], ids=lambda f: f.__name__)
def test_a_global_array_written_in_place_and_a_global_number_rebound_are_seen(fun):
    global SCALE
    compiled, compiled_grad, source = wg.compile(fun), wg.compile(fun).grad(0), wg.source_grad(fun)
    _agree(fun, compiled, compiled_grad, source)
    W[:] = 2.0  # in place: read at the next call, no new trace
    _agree(fun, compiled, compiled_grad, source)
    assert compiled.cache_info().misses == 1 and compiled_grad.cache_info().misses == 1
    SCALE = 3.0  # a new value: guarded, traced again
    _agree(fun, compiled, compiled_grad, source)
    assert compiled.cache_info().misses == 2 and compiled.cache_info().currsize == 2
    SCALE = 1.0  # the first trace again: found in the cache
    _agree(fun, compiled, compiled_grad, source)
    assert compiled.cache_info().misses == 2


def test_a_global_array_rebound_to_a_new_array_is_read_and_a_new_shape_traces_again():
    global W
    compiled = wg.compile(uses_globals)
    old = W
    try:
        W = np.full(3, 4.0)
        np.testing.assert_allclose(compiled(X), uses_globals(X))
        compiled(X)
        W = np.full((2, 3), 0.5)  # broadcasts with x: a new shape, a new trace
        np.testing.assert_allclose(compiled(X), uses_globals(X))
        assert compiled.cache_info().misses == 2
    finally:
        W = old


def _closure_state():
    W = np.ones(3)
    n = 2.0

    def f(x):
        return np.sum(x * W) * n

    def set_n(value):
        nonlocal n
        n = value

    return f, W, set_n


def test_a_closed_over_array_written_in_place_and_a_nonlocal_number_rebound_are_seen():
    f, Wc, set_n = _closure_state()
    compiled, compiled_grad, source = wg.compile(f), wg.compile(f).grad(), wg.source_grad(f)
    assert compiled(X) == f(X) == 3.0
    Wc[:] = 2.0
    assert compiled(X) == f(X) == 6.0
    set_n(6.0)
    assert compiled(X) == f(X) == 18.0
    _agree(f, compiled, compiled_grad, source)
    jvp = wg.source_jvp(f)((X,), (np.ones(3),))
    np.testing.assert_allclose(jvp, wg.jvp(f, (X,), (np.ones(3),)))


def test_a_closure_cell_wins_over_a_global_of_the_same_name():
    f = make_closure(2.0)
    assert c == 100.0
    np.testing.assert_allclose(wg.source_grad(f)(X), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(wg.compile(f).grad()(X), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(wg.source_jvp(f)((X,), (np.ones(3),))[1], 6.0)
    np.testing.assert_allclose(wg.grad(f)(X), [2.0, 2.0, 2.0])


def test_a_closed_over_number_without_a_global_of_its_name_is_found():
    def make(k):
        def f(x):
            return np.sum(x * k)
        return f

    np.testing.assert_allclose(wg.source_grad(make(3.0))(X), [3.0, 3.0, 3.0])


def test_a_global_wins_over_a_builtin_of_the_same_name():
    module = types.ModuleType("captured_builtin")
    exec("import numpy as np\ndef f(x):\n    return np.sum(x) * abs(-2.0)\n", module.__dict__)  # noqa: S102
    compiled = wg.compile(module.f)
    assert compiled(X) == module.f(X)
    module.abs = lambda v: 10.0
    assert compiled(X) == module.f(X) == 15.0


def test_captured_arrays_are_inputs_of_the_programs():
    source = wg.compile(uses_globals).source(X)
    assert "def uses_globals(x, W):" in source and "array(" not in source
    derivative = wg.source_grad(uses_globals)
    derivative(X)
    assert "def uses_globals_grad(x, W):" in derivative.source


class _Config:
    def __init__(self):
        self.scale = 2.0
        self.W = np.ones(3)


def test_attributes_of_a_captured_object_and_methods_reading_self():
    cfg = _Config()

    class Layer:
        def __init__(self):
            self.W = np.ones(3)

        def __call__(self, x):
            return x * self.W

        def loss(self, x):
            return np.sum(self(x) ** 2) * cfg.scale

    layer = Layer()

    def f(x):
        return np.sum(x * cfg.W) * cfg.scale + layer.loss(x)

    compiled, compiled_grad = wg.compile(f), wg.compile(f).grad()
    bound = wg.compile(layer.loss)
    for step in range(3):
        np.testing.assert_allclose(compiled(X), f(X), rtol=1e-13)
        np.testing.assert_allclose(compiled_grad(X), wg.grad(f)(X), rtol=1e-13)
        np.testing.assert_allclose(bound(X), layer.loss(X), rtol=1e-13)
        cfg.W[:] += 1.0
        layer.W *= 2.0
        cfg.scale = 3.0 + step
    assert vars(layer).keys() == {"W"} and type(layer.W) is np.ndarray  # put back after tracing


def test_arrays_inside_captured_lists_dicts_and_tuples():
    params = {"w": np.ones(3), "bs": [np.zeros(3), np.full(3, 0.5)]}
    pair = (np.ones(3), 2.0)

    def f(x):
        return np.sum(x * params["w"] + params["bs"][1]) * pair[1] + np.sum(pair[0] * x)

    compiled, compiled_grad, source = wg.compile(f), wg.compile(f).grad(), wg.source_grad(f)
    _agree(f, compiled, compiled_grad, source)
    params["w"][:] = 3.0
    params["bs"][1] = np.full(3, -1.0)
    pair[0][1] = 7.0
    _agree(f, compiled, compiled_grad, source)
    params["bs"].append(np.ones(3))  # the structure changed: traced again
    _agree(f, compiled, compiled_grad, source)
    assert type(params["w"]) is np.ndarray and all(type(b) is np.ndarray for b in params["bs"])


def test_integer_and_boolean_arrays_are_guarded_by_their_contents():
    mask = np.array([True, False, True])
    idx = np.array([2, 0])

    def f(x):
        return np.sum(x[mask] ** 2) + np.sum(x[idx])

    compiled = wg.compile(f).grad()
    np.testing.assert_allclose(compiled(X), wg.grad(f)(X))
    mask[1] = True
    idx[0] = 1
    np.testing.assert_allclose(compiled(X), wg.grad(f)(X))
    assert compiled.cache_info().misses == 2


def test_value_and_grad_and_keyword_calls_follow_captured_values():
    global SCALE

    def f(x, *, k=1.0):
        return np.sum(x * W) * SCALE * k

    vg = wg.compile(f).value_and_grad()
    compiled = wg.compile(f)
    SCALE = 2.0
    W[0] = 5.0
    value, grad = vg(X)
    np.testing.assert_allclose(value, f(X))
    np.testing.assert_allclose(grad, wg.grad(f)(X))
    assert compiled(X, k=3.0) == f(X, k=3.0)
    W[0] = -1.0
    assert compiled(X, k=3.0) == f(X, k=3.0)


def test_a_value_that_keeps_changing_keeps_at_most_eight_traces_and_warns():
    global SCALE
    compiled = wg.compile(uses_globals)
    with pytest.warns(RuntimeWarning, match="SCALE"):
        for k in range(10):
            SCALE = float(k)
            assert compiled(X) == uses_globals(X)
    assert compiled.cache_info().currsize == 8 and compiled.cache_info().misses == 10


# -- what cannot be followed is refused, naming the variable -----------------------------------------------

COUNT = 0


def assigns_a_global(x):
    global COUNT
    COUNT += 1
    return x * COUNT


def test_assigning_a_global_or_nonlocal_variable_is_refused():
    with pytest.raises(TracingError, match="assigns the global variable 'COUNT'"):
        wg.compile(assigns_a_global)(1.0)
    n = 0.0

    def f(x):
        nonlocal n
        n += 1.0
        return x * n

    with pytest.raises(TracingError, match="assigns the nonlocal variable 'n'"):
        wg.compile(f)(1.0)
    assert COUNT == 0 and n == 0.0


def test_writes_to_captured_state_are_refused_and_leave_it_as_it_was():
    cfg = _Config()
    acc = []

    def sets_attribute(x):
        cfg.scale = 4.0
        return x * cfg.scale

    def appends(x):
        acc.append(1)
        return x * 2.0

    def writes_array(x):
        cfg.W[0] = x
        return np.sum(cfg.W)

    with pytest.raises(TracingError, match="assigns cfg.scale, an attribute of a captured object"):
        wg.compile(sets_attribute)(1.0)
    with pytest.raises(TracingError, match=r"changes the captured list acc in place \(acc.append\)"):
        wg.compile(appends)(1.0)
    with pytest.raises(TracingError, match=r"writes into the captured array cfg.W \(float64\[3\]\)"):
        wg.compile(writes_array)(1.0)
    assert cfg.scale == 2.0 and acc == [] and type(cfg.W) is np.ndarray and cfg.W[0] == 1.0


def test_an_attribute_that_cannot_be_replaced_is_refused_by_name():
    class Frozen:
        __slots__ = ()

        @property
        def W(self):
            return W

    obj = Frozen()

    def f(x):
        return np.sum(x * obj.W)

    with pytest.raises(TracingError, match="the captured array obj.W cannot be replaced"):
        wg.compile(f)(X)


def test_captured_model_parameters_are_refused_with_what_to_do():
    from wengert import nn

    model = nn.Linear(3, 2)

    def f(x):
        return np.sum(model(x))

    with pytest.raises(TracingError, match="Parameter.*pass it as an argument"):
        wg.compile(f)(X)
    params = model.parameters_tree()
    compiled = wg.compile(lambda p, x: wnp.sum(model.apply(p, x)))
    np.testing.assert_allclose(compiled(params, X), np.sum(model.apply(params, X)))


def test_a_program_from_source_refuses_to_run_after_a_guarded_value_changed():
    global SCALE
    program = wg.Program.from_source(uses_globals, X)
    W[:] = 2.0
    np.testing.assert_allclose(program(X), uses_globals(X))
    SCALE = 2.0
    with pytest.raises(ValueError, match="the captured value SCALE changed"):
        program(X)


# -- property: random mutations and rebindings interleaved with calls --------------------------------------

_STEP = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 2), st.floats(-3.0, 3.0)),
    st.tuples(st.just("rebind"), st.just(0), st.sampled_from([0.5, 1.0, 2.0, -1.5])),
    st.tuples(st.just("call"), st.just(0), st.floats(-2.0, 2.0)),
)


@settings(max_examples=30, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=12))
def test_interleaved_mutations_and_calls_agree_with_the_plain_function(steps):
    global SCALE
    compiled, compiled_grad = wg.compile(calls_helper), wg.compile(calls_helper).grad(0)
    source = wg.source_grad(calls_helper)
    for kind, i, value in steps:
        if kind == "write":
            W[i] = value
        elif kind == "rebind":
            SCALE = value
        else:
            x = X + value
            np.testing.assert_allclose(compiled(x), calls_helper(x), rtol=1e-12)
            expected = wg.grad(calls_helper)(x)
            np.testing.assert_allclose(compiled_grad(x), expected, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(source(x), expected, rtol=1e-12, atol=1e-12)


def test_the_same_function_and_values_as_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    global SCALE
    W[:] = [0.5, 2.0, -1.0]
    SCALE = 3.0
    compiled_grad, source = wg.compile(calls_helper).grad(), wg.source_grad(calls_helper)
    compiled_grad(X)
    W[1] = 4.0  # after the first call: read at the next one
    expected = jax.grad(lambda x: jnp.sum((x * jnp.asarray(W)) ** 2) * SCALE)(jnp.asarray(X))
    np.testing.assert_allclose(compiled_grad(X), expected, rtol=1e-13)
    np.testing.assert_allclose(source(X), expected, rtol=1e-13)


def test_a_compiled_program_called_without_its_captured_arrays_reads_them_now():
    global SCALE
    program = wg.compile(uses_globals).program(X)
    W[:] = 3.0
    np.testing.assert_allclose(program(X), uses_globals(X))
    np.testing.assert_allclose(program(X, np.full(3, 0.5)), np.sum(np.sin(X) * 0.5))
    SCALE = 5.0
    with pytest.raises(ValueError, match="the captured value SCALE changed since it was traced"):
        program(X)
