"""A program's Numba function: its generated module in Numba's dialect, kept as a file, compiled.

The module is the one ``codegen`` (``source.codegen`` for source programs) writes, changed in four
ways only: every function in it is given to ``numba.njit(cache=True, error_model="numpy")``; a helper
with a Numba version (``native_helpers``) is defined by that version's source, under its name; the
NumPy names Numba lacks that codegen binds at module level (``np.add.reduce`` and the other full
reductions) are redefined by small compiled functions of the same meaning; and a large captured array,
which the Python module is handed in its namespace, becomes a leading parameter (Numba would freeze a
global array into the machine code), filled in by ``functools.partial``.

The file is ``<cache>/native/w_<hash>.py``, ``<cache>`` being ``$WENGERT_CACHE_DIR`` or
``~/.cache/wengert``; the hash covers the text and the versions of Python, NumPy and Numba, so a
second process (or a second program with the same text) finds Numba's machine code beside it in
``__pycache__`` and pays no compilation. Programs of the same text share one module in a process.
"""

import ast
import functools
import hashlib
import importlib.util
import inspect
import os
import re
import sys
import warnings

import numpy as np

from wengert.program import codegen
from wengert.program.ir import Statement, Variable, placeholder
from wengert.program.native import fallback, numba_knows, require_numba
from wengert.program.native_helpers import SUPPORT, TYPED, native_helper, register_typing
from wengert.program.native_types import mistyped
from wengert.program.program import Program
from wengert.program.rendering import helper_source, helpers
from wengert.program.source.codegen import block_source, compile_block
from wengert.program.source.control import If, Loop

__all__ = ["CACHE_ENV", "cache_dir", "native_function", "Deferred", "attach_native", "native_source",
           "refusals"]

CACHE_ENV = "WENGERT_CACHE_DIR"
"""The environment variable naming wengert's cache directory (default ``~/.cache/wengert``)."""

_NJIT = "_wengert_njit"
_DIALECT = [  # (what codegen writes, Numba's spelling of the same)
    (re.compile(r"^( +)del \w+(?:, \w+)*$", re.MULTILINE), r"\1pass"),  # Numba frees buffers itself
    (re.compile(r", keepdims=False\)"), ")"),  # NumPy's default; Numba's reductions take no keepdims
    (re.compile(r"np\.array\((\w+), copy=True\)"), r"np.copy(\1)"),  # a loop's own copy of an array
    (re.compile(r", out=(\w+)\)"), r", \1)"),  # a ufunc into a dying buffer: out, positionally
]
_SHIMS = {  # np.<ufunc>.reduce(x, None), as codegen writes a full reduction -> Numba's spelling
    "add.reduce": "np.sum(x)", "multiply.reduce": "np.prod(x)",
    "maximum.reduce": "np.max(x)", "minimum.reduce": "np.min(x)",
}


