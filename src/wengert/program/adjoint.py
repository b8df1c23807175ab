"""Adjoint and tangent programs, traced from the rule table (no derivative rule is written twice).

Reverse mode: the new program is the forward statements, then each statement's
adjoint in reverse order. Each adjoint is obtained by calling the primitive's VJP rules, exactly
as the tape's backward pass does (``rule(g, out, *args, **kwargs)``, then ``grad_post``), on
symbols: what the rules compute is recorded as statements. A variable used several times gets
one contribution per use, summed (``v_bar2 = v_bar + ...``); ``dup`` statements (from
``passes.explicit_dup``) have ``+`` as their adjoint. A rule's cotangent ``g * w`` of Python floats
is kept as the pair until it is read (``_Scaled``), so that two of one ``g`` are added as
``g * (w1 + w2)`` (what ``algebra.factor_products`` would make of them, recorded directly). Forward
mode calls the JVP rules likewise.
Adjoint programs are programs: their adjoints (second derivatives) come the same way.
"""


import numpy as np

from wengert.api.tree import _LEAF, argnums_checked, argnums_resolved
from wengert.program.ir import Variable, binary, dup, map_vars, placeholder
from wengert.program.pipeline import simplify
from wengert.program.replay import IDENTITY, _record, _replay_key, _replayed, _signature, scaled_part
from wengert.program.tracing import ProgramBuilder, Symbol, TracingError
from wengert.rules import elementwise as ew

__all__ = ["vjp_program", "grad_program", "jvp_program", "zero_value"]


class _Tracer:
    """A builder holding the forward statements of ``program``, with symbols for its variables."""

    def __init__(self, program):
        self.program = program
        names = {v.name for v in program.inputs} | {o.name for s in program.statements for o in s.outs}
        self.builder = ProgramBuilder(names=names, examples=_complete_examples(program))
        self.builder.statements = list(program.statements)
        self._symbols = {}
        self._replays = {}  # _replay_key -> _Replay, or None (see replay)
        # what name() leaves alone: the program's variables, new inputs, and those named already;
        # every other variable a symbol of this trace holds is a result recorded since
        self._named = set(program.inputs).union(*[s.outs for s in program.statements])

    def sym(self, var):
        s = self._symbols.get(var)
        if s is None:
            s = self._symbols[var] = self.builder.symbol(var)  # the traced example, or a placeholder
        return s

    def new_input(self, name, like):
        var = Variable(self.builder.fresh(name), like.shape, like.dtype, like.kind)
        self._named.add(var)
        return var, self.sym(var)

    def name(self, value, base, suffix=""):
        """Give a variable this trace just created the name ``base + suffix`` (``base2``, ... if taken)."""
        if type(value) is Symbol and value.variable not in self._named:
            var = value.variable
            self.builder.names.discard(var.name)
            var.name = self.builder.fresh(base + suffix)
            self._named.add(var)
        return value

    def call_rule(self, kind, prim, i, rule, *args, **kwargs):
        try:
            return rule(*args, **kwargs)
        except TracingError as e:
            raise TracingError(f"the {kind} rule of primitive '{prim.__name__}' for argument {i} cannot "
                               f"be traced to a program: {e}") from e

    def replay(self, tag, inputs, fun, *fargs):
        """``fun(*fargs)``, which records statements computing on ``inputs`` (symbols and constants), as
        a rule does. The statements one call records depend only on the inputs' shapes, dtypes,
        kinds and sameness and on the constants (a traced value's data is never read), so the
        first call of each such key is recorded and the later ones replay it with fresh variables:
        a long program's adjoint costs a few objects per statement, not a trace through the rule."""
        return self.replay_keyed(_replay_key(tag, inputs), inputs, fun, *fargs)

    def replay_keyed(self, key, inputs, fun, *fargs):
        """:meth:`replay` with its key (``_replay_key``) given: a statement's rules share one
        signature of their inputs (``_signature``)."""
        if key is None:
            return fun(*fargs)
        replay = self._replays.get(key)
        if replay is not None:
            return _replayed(self.builder, replay, inputs, self.sym)
        if key in self._replays:  # recorded once, not replayable
            return fun(*fargs)
        result, self._replays[key] = _record(self.builder, inputs, fun, fargs)
        return result

    def active(self, wrt):
        """Variables that depend on ``wrt`` through differentiable statements."""
        active = set(wrt)
        for s in self.program.statements:
            if s.prim.nondiff:
                continue
            uses = s._uses  # s.uses(), once computed
            for u in uses if uses is not None else s.uses():
                if u in active:
                    active.update([o for o in s.outs if o.dtype.kind in "fc"])
                    break
        return active

    def result(self, value):
        return value.variable if type(value) is Symbol else value


