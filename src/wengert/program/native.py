"""The Numba backend of derivative programs: ``backend="numba"`` of ``wg.compile`` and ``wg.source_grad``.

Contract: a program's function is the same module ``codegen`` (or ``source.codegen``) writes, with every
function in it given to ``numba.njit`` (nopython mode, NumPy's error model: ``1.0 / 0.0`` is inf and
``math.log(-1.0)`` nan, as the Python backend's NumPy variant gives them), written to a file in the
cache directory and imported from there so that Numba's disk cache keeps the machine code
(``native_build``). It is compiled when the program is made, for its inputs' types, and
returned as the Numba dispatcher itself: no wrapper between the caller and the machine code.

Whether a primitive runs natively is a fact read from the rule table and from Numba (``native_fact``):
its spelling in generated code (an operator, indexing, ``np.<name>``, a helper, or its Python
implementation) and, for ``np.<name>``, whether Numba knows that function. Helpers are Python: they
take any array library's arrays (their type checks are what Numba cannot compile, and trying costs
seconds each); those with a Numba version (``native_helpers``: ``tie_select``, ``chooser_weights``,
``masked``, ``add_chosen``, ``untake``, ``index_add``) are native, that version taking the helper's
place. A program with a primitive that is not native, or that Numba fails to compile (a signature
Numba lacks, found at compile time), stays the Python program, with one ``NativeFallbackWarning``
naming the primitive: never an error, never a different number. Docs: docs/compiling.md.
"""

import functools
import importlib
import warnings

import numpy as np

from wengert.program.native_helpers import native_helper
from wengert.program.rendering import numpy_name
from wengert.rules.indexing import getitem

__all__ = ["NativeFallbackWarning", "BACKENDS", "check_backend", "require_numba", "native_fact", "fallback",
           "numba_knows"]

BACKENDS = ("python", "numba")
"""The backends a derivative program can run on: the generated Python itself, or Numba's machine code."""


class NativeFallbackWarning(UserWarning):
    """A program asked to run on Numba runs as Python instead (the message names the primitive or line
    Numba could not compile). Same values, slower; ``warnings.filterwarnings`` silences it."""


def check_backend(backend, where):
    """Raise ValueError unless ``backend`` is one of :data:`BACKENDS`; Numba's absence is an ImportError
    (checked when the function is made, not at its first call)."""
    if backend not in BACKENDS:
        raise ValueError(f"{where}: unknown backend {backend!r}; the choices are "
                         + ", ".join(repr(b) for b in BACKENDS))
    if backend == "numba":
        require_numba(where)
    return backend


def require_numba(where="wengert"):
    """The ``numba`` module, or an ImportError saying how to install it."""
    try:
        return importlib.import_module("numba")
    except ImportError:
        raise ImportError(f'{where}: backend="numba" needs Numba, which is not installed. Install it with '
                          f'pip install "wengert[numba]" (or pip install numba), or leave out backend= '
                          f'to run the Python program') from None


# -- which primitives are native ----------------------------------------------------------------------

@functools.cache
def _numba_typing():
    """Numba's typing context, with NumPy's overloads registered (they load with the first compile)."""
    numba = require_numba()
    numba.njit(lambda x: x)(0.0)
    from numba.core.registry import cpu_target

    return cpu_target.typing_context


def numba_knows(fun):
    """Whether Numba has a type for ``fun`` (a NumPy function it implements; not yet: for these arguments)."""
    try:
        _numba_typing().resolve_value_type(fun)
        return True
    except Exception:  # noqa: BLE001 - Numba's ValueError/TypingError: a function it has no type for
        return False


def native_fact(prim):
    """``(native, how)``: whether generated code for ``prim`` can run under Numba, and in words how it
    is spelled there. Read from the primitive's facts (operator, helper, NumPy name, math name) and
    Numba's registry of NumPy functions, once per primitive and implementation."""
    known = prim.__dict__.get("_native_memo")  # kept on the primitive (see codegen._spelled)
    if known is not None and known[0] is prim.fun:
        return known[1]
    if prim.operator is not None:
        fact = (True, f"operator {prim.operator}")
    elif prim is getitem.primitive:
        fact = (True, "indexing")
    elif prim.helper is not None and native_helper(prim.helper) is not None:
        fact = (True, f"helper {prim.helper.__name__}, its Numba version")
    elif prim.helper is not None:
        fact = (False, f"a helper of generated code, {prim.helper.__name__}, written for any array library")
    elif numpy_name(prim) is not None:
        name = numpy_name(prim)
        fact = (True, f"np.{name}") if numba_knows(getattr(np, name)) \
            else (False, f"Numba has no np.{name}")
    else:
        fact = (False, "a Python implementation")
    prim._native_memo = (prim.fun, fact)
    return fact


def fallback(name, why):
    """Warn that program ``name`` runs as Python (``why``: the primitive and the reason)."""
    warnings.warn(f"backend='numba': {name} runs as Python, not native code: {why}. The values are the "
                  f"same; see docs/compiling.md for what runs natively", NativeFallbackWarning, stacklevel=2)
