"""Random state: what recomputation replays (``wg.checkpoint``, ``wg.iterate``) and what ``wg.vmap``
checks. Contract: a function's *random sources* are NumPy's global random state (``np.random.*``,
which ``wengert.numpy.random`` is), always, plus the ``np.random.Generator`` and ``RandomState``
objects the function reaches or the caller names (``generators=``); :class:`Sources` saves,
restores and compares their states. A draw from anything else cannot be replayed: recomputation
finds it by comparing the recomputed values with the first run's (``check_same``), never silently.

*Reaching* (:func:`sources_of`): from the function, its closure cells, the globals its code names
(nested functions' too), a bound method's object, a ``functools.partial``'s parts, and extra roots
(the call's arguments); from an object, its attributes (``vars``: a ``wengert.nn`` model's layers,
a ``Dropout``'s ``rng``), the elements of lists, tuples and dicts, and the methods of its class when
the class is the user's own; from a user's function, the same again. Library code (wengert, NumPy,
...), modules, classes, arrays and traced values are not entered. Breadth first and bounded (depth
8, 256 elements of any container, 2,000 objects): a few microseconds for the usual closure of a
model and some arrays. What the search misses, the recomputation check still catches.
"""

import collections
import ctypes
import functools
import itertools
import struct
import types

import numpy as np

from wengert.core.trace import BOX_TYPES

__all__ = ["Sources", "sources_of", "check_same", "label_of", "GLOBAL_LABEL"]

GLOBAL_LABEL = "NumPy's global random state (np.random)"
_RS = np.random.mtrand._rand  # the RandomState behind np.random.* (np.random.seed/set_state keep it)
_STATE_BYTES = 624 * 4 + 4  # MT19937's state: uint32 key[624], int pos


def _slow_fingerprint():
    """The global state as comparable bytes, through ``get_state`` (any bit generator)."""
    return _frozen(_RS.get_state(legacy=False))


def _frozen(state):
    if type(state) is dict:
        return tuple((k, _frozen(v)) for k, v in state.items())
    if isinstance(state, np.ndarray):
        return state.tobytes()
    return state


def _raw_reader():
    """A fast reader of the global state's bytes: MT19937's key and position, and the legacy
    Gaussian cache (``has_gauss``, ``gauss``: ``randn`` draws in pairs and keeps one), found in the
    RandomState object by probing; all checked once against ``get_state`` (50 us). None where the
    layout is not the expected one: ``get_state`` is then used."""
    saved = _RS.get_state()
    bit_generator = _RS._bit_generator  # held: np.random.set_bit_generator swaps it (read() checks)
    try:
        address = bit_generator.ctypes.state_address
        size = _RS.__sizeof__()

        def expected(state):
            position = int(state[2]).to_bytes(4, "little", signed=True)
            return np.asarray(state[1], np.uint32).tobytes() + position

        offsets = None
        for g in (1.2345678901234567e-3, -9.87654321e5):
            _RS.set_state(saved[:3] + (1, g))
            raw = ctypes.string_at(id(_RS), size)
            needle = struct.pack("d", g)
            found = {i for i in range(8, size - 7) if raw[i:i + 8] == needle}
            offsets = found if offsets is None else offsets & found
        if len(offsets) != 1:
            return None
        cache = id(_RS) + offsets.pop() - 8  # aug_bitgen_t: the bit generator pointer, has_gauss, gauss

        key_pos = (ctypes.c_char * _STATE_BYTES).from_address(address)
        gauss = (ctypes.c_char * 16).from_address(cache)

        def read():
            if _RS._bit_generator is not bit_generator:
                return _slow_fingerprint()
            return key_pos.raw + gauss.raw

        for state in (saved[:3] + (0, 0.0), saved[:3] + (1, 0.5)):
            _RS.set_state(state)
            _RS.random_sample()  # the addresses must follow a draw
            after = _RS.get_state()
            got = read()
            if got[:_STATE_BYTES] != expected(after) or struct.unpack("i", got[-16:-12])[0] != after[3] \
                    or struct.unpack("d", got[-8:])[0] != after[4]:
                return None
        return read
    except Exception:  # pragma: no cover - another NumPy's layout: the slow, exact reader
        return None
    finally:
        _RS.set_state(saved)


_read_raw = _raw_reader()
_last_global = [None]  # (fingerprint bytes, full state): the global state last captured or restored


def _global_fingerprint():
    return _read_raw() if _read_raw is not None else _slow_fingerprint()


def _global_capture():
    fp = _global_fingerprint()
    last = _last_global[0]
    if last is not None and last[0] == fp:
        return last  # unchanged since the last capture: its full state (get_state costs 50 us)
    token = _last_global[0] = (fp, _RS.get_state(legacy=False))
    return token


