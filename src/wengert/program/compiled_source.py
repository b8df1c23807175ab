"""``wg.compile`` where the trace refuses: the program built from the function's source instead.

Tracing runs the function once on symbols, so Python control flow on a traced value (``if a > 0:``,
``while abs(a) > 1e-3:``, ``range(n)`` of a traced ``n``, ``break`` on a traced test) and stores
into a plain NumPy buffer (``buf = np.zeros(3); buf[i] = x``) or a NumPy function given a list of
traced values are refused (:class:`TracingError`, :class:`ExitError`). For those refusals (not the
captured values' checks of ``captures.py`` nor the randomness check, which stand) ``wg.compile``
builds the program from the source, as ``wg.source_grad`` does (``Program.from_source``:
``if``/``while``/``for``/``break`` stay control flow in the program) and caches it for the signature
like a trace: the value, ``.grad()`` and ``.value_and_grad()`` all run it.

What is visible: ``cf.program(x)`` is a :class:`SourceCompiled` (``.source`` the source-derived
program with its loops and branches, ``.refusal`` the trace's reason; a traced ``Program`` has no
``refusal``), and ``cf.cache_info()`` counts it as one miss, as a trace. No warning:
the values are those of the function, the gradients those of ``wg.source_grad``.

Where the source transformation cannot build it either, the trace's error (its class, its message
first) is raised with the source transformer's reason added: both name their file and line.
"""

import functools
import os

import numpy as np

from wengert.core.errors import TracingError
from wengert.core.exits import ExitError, name_of
from wengert.program import captures as captures_module
from wengert.program.captures import Captures
from wengert.program.source.adjoint import grad_source
from wengert.program.source.codegen import compile_block
from wengert.program.source.inplace import update_in_place
from wengert.program.source.program import from_source

__all__ = ["REFUSALS", "SourceCompiled", "from_source_instead"]

REFUSALS = (TracingError, ExitError)
"""What the trace raises for what it cannot record (control flow on a value, a plain buffer)."""

_CAPTURES_FILE = os.path.abspath(captures_module.__file__)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # src/wengert/

# What building from source raises for what it does not support: TransformError and TracingError
# are TypeErrors; a shape or an argument it cannot take, a ValueError or TypeError; no source, OSError.
_SOURCE_FAILURES = (TypeError, ValueError, IndexError, NotImplementedError, OSError)


class SourceCompiled:
    """What ``wg.compile`` caches for a signature whose trace refused: the program built from source
    (``.program``: a ``SourceProgram``, or its gradient program), and what ``compiled._Entry`` reads
    of a traced ``Program`` (``function``, ``in_leaves``, ``out_tree``, ``outputs``, ``captures``)."""

    def __init__(self, forward, program, function, refusal):
        self.program = program
        self.refusal = str(refusal)  # why the trace refused (the message, not the error: no frames kept)
        self.name = program.name
        self.inputs = list(program.inputs)
        captured = forward.inputs[len(forward.inputs) - forward.n_captured:] if forward.n_captured else []
        self.in_leaves = list(forward.params) + list(captured)  # per argument leaf: Variable or static
        self.outputs = list(program.outputs)
        self.out_tree = program.out_tree
        self.examples = {}  # no value of the caller's is kept
        self.captures = forward.captures
        self.function = function

    @property
    def source(self):
        """The Python source that runs (loops and branches kept)."""
        return self.program.source

    def __str__(self):
        return self.source

    def __repr__(self):
        return f"<wengert program {self.name}, built from source (the trace refused)>"


def _refused_by_trace(error):
    """Whether ``error`` is the trace's refusal of the function's code, not one of the captured values'
    checks (``captures.py``: a global assigned, a captured array written into), which stand as they are."""
    tb, last = error.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is None or os.path.abspath(last.tb_frame.f_code.co_filename) != _CAPTURES_FILE


def _wengert_function(fun):
    """Whether ``fun`` (through ``functools.partial``) is code of wengert's, such as the function
    ``wg.grad(f)`` returns: its source is wengert's, not the user's."""
    while isinstance(fun, functools.partial):
        fun = fun.func
    code = getattr(fun, "__code__", None)
    return code is not None and os.path.abspath(code.co_filename).startswith(_PACKAGE_DIR)


def _numpy_arithmetic(function):
    """``function`` with NumPy's answer where Python floats give a complex number (``(-1.0) ** 0.5``):
    run again on ``np.float64`` (``compile_block`` already does so for math's domain errors)."""
    def run(*flat):
        out = function(*flat)
        if (type(out) is complex or (type(out) is tuple and any(type(o) is complex for o in out))) \
                and any(type(a) is float for a in flat) and not any(type(a) is complex for a in flat):
            return function(*[np.float64(a) if type(a) is float else a for a in flat])
        return out

    run.__name__ = getattr(function, "__name__", "f")
    return run


def _restated(refusal, message):
    """An error of ``refusal``'s class (``except wg.ExitError`` still catches it) saying ``message``."""
    try:
        return type(refusal)(message)
    except TypeError:  # a subclass constructed otherwise
        return TracingError(message)


def from_source_instead(fun, args, transform, argnums, refusal):
    """``(program, captures)`` for ``wg.compile`` of ``fun`` on ``args`` (``transform``: None, "grad",
    "value_and_grad") built from source, where the trace refused with ``refusal``. Raises ``refusal``
    itself when it is a captured value's check, and an error of its class naming both reasons when
    the source transformation cannot build it either."""
    if not _refused_by_trace(refusal):
        raise refusal
    what = f"wg.compile({name_of(fun)})" + (f".{transform}({argnums!r})" if transform else "")
    if _wengert_function(fun):
        raise _restated(refusal,
            f"{refusal} -- {what}: {name_of(fun)} is a function of wengert's own (a transform such as "
            f"wg.grad, wg.hessian or wg.vmap applied to your function, or wg.compile's wrapper of "
            f"keyword-only arguments), so the program cannot be built from its source instead: compile "
            f"your function itself (wg.compile(f).grad(), .value_and_grad()), or differentiate with the "
            f"tape (wg.grad)") from None
    try:
        forward = from_source(fun, *args)
        if transform is None:
            program = forward
            raw = compile_block(forward.name, forward.inputs, update_in_place(forward.body), forward.outputs)
        else:
            program = grad_source(forward, argnums, with_value=transform == "value_and_grad")
            if transform == "value_and_grad":
                program.name = f"{forward.name}_value_and_grad"
            raw = program.function
    except _SOURCE_FAILURES as e:
        raise _restated(refusal,
            f"{refusal} -- {what} then built the program from the source instead (as wg.source_grad "
            f"does), which refused too: {e}") from e  # each message says what to do (and names wg.grad)
    forward.examples = {}  # the values abstract evaluation computed: the cache keeps none of them
    captures = forward.captures if forward.captures is not None else Captures(f"wg.compile({name_of(fun)})")
    return SourceCompiled(forward, program, _numpy_arithmetic(raw), refusal), captures

