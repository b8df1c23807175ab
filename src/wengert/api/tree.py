"""Pytrees: nested tuples, lists and dicts of arrays and numbers, flattened to a list of leaves.

Arguments and results of every transform may be pytrees; gradients come back with the same
structure. The rules are JAX's (``jax.tree_util``): a dict's leaves come in the order of its
*sorted* keys, so two dicts with the same keys in another insertion order have the same structure,
and a dict rebuilt from a structure has its keys sorted; keys that cannot be sorted (``1`` and
``"a"``) are a ValueError. An ``OrderedDict`` keeps its insertion order, which is part of its
structure; a ``defaultdict`` is sorted like a dict and keeps its ``default_factory``. Namedtuples
keep their type; ``None`` is an empty node; anything else (other dict subclasses included) is a leaf.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict, defaultdict
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.rules import broadcasting, indexing
from wengert.rules import shape as shape_ops

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "tree_structure", "tree_ravel",
           "argnums_checked", "argnums_resolved", "accepts_argnum"]

_LEAF = "leaf"
_ndarray = np.ndarray


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    """``(leaves, treedef)``: the leaves in order (a dict's by sorted key), and what is needed to
    rebuild the structure (``jax.tree_util.tree_flatten``)."""
    leaves = []
    treedef = _flatten(tree, leaves)
    return leaves, treedef


def _flatten(tree, leaves):
    t = type(tree)
    if t is _ndarray or t is float:  # the common leaves first: called on every transform's arguments
        leaves.append(tree)
        return _LEAF
    if t is tuple or t is list:
        return (t, None, tuple(_flatten(c, leaves) for c in tree))
    if t is dict or t is OrderedDict:
        keys = sorted_keys(tree) if t is dict else tuple(tree)
        return (t, keys, tuple(_flatten(tree[k], leaves) for k in keys))
    if t is defaultdict:
        keys = sorted_keys(tree)
        return (t, (tree.default_factory, keys), tuple(_flatten(tree[k], leaves) for k in keys))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # namedtuple
        return (t, None, tuple(_flatten(c, leaves) for c in tree))
    if tree is None:
        return (None, None, ())
    leaves.append(tree)
    return _LEAF


def sorted_keys(tree: dict) -> tuple[Any, ...]:
    """A dict's keys in the order its leaves are flattened: sorted, as ``jax.tree_util`` does."""
    try:
        return tuple(sorted(tree))
    except TypeError:
        keys = tuple(tree)
        kinds = sorted({type(k).__name__ for k in keys})
        shown = ", ".join(repr(k) for k in keys[:6]) + (", ..." if len(keys) > 6 else "")
        raise ValueError(f"pytree: the keys of a dict cannot be sorted ({shown}; types "
                         f"{', '.join(kinds)}): a dict's leaves "
                         f"are ordered by sorted key, as in JAX. Use keys of one type (e.g. all str), "
                         f"or an OrderedDict, whose leaves keep its insertion order") from None


def tree_unflatten(treedef: Any, leaves: Sequence[Any]) -> Any:
    """Rebuild a pytree with the structure ``treedef`` from ``leaves`` (``jax.tree_util.tree_unflatten``;
    a dict comes back with its keys sorted)."""
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
    if t is OrderedDict:
        return OrderedDict(zip(keys, values))
    if t is defaultdict:
        factory, keys = keys
        return defaultdict(factory, zip(keys, values))
    return t(*values)  # namedtuple


def tree_structure(tree: Any) -> Any:
    """The treedef alone (``jax.tree_util.tree_structure``)."""
    return tree_flatten(tree)[1]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``f`` to every leaf (and the corresponding leaves of ``rest``, same structure; dicts
    match by key, whatever their insertion order) (``jax.tree_util.tree_map``)."""
    leaves, treedef = tree_flatten(tree)
    others = []
    for r in rest:
        rl, rdef = tree_flatten(r)
        if rdef != treedef:
            raise ValueError(f"tree_map: structures differ: {describe(treedef)} vs {describe(rdef)}")
        others.append(rl)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def tree_ravel(tree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(flat, unravel)``: the leaves of ``tree`` raveled and joined into one vector, and the
    function that rebuilds the tree from such a vector (``jax.flatten_util.ravel_pytree``, HIPS
    autograd's ``flatten``). Both are differentiable: a gradient with respect to ``flat`` is the
    tree's gradient raveled, and ``unravel`` may be given a traced vector (``wg.grad(lambda v:
    loss(unravel(v)))(flat)``). The vector has the leaves' common dtype; ``unravel`` casts each
    piece back to its leaf's dtype, and gives Python floats back for Python float leaves."""
    leaves, treedef = tree_flatten(tree)
    dtypes = [broadcasting.dtype_of(leaf) for leaf in leaves]
    shapes = [tuple(broadcasting.shape_of(leaf)) for leaf in leaves]
    sizes = [math.prod(shape) for shape in shapes]
    common = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    pieces = [_as(shape_ops.reshape(leaf, (size,)) if type(leaf) in BOX_TYPES else
                  np.reshape(np.asarray(leaf), (size,)), common) for leaf, size in zip(leaves, sizes)]
    if not pieces:
        flat = np.zeros(0, common)
    elif any(type(p) in BOX_TYPES for p in pieces):
        flat = shape_ops.concatenate(*pieces, axis=0)
    else:
        flat = np.concatenate(pieces)
    floats = [type(leaf) is float for leaf in leaves]
    total = sum(sizes)

    def unravel(vector):
        """The tree rebuilt from a vector like the one ``tree_ravel`` made."""
        if tuple(broadcasting.shape_of(vector)) != (total,):
            raise ValueError(f"unravel: expected a vector of shape ({total},), the size of the tree "
                             f"{describe(treedef)}, got shape {tuple(broadcasting.shape_of(vector))}")
        out, start = [], 0
        for shape, size, dtype, was_float in zip(shapes, sizes, dtypes, floats):
            piece = indexing.getitem(vector, slice(start, start + size))
            piece = _as(shape_ops.reshape(piece, shape), dtype)
            if was_float and type(piece) not in BOX_TYPES:
                piece = float(unbox_all(piece))
            out.append(piece)
            start += size
        return tree_unflatten(treedef, out)

    return flat, unravel


def _as(x, dtype):
    return x if broadcasting.dtype_of(x) == dtype else shape_ops.astype(x, dtype)


def describe(treedef: Any) -> str:
    """A short readable rendering of a structure, for error messages."""
    if treedef is _LEAF:
        return "*"
    t, keys, children = treedef
    if t is None:
        return "None"
    inner = [describe(c) for c in children]
    if t is defaultdict:
        keys = keys[1]
    if t is dict or t is OrderedDict or t is defaultdict:
        text = "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(keys, inner)) + "}"
        return text if t is dict else f"{t.__name__}({text})"
    if t is list:
        return "[" + ", ".join(inner) + "]"
    return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"


