"""The interpreter of the source front end: a function's body, statement by statement, on symbols
(``tracing.Symbol``), recording ``Statement``s, ``If`` nodes for branches on traced values, and
loops (``source.loops``). See ``wengert.program.source.program`` for what is supported."""

import ast
import operator

import numpy as np

from wengert.api.randomness import Sources, sources_of
from wengert.program.ir import Variable, placeholder
from wengert.program.source.control import If, TransformError
from wengert.program.source.loops import LoopInterpreter
from wengert.program.source.nested import Enclosing, define, lift, refuse_returned
from wengert.program.source.parse import (
    TAPE,
    TRY_ADVICE,
    base_name,
    choices,
    closure_values,
    parsed_source,
    raised_in_library,
)
from wengert.program.source.scope import DropsDerivative, Scope, int_calls, refuse_shared_write
from wengert.program.source.values import (
    BRK,
    CONTAINER_TYPES,
    JUMP,
    RET,
    changed_containers,
    clean_name,
    containers_snapshot,
    each_symbol,
    example_of,
    is_float,
    is_numeric,
    restore_containers,
    static_equal,
    unsymbolic,
    zero_like,
)
from wengert.program.tracing import Symbol, TracingError
from wengert.rules import indexing, nondiff

__all__ = ["Interpreter"]

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.MatMult: operator.matmul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod}


def _clean_key(target):
    name = base_name(target)
    return name if name else "item"


_GENERATORS = (np.random.Generator, np.random.RandomState)
_DROPS = ("float()", "int()", "complex()", "Using as a Python index", "Converting to a NumPy array")
"""The trace's refusals (``tracing.Symbol``) of conversions that drop the derivative: the tape's too."""


