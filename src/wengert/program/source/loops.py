"""Loops in the source front end: ``for`` over a range or an array's first axis and ``while``
become ``Loop`` nodes whose body is recorded once, with the loop-carried variables explicit; a loop
that changes lists or dicts runs at build time instead (unrolled). ``wg.checkpointed`` around a
range marks the loop's checkpointing schedule."""

import ast
import itertools

import numpy as np

from wengert.program.ir import Variable
from wengert.program.source.checkpoint import checkpointed
from wengert.program.source.control import Loop, TransformError
from wengert.program.source.nested import Enclosing
from wengert.program.source.parse import TAPE, assigned_names, has_jump, mutated_names
from wengert.program.source.values import (
    BRK,
    CONTAINER_TYPES,
    JUMP,
    changed_containers,
    clean_name,
    containers_snapshot,
    example_of,
    is_numeric,
    restore_containers,
    unsymbolic,
)
from wengert.program.tracing import Symbol

__all__ = ["LoopInterpreter"]

_UNROLL_LIMIT = 10000


class LoopInterpreter:
    """The interpreter's loops (a part of ``source.interpreter.Interpreter``, which provides
    ``eval``, ``test``, ``block``, ``builder``, ``env`` and the rest these methods use)."""

    def for_loop(self, s):
        it = s.iter
        policy = self.checkpoint_marker(it)
        if policy is not None:
            it = it.args[0]
        # one name, or a target to unpack (``for a, b in zip(x, y)``: unrolled loops only)
        target = s.target.id if isinstance(s.target, ast.Name) else s.target
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
                and "range" not in self.env and not it.keywords:
            bounds = [self.eval(a) for a in it.args]
            if len(bounds) == 1:
                bounds = [0] + bounds
            if len(bounds) == 2:
                bounds.append(1)
            bounds = [unsymbolic(b) for b in bounds]
            self.loop(s, "for", bounds=bounds, target=target, policy=policy)
            return
        seq = self.eval(it)
        if type(seq) is Symbol:
            if not seq.variable.shape:
                inside = f" in {s.wg_what}" if hasattr(s, "wg_what") else ""
                raise self.error(s, f"iterating over a 0-d array{inside}")
            self.loop(s, "for", bounds=[0, seq.variable.shape[0], 1], target=target, over=seq, policy=policy)
        elif isinstance(seq, np.ndarray):
            self.loop(s, "for", bounds=[0, len(seq), 1], target=target, over=seq, policy=policy)
        elif isinstance(seq, range):
            self.loop(s, "for", bounds=[seq.start, seq.stop, seq.step], target=target, policy=policy)
        elif isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
            raise self.error(s, f"a for loop over a {type(seq).__name__}")
        else:  # a list, tuple, zip, enumerate, dict, iterator...: unrolled
            what = getattr(s, "wg_what", None) or f"a loop over a {type(seq).__name__} (it is unrolled)"
            if policy is not None:
                raise self.error(s, f"wg.checkpointed around {what}")
            if has_jump(s.body):
                raise self.error(s, f"break/continue in {what}")
            items = seq if isinstance(seq, (list, tuple)) else list(itertools.islice(seq, _UNROLL_LIMIT + 1))
            if len(items) > _UNROLL_LIMIT:
                raise TransformError(f"at {self.where(s)} (in {self.parsed.name}): {what} of more than "
                                     f"{_UNROLL_LIMIT} items (at most {_UNROLL_LIMIT} are unrolled). {TAPE}")
            for item in items:
                self.bind_target(target, item, s)
                self.block(s.body)

    def bind_target(self, target, value, s):
        """Binds a for loop's target (a name, or names to unpack) to ``value``, naming what is recorded."""
        mark = self.mark()
        if isinstance(target, str):
            self.env[target] = self.name_result(value, target, mark)
        else:
            self.assign(target, value, mark, s)

    def checkpoint_marker(self, it):
        """``(policy, snapshots)`` when ``it`` is ``wg.checkpointed(iterable, ...)``, else None."""
        if not (isinstance(it, ast.Call) and it.args and not isinstance(it.args[0], ast.Starred)):
            return None
        name = it.func
        while isinstance(name, ast.Attribute):
            name = name.value
        if not isinstance(name, ast.Name):  # a call returning the function: not evaluated twice
            return None
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
        local = set(assigned_names(self.parsed.node.body)) | {a.arg for a in self.parsed.node.args.args}
        for name, node in mutated_names(s.body):
            if name in self.env:
                if isinstance(self.env[name], CONTAINER_TYPES):
                    return True
            elif isinstance(self.closure, Enclosing) and name in self.closure and \
                    isinstance(self.closure[name], CONTAINER_TYPES):
                return True  # a list of the function a nested function is defined in
            elif name not in local and isinstance(self.fun.__globals__.get(name), CONTAINER_TYPES):
                raise self.error(node, f"changing the global {type(self.fun.__globals__[name]).__name__} "
                                       f"{name} in place (tracing the function would change it)")
        return any(isinstance(self.env[n], (list, dict, tuple)) for n in carried)

    def unroll(self, s, kind, bounds, target, over, test, policy):
        """A loop that changes lists or dicts (``acc.append(x[i] ** 2)``), run at build time: its
        body is recorded once per iteration, so each push, ``len(acc)``, ``acc[-1]``, ``sum(acc)``
        and ``np.stack(acc)`` see every iteration's value. The trip count must be known when the
        program is built: ``range`` of static bounds, an array's first axis, or a ``while`` whose
        condition depends on static values only."""
        what = getattr(s, "wg_what", None) or \
            f"{'a for' if kind == 'for' else 'a while'} loop changing a list or dict (it is unrolled)"
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
                                     f"...), which stays a loop. {TAPE}")
            for i in range(*bounds):
                self.bind_target(target, over[i] if over is not None else i, s)
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
                    f"(wnp.zeros(n) and .at[i].set, or index assignment). {TAPE}")
            if not cond:
                return
            if count == _UNROLL_LIMIT:
                raise TransformError(f"at {self.where(s)} (in {self.parsed.name}): {what} ran more than "
                                     f"{_UNROLL_LIMIT} iterations while the program was built. {TAPE}")
            if self.iteration(s, what):
                return

    def iteration(self, s, what):
        """One iteration of an unrolled loop; whether it left the loop (a static ``break``)."""
        jump, brk = self.env.get(JUMP, False), self.env.get(BRK, False)
        self.env[JUMP] = False
        self.env[BRK] = False
        self.block(s.body)
        left = self.env.get(BRK, False)
        if type(left) is Symbol:
            raise self.error(s, f"break on a traced condition in {what}")
        self.env[JUMP], self.env[BRK] = jump, brk
        return bool(left)

    def while_loop(self, s):
        self.loop(s, "while", test=s.test)

    def loop(self, s, kind, bounds=(), target=None, over=None, test=None, policy=None):
        static = all(isinstance(b, (int, np.integer)) for b in bounds)
        if kind == "for" and static and len(range(*bounds)) == 0:
            return  # never runs (e.g. over an empty array): nothing to record, as for a false while test
        names = [n for n in assigned_names(s.body) if n in self.env and n != target]
        if self.changes_containers(s, names):
            self.unroll(s, kind, bounds, target, over, test, policy)
            return
        if not isinstance(target, (str, type(None))):
            raise self.error(s, "a for loop unpacking its items into several names (only a loop that is "
                                "unrolled, over a list, zip or enumerate, unpacks)")
        outer = self.builder.statements
        env0 = dict(self.env)
        snapshot = containers_snapshot(v for _, v in self.container_holders(env0))  # helpers change lists
        likes = {n: self.env[n] for n in names}
        for n in names:
            if not is_numeric(likes[n]):
                raise self.error(s, f"a loop changing {n}, a {type(likes[n]).__name__}")
        for _attempt in range(3):
            self.env = dict(env0)
            headers = [self.new_var(clean_name(n), likes[n]) for n in names]
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
            self.env[JUMP] = False
            self.env[BRK] = False
            try:
                self.block(s.body)
            except Exception:
                if not changed_containers(snapshot):
                    raise
            if changed_containers(snapshot):  # recorded once, it would change them once: run every iteration
                restore_containers(snapshot)
                self.builder.statements = outer
                self.env = env0
                self.unroll(s, kind, bounds, target, over, test, policy)
                return
            body = self.builder.statements
            body_outs = [self.env[n] for n in names]
            brk = self.env.get(BRK, False)
            retry = False
            for n, h, o in zip(names, headers, body_outs):
                ex = example_of(o)
                if not is_numeric(o):
                    raise self.error(s, f"a loop making {n} a {type(o).__name__}")
                if np.shape(ex) != h.shape:
                    raise TransformError(f"at {self.where(s)}: the loop changes the shape of {n} from "
                                         f"{h.shape} to {np.shape(ex)}; initialise it with its final "
                                         f"shape (e.g. "
                                         f"np.zeros({np.shape(ex)})). {TAPE}")
                if np.result_type(ex) != h.dtype and not (type(ex) is float and h.dtype == np.float64):
                    likes[n] = o if np.result_type(ex).kind in "fc" or h.dtype.kind not in "fc" else likes[n]
                    retry = retry or likes[n] is o
            if not retry:
                break
        else:
            raise TransformError(f"at {self.where(s)}: the loop-carried variables' types do not settle. "
                                 f"{TAPE}")
        self.builder.statements = outer
        outs = [Variable(self.builder.fresh(clean_name(n)), h.shape, h.dtype, h.kind)
                for n, h in zip(names, headers)]
        env = dict(env0)
        for n, o in zip(names, outs):
            env[n] = self.sym(o)
        self.env = env
        brk_value = None if brk is False else (True if brk is True else brk.variable)
        cond_value = cond.variable if type(cond) is Symbol else cond
        loop = Loop(kind, body, headers, [unsymbolic(env0[n]) for n in names],
                    [unsymbolic(o) for o in body_outs], outs, index=index, bounds=bounds,
                    cond_block=cond_block, cond=cond_value, brk=brk_value, lineno=s.lineno)
        loop.where = self.where(s)
        loop.checkpoint = policy
        outer.append(loop)
