"""Derivatives of structured programs (built from source), from the rule table's VJP and JVP rules.

Reverse mode. Each statement's adjoint is traced from its primitive's VJP rules on symbols, as in
``adjoint.py`` (no rule written twice). Control flow is reversed structurally:

* an ``If`` becomes an ``If`` on the same condition whose arms are the reversed arms (the forward
  pass kept the condition: it *records which arm ran*);
* a loop counts its iterations (``n = 0`` ... ``n += 1``) and, at the end of each iteration, pushes
  on a stack the values of that iteration that the reverse pass reads; the reverse loop runs ``n``
  times, pops them, and carries the loop-carried variables' adjoints backwards. ``while`` loops
  (unknown trip count) and loops left by ``break`` are reversed the same way. What is cheap and
  provably unchanged (the index, ``x[i]`` of an array the loop does not write) is computed again
  instead, and scalars of a ``for`` over a known range go to a buffer (``source.recompute``).
* Adjoints of variables defined outside a loop or an arm and used inside it are accumulated into
  buffers that the reverse pass allocated (``v_bar = zeros``), in place: ``v_bar[i] += g`` for the
  adjoint of ``v[i]`` (linear cost for element-wise loops).

Branches inside loops push the values of the arm that ran. Every name is derived from the user's:
the adjoint of ``x`` is ``x_bar``; forward mode gives ``x_dot``.
"""

import numpy as np

from wengert.api.tree import _LEAF, argnums_checked, argnums_resolved, tree_flatten, tree_unflatten
from wengert.program.adjoint import zero_value
from wengert.program.ir import Statement, Variable, map_vars, placeholder
from wengert.program.source.builder import SourceBuilder
from wengert.program.source.checkpoint import checkpoint_loop
from wengert.program.source.codegen import block_source, compile_block
from wengert.program.source.control import (
    Assign,
    If,
    Loop,
    Pop,
    Push,
    TransformError,
    Zeros,
    all_names,
    defined,
    reads,
)
from wengert.program.source.factor import factor_reverse_loops
from wengert.program.source.inplace import update_in_place
from wengert.program.source.recompute import all_defined, recomputed, reverse_loop
from wengert.program.tracing import Symbol, TracingError
from wengert.rules import elementwise as ew
from wengert.rules.indexing import index_add, index_update, untake

__all__ = ["grad_source", "jvp_source", "GradProgram"]


def _is_float(v):
    return type(v) is Variable and v.dtype.kind in "fc"


class _SymbolicPass:
    """What the reverse and the tangent passes share: one symbol per variable, and fresh names for
    the values a statement made."""

    def sym(self, var):
        s = self._syms.get(var)
        if s is None:
            ex = self._examples.get(var)
            s = self._syms[var] = Symbol(var, placeholder(var) if ex is None else ex, self.b)
        return s

    def name(self, value, base, mark):
        if type(value) is Symbol:
            made = {o for s in self.b.statements[mark:] if type(s) is Statement for o in s.outs}
            if value.variable in made:
                self.b.names.discard(value.variable.name)
                value.variable.name = self.b.fresh(base)
        return value


