"""Pytrees: nested tuples, lists and dicts of arrays and numbers, flattened to a list of leaves.

Arguments and results of every transform may be pytrees; gradients come back with the same
structure. Namedtuples keep their type; dicts keep their keys' order; ``None`` is an empty node.
"""

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "tree_structure"]

_LEAF = "leaf"


def tree_flatten(tree):
    """``(leaves, treedef)``: the leaves in order, and what is needed to rebuild the structure."""
    leaves = []
    treedef = _flatten(tree, leaves)
    return leaves, treedef


def _flatten(tree, leaves):
    t = type(tree)
    if t is tuple or t is list:
        return (t, None, tuple(_flatten(c, leaves) for c in tree))
    if t is dict:
        return (dict, tuple(tree), tuple(_flatten(tree[k], leaves) for k in tree))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # namedtuple
        return (t, None, tuple(_flatten(c, leaves) for c in tree))
    if tree is None:
        return (None, None, ())
    leaves.append(tree)
    return _LEAF


def tree_unflatten(treedef, leaves):
    """Rebuild a pytree with the structure ``treedef`` from ``leaves``."""
    it = iter(leaves)
    out = _unflatten(treedef, it)
    rest = next(it, _LEAF)
    if rest is not _LEAF:
        raise ValueError("tree_unflatten: more leaves than the structure holds")
    return out


def _unflatten(treedef, it):
    if treedef is _LEAF:
        return next(it)
    t, keys, children = treedef
    if t is None:
        return None
    values = [_unflatten(c, it) for c in children]
    if t is dict:
        return dict(zip(keys, values))
    if t is tuple or t is list:
        return t(values)
    return t(*values)  # namedtuple


def tree_structure(tree):
    """The treedef alone."""
    return tree_flatten(tree)[1]


def tree_map(f, tree, *rest):
    """Apply ``f`` to every leaf (and the corresponding leaves of ``rest``, same structure)."""
    leaves, treedef = tree_flatten(tree)
    others = []
    for r in rest:
        rl, rdef = tree_flatten(r)
        if rdef != treedef:
            raise ValueError(f"tree_map: structures differ: {describe(treedef)} vs {describe(rdef)}")
        others.append(rl)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def describe(treedef):
    """A short readable rendering of a structure, for error messages."""
    if treedef is _LEAF:
        return "*"
    t, keys, children = treedef
    if t is None:
        return "None"
    inner = [describe(c) for c in children]
    if t is dict:
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(keys, inner)) + "}"
    if t is list:
        return "[" + ", ".join(inner) + "]"
    return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
