"""Reverse mode: recording a primitive call as a graph node, and the backward pass over the graph.

A recorded value (a ``Tensor`` or a tape's ``Var``) *is* its graph node: it keeps the primitive
that made it, the arguments the VJP rules need (its own trace's boxes replaced by their values,
boxes of lower traces left in place so the rules' arithmetic is recorded there: grad of grad),
and its parents. The backward pass

- visits only nodes reachable from the output through parents, i.e. between the output and the
  inputs (what the output does not depend on was never reached, so its VJPs are never called);
- orders them by creation (a node is always created after its parents), without recursion;
- accumulates adjoints in buffers it owns, in place (``+=``) once it owns one, and never writes
  into an array it did not allocate (a user's array, a seed, another node's adjoint);
- drops each node's adjoint as soon as the node has been processed.
"""

import itertools
import operator

import numpy as np

from wengert.box import ArrayBox
from wengert.primitive import _ArgnumRule
from wengert.trace import BOX_TYPES, Trace

__all__ = ["Node", "ReverseTrace", "backward_pass", "is_inexact"]

node_ids = itertools.count()
"""Creation order of graph nodes: parents always have smaller ids than their children."""

_by_id = operator.attrgetter("_id")
_INEXACT = frozenset("fc")


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

    Leaves have ``_prim is None``. ``Tensor`` (PyTorch habits) and ``Var`` (the explicit tape)
    are its two public kinds.
    """

    __slots__ = ("value", "_trace", "_prim", "_args", "_kwargs", "_argnums", "_parents", "_id",
                 "requires_grad", "_grad", "name", "__weakref__")

    def __init__(self, value, trace, prim, args, kwargs, argnums, parents, requires_grad):
        self.value = value
        self._trace = trace
        self._prim = prim
        self._args = args
        self._kwargs = kwargs
        self._argnums = argnums
        self._parents = parents
        self._id = next(node_ids)
        self.requires_grad = requires_grad
        self._grad = None
        self.name = None


class ReverseTrace(Trace):
    """A reverse-mode recording. ``box_type`` is the class of its values (Tensor or Var)."""

    __slots__ = ("box_type",)

    def __init__(self, box_type):
        super().__init__()
        self.box_type = box_type

    def leaf(self, value):
        """A value to differentiate with respect to."""
        return self.box_type(value, self, None, None, None, (), (), True)

    def constant(self, value):
        """What a primitive returns when nothing of this trace is differentiated through it."""
        return value

    def record(self, prim, out, args, kwargs, argnums, parents):
        """Make the graph node for ``out = prim(*args, **kwargs)``."""
        return self.box_type(out, self, prim, args, kwargs, argnums, parents, True)

    def apply(self, prim, args, kwargs):
        unboxed = list(args)
        argnums = []
        parents = []
        nested = False
        vjps = prim.vjps
        any_rule = prim.vjp_argnum is not None
        for i, a in enumerate(args):
            if type(a) in BOX_TYPES:
                if a._trace is self:
                    v = a.value
                    unboxed[i] = v
                    if type(v) in BOX_TYPES:
                        nested = True
                    if a.requires_grad:
                        if not any_rule and (i >= len(vjps) or vjps[i] is None):
                            prim.vjp_rule(i)  # raises NoRuleError naming prim and argument
                        argnums.append(i)
                        parents.append(a)
                else:
                    nested = True
        out = prim(*unboxed, **kwargs) if nested else prim.fun(*unboxed, **kwargs)
        if not parents or not is_inexact(out):
            return self.constant(out)
        return self.record(prim, out, tuple(unboxed), kwargs or None, tuple(argnums), tuple(parents))


FREED = ("<freed by backward()>",)
"""Stands for the saved arguments of a node whose graph a non-retaining backward pass released."""


def _reachable(roots):
    """Every node reachable from ``roots`` through parents, children before parents."""
    seen = set()
    order = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        k = id(node)
        if k in seen:
            continue
        seen.add(k)
        order.append(node)
        stack.extend(node._parents)
    order.sort(key=_by_id, reverse=True)
    return order


def _accumulate(adj, owned, key, c):
    prev = adj.get(key)
    if prev is None:
        adj[key] = c
    elif key in owned and type(c) not in BOX_TYPES:
        np.add(prev, c, out=prev)
    else:
        s = prev + c
        adj[key] = s
        if type(s) is np.ndarray:
            owned.add(key)


def backward_pass(seeds, retain_graph=True, keep_all=False):
    """Propagate cotangents from ``seeds`` [(node, cotangent), ...] back to the leaves.

    Returns ``(adjoints, nodes)``: ``adjoints`` maps ``id(node)`` to its adjoint for every leaf
    reached (for every node if ``keep_all``); ``nodes`` are the nodes visited, children first.
    With ``retain_graph=False`` each node's saved arguments are released once processed.
    """
    order = _reachable([node for node, _ in seeds])
    adj = {}
    owned = set()
    for node, ct in seeds:
        _accumulate(adj, owned, id(node), ct)
    for node in order:
        prim = node._prim
        if prim is None:
            continue
        if node._args is FREED:
            raise RuntimeError(
                "Trying to backward through the graph a second time: its saved values were freed "
                "by the first backward(). Call backward(retain_graph=True) the first time.")
        k = id(node)
        g = adj.get(k) if keep_all else adj.pop(k, None)
        if g is None:
            continue
        args = node._args
        kw = node._kwargs
        out = node.value
        post = prim.grad_post
        by_argnum = prim.vjp_argnum
        for i, parent in zip(node._argnums, node._parents):
            rule = prim.vjps[i] if by_argnum is None else _ArgnumRule(by_argnum, i)
            c = rule(g, out, *args) if kw is None else rule(g, out, *args, **kw)
            if post is not None:
                c = post(c, args[i])
            _accumulate(adj, owned, id(parent), c)
        if not retain_graph:
            node._args = FREED
            node._kwargs = None
            node._argnums = node._parents = ()
    return adj, order