# -- argnums: which positional arguments a transform differentiates, checked in one place ----------


def _is_index(a):
    return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))


def argnums_checked(argnums: Any, where: str | Callable[[], str]) -> tuple[bool, tuple[int, ...]]:
    """``(single, nums)`` for ``argnums``, an int or a tuple/list of ints; ``where`` (a string, or a
    function making it, called only for an error) starts the error message
    (``"wg.grad(f, argnums=0.0)"``). Any other value is a TypeError naming it."""
    if type(argnums) is int:
        return True, (argnums,)
    if _is_index(argnums):
        return True, (int(argnums),)
    if callable(where):
        where = where()
    if isinstance(argnums, (tuple, list)):
        for a in argnums:
            if not _is_index(a):
                raise TypeError(f"{where}: argnums must be an int or a tuple of ints, but it holds "
                                f"{a!r} ({type(a).__name__}); write e.g. argnums=0 or argnums=(0, 1)")
        return False, tuple(int(a) for a in argnums)
    raise TypeError(f"{where}: argnums must be an int or a tuple of ints, got {argnums!r} "
                    f"({type(argnums).__name__}); write e.g. argnums=0 or argnums=(0, 1)")


def argnums_resolved(nums: tuple[int, ...], nargs: int, where: str | Callable[[], str],
                     arity: str = "the function was called with") -> tuple[int, ...]:
    """``nums`` (from :func:`argnums_checked`) as indices ``0 <= a < nargs``. Out of range, or one
    argument named twice (``(0, 0)``, or ``(0, -2)`` of two), is a ValueError: a derivative with
    respect to the same argument twice has no one meaning."""
    if len(nums) == 1 and 0 <= nums[0] < nargs:
        return nums
    if callable(where):
        where = where()
    seen = {}
    out = []
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(f"{where}: argument {a} asked for, but {arity} {nargs} positional "
                             f"argument(s)")
        k = a % nargs
        if k in seen:
            same = f"{seen[k]} and {a}" if seen[k] != a else f"{a} twice"
            raise ValueError(f"{where}: argnums names argument {k} more than once ({same}); each "
                             f"argument may appear once. Differentiate with respect to it once and "
                             f"reuse the result.")
        seen[k] = a
        out.append(k)
    return tuple(out)


_F = TypeVar("_F", bound=Callable[..., Any])


def accepts_argnum(transform: _F) -> _F:
    """``transform(fun, argnum=1)`` read as ``transform(fun, argnums=1)``: HIPS autograd's spelling,
    so that its users' code runs unchanged. Giving both (``argnums`` by keyword or by position) is a
    TypeError naming both."""

    @functools.wraps(transform)
    def with_argnum(*args: Any, **kwargs: Any) -> Any:
        if "argnum" in kwargs:
            argnum = kwargs.pop("argnum")
            if "argnums" in kwargs or len(args) > 1:
                given = kwargs["argnums"] if "argnums" in kwargs else args[1]
                raise TypeError(f"wg.{transform.__name__}: both argnum={argnum!r} and argnums={given!r} "
                                f"given; argnum is HIPS autograd's spelling of argnums: give one of them")
            kwargs["argnums"] = argnum
        return transform(*args, **kwargs)

    return with_argnum  # type: ignore[return-value]
