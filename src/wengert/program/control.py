"""Structured control flow for programs built from source: ``If`` and ``Loop`` nodes around the IR's
straight-line ``Statement``s, and the Python code written for them.

A block is a list of nodes: ``Statement`` (one primitive, SSA), :class:`Assign` (``a, b = x, y``:
the copies that carry values into and out of loops and branches), :class:`If` (structured, with
phi outputs: each arm ends by giving its value of every output), :class:`Loop` (``for`` over a
range, ``while``, or the reverse pass's ``repeat n times``, with its loop-carried variables
explicit: ``headers`` hold them during an iteration, ``inits`` enter, ``body_outs`` leave each
iteration, ``outs`` hold them after the loop), and :class:`Push`/:class:`Pop` (the reverse pass's
stack). Variables are SSA within one execution of a block; loop headers are the only names bound
again, once per iteration, in the loop's own update.
"""

import numpy as np

from wengert.program.ir import Statement, Variable, vars_in

__all__ = ["TransformError", "Assign", "Zeros", "If", "Loop", "Push", "Pop", "SourceProgram", "render_block",
           "block_source", "reads", "defined"]


class TransformError(TypeError):
    """A construct outside the subset of Python that the source transformation supports (``try``,
    ``with``, generators, ``global``, ``return`` inside a loop, ...). The tape (``wg.grad``)
    follows such code as it runs."""


class Assign:
    """``targets = values`` (simultaneously)."""

    __slots__ = ("targets", "values")

    def __init__(self, targets, values):
        self.targets = list(targets)
        self.values = list(values)