def _complete_examples(program):
    """An example value for every variable of ``program``: those it keeps (``Program.examples``),
    and the forward statements' results computed again from them where it kept only its inputs'
    (``wg.compile`` does). A statement that cannot be evaluated gets placeholders."""
    examples = dict(program.examples)
    if not examples or all(o in examples for s in program.statements for o in s.outs):
        return examples

    def value(v):
        ex = examples.get(v)
        return placeholder(v) if ex is None else ex

    with np.errstate(all="ignore"):
        for s in program.statements:
            if all(o in examples for o in s.outs):
                continue
            try:
                out = s.prim.fun(*map_vars(s.args, value), **map_vars(s.kwargs, value))
            except Exception:  # noqa: BLE001 - any failure: placeholders, as for values never seen
                continue
            for o, v in zip(s.outs, out if len(s.outs) > 1 else (out,)):
                examples[o] = v
    return examples


def zero_value(var):
    """The zero of ``var``'s kind, shape and dtype: the derivative that nothing reached."""
    if var.kind == "float":
        return 0.0
    if var.kind != "array":
        return var.dtype.type(0)
    return np.zeros(var.shape, var.dtype)


def _check_wrt(program, var):
    if type(var) is not Variable or var.dtype.kind not in "fc":
        what = var.describe() if type(var) is Variable else type(var).__name__
        raise TypeError(f"program {program.name}: cannot differentiate with respect to an input of type "
                        f"{what}; derivatives are taken with respect to float (or complex) values only")


_ADD = object()  # the replay tag of adding two cotangents
_FLOATS = ("float", "float")  # the _signature of two Python float variables
_MUL, _ADD_PRIM = ew.multiply.primitive, ew.add.primitive
_FLOAT64 = np.dtype(np.float64)


def _traced_cotangent(tr, stmt, i, g):
    """Argument ``i``'s cotangent contribution to ``stmt``, from its primitive's VJP rule,
    recorded on symbols."""
    prim = stmt.prim
    rule = prim.vjp_rule(i)  # NoRuleError names the primitive and the argument
    args = map_vars(stmt.args, tr.sym)
    kwargs = map_vars(stmt.kwargs, tr.sym) if stmt.kwargs else {}
    c = tr.call_rule("VJP", prim, i, rule, g, tr.sym(stmt.out), *args, **kwargs)
    if prim.grad_post is not None and type(c) is not float:
        c = prim.grad_post(c, args[i])
    return c


def _backward(tr, seeds, wrt):
    """Reverse sweep: ``seeds`` [(output Variable, cotangent)], adjoints of ``wrt`` (Variables)."""
    with np.errstate(all="ignore"):  # abstract evaluation on placeholders may divide by zero
        return _backward_sweep(tr, seeds, wrt)


class _Scaled:
    """A cotangent ``g * w`` of Python floats not computed yet (``g`` a symbol, ``w`` a symbol or a
    float): the sweep keeps scaling rules' results so, and adds two of one ``g`` as ``g * (w1 + w2)``,
    without the products ``factor_products`` would take apart afterwards. Computed (``g * w``) where
    it is read other than by one scaling rule or such a sum."""

    __slots__ = ("g", "w")

    def __init__(self, g, w):
        self.g, self.w = g, w


