"""Cyclic garbage while a trace grows: young garbage collected where it pays.

While a derivative is recorded the collector is paused (``wengert.core.trace.gc_paused``): the graph
is freed by reference counting, and rescanning its nodes would cost more than recording them. But the
user's function may make cyclic garbage meanwhile, which would pile up until the call ends. So the
pause leaves the young generation's collections on, one per :data:`WINDOW` objects the collector
tracks (the older generations' are off), and :func:`_vet`, called by Python as each begins, either
lets it run -- every object made since the last one is scanned once -- or first freezes those objects
(``gc.freeze``: never scanned during the pause; the pause's end unfreezes them), which leaves it
nothing to do. A collection that finds garbage makes the next one run too; one that finds none
doubles the collections skipped before the next (up to :data:`MAX_SKIP`). A program that makes no
cyclic garbage pays for one scan in that many; one that does has it collected every window. Nothing
is recorded per operation. Where the program froze objects itself, the pause turns the collector
off instead (its end would unfreeze them).
"""

import gc

from wengert.core.trace import GC_PAUSES

__all__ = ["WINDOW", "MAX_SKIP"]

WINDOW = 50_000
"""Tracked objects made between two looks (the young generation's threshold during a pause)."""

MAX_SKIP = 16
"""The most windows skipped between two collections while none finds garbage."""

_schedule = [0, 1]  # [windows since the last collection, windows between collections]


def _vet(phase, info):
    """``gc.callbacks`` entry: inside a pause, let a young collection run when due, else freeze first."""
    if not GC_PAUSES[0] or GC_PAUSES[2] is None or info["generation"] != 0:
        return
    schedule = _schedule
    if phase == "start":
        schedule[0] += 1
        if schedule[0] < schedule[1]:
            gc.freeze()  # the collection about to run finds nothing to scan
    elif schedule[0] >= schedule[1]:  # "stop" of a collection that ran
        schedule[0] = 0
        found = info["collected"] + info["uncollectable"]
        schedule[1] = 1 if found else min(2 * schedule[1], MAX_SKIP)


gc.callbacks.append(_vet)
GC_PAUSES[3] = WINDOW
