"""The source transformation (``wg.Program.from_source``, ``wg.source_grad``, ``wg.source_jvp``): the
second seed's example, 40 programs with control flow checked against the tape and finite
differences, the generated source run on its own, and the constructs outside the subset."""

import inspect
import math
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import wengert as wg
from tests.support import source_programs as sp
from wengert.program.source.adjoint import grad_source

TAPE_CANNOT = {sp.straight_math, sp.functional_update}  # math on tensors; writing into a np.zeros array


def _as_tuple(g, argnums):
    return tuple(g) if isinstance(argnums, tuple) else (g,)


def _finite_differences(f, args, argnums, eps=1e-6):
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    out = []
    for k in nums:
        x = np.asarray(args[k], dtype=float)
        g = np.zeros(x.shape)
        for idx in np.ndindex(x.shape):
            step = np.zeros(x.shape)
            step[idx] = eps
            hi = list(args)
            lo = list(args)
            hi[k] = x + step if x.shape else float(x + eps)
            lo[k] = x - step if x.shape else float(x - eps)
            g[idx] = (f(*hi) - f(*lo)) / (2 * eps)
        out.append(g)
    return tuple(out)


def test_seed_example_value_gradient_and_table():
    p = wg.Program.from_source(sp.seed_example, 2.0, 5.0)
    assert p(2.0, 5.0) == pytest.approx(math.log(2.0) + 10.0 - math.sin(5.0))
    assert p(2.0, 5.0) == pytest.approx(11.652071455223084, abs=1e-12)
    g = wg.source_grad(sp.seed_example, argnums=(0, 1))
    d1, d2 = g(2.0, 5.0)
    assert d1 == pytest.approx(5.5) and d2 == pytest.approx(2.0 - math.cos(5.0))
    assert d2 == pytest.approx(1.716337814536774)
    table = g.table()
    lines = table.splitlines()
    assert lines[0].split() == ["forward", "(read", "top-down)", "reverse", "(read", "bottom-up)"]
    row = {line.split("  ")[0]: line for line in lines[2:] if line and not line.startswith(" ")}
    assert "v1 = log(x1)" in row and "/ x1" in row["v1 = log(x1)"]  # v1_bar / v_{-1}
    assert "v2 = x1 * x2" in row and "y_bar * x2" in row["v2 = x1 * x2"]
    assert "v4 = sin(x2)" in row and "cos(x2)" in row["v4 = sin(x2)"]
    assert "y = v3 - v4" in row and "-y_bar" in row["y = v3 - v4"]
    assert "return y" in row and "y_bar = 1.0" in row["return y"]


@pytest.mark.parametrize("fun,args,argnums", sp.PROGRAMS,
                         ids=[f"{f.__name__}-{k}" for k, (f, _a, _n) in enumerate(sp.PROGRAMS)])
def test_gradient_agrees_with_tape_and_finite_differences(fun, args, argnums):
    before = [np.array(a, copy=True) for a in args]
    d = wg.source_grad(fun, argnums)
    g = _as_tuple(d(*args), argnums)
    again = _as_tuple(d(*args), argnums)  # nothing it wrote into (its constants, its buffers) leaks
    for a, b in zip(g, again):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)  # the arguments are not written into
    fd = _finite_differences(fun, args, argnums)
    for a, b in zip(g, fd):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    if fun not in TAPE_CANNOT:
        tape = _as_tuple(wg.grad(fun, argnums)(*args), argnums)
        for a, b in zip(g, tape):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fun,args,argnums", sp.PROGRAMS[::3],
                         ids=[f.__name__ for f, _a, _n in sp.PROGRAMS[::3]])
def test_generated_source_runs_on_its_own(fun, args, argnums):
    d = wg.source_grad(fun, argnums)
    expected = _as_tuple(d(*args), argnums)
    text = d.source
    assert "wengert" not in text and "supplied by" not in text
    namespace = {"__name__": "standalone"}
    exec(compile(text, "<standalone>", "exec"), namespace)  # noqa: S102 - the point of the test
    flat = [a for a in args if not isinstance(a, int)]
    got = _as_tuple(namespace[f"{fun.__name__}_grad"](*flat), argnums)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fun,args,argnums", sp.PROGRAMS[1::2],
                         ids=[f.__name__ for f, _a, _n in sp.PROGRAMS[1::2]])
