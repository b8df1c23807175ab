"""The arrays a recomputing node's function captures (closure, globals, attributes: found by
``randomness.sources_of``), for a pullback run later (``wg.vjp``, ``wg.Tape``): at the end of the
forward pass, copies are kept (``engines.kept``: one per array, shared between the chains of one
pass); before recomputing, an array written since is refused by name. ``captured`` is a list of
``(array, path)`` before :func:`keep`, of ``(array, copy, path)`` after it, or None."""

import numpy as np

from wengert.api.randomness import label_of
from wengert.engines.kept import immutable

__all__ = ["keep", "check"]


def keep(captured, copier):
    """``captured`` with a copy of each array that can be written (``copier.copy``)."""
    if captured and len(captured[0]) == 2:
        return [(a, copier.copy(a), path) for a, path in captured if not immutable(a)]
    return captured


def check(captured, where, name):
    """Refuse to recompute ``name`` (``where``: ``wg.checkpoint(f)``) when an array it captures was
    written after the forward pass."""
    if not captured or len(captured[0]) != 3:
        return
    for a, kept, path in captured:
        if kept is not a and not np.array_equal(a, kept, equal_nan=a.dtype.kind in "fc"):
            raise RuntimeError(
                f"{where}: the array {label_of(path)} that {name} reads was written after the forward pass "
                f"(shape {a.shape}, {a.dtype}); the backward pass recomputes {name} and would read its new "
                f"values, giving the derivative of another function. Write into a copy (W = W + ...) "
                f"instead of in place, or call the pullback before the write (wg.grad pulls back at once).")
