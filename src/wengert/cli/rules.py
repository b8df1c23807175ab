"""``python -m wengert rules``: the rule table at a glance.

One line per differentiable primitive: its name, its family (the ``wengert.rules`` module defining it),
its modes, the facts the program transformer relies on, what its reverse rules read (the ``saves``
fact: the tape keeps only that) and how generated code spells it, all read from the primitive itself
(``wengert.core.extend.facts``). Under an elementwise primitive, each partial derivative's formula
(``d/dx = cos(x)``), traced from the derivative that defines the primitive (``elementwise``'s
``d_i(out, *args)``, with ``out`` written as the primitive's call), so that it cannot drift from it.

Modes: every primitive is expected to have a VJP for each argument (``rev``), a JVP for each
(``fwd``) and a batching rule (``vmap``); the column names only what differs (``rev(1)``: argument 1
alone; ``no vmap``) and ``float``, a fused Python-float VJP, and the exceptions are listed once at the
end, then the primitives the Numba backend compiles natively. Internal primitives, those no public
function reaches (only other primitives' rules: ``untake``, ``tie_select``, ...), are listed in a
section of their own: reachable means named, directly or through the functions and classes they
use, by a public name of ``wengert.numpy``, ``wengert.scipy`` or ``wengert.nn`` (and their public
submodules) or by a method of ``wengert.Tensor``.
"""

import functools
import importlib
import inspect
import math
import os
import pkgutil
import sys
import textwrap
import types
import warnings
from collections import namedtuple

import numpy as np

import wengert
from wengert import rules as ops
from wengert.core.primitive import Primitive
from wengert.engines.batching import batching_rule
from wengert.program import Program, Variable, rendering
from wengert.program.native import native_fact

__all__ = ["Row", "rows", "render", "run", "formulas", "public_primitives"]

PUBLIC_PACKAGES = ("wengert.numpy", "wengert.scipy", "wengert.nn")
"""The packages whose public names (and public submodules') make a primitive public."""

FORMULA_WIDTH = 72
"""A derivative's formula longer than this is replaced by its rule's docstring (or a pointer)."""

Row = namedtuple("Row", "name family modes facts saves spelling formulas internal")
Row.__doc__ = "One primitive's line of the table (``formulas``: ``d/dx = ...`` texts, maybe none)."


# -- modes -------------------------------------------------------------------------------------------

def _covered(rules, argnum, letter):
    """``letter`` for a rule per argument, ``letter(0,2)`` for some, ``no letter`` for none."""
    if argnum is not None:
        return letter
    given = [i for i, r in enumerate(rules) if r is not None]
    if not given:
        return f"no {letter}"
    return letter if len(given) == len(rules) else f"{letter}({','.join(map(str, given))})"


def _mode_list(prim):
    """Every mode's state: ``[rev..., fwd..., vmap or no vmap]`` (``float`` left out)."""
    for_all = prim.vjp_argnum or prim.vjp_joint  # one rule for every argument
    fwd_for_all = prim.jvp_argnum or prim.jvp_joint
    return [_covered(prim.vjps, for_all, "rev"), _covered(prim.jvps, fwd_for_all, "fwd"),
            "vmap" if batching_rule(prim) is not None else "no vmap"]


def _modes(prim):
    """What differs from ``rev fwd vmap``, and ``float`` where there is a fused float VJP."""
    parts = [m for m in _mode_list(prim) if m not in ("rev", "fwd", "vmap")]
    if prim.float_vjp is not None:
        parts.append("float")
    return " ".join(parts)


# -- facts, arguments, saves -------------------------------------------------------------------------

def _facts(prim):
    facts = []
    if prim.linear:
        facts.append("linear in " + ",".join(map(str, prim.linear)))
    if prim.fresh:
        facts.append("fresh")
    if prim.broadcasts:
        facts.append("broadcasts")
    return ", ".join(facts)


def _arg_names(prim):
    """The positional arguments' names: the derivatives' own (``arctan2``'s ``y, x``), else the
    implementation's parameters; None where neither says."""
    for d in prim.derivatives or ():
        if callable(d):
            try:
                params = list(inspect.signature(d).parameters)
            except (TypeError, ValueError):
                break
            return params[1:]  # after "out"
    if prim.derivatives:  # constants only (add, subtract): x and y, as NumPy documents them
        return ["x", "y", "z"][:len(prim.derivatives)] if len(prim.derivatives) > 1 else ["x"]
    try:
        params = inspect.signature(prim.fun).parameters.values()
    except (TypeError, ValueError):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _named(k, names):
    return names[k] if names is not None and k < len(names) else f"arg {k}"


