"""Reading a function's source for the source front end: its ``def`` (or lambda) parsed and checked
against the supported Python subset, its closure, and the facts about its statements that the
interpreter asks (names assigned, ``break``/``continue``, lists and dicts changed in place)."""

import ast
import inspect
import itertools
import linecache
import os
import textwrap
import types

import numpy as np

from wengert.program.source.control import TransformError
from wengert.program.source.values import HIDDEN

__all__ = ["TAPE", "TRY_ADVICE", "parsed_source", "is_user_function", "raised_in_library", "closure_values",
           "assigned_names", "has_jump", "base_name", "mutated_names", "scope_walk", "SourceText", "choices"]

TAPE = "The tape (wg.grad) handles it: differentiate this function with wg.grad instead."
TRY_ADVICE = ("move the try/except out of the function, around the call of the compiled or differentiated "
              "function, or test the failing condition with an if")


_UNSUPPORTED = {
    ast.AsyncWith: "async with",
    ast.AsyncFor: "async for", ast.Global: "a global statement",
    ast.Nonlocal: ("a nonlocal statement (a nested function assigning a variable of the function around it)",
                   "return the new value from the nested function and assign it where it is called"),
    ast.Yield: ("a generator (yield)", "build a list and return it, or write a list comprehension or a "
                                       "generator expression"),
    ast.YieldFrom: ("a generator (yield from)", "build a list and return it"),
    ast.Await: "await", ast.AsyncFunctionDef: "a nested async function",
    ast.ClassDef: "a class definition", ast.Delete: "del", ast.Import: "import inside the function",
    ast.ImportFrom: "import inside the function", ast.Raise: "raise", ast.NamedExpr: "an assignment "
    "expression (:=)", ast.SetComp: ("a set comprehension", "write a list comprehension"),
    ast.Starred: "starred arguments (*args)",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED[ast.TryStar] = ("try/except*", TRY_ADVICE)
if hasattr(ast, "Match"):
    _UNSUPPORTED[ast.Match] = "a match statement"

_NUMBERS = itertools.count(1)  # the hidden names' numbers (values.HIDDEN)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # wengert/
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


class SourceText:
    """Where a parsed function's nodes are (``filename``, ``offset``, ``name``), and errors citing them."""

    def where(self, lineno):
        return f"{self.filename}, line {lineno + self.offset}"

    def error(self, node, what, instead=None):
        """The error for ``what`` at ``node``; ``instead``: what to write instead (the tape is named too)."""
        advice = f" Instead, {instead}." if instead else ""
        return TransformError(f"{what} at {self.where(getattr(node, 'lineno', 1))} (in {self.name}) is "
                              f"outside the Python subset that wengert's source transformation "
                              f"supports.{advice} {TAPE}")


class _Parsed(SourceText):
    """A function's parsed source: the ``FunctionDef``, its file and first line."""

    def __init__(self, fun):
        try:
            # the code object's source: inspect would follow a decorator's __wrapped__ to another function
            lines, start = inspect.getsourcelines(fun.__code__)
            filename = inspect.getsourcefile(fun.__code__) or "<unknown>"
        except (OSError, TypeError) as e:
            raise TransformError(f"the source of {getattr(fun, '__name__', fun)!r} is not available ({e}); "
                                 f"{TAPE}") from None
        self.filename = filename
        self.offset = 0
        self.name = fun.__name__
        self.local_defs = {}  # the nested defs, lambdas and comprehensions read so far (source.nested)
        if fun.__name__ == "<lambda>":
            self.node = self._lambda(fun, lines, start)
        else:
            tree = ast.parse(textwrap.dedent("".join(lines)))
            ast.increment_lineno(tree, start - 1)
            defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if not defs or isinstance(defs[0], ast.AsyncFunctionDef):
                raise TransformError(f"{self.where(start)}: {fun.__name__} is not a def-statement function "
                                     f"or a lambda (an async function?). {TAPE}")
            self.node = defs[0]
            _LoopElse().visit(self.node)
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
                                 f"own; write it as a def-statement function. {TAPE}")
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
                                 f"which one it is given: write it as a def-statement function. {TAPE}")
        lam = found[0]
        node = ast.FunctionDef(name="<lambda>", args=lam.args, body=[ast.Return(value=lam.body)],
                               decorator_list=[], returns=None)
        ast.copy_location(node, lam)
        ast.copy_location(node.body[0], lam)
        return node

    def _check(self):
        self._check_function(self.node, nested=False)

    def _check_function(self, fn, nested):
        """Checks a function (the one transformed, or a def or lambda nested in it) against the subset."""
        a = fn.args
        if a.vararg or a.kwarg or (not nested and (a.kwonlyargs or getattr(a, "posonlyargs", []))):
            raise self.error(fn, "*args, **kwargs or keyword-only parameters")
        if nested and getattr(fn, "decorator_list", None):
            raise self.error(fn, f"a decorated nested function ({fn.name})",
                             f"define {fn.name} without the decorator, or at module level")
        for stmt in (fn.body if isinstance(fn, ast.FunctionDef) else [fn.body]):
            for node in scope_walk(stmt, into_comprehensions=True):
                if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                    self._check_function(node, nested=True)
                    continue
                if type(node) in _UNSUPPORTED:
                    what = _UNSUPPORTED[type(node)]
                    raise self.error(node, *(what if type(what) is tuple else (what,)))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                        node.func.id in ("exec", "eval", "globals", "locals", "setattr", "vars"):
                    raise self.error(node, f"a call to {node.func.id}()")
                if isinstance(node, (ast.For, ast.While)):
                    for inner in scope_walk(node):
                        if isinstance(inner, ast.Return):
                            raise self.error(inner, "return inside a loop")


