"""The source front end: a Python function's source (``inspect`` + ``ast``) to a structured program.

The function body is interpreted statement by statement on symbols (``tracing.Symbol``): every
expression is evaluated by Python itself on symbols, so operators, ``wengert.numpy``/NumPy calls
and the rule table's primitives are recorded exactly as ``Program.from_trace`` records them (and
``math`` functions are sent to ``wengert.numpy``). Control flow is *not* run: an ``if`` on a traced
value becomes an :class:`~wengert.program.control.If` node (both arms recorded, their differing
variables merged by phi outputs), ``for`` over ``range(...)`` or over an array's first axis and
``while`` become :class:`~wengert.program.control.Loop` nodes whose body is recorded once, with the
loop-carried variables (names assigned in the body that exist before the loop) explicit.
``break``/``continue`` become flags guarding the rest of the body; the loop ends after an iteration
whose break flag is set. Control flow on static values (ints, shapes, constants) runs at build
time, as in ``from_trace``. Calls to other user functions are interpreted the same way, inline
(their parsed source is cached per function). The program is specialised to the arguments' shapes
(floats when none are given): ints and other non-array arguments are static.

Anything else raises :class:`~wengert.program.control.TransformError` naming the construct, the
file and the line; the tape (``wg.grad``) handles such code.
"""

import ast
import inspect
import linecache
import math
import operator
import os
import textwrap
import types

import numpy as np

import wengert.numpy as wnp
from wengert.api.tree import tree_flatten
from wengert.core.primitive import Primitive
from wengert.program.control import If, Loop, SourceProgram, TransformError
from wengert.program.ir import Variable
from wengert.program.tracing import ProgramBuilder, Symbol, TracingError, _identifier, is_input_leaf
from wengert.rules import indexing, nondiff

__all__ = ["from_source", "TransformError"]

_TAPE = "The tape (wg.grad) handles it: differentiate this function with wg.grad instead."
_JUMP, _BRK, _RET = "__jump", "__break", "__return"

_UNSUPPORTED = {
    ast.Try: "try/except", ast.With: "a with statement", ast.AsyncWith: "async with",
    ast.AsyncFor: "async for", ast.Global: "a global statement", ast.Nonlocal: "a nonlocal statement",
    ast.Yield: "a generator (yield)", ast.YieldFrom: "a generator (yield from)",
    ast.GeneratorExp: "a generator expression", ast.Await: "await", ast.Lambda: "a lambda",
    ast.FunctionDef: "a nested function definition", ast.AsyncFunctionDef: "a nested async function",
    ast.ClassDef: "a class definition", ast.Delete: "del", ast.Import: "import inside the function",
    ast.ImportFrom: "import inside the function", ast.Raise: "raise", ast.NamedExpr: "an assignment "
    "expression (:=)", ast.SetComp: "a set comprehension", ast.DictComp: "a dict comprehension",
    ast.ListComp: "a list comprehension", ast.Starred: "starred arguments (*args)",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED[ast.TryStar] = "try/except*"
if hasattr(ast, "Match"):
    _UNSUPPORTED[ast.Match] = "a match statement"

_MATH = {"sin": wnp.sin, "cos": wnp.cos, "tan": wnp.tan, "exp": wnp.exp, "log": wnp.log, "sqrt": wnp.sqrt,
         "tanh": wnp.tanh, "sinh": wnp.sinh, "cosh": wnp.cosh, "asin": wnp.arcsin, "acos": wnp.arccos,
         "atan": wnp.arctan, "atan2": wnp.arctan2, "log1p": wnp.log1p, "expm1": wnp.expm1,
         "fabs": wnp.abs, "pow": wnp.power, "hypot": wnp.hypot, "log10": wnp.log10, "log2": wnp.log2}


class _MathShim:
    """``math`` with its functions sent to ``wengert.numpy`` (they accept symbols)."""

    def __getattr__(self, name):
        if name in _MATH:
            return _MATH[name]
        return getattr(math, name)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.MatMult: operator.matmul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod}

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # src/wengert
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


