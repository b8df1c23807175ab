"""``wg.compile``: trace once per input signature, generate Python, cache it, run it.

A signature is the arguments' pytree structure, each array's shape and dtype, "float" for Python
floats, "int" for Python ints, and the *value* of the static arguments: those named by
``static_argnums`` / ``static_argnames`` (as ``jax.jit``'s), bools, strings, None and other
non-numbers. A Python int that is not static is a traced value, as under ``jax.jit``: a loop counter
``cf(x, i)`` traces once; an int that decides a shape, a range, a slice or Python control flow is
refused with an error naming it and ``static_argnums=`` (``compiled_args.py``). A new signature
traces again (counted by ``cache_info()``). Arguments that are already traced by another transform
(``wg.grad`` of a compiled function) make it run ``fun`` itself, so the tape records it as usual.

The cache is least-recently-used, at most ``cache_size`` programs (default ``CACHE_SIZE``, 64;
None: unbounded), and keeps no caller data: no input array, no intermediate (only the static
arguments' values, which are its keys). A compiled function pickles as a reference to ``fun``
(compiled again when loaded); a lambda or local function is refused, naming ``wg.compile``.

Captured values follow Python (``captures.py``, docs/program.md): the float arrays ``fun`` reads
from globals, closure cells and captured objects are inputs of the program read at each call; its
other captured values are guarded, and a change traces again (kept beside the earlier traces of the
signature, at most ``_VARIANTS``).
"""

from __future__ import annotations

import functools
import inspect
import operator
import warnings
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Generic, NamedTuple, ParamSpec, Sequence, TypeVar, overload

import numpy as np

from wengert.api import transforms
from wengert.api.randomness import sources_of
from wengert.api.tree import _LEAF, tree_flatten, tree_unflatten
from wengert.core.errors import TracingError
from wengert.core.trace import gc_paused
from wengert.engines.collector import trace_started
from wengert.program.captures import scan, with_captured_inputs
from wengert.program.compiled_args import (
    INT64,
    STATIC,
    Compiled,
    arguments_to_trace,
    by_reference,
    check_hashable,
    flat_key,
    int_refusal,
    positional_signature,
    shape_dependence,
    signature,
    static_positions,
    with_statics_put_back,
)
from wengert.program.compiled_source import REFUSALS, from_source_instead
from wengert.program.ir import Variable
from wengert.program.native import check_backend
from wengert.program.native_build import attach_native
from wengert.program.pipeline import lower, optimize
from wengert.program.program import Program
from wengert.program.tracing import _param_names

__all__ = ["compile_function", "CompiledFunction", "CacheInfo", "CACHE_SIZE"]

# The types users' type checkers see: a compiled function takes ``fun``'s parameters (P) and returns
# its result type (R); ``.grad()`` returns gradients (``Any``: the arguments' structure, as arrays), a
# tuple of them for a tuple ``argnums``; ``.value_and_grad()`` pairs R with them.
P = ParamSpec("P")
R = TypeVar("R")

CACHE_SIZE = 64
"""Programs a compiled function keeps by default (``cache_size=``), the least recently used evicted."""

_VARIANTS = 8
"""Traces kept per signature of the arguments, for different captured values (torch.compile's
``cache_size_limit``): a value that keeps changing evicts the oldest, with one warning."""

class CacheInfo(NamedTuple("CacheInfo", [("hits", int), ("misses", int), ("currsize", int)])):
    """Like ``functools.lru_cache``'s: calls served from the cache, traces, programs held; and
    ``maxsize``, the most it holds (None: unbounded), an attribute outside the tuple."""

    maxsize: int | None

    def __new__(cls, hits: int, misses: int, currsize: int, maxsize: int | None = None) -> CacheInfo:
        info = super().__new__(cls, hits, misses, currsize)
        info.maxsize = maxsize
        return info

    def __repr__(self) -> str:
        return (f"CacheInfo(hits={self.hits}, misses={self.misses}, currsize={self.currsize}, "
                f"maxsize={self.maxsize})")