def _float_op(builder, prim, x, y):
    """``x * y`` or ``x + y`` (``prim``) of Python floats or float symbols, recorded (a float when
    both are floats). Its variable is named as ``builder.fresh()`` names it, made field by field."""
    tx, ty = type(x), type(y)
    ex = x.example if tx is Symbol else x
    ey = y.example if ty is Symbol else y
    value = ex * ey if prim is _MUL else ex + ey
    if tx is not Symbol and ty is not Symbol:
        return value
    names, k = builder.names, builder.counter
    name = f"v{k}"
    while name in names:
        k += 1
        name = f"v{k}"
    builder.counter = k + 1
    names.add(name)
    v = _new_variable(Variable)
    v.name, v.shape, v.dtype, v.kind = name, (), _FLOAT64, "float"
    builder.statements.append(binary(v, prim, x.variable if tx is Symbol else x,
                                     y.variable if ty is Symbol else y))
    builder.examples[v] = value
    result = _new_symbol(Symbol)  # Symbol(v, value, builder)
    result.variable, result.example, result._trace = v, value, builder
    return result


_new_variable, _new_symbol = Variable.__new__, Symbol.__new__


def _is_float(x):
    return type(x) is float or (type(x) is Symbol and x.variable.kind == "float")


def _backward_sweep(tr, seeds, wrt):
    active = tr.active(wrt)
    adj = {}

    replay, replays, builder, sym = tr.replay_keyed, tr._replays, tr.builder, tr.sym
    named, names, fresh = tr._named, tr.builder.names, tr.builder.fresh

    def name(var, c):
        """``c``, the cotangent of ``var``, named ``var_bar`` (``var_bar2``, ...)."""
        if type(c) is Symbol and c.variable not in named:  # tr.name(c, var.name, "_bar"), inline
            v = c.variable
            names.discard(v.name)
            n = var.name + "_bar"
            if n in names:
                n = fresh(n)  # name2, name3, ...
            else:
                names.add(n)
            v.name = n
            named.add(v)
        return c

    def computed(c):
        return _float_op(builder, _MUL, c.g, c.w) if type(c) is _Scaled else c

    def accumulate(var, c):
        prev = adj.get(var)
        if prev is not None:
            if type(c) is _Scaled:
                if type(prev) is _Scaled and prev.g.variable is c.g.variable:  # g*w1 + g*w2 = g*(w1 + w2)
                    adj[var] = _Scaled(c.g, _float_op(builder, _ADD_PRIM, prev.w, c.w))
                    return
                c = computed(c)
            if type(prev) is _Scaled:
                prev = name(var, computed(prev))
            inputs = (prev, c)
            if type(prev) is Symbol and type(c) is Symbol and prev.variable.kind == "float" \
                    and c.variable.kind == "float" and prev.variable is not c.variable:
                sig = _FLOATS  # _signature(inputs) of two Python floats, inline
            else:
                sig = _signature(inputs)
            recorded = replays.get((_ADD, sig)) if sig is not None else None
            if recorded is not None:  # tr.replay's common case, inline
                c = _replayed(builder, recorded, inputs, sym)
            else:
                c = tr.replay(_ADD, inputs, ew.add, prev, c)
        adj[var] = name(var, c) if type(c) is not _Scaled else c

    for o, ct in seeds:
        if type(o) is Variable and o in active:
            accumulate(o, ct)
    for stmt in reversed(tr.program.statements):
        if stmt.prim is dup:
            gs = [name(o, computed(adj.pop(o))) for o in stmt.outs if o in adj]
            if gs and stmt.args[0] in active:
                total = gs[0]
                for g in gs[1:]:
                    total = ew.add(total, g)
                accumulate(stmt.args[0], total)
            continue
        out = stmt.outs[0]
        g = adj.pop(out, None)
        prim = stmt.prim
        if g is None or prim.nondiff:
            continue
        scaled = type(g) is _Scaled
        if scaled:  # kept only for the one argument of a scaling rule
            uses = 0
            for a in stmt.args:
                if type(a) is Variable and a in active:
                    uses += 1
            if uses != 1 or stmt.kwargs:
                g, scaled = name(out, computed(g)), False
        scalable = scaled or (type(g) is Symbol and g.variable.kind == "float")
        inputs = (g.g if scaled else g, out, *stmt.args)  # symbols made only where a rule is traced
        sig = False  # _signature(inputs), computed once for all arguments
        for i, a in enumerate(stmt.args):
            if type(a) is not Variable or a not in active:
                continue
            if stmt.kwargs:
                accumulate(a, _traced_cotangent(tr, stmt, i, g))
                continue
            if sig is False:
                sig = _signature(inputs)
            key = None if sig is None else ((prim, i), sig)
            recorded = replays.get(key) if key is not None else None
            form = scaled_part(recorded) if scalable and recorded is not None else None
            if form is IDENTITY:  # add's: the cotangent itself, scaled or not
                accumulate(a, g)
                continue
            if form is not None:
                w = _replayed(builder, form, inputs, sym)
                if _is_float(w):
                    accumulate(a, _Scaled(g.g, _float_op(builder, _MUL, g.w, w)) if scaled else _Scaled(g, w))
                    continue
                c = _float_op(builder, _MUL, computed(g), w)  # (not a Python float: g * w now)
            elif scaled:
                g, scaled = name(out, computed(g)), False
                inputs = (g, *inputs[1:])
                c = replay(key, inputs, _traced_cotangent, tr, stmt, i, g)
            elif recorded is not None:  # tr.replay_keyed's common case, inline
                c = _replayed(builder, recorded, inputs, sym)
            else:
                c = replay(key, inputs, _traced_cotangent, tr, stmt, i, g)
            accumulate(a, c)
    return [name(v, computed(adj[v])) if v in adj else None for v in wrt]