class _Parsed:
    """A function's parsed source: the ``FunctionDef``, its file and first line."""

    def __init__(self, fun):
        try:
            lines, start = inspect.getsourcelines(fun)
            filename = inspect.getsourcefile(fun) or "<unknown>"
        except (OSError, TypeError) as e:
            raise TransformError(f"the source of {getattr(fun, '__name__', fun)!r} is not available ({e}); "
                                 f"{_TAPE}") from None
        self.filename = filename
        self.offset = 0
        self.name = fun.__name__
        if fun.__name__ == "<lambda>":
            self.node = self._lambda(fun, lines, start)
        else:
            tree = ast.parse(textwrap.dedent("".join(lines)))
            ast.increment_lineno(tree, start - 1)
            defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if not defs or isinstance(defs[0], ast.AsyncFunctionDef):
                raise TransformError(f"{self.where(start)}: {fun.__name__} is not a def-statement function "
                                     f"or a lambda (an async function?). {_TAPE}")
            self.node = defs[0]
        self._check()

    def _lambda(self, fun, lines, start):
        """A lambda's expression as a one-statement function ``def <lambda>(...): return expr``,
        found in its source lines by its line, parameters and the columns its code comes from
        (refused when that is still ambiguous)."""
        line = fun.__code__.co_firstlineno
        tree = None
        try:  # the whole file: a lambda inside a longer expression parses only with its context
            tree = ast.parse("".join(linecache.getlines(self.filename)))
        except (SyntaxError, ValueError):
            text = "".join(lines)
            for prefix, suffix in (("", ""), ("if 1:\n", ""), ("(\n", "\n)")):  # columns kept as they are
                try:
                    tree = ast.parse(prefix + text + suffix)
                except SyntaxError:
                    continue
                ast.increment_lineno(tree, start - 1 - prefix.count("\n"))
                break
        if tree is None:
            raise TransformError(f"{self.where(line)}: the source of this lambda could not be parsed on its "
                                 f"own; write it as a def-statement function. {_TAPE}")
        code = fun.__code__
        params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == line
                 and [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs] == params]
        if len(found) > 1 and hasattr(code, "co_positions"):
            spots = [p for p in code.co_positions() if None not in p and p[3] > p[2]]  # not RESUME (0, 0)

            def inside(lam):
                b = lam.body
                first, last = (b.lineno, b.col_offset), (b.end_lineno, b.end_col_offset)
                return all((l0, c0) >= first and (l1, c1) <= last for l0, l1, c0, c1 in spots)

            found = [n for n in found if inside(n)] if spots else found
        if len({ast.dump(n) for n in found}) != 1:
            raise TransformError(f"{self.where(line)}: {len(found) or 'no'} lambdas with parameters "
                                 f"({', '.join(params)}) on this line; the source transformation cannot tell "
                                 f"which one it is given: write it as a def-statement function. {_TAPE}")
        lam = found[0]
        node = ast.FunctionDef(name="<lambda>", args=lam.args, body=[ast.Return(value=lam.body)],
                               decorator_list=[], returns=None)
        ast.copy_location(node, lam)
        ast.copy_location(node.body[0], lam)
        return node

    def where(self, lineno):
        return f"{self.filename}, line {lineno + self.offset}"

    def error(self, node, what):
        return TransformError(f"{what} at {self.where(getattr(node, 'lineno', 1))} (in {self.name}) is "
                              f"outside the Python subset that wengert's source transformation "
                              f"supports. {_TAPE}")

    def _check(self):
        fn = self.node
        a = fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or getattr(a, "posonlyargs", []):
            raise self.error(fn, "*args, **kwargs or keyword-only parameters")
        for stmt in fn.body:
            for node in ast.walk(stmt):
                if type(node) in _UNSUPPORTED:
                    raise self.error(node, _UNSUPPORTED[type(node)])
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                        node.func.id in ("exec", "eval", "globals", "locals", "setattr", "vars"):
                    raise self.error(node, f"a call to {node.func.id}()")
                if isinstance(node, (ast.For, ast.While)):
                    if node.orelse:
                        raise self.error(node, f"{'for' if isinstance(node, ast.For) else 'while'}...else")
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.Return):
                            raise self.error(inner, "return inside a loop")


_PARSED = {}


def _parsed(fun):
    key = fun.__code__
    p = _PARSED.get(key)
    if p is None:
        p = _PARSED[key] = _Parsed(fun)
    return p


def _is_user_function(f):
    if not isinstance(f, types.FunctionType):
        return False
    path = os.path.abspath(f.__code__.co_filename)
    return not (path.startswith(_PACKAGE_DIR) or path.startswith(_NUMPY_DIR))


class _ListArguments:
    """A NumPy (or ``wengert.numpy``) function whose list and tuple arguments holding traced values
    (``np.mean([a, b])``, ``np.dot([1.0, a], x)``) are first stacked into one array, as NumPy
    reads such a list; other attributes (``np.add.reduce``) are the function's own."""

    __slots__ = ("fun",)

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args, **kwargs):
        return self.fun(*[_stacked(a) for a in args], **kwargs)

    def __getattr__(self, name):
        return getattr(self.fun, name)


def _stacked(a):
    if type(a) is not list and type(a) is not tuple:
        return a
    found = []
    _map_symbols(a, found.append)
    if not any(s.variable.dtype.kind in "fc" for s in found):
        return a
    try:
        return wnp.array(a)
    except (ValueError, TypeError):  # ragged, or arrays of different shapes: the function reports it
        return a


class _ArrayModule:
    """``numpy`` or ``wengert.numpy`` (and their submodules) as the function being transformed sees
    them: their functions take lists of traced values (see :class:`_ListArguments`)."""

    __slots__ = ("module",)

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        value = getattr(self.module, name)
        if isinstance(value, types.ModuleType):
            return _ArrayModule(value)
        if isinstance(value, type) or not callable(value):
            return value
        return _ListArguments(value)


_ARRAY_MODULES = frozenset((id(np), id(wnp)))


class _Scope(dict):
    """The names an expression sees: the interpreter's variables, then the closure, then globals
    (user functions wrapped to be interpreted inline, ``math`` sent to ``wengert.numpy``)."""

    def __init__(self, interp):
        super().__init__()
        self.interp = interp

    def __missing__(self, name):
        it = self.interp
        if name in it.env:
            return it.env[name]
        if name in it.closure:
            value = it.closure[name]
        elif name in it.fun.__globals__:
            value = it.fun.__globals__[name]
        else:
            raise KeyError(name)
        if value is math:
            return _MathShim()
        if id(value) in _ARRAY_MODULES:
            return _ArrayModule(value)
        if _is_user_function(value):
            return _UserCall(it, value)
        raise KeyError(name)


class _UserCall:
    """A user function called from the function being transformed: interpreted inline."""

    def __init__(self, caller, fun):
        self.caller = caller
        self.fun = fun

    def __call__(self, *args, **kwargs):
        depth = self.caller.depth + 1
        if depth > 20:
            raise TransformError(f"recursion through {self.fun.__name__} (calls nested more than 20 deep) is "
                                 f"outside the subset the source transformation supports. {_TAPE}")
        sub = _Interpreter(self.fun, self.caller.builder, depth)
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"calling {self.fun.__name__}: {e}") from None
        bound.apply_defaults()
        sub.env.update(bound.arguments)
        return sub.run_function()