def _saved(items, names):
    """Saved items in words; runs of unnamed arguments shortened (``arg 2-32``)."""
    words, run = [], []

    def flush():
        if run:
            words.append(f"arg {run[0]}" if len(run) == 1 else f"args {run[0]}-{run[-1]}")
            run.clear()

    for item in items:
        unnamed = isinstance(item, int) and _named(item, names).startswith("arg ")
        if not (unnamed and run and item == run[-1] + 1):
            flush()
        if unnamed:
            run.append(item)
        else:
            words.append(_named(item, names) if isinstance(item, int) else str(item))
    flush()
    return ", ".join(words) or "nothing"


def _saves(prim):
    """The ``saves`` fact in words: ``x``, ``out, x``, ``nothing``, per argument ``for x: y; ...``, or
    ``all`` where it is not declared (the tape then keeps every argument and the output)."""
    saves, names = prim.saves, _arg_names(prim)
    if saves is None:
        return "all"
    if not isinstance(saves, dict):
        return _saved(saves, names)
    common = sorted({i for v in saves.values() for i in v}, key=str)
    if len(saves) > 3 and all(set(v) == set(common) - {k} for k, v in saves.items()):  # einsum's operands
        shared = [i for i in common if i not in saves]
        return f"for each of {_saved(sorted(saves), names)}: " + ", ".join(
            ([_saved(shared, names)] if shared else []) + ["the others"])
    return "; ".join(f"for {_saved((k,), names)}: {_saved(v, names)}" for k, v in sorted(saves.items()))


def _spelling(prim):
    name = prim.__name__
    if prim.operator is not None:
        return f"{prim.operator}a" if len(prim.vjps) == 1 else f"a {prim.operator} b"
    if prim.helper is not None:
        return f"{name}(...) (helper)"
    if rendering.numpy_name(prim) is not None:
        fn = prim.math_name
        if fn is None:
            return f"np.{name}"
        # a builtin (absolute's abs) or a function of math: the code generator writes it as such
        return f"np.{name}, " + (f"math.{fn}" if hasattr(math, fn) else f"builtin {fn}") + " on floats"
    return "its implementation"


# -- formulas of elementwise derivatives ---------------------------------------------------------------

_PRECEDENCE = {"**": 5, "*": 3, "/": 3, "//": 3, "%": 3, "@": 3, "+": 2, "-": 2,
               "==": 1, "!=": 1, "<": 1, "<=": 1, ">": 1, ">=": 1, "&": 1, "|": 1}
_UNARY = 4
_NAMED_CONSTANTS = {math.pi: "pi", math.log(2.0): "log(2)", math.log(10.0): "log(10)", math.e: "e"}


def _constant(c):
    if isinstance(c, (float, np.floating)) and float(c) in _NAMED_CONSTANTS:
        return _NAMED_CONSTANTS[float(c)], 9
    text = repr(c.item() if isinstance(c, np.generic) else c)
    return text, (_UNARY if text.startswith("-") else 9)


def _inline(program, names):
    """The program's one output as one expression, each statement's expression put in place of its
    variable (the primitive's own output, ``out``, is then its call: ``exp(x)``, ``x / y``)."""
    exprs = {v: (n, 9) for v, n in zip(program.inputs, names)}

    def operand(a, p, strict):
        text, q = exprs[a] if type(a) is Variable else _constant(a)
        return f"({text})" if q < p or (strict and q == p) else text

    for s in program.statements:
        op = s.prim.operator
        if s.kwargs or len(s.outs) != 1:
            return None
        if op is not None and len(s.args) == 2:
            p = _PRECEDENCE.get(op, 0)
            left = operand(s.args[0], p, strict=op == "**")
            right = operand(s.args[1], p, strict=op != "**")
            exprs[s.out] = (f"{left} {op} {right}", p)
        elif op is not None and len(s.args) == 1:
            exprs[s.out] = (f"{op}{operand(s.args[0], _UNARY, strict=False)}", _UNARY)
        else:
            exprs[s.out] = (f"{s.prim.__name__}({', '.join(operand(a, 0, False) for a in s.args)})", 9)
    (out,) = program.outputs
    return exprs[out][0] if type(out) is Variable else _constant(out)[0]


