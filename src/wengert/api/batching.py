"""``wg.vmap``: map a function over a batch axis of its arguments, in one pass.

The semantics are JAX's: ``in_axes`` says, per argument (an int, None, or a pytree matching the
argument's structure), which axis of each array runs over the batch (None: the argument is the same
for every example); ``out_axes`` where the batch axis goes in each result (None: a result that does
not depend on the batch). The batch size comes from the mapped arguments, which must agree.
Values the function closes over are constants, the same for every example. ``vmap`` nests and
composes with every transform in both orders (``vmap(grad(f))`` gives per-example gradients,
``grad`` of a function that calls ``vmap`` differentiates through it).

The results are the caller's own, as a Python loop's stacked results would be: none shares memory
with an argument or is a view of a closed-over array (those few are copied; a result computed
afresh is handed back as it is).

A plain NumPy array indexed by a batched integer index (``W[i]`` with ``W`` closed over or passed
with ``in_axes=None``, ``np.take(W, i)``) is beyond reach: NumPy's indexing converts the index
itself. The function then runs once per example (warned once per line), the answer a Python loop
gives; side effects before that line run again. ``wnp.take(W, i, axis=0)``, or ``W`` traced by
``wg.grad``, is one batched gather (``wengert.rules.batched_indexing``).

Randomness follows ``torch.func.vmap``'s ``randomness=``: ``'error'`` (the default) refuses a
random draw inside the function (from NumPy's global state or a Generator the function reaches, as
``randomness.py`` finds them), since one draw would be shared by every example; ``'same'`` allows
it: one draw, shared; ``'different'`` runs the function once per example, a Python loop over the
batch, so each example draws its own numbers (those of ``[f(x) for x in xs]``, in that order).
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict, defaultdict
from typing import Any, Callable, ParamSpec, TypeVar

import numpy as np

from wengert.api.randomness import sources_of
from wengert.api.transforms import restate_exit
from wengert.api.tree import sorted_keys, tree_flatten, tree_unflatten
from wengert.core.exits import name_of
from wengert.core.trace import BOX_TYPES, unbox_all
from wengert.engines.batching import Batched, BatchTrace, NoBatchingRuleWarning, PlainArrayIndexed
from wengert.rules import broadcasting
from wengert.rules import shape as shape_ops

__all__ = ["vmap"]

P = ParamSpec("P")
R = TypeVar("R")
"""``vmap(fun)`` is typed as ``fun`` itself, as JAX types ``jax.vmap``: the same parameters and result
types, each holding a batch of values."""

RANDOMNESS = ("error", "different", "same")
"""``wg.vmap``'s choices for random draws inside the function (``torch.func.vmap``'s)."""


def vmap(fun: Callable[P, R], in_axes: Any = 0, out_axes: Any = 0, *, randomness: str = "error",
         generators: Any = None) -> Callable[P, R]:
    """``fun`` mapped over axis ``in_axes`` of its arguments; the results stacked along ``out_axes``
    (``jax.vmap``, ``torch.func.vmap``).

    ``randomness`` (``torch.func.vmap``'s, same default): ``'error'`` raises when ``fun`` draws from
    NumPy's global random state or from a ``numpy.random.Generator`` it reaches (closure, globals it
    names, attributes such as a ``wengert.nn`` ``Dropout``'s ``rng``, and ``generators=``), naming
    it, and leaves the state as it was; ``'same'``: one draw, shared by every example;
    ``'different'``: ``fun`` runs once per example (a Python loop, slower), each drawing its own
    numbers, as ``[fun(x) for x in xs]`` would from the same state."""
    if not callable(fun):
        raise TypeError(f"wg.vmap expects a function, got {fun!r}")
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")
    if randomness not in RANDOMNESS:
        raise ValueError(f"wg.vmap({name_of(fun)}): randomness must be one of "
                         f"{', '.join(map(repr, RANDOMNESS))}, got {randomness!r}")

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        if kwargs:
            raise TypeError(f"wg.vmap({name_of(fun)}): keyword arguments are not mapped; pass them "
                            f"positionally, with in_axes giving None for those that are the same for "
                            f"every example")
        axes = _per_argument(in_axes, len(args), fun)
        leaves, where, size = _mapped_leaves(args, axes, fun)
        if randomness == "different":
            return _example_by_example(fun, args, leaves, where, size, out_axes)
        if randomness == "error":
            sources = sources_of(fun, (), generators, "wg.vmap")
            before = sources.capture()
        trace = BatchTrace(size)
        boxed = list(leaves)
        for k, axis in where:
            boxed[k] = Batched(_to_front(leaves[k], axis), trace)
        _, treedef = tree_flatten(list(args))
        call_args = tree_unflatten(treedef, boxed)
        try:
            out = fun(*call_args)
        except PlainArrayIndexed as e:
            if e.trace is not trace:
                raise
            if randomness == "error":
                _refuse_draws(fun, sources, before, size)
            _warn_once_per_site(fun, e.site, size)
            out = _example_by_example(fun, args, leaves, where, size, out_axes,
                                      same=sources_of(fun, (), generators, "wg.vmap")
                                      if randomness == "same" else None)
            if randomness == "error":
                _refuse_draws(fun, sources, before, size)
            return out
        except ValueError as e:
            restate_exit(e)
        if randomness == "error":
            _refuse_draws(fun, sources, before, size)
        return _outputs(out, out_axes, trace, fun, leaves)

    return batched


def _refuse_draws(fun, sources, before, size):
    """randomness='error': a draw inside ``fun`` is undone and refused, naming what drew."""
    drew = sources.changed(before)
    if drew:
        sources.restore(before)
        name = name_of(fun)
        raise RuntimeError(
            f"wg.vmap({name}): {name} drew random numbers from {' and '.join(drew)}, with "
            f"randomness='error' (the default, as in torch.func.vmap): the {size} examples would share "
            f"one draw. Pass randomness='different' for independent draws per example ({name} then "
            f"runs once per example) or randomness='same' for one draw shared by the batch.")


_WARNED_SITES = set()


def _warn_once_per_site(fun, site, size):
    if site not in _WARNED_SITES:
        _WARNED_SITES.add(site)
        warnings.warn(
            f"wg.vmap({name_of(fun)}): a plain NumPy array is indexed by an index batched by wg.vmap"
            f"{site}; NumPy's indexing cannot see the batch, so {name_of(fun)} runs once per example "
            f"({size} calls here) and the results are stacked: the answer is the same, only slower. "
            f"For one batched call index a traced array: wnp.take(W, i, axis=0) (import "
            f"wengert.numpy as wnp), or W[i] with W an argument that wg.grad or wg.vmap traces.",
            NoBatchingRuleWarning, stacklevel=3)


def _example_by_example(fun, args, leaves, where, size, out_axes, same=None):
    """randomness='different' (and NumPy's indexing given a batched index): ``fun`` called on each
    example in turn, the results stacked. ``same``: random sources reset before each example, so
    that every example sees the same draws (randomness='same')."""
    _, treedef = tree_flatten(list(args))
    outs = []
    start = same.capture() if same is not None else None
    for k in range(size):
        if same is not None:
            same.restore(start)
        example = list(leaves)
        for i, axis in where:
            example[i] = leaves[i][(slice(None),) * axis + (k,)]
        outs.append(fun(*tree_unflatten(treedef, example)))
    first, out_def = tree_flatten(outs[0])
    axes = []
    if not _prefix(out_axes, outs[0], axes):
        raise ValueError(f"wg.vmap({name_of(fun)}): out_axes {out_axes!r} does not match the structure "
                         f"of the result ({len(first)} leaves)")
    per_leaf = [[leaf] for leaf in first]
    for out in outs[1:]:
        got, got_def = tree_flatten(out)
        if got_def != out_def:
            raise ValueError(f"wg.vmap({name_of(fun)}): the examples' results differ in structure")
        for column, leaf in zip(per_leaf, got):
            column.append(leaf)
    done = []
    for k, (column, axis) in enumerate(zip(per_leaf, axes)):
        if axis is None:
            plain = [unbox_all(v) for v in column]
            if any(type(v) in BOX_TYPES for v in column) or \
                    not all(np.array_equal(plain[0], v) for v in plain[1:]):
                raise ValueError(f"wg.vmap({name_of(fun)}): out_axes is None for result {k}, but it "
                                 f"differs between the {size} examples; give it an axis")
            done.append(column[0])
            continue
        n = len(broadcasting.shape_of(column[0])) + 1
        if not -n <= axis < n:
            raise ValueError(f"wg.vmap({name_of(fun)}): out_axes {axis} is out of range for result {k}, "
                             f"of {n - 1} axes per example")
        done.append(shape_ops.stack(*column, axis=axis % n))
    return tree_unflatten(out_def, done)


def _check_axes_spec(spec, what):
    leaves, _ = tree_flatten(spec)
    for a in leaves:
        if a is not None and not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"wg.vmap: {what} must be ints, None, or pytrees of them; got {a!r}")


def _per_argument(in_axes, nargs, fun):
    if isinstance(in_axes, (int, np.integer)) or in_axes is None:
        return [in_axes] * nargs
    if type(in_axes) is list:
        in_axes = tuple(in_axes)
    if type(in_axes) is not tuple or len(in_axes) != nargs:
        raise ValueError(f"wg.vmap({name_of(fun)}): in_axes {in_axes!r} must be an int, None, or a tuple "
                         f"with one entry per argument ({nargs} given)")
    return list(in_axes)


def _mapped_leaves(args, axes, fun):
    """The arguments' leaves, the ``(leaf index, axis)`` of those mapped, and the batch size."""
    leaves, where, sizes = [], [], []
    for i, (arg, axis) in enumerate(zip(args, axes)):
        arg_leaves, arg_def = tree_flatten(arg)
        leaf_axes = _broadcast_prefix(axis, arg, len(arg_leaves), fun, i)
        for j, (leaf, ax) in enumerate(zip(arg_leaves, leaf_axes)):
            if ax is not None:
                shape = broadcasting.shape_of(leaf)
                if not -len(shape) <= ax < len(shape):
                    raise ValueError(f"wg.vmap({name_of(fun)}): in_axes {ax} is out of range for argument "
                                     f"{i}{_leaf_name(arg_leaves, j)}, of shape {tuple(shape)}")
                where.append((len(leaves), ax % len(shape)))
                sizes.append((shape[ax], i, _leaf_name(arg_leaves, j)))
            leaves.append(leaf)
    if not sizes:
        raise ValueError(f"wg.vmap({name_of(fun)}): no argument is mapped (in_axes is None for all): "
                         f"there is no batch to map over")
    first = sizes[0]
    for s in sizes[1:]:
        if s[0] != first[0]:
            raise ValueError(f"wg.vmap({name_of(fun)}): the mapped axes have different sizes: argument "
                             f"{first[1]}{first[2]} has {first[0]} examples, argument {s[1]}{s[2]} has "
                             f"{s[0]}")
    return leaves, where, first[0]


def _leaf_name(leaves, j):
    return f" (leaf {j})" if len(leaves) > 1 else ""


def _broadcast_prefix(axis, arg, n, fun, i):
    """``axis`` (an int, None, or a pytree prefix of ``arg``'s structure) as one axis per leaf."""
    axes = []
    if not _prefix(axis, arg, axes):
        raise ValueError(f"wg.vmap({name_of(fun)}): in_axes for argument {i} ({axis!r}) does not match "
                         f"the argument's structure ({type(arg).__name__} with {n} leaves)")
    return axes


def _prefix(spec, tree, out):
    """Append to ``out`` the axis of each leaf of ``tree`` given by ``spec``, an int or None for a
    whole subtree or a container of the same kind (JAX's pytree prefix); False where they differ."""
    if spec is None or isinstance(spec, (int, np.integer)):
        out.extend([None if spec is None else int(spec)] * len(tree_flatten(tree)[0]))
        return True
    t = type(tree)
    if type(spec) is not t and not (isinstance(spec, (list, tuple)) and isinstance(tree, (list, tuple))
                                    and type(spec) in (list, tuple)):
        return False
    if t is dict or t is defaultdict:  # keys matched whatever their order, walked sorted (JAX)
        return spec.keys() == tree.keys() and all(_prefix(spec[k], tree[k], out) for k in sorted_keys(tree))
    if t is OrderedDict:  # its order is part of its structure
        return tuple(spec) == tuple(tree) and all(_prefix(spec[k], tree[k], out) for k in tree)
    if isinstance(tree, (list, tuple)):
        return len(spec) == len(tree) and all(_prefix(s, c, out) for s, c in zip(spec, tree))
    return False


def _to_front(x, axis):
    if axis == 0:
        return x
    n = len(broadcasting.shape_of(x))
    order = (axis,) + tuple(a for a in range(n) if a != axis)
    return shape_ops.transpose(x, order)


def _outputs(out, out_axes, trace, fun, inputs):
    leaves, treedef = tree_flatten(out)
    axes = []
    if not _prefix(out_axes, out, axes):
        raise ValueError(f"wg.vmap({name_of(fun)}): out_axes {out_axes!r} does not match the structure "
                         f"of the result ({len(leaves)} leaves)")
    done = []
    for k, (leaf, axis) in enumerate(zip(leaves, axes)):
        mapped = type(leaf) is Batched and leaf._trace is trace
        if axis is None:
            if mapped:
                raise ValueError(f"wg.vmap({name_of(fun)}): out_axes is None for result {k}, but it differs "
                                 f"between the {trace.size} examples (it depends on a mapped argument); "
                                 f"give it an axis")
            # the same for every example: maybe an argument or a closed-over array itself
            done.append(leaf.copy() if type(leaf) is np.ndarray else leaf)
            continue
        value = leaf.value if mapped else _broadcast_batch(leaf, trace.size)
        n = len(broadcasting.shape_of(value))
        if not -n <= axis < n:
            raise ValueError(f"wg.vmap({name_of(fun)}): out_axes {axis} is out of range for result {k}, "
                             f"of {n - 1} axes per example")
        value = _from_front(value, axis % n)
        # The result is the caller's own, like the stacked results of a Python loop: copied where
        # it is one of the arguments' arrays, a view of one, or a read-only view (a broadcast). A
        # number, or a box of an enclosing transform, is left to that level. Inline, not a call:
        # a fresh array (``base`` None) costs one identity test per argument, a view a bounds test
        # (``np.may_share_memory``) per argument.
        if type(value) is np.ndarray:
            if value.base is None:
                for a in inputs:
                    if a is value:
                        value = value.copy()
                        break
            elif not value.flags.writeable or _shares(value, inputs):
                value = value.copy()
        done.append(value)
    return tree_unflatten(treedef, done)


def _shares(x, inputs):
    """Whether the view ``x`` may share memory with one of the arrays ``inputs``."""
    return any(type(a) is np.ndarray and np.may_share_memory(x, a) for a in inputs)


def _broadcast_batch(x, size):
    """A result the same for every example, repeated along a new batch axis in front (a large one as
    a read-only broadcast, which :func:`_outputs` copies: a new array, as ``jax.vmap`` and a Python
    loop give, never a view of a closed-over array)."""
    if type(x) not in BOX_TYPES and not isinstance(x, (float, int, complex, np.ndarray, np.generic)):
        raise TypeError(f"wg.vmap: a result must be an array or a number, got {type(x).__name__}")
    shape = tuple(broadcasting.shape_of(x))
    return broadcasting.broadcast_to(x, (size,) + shape)


def _from_front(x, axis):
    if axis == 0:
        return x
    n = len(broadcasting.shape_of(x))
    order = tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, n))
    return shape_ops.transpose(x, order)
