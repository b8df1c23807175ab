"""``wg.compile`` of functions whose trace refuses (Python control flow on a traced value, a plain
NumPy buffer, a list given to a NumPy function): built from source instead (``compiled_source.py``).

The functions below are written for this file, in the categories of Google Tangent's test functions
that ``wg.compile`` refused: ``if``/``elif``/``else`` on traced scalars, ``while`` loops with traced
conditions, ``for`` with ``break``/``continue``, nested loops, buffers filled in loops, lists
appended then stacked; and (issue 29) conditional expressions on traced values, ``for``/``while``
... ``else``, ``range(int(wg.stop_gradient(a)))`` (a count decided at run time; ``int()`` of a value
that carries a derivative is refused, as on the tape) and lists changed alike in both arms of a traced
``if``. Each one's compiled value must be the function's own (bit for bit), its
compiled gradient and ``value_and_grad`` those of ``wg.grad`` (or ``wg.source_grad`` where the tape
refuses a plain buffer) and of central finite differences, and of ``jax.grad`` where JAX can run
it (no jit: JAX follows Python control flow on concrete values). ``PROBES`` are constructs outside
what the source transformation takes: the error names both attempts, with file and line.
"""

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wengert as wg
from tests.support.engines import finite_differences
from wengert.core.errors import TracingError
from wengert.core.exits import ExitError

# -- if / elif / else on traced scalars ---------------------------------------------------------------


def relu_square(a):
    if a > 0:
        return a * a
    return -0.5 * a


def piecewise(a):
    if a < -1.0:
        y = -a - 0.5
    elif a < 1.0:
        y = 0.5 * a * a
    else:
        y = a - 0.5
    return 3.0 * y


def nested_if(a):
    if a > 0:
        if a < 2.0:
            a = a * a * a
        else:
            a = 4.0 * a
    else:
        a = 0.5 * a
    return a


def two_argument_if(a, b):
    if a > b:
        r = a * b
    else:
        r = a + b * b
    return r


def serial_ifs(a):
    if a > 0:
        a = a * 3.0
    a = a + 1.0
    if a < 2.0:
        a = a * a
    return a


def if_on_expression(a, b):
    if np.sin(a) * b > 0.1:
        return np.exp(a) * b
    return np.cos(b) * a


def if_without_else(a):
    b = 2.0 * a
    if b > 1.0:
        b = b * b
    return b + a


def if_with_and(a, b):
    if a > 0 and b > 0:
        return a * b
    return a + b


def if_on_an_element(x):
    if x[0] > x[1]:
        return np.sum(x * x)
    return 2.0 * np.sum(x)


def early_return(a):
    if a > 1.0:
        return a * a
    a = a * 3.0
    return a


def if_on_abs(a):
    if abs(a) < 0.5:
        return a * a * a
    return abs(a) * a


# -- while loops with traced conditions ---------------------------------------------------------------


def halve_until_small(a):
    while abs(a) > 1e-3:
        a = a * 0.5
    return a


def newton_sqrt(c):
    y = c
    while abs(y * y - c) > 1e-12 * c:
        y = 0.5 * (y + c / y)
    return y


def grow_and_count(a):
    k = 0
    while a < 10.0:
        a = a * 1.5 + 0.1
        k = k + 1
    return a * k


def while_with_break(a):
    while a < 100.0:
        a = a * a + 1.0
        if a > 50.0:
            break
    return a


def while_true_break(a):
    while True:
        a = a * 1.5
        if a > 10.0:
            break
    return a


def while_with_branches(a):
    while a > 1.0:
        if a > 5.0:
            a = a * 0.4
        else:
            a = a - 0.7
    return a


def shrink_array(x):
    while np.sum(x * x) > 1.0:
        x = x * 0.7
    return np.sum(x)


# -- for loops with break / continue -------------------------------------------------------------------


def for_with_break(a):
    for _ in range(10):
        a = a * 1.3 + 0.1
        if a > 5.0:
            break
    return a


def for_with_continue(x):
    s = 0.0
    for i in range(len(x)):
        if x[i] < 0:
            continue
        s = s + x[i] * x[i]
    return s


def first_above(x):
    index = 0
    for i in range(len(x)):
        if x[i] > 0.5:
            index = i
            break
    return x[index] * 2.0


def rows_if(m):
    s = 0.0
    for row in m:
        if row[0] > 0:
            s = s + np.sum(row * row)
    return s