def test_jvp_is_the_gradient_along_a_direction(fun, args, argnums):
    rng = np.random.default_rng(0)
    tangents = tuple(rng.normal(size=np.shape(a)) if not isinstance(a, int) else 0 for a in args)
    tangents = tuple(float(t) if isinstance(a, float) else t for a, t in zip(args, tangents))
    value, tangent = wg.source_jvp(fun)(args, tangents)
    assert value == pytest.approx(fun(*args))
    nums = tuple(k for k, a in enumerate(args) if not isinstance(a, int))
    grads = _finite_differences(fun, args, nums)
    expected = sum(float(np.sum(g * tangents[k])) for g, k in zip(grads, nums))
    assert tangent == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_loops_stay_loops_with_in_place_accumulation():
    v = np.arange(6.0)
    d = wg.source_grad(sp.sum_squares)
    np.testing.assert_allclose(d(v), 2 * v)
    text = d.source
    assert text.count("for i in range(6):") == 1 and "for i in range(n - 1, -1, -1):" in text
    assert "stack" not in text and text.count("v1 = v[i]") == 2  # v[i] and i are computed again, not kept
    assert "v_bar[i] += " in text and "v_bar = np.zeros((6,))" in text
    assert "s_bar" in text


def test_while_with_unknown_trip_count_records_it():
    d = wg.source_grad(sp.while_data_exit)
    text = d.source
    assert "while " in text and "n += 1" in text and "for _ in range(n):" in text
    for x in (0.5, 1.5, 9.0, 11.0):  # 0 to several iterations
        assert d(x) == pytest.approx(wg.grad(sp.while_data_exit)(x))


def test_branch_records_which_arm_ran_and_jvp_names_dots():
    d = wg.source_grad(sp.if_else)
    assert d(2.0) == pytest.approx(12.0) and d(0.5) == pytest.approx(3 * math.cos(0.5))
    assert d.source.count("if v1:") == 2  # forward and reverse test the same recorded condition
    j = wg.source_jvp(sp.if_else)
    assert "x_dot" in j.source
    assert j((2.0,), (1.0,))[1] == pytest.approx(12.0)


def test_program_from_source_runs_and_prints():
    p = wg.Program.from_source(sp.branch_in_loop, sp.V8)
    assert p(sp.V8) == pytest.approx(sp.branch_in_loop(sp.V8))
    assert "for i in range(8):" in p.source and "if " in p.source
    assert p.grad()(sp.V8) == pytest.approx(wg.grad(sp.branch_in_loop)(sp.V8))


def test_user_calls_are_transformed_recursively():
    text = wg.source_grad(sp.calls_user, (0, 1)).program(0.8, -0.6).source
    assert "helper" not in text.split("def ", 2)[1].split("\n", 1)[1]  # inlined, no call left


def test_derivative_program_is_cached_per_signature():
    d = wg.source_grad(sp.power_iteration)
    assert d.program(0.5, 3) is d.program(0.7, 3)
    assert d.program(0.5, 3) is not d.program(0.5, 4)


# -- outside the subset ----------------------------------------------------------------------------------

def f_try(x):
    try:
        y = x * 2.0
    except ValueError:
        y = x
    return y


def f_generator(x):
    yield x


def f_setcomp(v):
    return sum({v * k for k in range(3)})


G = 2.0


def f_global(x):
    global G
    return x * G


def make_nonlocal():
    c = 1.0

    def f_nonlocal(x):
        nonlocal c
        c = c + 1.0
        return x * c

    return f_nonlocal


def f_return_in_loop(x):
    for _ in range(3):
        if x > 1.0:
            return x
        x = x * 2.0
    return x


def f_exec(x):
    exec("pass")
    return x


def f_or(x):
    return (x > 0.0) or -x  # a traced and/or (a if c else b is read: test_compile_control_flow.py)


BAD = [
    (f_try, "try/except"), (f_generator, "generator (yield)"),
    (f_setcomp, "set comprehension"), (f_global, "global statement"), (make_nonlocal(), "nonlocal"),
    (f_return_in_loop, "return inside a loop"), (f_exec, "exec()"),
    (f_or, "and/or"),
]


