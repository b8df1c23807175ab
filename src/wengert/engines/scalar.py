"""The markers of the compact scalar node (``reverse.ScalarNode``), read by the backward pass too."""

__all__ = ["SCALAR_TYPES", "UNARY", "FREED_INPUT", "split_input"]

SCALAR_TYPES = set()
"""``ScalarNode`` and its kinds: ``type(node) in SCALAR_TYPES`` says a node keeps inputs, not tuples."""


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<{self.name}>"


UNARY = _Marker("one argument")
"""``ScalarNode._y`` of a one-argument primitive."""

FREED_INPUT = _Marker("freed by backward()")
"""``ScalarNode._x`` and ``_y`` once a non-retaining backward pass released the node."""


def split_input(v):
    """A compact node's input as ``(parent, argument)``: ``(None, v)`` for a constant (a Python float,
    or an int index), ``(v, v.value)`` for a node."""
    t = type(v)
    return (None, v) if t is float or t is int else (v, v.value)