def sum_until(x):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i]
        if s > 1.0:
            break
    return s * s


# -- nested loops ---------------------------------------------------------------------------------------


def pairs_if(x):
    s = 0.0
    for i in range(len(x)):
        for j in range(len(x)):
            if x[i] > x[j]:
                s = s + x[i] * x[j]
    return s


def while_in_for(a):
    for i in range(3):
        while a < 10.0 * (i + 1):
            a = a * 1.7 + 0.1
    return a


def for_in_while(a):
    while a < 20.0:
        for _ in range(2):
            a = a * 1.2 + 0.3
    return a


def inner_break(x):
    s = 0.0
    for i in range(3):
        for j in range(3):
            t = x[i] * x[j]
            if t > 0.3:
                break
            s = s + t
    return s


def squares_while_small(a):
    for _ in range(2):
        for _ in range(3):
            if a < 20.0:
                a = a * a * 0.9
    return a


# -- buffers filled in loops -----------------------------------------------------------------------------


def scaled_buffer(a):
    buf = np.zeros(4)
    for i in range(4):
        buf[i] = a * (i + 1)
    return np.sum(buf * buf)


def prefix_sums(x):
    out = np.zeros(len(x))
    acc = 0.0
    for i in range(len(x)):
        acc = acc + x[i]
        out[i] = acc
    return np.sum(out * out)


def recurrent_buffer(xs, w):
    h = np.zeros((4, 2))
    for t in range(3):
        h[t + 1] = np.tanh(w @ h[t] + xs[t])
    return np.sum(h[1:])


def outer_buffer(x):
    m = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            m[i, j] = x[i] * x[j]
    return np.sum(m * m)


def branch_stores(x):
    buf = np.zeros(len(x))
    for i in range(len(x)):
        if x[i] > 0:
            buf[i] = x[i] ** 2
        else:
            buf[i] = -x[i]
    return np.sum(buf)


def buffer_while(a):
    buf = np.zeros(6)
    i = 0
    while a < 10.0:
        buf[i] = a
        a = a * 2.0
        i = i + 1
    return np.sum(buf) + a


# -- lists appended, then stacked ---------------------------------------------------------------------


def stacked_list(a):
    out = []
    for i in range(3):
        out.append(a * (i + 1))
    return np.sum(np.stack(out))


def summed_list(a):
    b = [1.0, a * a, 2.0]
    return np.mean(b)


# -- conditional expressions, loop else, int() of a traced value, lists changed alike in both arms -----


def traced_conditional_expression(a):
    y = a * a if a > 0 else -a
    return 2.0 * y


def nested_conditional_expressions(a, b):
    y = (a * b if b > 0 else a + b) if a > 0 else (b * b if b < -1.0 else -a * b)
    return y * 2.0 + (a if a > b else 0.5 * b * b)


def conditional_expression_in_a_while_test(a):
    while (a if a > 0 else -a) > 0.1:
        a = a * 0.5
    return a


def for_else(a):
    for _ in range(5):
        a = a * 1.5
        if a > 4.0:
            break
    else:
        a = -a
    return a


def while_else(a):
    n = 0
    while a < 10.0:
        a = a * 1.5
        n = n + 1
        if n > 4:
            break
    else:
        a = a - 1.0
    return a * a


def nested_for_else(x):
    s = 0.0
    for i in range(3):
        for j in range(3):
            if x[i] * x[j] > 0.3:
                break
        else:
            s = s + x[i]  # no pair of x[i] above 0.3
            continue
        s = s + x[i] * x[i]
    return s


def range_of_a_traced_int(a):
    s = 0.0
    for i in range(int(a)):
        s = s + a * i
    return s


def range_of_a_stopped_int(a):
    """range_of_a_traced_int as every engine takes it (int() of a value it differentiates is refused)."""
    s = 0.0
    for i in range(int(wg.stop_gradient(a))):
        s = s + a * i
    return s


def list_with_branches(x):
    rows = []
    for i in range(len(x)):
        if x[i] > 0:
            rows.append(x[i] * x[i])
        else:
            rows.append(-x[i])
    return np.sum(np.stack(rows))


def rows_changed_in_an_arm(x):
    rows = [x[0], x[1], x[2]]
    for i in range(3):
        if x[i] > 0.2:
            rows[i] = rows[i] * x[i]
    return np.sum(np.stack(rows) * np.array([1.0, 2.0, 3.0]))