class _LoopElse(ast.NodeTransformer):
    """Rewrites ``for``/``while`` ... ``else`` (the else runs when the loop ends without a ``break``) as
    Python runs it, with a flag: ``__wg_no_break1 = True``, the loop with ``__wg_no_break1 = False``
    before each of its own ``break``s, then ``if __wg_no_break1:`` and the else block. The flag is a
    variable like the user's: a loop-carried bool where the break depends on traced values."""

    def visit_loop(self, node):
        self.generic_visit(node)  # loops inside first: their else blocks leave them
        if not node.orelse:
            return node
        flag = f"{HIDDEN}no_break{next(_NUMBERS)}"

        def at(new):
            return ast.fix_missing_locations(ast.copy_location(new, node))

        def setting(value):
            target = at(ast.Name(id=flag, ctx=ast.Store()))
            return at(ast.Assign(targets=[target], value=at(ast.Constant(value))))

        node.body = _flag_breaks(node.body, lambda brk: [ast.copy_location(setting(False), brk), brk])
        after = at(ast.If(test=at(ast.Name(id=flag, ctx=ast.Load())), body=node.orelse, orelse=[]))
        node.orelse = []
        return [setting(True), node, after]

    visit_For = visit_While = visit_loop

    def visit_Lambda(self, node):
        return node


def _flag_breaks(stmts, replace):
    """``stmts`` with each ``break`` of their own loop (not of loops inside) replaced by ``replace(brk)``."""
    out = []
    for s in stmts:
        if isinstance(s, ast.Break):
            out.extend(replace(s))
            continue
        if isinstance(s, (ast.If, ast.With, ast.Try, getattr(ast, "TryStar", ast.Try))):
            for field in ("body", "orelse", "finalbody"):
                if getattr(s, field, None):
                    setattr(s, field, _flag_breaks(getattr(s, field), replace))
            for handler in getattr(s, "handlers", ()):
                handler.body = _flag_breaks(handler.body, replace)
        out.append(s)
    return out


_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)


def scope_walk(node, into_comprehensions=False):
    """``node`` and the nodes inside it that run in the same function as ``node``: a nested def or
    lambda is given with its decorators and defaults, not its body; a comprehension (its own scope
    too) is given alone unless ``into_comprehensions``."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, _NEW_SCOPES):
            todo.extend(getattr(n, "decorator_list", ()))
            if not isinstance(n, ast.ClassDef):
                todo.extend(d for d in n.args.defaults + n.args.kw_defaults if d is not None)
        elif into_comprehensions or not isinstance(n, _COMPREHENSIONS):
            todo.extend(reversed(list(ast.iter_child_nodes(n))))


_PARSED = {}


def parsed_source(fun):
    """``fun``'s parsed and checked source (cached per code object)."""
    key = fun.__code__
    p = _PARSED.get(key)
    if p is None:
        p = _PARSED[key] = _Parsed(fun)
    return p


