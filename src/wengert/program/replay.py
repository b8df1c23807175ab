"""Recording a rule's statements once and replaying them (the adjoint sweep's fast path).

The statements a derivative rule records depend only on its inputs' shapes, dtypes, kinds and
sameness and on its constants (a traced value's data is never read): :func:`_record` keeps the
first call's statements as a :class:`_Replay`, and :func:`_replayed` records them again on new
inputs with fresh variables, a few objects per statement instead of a trace through the rule.
"""

from operator import itemgetter

import numpy as np

from wengert.program.ir import NO_KWARGS, Statement, Variable, map_vars, var_name
from wengert.program.tracing import Symbol
from wengert.rules.elementwise import multiply

_MUL = multiply.primitive

__all__ = ["_Ref", "_Replay", "_record", "_replayed", "_replay_key", "_signature", "scaled_part", "IDENTITY"]


class _Ref:
    """In a :class:`_Replay`, the ``k``-th value: the inputs first, then the recorded results."""

    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k


def _simple(x):
    """Whether constant ``x`` may be part of a replay key (compared by type and value)."""
    t = type(x)
    return t is float or t is int or t is bool or x is None or t is str or isinstance(x, np.generic)


class _Replay:
    """The statements one call of a rule recorded, with the inputs and results as :class:`_Ref`
    (``steps``: (primitive, the arguments' ``pick``, the arguments, keyword arguments, result
    metadata)), and what it returned (a ``_Ref`` or a constant). A replay's values are its
    constants (``consts``), then the inputs, then the results: ``pick`` takes the arguments from
    them (an ``itemgetter``, or the index of the one argument; None for nested arguments)."""

    __slots__ = ("steps", "result", "consts", "recorded", "n_inputs", "scaling")

    def __init__(self, steps, result, n_inputs=None):
        self.recorded, self.n_inputs, self.scaling = steps, n_inputs, None  # scaled_part's
        consts = [a for step in steps if not step[4] for a in step[1] if type(a) is not _Ref]
        c, k, picked = len(consts), 0, []
        for prim, args, kwargs, metas, nested in steps:
            pick = None
            if not nested:
                index = []
                for a in args:
                    if type(a) is _Ref:
                        index.append(c + a.k)
                    else:
                        index.append(k)
                        k += 1
                if len(index) == 1:  # (an if-chain, not a conditional expression: mypy 2.4 crashes on that)
                    pick = index[0]
                elif index:
                    pick = itemgetter(*index)
                else:
                    pick = _no_arguments
            # the arguments are all variables: they are the statement's uses (Statement.uses)
            only_variables = not nested and not kwargs and all([type(a) is _Ref for a in args])
            picked.append((prim, pick, args, kwargs, metas, only_variables))
        self.steps = tuple(picked)
        self.result = result
        self.consts = consts


IDENTITY = object()
"""``scaled_part``'s answer for a rule that returns its cotangent itself (``add``'s)."""


def scaled_part(replay):
    """For a VJP rule's replay (inputs ``g, out, *args``) that computes ``g * w`` (or ``w * g``) of
    Python floats, last, with ``g`` read nowhere else: the replay computing ``w`` alone (from the
    same inputs, ``g`` unread); :data:`IDENTITY` for a rule returning ``g`` itself; else None.
    Found once per replay."""
    form = replay.scaling
    if form is None:
        form = replay.scaling = _scaled_part(replay)
    return form or None


def _scaled_part(replay):
    steps, r = replay.recorded, replay.result
    if replay.n_inputs is None or type(r) is not _Ref:
        return False
    if not steps:
        return IDENTITY if r.k == 0 else False
    prim, args, kwargs, metas, nested = steps[-1]
    if prim is not _MUL or kwargs or nested or len(args) != 2 or len(metas) != 1 or metas[0][2] != "float":
        return False
    if r.k != replay.n_inputs + sum(len(step[3]) for step in steps) - 1:  # not the last step's result
        return False
    g = [type(a) is _Ref and a.k == 0 for a in args]
    if g.count(True) != 1:
        return False
    w = args[1] if g[0] else args[0]
    if type(w) is not _Ref and type(w) is not float:
        return False
    for _, args, kwargs, _, nested in steps[:-1]:  # g read only by the last step
        if nested or kwargs or any([type(a) is _Ref and a.k == 0 for a in args]):
            return False
    return _Replay(steps[:-1], w, replay.n_inputs)


def _no_arguments(values):
    return ()


def _replay_key(tag, inputs):
    """What decides the statements a rule records: ``tag`` (which rule), and ``_signature(inputs)``.
    None when an input is neither a symbol nor a simple constant (a container, an array constant)."""
    sig = _signature(inputs)
    return None if sig is None else (tag, sig)


