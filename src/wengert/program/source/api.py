"""``wg.source_grad`` and ``wg.source_jvp``: derivatives built from a function's source, and the
two-column view (each forward statement beside its reverse-mode counterpart).

The derivative program is specialised, like ``wg.compile``, to the shapes and dtypes of the array
arguments and the values of the static ones (ints, ...): it is built on the first call with a new
signature and cached. ``.source`` shows the program of the last signature called (before any
call, the one for Python floats in every parameter). The cache is least-recently-used, at most
``CACHE_SIZE`` (64) programs, and keeps no caller data (no argument, no intermediate of the build).
A derivative pickles as a reference to the function (built again when loaded), as ``wg.compile``.
"""

from collections import OrderedDict

import numpy as np

from wengert.api.tree import _LEAF
from wengert.program.compiled import CACHE_SIZE
from wengert.program.compiled_args import by_reference
from wengert.program.ir import Statement
from wengert.program.native import check_backend
from wengert.program.native_build import attach_native
from wengert.program.source.adjoint import grad_source, jvp_source
from wengert.program.source.checkpoint import check_policy
from wengert.program.source.codegen import block_source, render_block
from wengert.program.source.control import If, Loop, Pop, Push
from wengert.program.source.program import from_source
from wengert.program.tracing import is_input_leaf

__all__ = ["source_grad", "source_jvp", "adjoint_table"]


_TAPE_EQUIVALENT = {"grad": "wg.grad", "jvp": "wg.jvp"}
_VARIANTS = 8  # programs kept per signature for different captured values (as wg.compile)


def _key(args, name="grad", fun_name="f"):
    key = []
    for k, a in enumerate(args):
        if is_input_leaf(a):
            key.append(("in", np.shape(a), np.result_type(a).str, type(a) is float))
            continue
        if isinstance(a, (list, tuple, dict)):
            raise TypeError(f"source_{name}({fun_name}): argument {k} is a {type(a).__name__}; the source "
                            f"transformation takes arrays, numbers and static values (ints, strings, "
                            f"None). Pass its entries as separate arguments, or use "
                            f"{_TAPE_EQUIVALENT[name]}, which takes pytrees")
        try:
            hash(a)
        except TypeError:
            raise TypeError(f"source_{name}({fun_name}): argument {k} ({type(a).__name__}) is neither an "
                            f"array or number nor a hashable static value") from None
        key.append(("static", type(a).__name__, a))
    return tuple(key)


class _SourceDerivative:
    """A derivative function built from source; ``.source`` is its readable program."""

    def __init__(self, fun, build, kind, options=None):
        self.fun = fun
        self.backend = (options or {}).get("backend", "python")  # "numba": Numba machine code
        self._build = build
        self._options = options or {}  # the keywords it was made with (pickling)
        self._cache = OrderedDict()  # signature -> [(program, reader)], least recently used first
        self._size = 0
        self._last = None
        self._last_read = None  # its captured values' reader (None: it captures none)
        self._hot = None  # (argument types: floats, function, captured reader): the last call's program
        self.kind = kind
        self.__name__ = f"{getattr(fun, '__name__', 'f')}_{kind}"
        self.__module__ = getattr(fun, "__module__", None)
        self.__qualname__ = getattr(fun, "__qualname__", self.__name__)
        self.__doc__ = f"The {kind} of {getattr(fun, '__name__', 'f')}, built from its source."

    def program(self, *args):
        """The derivative program for arguments like ``args`` (and the captured values as they are)."""
        self._hot = None  # .source shows this one until the next call
        return self._program(args)[0]

    def _program(self, args):
        """The program for ``args`` whose captured values' guards pass (built again if none does), and
        the captured arrays' values now (its last inputs, or the tangents' places: source_jvp)."""
        key = _key(args, self.kind, getattr(self.fun, "__name__", "f"))
        entries = self._cache.get(key, ())
        for prog, read in entries:
            captured = read() if read is not None else ()
            if captured is not None:
                self._last, self._last_read = prog, read
                self._cache.move_to_end(key)
                return prog, captured
        source = from_source(self.fun, *args)
        prog = self._build(source)
        if self.backend == "numba":
            attach_native(prog)
        prog = _without_values(prog)
        read = source.captures.reader() if source.captures is not None else None
        entries = self._cache.setdefault(key, [])
        self._cache.move_to_end(key)
        if len(entries) >= _VARIANTS:
            del entries[0]
            self._size -= 1
        entries.append((prog, read))
        self._size += 1
        while self._size > CACHE_SIZE:  # the least recently used signature's oldest program
            oldest = next(iter(self._cache))
            del self._cache[oldest][0]
            self._size -= 1
            if not self._cache[oldest]:
                del self._cache[oldest]
        self._last, self._last_read = prog, read
        captured = read() if read is not None else ()
        if captured is None:  # changed while it was built: this call runs on the values it was built for
            captured = tuple(n.value for n in source.captures.arrays)
        if source.captures is not None and source.captures.arrays:
            source.captures.drop_values()  # no captured array kept alive by the cache
        return prog, captured

    def __reduce__(self):
        """Pickled as a reference to the function and the options: built again when loaded."""
        what = f"wg.source_{self.kind}({getattr(self.fun, '__qualname__', self.fun)})"
        found = by_reference(self.fun, self, what)
        if found is None:  # decorated at module level: this very object, by name
            return self.__qualname__
        return (_restore, (self.kind, found, self._options))

    def _latest(self):
        if self._last is None:
            try:
                self.program()
            except (TypeError, ValueError, IndexError) as e:
                raise TypeError(f"{self.__name__}: no program yet, and none for Python floats ({e}); call it "
                                f"first, or build one with .program(*example_args)") from None
        return self._last

    @property
    def source(self):
        """The derivative program's Python source (last signature called; floats before any call)."""
        return self._latest().source

    def table(self):
        """The two-column view of the last program (floats before any call)."""
        return adjoint_table(self._latest())


    def _positional(self, args, kwargs):
        """``args`` and ``kwargs`` as positional arguments, bound as Python binds them."""
        import inspect

        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{self.__name__}: {e}") from None
        if bound.kwargs:  # a default skipped before a parameter given by name: filled in
            bound.apply_defaults()
        if bound.kwargs:
            raise TypeError(f"{self.__name__}: keyword-only arguments ({', '.join(bound.kwargs)}) are "
                            f"outside what the source transformation takes; give them by position")
        return bound.args