def is_user_function(f):
    """Whether ``f`` is a Python function outside wengert and NumPy (interpreted inline when called)."""
    if not isinstance(f, types.FunctionType):
        return False
    path = os.path.abspath(f.__code__.co_filename)
    return not (path.startswith(_PACKAGE_DIR) or path.startswith(_NUMPY_DIR))


def raised_in_library(error):
    """Whether ``error`` was raised inside wengert or NumPy (given a traced value, perhaps: a real array
    might not raise there) rather than by the user's code or Python's builtins on static values."""
    tb, last = error.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    path = os.path.abspath(last.tb_frame.f_code.co_filename) if last is not None else ""
    return path.startswith(_PACKAGE_DIR) or path.startswith(_NUMPY_DIR)


def closure_values(fun, parsed):
    """``{name: value}`` of ``fun``'s closure (what the captures follow: ``program.captures``)."""
    out = {}
    for name, cell in zip(fun.__code__.co_freevars, fun.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            raise TransformError(f"{parsed.where(parsed.node.lineno)}: {fun.__name__} captures "
                                 f"{name!r}, which is not assigned yet. {TAPE}") from None
    return out


def assigned_names(stmts):
    """Names a list of statements assigns (anywhere inside, loops and branches included; a nested
    def's name, not its locals, nor a comprehension's loop variables)."""
    names = []
    for s in stmts:
        for node in scope_walk(s):
            if isinstance(node, ast.FunctionDef) and node.name not in names:
                names.append(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
                names.append(node.id)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id not in names:
                names.append(node.value.id)
    return names


def has_jump(stmts):
    """Whether break/continue occur in ``stmts`` (not counting nested loops)."""
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)):
            return True
        if isinstance(s, ast.If) and (has_jump(s.body) or has_jump(s.orelse)):
            return True
        if isinstance(s, ast.With) and has_jump(s.body):
            return True
    return False


_MUTATORS = frozenset(("append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
                       "popitem", "sort", "reverse", "__setitem__", "__delitem__", "__iadd__"))


def base_name(node):
    """The variable ``node`` (``acc``, ``acc[k]``, ``acc.items``) starts from, or None."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def mutated_names(stmts):
    """``(name, node)`` for each name whose object ``stmts`` change in place: ``acc.append(...)``
    and the other mutating methods, ``acc[k] = ...``, ``acc[k] += ...``, ``acc += ...``."""
    found = []
    for s in stmts:
        for node in ast.walk(s):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _MUTATORS:
                found.append((base_name(node.func.value), node))
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                found.append((base_name(node.value), node))
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                found.append((node.target.id, node))
    return [(n, node) for n, node in found if n is not None]


_CHOICES = {}  # id of an expression -> (the expression, what choices() gives for it)


def choices(expr):
    """``expr`` with each conditional expression ``a if c else b`` in it (but those inside another, or
    inside a lambda or comprehension: read when those run) replaced by a name ``__wg_choiceN``, and
    ``[(name, statement)]``: for each, ``if c: name = a`` / ``else: name = b``, which the interpreter
    runs first (a branch on a traced ``c`` becomes the ``If`` node a statement gives). None when
    ``expr`` holds none. The original nodes are never changed."""
    got = _CHOICES.get(id(expr))
    if got is not None and got[0] is expr:
        return got[1]
    found = []

    def lifted(node):
        if isinstance(node, ast.IfExp):
            name = f"{HIDDEN}choice{next(_NUMBERS)}"

            def arm(value):
                target = ast.copy_location(ast.Name(id=name, ctx=ast.Store()), value)
                return ast.copy_location(ast.Assign(targets=[target], value=value), value)

            stmt = ast.copy_location(ast.If(test=node.test, body=[arm(node.body)], orelse=[arm(node.orelse)]),
                                     node)
            found.append((name, ast.fix_missing_locations(stmt)))
            return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)
        if isinstance(node, _NEW_SCOPES + _COMPREHENSIONS):
            return node
        new = type(node)()
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                value = lifted(value)
            elif isinstance(value, list):
                value = [lifted(v) if isinstance(v, ast.AST) else v for v in value]
            setattr(new, field, value)
        return ast.copy_location(new, node) if hasattr(node, "lineno") else new

    result = None
    if any(isinstance(n, ast.IfExp) for n in scope_walk(expr)):
        result = (lifted(expr), found)
    _CHOICES[id(expr)] = (expr, result)
    return result