class _Entry:
    """One traced signature: the program, its function, and ``call``, the function taking every
    leaf of the arguments (static ones ignored) and returning the result's structure."""

    __slots__ = ("program", "function", "picks", "call", "body", "params", "namespace", "dispatch",
                 "captures", "read", "extra")

    def __init__(self, program, captures):
        self.program = program
        self.function = program.function
        self.captures = captures
        # read(): the captured arrays' values now, or None when a guarded captured value changed
        self.read = captures.reader() if captures.nodes else None
        self.extra = len(captures.arrays)  # the last leaves of the program are the captured arrays
        self.picks = tuple(i for i, slot in enumerate(program.in_leaves) if type(slot) is Variable)
        params = [f"a{i}" for i in range(len(program.in_leaves))]
        inner = f"function({', '.join(params[i] for i in self.picks)})"
        tree = program.out_tree
        namespace = {"function": self.function, "unflatten": tree_unflatten, "tree": tree}
        flat = tree is _LEAF or (tree[0] is tuple and len(tree[2]) != 1 and all(c is _LEAF for c in tree[2]))
        n = len(program.outputs)
        outs = [f"o{k}" for k in range(n)]
        built = None if flat or not n else _builder(tree, iter(outs), namespace)
        if flat:
            body = [f"return {inner}"]
        elif built is None:
            body = [f"return unflatten(tree, [{inner}])" if n == 1 else f"return unflatten(tree, {inner})"]
        else:  # the result's structure spelled out: no tree_unflatten per call
            body = [f"{', '.join(outs)}{',' if n == 1 else ''} = {inner}" if n > 1 else f"o0 = {inner}",
                    f"return {built}"]
        self.body, self.namespace = body, namespace
        self.params = params[:len(params) - self.extra]  # the arguments' leaves (dispatch's parameters)
        text = f"def call({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body)
        exec(text, namespace)  # noqa: S102
        self.call = namespace["call"]
        self.dispatch = None

    def run(self, leaves, captured=()):
        return self.call(*leaves, *captured)

    def dispatcher(self, args, slow, hits, static=()):
        """For a flat key (``flat_key``): one generated function that checks that ``args`` have this
        entry's signature (shapes, dtypes, floats, ints, static values) and runs the program, or else calls
        ``slow(*args)``: the per-call overhead of a cached call is this one check, without building
        and hashing a key (on small arrays the overhead is a large part of the time)."""
        checks, namespace = [], dict(self.namespace, slow=slow, hits=hits, ndarray=np.ndarray)
        for i, a in enumerate(args):
            t = type(a)
            if t is np.ndarray:
                namespace[f"s{i}"], namespace[f"d{i}"] = a.shape, a.dtype
                checks.append(f"type(a{i}) is ndarray and a{i}.shape == s{i} and a{i}.dtype is d{i}")
            elif static and i in static:  # a static argument: its value is part of the signature
                namespace[f"t{i}"], namespace[f"c{i}"] = t, a
                checks.append(f"type(a{i}) is t{i} and a{i} == c{i}")
            elif t is float:
                checks.append(f"type(a{i}) is float")
            elif INT64[0] <= a <= INT64[1]:  # a traced int
                checks.append(f"type(a{i}) is int and {INT64[0]} <= a{i} <= {INT64[1]}")
            else:  # an int outside int64: static
                checks.append(f"type(a{i}) is int and a{i} == {int(a)}")
        # The parameters are named (a missing one is _MISSING, which fails its check): keyword
        # arguments reach ``slow`` without costing a positional call anything.
        namespace["_MISSING"] = _MISSING
        # Positional-only: f(x, a1=3.0) is a keyword argument, not the parameter a1.
        head = "".join(f"{p}=_MISSING, " for p in self.params) + ("/, " if self.params else "")
        given = "".join(f"{p}, " for p in self.params)
        lines = [f"def dispatch({head}*rest, **kwargs):",
                 f"    if {' and '.join(checks) if checks else 'True'} and not rest and not kwargs:"]
        indent = "        "
        if self.read is not None:  # the captured values' guards, and the captured arrays read now
            namespace["read"] = self.read
            lines += ["        captured = read()", "        if captured is not None:"]
            indent = "            "
            if self.extra:
                names = [f"a{len(self.params) + k}" for k in range(self.extra)]
                lines.append(f"{indent}{', '.join(names)}, = captured")
        lines.append(f"{indent}hits[0] += 1")
        lines += [f"{indent}{line}" for line in self.body]
        lines += [f"    return slow(*[a for a in ({given}) if a is not _MISSING], *rest, **kwargs)"]
        text = "\n".join(lines) + "\n"
        exec(text, namespace)  # noqa: S102
        return namespace["dispatch"]


