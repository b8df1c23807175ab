"""Functions inside the function being transformed: nested ``def``s, lambdas and comprehensions.

A nested ``def`` or a ``lambda`` is a :class:`NestedFunction` bound to the interpreter that defined
it; a call is interpreted inline by an interpreter of its own, so the callee's locals never clobber
the caller's, and its free names are read in the defining interpreter *at call time*, as Python
reads closure cells. A comprehension (list, dict, generator expression) is lowered to the
statements Python runs for it -- ``items = []``, the ``for`` loops and ``if`` filters nested in
order, ``items.append(elt)`` -- and interpreted as a nested function called in place: its loop
variables stay inside it, and its loops change a list, so they are unrolled (a trip count known
while reading). Refused, naming file and line: recursion, a nested function called after the
program is built (returned by the function, or stored outside it), a filter on a traced value.
"""

import ast
import inspect

from wengert.program.source.control import TransformError
from wengert.program.source.parse import TAPE, SourceText, assigned_names
from wengert.program.source.values import BRK, JUMP, RET

__all__ = ["LOCAL_PREFIX", "NestedFunction", "Enclosing", "define", "lift", "resolve", "refuse_returned"]

LOCAL_PREFIX = "__wg_local_"
"""The names a lifted lambda or comprehension takes in the expression evaluated (see :func:`lift`)."""
_ITEMS = "__items"  # a comprehension's list (or dict), hidden from the user's names
_HIDDEN = frozenset((JUMP, BRK, RET, _ITEMS))
_MAX_DEPTH = 20
_KINDS = {ast.ListComp: "a list comprehension", ast.GeneratorExp: "a generator expression",
          ast.DictComp: "a dict comprehension"}
_LIFTED = (ast.Lambda, *_KINDS)


class LocalSource(SourceText):
    """The parsed source of a nested def, lambda or lowered comprehension: what the interpreter reads
    of a function (``node``, a ``FunctionDef``; ``name``; ``where``; ``error``), in the file of the
    function it is nested in. ``locals``: the names Python makes local to it (its parameters and what
    it assigns), never read from the enclosing function."""

    def __init__(self, parent, node, origin, kind):
        self.filename, self.offset, self.local_defs = parent.filename, parent.offset, parent.local_defs
        self.node, self.origin, self.kind = node, origin, kind
        self.name = node.name
        self.code_cache = {}  # the expressions' compiled code, shared by every call
        if kind in _KINDS.values():
            self.locals = frozenset()  # assigned before they are read; the first iterable is read outside
        else:
            a = node.args
            params = [p.arg for p in getattr(a, "posonlyargs", []) + a.args + a.kwonlyargs]
            self.locals = frozenset(params + assigned_names(node.body))

    @property
    def token(self):
        """The name this lambda or comprehension takes in a lifted expression."""
        return f"{LOCAL_PREFIX}{id(self.origin)}"


def _source(parsed, node):
    """The :class:`LocalSource` of ``node`` (a nested def, lambda or comprehension of ``parsed``)."""
    got = parsed.local_defs.get(id(node))
    if got is None or got.origin is not node:
        if isinstance(node, ast.FunctionDef):
            got = LocalSource(parsed, node, node, "def")
        elif isinstance(node, ast.Lambda):
            body = [_at(ast.Return(value=node.body), node)]
            fdef = ast.FunctionDef(name="<lambda>", args=node.args, body=body, decorator_list=[],
                                   returns=None)
            got = LocalSource(parsed, _at(fdef, node), node, "lambda")
        else:
            got = LocalSource(parsed, _lowered(parsed, node), node, _KINDS[type(node)])
        parsed.local_defs[id(node)] = got
    return got


def _at(new, node):
    return ast.copy_location(new, node)