def _documented(d):
    """The first line of the docstring of ``d``, or of the one function it calls, where it states a
    derivative (``d sinc / dx = ...``)."""
    found = [d] + [d.__globals__.get(n) for n in getattr(getattr(d, "__code__", None), "co_names", ())
                   if isinstance(getattr(d, "__globals__", None), dict)]
    for f in found:
        doc = (getattr(f, "__doc__", None) or "").strip().splitlines()
        if callable(f) and doc and doc[0].startswith("d"):
            return doc[0].rstrip(".")
    return None


def formulas(prim):
    """``["d/dx = cos(x)"]``: each partial derivative of an elementwise primitive (empty where the
    primitive is not defined by its partial derivatives)."""
    ds = prim.derivatives
    if not ds:
        return []
    names = _arg_names(prim)
    example = [np.full(2, 0.5 + 0.25 * i) for i in range(len(ds))]
    out = []
    for i, (name, d) in enumerate(zip(names, ds)):
        if d is None:  # not a multiplier (absolute: complex inputs) or no derivative at all
            ruled = (prim.vjp_argnum or prim.vjp_joint) is not None or (
                i < len(prim.vjps) and prim.vjps[i] is not None)
            out.append(f"d/d{name}: " + ("a rule of its own" if ruled else "none (not differentiable)"))
            continue
        if not callable(d):
            out.append(f"d/d{name} = {_constant(d)[0]}")
            continue

        def partial(*args, d=d):
            return d(prim(*args), *args)

        text = None
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                program = Program.from_trace(partial, *example)
            text = _inline(program, names)
        except Exception:  # noqa: BLE001 - a rule the tracer cannot follow is shown by its docstring
            text = None
        if text is None or len(text) > FORMULA_WIDTH:
            text = _documented(d)
            out.append(text if text is not None else f"d/d{name}: see its rule ({prim.fun.__module__})")
        else:
            out.append(f"d/d{name} = {text}")
    return out


# -- internal primitives ---------------------------------------------------------------------------------

def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _reach(obj, found, seen):
    """Every primitive ``obj`` names, directly or through the wengert functions and classes it uses
    (not through a primitive's rules: those are what makes a primitive internal)."""
    stack = [obj]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, types.ModuleType):
            continue
        seen.add(id(obj))
        prim = obj if isinstance(obj, Primitive) else getattr(obj, "primitive", None)
        if isinstance(prim, Primitive):
            found.add(id(prim))
            if prim is obj:
                continue
        if isinstance(obj, functools.partial):
            stack.extend((obj.func, *obj.args, *obj.keywords.values()))
            continue
        if isinstance(obj, type):
            if obj.__module__.startswith("wengert"):
                for v in vars(obj).values():
                    if isinstance(v, property):
                        stack.extend(f for f in (v.fget, v.fset) if f is not None)
                    else:
                        stack.append(getattr(v, "__func__", v))
            continue
        wrapped = getattr(obj, "__wrapped__", None)
        if wrapped is not None:
            stack.append(wrapped)
        code = getattr(obj, "__code__", None)
        if code is None or not (getattr(obj, "__module__", None) or "").startswith("wengert"):
            continue
        for cell in obj.__closure__ or ():
            try:
                stack.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        stack.extend(obj.__defaults__ or ())
        scope = obj.__globals__
        for c in _codes(code):
            names = c.co_names
            for n in names:
                value = scope.get(n)
                if isinstance(value, types.ModuleType):  # module.attribute: the attribute, one level
                    stack.extend(getattr(value, a) for a in names if a in vars(value))
                elif value is not None:
                    stack.append(value)


@functools.cache
def public_primitives():
    """The ids of the primitives public functions reach (see the module's docstring)."""
    found, seen = set(), set()
    for package in PUBLIC_PACKAGES:
        pkg = importlib.import_module(package)
        modules = [pkg] + [importlib.import_module(info.name)
                           for info in pkgutil.walk_packages(pkg.__path__, package + ".")
                           if not any(part.startswith("_") for part in info.name.split("."))]
        for module in modules:
            names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
            for n in names:
                _reach(getattr(module, n, None), found, seen)
    _reach(wengert.Tensor, found, seen)
    return frozenset(found)


# -- the table ---------------------------------------------------------------------------------------------

def rows():
    """A :class:`Row` for every differentiable primitive, by family and name."""
    out, seen = [], set()
    public = public_primitives()
    for module in ops.families():
        for value in vars(module).values():
            prim = getattr(value, "primitive", value)  # fast entry points carry their Primitive
            if not isinstance(prim, Primitive) or prim.nondiff or id(prim) in seen:
                continue
            seen.add(id(prim))
            home = getattr(prim.fun, "__module__", "") or ""
            family = (home if home.startswith("wengert.rules.") else module.__name__).rpartition(".")[2]
            family = family.lstrip("_")  # wengert.scipy._odeint's
            out.append(Row(prim.__name__, family, _modes(prim), _facts(prim), _saves(prim), _spelling(prim),
                           formulas(prim), id(prim) not in public))
    return sorted(out, key=lambda r: (r.family, r.name))