class _Reverser(_SymbolicPass):
    def __init__(self, program, checkpoint="all", snapshots=None):
        self.program = program
        self.checkpoint = checkpoint  # "all" (a stack of every iteration's values), "binomial", "ctz"
        self.snapshots = snapshots
        names = all_names(program.body) | {v.name for v in program.inputs} | {"np", "math", "stack"}
        self.b = SourceBuilder(names=names)
        self.acc = {}  # Variable -> accumulator Variable (a buffer the reverse pass owns)
        self._syms = {}
        self._examples = getattr(program, "examples", {})  # rules run on the arguments' values
        self.table = []  # (forward node, reverse nodes, contributions) for the top-level block
        self.contribs = []  # (argument Variable, cotangent) of the statement being reversed
        self.cotangents = set()  # the carried adjoints, accumulators and seed (source.factor reads them)

    def emit(self, node):
        self.b.statements.append(node)

    def accumulate(self, adj, var, c, mark=None):
        if not _is_float(var):
            return
        A = self.acc.get(var)
        if A is not None:
            last = self.b.statements[-1] if self.b.statements else None
            cvar = c.variable if type(c) is Symbol else None
            if (A.kind == "array" and type(last) is Statement and cvar is not None and last.out is cvar
                    and last.prim is untake and cvar.shape == A.shape):  # idx indexes A's shape
                g, idx, _shape = last.args
                self.b.statements[-1] = Statement((A,), index_add, (A, idx, g), inplace=True)
                self.b.forget(cvar)  # its statement is gone: never reuse it
            else:
                add = ew.add.primitive
                value = cvar if cvar is not None else c
                self.emit(Statement((A,), add, (A, value), inplace=A.kind == "array"
                                    and np.shape(placeholder(cvar) if cvar is not None else c) == A.shape))
            return
        prev = adj.get(var)
        mark = len(self.b.statements) if mark is None else mark
        adj[var] = self.name(c if prev is None else ew.add(prev, c), f"{var.name}_bar", mark)

    # -- blocks ----------------------------------------------------------------------------------
    def block(self, nodes, adj, top=False):
        """Appends the reverse of ``nodes`` to the current block; returns the augmented forward block."""
        fwd = []
        for node in reversed(nodes):
            start = len(self.b.statements)
            t = type(node)
            if t is Statement:
                self.statement(node, adj)
                fwd.append(node)
            elif t is If:
                fwd.append(self.if_(node, adj))
            elif t is Loop:
                fwd.append(self.loop(node, adj))
            else:  # pragma: no cover - forward blocks hold statements, ifs and loops only
                raise TypeError(f"unexpected node {t.__name__} in a forward block")
            if top:
                self.table.append((node, self.b.statements[start:], self.contribs))
            self.contribs = []
        fwd.reverse()
        return fwd

    def statement(self, stmt, adj):
        prim = stmt.prim
        if prim.nondiff:
            return
        g = adj.pop(stmt.out, None)
        if g is None:
            return
        args = map_vars(stmt.args, self.sym)
        kwargs = map_vars(stmt.kwargs, self.sym)
        out = self.sym(stmt.out)
        order = list(enumerate(stmt.args))
        if prim is index_update or prim is index_add:
            order.reverse()  # read g[idx] (the value's adjoint) before g is zeroed at idx, maybe in place
        for i, a in order:
            if not _is_float(a):
                continue
            rule = prim.vjp_rule(i)
            mark = len(self.b.statements)
            try:
                with np.errstate(all="ignore"):
                    c = rule(g, out, *args, **kwargs)
                    if prim.grad_post is not None and type(c) is not float:
                        c = prim.grad_post(c, args[i])
            except TracingError as e:
                raise TracingError(f"the VJP rule of primitive '{prim.__name__}' for argument {i} cannot be "
                                   f"traced to a program: {e}") from e
            self.accumulate(adj, a, c, mark)
            self.contribs.append((a, c))

    def _open(self, free):
        """Accumulators for the outer variables ``free`` a compound node reads."""
        opened = []
        for u in free:
            if _is_float(u) and u not in self.acc:
                A = Variable(self.b.fresh(f"{u.name}_bar"), u.shape, u.dtype, u.kind)
                self.emit(Assign([A], [Zeros(u.shape, u.dtype) if u.kind == "array" else zero_value(u)]))
                self.acc[u] = A
                self.cotangents.add(A)
                opened.append(u)
        return opened

    def _close(self, opened, adj):
        for u in opened:
            A = self.acc.pop(u)
            prev = adj.get(u)
            mark = len(self.b.statements)
            if prev is None:
                adj[u] = self.sym(A)
            else:
                adj[u] = self.name(ew.add(prev, self.sym(A)), f"{u.name}_bar", mark)

    def _free(self, node_reads, node_defs):
        seen, out = set(node_defs), []
        for v in node_reads:
            if type(v) is Variable and v not in seen:
                seen.add(v)
                out.append(v)
        return out

    def if_(self, node, adj):
        inner_defs = all_defined([node])
        free = self._free(reads([node]), inner_defs)
        opened = self._open(free)
        outer = self.b.statements
        arms = []
        for body, vals in ((node.then, node.then_vals), (node.orelse, node.else_vals)):
            self.b.statements = outer  # leave the other arm's block
            rev = self.b.statements = []
            adj_a = {}
            for o, v in zip(node.outs, vals):
                g = adj.get(o)
                if g is not None and _is_float(v):
                    self.accumulate(adj_a, v, g)
            fwd = self.block(body, adj_a)
            arms.append((fwd, rev, set(defined(fwd)), adj_a))
        self.b.statements = outer
        for o in node.outs:
            adj.pop(o, None)
        new = If(node.cond, arms[0][0], arms[1][0], node.outs, node.then_vals, node.else_vals, node.lineno)
        if self.in_loop:
            for k, (fwd, rev, local, _a) in enumerate(arms):
                need = _unique(v for v in reads(rev) if v in local)
                again, need = recomputed(fwd, need, all_defined(fwd))  # x[i] is read again, not pushed
                rev[:0] = ([Pop(need)] if need else []) + again
                if need:
                    if k == 0:
                        new.push_then = need
                    else:
                        new.push_else = need
        self.emit(If(node.cond, arms[0][1], arms[1][1], lineno=node.lineno))
        self._close(opened, adj)
        return new

    in_loop = False

    storing = False  # inside a loop that stores its iterations on the stack

    def loop(self, node, adj):
        policy, snapshots = node.checkpoint or (self.checkpoint, self.snapshots)
        who = (f"wg.checkpointed(..., {policy!r}) in {self.program.name}" if node.checkpoint else
               f"source_grad({self.program.name}, checkpoint={policy!r})")
        if policy != "all" and self.storing:
            raise TransformError(f"{who}: the loop at {node.where} is checkpointed but the loop around it "
                                 f"keeps every iteration; checkpoint the outer loop too (wg.checkpointed "
                                 f"around its range, or source_grad's checkpoint=)")
        inner_defs = all_defined([node]) | set(node.headers) | ({node.index} if node.index else set())
        body_reads = reads(node.body) + [v for v in node.body_outs if type(v) is Variable]
        free = self._free(body_reads, inner_defs)
        opened = self._open(free)
        count = Variable(self.b.fresh("n"), (), np.int64, "int")
        carry = []
        for h, o in zip(node.headers, node.outs):
            if _is_float(h):
                C = Variable(self.b.fresh(f"{h.name}_bar"), h.shape, h.dtype, h.kind)
                g = adj.pop(o, None)
                start = g.variable if type(g) is Symbol else (g if g is not None else zero_value(h))
                self.emit(Assign([C], [start]))
                carry.append((h, C))
                self.cotangents.add(C)
        outer = self.b.statements
        rev = self.b.statements = []
        adj_b = {}
        by_header = dict(carry)
        for h, bo in zip(node.headers, node.body_outs):
            if h in by_header and _is_float(bo):
                self.accumulate(adj_b, bo, self.sym(by_header[h]))
        was, was_storing = self.in_loop, self.storing
        self.in_loop = True
        self.storing = policy == "all"
        fwd_body = self.block(node.body, adj_b)
        self.in_loop, self.storing = was, was_storing
        ends = []
        for h, _C in carry:
            g = adj_b.get(h)
            ends.append(g.variable if type(g) is Symbol else (g if g is not None else zero_value(h)))
        if carry:
            self.emit(Assign([C for _, C in carry], ends))
        local = set(defined(fwd_body)) | set(node.headers) | ({node.index} if node.index else set())
        need = _unique(v for v in reads(rev) if v in local)
        self.b.statements = outer
        checkpointed = None
        if policy != "all":
            checkpointed, sweep = checkpoint_loop(node, fwd_body, rev, count, self.b.fresh, policy, snapshots,
                                                  who)
            self.emit(sweep)
        else:  # recompute what is cheap (i, x[i]), store or push the rest
            back, need, stores = reverse_loop(node, fwd_body, rev, need, count, self.b.fresh)
            self.emit(back)
        for (_h, C), init in zip(carry, [i for h, i in zip(node.headers, node.inits) if _is_float(h)]):
            if _is_float(init):
                self.accumulate(adj, init, self.sym(C))
        self._close(opened, adj)
        if checkpointed is not None:
            return checkpointed
        new = node.copy(body=fwd_body, count=count)
        new.push = need
        new.stores = stores
        return new