def cache_dir():
    """Where the native modules are written: ``$WENGERT_CACHE_DIR/native`` or ``~/.cache/wengert/native``."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "wengert")
    return os.path.join(root, "native")


def _statements(nodes):
    """Every Statement in ``nodes`` and the blocks inside them (ifs, loops, checkpointed loops)."""
    todo = list(nodes)
    while todo:
        n = todo.pop()
        t = type(n)
        if t is Statement:
            yield n
        elif t is If:
            todo += n.then + n.orelse
        elif t is Loop:
            todo += n.cond_block + n.body
        elif hasattr(n, "inner_blocks"):
            todo += list(n.inner_blocks())


def _rendered(program):
    """``(text, module info, statements, the Python function's maker)`` of a Program or a source program."""
    if isinstance(program, Program):
        text, mod = codegen._source(program, safe=False)
        return text, mod, program.statements, lambda: codegen.compile_program(program)
    parts = (program.name, program.inputs, program.nodes, program.outputs)
    text, mod = block_source(*parts, stack=program.stack, native=True)
    return text, mod, list(_statements(program.nodes)), lambda: compile_block(*parts, stack=program.stack)


_EXTREME = re.compile(r"^( +)(\w+) = (\w+)\.(max|min)\(axis=(\([-\d, ]*\)|-?\d+)(, keepdims=True)?\)$",
                      re.MULTILINE)


def _extremes(text, ndims, helper="extremes_native"):
    """``text`` with each ``x.max(axis=...)`` (``min``; Numba has no ``axis`` there) written as
    ``extremes_native``'s flat result (under the name ``helper``), reshaped to the reduction's shape;
    ``ndims``: name -> ndim."""
    def spelled(m):
        indent, out, x, which, axis, keep = m.groups()
        n = ndims.get(x)
        if not n:
            return m.group(0)
        given = ast.literal_eval(axis)
        axes = {a % n for a in (given if type(given) is tuple else (given,))}
        dims = [("1" if keep else "") if d in axes else f"{x}.shape[{d}]" for d in range(n)]
        dims = [d for d in dims if d]
        if not dims:  # a 0-d result: left to Numba (which refuses it, and the program falls back)
            return m.group(0)
        return f"{indent}{out} = {helper}({x}, {axis}, {which == 'max'}).reshape(({', '.join(dims)},))"
    return _EXTREME.sub(spelled, text)


def _support_names(text):
    """``native_helpers.SUPPORT``'s functions' names in the module ``text``: each its own, with ``_``
    before it while the text has that name already (a variable or argument of the user's, the
    program's own name): no name of the user's shadows a helper, nor a helper the program."""
    taken = set(re.findall(r"[A-Za-z_]\w*", text))
    names = {}
    for f in (*SUPPORT, *TYPED):
        name = f.__name__
        while name in taken:
            name = "_" + name
        names[f.__name__] = name
    return names


def _renamed(source, names):
    """A helper's ``source`` calling (and defining) the support functions by their ``names``."""
    return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda m: names[m.group(1)], source)


def _native_helpers(text, mod, statements=()):
    """``text`` with each helper that has a Numba version (``native_helpers``) defined by that version,
    under the same name (the helpers the module's helpers call included), and reductions over axes
    that Numba lacks written with ``native_helpers.SUPPORT``, whose sources are then added (under
    names the module does not use otherwise: ``_support_names``)."""
    text = _matmuls(text, mod)
    before = text
    names = _support_names(text)
    for name, fun in sorted({**helpers(), **mod.helpers}.items()):
        native = native_helper(fun)
        if native is not None:
            text = text.replace(helper_source(name, fun), _renamed(helper_source(name, native), names))
    ndims = {v.name: len(v.shape) for s in statements for v in (*s.outs, *s.args)
             if type(v) is Variable and v.kind == "array" and v.shape is not None}
    text = _extremes(text, ndims, names["extremes_native"])
    text = _ADD_AT.sub(names["add_at_native"] + "(", text)  # np.add.at(buf, idx, e), which Numba lacks
    if text != before:
        text += "\n\n" + "\n\n\n".join(_renamed(helper_source(f.__name__, f), names) for f in SUPPORT) + "\n"
        text += "\n\n" + "".join(f"from {f.__module__} import {f.__name__} as {names[f.__name__]}\n"
                                 for f in TYPED)
    return text


_ADD_AT = re.compile(r"\bnp\.add\.at\(")


def _matmuls(text, mod):
    """``text`` with each product into a dying buffer, ``c = np_matmul(a, b, out=c)`` (``np.matmul`` is
    a gufunc to codegen; Numba has no ``np.matmul``), written ``c = a @ b``, as codegen writes a product
    otherwise (the module-level binding of ``np.matmul`` stays, called by no compiled function)."""
    bound = mod.bound.get("matmul")
    if bound is None:
        return text
    return re.sub(rf"^( +)(\w+) = {re.escape(bound)}\((\w+), (\w+), out=\2\)$", r"\1\2 = \3 @ \4", text,
                  flags=re.MULTILINE)