class _Contribution:
    """What the two-column table reads of a contribution (a traced value): its variable, no value."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        self.variable = variable


def _without_values(prog):
    """``prog`` holding no value of the call it was built on (the cache keeps no caller data): the
    table's contributions, traced values holding their examples and the trace, become variables."""
    table = getattr(prog, "table", None)
    if table:
        prog.table = [(fwd, rev, [(a, _Contribution(c.variable) if hasattr(c, "variable") else c)
                                  for a, c in contribs]) for fwd, rev, contribs in table]
    return prog


def _run(prog, flat, captured=()):
    """``prog(*flat, *captured)`` with NumPy's arithmetic on Python floats: where Python refuses what
    NumPy answers with inf or nan (``1.0 / 0.0``, math's domain errors) or answers with a complex
    number (``(-1.0) ** 0.5``), the program runs again on ``np.float64``, as the tape's fast paths do."""
    flat = list(flat) + list(captured)
    try:
        out = prog(*flat)
    except (ArithmeticError, ValueError):
        if not any(type(a) is float for a in flat):
            raise
        return prog(*[np.float64(a) if type(a) is float else a for a in flat])
    if (type(out) is complex or (type(out) is tuple and any(type(o) is complex for o in out))) \
            and any(type(a) is float for a in flat) and not any(type(a) is complex for a in flat):
        return prog(*[np.float64(a) if type(a) is float else a for a in flat])
    return out


def _hot_call(prog):
    """``prog`` as a function of its flat inputs on Python floats (captured arrays last): its Numba
    function itself where that returns the gradient's structure as it is (one leaf, or a tuple of
    several; Numba neither raises Python's float errors nor makes a complex number of floats), else
    through :func:`_run`."""
    if getattr(prog, "native", False) and (prog.out_tree == _LEAF or len(prog.outputs) > 1):
        return prog._function
    return lambda *flat: _run(prog, flat)


class _Grad(_SourceDerivative):
    def __call__(self, *args, **kwargs):
        hot = self._hot  # Python floats, as in the last call: no signature to compute, no cache to search
        if hot is not None and not kwargs and tuple(map(type, args)) == hot[0]:
            if hot[2] is None:
                return hot[1](*args)
            captured = hot[2]()
            if captured is not None:  # (None: a captured value changed; the cache decides)
                return hot[1](*args, *captured)
        if kwargs:
            args = self._positional(args, kwargs)
        prog, captured = self._program(args)
        self._hot = None
        if all([type(a) is float for a in args]):
            self._hot = ((float,) * len(args), _hot_call(prog), self._last_read)
        flat = [a for a in args if is_input_leaf(a)]
        return _run(prog, flat, captured)


class _Jvp(_SourceDerivative):
    def __call__(self, primals, tangents):
        primals, tangents = tuple(primals), tuple(tangents)
        if len(primals) != len(tangents):
            raise ValueError(f"source_jvp: {len(primals)} primals but {len(tangents)} tangents")
        prog, captured = self._program(primals)
        flat = [a for a in primals if is_input_leaf(a)]
        flat_t = [t for a, t in zip(primals, tangents) if is_input_leaf(a)]
        return _run(prog, flat + list(captured) + flat_t)