def _lowered(parsed, node):
    """A comprehension as the function Python runs for it (``def <listcomp>(): items = []; for ...:
    if ...: items.append(elt); return items``), each node at the comprehension's line."""
    what = _KINDS[type(node)]

    def items(ctx):
        return _at(ast.Name(id=_ITEMS, ctx=ctx()), node)

    if isinstance(node, ast.DictComp):
        store = _at(ast.Subscript(value=items(ast.Load), slice=node.key, ctx=ast.Store()), node)
        body = [_at(ast.Assign(targets=[store], value=node.value), node)]
        init = _at(ast.Dict(keys=[], values=[]), node)
    else:
        append = _at(ast.Attribute(value=items(ast.Load), attr="append", ctx=ast.Load()), node)
        body = [_at(ast.Expr(value=_at(ast.Call(func=append, args=[node.elt], keywords=[]), node)), node)]
        init = _at(ast.List(elts=[], ctx=ast.Load()), node)
    for gen in reversed(node.generators):
        if gen.is_async:
            raise parsed.error(node, f"an async comprehension ({what} with async for)")
        for cond in reversed(gen.ifs):
            test = _at(ast.If(test=cond, body=body, orelse=[]), cond)
            test.wg_filter = what  # a filter on a traced value is refused (source.interpreter)
            body = [test]
        loop = _at(ast.For(target=gen.target, iter=gen.iter, body=body, orelse=[]), node)
        loop.wg_what = what  # named in the unrolled loop's errors (source.loops)
        body = [loop]
    no_args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                            defaults=[])
    name = {"a list comprehension": "<listcomp>", "a generator expression": "<genexpr>"}.get(what,
                                                                                             "<dictcomp>")
    body = [_at(ast.Assign(targets=[items(ast.Store)], value=init), node), *body,
            _at(ast.Return(value=items(ast.Load)), node)]
    fdef = ast.FunctionDef(name=name, args=no_args, body=body, decorator_list=[], returns=None)
    return _at(fdef, node)


def lift(parsed, expr):
    """``expr`` with each lambda and comprehension in it (those not inside another) replaced by a name
    that :func:`resolve` gives a value when the expression runs (a comprehension by a call of it):
    Python's ``eval`` would compile them as functions reading globals, not the interpreter's
    variables. ``expr`` itself when it holds none; the original nodes are never changed."""
    if not any(isinstance(n, _LIFTED) for n in ast.walk(expr)):
        return expr
    return _lifted(parsed, expr)


def _lifted(parsed, node):
    if isinstance(node, _LIFTED):
        name = _at(ast.Name(id=_source(parsed, node).token, ctx=ast.Load()), node)
        return name if isinstance(node, ast.Lambda) else _at(ast.Call(func=name, args=[], keywords=[]), node)
    new = type(node)()
    for field, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            value = _lifted(parsed, value)
        elif isinstance(value, list):
            value = [_lifted(parsed, v) if isinstance(v, ast.AST) else v for v in value]
        setattr(new, field, value)
    return _at(new, node)


def resolve(interp, name):
    """The value of a lifted name in ``interp``: a lambda's :class:`NestedFunction` (made anew each time
    the expression runs, its defaults read now), or a comprehension's runner (called at once)."""
    source = interp.parsed.local_defs[int(name[len(LOCAL_PREFIX):])]
    if source.kind == "lambda":
        return NestedFunction(source, interp, _defaults(interp, source.origin.args))

    def run():
        items = _enter(source, interp, interp).run_function()
        return iter(items) if source.kind == "a generator expression" else items

    return run


def define(interp, node):
    """The :class:`NestedFunction` a nested ``def`` statement makes (its defaults read now)."""
    return NestedFunction(_source(interp.parsed, node), interp, _defaults(interp, node.args))