SCALES = {"a": 2.0}


def static_try_except(a):
    try:
        scale = SCALES["b"]  # no "b": a KeyError while the program is built, as at every call
    except KeyError as missing:
        scale = 3.0 + len(missing.args)
    else:
        scale = scale + 1.0
    finally:
        a = a * 1.5
    try:
        n = len(SCALES)
    except TypeError:
        n = 0
    else:
        n = n + 1  # no exception: the else block
    if a > 0:  # traced: wg.compile builds the program from source
        return a * scale * n
    return a - scale


# -- outside the source transformation's subset (the error names both attempts) ------------------------


def try_except(a):
    try:
        if a > 0:
            a = a * 2.0
    except ValueError:
        a = 0.0
    return a


def list_while(a):
    values = []
    while a < 5.0:
        values.append(a)
        a = a * 1.6
    return np.sum(np.stack(values)) + a


def append_in_one_arm(x):
    rows = [x[0]]
    for i in range(len(x)):
        if x[i] > 0:
            rows.append(x[i])
    return np.sum(np.stack(rows))


X3 = np.array([0.4, -0.3, 0.9])
X4 = np.array([0.1, 0.7, -0.2, 0.3])
M = np.array([[1.0, 2.0], [-1.0, 3.0], [0.5, 0.5]])
XS = np.array([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.2]])
W = np.array([[0.5, -0.3], [0.2, 0.8]])

# name -> (function, arguments (several sets: other branches), JAX can run it)
FUNCTIONS = {
    "relu_square": (relu_square, [(1.3,), (-0.7,)], True),
    "piecewise": (piecewise, [(-2.0,), (0.3,), (1.7,)], True),
    "nested_if": (nested_if, [(1.2,), (3.0,), (-1.0,)], True),
    "two_argument_if": (two_argument_if, [(2.0, 1.5), (1.0, 1.5)], True),
    "serial_ifs": (serial_ifs, [(0.2,), (-0.4,), (-3.0,)], True),
    "if_on_expression": (if_on_expression, [(0.7, 2.0), (-0.7, 2.0)], False),
    "if_without_else": (if_without_else, [(0.8,), (0.2,)], True),
    "if_with_and": (if_with_and, [(0.5, 2.0), (0.5, -2.0)], True),
    "if_on_an_element": (if_on_an_element, [(X3,), (X3[::-1].copy(),)], False),
    "early_return": (early_return, [(2.0,), (0.5,)], True),
    "if_on_abs": (if_on_abs, [(0.3,), (-1.4,)], True),
    "halve_until_small": (halve_until_small, [(2.0,), (-0.7,)], True),
    "newton_sqrt": (newton_sqrt, [(2.0,), (30.0,)], True),
    "grow_and_count": (grow_and_count, [(0.5,), (3.0,)], True),
    "while_with_break": (while_with_break, [(0.5,), (1.2,)], True),
    "while_true_break": (while_true_break, [(1.0,), (7.0,)], True),
    "while_with_branches": (while_with_branches, [(12.3,), (3.3,)], True),
    "shrink_array": (shrink_array, [(np.array([1.5, -0.8, 0.6]),)], False),
    "for_with_break": (for_with_break, [(0.4,), (-2.0,)], True),
    "for_with_continue": (for_with_continue, [(X4,)], True),
    "first_above": (first_above, [(X4,), (X3,)], True),
    "rows_if": (rows_if, [(M,)], False),
    "sum_until": (sum_until, [(X4,), (X3,)], True),
    "pairs_if": (pairs_if, [(X3,)], True),
    "while_in_for": (while_in_for, [(1.0,), (0.3,)], True),
    "for_in_while": (for_in_while, [(0.5,), (5.0,)], True),
    "inner_break": (inner_break, [(X3,), (X4[:3].copy(),)], True),
    "squares_while_small": (squares_while_small, [(1.1,), (3.0,)], True),
    "scaled_buffer": (scaled_buffer, [(0.7,)], False),
    "prefix_sums": (prefix_sums, [(X4,)], False),
    "recurrent_buffer": (recurrent_buffer, [(XS, W)], False),
    "outer_buffer": (outer_buffer, [(X3,)], False),
    "branch_stores": (branch_stores, [(X4,)], False),
    "buffer_while": (buffer_while, [(1.5,), (3.0,)], False),
    "stacked_list": (stacked_list, [(0.6,)], False),
    "summed_list": (summed_list, [(1.5,)], False),
    "traced_conditional_expression": (traced_conditional_expression, [(2.0,), (-1.5,)], True),
    "nested_conditional_expressions": (nested_conditional_expressions,
                                       [(1.0, 2.0), (1.0, -2.0), (-1.0, -2.0), (-1.0, 0.5)], True),
    "conditional_expression_in_a_while_test": (conditional_expression_in_a_while_test, [(3.0,), (-3.0,)],
                                               True),
    "for_else": (for_else, [(1.0,), (0.1,), (-3.0,), (5.0,)], True),
    "while_else": (while_else, [(1.0,), (8.0,), (20.0,)], True),
    "nested_for_else": (nested_for_else, [(X3,), (X4[:3].copy(),)], True),
    "range_of_a_stopped_int": (range_of_a_stopped_int, [(3.5,), (-2.5,), (0.7,), (6.2,)], False),
    "list_with_branches": (list_with_branches, [(X4,), (-X4,)], False),
    "rows_changed_in_an_arm": (rows_changed_in_an_arm, [(X3,), (X4[:3].copy(),)], False),
    "static_try_except": (static_try_except, [(1.5,), (-1.5,)], True),
}

