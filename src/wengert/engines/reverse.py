"""Reverse mode: recording a primitive call as a graph node, and the backward pass over the graph.

A recorded value (a ``Tensor`` or a tape's ``Var``) *is* its graph node: it keeps the primitive
that made it, the arguments the VJP rules need (its own trace's boxes replaced by their values,
boxes of lower traces left in place so the rules' arithmetic is recorded there: grad of grad),
and its parents. The backward pass

- visits only nodes reachable from the output through parents, i.e. between the output and the
  inputs (what the output does not depend on was never reached, so its VJPs are never called);
- orders them by creation (a node is always created after its parents), without recursion;
- accumulates adjoints in buffers it owns, in place (``+=``) once it owns one, and never writes
  into an array it did not allocate (a user's array, a seed, another node's adjoint); a primitive
  with an accumulate rule (``x[idx]``) adds straight into its argument's buffer in a first-order
  pass (``buffer[idx] += g``: an O(n) indexing adjoint); a float contribution to a
  read ``v[i]`` from ``*`` or ``+`` goes into that buffer directly, the read itself then skipped
  (not with ``keep_all``, which reports every node's adjoint);
- first points references to boxes that were assigned to (``x[i] = v``, see ``mutation.py``) at
  the versions they meant, and refuses eager arrays overwritten in place after being saved;
- drops each node's adjoint as soon as the node has been processed;
- on Python floats, calls a primitive's fused float rule (``defvjp_float``) once for all its
  arguments instead of its per-argument rules; where a float path raises (``1.0 / 0.0`` in a rule,
  ``math.log(0.0)``), that step is done again on ``np.float64``, giving NumPy's inf or nan (see
  ``wengert.core.primitive``);
- records the commonest scalar steps in the node's own methods (``x[i]`` with an int ``i``, ``+`` and
  ``*`` on recorded floats), skipping the primitive's entry point and ``apply2``; the same nodes;
- lets a primitive's in-place rule (``defvjp_inplace``) overwrite a cotangent that nothing but
  the pass refers to (ReLU's backward needs no new array).
"""

import gc
import operator

import numpy as np

from wengert.core.primitive import FLOAT_PATH_ERRORS, explained, on_float64
from wengert.core.trace import BOX_TYPES, Trace, gc_paused  # noqa: F401 - gc_paused: imported from here too
from wengert.engines.adjoints import (
    FREED,
    add_contribution,
    add_into,
    alone,
    apply_inplace,
    extra_rules,
    release,
)
from wengert.engines.box import ArrayBox
from wengert.engines.mutation import (
    INPLACE_WRITES,
    check_inplace_writes,
    leaf_aliases,
    node_ids,
    resolve_parents,
    resolve_tape,
    versions_by_box,
)
from wengert.rules import elementwise as ew
from wengert.rules.indexing import getitem as _getitem

__all__ = ["Node", "ReverseTrace", "backward_pass", "is_inexact"]

"""Creation order of graph nodes: parents always have smaller ids than their children."""

_by_id = operator.attrgetter("_id")
_new = object.__new__
_INEXACT = frozenset("fc")
_float64 = np.float64
_GETITEM = _getitem.primitive
_add = ew.add
_mul = ew.multiply
_ADD = ew.add.primitive
_MUL = ew.multiply.primitive


def is_inexact(x):
    """Whether ``x`` is float or complex: only such values carry derivatives."""
    t = type(x)
    if t is float or t is complex:
        return True
    try:
        return x.dtype.kind in _INEXACT
    except AttributeError:
        return False