def native_source(text, mod, name, params, arrays, statements=()):
    """The module ``text`` (with ``mod``, its ``codegen.Module``) in Numba's dialect; ``params``: the
    function's parameters, ``arrays``: the names of the captured arrays that become leading ones."""
    text = _native_helpers(text, mod, statements)
    text = re.sub(r"^def ", f"@{_NJIT}\ndef ", text, flags=re.MULTILINE)
    for pattern, spelled in _DIALECT:
        text = pattern.sub(spelled, text)
    shims = []
    for path, bound in sorted(mod.bound.items()):
        if path in _SHIMS:
            shims += [f"@{_NJIT}", f"def {bound}(x, axis):", f"    return {_SHIMS[path]}", "", ""]
    main = f"@{_NJIT}\ndef {name}({', '.join(params)}):"
    if main not in text:  # pragma: no cover - codegen writes exactly this line
        raise AssertionError(f"no definition of {name} in the generated module")
    text = text.replace(main, "\n".join(shims) + f"@{_NJIT}\ndef {name}({', '.join(arrays + params)}):", 1)
    head = (f"# wengert's Numba module for {name} (docs/compiling.md); written and read by wengert\n"
            f"import numba as _wengert_numba\n\n"
            f"{_NJIT} = _wengert_numba.njit(cache=True, error_model='numpy')\n")
    return head + text


@functools.cache
def _typed_source():
    """The source of ``native_helpers``, whose overloads (``TYPED``) a module's machine code holds but its
    text only names: part of the module's hash, so that a change there is not hidden by the disk cache."""
    return inspect.getsource(sys.modules[register_typing.__module__])