def _closure(fun, parsed):
    out = {}
    for name, cell in zip(fun.__code__.co_freevars, fun.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            raise TransformError(f"{parsed.where(parsed.node.lineno)}: {fun.__name__} captures "
                                 f"{name!r}, which is not assigned yet. {_TAPE}") from None
        if isinstance(value, (list, dict, set, bytearray, np.ndarray)) or (
                not isinstance(value, (int, float, complex, str, bool, tuple, type(None), np.generic,
                                       types.FunctionType, types.ModuleType, types.BuiltinFunctionType,
                                       Primitive))):
            raise TransformError(f"{parsed.where(parsed.node.lineno)}: {fun.__name__} is a closure over the "
                                 f"mutable variable {name!r} ({type(value).__name__}), state the source "
                                 f"transformation cannot see change; pass it as an argument. {_TAPE}")
        out[name] = value
    return out


def _assigned(stmts):
    """Names a list of statements assigns (anywhere inside, loops and branches included)."""
    names = []
    for s in stmts:
        for node in ast.walk(s):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
                names.append(node.id)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id not in names:
                names.append(node.value.id)
    return names


def _has_jump(stmts):
    """Whether break/continue occur in ``stmts`` (not counting nested loops)."""
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)):
            return True
        if isinstance(s, ast.If) and (_has_jump(s.body) or _has_jump(s.orelse)):
            return True
    return False


_UNROLL_LIMIT = 10000
_MUTATORS = frozenset(("append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
                       "popitem", "sort", "reverse", "__setitem__", "__delitem__", "__iadd__"))
_CONTAINER_TYPES = (list, dict)


def _base_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _mutated_names(stmts):
    """``(name, node)`` for each name whose object ``stmts`` change in place: ``acc.append(...)``
    and the other mutating methods, ``acc[k] = ...``, ``acc[k] += ...``, ``acc += ...``."""
    found = []
    for s in stmts:
        for node in ast.walk(s):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _MUTATORS:
                found.append((_base_name(node.func.value), node))
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                found.append((_base_name(node.value), node))
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                found.append((node.target.id, node))
    return [(n, node) for n, node in found if n is not None]


def _snapshot(values):
    """Every list and dict reachable from ``values`` (through lists, dicts and tuples), with a
    shallow copy of its contents: what :func:`_changed` compares against."""
    seen, out, todo = set(), [], list(values)
    while todo:
        v = todo.pop()
        t = type(v)
        if t is list or t is dict:
            if id(v) in seen:
                continue
            seen.add(id(v))
            out.append((v, list(v) if t is list else dict(v)))
            todo.extend(v if t is list else v.values())
        elif t is tuple:
            todo.extend(v)
    return out


def _changed(snapshot):
    """The lists and dicts of ``snapshot`` whose contents changed since."""
    out = []
    for obj, saved in snapshot:
        if type(obj) is list:
            if len(obj) != len(saved) or any(a is not b for a, b in zip(obj, saved)):
                out.append(obj)
        elif obj.keys() != saved.keys() or any(obj[k] is not saved[k] for k in saved):
            out.append(obj)
    return out


def _restore(snapshot):
    for obj, saved in snapshot:
        if type(obj) is list:
            obj[:] = saved
        else:
            obj.clear()
            obj.update(saved)


def _same_type(a, b):
    return np.shape(a) == np.shape(b) and np.result_type(a).kind == np.result_type(b).kind