class Node(ArrayBox):
    """A recorded value: primal ``value`` plus what the backward pass needs (see module docs).

    ``_parents`` is aligned with ``_args``: the parent node for a differentiated argument, None
    for a constant. Leaves have ``_prim is None``. ``Tensor`` (PyTorch habits) and ``Var`` (the
    explicit tape) are its two public kinds.
    """

    __slots__ = ("value", "_trace", "_prim", "_args", "_kwargs", "_parents", "_id",
                 "requires_grad", "__weakref__")  # kinds add theirs (Tensor: _grad; Var: name)

    # No __init__: the hot paths below make a node with ``trace.box_type()`` (about 25 ns less than
    # object.__new__, which an __init__ would force on them) and fill its slots; elsewhere
    # ``Kind.make(...)`` does both.

    @classmethod
    def make(cls, value, trace, prim, args, kwargs, parents, requires_grad):
        """A new node of this kind (``args`` unboxed, ``parents`` aligned with them)."""
        return _new(cls)._fill(value, trace, prim, args, kwargs, parents, requires_grad)

    def _fill(self, value, trace, prim, args, kwargs, parents, requires_grad):
        self.value = value
        self._trace = trace
        self._prim = prim
        self._args = args
        self._kwargs = kwargs
        self._parents = parents
        self._id = next(node_ids)
        self.requires_grad = requires_grad
        return self

    # Two recorded Python floats of one trace (a scalar loop's arithmetic): recorded right here,
    # without the primitive's entry and apply2 (their checks are the ones below). Anything else
    # goes there as before. The node is filled inline, not by _float_node: the call cost 3% of the
    # indexing loop (callgrind, 33.7k against 32.7k instructions per element).
    def __add__(self, other):
        if type(other) is type(self):
            x = self.value
            y = other.value
            if type(x) is float and type(y) is float:
                trace = self._trace
                if (other._trace is trace and trace.records_inline and self.requires_grad
                        and other.requires_grad):
                    node = trace.box_type()
                    node.value = x + y
                    node._trace = trace
                    node._prim = _ADD
                    node._args = (x, y)
                    node._kwargs = None
                    node._parents = (self, other)
                    node.requires_grad = True
                    entries = trace.entries
                    if entries is None:
                        node._id = next(node_ids)
                    else:
                        entries.append(node)
                    return node
        return _add(self, other)

    def __mul__(self, other):
        if type(other) is type(self):
            x = self.value
            y = other.value
            if type(x) is float and type(y) is float:
                trace = self._trace
                if (other._trace is trace and trace.records_inline and self.requires_grad
                        and other.requires_grad):
                    node = trace.box_type()
                    node.value = x * y
                    node._trace = trace
                    node._prim = _MUL
                    node._args = (x, y)
                    node._kwargs = None
                    node._parents = (self, other)
                    node.requires_grad = True
                    entries = trace.entries
                    if entries is None:
                        node._id = next(node_ids)
                    else:
                        entries.append(node)
                    return node
        return _mul(self, other)

    def __rmul__(self, other):  # a float constant times a recorded float (0.5 * sin(z))
        if type(other) is float:
            y = self.value
            if type(y) is float:
                trace = self._trace
                if trace.records_inline and self.requires_grad:
                    return _float_node(trace, _MUL, other * y, other, y, None, self)
        return _mul(other, self)

    def __getitem__(self, idx):
        # v[i], a Python int i, on a recorded array (a loop's reads): recorded right here, apply2's
        # work for getitem without its generic checks and calls (about a third of a read's cost);
        # a float64 element is a Python float, as getitem's implementation makes it. Anything else
        # as every box does. The node's slots are filled here rather than by _float_node: one call
        # less on the hottest read path (a loop's v[i]), as in apply1/apply2.
        if type(idx) is int:
            trace = self._trace
            v = self.value
            if type(v) is np.ndarray and trace.records_inline and self.requires_grad:
                out = v[idx]
                if type(out) is _float64:
                    out = float(out)
                elif not is_inexact(out):
                    return out  # the trace's constant (records_inline: the plain value)
                node = trace.box_type()
                node.value = out
                node._trace = trace
                node._prim = _GETITEM
                node._args = (v, idx)
                node._kwargs = None
                node._parents = (self, None)
                node.requires_grad = True
                entries = trace.entries
                if entries is None:
                    node._id = next(node_ids)
                else:
                    entries.append(node)
                return node
            return trace.apply2(_GETITEM, self, idx)
        return ArrayBox.__getitem__(self, idx)


