"""Traces and nesting levels: how one primitive call knows which derivative it belongs to.

A *trace* is one differentiation in progress: a reverse-mode recording (``wg.grad``, a ``Tape``,
eager ``Tensor``s), a forward-mode sweep (``wg.jvp``), or a symbolic trace. Every traced value (a
*box*) holds its primal value and the trace it belongs to. A primitive called with boxes asks the
box of the *highest* level to handle the call; that trace unboxes only its own boxes, calls the
primitive again on what is left (which may still contain boxes of lower levels, which then handle
the call in turn), and boxes the result.

Why levels are needed -- perturbation confusion. Take the classic nesting test::

    d/dx [ x * d/dy (x + y) ]   at any x, y   (= 1, since d/dy (x + y) = 1)

The outer derivative boxes ``x`` at level 1; the inner one boxes ``y`` at level 2. In ``x + y`` the
level-2 trace sees only ``y`` as a variable: ``x`` is, for it, a constant (that happens to be a
level-1 box), so the inner derivative is 1 and not 2. Without levels both perturbations would be
one and the same "dx", and the answer would be wrong by a factor that depends on the program.

Levels increase monotonically with the creation of traces, which is exactly the nesting order:
a trace created inside another one's function (the inner ``grad``) is always newer.
"""

import gc
import itertools
import threading

BOX_TYPES = set()
"""Classes of traced values. ``type(v) in BOX_TYPES`` is the one test for "is this traced"."""

SYMBOLIC_TYPES = set()
"""Box classes with no value beneath them (the program tracer's symbols): ``unbox_all`` stops there."""

_level_counter = itertools.count(1)


def register_box(cls):
    """Class decorator: make instances of ``cls`` recognised as traced values by every primitive."""
    BOX_TYPES.add(cls)
    return cls


class Trace:
    """One differentiation in progress. Subclasses implement ``apply(prim, args, kwargs)``."""

    __slots__ = ("level", "__weakref__")

    def __init__(self, level=None):
        self.level = next(_level_counter) if level is None else level

    def apply(self, prim, args, kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    def apply1(self, prim, x, kwargs=None):
        """``apply`` for one positional argument; engines may specialise it (the hot path)."""
        return self.apply(prim, (x,), kwargs or {})

    def apply2(self, prim, x, y):
        """``apply`` for two arguments; engines may specialise it."""
        return self.apply(prim, (x, y), {})

    def __repr__(self):
        return f"<{type(self).__name__} level {self.level}>"


def unbox_all(x):
    """Strip every level of boxing from ``x`` (also inside lists, tuples and dicts)."""
    while type(x) in BOX_TYPES:
        if type(x) in SYMBOLIC_TYPES:
            return x
        x = x.value
    t = type(x)
    if t is list or t is tuple:
        return t(unbox_all(v) for v in x)
    if t is dict:
        return {k: unbox_all(v) for k, v in x.items()}
    return x


def is_symbolic(x):
    """Whether ``x`` (or a list/tuple/dict of values) holds a program tracer's symbol, whose data is
    not known while it is traced: a check on the values (repeated eigenvalues, weights summing to
    zero) cannot run then, and a data-dependent branch must take its general, ``where`` form."""
    x = unbox_all(x)
    t = type(x)
    if t in SYMBOLIC_TYPES:
        return True
    if t is list or t is tuple:
        return any(is_symbolic(v) for v in x)
    if t is dict:
        return any(is_symbolic(v) for v in x.values())
    return False


def contains_box(x):
    """Whether ``x`` is, or (inside lists/tuples/dicts) contains, a traced value."""
    t = type(x)
    if t in BOX_TYPES:
        return True
    if t is list or t is tuple:
        return any(contains_box(v) for v in x)
    if t is dict:
        return any(contains_box(v) for v in x.values())
    return False


# -- pausing the cyclic garbage collector, for the whole process --------------------------------------

GC_LOCK = threading.Lock()
GC_PAUSES = [0, False, None]  # [pauses open, gc on at the first, thresholds to restore: collector.py]


class gc_paused:
    """Pause Python's cyclic garbage collector while a trace grows (re-entrant, thread-safe): the
    graph is freed by reference counting, and rescanning its nodes would double the cost per operation.
    Where it pays, cyclic garbage is collected meanwhile (``wengert.engines.collector``)."""

    __slots__ = ()

    def __enter__(self):
        with GC_LOCK:
            if GC_PAUSES[0] == 0:
                GC_PAUSES[1] = gc.isenabled()
                gc.disable()
            GC_PAUSES[0] += 1

    def __exit__(self, *exc):
        with GC_LOCK:
            GC_PAUSES[0] -= 1
            if GC_PAUSES[0] == 0:
                if GC_PAUSES[2] is not None:  # the collector ran young collections meanwhile
                    gc.set_threshold(*GC_PAUSES[2])
                    GC_PAUSES[2] = None
                    gc.unfreeze()  # what it froze: the oldest generation
                if GC_PAUSES[1]:
                    gc.enable()
