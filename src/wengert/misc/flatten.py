"""``autograd.misc.flatten``: a pytree as one flat vector, and a function of a pytree as a function
of that vector, built on :func:`wengert.tree_ravel` (so both stay differentiable)."""

from __future__ import annotations

from typing import Any, Callable

from wengert.api.tree import tree_ravel

__all__ = ["flatten", "flatten_func"]


def flatten(value: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(vector, unflatten)``: the leaves of pytree ``value`` raveled and joined into one 1-d array,
    and the function rebuilding the pytree from such a vector (``wg.tree_ravel``)."""
    return tree_ravel(value)


def flatten_func(func: Callable[..., Any],
                 example: Any) -> tuple[Callable[..., Any], Callable[[Any], Any], Any]:
    """``(flat_func, unflatten, flat_example)``, as ``autograd.misc.flatten.flatten_func``:
    ``flat_func(vector, *args)`` is ``func(unflatten(vector), *args)`` with its result flattened
    too, ``unflatten`` rebuilds a pytree shaped like ``example``, and ``flat_example`` is
    ``example`` as a vector. Differentiate ``flat_func`` to get flat gradients."""
    flat_example, unflatten = tree_ravel(example)

    def flat_func(vector: Any, *args: Any) -> Any:
        return tree_ravel(func(unflatten(vector), *args))[0]

    flat_func.__name__ = f"flat_{getattr(func, '__name__', 'func')}"
    return flat_func, unflatten, flat_example