def vjp_program(program):
    """``Program.vjp``: inputs, then one cotangent per output; returns ``(outputs, cotangents)``."""
    tr = _Tracer(program)
    cts, seeds = [], []
    for k, o in enumerate(program.outputs):
        like = o if type(o) is Variable else Variable.like("c", o)
        var, s = tr.new_input(f"{o.name if type(o) is Variable else f'out{k}'}_bar", like)
        cts.append(var)
        seeds.append((o, s))
    wrt = [v for v in program.inputs if v.dtype.kind in "fc"]
    grads = _backward(tr, seeds, wrt)
    by_input = dict(zip(wrt, grads))
    outs = [tr.result(by_input[v]) if by_input.get(v) is not None else zero_value(v) for v in program.inputs]
    in_children = program.in_tree[2]
    cts_tree = (tuple, None, tuple(_LEAF for _ in program.inputs))
    result = program.with_statements(tr.builder.statements, list(program.outputs) + outs,
                                     inputs=program.inputs + cts, name=f"{program.name}_vjp",
                                     input_names=program.input_names + [v.name for v in cts],
                                     in_tree=(tuple, None, tuple(in_children) + (program.out_tree,)),
                                     in_leaves=program.in_leaves + cts,
                                     out_tree=(tuple, None, (program.out_tree, cts_tree)),
                                     examples=tr.builder.examples)
    return simplify(result)


def _arg_ranges(program):
    """For each positional argument, the slice of ``in_leaves`` holding its leaves."""
    ranges, start = [], 0
    for child in program.in_tree[2]:
        n = _count_leaves(child)
        ranges.append(range(start, start + n))
        start += n
    return ranges


def _count_leaves(treedef):
    if treedef is _LEAF:
        return 1
    return sum(_count_leaves(c) for c in treedef[2])


def _ones(var):
    if var.kind == "float":
        return 1.0
    if var.kind != "array":
        return var.dtype.type(1)
    return np.ones(var.shape, var.dtype)