def _builder(tree, names, namespace):
    """Source of an expression building the pytree ``tree`` from the leaf expressions ``names`` (in
    order), or None where it cannot be spelled (dict keys other than strings and ints, an
    OrderedDict or defaultdict)."""
    if tree is _LEAF:
        return next(names)
    t, keys, children = tree
    if t is None:
        return "None"
    parts = [_builder(c, names, namespace) for c in children]
    if any(p is None for p in parts):
        return None
    if t is tuple:
        return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
    if t is list:
        return f"[{', '.join(parts)}]"
    if t is dict:
        if not all(type(k) in (str, int) for k in keys):
            return None
        return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(keys, parts)) + "}"
    if not (isinstance(t, type) and issubclass(t, tuple)):  # OrderedDict, defaultdict
        return None
    name = f"T{len(namespace)}"  # a namedtuple type
    namespace[name] = t
    return f"{name}({', '.join(parts)})"


class CompiledFunction(Compiled, Generic[P, R]):
    """``fun`` (or a derivative of it), compiled per input signature; see the module docs."""

    def __init__(self, fun: Callable[P, R], transform: str | None = None, argnums: int | Sequence[int] = 0, *,
                 static_argnums: int | Sequence[int] | None = None,
                 static_argnames: str | Sequence[str] | None = None, cache_size: int | None = CACHE_SIZE,
                 backend: str = "python") -> None:
        if cache_size is not None and (type(cache_size) is not int or cache_size < 1):
            raise ValueError(f"wg.compile({getattr(fun, '__name__', fun)}): cache_size={cache_size!r}; give "
                             f"a positive int, or None for an unbounded cache")
        self.fun = fun
        self.backend = backend  # "numba": the programs run as Numba's machine code (native.py)
        self.transform = transform
        self.argnums = argnums
        # The keywords that .grad(), .value_and_grad(), keyword variants and pickling pass on.
        self._options: dict[str, Any] = {"static_argnums": static_argnums, "static_argnames": static_argnames,
                         "cache_size": cache_size, "backend": backend}
        self._static = static_positions(fun, static_argnums, static_argnames)
        self._cache = OrderedDict()  # signature -> its entries (captured values' variants); LRU order
        self._size, self._maxsize = 0, cache_size
        self._dispatch_key = None  # the signature of the entry that self._dispatch runs
        self._hits = 0
        self._fast_hits = [0]  # counted by the entries' dispatchers
        self._misses = 0
        self._dispatch = self._slow
        self._variants = {}  # (keyword-only names, positional count) -> compiled, taking them last
        self._warned = False  # about a captured value that keeps changing
        functools.update_wrapper(self, fun)

    def _entry(self, args):
        """The entry for ``args`` (traced if no cached one passes its guards), their leaves and the
        captured arrays' values; ``(None, None, None)`` for values traced by another transform."""
        static = self._static_at(args)
        key, leaves = signature(args, static)
        if key is None:
            return None, None, None
        entry, captured = self._lookup(key, args)
        return entry, (leaves if leaves is not None else args), captured

    def _static_at(self, args):
        """The static positions of a call with ``args`` (their values checked hashable)."""
        if not self._static:
            return ()
        static = self._static.positions(len(args))
        for i in static:
            check_hashable(args[i], i, f"wg.compile({getattr(self.fun, '__name__', self.fun)})")
        return static

    def _lookup(self, key, args):
        """The cached entry of signature ``key`` whose captured values' guards pass, and the captured
        arrays' values; or a new trace (kept with at most ``_VARIANTS - 1`` others of its key)."""
        cache = self._cache
        entries = cache.get(key)
        if entries is not None:
            for entry in entries:
                captured = entry.read() if entry.read is not None else ()
                if captured is not None:
                    self._hits += 1
                    cache.move_to_end(key)
                    return entry, captured
        self._misses += 1
        entry = self._new_entry(args)
        if self._dispatch_key in cache:  # served by its dispatcher, unseen here: recently used
            cache.move_to_end(self._dispatch_key)
        entries = cache.setdefault(key, [])
        cache.move_to_end(key)
        if len(entries) >= _VARIANTS:
            self._forget(entries.pop(0))
            if not self._warned:
                self._warned = True
                warnings.warn(f"{self!r} traced {_VARIANTS + 1} times for arguments of one signature "
                              f"because a captured value keeps changing (last: "
                              f"{entries[-1].captures.changed()}); pass it as an argument",
                              RuntimeWarning, stacklevel=4)
        entries.append(entry)
        self._size += 1
        while self._maxsize is not None and self._size > self._maxsize:  # the least recently used
            oldest = next(iter(cache))
            self._forget(cache[oldest].pop(0))
            if not cache[oldest]:
                del cache[oldest]
        captured = entry.read() if entry.read is not None else ()
        if captured is None:  # changed by the trace itself: this call runs on the values traced
            captured = tuple(n.value for n in entry.captures.arrays)
        if entry.captures.arrays:
            entry.captures.drop_values()  # no captured array kept alive by the cache
        return entry, captured

    def _forget(self, entry):
        """``entry`` leaves the cache (and the dispatcher of the next call, if it was its)."""
        self._size -= 1
        if entry.dispatch is not None and self._dispatch is entry.dispatch:
            self._dispatch, self._dispatch_key = self._slow, None

    def _refuse_traced_ints(self, args, refusal):
        """A program built from source holds the values of its int arguments (``range(n)``), but a
        traced int is not part of the cache's key: with one, ``refusal`` stands, saying to make it
        static (the key then holds its value)."""
        if getattr(refusal, "int_arguments", None):
            raise refusal  # the ints' own refusal: it names static_argnums already
        static = set(self._static_at(args))
        ints = [i for i, a in enumerate(args) if type(a) is int and i not in static]
        if ints:
            name = getattr(self.fun, "__name__", "f")
            remedy = f"static_argnums={ints[0]}" if len(ints) == 1 else f"static_argnums={tuple(ints)}"
            raise type(refusal)(
                f"{refusal} -- wg.compile({name}) builds the program from the source instead only when "
                f"its int arguments are static (such a program holds their values, and a traced int is "
                f"not part of the cache's key): wg.compile({name}, {remedy})") from refusal

    def _new_entry(self, args):
        # Tracing, the passes and code generation make several objects per statement, all alive
        # until the end: the collector's full passes would scan them again and again (a third of
        # the time of a long program's compilation). Inside the pause, young collections run only
        # where they pay (engines.collector.trace_started, as for a reverse trace): what they skip
        # is frozen, and the pause's end moves it to the oldest generation: most of the program
        # that is kept is not scanned again by the first young collection after the pause.
        with gc_paused():
            trace_started()
            return _Entry(*self._build(args))

    def _build(self, args):
        name = getattr(self.fun, "__name__", self.fun)
        random = sources_of(self.fun, args, where=f"wg.compile({name})")
        before = random.capture()
        try:
            built = self._build_traced(args, name)
        except REFUSALS as refusal:  # control flow on a traced value, a plain buffer: built from source
            self._refuse_traced_ints(args, refusal)
            built = from_source_instead(self.fun, args, self.transform, self.argnums, refusal)
        drew = random.changed(before)
        if drew:
            random.restore(before)
            raise TracingError(
                f"wg.compile({name}): {name} draws random numbers (from {drew[0]}) while it is "
                f"traced; the compiled program would repeat those numbers on every call. Draw them "
                f"outside and pass them as an argument, or call {name} without wg.compile.")
        return built

    def _build_traced(self, args, name):
        static = self._static_at(args)
        fun = with_statics_put_back(self.fun, args, static) if static else self.fun
        trace_args, ints = arguments_to_trace(args, static)
        try:
            program, captures = self._trace(fun, trace_args, name)
        except (TypeError, ValueError, IndexError) as e:  # TracingError, UnsupportedNumpyFunction too
            if ints:
                self._explain_ints(fun, args, trace_args, ints, name, e)
            raise
        if ints:  # a shape that depends on a traced int's value: the program would be wrong for others
            found = shape_dependence(program, [program.in_leaves[k] for k in ints])
            if found is not None:
                position = next(ints[k] for k in ints if program.in_leaves[k] is found[0])
                raise int_refusal(name, self._static, [position],
                                  f"the shape of {found[1].prim.__name__}'s result depends on it")
        if self.transform == "grad":
            built = lower(program.grad(self.argnums))  # simplified already
        elif self.transform == "value_and_grad":
            built = lower(program.value_and_grad(self.argnums))
        else:
            built = optimize(program)
        built.examples = {}  # the cache keeps no caller data (deriving the program again uses placeholders)
        built.captures = captures if captures.nodes else None
        if self.backend == "numba":
            attach_native(built)
        return built, captures

    def _trace(self, fun, args, name):
        """The Program ``fun(*args)`` records, and the captured values (``captures.scan``)."""
        captures = scan(self.fun, f"wg.compile({name})")
        if captures.nodes:  # the captured arrays are inputs after the arguments, the rest guarded
            traced = with_captured_inputs(fun, len(args), captures, _param_names(self.fun, len(args)))
            program = Program.from_trace(traced, *args, *[n.value for n in captures.arrays],
                                         refuse_constant=captures.refuse_constant)
        else:
            program = Program.from_trace(fun, *args)
        return program, captures

    def _explain_ints(self, fun, args, trace_args, ints, name, error):
        """After a trace with traced ints failed: trace again with each int argument static (then all);
        where that succeeds, raise the error naming it and ``static_argnums=``."""
        leaves, tree = tree_flatten(trace_args)
        static = self._static_at(args)
        plain = tree_flatten(tuple(STATIC if i in static else a for i, a in enumerate(args)))[0]
        positions = sorted(set(ints.values()))
        tries = [[k] for k in positions] + ([positions] if len(positions) > 1 else [])
        for ks in tries:
            retry = [plain[j] if ints.get(j) in ks else leaf for j, leaf in enumerate(leaves)]
            try:
                self._trace(fun, tree_unflatten(tree, retry), name)
            except Exception:  # noqa: BLE001 - not this argument: the next
                continue
            said = str(error).split(": its value is not known")[0]  # without the tracer's remedies
            raise int_refusal(name, self._static, ks, f"{type(error).__name__}: {said}") from None

    # ``f(*args)`` calls ``f._dispatch(*args)``, the last signature's dispatcher (``_Entry.dispatcher``),
    # found by a C-level getter: no Python frame of our own between the caller and the dispatcher.
    if TYPE_CHECKING:
        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...
    else:
        __call__ = property(operator.attrgetter("_dispatch"))

    def _slow(self, *args, **kwargs):
        if kwargs:
            return self._keywords(args, kwargs)
        static = self._static_at(args)
        key = flat_key(args, static)  # the common case first: on small arrays the overhead is the cost
        if key is not None:
            entry, captured = self._lookup(key, args)
            if entry.dispatch is None:
                entry.dispatch = entry.dispatcher(args, self._slow, self._fast_hits, static)
            # the next call with this signature goes straight there
            self._dispatch, self._dispatch_key = entry.dispatch, key
            return entry.call(*args, *captured)
        entry, leaves, captured = self._entry(args)
        if entry is None:
            return self._uncompiled(*args)
        return entry.run(leaves, captured)

    def _keywords(self, args, kwargs):
        """A call with keyword arguments: those that can be given by position are (defaults stay
        constants of the program, as in Python); keyword-only ones are passed to a compiled
        variant per set of keyword names, which takes them after the positional arguments."""
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{getattr(self.fun, '__name__', self.fun)}: {e}") from None
        except ValueError:  # no signature (a builtin): nothing to reorder
            bound = None
        if bound is not None and not bound.kwargs:
            return self._slow(*bound.args)
        args, kwargs = (bound.args, bound.kwargs) if bound is not None else (args, kwargs)
        names = tuple(sorted(kwargs))
        variant = self._variants.get((names, len(args)))
        if variant is None:
            fun, n = self.fun, len(args)

            def with_keywords(*values):
                return fun(*values[:n], **dict(zip(names, values[n:])))

            with_keywords.__name__ = getattr(fun, "__name__", "f")
            with_keywords.__wrapped__ = fun  # what it reads besides its arguments is fun's (captures.scan)
            with_keywords.__signature__ = positional_signature(_param_names(fun, n) + list(names))
            static = sorted(self._static.positions(n)) + [n + j for j, k in enumerate(names)
                                                          if k in self._static.names]
            options = dict(self._options, static_argnums=static, static_argnames=None)
            variant = self._variants[names, n] = CompiledFunction(with_keywords, self.transform, self.argnums,
                                                                  **options)
        return variant(*args, *[kwargs[k] for k in names])

    def _uncompiled(self, *args):
        """Called with values traced by another transform: run ``fun`` itself under it."""
        if self.transform == "grad":
            return transforms.grad(self.fun, self.argnums)(*args)
        if self.transform == "value_and_grad":
            return transforms.value_and_grad(self.fun, self.argnums)(*args)
        return self.fun(*args)

    def program(self, *args: Any) -> Program:
        """The optimized Program that runs for arguments like ``args`` (traced if not cached)."""
        entry, _, _ = self._entry(args)
        if entry is None:
            raise TypeError("compiled function: the arguments are traced values; call it with arrays")
        return entry.program

    def source(self, *args: Any) -> str:
        """The generated Python source that runs for arguments like ``args``."""
        return self.program(*args).source

    @overload
    def grad(self, argnums: int = 0) -> CompiledFunction[P, Any]: ...
    @overload
    def grad(self, argnums: Sequence[int]) -> CompiledFunction[P, tuple[Any, ...]]: ...
    def grad(self, argnums: int | Sequence[int] = 0) -> CompiledFunction[P, Any]:
        """The compiled gradient (``jax.jit(jax.grad(fun))``); of a compiled gradient, the second
        derivative (``jax.jit(jax.grad(jax.grad(fun)))``)."""
        return CompiledFunction(self._differentiable("grad"), "grad", argnums, **self._options)

    @overload
    def value_and_grad(self, argnums: int = 0) -> CompiledFunction[P, tuple[R, Any]]: ...
    @overload
    def value_and_grad(self, argnums: Sequence[int]) -> CompiledFunction[P, tuple[R, tuple[Any, ...]]]: ...
    def value_and_grad(self, argnums: int | Sequence[int] = 0) -> CompiledFunction[P, Any]:
        """The compiled ``(value, gradient)`` (``jax.jit(jax.value_and_grad(fun))``)."""
        return CompiledFunction(self._differentiable("value_and_grad"), "value_and_grad", argnums,
                                **self._options)

    def _differentiable(self, what: str) -> Callable[..., Any]:
        """The function this compiled function computes, to differentiate again: ``fun`` itself, or
        ``wg.grad(fun, argnums)`` where this is a compiled gradient (never ``fun`` there: that would
        give the first derivative where the second was asked for)."""
        if self.transform is None:
            return self.fun
        if self.transform == "grad":
            return transforms.grad(self.fun, self.argnums)
        name = getattr(self.fun, "__name__", "f")
        raise TypeError(f"wg.compile({name}).value_and_grad().{what}(): the function returns a pair "
                        f"(value, gradient), not a scalar; differentiate the gradient instead: "
                        f"wg.compile({name}).grad().{what}()")

    def cache_info(self) -> CacheInfo:
        """Hits, misses (one trace each), the number of cached programs, and ``maxsize``
        (``functools.lru_cache``'s ``cache_info``)."""
        hits, misses, size = self._hits + self._fast_hits[0], self._misses, self._size
        for variant in self._variants.values():  # calls with keyword-only arguments
            info = variant.cache_info()
            hits, misses, size = hits + info.hits, misses + info.misses, size + info.currsize
        return CacheInfo(hits, misses, size, self._maxsize)

    def cache_clear(self) -> None:
        """Empty the cache (``functools.lru_cache``'s ``cache_clear``); the counts stay."""
        self._cache.clear()
        self._size, self._variants = 0, {}
        self._dispatch, self._dispatch_key = self._slow, None

    def __reduce__(self):
        """Pickled as a reference to ``fun`` and the options: compiled again when loaded."""
        what = f"{self!r} (wg.compile of {getattr(self.fun, '__qualname__', self.fun)})"
        found = by_reference(self.fun, self, what)
        if found is None:  # a decorated module-level function: this very object, by name
            return self.__qualname__
        return (_restore, (found, self.transform, self.argnums, self._options))

    def __repr__(self) -> str:
        what = f"{self.transform}({self.argnums}) of " if self.transform else ""
        return f"<wengert compiled {what}{getattr(self.fun, '__name__', self.fun)}>"