@pytest.mark.parametrize("fun,construct", BAD, ids=[f.__name__ for f, _c in BAD])
def test_unsupported_constructs_raise_transform_error_with_file_and_line(fun, construct):
    with pytest.raises(wg.TransformError) as info:
        wg.source_grad(fun)(0.5)
    message = str(info.value)
    assert construct in message
    assert __file__ in message
    lines, start = inspect.getsourcelines(fun)
    numbers = [int(w.rstrip(":,)")) for w in message.replace(",", " ").split() if w.rstrip(":,)").isdigit()]
    assert any(start <= n < start + len(lines) for n in numbers), message
    assert "wg.grad" in message
    assert isinstance(info.value, TypeError)


def test_lambdas_sharing_a_line_are_told_apart():
    pair = (lambda x: x * x, lambda x: x + x)  # two lambdas, the same parameters, one line
    assert wg.source_grad(pair[0])(3.0) == 6.0
    assert wg.source_grad(pair[1])(3.0) == 2.0


def test_loop_changing_shape_is_explained():
    def grows(x):
        s = 0.0
        for _ in range(2):
            s = s + x
        return s.sum()

    with pytest.raises(wg.TransformError, match="changes the shape of s"):
        wg.source_grad(grows)(np.ones(3))


def test_grad_of_non_scalar_is_refused():
    def vec(x):
        return x * 2.0

    with pytest.raises(TypeError, match="one scalar"):
        grad_source(wg.Program.from_source(vec, np.ones(2)))


# -- command line ---------------------------------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "wengert", "adjoint", *args], capture_output=True, text=True)


def test_cli_prints_the_derivative_program_and_the_table(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent("""
        import numpy as np

        def f(x1, x2):
            y = np.log(x1) + x1 * x2 - np.sin(x2)
            return y

        def g(v):
            s = 0.0
            for i in range(len(v)):
                s += v[i] * v[i]
            return s
    """))
    out = _cli(f"{path}:f", "--argnums", "0,1")
    assert out.returncode == 0, out.stderr
    assert "def f_grad(x1, x2):" in out.stdout and "return (x1_bar" in out.stdout
    table = _cli(f"{path}:f", "--table", "--argnums", "0,1")
    assert "forward (read top-down)" in table.stdout and "v1 = log(x1)" in table.stdout
    loop = _cli(f"{path}:g", "--args", "np.ones(4)")
    assert "for i in range(4):" in loop.stdout and "v_bar[i] +=" in loop.stdout
    bad = _cli(f"{path}:nope")
    assert bad.returncode != 0 and "nope" in bad.stderr