class _Interpreter:
    """Interprets one function's body on symbols, recording nodes into ``builder.statements``."""

    def __init__(self, fun, builder, depth=0):
        self.fun = fun
        self.parsed = _parsed(fun)
        self.closure = _closure(fun, self.parsed)
        self.builder = builder
        self.depth = depth
        self.env = {}
        self._code = {}

    # -- helpers ---------------------------------------------------------------------------------
    def error(self, node, what):
        return self.parsed.error(node, what)

    def where(self, node):
        return self.parsed.where(node.lineno)

    def eval(self, expr):
        code = self._code.get(id(expr))
        if code is None:
            tree = ast.Expression(body=expr)
            ast.fix_missing_locations(tree)
            code = self._code[id(expr)] = (compile(tree, self.parsed.filename, "eval"), expr)
        try:
            with np.errstate(all="ignore"):
                return eval(code[0], self.fun.__globals__, _Scope(self))  # noqa: S307 - the user's own code
        except TracingError as e:
            raise TransformError(f"at {self.where(expr)} (in {self.parsed.name}): {e} Inside an expression, "
                                 f"Python control flow (a if c else b, and/or, chained comparisons) on "
                                 f"traced values is outside the subset; write an if statement. "
                                 f"{_TAPE}") from None
        except NameError as e:
            raise TransformError(f"at {self.where(expr)} (in {self.parsed.name}): {e}; a variable "
                                 f"assigned in only one branch of an if, or first assigned inside a "
                                 f"loop, cannot be used "
                                 f"after it: assign it before. {_TAPE}") from None

    def test(self, expr):
        """The condition of an ``if`` or ``while``: ``and``/``or``/``not`` and chained comparisons on
        traced values become logical_and/or/not (both sides are evaluated: conditions have no effects)."""
        t = type(expr)
        if t is ast.BoolOp:
            is_and = isinstance(expr.op, ast.And)
            result = None
            for part in expr.values:
                v = self.test(part)
                if type(v) is not Symbol:
                    if bool(v) != is_and:  # static short circuit: False for and, True for or
                        return bool(v)
                    continue
                if v.variable.dtype.kind != "b":
                    v = v != 0
                result = v if result is None else (nondiff.logical_and(result, v) if is_and
                                                   else nondiff.logical_or(result, v))
            return is_and if result is None else result
        if t is ast.UnaryOp and isinstance(expr.op, ast.Not):
            v = self.test(expr.operand)
            if type(v) is not Symbol:
                return not v
            return nondiff.logical_not(v if v.variable.dtype.kind == "b" else v != 0)
        if t is ast.Compare and len(expr.ops) > 1:
            parts, left = [], expr.left
            for op, right in zip(expr.ops, expr.comparators):
                parts.append(ast.copy_location(ast.Compare(left=left, ops=[op], comparators=[right]), expr))
                left = right
            return self.test(ast.copy_location(ast.BoolOp(op=ast.And(), values=parts), expr))
        return self.eval(expr)

    def stmts(self):
        return self.builder.statements

    def mark(self):
        return len(self.builder.statements)

    def name_result(self, value, base, mark):
        """Give the variable just recorded for ``value`` the user's name ``base``."""
        if type(value) is Symbol:
            made = {o for s in self.builder.statements[mark:] if hasattr(s, "prim") for o in s.outs}
            if value.variable in made and not value.variable.name.startswith(base):
                self.builder.names.discard(value.variable.name)
                value.variable.name = self.builder.fresh(base)
        return value

    def sym(self, var):
        return Symbol(var, _example(var), self.builder)

    def new_var(self, base, like):
        ex = like.example if type(like) is Symbol else like
        try:
            return Variable.like(self.builder.fresh(base), ex if not isinstance(ex, bool) else np.bool_(ex))
        except TypeError:
            raise TransformError(f"{base!r} holds a {type(ex).__name__}, which a program built from source "
                                 f"cannot carry through a loop or an if. {_TAPE}") from None

    # -- the function ----------------------------------------------------------------------------
    def run_function(self):
        self.env.setdefault(_RET, None)
        self.env.setdefault(_JUMP, False)
        body = self.parsed.node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        self.block(body)
        return self.env[_RET]

    def block(self, stmts):
        for k, s in enumerate(stmts):
            jump = self.env.get(_JUMP, False)
            if type(jump) is Symbol:  # after a break/continue taken conditionally: guard the rest
                cond = nondiff.logical_not(jump)
                self.branch(cond, stmts[k:], [], s, reset_jump=True)
                return
            if jump:
                return
            self.statement(s)

    def statement(self, s):
        t = type(s)
        if t is ast.Expr:
            if not isinstance(s.value, ast.Constant):
                self.eval(s.value)
        elif t is ast.Pass:
            pass
        elif t is ast.Assign:
            mark = self.mark()
            value = self.eval(s.value)
            for target in s.targets:
                self.assign(target, value, mark, s)
        elif t is ast.AnnAssign:
            if s.value is not None:
                mark = self.mark()
                self.assign(s.target, self.eval(s.value), mark, s)
        elif t is ast.AugAssign:
            self.augassign(s)
        elif t is ast.Return:
            self.env[_RET] = None if s.value is None else self.eval(s.value)
            self.env[_JUMP] = True  # what follows runs only where this return did not
        elif t is ast.If:
            test = self.test(s.test)
            if type(test) is Symbol:
                if test.variable.dtype.kind != "b":
                    test = test != 0
                self.branch(test, s.body, s.orelse, s)
            else:
                self.block(s.body if test else s.orelse)
        elif t is ast.For:
            self.for_loop(s)
        elif t is ast.While:
            self.while_loop(s)
        elif t is ast.Break:
            self.env[_JUMP] = True
            self.env[_BRK] = True
        elif t is ast.Continue:
            self.env[_JUMP] = True
        elif t is ast.Assert:
            pass  # checks of shapes and constants; nothing to record
        else:
            raise self.error(s, f"a {t.__name__} statement")

    def assign(self, target, value, mark, node):
        t = type(target)
        if t is ast.Name:
            self.env[target.id] = self.name_result(value, target.id, mark)
        elif t in (ast.Tuple, ast.List):
            try:
                values = list(value)
            except TypeError:
                raise self.error(node, f"unpacking a {type(value).__name__}") from None
            if len(values) != len(target.elts):
                raise TransformError(f"at {self.where(node)}: cannot unpack {len(values)} values into "
                                     f"{len(target.elts)} names")
            for tg, v in zip(target.elts, values):
                self.assign(tg, v, mark, node)
        elif t is ast.Subscript and isinstance(self.container(target, node), _CONTAINER_TYPES):
            container, key = self.container(target, node), self.key(target, node)
            container[key] = value
        elif t is ast.Subscript and isinstance(target.value, ast.Name):
            self.subscript_update(target, lambda old, idx: indexing.index_update(old, idx, value), node)
        else:
            raise self.error(node, f"assignment to a {t.__name__}")

    def container(self, target, node):
        """The list or dict ``target`` (a subscript) stores into, or None when it is not one."""
        if not isinstance(target.value, (ast.Name, ast.Subscript)):
            return None
        if isinstance(target.value, ast.Name):
            value = self.env.get(target.value.id)
        else:
            value = self.eval(target.value)
        return value if isinstance(value, _CONTAINER_TYPES) else None

    def key(self, target, node):
        """The static key of ``target[key]`` on a list or dict (a traced index is refused)."""
        key = self.eval(target.slice)
        found = []
        _map_symbols(key, found.append)
        if found:
            raise self.error(node, "a list or dict indexed by a traced value (its key is not known when "
                                   "the program is built; use an array)")
        return key

    def subscript_update(self, target, update, node):
        name = target.value.id
        old = self.env.get(name)
        if type(old) is not Symbol and not isinstance(old, np.ndarray):
            raise self.error(node, f"item assignment into {name} ({type(old).__name__})")
        idx = self.eval(target.slice)
        mark = self.mark()
        new = update(old, idx)
        self.env[name] = self.name_result(new, name, mark)

    def augassign(self, s):
        op = _OPS.get(type(s.op))
        if op is None:
            raise self.error(s, f"augmented assignment {type(s.op).__name__}")
        value = self.eval(s.value)
        target = s.target
        if isinstance(target, ast.Name):
            if target.id not in self.env:
                self.eval(ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target))
            mark = self.mark()
            cur = self.env[target.id] if target.id in self.env else self.eval(
                ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target))
            if isinstance(cur, _CONTAINER_TYPES):  # acc += [...]: in place, as Python does
                if not isinstance(s.op, ast.Add) and not (type(cur) is list and isinstance(s.op, ast.Mult)):
                    raise self.error(s, f"augmented assignment {type(s.op).__name__} to a "
                                        f"{type(cur).__name__}")
                self.env[target.id] = operator.iadd(cur, value) if isinstance(s.op, ast.Add) else \
                    operator.imul(cur, value)
                return
            with np.errstate(all="ignore"):
                self.env[target.id] = self.name_result(op(cur, value), target.id, mark)
        elif isinstance(target, ast.Subscript) and isinstance(self.container(target, s), _CONTAINER_TYPES):
            container, key = self.container(target, s), self.key(target, s)
            mark = self.mark()
            with np.errstate(all="ignore"):
                container[key] = self.name_result(op(container[key], value), _clean_key(target), mark)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            if isinstance(s.op, ast.Add):
                self.subscript_update(target, lambda old, idx: indexing.index_add(old, idx, value), s)
            else:
                def update(old, idx):
                    return indexing.index_update(old, idx, op(old[idx], value))

                self.subscript_update(target, update, s)
        else:
            raise self.error(s, f"augmented assignment to a {type(target).__name__}")

    # -- branches --------------------------------------------------------------------------------
    def branch(self, cond, body, orelse, node, reset_jump=False):
        outer = self.builder.statements
        env0 = dict(self.env)
        snapshot = _snapshot(env0.values())
        arms = []
        for stmts in (body, orelse):
            self.env = dict(env0)
            if reset_jump and stmts is body:
                self.env[_JUMP] = False
            self.builder.statements = outer  # leave the other arm: arms share nothing
            self.builder.statements = []
            self.block(stmts)
            changed = _changed(snapshot)
            if changed:  # both arms are recorded: the change would happen whichever arm runs
                _restore(snapshot)
                names = sorted(n for n, v in env0.items() if any(v is c for c in changed)) or ["a list"]
                raise TransformError(
                    f"at {self.where(node)} (in {self.parsed.name}): this if on a traced value changes "
                    f"{', '.join(names)} in place in an arm (append, item assignment, ...); both arms are "
                    f"recorded, so the change would happen whichever arm runs. Compute both values, choose "
                    f"with wnp.where, or change it after the if. {_TAPE}")
            arms.append((self.builder.statements, self.env))
        self.builder.statements = outer
        (then, env_t), (orelse_nodes, env_e) = arms
        env = {}
        outs, tv, ev = [], [], []
        for name in env_t:
            if name not in env_e:
                continue
            a, b = env_t[name], env_e[name]
            if a is b:
                env[name] = a
                continue
            if type(a) is not Symbol and type(b) is not Symbol and _static_equal(a, b):
                env[name] = a
                continue
            if name == _RET:  # a return in one arm: the other's result is a placeholder until it returns
                if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
                    raise self.error(node, "returning a tuple from inside an if")
                a = _zero_like(b) if a is None else a
                b = _zero_like(a) if b is None else b
            for v in (a, b):
                if not _numeric(v):
                    raise self.error(node, f"an if on a traced value assigning {name} a "
                                           f"{type(v).__name__} in its arms")
            like = a if _is_float(a) or not _is_float(b) else b
            if not np.shape(_ex(a)) == np.shape(_ex(b)):
                raise TransformError(f"at {self.where(node)}: the arms of this if give {_clean(name)} "
                                     f"different shapes ({np.shape(_ex(a))} and {np.shape(_ex(b))}); "
                                     f"the source "
                                     f"transformation needs one shape per variable. {_TAPE}")
            var = self.new_var(_clean(name), like)
            outs.append(var)
            tv.append(_unsym(a))
            ev.append(_unsym(b))
            env[name] = self.sym(var)
        self.env = env
        cond = cond.variable if type(cond) is Symbol else cond
        self.builder.statements.append(If(cond, then, orelse_nodes, outs, tv, ev, lineno=node.lineno))

    # -- loops -----------------------------------------------------------------------------------
    def for_loop(self, s):
        it = s.iter
        policy = self.checkpoint_marker(it)
        if policy is not None:
            it = it.args[0]
        if isinstance(s.target, ast.Name):
            target = s.target.id
        else:
            raise self.error(s, "a for loop with a target other than one name")
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
                and "range" not in self.env and not it.keywords:
            bounds = [self.eval(a) for a in it.args]
            if len(bounds) == 1:
                bounds = [0] + bounds
            if len(bounds) == 2:
                bounds.append(1)
            bounds = [_unsym(b) for b in bounds]
            self.loop(s, "for", bounds=bounds, target=target, policy=policy)
            return
        seq = self.eval(it)
        if type(seq) is Symbol:
            if not seq.variable.shape:
                raise self.error(s, "iterating over a 0-d array")
            self.loop(s, "for", bounds=[0, seq.variable.shape[0], 1], target=target, over=seq, policy=policy)
        elif isinstance(seq, (list, tuple)):
            if policy is not None:
                raise self.error(s, "wg.checkpointed around a list (the loop is unrolled)")
            if _has_jump(s.body):
                raise self.error(s, "break/continue in a loop over a list (it is unrolled)")
            for item in seq:
                self.env[target] = item
                self.block(s.body)
        elif isinstance(seq, np.ndarray):
            self.loop(s, "for", bounds=[0, len(seq), 1], target=target, over=seq, policy=policy)
        else:
            raise self.error(s, f"a for loop over a {type(seq).__name__}")

    def checkpoint_marker(self, it):
        """``(policy, snapshots)`` when ``it`` is ``wg.checkpointed(iterable, ...)``, else None."""
        if not (isinstance(it, ast.Call) and it.args and not isinstance(it.args[0], ast.Starred)):
            return None
        name = it.func
        while isinstance(name, ast.Attribute):
            name = name.value
        if not isinstance(name, ast.Name):  # a call returning the function: not evaluated twice
            return None
        from wengert.program.source_checkpoint import checkpointed

        try:
            func = self.eval(it.func)
        except Exception:  # noqa: BLE001 - not the marker; the loop reports its own errors
            return None
        if func is not checkpointed:
            return None
        args = [self.eval(a) for a in it.args[1:]]
        kwargs = {k.arg: self.eval(k.value) for k in it.keywords}
        try:
            checkpointed(None, *args, **kwargs)  # the same checks as when run
        except (TypeError, ValueError) as e:
            raise TransformError(f"{self.where(it)}: {e}") from None
        policy = args[0] if args else kwargs.get("checkpoint", "binomial")
        snapshots = args[1] if len(args) > 1 else kwargs.get("snapshots")
        return policy, snapshots

    def changes_containers(self, s, carried):
        """Whether the loop ``s`` changes a list or dict in place (``acc.append``, ``acc[k] = ...``)
        or rebinds a variable holding one: then it is unrolled (see :meth:`unroll`). A global
        list or dict changed in place is refused (tracing would change it)."""
        local = set(_assigned(self.parsed.node.body)) | {a.arg for a in self.parsed.node.args.args}
        for name, node in _mutated_names(s.body):
            if name in self.env:
                if isinstance(self.env[name], _CONTAINER_TYPES):
                    return True
            elif name not in local and isinstance(self.fun.__globals__.get(name), _CONTAINER_TYPES):
                raise self.error(node, f"changing the global {type(self.fun.__globals__[name]).__name__} "
                                       f"{name} in place (tracing the function would change it)")
        return any(isinstance(self.env[n], (list, dict, tuple)) for n in carried)

    def unroll(self, s, kind, bounds, target, over, test, policy):
        """A loop that changes lists or dicts (``acc.append(x[i] ** 2)``), run at build time: its
        body is recorded once per iteration, so each push, ``len(acc)``, ``acc[-1]``, ``sum(acc)``
        and ``np.stack(acc)`` see every iteration's value. The trip count must be known when the
        program is built: ``range`` of static bounds, an array's first axis, or a ``while`` whose
        condition depends on static values only."""
        what = f"{'a for' if kind == 'for' else 'a while'} loop changing a list or dict (it is unrolled)"
        if policy is not None:
            raise self.error(s, f"wg.checkpointed around {what}")
        if kind == "for":
            if not all(isinstance(b, (int, np.integer)) for b in bounds):
                raise self.error(s, f"{what} over a range whose bounds are traced values")
            if len(range(*bounds)) > _UNROLL_LIMIT:
                raise TransformError(f"at {self.where(s)} (in {self.parsed.name}): {what} of "
                                     f"{len(range(*bounds))} iterations (at most {_UNROLL_LIMIT} are "
                                     f"unrolled). "
                                     f"Collect the values in an array instead (wnp.zeros(n), then out[i] = "
                                     f"...), which stays a loop. {_TAPE}")
            for i in range(*bounds):
                if over is not None:
                    mark = self.mark()
                    self.env[target] = self.name_result(over[i], target, mark)
                else:
                    self.env[target] = i
                if self.iteration(s, what):
                    break
            return
        for count in range(_UNROLL_LIMIT + 1):
            cond = self.test(test)
            if type(cond) is Symbol:
                raise TransformError(
                    f"at {self.where(s)} (in {self.parsed.name}): {what} whose condition depends on traced "
                    f"values: the number of iterations is not known when the program is built. Make the "
                    f"trip count static (a for loop over range(n)), or collect the values in an array "
                    f"(wnp.zeros(n) and .at[i].set, or index assignment). {_TAPE}")
            if not cond:
                return
            if count == _UNROLL_LIMIT:
                raise TransformError(f"at {self.where(s)} (in {self.parsed.name}): {what} ran more than "
                                     f"{_UNROLL_LIMIT} iterations while the program was built. {_TAPE}")
            if self.iteration(s, what):
                return

    def iteration(self, s, what):
        """One iteration of an unrolled loop; whether it left the loop (a static ``break``)."""
        jump, brk = self.env.get(_JUMP, False), self.env.get(_BRK, False)
        self.env[_JUMP] = False
        self.env[_BRK] = False
        self.block(s.body)
        left = self.env.get(_BRK, False)
        if type(left) is Symbol:
            raise self.error(s, f"break on a traced condition in {what}")
        self.env[_JUMP], self.env[_BRK] = jump, brk
        return bool(left)

    def while_loop(self, s):
        self.loop(s, "while", test=s.test)

    def loop(self, s, kind, bounds=(), target=None, over=None, test=None, policy=None):
        static = all(isinstance(b, (int, np.integer)) for b in bounds)
        if kind == "for" and static and len(range(*bounds)) == 0:
            return  # never runs (e.g. over an empty array): nothing to record, as for a false while test
        names = [n for n in _assigned(s.body) if n in self.env and n != target]
        if self.changes_containers(s, names):
            self.unroll(s, kind, bounds, target, over, test, policy)
            return
        outer = self.builder.statements
        env0 = dict(self.env)
        snapshot = _snapshot(env0.values())  # a helper function may change a list it is passed
        likes = {n: self.env[n] for n in names}
        for n in names:
            if not _numeric(likes[n]):
                raise self.error(s, f"a loop changing {n}, a {type(likes[n]).__name__}")
        for _attempt in range(3):
            self.env = dict(env0)
            headers = [self.new_var(_clean(n), likes[n]) for n in names]
            for n, h in zip(names, headers):
                self.env[n] = self.sym(h)
            index = None
            cond_block, cond = [], None
            self.builder.statements = outer  # leave an earlier attempt's body
            self.builder.statements = []
            if kind == "while":
                cond = self.test(test)
                cond_block = self.builder.statements
                if type(cond) is Symbol and cond.variable.dtype.kind != "b":
                    cond = cond != 0
                if type(cond) is not Symbol:
                    if not cond:  # never runs
                        self.builder.statements = outer
                        self.env = env0
                        return
                    cond = True
                self.builder.statements = outer  # leave the condition's block: the body is not inside it
                self.builder.statements = []
            else:
                index = Variable(self.builder.fresh("i" if over is not None else target), (), np.int64, "int")
                isym = self.sym(index)
                if over is not None:
                    mark = self.mark()
                    self.env[target] = self.name_result(over[isym], target, mark)
                else:
                    self.env[target] = isym
            self.env[_JUMP] = False
            self.env[_BRK] = False
            try:
                self.block(s.body)
            except Exception:
                if not _changed(snapshot):
                    raise
            if _changed(snapshot):  # recorded once, it would change them once: run every iteration
                _restore(snapshot)
                self.builder.statements = outer
                self.env = env0
                self.unroll(s, kind, bounds, target, over, test, policy)
                return
            body = self.builder.statements
            body_outs = [self.env[n] for n in names]
            brk = self.env.get(_BRK, False)
            retry = False
            for n, h, o in zip(names, headers, body_outs):
                ex = _ex(o)
                if not _numeric(o):
                    raise self.error(s, f"a loop making {n} a {type(o).__name__}")
                if np.shape(ex) != h.shape:
                    raise TransformError(f"at {self.where(s)}: the loop changes the shape of {n} from "
                                         f"{h.shape} to {np.shape(ex)}; initialise it with its final "
                                         f"shape (e.g. "
                                         f"np.zeros({np.shape(ex)})). {_TAPE}")
                if np.result_type(ex) != h.dtype and not (type(ex) is float and h.dtype == np.float64):
                    likes[n] = o if np.result_type(ex).kind in "fc" or h.dtype.kind not in "fc" else likes[n]
                    retry = retry or likes[n] is o
            if not retry:
                break
        else:
            raise TransformError(f"at {self.where(s)}: the loop-carried variables' types do not settle. "
                                 f"{_TAPE}")
        self.builder.statements = outer
        outs = [Variable(self.builder.fresh(_clean(n)), h.shape, h.dtype, h.kind)
                for n, h in zip(names, headers)]
        env = dict(env0)
        for n, o in zip(names, outs):
            env[n] = self.sym(o)
        self.env = env
        brk_value = None if brk is False else (True if brk is True else brk.variable)
        cond_value = cond.variable if type(cond) is Symbol else cond
        loop = Loop(kind, body, headers, [_unsym(env0[n]) for n in names],
                    [_unsym(o) for o in body_outs], outs, index=index, bounds=bounds,
                    cond_block=cond_block, cond=cond_value, brk=brk_value, lineno=s.lineno)
        loop.where = self.where(s)
        loop.checkpoint = policy
        outer.append(loop)


