"""Captured values follow Python: what a function reads besides its arguments, and how compiled
(``wg.compile``) and source-transformed (``wg.source_grad``, ``wg.source_jvp``) programs see it.

A function's *captured values* are found in its bytecode: the globals it reads (then builtins, as
Python looks them up), its closure cells (a cell wins over a global of the same name), attributes
read from those (``cfg.scale``, ``self.W``, a user module's ``mod.W``), its default arguments
that are arrays or callables (``def f(x, w=W, fn=g)``: evaluated once, read at each call; arrays
guarded by contents), the entries of captured tuples, lists and dicts, and the same again for the
user functions and methods reached that way, also through transforms (``functools.wraps`` wrappers,
however nested: ``wg.vmap(wg.grad(obj.loss))``) and ``functools.partial`` (its bound arguments too;
positional arrays guarded by contents, as its tuple cannot be replaced while tracing). Library
code -- wengert, NumPy, the standard library, installed packages -- is not followed otherwise: its
state is taken as constant. Each is handled as the plain function would see it on every call:

- float and complex arrays are *inputs* of the program, read at call time: an in-place write
  (``W[:] = 2.0``) or a new array bound to the name is seen by the next call without tracing again
  (a new shape or dtype traces again);
- everything else is *guarded*: numbers, strings, None and tuples of them by value, int and bool
  arrays by their contents (indices and masks: shapes depend on them), functions, classes, modules
  and other objects by identity, lists and dicts by their length or keys. A changed value makes the
  next call trace again (``cache_info().misses``), as torch.compile's guards do.

While the function is traced, each lifted array is replaced *in its place* (the module's globals,
the cell, the object's attribute, the list or dict entry) by the traced input, and put back after:
tracing is not thread-safe. What cannot be followed raises :class:`TracingError` naming the
variable: the function assigning a global or nonlocal variable or an attribute of a captured object,
changing a captured list or dict, or writing into a captured array (the program would do it only
when it traces); an array that cannot be replaced (a read-only attribute, an array subclass).
"""

import dis
import functools
import inspect
import os
import sys
import sysconfig
import types

import numpy as np

from wengert.core.errors import TracingError
from wengert.core.trace import BOX_TYPES

__all__ = ["Captures", "scan", "with_captured_inputs"]

