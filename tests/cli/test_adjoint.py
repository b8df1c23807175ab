"""``python -m wengert adjoint``: example arguments by position or name (``--args``), and bad input
answered with one paragraph on stderr and exit status 2, never a traceback."""

import textwrap

import numpy as np
import pytest

import wengert as wg
from wengert.__main__ import main

SOURCE = """
import numpy as np

def loop(v, n):
    s = 0.0
    for i in range(n):
        s = s + v[i % 3] ** 2
    return s

def scaled(x, scale=2.0, shift=0.0):
    return np.sum(x * x) * scale + shift

def broken(x):
    return x.no_such_method()

def inverse(a):
    return np.sum(np.linalg.inv(a))

def repeat(x, n):
    for i in range(n):
        x = 0.9 * np.sin(x) + 0.1 * x
    return x

def sized(x, n, m):
    for row in x:
        m = m + np.sum(np.zeros(n) + row)
    return m + len(x) * x.sum()
"""


@pytest.fixture
def module(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent(SOURCE))
    return path


def _run(capsys, *argv):
    status = main(["adjoint", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("args", ["v=np.ones(3), n=4", "np.ones(3), 4", "np.ones(3), n=4",
                                  "n=4, v=np.ones(3)"])
def test_arguments_by_position_or_name(module, capsys, args):
    status, out, err = _run(capsys, f"{module}:loop", "--args", args)
    assert status == 0, err
    assert "def loop_grad(v):" in out and "for i in range(4):" in out
    namespace = {}
    exec(out, namespace)  # noqa: S102 - the program just printed
    v = np.array([0.5, -1.0, 2.0])
    want = wg.grad(lambda v: sum(v[i % 3] ** 2 for i in range(4)))(v)
    np.testing.assert_allclose(namespace["loop_grad"](v), want)


def test_a_skipped_default_is_filled_in(module, capsys):
    status, out, err = _run(capsys, f"{module}:scaled", "--args", "np.ones(2), shift=1.0", "--argnums", "0,2")
    assert status == 0, err
    assert "def scaled_grad(x, scale, shift):" in out  # scale: its default, 2.0


@pytest.mark.parametrize("argv, message", [
    (["{m}:loop"], "loop(v, n) needs example arguments: v is indexed (line 7), n is a bound of range() "
                   "(line 6), so the float 1.0 will not do; give them with --args, e.g. "
                   "--args 'v=np.ones(3), n=4'"),
    (["{m}:loop", "--args", "np.ones(3)"], "loop(v, n) needs more example arguments: n is a bound of "
                                           "range() (line 6)"),
    (["{m}:repeat"], "repeat(x, n) needs example arguments: n is a bound of range() (line 20), so the "
                     "float 1.0 will not do; give it with --args, e.g. --args 'n=4'"),
    (["{m}:sized"], "x is iterated over (line 25), n is the size given to zeros() (line 26)"),
    (["{m}:inverse"], "building the derivative of inverse(a=1.0) failed: LinAlgError"),
    (["{m}:loop", "--args", "v=np.ones(3), q=4"], "--args names q, which loop(v, n) does not take"),
    (["{m}:loop", "--args", "v=np.ones(3"], "--args 'v=np.ones(3' does not evaluate: SyntaxError"),
    (["{m}:loop", "--args", "np.ones(3), 4, 5"], "--args gives 3 arguments; loop(v, n) takes 2"),
    (["{m}:loop", "--args", "np.ones(3), v=np.ones(3)"], "gives v twice"),
    (["{m}:loop", "--args", "v=np.ones(3), n=4", "--argnums", "x"], "--argnums 'x': expected positions"),
    (["{m}:broken"], "broken(x) needs example arguments: x has .no_such_method (line 14)"),
    (["{m}:broken", "--args", "np.ones(3)"], "failed: AttributeError"),
    (["{m}:nope"], "defines no function 'nope'"),
    (["{d}/absent.py:f"], "no file"),
    (["no-colon"], "expected FILE.py:FUNCTION"),
], ids=["not-floats", "one-not-given", "range-bound", "iterated-and-size", "floats-by-default",
        "unknown-name", "syntax", "too-many", "twice", "argnums", "not-a-float-attribute", "user-error",
        "no-function", "no-file", "no-colon"])
def test_bad_input_is_one_paragraph_and_status_2(module, capsys, argv, message):
    argv = [a.format(m=module, d=module.parent) for a in argv]
    status, out, err = _run(capsys, *argv)
    assert status == 2
    assert message in err
    assert "Traceback" not in err and err.count("\n") == 1 and out == ""
    if argv[0].endswith(":inverse"):
        assert "a was the float 1.0: give example arguments with --args, e.g. --args 'a=np.ones(3)'" in err


def test_a_float_parameter_needs_no_arguments(module, capsys):
    status, out, err = _run(capsys, f"{module}:scaled")
    assert status == 0, err
    assert "def scaled_grad(x):" in out


def test_the_suggested_arguments_work(module, capsys):
    status, _, err = _run(capsys, f"{module}:repeat")
    suggested = err.split("--args '")[1].split("'")[0]
    assert status == 2 and suggested == "n=4"
    status, out, err = _run(capsys, f"{module}:repeat", "--args", suggested)
    assert status == 0, err
    assert "def repeat_grad(x):" in out


def test_a_module_that_fails_to_import(tmp_path, capsys):
    path = tmp_path / "bad.py"
    path.write_text("import numpy as np\n\nraise RuntimeError('boom')\n")
    status, _out, err = _run(capsys, f"{path}:f")
    assert status == 2 and "importing" in err and "RuntimeError: boom (line 3)" in err