def _global_restore(token):
    if _global_fingerprint() != token[0]:
        _RS.set_state(token[1])
        _last_global[0] = token


def _global_same(token):
    return _global_fingerprint() == token[0]


def _state_of(gen):
    return gen.get_state(legacy=False) if isinstance(gen, np.random.RandomState) else gen.bit_generator.state


def _set_state(gen, state):
    if isinstance(gen, np.random.RandomState):
        gen.set_state(state)
    else:
        gen.bit_generator.state = state


def _equal(a, b):
    if type(a) is dict:
        return type(b) is dict and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b


class Sources:
    """The random sources of one function: NumPy's global state first, then the generators found
    (``gens``, with ``labels`` naming each for error messages)."""

    __slots__ = ("gens", "labels")

    def __init__(self, gens, labels):
        self.gens = tuple(gens)
        self.labels = tuple(labels)

    def capture(self):
        """Every source's state now: a token for :meth:`restore` and :meth:`changed`."""
        if not self.gens:
            return _global_capture()
        return (_global_capture(),) + tuple(_state_of(g) for g in self.gens)

    def restore(self, token):
        """Put every source back to ``token``'s state (those already there are not touched)."""
        if not self.gens:
            _global_restore(token)
            return
        _global_restore(token[0])
        for g, s in zip(self.gens, token[1:]):
            if not _equal(_state_of(g), s):
                _set_state(g, s)

    def changed(self, token):
        """The labels of the sources whose state differs from ``token``'s (what drew since)."""
        if not self.gens:
            return [] if _global_same(token) else [GLOBAL_LABEL]
        out = [] if _global_same(token[0]) else [GLOBAL_LABEL]
        out += [label for g, s, label in zip(self.gens, token[1:], self.labels)
                if not _equal(_state_of(g), s)]
        return out


_LIBRARIES = frozenset({"wengert", "numpy", "scipy", "jax", "jaxlib", "torch", "autograd", "builtins",
                        "functools", "itertools", "operator", "math", "random", "collections", "typing",
                        "abc", "contextlib", "dask", "cupy", "hypothesis", "pytest", "_pytest"})
_ATOMS = (str, bytes, int, float, complex, bool, type(None), np.ndarray, np.generic, type,
          types.ModuleType, types.BuiltinFunctionType, types.CodeType, range, slice)
_MAX_DEPTH = 8
_MAX_OBJECTS = 2000  # objects looked at, arrays included: a search costs at most ~0.3 ms
_PER_CONTAINER = 256  # the elements of a list, dict or object looked at: data does not use up the search


def _library(module_name):
    return (module_name or "builtins").partition(".")[0] in _LIBRARIES


_NAMES = {}  # code object -> the names it and its nested code read (code objects never change)


def _names_of(code):
    names = _NAMES.get(code)
    if names is None:
        found = set(code.co_names)
        for c in code.co_consts:
            if type(c) is types.CodeType:
                found.update(_names_of(c))
        names = tuple(found)
        if len(_NAMES) < 4096:
            _NAMES[code] = names
    return names


_GENERATORS = (np.random.Generator, np.random.RandomState)
_ATOM_TYPES = frozenset({str, bytes, int, float, complex, bool, type(None), type,
                         types.ModuleType, types.BuiltinFunctionType, range, slice, np.float64})
_SEQUENCES = frozenset({list, tuple, set, frozenset})
_ndarray = np.ndarray


def label_of(path):
    """A path of (parent, step) pairs as text, ``model.layers[2].rng``: a step is an attribute name,
    a sequence index, or a dict key in a list."""
    parts = []
    while type(path) is tuple:
        path, step = path
        parts.append(f"[{step}]" if type(step) is int else f"[{step[0]!r}]" if type(step) is list
                     else "." + step)
    parts.append(path)
    return "".join(reversed(parts))