_LIBRARY_DIRS = tuple(sorted({os.path.abspath(p) + os.sep for p in (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    os.path.dirname(os.path.abspath(np.__file__)),
    *(sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib"))) if p}))
_VALUE_TYPES = (bool, int, float, complex, str, bytes, type(None), np.generic, range, slice, type(Ellipsis))
_MUTATORS = frozenset(("append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
                       "popitem", "sort", "reverse", "__setitem__", "__delitem__", "__iadd__"))
_LOADS = frozenset(("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST", "LOAD_CLASSDEREF"))
_MAX_NODES = 2000
_WHAT_TO_DO = ("Pass it as an argument instead (wg.compile traces again only for a new shape), or "
               "differentiate with wg.grad, which runs the function itself.")


def _is_library_code(code):
    name = code.co_filename
    if name.startswith("<"):
        return False
    return os.path.abspath(name).startswith(_LIBRARY_DIRS)


def _is_user_function(f):
    return isinstance(f, types.FunctionType) and not _is_library_code(f.__code__)


def _unwrapped(fun):
    """``fun`` past the library's ``functools.wraps`` wrappers, however deep: ``wg.vmap(wg.grad(f))``
    -> ``f`` (one level left ``f``'s captured arrays as constants of the program, silently stale)."""
    for _ in range(100):
        if not isinstance(fun, types.FunctionType) or _is_user_function(fun):
            break
        inner = fun.__dict__.get("__wrapped__")
        if inner is None:
            break
        fun = inner
    return fun


def _is_user_module(m):
    path = getattr(m, "__file__", None)
    return path is not None and not os.path.abspath(path).startswith(_LIBRARY_DIRS)


def _followed(node):
    """Whether attributes read from ``node``'s value are captured values of their own: those of
    objects, of the user's modules and classes (a library's are taken as constant)."""
    if node.kind == "object":
        return True
    if node.kind != "same":
        return False
    v = node.value
    if isinstance(v, types.ModuleType):
        return _is_user_module(v)
    if isinstance(v, type):
        module = sys.modules.get(getattr(v, "__module__", None))
        return module is not None and (module.__name__ == "__main__" or _is_user_module(module))
    return False


def _identifier(name):
    out = "".join(c if c.isalnum() else "_" for c in name).strip("_")
    while "__" in out:
        out = out.replace("__", "_")
    return out if out and not out[0].isdigit() else f"c_{out}"


class _Node:
    """One captured value: where it is (``loc``), how it is shown (``name``), what it was when the
    function was traced (``value``), how it is checked (``kind``)."""

    __slots__ = ("loc", "name", "value", "kind", "children", "index", "symbol")

    def __init__(self, loc, name, value):
        self.loc, self.name, self.value = loc, name, value
        self.kind, self.children, self.index, self.symbol = None, {}, None, None


class Captures:
    """The captured values of one function, as found when it was traced: ``arrays`` (the lifted
    ones, in the order the program takes them), a reader of their values, and the guards."""

    def __init__(self, where, strict=True):
        self.where = where  # "wg.compile(f)", for messages
        self.strict = strict  # refuse writes found in the bytecode (the source front end has its own)
        self.roots = {}  # location key -> _Node
        self.nodes = []  # every node, parents before children
        self.arrays = []  # the lifted nodes
        self._functions = set()
        self._read = None

    # -- finding them ---------------------------------------------------------------------------
    def _node(self, key, loc, name, value, parent=None):
        table = self.roots if parent is None else parent.children
        node = table.get(key)
        if node is None:
            if len(self.nodes) >= _MAX_NODES:
                raise TracingError(f"{self.where}: the function captures more than {_MAX_NODES} values "
                                   f"(through {name}); pass the large structure as an argument instead")
            node = table[key] = _Node(loc, name, value)
            self.nodes.append(node)
            self._classify(node)
        return node

    def _classify(self, node):
        v = node.value
        t = type(v)
        if t is np.ndarray:
            if v.dtype.kind in "fc":
                node.kind = "array"
                node.index = len(self.arrays)
                self.arrays.append(node)
            else:
                node.kind = "contents"
        elif isinstance(v, np.ndarray):
            raise TracingError(f"{self.where}: the function captures {node.name}, a {t.__name__} (an array "
                               f"subclass), which a compiled program cannot read at each call. {_WHAT_TO_DO}")
        elif isinstance(v, _VALUE_TYPES) and t is not tuple:
            node.kind = "equal"
        elif t is tuple or t is list or (isinstance(v, tuple) and hasattr(v, "_fields")):
            node.kind = "sequence"
            for k, item in enumerate(v):
                self._node(k, ("item", node, k), f"{node.name}[{k}]", item, node)
        elif t is dict:
            node.kind = "dict"
            for k, item in v.items():
                if type(k) in (str, int, float, bool, tuple) or k is None:
                    self._node(("k", k), ("item", node, k), f"{node.name}[{k!r}]", item, node)
        elif t in BOX_TYPES:
            node.kind = "ignored"  # a traced or eager value: the tracer refuses it when it is used
        elif t is types.MethodType:
            node.kind = "method"
            if _is_user_function(v.__func__):
                if node.loc[0] == "attr" and node.loc[1].value is v.__self__:
                    owner = node.loc[1]
                else:
                    owner = self._node(("attr", "__self__"), ("attr", node, "__self__"),
                                       f"{node.name}.__self__", v.__self__, node)
                self.function(v.__func__, self_node=owner)
        elif isinstance(v, types.FunctionType):
            node.kind = "same"
            if _is_user_function(v):
                self.function(v)
            else:  # a transform of a user function, method, callable object or partial
                self.follow(v, node.name)
        elif isinstance(v, (types.ModuleType, type, types.BuiltinFunctionType, np.ufunc)):
            node.kind = "same"
        else:
            node.kind = "object"
            call = inspect.getattr_static(t, "__call__", None)
            if _is_user_function(call):
                self.function(call, self_node=node)

    def _by_contents(self, node):
        """``node``'s float arrays (itself, its entries) guarded by their contents, as int arrays are,
        instead of read at each call: they stay constants of the program (a default argument is one
        by design, ``def f(x, D=D)``), and a write into one traces again."""
        stack = [node]
        while stack:
            n = stack.pop()
            if n.kind == "array":
                n.kind = "contents"
                self.arrays.remove(n)
            stack.extend(n.children.values())

    def follow(self, fun, name):
        """Find what calling ``fun`` reads, past the library's wrappers (``wg.vmap(wg.grad(obj))``):
        a user function's captured values; a bound method's or callable object's, through ``self``
        (a fixed node named ``name``); a ``functools.partial``'s bound arguments and its function's."""
        fun = _unwrapped(fun)
        while isinstance(fun, functools.partial):  # a tuple that cannot be replaced: by contents
            self._by_contents(self._node(("partial", id(fun), 0), ("self",), f"{name}.args", fun.args))
            self._node(("partial", id(fun), 1), ("self",), f"{name}.keywords", fun.keywords)
            fun = _unwrapped(fun.func)
        if isinstance(fun, types.MethodType) and _is_user_function(fun.__func__):
            self_node = self._node(("self", id(fun.__self__)), ("self",), name, fun.__self__)
            self.function(fun.__func__, self_node=self_node)
        elif isinstance(fun, types.FunctionType):
            if _is_user_function(fun):
                self.function(fun)
        elif _is_user_function(inspect.getattr_static(type(fun), "__call__", None)):
            self_node = self._node(("self", id(fun)), ("self",), name, fun)
            self.function(type(fun).__call__, self_node=self_node)

    def function(self, fun, self_node=None):
        """Find what ``fun`` (and the user functions it reaches) reads; ``self_node``: the object a
        method is bound to (its first parameter's attributes are read through it)."""
        key = (id(fun), id(self_node))
        if key in self._functions:
            return
        self._functions.add(key)
        code = fun.__code__
        free = dict(zip(code.co_freevars, fun.__closure__ or ()))
        fname = getattr(fun, "__qualname__", fun.__name__)
        defaults = {**dict(enumerate(fun.__defaults__ or ())), **(fun.__kwdefaults__ or {})}
        for k, value in defaults.items():  # read at each call too (``def f(x, w=W)``, ``fn=g``)
            where = f"{fname}'s default {k}"
            if type(value) is np.ndarray:  # a constant of the program, guarded by its contents
                self._by_contents(self._node(("default", id(fun), k), ("self",), where, value))
            elif callable(value) and not isinstance(value, type):
                self.follow(value, where)  # what it reads (other defaults, e.g. a list, stay as before)
        self_name = code.co_varnames[0] if self_node is not None and code.co_argcount else None
        codes = [code]
        while codes:
            c = codes.pop()
            codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
            chain = None
            for ins in dis.get_instructions(c):
                op = ins.opname
                if op in ("LOAD_ATTR", "LOAD_METHOD") and chain is not None:
                    chain.append(ins.argval)
                    continue
                if chain is not None:
                    self._chain(chain, op, ins, fun, fname)
                    chain = None
                if not self.strict:
                    pass
                elif op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                    raise TracingError(f"{self.where}: {fname} assigns the global variable {ins.argval!r}; a "
                                       f"compiled program would do it only when it traces. Return the new "
                                       f"value instead, or differentiate with wg.grad.")
                elif op in ("STORE_DEREF", "DELETE_DEREF") and ins.argval in free:
                    raise TracingError(f"{self.where}: {fname} assigns the nonlocal variable "
                                       f"{ins.argval!r}; a compiled program would do it only when it "
                                       f"traces. Return the new value instead, or differentiate with "
                                       f"wg.grad.")
                if op == "STORE_FAST" and c is code and ins.argval == self_name:
                    self_name = None  # ``self`` rebound: no longer the object
                if op in _LOADS:
                    root = self._root(op, ins.argval, fun, free, self_name if c is code else None, self_node)
                    if root is not None:
                        chain = [root]
            if chain is not None:
                self._chain(chain, "RETURN_VALUE", None, fun, fname)

    def _root(self, op, name, fun, free, self_name, self_node):
        if op == "LOAD_FAST":
            return self_node if name == self_name and self_name is not None else None
        if op in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
            cell = free.get(name)
            if cell is None:
                return None  # a cell of the function's own (a local variable)
            try:
                value = cell.cell_contents
            except ValueError:
                return None  # not assigned yet: Python raises NameError when it is read
            return self._node(("cell", id(cell)), ("cell", cell, name), name, value)
        g = fun.__globals__
        if name in g:
            return self._node(("global", id(g), name), ("global", g, name), name, g[name])
        builtins = g.get("__builtins__", {})
        builtins = builtins if type(builtins) is dict else vars(builtins)
        if name in builtins:
            return self._node(("builtin", id(g), name), ("builtin", g, name, builtins), name, builtins[name])
        return None  # Python raises NameError when it is read

    def _chain(self, chain, next_op, ins, fun, fname):
        node = chain[0]
        for attr in chain[1:]:
            if node.kind in ("sequence", "dict") and attr in _MUTATORS and self.strict:
                raise TracingError(f"{self.where}: {fname} changes the captured {type(node.value).__name__} "
                                   f"{node.name} in place ({node.name}.{attr}); a compiled program would "
                                   f"do it only when it traces. {_WHAT_TO_DO}")
            if not _followed(node):
                return
            try:
                value = getattr(node.value, attr)
            except Exception:  # noqa: BLE001 - absent (set later, or an error Python raises itself)
                return
            node = self._node(("attr", attr), ("attr", node, attr), f"{node.name}.{attr}", value, node)
        if next_op in ("STORE_ATTR", "DELETE_ATTR") and _followed(node) and self.strict:
            raise TracingError(f"{self.where}: {fname} assigns {node.name}.{ins.argval}, an attribute of a "
                               f"captured object; a compiled program would do it only when it traces. "
                               f"{_WHAT_TO_DO}")

    # -- reading them at call time ----------------------------------------------------------------
    def reader(self):
        """A function of no arguments returning the lifted arrays' current values (a tuple), or None
        when a guarded value changed (then the function must be traced again)."""
        if self._read is None:
            self._read = self._build_reader()
        return self._read

    def _build_reader(self):
        names, lines, checks = {"ndarray": np.ndarray}, [], []
        index = {id(n): k for k, n in enumerate(self.nodes)}
        for k, node in enumerate(self.nodes):
            var = f"v{k}"
            loc = node.loc
            if loc[0] == "global":
                names[f"g{k}"] = loc[1]
                lines.append(f"{var} = g{k}[{loc[2]!r}]")
            elif loc[0] == "builtin":
                names[f"g{k}"], names[f"b{k}"] = loc[1], loc[3]
                checks.append(f"{loc[2]!r} not in g{k}")
                lines.append(f"{var} = b{k}[{loc[2]!r}]")
            elif loc[0] == "cell":
                names[f"c{k}"] = loc[1]
                lines.append(f"{var} = c{k}.cell_contents")
            elif loc[0] == "attr":
                lines.append(f"{var} = v{index[id(loc[1])]}.{loc[2]}")
            elif loc[0] == "item":
                names[f"i{k}"] = loc[2]
                lines.append(f"{var} = v{index[id(loc[1])]}[i{k}]")
            else:  # a bound method's object: fixed
                names[var] = node.value
            checks.append(self._check(node, var, k, names))
        out = "".join(f"v{index[id(n)]}, " for n in self.arrays)
        checks = [c for c in checks if c]
        text = "def read():\n    try:\n" + "".join(f"        {line}\n" for line in lines)
        if checks:
            text += f"        if not ({' and '.join(checks)}):\n            return None\n"
        text += "    except Exception:\n        return None\n"
        text += f"    return ({out})\n"
        exec(text, names)  # noqa: S102
        return names["read"]

    @staticmethod
    def _check(node, var, k, names):
        v, kind = node.value, node.kind
        if kind == "array" or kind == "contents":
            names[f"s{k}"], names[f"d{k}"] = v.shape, v.dtype
            check = f"type({var}) is ndarray and {var}.shape == s{k} and {var}.dtype is d{k}"
            if kind == "contents":
                names[f"k{k}"] = v.tobytes()
                check += f" and {var}.tobytes() == k{k}"
            return check
        if kind == "equal":
            if v is None:
                return f"{var} is None"
            names[f"t{k}"], names[f"k{k}"] = type(v), v
            return f"type({var}) is t{k} and ({var} is k{k} or {var} == k{k})"
        if kind == "sequence":
            names[f"t{k}"] = type(v)
            return f"type({var}) is t{k} and len({var}) == {len(v)}"
        if kind == "dict":
            names[f"k{k}"] = list(v)
            return f"type({var}) is dict and list({var}) == k{k}"
        if kind == "method":
            names[f"k{k}"] = v.__func__
            return f"{var}.__func__ is k{k}"
        if kind in ("same", "object"):
            names[f"k{k}"] = v
            return f"{var} is k{k}"
        return ""

    def drop_values(self):
        """After the trace (and the reader is built): each lifted array's value replaced by a stand-in
        of its shape and dtype (zero strides: no data), so that a cached program keeps no array the
        function captured alive (the guards read only its shape and dtype)."""
        self.reader()
        for node in self.arrays:
            v = node.value
            node.value = np.broadcast_to(np.zeros((), v.dtype), v.shape)

    def changed(self):
        """The name of the first captured value that no longer passes its guard (for messages)."""
        for n in range(1, len(self.nodes) + 1):
            sub = Captures(self.where)
            sub.nodes, sub.arrays = self.nodes[:n], []
            if sub._build_reader()() is None:
                return self.nodes[n - 1].name
        return None

    def snapshot(self):
        """What the trace must leave as it found it: the attributes of captured objects, the entries
        of captured lists and dicts (compared by :meth:`check_unchanged`)."""
        out = []
        for node in self.nodes:
            v = node.value
            if type(v) is list:
                out.append((node, v, list(v)))
            elif type(v) is dict:
                out.append((node, v, dict(v)))
            elif _followed(node) and type(getattr(v, "__dict__", None)) is dict:
                out.append((node, v.__dict__, dict(v.__dict__)))
        return out

    def check_unchanged(self, snapshot):
        """Refuse a trace that changed a captured object, list or dict (it would not happen per call)."""
        for node, now, saved in snapshot:
            if type(saved) is list:
                same = len(now) == len(saved) and all(a is b for a, b in zip(now, saved))
                what = "changes the captured list"
            else:
                same = now.keys() == saved.keys() and all(now[k] is saved[k] for k in saved)
                what = ("changes the captured dict" if now is node.value else
                        "assigns an attribute of the captured object")
            if not same:
                raise TracingError(f"{self.where}: the function {what} {node.name}; a compiled program would "
                                   f"do it only when it traces. {_WHAT_TO_DO}")

    # -- replacing them while tracing -----------------------------------------------------------
    def installed(self, symbols):
        """A context in which each lifted array is replaced in its place by its symbol."""
        return _Installed(self, symbols)

    def input_names(self, taken):
        """Identifiers for the lifted arrays, not clashing with ``taken`` (the function's parameters)."""
        out, used = [], set(taken)
        for node in self.arrays:
            base = _identifier(node.name)
            name, k = base, 2
            while name in used:
                name, k = f"{base}{k}", k + 1
            used.add(name)
            out.append(name)
        return out

    def refuse_constant(self, a):
        """Refuse a lifted array about to be held by a statement as a constant (``Program.from_trace``'s
        check): the function read it some way the bytecode does not show (``getattr`` with a computed
        name, ``vars()``), so it was not replaced by its input."""
        for node in self.arrays:
            if node.value is a:
                raise TracingError(f"{self.where}: the function reads the captured array {node.name} "
                                   f"in a way that cannot be followed (a name computed at run time, "
                                   f"vars(), globals()), so the program would keep its present value. "
                                   f"Read it by name, or pass it as an argument.")

    def check_unwritten(self, symbols, variables):
        """After the trace: refuse a write into a lifted array (the program would not make it)."""
        for node, sym, var in zip(self.arrays, symbols, variables):
            if sym.variable is not var:
                raise TracingError(f"{self.where}: the function writes into the captured array {node.name} "
                                   f"({node.value.dtype}{list(node.value.shape)}); a compiled program reads "
                                   f"it at each call but would not write into it. Return the new value "
                                   f"instead, or differentiate with wg.grad.")


class _Installed:
    def __init__(self, captures, symbols):
        self.captures, self.symbols, self.undo = captures, symbols, []

    def __enter__(self):
        try:
            replaced = {id(n): s for n, s in zip(self.captures.arrays, self.symbols)}
            for node in self.captures.nodes:
                if node.kind == "sequence" and type(node.value) is not list:
                    continue  # a tuple: rebuilt by _put when an entry is replaced
                if id(node) in replaced:
                    self._put(node, replaced[id(node)])
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _put(self, node, new):
        loc = node.loc
        if loc[0] == "global":
            self.undo.append((loc[1].__setitem__, loc[2], loc[1][loc[2]]))
            loc[1][loc[2]] = new
        elif loc[0] == "cell":
            self.undo.append((setattr, loc[1], "cell_contents", loc[1].cell_contents))
            loc[1].cell_contents = new
        elif loc[0] == "attr":
            obj = _current(loc[1])
            own = getattr(obj, "__dict__", {})
            try:
                if loc[2] in own or isinstance(obj, types.FunctionType):  # (a function's __defaults__)
                    undo = (setattr, obj, loc[2], own[loc[2]] if loc[2] in own else getattr(obj, loc[2]))
                else:
                    undo = (delattr, obj, loc[2])
                setattr(obj, loc[2], new)
            except Exception as e:  # noqa: BLE001 - a property, __slots__, a frozen dataclass
                raise TracingError(f"{self.captures.where}: the captured array {node.name} cannot be "
                                   f"replaced by a traced value while tracing ({type(e).__name__}: {e}), "
                                   f"so a compiled program could not read it at each call. "
                                   f"{_WHAT_TO_DO}") from None
            self.undo.append(undo)
        elif loc[0] == "item":
            parent = loc[1]
            container = _current(parent)
            if type(container) is list or type(container) is dict:
                self.undo.append((container.__setitem__, loc[2], container[loc[2]]))
                container[loc[2]] = new
            else:  # a tuple: a new one in the parent's place
                items = list(container)
                items[loc[2]] = new
                rebuilt = type(container)(items) if type(container) is tuple else type(container)(*items)
                self._put(parent, rebuilt)
        else:
            raise TracingError(f"{self.captures.where}: the captured array {node.name} cannot be replaced "
                               f"by a traced value while tracing. {_WHAT_TO_DO}")

    def __exit__(self, *exc):
        while self.undo:
            setter, *args = self.undo.pop()
            setter(*args)
        return False


def _current(node):
    """The value at ``node``'s place now (inside the trace: a rebuilt tuple, if one was put there)."""
    loc = node.loc
    if loc[0] == "global":
        return loc[1][loc[2]]
    if loc[0] == "cell":
        return loc[1].cell_contents
    if loc[0] == "attr":
        return getattr(_current(loc[1]), loc[2])
    if loc[0] == "item":
        return _current(loc[1])[loc[2]]
    return node.value


def scan(fun, where, strict=True):
    """The :class:`Captures` of ``fun`` (a function, a bound method, or a callable object);
    ``strict``: refuse the writes to captured state its bytecode shows."""
    captures = Captures(where, strict)
    captures.follow(fun, "self")
    for k, node in enumerate(captures.arrays):  # those guarded by contents left the list
        node.index = k
    return captures


def with_captured_inputs(fun, nargs, captures, param_names):
    """``fun`` as a function of its ``nargs`` arguments followed by the lifted arrays (named after
    them, ``W``, ``cfg_W``), which it puts in their places while it runs: what is traced. After the
    run it refuses writes into them and changes to captured objects, lists and dicts."""
    names = captures.input_names(param_names)

    def traced(*values):
        symbols = values[nargs:]
        variables = [getattr(s, "variable", None) for s in symbols]
        snapshot = captures.snapshot()
        with captures.installed(symbols):
            out = fun(*values[:nargs])
        captures.check_unwritten(symbols, variables)
        captures.check_unchanged(snapshot)
        return out

    kind = inspect.Parameter.POSITIONAL_ONLY
    traced.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in list(param_names) + names])
    traced.__name__ = getattr(fun, "__name__", "f")
    return traced