TRACEABLE = {"stacked_list"}
"""Traced as they are (np.stack takes a list of traced values): no source needed."""

PROBES = {
    "range_of_a_traced_int": (range_of_a_traced_int, (3.5,),
                              "int() of a traced value that carries a derivative would drop it"),
    "try_except": (try_except, (1.0,), "try/except"),
    "list_while": (list_while, (0.7,), "a while loop changing a list"),
    "append_in_one_arm": (append_in_one_arm, (X4,), "changes rows in place in an arm so that its length"),
}

CASES = [pytest.param(name, k, id=f"{name}-{k}") for name, (_, arg_sets, _) in FUNCTIONS.items()
         for k in range(len(arg_sets))]


def _argnums(args):
    return tuple(range(len(args))) if len(args) > 1 else 0


def _as_tuple(g, args):
    return tuple(g) if len(args) > 1 else (g,)


def _tape_or_source_grad(f, args):
    """wg.grad's gradient; wg.source_grad's where the tape refuses a plain buffer (the store)."""
    try:
        return wg.grad(f, _argnums(args))(*args)
    except ExitError:
        return wg.source_grad(f, _argnums(args))(*args)


def _finite_differences(f, args):
    out = []
    for k, a in enumerate(args):
        def along(v, k=k):
            new = list(args)
            new[k] = float(v) if np.ndim(a) == 0 else v
            return f(*new)
        out.append(finite_differences(along, a, eps=1e-6))
    return out


@pytest.mark.parametrize("name, k", CASES)
def test_the_compiled_value_is_the_functions_own(name, k):
    f, arg_sets, _ = FUNCTIONS[name]
    args = arg_sets[k]
    compiled = wg.compile(f)
    np.testing.assert_array_equal(compiled(*args), f(*args))
    refusal = getattr(compiled.program(*args), "refusal", None)  # the trace's reason, if it refused
    assert (refusal is None) == (name in TRACEABLE), refusal