class _Builder(ProgramBuilder):
    """A ProgramBuilder that records a primitive applied to the same arguments once (``v[i] * v[i]``
    reads ``v[i]`` once): common subexpressions, as the source is read. A statement is reused in its
    own block and in the blocks nested in it (SSA: it dominates them), never from a sibling arm.
    ``statements`` is the block being recorded; setting it to a new list enters a nested block,
    setting it back to an enclosing one leaves the blocks in between."""

    __slots__ = ("_seen", "_blocks")

    def __init__(self, names=()):
        self._blocks = []
        super().__init__(names=names)
        self._seen = {}

    @property
    def statements(self):
        return self._blocks[-1]

    @statements.setter
    def statements(self, block):
        for k, b in enumerate(self._blocks):
            if b is block:
                del self._blocks[k + 1:]
                return
        self._blocks.append(block)

    def forget(self, var):
        """Reuse no statement whose result is ``var`` (it was rewritten)."""
        for key in [k for k, (_b, s) in self._seen.items() if s.variable is var]:
            del self._seen[key]

    def apply(self, prim, args, kwargs):
        key = _cse_key((prim, args, tuple(sorted(kwargs.items())) if kwargs else ()))
        if key is not None:
            hit = self._seen.get(key)
            if hit is not None and any(hit[0] is b for b in self._blocks):
                return hit[1]
        out = super().apply(prim, args, kwargs)
        if key is not None and type(out) is Symbol:
            self._seen[key] = (self.statements, out)
        return out


