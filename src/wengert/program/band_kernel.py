"""``banded_dense`` on Numba: the statement that assembles a banded array, as a compiled function.

Contract. :func:`native_kernel` writes (once a statement) a module with one njit function,
``banded_dense(handle, *constants, *diagonals, *checks, *inputs)``, which does what the Python
statement (``band_values.Assembly.banded_dense``) does, with the same values: it checks the factors
(every element finite) and divisors (none 0); where one fails it returns the dense program's value,
the dense program compiled by Numba too (``native_build.native_function``), but only at its first need
(most calls never need it, and compiling it, part of every caller's machine code, used to be most of
the first build): the kernel reaches it from an object-mode block (``numba.objmode``), through
:func:`run_dense` and ``handle``, a one-element array naming the statement's dense function here
(nopython code carries arrays, not Python objects; the statement holds it, and the entry goes with
it). Else it writes the diagonals into zeros, in the Python statement's order, the constant terms
read from the leading ``constants``. Where it cannot -- a band of more than two axes, a diagonal that
is not a 1-d array, a dense program that is not native -- it says why in words, and the program
calling it runs as Python (``native_build``'s ``NativeFallbackWarning`` names it).
"""

import itertools
import re
import warnings
import weakref

import numpy as np

__all__ = ["native_kernel", "kernel_source", "run_dense"]

_DENSE = {}
"""Handle number -> the dense function of a ``banded_dense`` statement (``native_build.Deferred``)."""

_NUMBERS = itertools.count(1)


def _reason(caught):
    """The reason quoted by a NativeFallbackWarning among ``caught`` (without its boilerplate)."""
    for w in caught:
        text = str(w.message)
        found = re.search(r"not native code: (.*)\. The values are the same", text, re.S)
        if found:
            return found.group(1)
    return "Numba cannot compile it"


def native_kernel(assembly, native_function, import_text):
    """``(module name, "banded_dense", leading arguments)`` of ``assembly``'s Numba version, or why there
    is none (module docs); ``native_function`` and ``import_text`` are ``native_build``'s."""
    if assembly.writes is None:
        return f"its banded array has {len(assembly.shape)} axes (natively, only 2-d ones are assembled)"
    for v in assembly.diag_vars:
        if v.kind != "array" or v.shape is None or len(v.shape) != 1:
            return f"its diagonal {v.name} is not a 1-d array"
    dense = assembly.dense_program()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = native_function(dense, lazy=True)  # checked now, compiled at its first call
    if not getattr(fn, "lazy", False):  # the Python function: the dense program fell back
        return f"its dense program (run where a factor is not finite) is not native: {_reason(caught)}"
    number = next(_NUMBERS)
    handle = np.array([number], np.int64)
    _DENSE[number] = fn
    weakref.finalize(handle, _DENSE.pop, number, None)
    constants = tuple(np.ascontiguousarray(value)
                      for _w, _f, ref, _c, value in assembly.writes if ref is None)
    text = kernel_source(assembly, len(dense.inputs))
    module = import_text(text)
    return module.__name__, "banded_dense", (handle, *constants)


def run_dense(handle, *inputs):
    """The dense program's value at ``inputs`` (called by a kernel's object-mode block, ``handle`` its
    first argument): its Numba function, compiled at the first call, or its Python one."""
    return _DENSE[int(handle[0])](*inputs)


def kernel_source(assembly, n_inputs):
    """The module text of :func:`native_kernel` (``n_inputs``: the dense program's)."""
    n_const = sum(ref is None for _w, _f, ref, _c, _v in assembly.writes)
    consts = [f"k{i}" for i in range(n_const)]
    diags = [f"d{i}" for i in range(assembly.n_diag)]
    muls = [f"m{i}" for i in range(assembly.n_muls)]
    divs = [f"q{i}" for i in range(assembly.n_divs)]
    inputs = [f"x{i}" for i in range(n_inputs)]
    params = ["handle"] + consts + diags + muls + divs + inputs
    body = ["    ok = True"]
    for name in muls + divs:  # a Python float, or an array (every element, whatever its layout)
        body.append(f"    if not _finite({name}):")
        body.append("        ok = False")
    for name in divs:
        body.append(f"    if not _nonzero({name}):")
        body.append("        ok = False")
    dense_type = f"float64[{', '.join([':'] * len(assembly.shape))}]"  # any layout, as the dense program's
    body += ["    if not ok:", f"        with _wengert_numba.objmode(dense={dense_type!r}):",
             f"            dense = _run_dense(handle, {', '.join(inputs)})", "        return dense",
             f"    out = np.zeros({assembly.shape!r})", "    flat = out.reshape(-1)"]
    k = 0
    for window, _first, ref, columns, _value in assembly.writes:
        count = len(range(window.start, window.stop, window.step))
        if ref is None:
            source, at = consts[k], "i"
            k += 1
        else:
            source = diags[ref]
            length = assembly.diag_vars[ref].shape[0]
            at = f"i + {columns.start}" if columns is not None else ("0" if length == 1 else "i")
        op = "+="  # every term added onto +0.0, as the dense program sums (a -0.0 term gives +0.0)
        body += [f"    for i in range({count}):",
                 f"        flat[{window.start} + i * {window.step}] {op} {source}[{at}]"]
    body.append("    return out")
    return "\n".join([
        "# wengert's Numba module for a banded_dense statement (docs/compiling.md); written and read by "
        "wengert",
        "import math", "", "import numpy as np", "import numba as _wengert_numba",
        f"from {run_dense.__module__} import run_dense as _run_dense", "",
        "_wengert_njit = _wengert_numba.njit(cache=True, error_model='numpy')", "", "",
        "@_wengert_njit", "def _finite(b):", "    for v in np.asarray(b).flat:",
        "        if not math.isfinite(v):", "            return False", "    return True", "", "",
        "@_wengert_njit", "def _nonzero(b):", "    for v in np.asarray(b).flat:",
        "        if v == 0:", "            return False", "    return True", "", "",
        "@_wengert_njit", f"def banded_dense({', '.join(params)}):", *body, ""])
