"""The reference backward pass: reverse mode written for clarity, against which the fast pass
(``reverse.backward_pass``) is tested. Same contract, none of its speed tricks: no float fast
paths, no accumulate or in-place rules, no buffers owned and added into, nothing released.

From the output nodes and their cotangents it finds every node they depend on, orders them so
that a node comes before its parents (a depth-first topological sort, not the creation order the
fast pass relies on), applies each primitive's ordinary VJP rules (``prim.vjp_rule(i)``, then
``prim.grad_post``) and adds the contributions up with ``+``.
"""

from wengert.mutation import leaf_aliases, resolve_parents, resolve_tape, versions_by_box
from wengert.primitive import FLOAT_PATH_ERRORS, on_float64

__all__ = ["reference_backward_pass"]


def reference_backward_pass(seeds, tape=None):
    """``{node: adjoint}`` for every node the seeds [(node, cotangent), ...] depend on.

    ``tape`` is the trace's Wengert list when it keeps one (only used, as in the fast pass, to
    point references to boxes assigned to since (``x[i] = v``) at the versions they meant).
    """
    if not seeds:
        return {}
    log = versions_by_box(seeds[0][0]._trace)
    aliases = []
    if log:
        aliases = leaf_aliases(log) if tape is None else resolve_tape(tape, log)
    adjoints = {}
    for node, cotangent in seeds:
        _accumulate(adjoints, node, cotangent)
    for node in _children_first([node for node, _ in seeds], log if tape is None else None):
        g = adjoints.get(node)
        if g is None or node._prim is None:  # nothing flows here, or a leaf
            continue
        for argnum, parent in enumerate(node._parents):
            if parent is not None:
                _accumulate(adjoints, parent, _contribution(node, argnum, g))
    for box, leaf in aliases:  # a leaf that was assigned to answers for its original value
        if leaf in adjoints:
            adjoints[box] = adjoints[leaf]
        else:
            adjoints.pop(box, None)
    return adjoints


def _contribution(node, argnum, g):
    """What ``node``'s cotangent ``g`` contributes to its argument ``argnum``'s adjoint."""
    prim = node._prim
    rule = prim.vjp_rule(argnum)
    args = (g, node.value, *node._args)
    kwargs = node._kwargs or {}
    try:
        c = rule(*args, **kwargs)
    except FLOAT_PATH_ERRORS as e:  # a rule's Python-float arithmetic refused (1.0 / 0.0): NumPy's answer
        c = on_float64(rule, args, kwargs, e)
    if prim.grad_post is not None and type(c) is not float:  # e.g. sum a broadcast back to shape
        c = prim.grad_post(c, node._args[argnum])
    return c


def _accumulate(adjoints, node, c):
    adjoints[node] = c if node not in adjoints else adjoints[node] + c


def _children_first(roots, log):
    """The nodes reachable from ``roots`` through parents, each before all of its parents.
    (``log``: for an eager graph, point parents at the versions of assigned boxes they meant.)"""
    finished = []  # parents before children (post-order)
    done = set()
    stack = [(node, False) for node in roots]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            finished.append(node)
            continue
        if node in done:  # nodes hash by identity
            continue
        done.add(node)
        if log:
            resolve_parents(node, log)
        stack.append((node, True))
        stack.extend((p, False) for p in node._parents if p is not None and p not in done)
    return reversed(finished)