@pytest.mark.parametrize("name, k", CASES)
def test_the_compiled_gradient_is_the_tapes_and_finite_differences(name, k):
    f, arg_sets, _ = FUNCTIONS[name]
    args = arg_sets[k]
    got = _as_tuple(wg.compile(f).grad(_argnums(args))(*args), args)
    want = _as_tuple(_tape_or_source_grad(f, args), args)
    for g, w, fd in zip(got, want, _finite_differences(f, args)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
    value, grads = wg.compile(f).value_and_grad(_argnums(args))(*args)
    np.testing.assert_array_equal(value, f(*args))
    for g, w in zip(_as_tuple(grads, args), got):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name, k", [c for c in CASES if FUNCTIONS[c.values[0]][2]])
def test_the_compiled_gradient_is_jaxs(name, k):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f, arg_sets, _ = FUNCTIONS[name]
    args = arg_sets[k]
    want = _as_tuple(jax.grad(f, _argnums(args))(*[np.asarray(a) for a in args]), args)
    got = _as_tuple(wg.compile(f).grad(_argnums(args))(*args), args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", PROBES)
def test_what_neither_can_compile_names_both_attempts_with_file_and_line(name):
    f, args, source_reason = PROBES[name]
    with pytest.raises((TracingError, ExitError)) as info:
        wg.compile(f).grad()(*args)
    message = str(info.value)
    trace_part, _, source_part = message.partition(f" -- wg.compile({name}).grad(0) then built the program "
                                                   f"from the source instead (as wg.source_grad does), "
                                                   f"which refused too: ")
    assert source_part, message
    assert f"{__file__}, line " in trace_part and f"{__file__}, line " in source_part, message
    assert source_reason in source_part, message
    assert type(info.value.__cause__).__name__ == "TransformError"


def test_the_fallback_is_visible_and_counted_once():
    compiled = wg.compile(while_with_branches)
    assert compiled(12.3) == while_with_branches(12.3)
    assert compiled(3.3) == while_with_branches(3.3)  # the same signature: no second build
    assert compiled.cache_info().misses == 1 and compiled.cache_info().currsize == 1
    program = compiled.program(1.0)
    assert "while" in program.source and "if" in program.source  # the loop and the branch stay
    assert "Python control flow" in program.refusal and "while a > 1.0:" in program.refusal
    straight = wg.compile(lambda a: a * a)
    straight(2.0)
    assert getattr(straight.program(2.0), "refusal", None) is None  # traced: no refusal


def test_a_new_signature_builds_again_from_source():
    compiled = wg.compile(for_with_continue).grad()
    np.testing.assert_allclose(compiled(X4), wg.grad(for_with_continue)(X4), rtol=1e-12)
    np.testing.assert_allclose(compiled(X3), wg.grad(for_with_continue)(X3), rtol=1e-12)
    assert compiled.cache_info().misses == 2


def test_a_static_int_argument_stays_static():
    def power_until(a, n):
        for _ in range(n):
            if a > 100.0:
                break
            a = a * a
        return a

    compiled = wg.compile(power_until, static_argnums=1)
    for n in (1, 3, 5):
        assert compiled(1.5, n) == power_until(1.5, n)
        np.testing.assert_allclose(compiled.grad()(1.5, n), wg.grad(power_until)(1.5, n), rtol=1e-12)
    assert compiled.cache_info().misses == 3  # one program per value of n


def test_a_traced_int_argument_is_not_built_from_source():
    # the source program would hold n's value, but a traced int is not in the cache's key: refused
    def scaled_until(a, n):
        if a > 100.0:
            return a
        return a * n

    compiled = wg.compile(scaled_until)
    with pytest.raises(TracingError, match=r"Python control flow.*only when its int arguments are static.*"
                                           r"wg.compile\(scaled_until, static_argnums=1\)"):
        compiled(1.5, 3)
    static = wg.compile(scaled_until, static_argnums=1)
    assert [static(1.5, n) for n in (3, 4)] == [4.5, 6.0]


def test_captured_arrays_are_read_at_each_call():
    scale = np.array([2.0])

    def scaled_if(a):
        if a > 0:
            return a * scale[0]
        return -a

    compiled = wg.compile(scaled_if)
    assert compiled(1.5) == 3.0
    scale[0] = 5.0
    assert compiled(1.5) == 7.5 and compiled.grad()(1.5) == 5.0
    assert compiled.cache_info().misses == 1


def test_a_captured_values_check_is_not_sent_to_the_source_transformation():
    counter = [0]

    def writes_a_captured_list(a):
        counter.append(1)  # a captured list changed: refused by captures.py, not built from source
        return a * 2.0

    with pytest.raises(TracingError, match="counter") as info:
        wg.compile(writes_a_captured_list)(1.0)
    assert "built the program from the source" not in str(info.value)


def test_math_domain_and_python_float_arithmetic_give_numpys_values():
    def root_if(a):
        if a > -10.0:
            return (a - 1.0) ** 0.5 + math.sqrt(a * a)
        return a

    with np.errstate(invalid="ignore"):
        got = wg.compile(root_if)(-2.0)
        want = root_if(np.float64(-2.0))
    assert np.isnan(got) and np.isnan(want)


def test_compiled_from_source_under_an_outer_transform_runs_the_function():
    compiled = wg.compile(relu_square)
    assert wg.grad(compiled)(1.3) == wg.grad(relu_square)(1.3)
    assert wg.grad(compiled)(-0.7) == -0.5


def test_a_compiled_transform_of_a_function_with_control_flow_is_refused_not_miscompiled():
    # wg.grad(f) is wengert's function: its source is not f's, and a program built from f's source
    # (which inspect finds through __wrapped__) would be f's value, not its gradient
    for transform in (wg.grad, wg.hessian):
        with pytest.raises(TracingError, match=r"relu_square is a function of wengert's own .* compile your "
                                                r"function itself \(wg.compile\(f\).grad\(\)"):
            wg.compile(transform(relu_square))(1.3)


def _doubled(f):
    @functools.wraps(f)
    def wrapper(a):
        return 2.0 * f(a)
    return wrapper


@_doubled
def doubled_relu_square(a):
    if a > 0:
        return a * a
    return -0.5 * a


def test_a_decorated_function_is_built_from_the_wrappers_source_not_the_wrapped_ones():
    # inspect.getsource follows functools.wraps' __wrapped__: the program would lose the factor 2
    for a in (1.3, -0.7):
        assert wg.compile(doubled_relu_square)(a) == doubled_relu_square(a)
        assert wg.compile(doubled_relu_square).grad()(a) == wg.grad(doubled_relu_square)(a)
        assert wg.source_grad(doubled_relu_square)(a) == wg.grad(doubled_relu_square)(a)


_HYPOTHESIS = {name: (FUNCTIONS[name][0], wg.compile(FUNCTIONS[name][0]),
                      wg.compile(FUNCTIONS[name][0]).grad())
               for name in ("relu_square", "piecewise", "nested_if", "serial_ifs", "if_on_abs",
                            "halve_until_small", "while_with_branches", "for_with_break",
                            "squares_while_small", "traced_conditional_expression", "for_else", "while_else",
                            "conditional_expression_in_a_while_test", "static_try_except")}


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(_HYPOTHESIS)),
       a=st.floats(-20.0, 20.0, allow_nan=False).filter(lambda v: abs(v) > 1e-6))