def _restore(kind, fun, options):
    """A pickled source derivative, built again (``fun``: the function, or what wraps it)."""
    if isinstance(fun, _SourceDerivative):
        fun = fun.fun
    return source_grad(fun, **options) if kind == "grad" else source_jvp(fun, **options)


def source_grad(fun, argnums=0, *, checkpoint="all", snapshots=None, backend="python"):
    """The gradient of ``fun`` (one scalar output) as a program derived from its source: loops stay
    loops, names follow the user's (``x_bar``); ``.source`` is the program, ``.table()`` the
    two-column view. Unsupported constructs raise ``wg.TransformError`` (use ``wg.grad`` for them).

    ``checkpoint``: how every loop's reverse pass gets the values of its iterations. ``"all"`` (the
    default) keeps them on a stack (memory grows with the trip count); ``"binomial"`` (revolve,
    ``snapshots`` states, default ceil(log2 n); ``for`` loops over a range known when the program is
    generated) and ``"ctz"`` (online: also ``while`` loops and ``break``) keep a few loop states and
    recompute iterations from them, following the schedules of ``wengert.checkpointing``.

    Globals and closure variables are read as the plain function reads them on each call (captured
    arrays as inputs, other values guarded: docs/program.md, "Captured values follow Python").
    ``backend="numba"`` runs the program as Numba's machine code (docs/compiling.md)."""
    check_policy(checkpoint, snapshots, f"source_grad({getattr(fun, '__name__', fun)})")
    check_backend(backend, f"source_grad({getattr(fun, '__name__', fun)})")
    options = {"argnums": argnums, "checkpoint": checkpoint, "snapshots": snapshots, "backend": backend}
    return _Grad(fun, lambda p: grad_source(p, argnums, checkpoint=checkpoint, snapshots=snapshots), "grad",
                 options)


def source_jvp(fun, *, backend="python"):
    """Forward mode from source: ``source_jvp(f)(primals, tangents)`` returns ``(f(*primals), the
    directional derivative)``, as ``wg.jvp``; ``.source`` is the program (names ``x_dot``).
    ``backend="numba"`` as for :func:`source_grad`."""
    check_backend(backend, f"source_jvp({getattr(fun, '__name__', fun)})")
    return _Jvp(fun, jvp_source, "jvp", {"backend": backend})


# -- the two-column table -----------------------------------------------------------------------------------

def _lines(nodes, mod):
    lines = render_block(nodes, mod, 0)
    return lines or [""]


def adjoint_table(program):
    """Each forward statement beside its reverse-mode counterpart (two columns):
    the derivative program is the left column top-down, then the right column bottom-up."""
    _text, mod = block_source(program.name, program.inputs, program.nodes, program.outputs,
                              stack=program.stack)
    rows = []
    grads = program.outputs[-len(program.inputs):] if program.outputs else []
    for v, g in zip(program.inputs, grads):
        rows.append(([f"{v.name} = input"], [f"return {getattr(g, 'name', g)} as the gradient of {v.name}"]))
    for fwd, rev, contribs in program.table:
        made = {o for n in rev if type(n) is Statement for o in n.outs}
        rev_lines = _lines([n for n in rev], mod) if rev else []
        for a, c in contribs:
            cvar = getattr(c, "variable", None)
            if cvar is not None and cvar not in made:
                rev_lines.append(f"{a.name}_bar += {cvar.name}")
        rev_lines = rev_lines or [""]
        if type(fwd) is Statement:
            left = _lines([fwd], mod)
        else:
            left = _lines([_plain(fwd)], mod)
        rows.append((left, rev_lines))
    seeds = [n for n in program.nodes if type(n) not in (Statement, If, Loop, Push, Pop)
             and not hasattr(n, "render")]  # checkpointed loops' nodes
    if seeds:
        rows.append(([f"return {getattr(program.primal, 'name', program.primal)}"], _lines(seeds[:1], mod)))
    width = max([len(line) for left, _ in rows for line in left] + [len("forward (read top-down)")]) + 4
    out = [f"{'forward (read top-down)':<{width}}reverse (read bottom-up)", "-" * (width + 28)]
    for left, right in rows:
        n = max(len(left), len(right))
        left = left + [""] * (n - len(left))
        right = right + [""] * (n - len(right))
        out += [f"{a:<{width}}{b}".rstrip() for a, b in zip(left, right)]
    return "\n".join(out)


def _plain(node):
    """A forward node without the reverse pass's pushes and counter."""
    if type(node) is Loop:
        return node.copy(count=None, push=[], body=[_plain(n) for n in node.body])
    if type(node) is If:
        new = If(node.cond, [_plain(n) for n in node.then], [_plain(n) for n in node.orelse], node.outs,
                 node.then_vals, node.else_vals, node.lineno)
        return new
    return node
