"""Python source of structured blocks (``control``'s ``If``/``Loop``/``Assign``/``Push``/``Pop``
nodes around ``Statement``s): one module defining one function, written as ``codegen`` writes a
straight-line program, and that function compiled (``math`` for floats, NumPy where it raises).
A node of another kind renders itself (``render``: the checkpointed loops of ``source.checkpoint``).
"""

import numpy as np

from wengert.core.primitive import FLOAT_PATH_ERRORS
from wengert.program.codegen import Module, expression_source, module_head, statement_source
from wengert.program.ir import Statement, Variable, index_expr
from wengert.program.source.control import Assign, If, Loop, Pop, Push, Zeros, all_names, scalar_index
from wengert.rules.indexing import index_add, index_update

__all__ = ["STACK", "render_block", "render_loop", "block_source", "compile_block"]


STACK = "stack"


def targets_source(vs):
    return ", ".join(v.name for v in vs)


def values_source(vs, mod):
    return ", ".join(v.source() if type(v) is Zeros else mod.value(v) for v in vs)


def _statement(stmt, mod, safe):
    prim = stmt.prim
    if prim is index_update and not stmt.inplace:
        x, idx, v = stmt.args
        out = stmt.out.name
        if type(x) is Variable and x.kind == "array":
            return [f"{out} = {mod.value(x)}.copy()", f"{out}[{index_expr(idx, mod.value)}] = {mod.value(v)}"]
        return [f"{out} = np.array({mod.value(x)}, copy=True)",
                f"{out}[{index_expr(idx, mod.value)}] = {mod.value(v)}"]
    if prim is index_add and stmt.inplace and scalar_index(stmt.args[1]):
        buf, idx, e = stmt.args
        lines = [f"{buf.name}[{index_expr(idx, mod.value)}] += {mod.value(e)}"]
        return lines + ([f"{stmt.out.name} = {buf.name}"] if stmt.out is not buf else [])
    if prim is index_update and stmt.inplace:
        buf, idx, e = stmt.args
        lines = [f"{buf.name}[{index_expr(idx, mod.value)}] = {mod.value(e)}"]
        return lines + ([f"{stmt.out.name} = {buf.name}"] if stmt.out is not buf else [])
    if prim is index_add and stmt.inplace and stmt.out is not stmt.args[0]:
        buf, idx, e = stmt.args
        return [f"np.add.at({buf.name}, {mod.value(idx)}, {mod.value(e)})", f"{stmt.out.name} = {buf.name}"]
    return [statement_source(stmt, mod, safe)]


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
                lines.append(f"{pad}{targets_source(n.targets)} = {values_source(n.values, mod)}")
        elif t is Push:
            if n.vars:
                inner = n.vars[0].name if len(n.vars) == 1 else f"({targets_source(n.vars)})"
                lines.append(f"{pad}{STACK}.append({inner})")
        elif t is Pop:
            if n.vars:
                lines.append(f"{pad}{targets_source(n.vars)} = {STACK}.pop()")
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
            lines += render_loop(n, mod, indent, safe)
        elif hasattr(n, "render"):  # checkpointed loops (source/checkpoint.py)
            lines += n.render(mod, indent, safe)
        else:  # pragma: no cover - every node type is listed above
            raise TypeError(f"unknown node {t.__name__}")
    return lines


def render_loop(n, mod, indent, safe):
    """Source lines of a ``Loop`` node."""
    pad = "    " * indent
    inner = "    " * (indent + 1)
    lines = []
    if n.headers:
        lines.append(f"{pad}{targets_source(n.headers)} = {values_source(n.inits, mod)}")
    for h in n.fresh:  # the loop writes into it: its own copy, once
        lines.append(f"{pad}{h.name} = np.array({h.name}, copy=True)")
    for v, buf in n.stores:  # each iteration's value, for the reverse loop
        lines.append(f"{pad}{buf.name} = {_buffer(buf, mod)}  # {v.name} of each iteration")
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
            lines.append(f"{pad}while {expression_source(n.cond_block[0], mod, safe)[0]}:")
            body = []
        elif not n.cond_block:
            lines.append(f"{pad}while {mod.value(cond)}:")
            body = []
        else:
            lines.append(f"{pad}while True:")
            body = render_block(n.cond_block, mod, indent + 1, safe)
            body.append(f"{inner}if not {mod.value(cond)}:")
            body.append(f"{inner}    break")
    elif n.index is not None:  # the reverse loop, from the last iteration to the first
        lines.append(f"{pad}for {n.index.name} in range({mod.value(n.count)} - 1, -1, -1):")
        body = []
    else:
        lines.append(f"{pad}for _ in range({mod.value(n.count)}):")
        body = []
    body += render_block(n.body, mod, indent + 1, safe)
    body += render_block([Push(n.push)], mod, indent + 1, safe)
    body += [f"{inner}{buf.name}[{n.count.name}] = {mod.value(v)}" for v, buf in n.stores]
    if n.count is not None and n.kind != "repeat":
        body.append(f"{inner}{n.count.name} += 1")
    changed = [(h, o) for h, o in zip(n.headers, n.body_outs) if o is not h]
    if changed:
        headers, values = [h for h, _ in changed], [o for _, o in changed]
        body.append(f"{inner}{targets_source(headers)} = {values_source(values, mod)}")
    if n.brk is True:
        body.append(f"{inner}break")
    elif n.brk is not None:
        body.append(f"{inner}if {mod.value(n.brk)}:")
        body.append(f"{inner}    break")
    lines += body or [inner + "pass"]
    if n.outs:
        lines.append(f"{pad}{targets_source(n.outs)} = {values_source(n.headers, mod)}")
    return lines


def _buffer(buf, mod):
    """A new buffer for ``buf``'s values: a NumPy array on Numba (``mod.native``), a list in Python
    (its items stay Python floats and ints)."""
    if not getattr(mod, "native", False):
        return f"[None] * {buf.shape[0]}"
    name = "bool_" if buf.dtype.kind == "b" else buf.dtype.name
    kind = "" if buf.dtype == np.float64 else f", dtype=np.{name}"
    return f"np.empty({buf.shape[0]}{kind})"


def block_source(name, params, nodes, outputs, safe=False, stack=False, native=False):
    """A module defining ``def name(params)`` running ``nodes`` and returning ``outputs``;
    returns ``(text, module info)`` (see ``codegen.Module``); ``native``: in the form Numba runs
    best (buffers are NumPy arrays)."""
    mod = Module(all_names(nodes) | {p.name for p in params} | {STACK})
    mod.native = native
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
        except FLOAT_PATH_ERRORS:  # math's domain errors, 1.0 / 0.0: NumPy gives nan/inf instead
            if not slow:
                slow.append(build(True)[0])
            return slow[0](*args)

    run.__name__ = name
    return run
