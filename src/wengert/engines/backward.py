"""The fast backward pass over a reverse-mode recording (the nodes of ``wengert.engines.reverse``).

Its contract is the reference pass's (``wengert.engines.reference``, which the tests hold it to); what it
adds is cost:

- it visits only nodes reachable from the outputs, children first (by creation order, or the
  trace's Wengert list read backwards), without recursion;
- adjoints accumulate in buffers the pass owns, in place, never into an array it did not allocate
  (``accumulation.accumulate``); accumulate rules (``x[idx]``: ``buffer[idx] += g``) make indexing
  adjoints O(len(g)); float contributions to reads ``v[i]`` gather in a Python list per v, added
  into v's adjoint in one step;
- on Python floats a primitive's fused float rule (``float_vjp``) gives all its arguments'
  contributions in one call, and ``*``, ``+`` and ``v[i]`` have their rules written inline;
- an in-place rule (``vjp_inplace``) may overwrite a cotangent nothing else refers to;
- each node's adjoint is dropped once it is processed (and its saved values, without
  ``retain_graph``); references to boxes assigned to since (``x[i] = v``) are first pointed at the
  versions they meant (``mutation.py``), and eager arrays overwritten after being saved are refused.
"""

import gc
import operator

import numpy as np

from wengert.core.primitive import FLOAT_PATH_ERRORS, on_float64
from wengert.core.trace import GC_PAUSES, gc_paused
from wengert.engines.accumulation import FREED, accumulate, alone, apply_inplace, extra_rules, release
from wengert.engines.escaped import LIVE, notice_writes
from wengert.engines.mutation import (
    INPLACE_WRITES,
    check_inplace_writes,
    leaf_aliases,
    resolve_parents,
    resolve_tape,
    versions_by_box,
)
from wengert.engines.saving import forget_pending, sweep
from wengert.engines.scalar import FREED_INPUT, SCALAR_TYPES, UNARY, split_input
from wengert.rules import elementwise as ew
from wengert.rules.indexing import getitem

__all__ = ["backward_pass"]

_ADD = ew.add.primitive
_MUL = ew.multiply.primitive
_GETITEM = getitem.primitive
_by_id = operator.attrgetter("_id")


def backward_pass(seeds, retain_graph=True, keep_all=False, tape=None):
    """Propagate cotangents from ``seeds`` [(node, cotangent), ...] back to the leaves.

    The nodes are read children first: from ``tape`` (the trace's Wengert list, read backwards)
    when the trace keeps one, else found by walking the graph from the seeds. Either way a VJP is
    called only for a node that received an adjoint, i.e. one the seeds depend on.

    Returns ``(adjoints, nodes)``: ``adjoints`` maps each leaf reached (each node reached, if
    ``keep_all``) to its adjoint; ``nodes`` are the nodes read (the tape, when given). With
    ``retain_graph=False`` each node's saved arguments are released once processed.
    """
    if seeds:
        _settle(seeds[0][0]._trace, retain_graph)
    order, aliases = _children_first(seeds, tape)
    adj = {}
    owned = set()  # nodes whose adjoint is a buffer this pass allocated: safe to add into in place
    for node, ct in seeds:
        accumulate(adj, owned, node, ct)
    if gc.isenabled() and not GC_PAUSES[0]:  # (inside a pause the collector may run vetted young collections)
        with gc_paused():
            _propagate(order, adj, owned, retain_graph, keep_all)
    else:  # already paused (the transforms pause it around the whole call) or turned off
        _propagate(order, adj, owned, retain_graph, keep_all)
    for box, leaf in aliases:  # a leaf that was assigned to answers for its original value
        g = adj.get(leaf)
        if g is None:
            adj.pop(box, None)
        else:
            adj[box] = g
    return adj, (order if tape is None else tape)