class _Missing:
    __slots__ = ()

    def __repr__(self):
        return "<missing argument>"


_MISSING = _Missing()


def _restore(fun, transform, argnums, options):
    """A pickled compiled function, compiled again (``fun``: the function, or what wraps it)."""
    if isinstance(fun, CompiledFunction):
        fun = fun.fun
    return CompiledFunction(fun, transform, argnums, **options)


@overload
def compile_function(fun: Callable[P, R], *, static_argnums: int | Sequence[int] | None = None,
                     static_argnames: str | Sequence[str] | None = None, cache_size: int | None = CACHE_SIZE,
                     backend: str = "python") -> CompiledFunction[P, R]: ...
@overload
def compile_function(fun: None = None, *, static_argnums: int | Sequence[int] | None = None,
                     static_argnames: str | Sequence[str] | None = None, cache_size: int | None = CACHE_SIZE,
                     backend: str = "python") -> Callable[[Callable[P, R]], CompiledFunction[P, R]]: ...
def compile_function(fun: Callable[..., Any] | None = None, *,
                     static_argnums: int | Sequence[int] | None = None,
                     static_argnames: str | Sequence[str] | None = None, cache_size: int | None = CACHE_SIZE,
                     backend: str = "python") -> Any:
    """Compile ``fun``: trace it once per input signature to a Program, generate Python, cache it
    (``jax.jit``, with its ``static_argnums``/``static_argnames``; ``torch.compile``).
    ``.grad(argnums)`` and ``.value_and_grad(argnums)`` are compiled too. Python ints are traced
    unless static; the cache holds at most ``cache_size`` programs (LRU). Captured arrays (globals,
    closure variables) are read at each call; other captured values are guarded: a change traces
    again (docs/program.md). Without ``fun``, a decorator: ``@wg.compile(static_argnums=1)``.
    ``backend="numba"`` runs the generated program as Numba's machine code (docs/compiling.md)."""
    check_backend(backend, f"wg.compile({getattr(fun, '__name__', fun)})")
    options: dict[str, Any] = {"static_argnums": static_argnums, "static_argnames": static_argnames,
                               "cache_size": cache_size, "backend": backend}
    if fun is None:
        return functools.partial(compile_function, **options)
    if isinstance(fun, CompiledFunction):
        if options == fun._options:
            return fun
        return CompiledFunction(fun.fun, fun.transform, fun.argnums, **options)
    return CompiledFunction(fun, **options)