def sources_of(fun, roots=(), generators=None, where="wg.checkpoint", arrays=None):
    """The random sources of ``fun`` called on ``roots``: see the module docstring. ``generators``:
    more, given by the caller (Generators, RandomStates, or objects holding them). A stack of
    ``(object, path, depth)``; paths are built only for what is found (:func:`label_of`). ``arrays``:
    a list, to which the NumPy arrays met are appended as ``(array, path)`` (what a recomputation
    reads besides its arguments: ``engines.kept``)."""
    found, labels, seen = [], [], {id(_RS)}
    stack = [(fun, getattr(fun, "__name__", type(fun).__name__), 0)]
    stack += [(r, f"argument {i}", 0) for i, r in enumerate(roots) if r is not None]
    if generators is not None:
        if isinstance(generators, _GENERATORS) or not isinstance(generators, (list, tuple)):
            generators = [generators]
        for i, g in enumerate(generators):
            if not isinstance(g, _GENERATORS) and isinstance(g, _ATOMS):
                raise TypeError(f"{where}: generators= takes numpy.random.Generator or RandomState "
                                f"objects (or objects holding them, such as wengert.nn modules), got "
                                f"{type(g).__name__}")
            stack.append((g, f"generators[{i}]", 0))
    count = 0
    stack = collections.deque(reversed(stack))  # breadth first: the nearest objects first
    pop, push = stack.popleft, stack.append
    while stack and count < _MAX_OBJECTS:
        obj, path, depth = pop()
        count += 1
        t = type(obj)
        if t in _ATOM_TYPES or id(obj) in seen:
            continue
        if t is _ndarray:
            if arrays is not None:
                seen.add(id(obj))
                arrays.append((obj, path))
            continue
        if t is np.random.Generator or isinstance(obj, _GENERATORS):
            seen.add(id(obj))
            found.append(obj)
            labels.append(f"the {t.__name__} {label_of(path)}")
            continue
        if t in BOX_TYPES or isinstance(obj, _ATOMS):
            continue
        seen.add(id(obj))
        if depth >= _MAX_DEPTH:
            continue
        d = depth + 1
        if t is types.FunctionType:
            if depth and _library(obj.__module__):
                continue
            code = obj.__code__
            if obj.__closure__:
                for name, cell in zip(code.co_freevars, obj.__closure__):
                    try:
                        push((cell.cell_contents, name, d))
                    except ValueError:  # an empty cell
                        pass
            g = obj.__globals__
            for n in _names_of(code):
                v = g.get(n, g)
                if v is not g and type(v) not in _ATOM_TYPES:
                    push((v, n, d))
        elif t is types.MethodType:
            push((obj.__func__, path, d))
            push((obj.__self__, "self", d))
        elif t is functools.partial:
            push((obj.func, path, d))
            stack += [(a, path, d) for a in obj.args]
            stack += [(v, path, d) for v in obj.keywords.values()]
        elif t in _SEQUENCES:
            stack += [(v, (path, i), d) for i, v in zip(range(_PER_CONTAINER), obj)]
        elif t is dict:
            stack += [(v, (path, [k]), d) for k, v in itertools.islice(obj.items(), _PER_CONTAINER)]
        else:
            attrs = getattr(obj, "__dict__", None)
            if type(attrs) is dict:
                stack += [(v, (path, k), d) for k, v in itertools.islice(attrs.items(), _PER_CONTAINER)]
            if not _library(t.__module__):
                stack += [(v, path, d) for v in vars(t).values() if type(v) is types.FunctionType]
    return Sources(found, labels)


def _array_close(a, b):
    """Equal up to rounding (1024 ulps of the larger magnitude): a recomputation on the same values
    is bitwise equal but where a summation's order follows memory alignment."""
    if np.shape(a) != np.shape(b):
        return False
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == b.dtype and a.tobytes() == b.tobytes():
        return True  # the usual case, and the fastest test of it
    if a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
        return bool(np.array_equal(a, b))
    differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
    if not differ.any():
        return True
    da, db = a[differ], b[differ]
    if not (np.isfinite(da).all() and np.isfinite(db).all()):
        return False
    eps = np.finfo(np.result_type(a.dtype, b.dtype)).eps
    scale = max(float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0)),
                float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0)))
    return float(np.max(np.abs(da - db))) <= 1024 * eps * scale


def check_same(recomputed, first, what):
    """Raise when ``recomputed`` (leaves) differ from ``first`` (the first run's) beyond rounding:
    ``what()`` gives the error message's beginning. Non-numeric leaves are not compared."""
    for i, (a, b) in enumerate(zip(recomputed, first)):
        if not isinstance(a, (np.ndarray, np.generic, float, int, complex)) or \
                not isinstance(b, (np.ndarray, np.generic, float, int, complex)):
            continue
        if not _array_close(a, b):
            raise RuntimeError(
                f"{what()} gave different values than its first run (leaf {i}), so its gradient would be "
                f"that of other values. wengert replays NumPy's global random state and the "
                f"numpy.random.Generators the function reaches (closure, the globals it names, "
                f"attributes such as a wengert.nn Dropout's rng); a draw from another one (a Generator "
                f"it cannot reach, np.random.default_rng() without a seed, Python's random module), or "
                f"a value it reads that changed between the runs, cannot be replayed. Pass such "
                f"Generators as generators=[...], or make the function deterministic.")
