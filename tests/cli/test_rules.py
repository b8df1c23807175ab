"""``python -m wengert rules``: every differentiable primitive once, with its derivatives' formulas,
modes, facts and ``saves``; internal primitives apart; the exceptions to ``rev fwd vmap`` listed once."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import wengert
from wengert import rules as ops
from wengert.__main__ import main
from wengert.cli import rules as cli_rules
from wengert.engines.batching import batching_rule

_TEXT = {}


def _table(capsys=None):
    if "text" not in _TEXT:  # the table is the same on every call: computed once for the module
        assert main(["rules"]) == 0
        _TEXT["text"] = capsys.readouterr().out
    return _TEXT["text"]


def _sections(text):
    """(public rows' lines, internal rows' lines, the exceptions' lines)."""
    public, rest = text.split("\ninternal (", 1)
    internal, rest = rest.split("\nmodes: ", 1)
    rest = rest.split('\nbackend="numba"', 1)[0]
    return public.splitlines()[2:], internal.splitlines()[1:], rest.splitlines()


def _row(text, name):
    rows = [line for line in text.splitlines() if line.split("  ")[0].strip() == name]
    assert len(rows) == 1, (name, rows)
    return [c.strip() for c in rows[0].split("  ") if c.strip()]


def _cell(text, name, column):
    """A row's cell by its column's position under the header (cells may be empty)."""
    head = text.splitlines()[0]
    start = head.index(column)
    after = [head.index(c) for c in cli_rules._HEAD if head.index(c) > start]
    line = next(line for line in text.splitlines() if line.split("  ")[0].strip() == name)
    return line[start:min(after) if after else None].strip()


def _formulas(text, name):
    """The ``d/dx = ...`` lines under a primitive's row."""
    lines = text.splitlines()
    k = next(i for i, line in enumerate(lines) if line.split("  ")[0].strip() == name)
    out = []
    for line in lines[k + 1:]:
        if not line.startswith("    "):
            break
        out += [f.strip() for f in line.split(";  ")]
    return out


def test_every_differentiable_primitive_is_listed_once(capsys):
    text = _table(capsys)
    public, internal, _ = _sections(text)
    listed = [line.split()[0] for line in public + internal if line and not line.startswith(" ")]
    assert sorted(listed) == sorted(ops.rule_table())
    assert f"{len(listed)} primitives ({len(internal)} internal): " in text


def test_facts_and_spelling_of_known_primitives(capsys):
    text = _table(capsys)
    assert _row(text, "add") == ["add", "elementwise", "float", "fresh, broadcasts", "nothing", "a + b"]
    assert _cell(text, "sin", "generated code") == "np.sin, math.sin on floats"
    assert _cell(text, "matmul", "facts") == "linear in 0,1, fresh"
    assert _cell(text, "negative", "generated code") == "-a"
    assert _cell(text, "untake", "generated code") == "untake(...) (helper)"
    assert _cell(text, "cumsum", "generated code") == "np.cumsum"  # a rules primitive with NumPy's name
    assert _cell(text, "relu", "generated code") == "its implementation"


def test_the_numba_backend_section_says_which_primitives_compile_natively(capsys):
    pytest.importorskip("numba")
    text = _table(capsys)
    native = text.split('backend="numba": ', 1)[1].split("the others run as Python", 1)
    names = re.findall(r"[\w.]+", native[0].split("):", 1)[1])
    assert {"sin", "add", "matmul", "getitem"} <= set(names) and "linalg.det" not in names
    assert re.search(r"a Python implementation: .*\blinalg\.det\b", " ".join(native[1].split()))
    assert re.search(r"Numba has no np\.einsum: einsum", native[1])


def test_absolute_names_the_builtin_it_calls_on_floats(capsys):
    """``abs`` is a builtin: there is no ``math.abs`` (the code generator writes ``abs(x)``)."""
    text = _table(capsys)
    assert _cell(text, "absolute", "generated code") == "np.absolute, builtin abs on floats"
    assert "math.abs" not in text
    for fn in re.findall(r"math\.(\w+) on floats", text):
        assert callable(getattr(__import__("math"), fn)), fn


def test_facts_come_from_the_primitives(capsys):
    """A fact set on a primitive shows (the table reads it from the primitive)."""
    prim = ops.rule_table()["relu"]
    try:
        prim.linear = (0,)  # as facts(prim, linear=(0,)) would set it (not true of relu: only shown here)
        assert "linear in 0" in cli_rules.render()
        assert "linear in 0" in _cell(cli_rules.render(), "relu", "facts")
    finally:
        prim.linear = ()


# -- formulas --------------------------------------------------------------------------------------------

def test_formulas_of_familiar_derivatives(capsys):
    text = _table(capsys)
    assert _formulas(text, "sin") == ["d/dx = cos(x)"]
    assert _formulas(text, "exp") == ["d/dx = exp(x)"]  # the rule reads out: written as the call
    assert _formulas(text, "cos") == ["d/dx = -sin(x)"]
    assert _formulas(text, "multiply") == ["d/dx = y", "d/dy = x"]
    assert _formulas(text, "add") == ["d/dx = 1.0", "d/dy = 1.0"]
    assert _formulas(text, "arctan2")[0].startswith("d/dy = ")  # arctan2(y, x): NumPy's names
    assert _formulas(text, "absolute") == ["d/dx: a rule of its own"]  # not a multiplier (complex x)
    assert _formulas(text, "sinc")[0].startswith("d sinc / dx = ")  # too long traced: its docstring
    assert _formulas(text, "matmul") == []  # not elementwise


_NAMESPACE = {**{k: getattr(np, k) for k in dir(np) if not k.startswith("_")}, "pi": np.pi}
_FORMULA = re.compile(r"d/d(\w+) = (.*)")


def _elementwise_formulas():
    out = []
    for prim in ops.rule_table().values():
        for text in cli_rules.formulas(prim):
            m = _FORMULA.fullmatch(text)
            if m:
                out.append((prim, cli_rules._arg_names(prim), m.group(1), m.group(2)))
    return out


def test_every_elementwise_primitive_with_derivatives_shows_them():
    shown = {p.__name__ for p, *_ in _elementwise_formulas()}
    defined = {p.__name__ for p in ops.rule_table().values()
               if p.derivatives and any(callable(d) or isinstance(d, float) for d in p.derivatives)}
    assert defined - shown == {"sinc"}  # its formula is its docstring's (the series near 0 is long)
    assert {"sin", "power", "arctan2", "logaddexp"} <= shown


def _central(prim, args, k, h):
    up, down = list(args), list(args)
    up[k], down[k] = args[k] + h, args[k] - h
    return (prim.fun(*up) - prim.fun(*down)) / (2 * h)


@settings(max_examples=25, deadline=None)
@example([1.5703125, 0.5, 0.5])  # tan's pole at pi/2 nearby: the differences did not converge there
@given(st.lists(st.floats(0.15, 0.85) | st.floats(1.2, 3.0), min_size=3, max_size=3))
def test_formulas_are_the_derivatives(points):
    """Each formula, evaluated with NumPy's functions, is the primitive's derivative (central finite
    differences of NumPy's function), wherever both are finite."""
    for prim, names, wrt, expr in _elementwise_formulas():
        args = [np.float64(p) for p in points[:len(names)]]
        k = names.index(wrt)
        with np.errstate(all="ignore"):
            value = eval(expr, dict(_NAMESPACE), dict(zip(names, args)))  # noqa: S307 - our own text
            h = 1e-6 * max(1.0, abs(args[k]))
            fd_h, fd_half = _central(prim, args, k, h), _central(prim, args, k, h / 2)
            fd = (4 * fd_half - fd_h) / 3  # Richardson: the h**2 error term cancels
        # near a pole (tan at pi/2) the differences themselves have not converged: no reference there
        converged = abs(fd_h - fd_half) <= 1e-4 * max(1.0, abs(fd))
        if np.isfinite(value) and np.isfinite(fd) and converged and prim.__name__ not in (
                "floor", "ceil", "rint", "trunc", "sign", "round"):
            np.testing.assert_allclose(value, fd, rtol=1e-5, atol=1e-7, err_msg=f"{prim.__name__} d/d{wrt}")


# -- saves -------------------------------------------------------------------------------------------------

def test_saves_show_what_each_rule_reads(capsys):
    text = _table(capsys)
    assert _cell(text, "sin", "saves") == "x"
    assert _cell(text, "exp", "saves") == "out"
    assert _cell(text, "add", "saves") == "nothing"
    assert _cell(text, "multiply", "saves") == "for x: y; for y: x"
    assert _cell(text, "true_divide", "saves") == "for x: y; for y: out, y"
    assert _cell(text, "einsum", "saves").startswith("for each of args 1-")


def test_saves_follow_the_fact(capsys):
    """``all`` exactly where no ``saves`` fact is declared; a declared fact shows as changed."""
    text = _table(capsys)
    for name, prim in ops.rule_table().items():
        assert (_cell(text, name, "saves") == "all") == (prim.saves is None), name
    prim = ops.rule_table()["relu"]
    saves = prim.saves
    try:
        prim.saves = ("out",)
        assert _cell(cli_rules.render(), "relu", "saves") == "out"
    finally:
        prim.saves = saves


# -- internal primitives -------------------------------------------------------------------------------

def test_internal_primitives_are_listed_apart(capsys):
    text = _table(capsys)
    public, internal, _ = _sections(text)
    internal_names = {line.split()[0] for line in internal if line and not line.startswith(" ")}
    public_names = {line.split()[0] for line in public if line and not line.startswith(" ")}
    assert {"untake", "tie_select", "sum_repeats", "linalg.adjugate_jvp", "window_gather",
            "window_scatter"} <= internal_names
    assert not internal_names & {"sin", "matmul", "getitem", "einsum", "fft.c2c", "linalg.det", "max",
                                 "transpose", "conv", "lstm_cell"}
    assert {"sin", "getitem", "fft.c2c"} <= public_names


def test_public_means_reached_from_a_public_name():
    """``getitem`` is reached through ``Tensor.__getitem__``, ``fft.c2c`` through ``wnp.fft.fft``;
    ``untake`` only from getitem's rule."""
    public = cli_rules.public_primitives()
    table = ops.rule_table()
    assert id(table["getitem"]) in public and id(table["fft.c2c"]) in public
    assert id(table["untake"]) not in public
    found, seen = set(), set()
    cli_rules._reach(wengert.numpy.fft.fft, found, seen)
    assert id(table["fft.c2c"]) in found and id(table["untake"]) not in found


# -- modes ---------------------------------------------------------------------------------------------------

def test_rows_do_not_repeat_rev_fwd_vmap(capsys):
    text = _table(capsys)
    assert _cell(text, "sin", "modes") == "float"
    assert _cell(text, "linalg.det", "modes") == ""
    assert _cell(text, "solve_sylvester", "modes") == "no vmap"  # one at a time in SciPy < 1.15
    assert _cell(text, "yn", "modes") == "rev(1) fwd(1)"  # yn(n, x): a derivative in x only
    assert "rev fwd vmap" not in "\n".join(text.split("\nmodes: ")[0].splitlines()[2:])


def test_exceptions_to_rev_fwd_vmap_are_listed_once(capsys):
    text = _table(capsys)
    _, _, footer = _sections(text)
    lists = dict(line.strip().split(": ", 1) for line in footer[1:] if line.startswith("  "))
    no_vmap = {p.__name__ for p in ops.rule_table().values() if batching_rule(p) is None}
    assert set(lists["no vmap"].split(", ")) == no_vmap
    partial = lists["rev and fwd for some arguments only"].split(", ")
    assert "yn(1)" in partial and "where(1,2)" in partial
    whole = {p.__name__ for p in ops.rule_table().values()
             if p.vjp_argnum is not None or all(r is not None for r in p.vjps)}
    assert not {entry.split("(")[0] for entry in partial} & whole


# -- the command line --------------------------------------------------------------------------------------

@pytest.mark.parametrize("reader", ["head -1", "true"])
def test_piped_into_a_reader_that_stops_early_exits_quietly(reader):
    """``wengert rules | head -1``: no BrokenPipeError traceback, status 0 (as other command line tools)."""
    src = os.path.dirname(os.path.dirname(wengert.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
    command = f"set -o pipefail; '{sys.executable}' -m wengert rules | {reader}"
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr
    if reader == "head -1":
        assert out.stdout.split() == list(cli_rules._HEAD[:5]) + ["generated", "code"]
