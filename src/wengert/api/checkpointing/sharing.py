"""Sharing between chains: one object for equal small immutable values (:func:`shared`) and one
:class:`_Layout` per layout of a node's arguments, so that a loop of 10^6 checkpointed calls stores
pointers to a few objects, not 10^6 copies. Both tables are bounded. Used by ``recompute.py``."""

__all__ = ["shared"]

_SHARED = {}
_SHARED_LIMIT = 4096


def shared(value):
    """One object for equal small immutable values (tree structures, flag tuples, sequences of
    slots): a loop of 10^6 calls stores pointers to a few objects, not 10^6 copies. Bounded."""
    try:
        key = (value, repr(value))  # the repr tells apart equal values of other types: {1: x}, {True: x}
        got = _SHARED.get(key)
    except TypeError:  # unhashable (a dict key that is not): keep it as it is
        return value
    if got is not None:
        return got
    if len(_SHARED) < _SHARED_LIMIT:
        _SHARED[key] = value
    return value


class _Layout:
    """Which node arguments are the float input leaves and which the float slots; shared by every
    chain of the same layout."""

    __slots__ = ("x_args", "slot_args", "arg_of_slot")

    def __init__(self, in_float, slot_float):
        self.x_args = tuple(i for i, f in enumerate(in_float) if f)
        self.slot_args = tuple(s for s, f in enumerate(slot_float) if f)
        self.arg_of_slot = {s: len(self.x_args) + k for k, s in enumerate(self.slot_args)}


_LAYOUTS = {}


def _layout(in_float, slot_float):
    key = (in_float, slot_float)
    got = _LAYOUTS.get(key)
    if got is None:
        got = _Layout(in_float, slot_float)
        if len(_LAYOUTS) < _SHARED_LIMIT:
            _LAYOUTS[key] = got
    return got
