"""Cyclic garbage while a trace grows: young garbage collected where it pays.

While a derivative is recorded the collector is paused (``wengert.core.trace.gc_paused``): the graph
is freed by reference counting, and rescanning its nodes would cost more than recording them. But the
user's function may make cyclic garbage meanwhile, which would pile up until the call ends. So every
:data:`WINDOW` recorded nodes ``record`` calls :func:`window_done`, which either collects the young
generation -- every object made since the last look is scanned once -- or skips that, and then freezes
what is left (``gc.freeze``: never scanned during the pause; the pause's end unfreezes it). A
collection that finds garbage makes the next window collect too; one that finds none doubles the
windows skipped before the next (up to :data:`MAX_SKIP`): a program that makes no cyclic garbage pays
for one scan in that many, and one that does has it collected every window. Where the program froze
objects itself, nothing is done (the pause's end would unfreeze them).
"""

import gc

from wengert.core.trace import GC_PAUSES

__all__ = ["WINDOW", "MAX_SKIP", "window_done"]

WINDOW = 4096
"""Recorded nodes between looks (a power of two: ``record`` tests ``n & (WINDOW - 1)``)."""

MAX_SKIP = 16
"""The most windows skipped between two collections while none finds garbage."""

_schedule = [0, 1]  # [windows since the last collection, windows between collections]


def window_done():
    """Collect the young generation when due, then freeze what is left (inside a pause only)."""
    if gc.isenabled() or not GC_PAUSES[0] or not GC_PAUSES[2]:
        return
    schedule = _schedule
    schedule[0] += 1
    if schedule[0] >= schedule[1]:
        schedule[0] = 0
        found = gc.collect(0)
        schedule[1] = 1 if found else min(2 * schedule[1], MAX_SKIP)
    gc.freeze()