def test_property_compiled_value_and_gradient_follow_the_branch_taken(name, a):
    f, compiled, compiled_grad = _HYPOTHESIS[name]  # one build each for all examples: floats share it
    assert compiled(a) == f(a)
    np.testing.assert_allclose(compiled_grad(a), wg.grad(f)(a), rtol=1e-12, atol=1e-300)


@settings(max_examples=30, deadline=None)
@given(x=st.lists(st.floats(-2.0, 2.0, allow_nan=False), min_size=4, max_size=4).map(np.array))
def test_property_array_loops_follow_the_elements(x):
    for f in _ARRAY_COMPILED:
        np.testing.assert_array_equal(_ARRAY_COMPILED[f][0](x), f(x))
        np.testing.assert_allclose(_ARRAY_COMPILED[f][1](x), _tape_or_source_grad(f, (x,)), rtol=1e-12,
                                   atol=1e-300)


_ARRAY_COMPILED = {f: (wg.compile(f), wg.compile(f).grad())
                   for f in (for_with_continue, sum_until, pairs_if, first_above, branch_stores,
                             list_with_branches, rows_changed_in_an_arm, nested_for_else)}


# -- what the six constructs read from source do (issue 29) -------------------------------------------

NEW = ["traced_conditional_expression", "nested_conditional_expressions",
       "conditional_expression_in_a_while_test", "for_else", "while_else", "nested_for_else",
       "range_of_a_stopped_int", "list_with_branches", "rows_changed_in_an_arm", "static_try_except"]