def _unique(vs):
    seen, out = set(), []
    for v in vs:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


class GradProgram:
    """A derivative program built from source: ``inputs``, ``forward`` (the augmented forward pass),
    ``reverse``, ``outputs``; ``.source`` is its Python source, calling it runs it."""

    def __init__(self, name, inputs, nodes, outputs, out_tree, stack, table=None, params=None, primal=None):
        self.name = name
        self.inputs = list(inputs)
        self.nodes = list(nodes)
        self.outputs = list(outputs)
        self.out_tree = out_tree
        self.stack = stack
        self.table = table or []
        self.params = params
        self.primal = primal  # the function's output (a Variable or constant), for the table
        self._function = None

    @property
    def source(self):
        """The derivative program as Python source."""
        return block_source(self.name, self.inputs, self.nodes, self.outputs, stack=self.stack)[0]

    def __str__(self):
        return self.source

    @property
    def function(self):
        """The compiled function of the flat inputs."""
        if self._function is None:
            self._function = compile_block(self.name, self.inputs, self.nodes, self.outputs, stack=self.stack)
        return self._function

    def __call__(self, *flat):
        out = self.function(*flat)
        return tree_unflatten(self.out_tree, [out] if len(self.outputs) == 1 else list(out))


def _has_push(nodes):
    for n in nodes:
        if type(n) is Push or (type(n) is If and (n.push_then or n.push_else or _has_push(n.then)
                                                  or _has_push(n.orelse))):
            return True
        if type(n) is Loop and (n.push or _has_push(n.body)):
            return True
        if hasattr(n, "inner_blocks") and _has_push(n.inner_blocks()):  # a checkpointed loop's sweep
            return True
    return False


