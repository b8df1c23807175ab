"""The arrays a recomputing node's function captures (closure, globals, attributes: found by
``randomness.sources_of``), for the backward pass that runs it again: after its first run, copies
are kept (``Chain.keep_captured``); before recomputing, an array written since (by the function
that called it, as by the caller of a pullback) is refused by name, its bytes compared (a -0.0
written over 0.0 counts). ``captured`` is a list of
``(array, path)`` before :func:`keep`, of ``(array, copy, path)`` after it, or None."""

import numpy as np

from wengert.api.randomness import label_of
from wengert.engines.kept import _same_bytes, immutable

__all__ = ["keep", "check"]


def keep(captured, copier):
    """``captured`` with a copy of each array that can be written (``copier.copy``)."""
    if captured and len(captured[0]) == 2:
        return [(a, copier.copy(a), path) for a, path in captured if not immutable(a)]
    return captured


def check(captured, where, name):
    """Refuse to recompute ``name`` (``where``: ``wg.checkpoint(f)``) when an array it captures was
    written after it ran (its first run)."""
    if not captured or len(captured[0]) != 3:
        return
    for a, kept, path in captured:
        if kept is not a and not (_same_bytes(kept, a) if not a.dtype.hasobject else np.array_equal(kept, a)):
            raise RuntimeError(
                f"{where}: the array {label_of(path)} that {name} reads was written after {name} ran "
                f"(shape {a.shape}, {a.dtype}); the backward pass recomputes {name} and would read its new "
                f"values, giving the derivative of another function. Write into a copy (W = W + ...) "
                f"instead of in place, pass the array to {name} as an argument (arguments are kept as they "
                f"were), or call the pullback before the write.")