def _cse_key(x):
    t = type(x)
    if t is Symbol:
        return ("v", id(x.variable))
    if t in (int, float, bool, str, type(None)) or isinstance(x, Primitive):
        return (t.__name__, x)
    if t is tuple or t is list:
        parts = tuple(_cse_key(p) for p in x)
        return None if any(p is None for p in parts) else (t.__name__, parts)
    if t is slice:
        return _cse_key((x.start, x.stop, x.step))
    if isinstance(x, np.dtype) or x is Ellipsis:
        return ("c", str(x))
    return None


def _zero_like(v):
    ex = _ex(v)
    if type(ex) is float:
        return 0.0
    return np.zeros(np.shape(ex), np.result_type(ex))


def _clean_key(target):
    name = _base_name(target)
    return name if name else "item"


def _map_symbols(obj, f):
    t = type(obj)
    if t is Symbol:
        f(obj)
    elif t is tuple or t is list:
        for o in obj:
            _map_symbols(o, f)
    elif t is slice:
        _map_symbols((obj.start, obj.stop, obj.step), f)


def _clean(name):
    return {_RET: "result", _JUMP: "jump", _BRK: "stop"}.get(name, name)


def _ex(v):
    return v.example if type(v) is Symbol else v


def _unsym(v):
    return v.variable if type(v) is Symbol else v


