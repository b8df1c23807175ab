"""The source transformation's nested functions, lambdas, comprehensions and ``with`` statements:
gradients equal to the tape's, finite differences' and JAX's (the same source, run with ``jax.numpy``
as its array module), a Hypothesis property over inputs, Python's scoping (a callee's locals never
clobber the caller's, a closure reads the caller's variables at call time, a comprehension's loop
variable does not leak), the readable program, and the errors for what stays outside the subset."""

import contextlib
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
from tests.support.engines import finite_differences

X = np.array([0.5, -1.25, 2.0, 0.75])
W = np.array([0.3, -0.2, 0.7, 1.1])


def programs(xp):
    """The test programs, written once for an array module ``xp`` (NumPy here, ``jax.numpy`` for JAX)."""

    def closure_at_call_time(x, w):
        a = 2.0
        t = x * 3.0

        def g(y):
            t = y * w + a  # g's own t: the caller's is untouched
            return xp.sin(t) * t

        a = 0.5  # read by g when it is called, as Python reads a closure cell
        first = g(x)
        a = 1.5
        return xp.sum(first * g(x * 2.0) + t)

    def closure_in_a_loop(x, w):
        s = x * 0.0

        def step(y):
            return xp.tanh(y * w + s)  # reads the loop-carried s of this iteration

        for _ in range(3):
            s = step(x) + 0.5 * s
        return xp.sum(s * s)

    def closure_of_a_closure(x, w):
        def make(a):
            def scaled(y):
                return a * y + w
            return scaled

        double, triple = make(2.0), make(3.0)
        return xp.sum(double(triple(x)) ** 2)

    def lambdas(x, w):
        h = lambda y, k=2.0: y ** k * w  # noqa: E731
        sq = sum(map(lambda v: v * v, x))
        return xp.sum(h(x) + h(x, 3.0)) + sq

    def stacked_rows(x, w):
        n = x.shape[0]
        rows = xp.stack([x[i] * w for i in range(n)])
        return xp.sum(xp.sin(rows))

    def generator_sum(x, w):
        n = x.shape[0]
        return sum(x[i] ** 2 * w[i] for i in range(n))

    def nested_filters(x, w):
        n = x.shape[0]
        pairs = [x[i] * w[j] for i in range(n) for j in range(i) if (i + j) % 2 == 1 if j != 2]
        return sum(pairs) + sum(v * v for v in [x[k] for k in range(n) if k > 0])

    def zip_and_enumerate(x, w):
        s = sum(a * xp.cos(b) for a, b in zip(x, w))
        return s + sum(k * v ** 2 for k, v in enumerate(x))

    def dict_comprehension(x, w):
        d = {k: x[k] * w[k] for k in range(4) if k != 1}
        return d[0] * d[2] + d[3]

    def comprehension_scope(x, w):
        i = 2
        ys = [x[i] * w[i] for i in range(4)]
        x = [x for x in x]  # the iterable is read outside: the caller's x
        return x[i] * sum(ys)  # i is still 2

    def with_blocks(x, w):
        s = 0.0
        with np.errstate(divide="ignore"), contextlib.nullcontext() as nothing:
            assert nothing is None
            y = xp.log(x * x + 1.0) * w
        for i in range(4):
            with wg.no_grad():  # eager tensors only: a derivative all the same, as under wg.grad
                if x[i] > 0.0:
                    s = s + y[i] * x[i]
                else:
                    s = s - y[i]
        return s

    return {f.__name__: f for f in (closure_at_call_time, closure_in_a_loop, closure_of_a_closure, lambdas,
                                    stacked_rows, generator_sum, nested_filters, zip_and_enumerate,
                                    dict_comprehension, comprehension_scope, with_blocks)}


PROGRAMS = programs(np)
NAMES = sorted(PROGRAMS)


@pytest.mark.parametrize("name", NAMES)
def test_gradient_equals_the_tape_and_finite_differences(name):
    f = PROGRAMS[name]
    got = wg.source_grad(f, argnums=(0, 1))(X, W)
    want = wg.grad(f, argnums=(0, 1))(X, W)
    assert wg.Program.from_source(f, X, W)(X, W) == pytest.approx(f(X, W), rel=1e-12)
    for k, arr in enumerate((X, W)):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-14)
        partial = (lambda a: f(a, W)) if k == 0 else (lambda a: f(X, a))
        np.testing.assert_allclose(got[k], finite_differences(partial, arr), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_gradient_equals_jax_on_the_same_source(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    want = jax.grad(programs(jax.numpy)[name], argnums=(0, 1))(X, W)
    got = wg.source_grad(PROGRAMS[name], argnums=(0, 1))(X, W)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["closure_at_call_time", "stacked_rows", "zip_and_enumerate", "with_blocks"])
def test_forward_mode_equals_the_tape(name):
    f = PROGRAMS[name]
    t = (np.array([1.0, -0.5, 0.25, 2.0]), np.array([0.5, 0.5, -1.0, 0.0]))
    value, tangent = wg.source_jvp(f)((X, W), t)
    want_value, want_tangent = wg.jvp(f, (X, W), t)
    assert value == pytest.approx(want_value, rel=1e-12)
    assert tangent == pytest.approx(want_tangent, rel=1e-12, abs=1e-14)


_FLOATS = st.floats(-2.0, 2.0, allow_nan=False).filter(lambda v: abs(v) > 1e-3)  # with_blocks branches on 0


@settings(max_examples=25, deadline=None)
@given(st.lists(_FLOATS, min_size=4, max_size=4), st.lists(_FLOATS, min_size=4, max_size=4),
       st.sampled_from(NAMES))
def test_property_the_source_gradient_is_the_tapes_at_any_input(xs, ws, name):
    f, x, w = PROGRAMS[name], np.array(xs), np.array(ws)
    got = wg.source_grad(f, argnums=(0, 1))(x, w)  # built once per program: cached by shape
    want = wg.grad(f, argnums=(0, 1))(x, w)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-10, atol=1e-12)