def grad_source(program, argnums=0, with_value=False, checkpoint="all", snapshots=None):
    """The gradient program of a scalar-output :class:`SourceProgram`, for the arguments ``argnums``;
    loops keep every iteration's values (``checkpoint="all"``) or follow a checkpointing schedule
    (``"binomial"``, ``"ctz"``: see ``source/checkpoint.py``)."""
    if len(program.outputs) != 1 or np.shape(placeholder(program.outputs[0]) if type(program.outputs[0]) is
                                             Variable else program.outputs[0]) != ():
        raise TypeError(f"source_grad({program.name}): the function must return one scalar")
    where = f"source_grad({program.name}, argnums={argnums!r})"
    single, nums = argnums_checked(argnums, where)
    nums = argnums_resolved(nums, len(program.params), where, "it takes")
    wrt = []
    for a in nums:
        slot = program.params[a] if -len(program.params) <= a < len(program.params) else None
        if not _is_float(slot):
            raise TypeError(f"source_grad({program.name}, argnums={argnums!r}): argument {a} is "
                            f"{'missing' if slot is None else repr(slot)}; derivatives are taken with "
                            f"respect to float arrays and floats")
        wrt.append(slot)
    r = _Reverser(program, checkpoint, snapshots)
    out = program.outputs[0]
    rev = r.b.statements = []
    adj = {}
    if type(out) is Variable and _is_float(out):
        seed = Variable(r.b.fresh(f"{out.name}_bar"), out.shape, out.dtype, out.kind)
        r.emit(Assign([seed], [1.0 if out.kind == "float" else out.dtype.type(1)]))
        adj[out] = r.sym(seed)
        r.cotangents.add(seed)
    fwd = r.block(program.body, adj, top=True)
    results = []
    for v in wrt:
        g = adj.get(v)
        results.append(g.variable if type(g) is Symbol else (g if g is not None else zero_value(v)))
    outputs = ([out] if with_value else []) + results
    tree = _LEAF if single else (tuple, None, tuple(_LEAF for _ in nums))
    if with_value:
        tree = (tuple, None, (_LEAF, tree))
    nodes = update_in_place(fwd + rev)
    factor_reverse_loops(nodes, outputs, r.cotangents, r.b.fresh)
    table = list(reversed(r.table))
    return GradProgram(f"{program.name}_grad", program.inputs, nodes, outputs, tree, _has_push(nodes),
                       table=table, params=program.params, primal=out)


# -- forward mode ------------------------------------------------------------------------------------