def _float_node(trace, prim, out, x, y, px, py):
    """The node ``prim(px, py) = out`` of two recorded floats ``x``, ``y`` (as apply2 makes it)."""
    node = trace.box_type()
    node.value = out
    node._trace = trace
    node._prim = prim
    node._args = (x, y)
    node._kwargs = None
    node._parents = (px, py)
    node.requires_grad = True
    entries = trace.entries
    if entries is None:
        node._id = next(node_ids)
    else:
        entries.append(node)
    return node


class ReverseTrace(Trace):
    """A reverse-mode recording. ``box_type`` is the class of its values (Tensor or Var);
    ``entries``, when a list, receives every recorded node in order (the explicit tape)."""

    __slots__ = ("box_type", "entries", "mutations", "records_inline")

    def __init__(self, box_type):
        super().__init__()
        self.box_type = box_type
        # Node's methods may record x[i], + and * themselves (constants are plain values). A slot,
        # not a class attribute: read on every recorded scalar step, and a slot reads faster.
        self.records_inline = True
        self.entries = None
        self.mutations = None  # assignments to its boxes (see mutation.py), logged when there are any

    def leaf(self, value):
        """A value to differentiate with respect to."""
        return self.box_type.make(value, self, None, None, None, (), True)

    def constant(self, value):
        """What a primitive returns when nothing of this trace is differentiated through it."""
        return value

    def apply(self, prim, args, kwargs):
        unboxed = list(args)
        parents = [None] * len(unboxed)
        found = nested = False
        missing = prim.vjp_missing
        i = 0
        for a in args:
            if type(a) in BOX_TYPES:
                if a._trace is self:
                    v = a.value
                    unboxed[i] = v
                    if type(v) in BOX_TYPES:
                        nested = True
                    if a.requires_grad:
                        if i in missing:
                            prim.vjp_rule(i)  # raises NoRuleError naming prim and argument
                        parents[i] = a
                        found = True
                else:
                    nested = True
            i += 1
        if nested:
            out = prim(*unboxed, **kwargs)
        else:
            try:
                out = prim.fun(*unboxed, **kwargs)
            except ValueError as e:
                raise explained(prim, unboxed, e) from e
        if not found or (type(out) is not float and not is_inexact(out)):
            return self.constant(out)
        node = self.box_type.make(out, self, prim, tuple(unboxed), kwargs or None, tuple(parents), True)
        if self.entries is not None:
            self.entries.append(node)
        return node

    # The two specialisations below do what ``apply`` does for the common case -- every box is
    # this trace's own, no nesting, no keywords -- and defer to ``apply`` for anything else.
    # They fill the node's slots inline, and apply2 unboxes x and y in two mirrored blocks, rather
    # than through shared helpers or a loop, on purpose: this is the per-operation hot path, where
    # one extra call costs about 5% of a recorded scalar operation (measured on the scalar chain).

    def apply1(self, prim, x, kwargs=None):
        v = x.value
        if type(v) in BOX_TYPES or not x.requires_grad:
            return self.apply(prim, (x,), kwargs or {})
        if kwargs:
            out = prim.fun(v, **kwargs)
        elif type(v) is float and prim.float_fun is not None:
            try:
                out = prim.float_fun(v)  # math's function, without the implementation's wrapper
            except FLOAT_PATH_ERRORS:  # where math refuses, NumPy's answer, as a float
                out = float(prim.fun(_float64(v)))
        else:
            out = prim.fun(v)
        if type(out) is not float and not is_inexact(out):
            return self.constant(out)
        if 0 in prim.vjp_missing:
            prim.vjp_rule(0)
        node = self.box_type()
        node.value = out
        node._trace = self
        node._prim = prim
        node._args = (v,)
        node._kwargs = kwargs or None
        node._parents = (x,)
        node.requires_grad = True
        entries = self.entries
        if entries is None:
            node._id = next(node_ids)
        else:
            entries.append(node)
        return node

    def apply2(self, prim, x, y):
        if type(x) in BOX_TYPES:
            if x._trace is not self or not x.requires_grad or type(x.value) in BOX_TYPES:
                return self.apply(prim, (x, y), {})
            vx = x.value
            px = x
        else:
            vx = x
            px = None
        if type(y) in BOX_TYPES:
            if y._trace is not self or not y.requires_grad or type(y.value) in BOX_TYPES:
                return self.apply(prim, (x, y), {})
            vy = y.value
            py = y
        else:
            vy = y
            py = None
        op = prim.float_fun
        if op is not None and type(vx) is float and type(vy) is float:
            try:
                out = op(vx, vy)  # the operator itself, without the implementation's wrapper
            except FLOAT_PATH_ERRORS:  # 1.0 / 0.0: NumPy's answer, as a float
                out = float(prim.fun(_float64(vx), _float64(vy)))
        else:
            try:
                out = prim.fun(vx, vy)
            except ValueError as e:
                raise explained(prim, (vx, vy), e) from e
        if type(out) is not float and not is_inexact(out):
            return self.constant(out)
        missing = prim.vjp_missing
        if missing:
            if px is not None and 0 in missing:
                prim.vjp_rule(0)
            if py is not None and 1 in missing:
                prim.vjp_rule(1)
        node = self.box_type()
        node.value = out
        node._trace = self
        node._prim = prim
        node._args = (vx, vy)
        node._kwargs = None
        node._parents = (px, py)
        node.requires_grad = True
        entries = self.entries
        if entries is None:
            node._id = next(node_ids)
        else:
            entries.append(node)
        return node


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
        for p in node._parents:
            if p is not None and p not in seen:
                stack.append(p)
    order.sort(key=_by_id, reverse=True)
    return order