def _numeric(v):
    return type(v) is Symbol or isinstance(v, (bool, int, float, complex, np.generic, np.ndarray))


def _is_float(v):
    return np.result_type(_ex(v)).kind in "fc"


def _static_equal(a, b):
    try:
        return type(a) is type(b) and bool(np.all(a == b))
    except (TypeError, ValueError):
        return a is b


def _example(var):
    from wengert.program.ir import placeholder

    return placeholder(var)


def _callable_kind(fun):
    """``(function to interpret, positional arguments bound first, keywords bound)`` for what
    ``source_grad`` and ``source_jvp`` accept; refuses what has no source to transform."""
    import functools

    from wengert.program.compiled import CompiledFunction

    pre, kw = (), {}
    while True:
        if isinstance(fun, CompiledFunction):
            if fun.transform is not None:
                raise TransformError(f"{fun!r} is a compiled derivative; the source transformation reads "
                                     f"Python source. Give it the function itself (source_grad(f)), or "
                                     f"keep the compiled one (wg.compile(f).grad()).")
            fun = fun.fun
        elif isinstance(fun, functools.partial):
            pre, kw = tuple(fun.args) + pre, {**fun.keywords, **kw}
            fun = fun.func
        else:
            break
    if isinstance(fun, types.FunctionType):
        return fun, pre, kw
    what = type(fun).__name__
    raise TransformError(f"{getattr(fun, '__name__', fun)!r} is a {what}, not a Python function with source "
                         f"to transform (the source transformation reads a def or a lambda). Differentiate "
                         f"it with the tape (wg.grad), or wrap it: def f(x): return "
                         f"{getattr(fun, '__name__', 'fun')}(x).")


