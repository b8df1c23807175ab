"""The arrays a recomputing node's function captures (closure, globals, attributes: found by
``randomness.sources_of``), for the backward pass that runs it again. Before its first run a copy
of each is taken (:func:`keep`, ``Chain.keep_captured``); after it, the arrays the function wrote
itself are let go (:func:`unwritten`: it writes them again whenever it runs, as a training-mode
``BatchNorm`` its running statistics, and no copy can say what a recomputation will read of them);
before recomputing, an array written since its first run (by the function that called it, or by
the caller of a later pullback) is refused by name, its bytes compared (-0.0 over 0.0 counts).
``captured`` is a list of ``(array, path)`` before :func:`keep`, of ``(array, copy, path)`` after
it, or None."""

import numpy as np

from wengert.api.randomness import label_of
from wengert.engines.kept import _same_bytes, immutable

__all__ = ["keep", "unwritten", "check"]


def keep(captured, copier):
    """``captured`` with a copy of each array that can be written (``copier.copy``)."""
    if captured and len(captured[0]) == 2:
        return [(a, copier.copy(a), path) for a, path in captured if not immutable(a)]
    return captured


def _same(a, kept):
    return _same_bytes(kept, a) if not a.dtype.hasobject else np.array_equal(kept, a)


def unwritten(captured):
    """Of ``captured`` (after :func:`keep`, before the first run), those the first run left as they were."""
    if not captured or len(captured[0]) != 3:
        return captured
    return [(a, kept, path) for a, kept, path in captured if kept is a or _same(a, kept)] or None


def check(captured, where, name):
    """Refuse to recompute ``name`` (``where``: ``wg.checkpoint(f)``) when an array it captures was
    written after it ran (its first run)."""
    if not captured or len(captured[0]) != 3:
        return
    for a, kept, path in captured:
        if kept is not a and not _same(a, kept):
            raise RuntimeError(
                f"{where}: the array {label_of(path)} that {name} reads was written after {name} ran "
                f"(shape {a.shape}, {a.dtype}); the backward pass recomputes {name} and would read its new "
                f"values, giving the derivative of another function. Write into a copy (W = W + ...) "
                f"instead of in place, pass the array to {name} as an argument (arguments are kept as they "
                f"were), or call the pullback before the write.")