def backward_pass(seeds, retain_graph=True, keep_all=False, tape=None):
    """Propagate cotangents from ``seeds`` [(node, cotangent), ...] back to the leaves.

    The nodes are read children first: from ``tape`` (the trace's Wengert list, read backwards)
    when the trace keeps one, else found by walking the graph from the seeds. Either way a VJP is
    called only for a node that received an adjoint, i.e. one the seeds depend on.

    Returns ``(adjoints, nodes)``: ``adjoints`` maps each leaf reached (each node reached, if
    ``keep_all``) to its adjoint; ``nodes`` are the nodes read (the tape, when given). With
    ``retain_graph=False`` each node's saved arguments are released once processed.
    """
    log = versions_by_box(seeds[0][0]._trace) if seeds else None
    aliases = ()
    if log:  # boxes were assigned to (x[i] = v): point old references at the versions they meant
        aliases = leaf_aliases(log) if tape is None else resolve_tape(tape, log)
    if tape is None:
        order = _reachable([node for node, _ in seeds], log)
        if INPLACE_WRITES:
            check_inplace_writes(order)
    else:
        order = reversed(tape)
    adj = {}
    owned = set()  # nodes whose adjoint is a buffer this pass allocated: safe to add into in place
    for node, ct in seeds:
        add_contribution(adj, owned, node, ct)
    take = adj.get if keep_all else adj.pop
    reads_direct = not keep_all
    # The collector is paused as by gc_paused, but inline (a pass per call, often on tiny graphs):
    # a pass turns back on only what it turned off itself, so across threads the collector always
    # ends up on again; another thread's pause may merely end early.
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        for node in order:
            prim = node._prim
            if prim is None:
                continue
            g = take(node, None)
            if g is None:
                continue
            args = node._args
            if args is FREED:
                raise RuntimeError(
                    "Trying to backward through the graph a second time: its saved values were "
                    "freed by the first backward(). Call backward(retain_graph=True) the first time.")
            if type(g) is float:
                if prim is _MUL or prim is _ADD:
                    # the commonest scalar steps (a loop's arithmetic), their fused rules inline;
                    # Python float arithmetic never raises, so no fallback is needed
                    x, y = args
                    if type(x) is float and type(y) is float:
                        if prim is _MUL:
                            cx = g * y
                            cy = g * x
                        else:
                            cx = cy = g
                        # px and py in two mirrored blocks, not a helper: a call per contribution
                        # would cost what writing a read's share straight into v's buffer saves
                        px, py = node._parents
                        if px is not None:
                            if px._prim is _GETITEM and reads_direct:
                                i = px._args[-1]
                                src = px._parents[0]
                                buf = adj.get(src)
                                if (buf is not None and type(i) is int and type(px.value) is float
                                        and type(buf) is np.ndarray and src in owned):
                                    buf[i] = buf.item(i) + cx
                                    px = None
                            if px is not None:
                                prev = adj.get(px)
                                if prev is None:
                                    adj[px] = cx
                                elif type(prev) is float:
                                    adj[px] = prev + cx
                                else:
                                    add_into(adj, owned, px, prev, cx)
                        if py is not None:
                            if py._prim is _GETITEM and reads_direct:
                                i = py._args[-1]
                                src = py._parents[0]
                                buf = adj.get(src)
                                if (buf is not None and type(i) is int and type(py.value) is float
                                        and type(buf) is np.ndarray and src in owned):
                                    buf[i] = buf.item(i) + cy
                                    py = None
                            if py is not None:
                                prev = adj.get(py)
                                if prev is None:
                                    adj[py] = cy
                                elif type(prev) is float:
                                    adj[py] = prev + cy
                                else:
                                    add_into(adj, owned, py, prev, cy)
                        if not retain_graph:
                            release(node)
                        continue
                elif prim is _GETITEM:
                    # v[i], a Python int i, in a first-order pass (a loop's reads): buffer[i] += g
                    # inline, where the buffer is made and owned (getitem's accumulate rule, without
                    # its call). A float element means a 1-D float64 v; buf.item(i) + g costs less
                    # than buf[i] += g.
                    i = args[-1]
                    if type(i) is int and type(node.value) is float:
                        parent = node._parents[0]
                        buf = adj.get(parent)
                        if buf is not None and type(buf) is np.ndarray and parent in owned:
                            buf[i] = buf.item(i) + g
                            if not retain_graph:
                                release(node)
                            continue
                fused = prim.float_vjp
                if fused is not None:
                    # Python floats throughout (the scalar hot path): one call of the fused rule
                    # gives every argument's contribution (see primitive.defvjp_float). Written out
                    # per arity, without helpers or a loop: this saves about a quarter of a
                    # recorded scalar op.
                    if len(args) == 2:
                        x, y = args
                        if type(x) is float and type(y) is float:
                            try:
                                cx, cy = fused(g, node.value, x, y)
                            except (ArithmeticError, ValueError):
                                pass  # math raised where NumPy gives inf or nan: the ordinary rules
                            else:
                                px, py = node._parents
                                if px is not None:
                                    prev = adj.get(px)
                                    if prev is None:
                                        adj[px] = cx
                                    elif type(prev) is float:
                                        adj[px] = prev + cx
                                    else:
                                        add_into(adj, owned, px, prev, cx)
                                if py is not None:
                                    prev = adj.get(py)
                                    if prev is None:
                                        adj[py] = cy
                                    elif type(prev) is float:
                                        adj[py] = prev + cy
                                    else:
                                        add_into(adj, owned, py, prev, cy)
                                if not retain_graph:
                                    release(node)
                                continue
                    elif len(args) == 1 and type(args[0]) is float:
                        try:
                            cx = fused(g, node.value, args[0])
                        except (ArithmeticError, ValueError):
                            pass
                        else:
                            px = node._parents[0]
                            prev = adj.get(px)
                            if prev is None:
                                adj[px] = cx
                            elif type(prev) is float:
                                adj[px] = prev + cx
                            else:
                                add_into(adj, owned, px, prev, cx)
                            if not retain_graph:
                                release(node)
                            continue
            kw = node._kwargs
            out = node.value
            post = prim.grad_post
            if prim.vjp_extra is None:
                rules = prim.vjps
            else:  # one rule for all arguments, accumulate rules (x[idx]), or in-place rules
                if (prim.vjp_inplace is not None and type(g) is np.ndarray and alone(g)
                        and apply_inplace(prim, node, g, adj, owned)):
                    if not retain_graph:
                        release(node)
                    continue
                acc = prim.vjp_accumulate
                if acc is not None and len(prim.vjps) == 1 and type(g) is float:
                    # the common case inline (v[i] in a loop): one differentiable argument, which
                    # accumulates, a float g, and the buffer already made and owned
                    parent = node._parents[0]
                    buf = adj.get(parent)
                    if buf is not None and parent in owned and type(buf) is np.ndarray:
                        if kw is None:
                            acc[0](buf, g, out, *args)
                        else:
                            acc[0](buf, g, out, *args, **kw)
                        if not retain_graph:
                            node._args = FREED
                            node._kwargs = None
                            node._parents = ()
                        continue
                rules = extra_rules(prim, node, g, adj, owned)
            parents = node._parents
            if kw is None and len(parents) == 2 and len(rules) == 2:
                # two arguments, no keywords (most array operations): unrolled, without zip and
                # star-arguments, as for floats above
                x, y = args
                px, py = parents
                if px is not None:
                    try:
                        c = rules[0](g, out, x, y)
                    except FLOAT_PATH_ERRORS as e:  # a rule's float arithmetic refused (1.0 / 0.0)
                        c = on_float64(rules[0], (g, out, x, y), None, e)
                    if post is not None and type(c) is not float:
                        c = post(c, x)
                    prev = adj.get(px)
                    if prev is None:
                        adj[px] = c
                    else:
                        add_into(adj, owned, px, prev, c)
                if py is not None:
                    try:
                        c = rules[1](g, out, x, y)
                    except FLOAT_PATH_ERRORS as e:
                        c = on_float64(rules[1], (g, out, x, y), None, e)
                    if post is not None and type(c) is not float:
                        c = post(c, y)
                    prev = adj.get(py)
                    if prev is None:
                        adj[py] = c
                    else:
                        add_into(adj, owned, py, prev, c)
                if not retain_graph:
                    release(node)
                continue
            for rule, parent, arg in zip(rules, parents, args):
                if parent is None:
                    continue
                try:
                    c = rule(g, out, *args) if kw is None else rule(g, out, *args, **kw)
                except FLOAT_PATH_ERRORS as e:  # a rule's float arithmetic refused (1.0 / 0.0)
                    c = on_float64(rule, (g, out, *args), kw, e)
                if post is not None and type(c) is not float:  # floats: nothing to fit
                    c = post(c, arg)
                prev = adj.get(parent)
                if prev is None:
                    adj[parent] = c
                elif type(prev) is float and type(c) is float:
                    adj[parent] = prev + c
                else:
                    add_into(adj, owned, parent, prev, c)
            if not retain_graph:
                node._args = FREED
                node._kwargs = None
                node._parents = ()
    finally:
        if collecting:
            gc.enable()
    for box, leaf in aliases:  # a leaf that was assigned to answers for its original value
        g = adj.get(leaf)
        if g is None:
            adj.pop(box, None)
        else:
            adj[box] = g
    return adj, (order if tape is None else tape)
