"""The backward pass, written to be read: the specification that the fast pass is tested against.

Reverse mode on a recorded graph (a Wengert list): every node holds its primitive, its arguments
and its parents (the nodes those arguments came from). Given seeds -- output nodes and their
cotangents -- the pass visits the nodes children first (the reverse of the order they were recorded
in) and, for each node that received an adjoint ``g``, adds each argument's contribution into the
parent's adjoint::

    adjoint[parent_i] += prim.grad_post(vjp_rule_i(g, out, *args, **kwargs), arg_i)

``vjp_rule_i`` is the primitive's ordinary VJP rule for argument i (written with wengert's own
functions, so that the pass is differentiable again: under an outer trace the contributions are
recorded), and ``grad_post`` fits a contribution to its argument (the adjoint of broadcasting).
That is all: no rule is fused, nothing is done in place, nothing is freed, and no Python-float
shortcut is taken. ``wengert.engines.reverse.backward_pass`` computes the same adjoints faster
(tests/engines/test_reference_pass.py holds them equal on every case of the rule table, to second order).

Assignments (``x[i] = v``) rebind a traced value to a new node; a node made before an assignment
refers to the version it saw, which ``wengert.engines.mutation`` resolves before the walk.
"""

from wengert.core.primitive import FLOAT_PATH_ERRORS, on_float64
from wengert.engines.mutation import leaf_aliases, resolve_parents, resolve_tape, versions_by_box
from wengert.engines.saving import forget_pending

__all__ = ["backward_pass"]


def backward_pass(seeds, retain_graph=True, keep_all=True, tape=None):
    """Adjoints of every node reached from ``seeds`` ``[(node, cotangent), ...]``.

    Returns ``(adjoints, nodes)`` as the fast pass does (``retain_graph`` and ``keep_all`` are
    accepted for that; this pass never frees anything and keeps every adjoint). ``tape`` is the
    trace's Wengert list when it keeps one; without it the graph is walked from the seeds.
    """
    log = versions_by_box(seeds[0][0]._trace) if seeds else None
    aliases = []
    if log:
        forget_pending(seeds[0][0]._trace)  # references to versions are rewritten: counts no longer hold
        aliases = resolve_tape(tape, log) if tape is not None else leaf_aliases(log)
    order = list(reversed(tape)) if tape is not None else _children_first(seeds, log)

    adjoint = {}
    for node, cotangent in seeds:
        _accumulate(adjoint, node, cotangent)
    for node in order:
        g = adjoint.get(node)
        if node._prim is None or g is None:  # a leaf, or a node the seeds do not depend on
            continue
        for i, (parent, arg) in enumerate(zip(node._parents, node._args)):
            if parent is not None:
                _accumulate(adjoint, parent, _contribution(node, i, g, arg))

    for box, leaf in aliases:  # a leaf that was assigned to answers for its original value
        if leaf in adjoint:
            adjoint[box] = adjoint[leaf]
    return adjoint, (order if tape is None else tape)


def _contribution(node, i, g, arg):
    """Argument ``i``'s share of adjoint ``g`` of ``node``: its VJP rule, fitted to the argument."""
    prim = node._prim
    rule = prim.vjp_rule(i)
    args, kwargs = node._args, node._kwargs or {}
    try:
        c = rule(g, node.value, *args, **kwargs)
    except FLOAT_PATH_ERRORS as e:  # Python's float arithmetic refused (1.0 / 0.0): NumPy's inf or nan
        c = on_float64(rule, (g, node.value, *args), kwargs, e)
    if prim.grad_post is not None and type(c) is not float:
        c = prim.grad_post(c, arg)
    return c


def _accumulate(adjoint, node, c):
    previous = adjoint.get(node)
    adjoint[node] = c if previous is None else previous + c


def _children_first(seeds, log):
    """The nodes the seeds depend on, most recent first (eager nodes are numbered as recorded)."""
    seen, order, stack = set(), [], [node for node, _ in seeds]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        if log:
            resolve_parents(node, log)
        stack.extend(p for p in node._parents if p is not None)
    order.sort(key=lambda n: n._id, reverse=True)
    return order