class Zeros:
    """A fresh buffer of zeros (``np.zeros(shape, dtype)``), for accumulators written in place."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    def source(self):
        kind = "" if self.dtype == np.float64 else f", dtype=np.{self.dtype.name}"
        return f"np.zeros({self.shape!r}{kind})"


class If:
    """``if cond: then else: orelse``, ending with ``outs = then_vals`` / ``outs = else_vals``.
    ``push_then``/``push_else``: what each arm pushes for the reverse pass (set by the adjoint)."""

    __slots__ = ("cond", "then", "orelse", "outs", "then_vals", "else_vals", "push_then", "push_else",
                 "lineno")

    def __init__(self, cond, then, orelse, outs=(), then_vals=(), else_vals=(), lineno=None):
        self.cond = cond
        self.then = list(then)
        self.orelse = list(orelse)
        self.outs = list(outs)
        self.then_vals = list(then_vals)
        self.else_vals = list(else_vals)
        self.push_then = []
        self.push_else = []
        self.lineno = lineno


class Loop:
    """A loop: ``kind`` is ``"for"`` (``index`` over ``range(*bounds)``), ``"while"`` (``cond_block``
    computes ``cond`` before each iteration) or ``"repeat"`` (``count`` times: the reverse loop).
    ``brk``: the body's break flag (a bool Variable, True, or None). ``count``: a Variable counting
    the iterations run (set by the adjoint, which needs the trip count); ``push``: what each
    iteration pushes on the stack for the reverse pass."""

    __slots__ = ("kind", "index", "bounds", "cond_block", "cond", "headers", "inits", "body",
                 "body_outs", "outs", "brk", "count", "push", "lineno", "fresh", "where",
                 "checkpoint")

    def __init__(self, kind, body, headers=(), inits=(), body_outs=(), outs=(), *, index=None, bounds=(),
                 cond_block=(), cond=None, brk=None, count=None, lineno=None):
        self.kind = kind
        self.index = index
        self.bounds = tuple(bounds)
        self.cond_block = list(cond_block)
        self.cond = cond
        self.headers = list(headers)
        self.inits = list(inits)
        self.body = list(body)
        self.body_outs = list(body_outs)
        self.outs = list(outs)
        self.brk = brk
        self.count = count
        self.push = []
        self.lineno = lineno
        self.fresh = []  # carried arrays updated in place: copied once, before the loop
        self.where = None  # "file, line N" of the loop in the user's source, for error messages
        self.checkpoint = None  # (policy, snapshots) from wg.checkpointed(...) around its range

    def copy(self, **changes):
        new = Loop(self.kind, self.body, self.headers, self.inits, self.body_outs, self.outs,
                   index=self.index, bounds=self.bounds, cond_block=self.cond_block, cond=self.cond,
                   brk=self.brk, count=self.count, lineno=self.lineno)
        new.push = list(self.push)
        new.fresh = list(self.fresh)
        new.where = self.where
        new.checkpoint = self.checkpoint
        for k, v in changes.items():
            setattr(new, k, v)
        return new


class Push:
    """``stack.append(values)``: what one iteration (or arm) leaves for the reverse pass."""

    __slots__ = ("vars",)

    def __init__(self, variables):
        self.vars = list(variables)


class Pop:
    """``values = stack.pop()``."""

    __slots__ = ("vars",)

    def __init__(self, variables):
        self.vars = list(variables)


# -- what a block reads and defines ----------------------------------------------------------------

def reads(nodes, found=None):
    """Every Variable a block reads (recursively, with repeats)."""
    found = [] if found is None else found
    for n in nodes:
        t = type(n)
        if t is Statement:
            found.extend(n.uses())
        elif t is Assign:
            vars_in(n.values, found)
        elif t is If:
            vars_in([n.cond] + n.then_vals + n.else_vals, found)
            reads(n.then, found)
            reads(n.orelse, found)
            found.extend(n.push_then + n.push_else)
        elif t is Loop:
            vars_in(list(n.bounds) + n.inits + n.body_outs + [n.cond, n.brk, n.count], found)
            reads(n.cond_block, found)
            reads(n.body, found)
            found.extend(n.push)
        elif t is Push:
            found.extend(n.vars)
        elif hasattr(n, "node_reads"):  # checkpointed loops (source_checkpoint.py)
            n.node_reads(found)
    return found


def defined(nodes):
    """The Variables a block binds at its own level (not inside nested loops' and arms' scopes)."""
    out = []
    for n in nodes:
        t = type(n)
        if t is Statement:
            out.extend(n.outs)
        elif t is Assign:
            out.extend(n.targets)
        elif t is If:
            out.extend(n.outs)
        elif t is Loop:
            out.extend(n.outs)
            if n.count is not None:
                out.append(n.count)
        elif t is Pop:
            out.extend(n.vars)
        elif hasattr(n, "node_defined"):
            out.extend(n.node_defined())
    return out


def all_names(nodes, found=None):
    """Every Variable name bound anywhere in a block."""
    found = set() if found is None else found
    for n in nodes:
        found.update(v.name for v in defined([n]))
        if type(n) is If:
            all_names(n.then, found)
            all_names(n.orelse, found)
        elif type(n) is Loop:
            found.update(v.name for v in n.headers)
            if n.index is not None:
                found.add(n.index.name)
            all_names(n.cond_block, found)
            all_names(n.body, found)
        elif hasattr(n, "node_names"):
            n.node_names(found)
    return found


# -- Python source ---------------------------------------------------------------------------------

STACK = "stack"


def _targets(vs):
    return ", ".join(v.name for v in vs)


def _values(vs, mod):
    return ", ".join(v.source() if type(v) is Zeros else mod.value(v) for v in vs)


def _statement(stmt, mod, safe):
    from wengert.program.codegen import _statement_source
    from wengert.program.rendering import index_expr

    name = stmt.prim.__name__
    if name == "index_update" and not stmt.inplace:
        x, idx, v = stmt.args
        out = stmt.out.name
        if type(x) is Variable and x.kind == "array":
            return [f"{out} = {mod.value(x)}.copy()", f"{out}[{index_expr(idx, mod.value)}] = {mod.value(v)}"]
        return [f"{out} = np.array({mod.value(x)}, copy=True)",
                f"{out}[{index_expr(idx, mod.value)}] = {mod.value(v)}"]
    if name == "index_add" and not stmt.inplace:
        mod.helpers.add("index_add")
    if name == "index_add" and stmt.inplace and _scalar_index(stmt.args[1]):
        buf, idx, e = stmt.args
        lines = [f"{buf.name}[{index_expr(idx, mod.value)}] += {mod.value(e)}"]
        return lines + ([f"{stmt.out.name} = {buf.name}"] if stmt.out is not buf else [])
    if name == "index_update" and stmt.inplace:
        buf, idx, e = stmt.args
        lines = [f"{buf.name}[{index_expr(idx, mod.value)}] = {mod.value(e)}"]
        return lines + ([f"{stmt.out.name} = {buf.name}"] if stmt.out is not buf else [])
    if name == "index_add" and stmt.inplace and stmt.out is not stmt.args[0]:
        buf, idx, e = stmt.args
        return [f"np.add.at({buf.name}, {mod.value(idx)}, {mod.value(e)})", f"{stmt.out.name} = {buf.name}"]
    return [_statement_source(stmt, mod, safe)]


def _scalar_index(idx):
    """Whether ``idx`` picks one element or a slice (no repeated positions: ``a[idx] += g`` is exact)."""
    parts = idx if type(idx) is tuple else (idx,)
    for p in parts:
        if type(p) is Variable:
            if p.shape != () or p.dtype.kind not in "iu":
                return False
        elif not (isinstance(p, (int, np.integer, slice)) or p is None or p is Ellipsis):
            return False
    return True


def render_block(nodes, mod, indent, safe=False):
    """Source lines of a block."""
    pad = "    " * indent
    lines = []
    for n in nodes:
        t = type(n)
        if t is Statement:
            lines += [pad + s for s in _statement(n, mod, safe)]
        elif t is Assign:
            keep = [(t_, v) for t_, v in zip(n.targets, n.values) if t_ is not v]
            if keep:
                n = Assign([t_ for t_, _ in keep], [v for _, v in keep])
                lines.append(f"{pad}{_targets(n.targets)} = {_values(n.values, mod)}")
        elif t is Push:
            if n.vars:
                inner = n.vars[0].name if len(n.vars) == 1 else f"({_targets(n.vars)})"
                lines.append(f"{pad}{STACK}.append({inner})")
        elif t is Pop:
            if n.vars:
                lines.append(f"{pad}{_targets(n.vars)} = {STACK}.pop()")
        elif t is If:
            lines.append(f"{pad}if {mod.value(n.cond)}:")
            then = render_block(n.then, mod, indent + 1, safe)
            then += render_block([Push(n.push_then)] + [Assign(n.outs, n.then_vals)], mod, indent + 1, safe)
            orelse = render_block(n.orelse, mod, indent + 1, safe)
            orelse += render_block([Push(n.push_else)] + [Assign(n.outs, n.else_vals)], mod, indent + 1, safe)
            lines += then or [pad + "    pass"]
            if orelse:
                lines.append(pad + "else:")
                lines += orelse
        elif t is Loop:
            lines += _loop(n, mod, indent, safe)
        elif hasattr(n, "render"):  # checkpointed loops (source_checkpoint.py)
            lines += n.render(mod, indent, safe)
        else:  # pragma: no cover - every node type is listed above
            raise TypeError(f"unknown node {t.__name__}")
    return lines


def _loop(n, mod, indent, safe):
    pad = "    " * indent
    inner = "    " * (indent + 1)
    lines = []
    if n.headers:
        lines.append(f"{pad}{_targets(n.headers)} = {_values(n.inits, mod)}")
    for h in n.fresh:  # the loop writes into it: its own copy, once
        lines.append(f"{pad}{h.name} = np.array({h.name}, copy=True)")
    if n.count is not None and n.kind != "repeat":
        lines.append(f"{pad}{n.count.name} = 0")
    if n.kind == "for":
        bounds = [mod.value(b) for b in n.bounds]
        if len(bounds) == 3 and n.bounds[2] == 1:
            bounds = bounds[:2]
        if len(bounds) == 2 and n.bounds[0] == 0:
            bounds = bounds[1:]
        lines.append(f"{pad}for {n.index.name} in range({', '.join(bounds)}):")
        body = []
    elif n.kind == "while":
        cond = n.cond
        if len(n.cond_block) == 1 and type(n.cond_block[0]) is Statement and n.cond_block[0].out is cond:
            from wengert.program.codegen import _rhs

            lines.append(f"{pad}while {_rhs(n.cond_block[0], mod, safe)[0]}:")
            body = []
        elif not n.cond_block:
            lines.append(f"{pad}while {mod.value(cond)}:")
            body = []
        else:
            lines.append(f"{pad}while True:")
            body = render_block(n.cond_block, mod, indent + 1, safe)
            body.append(f"{inner}if not {mod.value(cond)}:")
            body.append(f"{inner}    break")
    else:
        lines.append(f"{pad}for _ in range({mod.value(n.count)}):")
        body = []
    body += render_block(n.body, mod, indent + 1, safe)
    body += render_block([Push(n.push)], mod, indent + 1, safe)
    if n.count is not None and n.kind != "repeat":
        body.append(f"{inner}{n.count.name} += 1")
    changed = [(h, o) for h, o in zip(n.headers, n.body_outs) if o is not h]
    if changed:
        body.append(f"{inner}{_targets([h for h, _ in changed])} = {_values([o for _, o in changed], mod)}")
    if n.brk is True:
        body.append(f"{inner}break")
    elif n.brk is not None:
        body.append(f"{inner}if {mod.value(n.brk)}:")
        body.append(f"{inner}    break")
    lines += body or [inner + "pass"]
    if n.outs:
        lines.append(f"{pad}{_targets(n.outs)} = {_values(n.headers, mod)}")
    return lines


def block_source(name, params, nodes, outputs, safe=False, stack=False):
    """A module defining ``def name(params)`` running ``nodes`` and returning ``outputs``;
    returns ``(text, module info)`` (see ``codegen._Module``)."""
    from wengert.program.codegen import _Module, module_head

    mod = _Module(all_names(nodes) | {p.name for p in params} | {STACK})
    body = ["    " + STACK + " = []"] if stack else []
    body += render_block(nodes, mod, 1, safe)
    outs = []
    for o in outputs:
        text = mod.value(o)
        shared = isinstance(o, np.ndarray) or (type(o) is Variable and o in params and o.kind == "array")
        outs.append(f"{text}.copy()" if shared else text)
    body.append(f"    return {outs[0]}" if len(outs) == 1 else f"    return ({', '.join(outs)})")
    head = module_head(mod)
    signature = f"def {name}({', '.join(p.name for p in params)}):"
    text = "\n".join(head) + f"\n\n{signature}\n" + "\n".join(body) + "\n"
    return text, mod


def compile_block(name, params, nodes, outputs, stack=False):
    """The block as a Python function (``math`` for floats; NumPy again where ``math`` raises)."""
    def build(safe):
        text, mod = block_source(name, params, nodes, outputs, safe=safe, stack=stack)
        namespace = {"__name__": f"wengert_source_{name}"}
        namespace.update(mod.foreign)
        exec(compile(text, f"<wengert source {name}>", "exec"), namespace)  # noqa: S102 - the point
        return namespace[name], bool(mod.math)

    fast, uses_math = build(False)
    if not uses_math:
        return fast
    slow = []

    def run(*args):
        try:
            return fast(*args)
        except (ValueError, OverflowError):  # math's domain errors: NumPy gives nan/inf instead
            if not slow:
                slow.append(build(True)[0])
            return slow[0](*args)

    run.__name__ = name
    return run


class SourceProgram:
    """A program built from a function's source (``wg.Program.from_source``): ``inputs``
    (Variables; the user's parameter names), ``body`` (a block with ``If``/``Loop`` nodes),
    ``outputs``; ``statics``: the non-array arguments it was specialised to, by position."""

    def __init__(self, name, inputs, body, outputs, *, params, statics, out_tree, filename=None):
        self.name = name
        self.inputs = list(inputs)
        self.body = list(body)
        self.outputs = list(outputs)
        self.params = list(params)  # per positional argument: Variable or static value
        self.statics = statics
        self.out_tree = out_tree
        self.filename = filename
        self.examples = {}  # Variable -> the value abstract evaluation computed (rules run on these)
        self._function = None

    @property
    def source(self):
        """The program as Python source (loops stay loops)."""
        from wengert.program.source_inplace import update_in_place

        return block_source(self.name, self.inputs, update_in_place(self.body), self.outputs)[0]

    def __str__(self):
        return self.source

    def __repr__(self):
        return f"<wengert SourceProgram {self.name}: {len(self.inputs)} inputs, {len(self.body)} nodes>"

    def flat_inputs(self, args):
        """The input values among ``args``, checked against what the program was built for."""
        if len(args) != len(self.params):
            raise TypeError(f"program {self.name}: takes {len(self.params)} arguments, got {len(args)}")
        values = []
        for a, p in zip(args, self.params):
            if type(p) is Variable:
                if np.shape(a) != p.shape:
                    raise ValueError(f"program {self.name}: argument {p.name} was shaped {p.shape} when the "
                                     f"program was built, got {np.shape(a)}; build it again for this shape")
                values.append(a)
            elif not (type(a) is type(p) and a == p):
                raise ValueError(f"program {self.name}: built for the static argument {p!r}, got {a!r}")
        return values

    def __call__(self, *args):
        """Run the program."""
        from wengert.api.tree import tree_unflatten

        if self._function is None:
            from wengert.program.source_inplace import update_in_place

            self._function = compile_block(self.name, self.inputs, update_in_place(self.body), self.outputs)
        out = self._function(*self.flat_inputs(args))
        return tree_unflatten(self.out_tree, [out] if len(self.outputs) == 1 else list(out))

    def grad(self, argnums=0, checkpoint="all", snapshots=None):
        """The gradient program (reverse mode, loops kept as loops; ``checkpoint``: see ``source_grad``)."""
        from wengert.program.source_adjoint import grad_source
        from wengert.program.source_checkpoint import check_policy

        check_policy(checkpoint, snapshots, f"Program.grad({self.name})")
        return grad_source(self, argnums, checkpoint=checkpoint, snapshots=snapshots)

    def jvp(self):
        """The forward-mode program: inputs, then one tangent per input."""
        from wengert.program.source_adjoint import jvp_source

        return jvp_source(self)