def _import(text, numba):
    """The module of ``text``, written to the cache directory (once) and imported (once a process)."""
    key = "\0".join([text, sys.version, np.__version__, numba.__version__, _typed_source()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    name = f"wengert_native_{digest}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    register_typing(numba)  # what the module's indexing helpers ask Numba (native_helpers.TYPED)
    folder = cache_dir()
    path = os.path.join(folder, f"w_{digest}.py")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        partial = f"{path}.{os.getpid()}.tmp"
        with open(partial, "w") as f:
            f.write(text)
        os.replace(partial, path)  # atomic: another process never reads half a file
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _culprit(error, path, lines, statements, mod):
    """Which primitive (and line) of the module Numba's ``error`` is about, in words: the outermost line
    of the module that the message cites and that spells a primitive of the program."""
    message = _ANSI.sub("", str(error))
    said = [t.strip() for t in message.splitlines()
            if t.strip() and not t.strip().startswith(("Failed in", "During"))]
    reason = said[0] if said else type(error).__name__
    if len(said) > 1 and said[1].startswith(">>>"):
        reason += " " + said[1][3:].strip()
    file = re.escape(os.path.basename(path))
    cited = [int(n) for n in re.findall(rf'File "[^"]*{file}", line (\d+)', message)]
    cited = [lines[n - 1].strip() for n in cited if 0 < n <= len(lines)]
    helpers = {id(f): n for n, f in mod.helpers.items()}
    for line in reversed(cited):
        names = []
        for s in statements:
            prim = s.prim
            tokens = {prim.__name__, mod.bound.get(prim.__name__, prim.__name__),
                      helpers.get(id(prim.helper), prim.__name__), prim.math_name or prim.__name__}
            spelled = any(re.search(rf"\b{re.escape(t)}\b", line) for t in tokens)
            if spelled and prim.__name__ not in names:
                names.append(prim.__name__)
        if names:
            return f"primitive {', '.join(names)} at `{line}` ({reason})"
    where = f" `{cited[0]}`" if cited else ""
    return f"Numba cannot compile the line{where} ({reason})"


def _numpy_path(path):
    """NumPy's object ``np.<path>`` (``add.at``), or None."""
    obj = np
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def _refused(text, mod, statements):
    """What in the module Numba cannot run, in words (empty where it may all be native): a primitive's
    Python implementation, a helper (``native_fact``), a NumPy function Numba does not know."""
    text = _native_helpers(text, mod, statements)  # the Numba versions' NumPy calls, not the helpers'
    found, bringing = [], []
    for ref, value in mod.foreign.items():
        if _brings(value):
            bringing.append((ref, value))
        elif callable(value):
            names = sorted({s.prim.__name__ for s in statements if s.prim.fun is value}) or [ref]
            found += [f"primitive {n} (a Python implementation)" for n in names]
    for name, fun in sorted(mod.helpers.items()):
        if native_helper(fun) is not None:
            continue
        names = sorted({s.prim.__name__ for s in statements if s.prim.helper is fun})
        found += [f"primitive {n} (its helper {name} is Python)" for n in names] or \
            [f"the generated code's helper {name} (Python)"]
    paths = {p for p, name in mod.bound.items()
             if p not in _SHIMS and re.search(rf"\b{re.escape(name)}\(", text)}  # called (not _matmuls')
    paths |= set(re.findall(r"\bnp\.(\w+(?:\.\w+)*)\(", text))
    for path in sorted(paths):
        fun = _numpy_path(path)
        if fun is None or not numba_knows(fun):
            leaf = path.rpartition(".")[2]
            names = sorted({s.prim.__name__ for s in statements if s.prim.__name__ == leaf})
            found += [f"primitive {n} (Numba has no np.{path})" for n in names] or \
                [f"np.{path} (Numba has no such function)"]
    for ref, value in [] if found else bringing:  # built (compiled) only where the rest may be native
        brought = _brought(value)
        if type(brought) is str:
            names = sorted({s.prim.__name__ for s in statements if s.prim.fun == value}) or [ref]
            found += [f"primitive {n} ({brought})" for n in names]
    return found


def _brings(value):
    """Whether a foreign implementation may bring its own Numba version (see :func:`_brought`)."""
    return getattr(getattr(value, "__self__", None), "numba_kernel", None) is not None


def _brought(value):
    """A foreign implementation's own Numba version: ``(module, function name, leading arguments)``, or
    why it has none (a string); None where it brings none. Asked of the object a method is bound to
    (``numba_kernel``: ``wg.iterate``'s loop statement, ``loop_node``; ``banded_dense``'s, which sits
    below this module and answers with a builder called with :func:`native_function` and a function
    importing a module's text)."""
    kernel = getattr(getattr(value, "__self__", None), "numba_kernel", None)
    if kernel is None:
        return None
    brought = kernel(value)
    if callable(brought):
        brought = brought(native_function, lambda text: _import(text, require_numba()))
    return brought


def _brought_source(mod):
    """``(source, arrays)``: source defining each foreign implementation that brings its own Numba
    version under its name, a function calling that version with its leading arguments, then the
    statement's; ``arrays``: ``(name, value)`` of the leading arguments that are arrays, which the
    function takes first (Numba would freeze a global array), and the module passes (see
    :func:`_pass_arrays`)."""
    lines, arrays = [], []
    for ref, value in sorted(mod.foreign.items()):
        brought = _brought(value)
        if type(brought) is tuple:
            module, function, leading = brought
            mine = [f"{ref}_a{i}" for i, c in enumerate(leading) if isinstance(c, np.ndarray)]
            arrays += [(f"{ref}_a{i}", c) for i, c in enumerate(leading) if isinstance(c, np.ndarray)]
            given = "".join(f"{ref}_a{i}, " if isinstance(c, np.ndarray) else f"{c!r}, "
                            for i, c in enumerate(leading))
            lines += [f"from {module} import {function} as _{ref}_native", "", "",
                      f"def {ref}({''.join(a + ', ' for a in mine)}*args):",
                      f"    return _{ref}_native({given}*args)", "", ""]
    return lines, arrays


def _pass_arrays(text, arrays):
    """``text`` with each call of a brought function given its leading arrays (named ``<ref>_a<i>``)."""
    by_ref = {}
    for name, _ in arrays:
        by_ref.setdefault(name.rpartition("_a")[0], []).append(name)
    for ref, names in by_ref.items():
        text = re.sub(rf"\b{re.escape(ref)}\(", f"{ref}({', '.join(names)}, ", text)
    return text


def refusals(program):
    """What in ``program``'s generated code Numba cannot run, in words (``[]``: it may be native)."""
    text, mod, statements, _ = _rendered(program)
    return _refused(text, mod, statements)


MAX_STRAIGHT_LINE = 1000
"""Statements beyond which a program without loops runs as Python: Numba's compile time grows
faster than linearly in a function's length (measured: about 1 minute for 2,000 statements)."""


def _has_loops(text):
    return re.search(r"^\s+(for|while) ", text, flags=re.MULTILINE) is not None


class Deferred:
    """``program``'s function on Numba, built (written, imported, compiled) at its first call: for a
    program that most calls never run (``banded_dense``'s dense fallback). Where Numba then fails to
    compile it, that call warns and it runs as Python from then on (what :func:`native_function` gives)."""

    lazy = True

    def __init__(self, program):
        self.program, self.function = program, None

    def __call__(self, *args):
        if self.function is None:
            self.function = native_function(self.program)
        return self.function(*args)


def native_function(program, lazy=False):
    """``program``'s function on Numba (see the module docs), or its Python function with a
    ``NativeFallbackWarning`` where Numba cannot run it. ``lazy``: where what is checked before compiling
    lets it be native, a :class:`Deferred` that compiles at its first call."""
    numba = require_numba()
    text, mod, statements, python = _rendered(program)
    if len(statements) > MAX_STRAIGHT_LINE and not _has_loops(text):
        fallback(program.name, f"it is {len(statements):,} statements of straight-line code, which Numba "
                               f"takes minutes to compile (its time grows faster than the length); keep "
                               f"the loop: wg.source_grad(f, backend='numba') compiles it as a loop")
        return python()
    refused = _refused(text, mod, statements)
    if refused:
        fallback(program.name, "; ".join(refused))
        return python()
    arrays, values = [], []
    for ref, value in mod.foreign.items():
        if isinstance(value, np.ndarray):
            arrays.append(ref)
            values.append(value)
        elif ref not in mod.imports and not _brings(value):
            fallback(program.name, f"the captured constant {ref} ({type(value).__name__}) has no Numba type")
            return python()
    if isinstance(program, Program):
        params = codegen.param_names(program)
    else:
        params = [p.name for p in program.inputs]
    if lazy:
        return Deferred(program)
    name = getattr(mod, "function_name", program.name)  # codegen's free name (wg.compile(np.sin): sin_)
    brought, leading = _brought_source(mod)
    if leading:
        text = _pass_arrays(text, leading)
        arrays += [name for name, _ in leading]
        values += [value for _, value in leading]
    if brought:
        text = "\n".join(brought) + "\n" + text
    source = native_source(text, mod, name, params, arrays, statements)
    module = _import(source, numba)
    dispatcher = getattr(module, name)
    try:
        signature = tuple(numba.typeof(v) for v in values) + \
            tuple(numba.typeof(placeholder(v)) for v in program.inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", numba.core.errors.NumbaWarning)
            dispatcher.compile(signature)
    except Exception as e:  # noqa: BLE001 - Numba's typing and lowering errors, whatever their class
        fallback(program.name, _culprit(e, module.__file__, source.splitlines(), statements, mod))
        return python()
    differs = mistyped(numba, dispatcher, signature, program)
    if differs:
        fallback(program.name, f"Numba promotes dtypes otherwise than NumPy: {differs}")
        return python()
    return functools.partial(dispatcher, *values) if values else dispatcher


def attach_native(program):
    """Give ``program`` (a ``Program`` or a source program) its Numba function in place of its Python
    one, or keep the Python one with a warning (``native_function``); returns the program, its
    ``native`` telling which."""
    numba = require_numba()
    fn = program._function = native_function(program)
    inner = fn.func if isinstance(fn, functools.partial) else fn
    program.native = isinstance(inner, numba.core.dispatcher.Dispatcher)  # not the Python fallback
    return program