_HEAD = ("primitive", "family", "modes", "facts", "saves", "generated code")


def _lines(table, widths):
    lines = []
    for r in table:
        cells = (r.name, r.family, r.modes, r.facts, r.saves)
        lines.append(("  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + r.spelling).rstrip())
        if r.formulas:
            joined = "    " + ";  ".join(r.formulas)
            lines += [joined] if len(joined) <= 100 else ["    " + f for f in r.formulas]
    return lines


def _exceptions():
    """``{what is missing: [primitive names]}`` for every primitive lacking all or part of rev, fwd or
    vmap (``yn(1)``: rules for argument 1 alone)."""
    found = {}
    for prim in sorted(ops.rule_table().values(), key=lambda p: p.__name__):
        modes = [m for m in _mode_list(prim) if m not in ("rev", "fwd", "vmap")]
        partial = [m for m in modes if "(" in m]
        if partial:
            label = " and ".join(m[:3] for m in partial) + " for some arguments only"
            args = {m[3:] for m in partial}
            found.setdefault(label, []).append(prim.__name__ + (args.pop() if len(args) == 1 else
                                                               " " + " ".join(partial)))
        for m in modes:
            if m.startswith("no "):
                found.setdefault(m, []).append(prim.__name__)
    return found


def render():
    """The table as aligned text: public primitives, then internal ones, then the exceptions to
    ``rev fwd vmap`` and a count per family."""
    table = rows()
    widths = [max(len(_HEAD[i]), *(len(r[i]) for r in table)) for i in range(5)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(_HEAD, widths)) + "  " + _HEAD[5]]
    lines.append("  ".join("-" * w for w in widths) + "  " + "-" * len(_HEAD[5]))
    lines += _lines([r for r in table if not r.internal], widths)
    internal = [r for r in table if r.internal]
    lines += ["", "internal (used by other primitives' rules; no public function calls them):"]
    lines += _lines(internal, widths)
    lines += ["", "modes: every primitive has rev (a VJP per argument), fwd (a JVP per argument) and vmap "
                  "(a batching rule), except:"]
    lines += [f"  {mode}: {', '.join(names)}" for mode, names in sorted(_exceptions().items())]
    counts = {}
    for r in table:
        counts[r.family] = counts.get(r.family, 0) + 1
    lines.append("")
    lines.append(f"{len(table)} primitives ({len(internal)} internal): "
                 + ", ".join(f"{f} {n}" for f, n in sorted(counts.items())))
    lines += _native_lines()
    return "\n".join(lines)


def _native_lines():
    """Which primitives the Numba backend (``backend="numba"``) compiles: those whose generated code is an
    operator, indexing, a NumPy function Numba has or a helper with a Numba version (``native.native_fact``);
    the others by reason."""
    try:
        importlib.import_module("numba")
    except ImportError:
        return ["", 'backend="numba": Numba is not installed (pip install "wengert[numba]")']
    native, other = [], {}
    for prim in sorted(ops.rule_table().values(), key=lambda p: p.__name__):
        ok, how = native_fact(prim)
        if ok:
            native.append(prim.__name__)
        else:
            reason = "helpers of generated code (Python)" if how.startswith("a helper") else how
            other.setdefault(reason, []).append(prim.__name__)
    head = (f'backend="numba": {len(native)} primitives compile natively (an operator, indexing, a NumPy '
            f"function Numba has or a helper with a Numba version; a signature Numba lacks falls back when "
            f"compiled): {', '.join(native)}")
    lines = [""] + textwrap.wrap(head, 110, subsequent_indent="    ")
    lines.append("  the others run as Python (the program falls back, with a NativeFallbackWarning):")
    for reason, names in sorted(other.items()):
        lines += textwrap.wrap(f"  {reason}: {', '.join(names)}", 110, subsequent_indent="    ")
    return lines


def run(args=None):
    """Print the table; piped into a reader that stops early (``head``), stop quietly with status 0."""
    try:
        print(render())
        sys.stdout.flush()
    except BrokenPipeError:
        # Python's advice: point stdout at devnull so that the flush at exit does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0