def _defaults(interp, args):
    positional = [p.arg for p in getattr(args, "posonlyargs", []) + args.args]
    with_default = positional[len(positional) - len(args.defaults):]
    out = {p: interp.eval(d) for p, d in zip(with_default, args.defaults)}
    out.update({p.arg: interp.eval(d) for p, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    return out


def _enter(source, definer, caller):
    """A new interpreter for one run of ``source``, reading its free names in ``definer``."""
    depth = caller.depth + 1
    if depth > _MAX_DEPTH:
        raise TransformError(f"{source.where(source.node.lineno)}: calls nested more than {_MAX_DEPTH} deep "
                             f"(recursion through {source.name}?) are outside the subset the source "
                             f"transformation supports. Write it as a loop. {TAPE}")
    sub = type(definer)(definer.fun, definer.builder, depth, local=(source, definer))
    sub.caller = caller
    return sub


class NestedFunction:
    """A def or lambda of the function being transformed, bound to the interpreter that defined it:
    called while the program is built, it is interpreted inline (see the module docstring)."""

    def __init__(self, source, definer, defaults):
        self.source, self.definer = source, definer
        self.__name__ = source.name
        a = source.node.args
        kinds = [(p, inspect.Parameter.POSITIONAL_ONLY) for p in getattr(a, "posonlyargs", [])]
        kinds += [(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in a.args]
        kinds += [(p, inspect.Parameter.KEYWORD_ONLY) for p in a.kwonlyargs]
        self.signature = inspect.Signature([inspect.Parameter(p.arg, k, default=defaults.get(p.arg,
                                                                                               inspect.Parameter.empty))
                                            for p, k in kinds])

    @property
    def defined_at(self):
        return self.source.where(self.source.node.lineno)

    def __repr__(self):
        return f"<nested function {self.__name__} defined at {self.defined_at}>"

    def __call__(self, *args, **kwargs):
        frames = self.definer.builder.frames
        if not frames:
            outer = self.definer
            while outer.definer is not None:
                outer = outer.definer
            raise TransformError(
                f"the nested function {self.__name__} (defined at {self.defined_at}, in {outer.parsed.name}) "
                f"was called after the program was built: it was stored outside {outer.parsed.name} while "
                f"wengert read it (a global list, an object's attribute, ...), and a program built from "
                f"source cannot run it later. Call {self.__name__} inside {outer.parsed.name} and pass "
                f"out what it computes, or define it at module level. {TAPE}")
        caller = frames[-1]
        for frame in frames:
            if frame.nested is self:
                raise TransformError(
                    f"at {caller.where(caller.current) if caller.current else self.defined_at}: "
                    f"{self.__name__} (defined at {self.defined_at}) calls itself; the source "
                    f"transformation interprets each call of a nested function inline, so recursion is "
                    f"outside its subset. Write it as a loop. {TAPE}")
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"calling {self.__name__} (defined at {self.defined_at}): {e}") from None
        bound.apply_defaults()
        sub = _enter(self.source, self.definer, caller)
        sub.nested = self
        sub.env.update(bound.arguments)
        return sub.run_function()


class Enclosing:
    """A nested function's free names, read in the interpreter that defined it at the time they are
    read (Python's closure cells): its variables, then its own enclosing names. ``local`` names are
    never read there (Python makes them local to the nested function)."""

    __slots__ = ("definer", "local")

    def __init__(self, definer, local):
        self.definer, self.local = definer, local

    def __contains__(self, name):
        if name in self.local or name in _HIDDEN:
            return False
        return name in self.definer.env or name in self.definer.closure

    def __getitem__(self, name):
        if name not in self:
            raise KeyError(name)
        d = self.definer
        return d.env[name] if name in d.env else d.closure[name]

    def items(self):
        """``(name, value)`` the enclosing interpreters hold (lists a nested function may change)."""
        out = [(n, v) for n, v in self.definer.env.items() if n not in _HIDDEN]
        if isinstance(self.definer.closure, Enclosing):
            out += self.definer.closure.items()
        return out


def refuse_returned(value, interp):
    """Refuse a nested function among the results of the function being transformed."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, (tuple, list)):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, NestedFunction):
            name, f = v.__name__, interp.parsed.name
            raise TransformError(
                f"{f} returns the nested function {name} (defined at {v.defined_at}): a program built "
                f"from source returns arrays and numbers, not functions. Call {name} inside {f} and "
                f"return its value, or define {name} at module level and differentiate it on its own "
                f"(wg.source_grad({name.strip('<>')})). {TAPE}")