def _propagate(order, adj, owned, retain_graph, keep_all):
    """The pass proper: each node of ``order`` that received an adjoint gives its parents theirs.

    A float cotangent takes the scalar hot path, inline: ``x + y`` and ``x * y`` on Python floats
    (float arithmetic never raises), ``v[i]`` (into v's list), and fused float rules, each giving at
    most two parents ``px``, ``py`` their contributions ``cx``, ``cy``, added in one place below; a
    :class:`ScalarNode` is read through its inputs, any other node through its tuples. Anything else
    (and where math refuses) takes the ordinary rules."""
    take = adj.get if keep_all else adj.pop
    scalar_types = SCALAR_TYPES
    reads_direct = not keep_all  # keep_all reports every read's adjoint: none may be skipped
    reads = {}  # v -> [float contributions of its reads v[i], by i] (``_into_reads``)
    for node in order:
        prim = node._prim
        if prim is None:  # a leaf
            continue
        if reads and node in reads:
            _flush_reads(reads, adj, owned, node)
        g = take(node, None)
        if g is None:  # nothing flows through this node
            continue
        scalar = type(node) in scalar_types
        if scalar:
            if node._y is FREED_INPUT:
                raise RuntimeError(_FREED_MESSAGE)
        elif node._args is FREED:
            raise RuntimeError(_FREED_MESSAGE)
        if type(g) is float:
            contributions = None
            if prim is _GETITEM:
                if _into_reads(reads, node, g):
                    if not retain_graph:
                        release(node)
                    continue
            elif scalar:
                y = node._y
                if y is UNARY:  # sin(x): x is the parent, by its fused float rule
                    x = node._x
                    vjp = prim.float_vjp
                    ax = x.value
                    if vjp is not None and type(ax) is float:
                        try:
                            contributions = x, vjp(g, node.value, ax), None, None
                        except (ArithmeticError, ValueError):
                            pass  # math raised where NumPy gives inf or nan: the ordinary rules
                elif prim is _ADD:  # add's rules give g itself, and a float needs no fitting
                    x = node._x
                    tx = type(x)
                    ty = type(y)
                    contributions = (None if tx is float or tx is int else x, g,
                                     None if ty is float or ty is int else y, g)
                elif prim is _MUL:  # g * y and g * x: _binary_step's, inline (a scalar loop's commonest)
                    x = node._x
                    tx = type(x)
                    ty = type(y)
                    ax = x if tx is float or tx is int else x.value
                    ay = y if ty is float or ty is int else y.value
                    if type(ax) is float and type(ay) is float:
                        contributions = (None if ax is x else x, g * ay, None if ay is y else y, g * ax)
                else:
                    contributions = _binary_step(node._x, y, prim, g, node)
            else:
                args = node._args
                if prim is _ADD:
                    px, py = node._parents
                    contributions = px, g, py, g
                elif prim is _MUL and type(args[0]) is float and type(args[1]) is float:
                    px, py = node._parents
                    contributions = px, g * args[1], py, g * args[0]
                elif prim.float_vjp is not None:
                    if len(args) == 1 and type(args[0]) is float:  # sin(x): one contribution
                        try:
                            c = prim.float_vjp(g, node.value, args[0])
                            contributions = node._parents[0], c, None, None
                        except (ArithmeticError, ValueError):
                            pass
                    elif _fused_float_step(node, prim, g, args, adj, owned):
                        if not retain_graph:
                            release(node)
                        continue
            if contributions is not None:
                px, cx, py, cy = contributions
                if px is not None:
                    if not (reads_direct and px._prim is _GETITEM and _into_reads(reads, px, cx)):
                        prev = adj.get(px)
                        if prev is None:
                            adj[px] = cx
                        elif type(prev) is float and type(cx) is float:
                            adj[px] = prev + cx
                        else:
                            accumulate(adj, owned, px, cx)
                if py is not None:
                    if not (reads_direct and py._prim is _GETITEM and _into_reads(reads, py, cy)):
                        prev = adj.get(py)
                        if prev is None:
                            adj[py] = cy
                        elif type(prev) is float and type(cy) is float:
                            adj[py] = prev + cy
                        else:
                            accumulate(adj, owned, py, cy)
                if not retain_graph:
                    release(node)
                continue
        if not (prim.vjp_inplace is not None and type(g) is np.ndarray and alone(g)
                and apply_inplace(prim, node, g, adj, owned)):
            _apply_rules(node, prim, g, adj, owned)  # (a ScalarNode's through its tuples' views)
        if not retain_graph:
            release(node)
    while reads:  # the leaves' (and nodes' not read in order)
        _flush_reads(reads, adj, owned, next(iter(reads)))


_FREED_MESSAGE = ("Trying to backward through the graph a second time: its saved values were freed by the "
                  "first backward(). Call backward(retain_graph=True) the first time.")


def _binary_step(x, y, prim, g, node):
    """A two-input :class:`ScalarNode`'s contributions for a float cotangent ``g`` (but ``+``'s and
    ``*``'s, inline in ``_propagate``): ``(px, cx, py, cy)``, its parents (None for a constant input)
    and their contributions by the fused float rule (``float_vjp``); None: take the ordinary rules."""
    px, ax = split_input(x)
    py, ay = split_input(y)
    if type(ax) is not float or type(ay) is not float:
        return None
    vjp = prim.float_vjp
    if vjp is None:
        return None
    try:
        cx, cy = vjp(g, node.value, ax, ay)
    except (ArithmeticError, ValueError):
        return None  # math raised where NumPy gives inf or nan: the ordinary rules
    return px, cx, py, cy