def test_readme_shows_the_program_that_is_generated(tmp_path):
    import importlib.util
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "source.md").read_text()
    section = page.split("# From source, with control flow")[1]
    shown = section.split("def f_grad(v):\n", 1)[1].split("```", 1)[0]
    example = section.split("```python\n", 1)[1].split("\ndf = ", 1)[0]
    path = tmp_path / "readme_example.py"
    path.write_text("import numpy as np\n\n\n" + example + "\n")
    spec = importlib.util.spec_from_file_location("readme_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    d = wg.source_grad(module.f)
    got = d(np.array([1.0, -2.0, 3.0]))
    np.testing.assert_allclose(got, [2.0, -math.cos(-2.0), 6.0])
    assert d.source.split("def f_grad(v):\n", 1)[1] == shown


def test_loop_over_a_list_is_unrolled():
    def over_list(x, y):
        s = 0.0
        for w in [x, y, x * y]:
            s = s + np.sin(w)
        return s

    d = wg.source_grad(over_list, (0, 1))
    np.testing.assert_allclose(d(0.3, 0.8), wg.grad(over_list, (0, 1))(0.3, 0.8))


def test_variable_from_one_arm_used_later_names_the_line():
    def one_arm(x):
        if x > 0.0:
            y = x * 2.0
        return y

    with pytest.raises(wg.TransformError, match=r"line \d+.*one branch"):
        wg.source_grad(one_arm)(1.0)


def _loop_body(text):
    """The indented lines after a loop's header."""
    lines = text.split("\n")[1:]
    depth = len(lines[0]) - len(lines[0].lstrip())
    body = []
    for line in lines:
        if len(line) - len(line.lstrip()) < depth:
            break
        body.append(line)
    return "\n".join(body)


def test_functional_updates_in_loops_are_written_in_place():
    d = wg.source_grad(sp.prefix_sums)
    np.testing.assert_allclose(d(sp.V8), wg.grad(sp.prefix_sums)(sp.V8), rtol=1e-12)
    text = d.source.split("def prefix_sums_grad")[1]
    loops = [_loop_body(part) for part in text.split("for ")[1:]]
    assert re.search(r"out\d*\[i\] = ", loops[0]) and ".copy()" not in loops[0]  # out[i] = out[i-1] + v[i]
    assert re.search(r"out\d*_bar\d*\[i\] = 0.0", loops[1]) and ".copy()" not in loops[1]  # zeroed in place
    assert re.search(r"out\d*_bar\d*\[v\d+\] \+= ", loops[1])  # the read out[i - 1]'s adjoint, in place
    assert len(re.findall(r"np\.array\(out\d*, copy", text)) == 1  # one copy per loop
    assert len(re.findall(r"np\.array\(out\d*_bar\d*, copy", text)) == 1
    v = np.arange(4.0)
    p = wg.Program.from_source(sp.prefix_sums, v)
    assert p(v) == pytest.approx(sp.prefix_sums(v)) and re.search(r"out\d*\[i\] = ", p.source)
    assert p(v) == pytest.approx(sp.prefix_sums(v))  # the caller's arrays and constants stay as they were


def test_updated_array_read_whole_in_the_loop_is_copied():
    text = wg.source_grad(sp.update_and_read).program(sp.V5).source.split("def update_and_read_grad")[1]
    assert ".copy()" in _loop_body(text.split("for ")[1])


def test_a_for_loop_that_never_runs_leaves_its_variables_alone():
    def f(v, w):
        s = w * 2.0
        for i in range(len(v)):
            s = s + v[i] * v[i]
        return s

    g = wg.source_grad(f, argnums=(0, 1))(np.zeros(0), 1.5)
    assert g[0].shape == (0,) and g[1] == 2.0


def f_traced_or(x):
    y = (x > 0) or -x
    return y


def test_a_traced_and_or_inside_an_expression_says_what_to_write():
    # the advice fits the front end in use: an if statement, a if c else b, wnp.where, or the tape --
    # not wg.Program.from_source, which is what source_grad already is
    with pytest.raises(wg.TransformError) as info:
        wg.source_grad(f_traced_or)(1.0)
    message = str(info.value)
    assert "test_source.py, line" in message and "write it as an if statement" in message
    assert "a if c else b" in message and "and/or" in message
    assert "wnp.where" in message and "wg.grad" in message
    assert "from_source" not in message


def f_stack_in_a_loop(v):
    s = 0.0
    for i in range(3):
        if v[i] > 0.0:
            s = s + np.sum(np.stack([v, v * v]) * v[i])
        else:
            s = s - v[i]
    return s


def test_stack_inside_a_loop_beside_the_loops_own_stack():
    # the generated code keeps a list named `stack` for its loops: stacking arrays must not be spelled
    # with that name
    x = np.array([1.0, -2.0, 3.0])
    d = wg.source_grad(f_stack_in_a_loop)
    np.testing.assert_allclose(d(x), wg.grad(f_stack_in_a_loop)(x), rtol=1e-14)
    assert "np.stack((" in d.source and "stack = []" in d.source


def f_names_like_the_modules(v):
    s = 0.0
    for i in range(3):
        masked = v * v[i]  # the name of a helper generated code includes
        cos = np.sin(masked)  # the name of a math function generated code imports
        s = s + np.sum(np.where(v > 0.5, np.cos(cos), 0.0))
    return s


def test_user_variables_named_like_helpers_or_math_functions_do_not_shadow_them():
    x = np.array([1.0, -2.0, 3.0])
    d = wg.source_grad(f_names_like_the_modules)
    np.testing.assert_allclose(d(x), wg.grad(f_names_like_the_modules)(x), rtol=1e-13)
    h = 1e-6
    e0 = np.array([h, 0.0, 0.0])
    fd = (f_names_like_the_modules(x + e0) - f_names_like_the_modules(x - e0)) / (2 * h)
    np.testing.assert_allclose(d(x)[0], fd, rtol=1e-6)