def from_source(fun, *example_args):
    """``wg.Program.from_source(fun, *example_args)``: ``fun``'s source as a structured program,
    specialised to the shapes of ``example_args`` (Python floats for every parameter if none).
    ``fun`` is a def or a lambda (or ``wg.compile`` of one, or a ``functools.partial`` of one)."""
    fun, pre, bound_kw = _callable_kind(fun)
    parsed = _parsed(fun)
    params = [a.arg for a in parsed.node.args.args]
    free = [p for p in params[len(pre):] if p not in bound_kw]
    defaults = dict(zip(params[len(params) - len(fun.__defaults__ or ()):], fun.__defaults__ or ()))
    if not example_args:
        example_args = tuple(1.0 for p in free if p not in defaults)
    if not len([p for p in free if p not in defaults]) <= len(example_args) <= len(free):
        raise TypeError(f"{parsed.name} takes {len(free)} arguments, got {len(example_args)}")
    builder = _Builder(names={"np", "math", "stack", "range", "len"} - set(params))
    interp = _Interpreter(fun, builder)
    inputs, slots = [], []
    for name, a in zip(free, example_args):
        if isinstance(a, (list, tuple, dict)):
            raise TypeError(f"{parsed.name}: argument {name} is a {type(a).__name__}; the source "
                            f"transformation takes arrays, numbers and static values (use wg.grad for "
                            f"pytrees)")
        if is_input_leaf(a):
            var = Variable.like(builder.fresh(name), a)
            inputs.append(var)
            slots.append(var)
            interp.env[name] = builder.symbol(var, a)  # the argument is its example: rules run on it
        else:
            slots.append(a)
            interp.env[name] = a
    for name, value in list(zip(params, pre)) + list(bound_kw.items()):
        interp.env[name] = value
    for name, value in defaults.items():
        interp.env.setdefault(name, value)
    out = interp.run_function()
    leaves, out_tree = tree_flatten(out)
    outputs = [_unsym(o) for o in leaves]
    program = SourceProgram(_identifier(fun.__name__), inputs, builder.statements, outputs, params=slots,
                            statics=None, out_tree=out_tree, filename=parsed.filename)
    program.examples = builder.examples
    return program