def _settle(trace, retain_graph):
    """Release the outputs the graph alone refers to (``saving.sweep``), and stop that on a trace whose
    graph this pass may rewrite (assignments' versions, or freeing without ``retain_graph``)."""
    if getattr(trace, "pending", None):
        sweep(trace)
        if not retain_graph or trace.mutations:
            forget_pending(trace)


def _children_first(seeds, tape):
    """The nodes to read, children first, and the aliases of assigned leaves (``mutation.py``)."""
    log = versions_by_box(seeds[0][0]._trace) if seeds else None
    aliases = ()
    if log:  # boxes were assigned to (x[i] = v): point old references at the versions they meant
        aliases = leaf_aliases(log) if tape is None else resolve_tape(tape, log)
    if tape is not None:
        return reversed(tape), aliases
    order = _reachable([node for node, _ in seeds], log)
    if LIVE:  # arrays handed out by Tensor.numpy(): a write through one since is an in-place write
        notice_writes()
    if INPLACE_WRITES:
        check_inplace_writes(order)
    return order, aliases


def _reachable(roots, log=None):
    """Every node reachable from ``roots`` through parents, children before parents (with ``log``,
    references to boxes assigned to since are first pointed at the versions they meant)."""
    seen = set()
    order = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in seen:  # nodes hash by identity
            continue
        seen.add(node)
        order.append(node)
        if log:
            resolve_parents(node, log)
        stack.extend(p for p in node._parents if p is not None and p not in seen)
    order.sort(key=_by_id, reverse=True)
    return order


def _fused_float_step(node, prim, g, args, adj, owned):
    """All arguments' contributions by ``prim``'s fused float rule (``float_vjp``), when every
    argument is a Python float (two or more: one is inline in ``_propagate``); False: take the
    ordinary rules."""
    for a in args:
        if type(a) is not float:
            return False
    try:
        cs = prim.float_vjp(g, node.value, *args)
    except (ArithmeticError, ValueError):
        return False
    for parent, c in zip(node._parents, cs):
        if parent is not None:
            accumulate(adj, owned, parent, c)
    return True


def _into_reads(reads, read, c):
    """Add ``c``, a float contribution to ``read`` = ``v[i]`` (an int ``i``, a float element), into
    the list of v's float contributions at ``i`` (made here, zeros, at the first), which the pass
    adds into v's adjoint before v's own step (``_flush_reads``); True when done. A Python list's
    ``acc[i] += c`` costs a fraction of an array's, and an element's adjoint stays O(1)."""
    if type(read.value) is not float:
        return False
    if type(read) in SCALAR_TYPES:
        i = read._y
        source = read._x
        if type(i) is not int:  # freed
            return False
        v = source.value
    else:
        args = read._args
        i = args[-1]
        if type(i) is not int:  # a tuple index (v[i, j]), or the node was freed
            return False
        source = read._parents[0]
        v = args[0]
    acc = reads.get(source)
    if acc is None:
        acc = reads[source] = [0.0] * v.shape[0]  # the array, or its shape where not saved
    acc[i] += c
    return True


def _flush_reads(reads, adj, owned, source):
    """Add the float contributions gathered for reads of ``source`` into its adjoint."""
    accumulate(adj, owned, source, np.array(reads.pop(source)))


def _apply_rules(node, prim, g, adj, owned):
    """Each differentiated argument's contribution by ``prim``'s rules: accumulate rules first (done
    by ``extra_rules``), then the ordinary VJP rules and ``grad_post``."""
    rules = prim.vjps if prim.vjp_extra is None else extra_rules(prim, node, g, adj, owned)
    args = node._args
    kw = node._kwargs
    out = node.value
    post = prim.grad_post
    for rule, parent, arg in zip(rules, node._parents, args):
        if parent is None:
            continue
        try:
            c = rule(g, out, *args) if kw is None else rule(g, out, *args, **kw)
        except FLOAT_PATH_ERRORS as e:  # a rule's float arithmetic refused (1.0 / 0.0)
            c = on_float64(rule, (g, out, *args), kw, e)
        if post is not None and type(c) is not float:  # floats: nothing to fit
            c = post(c, arg)
        if parent in adj:
            accumulate(adj, owned, parent, c)
        else:  # the first contribution, stored as it is (accumulate's first case, without its call)
            adj[parent] = c
