"""The recording builder of the source front end: a ``ProgramBuilder`` that records nested blocks
(arms, loop bodies) and reuses a statement applied to the same arguments (common subexpressions)."""

import numpy as np

from wengert.core.primitive import Primitive
from wengert.program.tracing import ProgramBuilder, Symbol

__all__ = ["SourceBuilder"]


class SourceBuilder(ProgramBuilder):
    """A ProgramBuilder that records a primitive applied to the same arguments once (``v[i] * v[i]``
    reads ``v[i]`` once): common subexpressions, as the source is read. A statement is reused in its
    own block and in the blocks nested in it (SSA: it dominates them), never from a sibling arm.
    ``statements`` is the block being recorded; setting it to a new list enters a nested block,
    setting it back to an enclosing one leaves the blocks in between."""

    __slots__ = ("_seen", "_blocks", "frames")

    def __init__(self, names=()):
        self._blocks = []
        self.frames = []  # the interpreters evaluating an expression now, innermost last (source.nested)
        super().__init__(names=names)
        self._seen = {}

    @property
    def statements(self):
        return self._blocks[-1]

    @statements.setter
    def statements(self, block):
        for k, b in enumerate(self._blocks):
            if b is block:
                del self._blocks[k + 1:]
                return
        self._blocks.append(block)

    def forget(self, var):
        """Reuse no statement whose result is ``var`` (it was rewritten)."""
        for key in [k for k, (_b, s) in self._seen.items() if s.variable is var]:
            del self._seen[key]

    def apply(self, prim, args, kwargs):
        key = _cse_key((prim, args, tuple(sorted(kwargs.items())) if kwargs else ()))
        if key is not None:
            hit = self._seen.get(key)
            if hit is not None and any(hit[0] is b for b in self._blocks):
                return hit[1]
        out = super().apply(prim, args, kwargs)
        if key is not None and type(out) is Symbol:
            self._seen[key] = (self.statements, out)
        return out


def _cse_key(x):
    t = type(x)
    if t is Symbol:
        return ("v", id(x.variable))
    if t in (int, float, bool, str, type(None)) or isinstance(x, Primitive):
        return (t.__name__, x)
    if t is tuple or t is list:
        parts = tuple(_cse_key(p) for p in x)
        return None if any(p is None for p in parts) else (t.__name__, parts)
    if t is slice:
        return _cse_key((x.start, x.stop, x.step))
    if isinstance(x, np.dtype) or x is Ellipsis:
        return ("c", str(x))
    return None