class Interpreter(LoopInterpreter):
    """Interprets one function's body on symbols, recording nodes into ``builder.statements``."""

    def __init__(self, fun, builder, depth=0, local=None):
        """``local``: ``(LocalSource, definer)`` for a nested def, lambda or comprehension of ``fun``
        (``source.nested``), whose free names are read in the interpreter ``definer``."""
        self.fun = fun
        self.builder = builder
        self.depth = depth
        self.caller = None  # the interpreter of the function that called this one (inline calls)
        self.nested = None  # the NestedFunction this interpreter runs, if any
        self.current = None
        self.env = {}
        if local is None:
            self.parsed = parsed_source(fun)
            self.closure = closure_values(fun, self.parsed)
            self.definer = None
            self._code = {}
            self.random = sources_of(fun, where=f"source transformation of {getattr(fun, '__name__', fun)}")
        else:
            self.parsed, self.definer = local
            self.closure = Enclosing(self.definer, self.parsed.locals)
            self._code = self.parsed.code_cache
            self.random = self.definer.random

    # -- helpers ---------------------------------------------------------------------------------
    def error(self, node, what):
        return self.parsed.error(node, what)

    def where(self, node):
        return self.parsed.where(node.lineno)

    def eval(self, expr):
        lifted = choices(expr)
        if lifted is None:
            return self._eval(expr)
        expr, picks = lifted
        current = self.current
        try:
            for _name, stmt in picks:  # `a if c else b`: an if statement first (an If node on a traced c)
                self._statement(stmt)
            self.current = current
            return self._eval(expr)
        finally:
            self.current = current
            for name, _stmt in picks:
                self.env.pop(name, None)

    def _eval(self, expr):
        code = self._code.get(id(expr))
        if code is None:
            tree = int_calls(ast.Expression(body=lift(self.parsed, expr)))  # lambdas, ...: source.nested
            ast.fix_missing_locations(tree)
            code = self._code[id(expr)] = (compile(tree, self.parsed.filename, "eval"), expr)
        frames = self.builder.frames
        frames.append(self)  # the caller of a nested function called in it
        try:
            with np.errstate(all="ignore"):
                return eval(code[0], self.fun.__globals__, Scope(self))  # noqa: S307 - the user's own code
        except DropsDerivative:
            raise TransformError(
                f"at {self.where(expr)} (in {self.parsed.name}): int() of a traced value that carries a "
                f"derivative would drop it, as the tape (wg.grad) says too: write int(wg.stop_gradient(x)) "
                f"if the integer is wanted (range(int(wg.stop_gradient(a))) loops a count decided at run "
                f"time), or wnp.floor(x) to stay differentiable") from None
        except TracingError as e:
            what = str(e).split(" of the traced value", 1)[0]  # "Python control flow (if, ...) on the value"
            if what.startswith(_DROPS):  # int() of an array, float(), an index, np.asarray in a library
                raise TransformError(
                    f"at {self.where(expr)} (in {self.parsed.name}): {what} of a traced value is outside "
                    f"the subset the source front end reads: it would drop the derivative, and the tape "
                    f"(wg.grad) refuses it too. Keep the value traced: call wengert.numpy functions, or "
                    f"NumPy's on the value itself (np.asarray(x) is read as x, np.array(x) as a copy of x), "
                    f".astype, wnp.floor, wnp.where (int() of a traced 0-d real number that carries no "
                    f"derivative stays traced); write wg.stop_gradient(x) where the derivative is not "
                    f"wanted.") from None
            if not what.startswith("Python control flow"):  # a boolean mask: the tape reads the values
                raise TransformError(f"at {self.where(expr)} (in {self.parsed.name}): {what}: this is "
                                     f"outside the subset the source front end reads. {TAPE}") from None
            raise TransformError(
                f"at {self.where(expr)} (in {self.parsed.name}): {what}: inside an expression (and/or, "
                f"chained comparisons, bool()) this is outside the subset the source front end reads; "
                f"write it as an if statement or `a if c else b`, or wnp.where(c, a, b) for an elementwise "
                f"choice. {TAPE}"
            ) from None
        except NameError as e:
            raise TransformError(f"at {self.where(expr)} (in {self.parsed.name}): {e}; a variable "
                                 f"assigned in only one branch of an if, or first assigned inside a "
                                 f"loop, cannot be used "
                                 f"after it: assign it before. {TAPE}") from None
        finally:
            frames.pop()

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

    def container_holders(self, env):
        """``(name, value)`` whose lists and dicts a block may change in place: ``env``'s, and for a
        nested function those of the functions it is nested in."""
        holders = list(env.items())
        if isinstance(self.closure, Enclosing):
            holders += self.closure.items()
        return holders

    def mark(self):
        return len(self.builder.statements)

    def name_result(self, value, base, mark):
        """Give the variable just recorded for ``value`` the user's name ``base``."""
        if type(value) is Symbol:
            base = clean_name(base)
            made = {o for s in self.builder.statements[mark:] if hasattr(s, "prim") for o in s.outs}
            if value.variable in made and not value.variable.name.startswith(base):
                self.builder.names.discard(value.variable.name)
                value.variable.name = self.builder.fresh(base)
        return value

    def sym(self, var):
        return Symbol(var, placeholder(var), self.builder)

    def new_var(self, base, like):
        ex = like.example if type(like) is Symbol else like
        try:
            return Variable.like(self.builder.fresh(base), ex if not isinstance(ex, bool) else np.bool_(ex))
        except TypeError:
            raise TransformError(f"{base!r} holds a {type(ex).__name__}, which a program built from source "
                                 f"cannot carry through a loop or an if. {TAPE}") from None

    # -- the function ----------------------------------------------------------------------------
    def run_function(self):
        self.env.setdefault(RET, None)
        self.env.setdefault(JUMP, False)
        body = self.parsed.node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        self.block(body)
        if self.depth == 0:
            refuse_returned(self.env[RET], self)
        return self.env[RET]

    def block(self, stmts):
        for k, s in enumerate(stmts):
            jump = self.env.get(JUMP, False)
            if type(jump) is Symbol:  # after a break/continue taken conditionally: guard the rest
                cond = nondiff.logical_not(jump)
                self.branch(cond, stmts[k:], [], s, reset_jump=True)
                return
            if jump:
                return
            self.statement(s)

    def statement(self, s):
        """Interpret statement ``s``; one that draws random numbers is refused (see _refuse_draws)."""
        before = self.random.capture()
        self.current = s  # the innermost statement running (source.scope.refuse_shared_write)
        self._statement(s)
        drew = self.random.changed(before)
        if drew:
            self._refuse_draws(s, drew, before)
        known = self.random.gens
        made = [(k, v) for k, v in self.env.items() if isinstance(v, _GENERATORS)
                and not any(v is g for g in known)]
        if made:  # a Generator the function makes: its draws are refused too
            self.random = Sources(known + tuple(v for _, v in made),
                                  self.random.labels + tuple(f"the {type(v).__name__} {k}" for k, v in made))

    def _refuse_draws(self, s, drew, before):
        """A draw runs once, when the program is built: the program would hold its numbers as
        constants, the same on every call (and for every recomputation of a checkpointed loop)."""
        self.random.restore(before)
        raise TransformError(
            f"the statement at {self.where(s)} (in {self.parsed.name}) draws random numbers from "
            f"{' and '.join(drew)}: a program built from source would hold this draw as constants, the "
            f"same on every call. {TAPE} (wg.checkpoint and wg.iterate replay the draws when they "
            f"recompute).")

    def _statement(self, s):
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
            self.env[RET] = None if s.value is None else self.eval(s.value)
            self.env[JUMP] = True  # what follows runs only where this return did not
        elif t is ast.If:
            test = self.test(s.test)
            if type(test) is Symbol and hasattr(s, "wg_filter"):  # a comprehension's (source.nested)
                raise TransformError(
                    f"at {self.where(s)} (in {self.caller.parsed.name}): the filter "
                    f"`if {ast.unparse(s.test)}` of {s.wg_filter} is a traced value, so the number of "
                    f"items would depend on the values. Keep every item and choose with wnp.where "
                    f"(e.g. sum(wnp.where(c, v, 0.0) for ...)), or use an array mask. {TAPE}")
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
            self.env[JUMP] = True
            self.env[BRK] = True
        elif t is ast.Continue:
            self.env[JUMP] = True
        elif t is ast.Assert:
            pass  # checks of shapes and constants; nothing to record
        elif t is ast.FunctionDef:
            self.env[s.name] = define(self, s)
        elif t is ast.With:
            self.with_block(s, s.items)
        elif t is ast.Try:
            self.try_block(s)
        else:
            raise self.error(s, f"a {t.__name__} statement")

    def with_block(self, s, items):
        """``with a as x, b: body``: each context manager entered (in order) and exited (in reverse)
        around the reading of the body, once, as the tape runs it around the function's code. What
        it does is not part of the program: ``np.errstate`` or ``wg.no_grad()`` (eager tensors only,
        as under ``wg.grad``) change nothing in it (docs/source.md)."""
        if not items:
            self.block(s.body)
            return
        manager = self.eval(items[0].context_expr)
        kind = type(manager)
        if not (hasattr(kind, "__enter__") and hasattr(kind, "__exit__")):
            raise TransformError(f"at {self.where(s)} (in {self.parsed.name}): {kind.__name__} is not a "
                                 f"context manager (no __enter__/__exit__)")
        value = kind.__enter__(manager)
        try:
            if items[0].optional_vars is not None:
                self.assign(items[0].optional_vars, value, self.mark(), s)
            self.with_block(s, items[1:])
        except BaseException as e:
            if kind.__exit__(manager, type(e), e, e.__traceback__):
                raise TransformError(
                    f"at {self.where(s)} (in {self.parsed.name}): the context manager {kind.__name__} "
                    f"suppressed an error raised while the program was built ({type(e).__name__}: {e}); "
                    f"a program built from source cannot skip the rest of the block. {TAPE}") from e
            raise
        kind.__exit__(manager, None, None, None)

    def try_block(self, s):
        """``try``/``except``/``else``/``finally`` whose try body computes nothing with traced values (it
        reads shapes, static arguments, dicts, globals): run as Python runs it, while the program is built;
        an exception raised then takes the first matching except arm, with the state as the failing
        statement left it. A try body that records a computation is refused: whether it raises, and so
        which arm runs, would be known only when the program runs (a ``try``/``finally`` without except
        arms has none to take: its body is read as any other, then its finally block)."""
        outer, names = self.builder.statements, len(self.builder.names)

        def refuse_recorded(error=None):
            traced = error is not None and (raised_in_library(error)
                                            or type(getattr(error, "obj", None)) is Symbol)
            if s.handlers and (len(self.builder.names) != names or traced):  # try/finally: no arm to take
                self.builder.statements = outer
                how = (f"raised {type(error).__name__} on a traced value while the program was built (an "
                       f"array might not)" if traced else "computes with traced values")
                raise TransformError(
                    f"try/except at {self.where(s)} (in {self.parsed.name}): its try body {how}, so whether "
                    f"it raises (and which arm runs) is known only when the program runs; a program built "
                    f"from source cannot take the except arm then (only a try body that reads static values, "
                    f"dicts or globals is run while the program is built). Instead, {TRY_ADVICE}. "
                    f"{TAPE}") from error

        try:
            self.block(s.body)
        except (TransformError, TracingError):
            raise  # the reading's own refusals: never the user's except arms
        except Exception as e:  # noqa: BLE001 - matched against the user's except arms below
            refuse_recorded(e)
            self.builder.statements = outer
            for handler in s.handlers:
                kinds = BaseException if handler.type is None else self.eval(handler.type)
                if isinstance(e, kinds):
                    if handler.name:
                        self.env[handler.name] = e
                    self.block(handler.body)
                    if handler.name:
                        self.env.pop(handler.name, None)  # as Python deletes it
                    break
            else:
                raise  # no arm lists it: the function raises it (its finally block is not read)
        else:
            refuse_recorded()
            self.block(s.orelse)
        if s.finalbody:  # run after a return or break in the arms too, as Python runs it
            jump = self.env.get(JUMP, False)
            self.env[JUMP] = False
            self.block(s.finalbody)
            self.env[JUMP] = self.env[JUMP] or jump

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
        elif t is ast.Subscript and isinstance(self.container(target, node), CONTAINER_TYPES):
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
        return value if isinstance(value, CONTAINER_TYPES) else None

    def key(self, target, node):
        """The static key of ``target[key]`` on a list or dict (a traced index is refused)."""
        key = self.eval(target.slice)
        found = []
        each_symbol(key, found.append)
        if found:
            raise self.error(node, "a list or dict indexed by a traced value (its key is not known when "
                                   "the program is built; use an array)")
        return key

    def subscript_update(self, target, update, node):
        name = target.value.id
        old = self.env.get(name)
        if type(old) is not Symbol and not isinstance(old, np.ndarray):
            raise self.error(node, f"item assignment into {name} ({type(old).__name__})")
        refuse_shared_write(self, name, old, node)
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
            if isinstance(cur, CONTAINER_TYPES):  # acc += [...]: in place, as Python does
                if not isinstance(s.op, ast.Add) and not (type(cur) is list and isinstance(s.op, ast.Mult)):
                    raise self.error(s, f"augmented assignment {type(s.op).__name__} to a "
                                        f"{type(cur).__name__}")
                self.env[target.id] = operator.iadd(cur, value) if isinstance(s.op, ast.Add) else \
                    operator.imul(cur, value)
                return
            refuse_shared_write(self, target.id, cur, s)
            with np.errstate(all="ignore"):
                self.env[target.id] = self.name_result(op(cur, value), target.id, mark)
        elif isinstance(target, ast.Subscript) and isinstance(self.container(target, s), CONTAINER_TYPES):
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
        holders = self.container_holders(env0)
        snapshot = containers_snapshot(v for _, v in holders)
        arms, contents = [], []
        for stmts in (body, orelse):
            self.env = dict(env0)
            if reset_jump and stmts is body:
                self.env[JUMP] = False
            self.builder.statements = outer  # leave the other arm: arms share nothing
            self.builder.statements = []
            self.block(stmts)
            changed = changed_containers(snapshot)  # lists and dicts the arm changed: merged below
            contents.append({id(c): list(c) if type(c) is list else dict(c) for c in changed})
            if changed:
                restore_containers(snapshot)
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
            if type(a) is not Symbol and type(b) is not Symbol and static_equal(a, b):
                env[name] = a
                continue
            if name == RET:  # a return in one arm: the other's result is a placeholder until it returns
                if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
                    raise self.error(node, "returning a tuple from inside an if")
                a = zero_like(b) if a is None else a
                b = zero_like(a) if b is None else b
            env[name] = self.phi(a, b, clean_name(name), node, (outs, tv, ev))
        merged = self.merged_containers(snapshot, contents, holders, node, (outs, tv, ev))
        self.env = env
        for c, items in merged:  # after the If: each changed entry is its output
            c.update(items) if type(c) is dict else c.__setitem__(slice(None), items)
        cond = cond.variable if type(cond) is Symbol else cond
        self.builder.statements.append(If(cond, then, orelse_nodes, outs, tv, ev, lineno=node.lineno))

    def phi(self, a, b, name, node, phis, shown=None):
        """The output of an ``If`` that is ``a`` after its then arm and ``b`` after its else arm (``phis``:
        the node's outputs and their values per arm, appended to), as a traced value."""
        shown = shown or name
        for v in (a, b):
            if not is_numeric(v):
                raise self.error(node, f"an if on a traced value assigning {shown} a {type(v).__name__} in "
                                       f"its arms")
        like = a if is_float(a) or not is_float(b) else b
        if not np.shape(example_of(a)) == np.shape(example_of(b)):
            raise TransformError(f"at {self.where(node)}: the arms of this if give {shown} different shapes "
                                 f"({np.shape(example_of(a))} and {np.shape(example_of(b))}); the source "
                                 f"transformation needs one shape per variable. {TAPE}")
        var = self.new_var(name, like)
        for out, v in zip(phis, (var, unsymbolic(a), unsymbolic(b))):
            out.append(v)
        return self.sym(var)

    def merged_containers(self, snapshot, contents, holders, node, phis):
        """``[(container, items)]``: the lists and dicts an if on a traced value changed in place in an arm
        (``rows.append(v)``, ``rows[k] = v``), each entry that differs between the arms an output of the
        ``If``. Each must have the same length (dict: keys) after either arm: only the values may depend
        on the arm taken."""
        out = []
        for c, saved in snapshot:
            after = [arm.get(id(c), saved) for arm in contents]
            if after[0] is saved and after[1] is saved:
                continue
            t, e = after
            name = next((n for n, v in holders if v is c), None) or "a list"
            same = len(t) == len(e) if type(c) is list else t.keys() == e.keys()
            if not same:
                raise TransformError(
                    f"at {self.where(node)} (in {self.parsed.name}): this if on a traced value changes "
                    f"{clean_name(name)} in place in an arm so that its length (or keys) depend on the arm "
                    f"taken ({len(t)} and {len(e)} items after the arms): a program built from source "
                    f"has one length per list. Change it the same way in both arms (append in each), "
                    f"choose the value with wnp.where, or change it after the if. {TAPE}")
            items = [] if type(c) is list else {}
            for k in (range(len(t)) if type(c) is list else t):
                a, b = t[k], e[k]
                if a is b or (type(a) is not Symbol and type(b) is not Symbol and static_equal(a, b)):
                    v = a
                else:
                    v = self.phi(a, b, clean_name(name), node, phis, shown=f"{clean_name(name)}[{k!r}]")
                items.append(v) if type(c) is list else items.__setitem__(k, v)
            out.append((c, items))
        return out
