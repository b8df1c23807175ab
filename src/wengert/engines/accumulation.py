"""Adjoint bookkeeping for the backward pass (``backward.backward_pass``): accumulating contributions,
in place only into buffers the pass owns; accumulate rules (``x[idx]``) and in-place rules
(``defvjp_inplace``), with the test that a cotangent is the pass's alone; releasing a node's saved
values after a non-retaining pass.
"""

import sys

import numpy as np

from wengert.core.trace import BOX_TYPES, SYMBOLIC_TYPES
from wengert.rules.broadcasting import dtype_of, foreign, shape_of

__all__ = ["FREED", "release", "alone", "apply_inplace", "argnum_rules", "extra_rules", "owned_buffer",
           "accumulate"]

FREED = ("<freed by backward()>",)
"""Stands for the saved arguments of a node whose graph a non-retaining backward pass released."""


def release(node):
    """Drop what a processed node saved for its VJP (backward with retain_graph=False)."""
    node._args = FREED
    node._kwargs = None
    node._parents = ()


def _refcount(x):
    return sys.getrefcount(x)


def _refcount_alone():
    probe = []  # a new object, held by this one local name only
    return _refcount(probe)


_ALONE = _refcount_alone()
"""What ``_refcount(g)`` reports when one local name of its caller is all that refers to ``g``
(measured, since interpreters count differently; ``alone`` below is called the same way)."""


def alone(g):
    """Whether the caller's local ``g`` -- a cotangent this pass popped off its adjoints -- is the
    only reference to an array that owns its memory: nothing else (a user, a node's saved values,
    another adjoint, a view) can see it, so a rule may overwrite it (linearity:
    a value used once can be updated in place)."""
    return sys.getrefcount(g) == _ALONE and g.base is None and g.flags.writeable


def apply_inplace(prim, node, g, adj, owned):
    """Apply ``prim``'s in-place rule to ``node`` when exactly one argument takes a contribution
    (g is needed by no other rule then); True when done, False to take the ordinary rules."""
    parents = node._parents
    i = -1
    for k, p in enumerate(parents):
        if p is not None:
            if i >= 0:
                return False
            i = k
    rules = prim.vjp_inplace
    rule = rules[i] if i < len(rules) else None
    if rule is None:
        return False
    args = node._args
    kw = node._kwargs
    c = rule(g, node.value, *args) if kw is None else rule(g, node.value, *args, **kw)
    if c is None:  # the rule declined (e.g. traced arguments)
        return False
    if prim.grad_post is not None:
        c = prim.grad_post(c, args[i])
    accumulate(adj, owned, parents[i], c)
    return True


def argnum_rules(prim, n):
    """The per-argument rules of a primitive defined by one rule for all arguments (or a joint rule)."""
    return [prim.vjp_rule(i) for i in range(n)]


def extra_rules(prim, node, g, adj, owned):
    """The rules the generic loop should apply to ``node``, after applying accumulate rules here.

    With accumulate rules and a plain (untraced) cotangent -- a first-order pass, or a part of a
    higher-order pass that does not depend on the outer variables -- each such argument's
    contribution goes in place into its adjoint buffer (allocated once, owned by this pass) and
    the rest is done here too: nothing is left for the generic loop. A traced ``g`` takes the
    ordinary rules, whose results stay differentiable.
    """
    args = node._args
    accumulate_rules = prim.vjp_accumulate
    joint = prim.vjp_joint
    if joint is not None and accumulate_rules is None:
        return _joint(prim, joint, node, g, adj, owned)
    rules = prim.vjps if prim.vjp_argnum is None and joint is None else argnum_rules(prim, len(args))
    if accumulate_rules is None or type(g) in BOX_TYPES or foreign(g) or _opaque(args):
        return rules
    kw = node._kwargs
    out = node.value
    i = 0
    for parent in node._parents:
        if parent is not None:
            acc = accumulate_rules[i] if i < len(accumulate_rules) else None
            arg = args[i]
            if acc is not None:
                buf = adj.get(parent)
                if (buf is None or parent not in owned or type(buf) is not np.ndarray
                        or (type(g) is not float and buf.dtype.kind != "c" and dtype_of(g).kind == "c")):
                    buf = owned_buffer(adj, owned, parent, arg, g)
                if buf is not None:
                    if kw is None:
                        acc(buf, g, out, *args)
                    else:
                        acc(buf, g, out, *args, **kw)
                    i += 1
                    continue
            c = rules[i](g, out, *args, **(kw or _NO_KWARGS))
            if prim.grad_post is not None and type(c) is not float:
                c = prim.grad_post(c, arg)
            accumulate(adj, owned, parent, c)
        i += 1
    return ()


_NO_KWARGS = {}


def _opaque(args):
    """Whether an argument is (or an index tuple holds) a value opaque to rules (a batch under
    ``wg.vmap``): an accumulate rule cannot write it into a buffer of one example's shape; or is
    another library's array (Dask, CuPy), whose adjoint is no NumPy buffer."""
    for a in args:
        t = type(a)
        if t in SYMBOLIC_TYPES or (t is tuple and any(type(p) in SYMBOLIC_TYPES for p in a)) or foreign(a):
            return True
    return False


def _joint(prim, joint, node, g, adj, owned):
    """Every differentiated argument's contribution from one call of ``prim``'s joint rule,
    ``joint(needed, g, out, *args)`` (a list with None where ``needed`` is false): linear in the
    number of arguments, where one call per argument, each given all of them, would be quadratic."""
    parents = node._parents
    args = node._args
    kw = node._kwargs
    cs = joint([p is not None for p in parents], g, node.value, *args, **(kw or _NO_KWARGS))
    post = prim.grad_post
    for parent, c, arg in zip(parents, cs, args):
        if parent is not None:
            if post is not None and type(c) is not float:
                c = post(c, arg)
            accumulate(adj, owned, parent, c)
    return ()


def owned_buffer(adj, owned, key, arg, g):
    """``key``'s adjoint as a buffer of ``arg``'s shape that this pass owns (made once: zeros, or a
    copy of a contribution it did not allocate); None when that adjoint is traced."""
    prev = adj.get(key)
    if prev is not None and key in owned and type(prev) is np.ndarray:
        if type(g) is not float and prev.dtype.kind != "c" and dtype_of(g).kind == "c":
            prev = adj[key] = prev.astype(np.result_type(prev, g))  # a complex term: widen first
        return prev
    if type(prev) in BOX_TYPES:
        return None
    want = dtype_of(arg)
    have = dtype_of(g)
    dtype = want if have == want or (want.kind == "f" and have.kind == "f") else np.result_type(want, have)
    if prev is None:
        buf = np.zeros(shape_of(arg), dtype=dtype)
    else:
        buf = np.array(np.broadcast_to(prev, shape_of(arg)), dtype=np.result_type(dtype, prev))
    adj[key] = buf
    owned.add(key)
    return buf


def accumulate(adj, owned, key, c):
    """``adj[key] += c``: the first contribution is stored as it is; later ones are added in place
    into a buffer this pass owns (``owned``), else by ``+``, whose new array the pass then owns."""
    prev = adj.get(key)
    if prev is None:
        adj[key] = c
    elif key in owned and type(c) not in BOX_TYPES and not foreign(c):
        np.add(prev, c, out=prev)
    else:
        s = prev + c
        adj[key] = s
        if type(s) is np.ndarray:
            owned.add(key)
        elif key in owned:  # a traced sum (higher order): never add into it in place
            owned.discard(key)