@pytest.mark.parametrize("name, k", [c for c in CASES if c.values[0] in NEW])
def test_source_grad_reads_them_as_compile_does(name, k):
    f, arg_sets, _ = FUNCTIONS[name]
    args = arg_sets[k]
    got = _as_tuple(wg.source_grad(f, _argnums(args))(*args), args)
    for g, w in zip(got, _as_tuple(_tape_or_source_grad(f, args), args)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_the_hidden_names_stay_hidden_in_the_program():
    for f, args in ((for_else, (1.0,)), (nested_conditional_expressions, (1.0, 2.0)), (while_else, (1.0,))):
        source = wg.compile(f).program(*args).source
        assert "__wg" not in source, source
    assert "no_break" in wg.compile(for_else).program(1.0).source  # the flag the else tests
    grad_source = wg.compile(traced_conditional_expression).grad().program(2.0).source
    assert "if " in grad_source and "__wg" not in grad_source, grad_source


def test_a_conditional_expression_evaluates_only_the_arm_its_static_test_takes():
    def guarded(x, k):
        return x[k] if k < len(x) else 0.0  # x[k] would be out of range: not evaluated, as in Python

    compiled = wg.compile(guarded, static_argnums=1)
    assert compiled(X3, 5) == 0.0 and compiled(X3, 1) == X3[1]
    np.testing.assert_array_equal(wg.source_grad(guarded)(X3, 1), [0.0, 1.0, 0.0])


def test_range_of_int_counts_at_run_time_in_one_program():
    compiled = wg.compile(range_of_a_stopped_int)
    for a in (3.5, 6.2, -2.5, 0.7):  # 3, 6, 0 and 0 iterations: one program for all
        assert compiled(a) == range_of_a_stopped_int(a)
        assert compiled.grad()(a) == wg.grad(range_of_a_stopped_int)(a)
    assert compiled.cache_info().misses == 1
    assert "range(" in compiled.program(3.5).source


def test_range_of_int_matches_torch():
    torch = pytest.importorskip("torch")
    for a in (3.5, 6.2, -2.5, 0.7, 1.0):
        t = torch.tensor(a, dtype=torch.float64, requires_grad=True)
        s = torch.zeros((), dtype=torch.float64)
        for i in range(int(t)):  # torch's int() leaves the graph, as wg.stop_gradient does
            s = s + t * i
        if s.requires_grad:  # no iteration: s is the constant 0, and a has no gradient (zero)
            s.backward()
        want = 0.0 if t.grad is None else t.grad.item()
        value, grad = wg.compile(range_of_a_stopped_int).value_and_grad()(a)
        np.testing.assert_allclose(value, s.item(), rtol=1e-14)
        np.testing.assert_allclose(grad, want, rtol=1e-14)


def test_int_of_a_traced_bool_or_int_keeps_its_value():
    def counted(a, x):
        n = int(a > 0.0) + int(x[1] > x[0]) * 2
        s = 0.0
        for i in range(n):
            s = s + a * x[i]
        return s

    for a, x in ((1.5, X3), (-1.5, X3), (1.5, X3[::-1].copy())):
        assert wg.compile(counted)(a, x) == counted(a, x)
        got, want = wg.compile(counted).grad((0, 1))(a, x), wg.grad(counted, (0, 1))(a, x)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(a=st.floats(-6.0, 12.0, allow_nan=False).filter(lambda v: abs(v - round(v)) > 1e-6))
def test_property_range_of_int_follows_the_value(a):
    assert _RANGE_OF_INT[0](a) == range_of_a_stopped_int(a)
    np.testing.assert_allclose(_RANGE_OF_INT[1](a), wg.grad(range_of_a_stopped_int)(a), rtol=1e-12)


_RANGE_OF_INT = (wg.compile(range_of_a_stopped_int), wg.compile(range_of_a_stopped_int).grad())


def test_a_list_changed_in_one_arm_only_names_the_line_and_what_to_do():
    with pytest.raises(wg.TransformError) as info:
        wg.source_grad(append_in_one_arm)(X4)
    message = str(info.value)
    line = append_in_one_arm.__code__.co_firstlineno + 3  # the if
    assert f"{__file__}, line {line}" in message, message
    assert "rows" in message and "append in each" in message and "wnp.where" in message


def test_a_try_body_computing_with_traced_values_is_refused_saying_where_and_what_to_do():
    with pytest.raises(wg.TransformError) as info:
        wg.source_grad(try_except)(1.0)
    message = str(info.value)
    assert f"try/except at {__file__}, line {try_except.__code__.co_firstlineno + 1}" in message, message
    assert "computes with traced values" in message and "move the try/except out of the function" in message


def test_a_try_body_raising_on_a_traced_value_is_refused_not_sent_to_the_except_arm():
    # len() of a 0-d traced value raises as NumPy's would, but what a library raises for a traced value
    # is not taken for what it raises for the array at run time: refused, never the except arm
    def sized(x):
        try:
            n = len(x)
        except TypeError:
            n = 1
        return np.sum(x) * n

    with pytest.raises(wg.TransformError, match=r"try/except at .*raised TypeError on a traced value"):
        wg.source_grad(sized)(1.5)
    assert wg.source_grad(sized)(np.ones(2)).tolist() == [2.0, 2.0]  # no exception: the body, as Python


def test_an_exception_the_except_arms_do_not_list_propagates():
    def unlisted(a):
        try:
            scale = SCALES["b"]
        except TypeError:
            scale = 1.0
        return a * scale

    with pytest.raises(KeyError):
        wg.source_grad(unlisted)(1.0)


def choice_in_a_lambda(a):
    g = lambda t: t * t if t > 0 else -t  # noqa: E731 - the lambda's body is read as it runs
    return g(a) + g(a - 2.0)


def choice_in_a_comprehension(x):
    return np.sum(np.stack([v * v if v > 0 else -v for v in x]))


def choice_as_an_index(x, a):
    out = np.zeros(3)
    out[1 if a > 0 else 2] = a * a  # a traced index into a buffer: wg.source_grad's (the tape refuses)
    return np.sum(out * x)


@pytest.mark.parametrize("f, args", [(choice_in_a_lambda, (a,)) for a in (1.5, 3.0, -1.0)]
                         + [(choice_in_a_comprehension, (X3,)), (choice_in_a_comprehension, (-X3,))]
                         + [(choice_as_an_index, (X3, a)) for a in (1.5, -1.5)],
                         ids=lambda v: getattr(v, "__name__", None))
def test_conditional_expressions_in_lambdas_comprehensions_and_indices(f, args):
    assert wg.compile(f)(*args) == f(*args)
    got = _as_tuple(wg.compile(f).grad(_argnums(args))(*args), args)
    for g, fd in zip(got, _finite_differences(f, args)):
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
    if f is not choice_as_an_index:
        for g, w in zip(got, _as_tuple(wg.grad(f, _argnums(args))(*args), args)):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_int_of_what_does_not_stay_traced_names_it_and_the_line():
    def complex_count(a):
        return int(a * 1j)

    with pytest.raises(wg.TransformError) as info:
        wg.source_grad(complex_count)(1.0)
    message = str(info.value)
    assert f"{__file__}, line {complex_count.__code__.co_firstlineno + 1}" in message, message
    assert "int() of a traced value" in message and "0-d real number" in message


@pytest.mark.parametrize("name, k", [c for c in CASES if c.values[0] in NEW])
def test_forward_mode_from_source_is_the_tapes(name, k):
    f, arg_sets, _ = FUNCTIONS[name]
    args = arg_sets[k]
    tangents = tuple(np.linspace(0.3, 0.9, np.size(a)).reshape(np.shape(a)) if np.ndim(a) else 0.7
                     for a in args)
    value, tangent = wg.source_jvp(f)(args, tangents)
    want_value, want_tangent = wg.jvp(f, args, tangents)
    assert value == want_value
    np.testing.assert_allclose(tangent, want_tangent, rtol=1e-12, atol=1e-14)


def test_a_finally_block_runs_after_a_return_in_the_try_body_as_in_python():
    def returns_early(a):
        log = {}
        try:
            return a * log.get("scale", 2.0)
        finally:
            log["done"] = True  # read, though the try body returned

    assert wg.source_grad(returns_early)(1.5) == wg.grad(returns_early)(1.5) == 2.0


def test_int_as_a_type_stays_pythons_and_only_a_call_is_read():
    def typed(a, k):
        buf = np.zeros(2, dtype=int)  # int as a dtype: Python's, not the traced call
        assert isinstance(k, int) and buf.dtype == np.dtype(int)
        n = int(wg.stop_gradient(a) * 2.0)  # made from a stopped value: carries no derivative
        s = a
        for _ in range(n):
            s = s * 1.5
        return s

    for a in (0.9, 2.3):
        np.testing.assert_allclose(wg.source_grad(typed)(a, 3), wg.grad(typed)(a, 3), rtol=1e-12)
        np.testing.assert_allclose(wg.compile(typed, static_argnums=1).grad()(a, 3), wg.grad(typed)(a, 3),
                                   rtol=1e-12)


def test_int_of_a_value_with_a_derivative_is_refused_as_on_the_tape():
    def scaled_count(a):
        return int(a * 2.0) * a

    with pytest.raises(ExitError):
        wg.grad(scaled_count)(1.3)
    with pytest.raises(wg.TransformError) as info:
        wg.source_grad(scaled_count)(1.3)
    message = str(info.value)
    assert f"{__file__}, line {scaled_count.__code__.co_firstlineno + 1}" in message, message
    assert "int(wg.stop_gradient(x))" in message and "would drop it" in message