class _Tangents(_SymbolicPass):
    def __init__(self, program):
        names = all_names(program.body) | {v.name for v in program.inputs} | {"np", "math", "stack"}
        self.b = SourceBuilder(names=names)
        self._syms = {}
        self._examples = getattr(program, "examples", {})

    def tangent_var(self, var):
        return Variable(self.b.fresh(f"{var.name}_dot"), var.shape, var.dtype, var.kind)

    def block(self, nodes, tan):
        out = self.b.statements
        for node in nodes:
            t = type(node)
            if t is Statement:
                out.append(node)
                self.statement(node, tan)
            elif t is If:
                out.append(self.if_(node, tan))
            elif t is Loop:
                out.append(self.loop(node, tan))

    def statement(self, stmt, tan):
        prim = stmt.prim
        if prim.nondiff or not _is_float(stmt.out):
            return
        args = map_vars(stmt.args, self.sym)
        kwargs = map_vars(stmt.kwargs, self.sym)
        out = self.sym(stmt.out)
        total = None
        mark = len(self.b.statements)
        with np.errstate(all="ignore"):
            for i, a in enumerate(stmt.args):
                if type(a) is not Variable or a not in tan:
                    continue
                d = prim.jvp_rule(i)(tan[a], out, *args, **kwargs)
                if prim.tangent_post is not None:
                    d = prim.tangent_post(d, out)
                total = d if total is None else ew.add(total, d)
        if total is not None:
            tan[stmt.out] = self.name(total, f"{stmt.out.name}_dot", mark)

    def _value(self, v, tan):
        if type(v) is Variable and v in tan:
            t = tan[v]
            return t.variable if type(t) is Symbol else t
        return zero_value(v if type(v) is Variable else Variable.like("c", v))

    def if_(self, node, tan):
        outer = self.b.statements
        arms = []
        for body, vals in ((node.then, node.then_vals), (node.orelse, node.else_vals)):
            self.b.statements = outer  # leave the other arm's block
            self.b.statements = []
            tan_a = dict(tan)
            self.block(body, tan_a)
            arms.append((self.b.statements, [self._value(v, tan_a) for v in vals]))
        self.b.statements = outer
        outs, tv, ev = list(node.outs), list(node.then_vals), list(node.else_vals)
        for k, o in enumerate(node.outs):
            if _is_float(o):
                od = self.tangent_var(o)
                outs.append(od)
                tv.append(arms[0][1][k])
                ev.append(arms[1][1][k])
                tan[o] = self.sym(od)
        return If(node.cond, arms[0][0], arms[1][0], outs, tv, ev, node.lineno)

    def loop(self, node, tan):
        heads, inits, outs = list(node.headers), list(node.inits), list(node.outs)
        tan_b = dict(tan)
        pairs = []
        for h, i, o in zip(node.headers, node.inits, node.outs):
            if _is_float(h):
                hd, od = self.tangent_var(h), self.tangent_var(o)
                heads.append(hd)
                inits.append(self._value(i, tan))
                outs.append(od)
                tan_b[h] = self.sym(hd)
                pairs.append((o, od))
        outer = self.b.statements
        self.b.statements = []
        self.block(node.body, tan_b)
        body = self.b.statements
        self.b.statements = outer
        body_outs = list(node.body_outs) + [self._value(bo, tan_b)
                                            for h, bo in zip(node.headers, node.body_outs) if _is_float(h)]
        for o, od in pairs:
            tan[o] = self.sym(od)
        return node.copy(headers=heads, inits=inits, outs=outs, body=body, body_outs=body_outs)


def jvp_source(program):
    """The forward-mode program of a :class:`SourceProgram`: ``(inputs..., tangents...)`` to
    ``(outputs, output tangents)``."""
    tr = _Tangents(program)
    tan, t_inputs = {}, []
    for v in program.inputs[:len(program.inputs) - program.n_captured]:  # captured arrays: no tangent
        t = tr.tangent_var(v)
        t_inputs.append(t)
        if _is_float(v):
            tan[v] = tr.sym(t)
    tr.b.statements = []
    tr.block(program.body, tan)
    outs = [tr._value(o, tan) if type(o) is Variable else zero_value(Variable.like("c", o))
            for o in program.outputs]
    tree = (tuple, None, (program.out_tree, program.out_tree))
    return GradProgram(f"{program.name}_jvp", program.inputs + t_inputs, tr.b.statements,
                       list(program.outputs) + outs, tree, False, params=program.params)


def flat_tree(n):
    """A flat tuple tree of ``n`` leaves."""
    return tree_flatten(tuple(range(n)))[1]