def grad_program(program, argnums=0, with_value=False):
    """``Program.grad`` (and ``value_and_grad``): the gradient of the one scalar output."""
    outs = program.outputs
    shape = None
    if len(outs) == 1:
        shape = outs[0].shape if type(outs[0]) is Variable else np.shape(outs[0])
    if len(outs) != 1 or shape != ():
        what = f"{len(outs)} outputs" if len(outs) != 1 else f"an output of shape {shape}"
        raise TypeError(f"program {program.name}.grad(): the program must return one scalar, but it "
                        f"returns {what}; reduce it (e.g. .sum()), or use .vjp()")
    where = f"program {program.name}.grad(argnums={argnums!r})"
    single, nums = argnums_checked(argnums, where)
    ranges = _arg_ranges(program)
    nums = argnums_resolved(nums, len(ranges), where, "it takes")
    tr = _Tracer(program)
    out = program.outputs[0]
    wrt = []
    for a in nums:
        for j in ranges[a]:
            _check_wrt(program, program.in_leaves[j])
            wrt.append(program.in_leaves[j])
    seed = _ones(out) if type(out) is Variable else 1.0
    grads = dict(zip(wrt, _backward(tr, [(out, seed)], wrt)))
    outs, trees = [], []
    for a in nums:
        for j in ranges[a]:
            v = program.in_leaves[j]
            outs.append(tr.result(grads[v]) if grads.get(v) is not None else zero_value(v))
        trees.append(program.in_tree[2][a])
    out_tree = trees[0] if single else (tuple, None, tuple(trees))
    if with_value:
        outs = [out] + outs
        out_tree = (tuple, None, (_LEAF, out_tree))
    name = f"{program.name}_{'value_and_' if with_value else ''}grad"
    result = program.with_statements(tr.builder.statements, outs, out_tree=out_tree,
                                     examples=tr.builder.examples, name=name)
    return simplify(result)


def jvp_program(program):
    """``Program.jvp``: inputs, then one tangent per input; returns ``(outputs, output tangents)``."""
    tr = _Tracer(program)
    tangents = {}
    t_inputs = []
    for v in program.inputs:
        var, s = tr.new_input(f"{v.name}_dot", v)
        t_inputs.append(var)
        if v.dtype.kind in "fc":
            tangents[v] = s
    with np.errstate(all="ignore"):
        _forward_sweep(tr, program, tangents)
    outs = []
    for o in program.outputs:
        t = tangents.get(o) if type(o) is Variable else None
        outs.append(tr.result(t) if t is not None else (zero_value(o) if type(o) is Variable else
                                                         zero_value(Variable.like("c", o))))
    t_tree = (tuple, None, tuple(_LEAF for _ in t_inputs))
    result = program.with_statements(tr.builder.statements, list(program.outputs) + outs,
                                     inputs=program.inputs + t_inputs, name=f"{program.name}_jvp",
                                     input_names=program.input_names + [v.name for v in t_inputs],
                                     in_tree=(tuple, None, tuple(program.in_tree[2]) + (t_tree,)),
                                     in_leaves=program.in_leaves + t_inputs,
                                     out_tree=(tuple, None, (program.out_tree, program.out_tree)),
                                     examples=tr.builder.examples)
    return simplify(result)


def _forward_sweep(tr, program, tangents):
    """Tangents of every statement's result, in program order, from the JVP rules."""
    for stmt in program.statements:
        prim = stmt.prim
        if prim.nondiff:
            continue
        if prim is dup:
            if stmt.args[0] in tangents:
                for o in stmt.outs:
                    tangents[o] = tangents[stmt.args[0]]
            continue
        if stmt.out.dtype.kind not in "fc":
            continue
        args = map_vars(stmt.args, tr.sym)
        kwargs = map_vars(stmt.kwargs, tr.sym)
        out = tr.sym(stmt.out)
        total = None
        for i, a in enumerate(stmt.args):
            if type(a) is not Variable or a not in tangents:
                continue
            rule = prim.jvp_rule(i)  # NoRuleError names the primitive and the argument
            d = tr.call_rule("JVP", prim, i, rule, tangents[a], out, *args, **kwargs)
            if prim.tangent_post is not None:
                d = prim.tangent_post(d, out)
            total = d if total is None else ew.add(total, d)
        if total is not None:
            tangents[stmt.out] = tr.name(total, f"{stmt.out.name}_dot")