def _signature(inputs):
    """For each input its shape, dtype and kind and which earlier input it is the same variable as
    (a symbol or Variable), or its type and value (a constant); None when an input is neither."""
    key = []
    seen = []  # the variables so far (None for a constant); Variables compare by identity
    for x in inputs:
        t = type(x)
        if t is Symbol:
            v = x.variable
        elif t is Variable:
            v = x
        elif t is float or _simple(x):
            key.append((t, repr(x)))
            seen.append(None)
            continue
        else:
            return None
        if v in seen:  # the position of that input (an int: no shape, dtype, kind or constant is one)
            key.append(seen.index(v))
        elif v.kind == "float":  # a Python float: shape () and float64 always (Variable.like)
            key.append("float")
        else:
            key += (v.shape, v.dtype, v.kind)
        seen.append(v)
    return tuple(key)


def _record(builder, inputs, fun, fargs):
    """Call ``fun(*fargs)`` and return its result and a :class:`_Replay` of it, or None where the
    statements it recorded read other variables than ``inputs``' (then it is not replayed)."""
    mark = len(builder.statements)
    result = fun(*fargs)
    refs = {}
    for j, x in enumerate(inputs):
        if type(x) is Symbol:
            refs.setdefault(x.variable, _Ref(j))
        elif type(x) is Variable:
            refs.setdefault(x, _Ref(j))
    steps, n = [], len(inputs)
    n_inputs = n
    ok = [True]

    def ref(v):
        r = refs.get(v)
        if r is None:
            ok[0] = False
            return v
        return r

    for st in builder.statements[mark:]:
        args = map_vars(st.args, ref)
        kwargs = map_vars(st.kwargs, ref) if st.kwargs else None
        if not ok[0]:
            return result, None
        metas = []
        for o in st.outs:
            refs[o] = _Ref(n)
            n += 1
            metas.append((o.shape, o.dtype, o.kind, builder.examples.get(o)))
        steps.append((st.prim, args, kwargs, tuple(metas), any(type(a) in (tuple, list, dict) for a in args)))
    if type(result) is Symbol:
        r = refs.get(result.variable)
        if r is None:
            return result, None
        return result, _Replay(tuple(steps), r, n_inputs)
    return result, _Replay(tuple(steps), result, n_inputs)


def _resolve(obj, values, offset):
    """``obj`` with each :class:`_Ref` replaced by its value, ``values[offset + k]`` (containers too)."""
    t = type(obj)
    if t is _Ref:
        return values[offset + obj.k]
    if t is tuple or t is list:
        return t([_resolve(o, values, offset) for o in obj])
    if t is dict:
        return {k: _resolve(v, values, offset) for k, v in obj.items()}
    return obj


def _replayed(builder, replay, inputs, sym):
    """The statements of ``replay`` recorded again on ``inputs`` (symbols, Variables, constants)
    with fresh variables (named as ``builder.fresh()`` names them), and the symbol (``sym`` of a
    Variable) or constant they return. Its variables and statements are made field by field:
    this runs once per adjoint statement of a long program."""
    r = replay.result
    if not replay.steps:  # it returns an input or a constant (``add``'s cotangents are ``g``)
        if type(r) is not _Ref:
            return r
        x = inputs[r.k]
        return sym(x) if type(x) is Variable else x
    values = replay.consts.copy()
    for x in inputs:
        values.append(x.variable if type(x) is Symbol else x)
    offset = len(replay.consts)
    statements, examples, names, k = builder.statements, builder.examples, builder.names, builder.counter
    new_variable, new_statement, new_symbol = Variable.__new__, Statement.__new__, Symbol.__new__
    for prim, pick, args, kwargs, metas, only_variables in replay.steps:
        outs = []
        for shape, dtype, kind, example in metas:
            name = f"v{k}" if k >= 0 else var_name(k)
            while name in names:
                k += 1
                name = f"v{k}" if k >= 0 else var_name(k)
            k += 1
            names.add(name)
            v = new_variable(Variable)
            v.name, v.shape, v.dtype, v.kind = name, shape, dtype, kind
            examples[v] = example
            outs.append(v)
            values.append(v)
        st = new_statement(Statement)
        st.outs, st.prim, st.inplace, st._uses = (v,) if len(outs) == 1 else tuple(outs), prim, False, None
        if pick is None:
            st.args = tuple(_resolve(args, values, offset))
        elif type(pick) is int:
            st.args = (values[pick],)
        else:
            st.args = pick(values)
        st.kwargs = _resolve(kwargs, values, offset) if kwargs else NO_KWARGS
        if only_variables:
            st._uses = st.args
        statements.append(st)
    builder.counter = k
    if type(r) is not _Ref:
        return r
    if r.k < len(inputs):
        x = inputs[r.k]
        return sym(x) if type(x) is Variable else x
    v = values[offset + r.k]
    result = new_symbol(Symbol)  # Symbol(v, examples.get(v), builder)
    result.variable, result.example, result._trace = v, examples.get(v), builder
    return result