def test_scoping_follows_python():
    f = PROGRAMS["comprehension_scope"]
    assert wg.Program.from_source(f, X, W)(X, W) == pytest.approx(X[2] * float(np.sum(X * W)))
    g = PROGRAMS["closure_at_call_time"]
    direct = np.sum(np.sin(X * W + 0.5) * (X * W + 0.5) * np.sin(2 * X * W + 1.5) * (2 * X * W + 1.5) + 3 * X)
    assert wg.Program.from_source(g, X, W)(X, W) == pytest.approx(direct, rel=1e-12)


def test_for_loops_over_zip_and_enumerate_are_unrolled():
    def f(x, w):
        s = 0.0
        for k, (a, b) in enumerate(zip(x, w)):
            s = s + k * a * b
        return s

    np.testing.assert_allclose(wg.source_grad(f)(X, W), np.arange(4) * W)


def test_the_docs_example(tmp_path):
    from tests.docs.test_readme import run_block

    ns, _, _ = run_block("docs/source.md", "def g(y):                   # a closure", tmp_path)
    f, x, w = ns["f"], ns["x"], ns["w"]
    np.testing.assert_allclose(wg.source_grad(f, (0, 1))(x, w), wg.grad(f, (0, 1))(x, w), rtol=1e-12)
    text = wg.source_grad(f).program(x, w).source.split("def f_grad(")[1]
    assert "rows = " in text and "t = " in text and "s = " in text


def test_the_programs_stay_readable():
    text = wg.source_grad(PROGRAMS["closure_at_call_time"], argnums=(0, 1)).program(X, W).source
    body = text.split("def closure_at_call_time_grad(")[1]
    assert "t = " in body and "t2 = " in body  # g's local t, beside the caller's t
    assert "first = " in body
    text = wg.source_grad(PROGRAMS["stacked_rows"]).program(X, W).source
    assert "rows = " in text
    for name in NAMES:
        text = wg.source_grad(PROGRAMS[name], argnums=(0, 1)).program(X, W).source
        assert "__" not in text.split("_grad(")[1], name  # no hidden names (__items, __wg_local_...)


# -- what stays outside ----------------------------------------------------------------------------------

STORED = []


def recursive(x):
    def power(y, n):
        return y if n == 0 else power(y * x, n - 1)  # recursion

    return np.sum(power(x, 3))


def returns_a_function(x):
    def g(y):
        return y * x

    return g


def stores_a_function(x):
    def g(y):
        return y * x

    STORED.append(g)
    return np.sum(x)


def nonlocal_write(x):
    c = 1.0

    def bump():
        nonlocal c
        c = c * 2.0

    bump()
    return np.sum(x * c)


def nested_generator(x):
    def items(y):
        for k in range(3):
            yield y * k

    return np.sum(sum(items(x)))


def decorated(x):
    @contextlib.contextmanager
    def g():
        yield

    return np.sum(x)


def traced_filter(x):
    return sum(v for v in x if v > 0.0)


def traced_trip_count(x):
    n = np.sum(x > 0.0)
    return sum([x[i] for i in range(n)])


def suppressed(x):
    with contextlib.suppress(Exception):
        x = x * undefined_name  # noqa: F821
    return np.sum(x)


OUTSIDE = [
    (recursive, "calls itself", "Write it as a loop"),
    (returns_a_function, "returns the nested function g", "Call g inside returns_a_function"),
    (nonlocal_write, "nonlocal statement", "return the new value from the nested function"),
    (nested_generator, "generator (yield)", "build a list and return it"),
    (decorated, "decorated nested function (g)", "define g without the decorator"),
    (traced_filter, "the filter `if v > 0.0` of a generator expression is a traced value", "wnp.where"),
    (traced_trip_count, "list comprehension over a range whose bounds are traced values", "wg.grad"),
    (suppressed, "suppressed an error raised while the program was built", "cannot skip the rest"),
]


@pytest.mark.parametrize("f, what, instead", OUTSIDE, ids=[f.__name__ for f, _w, _i in OUTSIDE])
def test_what_stays_outside_is_refused_with_file_line_and_remedy(f, what, instead):
    with pytest.raises(wg.TransformError) as info:
        wg.source_grad(f)(X)
    message = str(info.value)
    assert what in message and instead in message and "wg.grad" in message
    lines, start = inspect.getsourcelines(f)
    assert any(f"{__file__}, line {n}" in message for n in range(start, start + len(lines))), message


def test_a_stored_nested_function_called_later_is_refused():
    STORED.clear()
    with pytest.raises(wg.TracingError, match="captured list STORED"):  # the build sees the change
        wg.source_grad(stores_a_function)(X)
    assert len(STORED) == 1
    with pytest.raises(wg.TransformError, match=r"nested function g \(defined at .*\) was called after the "
                                                r"program was built.*Call g inside stores_a_function"):
        STORED.pop()(1.0)
